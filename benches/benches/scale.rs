//! Scale in repositories: seedd and the official radicle-node on the same storage of N
//! generated repositories (`seedd_benches::generate`), N = 1k and 10k by default
//! (`SEEDD_BENCH_SCALE=1000,10000,100000` for more). Prints a table (seedd, radicle-node,
//! ratio = seedd / radicle-node) and writes the figures as JSON to
//! `<target>/seedd-bench-scale.json`. See `benches/README.md`.
//!
//! For each N, on one cached storage (`~/.cache/seedd/bench-data/scale-v1/n<N>/storage`,
//! generated once; `SEEDD_BENCH_DATA` moves it):
//!
//! 1. seedd with no index (`<data>/index` removed): time from spawn until `/readyz` answers
//!    200 (every repository read and its signed refs verified), RSS 5 s later;
//! 2. HTTP latency: `GET /<rid>.git/info/refs?service=git-upload-pack` for random RIDs, and
//!    admin `GET /api/v1/status` (p50, p99; one request at a time);
//! 3. seedd restarted with that index: time to ready, RSS 5 s later, and the latencies of step 2
//!    again (a running seed's; step 2's follow a rebuild);
//! 4. radicle-node (a fresh `rad auth` home whose `storage` is the same directory, seeding
//!    policy allow/all, no peers): time from spawn until its control socket answers
//!    `rad node status`, with a fresh node database and then restarted, RSS 5 s later;
//! 5. CPU per replicated push: a real radicle-node ("pusher", connected only to the server
//!    measured) `rad init`s a small project, which the server fetches into the N-repository
//!    storage; then `SEEDD_BENCH_SCALE_PUSHES` (7) times a commit and `git push rad main`. For
//!    each push the server's CPU (its threads' `schedstat` run time, ns; with its reaped
//!    children's utime+stime added for the second figure) from
//!    before the push until the pushed ref is in the server's storage (seedd: and the fetch is
//!    counted, i.e. re-index and after-fetch steps done); medians. Measured on the seedd of
//!    step 3 and on a third radicle-node run; the pushed repository is removed afterwards.
//! 6. Gossip CPU: `SEEDD_BENCH_SCALE_GOSSIP_PEERS` (50) synthetic peers
//!    (`seedd_benches::peers`, the p2p bench's load generator) connect and settle; then for
//!    `SEEDD_BENCH_SCALE_GOSSIP_SECS` (20) s each sends every second a fresh signed
//!    InventoryAnnouncement of 50 repositories drawn at random from the N and a
//!    RefsAnnouncement (`RefsAt` = the server's own namespace). The server's CPU
//!    (utime+stime, children included) from the first send until it has settled, per second
//!    of gossip and per announcement; RSS then. Measured on the seedd of step 3 (before the
//!    pushes) and on a radicle-node run with the node database of step 4 (`relay: always`
//!    like seedd's).
//!
//! `SEEDD_BENCH_SCALE_ONLY=gossip` (comma-separated among `ready`, `push`, `gossip`) runs only
//! those phases.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use seedd_benches::generate::{generate, Spec};
use seedd_benches::peers::{gossip_rounds, ramp, wait_settled, Shared};
use seedd_benches::procfs::{alive, clk_tck, cpu_ticks, loadavg, own_ticks, settle, status_kib};
use seedd_benches::{ensure_seedd, fmt, profile_dir, radicle_version, write_table, TableLine};
use seedd_proto::crypto::{Keypair, NodeId, RepoId};
use seedd_tests::{free_port, http_get, radicle_bin, RadNode, RadNodeOptions};
use serde_json::{json, Value};

