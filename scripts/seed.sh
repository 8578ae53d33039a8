#!/usr/bin/env bash
# Quick start: build and run a seed on built-in defaults (data in ./seedd-data, key created on
# first start, embedded RocksDB). Extra arguments go to `seedd run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/seedd/target}"
cargo build --release -p seedd --bin seedd
exec "$CARGO_TARGET_DIR/release/seedd" run "$@"
