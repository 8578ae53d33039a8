//! The web API's node-wide endpoints at scale (issue 30 §1): seedd on N generated repositories
//! (default N = 1,000 and 100,000: `SEEDD_BENCH_WEB_SCALE`), and radicle-httpd 0.27 on the same
//! storage where it is given (`SEEDD_BENCH_HTTPD`, at the levels of `SEEDD_BENCH_WEB_SCALE_HTTPD`,
//! default 10,000; httpd 0.27 is not on crates.io: build it from a radicle-explorer checkout, see
//! `benches/README.md`). See `benches/runs/web_scale.md`.
//!
//! Per level, on one cached storage (`~/.cache/seedd/bench-data/web-scale-v1/n<N>`, generated
//! once with `seedd_benches::generate`, seedd's index built once on the first start), and per
//! round (`SEEDD_BENCH_WEB_SCALE_ROUNDS`, default 5; a fresh server each, its own cgroup
//! [`Scope`] pinned to the server cores; this process on the load cores):
//!
//! - **listing**: `GET /api/v1/repos?show=all&page=P&perPage=10`, P drawn Zipf(1) over every
//!   page of the listing (the first pages most, deep pages too);
//! - **stats**: `GET /api/v1/stats`;
//! - **search**: `GET /api/v1/repos/search?q=<6 digits of a name>`, the name drawn Zipf(1) over
//!   1,000 distinct repositories (a query that matches one to a few names);
//! - **repo**: `GET /api/v1/repos/<rid>`, drawn Zipf(1) over 1,000 distinct repositories.
//!
//! Each endpoint gets 5,000 requests one at a time on one keep-alive connection after 100
//! unmeasured ones (latency, not throughput: p50, p99), and the scope's CPU over them per
//! request; a pass stops after 60 s once 50 are answered (httpd's listing at 10k). The sequence of URLs is the same for every server
//! and round (a fixed seed). Each server is measured once idle after its start (`wait_idle`).
//! Writes `<target>/seedd-bench-web-scale.json`. Measures only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seedd_benches::generate::{generate, Spec};
use seedd_benches::measure::{self, Pinning, Scope, Summary};
// Deterministic, so every server and round gets the same URLs.
use seedd_benches::textgen::{Rng, Zipf};
use seedd_benches::{ensure_seedd, env_usize, profile_dir};
use seedd_tests::{free_port, radicle_bin};
use serde_json::{json, Value};

const DATA_VERSION: &str = "web-scale-v1";
const LEVELS: [usize; 2] = [1_000, 100_000];
const HTTPD_LEVELS: [usize; 1] = [10_000];
const ROUNDS: usize = 5;
/// Measured requests per endpoint: enough that a pass spans a few seconds, so a p99 is the
/// server's own tail rather than one stall of the host (a sleeping thread here wakes 2–5 ms
/// late about once a second, at any repository count: `benches/runs/web_scale.md`).
const REQUESTS: usize = 5_000;
const WARMUP: usize = 100;
/// Distinct repositories the per-repository and search URLs are drawn from.
const DISTINCT: usize = 1_000;
const PER_PAGE: usize = 10;
/// A pass stops after this long once [`MIN_MEASURED`] requests are answered.
const PASS_CAP: Duration = Duration::from_secs(60);
const MIN_MEASURED: usize = 50;
const ENDPOINTS: [&str; 4] = ["listing", "stats", "search", "repo"];

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