/// Bump when the generated repositories change, so cached ones are regenerated.
const DATA_VERSION: &str = "scale-v1";
/// Repository counts measured (`SEEDD_BENCH_SCALE`, comma-separated).
const SIZES: [usize; 2] = [1_000, 10_000];
/// Requests per latency figure (`SEEDD_BENCH_SCALE_REQUESTS`).
const REQUESTS: usize = 300;
/// Idle time after ready before RSS is read (both servers).
const SETTLE: Duration = Duration::from_secs(5);
/// Replicated pushes per server (`SEEDD_BENCH_SCALE_PUSHES`).
const PUSHES: usize = 7;
/// Longest wait for one push to reach the server's storage.
const PUSH_MAX: Duration = Duration::from_secs(120);
/// Longest wait for a process to become ready.
const READY_MAX: Duration = Duration::from_secs(1800);
/// Synthetic peers gossiping at the server (`SEEDD_BENCH_SCALE_GOSSIP_PEERS`).
const GOSSIP_PEERS: usize = 50;
/// Seconds of gossip, one round per second (`SEEDD_BENCH_SCALE_GOSSIP_SECS`).
const GOSSIP_SECS: usize = 20;
/// Repositories per InventoryAnnouncement, drawn at random from the N held
/// (`SEEDD_BENCH_SCALE_GOSSIP_RIDS`).
const GOSSIP_RIDS: usize = 50;
/// Longest wait for the server to work the gossip off after the last send, seconds
/// (`SEEDD_BENCH_SCALE_GOSSIP_DRAIN_MAX`); a server still busy then is "saturated".
const GOSSIP_DRAIN_MAX: usize = 120;
/// Longest wait for the server to settle after the sessions connected.
const GOSSIP_SETTLE_MAX: Duration = Duration::from_secs(300);

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    seedd_benches::measure::provenance("scale");
    let started = Instant::now();
    let log = move |msg: &str| eprintln!("[{:7.1}s] {msg}", started.elapsed().as_secs_f64());
    let profile = profile_dir();
    let target = profile.parent().unwrap().to_owned();
    let seedd_bin = ensure_seedd(&log, &profile);
    let sizes: Vec<usize> = std::env::var("SEEDD_BENCH_SCALE")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| SIZES.to_vec());
    let requests = seedd_benches::env_usize("SEEDD_BENCH_SCALE_REQUESTS", REQUESTS).max(1);
    let pushes = seedd_benches::env_usize("SEEDD_BENCH_SCALE_PUSHES", PUSHES);
    // `SEEDD_BENCH_SCALE_ONLY=gossip` (comma-separated: ready, push, gossip) runs only those
    // phases; "ready" holds the index-lost start, the latency rows and radicle-node's starts.
    let only = std::env::var("SEEDD_BENCH_SCALE_ONLY").unwrap_or_default();
    let want = |phase: &str| only.is_empty() || only.split(',').any(|p| p.trim() == phase);
    let gossip_cfg = GossipConfig {
        peers: seedd_benches::env_usize("SEEDD_BENCH_SCALE_GOSSIP_PEERS", GOSSIP_PEERS).max(1),
        secs: seedd_benches::env_usize("SEEDD_BENCH_SCALE_GOSSIP_SECS", GOSSIP_SECS).max(1) as u64,
        rids: seedd_benches::env_usize("SEEDD_BENCH_SCALE_GOSSIP_RIDS", GOSSIP_RIDS).max(1),
        drain_max: Duration::from_secs(seedd_benches::env_usize(
            "SEEDD_BENCH_SCALE_GOSSIP_DRAIN_MAX",
            GOSSIP_DRAIN_MAX,
        ) as u64),
    };
    let gossip_label: &'static str =
        Box::leak(format!("gossip CPU, {} peers", gossip_cfg.peers).into_boxed_str());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let load_before = loadavg();
    let mut results: Vec<Value> = Vec::new();
    let mut lines: Vec<Row> = Vec::new();
    let mut notes: Vec<String> = Vec::new();

    for &n in &sizes {
        let dir = bench_data_dir().join(DATA_VERSION).join(format!("n{n}"));
        let gen_rate = dataset(&dir, n, &log);
        let storage = dir.join("storage");
        let rids: Vec<String> = std::fs::read_dir(&storage)
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| n.starts_with('z'))
            .collect();
        assert_eq!(
            rids.len(),
            n,
            "{}: {} repositories",
            storage.display(),
            rids.len()
        );
        let group = format!("{n} repos");
        let rid_ids: Vec<RepoId> = rids.iter().filter_map(|r| r.parse().ok()).collect();

        // seedd: index lost, then index present.
        let data = dir.join("seedd");
        std::fs::create_dir_all(&data).unwrap();
        let cold_phase = want("ready").then(|| {
            let _ = std::fs::remove_dir_all(data.join("index"));
            log(&format!("{n}: seedd, no index"));
            let mut s = SeeddRun::start(&seedd_bin, &data, &storage, "seedd-index-lost.log");
            let cold = s.wait_ready(&log);
            std::thread::sleep(SETTLE);
            let cold_rss = mib(status_kib(s.pid(), "VmRSS"));
            log(&format!("  ready in {cold:?}, RSS {cold_rss:.0} MiB"));
            let valid = s.valid_repos();
            assert_eq!(
                valid, n,
                "seedd indexed {valid} of {n} repositories as valid"
            );
            let http = s.latency_info_refs(&rids, requests);
            let admin = s.latency_status(requests);
            log(&format!(
                "  info/refs p50 {:.2} ms p99 {:.2} ms; status p50 {:.2} ms p99 {:.2} ms",
                http.0, http.1, admin.0, admin.1
            ));
            let served_rss = mib(status_kib(s.pid(), "VmHWM"));
            s.stop();
            ColdFigures {
                cold: cold.as_secs_f64(),
                cold_rss,
                http,
                admin,
                served_rss,
            }
        });
        let c = |f: fn(&ColdFigures) -> f64| cold_phase.as_ref().map(f);
        log(&format!("{n}: seedd, restart with the index"));
        let mut s = SeeddRun::start(&seedd_bin, &data, &storage, "seedd-index-present.log");
        let warm = s.wait_ready(&log);
        std::thread::sleep(SETTLE);
        let warm_rss = mib(status_kib(s.pid(), "VmRSS"));
        log(&format!("  ready in {warm:?}, RSS {warm_rss:.0} MiB"));
        // The same requests once more on this seedd: restarted with its index and settled, as a
        // running seed is (the first figures come right after a rebuild, while RocksDB compacts
        // what the rebuild wrote and the kernel writes it back).
        let steady = want("ready").then(|| {
            let http = s.latency_info_refs(&rids, requests);
            let admin = s.latency_status(requests);
            log(&format!(
                "  restarted: info/refs p50 {:.2} ms p99 {:.2} ms; status p50 {:.2} ms p99 {:.2} ms",
                http.0, http.1, admin.0, admin.1
            ));
            (http, admin)
        });
        let seedd_gossip = if want("gossip") {
            log(&format!(
                "{n}: seedd, gossip from {} peers for {} s",
                gossip_cfg.peers, gossip_cfg.secs
            ));
            let peer = s.peer();
            let server = peer
                .split_once('@')
                .and_then(|(nid, addr)| Some((nid.parse().ok()?, addr.parse().ok()?)));
            let result = match server {
                Some((nid, addr)) => gossip_phase(
                    &rt,
                    nid,
                    addr,
                    s.pid(),
                    &rid_ids,
                    &gossip_cfg,
                    &|| Some(s.fetches_total()),
                    &log,
                ),
                None => Err(format!("seedd's address {peer:?} does not parse")),
            };
            result
                .map_err(|e| notes.push(format!("{n}: seedd gossip: {e}")))
                .ok()
        } else {
            None
        };
        if let Some(g) = &seedd_gossip {
            notes.extend(g.notes.iter().map(|x| format!("{n}: seedd gossip: {x}")));
        }
        let seedd_push = if want("push") {
            log(&format!("{n}: seedd, {pushes} replicated pushes"));
            let before = repo_dirs(&storage);
            let seedd_push = push_phase(
                &s.peer(),
                s.pid(),
                &storage,
                pushes,
                &|k| s.fetches_ok() >= k as f64,
                &log,
            );
            s.stop();
            remove_new_repos(&storage, &before);
            seedd_push
                .map_err(|e| notes.push(format!("{n}: seedd pushes: {e}")))
                .ok()
        } else {
            s.stop();
            None
        };

        // radicle-node: fresh node database, then restarted.
        let rad = if !want("ready") {
            None
        } else {
            match RadRun::home(&dir, &storage) {
                Ok(home) => {
                    log(&format!("{n}: radicle-node, fresh node database"));
                    let first = RadRun::measure(&home, &log);
                    log(&format!("{n}: radicle-node, restart"));
                    let second = RadRun::measure(&home, &log);
                    match (first, second) {
                        (Ok(a), Ok(b)) => Some((a, b)),
                        (Err(e), _) | (_, Err(e)) => {
                            notes.push(format!("{n}: radicle-node: {e}"));
                            None
                        }
                    }
                }
                Err(e) => {
                    notes.push(format!("{n}: radicle-node home: {e}"));
                    None
                }
            }
        };
        let r = |f: fn(&RadPair) -> f64| rad.as_ref().map(f);
        // Gossip on the node database the runs above left ("index present"), else a fresh one.
        let rad_gossip = if want("gossip") {
            let home = dir.join("rad-home");
            let home = if rad.is_some() && home.join("node").exists() {
                Ok(home)
            } else {
                RadRun::home(&dir, &storage)
            };
            log(&format!(
                "{n}: radicle-node, gossip from {} peers for {} s",
                gossip_cfg.peers, gossip_cfg.secs
            ));
            home.and_then(|home| RadRun::gossip(&home, &rt, &rid_ids, &gossip_cfg, &log))
                .map_err(|e| notes.push(format!("{n}: radicle-node gossip: {e}")))
                .ok()
        } else {
            None
        };
        if let Some(g) = &rad_gossip {
            notes.extend(
                g.notes
                    .iter()
                    .map(|x| format!("{n}: radicle-node gossip: {x}")),
            );
        }
        let rad_push = if !want("push") {
            None
        } else {
            match RadRun::home(&dir, &storage) {
                Ok(home) => {
                    log(&format!("{n}: radicle-node, {pushes} replicated pushes"));
                    RadRun::pushes(&home, &storage, pushes, &log)
                        .map_err(|e| notes.push(format!("{n}: radicle-node pushes: {e}")))
                        .ok()
                }
                Err(e) => {
                    notes.push(format!("{n}: radicle-node home: {e}"));
                    None
                }
            }
        };
        let sp = |f: fn(&PushFigures) -> f64| seedd_push.as_ref().map(f);
        let sg = |f: fn(&GossipFigures) -> Option<f64>| seedd_gossip.as_ref().and_then(f);
        let rg = |f: fn(&GossipFigures) -> Option<f64>| rad_gossip.as_ref().and_then(f);
        let rp = |f: fn(&PushFigures) -> f64| rad_push.as_ref().map(f);

        let rows: Vec<RowFigures> = vec![
            ("generator", Some(gen_rate), None, "repos/s", "higher"),
            (
                "ready, index lost",
                c(|x| x.cold),
                r(|x| x.0 .0),
                "s",
                "lower",
            ),
            (
                "ready, index present",
                Some(warm.as_secs_f64()),
                r(|x| x.1 .0),
                "s",
                "lower",
            ),
            (
                "RSS when ready, index lost",
                c(|x| x.cold_rss),
                r(|x| x.0 .1),
                "MiB",
                "lower",
            ),
            (
                "RSS when ready, index present",
                Some(warm_rss),
                r(|x| x.1 .1),
                "MiB",
                "lower",
            ),
            (
                "peak RSS after requests",
                c(|x| x.served_rss),
                None,
                "MiB",
                "lower",
            ),
            ("HTTP info/refs p50", c(|x| x.http.0), None, "ms", "lower"),
            ("HTTP info/refs p99", c(|x| x.http.1), None, "ms", "lower"),
            ("admin status p50", c(|x| x.admin.0), None, "ms", "lower"),
            ("admin status p99", c(|x| x.admin.1), None, "ms", "lower"),
            (
                "HTTP info/refs p50, restarted",
                steady.map(|x| x.0 .0),
                None,
                "ms",
                "lower",
            ),
            (
                "HTTP info/refs p99, restarted",
                steady.map(|x| x.0 .1),
                None,
                "ms",
                "lower",
            ),
            (
                "admin status p50, restarted",
                steady.map(|x| x.1 .0),
                None,
                "ms",
                "lower",
            ),
            (
                "admin status p99, restarted",
                steady.map(|x| x.1 .1),
                None,
                "ms",
                "lower",
            ),
            (
                "CPU per replicated push",
                sp(|p| p.cpu_ms),
                rp(|p| p.cpu_ms),
                "ms",
                "lower",
            ),
            (
                "CPU per push, with children",
                sp(|p| p.cpu_children_ms),
                rp(|p| p.cpu_children_ms),
                "ms",
                "lower",
            ),
            (
                "push replicated in",
                sp(|p| p.wall_ms),
                rp(|p| p.wall_ms),
                "ms",
                "lower",
            ),
            (
                gossip_label,
                sg(|g| Some(g.cpu_ms_per_s)),
                rg(|g| Some(g.cpu_ms_per_s)),
                "ms/s",
                "lower",
            ),
            (
                "  CPU per announcement in",
                sg(|g| Some(g.cpu_us_per_ann)),
                rg(|g| Some(g.cpu_us_per_ann)),
                "µs",
                "lower",
            ),
            (
                "  announcements in",
                sg(|g| Some(g.sent as f64)),
                rg(|g| Some(g.sent as f64)),
                "count",
                "",
            ),
            (
                "  drain after the last send",
                sg(|g| Some(g.drain_secs)),
                rg(|g| Some(g.drain_secs)),
                "s",
                "lower",
            ),
            (
                "  RSS after gossip",
                sg(|g| Some(g.rss_mib)),
                rg(|g| Some(g.rss_mib)),
                "MiB",
                "lower",
            ),
            (
                "  frames to the peers",
                sg(|g| Some(g.frames as f64)),
                rg(|g| Some(g.frames as f64)),
                "frames",
                "",
            ),
            (
                "  fetches started from peers",
                sg(|g| Some(g.fetch_attempts())),
                rg(|g| Some(g.fetch_attempts())),
                "count",
                "lower",
            ),
        ];
        for (metric, seedd, other, unit, better) in rows {
            results.push(json!({
                "repos": n, "metric": metric, "seedd": seedd, "radicle_node": other,
                "ratio": ratio(seedd, other), "unit": unit, "better": better,
            }));
            lines.push(Row {
                group: group.clone(),
                metric,
                seedd,
                other,
                unit,
                better,
            });
        }
    }

    let mut t = String::new();
    let _ = writeln!(
        t,
        "seedd vs radicle-node {} on the same generated storage (ratio = seedd / radicle-node)",
        radicle_version()
    );
    write_table(
        &mut t,
        ["repos", "metric", "seedd", "radicle-node", "ratio", "unit"],
        [12, 30, 10, 12, 7, 7],
        101,
        lines.iter().map(|l| TableLine {
            group: &l.group,
            metric: l.metric,
            seedd: fmt(l.seedd),
            other: fmt(l.other),
            ratio: fmt(ratio(l.seedd, l.other)),
            unit: l.unit,
            better: l.better,
        }),
    );
    for n in &notes {
        let _ = writeln!(t, "note: {n}");
    }
    let _ = writeln!(
        t,
        "load average before: {load_before}; after: {}",
        loadavg()
    );
    print!("{t}");
    let path = target.join("seedd-bench-scale.json");
    let doc = json!({ "results": results, "notes": notes, "radicle_node": radicle_version() });
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&seedd_benches::measure::stamped(&doc)).unwrap(),
    )
    .unwrap();
    log(&format!("wrote {}", path.display()));
}

