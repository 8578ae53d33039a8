#!/usr/bin/env python3
"""The daemon's crates, their rooms and who imports whom; fails on a broken rule or a cycle.

The daemon is four crates, floors the compiler keeps (ARCHITECTURE.md):

    seedd-core (core/)   config, metrics, git, storage, index, serve, tenants, policies, ...
    seedd-http (http/)   smart-HTTP, the web API, TLS, rate limits        -> core
    seedd-p2p  (p2p/)    gossip shell, identities, replication            -> core
    seedd-front (front/) the fleet's router: routes, merges, failover     -> core
    seedd      (seed/)   control, backup, admin, daemon, main             -> core, http, p2p, api, front

This script checks, on the sources and each crate's Cargo.toml:
  1. each crate depends only on the crates its floor allows (core reaches neither http nor p2p,
     http and p2p never reach each other, only the top crate knows `seedd-api`), and its code
     names no other seedd crate;
  2. no crate root re-exports `seedd_proto` (code names `seedd_proto::...` itself);
  3. rooms (a crate's top-level modules) import each other without a cycle (room A imports B
     when A's non-test code names `crate::B`);
  4. inside every folder (a module's sub-modules), sibling files import each other without a
     cycle (`super::B` from a sibling, `crate::<path>::B`).

    python3 scripts/check-rooms.py      # the tables, then "no cycles" or what breaks
"""
import os
import re
import sys
import tomllib

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CRATES = [
    # (package, folder, seedd crates it may depend on)
    ("seedd-core", "core", {"seedd-proto"}),
    ("seedd-http", "http", {"seedd-proto", "seedd-core", "seedd-web-api"}),
    ("seedd-p2p", "p2p", {"seedd-proto", "seedd-core"}),
    ("seedd-front", "front", {"seedd-proto", "seedd-core"}),
    ("seedd", "seed", {"seedd-proto", "seedd-core", "seedd-http", "seedd-p2p", "seedd-api",
                       "seedd-front"}),
]
SEEDD_CRATES = {"seedd-proto", "seedd-api", "seedd-web-api", "seedd-core",
                "seedd-http", "seedd-p2p", "seedd-front", "seedd"}


def non_test_source(path):
    with open(path, encoding="utf-8") as fh:
        src = fh.read()
    # Unit tests at the end of a file are not part of the shape; nor are comments.
    cut = src.find("#[cfg(test)]\nmod tests {")
    src = src[:cut] if cut >= 0 else src
    return re.sub(r"^\s*//.*$", "", src, flags=re.M)


def rust_files(root):
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(dirpath, f)


def is_test_file(rel):
    parts = rel.split(os.sep)
    return parts[-1] in ("tests.rs", "label_tests.rs") or "tests" in parts[:-1]


def cycles(names, edges):
    """Strongly connected components with more than one node (Tarjan)."""
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


def check_crate_rules():
    errors = []
    for package, folder, allowed in CRATES:
        with open(os.path.join(TOP, folder, "Cargo.toml"), "rb") as fh:
            manifest = tomllib.load(fh)
        deps = set(manifest.get("dependencies", {})) & SEEDD_CRATES
        for dep in sorted(deps - allowed):
            errors.append(f"{package} depends on {dep}: not allowed on its floor")
        # Code may not name a seedd crate it does not depend on (dev-dependencies included:
        # tests follow the same floors).
        dev = set(manifest.get("dev-dependencies", {})) & SEEDD_CRATES
        for dep in sorted(dev - allowed):
            errors.append(f"{package} has dev-dependency {dep}: not allowed on its floor")
        forbidden = {c.replace("-", "_") for c in SEEDD_CRATES - allowed - {package}}
        src_root = os.path.join(TOP, folder, "src")
        for path in rust_files(src_root):
            text = non_test_source(path)
            for name in sorted(forbidden):
                if re.search(r"(?<![\w\"])%s::" % name, text):
                    errors.append(f"{os.path.relpath(path, TOP)} names {name}")
            if os.path.basename(path) == "lib.rs" and re.search(r"pub use seedd_proto", text):
                errors.append(f"{os.path.relpath(path, TOP)} re-exports seedd_proto: "
                              "name seedd_proto::... where it is used")
    return errors


