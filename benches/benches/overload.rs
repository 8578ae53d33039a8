//! Overload: a release seedd serving one repository over HTTP is offered 10× its sustainable
//! clone rate, open-loop, from many client addresses in 127.0.0.0/8, for
//! `SEEDD_OVERLOAD_SECS` (default 120 s). Measured: goodput (completed clones/s) against the
//! peak, rejections (429/503) and their latency, seedd's peak RSS, errors. Targets from the
//! issue: no OOM, goodput ≥ 80 % of peak, rejections answered in ≤ 10 ms at p99. Prints a
//! table and writes JSON to `<target>/seedd-bench-overload.json`. See `benches/README.md`.
//!
//! **Why raw HTTP and not `git clone`:** a real `git clone` runs several client processes
//! (git, git-remote-http, index-pack, checkout) that cost tens of ms of CPU each on the same
//! 2 cores as the server, so 10× the server's rate could not even be offered. The client here
//! sends exactly the requests of a v0 smart-HTTP clone — `GET info/refs?service=
//! git-upload-pack`, then `POST git-upload-pack` with a `want` for the advertised `HEAD` and
//! `done` — on one keep-alive connection per clone, reads the whole pack and checks that it is
//! one (`NAK` then `PACK`). The server does the same work as for `git clone`.
//!
//! **Repository:** a synthetic one (`SEEDD_OVERLOAD_FILES` text files of 8–24 KiB, 20
//! commits, one pack with a bitmap; about 3 MB), so that a clone is bound by pack generation
//! as real clones are, not by process start-up as for a tiny repository.
//!
//! `SEEDD_OVERLOAD_PACK_CACHE=off` runs the same phases with the pack cache off (it is on by
//! default); the setting is in the result's provenance.
//!
//! Phases (each with a fresh seedd):
//! 1. **peak**: closed loop, 2, 4 and 6 concurrent cloners (`SEEDD_OVERLOAD_PEAK_SECS` each,
//!    default 6 s); the best completed-clones/s is the sustainable rate.
//! 2. **overload**, per scenario (`SEEDD_OVERLOAD_SCENARIOS`, default both): open loop at
//!    `SEEDD_OVERLOAD_FACTOR` (10) × peak, arrivals evenly spaced; each socket is bound to its
//!    client's address (127.1.x.y), so per-IP limits see distinct users.
//!    * `admission`: the load spread evenly over `SEEDD_OVERLOAD_IPS` (256) addresses, per-IP
//!      limit off: only the pack/ref admission queues shed load (503 + Retry-After).
//!    * `abusers`: 1.5× peak from 1,024 ordinary addresses (each far under its limit), the
//!      rest (8.5× peak) from 8 abusive ones; per-IP limit 2 requests/s, burst 10 (one clone a
//!      second, sustained). The per-IP layer answers most of the abusers' requests with 429
//!      before any work; admission sheds the rest.
//!
//! Long by design: the overload scenarios share their load generators and accounting and are
//! measured in one run (see benches/README.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seedd_benches::measure::{Pinning, Scope};
use seedd_benches::{ensure_seedd, env_usize, fmt, procfs, profile_dir, write_table, TableLine};
use seedd_tests::{copy_tree, git, run, stdout, synthetic_repo, Seed, SeedOptions};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};

/// Bump when the generated repository changes.
const DATA_VERSION: &str = "overload-v1";
/// Concurrency levels of the closed-loop peak phase.
const PEAK_LEVELS: [usize; 3] = [2, 4, 6];
/// Most clones in flight in the open-loop generator (beyond: counted as client overflow).
const MAX_OUTSTANDING: usize = 4_000;
/// A clone that takes longer than this is an error.
const CLONE_TIMEOUT: Duration = Duration::from_secs(30);
/// `abusers` scenario: abusive and ordinary addresses, the ordinary clients' share of the
/// load (in multiples of the peak), and the per-IP limit.
const ABUSERS: usize = 8;
const ORDINARY: usize = 1_024;
const ORDINARY_LOAD: f64 = 1.5;
const ABUSERS_PER_IP: (f64, u32) = (2.0, 10);
/// Targets from the issue.
const GOODPUT_MIN: f64 = 0.80;
const REJECT_P99_MAX_MS: f64 = 10.0;

