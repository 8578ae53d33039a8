#!/usr/bin/env bash
# Generate Radicle storage fixtures with the real rad / git / git-remote-rad.
#
# Usage: scripts/make-fixtures.sh OUT_DIR
#
# Output (see scripts/README.md):
#   OUT_DIR/fixtures.json                  metadata (ids, oids, ...)
#   OUT_DIR/storage/<rid without rad:>/    copies of alice's storage repos
#   OUT_DIR/homes/{alice,bob}/             complete RAD_HOMEs (keys, config.json, storage, dbs)
#
# Idempotent: exits immediately when OUT_DIR/fixtures.json has
# "version" == FIXTURE_VERSION. Otherwise builds everything in a temporary
# directory next to OUT_DIR and moves it into place.
#
# Offline: no radicle-node is ever started; every rad/git command runs with
# RAD_SOCKET pointing at a non-existent socket, `--no-announce` /
# `-o no-sync`, and every RAD_HOME has a loopback-only config (no preferred
# seeds, no connect/listen, static peers, network "test").
#
# Env:
#   RADICLE_BIN   dir containing rad, git-remote-rad (default: output of
#                 scripts/install-radicle.sh, which installs them if needed)
set -euo pipefail

# Bump whenever the generated content changes.
FIXTURE_VERSION=1

# Fixed inputs: key seeds (RAD_KEYGEN_SEED, 32 bytes hex) and timestamps.
ALICE_SEED="$(printf 'seedd-fixture-alice' | sha256sum | cut -d' ' -f1)"
BOB_SEED="$(printf 'seedd-fixture-bob' | sha256sum | cut -d' ' -f1)"
BASE_TIME=1700000000 # 2023-11-14T22:13:20Z

usage() { echo "usage: $0 OUT_DIR" >&2; exit 2; }
log() { printf 'make-fixtures: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$#" -eq 1 ] || usage
OUT_DIR="$1"
[ -n "$OUT_DIR" ] || usage

command -v jq >/dev/null 2>&1 || die "jq is required (scripts/install-radicle.sh installs it)"

if [ -f "$OUT_DIR/fixtures.json" ]; then
  have="$(jq -r '.version // empty' "$OUT_DIR/fixtures.json" 2>/dev/null || true)"
  if [ "$have" = "$FIXTURE_VERSION" ]; then
    log "fixtures in $OUT_DIR are up to date (version $FIXTURE_VERSION)"
    exit 0
  fi
  log "fixtures in $OUT_DIR have version '${have}', want $FIXTURE_VERSION: rebuilding"
fi

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -z "${RADICLE_BIN:-}" ]; then
  RADICLE_BIN="$("$SCRIPT_DIR/install-radicle.sh" | tail -n1)"
fi
for b in rad git-remote-rad; do
  [ -x "$RADICLE_BIN/$b" ] || die "$RADICLE_BIN/$b not found"
done

mkdir -p "$(dirname "$OUT_DIR")"
OUT_PARENT="$(cd "$(dirname "$OUT_DIR")" && pwd)"
OUT_DIR="$OUT_PARENT/$(basename "$OUT_DIR")"
TMP="$(mktemp -d "$OUT_PARENT/.fixtures-tmp.XXXXXX")"
SOCK_DIR=""
NODE_PID=""
cleanup() {
  if [ -n "$NODE_PID" ]; then
    kill "$NODE_PID" 2>/dev/null || true
    wait "$NODE_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP" ${SOCK_DIR:+"$SOCK_DIR"}
}
trap cleanup EXIT

OUT="$TMP/out"       # becomes OUT_DIR
WORK="$TMP/work"     # scratch: working copies, fake HOME
HOMES="$OUT/homes"
mkdir -p "$OUT/storage" "$HOMES" "$WORK/home"
# Control sockets need a short path (sun_path is 108 bytes).
SOCK_DIR="$(mktemp -d /tmp/seedd-fx.XXXXXX)"

# --- hermetic environment ----------------------------------------------------

export PATH="$RADICLE_BIN:$PATH"
export HOME="$WORK/home"     # no user ~/.gitconfig (libgit2 reads $HOME too)
export GIT_CONFIG_NOSYSTEM=1
unset GIT_CONFIG_GLOBAL XDG_CONFIG_HOME GIT_DIR GIT_WORK_TREE SSH_AUTH_SOCK RAD_HOME RAD_DEBUG RAD_HINT
export GIT_TERMINAL_PROMPT=0
export LC_ALL=C TZ=UTC
export RAD_PASSPHRASE=""     # unencrypted keys
export RAD_SOCKET="$WORK/no-node/control.sock" # never reach a node
export NO_COLOR=1
cat >"$HOME/.gitconfig" <<'EOF'
[init]
	defaultBranch = main
