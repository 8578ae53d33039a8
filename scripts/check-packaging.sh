#!/usr/bin/env bash
# Packaging checks: Helm chart, rendered Kubernetes manifests, Dockerfiles, and a real image build
# and run. Offline apart from Debian apt (docker.io, debootstrap, apt inside the image build).
#
#   scripts/check-packaging.sh              everything
#   scripts/check-packaging.sh --no-docker  skip the image build and run
#   scripts/check-packaging.sh --sync       first copy the committed ops/alerts/seedd-rules.yml and
#                                           grafana/*.json into helm/seedd/files/ (then check)
#
# Steps: copies in the chart == their sources; Dockerfile and docker/Dockerfile.prebuilt share the
# runtime stage; hadolint; helm lint --strict (defaults and every ci/*-values.yaml); helm template
# of each; wrong values must fail; kubernetes-validate --strict (oldest and newest Kubernetes);
# every rendered seedd config passes `seedd config check`; yamllint; checkov (kubernetes, helm,
# dockerfile; skips in .checkov.yaml); helm package; then (unless --no-docker) cargo build
# --release, a private dockerd (--bridge=none --iptables=false, data in ~/.cache/seedd/docker),
# a debootstrap base imported as debian:bookworm-slim, DOCKER_BUILDKIT=0 docker build of
# docker/Dockerfile.prebuilt, and a read-only container on loopback ports that must answer
# /readyz, report healthy, serve a clone (when the test fixtures exist) and stop cleanly;
# dockerd is stopped at the end whatever happens.
#
# Environment: CARGO_TARGET_DIR (default ~/.cache/seedd/target), SEEDD_TOOLS (tool cache,
# default ~/.cache/seedd/tools), SEEDD_DOCKER_ROOT (dockerd data, default ~/.cache/seedd/docker),
# SEEDD_BIN_DIR (use seedd/seedctl from there instead of building), SEEDD_FIXTURES_DIR.
# Exit status: 0 when every step passed; 1 with the list of failed steps otherwise.
# "cond && echo ok || { echo bad; ok=1; }" is used on purpose below (echo does not fail).
# shellcheck disable=SC2015
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT="$PWD"

docker=1
sync=0
for arg in "$@"; do
  case "$arg" in
    --no-docker) docker=0 ;;
    --sync) sync=1 ;;
    -h | --help)
      sed -n '2,28p' "$0"
      exit 0
      ;;
    *)
      echo "check-packaging.sh: unknown argument $arg (see --help)" >&2
      exit 2
      ;;
  esac
done

started=$(date +%s)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/seedd/target}"
CHART=helm/seedd
KUBE_VERSIONS=(1.25.0 1.37.0) # the chart's kubeVersion floor and the newest schema bundled
NS=seedd-ci

install_args=()
[ "$docker" = 1 ] || install_args+=(--no-docker)
tool_path="$(bash scripts/install-packaging-tools.sh "${install_args[@]}" | tail -n 1)" || {
  echo "check-packaging: installing the tools failed" >&2
  exit 1
}
export PATH="$tool_path:$PATH"

WORK="$(mktemp -d /tmp/seedd-packaging.XXXXXX)"
OUT="$WORK/rendered"
mkdir -p "$OUT"

failed=()
skipped=()
step() { # step NAME CMD...: run, record a failure, keep going
  local name="$1"
  shift
  echo
  echo "== $name"
  if "$@"; then
    echo "ok: $name"
  else
    echo "FAILED: $name"
    failed+=("$name")
  fi
}

