"""Built-in SMAC-compatible StarCraft II environment: SMAC's game logic over a swappable engine."""
from . import numba_cache  # noqa: F401  (first: where the compiled loops are cached, before any compiles)
from .maps import MAP_REGISTRY as REGISTRY
from .starcraft2 import StarCraft2Env

__all__ = ["REGISTRY", "StarCraft2Env"]
