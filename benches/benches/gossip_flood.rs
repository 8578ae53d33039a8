//! Gossip flood from one host (issue 11 point 4, "gossip state and work are bounded per
//! host"): memory stays flat while one IP cycles through thousands of fresh node ids sending
//! full inventories, and an honest peer keeps its session. See `benches/README.md` and
//! `benches/runs/gossip_flood.md`.
//!
//! Each round (`SEEDD_FLOOD_ROUNDS`, default 5; a round is about a minute):
//!
//! 1. Starts the release seedd on loopback, in a cgroup [`Scope`] of its own pinned to the
//!    server cores (a wrapper in `SEEDD_TEST_BIN_DIR`), with `p2p.rate.exempt_local = false`
//!    (loopback peers are otherwise not limited) and a connect-attempt bucket raised out of the
//!    way, so that the flood's sessions are admitted and only the gossip limits and caps are
//!    tested. `SEEDD_FLOOD_HOST_BUCKET=<fill_rate>,<capacity>` sets the per-host message
//!    bucket.
//! 2. An honest raw peer (fixed key, from 127.0.0.2) connects, announces itself (SEED) and a
//!    small inventory, answers pings and stays.
//! 3. From 127.0.0.3, N fresh node ids (`SEEDD_FLOOD_NODES`, default 2,000), a few at a time
//!    (`SEEDD_FLOOD_INFLIGHT`, default 8), each: connect, handshake, NodeAnnouncement (SEED),
//!    an InventoryAnnouncement with the wire maximum of 2,973 random repository ids, then
//!    close and wait for seedd to close too.
//! 4. Before, every 250 nodes (`SEEDD_FLOOD_EVERY`) and after: seedd's PSS, its cgroup's memory
//!    peak since the flood began, Σ VmRSS (secondary), its cgroup CPU, its `/metrics`
//!    (rate-limit hits by scope, address book, routing entries, stored announcements) and the
//!    honest peer's ping round trip. At the end: is the honest peer still connected
//!    (`GET /api/v1/peers`), and are its routes kept?
//!
//! This process (the flooding host and the honest peer) runs on the load cores. A
//! steady-state load bench of seedd alone: no cold/warm rows, nothing evicted, no ABBA.
//! Prints the series (median over the rounds at each point) and a summary (median [min–max]
//! over the rounds), and writes JSON to `<target>/seedd-bench-gossip-flood.json` (every
//! round's series included). Measures only; asserts nothing about the figures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use seedd_benches::measure::{self, Interval, Pinning, Scope, Summary};
use seedd_benches::procfs::alive;
use seedd_benches::{ensure_seedd, env_usize, fmt, profile_dir};
use seedd_proto::crypto::{Keypair, NodeId, RepoId};
use seedd_proto::wire::message::{InventoryAnnouncement, NodeAnnouncement, INVENTORY_LIMIT};
use seedd_proto::wire::{AnnouncementMessage, Frame, Link, Message, Ping};
use seedd_tests::{http_get, Seed, SeedOptions};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Fresh node ids sent by the flooding host (`SEEDD_FLOOD_NODES`).
const NODES: usize = 2000;
/// Flood sessions in flight at once (`SEEDD_FLOOD_INFLIGHT`).
const INFLIGHT: usize = 8;
/// A sample every this many flood nodes (`SEEDD_FLOOD_EVERY`).
const EVERY: usize = 250;
/// Rounds, each on a fresh seedd (`SEEDD_FLOOD_ROUNDS`; fewer is recorded as an override).
const ROUNDS: usize = 5;
const HONEST_IP: &str = "127.0.0.2";
const FLOOD_IP: &str = "127.0.0.3";
/// The honest peer's inventory (random repository ids).
const HONEST_REPOS: usize = 3;
/// Connect + handshake + initial messages, and the wait for seedd's close, per flood node.
const STEP_TIMEOUT: Duration = Duration::from_secs(20);
/// seedd refreshes its gossip gauges once a second.
const GAUGE_TICK: Duration = Duration::from_millis(1200);

/// seedd's config: limits apply to loopback peers; the connect-attempt bucket (per IP, 1/s,
/// burst 32 by default) is raised so that the flood reaches the gossip layer. The per-node
/// and per-host message buckets and the gossip caps are the defaults.
const RATE_CONFIG: &str =
    "[p2p.rate]\nexempt_local = false\nconnect = { fill_rate = 100000.0, capacity = 1000000.0 }\n";

/// [`RATE_CONFIG`] plus the host bucket from `SEEDD_FLOOD_HOST_BUCKET=<fill_rate>,<capacity>`
/// (default: seedd's, 20/s with a burst of 4,096).
fn rate_config() -> String {
    let host = std::env::var("SEEDD_FLOOD_HOST_BUCKET").ok().and_then(|v| {
        let (fill, cap) = v.split_once(',')?;
        let fill: f64 = fill.trim().parse().ok()?;
        let cap: f64 = cap.trim().parse().ok()?;
        Some(format!(
            "host = {{ fill_rate = {fill:?}, capacity = {cap:?} }}\n"
        ))
    });
    format!("{RATE_CONFIG}{}", host.unwrap_or_default())
}

