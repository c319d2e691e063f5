"""Which engine runs the SMAC and SMACv2 battles: real StarCraft II (through pysc2) or the built-in simulator.

`env_args.backend` chooses: "sc2" needs the game and the map's file, "builtin" never does, and
"auto" (the default) takes the real game whenever it is installed with the requested map, so
users who have StarCraft II get it without changing a config; when it falls back it says in one
line which file it looked for. The game is looked for where pysc2 will look (without importing it).
"""
import functools
import hashlib
import logging
import os
import platform
import sys
from pathlib import Path
from typing import Any

from .maps import GEN_MAPS, SMACV2_SCENARIOS

BACKENDS = ("auto", "sc2", "builtin")
INSTALL_SCRIPT = "scripts/install_sc2.sh"
# SMACv2's map file, in its maps pack beside SMAC's maps (oxwhirl/smacv2, smacv2/env/starcraft2/maps/SMAC_Maps).
GEN_MAP_FILE = "32x32_flat"

# pysc2's install locations when SC2PATH is not set and the Battle.net launcher left no
# ExecuteInfo.txt (pysc2.run_configs.platforms).
_DEFAULT_INSTALL_DIRS = {
    "Linux": "~/StarCraftII",
    "Darwin": "/Applications/StarCraft II",
    "Windows": "C:/Program Files (x86)/StarCraft II",
}
_CYGWIN_INSTALL_DIR = "/cygdrive/c/Program Files (x86)/StarCraft II"
# Where the launcher writes ExecuteInfo.txt ("executable = <path of the game binary>"), and how
# many folders up from that binary the install folder is: <install>/Versions/Base*/SC2_x64.exe on
# Windows, <install>/Versions/Base*/SC2.app/Contents/MacOS/SC2 on macOS.
_EXECUTE_INFO = {
    "Windows": ("~/Documents/StarCraft II/ExecuteInfo.txt", 3),
    "Darwin": ("~/Library/Application Support/Blizzard/StarCraft II/ExecuteInfo.txt", 6),
}

# The code that decides the built-in simulator's battles and what its env returns.
BUILTIN_SOURCES = ("starcraft2.py", "starcraft2_v2.py", "distributions.py", "maps.py", "scenarios.py", "units.py",
                   "unit_ids.py", "teams.py", "engine.py", "collisions.py", "steering.py", "orders.py", "combat.py")

logger = logging.getLogger(__name__)
_told: set[str] = set()  # fallback lines already logged by this process


class GameRestarted(RuntimeError):
    """Raised by an engine's step() when the game process died and was relaunched.

    The episode in progress is lost; the game logic ends it as SMAC does, returning
    (0, True, {}), and the next reset() starts a fresh one. Kept here, away from pysc2, so the
    logic can catch it without importing the real-game engine.
    """


def installed_by_launcher(execute_info: Path, levels_up: int) -> Path | None:
    """The install folder named by the Battle.net launcher's ExecuteInfo.txt, None without one.

    The file holds `key = value` lines (the game appends a NUL byte); the `executable` value is
    the game binary's path, `levels_up` folders below the install folder.
    """
    try:
        text = execute_info.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None
    for line in text.replace("\0", "\n").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "executable" and value.strip():
            path = value.strip().replace("\\", "/")  # Windows separators
            for _ in range(levels_up):
                path = os.path.dirname(path)
            return Path(path)
    return None


def sc2_install_dir() -> Path:
    """The StarCraft II folder pysc2 will use: $SC2PATH, else on Windows and macOS the folder the
    launcher recorded in ExecuteInfo.txt, else the platform's default folder."""
    if os.environ.get("SC2PATH"):
        return Path(os.environ["SC2PATH"]).expanduser()
    if sys.platform == "cygwin":
        return Path(_CYGWIN_INSTALL_DIR)
    system = platform.system()
    if system in _EXECUTE_INFO:
        execute_info, levels_up = _EXECUTE_INFO[system]
        recorded = installed_by_launcher(Path(execute_info).expanduser(), levels_up)
        if recorded is not None:
            return recorded
    return Path(_DEFAULT_INSTALL_DIRS.get(system, "~/StarCraftII")).expanduser()


