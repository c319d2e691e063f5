#!/usr/bin/env bash
# Install StarCraft II 4.10 for Linux and the SMAC maps, for env_args.backend=sc2 (or auto).
#
# Usage: bash scripts/install_sc2.sh [INSTALL_DIR]
#   INSTALL_DIR defaults to $SC2PATH, else ~/StarCraftII. Safe to re-run: the game and the maps
#   are only downloaded when missing. Downloading the game means accepting Blizzard's AI and
#   Machine Learning License (https://blzdistsc2-a.akamaihd.net/AI_AND_MACHINE_LEARNING_LICENSE.html);
#   the archive password 'iagreetotheeula' is that acceptance.
set -euo pipefail

SC2_URL="http://blzdistsc2-a.akamaihd.net/Linux/SC2.4.10.zip"
SC2_ZIP_PASSWORD="iagreetotheeula"
MAPS_URL="https://github.com/oxwhirl/smac/releases/download/v0.1-beta1/SMAC_Maps.zip"
CHECK_MAP="3m.SC2Map"  # present once the SMAC maps are unpacked

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

has_game() {
    compgen -G "$1/Versions/Base*" >/dev/null
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
    if [ -f "$target/Maps/SMAC_Maps/$CHECK_MAP" ]; then
        echo "SMAC maps already installed in $target/Maps/SMAC_Maps"
    else
        [ -n "$STAGING" ] || make_staging "$target"
        install_maps "$target" "$STAGING"
    fi

    has_game "$target" || die "no game build under $target/Versions after installing"
    echo "StarCraft II and the SMAC maps are in $target. Add this line to your shell profile:"
    echo "export SC2PATH=\"$target\""
}

main "$@"
