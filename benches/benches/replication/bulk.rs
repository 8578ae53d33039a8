//! Phase 3, **bulk** (issue 30 §4): a new seed that follows many repositories fetches them from
//! one peer. `SEEDD_BENCH_BULK_REPOS` (default 2,000) generated repositories
//! (`seedd_benches::generate`, one pack each, a delegate namespace with signed refs) are the
//! storage of a source radicle-node; a fresh fetcher is started and the source dials it; the
//! fetcher fetches every one it lacks on the source's inventory announcement and its own sync.
//!
//! - seedd: `[policy] default = "allow"` (its defaults otherwise: fetch slots and queues from
//!   the host).
//! - radicle-node: the same repositories seeded explicitly before it starts (`rad seed <rids>
//!   --no-fetch --scope all`, what an operator following a set does; with only a default
//!   `allow` it fetches the inventory's first 128 + 1 and drops the rest — its fetch queue per
//!   peer — until it sees the inventory again), seeding policy allow/all.
//!
//! Measured per round (fresh source, fresh fetcher, ABBA): wall time from the `rad node connect`
//! until every repository's signed refs are in the fetcher's storage, at most [`BULK_MAX`]
//! (then the fetcher is stopped and what it holds counted: the rate is a rate over the window);
//! repositories per second; the fetcher's cgroup CPU (every process it started) until it is
//! idle again, per repository fetched; memory.peak and PSS.

use super::*;
use seedd_benches::generate::{generate, Spec};

/// Repositories of the set (`SEEDD_BENCH_BULK_REPOS` overrides).
const BULK_REPOS: usize = 2_000;
/// Longest window per fetcher and round.
const BULK_MAX: Duration = Duration::from_secs(240);
const BULK_SOURCE: &str = "bulksrc";
const BULK_FETCHER: &str = "bulkfetch";

/// The generated set: its storage and, per repository, its directory and the ref whose
/// presence means "fetched".
pub(super) struct BulkSet {
    _dir: tempfile::TempDir,
    storage: PathBuf,
    repos: Vec<(String, String)>,
    rids: Vec<String>,
}

pub(super) struct BulkRun {
    pub wall: f64,
    pub fetched: usize,
    pub complete: bool,
    pub cpu: f64,
    pub source_cpu: f64,
    pub memory_peak_mib: Option<f64>,
    pub pss_mib: f64,
    pub settled: bool,
}

impl BulkRun {
    pub fn rate(&self) -> f64 {
        self.fetched as f64 / self.wall.max(1e-9)
    }

    pub fn cpu_per_repo_ms(&self) -> f64 {
        if self.fetched == 0 {
            f64::NAN
        } else {
            self.cpu * 1e3 / self.fetched as f64
        }
    }
}

pub(super) fn repos() -> usize {
    env_usize("SEEDD_BENCH_BULK_REPOS", BULK_REPOS).max(1)
}

/// Generates the set into a temporary directory (a few seconds for 2,000).
pub(super) fn dataset(n: usize, log: &dyn Fn(&str)) -> BulkSet {
    let dir = tempfile::Builder::new()
        .prefix("bulk")
        .tempdir_in(bench_data_dir())
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let storage = dir.path().join("storage");
    let mut spec = Spec::new(n);
    spec.prefix = "bulk".into();
    let report = generate(&storage, &spec, &|_| {}).unwrap();
    log(&format!(
        "bulk: {n} repositories generated in {:.1} s ({:.1} MB)",
        report.elapsed.as_secs_f64(),
        report.bytes as f64 / 1e6
    ));
    let repos = report
        .repos
        .iter()
        .map(|g| {
            (
                g.rid.canonical(),
                format!("refs/namespaces/{}/refs/rad/sigrefs", g.delegate),
            )
        })
        .collect();
    let rids = report.repos.iter().map(|g| g.rid.to_string()).collect();
    BulkSet {
        _dir: dir,
        storage,
        repos,
        rids,
    }
}

/// A fresh home `dir/<name>` ([`seedd_tests::rad_auth`]), prepared before the node starts.
fn auth(dir: &Path, name: &str) -> PathBuf {
    let home = dir.join(name);
    seedd_tests::rad_auth(&home, name);
    home
}

