"""Which engine runs the SMAC battles: real StarCraft II (through pysc2) or the built-in simulator.

`env_args.backend` chooses: "sc2" needs the game and the SMAC maps, "builtin" never does, and
"auto" (the default) takes the real game whenever it is installed with the requested map, so
users who have StarCraft II get it without changing a config.
"""
import os
import platform
from pathlib import Path
from typing import Any

BACKENDS = ("auto", "sc2", "builtin")
INSTALL_SCRIPT = "scripts/install_sc2.sh"

# pysc2's install locations when SC2PATH is not set.
_DEFAULT_INSTALL_DIRS = {
    "Linux": "~/StarCraftII",
    "Darwin": "/Applications/StarCraft II",
    "Windows": "C:/Program Files (x86)/StarCraft II",
}


class GameRestarted(RuntimeError):
    """Raised by an engine's step() when the game process died and was relaunched.

    The episode in progress is lost; the game logic ends it as SMAC does, returning
    (0, True, {}), and the next reset() starts a fresh one. Kept here, away from pysc2, so the
    logic can catch it without importing the real-game engine.
    """


def sc2_install_dir() -> Path:
    """The StarCraft II folder pysc2 will use: $SC2PATH, else the platform's default."""
    default = _DEFAULT_INSTALL_DIRS.get(platform.system(), "~/StarCraftII")
    return Path(os.environ.get("SC2PATH") or default).expanduser()


def smac_map_file(map_name: str, install_dir: Path | None = None) -> Path:
    """Where pysc2 reads a SMAC map: <install>/Maps/SMAC_Maps/<map>.SC2Map."""
    root = sc2_install_dir() if install_dir is None else install_dir
    return root / "Maps" / "SMAC_Maps" / f"{map_name}.SC2Map"


def sc2_available(map_name: str) -> bool:
    """True when a game build (Versions/Base*) and the map file are both installed."""
    root = sc2_install_dir()
    versions = root / "Versions"
    has_build = versions.is_dir() and any(p.name.startswith("Base") for p in versions.iterdir())
    return has_build and smac_map_file(map_name, root).is_file()


def select_backend(backend: str, map_name: str) -> str:
    """Resolve env_args.backend to the engine that will run: "sc2" or "builtin"."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend '{backend}'; choose one of: {', '.join(BACKENDS)}")
    if backend == "builtin":
        return "builtin"
    if sc2_available(map_name):
        return "sc2"
    if backend == "sc2":
        raise ValueError(
            f"backend=sc2 needs StarCraft II with {smac_map_file(map_name)}, not found: set SC2PATH "
            f"to the game folder (install it with `bash {INSTALL_SCRIPT}`) or use backend=builtin"
        )
    return "builtin"


def make_engine(backend: str, map_name: str, seed: int | None, step_mul: int = 8,
                record_replay: bool = False, **sc2_kwargs: Any):
    """Build the engine for `backend` (any of BACKENDS; "auto" is resolved here).

    sc2_kwargs (difficulty, game_version, window_size, launcher) only concern the real game and
    are ignored by the built-in simulator, so one call site serves both. record_replay makes the
    built-in simulator keep its last episodes for save_replay (an animated GIF); StarCraft II
    records its own replays.
    """
    if select_backend(backend, map_name) == "sc2":
        from envs.starcraft.sc2_engine import SC2Engine  # pysc2 is imported only when used

        return SC2Engine(map_name, seed, step_mul, **sc2_kwargs)
    from envs.starcraft.engine import BuiltinEngine

    engine = BuiltinEngine(map_name, seed, step_mul)
    if record_replay:
        from envs.starcraft.render import RecordingEngine  # pillow is imported only when used

        engine = RecordingEngine(engine, map_name)
    return engine