/// What every round runs with.
struct FloodConfig {
    nodes: usize,
    inflight: usize,
    every: usize,
    /// seedd's `[p2p.rate]` section.
    rate: String,
}

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    let prov = measure::provenance("gossip_flood");
    // The flooding host and the honest peer on the load cores; seedd's scope on the server
    // cores.
    Pinning::pin_self_to_load();
    let started = Instant::now();
    let log = |msg: &str| eprintln!("[{:6.1}s] {msg}", started.elapsed().as_secs_f64());
    let cfg = FloodConfig {
        nodes: env_usize("SEEDD_FLOOD_NODES", NODES).max(1),
        inflight: env_usize("SEEDD_FLOOD_INFLIGHT", INFLIGHT).max(1),
        every: env_usize("SEEDD_FLOOD_EVERY", EVERY).max(1),
        rate: rate_config(),
    };
    let rounds = env_usize("SEEDD_FLOOD_ROUNDS", ROUNDS).max(1);
    if rounds < ROUNDS {
        measure::record_override(&format!(
            "SEEDD_FLOOD_ROUNDS={rounds} (fewer than the {ROUNDS} rounds the rules ask for)"
        ));
    }
    for (knob, value, default) in [
        ("SEEDD_FLOOD_NODES", cfg.nodes, NODES),
        ("SEEDD_FLOOD_INFLIGHT", cfg.inflight, INFLIGHT),
        ("SEEDD_FLOOD_EVERY", cfg.every, EVERY),
        ("SEEDD_FLOOD_ROUNDS", rounds, ROUNDS),
    ] {
        if value != default {
            measure::record_config_diff(&format!("bench: {knob} = {value} (default {default})"));
        }
    }
    measure::record_config_diff(
        "seedd: [p2p.rate] exempt_local = false (default true: loopback peers are not limited)",
    );
    measure::record_config_diff(
        "seedd: [p2p.rate] connect = { fill_rate = 100000, capacity = 1000000 } (default 1/s, \
         burst 32), so that the flood's sessions reach the gossip layer",
    );
    if let Ok(host) = std::env::var("SEEDD_FLOOD_HOST_BUCKET") {
        measure::record_config_diff(&format!(
            "seedd: [p2p.rate] host bucket from SEEDD_FLOOD_HOST_BUCKET={host} (default 20/s, burst 4,096)"
        ));
    }
    let mut notes: Vec<String> = Vec::new();
    if measure::cgroup_method().contains("v2 memory.peak") {
        notes.push(
            "memory.peak: cgroup v2 keeps a reset only for the file descriptor that wrote it, so \
             the figure is seedd's peak since it started (each round starts a fresh seedd)"
                .into(),
        );
    }
    log(&format!(
        "{rounds} rounds of {} fresh node ids from {FLOOD_IP}, {} in flight, a sample every {}; {}",
        cfg.nodes,
        cfg.inflight,
        cfg.every,
        prov.line()
    ));

    let profile = profile_dir();
    let seedd_bin = ensure_seedd(&log, &profile);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let work = tempfile::Builder::new()
        .prefix("flood")
        .tempdir_in("/tmp")
        .unwrap();
    log(&format!(
        "seedd rate config: {}",
        cfg.rate.replace('\n', "; ")
    ));

    let mut results: Vec<Round> = Vec::new();
    for round in 0..rounds {
        log(&format!("round {}/{rounds}", round + 1));
        let bin_dir = work.path().join(format!("seedd-bin-{round}"));
        results.push(run_round(round, &rt, &seedd_bin, &bin_dir, &cfg, &log));
    }
    rt.shutdown_timeout(Duration::from_secs(2));

    for (i, r) in results.iter().enumerate() {
        let n = i + 1;
        if !r.failures.is_empty() {
            notes.push(format!(
                "round {n}: {} flood nodes failed; first: {}",
                r.failures.len(),
                r.failures
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        if r.honest_closed {
            notes.push(format!(
                "round {n}: the honest session was closed: {}",
                r.honest_reason
            ));
        }
        if !r.seedd_alive {
            notes.push(format!("round {n}: seedd exited during the bench"));
        }
        if !r.warns.is_empty() {
            notes.push(format!(
                "round {n}: seedd warnings: {}",
                r.warns.join(" | ")
            ));
        }
    }

    // Figures over the rounds.
    let over = |f: &dyn Fn(&Round) -> Option<f64>| -> Option<Summary> {
        Summary::of(&results.iter().filter_map(f).collect::<Vec<_>>())
    };
    let mib = |k: u64| k as f64 / 1024.0;
    let bytes_mib = |b: Option<u64>| b.map(|b| b as f64 / 1048576.0);
    let nodes = cfg.nodes as f64;
    let summary: Vec<(&str, &str, &str, Option<Summary>)> = vec![
        (
            "flood_ok",
            "flood nodes completed",
            "",
            over(&|r| Some(r.ok as f64)),
        ),
        (
            "flood_failed",
            "flood nodes failed",
            "",
            over(&|r| Some(r.failures.len() as f64)),
        ),
        (
            "flood_s",
            "flood duration",
            "s",
            over(&|r| Some(r.flood_secs)),
        ),
        (
            "flood_nodes_per_s",
            "flood rate",
            "nodes/s",
            over(&|r| Some(nodes / r.flood_secs)),
        ),
        (
            "pss_start_mib",
            "seedd PSS before the flood",
            "MiB",
            over(&|r| Some(mib(r.pss_before))),
        ),
        (
            "pss_peak_mib",
            "seedd PSS peak, flood + 3.6 s (sampled every 20 ms)",
            "MiB",
            over(&|r| Some(mib(r.flood.pss_peak_kib))),
        ),
        (
            "pss_end_mib",
            "seedd PSS 3.6 s after the flood",
            "MiB",
            over(&|r| Some(mib(r.after().pss_kib))),
        ),
        (
            "memory_peak_mib",
            "seedd cgroup memory.peak, flood + 3.6 s (page cache incl.)",
            "MiB",
            over(&|r| bytes_mib(r.flood.memory_peak)),
        ),
        (
            "rss_sum_start_mib",
            "seedd Σ VmRSS before the flood (secondary)",
            "MiB",
            over(&|r| Some(mib(r.rss_sum_before))),
        ),
        (
            "rss_sum_peak_mib",
            "seedd Σ VmRSS peak, sampled (secondary)",
            "MiB",
            over(&|r| Some(mib(r.flood.rss_peak_kib))),
        ),
        (
            "rss_sum_end_mib",
            "seedd Σ VmRSS 3.6 s after the flood (secondary)",
            "MiB",
            over(&|r| Some(mib(r.after().rss_sum_kib))),
        ),
        (
            "cpu_s",
            "seedd CPU, flood + 3.6 s (cgroup)",
            "s",
            over(&|r| Some(r.flood.cpu_secs())),
        ),
        (
            "cpu_ms_per_node",
            "  per flood node",
            "ms",
            over(&|r| Some(1000.0 * r.flood.cpu_secs() / nodes)),
        ),
        (
            "rate_limited_host",
            "messages rate-limited by host",
            "",
            over(&|r| Some(r.after().limited_host - r.first().limited_host)),
        ),
        (
            "rate_limited_nid",
            "messages rate-limited by node id",
            "",
            over(&|r| Some(r.after().limited_nid - r.first().limited_nid)),
        ),
        (
            "rate_limited_ip",
            "connects rate-limited by IP",
            "",
            over(&|r| Some(r.after().limited_ip - r.first().limited_ip)),
        ),
        (
            "address_book_end",
            "address book nodes at the end",
            "",
            over(&|r| Some(r.after().address_book)),
        ),
        (
            "routes_end",
            "routing entries at the end",
            "",
            over(&|r| Some(r.after().routes)),
        ),
        (
            "stored_end",
            "stored announcements at the end",
            "",
            over(&|r| Some(r.after().stored)),
        ),
        (
            "honest_ping_ms_end",
            "honest peer's ping round trip at the end",
            "ms",
            over(&|r| r.after().honest_ping_ms),
        ),
        (
            "honest_routes",
            "honest peer's routes kept (of 3)",
            "",
            over(&|r| Some(r.honest_routes as f64)),
        ),
    ];
    let kept = results.iter().filter(|r| r.honest_kept).count();
    let alive_all = results.iter().all(|r| r.seedd_alive);

    // Table.
    let mut t = String::new();
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "gossip flood: {} fresh node ids from {FLOOD_IP}, each a NodeAnnouncement + an inventory of {INVENTORY_LIMIT} repositories; {rounds} rounds, a fresh seedd each ({})",
        cfg.nodes,
        seedd_bin.display()
    );
    let _ = writeln!(t, "{}", prov.line());
    let _ = writeln!(
        t,
        "seedd in its own cgroup on the server cores, flood and honest peer on the load cores ({}). CPU and memory.peak from seedd's cgroup ({}; memory.peak since the flood began, page cache included); PSS = Σ smaps_rollup of the cgroup's processes; Σ VmRSS secondary. Steady-state load: no cold/warm rows.",
        Pinning::get().describe(),
        measure::cgroup_method()
    );
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "series: median over the {rounds} rounds at each point (every round's series is in the JSON)"
    );
    let _ = writeln!(
        t,
        "{:>6} {:>7} {:>8} {:>9} {:>9} {:>7} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9}",
        "nodes",
        "time s",
        "PSS MiB",
        "mem.peak",
        "ΣRSS MiB",
        "CPU s",
        "inv. in",
        "lim.host",
        "lim.nid",
        "addrbook",
        "routes",
        "stored",
        "honest ms"
    );
    let _ = writeln!(t, "{}", "-".repeat(113));
    let points = results.iter().map(|r| r.samples.len()).min().unwrap_or(0);
    for i in 0..points {
        let med = |f: &dyn Fn(&Sample) -> Option<f64>| {
            Summary::of(
                &results
                    .iter()
                    .filter_map(|r| f(&r.samples[i]))
                    .collect::<Vec<_>>(),
            )
            .map(|s| s.median)
        };
        let _ = writeln!(
            t,
            "{:>6} {:>7} {:>8} {:>9} {:>9} {:>7} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9}",
            results[0].samples[i].nodes,
            fmt(med(&|s| Some(s.secs))),
            fmt(med(&|s| Some(mib(s.pss_kib)))),
            fmt(med(&|s| bytes_mib(s.memory_peak))),
            fmt(med(&|s| Some(mib(s.rss_sum_kib)))),
            fmt(med(&|s| Some(s.cpu_s))),
            fmt(med(&|s| Some(s.inventories_in))),
            fmt(med(&|s| Some(s.limited_host))),
            fmt(med(&|s| Some(s.limited_nid))),
            fmt(med(&|s| Some(s.address_book))),
            fmt(med(&|s| Some(s.routes))),
            fmt(med(&|s| Some(s.stored))),
            fmt(med(&|s| s.honest_ping_ms)),
        );
    }
    let _ = writeln!(
        t,
        "(the last line is 3.6 s after the flood ended; gauges lag by up to 1 s; mem.peak MiB is the cgroup's peak since the flood began)"
    );
    let _ = writeln!(t);
    let _ = writeln!(t, "{:<62} {:<24} unit", "figure", "median [min–max]");
    let _ = writeln!(t, "{}", "-".repeat(96));
    for (_, label, unit, s) in &summary {
        let _ = writeln!(t, "{label:<62} {:<24} {unit}", show(*s));
    }
    let _ = writeln!(
        t,
        "{:<62} {kept} of {rounds} rounds (listed in /api/v1/peers, never closed, answers pings)",
        "honest session kept",
    );
    let _ = writeln!(
        t,
        "{:<62} {}",
        "seedd alive at the end",
        if alive_all {
            "every round"
        } else {
            "NO (see notes)"
        }
    );
    for n in &notes {
        let _ = writeln!(t, "note: {n}");
    }
    let _ = writeln!(
        t,
        "total bench time {:.0} s",
        started.elapsed().as_secs_f64()
    );
    print!("{t}");

    let mem_peak = summary
        .iter()
        .find(|(k, ..)| *k == "memory_peak_mib")
        .and_then(|(.., s)| *s);
    let doc = json!({
        "rounds": rounds,
        "cpu_and_memory": measure::cgroup_method(),
        "pinning": Pinning::get().describe(),
        "config": {
            "nodes": cfg.nodes,
            "inflight": cfg.inflight,
            "every": cfg.every,
            "inventory_per_node": INVENTORY_LIMIT,
            "flood_ip": FLOOD_IP,
            "honest_ip": HONEST_IP,
            "seedd_config": cfg.rate,
        },
        "summary": summary
            .iter()
            .map(|(k, label, unit, s)| (
                (*k).to_owned(),
                json!({ "figure": label, "unit": unit, "over_rounds": s.map(|s| s.to_json()) }),
            ))
            .collect::<serde_json::Map<_, _>>(),
        "honest_kept_rounds": kept,
        "seedd_alive_every_round": alive_all,
        "per_round": results.iter().map(Round::json).collect::<Vec<_>>(),
        // In the layout benches/tools/targets.py reads; the issue gives no number for memory.
        "targets": [
            {
                "target": format!("gossip_flood: seedd cgroup memory.peak, {} fresh node ids from one IP, MiB (median)", cfg.nodes),
                "value": mem_peak.map(|s| s.median),
                "goal": "bounded per host (issue 11 point 4; no number)",
                "met": Value::Null,
            },
            {
                "target": "gossip_flood: honest session and its routes kept through the flood (rounds)",
                "value": kept as f64,
                "goal": format!("every round ({rounds})"),
                "met": kept == rounds && alive_all,
            },
        ],
        "notes": notes,
        "table": t,
    });
    let path = measure::write_result("gossip-flood", prov, doc);
    log(&format!("wrote {}", path.display()));
}

