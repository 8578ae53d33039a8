//! The radicle-httpd JSON API (issue 15): seedd against radicle-httpd 0.27 on the same storage,
//! in one run. Prints requests/s, p50/p99 latency and server CPU per request for the endpoints
//! the explorer calls most (repository listing, repository info, tree, blob, commit, history,
//! issue list) with the ratio seedd / httpd, and writes them to `<target>/seedd-bench-web.json`.
//! See `benches/README.md` ("Web API bench").
//!
//! Storage: a copy of alice's Radicle home from the test fixtures (`scripts/make-fixtures.sh`,
//! real `rad`), with `SEEDD_BENCH_WEB_ISSUES` (default 50) issues opened on the heartwood fixture
//! with `rad issue open`. httpd runs on that home (`RAD_HOME`), seedd on a data dir whose
//! `storage` is a link to the same directory. httpd 0.27 is not on crates.io: build it from a
//! radicle-explorer checkout and name the binary in `SEEDD_BENCH_HTTPD`; without it the bench
//! measures seedd alone and says so.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use seedd_benches::procfs::{alive, cpu_ticks};
use seedd_benches::{ensure_seedd, fmt, profile_dir, write_table, TableLine};
use seedd_tests::{copy_tree, fixtures, free_port, radicle_bin, run};
use serde_json::json;

/// Seconds per measured endpoint and server (`SEEDD_BENCH_WEB_SECS`).
const SECS: usize = 3;
/// Keep-alive client connections per run.
const CONNS: usize = 4;
/// Issues opened before measuring (`SEEDD_BENCH_WEB_ISSUES`).
const ISSUES: usize = 50;

