#!/usr/bin/env bash
# Browser test: the unmodified radicle-explorer web app, built from a checkout, browsing seedd
# in headless Chromium (browser.mjs, puppeteer-core). It creates the explorer's own fixtures
# with the real `rad`/`radicle-node` and serves them with seedd exactly as run.sh does (the
# same shims and globalSetup.ts, run by fixtures.mjs), serves the built app with `vite
# preview`, visits the pages a user browses on a seed (node, explore, repos, tree, file,
# history, commits, peers' views, issues, patches, a user), fails on any seed API answer other
# than 2xx or an expected 404 and on uncaught page errors, then runs five named checks
# (renames/copies, archive download on a peer's view, node page policy/address/description,
# search and /explore, aliases) and prints a table. Exit 0 only if every page and check passed.
#
# Names: seedd learns aliases only from node announcements in gossip, as on the network. Once
# the fixtures are made and seedd serves palm's storage, browserSetup.ts starts palm's
# radicle-node again, which seedd dials (seedd-browser: [p2p] connect), and alice's, bob's and
# eve's, which connect to seedd; each announces itself. Before browsing, browser.mjs waits (up
# to 90 s) until seedd's /api/v1/nodes/{nid} names all four; check 5 expects the aliases
# radicle-httpd would show (palm's node database).
#
#   EXPLORER_DIR=/tmp/explorer scripts/explorer/browser.sh
#
# Isolation: after installing what is missing (the only network use, and only package
# registries: apt for Debian's `chromium`, npm for puppeteer-core and the explorer's own
# `npm ci --ignore-scripts`), the script re-runs itself in a private network namespace
# (`unshare -n`, then `ip link set lo up`; needs root): the build, the fixtures, every Radicle
# node, seedd, the preview server and Chromium live on loopback there and cannot reach any
# other host.
#
# Needs: root (unshare -n, apt-get), node >= 20 with npm, python3, curl, the Radicle binaries
# rad, radicle-node, git-remote-rad (on PATH or in ~/.cache/seedd/radicle/bin), a seedd binary
# (SEEDD_BIN, default the debug build in $CARGO_TARGET_DIR, ./target or ~/.cache/seedd/target). EXPLORER_DIR is a
# radicle-explorer checkout (release 0.27.0 = commit 427cece9, or later); `git archive` exports
# work too (the build cache is then keyed by a hash of the sources instead of the commit).
#
# Skips (prints why, exits 0) when EXPLORER_DIR is unset or a tool cannot be installed or
# used (chromium, puppeteer-core, the explorer's npm packages, the Radicle binaries, unshare).
#
# Environment:
#   SEEDD_BROWSER_NEW_KEYS=1  (default) seedd.toml gets [web] description + pinned and
#                             [p2p] external_addresses (seedd-browser); 0 leaves them out
#   SEEDD_BROWSER_GOSSIP=1    (default) seedd joins the fixture nodes' gossip (browserSetup.ts);
#                             0: no node is started again and seedd knows no alias
#   SEEDD_BROWSER_STORAGE=copy (default) seedd serves a copy of palm's storage made at its start,
#                             as palm's node runs again; shared: the shim's symlink
#   SEEDD_BROWSER_P2P, SEEDD_BROWSER_PALM_P2P  seedd's and palm's p2p listen addresses
#                             (default 127.0.0.1:8776, 127.0.0.1:8777)
#   BROWSER_REUSE_FIXTURES=1  keep the fixtures of the previous run (faster re-runs)
#   BROWSER_OUT               logs, report.json, screenshots (default <explorer>/tests/tmp/seedd-browser)
#   TOOLS_DIR                 puppeteer-core and build cache (default ~/.cache/seedd/explorer-tools)
#   BROWSER_LIST_REQUESTS=1   also print every seed request of every page
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

skip() {
  echo "browser.sh: SKIPPED: $*"
  exit 0
}
now() { date +%s; }
phase_start=0
phase() { phase_start=$(now); echo "== $*"; }
phase_done() { echo "   ($(( $(now) - phase_start )) s)"; }

[ -n "${EXPLORER_DIR:-}" ] ||
  skip "EXPLORER_DIR is not set; to run it: EXPLORER_DIR=<radicle-explorer checkout, release 0.27.0> scripts/explorer/browser.sh"
explorer="$(cd "$EXPLORER_DIR" && pwd)"
[ -f "$explorer/package.json" ] && [ -d "$explorer/tests/support" ] ||
  skip "EXPLORER_DIR=$explorer is not a radicle-explorer checkout"
export TOOLS_DIR="${TOOLS_DIR:-$HOME/.cache/seedd/explorer-tools}"
out="${BROWSER_OUT:-$explorer/tests/tmp/seedd-browser}"
puppeteer_version=24.43.1 # the last puppeteer-core for node >= 18 (25 needs node 22)

