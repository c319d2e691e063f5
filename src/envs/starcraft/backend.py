"""`envs.starcraft.backend` (`marlkit.starcraft.backend`) as it was before the package was split into layers,
kept for commands written against it (e.g. compiling the simulator ahead, docs/differences.md). Every public
name the old module had is reachable here, from where it lives now: the choice of engine in
interface/backend.py, the compile in interface/warmup.py, the StarCraft II install in sc2client/install.py,
the map lists in game/maps.py and GameRestarted in game/engine.py."""
from importlib import import_module

from .interface.backend import BACKENDS, builtin_sources_digest, make_engine, select_backend  # noqa: F401
from .interface.warmup import compile_builtin_loops  # noqa: F401

# Looked up in order on first use; interface/backend.py comes first, so a name it re-exports is its own.
_HOMES = (".interface.backend", ".interface.warmup", ".sc2client.install", ".game.maps", ".game.engine")


def __getattr__(name: str):
    for home in _HOMES:
        module = import_module(home, __package__)
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
