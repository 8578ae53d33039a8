#!/usr/bin/env bash
# Install what scripts/check-observability.sh and tests/tests/observability.rs need. Idempotent:
# each tool is installed only when it is missing.
#
#   apt (system)      prometheus 2.42 (Debian 12): `promtool` and the `prometheus` server
#   ops/tools/        @grafana/schema 13.2.3 + typescript 7.0.2 from ops/tools/package-lock.json
#                     (`npm ci`; node_modules/ is gitignored)
#   python3           pyyaml (pip), used by ops/tools/*.py
#
# Usage: scripts/install-observability-tools.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

apt_need=()
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || apt_need+=(prometheus)
command -v python3 >/dev/null 2>&1 || apt_need+=(python3 python3-pip)
command -v npm >/dev/null 2>&1 || apt_need+=(nodejs npm)
if [ "${#apt_need[@]}" -gt 0 ]; then
  echo "install-observability-tools: apt-get install ${apt_need[*]}" >&2
  $SUDO apt-get update -qq >&2
  # The Debian package would start nothing here (no systemd), but keep the postinst quiet.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${apt_need[@]}" >&2
fi

if ! python3 -c 'import yaml' >/dev/null 2>&1; then
  echo "install-observability-tools: pip install pyyaml" >&2
  python3 -m pip install -q pyyaml >&2 ||
    python3 -m pip install -q --break-system-packages pyyaml >&2
fi

T=ops/tools
want_schema="13.2.3"
want_tsc="7.0.2"
have() { node -p "require('./$T/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(have @grafana/schema)" != "$want_schema" ] || [ "$(have typescript)" != "$want_tsc" ]; then
  echo "install-observability-tools: npm ci in $T" >&2
  (cd "$T" && npm ci -q --no-audit --no-fund >&2)
fi

promtool --version 2>&1 | head -n 1 >&2
echo "install-observability-tools: ok" >&2
