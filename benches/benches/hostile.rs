//! Hostile: the attacks of issue 25 §1–§4 against a release seedd, one at a time, each
//! `SEEDD_HOSTILE_RUNS` times (default 5, rounds), each run on a freshly started seedd (defaults,
//! the same data dir, its page cache evicted): what one anonymous client (or one published
//! repository) costs the seed, against the same window of an idle seed.
//!
//! Measured by the rules of issue 29 §1 (`seedd_benches::measure`): seedd runs in its own cgroup
//! ([`seedd_benches::measure::Scope`], given by `spawn_seedd`, one per start), pinned to the server
//! cores; the bench, the attacker and the control client run on the load cores. Per attack:
//! the scope's `memory.peak` (seedd and every git it starts, page cache included, over the
//! window; since the start where a reset does not hold, cgroup v2) and its PSS peak (sampled every 20 ms) with the rise of PSS over the window (`extra`)
//! and the ratio to the idle seed; Σ VmRSS only as a secondary column. CPU seconds are the
//! scope's (`cpu.stat`, every process that ran in it, reaped git children included) over the
//! window and the 5 s after it (so work that outlives its request shows); the attack's wall
//! time, how long the scope kept burning CPU after the attacker left (`settle`), and the worst
//! latency and status of a control request (`/tree` of another repository) made during the
//! attack. Median [min–max] over the runs; each round runs the idle window and every attack
//! once, in ABBA order. Prints a table and writes JSON to `<target>/seedd-bench-hostile.json`.
//! See `benches/runs/hostile.md`.
//!
//! Attacks (`SEEDD_HOSTILE_ATTACKS`, comma separated, default all):
//! * `diff`: `GET /api/v1/repos/<rid>/commits/<sha>` of a commit adding a file of 8 MiB of
//!   newlines (8 Mi diff lines).
//! * `tree`: `GET /api/v1/repos/<rid>/tree/<sha>/` of a root tree of 500,000 entries.
//! * `archive`: `GET /raw/<rid>/<sha>.tar` of a commit whose `export-subst` file expands a
//!   64 KiB message 4,096 times (256 MiB of output from a tree of 48 KiB).
//! * `stalled`: 400 connections that ask for a 10 MiB raw file and never read, held 20 s.
//! * `deepen`: 64 distinct `deepen N` fetches (v2) of a 10 MiB repository, each connection
//!   closed right after its request.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use seedd_benches::measure::{self, abba, evict, Pinning, Scope, Summary};
use seedd_benches::{ensure_seedd, env_usize, profile_dir, spawn_seedd, SpawnedSeedd};
use seedd_tests::hostile::{self, Attack};
use seedd_tests::pkt;

/// How long after an attack its CPU is still counted.
const AFTER: Duration = Duration::from_secs(5);
/// One control request's limit.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);
/// Runs (rounds) by default.
const RUNS: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Diff,
    Tree,
    Archive,
    Stalled,
    Deepen,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Diff,
        Kind::Tree,
        Kind::Archive,
        Kind::Stalled,
        Kind::Deepen,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Diff => "diff",
            Kind::Tree => "tree",
            Kind::Archive => "archive",
            Kind::Stalled => "stalled",
            Kind::Deepen => "deepen",
        }
    }
}

/// The repositories of every attack plus the control one.
struct Repos {
    diff: Attack,
    tree: Attack,
    archive: Attack,
    big: Attack,
    control: Attack,
}

