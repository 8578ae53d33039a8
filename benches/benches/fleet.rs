//! Fleet bench (issue 28): clone throughput and CPU per clone through `seedd front` for 1, 2
//! and 4 replicas of one shard, and one seed without the front (the anchor: what the front and
//! the replicas add or save). Measured by the rules of issue 29 §1 (`seedd_benches::measure`):
//! every server process runs in its own cgroup ([`Scope`]; the replicas via `spawn_seedd`, the
//! front via `scope.command`), pinned to the server cores, and its CPU is the scope's
//! (`cpu.stat`: the server and every git it starts); the bench and its clients run on the load
//! cores. Clients are `git clone --bare` processes, `SEEDD_FLEET_CLIENTS` at once, for
//! `SEEDD_FLEET_SECS` per configuration, over `SEEDD_FLEET_REPOS` repositories round-robin,
//! after every repository was cloned twice (warm: pack caches admitted, ref snapshots read);
//! `SEEDD_FLEET_ROUNDS` (5) rounds, the configurations in ABBA order, median [min–max]. Memory:
//! Σ over the servers of each scope's `memory.peak` (over the measured window; since the server
//! started where a reset does not hold, cgroup v2) and of its sampled PSS peak.
//!
//! What it can and cannot show on a small box: every replica shares the same server cores, so
//! more replicas cannot raise throughput here; the figures show the front's cost per clone, that
//! CPU per clone stays flat as replicas are added (no work repeated across replicas for a
//! clone: each repository's clones land on one replica and its pack cache), and that nothing
//! fails. Read scaling needs one machine (or core set) per replica.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seedd_benches::measure::{self, abba, Pinning, Scope, Summary};
use seedd_benches::{
    ensure_seedd, env_usize, profile_dir, spawn_seedd, write_table, SpawnedSeedd, TableLine,
};
use seedd_tests::{copy_tree, git, run, synthetic_repo};

