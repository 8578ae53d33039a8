#!/usr/bin/env bash
# Runs radicle-explorer's own `http-client` test suite (its zod schemas are the API contract,
# issue 15) against seedd serving the explorer's fixtures, and optionally compares seedd's
# answers with radicle-httpd's on the same storage, field by field (compare.py).
#
#   EXPLORER_DIR=<radicle-explorer checkout, release 0.27.0> scripts/explorer/run.sh [suite|compare|all]
#
# Needs: node >= 20 and npm (the explorer's dev dependencies are installed with
# `npm ci --ignore-scripts`), the Radicle binaries `rad`, `radicle-node`, `git-remote-rad` on
# PATH, a seedd binary (SEEDD_BIN, default: the debug build), and for `compare` a radicle-httpd
# 0.27 binary (SEEDD_CONTRACT_HTTPD). Nothing here is fetched from the network except npm
# packages; the explorer is not vendored (CI has no access to its repository), so CI does not
# run this: see README "Pointing the Radicle explorer at a seedd".
set -euo pipefail
mode="${1:-suite}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
explorer="${EXPLORER_DIR:?EXPLORER_DIR must name a radicle-explorer checkout}"
explorer="$(cd "$explorer" && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
export SEEDD_BIN="${SEEDD_BIN:-$target/debug/seedd}"
[ -x "$SEEDD_BIN" ] || { echo "no seedd at $SEEDD_BIN: build it (cargo build -p seedd) or set SEEDD_BIN" >&2; exit 1; }
for b in rad radicle-node git-remote-rad node npm; do
  command -v "$b" >/dev/null || { echo "$b is not on PATH" >&2; exit 1; }
done
export SEEDD_CONTRACT_RADICLE_NODE="$(command -v radicle-node)"
export SEEDD_CONTRACT_RAD="$(command -v rad)"

shims="$explorer/tests/tmp/seedd-shims"
mkdir -p "$shims" "$explorer/http-client/seedd"
cp "$here/radicle-httpd" "$here/radicle-node" "$here/rad" "$shims/"
cp "$here/globalSetup.ts" "$here/vite.config.ts" "$explorer/http-client/seedd/"
export PATH="$shims:$PATH"

cd "$explorer"
if [ ! -d node_modules/vitest ]; then
  echo "installing the explorer's npm dev dependencies (npm ci --ignore-scripts)"
  npm ci --ignore-scripts --no-audit --no-fund
fi

suite() { # $1: seedd | httpd
  echo "== radicle-explorer http-client suite against $1"
  SEEDD_CONTRACT_SERVER="$1" NODE_CONFIG_ENV=test TZ=UTC \
    npx vitest run --config http-client/seedd/vite.config.ts --reporter verbose
}

case "$mode" in
  suite)
    suite seedd
    ;;
  compare)
    python3 "$here/compare.py" --peers "$explorer/tests/tmp/peers" --seedd "$SEEDD_BIN" \
      --httpd "${SEEDD_CONTRACT_HTTPD:?SEEDD_CONTRACT_HTTPD must name radicle-httpd 0.27}"
    ;;
  all)
    suite seedd
    SEEDD_CONTRACT_REUSE_FIXTURES=1 suite httpd
    python3 "$here/compare.py" --peers "$explorer/tests/tmp/peers" --seedd "$SEEDD_BIN" \
      --httpd "${SEEDD_CONTRACT_HTTPD:?SEEDD_CONTRACT_HTTPD must name radicle-httpd 0.27}"
    ;;
  *)
    echo "usage: $0 [suite|compare|all]" >&2
    exit 2
    ;;
esac
