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

/// `rad auth` for a fresh home `dir/<name>` (the key derived from the name, as the test
/// harness does), so the home can be prepared before the node starts.
fn auth(dir: &Path, name: &str) -> PathBuf {
    let home = dir.join(name);
    let seed_hex: String = name
        .bytes()
        .cycle()
        .take(32)
        .map(|b| format!("{b:02x}"))
        .collect();
    run(Command::new(radicle_bin("rad"))
        .args(["auth", "--alias", name])
        .env("RAD_HOME", &home)
        .env("RAD_PASSPHRASE", "")
        .env("RAD_KEYGEN_SEED", seed_hex)
        .env_remove("RAD_SOCKET"));
    home
}

/// One round of `target` fetching the whole set from a fresh source.
pub(super) fn once(set: &BulkSet, target: Target, seedd_bin: &Path) -> Result<BulkRun, String> {
    let source_scope = Scoped::new("bulk-source");
    let dir = node_dir();
    let home = auth(dir.path(), BULK_SOURCE);
    let _ = std::fs::remove_dir_all(home.join("storage"));
    copy_tree(&set.storage, &home.join("storage"));
    let source = source_scope.radicle(dir, BULK_SOURCE, &[], &allow_all());
    repin_to_load(source.child.id());
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
            let mut args = vec!["seed".to_owned()];
            args.extend(set.rids.iter().cloned());
            args.extend(["--no-fetch", "--scope", "all"].map(String::from));
            let out = Command::new(radicle_bin("rad"))
                .args(&args)
                .env("RAD_HOME", &home)
                .env("RAD_PASSPHRASE", "")
                .env_remove("RAD_SOCKET")
                .output()
                .map_err(|e| format!("rad seed: {e}"))?;
            if !out.status.success() {
                return Err(format!("rad seed: {}", tail(&text(&out), 10)));
            }
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