/// One run of one attack (or of the idle window).
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    /// The scope's memory high-water mark over the window (page cache included; since seedd
    /// started where the reset does not hold, cgroup v2), MiB; NaN without a memory cgroup.
    memory_peak_mib: f64,
    /// Peak PSS of the scope's processes over the window, MiB.
    pss_peak_mib: f64,
    /// PSS peak minus the PSS before the window, MiB.
    extra_pss_mib: f64,
    /// Peak Σ VmRSS of the scope's processes over the window, MiB (secondary: a shared mapping
    /// counts once per process).
    rss_sum_peak_mib: f64,
    /// CPU seconds of the scope over the window and [`AFTER`].
    cpu_s: f64,
    /// The attack's own wall time, s.
    wall_s: f64,
    /// Seconds until the scope's CPU stopped moving after the attack ended.
    settle_s: f64,
    /// Worst control request latency, s, and whether every control answer was 200.
    control_s: f64,
    control_ok: bool,
    /// The attack request's status (0: none, cut, or several requests) and body bytes read.
    status: u16,
    bytes: usize,
}

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    let prov = measure::provenance("hostile");
    // The attacker and the control client on the load cores; seedd's scope on the server cores.
    Pinning::pin_self_to_load();
    let started = Instant::now();
    let log = move |msg: &str| eprintln!("[{:6.1}s] {msg}", started.elapsed().as_secs_f64());
    let runs = env_usize("SEEDD_HOSTILE_RUNS", RUNS).max(1);
    if runs < RUNS {
        measure::record_override(&format!(
            "SEEDD_HOSTILE_RUNS={runs} (fewer than {RUNS} rounds)"
        ));
    }
    measure::record_config_diff(
        "seedd: http.rate.per_ip_requests_per_second = 0 (no per-IP limit), policy allow/all, RUST_LOG=info (spawn_seedd)",
    );
    let kinds: Vec<Kind> = match std::env::var("SEEDD_HOSTILE_ATTACKS") {
        Ok(list) => list
            .split(',')
            .filter_map(|s| Kind::ALL.into_iter().find(|k| k.name() == s.trim()))
            .collect(),
        Err(_) => Kind::ALL.to_vec(),
    };
    let profile = profile_dir();
    let bin = ensure_seedd(&log, &profile);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let storage = data.join("storage");
    std::fs::create_dir_all(&storage).unwrap();
    log("building the hostile repositories");
    let repos = Repos {
        diff: hostile::empty_lines(&storage, "diff-bomb", 8 << 20),
        tree: hostile::wide_tree(&storage, "wide-tree", 500_000),
        archive: hostile::export_subst(&storage, "subst-bomb", 4_096, 64 << 10),
        big: hostile::big_file(&storage, "big-file", 10 << 20),
        control: hostile::big_file(&storage, "control", 4 << 10),
    };
    log(&format!(
        "{runs} rounds of idle + {:?} (ABBA order), a fresh seedd with its page cache evicted for each",
        kinds.iter().map(|k| k.name()).collect::<Vec<_>>()
    ));
    // Row 0 is the idle window, row 1 + i the attack kinds[i].
    let mut rows: Vec<(String, Vec<Sample>)> = std::iter::once("idle (2 s)".to_owned())
        .chain(kinds.iter().map(|k| k.name().to_owned()))
        .map(|n| (n, Vec::new()))
        .collect();
    let mut n = 0;
    for round in 0..runs {
        for row in abba(round, rows.len()) {
            n += 1;
            let s = with_seed(&bin, &data, tmp.path(), n, |scope, http| {
                if row == 0 {
                    window(scope, http, &repos.control, || {
                        std::thread::sleep(Duration::from_secs(2));
                        (0, 0)
                    })
                } else {
                    let kind = kinds[row - 1];
                    window(scope, http, &repos.control, || attack(kind, http, &repos))
                }
            });
            log(&format!(
                "round {}/{runs} {}: {s:?}",
                round + 1,
                rows[row].0
            ));
            rows[row].1.push(s);
        }
    }
    report(&rows, runs, prov);
}

/// Starts a seedd on `data` (its pack cache and index as the last one left them; caches are
/// emptied at start) in a new scope, evicts the data dir from the page cache, runs `f` with the
/// scope and the HTTP address, stops it.
fn with_seed<T>(
    bin: &Path,
    data: &Path,
    tmp: &Path,
    n: usize,
    f: impl FnOnce(&Arc<Scope>, SocketAddr) -> T,
) -> T {
    let mut seed = spawn_seedd(
        bin,
        data,
        &format!("hostile-{n}"),
        "",
        &tmp.join("seedd.log"),
    );
    wait_ready(&seed);
    evict(&[data]);
    let out = f(&seed.scope, ([127, 0, 0, 1], seed.http).into());
    // SIGTERM: a graceful stop ends its git children too.
    let pid = seed.child.id();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && matches!(seed.child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = seed.child.kill();
    let _ = seed.child.wait();
    // Anything left in the scope (a git the stop did not end) goes with it.
    seed.scope.kill_all();
    out
}

/// Waits for `/readyz` on the admin port.
fn wait_ready(seed: &SpawnedSeedd) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let admin: SocketAddr = ([127, 0, 0, 1], seed.admin).into();
    while Instant::now() < deadline {
        if get(admin, "/readyz", Duration::from_secs(2)).is_some_and(|(s, _)| s == 200) {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("seedd not ready");
}

/// Waits (at most 5 s) until the scope's CPU stops moving for 200 ms: the start is over.
fn quiet(scope: &Scope) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = scope.cpu_usec();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        let now = scope.cpu_usec();
        if now <= last + 2_000 {
            return;
        }
        last = now;
    }
}

