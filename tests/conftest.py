"""Test set-up: PyMARL2-style imports (``from components.episode_buffer import ...``) need src/ on sys.path."""
import functools
import os
import sys

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)

import pytest  # noqa: E402

FULL_TESTS = os.environ.get("MARLKIT_FULL_TESTS") == "1"


def pytest_collection_modifyitems(config, items):
    """Long learning checks (marked ``slow``) run only with MARLKIT_FULL_TESTS=1; their short
    versions always run."""
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

    return ModuleFixtureScheduling(config, log)


@functools.cache
def has_a_module_fixture(module_path: str) -> bool:
    """Whether the test module at `module_path` (relative to the repository) defines a module-scoped fixture."""
    path = os.path.join(os.path.dirname(SRC), module_path)
    return os.path.isfile(path) and 'scope="module"' in open(path).read()


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    """Compile the built-in simulator's loops (Numba, cached in src/envs/starcraft/game/__pycache__/envs) once,
    in the main process before the tests run: in a fresh clone the first processes that step the
    simulator, many at a time, would each compile them (about 30 s of CPU each). xdist's workers,
    started already, collect meanwhile and get their first tests once this is done; later sessions
    find the loops compiled. It runs on pytest's clock, so the suite's time includes it."""
    if hasattr(session.config, "workerinput"):
        return None
    from envs.starcraft.interface.warmup import compile_builtin_loops

    compile_builtin_loops()
    return None


@pytest.fixture
def fallback_log(monkeypatch, caplog):
    """The records the SMAC backend's auto choice logs, each fallback line fresh (the backend logs
    each once per process)."""
    import logging

    from envs.starcraft.interface import backend

    monkeypatch.setattr(backend, "_told", set())
    caplog.set_level(logging.INFO, logger=backend.__name__)
    return caplog
