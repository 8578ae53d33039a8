//! Hostile: the attacks of issue 25 §1–§4 against a release seedd, one at a time, each
//! `SEEDD_HOSTILE_RUNS` times (default 5), each run on a freshly started seedd (defaults, the
//! same data dir): what one anonymous client (or one published repository) costs the seed.
//! Per attack: seedd's process-tree peak RSS over the attack
//! window against the same window of an idle seed (ratio), CPU seconds of the tree (seedd plus
//! its git children) over the window and the 5 s after it (so work that outlives its request
//! shows), the attack's wall time, how long seedd kept burning CPU after the attacker left
//! (`settle`), and the worst latency and status of a control request (`/tree` of another
//! repository) made during the attack. Medians over the runs. Prints a table and writes JSON
//! to `<target>/seedd-bench-hostile.json`. See `benches/README.md`.
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
use std::time::{Duration, Instant};

use seedd_benches::procfs::{self, TreeRssSampler};
use seedd_benches::{ensure_seedd, env_usize, fmt, profile_dir, spawn_seedd, SpawnedSeedd};
use seedd_tests::hostile::{self, Attack};
use seedd_tests::pkt;

/// How long after an attack its CPU is still counted.
const AFTER: Duration = Duration::from_secs(5);
/// One control request's limit.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// Peak Σ VmRSS of the tree over the window, MiB.
    peak_mib: f64,
    /// Peak minus the RSS before the window, MiB.
    extra_mib: f64,
    /// CPU seconds of the tree over the window and [`AFTER`].
    cpu_s: f64,
    /// The attack's own wall time, s.
    wall_s: f64,
    /// Seconds until the tree's CPU stopped moving after the attack ended.
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
    seedd_benches::measure::provenance("hostile");
    let started = Instant::now();
    let log = move |msg: &str| eprintln!("[{:6.1}s] {msg}", started.elapsed().as_secs_f64());
    let runs = env_usize("SEEDD_HOSTILE_RUNS", 5).max(1);
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
        "{runs} runs of {:?}, a fresh seedd for each",
        kinds.iter().map(|k| k.name()).collect::<Vec<_>>()
    ));
    let mut rows: Vec<(String, Vec<Sample>)> = Vec::new();
    let mut idle = Vec::new();
    for _ in 0..runs {
        idle.push(with_seed(&bin, &data, tmp.path(), |pid, http| {
            measure(pid, http, &repos.control, || {
                std::thread::sleep(Duration::from_secs(2));
                (0, 0)
            })
        }));
    }
    rows.push(("idle (2 s)".into(), idle));
    for kind in &kinds {
        let mut samples = Vec::new();
        for run in 0..runs {
            let s = with_seed(&bin, &data, tmp.path(), |pid, http| {
                measure(pid, http, &repos.control, || attack(*kind, http, &repos))
            });
            log(&format!("{} run {}: {s:?}", kind.name(), run + 1));
            samples.push(s);
        }
        rows.push((kind.name().into(), samples));
    }
    report(&rows, runs, &profile);
}

/// Starts a seedd on `data` (its pack cache and index as the last one left them; caches are
/// emptied at start), runs `f` with its pid and HTTP address, stops it.
fn with_seed<T>(bin: &Path, data: &Path, tmp: &Path, f: impl FnOnce(u32, SocketAddr) -> T) -> T {
    let mut seed = spawn_seedd(bin, data, "hostile", "", &tmp.join("seedd.log"));
    wait_ready(&seed);
    let pid = seed.child.id();
    let out = f(pid, ([127, 0, 0, 1], seed.http).into());
    // SIGTERM: a graceful stop ends its git children too (SIGKILL would leave them running
    // into the next run).
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && matches!(seed.child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = seed.child.kill();
    let _ = seed.child.wait();
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

/// Runs `work` while sampling the tree's RSS and probing the control repository.
fn measure(
    pid: u32,
    http: SocketAddr,
    control: &Attack,
    work: impl FnOnce() -> (u16, usize),
) -> Sample {
    procfs::settle(pid);
    let before_kib = procfs::tree_rss_kib(pid);
    let cpu0 = tree_cpu_ticks(pid);
    let sampler = TreeRssSampler::start(pid, Duration::from_millis(20));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let control_path = format!("/api/v1/repos/{}/tree/{}/", control.rid, control.commit);
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
    // Settle: until the CPU stops moving for 500 ms (at most 60 s).
    let ended = Instant::now();
    let mut last = tree_cpu_ticks(pid);
    let mut settle_s = 0.0;
    while ended.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(500));
        let now = tree_cpu_ticks(pid);
        if now <= last + 1 {
            break;
        }
        last = now;
        settle_s = ended.elapsed().as_secs_f64();
    }
    let left = AFTER.saturating_sub(ended.elapsed());
    std::thread::sleep(left);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (control_s, control_ok) = prober.join().unwrap_or((f64::NAN, false));
    let peak = sampler.finish();
    procfs::settle(pid);
    let cpu_s = (tree_cpu_ticks(pid).saturating_sub(cpu0)) as f64 / procfs::clk_tck();
    Sample {
        peak_mib: peak.rss as f64 / 1024.0,
        extra_mib: peak.rss.saturating_sub(before_kib) as f64 / 1024.0,
        cpu_s,
        wall_s,
        settle_s,
        control_s,
        control_ok,
        status,
        bytes,
    }
}