/// Generate `n` repositories under `dir/storage` once.
fn dataset(dir: &Path, n: usize, log: &(dyn Fn(&str) + Sync)) {
    let done = dir.join("generated.json");
    if done.exists() {
        return;
    }
    let _ = std::fs::remove_dir_all(dir);
    log(&format!("generating {n} repositories in {}", dir.display()));
    let mut spec = Spec::new(n);
    spec.prefix = format!("web{n}");
    let report = generate(&dir.join("storage"), &spec, &|d| {
        if d.is_multiple_of(10_000) {
            log(&format!("  {d} repositories"))
        }
    })
    .unwrap();
    log(&format!(
        "  {n} in {:.1} s ({:.0}/s)",
        report.elapsed.as_secs_f64(),
        report.per_second()
    ));
    let names: Vec<Value> = report
        .repos
        .iter()
        .map(|g| json!({ "rid": g.rid.to_string(), "name": g.name }))
        .collect();
    std::fs::write(
        &done,
        serde_json::to_vec(&json!({ "repos": n, "list": names })).unwrap(),
    )
    .unwrap();
}

/// A running server in its own scope.
struct Server {
    child: Child,
    scope: Arc<Scope>,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        seedd_benches::stop_child(&mut self.child, Duration::from_secs(30));
        self.scope.kill_all();
    }
}

fn wait_for(url: &str, server: &mut Server, what: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        if matches!(seedd_tests::http_get(url, &[]), Ok((200, _))) {
            return;
        }
        assert!(
            matches!(server.child.try_wait(), Ok(None)) && Instant::now() < deadline,
            "{what} did not answer {url}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start_seedd(bin: &Path, dir: &Path, n: usize, logs: &Path) -> Server {
    let data = dir.join("seedd");
    std::fs::create_dir_all(&data).unwrap();
    let link = data.join("storage");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink(dir.join("storage"), &link).unwrap();
    }
    let s = seedd_benches::spawn_seedd(
        bin,
        &data,
        &format!("web-scale-seedd-{n}"),
        "",
        &logs.join(format!("seedd-{n}.log")),
    );
    let ready = format!("http://127.0.0.1:{}/readyz", s.admin);
    let mut server = Server {
        child: s.child,
        scope: s.scope,
        base: format!("http://127.0.0.1:{}", s.http),
    };
    // The first start at 100k indexes every repository (~40 s).
    wait_for(&ready, &mut server, "seedd", Duration::from_secs(1800));
    server
}

/// A `rad auth` home for httpd whose `storage` is the generated one.
fn httpd_home(dir: &Path) -> PathBuf {
    let home = dir.join("rad-home");
    if !home.join("keys/radicle").exists() {
        let _ = std::fs::remove_dir_all(&home);
        let out = Command::new(radicle_bin("rad"))
            .args(["auth", "--alias", "webscale"])
            .env("RAD_HOME", &home)
            .env("RAD_PASSPHRASE", "")
            .env("RAD_KEYGEN_SEED", "74".repeat(32))
            .env_remove("RAD_SOCKET")
            .output()
            .unwrap();
        assert!(out.status.success(), "rad auth: {out:?}");
    }
    let link = home.join("storage");
    if !std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) {
        let _ = std::fs::remove_dir_all(&link);
        std::os::unix::fs::symlink(dir.join("storage"), &link).unwrap();
    }
    home
}

fn start_httpd(bin: &Path, dir: &Path, n: usize, logs: &Path) -> Server {
    let home = httpd_home(dir);
    let scope = Arc::new(Scope::new(&format!("web-scale-httpd-{n}")));
    let port = free_port();
    let log = std::fs::File::create(logs.join(format!("httpd-{n}.log"))).unwrap();
    let child = scope
        .command(bin)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .env("RAD_HOME", &home)
        .env("RAD_PASSPHRASE", "")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    scope.started(child.id());
    let base = format!("http://127.0.0.1:{port}");
    let mut server = Server {
        child,
        scope,
        base: base.clone(),
    };
    wait_for(
        &format!("{base}/api/v1"),
        &mut server,
        "radicle-httpd",
        Duration::from_secs(120),
    );
    server
}

