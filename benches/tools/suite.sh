#!/usr/bin/env bash
# Every bench at one commit, one after another (nothing else should run meanwhile), then the
# README's targets table from their JSON results. Logs: $OUT/<bench>.log, progress in
# $OUT/status. The order puts the issue 29 §2 anchors first; a run cut short still leaves a
# table of what finished (each row names its commit).
#
#   benches/tools/suite.sh [OUT]          (OUT defaults to /tmp/seedd-suite)
#
# About 2.5 hours on a 2-core machine (anchors ~16 min, clone ~25, scale 1k+10k the longest).
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-/tmp/seedd-suite}"
mkdir -p "$out"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/seedd/target}"
export PATH="$HOME/.cache/seedd/radicle/bin:$PATH"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ -n "$(git status --porcelain)" ]; then
  echo "the tree is dirty: figures belong to a commit (commit or stash first)" >&2
  exit 1
fi
echo "commit $(git rev-parse HEAD) start $(date)" > "$out/status"
# Build seedd and every bench target first, so no compile runs beside a measurement (each
# bench still checks that the release seedd is fresh: a no-op then, and no override).
cargo build --release --locked -p seedd --bins > "$out/build.log" 2>&1 &&
  cargo bench -p seedd-benches --no-run >> "$out/build.log" 2>&1 ||
  { echo "build failed: $out/build.log" | tee -a "$out/status"; exit 1; }
run() {
  local log=$1 name=$2
  shift 2
  echo "$(date +%T) start $log" >> "$out/status"
  env "$@" cargo bench -p seedd-benches --bench "$name" > "$out/$log.log" 2>&1
  echo "$(date +%T) end $log rc=$?" >> "$out/status"
}
run anchors anchors
run radicle_serve radicle_serve
run overload-off overload SEEDD_OVERLOAD_SECS=60 SEEDD_OVERLOAD_PACK_CACHE=off
run overload overload SEEDD_OVERLOAD_SECS=60
run replication replication
run p2p p2p
run wire wire
run ratelimit ratelimit
run index index
run gossip_flood gossip_flood
run gossip_scale gossip_scale
run clone clone
run hostile hostile
run web web
run web_scale web_scale
run fleet fleet
run scale scale
echo "$(date +%T) all done" >> "$out/status"
python3 benches/tools/targets.py "$CARGO_TARGET_DIR" > "$out/targets.md"
echo "targets table: $out/targets.md"
