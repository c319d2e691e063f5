"""Which engine runs the SMAC and SMACv2 battles: real StarCraft II (through pysc2) or the built-in simulator.

`env_args.backend` chooses: "sc2" needs the game and the map's file, "builtin" never does, and
"auto" (the default) takes the real game whenever it is installed with the requested map, so
users who have StarCraft II get it without changing a config; when it falls back it says in one
line which file it looked for. The game is looked for where pysc2 will look (without importing it).
"""
import hashlib
import logging
from pathlib import Path
from typing import Any

from ..sc2client.install import sc2_missing, smac_map_file

BACKENDS = ("auto", "sc2", "builtin")
INSTALL_SCRIPT = "scripts/install_sc2.sh"
# The code that decides the built-in simulator's battles and what its env returns, relative to envs/starcraft/.
BUILTIN_SOURCES = ("interface/starcraft2.py", "interface/starcraft2_v2.py", "interface/distributions.py",
                   "game/maps.py", "game/scenarios.py", "game/units.py", "game/unit_ids.py", "game/teams.py",
                   "game/engine.py", "game/collisions.py", "game/steering.py", "game/orders.py", "game/combat.py")

logger = logging.getLogger(__name__)
_told: set[str] = set()  # fallback lines already logged by this process


def select_backend(backend: str, map_name: str) -> str:
    """Resolve env_args.backend to the engine that will run: "sc2" or "builtin"."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend '{backend}'; choose one of: {', '.join(BACKENDS)}")
    if backend == "builtin":
        return "builtin"
    missing = sc2_missing(map_name)
    if missing is None:
        return "sc2"
    if backend == "sc2":
        raise ValueError(
            f"backend=sc2 needs StarCraft II with {smac_map_file(map_name)}, not found ({missing}): set "
            f"SC2PATH to the game folder (install it with `bash {INSTALL_SCRIPT}`) or use backend=builtin"
        )
    _tell_fallback(map_name, missing)
    return "builtin"


def fallback_line(map_name: str, missing: str) -> str:
    """The one line backend=auto logs when it plays `map_name` on the simulator for lack of `missing`."""
    return (f"backend=auto: {missing}, so {map_name} runs on the built-in simulator (set SC2PATH, or "
            f"install the game and maps with `bash {INSTALL_SCRIPT}`)")


def _tell_fallback(map_name: str, missing: str) -> None:
    """Log the fallback once per process: a warning when the game is there but the map is not (a
    map missing from the maps pack), else info (the usual case without StarCraft II)."""
    line = fallback_line(map_name, missing)
    if line not in _told:
        _told.add(line)
        logger.log(logging.WARNING if missing.startswith("no map file") else logging.INFO, line)


def make_engine(backend: str, map_name: str, seed: int | None, step_mul: int = 8,
                record_replay: bool = False, **sc2_kwargs: Any):
    """Build the engine for `backend` (any of BACKENDS; "auto" is resolved here).

    sc2_kwargs (difficulty, game_version, window_size, launcher) only concern the real game and
    are ignored by the built-in simulator, so one call site serves both. record_replay makes the
    built-in simulator keep its last episodes for save_replay (an animated GIF); StarCraft II
    records its own replays.
    """
    if select_backend(backend, map_name) == "sc2":
        from ..sc2client.sc2_engine import SC2Engine  # pysc2 is imported only when used

        return SC2Engine(map_name, seed, step_mul, **sc2_kwargs)
    from ..game.engine import BuiltinEngine

    engine = BuiltinEngine(map_name, seed, step_mul)
    if record_replay:
        from .replay import RecordingEngine  # pillow is imported only when used

        engine = RecordingEngine(engine, map_name)
    return engine


def builtin_sources_digest() -> str:
    """SHA-256 (first 12 hex digits) of the built-in simulator's sources (BUILTIN_SOURCES): runs
    and fidelity reports record it, so that results of two versions of the simulator are never
    taken for one another (a resumed run refuses a checkpoint trained on another)."""
    digest = hashlib.sha256()
    folder = Path(__file__).parent.parent  # envs/starcraft
    for name in BUILTIN_SOURCES:
        digest.update((folder / name).read_bytes())
    return digest.hexdigest()[:12]
