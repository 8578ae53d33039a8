#!/usr/bin/env bash
# Install the system packages seedd needs to build and test, only when missing.
# RocksDB's bindings need libclang; tests need git and ssh-keygen.
set -euo pipefail
need=()
command -v git >/dev/null 2>&1 || need+=(git)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v clang >/dev/null 2>&1 || need+=(clang)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v g++ >/dev/null 2>&1 || need+=(g++)
if [ "${#need[@]}" -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