/// CPU ticks of seedd (with its reaped children) plus its live children.
fn tree_cpu_ticks(pid: u32) -> u64 {
    procfs::tree(pid)
        .into_iter()
        .map(|p| {
            if p == pid {
                procfs::cpu_ticks(p)
            } else {
                // A live child's own time (its cutime reaches seedd when it is reaped).
                procfs::own_ticks(p)
            }
        })
        .sum()
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

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn report(rows: &[(String, Vec<Sample>)], runs: usize, profile: &Path) {
    let med = |s: &[Sample], f: fn(&Sample) -> f64| median(s.iter().map(f).collect());
    let idle = rows.first().map(|(_, s)| s.clone()).unwrap_or_default();
    let idle_peak = med(&idle, |s| s.peak_mib);
    let idle_cpu = med(&idle, |s| s.cpu_s);
    println!(
        "\nhostile: medians of {runs} runs (seedd's process tree; CPU over the attack and {} s after)",
        AFTER.as_secs()
    );
    println!(
        "{:<12} {:>10} {:>10} {:>9} {:>8} {:>9} {:>8} {:>9} {:>11} {:>10}",
        "attack",
        "peak MiB",
        "extra MiB",
        "× idle",
        "CPU s",
        "× idle",
        "wall s",
        "settle s",
        "control s",
        "control ok"
    );
    let mut json = Vec::new();
    for (name, samples) in rows {
        let peak = med(samples, |s| s.peak_mib);
        let extra = med(samples, |s| s.extra_mib);
        let cpu = med(samples, |s| s.cpu_s);
        let wall = med(samples, |s| s.wall_s);
        let settle = med(samples, |s| s.settle_s);
        let control = med(samples, |s| s.control_s);
        let ok = samples.iter().all(|s| s.control_ok);
        let status = samples.first().map_or(0, |s| s.status);
        let bytes = med(samples, |s| s.bytes as f64);
        println!(
            "{:<12} {:>10} {:>10} {:>9} {:>8} {:>9} {:>8} {:>9} {:>11} {:>10} {:>7} {:>12}",
            name,
            fmt(Some(peak)),
            fmt(Some(extra)),
            fmt(Some(peak / idle_peak)),
            fmt(Some(cpu)),
            fmt(Some(cpu / idle_cpu.max(0.01))),
            fmt(Some(wall)),
            fmt(Some(settle)),
            fmt(Some(control)),
            ok,
            status,
            fmt(Some(bytes))
        );
        json.push(serde_json::json!({
            "attack": name, "peak_mib": peak, "extra_mib": extra, "peak_vs_idle": peak / idle_peak,
            "cpu_s": cpu, "cpu_vs_idle": cpu / idle_cpu.max(0.01), "wall_s": wall,
            "settle_s": settle, "control_worst_s": control, "control_all_200": ok,
            "status": status, "bytes": bytes,
        }));
    }
    let out = profile
        .parent()
        .unwrap_or(profile)
        .join("seedd-bench-hostile.json");
    let _ = std::fs::write(
        &out,
        serde_json::to_string_pretty(&seedd_benches::measure::stamped(
            &serde_json::json!({ "runs": json }),
        ))
        .unwrap_or_default(),
    );
    println!("JSON: {}", out.display());
}