/// A fresh source node whose storage is the set, with `seeding` as its policy (the set seeded
/// explicitly first when `explicit`), moved to the load cores.
fn start_source(
    set: &BulkSet,
    scoped: &Scoped,
    seeding: &Value,
    explicit: bool,
) -> Result<RadNode, String> {
    let dir = node_dir();
    let home = auth(dir.path(), BULK_SOURCE);
    let _ = std::fs::remove_dir_all(home.join("storage"));
    copy_tree(&set.storage, &home.join("storage"));
    if explicit {
        seed_explicitly(&home, &set.rids)?;
    }
    let source = scoped.radicle(dir, BULK_SOURCE, &[], seeding);
    repin_to_load(source.child.id());
    Ok(source)
}

/// Seeding policies for `rids` in the (stopped) node of `home`: `rad seed <rids> --no-fetch
/// --scope all`.
fn seed_explicitly(home: &Path, rids: &[String]) -> Result<(), String> {
    let mut args = vec!["seed".to_owned()];
    args.extend(rids.iter().cloned());
    args.extend(["--no-fetch", "--scope", "all"].map(String::from));
    let out = Command::new(radicle_bin("rad"))
        .args(&args)
        .env("RAD_HOME", home)
        .env("RAD_PASSPHRASE", "")
        .env_remove("RAD_SOCKET")
        .output()
        .map_err(|e| format!("rad seed: {e}"))?;
    if !out.status.success() {
        return Err(format!("rad seed: {}", tail(&text(&out), 10)));
    }
    Ok(())
}

/// One round of `target` fetching the whole set from a fresh source.
pub(super) fn once(set: &BulkSet, target: Target, seedd_bin: &Path) -> Result<BulkRun, String> {
    let source_scope = Scoped::new("bulk-source");
    let source = start_source(set, &source_scope, &allow_all(), false)?;
    let scoped = Scoped::new(&format!("bulk-fetch-{}", target.label()));
    match target {
        Target::Seedd => {
            let seed = scoped.seedd(seedd_bin, None);
            let storage = seed.storage();
            let pid = seed.child.id();
            measure_bulk(
                set,
                &source,
                &source_scope.scope,
                &seed.p2p_peer(),
                &scoped.scope,
                pid,
                &storage,
            )
            .map_err(|e| format!("{e}\nseedd log (tail):\n{}", tail(&seed.logs(), 30)))
        }
        Target::Radicle => {
            let dir = node_dir();
            let home = auth(dir.path(), BULK_FETCHER);
            seed_explicitly(&home, &set.rids)?;
            let mut fetcher = scoped.radicle(dir, BULK_FETCHER, &[], &allow_all());
            let storage = fetcher.home.join("storage");
            let pid = fetcher.child.id();
            let r = measure_bulk(
                set,
                &source,
                &source_scope.scope,
                &fetcher.peer(),
                &scoped.scope,
                pid,
                &storage,
            )
            .map_err(|e| {
                format!(
                    "{e}\nradicle-node log (tail):\n{}",
                    tail(&fetcher.logs(), 30)
                )
            });
            stop_node(&mut fetcher);
            r
        }
    }
}

/// How many of the set `storage` holds (signed refs present).
fn held(set: &BulkSet, storage: &Path, pending: &mut Vec<usize>) -> usize {
    pending.retain(|&i| {
        let (dir, sigrefs) = &set.repos[i];
        read_ref(&storage.join(dir), sigrefs).is_none()
    });
    set.repos.len() - pending.len()
}