/// The URLs of each endpoint for `n` repositories, in request order (warm-up first).
fn urls(n: usize, list: &[(String, String)]) -> Vec<(&'static str, Vec<String>)> {
    let mut rng = Rng::new(0x5eed_d00d ^ n as u64);
    let total = WARMUP + REQUESTS;
    let pages = n.div_ceil(PER_PAGE);
    let page_cdf = Zipf::new(pages);
    let distinct = DISTINCT.min(list.len());
    // The distinct repositories: spread over the whole set, not its first names.
    let step = (list.len() / distinct.max(1)).max(1);
    let chosen: Vec<&(String, String)> = list.iter().step_by(step).take(distinct).collect();
    let cdf = Zipf::new(chosen.len());
    let listing = (0..total)
        .map(|_| {
            let p = page_cdf.sample(&mut rng);
            format!("/api/v1/repos?show=all&page={p}&perPage={PER_PAGE}")
        })
        .collect();
    let stats = vec!["/api/v1/stats".to_owned(); total];
    let search = (0..total)
        .map(|_| {
            let (_, name) = chosen[cdf.sample(&mut rng)];
            let q = &name[name.len().saturating_sub(6)..];
            format!("/api/v1/repos/search?q={q}")
        })
        .collect();
    let repo = (0..total)
        .map(|_| {
            let (rid, _) = chosen[cdf.sample(&mut rng)];
            format!("/api/v1/repos/{rid}")
        })
        .collect();
    vec![
        ("listing", listing),
        ("stats", stats),
        ("search", search),
        ("repo", repo),
    ]
}

/// (server, level, endpoint) → per round (p50 ms, p99 ms, CPU ms per request).
type Figures = std::collections::BTreeMap<(String, usize, String), Vec<(f64, f64, f64)>>;

/// One endpoint's pass: latencies (ms, sorted) of the measured requests, CPU ms per request,
/// errors.
struct Pass {
    lat: Vec<f64>,
    cpu_ms: f64,
    errors: usize,
}

impl Pass {
    fn pct(&self, p: f64) -> f64 {
        let n = self.lat.len();
        if n == 0 {
            return f64::NAN;
        }
        self.lat[((n as f64 * p) as usize).min(n - 1)]
    }
}

fn pass(server: &Server, urls: &[String]) -> Pass {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into();
    let get = |url: &str| -> Option<f64> {
        let t = Instant::now();
        match agent.get(&format!("{}{url}", server.base)).call() {
            Ok(resp) if resp.status() == 200 => {
                let _ = resp.into_body().with_config().limit(64 << 20).read_to_vec();
                Some(t.elapsed().as_secs_f64() * 1000.0)
            }
            _ => None,
        }
    };
    let warmup = Instant::now();
    for u in &urls[..WARMUP.min(urls.len())] {
        if warmup.elapsed() > PASS_CAP / 4 {
            break;
        }
        let _ = get(u);
    }
    let measured = &urls[WARMUP.min(urls.len())..];
    let ((mut lat, errors), interval) = measure::measure_cpu(&server.scope, || {
        let mut lat = Vec::with_capacity(measured.len());
        let mut errors = 0;
        let started = Instant::now();
        for u in measured {
            // A server that takes seconds per request (httpd's listing at 10k) is measured on
            // the requests it answers within the cap, at least MIN_MEASURED.
            if lat.len() + errors >= MIN_MEASURED && started.elapsed() > PASS_CAP {
                break;
            }
            match get(u) {
                Some(ms) => lat.push(ms),
                None => errors += 1,
            }
        }
        (lat, errors)
    });
    lat.sort_by(f64::total_cmp);
    let cpu_ms = interval.cpu_secs() * 1000.0 / lat.len().max(1) as f64;
    Pass {
        lat,
        cpu_ms,
        errors,
    }
}

fn levels(var: &str, default: &[usize]) -> Vec<usize> {
    let v: Vec<usize> = std::env::var(var)
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| default.to_vec());
    if v != default {
        measure::record_override(&format!("{var} = {v:?}"));
    }
    v
}