[advice]
	detachedHead = false
[gc]
	auto = 0
EOF

NOW="$BASE_TIME"
# Advance the clock by one minute; used for git and Radicle (COB, sigrefs)
# timestamps so that object ids are reproducible.
tick() {
  NOW=$((NOW + 60))
  export GIT_AUTHOR_DATE="$NOW +0000" GIT_COMMITTER_DATE="$NOW"
  export RAD_LOCAL_TIME="$NOW" RAD_COMMIT_TIME="$NOW"
}
tick

# Run a command as alice / bob (their RAD_HOME, their git author).
as() {
  local who="$1"; shift
  local name
  case "$who" in
    alice) name="Alice Liddell" ;;
    bob) name="Bob Smith" ;;
    *) die "unknown user $who" ;;
  esac
  RAD_HOME="$HOMES/$who" \
    GIT_AUTHOR_NAME="$name" GIT_AUTHOR_EMAIL="$who@example.org" \
    GIT_COMMITTER_NAME="$name" GIT_COMMITTER_EMAIL="$who@example.org" \
    "$@"
}

# Run a command, showing its output only if it fails.
quiet() {
  local out="$WORK/cmd.log"
  if ! "$@" >"$out" 2>&1; then
    log "command failed: $*"
    cat "$out" >&2
    return 1
  fi
}

# Start WHO's radicle-node once, wait until it is up, then stop it.
#
# On startup the node migrates its own `rad/sigrefs` that are a single root
# commit (as written by `rad init`) to feature level "parent" by writing a
# second sigrefs commit. Real users' storage is always in that state once
# their node has run, so we do the same here, with a fixed commit time, so
# that starting a node on the fixture homes later does not rewrite refs.
# The node is offline: config.json has no listen addresses (no --listen is
# passed, so nothing listens at all), no connect peers, no preferred seeds,
# static peers and the "test" network (no bootstrap nodes).
run_node_once() {
  local who="$1" sock pid i
  sock="$SOCK_DIR/$who.sock"
  tick
  # `env` execs radicle-node, so $! is the node's own pid.
  env RAD_SOCKET="$sock" RAD_HOME="$HOMES/$who" radicle-node --log-level info \
    >"$WORK/node-$who.log" 2>&1 &
  pid=$!
  NODE_PID="$pid"
  for i in $(seq 1 200); do
    # (`rad node status` exits 0 even when the node is stopped.)
    if [ -S "$sock" ] && RAD_SOCKET="$sock" as "$who" rad node status 2>/dev/null \
      | grep -q 'Node is running'; then
      break
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      cat "$WORK/node-$who.log" >&2
      die "radicle-node for $who exited"
    fi
    [ "$i" -lt 200 ] || die "radicle-node for $who did not start"
    sleep 0.1
  done
  kill "$pid"
  wait "$pid" || true
  NODE_PID=""
  if grep -q 'Listening on' "$WORK/node-$who.log"; then
    die "radicle-node for $who listened on a socket (unexpected)"
  fi
}

# commit WHO DIR PATH CONTENT MESSAGE
commit() {
  local who="$1" dir="$2" path="$3" content="$4" msg="$5"
  mkdir -p "$dir/$(dirname "$path")"
  printf '%s\n' "$content" >"$dir/$path"
  tick
  as "$who" git -C "$dir" add -- "$path"
  as "$who" git -C "$dir" commit -q -m "$msg"
}

write_config() {
  local who="$1"
  cat >"$HOMES/$who/config.json" <<EOF
{
  "publicExplorer": "https://app.radicle.xyz/nodes/\$host/\$rid\$path",
  "preferredSeeds": [],
  "web": {
    "pinned": {
      "repositories": []
    }
  },
  "cli": {
    "hints": false
  },
  "node": {
    "alias": "$who",
    "listen": [],
    "peers": {
      "type": "static"
    },
    "connect": [],
    "externalAddresses": [],
    "network": "test",
    "log": "INFO",
    "relay": "never",
    "seedingPolicy": {
      "default": "block"
    }
  }
}
EOF
}

# --- identities --------------------------------------------------------------