fn measure_bulk(
    set: &BulkSet,
    source: &RadNode,
    source_scope: &Scope,
    fetcher_peer: &str,
    scope: &Arc<Scope>,
    pid: u32,
    storage: &Path,
) -> Result<BulkRun, String> {
    let scratch = tempfile::tempdir().unwrap();
    std::thread::sleep(FETCH_QUIET);
    measure::wait_idle(scope, IDLE_MAX);
    measure::wait_idle(source_scope, IDLE_MAX);
    let s0 = source_scope.cpu_usec();
    let (r, iv) = measure::measure(scope, || {
        let t0 = Instant::now();
        let out = source.rad_in(
            scratch.path(),
            &["node", "connect", fetcher_peer, "--timeout", "30s"],
        );
        if !out.status.success() {
            return Err(format!("rad node connect failed: {}", text(&out)));
        }
        let mut pending: Vec<usize> = (0..set.repos.len()).collect();
        loop {
            if held(set, storage, &mut pending) == set.repos.len() {
                break;
            }
            if t0.elapsed() > BULK_MAX || !alive(pid) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let wall = t0.elapsed().as_secs_f64();
        if !alive(pid) {
            return Err("the fetcher exited".into());
        }
        let complete = pending.is_empty();
        let settled = if complete {
            measure::wait_idle(scope, IDLE_MAX)
        } else {
            // The window is over: stop the fetcher so that its CPU and what it holds are
            // counted over the same work.
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
            wait_until(Duration::from_secs(20), || !alive(pid))
        };
        Ok((wall, complete, settled, pending))
    });
    let (wall, complete, settled, mut pending) = r?;
    let s1 = source_scope.cpu_usec();
    let fetched = held(set, storage, &mut pending);
    Ok(BulkRun {
        wall,
        fetched,
        complete,
        cpu: iv.cpu_secs(),
        source_cpu: s1.saturating_sub(s0) as f64 / 1e6,
        memory_peak_mib: iv.memory_peak.map(|b| b as f64 / 1048576.0),
        pss_mib: iv.pss_peak_kib as f64 / 1024.0,
        settled,
    })
}

/// The phase: `rounds` rounds per target (ABBA); its rows, its targets and its rounds as JSON.
pub(super) fn phase(
    seedd_bin: &Path,
    rounds: usize,
    log: &dyn Fn(&str),
    notes: &mut Vec<String>,
) -> (Vec<Row>, Vec<Value>, Value) {
    let n = repos();
    if n != BULK_REPOS {
        measure::record_override(&format!(
            "replication bulk: SEEDD_BENCH_BULK_REPOS = {n} (default {BULK_REPOS})"
        ));
    }
    measure::record_config_diff(
        "radicle-node bulk fetcher: the set seeded explicitly before start (rad seed <rids> \
         --no-fetch --scope all)",
    );
    let set = dataset(n, log);
    let mut runs: [Vec<BulkRun>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        for ti in measure::abba(round, 2) {
            let t = Target::ALL[ti];
            log(&format!(
                "bulk round {}/{rounds}: {} fetches {n} repositories",
                round + 1,
                t.label()
            ));
            match once(&set, t, seedd_bin) {
                Ok(r) => {
                    log(&format!(
                        "  {}: {}/{n} in {:.1} s{} = {:.1} repositories/s, CPU {:.2} s ({:.1} ms \
                         per repository; source {:.2} s), memory.peak {} MiB, PSS {:.0} MiB",
                        t.label(),
                        r.fetched,
                        r.wall,
                        if r.complete { "" } else { " (window cap)" },
                        r.rate(),
                        r.cpu,
                        r.cpu_per_repo_ms(),
                        r.source_cpu,
                        fmt(r.memory_peak_mib),
                        r.pss_mib
                    ));
                    if !r.complete {
                        notes.push(format!(
                            "bulk round {} {}: {}/{n} repositories after the {BULK_MAX:?} window \
                             (stopped there; the rate is over the window)",
                            round + 1,
                            t.label(),
                            r.fetched
                        ));
                    }
                    if !r.settled {
                        notes.push(format!(
                            "bulk round {} {}: not idle at the end; its CPU is a lower bound",
                            round + 1,
                            t.label()
                        ));
                    }
                    runs[ti].push(r);
                }
                Err(e) => {
                    log(&format!("  {} FAILED: {e}", t.label()));
                    notes.push(format!("bulk round {} {}: {e}", round + 1, t.label()));
                }
            }
        }
    }
    let w = format!("bulk: {n} new repositories from one peer");
    let v = |f: &dyn Fn(&BulkRun) -> f64| -> [Vec<f64>; 2] {
        [
            runs[0].iter().map(f).collect(),
            runs[1].iter().map(f).collect(),
        ]
    };
    let rows = vec![
        Row::new(
            "bulk_repos_per_s",
            &w,
            "repositories per second",
            "1/s",
            v(&BulkRun::rate),
            "higher",
        ),
        Row::new(
            "bulk_cpu_per_repo_ms",
            &w,
            "fetcher CPU per repository (cgroup)",
            "ms",
            v(&BulkRun::cpu_per_repo_ms),
            "lower",
        ),
        Row::new(
            "bulk_fetched",
            &w,
            "repositories fetched in the window",
            "count",
            v(&|r| r.fetched as f64),
            "higher",
        ),
        Row::new("bulk_wall_s", &w, "window", "s", v(&|r| r.wall), ""),
        Row::new(
            "bulk_source_cpu_s",
            &w,
            "source node CPU (cgroup)",
            "s",
            v(&|r| r.source_cpu),
            "",
        ),
        Row::new(
            "bulk_memory_peak_mib",
            &w,
            "fetcher memory.peak (cgroup)",
            "MiB",
            v(&|r| r.memory_peak_mib.unwrap_or(f64::NAN)),
            "lower",
        ),
        Row::new(
            "bulk_pss_peak_mib",
            &w,
            "fetcher PSS peak",
            "MiB",
            v(&|r| r.pss_mib),
            "lower",
        ),
    ];
    let rate = rows[0].ratio();
    let cpu = rows[1].ratio();
    let targets = vec![
        json!({
            "target": format!("bulk: {n} new repositories from one peer, repositories/s vs radicle-node"),
            "goal": "≥ 3×",
            "value": rate,
            "met": rate.is_some_and(|r| r >= 3.0),
        }),
        json!({
            "target": format!("bulk: {n} new repositories from one peer, fetcher CPU per repository vs radicle-node"),
            "goal": "≤ 1.0×",
            "value": cpu,
            "met": cpu.is_some_and(|r| r <= 1.0),
        }),
    ];
    let run_json = |r: &BulkRun| {
        json!({
            "wall_s": r.wall,
            "fetched": r.fetched,
            "complete": r.complete,
            "cpu_s": r.cpu,
            "source_cpu_s": r.source_cpu,
            "memory_peak_mib": r.memory_peak_mib,
            "pss_peak_mib": r.pss_mib,
            "idle_at_end": r.settled,
        })
    };
    let json = json!({
        "repos": n,
        "window_max_s": BULK_MAX.as_secs(),
        "seedd": runs[0].iter().map(run_json).collect::<Vec<_>>(),
        "radicle_node": runs[1].iter().map(run_json).collect::<Vec<_>>(),
    });
    (rows, targets, json)
}

// ------------------------------------------------------------------------------------------
// Phase "held": the same bulk into seeds that already hold 1k and 100k repositories
// ------------------------------------------------------------------------------------------

/// Sizes of what the seed holds before the bulk (`SEEDD_BENCH_BULK_HELD`, comma-separated).
const HELD_SIZES: [usize; 2] = [1_000, 100_000];
/// Longest wait for a seed on a big data dir to become ready (the first start indexes it).
const HELD_READY_MAX: Duration = Duration::from_secs(1800);
/// Bump when the held datasets change.
const HELD_VERSION: &str = "bulk-held-v1";

pub(super) struct HeldRun {
    pub held: usize,
    pub bulk: BulkRun,
    pub ready_s: f64,
}

fn held_sizes() -> Vec<usize> {
    std::env::var("SEEDD_BENCH_BULK_HELD")
        .ok()
        .map(|v| {
            v.split(',')
                .filter_map(|x| x.trim().parse::<usize>().ok())
                .filter(|n| *n > 0)
                .collect::<Vec<_>>()
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| HELD_SIZES.to_vec())
}

/// The data dir of a seed holding `n` generated repositories (prefix `held`, cached in the
/// bench data directory; generated once, indexed by seedd's first start), without any of the
/// bulk set.
fn held_data(n: usize, set: &BulkSet, log: &dyn Fn(&str)) -> PathBuf {
    let dir = bench_data_dir().join(HELD_VERSION).join(format!("n{n}"));
    let data = dir.join("data");
    let storage = data.join("storage");
    let marker = dir.join("generated");
    if !marker.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&data).unwrap();
        log(&format!(
            "held: generating {n} repositories in {}",
            dir.display()
        ));
        let mut spec = Spec::new(n);
        spec.prefix = "held".into();
        let report = generate(&storage, &spec, &|_| {}).unwrap();
        log(&format!(
            "  {n} repositories in {:.1} s",
            report.elapsed.as_secs_f64()
        ));
        std::fs::write(&marker, n.to_string()).unwrap();
    }
    for (repo, _) in &set.repos {
        let _ = std::fs::remove_dir_all(storage.join(repo));
    }
    data
}

