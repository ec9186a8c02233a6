#!/usr/bin/env bash
# Builds recipe crates of recipes-wasm/ for wasm32-unknown-unknown (release)
# and copies the modules to target/recipes/NAME.wasm (or to --out DIR).
#
#   scripts/build-recipes.sh                  # every crate -> target/recipes/
#   scripts/build-recipes.sh greeter          # only recipes-wasm/greeter
#   scripts/build-recipes.sh greeter --out plugins/   # only greeter, into plugins/
#   scripts/build-recipes.sh DIR              # every crate -> DIR (DIR names a directory)
#
# Only the named crates are built and copied, so building your own recipe
# into a plugins directory never replaces the built-in modules there.
# Uses its own target dir (target/recipes-build) so it can run while another
# cargo holds the main one (e.g. from a test).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$REPO/target/recipes-build"
usage() {
  echo "usage: scripts/build-recipes.sh [NAME...] [--out DIR]   (no NAME: every crate of recipes-wasm/)" >&2
  exit 2
}
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "build-recipes: the Rust target wasm32-unknown-unknown is missing (rustup target add wasm32-unknown-unknown, or scripts/setup.sh)" >&2
  exit 1
fi
# The workspace members as (package name, crate dir name) pairs.
members="$(cargo metadata --quiet --offline --no-deps --format-version 1 \
  --manifest-path "$REPO/recipes-wasm/Cargo.toml" |
  python3 -c 'import json,os,sys
for p in json.load(sys.stdin)["packages"]:
    print(p["name"], os.path.basename(os.path.dirname(p["manifest_path"])))')"
package_of() { # NAME (package or crate directory name) -> package name, or nothing
  local want="${1//-/_}" pkg dir
  while read -r pkg dir; do
    if [ "${pkg//-/_}" = "$want" ] || [ "${dir//-/_}" = "$want" ]; then echo "$pkg"; return; fi
  done <<<"$members"
}
OUT=""
names=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || usage; OUT="$2"; shift 2 ;;
    --out=*) OUT="${1#--out=}"; shift ;;
    -h|--help) usage ;;
    -*) echo "build-recipes: unknown option $1" >&2; usage ;;
    *)
      pkg="$(package_of "$1")"
      if [ -n "$pkg" ]; then
        names+=("$pkg")
      elif [[ "$1" == */* ]] || [ -d "$1" ]; then
        OUT="$1" # the older form: build-recipes.sh DIR
      else
        echo "build-recipes: no recipe crate named $1 in recipes-wasm/ (have: $(cut -d' ' -f1 <<<"$members" | tr '\n' ' '))" >&2
        exit 1
      fi
      shift ;;
  esac
done
OUT="${OUT:-$REPO/target/recipes}"
if [ ${#names[@]} -eq 0 ]; then
  mapfile -t names < <(cut -d' ' -f1 <<<"$members")
fi
pkgs=()
for n in "${names[@]}"; do pkgs+=(-p "$n"); done
# From recipes-wasm/, so its .cargo/config.toml (link flags) applies.
(cd "$REPO/recipes-wasm" && cargo build --quiet --manifest-path "$REPO/recipes-wasm/Cargo.toml" \
  --target wasm32-unknown-unknown --release --target-dir "$BUILD" "${pkgs[@]}")
mkdir -p "$OUT"
for pkg in "${names[@]}"; do
  member="${pkg//-/_}"
  wasm="$BUILD/wasm32-unknown-unknown/release/$member.wasm"
  name="$member.wasm"
  # Copy then rename, so a plugins directory being watched never sees half a file.
  cp "$wasm" "$OUT/.$name.tmp"
  mv "$OUT/.$name.tmp" "$OUT/$name"
  echo "$OUT/$name ($(wc -c <"$OUT/$name") bytes)"
done
