#!/usr/bin/env bash
# Install StarCraft II 4.10 for Linux, the SMAC maps and SMACv2's map, for env_args.backend=sc2 (or auto).
#
# Usage: bash scripts/install_sc2.sh [INSTALL_DIR]
#   INSTALL_DIR defaults to $SC2PATH, else ~/StarCraftII. Safe to re-run: the game and the maps
#   are only downloaded when missing. Downloading the game means accepting Blizzard's AI and
#   Machine Learning License (https://blzdistsc2-a.akamaihd.net/AI_AND_MACHINE_LEARNING_LICENSE.html);
#   the archive password 'iagreetotheeula' is that acceptance.
#
# Every map file marlkit plays (src/envs/starcraft/game/maps.py) is checked at the end. The maps pack of
# SMAC's first release lacks maps added later (1c3s5z): those are fetched one by one from SMAC's
# repository. SMACv2 plays all its scenarios (10gen_protoss, 10gen_terran, 10gen_zerg) on one map
# file, 32x32_flat.SC2Map, fetched from SMACv2's repository (oxwhirl/smacv2, the folder
# smacv2/env/starcraft2/maps/SMAC_Maps; the SMAC_Maps.zip of its 'maps' release holds the same
# files). All go to <INSTALL_DIR>/Maps/SMAC_Maps, where pysc2 finds them. If any map is still
# missing the script names it and exits with status 1.
# Download locations can be changed through SC2_GAME_URL, SMAC_MAPS_ZIP_URL, SMAC_MAP_BASE_URL and
# SMACV2_MAP_BASE_URL (folder URLs holding <map>.SC2Map files), e.g. to point at a mirror.
set -euo pipefail

SC2_URL="${SC2_GAME_URL:-http://blzdistsc2-a.akamaihd.net/Linux/SC2.4.10.zip}"
SC2_ZIP_PASSWORD="iagreetotheeula"
MAPS_URL="${SMAC_MAPS_ZIP_URL:-https://github.com/oxwhirl/smac/releases/download/v0.1-beta1/SMAC_Maps.zip}"
MAP_BASE_URL="${SMAC_MAP_BASE_URL:-https://raw.githubusercontent.com/oxwhirl/smac/master/smac/env/starcraft2/maps/SMAC_Maps}"
SMACV2_BASE_URL="${SMACV2_MAP_BASE_URL:-https://raw.githubusercontent.com/oxwhirl/smacv2/main/smacv2/env/starcraft2/maps/SMAC_Maps}"
CHECK_MAP="3m.SC2Map"  # present once the SMAC maps pack is unpacked
# The 23 maps of src/envs/starcraft/game/maps.py (tests/test_sc2_install.py keeps the two lists equal).
SMAC_MAPS=(3m 8m 25m 5m_vs_6m 8m_vs_9m 10m_vs_11m 27m_vs_30m MMM MMM2 2s3z 3s5z 3s5z_vs_3s6z 3s_vs_3z
           3s_vs_4z 3s_vs_5z 1c3s5z 2m_vs_1z corridor 6h_vs_8z 2s_vs_1sc so_many_baneling bane_vs_bane
           2c_vs_64zg)
# SMACv2's map file (src/envs/starcraft/interface/backend.py GEN_MAP_FILE; tests/test_sc2_install.py checks it).
SMACV2_MAPS=(32x32_flat)
ALL_MAPS=("${SMAC_MAPS[@]}" "${SMACV2_MAPS[@]}")

die() {
    echo "install_sc2.sh: $*" >&2
    exit 1
}

require() {
    command -v "$1" >/dev/null 2>&1 || die "'$1' is required; install it (e.g. apt-get install $2) and re-run"
}

# download URL FILE: fetch with curl or wget, failing on HTTP errors.
download() {
    echo "Downloading $1"
    if command -v curl >/dev/null 2>&1; then
        curl --fail --location --retry 3 --output "$2" "$1" || die "download failed: $1"
    elif command -v wget >/dev/null 2>&1; then
        wget --tries=3 --output-document="$2" "$1" || die "download failed: $1"
    else
        die "'curl' or 'wget' is required to download $1"
    fi
}

# fetch URL FILE: like download, but returns non-zero instead of exiting when it fails.
fetch() {
    if command -v curl >/dev/null 2>&1; then
        curl --fail --silent --show-error --location --retry 3 --output "$2" "$1"
    elif command -v wget >/dev/null 2>&1; then
        wget --quiet --tries=3 --output-document="$2" "$1"
    else
        die "'curl' or 'wget' is required to download $1"
    fi
}

has_game() {
    compgen -G "$1/Versions/Base*" >/dev/null
}

# is_map FILE: FILE is a StarCraft II map (an MPQ archive), not missing, empty or an error page.
is_map() {
    [ -f "$1" ] && [ "$(head -c 3 "$1" | tr -d '\000')" = "MPQ" ]
}

# missing_maps DIR: the names of the maps (SMAC's and SMACv2's) that DIR/Maps/SMAC_Maps lacks, one per line.
missing_maps() {
    local name
    for name in "${ALL_MAPS[@]}"; do
        is_map "$1/Maps/SMAC_Maps/$name.SC2Map" || echo "$name"
    done
}