def is_gen_map(map_name: str) -> bool:
    """True for SMACv2's 10gen maps and scenario names, which the game plays from a drawn Team."""
    return map_name in GEN_MAPS or map_name in SMACV2_SCENARIOS


def map_file_stem(map_name: str) -> str:
    """The name (without .SC2Map) of the map file that plays `map_name`: SMACv2's 10gen maps and
    its scenarios are all played on SMACv2's empty 32x32_flat map (SMACv2's smac_maps.py), every
    SMAC map on the file of its own name."""
    return GEN_MAP_FILE if is_gen_map(map_name) else map_name


def smac_map_file(map_name: str, install_dir: Path | None = None) -> Path:
    """Where pysc2 reads the map file of `map_name`: <install>/Maps/SMAC_Maps/<file>.SC2Map (SMACv2
    keeps its map in SMAC's folder too)."""
    root = sc2_install_dir() if install_dir is None else install_dir
    return root / "Maps" / "SMAC_Maps" / f"{map_file_stem(map_name)}.SC2Map"


def sc2_missing(map_name: str) -> str | None:
    """What StarCraft II lacks to play `map_name`, in words naming the path looked for; None when a
    game build (Versions/Base*) and the map file are both installed."""
    root = sc2_install_dir()
    versions = root / "Versions"
    if not (versions.is_dir() and any(p.name.startswith("Base") for p in versions.iterdir())):
        return f"no StarCraft II build {versions / 'Base*'}"
    map_file = smac_map_file(map_name, root)
    if not map_file.is_file():
        return f"no map file {map_file}"
    return None


def sc2_available(map_name: str) -> bool:
    """True when a game build (Versions/Base*) and the map file are both installed."""
    return sc2_missing(map_name) is None


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
        from .sc2_engine import SC2Engine  # pysc2 is imported only when used

        return SC2Engine(map_name, seed, step_mul, **sc2_kwargs)
    from .engine import BuiltinEngine

    engine = BuiltinEngine(map_name, seed, step_mul)
    if record_replay:
        from .render import RecordingEngine  # pillow is imported only when used

        engine = RecordingEngine(engine, map_name)
    return engine


def builtin_sources_digest() -> str:
    """SHA-256 (first 12 hex digits) of the built-in simulator's sources (BUILTIN_SOURCES): runs
    and fidelity reports record it, so that results of two versions of the simulator are never
    taken for one another (a resumed run refuses a checkpoint trained on another)."""
    digest = hashlib.sha256()
    folder = Path(__file__).parent
    for name in BUILTIN_SOURCES:
        digest.update((folder / name).read_bytes())
    return digest.hexdigest()[:12]


# Maps whose random battles reach every compiled loop of the engine: terrain routing and the
# melee surround (corridor), the Colossus line over cliffs (2c_vs_64zg), bursts (so_many_baneling),
# healing (MMM2).
_COMPILE_MAPS = ("corridor", "2c_vs_64zg", "so_many_baneling", "MMM2")


@functools.cache
def compile_builtin_loops(steps: int = 60) -> None:
    """Compile the built-in engine's Numba loops, or load them from Numba's cache on disk, by
    playing `steps` random steps on each of a few maps (once per process: then the cache is
    written).

    Loops are compiled at their first call, once per machine (about 45 s of CPU, then under a
    second per process to load). A process that is about to start env workers calls this first:
    otherwise, on a fresh install, every worker compiles them at once, slower than the runner
    waits for a worker's first answer."""
    import numpy as np

    from .starcraft2 import StarCraft2Env  # (imports this module)

    logger.info("Loading the built-in simulator's compiled loops (the first run after an install or "
                "a change of the simulator compiles them: about a minute)")
    rng = np.random.default_rng(0)
    for map_name in _COMPILE_MAPS:
        env = StarCraft2Env(map_name=map_name, seed=0, backend="builtin")
        env.reset()
        for _ in range(steps):
            avail = np.asarray(env.get_avail_actions())  # [agents, actions]
            if env.step([int(rng.choice(np.flatnonzero(row))) for row in avail])[1]:
                env.reset()
        env.close()
