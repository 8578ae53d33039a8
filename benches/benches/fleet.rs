//! Fleet bench (issue 28): clone throughput and CPU per clone through `seedd front` for 1, 2
//! and 4 replicas of one shard, and one seed without the front (the anchor: what the front and
//! the replicas add or save). Every server process (the front and each replica, with their
//! reaped git children) is measured by its /proc CPU ticks; clients are `git clone --bare`
//! processes, `SEEDD_FLEET_CLIENTS` at once, for `SEEDD_FLEET_SECS` per configuration, over
//! `SEEDD_FLEET_REPOS` repositories round-robin, `SEEDD_FLEET_ROUNDS` rounds (median, min–max).
//!
//! What it can and cannot show on a small box: every replica competes for the same cores, so
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

use seedd_benches::{
    ensure_seedd, env_usize, fmt_figure, procfs, profile_dir, spawn_seedd, write_table,
    SpawnedSeedd, TableLine,
};
use seedd_tests::{copy_tree, git, run, synthetic_repo};

const DATA_VERSION: &str = "fleet-v1";

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    let prov = seedd_benches::measure::provenance("fleet");
    let profile = profile_dir();
    let log = |s: &str| eprintln!("fleet: {s}");
    let bin = ensure_seedd(&log, &profile);
    let repos = env_usize("SEEDD_FLEET_REPOS", 8);
    let clients = env_usize("SEEDD_FLEET_CLIENTS", 8);
    let secs = env_usize("SEEDD_FLEET_SECS", 15) as u64;
    let rounds = env_usize("SEEDD_FLEET_ROUNDS", 5);
    let storage = dataset(&profile, repos, &log);
    let rids: Vec<String> = std::fs::read_to_string(storage.join("../manifest.txt"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let work = tempfile::tempdir().unwrap();
    log(&format!(
        "{} repositories, {clients} clients, {secs} s × {rounds} rounds per configuration; seedd {}; load {}",
        rids.len(),
        bin.display(),
        procfs::loadavg()
    ));

    // (label, replicas, through the front)
    let configs: [(&str, usize, bool); 4] = [
        ("1 seed, no front", 1, false),
        ("front + 1 replica", 1, true),
        ("front + 2 replicas", 2, true),
        ("front + 4 replicas", 4, true),
    ];
    let mut results: Vec<(String, Vec<Figures>)> = Vec::new();
    for (label, n, front) in configs {
        let mut figs = Vec::new();
        for round in 0..rounds {
            let dir = work.path().join(format!("{n}-{front}-{round}"));
            let f = measure(&bin, &storage, &rids, n, front, clients, secs, &dir, &log);
            log(&format!(
                "{label} round {round}: {:.1} clones/s, {:.1} ms CPU per clone, {} failed",
                f.per_sec, f.cpu_ms_per_clone, f.failed
            ));
            figs.push(f);
            let _ = std::fs::remove_dir_all(&dir);
        }
        results.push((label.to_owned(), figs));
    }

    let anchor = &results[0].1;
    let med = |v: &[Figures], f: fn(&Figures) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(f64::total_cmp);
        (x[x.len() / 2], x[0], x[x.len() - 1])
    };
    let (a_rate, _, _) = med(anchor, |f| f.per_sec);
    let (a_cpu, _, _) = med(anchor, |f| f.cpu_ms_per_clone);
    let mut rows: Vec<(String, String, String, String, String, &str, &str)> = Vec::new();
    for (label, figs) in &results {
        let (rate, rmin, rmax) = med(figs, |f| f.per_sec);
        let (cpu, cmin, cmax) = med(figs, |f| f.cpu_ms_per_clone);
        let failed: usize = figs.iter().map(|f| f.failed).sum();
        rows.push((
            label.clone(),
            "clones/s".into(),
            format!(
                "{} [{}–{}]",
                fmt_figure(Some(rate), false),
                fmt_figure(Some(rmin), false),
                fmt_figure(Some(rmax), false)
            ),
            fmt_figure(Some(a_rate), false),
            format!("{:.2}", rate / a_rate),
            "/s",
            "higher",
        ));
        rows.push((
            label.clone(),
            "CPU per clone".into(),
            format!(
                "{} [{}–{}]",
                fmt_figure(Some(cpu), false),
                fmt_figure(Some(cmin), false),
                fmt_figure(Some(cmax), false)
            ),
            fmt_figure(Some(a_cpu), false),
            format!("{:.2}", cpu / a_cpu),
            "ms",
            "lower",
        ));
        rows.push((
            label.clone(),
            "failed clones".into(),
            failed.to_string(),
            "0".into(),
            "-".into(),
            "",
            "lower",
        ));
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "fleet: clones through seedd front, medians of {rounds} rounds [min–max]; anchor: one seed without the front; load {}",
        procfs::loadavg()
    );
    write_table(
        &mut t,
        ["config", "metric", "fleet", "anchor", "ratio", "unit"],
        [20, 14, 22, 10, 6, 4],
        90,
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
    let json = seedd_benches::measure::write_result(
        "fleet",
        prov,
        serde_json::json!({
            "rounds": rounds,
            "rows": rows.iter().map(|r| serde_json::json!({
                "config": r.0, "metric": r.1, "fleet": r.2, "anchor": r.3, "ratio": r.4, "unit": r.5,
            })).collect::<Vec<_>>(),
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
    front: Option<(Child, u16)>,
}

impl Drop for Servers {
    fn drop(&mut self) {
        for s in &mut self.seeds {
            let _ = s.child.kill();
            let _ = s.child.wait();
        }
        if let Some((c, _)) = &mut self.front {
            let _ = c.kill();
            let _ = c.wait();
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

#[allow(clippy::too_many_arguments)]
fn measure(
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
        let child = Command::new(bin)
            .args(["front", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{aport}")])
            .arg("--placement")
            .arg(&placement)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("front.log")).unwrap())
            .spawn()
            .unwrap();
        servers.front = Some((child, port));
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
    let pids: Vec<u32> = servers
        .seeds
        .iter()
        .map(|s| s.child.id())
        .chain(servers.front.as_ref().map(|(c, _)| c.id()))
        .collect();
    let ticks = |pids: &[u32]| -> u64 { pids.iter().map(|&p| procfs::cpu_ticks(p)).sum() };
    let before = ticks(&pids);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
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
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_s = (ticks(&pids) - before) as f64 / procfs::clk_tck();
    let clones = done.load(Ordering::Relaxed).max(1);
    let f = Figures {
        per_sec: clones as f64 / elapsed,
        cpu_ms_per_clone: cpu_s * 1000.0 / clones as f64,
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
