// Browses the radicle-explorer web app (built by browser.sh) against seedd serving the
// explorer's fixtures, with puppeteer-core driving Debian's chromium, and checks
//   - every page a user browses on the seed loads: each request to the seed's HTTP API or
//     /raw answers 2xx (or one of the EXPECTED_404 below) and the app throws no uncaught error;
//   - five behaviours radicle-httpd has and seedd is closing (renames, peer archives, node
//     page, search, names), each its own named check, asserted the way the explorer's own
//     playwright tests (tests/e2e/*.spec.ts) assert them against radicle-httpd.
// Prints a table of checks and exits 1 if any failed. Run by browser.sh inside a private
// network namespace (loopback only); see there. Environment:
//   APP_URL      the built explorer (default http://127.0.0.1:3001)
//   SEED         the seed's host:port (default 127.0.0.1:8081, the explorer's test httpd port)
//   CHROMIUM     chromium binary (default /usr/bin/chromium)
//   TOOLS_DIR    where puppeteer-core is installed (default ~/.cache/seedd/explorer-tools)
//   OUT_DIR      screenshots of failed checks and report.json (default: none written)
import { createRequire } from "node:module";
import * as Fs from "node:fs";
import * as Os from "node:os";
import * as Path from "node:path";
import * as Zlib from "node:zlib";

const toolsDir =
  process.env.TOOLS_DIR || Path.join(Os.homedir(), ".cache/seedd/explorer-tools");
const require = createRequire(Path.join(toolsDir, "package.json"));
const puppeteer = require("puppeteer-core");

const APP = (process.env.APP_URL || "http://127.0.0.1:3001").replace(/\/$/, "");
const SEED = process.env.SEED || "127.0.0.1:8081";
const [seedHost, seedPort] = SEED.split(":");
const SEED_URL = `http://${SEED}`;
const OUT_DIR = process.env.OUT_DIR || "";
const PAGE_TIMEOUT = Number(process.env.PAGE_TIMEOUT_MS || 30_000);

// The explorer's fixtures (tests/support/fixtures.ts).
const RID = {
  sourceBrowsing: "rad:z4BwwjPCFNVP27FwVbDFgwVwkjcir",
  cobs: "rad:z3fpY7nttPPa6MBnAv2DccHzQJnqe",
  markdown: "rad:z2tchH2Ti4LxRKdssPQYs6VHE5rsg",
  commits: "rad:z2ysBeUDZnHejYvaToxYopZiUA3oy",
};
const ALICE = "z6MkqGC3nWZhYieEVTVDKW5v588CiGfsDSmRVG9ZwwWTvLSK";
const BOB = "z6Mkg49NtQR2LyYRDCQFK4w1VVHqhypZSSRo7HsyuN7SV7v5";
const PALM = "z6MktULudTtAsAhRegYPiZ6631RV3viv12qd4GQF8z1xB22S";
const EVE = "z6MktwtqAzuD5F77tAMBMwNs1KybZeff61EehV9xB1ZpXQG7";
// The fixture nodes whose names check 5 needs, with the alias each announces.
const FIXTURE_NODES = [
  { nid: PALM, alias: "palm" },
  { nid: ALICE, alias: "alice" },
  { nid: BOB, alias: "bob" },
  { nid: EVE, alias: "eve" },
];
// Aliases that cannot reach seedd through gossip in this harness, each with why: check 5 does
// not assert them and the report lists them as known differences from radicle-httpd.
const KNOWN_UNREACHABLE = {};
// What radicle-httpd would show for each node (palm's node database and follow aliases; set
// by browser.sh), and how long to wait for seedd to learn them from node announcements.
const HTTPD_ALIASES = (() => {
  try {
    return JSON.parse(process.env.HTTPD_ALIASES || "{}");
  } catch {
    return {};
  }
})();
// seedd remembers a looked-up alias, and its absence, for 60 s (http/src/web/aliases.rs): a
// node named in an answer before its announcement arrived (palm and alice are delegates, listed
// by globalSetup's readiness check) shows its alias up to 60 s after seedd learns it.
const GOSSIP_TIMEOUT = Number(process.env.GOSSIP_TIMEOUT_MS || 90_000);
const BOB_HEAD = "82f570ec909e77c7e1bb764f1429b1e01b1b4a90";
// alice's feature/move-copy-files: copies/aaa.txt → copies/aaa_copy.txt (copied, with a
// change) and moves/111.txt → moves/222.txt (moved, with a change); tests/e2e/repo/commit.spec.ts
// "moved file" / "copied file".
const MOVE_COPY_COMMIT = "f48a1056a5bd02277978f6e8a00517a967546340";

const node = `/nodes/${SEED}`;
const repo = rid => `${node}/${rid}`;

// Requests to the seed that may answer 404 while a page loads, each with why it is fine.
// Matched on method and path (query excluded); anything else not 2xx fails the page.
const EXPECTED_404 = [
  {
    method: "GET",
    path: /^\/api\/v1\/repos\/rad:\w+\/readme\/[0-9a-f]{40}$/,
    why: "a revision without a README (alice's orphaned-branch): radicle-httpd answers 404 too, and the explorer then shows the tree alone",
  },
];

