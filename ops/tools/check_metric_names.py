#!/usr/bin/env python3
"""Every metric name used by the Grafana dashboards (panel and variable queries) and the
Prometheus rules must be in README.md's "Metrics" table (core/src/metrics.rs `CATALOGUE`) — a
histogram also as `_bucket`, `_sum`, `_count` — or be one Prometheus makes itself (`up`,
`scrape_*`, `ALERTS`, ...).

Usage: check_metric_names.py README.md grafana/*.json ops/alerts/*.yml
       check_metric_names.py --list FILE...   (print the metric names used, one per line)
Exit 1 with one line per unknown name."""
import json
import re
import sys

import yaml

BUILTIN = {
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
    "scrape_timeout_seconds",
    "scrape_sample_limit",
    "scrape_body_size_bytes",
    "ALERTS",
    "ALERTS_FOR_STATE",
}
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
    "unless", "offset", "inf", "nan", "atan2", "start", "end",
}


def readme_metrics(path):
    """name -> type, from the `| \\`name\\` | type | ...` rows of the Metrics table."""
    out = {}
    in_table = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("## "):
            in_table = line.strip() == "## Metrics"
            continue
        m = re.match(r"\|\s*`([a-zA-Z_:][a-zA-Z0-9_:]*)`\s*\|\s*(\w+)\s*\|", line)
        if in_table and m:
            out[m.group(1)] = m.group(2)
    return out


def metric_names(expr):
    """Metric names referenced by a PromQL expression (a lexer-level approximation: strings,
    label matchers, ranges and grouping clauses are removed; identifiers that are not function
    calls, keywords or number/duration suffixes are metric names)."""
    e = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', '""', expr)
    e = re.sub(r"\$\{[^}]*\}|\$\w+", "1", e)
    e = re.sub(r"\{[^}]*\}", "{}", e)
    e = re.sub(r"\[[^\]]*\]", "", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = []
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        word = m.group(0)
        before = e[m.start() - 1] if m.start() else " "
        if before.isdigit() or before == ".":
            continue  # 1e3, 5m, 0.5h
        if re.match(r"\s*\(", e[m.end():]):
            continue  # function call
        if word.lower() in KEYWORDS:
            continue
        names.append(word)
    return names


def grafana_queries(node):
    """(where, PromQL) for every target `expr` and every query variable in a dashboard."""
    if isinstance(node, dict):
        if isinstance(node.get("expr"), str):
            yield node.get("refId", "?"), node["expr"]
        if node.get("type") == "query" and "query" in node and "name" in node:
            q = node["query"]
            q = q.get("query", "") if isinstance(q, dict) else q
            m = re.match(r"\s*label_values\s*\((.*),\s*\w+\s*\)\s*$", q)
            if m:
                yield f"${node['name']}", m.group(1)
            m = re.match(r"\s*(?:query_result|metrics)\s*\((.*)\)\s*$", q)
            if m:
                yield f"${node['name']}", m.group(1)
        for v in node.values():
            yield from grafana_queries(v)
    elif isinstance(node, list):
        for v in node:
            yield from grafana_queries(v)


def rule_queries(path):
    doc = yaml.safe_load(open(path, encoding="utf-8")) or {}
    for g in doc.get("groups", []):
        for r in g.get("rules", []):
            yield r.get("alert") or r.get("record"), r["expr"]


def queries(path):
    if path.endswith(".json"):
        yield from grafana_queries(json.load(open(path, encoding="utf-8")))
    else:
        yield from rule_queries(path)


def allowed(known):
    ok = set(BUILTIN) | set(known)
    for name, kind in known.items():
        if kind in ("histogram", "summary"):
            ok |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return ok


def main(argv):
    if argv[:1] == ["--list"]:
        used = sorted({n for f in argv[1:] for _, q in queries(f) for n in metric_names(q)})
        print("\n".join(used))
        return 0
    readme, files = argv[0], argv[1:]
    known = readme_metrics(readme)
    if not known:
        print(f"{readme}: no Metrics table found", file=sys.stderr)
        return 1
    ok = allowed(known)
    bad, used = [], set()
    for f in files:
        for where, q in queries(f):
            for n in metric_names(q):
                used.add(n)
                if n not in ok:
                    bad.append(f"{f}: {where}: unknown metric {n} (not in {readme}'s Metrics table)")
        # Also any seedd_* name in titles, descriptions, annotations and comments.
        text = open(f, encoding="utf-8").read()
        for n in sorted(set(re.findall(r"(?<![A-Za-z0-9_:])seedd_[a-z0-9_]+", text))):
            if n not in ok:
                bad.append(f"{f}: unknown metric name {n} in the text (not in {readme}'s Metrics table)")
    for b in bad:
        print(b, file=sys.stderr)
    print(f"check_metric_names: {len(used)} metric names in {len(files)} files; "
          f"{len(known)} in the table; {len(bad)} unknown")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
