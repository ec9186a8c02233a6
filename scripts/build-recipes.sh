#!/usr/bin/env bash
# Builds every recipe crate in recipes-wasm/ for wasm32-unknown-unknown
# (release) and copies the modules to target/recipes/NAME.wasm (or to $1).
# Uses its own target dir (target/recipes-build) so it can run while another
# cargo holds the main one (e.g. from a test).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$REPO/target/recipes}"
BUILD="$REPO/target/recipes-build"
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "build-recipes: the Rust target wasm32-unknown-unknown is missing (rustup target add wasm32-unknown-unknown, or scripts/setup.sh)" >&2
  exit 1
fi
# From recipes-wasm/, so its .cargo/config.toml (link flags) applies.
(cd "$REPO/recipes-wasm" && cargo build --quiet --manifest-path "$REPO/recipes-wasm/Cargo.toml" \
  --target wasm32-unknown-unknown --release --target-dir "$BUILD")
mkdir -p "$OUT"
# Only the current members (a removed crate's old module may linger in $BUILD).
members="$(cargo metadata --quiet --offline --no-deps --format-version 1 \
  --manifest-path "$REPO/recipes-wasm/Cargo.toml" |
  python3 -c 'import json,sys; print("\n".join(p["name"].replace("-", "_") for p in json.load(sys.stdin)["packages"]))')"
for member in $members; do
  wasm="$BUILD/wasm32-unknown-unknown/release/$member.wasm"
  name="$member.wasm"
  # Copy then rename, so a plugins directory being watched never sees half a file.
  cp "$wasm" "$OUT/.$name.tmp"
  mv "$OUT/.$name.tmp" "$OUT/$name"
  echo "$OUT/$name ($(wc -c <"$OUT/$name") bytes)"
done