// ---------------------------------------------------------------------------------------------

const checks = []; // { name, group, ok, detail }
const knownDifferences = []; // { check, difference }: behaviours of httpd seedd cannot have here
function record(group, name, ok, detail) {
  checks.push({ group, name, ok, detail });
  const mark = ok ? "PASS" : "FAIL";
  console.log(`  [${mark}] ${name}${detail ? `: ${detail}` : ""}`);
}

const seedOrigins = new Set([
  `http://${seedHost}:${seedPort}`,
  `http://localhost:${seedPort}`,
  `http://127.0.0.1:${seedPort}`,
]);
function isSeedUrl(u) {
  try {
    const url = new URL(u);
    return seedOrigins.has(url.origin);
  } catch {
    return false;
  }
}
function isLoopback(u) {
  try {
    const h = new URL(u).hostname;
    return h === "localhost" || h === "127.0.0.1" || h === "[::1]";
  } catch {
    return u.startsWith("data:") || u.startsWith("blob:");
  }
}

async function seedJson(path) {
  const r = await fetch(`${SEED_URL}/api/v1/${path}`);
  if (!r.ok) throw new Error(`GET /api/v1/${path}: ${r.status}`);
  return r.json();
}

const clean = s => s.replace(/\s+/g, " ").trim();
const short = (s, n = 240) => (s.length > n ? `${s.slice(0, n)}…` : s);

// One browser tab with its own log of seed responses and page errors.
class Tab {
  constructor(page) {
    this.page = page;
    this.responses = [];
    this.failedRequests = [];
    this.errors = [];
    page.on("response", r => {
      if (isSeedUrl(r.url())) {
        const u = new URL(r.url());
        this.responses.push({
          method: r.request().method(),
          path: u.pathname,
          query: u.search,
          status: r.status(),
        });
      }
    });
    page.on("requestfailed", r => {
      if (isSeedUrl(r.url())) {
        const u = new URL(r.url());
        // The app aborts superseded requests itself (AbortController): not a failure.
        const why = r.failure()?.errorText || "failed";
        if (why !== "net::ERR_ABORTED") {
          this.failedRequests.push(`${r.method()} ${u.pathname}${u.search}: ${why}`);
        }
      }
    });
    page.on("pageerror", e => this.errors.push(String(e?.message || e)));
  }

  mark() {
    return { r: this.responses.length, f: this.failedRequests.length, e: this.errors.length };
  }

  since(m) {
    return {
      responses: this.responses.slice(m.r),
      failed: this.failedRequests.slice(m.f),
      errors: this.errors.slice(m.e),
    };
  }

  async text() {
    return this.page.evaluate(() => document.body?.innerText ?? "");
  }

  // Waits until the page shows every text of `texts` (a string or a list), or, given
  // { selector }, until an element matches it.
  async waitText(texts, timeout = PAGE_TIMEOUT) {
    if (texts && texts.selector) {
      return this.page
        .waitForSelector(texts.selector, { timeout })
        .then(() => true)
        .catch(() => false);
    }
    const list = Array.isArray(texts) ? texts : [texts];
    try {
      await this.page.waitForFunction(
        ts => {
          const t = (document.body?.innerText ?? "").replace(/\s+/g, " ");
          return ts.every(x => t.includes(x));
        },
        { timeout, polling: 200 },
        list,
      );
      return true;
    } catch {
      return false;
    }
  }

  async settle() {
    try {
      await this.page.waitForNetworkIdle({ idleTime: 700, timeout: PAGE_TIMEOUT });
    } catch {
      // a long poll or slow request: judged by the responses seen
    }
  }

  async goto(path) {
    await this.page.goto(`${APP}${path}`, { waitUntil: "load", timeout: PAGE_TIMEOUT });
  }

  async screenshot(name) {
    if (!OUT_DIR) return;
    try {
      await this.page.screenshot({
        path: Path.join(OUT_DIR, `${name.replace(/[^a-z0-9-]+/gi, "_")}.png`),
        fullPage: true,
      });
    } catch {
      // best effort
    }
  }
}

function expected404(res) {
  return EXPECTED_404.find(
    e => e.method === res.method && e.path.test(res.path),
  );
}

// Judges what the seed answered while a page loaded.
function judgeTraffic(log) {
  const bad = [];
  for (const r of log.responses) {
    if (r.status >= 200 && r.status < 300) continue;
    if (r.status === 304) continue;
    if (r.status === 404 && expected404(r)) continue;
    bad.push(`${r.method} ${r.path}${r.query} → ${r.status}`);
  }
  bad.push(...log.failed.map(f => `${f} (network)`));
  bad.push(...log.errors.map(e => `uncaught page error: ${short(e, 300)}`));
  return bad;
}

const pagesVisited = []; // { name, path, requests: [...] }