if [ "${1:-}" != --in-netns ]; then
  # ---- outside the namespace: tools (package registries only) -------------------------------
  target="${CARGO_TARGET_DIR:-$root/target}"
  if [ -z "${SEEDD_BIN:-}" ]; then
    SEEDD_BIN="$target/debug/seedd"
    [ -x "$SEEDD_BIN" ] || [ ! -x "$HOME/.cache/seedd/target/debug/seedd" ] || SEEDD_BIN="$HOME/.cache/seedd/target/debug/seedd"
  fi
  export SEEDD_BIN
  [ -x "$SEEDD_BIN" ] || { echo "no seedd at $SEEDD_BIN: build it (cargo build -p seedd) or set SEEDD_BIN" >&2; exit 1; }
  for b in node npm python3 curl ip unshare; do
    command -v "$b" >/dev/null || skip "$b is not installed"
  done
  if ! command -v rad >/dev/null && [ -x "$HOME/.cache/seedd/radicle/bin/rad" ]; then
    export PATH="$HOME/.cache/seedd/radicle/bin:$PATH"
  fi
  for b in rad radicle-node git-remote-rad; do
    command -v "$b" >/dev/null || skip "$b is not on PATH (nor in ~/.cache/seedd/radicle/bin)"
  done
  [ "$(id -u)" = 0 ] || skip "needs root for a private network namespace (unshare -n)"
  unshare -n true 2>/dev/null || skip "cannot create a network namespace (unshare -n)"

  export CHROMIUM="${CHROMIUM:-$(command -v chromium || true)}"
  if [ -z "$CHROMIUM" ]; then
    phase "installing chromium (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q chromium >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; } ||
      skip "chromium cannot be installed with apt-get"
    CHROMIUM="$(command -v chromium)" || skip "chromium is not on PATH after installing it"
    phase_done
  fi
  if [ ! -f "$TOOLS_DIR/node_modules/puppeteer-core/package.json" ]; then
    phase "installing puppeteer-core@$puppeteer_version into $TOOLS_DIR"
    mkdir -p "$TOOLS_DIR"
    [ -f "$TOOLS_DIR/package.json" ] || echo '{"name":"seedd-explorer-tools","private":true}' >"$TOOLS_DIR/package.json"
    (cd "$TOOLS_DIR" && npm install --no-audit --no-fund --loglevel=error --prefer-offline --fetch-retries=0 --fetch-timeout=60000 "puppeteer-core@$puppeteer_version") ||
      skip "puppeteer-core cannot be installed with npm"
    phase_done
  fi
  if [ ! -d "$explorer/node_modules/vite" ] || [ ! -d "$explorer/node_modules/vitest" ]; then
    phase "installing the explorer's npm packages (npm ci --ignore-scripts)"
    (cd "$explorer" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error --prefer-offline --fetch-retries=0 --fetch-timeout=60000) ||
      skip "the explorer's npm packages cannot be installed (npm ci)"
    phase_done
  fi
  export SEEDD_CONTRACT_RADICLE_NODE="$(command -v radicle-node)"
  export SEEDD_CONTRACT_RAD="$(command -v rad)"
  echo "== entering a private network namespace (loopback only)"
  exec unshare -n -- "$0" --in-netns
fi

