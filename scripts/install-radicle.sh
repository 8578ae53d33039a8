#!/usr/bin/env bash
# Install the pinned official Radicle binaries (rad, radicle-node,
# git-remote-rad) into $RADICLE_ROOT/bin, plus the Debian packages the
# fixture scripts need. Idempotent: does nothing when the pinned versions
# are already installed. The last line printed on stdout is the bin dir;
# everything else goes to stderr.
#
# Usage: scripts/install-radicle.sh
# Env:   RADICLE_ROOT  install root (default: $HOME/.cache/seedd/radicle)
set -euo pipefail

RADICLE_ROOT="${RADICLE_ROOT:-$HOME/.cache/seedd/radicle}"
BIN_DIR="$RADICLE_ROOT/bin"

# Pinned versions: "<crate> <version> <binary>".
PINS=(
  "radicle-cli 0.23.0 rad"
  "radicle-node 0.21.1 radicle-node"
  "radicle-remote-helper 0.18.1 git-remote-rad"
)

log() { printf 'install-radicle: %s\n' "$*" >&2; }

# --- Debian packages ---------------------------------------------------------

# Runtime: git (rad requires git >= 2.31), ssh-keygen, jq (make-fixtures.sh).
RUNTIME_PKGS=(git openssh-client jq ca-certificates)
# Only needed when compiling (libgit2/sqlite/zlib C sources are vendored).
BUILD_PKGS=(gcc libc6-dev make pkg-config)

apt_updated=0
apt_install_missing() {
  local missing=() pkg
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$pkg")
    fi
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    log "missing packages ${missing[*]} and no apt-get; install them manually"
    return 1
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
  fi
  log "installing Debian packages: ${missing[*]}"
  if [ "$apt_updated" -eq 0 ]; then
    "${sudo[@]}" apt-get update -qq >&2
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >&2
}

if command -v dpkg-query >/dev/null 2>&1; then
  apt_install_missing "${RUNTIME_PKGS[@]}"
else
  for cmd in git ssh-keygen jq; do
    command -v "$cmd" >/dev/null 2>&1 || { log "missing $cmd (not a Debian system?)"; exit 1; }
  done
fi

# --- Radicle binaries --------------------------------------------------------

# Crates built from crates.io have no git checkout, so their build.rs cannot
# derive a version and `rad --version` prints "rad unknown (unknown)" unless
# RADICLE_VERSION was set at build time. We therefore accept either the pinned
# version in the --version output, or "unknown" together with cargo's own
# install record ($RADICLE_ROOT/.crates.toml) naming the pinned crate version.
pinned_ok() {
  local crate="$1" version="$2" bin="$3" out reported
  [ -x "$BIN_DIR/$bin" ] || return 1
  out="$("$BIN_DIR/$bin" --version 2>/dev/null)" || return 1
  # e.g. "rad 0.23.0 (abc1234)" or "rad unknown (unknown)"
  reported="$(printf '%s\n' "$out" | head -n1 | awk '{print $2}')"
  case "$(printf '%s\n' "$out" | head -n1 | awk '{print $1}')" in
    "$bin") ;;
    *) return 1 ;;
  esac
  if [ "$reported" = "$version" ]; then
    return 0
  fi
  if [[ ! "$reported" =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] \
    && [ -f "$RADICLE_ROOT/.crates.toml" ] \
    && grep -q "^\"$crate $version (registry+[^\"]*)\" = \\[.*\"$bin\"" "$RADICLE_ROOT/.crates.toml"; then
    return 0
  fi
  return 1
}

all_ok=1
force=()
for pin in "${PINS[@]}"; do
  read -r crate version bin <<<"$pin"
  if pinned_ok "$crate" "$version" "$bin"; then
    log "$bin: $crate $version already installed"
  else
    log "$bin: $crate $version not installed (or wrong version)"
    all_ok=0
    # cargo skips crates its install record lists even if the binary is
    # gone or broken; force a reinstall in that case.
    if [ -f "$RADICLE_ROOT/.crates.toml" ] \
      && grep -q "^\"$crate $version (" "$RADICLE_ROOT/.crates.toml"; then
      force=(--force)
    fi
  fi
done

if [ "$all_ok" -eq 0 ]; then
  if ! command -v cargo >/dev/null 2>&1; then
    log "cargo not found on PATH"
    exit 1
  fi
  if command -v dpkg-query >/dev/null 2>&1; then
    apt_install_missing "${BUILD_PKGS[@]}"
  fi
  specs=()
  for pin in "${PINS[@]}"; do
    read -r crate version _ <<<"$pin"
    specs+=("$crate@$version")
  done
  # One target dir for the three crates: cargo install otherwise builds each in a temporary
  # dir of its own, compiling the dependencies they share (radicle, libgit2, sqlite, ...) three
  # times. Kept afterwards, so a re-install (a new pin) rebuilds only what changed.
  local_target="${RADICLE_TARGET_DIR:-$RADICLE_ROOT/target}"
  log "running: CARGO_TARGET_DIR=$local_target cargo install --locked ${force[*]} --root $RADICLE_ROOT ${specs[*]}"
  t0=$SECONDS
  CARGO_TARGET_DIR="$local_target" cargo install --locked "${force[@]}" --root "$RADICLE_ROOT" \
    "${specs[@]}" >&2
  log "built and installed in $((SECONDS - t0)) s"
  for pin in "${PINS[@]}"; do
    read -r crate version bin <<<"$pin"
    if ! pinned_ok "$crate" "$version" "$bin"; then
      log "$bin still does not report $crate $version after install"
      exit 1
    fi
  done
fi

echo "$BIN_DIR"