// Visits a page, waits for `wait` (text, texts or { selector }), then for the seed traffic
// to settle; then runs `action` (a click a user makes on that page), if any, which returns
// a problem or "".
async function visitPage(tab, name, path, wait, action) {
  const m = tab.mark();
  let problem = "";
  try {
    await tab.goto(path);
    if (!(await tab.waitText(wait))) {
      problem = `did not show ${JSON.stringify(wait)}; page shows: "${short(clean(await tab.text()), 300)}"`;
    }
    await tab.settle();
    if (!problem && action) {
      problem = await action(tab);
      await tab.settle();
    }
  } catch (e) {
    problem = `navigation failed: ${e.message}`;
  }
  const log = tab.since(m);
  const bad = judgeTraffic(log);
  pagesVisited.push({
    name,
    path,
    requests: log.responses.map(
      r => `${r.method} ${r.path}${r.query} ${r.status}${r.status === 404 && expected404(r) ? " (expected)" : ""}`,
    ),
  });
  const ok = !problem && bad.length === 0;
  const detail = [problem, ...bad].filter(Boolean).join("; ");
  record("page", `page ${name} (${path})`, ok, ok ? `${log.responses.length} seed requests` : detail);
  if (!ok) await tab.screenshot(`page-${name}`);
  return ok;
}

// ---------------------------------------------------------------------------------------------
// The five checks.

// 1. A commit that moves and copies files shows them as moved/copied, not as delete + add.
async function checkRenames(tab) {
  const name = "1 renames-and-copies";
  const path = `${repo(RID.sourceBrowsing)}/remotes/${ALICE}/commits/${MOVE_COPY_COMMIT}`;
  const m = tab.mark();
  await tab.goto(path);
  const loaded = await tab.waitText(["Copy and move files", "with"]);
  await tab.settle();
  const headers = await tab.page.evaluate(() =>
    [...document.querySelectorAll(".diff-list .file")].map(f =>
      (f.querySelector(".header")?.textContent ?? f.textContent ?? "").replace(/\s+/g, " ").trim(),
    ),
  );
  const summary = await tab.page.evaluate(
    () => document.querySelector(".summary")?.textContent?.replace(/\s+/g, " ").trim() ?? "",
  );
  const squash = s => s.replace(/\s+/g, "");
  const want = [
    "moves/111.txt→moves/222.txtmoved",
    "copies/aaa.txt→copies/aaa_copy.txtcopied",
  ];
  const missing = want.filter(w => !headers.some(h => squash(h).startsWith(w)));
  const wantSummary = "1 file modified, 1 file copied, 1 file moved with 3 insertions and 0 deletions";
  const bad = judgeTraffic(tab.since(m));
  const ok = loaded && missing.length === 0 && summary === wantSummary && bad.length === 0;
  const detail = ok
    ? `"${summary}"`
    : [
        !loaded ? `commit page did not load: "${short(clean(await tab.text()))}"` : "",
        missing.length ? `missing file headers ${missing.map(w => JSON.stringify(w.replace("→", " → "))).join(", ")}` : "",
        `saw summary "${summary}" (want "${wantSummary}")`,
        `saw file headers ${JSON.stringify(headers)}`,
        ...bad,
      ]
        .filter(Boolean)
        .join("; ");
  record("check", name, ok, detail);
  if (!ok) await tab.screenshot(name);
}

// The first visible element matching `selector` (the explorer renders some controls twice,
// for desktop and mobile, one of them hidden).
async function visible(page, selector) {
  const handle = await page.evaluateHandle(
    sel => [...document.querySelectorAll(sel)].find(e => e.offsetParent !== null) ?? null,
    selector,
  );
  return handle.asElement();
}

// Expands a folder of the source tree, as a user clicks it, and waits for `child` in it.
function expandFolder(folder, child) {
  return async tab => {
    const handle = await tab.page.evaluateHandle(
      name =>
        [...document.querySelectorAll(".folder")].find(
          e => e.querySelector(".folder-name")?.textContent.trim() === name,
        ) ?? null,
      folder,
    );
    const el = handle.asElement();
    if (!el) return `no folder "${folder}" in the source tree`;
    await el.click();
    return (await tab.waitText(child)) ? "" : `expanding "${folder}" did not show "${child}"`;
  };
}

// The first visible <button> whose text is `text`.
async function buttonByText(page, text, timeout) {
  const handle = await page
    .waitForFunction(
      t =>
        [...document.querySelectorAll("button")].find(
          b => b.textContent.replace(/\s+/g, " ").trim() === t && b.offsetParent !== null,
        ),
      { timeout, polling: 200 },
      text,
    )
    .catch(() => null);
  return handle?.asElement() ?? null;
}

// Opens the Clone popover's Download tab and reports what it says.
async function cloneDownloadTab(tab) {
  const page = tab.page;
  const clone = await buttonByText(page, "Clone", PAGE_TIMEOUT);
  if (!clone) return { error: "no Clone button" };
  await clone.click();
  const download = await buttonByText(page, "Download", 10_000);
  if (!download) return { error: "no Download tab in the Clone popover" };
  await download.click();
  await tab.waitText(["archive"], 15_000);
  await tab.settle();
  const text = clean(await tab.text());
  return { text };
}