/// Runs `work` measured on the scope (CPU, memory peak, PSS) while probing the control
/// repository; then waits for the scope to settle and until [`AFTER`] has passed.
fn window(
    scope: &Arc<Scope>,
    http: SocketAddr,
    control: &Attack,
    work: impl FnOnce() -> (u16, usize),
) -> Sample {
    quiet(scope);
    let before_kib = scope.pss_kib();
    let control_path = format!("/api/v1/repos/{}/tree/{}/", control.rid, control.commit);
    let ((status, bytes, wall_s, settle_s, control_s, control_ok), iv) =
        measure::measure(scope, || {
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = stop.clone();
            let prober = std::thread::spawn(move || {
                let (mut worst, mut ok) = (0f64, true);
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = Instant::now();
                    let status = get(http, &control_path, CONTROL_TIMEOUT).map(|(s, _)| s);
                    worst = worst.max(t.elapsed().as_secs_f64());
                    ok &= status == Some(200);
                    std::thread::sleep(Duration::from_millis(250));
                }
                (worst, ok)
            });
            let t = Instant::now();
            let (status, bytes) = work();
            let wall_s = t.elapsed().as_secs_f64();
            // Settle: until the scope's CPU stops moving for 500 ms (at most 60 s).
            let ended = Instant::now();
            let mut last = scope.cpu_usec();
            let mut settle_s = 0.0;
            while ended.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(500));
                let now = scope.cpu_usec();
                // Less than 10 ms of CPU in 500 ms (the prober's requests cost some).
                if now <= last + 10_000 {
                    break;
                }
                last = now;
                settle_s = ended.elapsed().as_secs_f64();
            }
            std::thread::sleep(AFTER.saturating_sub(ended.elapsed()));
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let (control_s, control_ok) = prober.join().unwrap_or((f64::NAN, false));
            (status, bytes, wall_s, settle_s, control_s, control_ok)
        });
    Sample {
        memory_peak_mib: iv
            .memory_peak
            .map_or(f64::NAN, |b| b as f64 / (1u64 << 20) as f64),
        pss_peak_mib: iv.pss_peak_kib as f64 / 1024.0,
        extra_pss_mib: iv.pss_peak_kib.saturating_sub(before_kib) as f64 / 1024.0,
        rss_sum_peak_mib: iv.rss_peak_kib as f64 / 1024.0,
        cpu_s: iv.cpu_secs(),
        wall_s,
        settle_s,
        control_s,
        control_ok,
        status,
        bytes,
    }
}

fn attack(kind: Kind, http: SocketAddr, r: &Repos) -> (u16, usize) {
    match kind {
        Kind::Diff => get(
            http,
            &format!("/api/v1/repos/{}/commits/{}", r.diff.rid, r.diff.commit),
            Duration::from_secs(60),
        )
        .unwrap_or_default(),
        Kind::Tree => get(
            http,
            &format!("/api/v1/repos/{}/tree/{}/", r.tree.rid, r.tree.commit),
            Duration::from_secs(60),
        )
        .unwrap_or_default(),
        Kind::Archive => get(
            http,
            &format!("/raw/{}/{}.tar", r.archive.rid, r.archive.commit),
            Duration::from_secs(120),
        )
        .unwrap_or_default(),
        Kind::Stalled => {
            let path = format!("/raw/{}/{}/big.bin", r.big.rid, r.big.commit);
            let mut held = Vec::new();
            for _ in 0..400 {
                if let Ok(mut s) = TcpStream::connect(http) {
                    let req = format!("GET {path} HTTP/1.1\r\nHost: seed\r\n\r\n");
                    if s.write_all(req.as_bytes()).is_ok() {
                        held.push(s);
                    }
                }
            }
            let n = held.len();
            std::thread::sleep(Duration::from_secs(20));
            drop(held);
            (0, n)
        }
        Kind::Deepen => {
            let path = format!("/{}.git/git-upload-pack", r.big.rid);
            for n in 1..=64 {
                let body = format!(
                    "{}{}0001{}{}{}0000",
                    pkt("command=fetch\n"),
                    pkt("agent=git/2.47.3\n"),
                    pkt(&format!("want {}\n", r.big.commit)),
                    pkt(&format!("deepen {n}\n")),
                    pkt("done\n"),
                );
                if let Ok(mut s) = TcpStream::connect(http) {
                    let req = format!(
                        "POST {path} HTTP/1.1\r\nHost: seed\r\nContent-Type: application/x-git-upload-pack-request\r\nGit-Protocol: version=2\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    // The answer starts (its head and first bytes), then the client is gone.
                    if s.write_all(req.as_bytes()).is_ok() {
                        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                        let mut first = [0u8; 256];
                        let _ = s.read(&mut first);
                    }
                }
            }
            (0, 64)
        }
    }
}

/// `GET path` on a fresh connection, reading the whole answer (bounded by `timeout`): status
/// and body length.
fn get(to: SocketAddr, path: &str, timeout: Duration) -> Option<(u16, usize)> {
    let mut s = TcpStream::connect_timeout(&to, timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: seed\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; 1 << 16];
    let mut head = Vec::new();
    let mut total = 0usize;
    loop {
        if Instant::now() > deadline {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if head.len() < 64 {
                    head.extend_from_slice(&buf[..n.min(64)]);
                }
                total += n;
            }
        }
    }
    let line = String::from_utf8_lossy(&head);
    let status = line.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, total))
}