/// One round: seedd on the data dir holding `n` (started, ready, idle), then the bulk.
fn held_once(
    set: &BulkSet,
    n: usize,
    seedd_bin: &Path,
    log: &dyn Fn(&str),
) -> Result<HeldRun, String> {
    let data = held_data(n, set, log);
    let source_scope = Scoped::new("bulk-source");
    // The source seeds (and announces) the set only: with a default `allow` it would fetch
    // the held seed's inventory back.
    let source = start_source(set, &source_scope, &json!({ "default": "block" }), true)?;
    let started = Instant::now();
    let seedd_benches::SpawnedSeedd {
        mut child,
        scope,
        admin,
        p2p,
        ..
    } = seedd_benches::spawn_seedd(
        seedd_bin,
        &data,
        "bulk-held",
        "",
        &data.join("seedd-bulk.log"),
    );
    let pid = child.id();
    let stop = |child: &mut std::process::Child| stop_child(child, Duration::from_secs(60));
    let ready_url = format!("http://127.0.0.1:{admin}/readyz");
    let mut last_log = Instant::now();
    loop {
        if matches!(seedd_tests::http_get(&ready_url, &[]), Ok((200, _))) {
            break;
        }
        if !alive(pid) || started.elapsed() > HELD_READY_MAX {
            stop(&mut child);
            return Err(format!(
                "seedd on {} did not become ready; see seedd-bulk.log there",
                data.display()
            ));
        }
        if last_log.elapsed() > Duration::from_secs(30) {
            log(&format!("  waiting for ready ({:?})", started.elapsed()));
            last_log = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let ready_s = started.elapsed().as_secs_f64();
    let status_url = format!("http://127.0.0.1:{admin}/api/v1/status");
    let token = std::fs::read_to_string(data.join("admin-token")).unwrap_or_default();
    let auth = format!("Bearer {}", token.trim());
    let peer = seedd_tests::http_get(&status_url, &[("Authorization", &auth)])
        .ok()
        .and_then(|(_, body)| serde_json::from_str::<Value>(&body).ok())
        .and_then(|v| {
            v["nid"]
                .as_str()
                .map(|nid| format!("{nid}@127.0.0.1:{p2p}"))
        });
    let Some(peer) = peer else {
        stop(&mut child);
        return Err("seedd's /api/v1/status names no nid".into());
    };
    let r = measure_bulk(
        set,
        &source,
        &source_scope.scope,
        &peer,
        &scope,
        pid,
        &data.join("storage"),
    );
    stop(&mut child);
    for (repo, _) in &set.repos {
        let _ = std::fs::remove_dir_all(data.join("storage").join(repo));
    }
    Ok(HeldRun {
        held: n,
        bulk: r?,
        ready_s,
    })
}

/// The phase: for each size, `rounds` rounds; rows (seedd at the largest size in the first
/// column, at the smallest in the second; ratio = largest / smallest), its target, its sizes
/// and rounds as JSON.
pub(super) fn held_phase(
    seedd_bin: &Path,
    rounds: usize,
    log: &dyn Fn(&str),
    notes: &mut Vec<String>,
) -> (Vec<Row>, Vec<Value>, Value) {
    let n = repos();
    let sizes = held_sizes();
    if sizes != HELD_SIZES {
        measure::record_override(&format!(
            "replication held: SEEDD_BENCH_BULK_HELD = {sizes:?} (default {HELD_SIZES:?})"
        ));
    }
    let set = dataset(n, log);
    let mut runs: Vec<Vec<HeldRun>> = sizes.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for (si, &size) in sizes.iter().enumerate() {
            log(&format!(
                "held round {}/{rounds}: seedd holding {size} fetches {n} new repositories",
                round + 1
            ));
            match held_once(&set, size, seedd_bin, log) {
                Ok(r) => {
                    log(&format!(
                        "  holding {size}: ready in {:.1} s; {}/{n} in {:.1} s = {:.1} repositories/s, CPU {:.2} s ({:.1} ms per repository), memory.peak {} MiB, PSS {:.0} MiB",
                        r.ready_s,
                        r.bulk.fetched,
                        r.bulk.wall,
                        r.bulk.rate(),
                        r.bulk.cpu,
                        r.bulk.cpu_per_repo_ms(),
                        fmt(r.bulk.memory_peak_mib),
                        r.bulk.pss_mib
                    ));
                    if !r.bulk.complete || !r.bulk.settled {
                        notes.push(format!(
                            "held round {} at {size}: {}/{n} fetched{}",
                            round + 1,
                            r.bulk.fetched,
                            if r.bulk.settled {
                                ""
                            } else {
                                ", not idle at the end"
                            }
                        ));
                    }
                    runs[si].push(r);
                }
                Err(e) => {
                    log(&format!("  holding {size} FAILED: {e}"));
                    notes.push(format!("held round {} at {size}: {e}", round + 1));
                }
            }
        }
    }
    let (lo, hi) = (0, sizes.len() - 1);
    let w = format!("held: {n} new repositories");
    let v = |i: usize, f: &dyn Fn(&HeldRun) -> f64| -> Vec<f64> { runs[i].iter().map(f).collect() };
    let pair = |f: &dyn Fn(&HeldRun) -> f64| [v(hi, f), v(lo, f)];
    let rows = vec![
        Row::new(
            "held_cpu_per_repo_ms",
            &w,
            "seedd CPU per new repository (cgroup)",
            "ms",
            pair(&|r| r.bulk.cpu_per_repo_ms()),
            "lower",
        ),
        Row::new(
            "held_repos_per_s",
            &w,
            "repositories per second",
            "1/s",
            pair(&|r| r.bulk.rate()),
            "higher",
        ),
        Row::new(
            "held_ready_s",
            &w,
            "start to ready",
            "s",
            pair(&|r| r.ready_s),
            "",
        ),
        Row::new(
            "held_memory_peak_mib",
            &w,
            "memory.peak over the bulk (cgroup)",
            "MiB",
            pair(&|r| r.bulk.memory_peak_mib.unwrap_or(f64::NAN)),
            "",
        ),
        Row::new(
            "held_pss_peak_mib",
            &w,
            "PSS peak over the bulk",
            "MiB",
            pair(&|r| r.bulk.pss_mib),
            "",
        ),
    ];
    let cpu = rows[0].ratio();
    let targets = vec![json!({
        "target": format!("held: CPU per new repository, {n} new into a seed holding {} vs holding {}", sizes[hi], sizes[lo]),
        "goal": "≤ 1.2×",
        "value": cpu,
        "met": cpu.is_some_and(|r| r <= 1.2),
    })];
    let run_json = |r: &HeldRun| {
        json!({
            "held": r.held,
            "ready_s": r.ready_s,
            "wall_s": r.bulk.wall,
            "fetched": r.bulk.fetched,
            "complete": r.bulk.complete,
            "cpu_s": r.bulk.cpu,
            "memory_peak_mib": r.bulk.memory_peak_mib,
            "pss_peak_mib": r.bulk.pss_mib,
            "idle_at_end": r.bulk.settled,
        })
    };
    let json = json!({
        "repos": n,
        "sizes": sizes,
        "rounds": runs.iter().flatten().map(run_json).collect::<Vec<_>>(),
    });
    (rows, targets, json)
}