fn main() {
    // The load generator on the load cores, seedd (in its cgroup) on the server cores.
    Pinning::pin_self_to_load();
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    seedd_benches::measure::provenance("overload");
    let started = Instant::now();
    let log = move |msg: &str| eprintln!("[{:6.1}s] {msg}", started.elapsed().as_secs_f64());
    let secs = env_usize("SEEDD_OVERLOAD_SECS", 120) as f64;
    let peak_secs = env_usize("SEEDD_OVERLOAD_PEAK_SECS", 6) as f64;
    let factor = env_usize("SEEDD_OVERLOAD_FACTOR", 10) as f64;
    let n_ips = env_usize("SEEDD_OVERLOAD_IPS", 256).clamp(1, 60_000);
    let scenarios: Vec<Scenario> = std::env::var("SEEDD_OVERLOAD_SCENARIOS")
        .unwrap_or_else(|_| "admission,abusers".into())
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s {
            "admission" => Scenario::Admission,
            "abusers" => Scenario::Abusers,
            other => panic!("unknown scenario {other:?} (admission, abusers)"),
        })
        .collect();

    let profile = profile_dir();
    let seedd_bin = ensure_seedd(&log, &profile);
    let data = dataset(&profile, &log);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // Phase 1: the sustainable rate.
    let (seed, scratch, _scope) = start_seed(&data, None, &seedd_bin, "peak");
    let target = Arc::new(Target {
        addr: seed.http,
        path: data.path.clone(),
    });
    let uniform: Arc<Vec<IpAddr>> = Arc::new((0..n_ips).map(client_ip).collect());
    log(&format!(
        "seedd pid {} at {}, repository {} ({:.1} MB packed)",
        seed.child.id(),
        seed.http,
        data.rid,
        data.pack_bytes as f64 / 1e6
    ));
    match rt.block_on(clone_once(&target, uniform[0])) {
        Outcome::Done { bytes, .. } => log(&format!("one clone: {bytes} bytes")),
        other => panic!("a single clone failed: {other:?}\n{}", seed.logs()),
    }
    let mut peak = 0.0f64;
    let mut peak_rows = Vec::new();
    for c in PEAK_LEVELS {
        let (rate, stats) = rt.block_on(closed_loop(&target, &uniform, c, peak_secs));
        log(&format!(
            "closed loop, {c} cloners: {rate:.1} clones/s, clone p50 {:.1} ms, {} rejected, {} errors",
            stats.ok_p50_ms, stats.rejected, stats.errors
        ));
        peak_rows.push((c, rate, stats));
        peak = peak.max(rate);
    }
    seed.stop();
    drop(scratch);
    assert!(peak > 0.0, "no clone completed in the peak phase");
    let offered = peak * factor;
    log(&format!(
        "peak {peak:.1} clones/s; offering {offered:.0} clones/s for {secs:.0} s per scenario"
    ));

    // Phase 2: overload.
    let mut results = Vec::new();
    for scenario in scenarios {
        let per_ip = match scenario {
            Scenario::Admission => None,
            Scenario::Abusers => Some(ABUSERS_PER_IP),
        };
        let (seed, scratch, scope) = start_seed(&data, per_ip, &seedd_bin, scenario.name());
        let pid = seed.child.id();
        let target = Arc::new(Target {
            addr: seed.http,
            path: data.path.clone(),
        });
        let mix = Mix::new(scenario, n_ips, (factor - ORDINARY_LOAD).max(0.0) / factor);
        let rss_before = procfs::status_kib(pid, "VmRSS");
        procfs::reset_hwm(pid);
        scope.reset_peak();
        let cpu0 = scope.cpu_usec();
        log(&format!(
            "scenario {}: per-IP limit {}",
            scenario.name(),
            per_ip.map_or("off".into(), |(r, b)| format!("{r} req/s, burst {b}"))
        ));
        let run = rt.block_on(open_loop(&target, &mix, offered, secs, pid));
        procfs::settle(pid);
        // seedd and every git it started (cgroup), not only what seedd reaped.
        let cpu = scope.cpu_usec().saturating_sub(cpu0) as f64 / 1e6;
        let memory_peak = scope.memory_peak();
        let hwm = procfs::status_kib(pid, "VmHWM");
        let alive = procfs::alive(pid);
        let s = &run.all;
        log(&format!(
            "  goodput {:.1}/s ({:.0} % of peak), {} rejected (p99 {:.2} ms), {} errors, seedd max RSS {:.1} MiB",
            run.goodput,
            100.0 * run.goodput / peak,
            s.rejected,
            s.reject_p99_ms,
            s.errors,
            hwm as f64 / 1024.0
        ));
        if s.errors > 0 {
            log(&format!("  first errors: {:?}", s.error_samples));
        }
        results.push(ScenarioResult {
            scenario,
            per_ip,
            run,
            cpu,
            rss_before_kib: rss_before,
            hwm_kib: hwm,
            memory_peak,
            alive,
        });
        seed.stop();
        drop(scratch);
    }

    print!(
        "{}",
        table(
            &data,
            peak,
            &peak_rows,
            offered,
            secs,
            n_ips,
            &results,
            started.elapsed()
        )
    );
    let stats_json = |s: &Stats| {
        serde_json::json!({
            "completed": s.done,
            "rejected": s.rejected,
            "rejected_429": s.r429,
            "rejected_503": s.r503,
            "rejected_at_pack": s.rejected_at_pack,
            "reject_ms": {"p50": s.reject_p50_ms, "p99": s.reject_p99_ms, "max": s.reject_max_ms},
            "clone_ms": {"p50": s.ok_p50_ms, "p99": s.ok_p99_ms},
            "retry_after_missing": s.no_retry_after,
            "errors": s.errors,
            "error_samples": s.error_samples,
        })
    };
    let json = serde_json::json!({
        "schema": 1,
        "unix_time": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        "settings": {
            "secs": secs, "peak_secs": peak_secs, "factor": factor, "ips": n_ips,
            "repo_pack_bytes": data.pack_bytes,
            "seedd_env": seed_env(None),
        },
        "peak": {
            "clones_per_s": peak,
            "levels": peak_rows.iter().map(|(c, r, s)| serde_json::json!({
                "cloners": c, "clones_per_s": r, "stats": stats_json(s),
            })).collect::<Vec<_>>(),
        },
        "offered_clones_per_s": offered,
        // The targets per scenario, in the layout benches/tools/targets.py reads.
        "targets": results.iter().flat_map(|r| {
            let cache = std::env::var("SEEDD_OVERLOAD_PACK_CACHE").unwrap_or_else(|_| "on".into());
            let name = format!("{} (pack cache {cache})", r.scenario.name());
            [
                serde_json::json!({
                    "target": format!("{name}: goodput at {factor}× peak / peak"),
                    "value": r.run.goodput / peak, "goal": "≥ 0.80",
                    "met": r.run.goodput / peak >= GOODPUT_MIN,
                }),
                serde_json::json!({
                    "target": format!("{name}: rejection p99, ms"),
                    "value": r.run.all.reject_p99_ms, "goal": "≤ 10 ms",
                    "met": r.run.all.rejected == 0 || r.run.all.reject_p99_ms <= REJECT_P99_MAX_MS,
                }),
                serde_json::json!({
                    "target": format!("{name}: seedd alive (no OOM), cgroup memory.peak MiB"),
                    "value": r.memory_peak.map(|b| b as f64 / (1024.0 * 1024.0)),
                    "goal": "no OOM", "met": r.alive,
                }),
            ]
        }).collect::<Vec<_>>(),
        "scenarios": results.iter().map(|r| serde_json::json!({
            "name": r.scenario.name(),
            "per_ip": r.per_ip.map(|(rate, burst)| serde_json::json!({"requests_per_second": rate, "burst": burst})),
            "arrivals": r.run.arrivals,
            "client_overflow": r.run.overflow,
            "goodput_clones_per_s": r.run.goodput,
            "goodput_ratio": r.run.goodput / peak,
            "goodput_per_10s": r.run.windows,
            "ordinary_goodput_clones_per_s": r.run.ordinary_goodput,
            "all": stats_json(&r.run.all),
            "ordinary": stats_json(&r.run.ordinary),
            "seedd_cpu_s": r.cpu,
            "seedd_rss_before_kib": r.rss_before_kib,
            "seedd_max_rss_kib": r.hwm_kib,
            "seedd_cgroup_memory_peak_bytes": r.memory_peak,
            "pack_cache": std::env::var("SEEDD_OVERLOAD_PACK_CACHE").unwrap_or_else(|_| "on".into()),
            "seedd_alive": r.alive,
            "goodput_met": r.run.goodput / peak >= GOODPUT_MIN,
            "reject_p99_met": r.run.all.rejected == 0 || r.run.all.reject_p99_ms <= REJECT_P99_MAX_MS,
        })).collect::<Vec<_>>(),
    });
    let path = profile
        .parent()
        .map_or_else(|| profile.clone(), Path::to_owned)
        .join(
            if std::env::var("SEEDD_OVERLOAD_PACK_CACHE").as_deref() == Ok("off") {
                "seedd-bench-overload-cache-off.json"
            } else {
                "seedd-bench-overload.json"
            },
        );
    if let Err(e) = std::fs::write(
        &path,
        serde_json::to_string_pretty(&seedd_benches::measure::stamped(&json)).unwrap(),
    ) {
        log(&format!("could not write {}: {e}", path.display()));
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Admission,
    Abusers,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Admission => "admission",
            Scenario::Abusers => "abusers",
        }
    }
}

