#!/usr/bin/env bash
# Build the release seedd, then run the side-by-side bench (seedd vs git http-backend).
# Output: table on stdout, JSON in $CARGO_TARGET_DIR/seedd-bench.json.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/seedd/target}"
cargo build --release -p seedd --bin seedd
SEEDD_BENCH_NO_BUILD=1 cargo bench -p seedd-benches "$@"
