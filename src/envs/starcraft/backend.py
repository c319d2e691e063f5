"""`envs.starcraft.backend` (`marlkit.starcraft.backend`) as it was before the package was split into layers,
kept for commands written against it (e.g. compiling the simulator ahead, docs/differences.md): the choice of
engine is interface/backend.py, the compile interface/warmup.py. Every name of interface/backend.py is
reachable here, as all of the old module's were."""
from .interface import backend as _backend
from .interface.backend import BACKENDS, builtin_sources_digest, make_engine, select_backend  # noqa: F401
from .interface.warmup import compile_builtin_loops  # noqa: F401


def __getattr__(name: str):
    return getattr(_backend, name)
