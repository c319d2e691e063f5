"""Test set-up: PyMARL2-style imports (``from components.episode_buffer import ...``) need src/ on sys.path."""
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
    skip = pytest.mark.skip(reason="slow learning check: set MARLKIT_FULL_TESTS=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


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
