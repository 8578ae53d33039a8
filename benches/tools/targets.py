#!/usr/bin/env python3
"""Print the benches README's table of targets from the JSON results the benches wrote.

Usage: benches/tools/targets.py [TARGET_DIR] [--commit SHA]
       (TARGET_DIR default: $CARGO_TARGET_DIR or ./target; --commit: only results measured at
       that commit, the others listed as left out)

Reads every `seedd-bench*.json` that has the §1 layout (`provenance` + `results.targets`)
and prints one markdown row per target: bench, target, value, met?, commit (dirty flag and
overrides named), so the table in benches/README.md is regenerated, not retyped. A result
whose commit differs from the others is marked, so one table never mixes commits silently.
"""
import json
import os
import sys
from pathlib import Path


def main() -> int:
    args = sys.argv[1:]
    only = None
    if "--commit" in args:
        i = args.index("--commit")
        only = args[i + 1] if i + 1 < len(args) else None
        del args[i : i + 2]
    target = Path(args[0] if args else os.environ.get("CARGO_TARGET_DIR", "target"))
    docs = []
    left_out = []
    for path in sorted(target.glob("seedd-bench*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            print(f"skipping {path}: {e}", file=sys.stderr)
            continue
        if not isinstance(doc, dict) or "provenance" not in doc:
            continue
        results = doc.get("results")
        targets = (results.get("targets") if isinstance(results, dict) else None) or doc.get("targets")
        if not isinstance(targets, list):
            print(f"skipping {path}: no list of targets", file=sys.stderr)
            continue
        commit = doc["provenance"].get("commit", "")
        if only and not commit.startswith(only):
            left_out.append(f"{path.name} (measured at {commit[:12]})")
            continue
        if targets:
            docs.append((path, doc, targets))
    if not docs:
        print(f"no results with targets under {target}", file=sys.stderr)
        return 1
    commits = {d["provenance"]["commit"] for _, d, _ in docs}
    print("| bench | target | value | met? | commit |")
    print("|---|---|---|---|---|")
    notes = []
    for path, doc, targets in docs:
        p = doc["provenance"]
        commit = p["commit"][:12]
        if p.get("dirty"):
            commit += " (dirty)"
        if len(commits) > 1:
            commit += " (not the same commit as the other rows)"
        notes.append(
            f"- {p['bench']} ({path.name}): {p.get('cores')} cores, {p.get('cpu_model')}, kernel "
            f"{p.get('kernel')}, load at start {p.get('loadavg_start')}; {p.get('pinning')}; "
            f"{p.get('cgroup')}; overrides: {'; '.join(p.get('overrides') or ['none'])}; "
            f"configuration not default: {'; '.join(p.get('config_diff') or ['none'])}"
        )
        for t in targets:
            value = t.get("value")
            shown = "-" if value is None else f"{value:.2f}"
            goal = t.get("goal")
            name = t["target"] + (f" ({goal})" if goal else "")
            met = t.get("met")
            verdict = "yes" if met is True else ("**no**" if met is False else "n/a")
            print(f"| {p['bench']} | {name} | {shown} | {verdict} | `{commit}` |")
    print()
    print("\n".join(notes))
    if left_out:
        print()
        print("Left out (not measured at this commit): " + ", ".join(left_out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
