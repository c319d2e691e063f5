"""Built-in SMAC-compatible StarCraft II environment: SMAC's game logic over a swappable engine."""
from envs.starcraft.maps import MAP_REGISTRY as REGISTRY
from envs.starcraft.starcraft2 import StarCraft2Env

__all__ = ["REGISTRY", "StarCraft2Env"]
