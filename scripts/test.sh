#!/usr/bin/env bash
# The whole test suite: installs what is missing (system packages, the pinned official Radicle
# binaries), then formatting, lints, and every unit, integration and interop test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
RADICLE_BIN="$(bash scripts/install-radicle.sh | tail -n 1)"
export PATH="$RADICLE_BIN:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/seedd/target}"
export CARGO_TERM_COLOR=never
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked --no-fail-fast
