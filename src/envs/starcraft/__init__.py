"""Built-in SMAC-compatible StarCraft II environment: SMAC's game logic over a swappable engine."""
from .maps import MAP_REGISTRY as REGISTRY
from .starcraft2 import StarCraft2Env

__all__ = ["REGISTRY", "StarCraft2Env"]