/// "median [min–max]" with [`fmt`]'s figures, or "n/a".
fn show(s: Option<Summary>) -> String {
    match s {
        Some(s) if s.n > 1 => format!(
            "{} [{}–{}]",
            fmt(Some(s.median)),
            fmt(Some(s.min)),
            fmt(Some(s.max))
        ),
        Some(s) => fmt(Some(s.median)),
        None => "n/a".into(),
    }
}

// ------------------------------------------------------------------------------------------
// One round
// ------------------------------------------------------------------------------------------

/// One round on a fresh seedd.
struct Round {
    /// Before the flood, every `every` nodes, and 3.6 s after the flood (last).
    samples: Vec<Sample>,
    ok: u64,
    failures: Vec<String>,
    flood_secs: f64,
    /// seedd's PSS and Σ VmRSS right before the flood, KiB.
    pss_before: u64,
    rss_sum_before: u64,
    /// The flood and the 3.6 s after it, measured on seedd's scope (memory peak reset first).
    flood: Interval,
    honest_listed: bool,
    honest_closed: bool,
    honest_reason: String,
    honest_pings: u64,
    honest_routes: usize,
    honest_kept: bool,
    seedd_alive: bool,
    /// Up to 5 WARN/ERROR lines of seedd's log.
    warns: Vec<String>,
}

