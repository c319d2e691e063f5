"""Where StarCraft II and its maps are installed, found as pysc2 will look for them, without importing pysc2:
the backend choice asks this whether the real game can play a map before anything launches it.
"""
import os
import platform
import sys
from pathlib import Path

from ..game.maps import is_gen_map

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
