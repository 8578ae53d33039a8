#!/usr/bin/env python3
"""Rooms of `seed/src` (its top-level modules) and who imports whom; fails on a cycle.

A room is a top-level module of the `seedd` crate (`seed/src/<room>.rs` with its
`seed/src/<room>/` files). Room A imports room B when A's non-test code names `crate::B`.
ARCHITECTURE.md draws the layers this prints; the test script runs it so that an import
that closes a loop between rooms fails CI instead of slowly decaying the shape.

    python3 scripts/check-rooms.py            # the import table, then "no cycles" or the cycles
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "seed", "src")


def rooms_and_edges(root):
    names = set()
    for entry in os.listdir(root):
        if entry.endswith(".rs"):
            names.add(entry[:-3])
        elif os.path.isdir(os.path.join(root, entry)):
            names.add(entry)
    names -= {"lib", "main"}
    edges = {n: set() for n in names}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs") or f == "tests.rs":
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root).split(os.sep)
            room = rel[0][:-3] if rel[0].endswith(".rs") else rel[0]
            if room not in names or "tests" in rel[1:-1]:
                continue
            with open(path, encoding="utf-8") as fh:
                src = fh.read()
            # Unit tests at the end of a file are not part of the room's shape.
            cut = src.find("#[cfg(test)]\nmod tests {")
            if cut >= 0:
                src = src[:cut]
            for m in re.finditer(r"crate::([a-z_]+)", src):
                target = m.group(1)
                if target in names and target != room:
                    edges[room].add(target)
    return names, edges


def cycles(names, edges):
    """Strongly connected components with more than one room (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(names):
        if v not in index:
            visit(v)
    return out


def main():
    names, edges = rooms_and_edges(ROOT)
    for room in sorted(names):
        print(f"{room:10} -> {' '.join(sorted(edges[room])) or '(nothing)'}")
    found = cycles(names, edges)
    if found:
        for comp in found:
            print("CYCLE between rooms:", " ".join(comp), file=sys.stderr)
            for a in comp:
                inner = sorted(t for t in edges[a] if t in comp)
                print(f"  {a} -> {' '.join(inner)}", file=sys.stderr)
        print("an import closes a loop between rooms; move the shared item down a layer "
              "(see ARCHITECTURE.md)", file=sys.stderr)
        return 1
    print(f"{len(names)} rooms, no cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
