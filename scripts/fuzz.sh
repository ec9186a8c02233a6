#!/usr/bin/env bash
# Opt-in: runs cargo-fuzz targets, each for a bounded time or a number of
# executions.
#   scripts/fuzz.sh [SECONDS] [TARGET...]     each target for SECONDS (default 60)
#   scripts/fuzz.sh --runs N [TARGET...]      each target for N executions
# Without TARGETs it runs them all: the client frame and disk records, and
# everything a peer sends (link frames, election and ZAB messages, snapshot
# transfer). The long run is `scripts/fuzz.sh --runs 10000000`.
# cargo-fuzz needs nightly compiler flags; on the stable toolchain this sets
# RUSTC_BOOTSTRAP=1 for the fuzz build only.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ALL=(client_frame disk_records quorum_link election_message zab_message snapshot_transfer)
if [[ "${1:-}" == "--runs" ]]; then
  [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "usage: $0 --runs N [TARGET...]" >&2; exit 2; }
  LIMIT="-runs=$2"
  shift 2
else
  SECS=60
  if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
    SECS="$1"
    shift
  fi
  LIMIT="-max_total_time=$SECS"
fi
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=("${ALL[@]}")
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
cd "$REPO/fuzz"
for target in "${TARGETS[@]}"; do
  echo "===== fuzz $target ($LIMIT) ====="
  RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none "$target" -- "$LIMIT" -rss_limit_mb=2048
done
