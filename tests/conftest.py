"""Test set-up: PyMARL2-style imports (``from components.episode_buffer import ...``) need src/ on sys.path."""
import fcntl
import functools
import os
import subprocess
import sys

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)

import pytest  # noqa: E402

FULL_TESTS = os.environ.get("MARLKIT_FULL_TESTS") == "1"


def pytest_collection_modifyitems(config, items):
    """Tests in run_order (the SIMULATOR_FREE modules run while the simulator compiles); long learning checks
    (marked ``slow``) run only with MARLKIT_FULL_TESTS=1, their short versions always."""
    items.sort(key=run_order)
    if FULL_TESTS:
        return
    skip = pytest.mark.skip(reason="slow check: set MARLKIT_FULL_TESTS=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(optionalhook=True)  # (without xdist, e.g. -p no:xdist, the hook does not exist)
def pytest_xdist_make_scheduler(config, log):
    """With -n: xdist's load scheduling, except that the tests of a module with a module-scoped fixture (a
    sweep, a seed batch, a training run it builds once) go to one worker; split between two workers, each
    would build the fixture. (xdist's own --dist loadgroup does not group under pytest 9.2, whose nodeid no
    longer reads the _nodeid xdist rewrites.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if has_a_module_fixture(module) else nodeid

    config.option.loadscopereorder = False  # the order of pytest_collection_modifyitems, not by scope size
    return ModuleFixtureScheduling(config, log)


@functools.cache
def has_a_module_fixture(module_path: str) -> bool:
    """Whether the test module at `module_path` (relative to the repository) defines a module-scoped fixture."""
    path = os.path.join(os.path.dirname(SRC), module_path)
    return os.path.isfile(path) and 'scope="module"' in open(path).read()


# ---- the simulator's compile, overlapped with the tests that do not need it ----------------------------------
# The test modules that never run the built-in simulator, in this process or any it starts. Measured
# (2026-12-05, docs/speed.md): each module run alone after the warm-up, with the access times of the compiled
# loops' cache files set back; these read none of them. A module listed wrongly still passes: its worker, or
# a process it starts, compiles the loops itself (slower).
SIMULATOR_FREE = frozenset({
    "test_action_selectors", "test_allocator", "test_config_keys", "test_controllers", "test_envs",
    "test_episode_buffer", "test_gru_sequence", "test_layout", "test_learner", "test_logging", "test_mixers",
    "test_pymarl2_arithmetic", "test_results_table", "test_rl_utils", "test_robust_stats", "test_run_statistics",
    "test_sc2_install", "test_sc2_protocol", "test_smac_logic", "test_smacv2_compare", "test_smacv2_distributions",
    "test_smacv2_logic", "test_stag_hunt", "test_sweep",
})
# Held, exclusively, by the process that compiles the loops; a worker takes it shared before its first test
# that needs them. (flock: the kernel releases it when that process exits, however it exits.)
COMPILE_LOCK = os.path.join(SRC, "envs", "starcraft", "game", "__pycache__", "compiling.lock")
COMPILE_SCRIPT = "from envs.starcraft.interface.warmup import compile_builtin_loops; compile_builtin_loops()"


def module_name(item) -> str:
    return item.nodeid.split("::", 1)[0].rpartition("/")[2].removesuffix(".py")


def run_order(item) -> int:
    """The SIMULATOR_FREE modules first, then the modules built round a module fixture (long, one worker
    each: early, so that they do not end the run alone), then the rest; each in collection order."""
    if module_name(item) in SIMULATOR_FREE:
        return 0
    return 1 if has_a_module_fixture(item.nodeid.split("::", 1)[0]) else 2


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    """Compile the built-in simulator's loops (Numba, cached in src/envs/starcraft/game/__pycache__/envs) once,
    in one process, before any test needs them: in a fresh clone the first processes that step the simulator,
    many at a time, would each compile them (about 20 s of CPU each). Under xdist the compile runs in a
    process of its own while the workers collect and run the SIMULATOR_FREE modules, which they are given
    first; a worker's first other test waits for it. Without xdist it runs here. Later sessions find the
    loops compiled (a second or so). It runs on pytest's clock, so the suite's time includes it."""
    config = session.config
    if hasattr(config, "workerinput") or os.environ.get("MARLKIT_COMPILE_AHEAD") == "0":
        return None  # (the latter for bench/simulator_free_tests.py, which measures who reads the loops)
    if not getattr(config.option, "numprocesses", None):
        from envs.starcraft.interface.warmup import compile_builtin_loops

        compile_builtin_loops()
        return None
    os.makedirs(os.path.dirname(COMPILE_LOCK), exist_ok=True)
    lock = os.open(COMPILE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)  # before any worker has a test: none can slip past
    config.compile_process = subprocess.Popen([sys.executable, "-c", COMPILE_SCRIPT], cwd=SRC, pass_fds=(lock,),
                                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    os.close(lock)  # the lock stays with the compile process
    return None


def pytest_runtest_setup(item):
    """Under xdist: wait for the compile before this worker's first test that may run the simulator."""
    if hasattr(item.config, "workerinput") and module_name(item) not in SIMULATOR_FREE:
        wait_for_the_compile()


@functools.cache
def wait_for_the_compile() -> None:
    if os.path.exists(COMPILE_LOCK):
        with open(COMPILE_LOCK) as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)


def pytest_sessionfinish(session):
    """A compile that failed is reported (its tests fail on their own, each compiling again)."""
    process = getattr(session.config, "compile_process", None)
    if process is not None and process.wait() != 0:
        session.config.get_terminal_writer().line(f"The simulator's compile failed: {process.stderr.read()[-3000:]}")


@pytest.fixture
def fallback_log(monkeypatch, caplog):
    """The records the SMAC backend's auto choice logs, each fallback line fresh (the backend logs
    each once per process)."""
    import logging

    from envs.starcraft.interface import backend

    monkeypatch.setattr(backend, "_told", set())
    caplog.set_level(logging.INFO, logger=backend.__name__)
    return caplog
