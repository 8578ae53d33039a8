#!/usr/bin/env bash
# The whole test suite: installs what is missing (system packages, the pinned official Radicle
# binaries), then formatting, lints, and every unit, integration and interop test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/install-observability-tools.sh
bash scripts/install-packaging-tools.sh
RADICLE_BIN="$(bash scripts/install-radicle.sh | tail -n 1)"
export PATH="$RADICLE_BIN:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/seedd/target}"
export CARGO_TERM_COLOR=never
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== crates and rooms: floors kept, no import cycles"
python3 scripts/check-rooms.py
echo "== cargo test"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
# Integration tests run the seedd/seedctl binaries: build them first.
cargo build --workspace --locked --bins
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log" || status=$?
echo "== observability checks (dashboards, alert rules)"
bash scripts/check-observability.sh || status=1
echo "== packaging checks (Dockerfile, image build + run, Helm chart)"
bash scripts/check-packaging.sh || status=1
echo "== fuzz (short run; scripts/fuzz.sh SECONDS for a long one)"
bash scripts/fuzz.sh "${SEEDD_FUZZ_SECONDS:-15}" || status=1
# One closing line over every test binary (cargo's own last line is a doc-test summary).
passed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($i ~ /^passed/) p += $(i-1) } END { print p + 0 }' "$log")
failed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($i ~ /^failed/) f += $(i-1) } END { print f + 0 }' "$log")
echo
echo "${passed:-0} passed, ${failed:-0} failed"
exit "$status"
