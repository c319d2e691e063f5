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


def pytest_sessionstart(session):
    """Compile the built-in simulator's loops (Numba, cached in src/envs/starcraft/__pycache__)
    once, before the test processes start: in a fresh clone the first processes that step the
    simulator, many at a time, would each compile them (about 15 s of CPU each). xdist workers
    and later sessions find them compiled."""
    if hasattr(session.config, "workerinput"):
        return
    import numpy as np

    from envs.starcraft.starcraft2 import StarCraft2Env

    rng = np.random.default_rng(0)
    for map_name in ("corridor", "2c_vs_64zg", "so_many_baneling", "MMM2"):
        env = StarCraft2Env(map_name=map_name, seed=0, backend="builtin")
        env.reset()
        for _ in range(60):
            avail = np.asarray(env.get_avail_actions())  # [agents, actions]
            if env.step([int(rng.choice(np.flatnonzero(row))) for row in avail])[1]:
                env.reset()
        env.close()
