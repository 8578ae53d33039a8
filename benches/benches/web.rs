//! The radicle-httpd JSON API (issue 15): seedd against radicle-httpd 0.27 on the same storage,
//! in one run, by the measurement rules of issue 29 §1 (`seedd_benches::measure`). Prints
//! requests/s, p50/p99 latency, server CPU per request and memory for the endpoints the
//! explorer calls most (repository listing, repository info, tree, blob, commit, history, issue
//! list, one issue) with the ratio seedd / httpd, and writes them to
//! `<target>/seedd-bench-web.json`. See `benches/runs/web.md`.
//!
//! Storage: a copy of alice's Radicle home from the test fixtures (`scripts/make-fixtures.sh`,
//! real `rad`), with `SEEDD_BENCH_WEB_ISSUES` (default 50) issues opened on every public
//! repository with `rad issue open` (every other issue then gets a comment). httpd runs on that home (`RAD_HOME`), seedd on a data dir
//! whose `storage` is a link to the same directory. httpd 0.27 is not on crates.io: build it
//! from a radicle-explorer checkout and name the binary in `SEEDD_BENCH_HTTPD`; without it the
//! bench measures seedd alone and says so.
//!
//! Method:
//! - **A spread of URLs per endpoint**, not one URL repeated: every public repository of the
//!   dataset, every commit of its branches and tags, every directory and file at every such
//!   commit, every issue; the clients go round-robin over the spread (each connection starting
//!   at its own offset). The listing has one URL by nature.
//! - **Each server in its own cgroup** ([`Scope`]: seedd via `spawn_seedd`, httpd via
//!   `scope.command`), pinned to the server cores; CPU per request is the scope's CPU (the
//!   server and everything it starts) over the pass divided by the requests answered 200;
//!   memory is the scope's `memory.peak` over the pass (page cache included; since the server
//!   started where a reset does not hold, cgroup v2: one scope per start) and PSS sampled every
//!   20 ms (Σ VmRSS in the JSON only). The bench and its clients run on the
//!   load cores.
//! - **Cold, then warm**, per endpoint, server and round: the server is started fresh (empty
//!   in-process caches), the page cache of both servers' files is evicted (the Radicle home with
//!   its storage and httpd's databases, seedd's data dir with its index), then the cold pass
//!   asks every URL of the spread once; after a 0.5 s warm-up over the spread, the warm pass
//!   runs `SEEDD_BENCH_WEB_SECS` (3) seconds.
//! - `SEEDD_BENCH_WEB_ROUNDS` (5) rounds, servers in ABBA order, median [min–max].
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seedd_benches::measure::{self, abba, evict, Interval, Pinning, Scope, Summary};
use seedd_benches::{ensure_seedd, profile_dir, write_table, TableLine};
use seedd_tests::{copy_tree, fixtures, free_port, git, radicle_bin, run, stdout};
use serde_json::{json, Value};

/// Seconds of the warm pass per endpoint, server and round (`SEEDD_BENCH_WEB_SECS`).
const SECS: usize = 3;
/// Keep-alive client connections per pass.
const CONNS: usize = 4;
/// Issues opened on every public repository before measuring (`SEEDD_BENCH_WEB_ISSUES`).
const ISSUES: usize = 50;
/// Rounds (`SEEDD_BENCH_WEB_ROUNDS`).
const ROUNDS: usize = 5;
/// Warm-up before the warm pass.
const WARMUP: f64 = 0.5;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Seedd,
    Httpd,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Seedd => "seedd",
            Kind::Httpd => "radicle-httpd",
        }
    }
}

/// What the servers need to start.
struct Env {
    seedd_bin: PathBuf,
    httpd_bin: Option<PathBuf>,
    /// The Radicle home (httpd's `RAD_HOME`; its `storage` is seedd's).
    home: PathBuf,
    /// seedd's data dir (`storage` links to the home's).
    seedd_data: PathBuf,
    logs: PathBuf,
}

/// A running server in its scope.
struct Server {
    kind: Kind,
    child: Child,
    scope: Arc<Scope>,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM first: seedd closes its index cleanly (no WAL recovery at the next start).
        seedd_benches::stop_child(&mut self.child, Duration::from_secs(10));
        self.scope.kill_all();
    }
}