# map_source NAME: the folder URL that holds map NAME (SMACv2's repository for its own map).
map_source() {
    case " ${SMACV2_MAPS[*]} " in
        *" $1 "*) echo "$SMACV2_BASE_URL" ;;
        *) echo "$MAP_BASE_URL" ;;
    esac
}

# fetch_missing_maps TARGET: download each missing map from its repository; failures are
# reported by the final check.
fetch_missing_maps() {
    local target=$1 name part source
    mkdir -p "$target/Maps/SMAC_Maps"
    for name in $(missing_maps "$target"); do
        source=$(map_source "$name")
        echo "Fetching $name.SC2Map from $source"
        part="$target/Maps/SMAC_Maps/.$name.SC2Map.part"
        if fetch "$source/$name.SC2Map" "$part" && is_map "$part"; then
            mv "$part" "$target/Maps/SMAC_Maps/$name.SC2Map"
        else
            rm -f "$part"
            echo "install_sc2.sh: could not fetch $source/$name.SC2Map" >&2
        fi
    done
}

install_game() {  # install_game TARGET STAGING
    local target=$1 staging=$2
    download "$SC2_URL" "$staging/SC2.4.10.zip"
    echo "Unpacking StarCraft II (several GB)"
    unzip -q -P "$SC2_ZIP_PASSWORD" "$staging/SC2.4.10.zip" -d "$staging/game" \
        || die "could not unpack $staging/SC2.4.10.zip (disk full or corrupt download?)"
    [ -d "$staging/game/StarCraftII/Versions" ] || die "unexpected archive layout: no StarCraftII/Versions in SC2.4.10.zip"
    if [ -d "$target" ] && [ -n "$(ls -A "$target")" ]; then
        # Keep what is already there (e.g. Maps/) and add the game next to it.
        cp -a "$staging/game/StarCraftII/." "$target/" || die "could not copy the game into $target"
    else
        rmdir "$target" 2>/dev/null || true
        mv "$staging/game/StarCraftII" "$target" || die "could not move the game to $target"
    fi
}

install_maps() {  # install_maps TARGET STAGING
    local target=$1 staging=$2
    download "$MAPS_URL" "$staging/SMAC_Maps.zip"
    unzip -q -o "$staging/SMAC_Maps.zip" -d "$staging/maps" || die "could not unpack $staging/SMAC_Maps.zip"
    local unpacked
    unpacked=$(dirname "$(find "$staging/maps" -name "$CHECK_MAP" -print -quit)")
    [ "$unpacked" != "." ] || die "unexpected archive layout: no $CHECK_MAP in SMAC_Maps.zip"
    mkdir -p "$target/Maps/SMAC_Maps"
    cp -a "$unpacked/." "$target/Maps/SMAC_Maps/" || die "could not copy the maps into $target/Maps/SMAC_Maps"
}

STAGING=""  # temporary download folder next to the install, removed on exit
cleanup() {
    if [ -n "$STAGING" ]; then rm -rf "$STAGING"; fi
}
trap cleanup EXIT

# make_staging TARGET: create $STAGING on the install's file system (so moves are cheap).
make_staging() {
    require unzip unzip
    mkdir -p "$(dirname "$1")" || die "cannot create the parent folder of $1"
    STAGING=$(mktemp -d "$(dirname "$1")/.install_sc2.XXXXXX") || die "cannot create a temporary folder next to $1"
}

main() {
    [ $# -le 1 ] || die "usage: bash scripts/install_sc2.sh [INSTALL_DIR]"
    local target=${1:-${SC2PATH:-$HOME/StarCraftII}}
    case $target in
        /*) ;;
        *) target="$PWD/$target" ;;
    esac

    if has_game "$target"; then
        echo "StarCraft II already installed in $target"
    else
        [ -n "$STAGING" ] || make_staging "$target"
        install_game "$target" "$STAGING"
    fi
    if [ -z "$(missing_maps "$target")" ]; then
        echo "SMAC and SMACv2 maps already installed in $target/Maps/SMAC_Maps"
    else
        if ! is_map "$target/Maps/SMAC_Maps/$CHECK_MAP"; then
            [ -n "$STAGING" ] || make_staging "$target"
            install_maps "$target" "$STAGING"
        fi
        fetch_missing_maps "$target"
    fi

    has_game "$target" || die "no game build under $target/Versions after installing"
    local missing
    missing=$(missing_maps "$target" | tr '\n' ' ')
    if [ -n "$missing" ]; then
        die "$(wc -w <<<"$missing" | tr -d ' ') of ${#ALL_MAPS[@]} maps missing from $target/Maps/SMAC_Maps: ${missing% }" \
            "(could not fetch them: see above); backend=auto plays what needs them on the built-in simulator"
    fi
    echo "StarCraft II, all ${#SMAC_MAPS[@]} SMAC maps and SMACv2's ${SMACV2_MAPS[*]} are in $target." \
        "Add this line to your shell profile:"
    echo "export SC2PATH=\"$target\""
}

main "$@"
