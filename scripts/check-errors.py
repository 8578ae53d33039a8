#!/usr/bin/env python3
"""Error types print a source in their message or return it from `source()`, never both.

A `thiserror` variant whose `#[error("…")]` message prints a field that is also its source
(`#[source]`, `#[from]`, or a field named `source`) shows that error twice wherever a chain is
printed (`{:#}` of anyhow, `seedd_core::logging::chain`). The rule, checked here over every
crate's sources: print it (the field is plain, `From` written by hand where `?` needs it), or
return it (`#[source]`, not in the message), or forward both (`#[error(transparent)]`).

    python3 scripts/check-errors.py     # lists offending variants; exit 1 if any
"""
import glob
import os
import re
import sys

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
VARIANT = re.compile(
    r'#\[error\((?P<fmt>"(?:[^"\\]|\\.)*")[^\]]*\)\]\s*(?P<var>\w+)\s*'
    r'(?P<body>\((?:[^()]|\([^()]*\))*\)|\{[^}]*\})'
)


def offenders(path):
    with open(path, encoding="utf-8") as fh:
        src = fh.read()
    found = []
    for m in VARIANT.finditer(src):
        fmt, var, body = m.group("fmt"), m.group("var"), m.group("body")
        line = src[: m.start()].count("\n") + 1
        if body.startswith("("):
            fields = re.split(r",(?![^<(]*[>)])", body[1:-1])
            for i, f in enumerate(fields):
                if re.search(r"#\[(source|from)\]", f) and re.search(r"\{%d(:[^}]*)?\}" % i, fmt):
                    found.append((line, var, fmt))
        else:
            for fm in re.finditer(r"#\[(?:source|from)\]\s*(?:pub(?:\([^)]*\))?\s+)?(\w+)\s*:", body):
                if re.search(r"\{%s(:[^}]*)?\}" % fm.group(1), fmt):
                    found.append((line, var, fmt))
            if re.search(r"\bsource\s*:", body) and re.search(r"\{source(:[^}]*)?\}", fmt):
                found.append((line, var, fmt))
    return found


def main():
    bad = 0
    for path in sorted(glob.glob(os.path.join(TOP, "*", "src", "**", "*.rs"), recursive=True)):
        for line, var, fmt in offenders(path):
            bad += 1
            print(f"{os.path.relpath(path, TOP)}:{line}: {var} prints its source and returns it: "
                  f"{fmt}", file=sys.stderr)
    if bad:
        print(f"{bad} error variants show their source twice; see this script's docstring",
              file=sys.stderr)
        return 1
    print("error types: every source printed or returned, never both")
    return 0


if __name__ == "__main__":
    sys.exit(main())