# ---------------------------------------------------------------------------------------------
# Copies inside the chart: Helm cannot read files outside it, and symlinks do not work
# (a dangling one breaks lint/template/package, and checkov's helm runner rejects the warning
# helm prints for any symlink). Sources: ops/alerts/seedd-rules.yml and grafana/*.json.
# The copies mirror the sources as committed (HEAD): in CI that is the checkout; on a shared
# machine it keeps other people's uncommitted edits out of the chart. Outside git: the files.
in_git() { git rev-parse --verify -q HEAD >/dev/null 2>&1; }
source_list() { # committed ops/alerts/seedd-rules.yml and grafana/*.json
  if in_git; then
    git ls-tree --name-only HEAD -- ops/alerts/seedd-rules.yml
    git ls-tree --name-only HEAD -- grafana/ | grep -E '^grafana/[^/]+\.json$'
  else
    ls ops/alerts/seedd-rules.yml grafana/*.json 2>/dev/null
  fi
  return 0
}
source_content() { if in_git; then git show "HEAD:$1"; else cat "$1"; fi; }
copy_of() {
  case "$1" in
    ops/alerts/seedd-rules.yml) echo "$CHART/files/prometheus/seedd-rules.yml" ;;
    grafana/*) echo "$CHART/files/grafana/$(basename "$1")" ;;
  esac
}
existing_copies() {
  local f
  for f in "$CHART"/files/prometheus/*.yml "$CHART"/files/grafana/*.json; do
    [ -f "$f" ] && echo "$f"
  done
  return 0
}

sync_copies() {
  mkdir -p "$CHART/files/prometheus" "$CHART/files/grafana"
  local src dst
  for src in $(source_list); do
    dst="$(copy_of "$src")"
    source_content "$src" >"$WORK/src"
    cmp -s "$WORK/src" "$dst" || { cp "$WORK/src" "$dst" && echo "copied $src (HEAD) -> $dst"; }
  done
  local want
  want="$(for src in $(source_list); do copy_of "$src"; done)"
  for dst in $(existing_copies); do
    grep -qxF "$dst" <<<"$want" || { rm "$dst" && echo "removed stale $dst"; }
  done
  return 0
}

check_copies() {
  local ok=0 src dst n=0
  for src in $(source_list); do
    n=$((n + 1))
    dst="$(copy_of "$src")"
    source_content "$src" >"$WORK/src"
    if [ ! -f "$dst" ]; then
      echo "missing copy: $dst (of $src)"
      ok=1
    elif ! cmp -s "$WORK/src" "$dst"; then
      echo "out of date: $dst differs from the committed $src"
      diff -u "$dst" "$WORK/src" | head -20
      ok=1
    fi
  done
  local want
  want="$(for src in $(source_list); do copy_of "$src"; done)"
  for dst in $(existing_copies); do
    grep -qxF "$dst" <<<"$want" || {
      echo "stale copy: $dst has no committed source"
      ok=1
    }
  done
  [ "$ok" = 0 ] || echo "fix: scripts/check-packaging.sh --sync, then commit $CHART/files"
  echo "$n file(s) shipped from ops/alerts and grafana"
  return "$ok"
}

# The runtime stage of both Dockerfiles, minus the line that copies the binaries.
runtime_stage() {
  sed -n '/^FROM debian:bookworm-slim AS runtime$/,$p' "$1" | grep -v '^COPY .* /usr/local/bin/$'
}
check_dockerfiles_in_sync() {
  local a b
  a="$(runtime_stage Dockerfile)"
  b="$(runtime_stage docker/Dockerfile.prebuilt)"
  [ -n "$a" ] || { echo "Dockerfile: no 'FROM debian:bookworm-slim AS runtime' stage"; return 1; }
  [ "$(grep -c '^COPY .* /usr/local/bin/$' docker/Dockerfile.prebuilt)" = 1 ] || {
    echo "docker/Dockerfile.prebuilt: expected exactly one COPY … /usr/local/bin/ line"
    return 1
  }
  if [ "$a" != "$b" ]; then
    echo "runtime stages differ (Dockerfile vs docker/Dockerfile.prebuilt):"
    diff <(echo "$a") <(echo "$b")
    return 1
  fi
  if grep -q '^FROM rust' docker/Dockerfile.prebuilt; then
    echo "docker/Dockerfile.prebuilt must not use the Rust builder image"
    return 1
  fi
}

# ---------------------------------------------------------------------------------------------
# Helm
values_files() { # "default" plus every ci/*-values.yaml
  echo default
  ls "$CHART"/ci/*-values.yaml
}
values_args() { [ "$1" = default ] || echo "-f $1"; }
name_of() { [ "$1" = default ] && echo default || basename "$1" -values.yaml; }

lint_all() {
  local v ok=0
  for v in $(values_files); do
    # shellcheck disable=SC2046
    helm lint --strict --quiet "$CHART" --namespace "$NS" $(values_args "$v") >"$WORK/lint.log" 2>&1 || {
      echo "helm lint --strict $(values_args "$v"):"
      cat "$WORK/lint.log"
      ok=1
    }
  done
  return "$ok"
}

template_all() {
  local v ok=0
  for v in $(values_files); do
    # shellcheck disable=SC2046
    helm template ci "$CHART" --namespace "$NS" --kube-version "${KUBE_VERSIONS[0]}" \
      $(values_args "$v") >"$OUT/$(name_of "$v").yaml" 2>"$WORK/template.log" || {
      echo "helm template $(values_args "$v"):"
      cat "$WORK/template.log"
      ok=1
    }
    echo "$(name_of "$v"): $(grep -c '^kind:' "$OUT/$(name_of "$v").yaml") objects"
  done
  return "$ok"
}

# NOTES.txt is only rendered by `helm install`: render it through a wrapper template.
notes_all() {
  local v ok=0 nc="$WORK/notes-chart"
  cp -r "$CHART" "$nc"
  printf '%s\n' 'apiVersion: v1' 'kind: ConfigMap' 'metadata: {name: notes}' 'data:' \
    '  notes: {{ include (print $.Template.BasePath "/NOTES.txt") . | quote }}' >"$nc/templates/zz-notes.yaml"
  for v in $(values_files); do
    # shellcheck disable=SC2046
    helm template ci "$nc" --namespace "$NS" $(values_args "$v") --show-only templates/zz-notes.yaml \
      >"$WORK/notes.yaml" 2>&1 && grep -q 'seedd id' "$WORK/notes.yaml" || {
      echo "NOTES.txt with $(values_args "$v"):"
      tail -5 "$WORK/notes.yaml"
      ok=1
    }
  done
  return "$ok"
}

# Values that must be refused, each with the message it must print.
template_refuses() {
  local ok=0 expect args out
  while IFS='|' read -r expect args; do
    # shellcheck disable=SC2086
    if out="$(helm template ci "$CHART" $args 2>&1)"; then
      echo "accepted but must fail: $args"
      ok=1
    elif ! grep -qF "$expect" <<<"$out"; then
      echo "failed without \"$expect\": $args"
      echo "$out" | tail -3
      ok=1
    fi
  done <<'EOF'
replicas has 2 entries but replicaCount is 1|--set replicas[0].alias=a --set replicas[1].alias=b
keys.existingSecret is the key of a single replica|--set replicaCount=2 --set keys.existingSecret=k
would announce the same address for every replica|--set replicaCount=2 --set p2p.externalAddresses[0]=a.example:8776
http.tls.enabled needs http.tls.existingSecret|--set http.tls.enabled=true
is also the nid of replicas[0]|--set replicaCount=2 --set replicas[0].nid=z6MkeYAdpK8EPmUhABhVB2k6Bd6kSGzrh3e6QoUjxM4U48jz --set replicas[1].nid=z6MkeYAdpK8EPmUhABhVB2k6Bd6kSGzrh3e6QoUjxM4U48jz
persistence.existingClaim holds one replica's data|--set replicaCount=2 --set persistence.existingClaim=c
Does not match pattern|--set replicas[0].nid=z6Mk-not-a-nid
must be one of the following|--set p2p.relay=sometimes
Additional property typo is not allowed|--set p2p.typo=1
Must be greater than or equal to 30|--set terminationGracePeriodSeconds=10
is the node key's identity|--set identities[0].name=default --set identities[0].port=8777
is already used by p2p.port|--set identities[0].name=a --set identities[0].port=8776
is also the name of identities[0]|--set identities[0].name=a --set identities[0].port=8777 --set identities[1].name=a --set identities[1].port=8778
would announce the same address for every replica: use its externalAddressTemplate|--set replicaCount=2 --set identities[0].name=a --set identities[0].port=8777 --set identities[0].externalAddresses[0]=x.example:8777
no identity b in identities|--set identities[0].name=a --set identities[0].port=8777 --set replicas[0].identities.b.service.nodePort=30000
EOF
  return "$ok"
}

validate_all() {
  local kv ok=0
  for kv in "${KUBE_VERSIONS[@]}"; do
    # CRDs (ServiceMonitor, PrometheusRule) only get a warning: no schema bundled.
    kubernetes-validate --strict --quiet -k "$kv" "$OUT"/*.yaml || ok=1
  done
  return "$ok"
}

# Every config file the chart renders must be accepted by seedd itself (unknown keys, bad
# values). TLS files must exist for `config check`: point it at empty ones.
seedd_bin() {
  local d
  for d in "${SEEDD_BIN_DIR:-}" "$CARGO_TARGET_DIR/release" "$CARGO_TARGET_DIR/debug"; do
    [ -n "$d" ] && [ -x "$d/seedd" ] && { echo "$d/seedd"; return 0; }
  done
  return 1
}
config_check_all() {
  local bin f ok=0
  bin="$(seedd_bin)" || {
    echo "no seedd binary (build one, or run without --no-docker)"
    return 1
  }
  mkdir -p "$WORK/toml"
  python3 - "$OUT" "$WORK/toml" <<'PY' || return 1
import pathlib, sys, yaml
out, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
n = 0
for f in sorted(out.glob("*.yaml")):
    for doc in yaml.safe_load_all(f.read_text()):
        if doc and doc.get("kind") == "ConfigMap" and doc["metadata"]["name"].endswith("-config"):
            for key, text in doc["data"].items():
                (dst / f"{f.stem}--{key}").write_text(text)
                n += 1
        # A fleet's placement (checked by `seedd front --check`; the seeds' configs name it).
        if doc and doc.get("kind") == "ConfigMap" and doc["metadata"]["name"].endswith("-placement"):
            (dst / f"{f.stem}.placement").write_text(doc["data"]["placement.toml"])
print(f"{n} config files rendered")
PY
  : >"$WORK/tls.crt"
  : >"$WORK/tls.key"
  for f in "$WORK"/toml/*.placement; do
    [ -e "$f" ] || continue
    "$bin" front --check --placement "$f" >/dev/null 2>"$WORK/check.log" || {
      echo "$(basename "$f"): $(cat "$WORK/check.log")"
      ok=1
    }
  done
  for f in "$WORK"/toml/*.toml; do
    local placement vars=(SEEDD_HTTP__TLS__CERT="$WORK/tls.crt" SEEDD_HTTP__TLS__KEY="$WORK/tls.key")
    placement="$WORK/toml/$(basename "$f" | sed 's/--.*//').placement"
    [ -e "$placement" ] && vars+=(SEEDD_FLEET__PLACEMENT="$placement")
    env "${vars[@]}" "$bin" config check "$f" >/dev/null 2>"$WORK/check.log" || {
      echo "$(basename "$f"): $(cat "$WORK/check.log")"
      ok=1
    }
  done
  return "$ok"
}