impl Round {
    fn first(&self) -> &Sample {
        &self.samples[0]
    }

    fn after(&self) -> &Sample {
        &self.samples[self.samples.len() - 1]
    }

    fn json(&self) -> Value {
        json!({
            "samples": self.samples.iter().map(Sample::json).collect::<Vec<_>>(),
            "flood_ok": self.ok,
            "flood_failed": self.failures.len(),
            "flood_failures": self.failures.iter().take(10).collect::<Vec<_>>(),
            "flood_secs": self.flood_secs,
            "pss_start_kib": self.pss_before,
            "rss_sum_start_kib": self.rss_sum_before,
            "flood_interval": {
                "cpu_s": self.flood.cpu_secs(),
                "wall_s": self.flood.wall.as_secs_f64(),
                "memory_peak_bytes": self.flood.memory_peak,
                "pss_peak_kib": self.flood.pss_peak_kib,
                "rss_sum_peak_kib": self.flood.rss_peak_kib,
            },
            "pss_end_kib": self.after().pss_kib,
            "rss_sum_end_kib": self.after().rss_sum_kib,
            "rate_limited_host": self.after().limited_host - self.first().limited_host,
            "rate_limited_nid": self.after().limited_nid - self.first().limited_nid,
            "rate_limited_ip": self.after().limited_ip - self.first().limited_ip,
            "address_book_end": self.after().address_book,
            "routes_end": self.after().routes,
            "stored_end": self.after().stored,
            "honest_kept": self.honest_kept,
            "honest_listed": self.honest_listed,
            "honest_closed": self.honest_closed,
            "honest_close_reason": self.honest_reason,
            "honest_pings_answered": self.honest_pings,
            "honest_routes": self.honest_routes,
            "seedd_alive": self.seedd_alive,
            "seedd_warnings": self.warns,
        })
    }
}

