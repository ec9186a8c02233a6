#!/usr/bin/env bash
# Opt-in: runs each cargo-fuzz target for a bounded time (default 60 s each).
#   scripts/fuzz.sh [SECONDS]
# cargo-fuzz needs nightly compiler flags; on the stable toolchain this sets
# RUSTC_BOOTSTRAP=1 for the fuzz build only.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECS="${1:-60}"
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
cd "$REPO/fuzz"
for target in client_frame disk_records; do
  echo "===== fuzz $target for ${SECS}s ====="
  RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none "$target" -- -max_total_time="$SECS" -rss_limit_mb=2048
done
