#!/usr/bin/env python3
"""Parse-checks every PromQL `expr` in Grafana dashboards with promtool: template variables are
replaced, the expressions are written as recording rules, and `promtool check rules` runs on
them. Usage: dash_promql.py grafana/*.json (exit status of promtool; 1 if nothing was found)."""
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml


def exprs(node):
    if isinstance(node, dict):
        if isinstance(node.get("expr"), str):
            yield node["expr"]
        for v in node.values():
            yield from exprs(v)
    elif isinstance(node, list):
        for v in node:
            yield from exprs(v)


def subst(e):
    e = re.sub(r"\$__(rate_interval|interval|range)", "5m", e)
    e = re.sub(r"\$\{?__\w+\}?", "1", e)
    return re.sub(r"\$\{?(\w+)(:\w+)?\}?", ".*", e)


def main(files):
    rules = []
    for f in files:
        with open(f) as fh:
            for i, e in enumerate(exprs(json.load(fh))):
                rules.append({"record": f"dashboard:{re.sub(r'[^a-z0-9]', '_', f.split('/')[-1])}:{i}",
                              "expr": subst(e)})
    if not rules:
        print("dash_promql: no expressions found", file=sys.stderr)
        return 1
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as t:
        yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}, t)
    print(f"dash_promql: {len(rules)} expressions from {len(files)} dashboards")
    try:
        return subprocess.call(["promtool", "check", "rules", t.name])
    finally:
        os.unlink(t.name)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
