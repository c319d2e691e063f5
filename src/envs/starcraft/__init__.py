"""SMAC and SMACv2 on the built-in simulator or on StarCraft II, in three layers, each importing only the ones
below it (docs/how_it_works.md, "The StarCraft package in three layers"):

- interface/  SMAC's and SMACv2's environments (StarCraft2Env, the capability wrapper and its distributions,
              the scenario configs), the choice of engine, replays;
- sc2client/  the StarCraft II client: pysc2's protocol and the engine that plays the game through it;
- game/       the built-in game: engine, combat, steering, collisions, orders, units, maps, scenarios and
              teams, with no knowledge of SMAC.

render.py on top is the command line that writes a scripted battle's replay.
"""
from .game.maps import MAP_REGISTRY as REGISTRY
from .interface.starcraft2 import StarCraft2Env

__all__ = ["REGISTRY", "StarCraft2Env"]
