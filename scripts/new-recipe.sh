#!/usr/bin/env bash
# Scaffolds a new recipe crate (docs/RECIPES.md, "2. Scaffold").
#
#   scripts/new-recipe.sh NAME
#       recipes-wasm/NAME, a cdylib depending on ../../sdk, added to the
#       recipes-wasm workspace. Build it with scripts/build-recipes.sh NAME
#       (-> target/recipes/NAME.wasm).
#
#   scripts/new-recipe.sh --out DIR NAME [--sdk-path PATH | --sdk-git URL [--sdk-rev REV]]
#       DIR/NAME, a standalone cargo project for your own repository: its
#       own workspace, release profile and .cargo/config.toml (the link
#       flags, and `cargo wasm` to build). wazoo-sdk is not on crates.io, so
#       it depends on the SDK by path (default: this checkout's sdk/, as an
#       absolute path) or by git (--sdk-git, e.g. your clone of wazoo).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() {
  cat >&2 <<'USAGE'
usage: scripts/new-recipe.sh NAME
       scripts/new-recipe.sh --out DIR NAME [--sdk-path PATH | --sdk-git URL [--sdk-rev REV]]
NAME: lowercase letters, digits, _; starts with a letter
USAGE
  exit 2
}
OUT="" NAME="" SDK_PATH="" SDK_GIT="" SDK_REV=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || usage; OUT="$2"; shift 2 ;;
    --out=*) OUT="${1#--out=}"; shift ;;
    --sdk-path) [ $# -ge 2 ] || usage; SDK_PATH="$2"; shift 2 ;;
    --sdk-path=*) SDK_PATH="${1#--sdk-path=}"; shift ;;
    --sdk-git) [ $# -ge 2 ] || usage; SDK_GIT="$2"; shift 2 ;;
    --sdk-git=*) SDK_GIT="${1#--sdk-git=}"; shift ;;
    --sdk-rev) [ $# -ge 2 ] || usage; SDK_REV="$2"; shift 2 ;;
    --sdk-rev=*) SDK_REV="${1#--sdk-rev=}"; shift ;;
    -h|--help) usage ;;
    -*) echo "new-recipe: unknown option $1" >&2; usage ;;
    *) [ -z "$NAME" ] || usage; NAME="$1"; shift ;;
  esac
done
if ! [[ "$NAME" =~ ^[a-z][a-z0-9_]{0,63}$ ]]; then
  usage
fi
if [ -z "$OUT" ] && [ -n "$SDK_PATH$SDK_GIT$SDK_REV" ]; then
  echo "new-recipe: --sdk-path, --sdk-git and --sdk-rev go with --out" >&2
  exit 2
fi
if [ -n "$SDK_PATH" ] && [ -n "$SDK_GIT" ]; then
  echo "new-recipe: give --sdk-path or --sdk-git, not both" >&2
  exit 2
fi
if [ -n "$SDK_REV" ] && [ -z "$SDK_GIT" ]; then
  echo "new-recipe: --sdk-rev goes with --sdk-git" >&2
  exit 2
fi

# The recipe's source, the same in both modes: one method, and a test that
# runs it natively with wazoo_sdk::testing.
write_lib() { # FILE
  cat >"$1" <<RUST
//! The $NAME recipe. Methods are plain functions; recipe! generates the
//! exports, the manifest and the panic hook. See wazoo's docs/RECIPES.md.
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

#[cfg(test)]
mod tests {
    use wazoo_sdk::testing::{done, Harness};

    #[derive(serde::Serialize)]
    struct Who<'a> {
        who: &'a str,
    }

    #[test]
    fn each_hello_adds_one_greeting() {
        let mut h = Harness::new(wazoo_sdk::this_recipe!());
        let s = h.session();
        assert_eq!(done::<usize>(&h.call(s, "hello", &Who { who: "ada" })), 1);
        assert_eq!(done::<usize>(&h.call(s, "hello", &Who { who: "bob" })), 2);
    }
}
RUST
}

# The crate's manifest, the same in both modes but for how it finds
# wazoo-sdk: FILE, then the dependency's lines (a note, then the table).
write_manifest() { # FILE SDK_LINES
  cat >"$1" <<TOML
[package]
name = "$NAME"
version = "0.1.0"
edition = "2021"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
$2
serde = { version = "1", features = ["derive"] }
TOML
}