make_identity() {
  local who="$1" seed="$2"
  tick
  RAD_KEYGEN_SEED="$seed" quiet as "$who" rad auth --alias "$who"
  # rad auth writes a default config (public preferred seeds, main network);
  # replace it before anything else can read it.
  write_config "$who"
  quiet as "$who" rad config # validates config.json
}

log "creating identities"
make_identity alice "$ALICE_SEED"
make_identity bob "$BOB_SEED"
# `rad self --nid` is deprecated in favour of `rad node status --only nid`,
# but the latter needs a running node; silence the deprecation warning.
ALICE_NID="$(as alice rad self --nid 2>/dev/null)"
ALICE_DID="$(as alice rad self --did)"
BOB_NID="$(as bob rad self --nid 2>/dev/null)"
BOB_DID="$(as bob rad self --did)"
if [ "$ALICE_DID" != "did:key:$ALICE_NID" ] || [ "$BOB_DID" != "did:key:$BOB_NID" ]; then
  die "unexpected rad self output: $ALICE_NID $ALICE_DID $BOB_NID $BOB_DID"
fi
log "alice = $ALICE_NID, bob = $BOB_NID"

# rad_init WHO DIR NAME DESCRIPTION BRANCH VISIBILITY -> prints RID
rad_init() {
  local who="$1" dir="$2" name="$3" desc="$4" branch="$5" vis="$6"
  tick
  (cd "$dir" && quiet as "$who" rad init --name "$name" --description "$desc" \
    --default-branch "$branch" "--$vis" --no-confirm)
  (cd "$dir" && as "$who" rad inspect --rid)
}

# --- heartwood-fixture -------------------------------------------------------

log "creating heartwood-fixture"
W="$WORK/heartwood-fixture"
as alice git init -q -b main "$W"
commit alice "$W" README.md "# heartwood-fixture

Test repository for seedd." "Initial commit"
commit alice "$W" src/lib.rs "pub fn answer() -> u32 { 42 }" "Add library"
commit alice "$W" src/bin/main.rs 'fn main() { println!("{}", 42); }' "Add binary"
as alice git -C "$W" tag v0.9 # lightweight
commit alice "$W" docs/guide/usage.md "Run it." "Add usage guide"
tick
as alice git -C "$W" tag -a v1.0 -m "Release 1.0"
# feature branch with its own commit
as alice git -C "$W" checkout -q -b feature
commit alice "$W" src/feature/mod.rs "pub mod flag;" "Start feature"
as alice git -C "$W" checkout -q main

HW_RID="$(rad_init alice "$W" heartwood-fixture "Radicle fixture repository" main public)"
log "heartwood-fixture = $HW_RID"

# More commits on main after init, pushed through git-remote-rad.
commit alice "$W" src/lib.rs "pub fn answer() -> u32 { 42 }
pub fn question() -> &'static str { \"?\" }" "Add question"
commit alice "$W" tests/data/sample.txt "sample" "Add test data"
tick
quiet as alice git -C "$W" push -o no-sync rad main feature v0.9 v1.0

# Issue (COB), no node needed with --no-announce.
tick
(cd "$W" && quiet as alice rad issue open --no-announce \
  --title "Fixture issue" --description "An issue created by make-fixtures.sh.")

# Patch via `git push rad HEAD:refs/patches` from a branch with an extra commit.
as alice git -C "$W" checkout -q -b patch-branch main
commit alice "$W" src/patch/fix.rs "// fix" "Fix something"
tick
quiet as alice git -C "$W" push -o no-sync \
  -o "patch.message=Fixture patch" -o "patch.message=A patch created by make-fixtures.sh." \
  rad HEAD:refs/patches
as alice git -C "$W" checkout -q main

# Add bob as a second delegate, threshold 1 (alice alone is a majority of the
# current delegate set, so the revision is accepted immediately).
tick
quiet as alice rad id update --repo "$HW_RID" --no-confirm \
  --title "Add bob" --description "Add bob as a delegate." \
  --delegate "$BOB_DID" --threshold 1