/// radicle-node's (ready seconds, RSS MiB) with a fresh node database, then restarted.
type RadPair = ((f64, f64), (f64, f64));

/// (metric, seedd, radicle-node, unit, better).
type RowFigures = (
    &'static str,
    Option<f64>,
    Option<f64>,
    &'static str,
    &'static str,
);

/// One line of the table.
struct Row {
    group: String,
    metric: &'static str,
    seedd: Option<f64>,
    other: Option<f64>,
    unit: &'static str,
    better: &'static str,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// `$SEEDD_BENCH_DATA` or `~/.cache/seedd/bench-data`.
fn bench_data_dir() -> PathBuf {
    std::env::var_os("SEEDD_BENCH_DATA").map_or_else(
        || {
            std::env::var_os("HOME")
                .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
                .join(".cache/seedd/bench-data")
        },
        PathBuf::from,
    )
}

/// Generate `n` repositories under `dir/storage` once; returns the generator's repos/s (of
/// this run, or as recorded when the storage was made).
fn dataset(dir: &Path, n: usize, log: &(dyn Fn(&str) + Sync)) -> f64 {
    let done = dir.join("generated.json");
    if let Some(rate) = std::fs::read(&done)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v["repos_per_second"].as_f64())
    {
        return rate;
    }
    let _ = std::fs::remove_dir_all(dir);
    log(&format!("generating {n} repositories in {}", dir.display()));
    let mut spec = Spec::new(n);
    spec.prefix = format!("scale{n}");
    let report = generate(&dir.join("storage"), &spec, &|d| {
        if d.is_multiple_of(10_000) {
            log(&format!("  {d} repositories"))
        }
    })
    .unwrap();
    let rate = report.per_second();
    log(&format!(
        "  {n} in {:.1} s ({rate:.0}/s, {:.0} MB)",
        report.elapsed.as_secs_f64(),
        report.bytes as f64 / 1e6
    ));
    std::fs::write(
        &done,
        serde_json::to_vec(&json!({ "repos": n, "repos_per_second": rate })).unwrap(),
    )
    .unwrap();
    rate
}

