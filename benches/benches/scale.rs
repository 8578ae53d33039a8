//! Scale in repositories: seedd and the official radicle-node on the same storage of N
//! generated repositories (`seedd_benches::generate`), N = 1k and 10k by default
//! (`SEEDD_BENCH_SCALE=1000,10000,100000` for more). Prints a table (seedd, radicle-node,
//! ratio = seedd / radicle-node of the medians) and writes the figures as JSON to
//! `<target>/seedd-bench-scale.json`. See `benches/README.md` and `benches/runs/scale.md`.
//!
//! Measured by the rules of issue 29 §1 (`seedd_benches::measure`): every server start runs in
//! a cgroup of its own ([`Scope`], pinned to the server cores; `spawn_seedd` for seedd,
//! [`Scope::command`] for radicle-node); CPU is the cgroup's (the server and every process it
//! starts, e.g. seedd's `git`), memory the cgroup's peak and the PSS of its processes (Σ VmRSS
//! a secondary column). The bench, its HTTP client, the synthetic peers and the pusher node
//! run on the load cores. Figures are median [min–max] over rounds.
//!
//! For each N, on one cached storage (`~/.cache/seedd/bench-data/scale-v1/n<N>/storage`,
//! generated once; `SEEDD_BENCH_DATA` moves it):
//!
//! 1. **Ready** (`SEEDD_BENCH_SCALE_ROUNDS` rounds, default 5, servers in ABBA order). Each
//!    round starts each server four times: index lost cold, index lost warm, index present
//!    cold, index present warm. seedd "index lost" = `<data>/index` removed; radicle-node's
//!    (a fresh `rad auth` home whose `storage` is the same directory, seeding policy allow/all,
//!    no peers) = its `node/` directory removed (fresh node database). Cold = `measure::evict`
//!    of the storage and the server's data dir (index, node database) before the start; warm =
//!    right after the cold start of the same kind. Ready = seedd's admin `/readyz` answers 200
//!    (every repository read and its signed refs verified), radicle-node's control socket
//!    answers `rad node status`; memory 5 s later (memory.peak since the start, PSS, Σ RSS).
//! 2. **HTTP latency** (seedd, the warm starts of every round): `GET
//!    /<rid>.git/info/refs?service=git-upload-pack` for random RIDs and admin
//!    `GET /api/v1/status` (p50, p99 of `SEEDD_BENCH_SCALE_REQUESTS` (300) requests, one at a
//!    time), right after the rebuild (index lost) and after the restart with the index; the
//!    memory peak and PSS during the requests.
//! 3. **CPU per replicated push**: a real radicle-node ("pusher", connected only to the server
//!    measured, on the load cores) `rad init`s a small project, which the server fetches into
//!    the N-repository storage; then `SEEDD_BENCH_SCALE_PUSHES` (7) times a commit and
//!    `git push rad main`. Per push, the server's cgroup CPU (its `git` children and the
//!    after-fetch steps included) from before the push until the pushed ref is in the server's
//!    storage (seedd: and the fetch is counted) and the server is idle again; then, after the
//!    last push, the window is held open `SEEDD_BENCH_SCALE_PUSH_TAIL_SECS` (65 s: seedd's
//!    default `maintenance.debounce_secs` of 60 s, plus 5) and until any maintenance finished
//!    and the server is idle, so that "CPU per push incl. triggered maintenance" counts what
//!    the pushes triggered (issue 29). Same window for radicle-node. Measured on a seedd
//!    restarted with its index and on a radicle-node with a fresh node database; the pushed
//!    repository is removed afterwards. After each push (the server idle again), seedd's
//!    first `GET info/refs` of the pushed repository (latency, and its cgroup CPU: the ref
//!    snapshot rebuilt for the new refs), then 5 more (warm): "first request after a push"
//!    next to the warm figure that alone would flatter. radicle-node has no HTTP, so these
//!    rows are seedd's alone.
//! 4. **Gossip CPU**: `SEEDD_BENCH_SCALE_GOSSIP_PEERS` (50) synthetic peers
//!    (`seedd_benches::peers`, the p2p bench's load generator) connect and settle; then
//!    `SEEDD_BENCH_SCALE_GOSSIP_ROUNDS` (5) times, for `SEEDD_BENCH_SCALE_GOSSIP_SECS` (20) s
//!    each sends every second a fresh signed InventoryAnnouncement of 50 repositories drawn at
//!    random from the N and a RefsAnnouncement (`RefsAt` = the server's own namespace). The
//!    server's cgroup CPU from the first send until it has settled, per second of gossip and
//!    per announcement; memory over the round. Measured on the seedd of step 3 (before the
//!    pushes) and on a radicle-node with the node database of step 1 (`relay: always` like
//!    seedd's).
//!
//! `SEEDD_BENCH_SCALE_ONLY=gossip` (comma-separated among `ready`, `push`, `gossip`) runs only
//! those phases.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seedd_benches::generate::{generate, Spec};
use seedd_benches::measure::{self, Pinning, Scope, Summary};
use seedd_benches::peers::{gossip_rounds, ramp, wait_settled, Shared};
use seedd_benches::procfs::{alive, loadavg};
use seedd_benches::textgen::{Rng, Zipf};
use seedd_benches::{ensure_seedd, fmt, profile_dir, radicle_version, write_table, TableLine};
use seedd_proto::crypto::{Keypair, NodeId, RepoId};
use seedd_tests::{free_port, http_get, radicle_bin, RadNode, RadNodeOptions};
use serde_json::{json, Value};

/// Bump when the generated repositories change, so cached ones are regenerated.
const DATA_VERSION: &str = "scale-v1";
/// Repository counts measured (`SEEDD_BENCH_SCALE`, comma-separated).
const SIZES: [usize; 2] = [1_000, 10_000];
/// Rounds of the ready and latency rows (`SEEDD_BENCH_SCALE_ROUNDS`).
const ROUNDS: usize = 5;
/// Requests per latency figure (`SEEDD_BENCH_SCALE_REQUESTS`).
const REQUESTS: usize = 300;
/// Clones per latency figure (`SEEDD_BENCH_SCALE_CLONES`).
const CLONES: usize = 100;
/// Distinct repositories the Zipf(1) draws of info/refs and clones go over
/// (`SEEDD_BENCH_SCALE_ZIPF_REPOS`): the same at every N, so only N differs.
const ZIPF_REPOS: usize = 1_000;
/// Seconds of an idle seedd measured for its background CPU (`SEEDD_BENCH_SCALE_IDLE_SECS`).
const IDLE_SECS: usize = 30;
/// Above this many repositories radicle-node is not run (`SEEDD_BENCH_SCALE_RADICLE_UPTO`):
/// its start alone walks the storage for minutes at 1M, and issue 30 §3 compares seedd at 1M
/// with seedd at 1k.
const RADICLE_UPTO: usize = 100_000;
/// Above this many repositories the index is not rebuilt in every round: once, as the first
/// round's "index lost, cold", when it is missing (`SEEDD_BENCH_SCALE_LOST_UPTO`; at 1M a
/// rebuild from a cold cache takes ~27 min).
const LOST_UPTO: usize = 100_000;
/// Idle time after ready before memory is read (both servers).
const SETTLE: Duration = Duration::from_secs(5);
/// Replicated pushes per server (`SEEDD_BENCH_SCALE_PUSHES`).
const PUSHES: usize = 7;
/// After the last push, the window stays open this long (`SEEDD_BENCH_SCALE_PUSH_TAIL_SECS`):
/// seedd's default `maintenance.debounce_secs` (60) plus 5 s, so the maintenance the pushes
/// triggered runs inside it.
const PUSH_TAIL_SECS: usize = 65;
/// Longest wait for one push to reach the server's storage.
const PUSH_MAX: Duration = Duration::from_secs(120);
/// Longest wait for a process to become ready.
const READY_MAX: Duration = Duration::from_secs(1800);
/// Longest wait for a server to become idle (under 2 % of a core over 500 ms).
const IDLE_MAX: Duration = Duration::from_secs(120);
/// Synthetic peers gossiping at the server (`SEEDD_BENCH_SCALE_GOSSIP_PEERS`).
const GOSSIP_PEERS: usize = 50;
/// Seconds of gossip per round, one round of sends per second (`SEEDD_BENCH_SCALE_GOSSIP_SECS`).
const GOSSIP_SECS: usize = 20;
/// Gossip rounds per server, in one session of the peers (`SEEDD_BENCH_SCALE_GOSSIP_ROUNDS`).
const GOSSIP_ROUNDS: usize = 5;
/// Repositories per InventoryAnnouncement, drawn at random from the N held
/// (`SEEDD_BENCH_SCALE_GOSSIP_RIDS`).
const GOSSIP_RIDS: usize = 50;
/// Longest wait for the server to work the gossip off after the last send, seconds
/// (`SEEDD_BENCH_SCALE_GOSSIP_DRAIN_MAX`); a server still busy then is "saturated".
const GOSSIP_DRAIN_MAX: usize = 120;
/// Longest wait for the server to settle after the sessions connected.
const GOSSIP_SETTLE_MAX: Duration = Duration::from_secs(300);
/// The ready variants, in the order each round runs them: (label, index lost, cold).
const VARIANTS: [(&str, bool, bool); 4] = [
    ("index lost, cold", true, true),
    ("index lost, warm", true, false),
    ("index present, cold", false, true),
    ("index present, warm", false, false),
];