# Bob "clones" alice's storage repo with plain git (no node), pushes his
# default branch into his namespace with git-remote-rad (which signs his
# refs), then alice fetches bob's namespace back with plain git.
log "creating bob's namespace"
HW_Z="${HW_RID#rad:}"
A_REPO="$HOMES/alice/storage/$HW_Z"
B_REPO="$HOMES/bob/storage/$HW_Z"
git init -q --bare "$B_REPO"
rm -rf "$B_REPO/hooks" "$B_REPO/info" "$B_REPO/description"
git -C "$B_REPO" config user.name bob
git -C "$B_REPO" config user.email "bob@$BOB_NID"
git -C "$B_REPO" fetch -q --no-write-fetch-head "$A_REPO" '+refs/*:refs/*'
git -C "$B_REPO" symbolic-ref HEAD refs/heads/main
BW="$WORK/heartwood-fixture-bob"
as bob git clone -q "$B_REPO" "$BW"
(cd "$BW" && quiet as bob rad init --existing "$HW_RID" --no-confirm)
tick
quiet as bob git -C "$BW" push -o no-sync rad main
run_node_once bob
git -C "$A_REPO" fetch -q --no-write-fetch-head "$B_REPO" \
  "+refs/namespaces/$BOB_NID/refs/*:refs/namespaces/$BOB_NID/refs/*"

# --- secret-fixture (private) ------------------------------------------------

log "creating secret-fixture"
W="$WORK/secret-fixture"
as alice git init -q -b main "$W"
commit alice "$W" SECRET.md "Nothing to see here." "Initial commit"
SECRET_RID="$(rad_init alice "$W" secret-fixture "Private fixture repository" main private)"

# --- small-fixture -----------------------------------------------------------

log "creating small-fixture"
W="$WORK/small-fixture"
as alice git init -q -b master "$W"
commit alice "$W" README "small" "Initial commit"
SMALL_RID="$(rad_init alice "$W" small-fixture "Small fixture repository" master public)"

# --- sigrefs migration (see run_node_once) -----------------------------------

log "running alice's node once (offline)"
run_node_once alice

# --- verification ------------------------------------------------------------

log "verifying"
as alice rad ls --all >&2
for rid in "$HW_RID" "$SECRET_RID" "$SMALL_RID"; do
  z="${rid#rad:}"
  repo="$HOMES/alice/storage/$z"
  doc="$(git -C "$repo" cat-file blob refs/rad/id:embeds/radicle.json)"
  branch="$(jq -r '.payload["xyz.radicle.project"].defaultBranch' <<<"$doc")"
  [ "$(git -C "$repo" symbolic-ref HEAD)" = "refs/heads/$branch" ] \
    || die "$rid: HEAD is not a symref to refs/heads/$branch"
  git -C "$repo" rev-parse -q --verify "refs/heads/$branch^{commit}" >/dev/null \
    || die "$rid: missing canonical refs/heads/$branch"
  git -C "$repo" rev-parse -q --verify "refs/rad/id^{commit}" >/dev/null \
    || die "$rid: missing canonical refs/rad/id"
  [ "$(git -C "$repo" rev-parse "refs/heads/$branch")" = \
    "$(git -C "$repo" rev-parse "refs/namespaces/$ALICE_NID/refs/heads/$branch")" ] \
    || die "$rid: canonical $branch differs from alice's"
  as alice rad inspect --refs "$rid" >/dev/null
  for nid in $(git -C "$repo" for-each-ref --format='%(refname)' refs/namespaces/ \
    | sed -n 's#^refs/namespaces/\([^/]*\)/refs/rad/sigrefs$#\1#p'); do
    git -C "$repo" rev-parse -q --verify "refs/namespaces/$nid/refs/rad/sigrefs^1" >/dev/null \
      || die "$rid: sigrefs of $nid were not migrated (no parent commit)"
  done
  as alice rad inspect --sigrefs "$rid" >&2
  git -C "$repo" fsck --no-dangling --no-progress >&2 || die "$rid: git fsck failed"
done

# --- fixtures.json -----------------------------------------------------------