function tarballProblems(buf, contentType) {
  const problems = [];
  let tar = buf;
  if (buf[0] === 0x1f && buf[1] === 0x8b) {
    try {
      tar = Zlib.gunzipSync(buf);
    } catch (e) {
      problems.push(`gzip does not decompress: ${e.message}`);
      return problems;
    }
  }
  if (tar.length < 512 || tar.subarray(257, 262).toString("latin1") !== "ustar") {
    problems.push(
      `body is not a (gzipped) tar: ${buf.length} bytes, content-type ${contentType}, starts ${JSON.stringify(buf.subarray(0, 60).toString("latin1"))}`,
    );
  }
  return problems;
}

// 2. On a peer's branch view the archive download works.
async function checkPeerArchive(tab) {
  const name = "2 peer-archive-download";
  const cases = [
    { peer: BOB, alias: "bob", branch: "main", path: `${repo(RID.sourceBrowsing)}/remotes/${BOB}`, wait: "Updated readme" },
    {
      peer: ALICE,
      alias: "alice",
      branch: "feature/branch",
      path: `${repo(RID.sourceBrowsing)}/remotes/${ALICE}/tree/feature/branch`,
      wait: "Add subconscious file",
    },
  ];
  const problems = [];
  const seen = [];
  for (const c of cases) {
    const archivePath = `/raw/${RID.sourceBrowsing}/archive/refs/namespaces/${c.peer}/refs/heads/${c.branch}`;
    const m = tab.mark();
    await tab.goto(c.path);
    if (!(await tab.waitText(c.wait))) {
      problems.push(`${c.alias}/${c.branch}: peer view did not load: "${short(clean(await tab.text()))}"`);
      continue;
    }
    await tab.settle();
    const { text, error } = await cloneDownloadTab(tab);
    const log = tab.since(m);
    const probes = log.responses.filter(r => r.path.startsWith(`/raw/`) && r.path.includes("/archive/"));
    const probeDesc = probes.map(r => `${r.method} ${decodeURIComponent(r.path)} → ${r.status}`);
    seen.push(`${c.alias}/${c.branch}: ${probeDesc.join(", ") || "no archive request"}`);
    if (error) {
      problems.push(`${c.alias}/${c.branch}: ${error}`);
      continue;
    }
    if (!probes.some(r => decodeURIComponent(r.path) === archivePath)) {
      problems.push(`${c.alias}/${c.branch}: the explorer did not request ${archivePath} (saw ${probeDesc.join(", ") || "none"})`);
    }
    for (const r of probes) {
      if (r.status < 200 || r.status >= 300) problems.push(`${c.alias}/${c.branch}: ${r.method} ${decodeURIComponent(r.path)} → ${r.status}`);
    }
    if (text.includes("doesn't support archive downloads")) {
      problems.push(`${c.alias}/${c.branch}: UI says "The radicle-httpd on this node doesn't support archive downloads."`);
    } else if (!text.includes(`curl -OJ`) || !text.includes(archivePath)) {
      problems.push(`${c.alias}/${c.branch}: Download tab does not show "curl -OJ …${archivePath}"`);
    }
    // The tarball itself (what `curl -OJ` or the browser would download).
    try {
      const r = await fetch(`${SEED_URL}${archivePath}`);
      const body = Buffer.from(await r.arrayBuffer());
      if (r.status !== 200) {
        problems.push(`${c.alias}/${c.branch}: GET ${archivePath} → ${r.status} ${short(clean(body.toString("utf8")), 160)}`);
      } else {
        for (const p of tarballProblems(body, r.headers.get("content-type"))) problems.push(`${c.alias}/${c.branch}: ${p}`);
      }
    } catch (e) {
      problems.push(`${c.alias}/${c.branch}: GET ${archivePath} failed: ${e.message}`);
    }
    for (const e of log.errors) problems.push(`uncaught page error: ${short(e, 200)}`);
  }
  const ok = problems.length === 0;
  record("check", name, ok, ok ? seen.join("; ") : problems.join("; "));
  if (!ok) await tab.screenshot(name);
}

// 3. The node page: seeding policy, external address, description.
async function checkNodePage(tab) {
  const name = "3 node-page";
  const m = tab.mark();
  await tab.goto(node);
  const loaded = await tab.waitText("Seeding Policy");
  await tab.settle();
  const seen = await tab.page.evaluate(() => {
    const policy = document.querySelector(".policies .txt-body-m-semibold")?.textContent?.trim() ?? "";
    const address = document.querySelector('[aria-label="node-id"]')?.textContent?.replace(/\s+/g, "") ?? "";
    const description =
      document.querySelector(".description")?.textContent?.replace(/\s+/g, " ").trim() ??
      (document.body.innerText.includes("No description configured.") ? "(No description configured.)" : "");
    return { policy, address, description };
  });
  const problems = [];
  if (!loaded) problems.push(`node page did not load: "${short(clean(await tab.text()))}"`);
  if (seen.policy !== "Permissive") problems.push(`seeding policy shows "${seen.policy}" (want "Permissive": seedd's default is allow/all)`);
  if (!seen.address.includes("@seed.example.test:8776")) problems.push(`node address shows "${seen.address}" (want "…@seed.example.test:8776")`);
  if (seen.description !== "seedd browser test") problems.push(`description shows "${seen.description}" (want "seedd browser test")`);
  problems.push(...judgeTraffic(tab.since(m)));
  if (problems.length) {
    try {
      const n = await seedJson("node");
      const c = n.config;
      problems.push(
        `/api/v1/node has description ${JSON.stringify(n.description)}, config ${c === null ? "null" : `{seedingPolicy: ${JSON.stringify(c.seedingPolicy)}, externalAddresses: ${JSON.stringify(c.externalAddresses)}, …}`}`,
      );
    } catch (e) {
      problems.push(`/api/v1/node: ${e.message}`);
    }
  }
  const ok = problems.length === 0;
  record("check", name, ok, ok ? `${seen.policy}, ${seen.address}, "${seen.description}"` : problems.join("; "));
  if (!ok) await tab.screenshot(name);
}