/// A knob set to other than its default is recorded as an override (fewer rounds or samples).
fn knob(name: &str, default: usize, floor: usize) -> usize {
    let v = seedd_benches::env_usize(name, default).max(floor);
    if v != default {
        measure::record_override(&format!("scale: {name} = {v} (default {default})"));
    }
    v
}

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    let prov = measure::provenance("scale");
    // The bench, its clients and load generators on the load cores (before the runtime).
    Pinning::pin_self_to_load();
    let started = Instant::now();
    let log = move |msg: &str| eprintln!("[{:7.1}s] {msg}", started.elapsed().as_secs_f64());
    let profile = profile_dir();
    let target = profile.parent().unwrap().to_owned();
    let seedd_bin = ensure_seedd(&log, &profile);
    let sizes: Vec<usize> = std::env::var("SEEDD_BENCH_SCALE")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| SIZES.to_vec());
    let rounds = knob("SEEDD_BENCH_SCALE_ROUNDS", ROUNDS, 1);
    let requests = knob("SEEDD_BENCH_SCALE_REQUESTS", REQUESTS, 1);
    let clones = knob("SEEDD_BENCH_SCALE_CLONES", CLONES, 0);
    let zipf_repos = knob("SEEDD_BENCH_SCALE_ZIPF_REPOS", ZIPF_REPOS, 1);
    let idle_secs = knob("SEEDD_BENCH_SCALE_IDLE_SECS", IDLE_SECS, 0) as u64;
    let radicle_upto = knob("SEEDD_BENCH_SCALE_RADICLE_UPTO", RADICLE_UPTO, 0);
    let lost_upto = knob("SEEDD_BENCH_SCALE_LOST_UPTO", LOST_UPTO, 0);
    let pushes = knob("SEEDD_BENCH_SCALE_PUSHES", PUSHES, 0);
    let push_tail =
        Duration::from_secs(knob("SEEDD_BENCH_SCALE_PUSH_TAIL_SECS", PUSH_TAIL_SECS, 0) as u64);
    // `SEEDD_BENCH_SCALE_ONLY=gossip` (comma-separated: ready, push, gossip) runs only those
    // phases.
    let only = std::env::var("SEEDD_BENCH_SCALE_ONLY").unwrap_or_default();
    let want = |phase: &str| only.is_empty() || only.split(',').any(|p| p.trim() == phase);
    let gossip_cfg = GossipConfig {
        peers: knob("SEEDD_BENCH_SCALE_GOSSIP_PEERS", GOSSIP_PEERS, 1),
        secs: knob("SEEDD_BENCH_SCALE_GOSSIP_SECS", GOSSIP_SECS, 1) as u64,
        rounds: knob("SEEDD_BENCH_SCALE_GOSSIP_ROUNDS", GOSSIP_ROUNDS, 1),
        rids: knob("SEEDD_BENCH_SCALE_GOSSIP_RIDS", GOSSIP_RIDS, 1),
        drain_max: Duration::from_secs(knob(
            "SEEDD_BENCH_SCALE_GOSSIP_DRAIN_MAX",
            GOSSIP_DRAIN_MAX,
            0,
        ) as u64),
    };
    measure::record_config_diff(
        "seedd: [p2p] relay = \"always\"; [policy] default = \"allow\", scope = \"all\"; \
         listeners on 127.0.0.1:<free port>; RUST_LOG=info; no per-IP request limit \
         (spawn_seedd)",
    );
    measure::record_config_diff(
        "radicle-node: network = test, peers static, connect [], preferredSeeds [], \
         externalAddresses [], listen 127.0.0.1:<free port>, seedingPolicy allow/all, \
         --log-level info; relay = always for the gossip rows",
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let load_before = loadavg();
    log(measure::cgroup_method());
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
        let data = dir.join("seedd");
        std::fs::create_dir_all(&data).unwrap();
        let mut rows: Vec<(String, [Vec<f64>; 2], &'static str, &'static str)> = Vec::new();
        rows.push((
            "generator".into(),
            [vec![gen_rate], vec![]],
            "repos/s",
            "higher",
        ));

        // 1 and 2: ready rounds, latency on seedd's warm starts.
        if want("ready") {
            let mut ready: [[Sample; 4]; 2] = Default::default();
            let mut lat: [Latency; 2] = Default::default();
            let mut checked = false;
            let mut idle = Vec::new();
            // The same distinct repositories at every size (drawn from this storage).
            let zipf_rids = zipf_set(&rids, zipf_repos);
            for round in 0..rounds {
                for si in measure::abba(round, 2) {
                    if si == 1 && n > radicle_upto {
                        continue;
                    }
                    if si == 0 {
                        for (vi, &(label, lost, cold)) in VARIANTS.iter().enumerate() {
                            // Above `lost_upto` the index is built once, when missing
                            // (round 1, cold), not timed again.
                            if lost
                                && n > lost_upto
                                && (round > 0 || !cold || data.join("index").exists())
                            {
                                continue;
                            }
                            log(&format!(
                                "{n}: round {}/{rounds}: seedd, {label}",
                                round + 1
                            ));
                            let (s, x) = SeeddRun::start_measured(
                                &seedd_bin, &data, &storage, lost, cold, &log,
                            );
                            ready[0][vi].push(x);
                            if lost && !checked {
                                let valid = s.valid_repos();
                                assert_eq!(
                                    valid, n,
                                    "seedd indexed {valid} of {n} repositories as valid"
                                );
                                checked = true;
                            }
                            if !cold {
                                if !lost && idle_secs > 0 {
                                    idle.push(s.idle_cpu_percent(idle_secs, &log));
                                }
                                // 0: right after the rebuild; 1: restarted with the index.
                                lat[usize::from(!lost)]
                                    .add(&s, &rids, &zipf_rids, requests, clones, &log);
                            }
                            s.stop();
                        }
                    } else {
                        for (vi, &(label, lost, cold)) in VARIANTS.iter().enumerate() {
                            log(&format!(
                                "{n}: round {}/{rounds}: radicle-node, {label}",
                                round + 1
                            ));
                            let r = if lost {
                                RadRun::home(&dir, &storage)
                            } else {
                                Ok(dir.join("rad-home"))
                            }
                            .and_then(|home| RadRun::measure(&home, &storage, cold, &log));
                            match r {
                                Ok(x) => ready[1][vi].push(x),
                                Err(e) => notes.push(format!(
                                    "{n}: round {} radicle-node {label}: {e}",
                                    round + 1
                                )),
                            }
                        }
                    }
                }
            }
            for (vi, (label, _, cold)) in VARIANTS.iter().enumerate() {
                let [a, b] = &ready;
                rows.push((
                    format!("ready, {label}"),
                    [a[vi].ready.clone(), b[vi].ready.clone()],
                    "s",
                    "lower",
                ));
                rows.push((
                    format!("  memory.peak to ready+5 s, {label}"),
                    [a[vi].peak_mib.clone(), b[vi].peak_mib.clone()],
                    "MiB",
                    "lower",
                ));
                rows.push((
                    format!("  PSS at ready+5 s, {label}"),
                    [a[vi].pss_mib.clone(), b[vi].pss_mib.clone()],
                    "MiB",
                    "lower",
                ));
                if !cold {
                    rows.push((
                        format!("  Σ RSS at ready+5 s, {label} (secondary)"),
                        [a[vi].rss_mib.clone(), b[vi].rss_mib.clone()],
                        "MiB",
                        "",
                    ));
                }
            }
            rows.push((
                format!("background CPU, idle {idle_secs} s after ready+5 s, index present, warm"),
                [idle, Vec::new()],
                "% core",
                "lower",
            ));
            for (li, when) in ["after the rebuild", "restarted"].iter().enumerate() {
                let l = &lat[li];
                for (metric, v, unit, better) in [
                    ("HTTP info/refs p50", &l.http50, "ms", "lower"),
                    ("HTTP info/refs p99", &l.http99, "ms", "lower"),
                    ("HTTP info/refs Zipf p50", &l.zipf50, "ms", "lower"),
                    ("HTTP info/refs Zipf p99", &l.zipf99, "ms", "lower"),
                    ("git clone Zipf p50", &l.clone50, "ms", "lower"),
                    ("git clone Zipf p99", &l.clone99, "ms", "lower"),
                    ("admin status p50", &l.admin50, "ms", "lower"),
                    ("admin status p99", &l.admin99, "ms", "lower"),
                    (
                        "memory.peak, start to after requests",
                        &l.peak_mib,
                        "MiB",
                        "lower",
                    ),
                    ("PSS after requests", &l.pss_mib, "MiB", "lower"),
                    ("Σ RSS after requests (secondary)", &l.rss_mib, "MiB", ""),
                ] {
                    rows.push((
                        format!("{metric}, {when}"),
                        [v.clone(), Vec::new()],
                        unit,
                        better,
                    ));
                }
            }
        }

        // 3 and 4 on seedd: restarted with its index (warm).
        let (seedd_gossip, seedd_push) = if want("gossip") || want("push") {
            log(&format!(
                "{n}: seedd, restart with the index (gossip, pushes)"
            ));
            let mut s = SeeddRun::start(&seedd_bin, &data, &storage, "seedd-index-present.log");
            let ready = s.wait_ready(&log);
            log(&format!("  ready in {ready:?}"));
            let g = if want("gossip") {
                log(&format!(
                    "{n}: seedd, gossip from {} peers, {} rounds of {} s",
                    gossip_cfg.peers, gossip_cfg.rounds, gossip_cfg.secs
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
                        &s.scope,
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
            if let Some(g) = &g {
                notes.extend(g.notes.iter().map(|x| format!("{n}: seedd gossip: {x}")));
            }
            let p = if want("push") {
                log(&format!("{n}: seedd, {pushes} replicated pushes"));
                let before = repo_dirs(&storage);
                let runs0 = s.maintenance_runs();
                let p = push_phase(
                    &s.peer(),
                    &s.scope,
                    s.pid(),
                    &storage,
                    pushes,
                    push_tail,
                    &|k| s.fetches_ok() >= k as f64,
                    &|| s.maintenance_running() == 0.0,
                    Some(&|rid: &str| s.info_refs_ms(rid)),
                    &log,
                );
                let runs = s.maintenance_runs() - runs0;
                s.stop();
                remove_new_repos(&storage, &before);
                p.map(|mut p| {
                    p.maintenance_runs = Some(runs);
                    p
                })
                .map_err(|e| notes.push(format!("{n}: seedd pushes: {e}")))
                .ok()
            } else {
                s.stop();
                None
            };
            (g, p)
        } else {
            (None, None)
        };

        // 4 on radicle-node: the node database the ready rounds left, else a fresh one.
        let rad_gossip = if want("gossip") && n <= radicle_upto {
            let home = dir.join("rad-home");
            let home = if home.join("node").exists() {
                Ok(home)
            } else {
                RadRun::home(&dir, &storage)
            };
            log(&format!(
                "{n}: radicle-node, gossip from {} peers, {} rounds of {} s",
                gossip_cfg.peers, gossip_cfg.rounds, gossip_cfg.secs
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
        // 3 on radicle-node: a fresh node database.
        let rad_push = if !want("push") || n > radicle_upto {
            None
        } else {
            match RadRun::home(&dir, &storage) {
                Ok(home) => {
                    log(&format!("{n}: radicle-node, {pushes} replicated pushes"));
                    RadRun::pushes(&home, &storage, pushes, push_tail, &log)
                        .map_err(|e| notes.push(format!("{n}: radicle-node pushes: {e}")))
                        .ok()
                }
                Err(e) => {
                    notes.push(format!("{n}: radicle-node home: {e}"));
                    None
                }
            }
        };
        if n > radicle_upto {
            notes.push(format!(
                "{n}: radicle-node not run above {radicle_upto} repositories \
                 (SEEDD_BENCH_SCALE_RADICLE_UPTO)"
            ));
        }
        if n > lost_upto && want("ready") {
            notes.push(format!(
                "{n}: the index is not rebuilt every round: once, in round 1 (index lost, \
                 cold), only when it was missing (SEEDD_BENCH_SCALE_LOST_UPTO = {lost_upto})"
            ));
        }
        if want("push") {
            let p = |x: &Option<PushFigures>, f: fn(&PushFigures) -> Vec<f64>| {
                x.as_ref().map(f).unwrap_or_default()
            };
            let both = |f: fn(&PushFigures) -> Vec<f64>| [p(&seedd_push, f), p(&rad_push, f)];
            rows.push((
                "CPU per replicated push (cgroup, git children incl.)".into(),
                both(|p| p.cpu_ms.clone()),
                "ms",
                "lower",
            ));
            rows.push((
                "CPU per push incl. triggered maintenance".into(),
                both(|p| vec![p.per_push_incl_ms]),
                "ms",
                "lower",
            ));
            rows.push((
                "  CPU after the last push (tail window)".into(),
                both(|p| vec![p.tail_ms]),
                "ms",
                "",
            ));
            rows.push(("  tail window".into(), both(|p| vec![p.tail_secs]), "s", ""));
            rows.push((
                "  maintenance runs in the window".into(),
                both(|p| p.maintenance_runs.into_iter().collect()),
                "count",
                "",
            ));
            rows.push((
                "push replicated in".into(),
                both(|p| p.wall_ms.clone()),
                "ms",
                "lower",
            ));
            // Ref advertisements right after a push (seedd only: radicle-node has no HTTP).
            rows.push((
                "info/refs, first after a push (seedd)".into(),
                both(|p| p.advert_first_ms.clone()),
                "ms",
                "lower",
            ));
            rows.push((
                "  its server CPU".into(),
                both(|p| p.advert_first_cpu_ms.clone()),
                "ms",
                "lower",
            ));
            rows.push((
                "info/refs, warm after a push (seedd)".into(),
                both(|p| p.advert_warm_ms.clone()),
                "ms",
                "lower",
            ));
            rows.push((
                "  its server CPU".into(),
                both(|p| p.advert_warm_cpu_ms.clone()),
                "ms",
                "lower",
            ));
        }
        if want("gossip") {
            let g = |x: &Option<GossipFigures>, f: fn(&GossipFigures) -> Vec<f64>| {
                x.as_ref().map(f).unwrap_or_default()
            };
            let both = |f: fn(&GossipFigures) -> Vec<f64>| [g(&seedd_gossip, f), g(&rad_gossip, f)];
            rows.push((
                format!("gossip CPU, {} peers", gossip_cfg.peers),
                both(|g| g.cpu_ms_per_s.clone()),
                "ms/s",
                "lower",
            ));
            rows.push((
                "  CPU per announcement in".into(),
                both(|g| g.cpu_us_per_ann.clone()),
                "µs",
                "lower",
            ));
            rows.push((
                "  announcements in".into(),
                both(|g| g.sent.clone()),
                "count",
                "",
            ));
            rows.push((
                "  drain after the last send".into(),
                both(|g| g.drain_secs.clone()),
                "s",
                "lower",
            ));
            rows.push((
                "  memory.peak over the round".into(),
                both(|g| g.peak_mib.clone()),
                "MiB",
                "lower",
            ));
            rows.push((
                "  PSS peak over the round".into(),
                both(|g| g.pss_mib.clone()),
                "MiB",
                "lower",
            ));
            rows.push((
                "  Σ RSS peak over the round (secondary)".into(),
                both(|g| g.rss_mib.clone()),
                "MiB",
                "",
            ));
            rows.push((
                "  frames to the peers".into(),
                both(|g| g.frames.clone()),
                "frames",
                "",
            ));
            rows.push((
                "  fetches started from peers".into(),
                both(|g| vec![g.fetch_attempts()]),
                "count",
                "lower",
            ));
        }
        for (metric, values, unit, better) in rows {
            let values =
                values.map(|v| v.into_iter().filter(|x| x.is_finite()).collect::<Vec<_>>());
            let (a, b) = (Summary::of(&values[0]), Summary::of(&values[1]));
            let r = ratio(a, b);
            results.push(json!({
                "repos": n, "metric": metric, "unit": unit, "better": better,
                "seedd": a.map(|s| s.to_json()), "radicle_node": b.map(|s| s.to_json()),
                "ratio": r,
                "values_seedd": values[0], "values_radicle_node": values[1],
            }));
            lines.push(Row {
                group: group.clone(),
                metric,
                seedd: a,
                other: b,
                unit,
                better,
            });
        }
    }

    let show = |s: Option<Summary>| match s {
        None => "n/a".to_owned(),
        Some(s) if s.n == 1 => fmt(Some(s.median)),
        Some(s) => s.to_string(),
    };
    let mut t = String::new();
    let _ = writeln!(t);
    let _ = writeln!(t, "{}", prov.line());
    let _ = writeln!(
        t,
        "seedd vs radicle-node {} on the same generated storage; each server start in its own cgroup ({}), pinned to the server cores; bench and clients on the load cores",
        radicle_version(),
        measure::cgroup_method()
    );
    let _ = writeln!(
        t,
        "ready/latency: {rounds} rounds, ABBA order; cold = measure::evict of storage and data dir before the start, warm = right after; pushes: one value per push; gossip: {} rounds of {} s; median [min–max]; ratio = seedd / radicle-node of the medians",
        gossip_cfg.rounds, gossip_cfg.secs
    );
    let _ = writeln!(t);
    write_table(
        &mut t,
        ["repos", "metric", "seedd", "radicle-node", "ratio", "unit"],
        [10, 58, 24, 24, 6, 7],
        141,
        lines.iter().map(|l| TableLine {
            group: &l.group,
            metric: &l.metric,
            seedd: show(l.seedd),
            other: show(l.other),
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
        "load average before: {load_before}; after: {}; total {:.0} s",
        loadavg(),
        started.elapsed().as_secs_f64()
    );
    let targets = scale_targets(&results, &sizes);
    for x in &targets {
        let verdict = match x["met"].as_bool() {
            Some(true) => "MET",
            Some(false) => "NOT MET",
            None => "n/a",
        };
        let _ = writeln!(
            t,
            "target: {}: {} (goal {}) → {verdict}",
            x["target"].as_str().unwrap_or(""),
            x["value"]
                .as_f64()
                .map_or("-".into(), |v| format!("{v:.2}")),
            x["goal"].as_str().unwrap_or("")
        );
    }
    print!("{t}");
    let path = target.join("seedd-bench-scale.json");
    let doc = json!({
        "results": results,
        "targets": targets,
        "notes": notes,
        "radicle_node": radicle_version(),
        "method": {
            "cgroup": measure::cgroup_method(),
            "pinning": Pinning::get().describe(),
            "rounds": rounds,
            "requests": requests,
            "pushes": pushes,
            "push_tail_s": push_tail.as_secs(),
            "gossip": {
                "peers": gossip_cfg.peers, "secs": gossip_cfg.secs,
                "rounds": gossip_cfg.rounds, "rids": gossip_cfg.rids,
            },
            "summary": "median [min–max]; ratio of medians",
        },
    });
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&measure::stamped(&doc)).unwrap(),
    )
    .unwrap();
    log(&format!("wrote {}", path.display()));
}

/// The targets of issue 14 (flat in the number of repositories, better than radicle-node)
/// and issue 29 (per-push CPU with children and the maintenance it triggers), from the
/// medians in `results`; the list `benches/tools/targets.py` reads.
fn scale_targets(results: &[Value], sizes: &[usize]) -> Vec<Value> {
    let med = |n: usize, metric: &str, who: &str| -> Option<f64> {
        results
            .iter()
            .find(|r| r["repos"] == n && r["metric"] == metric)
            .and_then(|r| r[who]["median"].as_f64())
    };
    let div = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let mut out = Vec::new();
    let (Some(&lo), Some(&hi)) = (sizes.iter().min(), sizes.iter().max()) else {
        return out;
    };
    if hi > lo {
        for metric in [
            "HTTP info/refs p50, restarted",
            "HTTP info/refs p99, restarted",
            "HTTP info/refs Zipf p99, restarted",
            "git clone Zipf p99, restarted",
            "admin status p99, restarted",
            "CPU per push incl. triggered maintenance",
        ] {
            let v = div(med(hi, metric, "seedd"), med(lo, metric, "seedd"));
            out.push(json!({
                "target": format!("seedd {metric}, {hi} / {lo} repositories"),
                "goal": "≤ 1.2×",
                "value": v,
                "met": v.map(|v| v <= 1.2),
            }));
        }
    }
    // Issue 30 §3, at the largest N: absolute bounds.
    let idle = "background CPU, idle";
    let idle_pct = results
        .iter()
        .find(|r| r["repos"] == hi && r["metric"].as_str().is_some_and(|m| m.starts_with(idle)))
        .and_then(|r| r["seedd"]["median"].as_f64());
    for (what, v, goal, ok) in [
        (
            "ready, index present, warm, s",
            med(hi, "ready, index present, warm", "seedd"),
            "≤ 5",
            5.0,
        ),
        (
            "ready, index present, cold (caches dropped), s",
            med(hi, "ready, index present, cold", "seedd"),
            "≤ 60",
            60.0,
        ),
        (
            "memory.peak, start to after requests, restarted, MiB",
            med(
                hi,
                "memory.peak, start to after requests, restarted",
                "seedd",
            ),
            "≤ 1024",
            1024.0,
        ),
        (
            "background CPU when idle, % of a core",
            idle_pct,
            "≤ 1",
            1.0,
        ),
    ] {
        out.push(json!({
            "target": format!("seedd {what}, {hi} repositories"),
            "goal": goal,
            "value": v,
            "met": v.map(|v| v <= ok),
        }));
    }
    for metric in [
        "ready, index present, warm",
        "ready, index present, cold",
        "CPU per push incl. triggered maintenance",
    ] {
        if med(hi, metric, "radicle_node").is_none() {
            continue;
        }
        let v = div(med(hi, metric, "seedd"), med(hi, metric, "radicle_node"));
        out.push(json!({
            "target": format!("seedd {metric} vs radicle-node, {hi} repositories"),
            "goal": "< 1.0× (better than radicle-node)",
            "value": v,
            "met": v.map(|v| v < 1.0),
        }));
    }
    out
}

/// One line of the table.
struct Row {
    group: String,
    metric: String,
    seedd: Option<Summary>,
    other: Option<Summary>,
    unit: &'static str,
    better: &'static str,
}

/// seedd / radicle-node, of the medians.
fn ratio(a: Option<Summary>, b: Option<Summary>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b.median > 0.0 => Some(a.median / b.median),
        _ => None,
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Bytes → MiB (NaN without a memory cgroup; [`Summary::of`] leaves NaNs out).
fn peak_mib(bytes: Option<u64>) -> f64 {
    bytes.map_or(f64::NAN, |b| b as f64 / 1048576.0)
}

/// One ready variant of one server, a value per round.
#[derive(Default)]
struct Sample {
    ready: Vec<f64>,
    /// memory.peak of the start's scope at ready + [`SETTLE`].
    peak_mib: Vec<f64>,
    pss_mib: Vec<f64>,
    rss_mib: Vec<f64>,
}

impl Sample {
    fn push(&mut self, (ready, peak, pss, rss): (f64, f64, f64, f64)) {
        self.ready.push(ready);
        self.peak_mib.push(peak);
        self.pss_mib.push(pss);
        self.rss_mib.push(rss);
    }
}

/// Latency rows of seedd, a value per round.
#[derive(Default)]
struct Latency {
    http50: Vec<f64>,
    http99: Vec<f64>,
    zipf50: Vec<f64>,
    zipf99: Vec<f64>,
    clone50: Vec<f64>,
    clone99: Vec<f64>,
    admin50: Vec<f64>,
    admin99: Vec<f64>,
    peak_mib: Vec<f64>,
    pss_mib: Vec<f64>,
    rss_mib: Vec<f64>,
}

impl Latency {
    /// The requests on `s`: info/refs of uniformly random repositories among all `rids`,
    /// info/refs and full `git clone`s of repositories drawn Zipf(1) from `zipf_rids` (after
    /// one untimed pass of the same clones), the admin status. CPU only is observed while they run (no PSS sampler: it reads
    /// `smaps_rollup` under the server's `mmap_lock` and stalls it in proportion to its
    /// memory, which would flatter the smaller N); memory.peak is the cgroup's since the start,
    /// PSS is read once after.
    fn add(
        &mut self,
        s: &SeeddRun,
        rids: &[String],
        zipf_rids: &[String],
        requests: usize,
        clones: usize,
        log: &dyn Fn(&str),
    ) {
        // The Zipf sequence once untimed first: the same repositories at every N have their
        // storage pages, ref snapshots and pack-cache entries in the same state when timed
        // (a start with an index reads no storage, so without it 1M's would be read from
        // disk while 1k's were warm from the round's rebuild).
        // The Zipf passes before the uniform one: 300 first reads of random repositories out
        // of 1M churn the caches the popular ones are in (at 1M the Zipf p99 after a uniform
        // pass is ~1.5× the one before it; at 1k everything fits either way).
        let _ = s.latency_clones(zipf_rids, clones);
        let zipf = s.latency_info_refs_zipf(zipf_rids, requests);
        let clone = s.latency_clones(zipf_rids, clones);
        let http = s.latency_info_refs(rids, requests);
        let admin = s.latency_status(requests);
        let peak = peak_mib(s.scope.memory_peak());
        let pss = mib(s.scope.pss_kib());
        let rss = mib(s.scope.rss_kib());
        log(&format!(
            "  info/refs p50 {:.2} ms p99 {:.2} ms; Zipf p50 {:.2} p99 {:.2}; clone p50 {:.1} p99 {:.1}; status p50 {:.2} ms p99 {:.2} ms; memory.peak since start {peak:.0} MiB, PSS after {pss:.0} MiB",
            http.0, http.1, zipf.0, zipf.1, clone.0, clone.1, admin.0, admin.1,
        ));
        self.http50.push(http.0);
        self.http99.push(http.1);
        self.zipf50.push(zipf.0);
        self.zipf99.push(zipf.1);
        self.clone50.push(clone.0);
        self.clone99.push(clone.1);
        self.admin50.push(admin.0);
        self.admin99.push(admin.1);
        self.peak_mib.push(peak);
        self.pss_mib.push(pss);
        self.rss_mib.push(rss);
    }
}

/// `k` of `rids` chosen at random (a fixed seed), in the order Zipf ranks them.
fn zipf_set(rids: &[String], k: usize) -> Vec<String> {
    let mut rng = Rng::new(0x5ca1_e000 ^ rids.len() as u64);
    let mut pool: Vec<&String> = rids.iter().collect();
    let k = k.min(pool.len());
    for i in 0..k {
        let j = i + rng.below(pool.len() - i);
        pool.swap(i, j);
    }
    pool.into_iter().take(k).cloned().collect()
}

/// Before a cold start of either server: every cache the kernel keeps for `paths` — file
/// pages, and the inodes and directory entries a start walks (at 1M repositories on an
/// inline-data image the files live in their inodes, which `fadvise` does not drop) — by
/// `drop_caches` when writable (root), else `fadvise` of every file under `paths`.
fn evict_cold(paths: &[&Path], log: &dyn Fn(&str)) {
    if measure::drop_caches() {
        log("  dropped the page, inode and dentry caches (drop_caches = 3)");
    } else {
        let e = measure::evict(paths);
        log(&format!(
            "  evicted {} files, {:.0} MB (fadvise; drop_caches not writable)",
            e.files,
            e.bytes as f64 / 1e6
        ));
    }
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

/// One seedd process on `data` (storage symlinked in), RUST_LOG=info, in its own scope.
struct SeeddRun {
    child: Child,
    /// The cgroup of this start (`spawn_seedd`): seedd and every process it starts.
    scope: Arc<Scope>,
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

    /// One ready variant: the index removed first when `lost`, storage and data dir evicted
    /// first when `cold`; start, wait for ready, [`SETTLE`]. Returns the running seedd and
    /// (ready s, memory.peak since the start MiB, PSS MiB, Σ RSS MiB).
    fn start_measured(
        bin: &Path,
        data: &Path,
        storage: &Path,
        lost: bool,
        cold: bool,
        log: &dyn Fn(&str),
    ) -> (Self, (f64, f64, f64, f64)) {
        if lost {
            let _ = std::fs::remove_dir_all(data.join("index"));
        }
        if cold {
            evict_cold(&[storage, data], log);
        }
        let log_name = format!(
            "seedd-index-{}-{}.log",
            if lost { "lost" } else { "present" },
            if cold { "cold" } else { "warm" }
        );
        let mut s = Self::start(bin, data, storage, &log_name);
        let ready = s.wait_ready(log);
        std::thread::sleep(SETTLE);
        let peak = peak_mib(s.scope.memory_peak());
        let pss = mib(s.scope.pss_kib());
        let rss = mib(s.scope.rss_kib());
        log(&format!(
            "  ready in {ready:?}; at ready+5 s memory.peak {peak:.0} MiB, PSS {pss:.0} MiB, Σ RSS {rss:.0} MiB"
        ));
        (s, (ready.as_secs_f64(), peak, pss, rss))
    }

    /// seedd on three free ports (the config is rewritten each time), in a new scope.
    fn spawn(bin: &Path, data: &Path, log_name: &str) -> Self {
        let started = Instant::now();
        let seedd_benches::SpawnedSeedd {
            child,
            scope,
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
            scope,
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

    /// A metric's sum over the series whose labels contain every `labels` entry.
    fn metric(&self, name: &str, labels: &[&str]) -> f64 {
        let url = format!("http://127.0.0.1:{}/metrics", self.admin);
        let body = http_get(&url, &[]).map(|(_, b)| b).unwrap_or_default();
        seedd_tests::metric_in(&body, name, labels)
    }

    /// `seedd_fetches_total{result="ok"}` (admin `/metrics`).
    fn fetches_ok(&self) -> f64 {
        self.metric("seedd_fetches_total", &["result=\"ok\""])
    }

    /// `seedd_fetches_total`, every result.
    fn fetches_total(&self) -> f64 {
        self.metric("seedd_fetches_total", &[])
    }

    /// `seedd_maintenance_runs_total`, every result.
    fn maintenance_runs(&self) -> f64 {
        self.metric("seedd_maintenance_runs_total", &[])
    }

    /// `seedd_maintenance_running`.
    fn maintenance_running(&self) -> f64 {
        self.metric("seedd_maintenance_running", &[])
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
                // again on fresh ports (the clock restarts with it, in a new scope).
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

    /// One `GET /<rid>.git/info/refs?service=git-upload-pack` (`rid` with or without `rad:`),
    /// latency in ms; it must answer 200.
    fn info_refs_ms(&self, rid: &str) -> f64 {
        let url = format!(
            "http://127.0.0.1:{}/{}.git/info/refs?service=git-upload-pack",
            self.http,
            rid.trim_start_matches("rad:")
        );
        let t = Instant::now();
        let (status, _) = http_get(&url, &[]).unwrap();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        assert_eq!(status, 200, "{url}");
        ms
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

    /// info/refs of `n` repositories drawn Zipf(1) over `zipf_rids` (p50, p99 ms).
    fn latency_info_refs_zipf(&self, zipf_rids: &[String], n: usize) -> (f64, f64) {
        let z = Zipf::new(zipf_rids.len());
        let mut rng = Rng::new(0x21bf);
        let samples = (0..n)
            .map(|_| self.info_refs_ms(&zipf_rids[z.sample(&mut rng)]))
            .collect();
        percentiles(samples)
    }

    /// `n` full bare `git clone`s over HTTP of repositories drawn Zipf(1) over `zipf_rids`,
    /// one at a time, each into a fresh directory (p50, p99 ms of the whole `git clone`).
    fn latency_clones(&self, zipf_rids: &[String], n: usize) -> (f64, f64) {
        if n == 0 {
            return (f64::NAN, f64::NAN);
        }
        let z = Zipf::new(zipf_rids.len());
        let mut rng = Rng::new(0xc10e);
        let tmp = tempfile::tempdir().unwrap();
        let samples = (0..n)
            .map(|i| {
                let rid = &zipf_rids[z.sample(&mut rng)];
                let url = format!("http://127.0.0.1:{}/{rid}.git", self.http);
                let into = tmp.path().join(i.to_string());
                let t = Instant::now();
                let out = Command::new("git")
                    .args(["clone", "--bare", "-q", &url])
                    .arg(&into)
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                let ms = t.elapsed().as_secs_f64() * 1e3;
                assert!(
                    out.status.success(),
                    "git clone {url}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let _ = std::fs::remove_dir_all(&into);
                ms
            })
            .collect();
        percentiles(samples)
    }

    /// seedd's cgroup CPU over `secs` s with no request, as % of one core (what runs in
    /// the background: scrub, sync, flushes).
    fn idle_cpu_percent(&self, secs: u64, log: &dyn Fn(&str)) -> f64 {
        let c0 = self.scope.cpu_usec();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(secs));
        let pct = (self.scope.cpu_usec() - c0) as f64 / 1e4 / t0.elapsed().as_secs_f64();
        log(&format!(
            "  background CPU over {secs} s idle: {pct:.2} % of a core"
        ));
        pct
    }

    fn auth(&self) -> String {
        let token = std::fs::read_to_string(self.data.join("admin-token")).unwrap();
        format!("Bearer {}", token.trim())
    }

    /// Repositories indexed with their one namespace verified, following the paged listing.
    /// (curl: at 100k the unpaged listing is over the test client's 10 MB body limit.)
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

/// radicle-node on a home whose storage is the generated one, each start in its own scope.
struct RadRun {
    child: Child,
    scope: Arc<Scope>,
    log: PathBuf,
}

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

    /// radicle-node on `home` listening on `port` (written into its config, with `relay` when
    /// given), in a new scope pinned to the server cores; logs to `home/<log_name>`.
    fn spawn(
        home: &Path,
        port: u16,
        relay: Option<&str>,
        log_name: &str,
    ) -> Result<RadRun, String> {
        let cfg_path = home.join("config.json");
        let mut cfg: Value = serde_json::from_slice(
            &std::fs::read(&cfg_path).map_err(|e| format!("{}: {e}", cfg_path.display()))?,
        )
        .map_err(|e| e.to_string())?;
        cfg["node"]["listen"] = json!([format!("127.0.0.1:{port}")]);
        if let Some(relay) = relay {
            cfg["node"]["relay"] = json!(relay);
        }
        std::fs::write(&cfg_path, serde_json::to_vec_pretty(&cfg).unwrap())
            .map_err(|e| e.to_string())?;
        let log = home.join(log_name);
        let logf = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let scope = Arc::new(Scope::new("scale-radicle"));
        let child = scope
            .command(radicle_bin("radicle-node"))
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
        scope.started(child.id());
        Ok(RadRun { child, scope, log })
    }

    /// Waits until `rad node status` answers on `home`'s control socket: the node id, or why
    /// not. `poll` between tries.
    fn wait_nid(&self, home: &Path, started: Instant, poll: Duration) -> Result<String, String> {
        loop {
            let out = Command::new(radicle_bin("rad"))
                .args(["node", "status", "--only", "nid"])
                .env("RAD_HOME", home)
                .env_remove("RAD_SOCKET")
                .output();
            if let Ok(o) = out.as_ref() {
                let nid = String::from_utf8_lossy(&o.stdout).trim().to_owned();
                if o.status.success() && nid.starts_with("z6Mk") {
                    return Ok(nid);
                }
            }
            if !alive(self.child.id()) || started.elapsed() > READY_MAX {
                return Err(format!(
                    "did not answer on its control socket; see {}",
                    self.log.display()
                ));
            }
            std::thread::sleep(poll);
        }
    }

    /// SIGTERM, SIGKILL after 30 s.
    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline && !matches!(self.child.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// radicle-node on `home` (the N repositories) replicating pushes ([`push_phase`]).
    fn pushes(
        home: &Path,
        storage: &Path,
        pushes: usize,
        tail: Duration,
        log: &dyn Fn(&str),
    ) -> Result<PushFigures, String> {
        let before = repo_dirs(storage);
        let port = free_port();
        let node = RadRun::spawn(home, port, None, "node-push.log")?;
        let result = node
            .wait_nid(home, Instant::now(), Duration::from_millis(50))
            .and_then(|nid| {
                push_phase(
                    &format!("{nid}@127.0.0.1:{port}"),
                    &node.scope,
                    node.child.id(),
                    storage,
                    pushes,
                    tail,
                    &|_| true,
                    &|| true,
                    // No HTTP: radicle-node serves refs only over Radicle streams.
                    None,
                    log,
                )
            });
        node.stop();
        remove_new_repos(storage, &before);
        result
    }

    /// One ready variant: `storage` and `home` (node database) evicted first when `cold`;
    /// start radicle-node on `home`, wait until `rad node status` answers, [`SETTLE`]; then
    /// stop it. (ready s, memory.peak since the start MiB, PSS MiB, Σ RSS MiB).
    fn measure(
        home: &Path,
        storage: &Path,
        cold: bool,
        log: &dyn Fn(&str),
    ) -> Result<(f64, f64, f64, f64), String> {
        if cold {
            evict_cold(&[storage, home], log);
        }
        let started = Instant::now();
        let node = RadRun::spawn(home, free_port(), None, "node.log")?;
        let result = node.wait_nid(home, started, Duration::from_millis(20));
        let out = result.map(|_| {
            let ready = started.elapsed();
            std::thread::sleep(SETTLE);
            let peak = peak_mib(node.scope.memory_peak());
            let pss = mib(node.scope.pss_kib());
            let rss = mib(node.scope.rss_kib());
            log(&format!(
                "  control socket answers after {ready:?}; at ready+5 s memory.peak {peak:.0} MiB, PSS {pss:.0} MiB, Σ RSS {rss:.0} MiB"
            ));
            (ready.as_secs_f64(), peak, pss, rss)
        });
        node.stop();
        out
    }

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
        let started = Instant::now();
        let node = RadRun::spawn(home, port, Some("always"), "node-gossip.log")?;
        let result = node
            .wait_nid(home, started, Duration::from_millis(50))
            .and_then(|nid| {
                nid.parse::<NodeId>()
                    .map_err(|e| format!("node id {nid:?}: {e}"))
            })
            .and_then(|nid| {
                log(&format!(
                    "  control socket answers after {:?}",
                    started.elapsed()
                ));
                let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
                gossip_phase(
                    rt,
                    nid,
                    addr,
                    &node.scope,
                    node.child.id(),
                    rids,
                    cfg,
                    &|| None,
                    log,
                )
            });
        let log_path = node.log.clone();
        node.stop();
        let cfg_path = home.join("config.json");
        if let Some(mut conf) = std::fs::read(&cfg_path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        {
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

/// One server's replicated pushes.
struct PushFigures {
    /// The server's cgroup CPU per push (ms): from before `git push` until the ref is in its
    /// storage, the fetch counted (seedd) and the server idle again.
    cpu_ms: Vec<f64>,
    /// From `git push` to the pushed ref in the server's storage (seedd: fetch counted).
    wall_ms: Vec<f64>,
    /// The server's CPU after the last push's window: the tail (maintenance debounce) and
    /// until idle, ms.
    tail_ms: f64,
    tail_secs: f64,
    /// (Σ `cpu_ms` + `tail_ms`) / pushes.
    per_push_incl_ms: f64,
    /// seedd: Δ `seedd_maintenance_runs_total` over the pushes and the tail.
    maintenance_runs: Option<f64>,
    /// seedd: the first ref advertisement (`GET info/refs`) of the pushed repository after
    /// each push (once the server is idle again): latency ms, and the server's CPU ms for it.
    advert_first_ms: Vec<f64>,
    advert_first_cpu_ms: Vec<f64>,
    /// The same request again right after (the snapshot warm): median of 5 per push.
    advert_warm_ms: Vec<f64>,
    advert_warm_cpu_ms: Vec<f64>,
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

/// A pusher radicle-node (on the load cores, not in the server's scope) connected only to
/// `server` (`nid@addr`, process `pid` in `scope`, storage `storage`) creates a project, then
/// pushes `pushes` commits; the server's cgroup CPU per push, then over `tail` after the last
/// one. `fetched(k)`: whether the server has completed `k` fetches (seedd: its metric);
/// `maintenance_idle()`: no maintenance running (seedd: its gauge).
#[allow(clippy::too_many_arguments)]
fn push_phase(
    server: &str,
    scope: &Arc<Scope>,
    pid: u32,
    storage: &Path,
    pushes: usize,
    tail: Duration,
    fetched: &dyn Fn(usize) -> bool,
    maintenance_idle: &dyn Fn() -> bool,
    advert: Option<&dyn Fn(&str) -> f64>,
    log: &dyn Fn(&str),
) -> Result<PushFigures, String> {
    if pushes == 0 {
        return Err("SEEDD_BENCH_SCALE_PUSHES=0".into());
    }
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
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    let (mut first_ms, mut first_cpu, mut warm_ms, mut warm_cpu) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut not_idle = 0;
    for k in 1..=pushes {
        std::fs::write(work.join("README"), format!("push {k}\n")).unwrap();
        ok(
            pusher.git_in(&work, &["commit", "-qam", &format!("push {k}")]),
            "git commit",
        )?;
        let oid = head(&work)?;
        std::thread::sleep(Duration::from_secs(1));
        measure::wait_idle(scope, IDLE_MAX);
        let (r, iv) = measure::measure_cpu(scope, || -> Result<(f64, bool), String> {
            let t0 = Instant::now();
            ok(
                pusher.git_in(&work, &["push", "-q", "rad", "main"]),
                "git push rad",
            )?;
            wait(&oid, 1 + k)?;
            let w = t0.elapsed().as_secs_f64() * 1e3;
            Ok((w, measure::wait_idle(scope, IDLE_MAX)))
        });
        let (w, settled) = r?;
        if !settled {
            not_idle += 1;
        }
        let ms = iv.cpu_usec as f64 / 1e3;
        cpu.push(ms);
        wall.push(w);
        log(&format!(
            "  push {k}: {ms:.1} ms CPU (cgroup), replicated in {w:.0} ms{}",
            if settled { "" } else { ", NOT idle after" }
        ));
        // The first ref advertisement after the push, then the same again (warm).
        if let Some(advert) = advert {
            let (l, iv) = measure::measure_cpu(scope, || advert(&rid));
            first_ms.push(l);
            first_cpu.push(iv.cpu_usec as f64 / 1e3);
            const WARM: usize = 5;
            let (ls, iv) = measure::measure_cpu(scope, || {
                (0..WARM).map(|_| advert(&rid)).collect::<Vec<f64>>()
            });
            warm_ms.push(median(ls));
            warm_cpu.push(iv.cpu_usec as f64 / 1e3 / WARM as f64);
            log(&format!(
                "    first info/refs after it: {l:.2} ms ({:.2} ms CPU); warm {:.2} ms ({:.2} ms CPU)",
                first_cpu[first_cpu.len() - 1],
                warm_ms[warm_ms.len() - 1],
                warm_cpu[warm_cpu.len() - 1]
            ));
        }
    }
    // What the pushes triggered later (seedd: debounced maintenance), inside the window too.
    let t_tail = Instant::now();
    let (settled, iv) = measure::measure_cpu(scope, || {
        std::thread::sleep(tail);
        let deadline = Instant::now() + IDLE_MAX;
        while !maintenance_idle() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        measure::wait_idle(scope, IDLE_MAX)
    });
    let tail_ms = iv.cpu_usec as f64 / 1e3;
    let tail_secs = t_tail.elapsed().as_secs_f64();
    log(&format!(
        "  after the last push: {tail_ms:.1} ms CPU over {tail_secs:.0} s{}",
        if settled { "" } else { ", NOT idle at its end" }
    ));
    drop(pusher);
    if not_idle > 0 || !settled {
        log(&format!(
            "  WARNING: the server was not idle after {not_idle} pushes{}",
            if settled { "" } else { " and after the tail" }
        ));
    }
    Ok(PushFigures {
        per_push_incl_ms: (cpu.iter().sum::<f64>() + tail_ms) / pushes as f64,
        cpu_ms: cpu,
        wall_ms: wall,
        tail_ms,
        tail_secs,
        maintenance_runs: None,
        advert_first_ms: first_ms,
        advert_first_cpu_ms: first_cpu,
        advert_warm_ms: warm_ms,
        advert_warm_cpu_ms: warm_cpu,
    })
}

/// Median of `v` (NaN when empty).
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// The gossip phase's settings.
struct GossipConfig {
    /// Synthetic peers (sessions), all of which gossip.
    peers: usize,
    /// Seconds of gossip per round: one InventoryAnnouncement and one RefsAnnouncement per
    /// peer per second.
    secs: u64,
    /// Rounds in one session of the peers.
    rounds: usize,
    /// Repositories per InventoryAnnouncement.
    rids: usize,
    /// Longest wait for the server to settle after the last send.
    drain_max: Duration,
}

/// One server's gossip figures ([`gossip_phase`]), a value per round.
#[derive(Default)]
struct GossipFigures {
    /// Server cgroup CPU from the first send until settled, per second of gossip (ms/s).
    cpu_ms_per_s: Vec<f64>,
    /// The same per announcement received, µs.
    cpu_us_per_ann: Vec<f64>,
    /// Announcements sent to the server (2 per peer per second).
    sent: Vec<f64>,
    /// From the last send until settled (or the drain limit).
    drain_secs: Vec<f64>,
    /// memory.peak over the round, PSS and Σ RSS peaks sampled over it, MiB.
    peak_mib: Vec<f64>,
    pss_mib: Vec<f64>,
    rss_mib: Vec<f64>,
    /// Frames the peers received from the server from the first send until settled (relays).
    frames: Vec<f64>,
    /// Git streams the server opened to the peers (each a fetch attempt; refused), all rounds.
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
/// server (`nid` at `addr`, process `pid` in `scope`) and settle (not timed); then
/// `cfg.rounds` times, for `cfg.secs` s each sends every second a fresh signed
/// InventoryAnnouncement of `cfg.rids` repositories drawn at random from `rids` (different per
/// peer, round and second) and a RefsAnnouncement of the first of them with `RefsAt` = the
/// server's own namespace (nothing to fetch). Per round, the server's cgroup CPU from the
/// first send until it has settled (no frame to any peer for 7 s and under 5 % of a core), and
/// its memory over the round. `fetches`: the server's fetch counter (seedd's metric), to show
/// that no fetch was started.
#[allow(clippy::too_many_arguments)]
fn gossip_phase(
    rt: &tokio::runtime::Runtime,
    nid: NodeId,
    addr: std::net::SocketAddr,
    scope: &Arc<Scope>,
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
    let shared = Arc::new(Shared::default());
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
    let mut g = GossipFigures::default();
    let settle = rt.block_on(wait_settled(&shared, scope, GOSSIP_SETTLE_MAX));
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
        g.notes.push(format!(
            "not settled {:.0} s after the sessions connected ({:.2} cores busy); measuring anyway",
            settle.secs, settle.cpu_rate
        ));
    }
    let gossipers: Vec<(Keypair, tokio::sync::mpsc::Sender<Vec<u8>>)> = senders
        .iter()
        .map(|(i, tx)| (keys[*i].clone(), tx.clone()))
        .collect();
    let mut saturated = 0;
    for round in 0..cfg.rounds {
        let frames0 = shared.frames_in.load(Ordering::Relaxed);
        let ((sent, send_secs, drain), iv) = measure::measure(scope, || {
            let t0 = Instant::now();
            let sent = rt.block_on(gossip_rounds(&gossipers, nid, cfg.secs, |p, second| {
                let seed = ((p as u64) << 32) ^ ((round as u64) << 20) ^ second;
                let picked: Vec<RepoId> = sample(rids.len(), cfg.rids, seed)
                    .into_iter()
                    .map(|i| rids[i])
                    .collect();
                let first = picked[0];
                (picked, first)
            }));
            let send_secs = t0.elapsed().as_secs_f64();
            let drain = rt.block_on(wait_settled(&shared, scope, cfg.drain_max));
            (sent, send_secs, drain)
        });
        let cpu_ms = iv.cpu_usec as f64 / 1e3;
        let frames = shared.frames_in.load(Ordering::Relaxed) - frames0;
        if !alive(pid) {
            drop(gossipers);
            close(senders, tasks);
            return Err("the server exited during the gossip".into());
        }
        log(&format!(
            "  round {}/{}: {sent} announcements in {send_secs:.1} s, {} after {:.1} s more; CPU {cpu_ms:.0} ms ({:.1} ms/s, {:.1} µs/announcement), {frames} frames to the peers, memory.peak {:.0} MiB, PSS {:.0} MiB",
            round + 1,
            cfg.rounds,
            if drain.settled {
                "settled".to_owned()
            } else {
                format!("NOT settled ({:.2} cores busy)", drain.cpu_rate)
            },
            drain.secs,
            cpu_ms / cfg.secs as f64,
            1e3 * cpu_ms / sent.max(1) as f64,
            peak_mib(iv.memory_peak),
            mib(iv.pss_peak_kib)
        ));
        if !drain.settled {
            saturated += 1;
        }
        g.cpu_ms_per_s.push(cpu_ms / cfg.secs as f64);
        g.cpu_us_per_ann.push(1e3 * cpu_ms / sent.max(1) as f64);
        g.sent.push(sent as f64);
        g.drain_secs.push(drain.secs);
        g.peak_mib.push(peak_mib(iv.memory_peak));
        g.pss_mib.push(mib(iv.pss_peak_kib));
        g.rss_mib.push(mib(iv.rss_peak_kib));
        g.frames.push(frames as f64);
    }
    drop(gossipers);
    close(senders, tasks);
    g.opens = shared.opens.load(Ordering::Relaxed);
    g.fetches = match (fetches0, fetches()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    if saturated > 0 {
        g.notes.push(format!(
            "saturated in {saturated} of {} rounds: still busy {:.0} s after the last send; those rounds' CPU figures are lower bounds",
            cfg.rounds,
            cfg.drain_max.as_secs_f64()
        ));
    }
    let disconnects = shared.disconnects.lock().map(|d| d.len()).unwrap_or(0);
    if disconnects > 0 {
        g.notes
            .push(format!("{disconnects} sessions closed by the server"));
    }
    if g.opens > 0 || g.fetches.is_some_and(|f| f > 0.0) {
        g.notes.push(format!(
            "the server started fetches from the synthetic peers ({} git streams opened{}); its CPU includes them",
            g.opens,
            g.fetches
                .map_or(String::new(), |f| format!(", {f} fetches counted"))
        ));
    }
    Ok(g)
}