/// Who sends arrival `i`: (address, ordinary client?).
struct Mix {
    uniform: Vec<IpAddr>,
    abusers: Vec<IpAddr>,
    ordinary: Vec<IpAddr>,
    /// `abusers`: share of arrivals from abusive addresses.
    abusive_share: f64,
    scenario: Scenario,
}

impl Mix {
    fn new(scenario: Scenario, n_ips: usize, abusive_share: f64) -> Mix {
        Mix {
            uniform: (0..n_ips).map(client_ip).collect(),
            abusers: (0..ABUSERS).map(|i| client_ip(50_000 + i)).collect(),
            ordinary: (0..ORDINARY).map(|i| client_ip(10_000 + i)).collect(),
            abusive_share,
            scenario,
        }
    }

    fn client(&self, i: usize) -> (IpAddr, bool) {
        match self.scenario {
            Scenario::Admission => (self.uniform[i % self.uniform.len()], true),
            Scenario::Abusers => {
                // Deterministic interleaving: arrival i is abusive when the running share
                // of abusive arrivals falls behind.
                let abusive = ((i + 1) as f64 * self.abusive_share).floor()
                    > (i as f64 * self.abusive_share).floor();
                if abusive {
                    (self.abusers[i % self.abusers.len()], false)
                } else {
                    (self.ordinary[i % self.ordinary.len()], true)
                }
            }
        }
    }
}