struct Server {
    name: &'static str,
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn wait(&mut self, path: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if matches!(
                seedd_tests::http_get(&format!("{}{path}", self.base), &[]),
                Ok((200, _))
            ) {
                return;
            }
            assert!(
                alive(self.child.id()) && Instant::now() < deadline,
                "{} did not answer {path}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One endpoint measured on one server.
struct Run {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    cpu_ms_per_req: f64,
    errors: u64,
    bytes: usize,
}

fn measure(server: &Server, path: &str, secs: f64) -> Run {
    let url = format!("{}{path}", server.base);
    let ticks_before = cpu_ticks(server.child.id());
    let start = Instant::now();
    let deadline = Duration::from_secs_f64(secs);
    let results: Vec<(Vec<f64>, u64, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CONNS)
            .map(|_| {
                let url = url.clone();
                s.spawn(move || {
                    // One agent per thread: one keep-alive connection.
                    let agent: ureq::Agent = ureq::Agent::config_builder()
                        .http_status_as_error(false)
                        .timeout_global(Some(Duration::from_secs(30)))
                        .build()
                        .into();
                    let (mut lat, mut errors, mut bytes) = (Vec::new(), 0u64, 0usize);
                    while start.elapsed() < deadline && errors < 100 {
                        let t = Instant::now();
                        match agent.get(&url).call() {
                            Ok(resp) if resp.status() == 200 => {
                                let body = resp
                                    .into_body()
                                    .with_config()
                                    .limit(64 << 20)
                                    .read_to_vec()
                                    .unwrap_or_default();
                                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                                bytes = body.len();
                            }
                            _ => errors += 1,
                        }
                    }
                    (lat, errors, bytes)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let wall = start.elapsed().as_secs_f64();
    let ticks = cpu_ticks(server.child.id()) - ticks_before;
    let mut lat: Vec<f64> = results.iter().flat_map(|r| r.0.iter().copied()).collect();
    lat.sort_by(f64::total_cmp);
    let n = lat.len().max(1);
    let pct = |p: f64| {
        lat.get(((n as f64 * p) as usize).min(n - 1))
            .copied()
            .unwrap_or(0.0)
    };
    Run {
        rps: lat.len() as f64 / wall,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        cpu_ms_per_req: ticks as f64 / seedd_benches::procfs::clk_tck() * 1000.0 / n as f64,
        errors: results.iter().map(|r| r.1).sum(),
        bytes: results.iter().map(|r| r.2).max().unwrap_or(0),
    }
}

fn start_seedd(bin: &Path, dir: &Path, storage: &Path) -> Server {
    let data = dir.join("seedd-data");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::symlink(storage, data.join("storage")).unwrap();
    let s = seedd_benches::spawn_seedd(bin, &data, "web-bench", "", &dir.join("seedd.log"));
    let (child, http) = (s.child, s.http);
    Server {
        name: "seedd",
        child,
        base: format!("http://127.0.0.1:{http}"),
    }
}

fn start_httpd(bin: &Path, dir: &Path, home: &Path) -> Server {
    let port = free_port();
    let log = std::fs::File::create(dir.join("httpd.log")).unwrap();
    let child = Command::new(bin)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .env("RAD_HOME", home)
        .env("RAD_PASSPHRASE", "")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Server {
        name: "radicle-httpd",
        child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

/// Open `n` issues (with a comment each) on `rid` in `home`, as a user of `rad` would.
fn open_issues(home: &Path, rid: &str, n: usize) {
    let rad = radicle_bin("rad");
    for i in 0..n {
        let out = run(Command::new(&rad)
            .args(["issue", "open", "--no-announce", "-q", "--repo", rid])
            .args(["--title", &format!("Bench issue {i}")])
            .args([
                "--description",
                &format!("Issue {i} of the web bench.\n\nIt has a paragraph and `code`."),
            ])
            .env("RAD_HOME", home)
            .env("RAD_PASSPHRASE", ""));
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if i % 2 == 0 && !id.is_empty() {
            run(Command::new(&rad)
                .args([
                    "issue",
                    "comment",
                    "--no-announce",
                    "-q",
                    "--repo",
                    rid,
                    &id,
                ])
                .args(["--message", "A comment on it."])
                .env("RAD_HOME", home)
                .env("RAD_PASSPHRASE", ""));
        }
    }
}

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    seedd_benches::measure::provenance("web");
    let started = Instant::now();
    let log = move |msg: &str| eprintln!("[{:7.1}s] {msg}", started.elapsed().as_secs_f64());
    let profile = profile_dir();
    let target = profile.parent().unwrap().to_owned();
    let seedd_bin = ensure_seedd(&log, &profile);
    let secs = seedd_benches::env_usize("SEEDD_BENCH_WEB_SECS", SECS).max(1) as f64;
    let issues = seedd_benches::env_usize("SEEDD_BENCH_WEB_ISSUES", ISSUES);
    let httpd_bin = std::env::var_os("SEEDD_BENCH_HTTPD").map(PathBuf::from);

    let f = fixtures();
    let alice = f.json["alice"]["home"].as_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    copy_tree(&f.dir.join(alice), &home);
    let rid = f.rid("heartwood-fixture");
    let head = f.repo("heartwood-fixture")["head"]
        .as_str()
        .unwrap()
        .to_owned();
    log(&format!("opening {issues} issues on {rid} with rad"));
    open_issues(&home, &rid, issues);

    let mut servers = vec![start_seedd(&seedd_bin, tmp.path(), &home.join("storage"))];
    match &httpd_bin {
        Some(b) => servers.push(start_httpd(b, tmp.path(), &home)),
        None => log("SEEDD_BENCH_HTTPD is not set: measuring seedd alone"),
    }
    for s in &mut servers {
        s.wait("/api/v1/repos?show=all");
    }

    let r = format!("/api/v1/repos/{rid}");
    let endpoints: Vec<(&str, String)> = vec![
        ("listing", "/api/v1/repos?show=all".to_owned()),
        ("repository info", r.clone()),
        ("tree (root)", format!("{r}/tree/{head}/")),
        ("blob (README.md)", format!("{r}/blob/{head}/README.md")),
        ("commit", format!("{r}/commits/{head}")),
        ("history (30)", format!("{r}/commits?parent={head}")),
        (
            "issue list (open)",
            format!("{r}/issues?status=open&perPage=50"),
        ),
    ];
    let mut results = Vec::new();
    let mut lines = Vec::new();
    for (label, path) in &endpoints {
        // A warm-up pass per server (caches both sides keep), then the measured run.
        let mut runs = Vec::new();
        for s in &servers {
            measure(s, path, 0.5);
            log(&format!("{label}: {} for {secs} s", s.name));
            runs.push(measure(s, path, secs));
        }
        let other = runs.get(1);
        for (metric, unit, better, pick) in [
            (
                "requests/s",
                "req/s",
                "higher",
                (|r: &Run| r.rps) as fn(&Run) -> f64,
            ),
            ("p50 latency", "ms", "lower", |r: &Run| r.p50_ms),
            ("p99 latency", "ms", "lower", |r: &Run| r.p99_ms),
            ("CPU per request", "ms", "lower", |r: &Run| r.cpu_ms_per_req),
        ] {
            let a = pick(&runs[0]);
            let b = other.map(pick);
            let ratio = b.filter(|b| *b > 0.0).map(|b| a / b);
            lines.push((
                label.to_string(),
                metric,
                fmt(Some(a)),
                fmt(b),
                ratio,
                unit,
                better,
            ));
            results.push(json!({
                "endpoint": label, "path": path, "metric": metric, "seedd": a, "httpd": b,
                "ratio": ratio, "unit": unit, "better": better,
            }));
        }
        for (s, r) in servers.iter().zip(&runs) {
            results.push(json!({
                "endpoint": label, "server": s.name, "errors": r.errors, "body_bytes": r.bytes,
            }));
            if r.errors > 0 {
                log(&format!("  {}: {} errors on {path}", s.name, r.errors));
            }
        }
    }

    let mut t = String::new();
    let _ = writeln!(
        t,
        "\nseedd vs radicle-httpd 0.27 on the same storage ({CONNS} keep-alive connections, {secs} s each; ratio = seedd / httpd)\n"
    );
    write_table(
        &mut t,
        ["endpoint", "metric", "seedd", "httpd", "ratio", "unit"],
        [18, 16, 10, 10, 8, 6],
        90,
        lines.iter().map(|l| TableLine {
            group: &l.0,
            metric: l.1,
            seedd: l.2.clone(),
            other: l.3.clone(),
            ratio: l.4.map_or("-".into(), |r| format!("{r:.2}x")),
            unit: l.5,
            better: l.6,
        }),
    );
    println!("{t}");
    let out = target.join("seedd-bench-web.json");
    std::fs::write(
        &out,
        serde_json::to_string_pretty(&seedd_benches::measure::stamped(&json!({
            "bench": "web",
            "connections": CONNS,
            "seconds": secs,
            "issues": issues,
            "httpd": httpd_bin.map(|p| p.display().to_string()),
            "results": results,
        })))
        .unwrap(),
    )
    .unwrap();
    log(&format!("figures written to {}", out.display()));
}