/// p50 and p99 of `samples` (milliseconds).
fn percentiles(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples.get(i).copied().unwrap_or(f64::NAN)
    };
    (at(0.5), at(0.99))
}

/// One seedd process on `data` (storage symlinked in), RUST_LOG=info.
struct SeeddRun {
    child: Child,
    started: Instant,
    http: u16,
    admin: u16,
    p2p: u16,
    data: PathBuf,
    bin: PathBuf,
    log_name: String,
}

impl SeeddRun {
    /// Start seedd; its log goes to `data/<log_name>`.
    fn start(bin: &Path, data: &Path, storage: &Path, log_name: &str) -> Self {
        let link = data.join("storage");
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(storage, &link).unwrap();
        }
        Self::spawn(bin, data, log_name)
    }

    /// seedd on three free ports (the config is rewritten each time).
    fn spawn(bin: &Path, data: &Path, log_name: &str) -> Self {
        let started = Instant::now();
        let seedd_benches::SpawnedSeedd {
            child,
            http,
            admin,
            p2p,
        } = seedd_benches::spawn_seedd(
            bin,
            data,
            "scale",
            "relay = \"always\"\n",
            &data.join(log_name),
        );
        SeeddRun {
            child,
            started,
            http,
            admin,
            p2p,
            data: data.to_owned(),
            bin: bin.to_owned(),
            log_name: log_name.to_owned(),
        }
    }

    /// Whether seedd exited because a port `free_port` chose was taken before seedd bound it.
    fn lost_a_port(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
            && std::fs::read_to_string(self.data.join(&self.log_name))
                .is_ok_and(|l| l.contains("Address already in use"))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `nid@127.0.0.1:port` for a radicle-node's `connect`.
    fn peer(&self) -> String {
        let url = format!("http://127.0.0.1:{}/api/v1/status", self.admin);
        let (_, body) = http_get(&url, &[("Authorization", &self.auth())]).unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        format!("{}@127.0.0.1:{}", v["nid"].as_str().unwrap(), self.p2p)
    }

    /// `seedd_fetches_total{result="ok"}` (admin `/metrics`).
    fn fetches_ok(&self) -> f64 {
        let url = format!("http://127.0.0.1:{}/metrics", self.admin);
        let body = http_get(&url, &[]).map(|(_, b)| b).unwrap_or_default();
        seedd_tests::metric_in(&body, "seedd_fetches_total", &["result=\"ok\""])
    }

    fn wait_ready(&mut self, log: &dyn Fn(&str)) -> Duration {
        let mut url = format!("http://127.0.0.1:{}/readyz", self.admin);
        let mut last_log = Instant::now();
        let mut retries = 0;
        loop {
            if matches!(http_get(&url, &[]), Ok((200, _))) {
                return self.started.elapsed();
            }
            if retries < 3 && self.lost_a_port() {
                // Another process took a port between choosing it and seedd binding it: start
                // again on fresh ports (the clock restarts with it).
                retries += 1;
                log("  a port was taken before seedd bound it; starting again on other ports");
                *self = Self::spawn(
                    &self.bin.clone(),
                    &self.data.clone(),
                    &self.log_name.clone(),
                );
                url = format!("http://127.0.0.1:{}/readyz", self.admin);
                continue;
            }
            assert!(
                alive(self.pid()) && self.started.elapsed() < READY_MAX,
                "seedd did not become ready; see the log in {}",
                self.data.display()
            );
            if last_log.elapsed() > Duration::from_secs(30) {
                log(&format!("  waiting ({:?})", self.started.elapsed()));
                last_log = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn latency_info_refs(&self, rids: &[String], n: usize) -> (f64, f64) {
        let mut samples = Vec::with_capacity(n);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let rid = &rids[(x % rids.len() as u64) as usize];
            let url = format!(
                "http://127.0.0.1:{}/{rid}.git/info/refs?service=git-upload-pack",
                self.http
            );
            let t = Instant::now();
            let (status, _) = http_get(&url, &[]).unwrap();
            samples.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(status, 200, "{url}");
        }
        percentiles(samples)
    }

    fn auth(&self) -> String {
        let token = std::fs::read_to_string(self.data.join("admin-token")).unwrap();
        format!("Bearer {}", token.trim())
    }

    /// Repositories in the index with the delegate's signed refs verified. (curl: at 100k
    /// the unpaged listing is over the test client's 10 MB body limit.)
    /// Repositories indexed with their one namespace verified, following the paged listing.
    fn valid_repos(&self) -> usize {
        let mut valid = 0;
        let mut after: Option<String> = None;
        loop {
            let mut url = format!("http://127.0.0.1:{}/api/v1/repos?limit=10000", self.admin);
            if let Some(a) = &after {
                url.push_str(&format!("&after={a}"));
            }
            let out = Command::new("curl")
                .args(["-sf", "--max-time", "600", "-H"])
                .arg(format!("Authorization: {}", self.auth()))
                .arg(&url)
                .output()
                .unwrap();
            assert!(out.status.success(), "{url}: {:?}", out.status);
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            valid += v["repos"].as_array().map_or(0, |a| {
                a.iter()
                    .filter(|r| r["namespaces"].as_array().is_some_and(|n| n.len() == 1))
                    .count()
            });
            match v["next"].as_str() {
                Some(next) => after = Some(next.to_owned()),
                None => return valid,
            }
        }
    }

    fn latency_status(&self, n: usize) -> (f64, f64) {
        let auth = self.auth();
        let url = format!("http://127.0.0.1:{}/api/v1/status", self.admin);
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let (status, _) = http_get(&url, &[("Authorization", &auth)]).unwrap();
            samples.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(status, 200, "{url}");
        }
        percentiles(samples)
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// radicle-node on a home whose storage is the generated one.
struct RadRun;

impl RadRun {
    /// A fresh `rad auth` home in `dir/rad-home` (node database removed), `storage` linked in.
    fn home(dir: &Path, storage: &Path) -> Result<PathBuf, String> {
        let home = dir.join("rad-home");
        if !home.join("keys/radicle").exists() {
            let _ = std::fs::remove_dir_all(&home);
            let out = Command::new(radicle_bin("rad"))
                .args(["auth", "--alias", "scale"])
                .env("RAD_HOME", &home)
                .env("RAD_PASSPHRASE", "")
                .env("RAD_KEYGEN_SEED", "73".repeat(32))
                .env_remove("RAD_SOCKET")
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!(
                    "rad auth: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        let link = home.join("storage");
        if !std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) {
            let _ = std::fs::remove_dir_all(&link);
            std::os::unix::fs::symlink(storage, &link).map_err(|e| e.to_string())?;
        }
        let _ = std::fs::remove_dir_all(home.join("node"));
        let cfg_path = home.join("config.json");
        let mut cfg: Value = serde_json::from_slice(
            &std::fs::read(&cfg_path).map_err(|e| format!("{}: {e}", cfg_path.display()))?,
        )
        .map_err(|e| e.to_string())?;
        cfg["node"]["network"] = Value::from("test");
        cfg["node"]["peers"] = json!({ "type": "static" });
        cfg["node"]["connect"] = json!([]);
        cfg["node"]["externalAddresses"] = json!([]);
        cfg["node"]["seedingPolicy"] = json!({ "default": "allow", "scope": "all" });
        cfg["preferredSeeds"] = json!([]);
        std::fs::write(&cfg_path, serde_json::to_vec_pretty(&cfg).unwrap())
            .map_err(|e| e.to_string())?;
        Ok(home)
    }

    /// radicle-node on `home` (the N repositories) replicating pushes ([`push_phase`]).
    fn pushes(
        home: &Path,
        storage: &Path,
        pushes: usize,
        log: &dyn Fn(&str),
    ) -> Result<PushFigures, String> {
        let before = repo_dirs(storage);
        let port = free_port();
        let cfg_path = home.join("config.json");
        let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
        cfg["node"]["listen"] = json!([format!("127.0.0.1:{port}")]);
        std::fs::write(&cfg_path, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
        let logf = std::fs::File::create(home.join("node-push.log")).unwrap();
        let mut child = Command::new(radicle_bin("radicle-node"))
            .arg("--log-level")
            .arg("info")
            .env("RAD_HOME", home)
            .env("RAD_PASSPHRASE", "")
            .env_remove("RAD_SOCKET")
            .stdin(Stdio::null())
            .stdout(logf.try_clone().unwrap())
            .stderr(logf)
            .spawn()
            .map_err(|e| e.to_string())?;
        let pid = child.id();
        let started = Instant::now();
        let nid = loop {
            let out = Command::new(radicle_bin("rad"))
                .args(["node", "status", "--only", "nid"])
                .env("RAD_HOME", home)
                .env_remove("RAD_SOCKET")
                .output();
            if let Ok(o) = out.as_ref() {
                let nid = String::from_utf8_lossy(&o.stdout).trim().to_owned();
                if o.status.success() && nid.starts_with("z6Mk") {
                    break Ok(nid);
                }
            }
            if !alive(pid) || started.elapsed() > READY_MAX {
                break Err(format!(
                    "did not answer on its control socket; see {}",
                    home.join("node-push.log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let result = nid.and_then(|nid| {
            push_phase(
                &format!("{nid}@127.0.0.1:{port}"),
                pid,
                storage,
                pushes,
                &|_| true,
                log,
            )
        });
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline && !matches!(child.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        remove_new_repos(storage, &before);
        result
    }

    /// Start radicle-node on `home`: (seconds until `rad node status` answers, RSS in MiB
    /// 5 s later), then stop it.
    fn measure(home: &Path, log: &dyn Fn(&str)) -> Result<(f64, f64), String> {
        let port = free_port();
        let cfg_path = home.join("config.json");
        let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
        cfg["node"]["listen"] = json!([format!("127.0.0.1:{port}")]);
        std::fs::write(&cfg_path, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
        let logf = std::fs::File::create(home.join("node.log")).unwrap();
        let started = Instant::now();
        let mut child = Command::new(radicle_bin("radicle-node"))
            .arg("--log-level")
            .arg("info")
            .env("RAD_HOME", home)
            .env("RAD_PASSPHRASE", "")
            .env_remove("RAD_SOCKET")
            .stdin(Stdio::null())
            .stdout(logf.try_clone().unwrap())
            .stderr(logf)
            .spawn()
            .map_err(|e| e.to_string())?;
        let pid = child.id();
        let result = loop {
            let out = Command::new(radicle_bin("rad"))
                .args(["node", "status", "--only", "nid"])
                .env("RAD_HOME", home)
                .env_remove("RAD_SOCKET")
                .output();
            if out.is_ok_and(|o| o.status.success()) {
                break Ok(started.elapsed());
            }
            if !alive(pid) || started.elapsed() > READY_MAX {
                break Err(format!(
                    "did not answer on its control socket; see {}",
                    home.join("node.log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = result.map(|ready| {
            log(&format!("  control socket answers after {ready:?}"));
            std::thread::sleep(SETTLE);
            let rss = mib(status_kib(pid, "VmRSS"));
            log(&format!("  RSS {rss:.0} MiB"));
            (ready.as_secs_f64(), rss)
        });
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline && !matches!(child.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        out
    }
}

/// Medians over one server's replicated pushes.
struct PushFigures {
    /// The server's own CPU per push (its threads' run time, ms).
    cpu_ms: f64,
    /// Plus its reaped children's utime+stime (`git` processes; 10 ms ticks).
    cpu_children_ms: f64,
    /// From `git push` to the pushed ref in the server's storage (seedd: fetch counted).
    wall_ms: f64,
}

/// CPU time of each thread of `pid` (tid → ns on CPU, `/proc/<pid>/task/*/schedstat`):
/// nanosecond precision where utime+stime count 10 ms ticks.
fn thread_ns(pid: u32) -> std::collections::HashMap<u32, u64> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Default::default();
    };
    rd.flatten()
        .filter_map(|e| {
            let tid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("schedstat")).ok()?;
            Some((tid, stat.split_whitespace().next()?.parse::<u64>().ok()?))
        })
        .collect()
}

/// The process's own CPU between two [`thread_ns`] readings, in ms: threads alive at the end
/// count what they ran since the first reading (all of it if new); a thread that ended in
/// between is missed (tokio keeps idle blocking threads 10 s, longer than a push).
fn cpu_ms_between(
    before: &std::collections::HashMap<u32, u64>,
    after: &std::collections::HashMap<u32, u64>,
) -> f64 {
    let ns: u64 = after
        .iter()
        .map(|(tid, t)| t.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum();
    ns as f64 / 1e6
}

/// Repository directories of a storage.
fn repo_dirs(storage: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(storage)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Remove what a push phase added to the generated storage (its server stopped).
fn remove_new_repos(storage: &Path, before: &std::collections::BTreeSet<String>) {
    for name in repo_dirs(storage).difference(before) {
        let _ = std::fs::remove_dir_all(storage.join(name));
    }
}

/// A ref's oid in a bare repository: loose file, else `packed-refs`.
fn read_ref(repo: &Path, name: &str) -> Option<String> {
    if let Ok(s) = std::fs::read_to_string(repo.join(name)) {
        let s = s.trim();
        if s.len() >= 40 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Some(s.to_owned());
        }
    }
    let packed = std::fs::read_to_string(repo.join("packed-refs")).ok()?;
    packed.lines().find_map(|l| {
        let (oid, r) = l.split_once(' ')?;
        (r == name && !oid.starts_with('#') && !oid.starts_with('^')).then(|| oid.to_owned())
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A pusher radicle-node connected only to `server` (`nid@addr`, process `pid`, storage
/// `storage`) creates a project, then pushes `pushes` commits; the server's CPU per push.
/// `fetched(k)`: whether the server has completed `k` fetches (seedd: its metric).
fn push_phase(
    server: &str,
    pid: u32,
    storage: &Path,
    pushes: usize,
    fetched: &dyn Fn(usize) -> bool,
    log: &dyn Fn(&str),
) -> Result<PushFigures, String> {
    if pushes == 0 {
        return Err("SEEDD_BENCH_SCALE_PUSHES=0".into());
    }
    let tck = clk_tck();
    let dir = tempfile::Builder::new()
        .prefix("sp")
        .tempdir_in("/tmp")
        .unwrap();
    let work = dir.path().join("proj");
    let pusher = RadNode::start_with(
        "scalepush",
        &[server.to_owned()],
        RadNodeOptions {
            dir: Some(dir),
            log_level: "info".into(),
            wait_listening: true,
            // Only its own project: with allow-all it would replicate the server's N
            // repositories, and the server would fetch them back from it, during the pushes.
            seeding_policy: json!({ "default": "block" }),
            ..RadNodeOptions::default()
        },
    );
    // The handshake with the server.
    std::thread::sleep(Duration::from_secs(2));
    let ok = |out: std::process::Output, what: &str| -> Result<String, String> {
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{what}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    std::fs::create_dir_all(&work).unwrap();
    ok(
        pusher.git_in(&work, &["init", "-q", "-b", "main"]),
        "git init",
    )?;
    std::fs::write(work.join("README"), "push 0\n").unwrap();
    ok(pusher.git_in(&work, &["add", "README"]), "git add")?;
    ok(
        pusher.git_in(&work, &["commit", "-q", "-m", "push 0"]),
        "git commit",
    )?;
    ok(
        pusher.rad_in(
            &work,
            &[
                "init",
                "--name",
                "scalepush",
                "--description",
                "scale bench pushes",
                "--default-branch",
                "main",
                "--public",
                "--no-confirm",
            ],
        ),
        "rad init",
    )?;
    let rid = ok(pusher.rad_in(&work, &["."]), "rad .")?.trim().to_owned();
    let repo = storage.join(rid.trim_start_matches("rad:"));
    let branch = format!("refs/namespaces/{}/refs/heads/main", pusher.nid);
    let head = |work: &Path| -> Result<String, String> {
        Ok(
            ok(pusher.git_in(work, &["rev-parse", "HEAD"]), "rev-parse")?
                .trim()
                .to_owned(),
        )
    };
    // Wait until the server holds `oid` and has counted `fetches` fetches.
    let wait = |oid: &str, fetches: usize| -> Result<(), String> {
        let t0 = Instant::now();
        while read_ref(&repo, &branch).as_deref() != Some(oid) || !fetched(fetches) {
            if t0.elapsed() > PUSH_MAX || !alive(pid) {
                return Err(format!("{rid}: {oid} not replicated after {PUSH_MAX:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    };
    let first = head(&work)?;
    wait(&first, 1)?;
    log(&format!("  {rid} replicated; pushing"));
    let (mut cpu, mut cpu_all, mut wall) = (Vec::new(), Vec::new(), Vec::new());
    for k in 1..=pushes {
        std::fs::write(work.join("README"), format!("push {k}\n")).unwrap();
        ok(
            pusher.git_in(&work, &["commit", "-qam", &format!("push {k}")]),
            "git commit",
        )?;
        let oid = head(&work)?;
        std::thread::sleep(Duration::from_secs(1));
        settle(pid);
        let (n0, c0, a0, t0) = (
            thread_ns(pid),
            own_ticks(pid),
            cpu_ticks(pid),
            Instant::now(),
        );
        ok(
            pusher.git_in(&work, &["push", "-q", "rad", "main"]),
            "git push rad",
        )?;
        wait(&oid, 1 + k)?;
        let w = t0.elapsed().as_secs_f64() * 1e3;
        settle(pid);
        let (n1, c1, a1) = (thread_ns(pid), own_ticks(pid), cpu_ticks(pid));
        let ms = |a: u64, b: u64| b.saturating_sub(a) as f64 / tck * 1e3;
        let own = cpu_ms_between(&n0, &n1);
        cpu.push(own);
        cpu_all.push(ms(a0, a1) - ms(c0, c1) + own);
        wall.push(w);
        log(&format!(
            "  push {k}: {own:.1} ms CPU (ticks: {:.0} ms; {:.0} ms with children), replicated in {w:.0} ms",
            ms(c0, c1),
            ms(a0, a1)
        ));
    }
    drop(pusher);
    Ok(PushFigures {
        cpu_ms: median(cpu),
        cpu_children_ms: median(cpu_all),
        wall_ms: median(wall),
    })
}

/// seedd's figures of the index-lost start and the latency rows ("ready" phase).
struct ColdFigures {
    cold: f64,
    cold_rss: f64,
    http: (f64, f64),
    admin: (f64, f64),
    served_rss: f64,
}

/// The gossip phase's settings.
struct GossipConfig {
    /// Synthetic peers (sessions), all of which gossip.
    peers: usize,
    /// Seconds of gossip: one InventoryAnnouncement and one RefsAnnouncement per peer per second.
    secs: u64,
    /// Repositories per InventoryAnnouncement.
    rids: usize,
    /// Longest wait for the server to settle after the last send.
    drain_max: Duration,
}

/// One server's gossip figures ([`gossip_phase`]).
struct GossipFigures {
    /// Server CPU (utime+stime, children included) from the first send until settled, per
    /// second of gossip.
    cpu_ms_per_s: f64,
    /// The same per announcement received, µs.
    cpu_us_per_ann: f64,
    /// Announcements sent to the server (2 per peer per second).
    sent: u64,
    /// From the last send until settled (or the drain limit).
    drain_secs: f64,
    /// VmRSS once settled.
    rss_mib: f64,
    /// Frames the peers received from the server from the first send until settled (relays).
    frames: u64,
    /// Git streams the server opened to the peers (each a fetch attempt; refused).
    opens: u64,
    /// seedd: Δ `seedd_fetches_total` (all results) over the phase, ramp included.
    fetches: Option<f64>,
    /// Anything worth a note: not settled, disconnects, fetches started.
    notes: Vec<String>,
}

impl GossipFigures {
    /// Fetches the server started from the peers: its fetch counter where it has one, else
    /// the git streams it opened to them.
    fn fetch_attempts(&self) -> f64 {
        self.fetches.unwrap_or(0.0).max(self.opens as f64)
    }
}

/// `k` distinct indices below `n` (all of them when `k >= n`), from a xorshift seeded by
/// `seed`.
fn sample(n: usize, k: usize, seed: u64) -> Vec<usize> {
    if k >= n {
        return (0..n).collect();
    }
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut seen = std::collections::HashSet::with_capacity(k);
    let mut out = Vec::with_capacity(k);
    while out.len() < k {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % n as u64) as usize;
        if seen.insert(i) {
            out.push(i);
        }
    }
    out
}

/// Gossip CPU at scale: `cfg.peers` synthetic peers (`seedd_benches::peers`) connect to the
/// server (`nid` at `addr`, process `pid`) and settle (not timed); then for `cfg.secs` s each
/// sends every second a fresh signed InventoryAnnouncement of `cfg.rids` repositories drawn
/// at random from `rids` (different per peer and per second) and a RefsAnnouncement of the
/// first of them with `RefsAt` = the server's own namespace (nothing to fetch). The server's
/// CPU (utime+stime+cutime+cstime) from the first send until it has settled (no frame to any
/// peer for 7 s and under 5 % of a core), its RSS then. `fetches`: the server's fetch counter
/// (seedd's metric), to show that no fetch was started.
#[allow(clippy::too_many_arguments)]
fn gossip_phase(
    rt: &tokio::runtime::Runtime,
    nid: NodeId,
    addr: std::net::SocketAddr,
    pid: u32,
    rids: &[RepoId],
    cfg: &GossipConfig,
    fetches: &dyn Fn() -> Option<f64>,
    log: &dyn Fn(&str),
) -> Result<GossipFigures, String> {
    use std::sync::atomic::Ordering;
    if rids.is_empty() {
        return Err("no repositories to announce".into());
    }
    let tck = clk_tck();
    let shared = std::sync::Arc::new(Shared::default());
    // Other keys than the p2p bench's and the pusher's.
    let keys: Vec<Keypair> = (0..cfg.peers)
        .map(|i| Keypair::mock(50_000 + i as u64))
        .collect();
    let fetches0 = fetches();
    let (senders, _latencies, failures, tasks) =
        rt.block_on(ramp(nid, addr, cfg.peers, &keys, &shared));
    let close = |senders, tasks: Vec<tokio::task::JoinHandle<()>>| {
        shared.closing.store(true, Ordering::SeqCst);
        drop(senders);
        rt.block_on(async {
            for t in tasks {
                let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
            }
        });
    };
    if let Some(f) = failures.first() {
        let n = failures.len();
        close(senders, tasks);
        return Err(format!("{n} of {} sessions failed: {f}", cfg.peers));
    }
    let mut notes = Vec::new();
    let settle = rt.block_on(wait_settled(&shared, pid, tck, GOSSIP_SETTLE_MAX));
    log(&format!(
        "  {} sessions established; {} after {:.1} s",
        senders.len(),
        if settle.settled {
            "settled".to_owned()
        } else {
            format!("NOT settled ({:.2} cores busy)", settle.cpu_rate)
        },
        settle.secs
    ));
    if !settle.settled {
        notes.push(format!(
            "not settled {:.0} s after the sessions connected ({:.2} cores busy); measuring anyway",
            settle.secs, settle.cpu_rate
        ));
    }
    let gossipers: Vec<(Keypair, tokio::sync::mpsc::Sender<Vec<u8>>)> = senders
        .iter()
        .map(|(i, tx)| (keys[*i].clone(), tx.clone()))
        .collect();
    let frames0 = shared.frames_in.load(Ordering::Relaxed);
    let c0 = cpu_ticks(pid);
    let t0 = Instant::now();
    let sent = rt.block_on(gossip_rounds(&gossipers, nid, cfg.secs, |g, round| {
        let picked: Vec<RepoId> = sample(rids.len(), cfg.rids, ((g as u64) << 32) ^ round)
            .into_iter()
            .map(|i| rids[i])
            .collect();
        let first = picked[0];
        (picked, first)
    }));
    let send_secs = t0.elapsed().as_secs_f64();
    let drain = rt.block_on(wait_settled(&shared, pid, tck, cfg.drain_max));
    let cpu_ms = cpu_ticks(pid).saturating_sub(c0) as f64 / tck * 1e3;
    let rss_mib = mib(status_kib(pid, "VmRSS"));
    let frames = shared.frames_in.load(Ordering::Relaxed) - frames0;
    let alive_after = alive(pid);
    drop(gossipers);
    close(senders, tasks);
    let opens = shared.opens.load(Ordering::Relaxed);
    let fetched = match (fetches0, fetches()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    if !alive_after {
        return Err("the server exited during the gossip".into());
    }
    log(&format!(
        "  {sent} announcements in {send_secs:.1} s, {} after {:.1} s more; CPU {cpu_ms:.0} ms ({:.1} ms/s, {:.1} µs/announcement), {frames} frames to the peers, RSS {rss_mib:.0} MiB; {opens} git streams opened by the server{}",
        if drain.settled {
            "settled".to_owned()
        } else {
            format!("NOT settled ({:.2} cores busy)", drain.cpu_rate)
        },
        drain.secs,
        cpu_ms / cfg.secs as f64,
        1e3 * cpu_ms / sent.max(1) as f64,
        fetched.map_or(String::new(), |f| format!(", {f} fetches"))
    ));
    if !drain.settled {
        notes.push(format!(
            "saturated: still {:.2} cores busy {:.0} s after the last send; its CPU figures are lower bounds",
            drain.cpu_rate, drain.secs
        ));
    }
    let disconnects = shared.disconnects.lock().map(|d| d.len()).unwrap_or(0);
    if disconnects > 0 {
        notes.push(format!("{disconnects} sessions closed by the server"));
    }
    if opens > 0 || fetched.is_some_and(|f| f > 0.0) {
        notes.push(format!(
            "the server started fetches from the synthetic peers ({opens} git streams opened{}); its CPU includes them",
            fetched.map_or(String::new(), |f| format!(", {f} fetches counted"))
        ));
    }
    Ok(GossipFigures {
        cpu_ms_per_s: cpu_ms / cfg.secs as f64,
        cpu_us_per_ann: 1e3 * cpu_ms / sent.max(1) as f64,
        sent,
        drain_secs: drain.secs,
        rss_mib,
        frames,
        opens,
        fetches: fetched,
        notes,
    })
}

impl SeeddRun {
    /// `seedd_fetches_total`, every result (admin `/metrics`).
    fn fetches_total(&self) -> f64 {
        let url = format!("http://127.0.0.1:{}/metrics", self.admin);
        let body = http_get(&url, &[]).map(|(_, b)| b).unwrap_or_default();
        seedd_tests::metric_in(&body, "seedd_fetches_total", &[])
    }
}

impl RadRun {
    /// radicle-node on `home` (its node database kept), `relay: always` like seedd here, ready
    /// when `rad node status` answers; then [`gossip_phase`]. The relay setting is removed
    /// from the config afterwards.
    fn gossip(
        home: &Path,
        rt: &tokio::runtime::Runtime,
        rids: &[RepoId],
        cfg: &GossipConfig,
        log: &dyn Fn(&str),
    ) -> Result<GossipFigures, String> {
        let port = free_port();
        let cfg_path = home.join("config.json");
        let read = || -> Result<Value, String> {
            serde_json::from_slice(
                &std::fs::read(&cfg_path).map_err(|e| format!("{}: {e}", cfg_path.display()))?,
            )
            .map_err(|e| e.to_string())
        };
        let mut conf = read()?;
        conf["node"]["listen"] = json!([format!("127.0.0.1:{port}")]);
        conf["node"]["relay"] = json!("always");
        std::fs::write(&cfg_path, serde_json::to_vec_pretty(&conf).unwrap())
            .map_err(|e| e.to_string())?;
        let log_path = home.join("node-gossip.log");
        let logf = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let mut child = Command::new(radicle_bin("radicle-node"))
            .arg("--log-level")
            .arg("info")
            .env("RAD_HOME", home)
            .env("RAD_PASSPHRASE", "")
            .env_remove("RAD_SOCKET")
            .stdin(Stdio::null())
            .stdout(logf.try_clone().map_err(|e| e.to_string())?)
            .stderr(logf)
            .spawn()
            .map_err(|e| e.to_string())?;
        let pid = child.id();
        let started = Instant::now();
        let nid = loop {
            let out = Command::new(radicle_bin("rad"))
                .args(["node", "status", "--only", "nid"])
                .env("RAD_HOME", home)
                .env_remove("RAD_SOCKET")
                .output();
            if let Ok(o) = out.as_ref() {
                let nid = String::from_utf8_lossy(&o.stdout).trim().to_owned();
                if o.status.success() && nid.starts_with("z6Mk") {
                    break nid
                        .parse::<NodeId>()
                        .map_err(|e| format!("node id {nid:?}: {e}"));
                }
            }
            if !alive(pid) || started.elapsed() > READY_MAX {
                break Err(format!(
                    "did not answer on its control socket; see {}",
                    log_path.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let result = nid.and_then(|nid| {
            log(&format!(
                "  control socket answers after {:?}",
                started.elapsed()
            ));
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            gossip_phase(rt, nid, addr, pid, rids, cfg, &|| None, log)
        });
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline && !matches!(child.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        if let Ok(mut conf) = read() {
            if let Some(node) = conf["node"].as_object_mut() {
                node.remove("relay");
            }
            let _ = std::fs::write(&cfg_path, serde_json::to_vec_pretty(&conf).unwrap());
        }
        // What radicle-node logged about fetching (it has no fetch counter).
        let fetch_lines = std::fs::read_to_string(&log_path)
            .map(|l| {
                l.lines()
                    .filter(|l| l.contains("Fetching") || l.contains("fetch"))
                    .count()
            })
            .unwrap_or(0);
        result.map(|mut g| {
            if fetch_lines > 0 {
                g.notes.push(format!(
                    "{fetch_lines} log lines mention fetching ({})",
                    log_path.display()
                ));
            }
            g
        })
    }
}