yamllint_all() {
  local ok=0
  yamllint -c .yamllint --strict "$CHART/values.yaml" "$CHART"/ci/*.yaml || ok=1
  # Rendered output: no line-length limit (dashboard JSON and alert texts come as they are).
  yamllint --strict -d "{extends: $ROOT/.yamllint, rules: {line-length: disable}}" "$OUT"/*.yaml || ok=1
  return "$ok"
}

# The PrometheusRule's groups must still be valid Prometheus rules (when promtool is installed,
# e.g. by scripts/install-observability-tools.sh).
promtool_rules() {
  if ! command -v promtool >/dev/null 2>&1; then
    skipped+=("promtool check of the PrometheusRule (no promtool)")
    echo "no promtool"
    return 0
  fi
  python3 - "$OUT" "$WORK/rules" <<'PY' || return 1
import pathlib, sys, yaml
out, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
dst.mkdir(exist_ok=True)
for f in sorted(out.glob("*.yaml")):
    for doc in yaml.safe_load_all(f.read_text()):
        if doc and doc.get("kind") == "PrometheusRule":
            (dst / f"{f.stem}.yml").write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}))
PY
  local f ok=0 n=0
  for f in "$WORK"/rules/*.yml; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    promtool check rules "$f" >"$WORK/promtool.log" 2>&1 || { cat "$WORK/promtool.log"; ok=1; }
  done
  echo "$n PrometheusRule(s) checked"
  return "$ok"
}

checkov_all() {
  local ok=0
  mkdir -p "$WORK/checkov"
  # Each framework on its own: a summary line per run, details only for failures.
  checkov --config-file .checkov.yaml --framework kubernetes -d "$OUT" >"$WORK/checkov/k8s.log" 2>&1 || ok=1
  checkov --config-file .checkov.yaml --framework helm -d "$CHART" >"$WORK/checkov/helm.log" 2>&1 || ok=1
  checkov --config-file .checkov.yaml --framework dockerfile \
    -f Dockerfile -f docker/Dockerfile.prebuilt >"$WORK/checkov/docker.log" 2>&1 || ok=1
  local l
  for l in k8s helm docker; do
    echo "checkov $l: $(grep -E '^Passed checks' "$WORK/checkov/$l.log" | head -1)"
    grep -q 'Failed checks: [1-9]' "$WORK/checkov/$l.log" && grep -E '^(Check|	FAILED|FAILED)' -A1 "$WORK/checkov/$l.log" | head -60
    grep -q '^Passed checks' "$WORK/checkov/$l.log" || { tail -20 "$WORK/checkov/$l.log"; ok=1; }
  done
  return "$ok"
}

package_chart() {
  helm package "$CHART" -d "$WORK/pkg" >/dev/null &&
    helm template ci "$WORK"/pkg/seedd-*.tgz --namespace "$NS" -f "$CHART/ci/replicas-values.yaml" >/dev/null &&
    echo "packaged $(basename "$WORK"/pkg/seedd-*.tgz): $(tar tzf "$WORK"/pkg/seedd-*.tgz | wc -l) files"
}

# ---------------------------------------------------------------------------------------------
# Image: build the runtime stage from host binaries and run it.
DOCKERD_PID=""
CONTAINER=""
DOCKER_EXEC=""
stop_docker() {
  if [ -n "$CONTAINER" ]; then
    docker rm -f "$CONTAINER" >/dev/null 2>&1 || true
    CONTAINER=""
  fi
  local ctrd="" i
  [ -n "$DOCKER_EXEC" ] && ctrd="$(cat "$DOCKER_EXEC/exec/containerd/containerd.pid" 2>/dev/null)"
  if [ -n "$DOCKERD_PID" ] && kill -0 "$DOCKERD_PID" 2>/dev/null; then
    kill -TERM "$DOCKERD_PID" 2>/dev/null || true
    for i in $(seq 1 60); do
      kill -0 "$DOCKERD_PID" 2>/dev/null || break
      sleep 0.5
    done
    if kill -0 "$DOCKERD_PID" 2>/dev/null; then
      echo "dockerd $DOCKERD_PID did not stop; killing it"
      kill -KILL "$DOCKERD_PID" 2>/dev/null || true
    fi
    wait "$DOCKERD_PID" 2>/dev/null || true
    echo "dockerd stopped"
  fi
  # dockerd's own containerd (its child) exits right after it.
  if [ -n "$ctrd" ]; then
    for i in $(seq 1 20); do
      kill -0 "$ctrd" 2>/dev/null || break
      sleep 0.5
    done
    kill -0 "$ctrd" 2>/dev/null && { echo "stopping containerd $ctrd"; kill -TERM "$ctrd" 2>/dev/null; }
  fi
  DOCKERD_PID=""
  # dockerd's own containerd lives under the exec root and exits with dockerd; dockerd leaves
  # its netns bind mount (exec/netns/default) mounted: unmount whatever is left under it.
  if [ -n "$DOCKER_EXEC" ]; then
    local m
    while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || echo "could not unmount $m"
    done < <(awk -v d="$DOCKER_EXEC/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r)
    rm -rf "$DOCKER_EXEC" 2>/dev/null
  fi
  DOCKER_EXEC=""
  return 0
}
cleanup() {
  stop_docker
  exec 9>&- 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build_binaries() {
  if [ -n "${SEEDD_BIN_DIR:-}" ]; then
    echo "using binaries from SEEDD_BIN_DIR=$SEEDD_BIN_DIR"
    BIN_DIR="$SEEDD_BIN_DIR"
  else
    cargo build --release --locked -p seedd -p seedctl 2>&1 | tail -n 3 || return 1
    BIN_DIR="$CARGO_TARGET_DIR/release"
  fi
  [ -x "$BIN_DIR/seedd" ] && [ -x "$BIN_DIR/seedctl" ]
}

start_dockerd() {
  local droot="${SEEDD_DOCKER_ROOT:-$HOME/.cache/seedd/docker}"
  mkdir -p "$droot"
  # One check at a time per data root.
  exec 9>"$droot.lock"
  flock -w 600 9 || { echo "another check holds $droot.lock"; return 1; }
  DOCKER_EXEC="$(mktemp -d /tmp/seedd-dockerd.XXXXXX)"
  export DOCKER_HOST="unix://$DOCKER_EXEC/docker.sock"
  # No docker0 bridge (it would take 172.17/16) and no iptables rules: containers use
  # --network=host (loopback) or none.
  dockerd --data-root "$droot" --exec-root "$DOCKER_EXEC/exec" --pidfile "$DOCKER_EXEC/dockerd.pid" \
    -H "$DOCKER_HOST" --bridge=none --iptables=false --ip6tables=false --ip-forward=false \
    --ip-masq=false --userland-proxy=false >"$WORK/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  local i
  for i in $(seq 1 60); do
    docker version >/dev/null 2>&1 && { echo "dockerd $DOCKERD_PID up (data root $droot)"; return 0; }
    kill -0 "$DOCKERD_PID" 2>/dev/null || break
    sleep 0.5
  done
  echo "dockerd did not start:"
  tail -20 "$WORK/dockerd.log"
  return 1
}

# debian:bookworm-slim cannot be pulled: import a debootstrap minbase rootfs under that name
# (the legacy builder then uses the local image). Made like the official slim image: no docs,
# man pages or locales from later installs, apt caches cleaned after each install. The tarball
# is cached in the tool cache; BASE_ID names its recipe (change it to rebuild).
BASE_ID=debootstrap-minbase-slim-1
base_image() {
  if [ "$(docker image inspect -f '{{index .Config.Labels "org.seedd.base"}}' debian:bookworm-slim 2>/dev/null)" = "$BASE_ID" ]; then
    echo "debian:bookworm-slim present ($BASE_ID)"
    return 0
  fi
  local tools="${SEEDD_TOOLS:-$HOME/.cache/seedd/tools}" tarball mirror r="$WORK/rootfs"
  tarball="$tools/debian-bookworm-$BASE_ID.tar"
  if [ ! -s "$tarball" ]; then
    mirror="$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null)"
    mirror="${mirror:-http://deb.debian.org/debian}"
    echo "debootstrap --variant=minbase bookworm ($mirror)"
    debootstrap --variant=minbase bookworm "$r" "$mirror" >"$WORK/debootstrap.log" 2>&1 || {
      tail -20 "$WORK/debootstrap.log"
      return 1
    }
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
      'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' \
      'path-exclude /usr/share/locale/*' 'path-include /usr/share/locale/locale.alias' \
      >"$r/etc/dpkg/dpkg.cfg.d/docker"
    printf '%s\n' 'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };' \
      'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";' >"$r/etc/apt/apt.conf.d/docker-clean"
    rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/* \
      "$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/usr/share/locale/*
    tar -C "$r" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$r"
  fi
  docker import --change "LABEL org.seedd.base=$BASE_ID" \
    --change 'CMD ["bash"]' "$tarball" debian:bookworm-slim >/dev/null &&
    echo "imported $tarball as debian:bookworm-slim"
}

IMAGE=seedd:ci
build_image() {
  local ctx="$WORK/ctx"
  mkdir -p "$ctx/bin" "$ctx/docker"
  cp docker/seedd.toml "$ctx/docker/"
  objcopy --strip-debug "$BIN_DIR/seedd" "$ctx/bin/seedd" &&
    objcopy --strip-debug "$BIN_DIR/seedctl" "$ctx/bin/seedctl" || return 1
  local version
  version="$(awk -F'"' '/^version *=/{print $2; exit}' Cargo.toml)"
  # --network=host: apt-get inside the build reaches the Debian mirror without a bridge.
  DOCKER_BUILDKIT=0 docker build --network=host -q -f docker/Dockerfile.prebuilt \
    --build-arg VERSION="$version" \
    --build-arg REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
    --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    -t "$IMAGE" "$ctx" >"$WORK/build.log" 2>&1 || {
    tail -30 "$WORK/build.log"
    return 1
  }
  docker image prune -f >/dev/null 2>&1 || true
  local user size base
  user="$(docker image inspect -f '{{.Config.User}}' "$IMAGE")"
  size="$(docker image inspect -f '{{.Size}}' "$IMAGE")"
  base="$(docker image inspect -f '{{.Size}}' debian:bookworm-slim)"
  echo "built $IMAGE: user $user, $((size / 1024 / 1024)) MiB ($(((size - base) / 1024 / 1024)) MiB on top of the base)"
  [ "$user" = "10001:10001" ] || { echo "image user is $user, want 10001:10001"; return 1; }
}

# The top-level Dockerfile cannot be built here (no rust image), but its build context can:
# send it through .dockerignore, copy it back out and let cargo load the workspace from it.
context_check() {
  printf '%s\n' 'FROM debian:bookworm-slim' 'COPY . /ctx' >"$WORK/Dockerfile.ctx"
  DOCKER_BUILDKIT=0 docker build -q --network=none -f "$WORK/Dockerfile.ctx" -t seedd-context:ci . \
    >"$WORK/ctx-build.log" 2>&1 || { tail -5 "$WORK/ctx-build.log"; return 1; }
  local id ok=0 bad
  id="$(docker create seedd-context:ci true)" || return 1
  mkdir -p "$WORK/context"
  docker cp "$id:/ctx" "$WORK/context/" >/dev/null || ok=1
  docker rm "$id" >/dev/null
  docker rmi seedd-context:ci >/dev/null 2>&1
  bad="$(cd "$WORK/context/ctx" && find . -maxdepth 3 \( -name target -o -name .git -o -name fuzz -o -name seedd-data \) | head -5)"
  [ -z "$bad" ] || { echo "build context holds: $bad"; ok=1; }
  [ -f "$WORK/context/ctx/docker/seedd.toml" ] || { echo "build context lacks docker/seedd.toml"; ok=1; }
  # cargo tree resolves the binaries' dependency graph from Cargo.lock (offline, no build).
  (cd "$WORK/context/ctx" && cargo tree --locked --offline -p seedd -p seedctl \
    --target "$(rustc -vV | awk '/^host:/{print $2}')" >/dev/null 2>"$WORK/metadata.log") ||
    { echo "cargo cannot load the workspace from the build context:"; tail -5 "$WORK/metadata.log"; ok=1; }
  [ "$ok" = 0 ] && echo "Dockerfile build context: $(du -sh "$WORK/context/ctx" | cut -f1), workspace loads"
  return "$ok"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

run_image() {
  local p2p http admin data fixtures
  p2p="$(free_port)"
  http="$(free_port)"
  admin="$(free_port)"
  data="$WORK/data"
  mkdir -p "$data"
  # A repository to clone, when the test fixtures (scripts/make-fixtures.sh) exist.
  fixtures="${SEEDD_FIXTURES_DIR:-$HOME/.cache/seedd/fixtures}"
  if [ -f "$fixtures/fixtures.json" ] && [ -d "$fixtures/storage" ]; then
    cp -a "$fixtures/storage" "$data/storage"
  else
    fixtures=""
  fi
  chown -R 10001:10001 "$data"
  CONTAINER="seedd-ci-$$"
  # Read-only root, non-root, all capabilities dropped; writes go to the data volume and /tmp.
  docker run -d --name "$CONTAINER" --network=host --read-only --tmpfs /tmp \
    --cap-drop=ALL --security-opt=no-new-privileges \
    -v "$data:/var/lib/seedd" \
    -e SEEDD_P2P__LISTEN="127.0.0.1:$p2p" -e SEEDD_HTTP__LISTEN="127.0.0.1:$http" \
    -e SEEDD_ADMIN__LISTEN="127.0.0.1:$admin" -e SEEDD_ALIAS=seedd-ci \
    --health-interval=2s --health-start-period=30s \
    "$IMAGE" >/dev/null || return 1
  local i code=""
  for i in $(seq 1 120); do
    code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz" || true)"
    [ "$code" = 200 ] && break
    [ "$(docker inspect -f '{{.State.Running}}' "$CONTAINER")" = true ] || break
    sleep 0.5
  done
  if [ "$code" != 200 ]; then
    echo "/readyz did not answer 200 (last: ${code:-none}); container logs:"
    docker logs "$CONTAINER" 2>&1 | tail -20
    return 1
  fi
  echo "/readyz 200 after ~$((i / 2)) s"
  local ok=0 out nid
  nid="$(docker exec "$CONTAINER" seedd id | awk 'NR == 1')"
  [[ "$nid" == z6Mk* ]] && echo "seedd id: $nid" || { echo "seedd id printed: $nid"; ok=1; }
  out="$(docker exec "$CONTAINER" seedctl --admin "http://127.0.0.1:$admin" \
    --token-file /var/lib/seedd/admin-token status -o json 2>&1)"
  grep -q "$nid" <<<"$out" && echo "seedctl status: ok" || { echo "seedctl status: $out"; ok=1; }
  out="$(curl -fsS "http://127.0.0.1:$admin/metrics" 2>&1)"
  grep -q '^seedd_build_info' <<<"$out" && echo "/metrics: ok" || { echo "/metrics has no seedd_build_info"; ok=1; }
  if [ -n "$fixtures" ]; then
    local rid head got
    read -r rid head < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["repos"]["heartwood-fixture"]; print(r["rid"], r["head"])' "$fixtures/fixtures.json")
    if git clone -q "http://127.0.0.1:$http/$rid.git" "$WORK/clone" 2>"$WORK/clone.log"; then
      got="$(git -C "$WORK/clone" rev-parse HEAD)"
      [ "$got" = "$head" ] && echo "git clone $rid: HEAD $got (git upload-pack in the image works)" ||
        { echo "git clone $rid: HEAD $got, want $head"; ok=1; }
    else
      echo "git clone $rid failed: $(cat "$WORK/clone.log")"
      ok=1
    fi
  else
    skipped+=("git clone from the container (no fixtures; scripts/make-fixtures.sh makes them)")
  fi
  # The image's HEALTHCHECK (port taken from SEEDD_ADMIN__LISTEN) must turn healthy.
  local health=""
  for i in $(seq 1 30); do
    health="$(docker inspect -f '{{.State.Health.Status}}' "$CONTAINER")"
    [ "$health" = healthy ] && break
    sleep 1
  done
  [ "$health" = healthy ] && echo "HEALTHCHECK: healthy" || { echo "HEALTHCHECK: $health"; ok=1; }
  # No writes outside the volume and /tmp (the root filesystem is read-only anyway).
  out="$(docker diff "$CONTAINER")"
  [ -z "$out" ] && echo "docker diff: no changes to the image filesystem" || { echo "docker diff: $out"; ok=1; }
  # Clean stop: SIGTERM through tini, seedd drains and exits 0.
  local t0 t1 exitcode
  t0=$(date +%s)
  docker stop -t 40 "$CONTAINER" >/dev/null || ok=1
  t1=$(date +%s)
  exitcode="$(docker inspect -f '{{.State.ExitCode}}' "$CONTAINER")"
  out="$(docker logs "$CONTAINER" 2>&1)"
  if [ "$exitcode" = 0 ] && grep -q 'stopped' <<<"$out"; then
    echo "docker stop: exit 0 after $((t1 - t0)) s"
  else
    echo "docker stop: exit code $exitcode; last log lines:"
    docker logs "$CONTAINER" 2>&1 | tail -5
    ok=1
  fi
  docker rm "$CONTAINER" >/dev/null && CONTAINER=""
  return "$ok"
}

# The image with the chart's config, mounted the way the StatefulSet mounts it: per-pod TOML
# from the ConfigMap, node key, admin token and TLS files as read-only Secret-like files
# (root:10001, 0440), data on a tmpfs. Only the listen addresses are overridden (loopback).
run_as_pod() {
  local pod="$WORK/pod" p2p http admin
  mkdir -p "$pod/config" "$pod/keys/0" "$pod/admin" "$pod/tls"
  helm template ci "$CHART" --namespace "$NS" -f "$CHART/ci/single-values.yaml" \
    --set http.tls.enabled=true --set http.tls.existingSecret=tls \
    --show-only templates/configmap.yaml >"$pod/cm.yaml" || return 1
  python3 - "$pod/cm.yaml" "$pod/config" <<'PY' || return 1
import pathlib, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
for key, text in doc["data"].items():
    (pathlib.Path(sys.argv[2]) / key).write_text(text)
PY
  ssh-keygen -q -t ed25519 -N '' -C ci -f "$pod/keys/0/radicle" || return 1
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$pod/admin/token"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=seed.example.org -keyout "$pod/tls/tls.key" -out "$pod/tls/tls.crt" 2>/dev/null || return 1
  chown -R 0:10001 "$pod/keys" "$pod/admin" "$pod/tls"
  chmod 0440 "$pod/keys/0/radicle" "$pod/admin/token" "$pod/tls/tls.key" "$pod/tls/tls.crt"
  local want
  want="$(SEEDD_KEYS__SECRET="$pod/keys/0/radicle" "$BIN_DIR/seedd" id --data-dir "$WORK/id" | awk 'NR == 1')"
  p2p="$(free_port)"
  http="$(free_port)"
  admin="$(free_port)"
  CONTAINER="seedd-ci-pod-$$"
  docker run -d --name "$CONTAINER" --network=host --read-only --tmpfs /tmp \
    --tmpfs /var/lib/seedd:uid=10001,gid=10001,mode=0750 --cap-drop=ALL --security-opt=no-new-privileges \
    -v "$pod/config:/etc/seedd/config:ro" -v "$pod/keys:/etc/seedd/keys:ro" \
    -v "$pod/admin:/etc/seedd/admin:ro" -v "$pod/tls:/etc/seedd/tls:ro" \
    -e POD_NAME=ci-seedd-0 -e SEEDD_CONFIG=/etc/seedd/config/ci-seedd-0.toml \
    -e SEEDD_P2P__LISTEN="127.0.0.1:$p2p" -e SEEDD_HTTP__LISTEN="127.0.0.1:$http" \
    -e SEEDD_ADMIN__LISTEN="127.0.0.1:$admin" \
    "$IMAGE" seedd run >/dev/null || return 1
  local i code="" ok=0 out nid
  for i in $(seq 1 120); do
    code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz" || true)"
    [ "$code" = 200 ] && break
    [ "$(docker inspect -f '{{.State.Running}}' "$CONTAINER")" = true ] || break
    sleep 0.5
  done
  if [ "$code" != 200 ]; then
    echo "chart config: /readyz did not answer 200 (last: ${code:-none}); logs:"
    docker logs "$CONTAINER" 2>&1 | tail -10
    return 1
  fi
  nid="$(docker exec "$CONTAINER" seedd id | awk 'NR == 1')"
  [ -n "$want" ] && [ "$nid" = "$want" ] && echo "chart config: seedd id = NID of the mounted key ($nid)" ||
    { echo "chart config: seedd id $nid, key's NID $want"; ok=1; }
  out="$(docker exec "$CONTAINER" seedctl --admin "http://127.0.0.1:$admin" --token-file /etc/seedd/admin/token status -o json 2>&1)"
  grep -q "seed.example.org" <<<"$out" && echo "chart config: seedctl with the mounted token: ok (alias seed.example.org)" ||
    { echo "chart config: seedctl status: $out"; ok=1; }
  code="$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$http/rad:z3XboD4VcbB574Wwju3r48skefuYb.git/info/refs?service=git-upload-pack" || true)"
  [ "$code" = 404 ] && echo "chart config: HTTPS with the mounted certificate answers (404 for an unknown repo)" ||
    { echo "chart config: HTTPS answered ${code:-nothing}"; ok=1; }
  out="$(docker logs "$CONTAINER" 2>&1 | awk 'NR == 1')"
  [[ "$out" == "{"* ]] && echo "chart config: JSON logs" || { echo "chart config: log line is not JSON: $out"; ok=1; }
  docker stop -t 40 "$CONTAINER" >/dev/null || ok=1
  [ "$(docker inspect -f '{{.State.ExitCode}}' "$CONTAINER")" = 0 ] || { echo "chart config: stop exit code not 0"; ok=1; }
  docker rm "$CONTAINER" >/dev/null && CONTAINER=""
  return "$ok"
}

docker_smoke() {
  build_binaries || { echo "cargo build failed"; return 1; }
  start_dockerd || return 1
  local ok=0
  base_image || ok=1
  [ "$ok" = 0 ] && { context_check || ok=1; }
  [ "$ok" = 0 ] && { build_image && run_image || ok=1; }
  [ "$ok" = 0 ] && { run_as_pod || ok=1; }
  stop_docker
  return "$ok"
}

# ---------------------------------------------------------------------------------------------
[ "$sync" = 1 ] && step "sync chart copies of alert rules and dashboards" sync_copies
step "chart copies of ops/alerts and grafana are up to date" check_copies
step "Dockerfile and docker/Dockerfile.prebuilt share the runtime stage" check_dockerfiles_in_sync
if command -v shellcheck >/dev/null 2>&1; then
  step "shellcheck scripts/check-packaging.sh scripts/install-packaging-tools.sh" \
    shellcheck scripts/check-packaging.sh scripts/install-packaging-tools.sh
else
  skipped+=("shellcheck of the packaging scripts (no shellcheck)")
fi
step "hadolint Dockerfile docker/Dockerfile.prebuilt" hadolint --failure-threshold style Dockerfile docker/Dockerfile.prebuilt
step "helm lint --strict (defaults and ci/*-values.yaml)" lint_all
step "helm template (defaults and ci/*-values.yaml)" template_all
step "NOTES.txt renders (defaults and ci/*-values.yaml)" notes_all
step "helm template refuses wrong values" template_refuses
step "kubernetes-validate --strict (Kubernetes ${KUBE_VERSIONS[*]})" validate_all
step "seedd config check on every rendered config" config_check_all
step "yamllint (values, ci values, rendered manifests)" yamllint_all
step "promtool check rules on the rendered PrometheusRules" promtool_rules
step "checkov (kubernetes, helm, dockerfile)" checkov_all
step "helm package" package_chart
if [ "$docker" = 1 ]; then
  step "image build (docker/Dockerfile.prebuilt) and run" docker_smoke
else
  skipped+=("image build and run (--no-docker)")
fi

echo
for s in "${skipped[@]}"; do echo "skipped: $s"; done
elapsed=$(($(date +%s) - started))
if [ "${#failed[@]}" -gt 0 ]; then
  echo "packaging checks: ${#failed[@]} failed (${elapsed} s):"
  for f in "${failed[@]}"; do echo "  - $f"; done
  exit 1
fi
echo "packaging checks: all passed (${elapsed} s)"
