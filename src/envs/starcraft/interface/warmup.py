"""The built-in engine's compiled loops, loaded (or compiled) once before env workers start."""
import functools
import logging

import numpy as np

from .starcraft2 import StarCraft2Env

logger = logging.getLogger(__name__)

# Maps whose random battles reach every compiled loop of the engine: terrain routing and the
# melee surround (corridor), the Colossus line over cliffs (2c_vs_64zg), bursts (so_many_baneling),
# healing (MMM2).
_COMPILE_MAPS = ("corridor", "2c_vs_64zg", "so_many_baneling", "MMM2")


@functools.cache
def compile_builtin_loops(steps: int = 60) -> None:
    """Compile the built-in engine's Numba loops, or load them from Numba's cache on disk, by
    playing `steps` random steps on each of a few maps (once per process: then the cache is
    written).

    Loops are compiled at their first call, once per machine (about 45 s of CPU, then under a
    second per process to load). A process that is about to start env workers calls this first:
    otherwise, on a fresh install, every worker compiles them at once, slower than the runner
    waits for a worker's first answer."""
    logger.info("Loading the built-in simulator's compiled loops (the first run after an install or "
                "a change of the simulator compiles them: about a minute)")
    rng = np.random.default_rng(0)
    for map_name in _COMPILE_MAPS:
        env = StarCraft2Env(map_name=map_name, seed=0, backend="builtin")
        env.reset()
        for _ in range(steps):
            avail = np.asarray(env.get_avail_actions())  # [agents, actions]
            if env.step([int(rng.choice(np.flatnonzero(row))) for row in avail])[1]:
                env.reset()
        env.close()
