#!/usr/bin/env bash
# Build the release seedd, then run the side-by-side bench (seedd vs git http-backend).
# Output: table on stdout, JSON in $CARGO_TARGET_DIR/seedd-bench.json.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/seedd/target}"
# The p2p bench opens 1,000 sessions per target: raise the open-files limit (inherited by
# seedd and radicle-node). If this fails the bench reduces its session count and says so.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
cargo build --release -p seedd --bin seedd
SEEDD_BENCH_NO_BUILD=1 cargo bench -p seedd-benches "$@"