# ---- inside the namespace ---------------------------------------------------------------------
ip link set lo up
mkdir -p "$out"
rm -f "$out"/*.png "$out/report.json"
export TZ=UTC NODE_CONFIG_ENV=test
pids=()
cleanup() {
  local i
  for (( i=${#pids[@]}-1; i>=0; i-- )); do
    kill -TERM "${pids[$i]}" 2>/dev/null || true
  done
  for (( i=${#pids[@]}-1; i>=0; i-- )); do
    wait "${pids[$i]}" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. The web app, built as the explorer's e2e setup builds it (`npm run build` with
#    NODE_CONFIG_ENV=test: http on port 8081, preferred seed localhost:8081), cached by commit.
#    Twemoji's SVGs are not installed (its script downloads them from GitHub): emoji images
#    404 on the preview server, which is not the seed and not checked.
if [ "$(git -C "$explorer" rev-parse --show-toplevel 2>/dev/null || true)" = "$explorer" ]; then
  key="$(git -C "$explorer" rev-parse HEAD)"
else
  # (not http-client/seedd/: the harness's own files, copied there by run.sh and this script)
  key="src-$(cd "$explorer" && find src http-client config index.html package-lock.json vite.config.ts \
    svelte.config.js tsconfig.json -path http-client/seedd -prune -o -type f -print0 2>/dev/null |
    sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
fi
build="$TOOLS_DIR/builds/$key-$NODE_CONFIG_ENV"
if [ ! -f "$build/index.html" ]; then
  phase "building the explorer ($key, NODE_CONFIG_ENV=$NODE_CONFIG_ENV)"
  (cd "$explorer" && scripts/copy-katex-assets >/dev/null &&
    npx vite build --outDir "$build.tmp" --emptyOutDir --logLevel warn >"$out/build.log" 2>&1) ||
    { echo "vite build failed: see $out/build.log" >&2; tail -20 "$out/build.log" >&2; exit 1; }
  rm -rf "$build" && mv "$build.tmp" "$build"
  phase_done
else
  echo "== explorer build cached: $build"
fi

# 2. Fixtures and seedd, as run.sh: the same shims and globalSetup.ts.
shims="$explorer/tests/tmp/seedd-shims"
mkdir -p "$shims" "$explorer/http-client/seedd"
cp "$here/radicle-httpd" "$here/radicle-node" "$here/rad" "$shims/"
cp "$here/globalSetup.ts" "$here/vite.config.ts" "$here/fixtures.mjs" "$here/browserSetup.ts" "$explorer/http-client/seedd/"
export PATH="$shims:$PATH"
export SEEDD_BROWSER_REAL_BIN="$SEEDD_BIN" SEEDD_BIN="$here/seedd-browser"
export SEEDD_BROWSER_NEW_KEYS="${SEEDD_BROWSER_NEW_KEYS:-1}"
export SEEDD_CONTRACT_SERVER=seedd
export SEEDD_BROWSER_GOSSIP="${SEEDD_BROWSER_GOSSIP:-1}" SEEDD_BROWSER_STORAGE="${SEEDD_BROWSER_STORAGE:-copy}"
export SEEDD_BROWSER_P2P="${SEEDD_BROWSER_P2P:-127.0.0.1:8776}" SEEDD_BROWSER_PALM_P2P="${SEEDD_BROWSER_PALM_P2P:-127.0.0.1:8777}"
if [ "${BROWSER_REUSE_FIXTURES:-0}" = 1 ] && [ -d "$explorer/tests/tmp/peers/palm" ]; then
  export SEEDD_CONTRACT_REUSE_FIXTURES=1
  phase "starting seedd on the previous run's fixtures (new keys: $SEEDD_BROWSER_NEW_KEYS)"
else
  export SEEDD_CONTRACT_REUSE_FIXTURES=0
  phase "creating the explorer's fixtures and starting seedd (new keys: $SEEDD_BROWSER_NEW_KEYS)"
fi
(cd "$explorer" && exec node http-client/seedd/fixtures.mjs) >"$out/fixtures.log" 2>&1 &
pids+=($!)
fixtures_pid=$!
deadline=$(( $(now) + ${BROWSER_FIXTURES_TIMEOUT:-900} ))
until grep -q "FIXTURES READY" "$out/fixtures.log"; do
  if ! kill -0 "$fixtures_pid" 2>/dev/null || [ "$(now)" -gt "$deadline" ]; then
    echo "fixtures or seedd did not start: $out/fixtures.log says:" >&2
    tail -30 "$out/fixtures.log" >&2
    if grep -q "unknown field" "$explorer/tests/tmp/globalPeerManager.log" 2>/dev/null; then
      echo "seedd rejected its config:" >&2
      grep -m3 "unknown field" "$explorer/tests/tmp/globalPeerManager.log" >&2
      [ "$SEEDD_BROWSER_NEW_KEYS" = 1 ] && echo "(SEEDD_BROWSER_NEW_KEYS=0 leaves out the [web] and external_addresses keys)" >&2
    fi
    exit 1
  fi
  sleep 1
done
phase_done

# What radicle-httpd would name each node: the aliases in palm's node database (node
# announcements palm received) and palm's follow aliases, as httpd reads them. Only the
# expectation of check 5; seedd learns names from gossip alone.
palm_node="$explorer/tests/tmp/peers/palm/home/node"
expected_aliases="$(python3 - "$palm_node" <<'PY' 2>/dev/null || echo '{}'
import json, sqlite3, sys
d = sys.argv[1]
names = {}
for db, sql in (("node.db", "SELECT id, alias FROM nodes"), ("policies.db", "SELECT id, alias FROM following")):
    c = sqlite3.connect(f"file:{d}/{db}?mode=ro", uri=True)
    for nid, alias in c.execute(sql):
        if alias:
            names.setdefault(nid, alias)
print(json.dumps(names))
PY
)"

# 3. The built app on loopback, as the explorer's playwright webServer serves it.
phase "serving the web app (vite preview on 127.0.0.1:3001)"
(cd "$explorer" && exec node_modules/.bin/vite preview --outDir "$build" --host 127.0.0.1 --port 3001 --strictPort) \
  >"$out/preview.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 60); do
  curl -fs -o /dev/null http://127.0.0.1:3001/ && break
  sleep 0.5
done
curl -fs -o /dev/null http://127.0.0.1:3001/ || { echo "vite preview did not start: $out/preview.log" >&2; cat "$out/preview.log" >&2; exit 1; }
phase_done

# 4. Browse.
phase "browsing with $(basename "$CHROMIUM") ($("$CHROMIUM" --version 2>/dev/null | head -1 | cut -d' ' -f1-2))"
rc=0
APP_URL=http://127.0.0.1:3001 SEED=127.0.0.1:8081 OUT_DIR="$out" CHROMIUM="$CHROMIUM" \
  HTTPD_ALIASES="$expected_aliases" node "$here/browser.mjs" || rc=$?
phase_done
exit "$rc"
