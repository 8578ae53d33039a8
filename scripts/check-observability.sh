#!/usr/bin/env bash
# Checks the Grafana dashboards (grafana/*.json) and the Prometheus alert rules (ops/alerts/).
# Exits non-zero on the first failing step. Tools: scripts/install-observability-tools.sh
# (run with --install to call it first).
#
#   1. promtool check rules      ops/alerts/*.yml (also rendered with another job selector)
#   2. promtool test rules       ops/alerts/tests/*.yml
#   3. alert conventions         severity/annotations, job selector, a firing and a quiet test
#                                per alert, a README row per alert (ops/tools/check_alerts.py)
#   4. dashboards up to date     grafana/*.json == ops/tools/gen_dashboards.py output
#   5. dashboard schema          each dashboard as `export default <json> satisfies Dashboard`
#                                (@grafana/schema 13.2.3), `tsc --strict --noEmit`
#   6. dashboard PromQL          every `expr` parsed by promtool (ops/tools/dash_promql.py)
#   7. metric names              every metric in grafana/ and ops/alerts/ is in README.md's
#                                Metrics table or a Prometheus built-in (check_metric_names.py)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--install" ]; then
  bash scripts/install-observability-tools.sh
fi
for tool in promtool python3 node; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "check-observability: $tool not found; run scripts/install-observability-tools.sh" >&2
    exit 1
  }
done
[ -x ops/tools/node_modules/.bin/tsc ] || {
  echo "check-observability: ops/tools/node_modules missing; run scripts/install-observability-tools.sh" >&2
  exit 1
}

step() { echo "== $*"; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

step "promtool check rules"
promtool check rules ops/alerts/*.yml
ops/tools/render-alert-rules.sh 'job="radicle-seed"' > "$tmp/rendered-rules.yml"
if grep -qF 'job=~".*seedd.*"' "$tmp/rendered-rules.yml"; then
  echo "render-alert-rules.sh left the default job selector in place" >&2
  exit 1
fi
promtool check rules "$tmp/rendered-rules.yml"

step "promtool test rules"
promtool test rules ops/alerts/tests/*.yml

step "alert conventions"
python3 ops/tools/check_alerts.py ops/alerts

step "dashboards match ops/tools/gen_dashboards.py"
python3 ops/tools/gen_dashboards.py --check

step "dashboard schema (@grafana/schema, tsc --strict)"
gen="ops/tools/gen"
rm -rf "$gen"
mkdir -p "$gen"
for f in grafana/*.json; do
  n="$(basename "$f" .json)"
  python3 - "$f" "$gen/$n.ts" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
json.loads(text)  # must be plain JSON first
tmpl = open("ops/tools/dashboard-check.ts.in", encoding="utf-8").read()
open(sys.argv[2], "w", encoding="utf-8").write(tmpl.replace("__DASHBOARD__", text.strip()))
PY
done
(cd ops/tools && ./node_modules/.bin/tsc --strict --noEmit --skipLibCheck \
  --moduleResolution bundler --module esnext --target es2020 gen/*.ts)
echo "$(ls "$gen"/*.ts | wc -l) dashboards type-check"
rm -rf "$gen"

step "dashboard PromQL parses"
python3 ops/tools/dash_promql.py grafana/*.json

step "metric names"
python3 ops/tools/check_metric_names.py README.md grafana/*.json ops/alerts/*.yml

step "dashboards: unique uids, variables, datasources, \$instance/\$tenant scoping, grid"
python3 - grafana/*.json <<'PY'
import json, sys
uids, bad = {}, []
for f in sys.argv[1:]:
    d = json.load(open(f, encoding="utf-8"))
    if d.get("uid") in uids:
        bad.append(f"{f}: uid {d.get('uid')} also in {uids[d['uid']]}")
    uids[d.get("uid")] = f
    names = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
    if names.get("datasource", {}).get("type") != "datasource" or names["datasource"].get("query") != "prometheus":
        bad.append(f"{f}: no $datasource variable of type datasource/prometheus")
    if "instance" not in names:
        bad.append(f"{f}: no $instance variable")
    def walk(n, path):
        if isinstance(n, dict):
            if "datasource" in n and path and isinstance(n["datasource"], (dict, str)):
                ds = n["datasource"]
                if ds != {"type": "prometheus", "uid": "${datasource}"} and not (isinstance(ds, dict) and ds.get("type") == "grafana"):
                    bad.append(f"{f}: {path}: datasource {ds}")
            if isinstance(n.get("expr"), str) and 'instance=~"$instance"' not in n["expr"]:
                bad.append(f"{f}: {path}: expr not scoped to $instance: {n['expr']}")
            if isinstance(n.get("expr"), str) and "seedd_tenant_" in n["expr"]:
                if "tenant" not in names:
                    bad.append(f"{f}: {path}: per-tenant expr but no $tenant variable")
                if 'tenant=~"$tenant"' not in n["expr"]:
                    bad.append(f"{f}: {path}: per-tenant expr not scoped to $tenant: {n['expr']}")
            for k, v in n.items():
                walk(v, f"{path}/{k}")
        elif isinstance(n, list):
            for i, v in enumerate(n):
                walk(v, f"{path}[{i}]")
    walk(d.get("panels", []), "panels")
    # Grid: inside 24 columns, no two panels overlap, panel ids unique.
    cells, ids = {}, set()
    for p in d.get("panels", []):
        g, title = p.get("gridPos", {}), p.get("title")
        if p.get("id") in ids:
            bad.append(f"{f}: duplicate panel id {p.get('id')}")
        ids.add(p.get("id"))
        if g.get("x", 0) + g.get("w", 0) > 24:
            bad.append(f"{f}: {title!r} wider than the grid")
        for x in range(g.get("x", 0), g.get("x", 0) + g.get("w", 0)):
            for y in range(g.get("y", 0), g.get("y", 0) + g.get("h", 0)):
                if (x, y) in cells:
                    bad.append(f"{f}: {title!r} overlaps {cells[(x, y)]!r}")
                    break
                cells[(x, y)] = title
            else:
                continue
            break
for b in bad:
    print(b, file=sys.stderr)
print(f"{len(uids)} dashboards, {len(bad)} problems")
sys.exit(1 if bad else 0)
PY

echo "observability checks: all passed"