/// Start seedd in a fresh scope (wrapper written to `bin_dir`), connect the honest peer, flood,
/// sample, and check the honest peer.
fn run_round(
    round: usize,
    rt: &tokio::runtime::Runtime,
    seedd_bin: &Path,
    bin_dir: &Path,
    cfg: &FloodConfig,
    log: &dyn Fn(&str),
) -> Round {
    let scope = Arc::new(Scope::new(&format!("flood-seedd-{round}")));
    let wrapped = scope.wrapper_dir(seedd_bin, bin_dir, &["seedctl"]);
    let seed = measure::with_test_bin_dir(&wrapped, || {
        Seed::start(SeedOptions {
            extra_config: cfg.rate.clone(),
            // The production default level; the harness default is debug.
            env: vec![("RUST_LOG".into(), "info".into())],
            ..SeedOptions::default()
        })
    });
    let pid = seed.child.id();
    let remote: NodeId = seed.nid().parse().unwrap();
    let addr = seed.p2p;
    log(&format!("seedd pid {pid} p2p {addr} nid {remote}"));

    // The honest peer.
    let honest_key = Keypair::mock(4242);
    let honest_nid = honest_key.nid();
    let honest_rids: Vec<RepoId> = (0..HONEST_REPOS)
        .map(|j| random_rid(u64::MAX, j as u64))
        .collect();
    let honest = Arc::new(HonestState::default());
    let (probe_tx, probe_rx) = mpsc::channel::<oneshot::Sender<()>>(4);
    {
        let (ready_tx, ready_rx) = oneshot::channel();
        let honest = honest.clone();
        let key = honest_key.clone();
        let rids = honest_rids.clone();
        rt.spawn(async move {
            honest_session(key, remote, addr, rids, honest, probe_rx, ready_tx).await;
        });
        match rt.block_on(ready_rx) {
            Ok(Ok(())) => log(&format!(
                "honest peer {honest_nid} connected from {HONEST_IP}"
            )),
            Ok(Err(e)) => panic!("the honest peer could not connect: {e}"),
            Err(_) => panic!("the honest peer task ended"),
        }
    }
    // Let seedd store the honest peer's announcements and refresh its gauges.
    std::thread::sleep(GAUGE_TICK * 2);

    let probe = || -> Option<f64> {
        rt.block_on(async {
            let (tx, rx) = oneshot::channel();
            let t = Instant::now();
            probe_tx.send(tx).await.ok()?;
            tokio::time::timeout(Duration::from_secs(10), rx)
                .await
                .ok()?
                .ok()?;
            Some(t.elapsed().as_secs_f64() * 1000.0)
        })
    };

    let pss_before = scope.pss_kib();
    let rss_sum_before = scope.rss_kib();
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let ok = Arc::new(AtomicU64::new(0));
    let sem = Arc::new(Semaphore::new(cfg.inflight));
    // The flood and the 3.6 s after it, as one interval of seedd's scope (memory peak reset
    // first, PSS and Σ RSS sampled); the samples read the scope along the way.
    let ((samples, flood_secs), flood) = measure::measure(&scope, || {
        let cpu0 = scope.cpu_usec();
        let flood_start = Instant::now();
        let sample = |sent: usize| -> Sample {
            let text = http_get(&seed.admin_url("/metrics"), &[])
                .map(|(_, t)| t)
                .unwrap_or_default();
            let m = |name: &str, labels: &[&str]| seedd_tests::metric_in(&text, name, labels);
            Sample {
                nodes: sent,
                secs: flood_start.elapsed().as_secs_f64(),
                pss_kib: scope.pss_kib(),
                memory_peak: scope.memory_peak(),
                rss_sum_kib: scope.rss_kib(),
                cpu_s: scope.cpu_usec().saturating_sub(cpu0) as f64 / 1e6,
                limited_host: m("seedd_p2p_rate_limited_total", &["scope=\"host\""]),
                limited_nid: m("seedd_p2p_rate_limited_total", &["scope=\"nid\""]),
                limited_ip: m("seedd_p2p_rate_limited_total", &["scope=\"ip\""]),
                rejected: m("seedd_p2p_connections_rejected_total", &[]),
                handshakes_ok: m("seedd_p2p_handshakes_total", &["result=\"ok\""]),
                inventories_in: m(
                    "seedd_p2p_messages_total",
                    &["direction=\"in\"", "type=\"inventory"],
                ),
                address_book: m("seedd_p2p_address_book_nodes", &[]),
                routes: m("seedd_p2p_routing_entries", &[]),
                stored: m("seedd_p2p_stored_announcements", &[]),
                honest_ping_ms: probe(),
            }
        };
        let mut samples = vec![sample(0)];
        log(&format!("before: {}", samples[0].line()));

        // The flood, in chunks of `every` nodes.
        let mut sent = 0;
        while sent < cfg.nodes {
            let chunk = cfg.every.min(cfg.nodes - sent);
            rt.block_on(async {
                let mut tasks = tokio::task::JoinSet::new();
                for i in sent..sent + chunk {
                    let permit = sem.clone().acquire_owned().await.unwrap();
                    let failures = failures.clone();
                    let ok = ok.clone();
                    tasks.spawn(async move {
                        let r = tokio::time::timeout(STEP_TIMEOUT * 2, flood_node(i, remote, addr))
                            .await
                            .unwrap_or_else(|_| Err("timed out".into()));
                        drop(permit);
                        match r {
                            Ok(()) => {
                                ok.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => failures.lock().unwrap().push(format!("node {i}: {e}")),
                        }
                    });
                }
                while tasks.join_next().await.is_some() {}
            });
            sent += chunk;
            let s = sample(sent);
            log(&s.line());
            samples.push(s);
        }
        let flood_secs = flood_start.elapsed().as_secs_f64();
        // Let the persistence queue and the gauges catch up.
        std::thread::sleep(GAUGE_TICK * 3);
        let after = sample(sent);
        log(&format!("after: {}", after.line()));
        samples.push(after);
        (samples, flood_secs)
    });
    log(&format!(
        "round {}: flood {flood_secs:.1} s; CPU {:.2} s, memory.peak {} MiB, PSS peak {:.1} MiB",
        round + 1,
        flood.cpu_secs(),
        fmt(flood.memory_peak.map(|b| b as f64 / 1048576.0)),
        flood.pss_peak_kib as f64 / 1024.0
    ));

    // The honest peer.
    let peers = seed.api("/api/v1/peers");
    let honest_listed = peers["peers"].as_array().is_some_and(|ps| {
        ps.iter()
            .any(|p| p["nid"].as_str() == Some(honest_nid.to_string().as_str()))
    });
    let routes = seed.api(&format!("/api/v1/routing?nid={honest_nid}"));
    let honest_routes = routes["routes"].as_array().map_or(0, Vec::len);
    let honest_closed = honest.closed.load(Ordering::SeqCst);
    let after_ping = samples.last().and_then(|s| s.honest_ping_ms);
    let honest_kept = honest_listed && !honest_closed && after_ping.is_some();
    let seedd_alive = alive(pid);
    let warns: Vec<String> = seed
        .logs()
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .take(5)
        .map(str::to_owned)
        .collect();
    let failures = failures.lock().unwrap().clone();
    let honest_reason = honest.reason.lock().unwrap().clone();
    drop(probe_tx);
    drop(seed);
    drop(scope);
    Round {
        samples,
        ok: ok.load(Ordering::Relaxed),
        failures,
        flood_secs,
        pss_before,
        rss_sum_before,
        flood,
        honest_listed,
        honest_closed,
        honest_reason,
        honest_pings: honest.pings.load(Ordering::Relaxed),
        honest_routes,
        honest_kept,
        seedd_alive,
        warns,
    }
}

// ------------------------------------------------------------------------------------------
// Samples
// ------------------------------------------------------------------------------------------

struct Sample {
    nodes: usize,
    secs: f64,
    /// seedd's PSS (Σ over its cgroup), KiB.
    pss_kib: u64,
    /// seedd's cgroup memory peak since the flood began, bytes (`None` without a memory
    /// cgroup).
    memory_peak: Option<u64>,
    /// Σ VmRSS over seedd's cgroup, KiB (secondary).
    rss_sum_kib: u64,
    /// seedd's cgroup CPU since the flood began, seconds.
    cpu_s: f64,
    limited_host: f64,
    limited_nid: f64,
    limited_ip: f64,
    rejected: f64,
    handshakes_ok: f64,
    inventories_in: f64,
    address_book: f64,
    routes: f64,
    stored: f64,
    honest_ping_ms: Option<f64>,
}

impl Sample {
    fn line(&self) -> String {
        format!(
            "{} nodes, {:.1} s: PSS {:.1} MiB, memory.peak {} MiB, Σ RSS {:.1} MiB, CPU {:.2} s, inventories in {}, rate-limited host {} nid {}, address book {}, routes {}, stored {}, honest ping {}",
            self.nodes,
            self.secs,
            self.pss_kib as f64 / 1024.0,
            fmt(self.memory_peak.map(|b| b as f64 / 1048576.0)),
            self.rss_sum_kib as f64 / 1024.0,
            self.cpu_s,
            self.inventories_in,
            self.limited_host,
            self.limited_nid,
            self.address_book,
            self.routes,
            self.stored,
            self.honest_ping_ms
                .map_or("none".into(), |ms| format!("{ms:.1} ms"))
        )
    }

    fn json(&self) -> Value {
        json!({
            "nodes": self.nodes,
            "secs": self.secs,
            "pss_kib": self.pss_kib,
            "memory_peak_bytes": self.memory_peak,
            "rss_sum_kib": self.rss_sum_kib,
            "cpu_s": self.cpu_s,
            "rate_limited_host": self.limited_host,
            "rate_limited_nid": self.limited_nid,
            "rate_limited_ip": self.limited_ip,
            "connections_rejected": self.rejected,
            "handshakes_ok": self.handshakes_ok,
            "inventories_in": self.inventories_in,
            "address_book_nodes": self.address_book,
            "routing_entries": self.routes,
            "stored_announcements": self.stored,
            "honest_ping_ms": self.honest_ping_ms,
        })
    }
}

// ------------------------------------------------------------------------------------------
// Peers
// ------------------------------------------------------------------------------------------

#[derive(Default)]
struct HonestState {
    closed: AtomicBool,
    reason: Mutex<String>,
    /// Pings from seedd answered.
    pings: AtomicU64,
}

/// The honest peer: announces itself and `rids`, answers pings, and on each probe sends a
/// Ping and signals when the Pong arrives.
async fn honest_session(
    key: Keypair,
    remote: NodeId,
    addr: SocketAddr,
    rids: Vec<RepoId>,
    state: Arc<HonestState>,
    mut probes: mpsc::Receiver<oneshot::Sender<()>>,
    ready: oneshot::Sender<Result<(), String>>,
) {
    let established = async {
        let mut stream = connect_from(HONEST_IP, addr).await?;
        let (decoder, _) = seedd_benches::establish(&mut stream, &key, remote).await?;
        let now = now_ms();
        let mut out = Vec::new();
        for m in [
            node_announcement(now),
            AnnouncementMessage::Inventory(InventoryAnnouncement {
                inventory: rids,
                timestamp: now,
            }),
        ] {
            Frame::gossip(Link::Outbound, Message::Announcement(m.sign(&key).unwrap()))
                .encode_into(&mut out)
                .unwrap();
        }
        stream
            .write_all(&out)
            .await
            .map_err(|e| format!("sending announcements: {e}"))?;
        Ok::<_, String>((stream, decoder))
    }
    .await;
    let (mut stream, mut decoder) = match established {
        Ok(x) => {
            let _ = ready.send(Ok(()));
            x
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let close = |why: String| {
        *state.reason.lock().unwrap() = why;
        state.closed.store(true, Ordering::SeqCst);
    };
    let (mut rd, mut wr) = stream.split();
    let mut buf = vec![0u8; 64 * 1024];
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    loop {
        tokio::select! {
            r = rd.read(&mut buf) => {
                let n = match r {
                    Ok(0) => return close("closed by seedd".into()),
                    Ok(n) => n,
                    Err(e) => return close(format!("read error: {e}")),
                };
                decoder.push(&buf[..n]);
                let mut reply = Vec::new();
                loop {
                    match decoder.next_frame() {
                        Ok(Some(Frame::Gossip { message: Message::Ping(ping), .. })) => {
                            state.pings.fetch_add(1, Ordering::Relaxed);
                            Frame::gossip(Link::Outbound, Message::Pong { zeroes: ping.ponglen })
                                .encode_into(&mut reply)
                                .unwrap();
                        }
                        Ok(Some(Frame::Gossip { message: Message::Pong { .. }, .. })) => {
                            for w in waiting.drain(..) {
                                let _ = w.send(());
                            }
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => return close(format!("undecodable frame: {e}")),
                    }
                }
                decoder.shrink(64 * 1024);
                if !reply.is_empty() && wr.write_all(&reply).await.is_err() {
                    return close("write error".into());
                }
            }
            p = probes.recv() => match p {
                Some(done) => {
                    waiting.push(done);
                    let ping = Frame::gossip(Link::Outbound, Message::Ping(Ping { ponglen: 1, zeroes: 0 }));
                    if wr.write_all(&ping.encode().unwrap()).await.is_err() {
                        return close("write error".into());
                    }
                }
                None => return,
            },
        }
    }
}

/// One flooding node: a fresh key from [`FLOOD_IP`], its NodeAnnouncement and a full
/// inventory, then close; returns once seedd has closed too.
async fn flood_node(i: usize, remote: NodeId, addr: SocketAddr) -> Result<(), String> {
    let key = Keypair::generate();
    let mut stream = tokio::time::timeout(STEP_TIMEOUT, async {
        let mut stream = connect_from(FLOOD_IP, addr).await?;
        seedd_benches::establish(&mut stream, &key, remote).await?;
        Ok::<_, String>(stream)
    })
    .await
    .map_err(|_| "handshake timed out".to_owned())??;
    let now = now_ms();
    let inventory = (0..INVENTORY_LIMIT)
        .map(|j| random_rid(i as u64, j as u64))
        .collect();
    let mut out = Vec::with_capacity(64 * 1024);
    for m in [
        node_announcement(now),
        AnnouncementMessage::Inventory(InventoryAnnouncement {
            inventory,
            timestamp: now,
        }),
    ] {
        Frame::gossip(Link::Outbound, Message::Announcement(m.sign(&key).unwrap()))
            .encode_into(&mut out)
            .unwrap();
    }
    stream
        .write_all(&out)
        .await
        .map_err(|e| format!("sending: {e}"))?;
    stream
        .shutdown()
        .await
        .map_err(|e| format!("shutdown: {e}"))?;
    // seedd reads our frames before the end of the stream, then closes.
    let mut buf = vec![0u8; 16 * 1024];
    tokio::time::timeout(STEP_TIMEOUT, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .map_err(|_| "seedd did not close".to_owned())
}

async fn connect_from(src: &str, to: SocketAddr) -> Result<TcpStream, String> {
    let socket = TcpSocket::new_v4().map_err(|e| format!("socket: {e}"))?;
    socket
        .bind(format!("{src}:0").parse().unwrap())
        .map_err(|e| format!("bind {src}: {e}"))?;
    let stream = socket
        .connect(to)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// A SEED node announcement (no addresses).
fn node_announcement(timestamp: u64) -> AnnouncementMessage {
    AnnouncementMessage::Node(NodeAnnouncement {
        version: 1,
        features: 1,
        timestamp,
        alias: "flood".parse().unwrap(),
        addresses: vec![],
        nonce: 1,
        agent: "/seedd-bench:0.1/".parse().unwrap(),
    })
}

/// A pseudo-random repository id (splitmix64 of the node and index).
fn random_rid(node: u64, j: u64) -> RepoId {
    let mut x = node.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ j.wrapping_add(0x1234_5678);
    let mut bytes = [0u8; 20];
    for chunk in bytes.chunks_mut(8) {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_be_bytes()[..chunk.len()]);
    }
    RepoId::from(bytes)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
