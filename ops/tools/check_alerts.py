#!/usr/bin/env python3
"""Conventions of ops/alerts that promtool does not check:

* every alert has `severity` (critical, warning or info) and the annotations summary,
  description and runbook;
* the scrape job is selected only as `job=~".*seedd.*"` (ops/tools/render-alert-rules.sh swaps
  that exact string), and only where `up` is used;
* every alert has at least one promtool test case where it fires and one where it does not
  (tests/*.yml);
* every alert has a row in ops/alerts/README.md.

Usage: check_alerts.py ops/alerts"""
import glob
import os
import re
import sys

import yaml

SELECTOR = 'job=~".*seedd.*"'
SEVERITIES = {"critical", "warning", "info"}
ANNOTATIONS = {"summary", "description", "runbook"}


def main(alerts_dir):
    errors = []
    rules_files = sorted(glob.glob(os.path.join(alerts_dir, "*.yml")))
    alerts = {}
    for f in rules_files:
        for g in (yaml.safe_load(open(f, encoding="utf-8")) or {}).get("groups", []):
            for r in g.get("rules", []):
                if "alert" not in r:
                    continue
                name = r["alert"]
                if name in alerts:
                    errors.append(f"{f}: {name} defined twice")
                alerts[name] = r
                sev = (r.get("labels") or {}).get("severity")
                if sev not in SEVERITIES:
                    errors.append(f"{f}: {name}: severity {sev!r} not in {sorted(SEVERITIES)}")
                missing = ANNOTATIONS - set(r.get("annotations") or {})
                if missing:
                    errors.append(f"{f}: {name}: missing annotations {sorted(missing)}")
                expr = r["expr"]
                jobs = re.findall(r"\bjob\s*(?:=~|!~|!=|=)\s*\"[^\"]*\"", expr)
                if any(j.replace(" ", "") != SELECTOR for j in jobs):
                    errors.append(f"{f}: {name}: select the job only as {SELECTOR} (found {jobs})")
                if re.search(r"\bup\b(?!\s*\()", expr) and SELECTOR not in expr:
                    errors.append(f"{f}: {name}: `up` without {SELECTOR}")

    fires, quiet = set(), set()
    test_files = sorted(glob.glob(os.path.join(alerts_dir, "tests", "*.yml")))
    for f in test_files:
        for t in (yaml.safe_load(open(f, encoding="utf-8")) or {}).get("tests", []):
            for case in t.get("alert_rule_test", []):
                (fires if case.get("exp_alerts") else quiet).add(case["alertname"])
    for name in alerts:
        if name not in fires:
            errors.append(f"{name}: no promtool test case where it fires")
        if name not in quiet:
            errors.append(f"{name}: no promtool test case where it does not fire")
    for name in (fires | quiet) - set(alerts):
        errors.append(f"tests name an unknown alert {name}")

    readme = os.path.join(alerts_dir, "README.md")
    text = open(readme, encoding="utf-8").read() if os.path.exists(readme) else ""
    for name in alerts:
        if not re.search(rf"^\|\s*`?{name}`?\s*\|", text, re.M):
            errors.append(f"{readme}: no table row for {name}")

    for e in errors:
        print(e, file=sys.stderr)
    print(f"check_alerts: {len(alerts)} alerts, {len(test_files)} test files, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "ops/alerts"))