/// 127.1.0.1, 127.1.0.2, … 250 per /24.
fn client_ip(i: usize) -> IpAddr {
    let i = u32::try_from(i).unwrap();
    IpAddr::V4(Ipv4Addr::new(
        127,
        1 + (i / 250 / 256) as u8,
        (i / 250 % 256) as u8,
        (i % 250 + 1) as u8,
    ))
}

/// seedd's settings for every phase: 2 pack slots (one per CPU on the 2-core dev VM), short
/// queues and queue timeouts so that excess is answered at once.
fn seed_env(per_ip: Option<(f64, u32)>) -> Vec<(String, String)> {
    let (rate, burst) = per_ip.unwrap_or((0.0, 100));
    [
        ("RUST_LOG", "info".to_owned()),
        ("SEEDD_HTTP__MAX_CONCURRENT_PACKS", "2".into()),
        ("SEEDD_HTTP__PACK_QUEUE", "4".into()),
        ("SEEDD_HTTP__PACK_QUEUE_TIMEOUT_MS", "1000".into()),
        ("SEEDD_HTTP__RATE__PER_REPO_CONCURRENT_PACKS", "2".into()),
        ("SEEDD_HTTP__RATE__PER_REPO_QUEUE", "4".into()),
        ("SEEDD_HTTP__RATE__PER_REPO_QUEUE_TIMEOUT_MS", "1000".into()),
        (
            "SEEDD_HTTP__RATE__PER_IP_REQUESTS_PER_SECOND",
            format!("{rate}"),
        ),
        ("SEEDD_HTTP__RATE__PER_IP_BURST", format!("{burst}")),
    ]
    .into_iter()
    .chain(
        // SEEDD_OVERLOAD_PACK_CACHE=off: the same load with the pack cache off (issue 29 §2).
        (std::env::var("SEEDD_OVERLOAD_PACK_CACHE").as_deref() == Ok("off"))
            .then(|| ("SEEDD_HTTP__PACK_CACHE__ENABLED", "false".to_owned())),
    )
    .map(|(k, v)| {
        if k != "RUST_LOG" {
            seedd_benches::measure::record_config_diff(&format!("{k}={v}"));
        }
        (k.to_owned(), v)
    })
    .collect()
}

/// The served repository (cached under `<target>/seedd-bench-data/overload-v1`).
struct Dataset {
    storage: PathBuf,
    rid: String,
    /// `/<rid>.git`
    path: String,
    pack_bytes: u64,
}