// 4. Search: the header search box, finding a fixture repo, and /explore listing repos.
async function checkSearch(tab) {
  const name = "4 search-and-explore";
  const page = tab.page;
  const problems = [];
  const seen = [];
  const m = tab.mark();
  await tab.goto("/explore");
  // Each section shows its repo cards, or "No repos to show.", once its requests finish.
  await tab.waitText({ selector: ".section .repo-card, .section .empty" });
  await tab.settle();
  const explore = await page.evaluate(() => ({
    titles: [...document.querySelectorAll(".section .header .title")].map(e => e.textContent.replace(/\s+/g, " ").trim()),
    cards: [...document.querySelectorAll(".repo-card")].length,
    empty: [...document.querySelectorAll(".section .empty")].map(e => e.textContent.trim()),
    searchBox: !!document.querySelector('input[aria-label="Search repositories"]'),
  }));
  const infoResp = tab.since(m).responses.filter(r => r.path === "/api/v1/info");
  seen.push(`/explore sections ${JSON.stringify(explore.titles)} with ${explore.cards} repo cards`);
  if (explore.cards === 0 || explore.empty.length > 0) {
    problems.push(
      `/explore shows ${explore.cards} repos${explore.empty.length ? ` and "${explore.empty.join('", "')}"` : ""} in sections ${JSON.stringify(explore.titles)}`,
    );
  }
  if (!explore.searchBox) {
    let info = "";
    try {
      info = JSON.stringify((await seedJson("info")).httpd);
    } catch (e) {
      info = e.message;
    }
    problems.push(`no "Search repositories" box in the header (/api/v1/info httpd = ${info}; requested ${infoResp.length}×)`);
  } else {
    const input = await page.$('input[aria-label="Search repositories"]');
    await input.click();
    await input.type("source", { delay: 30 });
    const found = await page
      .waitForFunction(
        () => [...document.querySelectorAll(".dropdown a")].some(a => a.textContent.includes("source-browsing")),
        { timeout: 15_000, polling: 200 },
      )
      .then(() => true)
      .catch(() => false);
    if (!found) {
      const dd = await page.evaluate(() => document.querySelector(".dropdown")?.textContent?.replace(/\s+/g, " ").trim() ?? "(no dropdown)");
      problems.push(`typing "source" did not list source-browsing; dropdown: "${short(dd)}"`);
    } else {
      await page.keyboard.press("ArrowDown");
      await page.keyboard.press("Enter");
      const navigated = await page
        .waitForFunction(rid => location.pathname.includes(rid), { timeout: 15_000 }, RID.sourceBrowsing)
        .then(() => true)
        .catch(() => false);
      if (!navigated) problems.push(`choosing the search result did not open ${RID.sourceBrowsing} (at ${page.url()})`);
      else seen.push(`search "source" → source-browsing`);
      await tab.settle();
    }
  }
  // Elsewhere (a repo page) the header offers search as a button.
  await tab.goto(repo(RID.markdown));
  if (await tab.waitText("Markdown")) {
    await tab.settle();
    const button = await page.$('[aria-label="Search repositories"]');
    if (!button) problems.push(`no "Search repositories" button in a repo page's header`);
    else seen.push("repo page header has the search button");
  } else problems.push("the markdown repo page did not load");
  problems.push(...judgeTraffic(tab.since(m)));
  const ok = problems.length === 0;
  record("check", name, ok, ok ? seen.join("; ") : problems.join("; "));
  if (!ok) await tab.screenshot(name);
}

