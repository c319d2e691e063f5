"""scripts/install_sc2.sh against fake installs: it checks every map of the registry and SMACv2's map
file, fetches the SMAC maps the maps pack lacks from SMAC's repository and SMACv2's from SMACv2's,
and names any map it could not get.

No network: `curl` on PATH is a stub that copies file:// URLs only (and logs every URL asked for),
`wget` a stub that fails; the download locations point at local folders through the script's
SMAC_MAPS_ZIP_URL, SMAC_MAP_BASE_URL and SMACV2_MAP_BASE_URL variables.
"""
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from envs.starcraft.sc2client.install import map_file_stem
from envs.starcraft.game.maps import GEN_MAPS, MAP_REGISTRY

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "install_sc2.sh"
SMAC_MAPS = list(MAP_REGISTRY)
SMACV2_MAP = "32x32_flat"
ALL_MAPS = SMAC_MAPS + [SMACV2_MAP]

CURL_STUB = r"""#!/bin/sh
# curl stand-in: copies file:// URLs to --output, refuses anything else.
out=""; url=""
while [ $# -gt 0 ]; do
    case "$1" in
        --output|-o) out="$2"; shift ;;
        --retry) shift ;;
        -*) ;;
        *) url="$1" ;;
    esac
    shift
done
echo "$url" >> "$CURL_LOG"
case "$url" in
    file://*) path="${url#file://}" ;;
    *) echo "curl stub: network disabled in tests ($url)" >&2; exit 6 ;;
esac
[ -f "$path" ] || { echo "curl: (37) Couldn't open file $path" >&2; exit 37; }
cp "$path" "$out"
"""


def map_bytes(name: str) -> bytes:
    return b"MPQ\x1a" + f" SMAC map {name}".encode()


def fake_install(root: Path, maps=ALL_MAPS) -> Path:
    """A game folder (Versions/Base*, no binary) with the given map files."""
    (root / "Versions" / "Base75689").mkdir(parents=True)
    (root / "Maps" / "SMAC_Maps").mkdir(parents=True)
    for name in maps:
        (root / "Maps" / "SMAC_Maps" / f"{name}.SC2Map").write_bytes(map_bytes(name))
    return root


def map_folder(root: Path, maps) -> Path:
    """A repository's folder of maps (what SMAC_MAP_BASE_URL or SMACV2_MAP_BASE_URL points at)."""
    root.mkdir(parents=True)
    for name in maps:
        (root / f"{name}.SC2Map").write_bytes(map_bytes(name))
    return root


class Installer:
    """Runs the script with the stubs on PATH; `urls` lists what it asked curl for."""

    def __init__(self, tmp_path: Path):
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        (self.bin / "curl").write_text(CURL_STUB)
        (self.bin / "wget").write_text("#!/bin/sh\necho 'wget stub: network disabled in tests' >&2\nexit 97\n")
        for tool in ("curl", "wget"):
            (self.bin / tool).chmod(0o755)
        self.log = tmp_path / "curl.log"
        self.log.touch()
        self.env = dict(os.environ, PATH=f"{self.bin}:{os.environ['PATH']}", CURL_LOG=str(self.log),
                        SMAC_MAP_BASE_URL=f"file://{tmp_path / 'smac_repo_maps'}",
                        SMACV2_MAP_BASE_URL=f"file://{tmp_path / 'smacv2_repo_maps'}",
                        SMAC_MAPS_ZIP_URL=f"file://{tmp_path / 'SMAC_Maps.zip'}")

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(SCRIPT), *map(str, args)], env=self.env, capture_output=True, text=True)

    @property
    def urls(self) -> list[str]:
        return self.log.read_text().split()


@pytest.fixture
def install(tmp_path):
    return Installer(tmp_path)


def listed(array: str) -> list[str]:
    return re.search(rf"^{array}=\(([^)]*)\)", SCRIPT.read_text(), re.MULTILINE).group(1).split()


def test_the_script_checks_exactly_the_registry_maps_and_smacv2s_map_file():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    assert listed("SMAC_MAPS") == SMAC_MAPS and len(SMAC_MAPS) == 23
    assert listed("SMACV2_MAPS") == sorted({map_file_stem(m) for m in GEN_MAPS}) == [SMACV2_MAP]


def test_a_complete_install_is_left_alone(tmp_path, install):
    target = fake_install(tmp_path / "game dir")
    result = install(target)
    assert result.returncode == 0, result.stderr
    assert "StarCraft II already installed" in result.stdout and "SMAC and SMACv2 maps already installed" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == f'export SC2PATH="{target}"'
    assert install.urls == []
    usage = install("a", "b")
    assert usage.returncode == 1 and "usage:" in usage.stderr