def rooms_and_edges(src_root):
    names = set()
    for entry in os.listdir(src_root):
        if entry.endswith(".rs"):
            names.add(entry[:-3])
        elif os.path.isdir(os.path.join(src_root, entry)):
            names.add(entry)
    names -= {"lib", "main", "label_tests"}
    edges = {n: set() for n in names}
    for path in rust_files(src_root):
        rel = os.path.relpath(path, src_root)
        if is_test_file(rel):
            continue
        parts = rel.split(os.sep)
        room = parts[0][:-3] if parts[0].endswith(".rs") else parts[0]
        if room not in names:
            continue
        for m in re.finditer(r"crate::([a-z_]+)", non_test_source(path)):
            target = m.group(1)
            if target in names and target != room:
                edges[room].add(target)
    return names, edges


def folder_cycles(src_root):
    """Cycles among the sibling files of every module folder below the crate root."""
    found = []
    for dirpath, dirnames, files in os.walk(src_root):
        if os.path.samefile(dirpath, src_root):
            continue
        rel_dir = os.path.relpath(dirpath, src_root)
        if "tests" in rel_dir.split(os.sep):
            continue
        modpath = "::".join(rel_dir.split(os.sep))
        siblings = {f[:-3] for f in files if f.endswith(".rs") and f != "mod.rs"}
        siblings |= set(dirnames)
        siblings -= {"tests"}
        edges = {s: set() for s in siblings}
        for s in siblings:
            paths = []
            if os.path.exists(os.path.join(dirpath, s + ".rs")):
                paths.append((os.path.join(dirpath, s + ".rs"), 1))
            sub = os.path.join(dirpath, s)
            if os.path.isdir(sub):
                for p in rust_files(sub):
                    depth = len(os.path.relpath(p, dirpath).split(os.sep))
                    if os.path.basename(p) == "mod.rs":
                        depth -= 1
                    paths.append((p, depth))
            for p, depth in paths:
                if is_test_file(os.path.relpath(p, src_root)):
                    continue
                src = non_test_source(p)
                for t in siblings - {s}:
                    pat = r"\b(?:%s|crate::%s)::%s\b" % ("::".join(["super"] * depth),
                                                         modpath, t)
                    if re.search(pat, src):
                        edges[s].add(t)
        for comp in cycles(siblings, edges):
            found.append((rel_dir, comp, {a: sorted(t for t in edges[a] if t in comp)
                                          for a in comp}))
    return found


def main():
    status = 0
    errors = check_crate_rules()
    for e in errors:
        print("RULE:", e, file=sys.stderr)
    if errors:
        status = 1
    else:
        print("crates: every dependency allowed by its floor; no seedd_proto re-exports")
    for package, folder, _ in CRATES:
        src_root = os.path.join(TOP, folder, "src")
        names, edges = rooms_and_edges(src_root)
        print(f"\n{package} ({folder}/src): {len(names)} rooms")
        for room in sorted(names):
            print(f"  {room:10} -> {' '.join(sorted(edges[room])) or '(nothing)'}")
        for comp in cycles(names, edges):
            status = 1
            print(f"CYCLE between rooms of {package}:", " ".join(comp), file=sys.stderr)
            for a in comp:
                inner = sorted(t for t in edges[a] if t in comp)
                print(f"  {a} -> {' '.join(inner)}", file=sys.stderr)
        for rel_dir, comp, inner in folder_cycles(src_root):
            status = 1
            print(f"CYCLE between files of {folder}/src/{rel_dir}:", " ".join(comp),
                  file=sys.stderr)
            for a in comp:
                print(f"  {a} -> {' '.join(inner[a])}", file=sys.stderr)
    if status:
        print("a dependency breaks a floor, or an import closes a loop; move the shared item "
              "down a layer or into its own file (see ARCHITECTURE.md)", file=sys.stderr)
        return status
    print("\nno cycles between rooms or between the files of any folder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
