#!/usr/bin/env bash
# Scaffolds a new recipe crate: recipes-wasm/NAME (a cdylib depending on
# wazoo-sdk), added to the recipes-wasm workspace. Build it with
# scripts/build-recipes.sh; the module lands in target/recipes/NAME.wasm.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME="${1:-}"
if ! [[ "$NAME" =~ ^[a-z][a-z0-9_]{0,63}$ ]]; then
  echo "usage: scripts/new-recipe.sh NAME   (NAME: lowercase letters, digits, _; starts with a letter)" >&2
  exit 2
fi
DIR="$REPO/recipes-wasm/$NAME"
if [ -e "$DIR" ]; then
  echo "new-recipe: $DIR already exists" >&2
  exit 1
fi
mkdir -p "$DIR/src"
cat >"$DIR/Cargo.toml" <<TOML
[package]
name = "$NAME"
version = "0.1.0"
edition = "2021"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
wazoo-sdk = { path = "../../sdk" }
serde = { version = "1", features = ["derive"] }
TOML
cat >"$DIR/src/lib.rs" <<RUST
//! The $NAME recipe. Methods are plain functions; recipe! generates the
//! exports, the manifest and the panic hook. See docs/RECIPES.md.
use wazoo_sdk::prelude::*;

recipe!(name = "$NAME", prefixes = ["/$NAME"], methods = [hello]);

#[derive(Deserialize)]
struct Hello {
    who: String,
}

/// Records a greeting under /$NAME and returns how many there are.
fn hello(cx: &mut Ctx, a: Hello) -> Result<Step<usize>> {
    if cx.exists("/$NAME")?.is_none() {
        cx.create("/$NAME", b"", CreateMode::Persistent)?;
    }
    cx.create("/$NAME/hello-", a.who.as_bytes(), CreateMode::PersistentSequential)?;
    Ok(Step::Done(cx.children("/$NAME")?.len()))
}
RUST
# Add the crate to the recipes-wasm workspace members.
python3 - "$REPO/recipes-wasm/Cargo.toml" "$NAME" <<'PY'
import re, sys
path, name = sys.argv[1], sys.argv[2]
text = open(path).read()
m = re.search(r'members = \[(.*?)\]', text, re.S)
members = re.findall(r'"([^"]+)"', m.group(1))
if name not in members:
    members.append(name)
body = "".join(f'\n    "{x}",' for x in members) + "\n"
text = text[:m.start(1)] + body + text[m.end(1):]
open(path, "w").write(text)
PY
echo "created $DIR; build with scripts/build-recipes.sh (-> target/recipes/$NAME.wasm)"
