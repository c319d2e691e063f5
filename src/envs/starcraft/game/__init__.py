"""The built-in game: the engine that plays StarCraft II's battles, its units' data, maps and scenarios."""
from . import numba_cache  # noqa: F401  (first: where the compiled loops are cached, before any compiles)