// Before browsing: waits (GOSSIP_TIMEOUT) until seedd's /api/v1/nodes/{nid} names each
// fixture node, i.e. until seedd holds its node announcement. Returns, per node, the alias seen
// and after how long.
async function waitForAliases() {
  const t0 = Date.now();
  const learned = new Map(); // nid → { alias, ms }
  const last = new Map(); // nid → last answer, for the report
  const first = new Map(); // nid → first answer and when
  for (;;) {
    for (const { nid } of FIXTURE_NODES) {
      if (learned.has(nid)) continue;
      try {
        const r = await fetch(`${SEED_URL}/api/v1/nodes/${nid}`);
        const body = r.ok ? await r.json() : null;
        last.set(nid, r.ok ? `alias ${JSON.stringify(body.alias)}` : `HTTP ${r.status}`);
        if (!first.has(nid)) first.set(nid, `${new Date().toISOString()} ${last.get(nid)}`);
        if (body && body.alias) learned.set(nid, { alias: body.alias, ms: Date.now() - t0 });
      } catch (e) {
        last.set(nid, e.message);
      }
    }
    if (learned.size === FIXTURE_NODES.length || Date.now() - t0 > GOSSIP_TIMEOUT) break;
    await new Promise(resolve => setTimeout(resolve, 250));
  }
  const result = FIXTURE_NODES.map(({ nid, alias }) => ({
    nid,
    want: alias,
    httpd: HTTPD_ALIASES[nid] ?? null,
    got: learned.get(nid)?.alias ?? null,
    ms: learned.get(nid)?.ms ?? null,
    last: last.get(nid) ?? "",
    first: first.get(nid) ?? "",
  }));
  for (const a of result) {
    console.log(
      a.got
        ? `  seedd names ${a.nid.slice(0, 12)}… "${a.got}" after ${(a.ms / 1000).toFixed(1)} s (httpd: ${JSON.stringify(a.httpd)}; first answer ${a.first})`
        : `  seedd did not learn the alias of ${a.want} (${a.nid}) within ${GOSSIP_TIMEOUT / 1000} s: GET /api/v1/nodes/${a.nid} → ${a.last} (httpd: ${JSON.stringify(a.httpd)})`,
    );
  }
  return result;
}

// The aliases the API gives in its answers (not only /nodes/{nid}): remotes, COB authors,
// reviewers, delegates.
async function apiAliasProblems(ids, assert) {
  const problems = [];
  const want = (where, got, nid) => {
    const alias = FIXTURE_NODES.find(n => n.nid === nid)?.alias;
    if (assert.has(nid) && got !== alias) problems.push(`${where} has alias ${JSON.stringify(got)} for ${alias} (want "${alias}")`);
  };
  const remotes = await seedJson(`repos/${RID.sourceBrowsing}/remotes`);
  for (const nid of [ALICE, BOB]) want(`/remotes of source-browsing`, remotes.find(r => r.id === nid)?.alias, nid);
  const sb = await seedJson(`repos/${RID.sourceBrowsing}`);
  const aliceDelegate = sb.delegates?.find(d => d.id === `did:key:${ALICE}`);
  want("source-browsing's delegates", aliceDelegate?.alias, ALICE);
  const issue = await seedJson(`repos/${RID.cobs}/issues/${ids.issue}`);
  want("the issue's author", issue.author?.alias, PALM);
  const patch = await seedJson(`repos/${RID.cobs}/patches/${ids.patch}`);
  want("the patch's author", patch.author?.alias, PALM);
  const reviewers = patch.revisions.flatMap(r => r.reviews ?? []).map(r => r.author);
  want("the patch's reviews", reviewers.find(a => a.id === `did:key:${EVE}`)?.alias, EVE);
  return problems;
}

