"""The built-in simulator's compiled loops: one compiled version each, whatever the battle.

Numba compiles a loop once per type of its arguments, and an array's type includes its memory layout and
whether it is read-only. A view's layout can depend on the battle's size (a one-row slice is contiguous, a
longer one is not), so a battle of another size, or a caller passing columns of one array, would compile
the loops again: about 10 s, in every env worker at once on a fresh install, after the warm-up that
main.py runs before starting them (interface/warmup.py). The engine hands its loops contiguous, writable
arrays; this checks it in a fresh interpreter, where no earlier test has compiled anything.
"""
import subprocess
import sys

from conftest import SRC

# After the warm-up: SMACv2 battles of the three races at sizes down to one enemy (one-row enemy tables),
# the engine driven directly with orders of either layout in battles of one and of three colliding pairs,
# and the walkability of a whole army (the warm-up checks single points only, while placing units).
SCRIPT = """
import numpy as np
from numba.core.registry import CPUDispatcher
import importlib, pkgutil
import envs.starcraft.game as game
from envs.starcraft.interface.warmup import compile_builtin_loops
from envs.starcraft.interface.starcraft2_v2 import StarCraftCapabilityEnvWrapper
from envs.starcraft.game.engine import ORDER_MOVE, BuiltinEngine
from envs.starcraft.game.teams import RACE_UNITS, Team

compile_builtin_loops()
rng = np.random.default_rng(0)
for race, allies, enemies in (("protoss", 5, 5), ("terran", 3, 1), ("zerg", 2, 3)):
    config = {"n_units": allies, "n_enemies": enemies,
              "team_gen": {"dist_type": "weighted_teams", "unit_types": list(RACE_UNITS[race]),
                           "weights": [0.4, 0.4, 0.2], "observe": True},
              "start_positions": {"dist_type": "surrounded_and_reflect", "p": 0.5, "map_x": 32, "map_y": 32}}
    env = StarCraftCapabilityEnvWrapper(map_name=f"10gen_{race}", capability_config=config, seed=0)
    env.reset()
    for _ in range(30):
        avail = np.asarray(env.get_avail_actions())  # [agents, actions]
        if env.step([int(rng.choice(np.flatnonzero(row))) for row in avail])[1]:
            env.reset()
    env.close()
engine = BuiltinEngine("10gen_terran", seed=0)
# One ground pair that can collide (an air medivac beside; a lone marine) and three (two marines): the
# engine's pair lists were contiguous for one pair only until it made them so.
for allies in ([("medivac", (20.0, 16.0)), ("marine", (20.0, 14.0))], [("marine", (20.0, 16.0))] * 2,
               [("marine", (20.0, 16.0))]):
    engine.reset(Team(*zip(*allies), ("marauder",), ((24.0, 16.0),)))
    n = engine.n_allies
    contiguous = (np.full(n, ORDER_MOVE), np.full(n, 24.0), np.full(n, 16.0), np.full(n, -1))
    columns = np.zeros((n, 4))  # [allies, (kind, x, y, target)]: orders as columns of one array
    columns[:] = ORDER_MOVE, 24.0, 16.0, -1
    for orders in (contiguous, (columns[:, 0].astype(int), columns[:, 1], columns[:, 2], columns[:, 3].astype(int))):
        for _ in range(3):  # walk into the marauder, so that the collision solver runs
            engine.step(*orders)
    engine._walkable(engine._z)  # the whole army's walkability, as tests check where units stand
twice = []
for info in pkgutil.iter_modules(game.__path__):
    module = importlib.import_module(f"envs.starcraft.game.{info.name}")
    for name, value in vars(module).items():
        if isinstance(value, CPUDispatcher) and value.__module__ == module.__name__ and len(value.signatures) > 1:
            twice.append(f"{info.name}.{name}: " + " | ".join(map(str, value.signatures)))
print("\\n".join(twice) or "none")
"""


def test_every_compiled_loop_is_compiled_once_whatever_the_battle():
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=SRC, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1:] == ["none"], result.stdout[-3000:]