fn dataset(profile: &Path, log: &dyn Fn(&str)) -> Dataset {
    let files = env_usize("SEEDD_OVERLOAD_FILES", 160);
    let dir = profile
        .parent()
        .unwrap()
        .join("seedd-bench-data")
        .join(format!("{DATA_VERSION}-{files}"));
    let manifest = dir.join("manifest.txt");
    if !manifest.exists() {
        log(&format!("generating the repository ({files} files) ..."));
        let tmp = dir.with_extension("tmp");
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(tmp.join("storage")).unwrap();
        let (rid, path) = synthetic_repo(&tmp.join("storage"), "overload", |work, g| {
            populate(work, g, files)
        });
        let home = tmp.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let gd = |args: &[&str]| stdout(&run(git(&home).arg("--git-dir").arg(&path).args(args)));
        gd(&["repack", "-a", "-d", "-b", "-q"]);
        gd(&["commit-graph", "write", "--reachable", "--no-progress"]);
        gd(&["pack-refs", "--all"]);
        let _ = std::fs::remove_dir_all(&home);
        std::fs::write(tmp.join("manifest.txt"), format!("{rid}\n")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&tmp, &dir).unwrap();
    }
    let rid = std::fs::read_to_string(&manifest)
        .unwrap()
        .trim()
        .to_owned();
    let canonical = rid.trim_start_matches("rad:").to_owned();
    let storage = dir.join("storage");
    let pack_bytes = std::fs::read_dir(storage.join(&canonical).join("objects/pack"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    Dataset {
        storage,
        path: format!("/{canonical}.git"),
        rid,
        pack_bytes,
    }
}

/// `files` text files of 8–24 KiB, then 19 commits that each rewrite 5 of them.
fn populate(work: &Path, g: &dyn Fn(&[&str]) -> String, files: usize) {
    let mut rng = 0x5eed_0f10_ad00_u64;
    let mut next = move || {
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let vocab: Vec<String> = (0..2048)
        .map(|_| {
            let len = 2 + (next() % 8) as usize;
            (0..len)
                .map(|_| char::from(b'a' + (next() % 26) as u8))
                .collect()
        })
        .collect();
    let mut text = |bytes: usize| {
        let mut out = String::with_capacity(bytes + 128);
        while out.len() < bytes {
            let words = 6 + (next() % 9) as usize;
            for w in 0..words {
                if w > 0 {
                    out.push(' ');
                }
                out.push_str(&vocab[(next() % vocab.len() as u64) as usize]);
            }
            out.push('\n');
        }
        out
    };
    let paths: Vec<PathBuf> = (0..files)
        .map(|i| work.join(format!("src/d{:02}/f{i:03}.txt", i % 16)))
        .collect();
    for (i, p) in paths.iter().enumerate() {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text(8 * 1024 + (i * 7919) % (16 * 1024))).unwrap();
    }
    g(&["add", "-A"]);
    g(&["commit", "-q", "-m", "initial import"]);
    for c in 1..20 {
        for k in 0..5 {
            let p = &paths[(c * 31 + k * 17) % paths.len()];
            std::fs::write(p, text(12 * 1024)).unwrap();
        }
        g(&["add", "-A"]);
        g(&["commit", "-q", "-m", &format!("change {c}")]);
    }
}

/// A fresh seedd on a copy of the dataset (the copy goes with the returned directory), in its
/// own cgroup on the server cores.
fn start_seed(
    data: &Dataset,
    per_ip: Option<(f64, u32)>,
    bin: &Path,
    name: &str,
) -> (Seed, tempfile::TempDir, Scope) {
    let scratch = tempfile::tempdir().unwrap();
    let data_dir = scratch.path().join("data");
    copy_tree(&data.storage, &data_dir.join("storage"));
    let scope = Scope::new(name);
    let bin_dir = scope.wrapper_dir(bin, &scratch.path().join("bin"), &["seedctl"]);
    // Read by the harness when it starts seedd (no other thread reads the environment now).
    std::env::set_var("SEEDD_TEST_BIN_DIR", &bin_dir);
    let seed = Seed::start(SeedOptions {
        data_dir: Some(data_dir),
        env: seed_env(per_ip),
        ..SeedOptions::default()
    });
    std::env::remove_var("SEEDD_TEST_BIN_DIR");
    seed.rescan();
    (seed, scratch, scope)
}

struct Target {
    addr: SocketAddr,
    /// `/<rid>.git`
    path: String,
}

#[derive(Debug)]
enum Outcome {
    Done {
        bytes: u64,
        ms: f64,
    },
    /// 429 or 503; `pack`: at the upload-pack POST (after the ref advertisement).
    Rejected {
        status: u16,
        ms: f64,
        pack: bool,
        retry_after: bool,
    },
    Error(String),
}

/// One clone from `src`: new connection, ref advertisement, pack for `HEAD`.
async fn clone_once(t: &Target, src: IpAddr) -> Outcome {
    match tokio::time::timeout(CLONE_TIMEOUT, clone_inner(t, src)).await {
        Ok(o) => o,
        Err(_) => Outcome::Error("clone timed out".into()),
    }
}

async fn clone_inner(t: &Target, src: IpAddr) -> Outcome {
    let t0 = Instant::now();
    let conn = async {
        let sock = TcpSocket::new_v4()?;
        sock.bind(SocketAddr::new(src, 0))?;
        let s = sock.connect(t.addr).await?;
        s.set_nodelay(true)?;
        Ok::<_, std::io::Error>(s)
    };
    let stream = match conn.await {
        Ok(s) => s,
        Err(e) => return Outcome::Error(format!("connect from {src}: {e}")),
    };
    let mut io = BufReader::with_capacity(64 * 1024, stream);
    let get = format!(
        "GET {}/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: seed\r\nUser-Agent: git/2.47.0 (overload bench)\r\n\r\n",
        t.path
    );
    let refs = match exchange(&mut io, get.as_bytes(), 256 * 1024).await {
        Ok(r) => r,
        Err(e) => return Outcome::Error(format!("info/refs: {e}")),
    };
    if refs.status != 200 {
        return rejected(refs, t0, false);
    }
    let Some(head) = head_oid(&refs.body) else {
        return Outcome::Error("no HEAD in the ref advertisement".into());
    };
    let mut body = pkt(&format!("want {head} ofs-delta no-progress\n"));
    body.push_str("0000");
    body.push_str(&pkt("done\n"));
    let post = format!(
        "POST {}/git-upload-pack HTTP/1.1\r\nHost: seed\r\nUser-Agent: git/2.47.0 (overload bench)\r\nContent-Type: application/x-git-upload-pack-request\r\nAccept: application/x-git-upload-pack-result\r\nContent-Length: {}\r\n\r\n{body}",
        t.path,
        body.len()
    );
    let t1 = Instant::now();
    let pack = match exchange(&mut io, post.as_bytes(), 16).await {
        Ok(r) => r,
        Err(e) => return Outcome::Error(format!("upload-pack: {e}")),
    };
    if pack.status != 200 {
        return rejected(pack, t1, true);
    }
    if !pack.body.starts_with(b"0008NAK\nPACK") {
        return Outcome::Error(format!(
            "upload-pack answer does not start with NAK + PACK: {:?}",
            String::from_utf8_lossy(&pack.body)
        ));
    }
    Outcome::Done {
        bytes: pack.len,
        ms: t0.elapsed().as_secs_f64() * 1e3,
    }
}

fn rejected(r: Response, since: Instant, pack: bool) -> Outcome {
    let ms = since.elapsed().as_secs_f64() * 1e3;
    match r.status {
        429 | 503 => Outcome::Rejected {
            status: r.status,
            ms,
            pack,
            retry_after: r.retry_after,
        },
        s => Outcome::Error(format!(
            "HTTP {s}: {}",
            String::from_utf8_lossy(&r.body).trim()
        )),
    }
}

fn pkt(line: &str) -> String {
    format!("{:04x}{line}", line.len() + 4)
}

/// The object id advertised for `HEAD` (`<oid> HEAD\0caps`).
fn head_oid(body: &[u8]) -> Option<String> {
    let at = body.windows(6).position(|w| w == b" HEAD\0")?;
    let oid = body.get(at.checked_sub(40)?..at)?;
    oid.iter()
        .all(u8::is_ascii_hexdigit)
        .then(|| String::from_utf8_lossy(oid).into_owned())
}

struct Response {
    status: u16,
    /// The first `keep` bytes of the body.
    body: Vec<u8>,
    len: u64,
    retry_after: bool,
}

/// Write `request`, read the whole response (Content-Length or chunked).
async fn exchange(
    io: &mut BufReader<TcpStream>,
    request: &[u8],
    keep: usize,
) -> std::io::Result<Response> {
    use std::io::{Error, ErrorKind};
    io.get_mut().write_all(request).await?;
    let mut line = String::new();
    let bad = |what: &str| Error::new(ErrorKind::InvalidData, what.to_owned());
    if io.read_line(&mut line).await? == 0 {
        return Err(Error::new(ErrorKind::UnexpectedEof, "connection closed"));
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let (mut chunked, mut length, mut retry_after) = (false, None, false);
    loop {
        line.clear();
        io.read_line(&mut line).await?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let v = v.trim();
            match k.trim().to_ascii_lowercase().as_str() {
                "transfer-encoding" => chunked = v.to_ascii_lowercase().contains("chunked"),
                "content-length" => length = v.parse::<u64>().ok(),
                "retry-after" => retry_after = v.parse::<u64>().is_ok_and(|s| s >= 1),
                _ => {}
            }
        }
    }
    let mut body = Vec::new();
    let mut len = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let mut take = |data: &[u8], body: &mut Vec<u8>| {
        let room = keep.saturating_sub(body.len());
        body.extend_from_slice(&data[..room.min(data.len())]);
        len += data.len() as u64;
    };
    if chunked {
        loop {
            line.clear();
            io.read_line(&mut line).await?;
            let size = u64::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad("bad chunk size"))?;
            if size == 0 {
                // Trailers, then the empty line.
                loop {
                    line.clear();
                    if io.read_line(&mut line).await? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let mut left = size;
            while left > 0 {
                let n = usize::try_from(left.min(buf.len() as u64)).unwrap();
                io.read_exact(&mut buf[..n]).await?;
                take(&buf[..n], &mut body);
                left -= n as u64;
            }
            line.clear();
            io.read_line(&mut line).await?;
        }
    } else if let Some(mut left) = length {
        while left > 0 {
            let n = usize::try_from(left.min(buf.len() as u64)).unwrap();
            io.read_exact(&mut buf[..n]).await?;
            take(&buf[..n], &mut body);
            left -= n as u64;
        }
    } else {
        return Err(bad("response without length"));
    }
    Ok(Response {
        status,
        body,
        len,
        retry_after,
    })
}

#[derive(Debug, Default, Clone)]
struct Stats {
    done: usize,
    rejected: usize,
    r429: usize,
    r503: usize,
    rejected_at_pack: usize,
    no_retry_after: usize,
    errors: usize,
    error_samples: Vec<String>,
    reject_p50_ms: f64,
    reject_p99_ms: f64,
    reject_max_ms: f64,
    ok_p50_ms: f64,
    ok_p99_ms: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn summarize<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Stats {
    let mut s = Stats::default();
    let (mut rej, mut ok) = (Vec::new(), Vec::new());
    for o in outcomes {
        match o {
            Outcome::Done { ms, .. } => {
                s.done += 1;
                ok.push(*ms);
            }
            Outcome::Rejected {
                status,
                ms,
                pack,
                retry_after,
            } => {
                s.rejected += 1;
                if *status == 429 {
                    s.r429 += 1;
                } else {
                    s.r503 += 1;
                }
                s.rejected_at_pack += usize::from(*pack);
                s.no_retry_after += usize::from(!retry_after);
                rej.push(*ms);
            }
            Outcome::Error(e) => {
                s.errors += 1;
                if s.error_samples.len() < 5 {
                    s.error_samples.push(e.clone());
                }
            }
        }
    }
    rej.sort_by(f64::total_cmp);
    ok.sort_by(f64::total_cmp);
    s.reject_p50_ms = percentile(&rej, 0.5);
    s.reject_p99_ms = percentile(&rej, 0.99);
    s.reject_max_ms = rej.last().copied().unwrap_or(f64::NAN);
    s.ok_p50_ms = percentile(&ok, 0.5);
    s.ok_p99_ms = percentile(&ok, 0.99);
    s
}

/// `cloners` tasks cloning back to back for `secs`; completed clones per second.
async fn closed_loop(
    t: &Arc<Target>,
    ips: &Arc<Vec<IpAddr>>,
    cloners: usize,
    secs: f64,
) -> (f64, Stats) {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..cloners)
        .map(|c| {
            let (t, ips) = (t.clone(), ips.clone());
            tokio::spawn(async move {
                let mut out = Vec::new();
                let mut i = c;
                while Instant::now() < end {
                    out.push(clone_once(&t, ips[i % ips.len()]).await);
                    i += cloners;
                }
                out
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let stats = summarize(all.iter());
    (stats.done as f64 / elapsed, stats)
}

struct OpenLoopRun {
    arrivals: usize,
    overflow: usize,
    /// Clones completed within the offered window, per second.
    goodput: f64,
    /// The same for the ordinary clients only (all clients in `admission`).
    ordinary_goodput: f64,
    /// Goodput per 10 s window (to see it hold over time).
    windows: Vec<f64>,
    all: Stats,
    ordinary: Stats,
    /// seedd's largest VmRSS sampled during the run (KiB).
    rss_max_kib: u64,
}

/// Arrivals at `rate`/s, evenly spaced, for `secs`; then waits for the stragglers.
async fn open_loop(t: &Arc<Target>, mix: &Mix, rate: f64, secs: f64, pid: u32) -> OpenLoopRun {
    // (finished at, ordinary client, outcome)
    let outcomes: Arc<Mutex<Vec<(f64, bool, Outcome)>>> = Arc::new(Mutex::new(Vec::new()));
    let outstanding = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let window = Duration::from_secs_f64(secs);
    let interval = 1.0 / rate;
    let (mut arrivals, mut overflow) = (0usize, 0usize);
    let mut rss_max = 0u64;
    let mut next_sample = start;
    while start.elapsed() < window {
        let now = start.elapsed().as_secs_f64();
        while (arrivals + overflow) as f64 * interval <= now {
            let i = arrivals + overflow;
            if outstanding.load(Ordering::Relaxed) >= MAX_OUTSTANDING {
                overflow += 1;
                continue;
            }
            arrivals += 1;
            outstanding.fetch_add(1, Ordering::Relaxed);
            let (ip, ordinary) = mix.client(i);
            let (t, outcomes, outstanding) = (t.clone(), outcomes.clone(), outstanding.clone());
            tokio::spawn(async move {
                let o = clone_once(&t, ip).await;
                let at = start.elapsed().as_secs_f64();
                outcomes.lock().unwrap().push((at, ordinary, o));
                outstanding.fetch_sub(1, Ordering::Relaxed);
            });
        }
        if Instant::now() >= next_sample {
            rss_max = rss_max.max(procfs::status_kib(pid, "VmRSS"));
            next_sample += Duration::from_millis(500);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let deadline = Instant::now() + CLONE_TIMEOUT + Duration::from_secs(5);
    while outstanding.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let all = std::mem::take(&mut *outcomes.lock().unwrap());
    let done_in_window = |only_ordinary: bool| {
        all.iter()
            .filter(|(at, ordinary, o)| {
                *at <= secs && (*ordinary || !only_ordinary) && matches!(o, Outcome::Done { .. })
            })
            .count() as f64
            / secs
    };
    let n_windows = (secs / 10.0).floor().max(1.0) as usize;
    let mut windows = vec![0.0; n_windows];
    for (at, _, o) in &all {
        if matches!(o, Outcome::Done { .. }) {
            let w = (*at / 10.0) as usize;
            if w < n_windows {
                windows[w] += 0.1;
            }
        }
    }
    OpenLoopRun {
        arrivals,
        overflow,
        goodput: done_in_window(false),
        ordinary_goodput: done_in_window(true),
        windows,
        all: summarize(all.iter().map(|(_, _, o)| o)),
        ordinary: summarize(all.iter().filter(|(_, ord, _)| *ord).map(|(_, _, o)| o)),
        rss_max_kib: rss_max,
    }
}

struct ScenarioResult {
    scenario: Scenario,
    per_ip: Option<(f64, u32)>,
    run: OpenLoopRun,
    /// seedd's cgroup: seedd and every child, µs → s.
    cpu: f64,
    rss_before_kib: u64,
    hwm_kib: u64,
    /// The cgroup's memory high-water mark during the scenario (page cache included), bytes.
    memory_peak: Option<u64>,
    alive: bool,
}

#[allow(clippy::too_many_arguments)]
fn table(
    data: &Dataset,
    peak: f64,
    peak_rows: &[(usize, f64, Stats)],
    offered: f64,
    secs: f64,
    n_ips: usize,
    results: &[ScenarioResult],
    elapsed: Duration,
) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\nseedd overload: one repository ({:.1} MB pack), v0 smart-HTTP clones, offered {:.0}× peak for {secs:.0} s\n",
        data.pack_bytes as f64 / 1e6,
        offered / peak
    );
    let f = |v: f64| fmt(Some(v));
    let mut lines: Vec<(String, String, String, &str)> = Vec::new();
    let group = "peak (closed loop)".to_owned();
    for (c, rate, s) in peak_rows {
        lines.push((
            group.clone(),
            format!("{c} cloners: clones/s (clone p50 ms)"),
            format!("{} ({})", f(*rate), f(s.ok_p50_ms)),
            "",
        ));
    }
    lines.push((group, "sustainable rate".into(), f(peak), "clones/s"));
    for r in results {
        let s = &r.run.all;
        let g = match r.scenario {
            Scenario::Admission => format!("admission ({n_ips} IPs, per-IP off)"),
            Scenario::Abusers => format!("abusers ({ABUSERS} + {ORDINARY} IPs, per-IP on)"),
        };
        let ratio = r.run.goodput / peak;
        lines.push((g.clone(), "offered".into(), f(offered), "clones/s"));
        if let Some((rate, burst)) = r.per_ip {
            lines.push((
                g.clone(),
                "per-IP limit".into(),
                format!("{rate} req/s, burst {burst}"),
                "",
            ));
        }
        lines.push((
            g.clone(),
            format!(
                "goodput (≥ {:.0} % of peak: {})",
                GOODPUT_MIN * 100.0,
                if ratio >= GOODPUT_MIN {
                    "MET"
                } else {
                    "NOT MET"
                }
            ),
            format!("{} ({:.0} %)", f(r.run.goodput), ratio * 100.0),
            "clones/s",
        ));
        if r.scenario == Scenario::Abusers {
            lines.push((
                g.clone(),
                format!("  of which ordinary clients (offered {ORDINARY_LOAD}× peak)"),
                format!(
                    "{} ({:.0} % of peak)",
                    f(r.run.ordinary_goodput),
                    100.0 * r.run.ordinary_goodput / peak
                ),
                "clones/s",
            ));
        }
        lines.push((
            g.clone(),
            "goodput per 10 s, min / max".into(),
            format!(
                "{} / {}",
                f(r.run.windows.iter().copied().fold(f64::INFINITY, f64::min)),
                f(r.run.windows.iter().copied().fold(0.0, f64::max))
            ),
            "clones/s",
        ));
        lines.push((
            g.clone(),
            "clone latency p50 / p99 (completed)".into(),
            format!("{} / {}", f(s.ok_p50_ms), f(s.ok_p99_ms)),
            "ms",
        ));
        lines.push((
            g.clone(),
            "rejected clones: 429 / 503 (of which at upload-pack)".into(),
            format!("{} / {} ({})", s.r429, s.r503, s.rejected_at_pack),
            "",
        ));
        let p99_ok = s.rejected == 0 || s.reject_p99_ms <= REJECT_P99_MAX_MS;
        lines.push((
            g.clone(),
            format!(
                "rejection latency p50 / p99 / max (p99 ≤ {REJECT_P99_MAX_MS:.0}: {})",
                if p99_ok { "MET" } else { "NOT MET" }
            ),
            format!(
                "{} / {} / {}",
                f(s.reject_p50_ms),
                f(s.reject_p99_ms),
                f(s.reject_max_ms)
            ),
            "ms",
        ));
        lines.push((
            g.clone(),
            "rejections without Retry-After".into(),
            s.no_retry_after.to_string(),
            "",
        ));
        lines.push((
            g.clone(),
            "errors / client overflow".into(),
            format!("{} / {}", s.errors, r.run.overflow),
            "",
        ));
        lines.push((
            g.clone(),
            "seedd cgroup memory.peak (seedd + git children, page cache included)".into(),
            r.memory_peak.map_or("-".into(), |b| {
                format!("{:.1}", b as f64 / (1024.0 * 1024.0))
            }),
            "MiB",
        ));
        lines.push((
            g.clone(),
            "seedd RSS before / max (VmHWM) / sampled max".into(),
            format!(
                "{:.1} / {:.1} / {:.1}",
                r.rss_before_kib as f64 / 1024.0,
                r.hwm_kib as f64 / 1024.0,
                r.run.rss_max_kib as f64 / 1024.0
            ),
            "MiB",
        ));
        lines.push((
            g.clone(),
            format!(
                "seedd CPU incl. git children (cgroup){}",
                if r.alive { "" } else { " (seedd DIED)" }
            ),
            format!("{:.1} ({:.2} cores)", r.cpu, r.cpu / secs),
            "s",
        ));
    }
    write_table(
        &mut t,
        ["phase", "metric", "value", "", "", "unit"],
        [36, 58, 26, 0, 0, 8],
        134,
        lines.iter().map(|(g, m, v, u)| TableLine {
            group: g,
            metric: m,
            seedd: v.clone(),
            other: String::new(),
            ratio: String::new(),
            unit: u,
            better: "",
        }),
    );
    let _ = writeln!(t, "\n({:.0} s)", elapsed.as_secs_f64());
    t
}