// 5. Names: peers and authors show their alias, not did:key.
async function checkNames(tab, ids, gossip) {
  const name = "5 names";
  const page = tab.page;
  const problems = [];
  const seen = [];
  const m = tab.mark();

  // What seedd learned from gossip, against what httpd would show.
  const assert = new Set();
  for (const a of gossip) {
    if (KNOWN_UNREACHABLE[a.nid]) continue;
    assert.add(a.nid);
    if (a.httpd !== a.want) problems.push(`radicle-httpd would name ${a.want} ${JSON.stringify(a.httpd)} (palm's node db): fixtures incomplete?`);
    if (a.got !== a.want) problems.push(`seedd did not learn "${a.want}" (${a.nid}) from gossip within ${GOSSIP_TIMEOUT / 1000} s: /api/v1/nodes → ${a.last}`);
  }
  seen.push(`learned ${gossip.filter(a => a.got).map(a => `${a.got} ${(a.ms / 1000).toFixed(1)} s`).join(", ") || "none"}`);
  try {
    problems.push(...(await apiAliasProblems(ids, assert)));
  } catch (e) {
    problems.push(`API aliases: ${e.message}`);
  }
  const asserted = alias => assert.has(FIXTURE_NODES.find(n => n.alias === alias)?.nid);

  const nodeIds = () =>
    page.evaluate(() =>
      [...document.querySelectorAll(".avatar-alias")]
        .filter(e => e.offsetParent !== null)
        .map(e => e.innerText.replace(/\s+/g, " ").trim()),
    );

  // a) the peer/branch selector of source-browsing lists alice and bob.
  await tab.goto(repo(RID.sourceBrowsing));
  if (await tab.waitText("Git test repository")) {
    await tab.settle();
    const toggle = await visible(page, '[title="Change branch"]');
    if (toggle) {
      await toggle.click();
      await page.waitForSelector('[aria-label="peer-item"]', { timeout: 10_000 }).catch(() => null);
      const peers = await page.evaluate(() =>
        [...document.querySelectorAll('[aria-label="peer-item"]')].map(e => e.innerText.replace(/\s+/g, " ").trim()),
      );
      seen.push(`peers ${JSON.stringify(peers)}`);
      for (const alias of ["alice", "bob"].filter(asserted)) {
        if (!peers.some(p => p.split(" ").includes(alias))) {
          problems.push(`branch selector peers are ${JSON.stringify(peers)} (want "${alias}")`);
        }
      }
    } else problems.push("no branch selector on source-browsing");
  } else problems.push(`source-browsing did not load: "${short(clean(await tab.text()))}"`);

  // b) a peer's view names the peer in the branch selector button.
  await tab.goto(`${repo(RID.sourceBrowsing)}/remotes/${BOB}`);
  if (await tab.waitText("Updated readme")) {
    await tab.settle();
    const button = await page.evaluate(
      () =>
        [...document.querySelectorAll('[title="Change branch"]')]
          .find(e => e.offsetParent !== null)
          ?.querySelector(".node-id")
          ?.textContent?.replace(/\s+/g, " ")
          .trim() ?? "",
    );
    seen.push(`bob's view: "${button}"`);
    if (asserted("bob") && button !== "bob") problems.push(`bob's peer view shows "${button}" (want "bob")`);
  } else problems.push(`bob's view did not load`);

  // c) issue and patch authors, assignees, reviewers.
  const cobPages = [
    { what: "issue", path: `${repo(RID.cobs)}/issues/${ids.issue}`, wait: "This is a multiline comment", want: ["palm"] },
    { what: "patch", path: `${repo(RID.cobs)}/patches/${ids.patch}`, wait: "Taking another stab at the README", want: ["palm", "eve"] },
    { what: "issues list", path: `${repo(RID.cobs)}/issues`, wait: "This title has", want: ["palm"] },
  ];
  for (const c of cobPages) {
    await tab.goto(c.path);
    if (!(await tab.waitText(c.wait))) {
      problems.push(`${c.what} did not load: "${short(clean(await tab.text()))}"`);
      continue;
    }
    await tab.settle();
    const names = [...new Set(await nodeIds())];
    seen.push(`${c.what}: ${JSON.stringify(names)}`);
    const dids = names.filter(n => n.startsWith("did:key:") || /^z6Mk\w{2}…/.test(n));
    if (dids.length && c.want.every(asserted)) problems.push(`${c.what} shows ${JSON.stringify(dids)} instead of aliases`);
    for (const alias of c.want.filter(asserted)) {
      if (!names.includes(alias)) problems.push(`${c.what} does not name "${alias}" (shows ${JSON.stringify(names)})`);
    }
  }
  problems.push(...judgeTraffic(tab.since(m)));
  const known = Object.entries(KNOWN_UNREACHABLE).map(([nid, why]) => `${FIXTURE_NODES.find(n => n.nid === nid)?.alias}: ${why}`);
  if (known.length) seen.push(`known differences (not asserted): ${known.join("; ")}`);
  const ok = problems.length === 0;
  record("check", name, ok, ok ? seen.join("; ") : [...new Set(problems)].join("; "));
  for (const k of known) knownDifferences.push({ check: name, difference: k });
  if (!ok) await tab.screenshot(name);
}

// ---------------------------------------------------------------------------------------------

