#!/usr/bin/env bash
# THE test command: checks formatting and lints, builds everything, runs the
# Rust tests, then the Python compatibility tests against Apache ZooKeeper
# and wazoo.
# Needs what scripts/setup.sh installs. Extra arguments go to pytest,
# e.g. `scripts/test.sh -k zookeeper`.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# shellcheck source=scripts/python-env.sh
. "$REPO/scripts/python-env.sh"
pick_python "$REPO"

# A clean build gains nothing from incremental compilation, which would
# write several more GB of target/ on a CI machine whose disk may be small
# (a CI link once died with a bus error, the mark of a full disk).
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
fi

section() { printf '\n===== %s =====\n' "$*"; }

# The lint gates come first: they are quick and fail for reasons a reader
# fixes at once. Lint levels are the workspace's [workspace.lints]; core/ and
# zab/ add their own clippy.toml (no clock reads, files or sockets).
section "cargo fmt --all --check"
cargo fmt --all --check

section "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

section "cargo build --workspace --all-targets"
cargo build --workspace --all-targets

section "cargo test --workspace"
cargo test --workspace

section "python tests (pytest, $PYTHON)"
# The wazoo flavor runs the binary just built (target/debug/wazoo) unless
# WAZOO_BIN says otherwise.
rc=0
"$PYTHON" -m pytest -q tests/python "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
  # pytest's 5 means it collected no test at all. Allowed only when the
  # arguments deselected everything on purpose (e.g. -k), never by default.
  if [ "$#" -eq 0 ]; then
    echo "test.sh: pytest collected no tests under tests/python: that is a failure" >&2
    exit 5
  fi
  echo "test.sh: no python test matched the given arguments"
  rc=0
fi
[ "$rc" -eq 0 ] || exit "$rc"

section "all tests passed"
