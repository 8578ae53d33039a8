#!/usr/bin/env python3
"""Compare seedd's radicle-httpd JSON API with radicle-httpd 0.27's, field by field, on the same
storage: the explorer's fixtures as scripts/explorer/run.sh leaves them (palm's profile).

Both servers read palm's storage; every endpoint the explorer calls is requested from both
(the repositories, issues and patches are discovered from httpd's own listings) and the JSON
bodies are compared recursively. Differences listed in EXPECTED are the documented ones
(README "Pointing the Radicle explorer at a seedd"); anything else is reported and makes the
exit status 1.

  compare.py --peers <explorer>/tests/tmp/peers --seedd <seedd> --httpd <radicle-httpd> [--json OUT]
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

# (endpoint regex, JSON path regex, why): the documented differences (README "Pointing the
# Radicle explorer at a seedd"). Paths use [*] for array indexes.
EXPECTED = [
    (r"^/api/v1$", r"^\$\.(nid|service|version)$", "seedd names itself and its own node id"),
    (r"^/api/v1/node$", r"^\$\.(id|agent|version|config|state|avatarUrl|bannerUrl|description)(\.|$)",
     "seedd's node: its own id, agent and configuration, not palm's radicle-node"),
    (r"^/api/v1/stats$", r"^\$\.users", "users are counted over the repositories seedd serves"),
    (r".*", r"\.alias$", "node aliases come from the node announcements seedd has received; "
     "httpd reads its own node's database (palm knows its peers' aliases, this seedd never met them)"),
    (r".*", r"(^|\.)seeding$", "seeds counted from seedd's gossip, httpd counts palm's routing table"),
    (r"^/api/v1/repos$", r"^\$\.length$", "seedd pins `[web] pinned` of its own config (none here); palm's config pins one repository"),
    (r".*", r"^\$\.error$", "error texts differ; the status code is the same"),
    (r".*", r"^\$body$", "error texts differ; the status code is the same"),
    (r"/(commits/[0-9a-f]{40}|diff/)", r"\.diff\.files\[\*\]\.diff\.stats\.deletions$",
     "radicle-surf counts git's '\\ No newline at end of file' marker of an added file as a deletion"),
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(base, path):
    try:
        with urllib.request.urlopen(base + path, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait(base, path, deadline=60):
    end = time.time() + deadline
    while time.time() < end:
        try:
            status, _ = get(base, path)
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{base} did not answer {path} in {deadline} s")


def diff(a, b, path, out):
    """Differences between httpd's `a` and seedd's `b` as (json path, httpd, seedd)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}"
            if k not in b:
                out.append((p, a[k], "<missing>"))
            elif k not in a:
                out.append((p, "<missing>", b[k]))
            else:
                diff(a[k], b[k], p, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append((f"{path}.length", len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append((path, a, b))


def expected(endpoint, jpath):
    generic = re.sub(r"\[\d+\]", "[*]", jpath)
    for ep, jp, why in EXPECTED:
        if re.search(ep, endpoint) and re.search(jp, generic):
            return why
    return None


def short(v):
    s = json.dumps(v)
    return s if len(s) <= 100 else s[:97] + "..."


def endpoints(httpd):
    """Every endpoint the explorer calls, for every fixture repository, issue and patch."""
    out = ["/api/v1", "/api/v1/node", "/api/v1/stats", "/api/v1/repos?show=all", "/api/v1/repos"]
    _, body = get(httpd, "/api/v1/repos?show=all")
    repos = json.loads(body)
    delegates = set()
    for repo in repos:
        rid = repo["rid"]
        for d in repo.get("delegates", []):
            delegates.add(d["id"] if isinstance(d, dict) else d)
        r = f"/api/v1/repos/{rid}"
        out += [r, f"{r}/remotes", f"{r}/commits", f"{r}/activity"]
        head = (repo.get("payloads", {}).get("xyz.radicle.project", {}).get("meta", {}) or {}).get("head")
        if head:
            out += [
                f"{r}/tree/{head}/",
                f"{r}/stats/tree/{head}",
                f"{r}/stats/commits/{head}",
                f"{r}/commits/{head}",
                f"{r}/readme/{head}",
                f"{r}/commits?parent={head}&perPage=5",
            ]
            _, tree = get(httpd, f"{r}/tree/{head}/")
            for e in json.loads(tree).get("entries", []):
                kind = "tree" if e["kind"] == "tree" else "blob"
                out.append(f"{r}/{kind}/{head}/{e['path']}")
            _, commits = get(httpd, f"{r}/commits?parent={head}&perPage=50")
            history = [c["id"] for c in json.loads(commits)]
            for c in history[1:4]:
                out.append(f"{r}/commits/{c}")
            if len(history) > 2:
                out += [f"{r}/diff/{history[-1]}/{head}", f"{r}/diff/{history[-1]}/{head}/stats"]
        _, remotes = get(httpd, f"{r}/remotes")
        for rem in json.loads(remotes):
            out.append(f"{r}/remotes/{rem['id']}")
        for kind in ("issues", "patches"):
            for status in ("open", "closed", "draft", "merged", "archived", "all"):
                if kind == "issues" and status in ("draft", "merged", "archived"):
                    continue
                path = f"{r}/{kind}?status={status}&perPage=50"
                out.append(path)
                _, items = get(httpd, path)
                if status == "all":
                    for it in json.loads(items):
                        out.append(f"{r}/{kind}/{it['id']}")
    for d in sorted(delegates):
        out.append(f"/api/v1/delegates/{d}/repos?show=all")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", required=True)
    ap.add_argument("--seedd", required=True)
    ap.add_argument("--httpd", required=True)
    ap.add_argument("--json")
    args = ap.parse_args()
    home = os.path.join(args.peers, "palm", "home")
    if not os.path.isdir(os.path.join(home, "storage")):
        raise SystemExit(f"no fixtures in {home}: run `scripts/explorer/run.sh suite` first")
    work = tempfile.mkdtemp(prefix="seedd-compare-")
    procs = []
    try:
        hp, sp = free_port(), free_port()
        env = dict(os.environ, RAD_HOME=home, RAD_PASSPHRASE="asdf")
        log = open(os.path.join(work, "httpd.log"), "w")
        procs.append(subprocess.Popen([args.httpd, "--listen", f"127.0.0.1:{hp}"], env=env, stdout=log, stderr=log))
        # seedd through the same stand-in the suite uses, on its own copy of the data dir.
        senv = dict(env, SEEDD_BIN=args.seedd, SEEDD_CONTRACT_SERVER="seedd", RUST_LOG="warn")
        slog = open(os.path.join(work, "seedd.log"), "w")
        procs.append(subprocess.Popen([os.path.join(HERE, "radicle-httpd"), "--listen", f"127.0.0.1:{sp}"], env=senv, stdout=slog, stderr=slog))
        httpd, seedd = f"http://127.0.0.1:{hp}", f"http://127.0.0.1:{sp}"
        wait(httpd, "/api/v1")
        wait(seedd, "/api/v1/repos?show=all")
        report = []
        unexpected = 0
        for ep in endpoints(httpd):
            hs, hb = get(httpd, ep)
            ss, sb = get(seedd, ep)
            entry = {"endpoint": ep, "httpd": hs, "seedd": ss, "differences": []}
            if hs != ss:
                entry["differences"].append(("$status", hs, ss, None))
                unexpected += 1
            elif hs >= 400:
                if hb != sb:
                    entry["differences"].append(("$body", len(hb), len(sb), expected(ep, "$body")))
            else:
                try:
                    a, b = json.loads(hb), json.loads(sb)
                except ValueError:
                    a = b = None
                if a is None:
                    if hb != sb:
                        entry["differences"].append(("$body", len(hb), len(sb), None))
                        unexpected += 1
                    report.append(entry)
                    continue
                out = []
                diff(a, b, "$", out)
                base = ep.split("?")[0]
                for p, x, y in out:
                    why = expected(base, p)
                    entry["differences"].append((p, x, y, why))
                    if why is None:
                        unexpected += 1
            report.append(entry)
        for e in report:
            bad = [d for d in e["differences"] if d[3] is None]
            mark = "ok " if not bad else "DIFF"
            print(f"{mark} {e['endpoint']} ({e['httpd']}/{e['seedd']}){' ' + str(len(e['differences']) - len(bad)) + ' expected' if len(e['differences']) > len(bad) else ''}")
            for p, x, y, why in e["differences"]:
                if why is None:
                    print(f"       {p}: httpd {short(x)} | seedd {short(y)}")
        print(f"\n{len(report)} endpoints, {sum(1 for e in report if not any(d[3] is None for d in e['differences']))} equal "
              f"(up to documented differences), {unexpected} unexpected differences")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1, default=str)
        return 1 if unexpected else 0
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