async function main() {
  if (OUT_DIR) Fs.mkdirSync(OUT_DIR, { recursive: true });
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox",
      "--headless=new",
      "--no-first-run",
      "--no-default-browser-check",
      "--disable-component-update",
      "--disable-background-networking",
      "--disable-sync",
      "--disable-default-apps",
      "--disable-domain-reliability",
      "--disable-breakpad",
      "--metrics-recording-only",
      "--disable-dev-shm-usage",
    ],
    defaultViewport: { width: 1280, height: 900 },
    protocolTimeout: 120_000,
  });
  let failed = false;
  try {
    const page = await browser.newPage();
    // As the explorer's e2e fixture does: the app's test-mode port resolution, and no request
    // leaves loopback (none could: this runs in a private network namespace).
    await page.evaluateOnNewDocument(() => {
      globalThis.__PLAYWRIGHT__ = true;
    });
    await page.setRequestInterception(true);
    page.on("request", req => {
      if (isLoopback(req.url())) req.continue();
      else req.abort("blockedbyclient");
    });
    const tab = new Tab(page);

    // Fixture ids the routes need (tests/support/fixtures.ts creates them; ids are not fixed).
    const issues = await seedJson(`repos/${RID.cobs}/issues?state=open`);
    const patches = await seedJson(`repos/${RID.cobs}/patches?state=open`);
    const issue = issues.find(i => i.title.includes("has **markdown**")) ?? issues[0];
    const patch = patches.find(p => p.title === "Taking another stab at the README") ?? patches[0];
    const ids = { issue: issue?.id, patch: patch?.id };
    const allPatches = [];
    for (const state of ["open", "draft", "archived", "merged"]) {
      allPatches.push(...(await seedJson(`repos/${RID.cobs}/patches?state=${state}`)));
    }
    const merged = allPatches.find(p => p.title === "Let's add a README");

    console.log(`Aliases from gossip (waiting up to ${GOSSIP_TIMEOUT / 1000} s):`);
    const gossip = await waitForAliases();

    console.log("Pages:");
    const sb = repo(RID.sourceBrowsing);
    const pages = [
      ["landing", "/", "source-browsing"],
      ["node", node, "source-browsing"],
      ["explore", "/explore", { selector: ".section .repo-card, .section .empty" }],
      ["explore-repos", "/explore/repos", "source-browsing"],
      ["repo source-browsing", sb, "Git test repository"],
      ["tree directory (expand src/)", sb, "Git test repository", expandFolder("src", "true.c")],
      ["file", `${sb}/tree/main/src/true.c`, "return 0;"],
      ["file with spaces", `${sb}/tree/main/special/spaces%20are%20okay`, "spaces are okay"],
      ["history", `${sb}/history`, "Verify that crate::DoubleColon::should_work()"],
      ["commit", `${sb}/commits/${BOB_HEAD}`, ["Update readme", "1 file modified"]],
      ["commit move/copy", `${sb}/remotes/${ALICE}/commits/${MOVE_COPY_COMMIT}`, "Copy and move files"],
      ["peer alice", `${sb}/remotes/${ALICE}`, "Git test repository"],
      ["peer bob", `${sb}/remotes/${BOB}`, "Updated readme"],
      ["peer branch", `${sb}/remotes/${ALICE}/tree/feature/branch`, "Add subconscious file"],
      ["peer empty branch", `${sb}/remotes/${ALICE}/tree/orphaned-branch`, "No files at this revision"],
      ["peer history", `${sb}/remotes/${BOB}/history`, "Update readme"],
      ["markdown file", `${repo(RID.markdown)}/tree/main/cheatsheet.md`, "Markdown"],
      ["commits history", `${repo(RID.commits)}/history`, "Commit 30"],
      ["issues", `${repo(RID.cobs)}/issues`, "This title has"],
      ["issues closed", `${repo(RID.cobs)}/issues?status=closed`, "A closed issue"],
      ["issue", `${repo(RID.cobs)}/issues/${ids.issue}`, "This is a multiline comment"],
      ["patches", `${repo(RID.cobs)}/patches`, "Taking another stab at the README"],
      ["patch", `${repo(RID.cobs)}/patches/${ids.patch}`, "Taking another stab at the README"],
      ["patch changes", `${repo(RID.cobs)}/patches/${ids.patch}?tab=changes`, "README.md"],
      ...(merged ? [["patch merged", `${repo(RID.cobs)}/patches/${merged.id}`, "Let's add a README"]] : []),
      ["user", `${node}/users/did:key:${PALM}`, "cobs"],
    ];
    for (const [n, p, w, action] of pages) {
      if (!(await visitPage(tab, n, p, w, action))) failed = true;
    }

    console.log("Checks:");
    for (const check of [checkRenames, checkPeerArchive, checkNodePage, checkSearch]) {
      try {
        await check(tab);
      } catch (e) {
        record("check", check.name, false, `crashed: ${e.stack || e}`);
      }
    }
    try {
      await checkNames(tab, ids, gossip);
    } catch (e) {
      record("check", "5 names", false, `crashed: ${e.stack || e}`);
    }
  } finally {
    await browser.close();
  }

  // Summary table.
  const rows = checks.map(c => [c.ok ? "PASS" : "FAIL", c.group, c.name]);
  const w = Math.max(...rows.map(r => r[2].length));
  console.log("");
  console.log(`${"result".padEnd(6)}  ${"kind".padEnd(5)}  ${"check".padEnd(w)}`);
  console.log(`${"-".repeat(6)}  ${"-".repeat(5)}  ${"-".repeat(w)}`);
  for (const r of rows) console.log(`${r[0].padEnd(6)}  ${r[1].padEnd(5)}  ${r[2]}`);
  const nFail = checks.filter(c => !c.ok).length;
  for (const k of knownDifferences) console.log(`${"KNOWN".padEnd(6)}  ${"diff".padEnd(5)}  ${k.check}: ${k.difference}`);
  console.log(`\n${checks.length - nFail} passed, ${nFail} failed${knownDifferences.length ? `, ${knownDifferences.length} known differences` : ""}`);
  if (OUT_DIR) {
    Fs.writeFileSync(
      Path.join(OUT_DIR, "report.json"),
      JSON.stringify({ checks, knownDifferences, pages: pagesVisited }, null, 2),
    );
    console.log(`report and screenshots of failures: ${OUT_DIR}`);
  }
  if (process.env.BROWSER_LIST_REQUESTS === "1") {
    for (const p of pagesVisited) {
      console.log(`\n${p.name} ${p.path}`);
      for (const r of p.requests) console.log(`    ${r}`);
    }
  }
  process.exit(nFail || failed ? 1 : 0);
}

main().catch(e => {
  console.error(e);
  process.exit(2);
});