const DATA_VERSION: &str = "fleet-v1";
const ROUNDS: usize = 5;

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    let prov = measure::provenance("fleet");
    // The bench and its git clients on the load cores; every server's scope on the server cores.
    Pinning::pin_self_to_load();
    let profile = profile_dir();
    let log = |s: &str| eprintln!("fleet: {s}");
    let bin = ensure_seedd(&log, &profile);
    let repos = env_usize("SEEDD_FLEET_REPOS", 8);
    let clients = env_usize("SEEDD_FLEET_CLIENTS", 8);
    let secs = env_usize("SEEDD_FLEET_SECS", 15) as u64;
    let rounds = env_usize("SEEDD_FLEET_ROUNDS", ROUNDS).max(1);
    if rounds < ROUNDS {
        measure::record_override(&format!(
            "SEEDD_FLEET_ROUNDS={rounds} (fewer than {ROUNDS} rounds)"
        ));
    }
    measure::record_config_diff(
        "replicas: http.rate.per_ip_requests_per_second = 0 (no per-IP limit), policy allow/all, RUST_LOG=info (spawn_seedd)",
    );
    measure::record_config_diff(
        "replicas behind the front: [fleet] shard = \"s0\", placement = <file>, http.rate.trusted_proxies = [\"127.0.0.0/8\"]",
    );
    let storage = dataset(&profile, repos, &log);
    let rids: Vec<String> = std::fs::read_to_string(storage.join("../manifest.txt"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let work = tempfile::tempdir().unwrap();
    log(&format!(
        "{} repositories, {clients} clients, {secs} s × {rounds} rounds per configuration; seedd {}; {}",
        rids.len(),
        bin.display(),
        prov.line()
    ));

    // (label, replicas, through the front)
    let configs: [(&str, usize, bool); 4] = [
        ("1 seed, no front", 1, false),
        ("front + 1 replica", 1, true),
        ("front + 2 replicas", 2, true),
        ("front + 4 replicas", 4, true),
    ];
    let mut results: Vec<Vec<Figures>> = configs.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for ci in abba(round, configs.len()) {
            let (label, n, front) = configs[ci];
            let dir = work.path().join(format!("{n}-{front}-{round}"));
            let f = measure_config(&bin, &storage, &rids, n, front, clients, secs, &dir, &log);
            log(&format!(
                "round {}/{rounds} {label}: {:.1} clones/s, {:.2} ms CPU per clone ({:.2} front), {} failed",
                round + 1,
                f.per_sec,
                f.cpu_ms_per_clone,
                f.front_cpu_ms_per_clone,
                f.failed
            ));
            results[ci].push(f);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    type Pick = fn(&Figures) -> f64;
    let sum = |v: &[Figures], f: Pick| Summary::of(&v.iter().map(f).collect::<Vec<_>>());
    let show = |s: Option<Summary>| s.map_or("-".to_owned(), |s| s.to_string());
    let anchor = &results[0];
    let metrics: [(&str, &str, &str, Pick); 5] = [
        ("clones/s", "/s", "higher", |f| f.per_sec),
        ("CPU per clone", "ms", "lower", |f| f.cpu_ms_per_clone),
        ("front CPU/clone", "ms", "lower", |f| {
            f.front_cpu_ms_per_clone
        }),
        ("Σ memory.peak", "MB", "lower", |f| f.memory_peak_mb),
        ("Σ PSS peak", "MiB", "lower", |f| f.pss_peak_mib),
    ];
    let mut rows: Vec<(String, String, String, String, String, &str, &str)> = Vec::new();
    let mut json_rows = Vec::new();
    for (ci, figs) in results.iter().enumerate() {
        let label = configs[ci].0;
        let mut per_metric = serde_json::Map::new();
        for (metric, unit, better, pick) in &metrics {
            let s = sum(figs, *pick);
            let a = sum(anchor, *pick);
            let ratio = match (s, a) {
                (Some(s), Some(a)) => s.ratio(&a),
                _ => None,
            };
            rows.push((
                label.to_owned(),
                (*metric).to_owned(),
                show(s),
                a.map_or("-".to_owned(), |a| {
                    seedd_benches::fmt_figure(Some(a.median), false)
                }),
                ratio.map_or("-".to_owned(), |r| format!("{r:.2}")),
                *unit,
                *better,
            ));
            per_metric.insert(
                (*metric).to_owned(),
                serde_json::json!({
                    "unit": unit, "better": better,
                    "fleet": s.map(|s| s.to_json()), "anchor": a.map(|a| a.to_json()),
                    "ratio_of_medians": ratio,
                }),
            );
        }
        let failed: usize = figs.iter().map(|f| f.failed).sum();
        rows.push((
            label.to_owned(),
            "failed clones".into(),
            failed.to_string(),
            anchor.iter().map(|f| f.failed).sum::<usize>().to_string(),
            "-".into(),
            "",
            "lower",
        ));
        let rss = sum(figs, |f| f.rss_sum_peak_mib);
        json_rows.push(serde_json::json!({
            "config": label, "metrics": per_metric, "failed": failed,
            "rss_sum_peak_mib_secondary": rss.map(|s| s.to_json()),
        }));
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "fleet: clones through seedd front, {rounds} rounds (ABBA order), median [min–max]; anchor: one seed without the front (median); warm (every repository cloned twice first)"
    );
    let _ = writeln!(t, "{}", prov.line());
    let _ = writeln!(
        t,
        "CPU = Σ of every server's cgroup (replicas and front, with the git they start) / clones finished; memory.peak = Σ of the cgroups' high-water marks over the window (since start where a reset does not hold, cgroup v2); PSS sampled every 20 ms"
    );
    write_table(
        &mut t,
        ["config", "metric", "fleet", "anchor", "ratio", "unit"],
        [20, 16, 26, 10, 6, 4],
        100,
        rows.iter().map(|r| TableLine {
            group: &r.0,
            metric: &r.1,
            seedd: r.2.clone(),
            other: r.3.clone(),
            ratio: r.4.clone(),
            unit: r.5,
            better: r.6,
        }),
    );
    println!("{t}");
    let out = profile.join("seedd-bench-fleet.txt");
    std::fs::write(&out, &t).unwrap();
    let json = measure::write_result(
        "fleet",
        prov,
        serde_json::json!({
            "rounds": rounds,
            "clients": clients,
            "seconds": secs,
            "repos": rids.len(),
            "cgroup": measure::cgroup_method(),
            "rows": json_rows,
            "table": t,
        }),
    );
    log(&format!(
        "written to {} and {}",
        out.display(),
        json.display()
    ));
}

struct Figures {
    per_sec: f64,
    cpu_ms_per_clone: f64,
    front_cpu_ms_per_clone: f64,
    memory_peak_mb: f64,
    pss_peak_mib: f64,
    rss_sum_peak_mib: f64,
    failed: usize,
}

/// The dataset: `repos` small repositories (60 files, 10 commits each), generated once.
fn dataset(profile: &Path, repos: usize, log: &dyn Fn(&str)) -> PathBuf {
    let dir = profile
        .parent()
        .unwrap()
        .join("seedd-bench-data")
        .join(format!("{DATA_VERSION}-{repos}"));
    if !dir.join("manifest.txt").exists() {
        log(&format!("generating {repos} repositories ..."));
        let tmp = dir.with_extension("tmp");
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(tmp.join("storage")).unwrap();
        let mut rids = Vec::new();
        for i in 0..repos {
            let (rid, _) = synthetic_repo(&tmp.join("storage"), &format!("fleet{i}"), |work, g| {
                for c in 0..10 {
                    for f in 0..60 {
                        let text: String = (0..200)
                            .map(|k| format!("{i} {c} {f} {k} line of text\n"))
                            .collect();
                        std::fs::write(work.join(format!("f{f}.txt")), text).unwrap();
                    }
                    g(&["add", "-A"]);
                    g(&["commit", "-qm", &format!("commit {c}")]);
                }
            });
            rids.push(rid);
        }
        std::fs::write(tmp.join("manifest.txt"), rids.join("\n") + "\n").unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&tmp, &dir).unwrap();
    }
    dir.join("storage")
}

struct Servers {
    seeds: Vec<SpawnedSeedd>,
    /// The front, its port and its scope.
    front: Option<(Child, u16, Arc<Scope>)>,
}

impl Drop for Servers {
    fn drop(&mut self) {
        for s in &mut self.seeds {
            let _ = s.child.kill();
            let _ = s.child.wait();
            s.scope.kill_all();
        }
        if let Some((c, _, scope)) = &mut self.front {
            let _ = c.kill();
            let _ = c.wait();
            scope.kill_all();
        }
    }
}

fn ready(url: &str) -> bool {
    Command::new("curl")
        .args(["-sf", "-o", "/dev/null", "--max-time", "2", url])
        .status()
        .is_ok_and(|s| s.success())
}

fn wait(what: &str, cond: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(120);
    while !cond() {
        assert!(Instant::now() < end, "{what} did not happen in 120 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// [`measure::measure`] over several scopes at once: run `f`, and per scope its CPU over the
/// interval, its memory peak and its sampled PSS / Σ RSS peaks (same order as `scopes`).
fn measure_all<T>(scopes: &[Arc<Scope>], f: impl FnOnce() -> T) -> (T, Vec<measure::Interval>) {
    for s in scopes {
        s.reset_peak();
    }
    let samplers: Vec<_> = scopes
        .iter()
        .map(|s| s.sampler(Duration::from_millis(20)))
        .collect();
    let c0: Vec<u64> = scopes.iter().map(|s| s.cpu_usec()).collect();
    let t0 = Instant::now();
    let r = f();
    let wall = t0.elapsed();
    // Let the servers finish what the last response started.
    std::thread::sleep(Duration::from_millis(50));
    let intervals = scopes
        .iter()
        .zip(c0)
        .zip(samplers)
        .map(|((s, c0), sampler)| {
            let cpu = s.cpu_usec().saturating_sub(c0);
            let peak = sampler.finish();
            measure::Interval {
                cpu_usec: cpu,
                wall,
                memory_peak: s.memory_peak(),
                pss_peak_kib: peak.pss_kib,
                rss_peak_kib: peak.rss_kib,
            }
        })
        .collect();
    (r, intervals)
}

#[allow(clippy::too_many_arguments)]
fn measure_config(
    bin: &Path,
    storage: &Path,
    rids: &[String],
    n: usize,
    with_front: bool,
    clients: usize,
    secs: u64,
    dir: &Path,
    log: &dyn Fn(&str),
) -> Figures {
    std::fs::create_dir_all(dir).unwrap();
    let placement = dir.join("placement.toml");
    std::fs::write(&placement, "[[shards]]\nname = \"s0\"\n").unwrap();
    let fleet = format!(
        "[fleet]\nshard = \"s0\"\nplacement = \"{}\"\n[http.rate]\ntrusted_proxies = [\"127.0.0.0/8\"]\n",
        placement.display()
    );
    let mut servers = Servers {
        seeds: Vec::new(),
        front: None,
    };
    for i in 0..n {
        let data = dir.join(format!("r{i}"));
        copy_tree(storage, &data.join("storage"));
        // spawn_seedd puts this under [p2p]; the tables after it are its own.
        let extra = if with_front {
            fleet.clone()
        } else {
            String::new()
        };
        servers.seeds.push(spawn_seedd(
            bin,
            &data,
            &format!("fleet-{i}"),
            &extra,
            &dir.join(format!("r{i}.log")),
        ));
    }
    for s in &servers.seeds {
        wait("a replica to be ready", || {
            ready(&format!("http://127.0.0.1:{}/readyz", s.admin))
        });
    }
    let base = if with_front {
        let http: Vec<String> = servers
            .seeds
            .iter()
            .map(|s| format!("\"http://127.0.0.1:{}\"", s.http))
            .collect();
        let admin: Vec<String> = servers
            .seeds
            .iter()
            .map(|s| format!("\"http://127.0.0.1:{}\"", s.admin))
            .collect();
        std::fs::write(
            &placement,
            format!(
                "[[shards]]\nname = \"s0\"\nreplicas = [{}]\nadmin = [{}]\n",
                http.join(", "),
                admin.join(", ")
            ),
        )
        .unwrap();
        let (port, aport) = (seedd_tests::free_port(), seedd_tests::free_port());
        let scope = Arc::new(Scope::new("fleet-front"));
        let child = scope
            .command(bin)
            .args(["front", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{aport}")])
            .arg("--placement")
            .arg(&placement)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("front.log")).unwrap())
            .spawn()
            .unwrap();
        scope.started(child.id());
        servers.front = Some((child, port, scope));
        wait("the front to be ready", || {
            ready(&format!("http://127.0.0.1:{aport}/readyz"))
        });
        format!("http://127.0.0.1:{port}")
    } else {
        format!("http://127.0.0.1:{}", servers.seeds[0].http)
    };
    // Warm: every repository cloned once (pack caches admitted, ref snapshots read).
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    for (i, rid) in rids.iter().enumerate() {
        for _ in 0..2 {
            let dst = home.join(format!("warm{i}"));
            let _ = run(git(&home)
                .args([
                    "clone",
                    "-q",
                    "--bare",
                    &format!("{base}/{}.git", rid.trim_start_matches("rad:")),
                ])
                .arg(&dst));
            let _ = std::fs::remove_dir_all(&dst);
        }
    }
    // Every server's scope; the front's last.
    let scopes: Vec<Arc<Scope>> = servers
        .seeds
        .iter()
        .map(|s| s.scope.clone())
        .chain(servers.front.as_ref().map(|(_, _, s)| s.clone()))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let (elapsed, intervals) = measure_all(&scopes, || {
        let started = Instant::now();
        let threads: Vec<_> = (0..clients)
            .map(|c| {
                let (stop, done, failed) = (stop.clone(), done.clone(), failed.clone());
                let (base, rids, home) = (base.clone(), rids.to_vec(), home.clone());
                std::thread::spawn(move || {
                    let mut k = c;
                    while !stop.load(Ordering::Relaxed) {
                        let rid = &rids[k % rids.len()];
                        let dst = home.join(format!("c{c}-{k}"));
                        let ok = git(&home)
                            .args([
                                "clone",
                                "-q",
                                "--bare",
                                &format!("{base}/{}.git", rid.trim_start_matches("rad:")),
                            ])
                            .arg(&dst)
                            .stdout(Stdio::null())
                            .stderr(Stdio::null())
                            .status()
                            .is_ok_and(|s| s.success());
                        if ok {
                            done.fetch_add(1, Ordering::Relaxed);
                        } else {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                        let _ = std::fs::remove_dir_all(&dst);
                        k += clients;
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        started.elapsed().as_secs_f64()
    });
    let cpu_s: f64 = intervals.iter().map(|i| i.cpu_secs()).sum();
    let front_cpu_s = if with_front {
        intervals.last().map_or(0.0, |i| i.cpu_secs())
    } else {
        0.0
    };
    let clones = done.load(Ordering::Relaxed).max(1);
    let f = Figures {
        per_sec: clones as f64 / elapsed,
        cpu_ms_per_clone: cpu_s * 1000.0 / clones as f64,
        front_cpu_ms_per_clone: front_cpu_s * 1000.0 / clones as f64,
        memory_peak_mb: intervals
            .iter()
            .map(|i| i.memory_peak.map_or(f64::NAN, |b| b as f64 / 1e6))
            .sum(),
        pss_peak_mib: intervals
            .iter()
            .map(|i| i.pss_peak_kib as f64 / 1024.0)
            .sum(),
        rss_sum_peak_mib: intervals
            .iter()
            .map(|i| i.rss_peak_kib as f64 / 1024.0)
            .sum(),
        failed: failed.load(Ordering::Relaxed),
    };
    if f.failed > 0 {
        log(&format!(
            "{} clones failed (logs in {})",
            f.failed,
            dir.display()
        ));
    }
    f
}