if [ -z "$OUT" ]; then
  DIR="$REPO/recipes-wasm/$NAME"
  if [ -e "$DIR" ]; then
    echo "new-recipe: $DIR already exists" >&2
    exit 1
  fi
  mkdir -p "$DIR/src"
  write_manifest "$DIR/Cargo.toml" 'wazoo-sdk = { path = "../../sdk" }'
  write_lib "$DIR/src/lib.rs"
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
  echo "created $DIR; build with scripts/build-recipes.sh $NAME (-> target/recipes/$NAME.wasm)"
  exit 0
fi

# --- A standalone project -----------------------------------------------------------------
DIR="$OUT/$NAME"
if [ -e "$DIR" ]; then
  echo "new-recipe: $DIR already exists" >&2
  exit 1
fi
if [ -n "$SDK_GIT" ]; then
  SDK_DEP="git = \"$SDK_GIT\""
  [ -z "$SDK_REV" ] || SDK_DEP="$SDK_DEP, rev = \"$SDK_REV\""
  SDK_NOTE="# wazoo-sdk is not on crates.io: it comes from wazoo's git repository."
else
  SDK_PATH="${SDK_PATH:-$REPO/sdk}"
  if [ ! -f "$SDK_PATH/Cargo.toml" ]; then
    echo "new-recipe: no wazoo-sdk crate at $SDK_PATH (give the sdk/ directory of a wazoo checkout)" >&2
    exit 1
  fi
  SDK_PATH="$(cd "$SDK_PATH" && pwd)"
  SDK_DEP="path = \"$SDK_PATH\""
  SDK_NOTE="# wazoo-sdk is not on crates.io: this is the sdk/ of a wazoo checkout (or use
# git = \"<wazoo's repository URL>\", rev = \"...\")."
fi
mkdir -p "$DIR/src" "$DIR/.cargo"
write_manifest "$DIR/Cargo.toml" "$SDK_NOTE
wazoo-sdk = { $SDK_DEP }"
cat >>"$DIR/Cargo.toml" <<TOML

# A recipe module is small and stops at the first panic (the SDK reports
# it to the caller).
[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
panic = "abort"
debug = false
strip = "debuginfo"

# Its own workspace, so that it builds alone even inside another cargo
# workspace (move it into yours by listing it there and removing this).
[workspace]
TOML
# The link flags wazoo's own recipes use (docs/RECIPES.md, "4. Build").
printf '# Link flags of wazoo'"'"'s own recipes: a 128 KiB shadow stack and a 256 KiB\n# initial memory (wazoo'"'"'s docs/RECIPES.md, "4. Build").\n' >"$DIR/.cargo/config.toml"
sed -n '/^\[target.wasm32-unknown-unknown\]/,$p' "$REPO/recipes-wasm/.cargo/config.toml" >>"$DIR/.cargo/config.toml"
cat >>"$DIR/.cargo/config.toml" <<'TOML'

# `cargo wasm`: the module, target/wasm32-unknown-unknown/release/NAME.wasm.
[alias]
wasm = "build --release --target wasm32-unknown-unknown"
TOML
# The versions wazoo's own recipes are built and tested with.
if [ -f "$REPO/recipes-wasm/Cargo.lock" ]; then
  cp "$REPO/recipes-wasm/Cargo.lock" "$DIR/Cargo.lock"
fi
printf '/target\n' >"$DIR/.gitignore"
write_lib "$DIR/src/lib.rs"
cat >"$DIR/README.md" <<MD
# $NAME

A wazoo recipe module (see wazoo's docs/RECIPES.md).

\`\`\`sh
rustup target add wasm32-unknown-unknown   # once
cargo test                                 # the recipe's logic, natively (wazoo_sdk::testing)
cargo wasm                                 # -> target/wasm32-unknown-unknown/release/$NAME.wasm
wazoo recipe run target/wasm32-unknown-unknown/release/$NAME.wasm hello '{"who":"ada"}'
\`\`\`

\`cargo wasm\` is an alias (.cargo/config.toml) for
\`cargo build --release --target wasm32-unknown-unknown\`; the same file sets
the link flags wazoo's own recipes use. To serve it, copy the module into a
server's plugins directory, or deploy it from \`wazoo cli\` as a user with
ADMIN on /zookeeper/recipes (\`addauth digest super:PASSWORD\`, then
\`deploy target/wasm32-unknown-unknown/release/$NAME.wasm\`).
MD
echo "created $DIR (standalone; wazoo-sdk from ${SDK_GIT:-$SDK_PATH}); build with: cd $DIR && cargo wasm"
