"""SMAC and SMACv2 on the built-in simulator or on StarCraft II, in three layers, each importing only the ones
below it (docs/how_it_works.md, "The StarCraft package in three layers"):

- interface/  SMAC's and SMACv2's environments (StarCraft2Env, the capability wrapper and its distributions,
              the scenario configs), the choice of engine, replays;
- sc2client/  the StarCraft II client: pysc2's protocol and the engine that plays the game through it;
- game/       the built-in game: engine, combat, steering, collisions, orders, units, maps, scenarios and
              teams; maps and armies are its data, SMAC's interface (observations, actions, rewards) is not.

render.py on top is the command line that writes a scripted battle's replay.
"""
from importlib import import_module

from . import game  # noqa: F401  (Numba's logger quieted and its cache placed before anything compiles)

# The two names the package has always offered, looked up on first use rather than imported here: importing a
# lower layer (envs.starcraft.game.engine, say) runs this file first, and an eager import would pull the
# interface, and with it everything above the game, into every such import.
_LAZY = {"REGISTRY": (".game.maps", "MAP_REGISTRY"), "StarCraft2Env": (".interface.starcraft2", "StarCraft2Env")}

__all__ = ["REGISTRY", "StarCraft2Env"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(import_module(module, __name__), attribute)
    globals()[name] = value
    return value