/// Start `kind` fresh in a new scope and wait until it answers (without touching the
/// endpoints measured: seedd's admin `/readyz`, httpd's `/api/v1`).
fn start(kind: Kind, env: &Env, n: usize) -> Server {
    let log = env.logs.join(format!("{}-{n}.log", kind.label()));
    let (server, ready_url) = match kind {
        Kind::Seedd => {
            let s = seedd_benches::spawn_seedd(
                &env.seedd_bin,
                &env.seedd_data,
                &format!("web-seedd-{n}"),
                "",
                &log,
            );
            let ready = format!("http://127.0.0.1:{}/readyz", s.admin);
            (
                Server {
                    kind,
                    child: s.child,
                    scope: s.scope,
                    base: format!("http://127.0.0.1:{}", s.http),
                },
                ready,
            )
        }
        Kind::Httpd => {
            let bin = env.httpd_bin.as_ref().unwrap();
            let scope = Arc::new(Scope::new(&format!("web-httpd-{n}")));
            let port = free_port();
            let log = std::fs::File::create(&log).unwrap();
            let child = scope
                .command(bin)
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .env("RAD_HOME", &env.home)
                .env("RAD_PASSPHRASE", "")
                .env("RUST_LOG", "info")
                // For the stand-in script (scripts/explorer/radicle-httpd) in smoke runs.
                .env("SEEDD_BIN", &env.seedd_bin)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap();
            scope.started(child.id());
            let base = format!("http://127.0.0.1:{port}");
            (
                Server {
                    kind,
                    child,
                    scope,
                    base: base.clone(),
                },
                format!("{base}/api/v1"),
            )
        }
    };
    let mut server = server;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if matches!(seedd_tests::http_get(&ready_url, &[]), Ok((200, _))) {
            break;
        }
        assert!(
            matches!(server.child.try_wait(), Ok(None)) && Instant::now() < deadline,
            "{} did not answer {ready_url} (log in {})",
            server.kind.label(),
            env.logs.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// How a pass goes over the spread.
#[derive(Clone, Copy)]
enum Pass {
    /// Every URL once (cold).
    Once,
    /// Round-robin until the time is up.
    For(f64),
}

/// One pass on one server.
struct Run {
    /// Latencies of the 200 answers, ms, sorted.
    lat: Vec<f64>,
    errors: u64,
    /// Largest body seen.
    bytes: usize,
    interval: Interval,
}

impl Run {
    fn ok(&self) -> usize {
        self.lat.len()
    }
    fn pct(&self, p: f64) -> f64 {
        let n = self.lat.len();
        if n == 0 {
            return f64::NAN;
        }
        self.lat[((n as f64 * p) as usize).min(n - 1)]
    }
    fn rps(&self) -> f64 {
        self.ok() as f64 / self.interval.wall.as_secs_f64().max(1e-9)
    }
    fn cpu_ms_per_req(&self) -> f64 {
        if self.ok() == 0 {
            return f64::NAN;
        }
        self.interval.cpu_secs() * 1000.0 / self.ok() as f64
    }
}

/// `pass` over `paths` on `server`, over [`CONNS`] keep-alive connections (connection `c`
/// asks `paths[c], paths[c + CONNS], …`), measured on the server's scope.
fn load(server: &Server, paths: &[String], pass: Pass) -> Run {
    let urls: Vec<String> = paths
        .iter()
        .map(|p| format!("{}{p}", server.base))
        .collect();
    let urls = &urls;
    let (results, interval) = measure::measure(&server.scope, || {
        let start = Instant::now();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..CONNS)
                .map(|c| {
                    s.spawn(move || {
                        // One agent per thread: one keep-alive connection.
                        let agent: ureq::Agent = ureq::Agent::config_builder()
                            .http_status_as_error(false)
                            .timeout_global(Some(Duration::from_secs(30)))
                            .build()
                            .into();
                        let (mut lat, mut errors, mut bytes) = (Vec::new(), 0u64, 0usize);
                        let mut k = c;
                        loop {
                            match pass {
                                Pass::Once if k >= urls.len() => break,
                                Pass::For(secs) if start.elapsed().as_secs_f64() >= secs => break,
                                _ => {}
                            }
                            if errors >= 100 {
                                break;
                            }
                            let url = &urls[k % urls.len()];
                            k += CONNS;
                            let t = Instant::now();
                            match agent.get(url).call() {
                                Ok(resp) if resp.status() == 200 => {
                                    let body = resp
                                        .into_body()
                                        .with_config()
                                        .limit(64 << 20)
                                        .read_to_vec()
                                        .unwrap_or_default();
                                    lat.push(t.elapsed().as_secs_f64() * 1000.0);
                                    bytes = bytes.max(body.len());
                                }
                                _ => errors += 1,
                            }
                        }
                        (lat, errors, bytes)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        })
    });
    let mut lat: Vec<f64> = results.iter().flat_map(|r| r.0.iter().copied()).collect();
    lat.sort_by(f64::total_cmp);
    Run {
        lat,
        errors: results.iter().map(|r| r.1).sum(),
        bytes: results.iter().map(|r| r.2).max().unwrap_or(0),
        interval,
    }
}

/// Open `n` issues on `rid` in `home`, as a user of `rad` would, then comment on every other
/// issue of the repository; the ids of all its issues (read from the storage's COB refs:
/// `rad issue open -q` prints nothing).
fn open_issues(home: &Path, rid: &str, n: usize) -> Vec<String> {
    let rad = radicle_bin("rad");
    for i in 0..n {
        run(Command::new(&rad)
            .args(["issue", "open", "--no-announce", "-q", "--repo", rid])
            .args(["--title", &format!("Bench issue {i}")])
            .args([
                "--description",
                &format!("Issue {i} of the web bench.\n\nIt has a paragraph and `code`."),
            ])
            .env("RAD_HOME", home)
            .env("RAD_PASSPHRASE", ""));
    }
    let repo = home.join("storage").join(rid.trim_start_matches("rad:"));
    let refs = stdout(&run(git(home)
        .arg("--git-dir")
        .arg(&repo)
        .args(["for-each-ref", "--format=%(refname)"])));
    let mut ids: Vec<String> = refs
        .lines()
        .filter_map(|r| r.split_once("/refs/cobs/xyz.radicle.issue/"))
        .map(|(_, id)| id.to_owned())
        .collect();
    ids.sort();
    ids.dedup();
    for id in ids.iter().step_by(2) {
        run(Command::new(&rad)
            .args(["issue", "comment", "--no-announce", "-q", "--repo", rid, id])
            .args(["--message", "A comment on it."])
            .env("RAD_HOME", home)
            .env("RAD_PASSPHRASE", ""));
    }
    ids
}

/// The source commits of a stored repository: every commit reachable from a branch or tag,
/// canonical or in a namespace (not the COB and identity histories).
fn source_commits(home: &Path, repo: &Path) -> Vec<String> {
    let refs = stdout(&run(git(home)
        .arg("--git-dir")
        .arg(repo)
        .args(["for-each-ref", "--format=%(refname)"])));
    let tips: Vec<&str> = refs
        .lines()
        .filter(|r| {
            (r.starts_with("refs/heads/")
                || r.starts_with("refs/tags/")
                || r.contains("/refs/heads/")
                || r.contains("/refs/tags/"))
                && !r.contains("/refs/heads/patches/")
        })
        .collect();
    if tips.is_empty() {
        return Vec::new();
    }
    stdout(&run(git(home)
        .arg("--git-dir")
        .arg(repo)
        .args(["rev-list", "--topo-order"])
        .args(&tips)))
    .lines()
    .map(str::to_owned)
    .collect()
}

/// Directories and files of `commit` (`ls-tree -r -t`).
fn paths_at(home: &Path, repo: &Path, commit: &str) -> (Vec<String>, Vec<String>) {
    let out = stdout(&run(git(home).arg("--git-dir").arg(repo).args([
        "ls-tree",
        "-r",
        "-t",
        "--format=%(objecttype) %(path)",
        commit,
    ])));
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    for l in out.lines() {
        match l.split_once(' ') {
            Some(("tree", p)) => dirs.push(p.to_owned()),
            Some(("blob", p)) => files.push(p.to_owned()),
            _ => {}
        }
    }
    (dirs, files)
}

/// Percent-encode what a path segment may not hold as is.
fn enc(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One endpoint: its label and the spread of paths asked.
struct Endpoint {
    label: &'static str,
    paths: Vec<String>,
}

fn endpoints(home: &Path, repos: &[(String, Vec<String>)]) -> Vec<Endpoint> {
    let mut info = Vec::new();
    let (mut trees, mut blobs, mut commits, mut history) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut issue_lists, mut issues) = (Vec::new(), Vec::new());
    for (rid, ids) in repos {
        let r = format!("/api/v1/repos/{rid}");
        let dir = home.join("storage").join(rid.trim_start_matches("rad:"));
        info.push(r.clone());
        for c in source_commits(home, &dir) {
            let (dirs, files) = paths_at(home, &dir, &c);
            trees.push(format!("{r}/tree/{c}/"));
            trees.extend(dirs.iter().map(|d| format!("{r}/tree/{c}/{}", enc(d))));
            blobs.extend(files.iter().map(|f| format!("{r}/blob/{c}/{}", enc(f))));
            commits.push(format!("{r}/commits/{c}"));
            history.push(format!("{r}/commits?parent={c}"));
        }
        issue_lists.push(format!("{r}/issues?status=open&perPage=50"));
        issues.extend(ids.iter().map(|id| format!("{r}/issues/{id}")));
    }
    vec![
        Endpoint {
            label: "listing",
            paths: vec!["/api/v1/repos?show=all".to_owned()],
        },
        Endpoint {
            label: "repository info",
            paths: info,
        },
        Endpoint {
            label: "tree",
            paths: trees,
        },
        Endpoint {
            label: "blob",
            paths: blobs,
        },
        Endpoint {
            label: "commit",
            paths: commits,
        },
        Endpoint {
            label: "history (30)",
            paths: history,
        },
        Endpoint {
            label: "issue list (open)",
            paths: issue_lists,
        },
        Endpoint {
            label: "issue",
            paths: issues,
        },
    ]
}

const MODES: [&str; 2] = ["cold", "warm"];

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    let prov = measure::provenance("web");
    // The bench and its clients on the load cores; the servers' scopes on the server cores.
    Pinning::pin_self_to_load();
    let started = Instant::now();
    let log = move |msg: &str| eprintln!("[{:7.1}s] {msg}", started.elapsed().as_secs_f64());
    let profile = profile_dir();
    let seedd_bin = ensure_seedd(&log, &profile);
    let secs = seedd_benches::env_usize("SEEDD_BENCH_WEB_SECS", SECS).max(1) as f64;
    let issues = seedd_benches::env_usize("SEEDD_BENCH_WEB_ISSUES", ISSUES);
    let rounds = seedd_benches::env_usize("SEEDD_BENCH_WEB_ROUNDS", ROUNDS).max(1);
    if rounds < ROUNDS {
        measure::record_override(&format!(
            "SEEDD_BENCH_WEB_ROUNDS={rounds} (fewer than {ROUNDS} rounds)"
        ));
    }
    if secs as usize != SECS {
        measure::record_config_diff(&format!("SEEDD_BENCH_WEB_SECS = {secs} (default {SECS})"));
    }
    if issues != ISSUES {
        measure::record_config_diff(&format!(
            "SEEDD_BENCH_WEB_ISSUES = {issues} (default {ISSUES})"
        ));
    }
    measure::record_config_diff(
        "seedd: http.rate.per_ip_requests_per_second = 0 (no per-IP limit: the bench measures cost, not admission), policy allow/all, RUST_LOG=info (spawn_seedd)",
    );
    measure::record_config_diff("radicle-httpd: RUST_LOG=info");
    let httpd_bin = std::env::var_os("SEEDD_BENCH_HTTPD").map(PathBuf::from);

    let f = fixtures();
    let alice = f.json["alice"]["home"].as_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    copy_tree(&f.dir.join(alice), &home);
    // Every public repository of the dataset (the private one answers neither server).
    let mut public: Vec<(String, String)> = f.json["repos"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["private"] != true)
        .map(|(name, r)| (name.clone(), r["rid"].as_str().unwrap().to_owned()))
        .collect();
    public.sort();
    let mut repos: Vec<(String, Vec<String>)> = Vec::new();
    for (name, rid) in &public {
        log(&format!(
            "opening {issues} issues on {name} ({rid}) with rad"
        ));
        let ids = open_issues(&home, rid, issues);
        log(&format!("  {} issues on {name}", ids.len()));
        repos.push((rid.clone(), ids));
    }
    let eps = endpoints(&home, &repos);
    for e in &eps {
        log(&format!("{}: {} URLs", e.label, e.paths.len()));
    }

    let seedd_data = tmp.path().join("seedd-data");
    std::fs::create_dir_all(&seedd_data).unwrap();
    std::os::unix::fs::symlink(home.join("storage"), seedd_data.join("storage")).unwrap();
    let logs = tmp.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let env = Env {
        seedd_bin,
        httpd_bin: httpd_bin.clone(),
        home: home.clone(),
        seedd_data: seedd_data.clone(),
        logs,
    };
    let mut kinds = vec![Kind::Seedd];
    match &httpd_bin {
        Some(_) => kinds.push(Kind::Httpd),
        None => log("SEEDD_BENCH_HTTPD is not set: measuring seedd alone"),
    }

    // runs[endpoint][mode][server] over rounds.
    let mut runs: Vec<Vec<Vec<Vec<Run>>>> = eps
        .iter()
        .map(|_| {
            MODES
                .iter()
                .map(|_| kinds.iter().map(|_| Vec::new()).collect())
                .collect()
        })
        .collect();
    let mut starts = 0;
    let mut evicted = measure::Evicted::default();
    for round in 0..rounds {
        for (ei, e) in eps.iter().enumerate() {
            if e.paths.is_empty() {
                continue;
            }
            for si in abba(round, kinds.len()) {
                let kind = kinds[si];
                starts += 1;
                let server = start(kind, &env, starts);
                evicted = evict(&[home.as_path(), seedd_data.as_path()]);
                let cold = load(&server, &e.paths, Pass::Once);
                load(&server, &e.paths, Pass::For(WARMUP));
                let warm = load(&server, &e.paths, Pass::For(secs));
                log(&format!(
                    "round {}/{rounds} {:17} {:13}: cold {:.2} ms CPU/req ({} req), warm {:.0} req/s {:.3} ms CPU/req, {} errors",
                    round + 1,
                    e.label,
                    kind.label(),
                    cold.cpu_ms_per_req(),
                    cold.ok(),
                    warm.rps(),
                    warm.cpu_ms_per_req(),
                    cold.errors + warm.errors
                ));
                drop(server);
                runs[ei][0][si].push(cold);
                runs[ei][1][si].push(warm);
            }
        }
    }
    log(&format!(
        "last eviction: {} files, {:.1} MB",
        evicted.files,
        evicted.bytes as f64 / 1e6
    ));

    // ---- report
    type Metric = (&'static str, &'static str, &'static str, fn(&Run) -> f64);
    let metrics: [Metric; 6] = [
        ("requests/s", "req/s", "higher", Run::rps),
        ("p50 latency", "ms", "lower", |r| r.pct(0.50)),
        ("p99 latency", "ms", "lower", |r| r.pct(0.99)),
        ("CPU per request", "ms", "lower", Run::cpu_ms_per_req),
        ("memory.peak", "MB", "lower", |r| {
            r.interval.memory_peak.map_or(f64::NAN, |b| b as f64 / 1e6)
        }),
        ("PSS peak", "MiB", "lower", |r| {
            r.interval.pss_peak_kib as f64 / 1024.0
        }),
    ];
    let rss: fn(&Run) -> f64 = |r| r.interval.rss_peak_kib as f64 / 1024.0;
    let show = |s: Option<Summary>| s.map_or("-".to_owned(), |s| s.to_string());
    let mut lines = Vec::new();
    let mut json_rows = Vec::new();
    for (ei, e) in eps.iter().enumerate() {
        for (mi, mode) in MODES.iter().enumerate() {
            let group = format!("{}, {mode}", e.label);
            let cell = &runs[ei][mi];
            let mut per_metric = serde_json::Map::new();
            for (metric, unit, better, pick) in &metrics {
                let sums: Vec<Option<Summary>> = cell
                    .iter()
                    .map(|rs| Summary::of(&rs.iter().map(pick).collect::<Vec<_>>()))
                    .collect();
                let ratio = match (
                    sums.first().copied().flatten(),
                    sums.get(1).copied().flatten(),
                ) {
                    (Some(a), Some(b)) => a.ratio(&b),
                    _ => None,
                };
                lines.push((
                    group.clone(),
                    *metric,
                    show(sums.first().copied().flatten()),
                    sums.get(1).map_or("-".to_owned(), |s| show(*s)),
                    ratio,
                    *unit,
                    *better,
                ));
                let j = |s: Option<&Option<Summary>>| {
                    s.copied().flatten().map_or(Value::Null, |s| s.to_json())
                };
                per_metric.insert(
                    (*metric).to_owned(),
                    json!({ "unit": unit, "better": better, "seedd": j(sums.first()),
                            "httpd": j(sums.get(1)), "ratio_of_medians": ratio }),
                );
            }
            let rss_sums: Vec<Value> = cell
                .iter()
                .map(|rs| {
                    Summary::of(&rs.iter().map(rss).collect::<Vec<_>>())
                        .map_or(Value::Null, |s| s.to_json())
                })
                .collect();
            let servers: Vec<Value> = cell
                .iter()
                .zip(&kinds)
                .map(|(rs, k)| {
                    json!({
                        "server": k.label(),
                        "requests": rs.iter().map(Run::ok).collect::<Vec<_>>(),
                        "errors": rs.iter().map(|r| r.errors).sum::<u64>(),
                        "largest_body_bytes": rs.iter().map(|r| r.bytes).max().unwrap_or(0),
                    })
                })
                .collect();
            for (rs, k) in cell.iter().zip(&kinds) {
                let errors: u64 = rs.iter().map(|r| r.errors).sum();
                if errors > 0 {
                    log(&format!("{group}: {} had {errors} errors", k.label()));
                }
            }
            json_rows.push(json!({
                "endpoint": e.label, "mode": mode, "urls": e.paths.len(),
                "example": e.paths.first(), "metrics": per_metric,
                "rss_sum_peak_mib_secondary": rss_sums,
                "servers": servers,
            }));
        }
    }

    let mut t = String::new();
    let _ = writeln!(
        t,
        "\nseedd vs radicle-httpd 0.27 on the same storage; ratio = seedd / httpd (medians)"
    );
    let _ = writeln!(t, "{}", prov.line());
    let _ = writeln!(
        t,
        "{rounds} rounds, ABBA order, median [min–max]; each endpoint a spread of URLs round-robin ({}); cold = fresh server, page cache evicted, every URL once; warm = after {WARMUP} s warm-up, {secs} s; {CONNS} keep-alive connections",
        eps.iter()
            .map(|e| format!("{} {}", e.label, e.paths.len()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        t,
        "CPU = the server's cgroup (it and all it starts) / requests answered 200; memory.peak = the cgroup's high-water mark over the pass (page cache included; since the server started where a reset does not hold, cgroup v2); PSS sampled every 20 ms\n"
    );
    write_table(
        &mut t,
        ["endpoint", "metric", "seedd", "httpd", "ratio", "unit"],
        [24, 16, 26, 26, 7, 6],
        118,
        lines.iter().map(|l| TableLine {
            group: &l.0,
            metric: l.1,
            seedd: l.2.clone(),
            other: l.3.clone(),
            ratio: l.4.map_or("-".into(), |r| format!("{r:.2}×")),
            unit: l.5,
            better: l.6,
        }),
    );
    println!("{t}");
    let out = measure::write_result(
        "web",
        prov,
        json!({
            "bench": "web",
            "connections": CONNS,
            "rounds": rounds,
            "seconds": secs,
            "warmup_seconds": WARMUP,
            "issues_per_repo": issues,
            "httpd": httpd_bin.map(|p| p.display().to_string()),
            "cgroup": measure::cgroup_method(),
            "rows": json_rows,
            "table": t,
        }),
    );
    log(&format!("figures written to {}", out.display()));
}