def test_maps_missing_from_the_pack_are_fetched_from_smacs_repository(tmp_path, install):
    """1c3s5z came after the maps pack; a map file that is not a map (an error page) counts as missing."""
    target = fake_install(tmp_path / "sc2", [m for m in ALL_MAPS if m != "1c3s5z"])
    (target / "Maps" / "SMAC_Maps" / "2s3z.SC2Map").write_text("<html>404</html>")
    map_folder(tmp_path / "smac_repo_maps", ALL_MAPS)
    result = install(target)
    assert result.returncode == 0, result.stderr
    base = f"file://{tmp_path / 'smac_repo_maps'}"
    assert install.urls == [f"{base}/2s3z.SC2Map", f"{base}/1c3s5z.SC2Map"]  # not the pack: 3m is there
    for name in ("1c3s5z", "2s3z"):
        assert (target / "Maps" / "SMAC_Maps" / f"{name}.SC2Map").read_bytes() == map_bytes(name)
    assert "Fetching 1c3s5z.SC2Map" in result.stdout and "all 23 SMAC maps and SMACv2's 32x32_flat" in result.stdout


def test_a_smac_install_gets_smacv2s_map_from_smacv2s_repository(tmp_path, install):
    target = fake_install(tmp_path / "sc2", SMAC_MAPS)  # installed for SMAC before SMACv2 came
    map_folder(tmp_path / "smac_repo_maps", ALL_MAPS)  # SMAC's folder is not asked
    map_folder(tmp_path / "smacv2_repo_maps", [SMACV2_MAP])
    result = install(target)
    assert result.returncode == 0, result.stderr
    assert install.urls == [f"file://{tmp_path / 'smacv2_repo_maps'}/32x32_flat.SC2Map"]
    assert (target / "Maps" / "SMAC_Maps" / "32x32_flat.SC2Map").read_bytes() == map_bytes(SMACV2_MAP)


def test_a_map_that_cannot_be_fetched_is_named_and_fails_the_script(tmp_path, install):
    target = fake_install(tmp_path / "sc2", [m for m in ALL_MAPS if m not in ("1c3s5z", "corridor", SMACV2_MAP)])
    map_folder(tmp_path / "smac_repo_maps", ["corridor", SMACV2_MAP])  # 1c3s5z is not there either, and
    map_folder(tmp_path / "smacv2_repo_maps", [])  # SMACv2's map is only looked for in SMACv2's repository
    result = install(target)
    assert result.returncode == 1
    maps_dir = target / "Maps" / "SMAC_Maps"
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"install_sc2.sh: 2 of 24 maps missing from {maps_dir}: 1c3s5z 32x32_flat (")
    assert f"could not fetch file://{tmp_path / 'smac_repo_maps'}/1c3s5z.SC2Map" in result.stderr
    assert f"could not fetch file://{tmp_path / 'smacv2_repo_maps'}/32x32_flat.SC2Map" in result.stderr
    assert "export SC2PATH" not in result.stdout
    assert (maps_dir / "corridor.SC2Map").exists()
    assert sorted(p.name for p in maps_dir.iterdir() if p.name.startswith(".")) == []  # no partial download


@pytest.mark.skipif(shutil.which("unzip") is None, reason="the script unpacks the maps pack with unzip")
def test_a_fresh_maps_install_unpacks_the_pack_then_fetches_what_it_lacks(tmp_path, install):
    target = fake_install(tmp_path / "sc2", [])
    with zipfile.ZipFile(tmp_path / "SMAC_Maps.zip", "w") as pack:  # the first release's layout
        for name in SMAC_MAPS:
            if name != "1c3s5z":
                pack.writestr(f"SMAC_Maps/{name}.SC2Map", map_bytes(name))
    map_folder(tmp_path / "smac_repo_maps", ["1c3s5z"])
    map_folder(tmp_path / "smacv2_repo_maps", [SMACV2_MAP])
    result = install(target)
    assert result.returncode == 0, result.stderr
    assert install.urls == [f"file://{tmp_path / 'SMAC_Maps.zip'}", f"file://{tmp_path / 'smac_repo_maps'}/1c3s5z.SC2Map",
                            f"file://{tmp_path / 'smacv2_repo_maps'}/32x32_flat.SC2Map"]
    assert sorted(p.stem for p in (target / "Maps" / "SMAC_Maps").glob("*.SC2Map")) == sorted(ALL_MAPS)
    assert not list(tmp_path.glob("sc2*/.install_sc2.*")) and not list(tmp_path.glob(".install_sc2.*"))