fn main() {
    let prov = measure::provenance("web_scale");
    Pinning::pin_self_to_load();
    measure::record_config_diff(
        "seedd: [policy] default = \"allow\", scope = \"all\" (default block)",
    );
    let started = Instant::now();
    let log = |msg: &str| eprintln!("[{:6.1}s] {msg}", started.elapsed().as_secs_f64());
    let seedd_levels = levels("SEEDD_BENCH_WEB_SCALE", &LEVELS);
    let httpd_bin = std::env::var_os("SEEDD_BENCH_HTTPD").map(PathBuf::from);
    let httpd_levels = if httpd_bin.is_some() {
        levels("SEEDD_BENCH_WEB_SCALE_HTTPD", &HTTPD_LEVELS)
    } else {
        log("SEEDD_BENCH_HTTPD not set: radicle-httpd is not measured");
        measure::record_override("SEEDD_BENCH_HTTPD unset: no radicle-httpd");
        Vec::new()
    };
    let rounds = env_usize("SEEDD_BENCH_WEB_SCALE_ROUNDS", ROUNDS).max(1);
    if rounds != ROUNDS {
        measure::record_override(&format!("SEEDD_BENCH_WEB_SCALE_ROUNDS = {rounds}"));
    }
    let profile = profile_dir();
    let seedd_bin = ensure_seedd(&log, &profile);
    let data_root = std::env::var_os("SEEDD_BENCH_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/seedd/bench-data")
        })
        .join(DATA_VERSION);
    let logs = profile.join("web-scale-logs");
    std::fs::create_dir_all(&logs).unwrap();
    let mut all: Vec<usize> = seedd_levels.iter().chain(&httpd_levels).copied().collect();
    all.sort_unstable();
    all.dedup();
    let mut figures: Figures = Default::default();
    let mut errors = 0usize;
    for &n in &all {
        let dir = data_root.join(format!("n{n}"));
        dataset(&dir, n, &log);
        let meta: Value =
            serde_json::from_slice(&std::fs::read(dir.join("generated.json")).unwrap()).unwrap();
        let list: Vec<(String, String)> = meta["list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["rid"].as_str().unwrap().to_owned(),
                    v["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let sets = urls(n, &list);
        let mut kinds = Vec::new();
        if seedd_levels.contains(&n) || httpd_levels.contains(&n) {
            kinds.push(Kind::Seedd);
        }
        if httpd_levels.contains(&n) {
            kinds.push(Kind::Httpd);
        }
        for round in 0..rounds {
            // ABBA: the servers' order alternates by round.
            let order: Vec<Kind> = if round % 2 == 0 {
                kinds.clone()
            } else {
                kinds.iter().rev().copied().collect()
            };
            for kind in order {
                log(&format!(
                    "{n} repositories, {}, round {}/{rounds}",
                    kind.label(),
                    round + 1
                ));
                let server = match kind {
                    Kind::Seedd => start_seedd(&seedd_bin, &dir, n, &logs),
                    Kind::Httpd => start_httpd(httpd_bin.as_ref().unwrap(), &dir, n, &logs),
                };
                // What a start sets going (announcing the inventory, the sync list, RocksDB
                // compactions) finishes first: the endpoints of a running server are measured.
                if !measure::wait_idle(&server.scope, Duration::from_secs(120)) {
                    log("  WARNING: the server was not idle after 120 s");
                }
                for (endpoint, urls) in &sets {
                    let p = pass(&server, urls);
                    errors += p.errors;
                    log(&format!(
                        "  {endpoint}: p50 {:.3} ms, p99 {:.3} ms, {:.3} ms CPU/request, {} errors",
                        p.pct(0.5),
                        p.pct(0.99),
                        p.cpu_ms,
                        p.errors
                    ));
                    figures
                        .entry((kind.label().to_owned(), n, (*endpoint).to_owned()))
                        .or_default()
                        .push((p.pct(0.5), p.pct(0.99), p.cpu_ms));
                }
                drop(server);
            }
        }
    }
    let summary = |server: &str, n: usize, endpoint: &str, f: fn(&(f64, f64, f64)) -> f64| {
        figures
            .get(&(server.to_owned(), n, endpoint.to_owned()))
            .and_then(|v| Summary::of(&v.iter().map(f).collect::<Vec<_>>()))
    };
    let mut table = String::from("| server | repositories | endpoint | p50 ms | p99 ms | CPU ms/request |\n|---|---|---|---|---|---|\n");
    let mut rows = Vec::new();
    for (server, n, endpoint) in figures.keys() {
        let s = |f: fn(&(f64, f64, f64)) -> f64| summary(server, *n, endpoint, f);
        let (p50, p99, cpu) = (s(|r| r.0), s(|r| r.1), s(|r| r.2));
        let show = |x: Option<Summary>| x.map_or("-".into(), |x| x.to_string());
        table += &format!(
            "| {server} | {n} | {endpoint} | {} | {} | {} |\n",
            show(p50),
            show(p99),
            show(cpu)
        );
        rows.push(json!({
            "server": server, "repos": n, "endpoint": endpoint,
            "p50_ms": p50.map(|x| x.to_json()), "p99_ms": p99.map(|x| x.to_json()),
            "cpu_ms": cpu.map(|x| x.to_json()),
        }));
    }
    println!("{}", measure::stamped_text(&table));
    let med = |server: &str, n: usize, endpoint: &str, f: fn(&(f64, f64, f64)) -> f64| {
        summary(server, n, endpoint, f).map(|s| s.median)
    };
    let met =
        |v: Option<f64>, ok: &dyn Fn(f64) -> bool| v.map_or(Value::Null, |v| Value::Bool(ok(v)));
    let mut targets = Vec::new();
    let (lo, hi) = (
        seedd_levels.iter().copied().min().unwrap_or(0),
        seedd_levels.iter().copied().max().unwrap_or(0),
    );
    for endpoint in ["listing", "stats", "search"] {
        let p99 = med("seedd", hi, endpoint, |r| r.1);
        targets.push(json!({
            "target": format!("web_scale: {endpoint} p99 at {hi} repositories, ms"),
            "value": p99, "goal": "≤ 10", "met": met(p99, &|v| v <= 10.0)}));
        let ratio = match (p99, med("seedd", lo, endpoint, |r| r.1)) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        targets.push(json!({
            "target": format!("web_scale: {endpoint} p99, {hi} / {lo} repositories"),
            "value": ratio, "goal": "≤ 1.2", "met": met(ratio, &|v| v <= 1.2)}));
    }
    for &n in &httpd_levels {
        for (endpoint, goal) in [("listing", 20.0), ("repo", 2.0)] {
            // How many times faster: httpd's median latency over seedd's (p50, one request at a time).
            let ratio = match (
                med("radicle-httpd", n, endpoint, |r| r.0),
                med("seedd", n, endpoint, |r| r.0),
            ) {
                (Some(h), Some(s)) if s > 0.0 => Some(h / s),
                _ => None,
            };
            targets.push(json!({
                "target": format!("web_scale: {endpoint} at {n} repositories, radicle-httpd p50 / seedd p50"),
                "value": ratio, "goal": format!("≥ {goal}"), "met": met(ratio, &move |v| v >= goal)}));
        }
    }
    if errors > 0 {
        log(&format!("WARNING: {errors} requests did not answer 200"));
    }
    let doc = json!({
        "seedd_levels": seedd_levels,
        "httpd_levels": httpd_levels,
        "rounds": rounds,
        "requests": REQUESTS,
        "warmup": WARMUP,
        "distinct": DISTINCT,
        "per_page": PER_PAGE,
        "endpoints": ENDPOINTS,
        "errors": errors,
        "rows": rows,
        "targets": targets,
        "table": table,
    });
    let path = measure::write_result("web-scale", prov, doc);
    log(&format!("wrote {}", path.display()));
}