# repo_json NAME RID -> JSON object on stdout
repo_json() {
  local name="$1" rid="$2" z repo doc branch head ns tags branches
  z="${rid#rad:}"
  repo="$HOMES/alice/storage/$z"
  ns="refs/namespaces/$ALICE_NID/refs"
  doc="$(git -C "$repo" cat-file blob refs/rad/id:embeds/radicle.json)"
  branch="$(jq -r '.payload["xyz.radicle.project"].defaultBranch' <<<"$doc")"
  head="$(git -C "$repo" rev-parse "refs/heads/$branch")"
  tags="$(git -C "$repo" for-each-ref --format='%(refname:lstrip=5) %(objectname)' "$ns/tags/" \
    | jq -R -n '[inputs | split(" ") | {(.[0]): .[1]}] | add // {}')"
  branches="$(git -C "$repo" for-each-ref --format='%(refname:lstrip=5) %(objectname)' "$ns/heads/" \
    | grep -v '^patches/' \
    | jq -R -n '[inputs | split(" ") | {(.[0]): .[1]}] | add // {}')"
  local issue_id patch_id patch_head=""
  issue_id="$(git -C "$repo" for-each-ref --format='%(refname:lstrip=6)' "$ns/cobs/xyz.radicle.issue/" | head -n1)"
  patch_id="$(git -C "$repo" for-each-ref --format='%(refname:lstrip=6)' "$ns/cobs/xyz.radicle.patch/" | head -n1)"
  if [ -n "$patch_id" ]; then
    patch_head="$(git -C "$repo" rev-parse "$ns/heads/patches/$patch_id")"
    git -C "$repo" cat-file -e "$patch_head^{commit}"
    if git -C "$repo" merge-base --is-ancestor "$patch_head" "refs/heads/$branch"; then
      die "$rid: patch head is on $branch"
    fi
  fi
  local namespaces
  namespaces="$(git -C "$repo" for-each-ref --format='%(refname)' refs/namespaces/ \
    | sed -n 's#^refs/namespaces/\([^/]*\)/refs/rad/sigrefs$#\1#p' \
    | jq -R -n '[inputs]')"
  jq -n \
    --arg name "$name" --arg rid "$rid" --arg branch "$branch" --arg head "$head" \
    --argjson doc "$doc" --argjson commits "$(git -C "$repo" rev-list --count "$head")" \
    --argjson tags "$tags" --argjson branches "$branches" \
    --arg issue_id "$issue_id" --arg patch_id "$patch_id" --arg patch_head "$patch_head" \
    --argjson namespaces "$namespaces" \
    --arg identity "$(git -C "$repo" rev-parse refs/rad/id)" \
    '{
      name: $name,
      rid: $rid,
      path: ("storage/" + ($rid | ltrimstr("rad:"))),
      default_branch: $branch,
      private: (($doc.visibility.type // "public") == "private"),
      delegates: $doc.delegates,
      threshold: $doc.threshold,
      head: $head,
      commits: $commits,
      tags: $tags,
      branches: $branches,
      issue_id: (if $issue_id == "" then null else $issue_id end),
      patch_id: (if $patch_id == "" then null else $patch_id end),
      patch_head: (if $patch_head == "" then null else $patch_head end),
      namespaces: $namespaces,
      identity_head: $identity
    }'
}

log "writing fixtures.json"
{
  repo_json heartwood-fixture "$HW_RID"
  repo_json secret-fixture "$SECRET_RID"
  repo_json small-fixture "$SMALL_RID"
} | jq -s \
  --argjson version "$FIXTURE_VERSION" \
  --arg alice_nid "$ALICE_NID" --arg alice_did "$ALICE_DID" \
  --arg bob_nid "$BOB_NID" --arg bob_did "$BOB_DID" \
  --arg rad_version "$(rad --version | head -n1)" \
  '{
    version: $version,
    generator: {script: "scripts/make-fixtures.sh", rad: $rad_version},
    deterministic: true,
    alice: {alias: "alice", nid: $alice_nid, did: $alice_did, home: "homes/alice"},
    bob: {alias: "bob", nid: $bob_nid, did: $bob_did, home: "homes/bob"},
    repos: (map({(.name): .}) | add)
  }' >"$OUT/fixtures.json.tmp"

# Copy alice's storage repos (exact copies) to OUT/storage.
for rid in "$HW_RID" "$SECRET_RID" "$SMALL_RID"; do
  cp -a "$HOMES/alice/storage/${rid#rad:}" "$OUT/storage/"
done
# Runtime leftovers that must not be shipped.
rm -f "$HOMES"/*/node/control.sock "$HOMES"/*/node/node.log
mv "$OUT/fixtures.json.tmp" "$OUT/fixtures.json"

# --- move into place -----------------------------------------------------------

if [ -e "$OUT_DIR" ]; then
  mv -T "$OUT_DIR" "$TMP/old"
fi
mv -T "$OUT" "$OUT_DIR"
log "fixtures written to $OUT_DIR"
jq -c '{version, alice: .alice.nid, bob: .bob.nid, repos: (.repos | map_values(.rid))}' "$OUT_DIR/fixtures.json" >&2