fn report(rows: &[(String, Vec<Sample>)], runs: usize, prov: &measure::Provenance) {
    let sum =
        |s: &[Sample], f: fn(&Sample) -> f64| Summary::of(&s.iter().map(f).collect::<Vec<_>>());
    let med = |s: &[Sample], f: fn(&Sample) -> f64| sum(s, f).map_or(f64::NAN, |s| s.median);
    let show = |s: Option<Summary>| s.map_or("-".to_owned(), |s| s.to_string());
    let idle = rows.first().map(|(_, s)| s.clone()).unwrap_or_default();
    let idle_pss = med(&idle, |s| s.pss_peak_mib);
    let idle_peak = med(&idle, |s| s.memory_peak_mib);
    let idle_cpu = med(&idle, |s| s.cpu_s);
    let mut t = String::new();
    t.push_str(&format!(
        "\nhostile: median [min–max] of {runs} rounds, a fresh seedd (page cache evicted) per run; seedd's cgroup (it and every git it starts); CPU over the attack and {} s after\n{}\nmemory.peak = the cgroup's high-water mark over the window (page cache included; since seedd started where a reset does not hold, cgroup v2); PSS and Σ RSS (secondary) sampled every 20 ms; × idle = ratio of medians\n\n",
        AFTER.as_secs(),
        prov.line(),
    ));
    t.push_str(&format!(
        "{:<12} {:>24} {:>7} {:>24} {:>7} {:>22} {:>22} {:>7} {:>22} {:>20} {:>9} {:>10} {:>10} {:>6} {:>10}\n",
        "attack",
        "memory.peak MiB",
        "× idle",
        "PSS peak MiB",
        "× idle",
        "extra PSS MiB",
        "CPU s",
        "× idle",
        "wall s",
        "settle s",
        "control s",
        "control ok",
        "Σ RSS MiB",
        "status",
        "bytes"
    ));
    let mut json = Vec::new();
    for (name, samples) in rows {
        let peak = sum(samples, |s| s.memory_peak_mib);
        let pss = sum(samples, |s| s.pss_peak_mib);
        let extra = sum(samples, |s| s.extra_pss_mib);
        let rss = sum(samples, |s| s.rss_sum_peak_mib);
        let cpu = sum(samples, |s| s.cpu_s);
        let wall = sum(samples, |s| s.wall_s);
        let settle = sum(samples, |s| s.settle_s);
        let control = sum(samples, |s| s.control_s);
        let ok = samples.iter().all(|s| s.control_ok);
        let status = samples.first().map_or(0, |s| s.status);
        let bytes = med(samples, |s| s.bytes as f64);
        let ratio = |s: Option<Summary>, idle: f64| s.map_or(f64::NAN, |s| s.median / idle);
        let peak_x = ratio(peak, idle_peak);
        let pss_x = ratio(pss, idle_pss);
        let cpu_x = ratio(cpu, idle_cpu.max(0.01));
        let x = |v: f64| seedd_benches::fmt(Some(v));
        t.push_str(&format!(
            "{:<12} {:>24} {:>7} {:>24} {:>7} {:>22} {:>22} {:>7} {:>22} {:>20} {:>9} {:>10} {:>10} {:>6} {:>10}\n",
            name,
            show(peak),
            x(peak_x),
            show(pss),
            x(pss_x),
            show(extra),
            show(cpu),
            x(cpu_x),
            show(wall),
            show(settle),
            control.map_or("-".to_owned(), |s| seedd_benches::fmt(Some(s.median))),
            ok,
            rss.map_or("-".to_owned(), |s| seedd_benches::fmt(Some(s.median))),
            status,
            x(bytes)
        ));
        let j = |s: Option<Summary>| s.map_or(serde_json::Value::Null, |s| s.to_json());
        json.push(serde_json::json!({
            "attack": name,
            "memory_peak_mib": j(peak), "memory_peak_vs_idle": peak_x,
            "pss_peak_mib": j(pss), "pss_peak_vs_idle": pss_x, "extra_pss_mib": j(extra),
            "rss_sum_peak_mib_secondary": j(rss),
            "cpu_s": j(cpu), "cpu_vs_idle": cpu_x, "wall_s": j(wall),
            "settle_s": j(settle), "control_worst_s": j(control), "control_all_200": ok,
            "status": status, "bytes_median": bytes,
        }));
    }
    print!("{t}");
    let out = measure::write_result(
        "hostile",
        prov,
        serde_json::json!({
            "rounds": runs,
            "after_s": AFTER.as_secs(),
            "cgroup": measure::cgroup_method(),
            "runs": json,
            "table": t,
        }),
    );
    println!("JSON: {}", out.display());
}
