//! Side-by-side benchmark of the peer-to-peer layer: `seedd` against the official
//! `radicle-node` 0.21.1, driven by the same load generator in one run, on loopback. Prints a
//! table of absolute figures and ratios (seedd / radicle-node) and writes the same figures as
//! JSON to `<target>/seedd-bench-p2p.json`. See `benches/README.md` and `benches/runs/p2p.md`.
//!
//! Measured under the rules of issue 29 §1 (`seedd_benches::measure`): each target runs in its
//! own cgroup [`Scope`] pinned to the server cores (seedd through a wrapper in
//! `SEEDD_TEST_BIN_DIR`, radicle-node through a wrapper first on `PATH`); this process, the load
//! generator, is pinned to the load cores. CPU is the scope's CPU (the target and everything it
//! starts), memory the scope's PSS, its cgroup memory peak (reset per phase), and Σ VmRSS as a
//! secondary figure. A steady-state load bench: both targets hold the same two small fixture
//! repositories, just copied (so in the page cache); no row is about cold storage reads, so
//! nothing is evicted.
//!
//! For each target the load generator (`seedd_benches::peers`: this process, tokio, one task
//! per session):
//!
//! 1. opens N sessions (default 1000, at most 128 handshakes in flight), each with its own node
//!    key: Noise handshake, the target's three initial messages, then its own NodeAnnouncement
//!    (SEED feature) and a Subscribe (empty filter, `since` = now);
//! 2. waits until the relayed gossip has died down, leaves all sessions idle for 5 s and reads
//!    the target's PSS: memory per idle session = (PSS now − PSS before the ramp) / N;
//! 3. gossip, in levels (default 20, then 200 gossipers — the load): the first G
//!    sessions each send a fresh signed InventoryAnnouncement and a RefsAnnouncement every
//!    second for 10 s; the target's CPU and memory are read once it has worked the level off
//!    (no relayed frame for 7 s, under 5 % of a core), or after 60 s (then: "saturated").
//!
//! Every session answers Ping with Pong and refuses git streams (Close); a session that the
//! target closes before the end counts as an error.
//!
//! One run per target, not ≥ 5 rounds: a run takes about 6 minutes (radicle-node needs 2½ to
//! accept 1,000 sessions); that is recorded as an override in the result.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use seedd_benches::measure::{self, Interval, Pinning, Scope};
use seedd_benches::peers::{gossip, ramp, wait_settled, Shared};
use seedd_benches::procfs::alive;
use seedd_benches::{
    ensure_seedd, env_usize, fd_soft_limit, fmt, profile_dir, radicle_version, write_table,
    TableLine,
};
use seedd_proto::crypto::{Keypair, NodeId, RepoId};
use seedd_tests::{
    copy_tree, fixtures, radicle_bin, workspace, RadNode, RadNodeOptions, Seed, SeedOptions,
};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// Concurrent sessions per target (`SEEDD_BENCH_P2P_SESSIONS` overrides).
const SESSIONS: usize = 1000;
/// Gossip levels, run one after the other: the number of sessions that send gossip
/// (`SEEDD_BENCH_P2P_GOSSIPERS`, comma-separated). 200 is the load; radicle-node
/// cannot work it off with 1000 peers, so a level it can finish comes first.
const GOSSIP_LEVELS: [usize; 2] = [20, 200];
/// Length of each gossip level in seconds: one round per second (`SEEDD_BENCH_P2P_SECS`).
const GOSSIP_SECS: u64 = 10;
/// Longest wait for a target to work off a gossip level after the last send
/// (`SEEDD_BENCH_P2P_DRAIN_MAX`, seconds); a target still busy then is reported as saturated.
const DRAIN_MAX: Duration = Duration::from_secs(60);
/// Handshakes in flight at once during the ramp (`SEEDD_BENCH_P2P_INFLIGHT`).
const INFLIGHT: usize = 128;
/// Idle time with all sessions established before the RSS is read.
const IDLE: Duration = Duration::from_secs(5);
/// Longest wait for a target to settle after the ramp.
const SETTLE_MAX: Duration = Duration::from_secs(300);
/// File descriptors kept free (per process) besides the sessions' sockets.
const FD_RESERVE: u64 = 300;
/// Target from the issue: memory per idle session.
const TARGET_KIB_PER_SESSION: f64 = 64.0;
/// The fixture repositories held by both targets; the gossip announces these (held by both,
/// so that neither target starts a fetch).
const REPOS: [&str; 2] = ["heartwood-fixture", "small-fixture"];

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    let prov = measure::provenance("p2p");
    // The load generator (this process) on the load cores; the targets' scopes on the server
    // cores.
    Pinning::pin_self_to_load();
    measure::record_override(
        "one run per target, not 5 rounds: a run takes about 6 minutes (radicle-node needs \
         about 2.5 minutes to accept 1,000 sessions, and up to 70 s per gossip level)",
    );
    measure::record_config_diff(
        "seedd: [p2p] relay = \"always\" (default auto), as radicle-node here",
    );
    measure::record_config_diff("seedd: [policy] default = \"allow\" (default block)");
    measure::record_config_diff(
        "radicle-node: relay always, --log-level info, network test, peers static, connect [], \
         preferredSeeds [], externalAddresses [] (the harness's RadNode settings)",
    );
    let started = Instant::now();
    let log = |msg: &str| eprintln!("[{:6.1}s] {msg}", started.elapsed().as_secs_f64());
    let mut notes: Vec<String> = Vec::new();

    let requested = env_usize("SEEDD_BENCH_P2P_SESSIONS", SESSIONS);
    let fd_soft = fd_soft_limit();
    let sessions = match fd_soft {
        Some(soft) if soft < requested as u64 + FD_RESERVE => {
            let n = soft.saturating_sub(FD_RESERVE).max(10) as usize;
            let note = format!(
                "open-files limit is {soft} (ulimit -n): sessions reduced from {requested} to {n}; run `ulimit -n 65536` first (benches/run.sh does)"
            );
            log(&format!("WARNING: {note}"));
            notes.push(note);
            n
        }
        _ => requested,
    };
    let cfg = LoadConfig {
        sessions,
        levels: std::env::var("SEEDD_BENCH_P2P_GOSSIPERS")
            .ok()
            .map(|v| {
                v.split(',')
                    .filter_map(|g| g.trim().parse::<usize>().ok())
                    .collect::<Vec<_>>()
            })
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| GOSSIP_LEVELS.to_vec())
            .into_iter()
            .map(|g| g.clamp(1, sessions))
            .collect(),
        gossip_secs: env_usize("SEEDD_BENCH_P2P_SECS", GOSSIP_SECS as usize).max(1) as u64,
        drain_max: Duration::from_secs(env_usize(
            "SEEDD_BENCH_P2P_DRAIN_MAX",
            DRAIN_MAX.as_secs() as usize,
        ) as u64),
        inflight: env_usize("SEEDD_BENCH_P2P_INFLIGHT", INFLIGHT).max(1),
    };
    // `SEEDD_BENCH_P2P_ONLY=seedd` or `=radicle-node` runs one target (for debugging).
    let only = std::env::var("SEEDD_BENCH_P2P_ONLY").unwrap_or_default();
    // Knobs away from their defaults (the phase labels name them too).
    let knobs = [
        (
            "SEEDD_BENCH_P2P_SESSIONS",
            cfg.sessions.to_string(),
            SESSIONS.to_string(),
        ),
        (
            "SEEDD_BENCH_P2P_GOSSIPERS",
            format!("{:?}", cfg.levels),
            format!("{GOSSIP_LEVELS:?}"),
        ),
        (
            "SEEDD_BENCH_P2P_SECS",
            cfg.gossip_secs.to_string(),
            GOSSIP_SECS.to_string(),
        ),
        (
            "SEEDD_BENCH_P2P_DRAIN_MAX",
            cfg.drain_max.as_secs().to_string(),
            DRAIN_MAX.as_secs().to_string(),
        ),
        (
            "SEEDD_BENCH_P2P_INFLIGHT",
            cfg.inflight.to_string(),
            INFLIGHT.to_string(),
        ),
    ];
    for (knob, value, default) in knobs {
        if value != default {
            measure::record_config_diff(&format!("bench: {knob} = {value} (default {default})"));
        }
    }
    if !only.is_empty() {
        measure::record_config_diff(&format!(
            "bench: SEEDD_BENCH_P2P_ONLY = {only} (one target)"
        ));
    }
    log(&format!(
        "{} sessions per target ({} handshakes in flight), gossip levels {:?} gossipers × {} s; open-files limit {}",
        cfg.sessions,
        cfg.inflight,
        cfg.levels,
        cfg.gossip_secs,
        fd_soft.map_or("unknown".into(), |s| s.to_string())
    ));

    if measure::cgroup_method().contains("v2 memory.peak") {
        notes.push(
            "memory.peak: cgroup v2 keeps a reset only for the file descriptor that wrote it, so \
             each phase's figure is the target's peak since it started"
                .into(),
        );
    }

    let profile = profile_dir();
    let target_dir = profile.parent().unwrap().to_owned();
    let seedd_bin = ensure_seedd(&log, &profile);
    let f = fixtures();
    let rids: Vec<RepoId> = REPOS.iter().map(|r| f.rid(r).parse().unwrap()).collect();
    // Wrapper directories that start each target in its scope.
    let work = tempfile::Builder::new()
        .prefix("p2p")
        .tempdir_in("/tmp")
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    let wanted = |label: &str| only.is_empty() || only == label;

    // seedd.
    let mut outcomes: Vec<Outcome> = Vec::new();
    if wanted("seedd") {
        log(&format!("starting seedd ({})", seedd_bin.display()));
        let scope = Arc::new(Scope::new("p2p-seedd"));
        let bin_dir = scope.wrapper_dir(&seedd_bin, &work.path().join("seedd-bin"), &["seedctl"]);
        let seed = measure::with_test_bin_dir(&bin_dir, || {
            Seed::start(SeedOptions {
                repos: REPOS.iter().map(|s| s.to_string()).collect(),
                extra_config: "[policy]\ndefault = \"allow\"\n".into(),
                p2p_config: "relay = \"always\"\n".into(),
                // The production default level; the harness default is debug.
                env: vec![("RUST_LOG".into(), "info".into())],
                ..SeedOptions::default()
            })
        });
        let seedd = Target {
            label: "seedd",
            pid: seed.child.id(),
            scope: scope.clone(),
            addr: seed.p2p,
            nid: seed.nid().parse().unwrap(),
            routing: Box::new(|| Some(seed.metric("seedd_p2p_routing_entries", &[]) as u64)),
        };
        log(&format!(
            "seedd pid {} p2p {} nid {}",
            seedd.pid, seedd.addr, seedd.nid
        ));
        let result = run_target(&rt, &seedd, &cfg, &rids, &log);
        let metrics = seedd_tests::http_get(&seed.admin_url("/metrics"), &[])
            .map(|(_, t)| t)
            .unwrap_or_default();
        let metrics = metrics
            .lines()
            .filter(|l| {
                l.starts_with("seedd_p2p_disconnects_total")
                    || l.starts_with("seedd_p2p_handshakes_total")
                    || l.starts_with("seedd_p2p_connections_rejected_total")
                    || l.starts_with("seedd_p2p_sessions")
            })
            .collect::<Vec<_>>()
            .join("; ");
        outcomes.push(Outcome {
            alive: alive(seedd.pid),
            logs: seed.logs(),
            metrics,
            result,
        });
        drop(seedd);
        drop(seed);
        drop(scope);
    }

    // radicle-node.
    if wanted("radicle-node") {
        log("starting radicle-node (bob)");
        let scope = Arc::new(Scope::new("p2p-radicle-node"));
        let rad = start_radicle_node("bob", &REPOS, &scope, &work.path().join("radicle-bin"));
        let inventory = rad_cmd(&rad, &["node", "inventory"]);
        for (name, rid) in REPOS.iter().zip(&rids) {
            if !inventory.contains(&rid.to_string()) {
                let note = format!(
                    "radicle-node's inventory lacks {name} ({rid}): announcing it makes the node fetch (refused by the load generator)"
                );
                log(&format!("WARNING: {note}"));
                notes.push(note);
            }
        }
        let radicle = Target {
            label: "radicle-node",
            pid: rad.child.id(),
            scope: scope.clone(),
            addr: SocketAddr::from(([127, 0, 0, 1], rad.port)),
            nid: rad.nid.parse().unwrap(),
            routing: Box::new(|| {
                let out = rad_cmd(&rad, &["node", "routing", "--json"]);
                Some(out.lines().filter(|l| l.starts_with('{')).count() as u64)
            }),
        };
        log(&format!(
            "radicle-node pid {} p2p {} nid {}",
            radicle.pid, radicle.addr, radicle.nid
        ));
        let result = run_target(&rt, &radicle, &cfg, &rids, &log);
        outcomes.push(Outcome {
            alive: alive(radicle.pid),
            logs: rad.logs(),
            metrics: String::new(),
            result,
        });
        drop(radicle);
        drop(rad);
        drop(scope);
    }
    rt.shutdown_timeout(Duration::from_secs(5));

    // Errors and what the logs say about them; the whole log is kept next to the JSON.
    for o in &outcomes {
        let res = &o.result;
        if !o.alive {
            notes.push(format!("{} exited during the bench", res.label));
        }
        if res.errors() > 0 || !o.alive {
            notes.push(format!(
                "{}: {} handshake failures, {} unexpected disconnects, {} protocol errors{}{}",
                res.label,
                res.failures.len(),
                res.disconnects.len(),
                res.protocol_errors,
                summarize("failures", &res.failures),
                summarize("disconnects", &res.disconnects),
            ));
            for line in log_problems(&o.logs, 12) {
                notes.push(format!("{} log: {line}", res.label));
            }
            if !o.metrics.is_empty() {
                notes.push(format!("{} metrics: {}", res.label, o.metrics));
            }
            let path = target_dir.join(format!("seedd-bench-p2p-{}.log", res.label));
            if std::fs::write(&path, &o.logs).is_ok() {
                notes.push(format!("{} log saved to {}", res.label, path.display()));
            }
        }
    }
    for o in &outcomes {
        for (l, g) in o.result.gossip.iter().enumerate() {
            if !g.settled {
                notes.push(format!(
                    "{} did not work off the {}-gossiper level: still {:.2} cores busy {:.0} s after the last send (routing entries added {} of {}); its CPU and memory figures for that level are lower bounds",
                    o.result.label,
                    g.gossipers,
                    g.cpu_rate_at_end,
                    g.drain_secs,
                    g.routing_added.map_or("?".into(), |r| r.to_string()),
                    2 * new_gossipers(&cfg.levels, l)
                ));
            }
        }
    }
    let find = |label: &str| outcomes.iter().find(|o| o.result.label == label);
    let seedd_out = find("seedd");
    let radicle_out = find("radicle-node");

    // Rows.
    let s = seedd_out.map(|o| &o.result);
    let r = radicle_out.map(|o| &o.result);
    let both = |f: &dyn Fn(&TargetResult) -> Option<f64>| (s.and_then(f), r.and_then(f));
    let mut rows: Vec<Row> = Vec::new();
    let mut add = |key: &str,
                   phase: &str,
                   metric: &str,
                   unit: &'static str,
                   better: &'static str,
                   v: (Option<f64>, Option<f64>)| {
        rows.push(Row {
            key: key.into(),
            phase: phase.into(),
            metric: metric.into(),
            unit,
            seedd: v.0,
            radicle: v.1,
            better,
        });
    };
    let ramp = format!("ramp: {} sessions", cfg.sessions);
    add(
        "established",
        &ramp,
        "sessions established",
        "count",
        "higher",
        both(&|t| Some(t.established as f64)),
    );
    add(
        "handshake_failures",
        &ramp,
        "handshake failures",
        "count",
        "lower",
        both(&|t| Some(t.failures.len() as f64)),
    );
    add(
        "handshakes_per_s",
        &ramp,
        "handshakes/s",
        "1/s",
        "higher",
        both(&|t| Some(t.established as f64 / t.ramp_secs)),
    );
    add(
        "handshake_p50_ms",
        &ramp,
        "handshake latency p50",
        "ms",
        "lower",
        both(&|t| t.latency_ms(0.50)),
    );
    add(
        "handshake_p99_ms",
        &ramp,
        "handshake latency p99",
        "ms",
        "lower",
        both(&|t| t.latency_ms(0.99)),
    );
    add(
        "ramp_cpu_s",
        &ramp,
        "target CPU during ramp",
        "s",
        "lower",
        both(&|t| Some(t.ramp_cpu)),
    );
    add(
        "setup_cpu_s",
        &ramp,
        "target CPU, ramp + settle",
        "s",
        "lower",
        both(&|t| Some(t.setup_cpu)),
    );
    add(
        "setup_cpu_ms_per_session",
        &ramp,
        "  per session",
        "ms",
        "lower",
        both(&|t| Some(1000.0 * t.setup_cpu / t.established.max(1) as f64)),
    );
    add(
        "settle_s",
        &ramp,
        "settle time after the ramp",
        "s",
        "lower",
        both(&|t| Some(t.settle_secs)),
    );
    add(
        "ramp_frames_to_clients",
        &ramp,
        "frames relayed to clients",
        "frames",
        "",
        both(&|t| Some(t.ramp_frames as f64)),
    );
    let idle = format!("idle: {} sessions, {} s", cfg.sessions, IDLE.as_secs());
    let mib = |b: Option<u64>| b.map(|b| b as f64 / 1048576.0);
    add(
        "pss_base_mib",
        &idle,
        "PSS before the ramp",
        "MiB",
        "lower",
        both(&|t| Some(t.pss_base as f64 / 1024.0)),
    );
    add(
        "pss_idle_mib",
        &idle,
        "PSS with all sessions idle",
        "MiB",
        "lower",
        both(&|t| Some(t.pss_idle as f64 / 1024.0)),
    );
    add(
        "pss_kib_per_idle_session",
        &idle,
        "memory per idle session (ΔPSS/N)",
        "KiB",
        "lower",
        both(&|t| t.kib_per_session()),
    );
    add(
        "memory_peak_setup_mib",
        &idle,
        "memory.peak, ramp to idle end",
        "MiB",
        "lower",
        both(&|t| mib(t.setup.memory_peak)),
    );
    add(
        "pss_peak_setup_mib",
        &idle,
        "PSS peak, ramp to idle end",
        "MiB",
        "lower",
        both(&|t| Some(t.setup.pss_peak_kib as f64 / 1024.0)),
    );
    add(
        "rss_sum_idle_mib",
        &idle,
        "Σ VmRSS, sessions idle (2nd.)",
        "MiB",
        "lower",
        both(&|t| Some(t.rss_sum_idle as f64 / 1024.0)),
    );
    add(
        "rss_sum_kib_per_idle_session",
        &idle,
        "  ΔΣ VmRSS/N (secondary)",
        "KiB",
        "lower",
        both(&|t| t.rss_kib_per_session()),
    );
    add(
        "idle_cpu_s",
        &idle,
        "target CPU while idle",
        "s",
        "lower",
        both(&|t| Some(t.idle_cpu)),
    );
    for (l, &g) in cfg.levels.iter().enumerate() {
        let phase = format!("gossip: {g} peers × (inv+refs)/s × {} s", cfg.gossip_secs);
        let lv = |t: &TargetResult| t.gossip.get(l).cloned();
        // Per-announcement figures only where the target finished the level.
        let worked_off = |t: &TargetResult| lv(t).filter(|x| x.settled);
        let key = |k: &str| format!("gossip{g}_{k}");
        add(
            &key("announcements_in"),
            &phase,
            "announcements sent to target",
            "count",
            "",
            both(&|t| lv(t).map(|x| x.sent as f64)),
        );
        add(
            &key("in_per_s"),
            &phase,
            "announcements in/s",
            "1/s",
            "",
            both(&|t| lv(t).map(|x| x.sent as f64 / x.send_secs)),
        );
        add(
            &key("cpu_s"),
            &phase,
            "target CPU (send + drain)",
            "s",
            "lower",
            both(&|t| lv(t).map(|x| x.cpu)),
        );
        add(
            &key("cpu_ms_per_1k_in"),
            &phase,
            "CPU per 1000 announcements in",
            "ms",
            "lower",
            both(&|t| worked_off(t).map(|x| 1e6 * x.cpu / x.sent.max(1) as f64)),
        );
        add(
            &key("in_per_cpu_s"),
            &phase,
            "announcements per CPU-second",
            "1/s",
            "higher",
            both(&|t| worked_off(t).map(|x| x.sent as f64 / x.cpu.max(0.01))),
        );
        add(
            &key("frames_to_clients"),
            &phase,
            "frames relayed to clients",
            "frames",
            "",
            both(&|t| lv(t).map(|x| x.frames as f64)),
        );
        add(
            &key("routing_added"),
            &phase,
            &format!(
                "routing entries added (of {})",
                2 * new_gossipers(&cfg.levels, l)
            ),
            "entries",
            "",
            both(&|t| lv(t).and_then(|x| x.routing_added.map(|r| r as f64))),
        );
        add(
            &key("drain_s"),
            &phase,
            "drain time after the last send",
            "s",
            "lower",
            both(&|t| lv(t).map(|x| x.drain_secs)),
        );
        add(
            &key("settled"),
            &phase,
            "worked off (1) / saturated (0)",
            "bool",
            "higher",
            both(&|t| lv(t).map(|x| if x.settled { 1.0 } else { 0.0 })),
        );
        add(
            &key("pss_end_mib"),
            &phase,
            "PSS after the drain",
            "MiB",
            "lower",
            both(&|t| lv(t).map(|x| x.pss_end as f64 / 1024.0)),
        );
        add(
            &key("memory_peak_mib"),
            &phase,
            "memory.peak in the level",
            "MiB",
            "lower",
            both(&|t| lv(t).and_then(|x| mib(x.interval.memory_peak))),
        );
        add(
            &key("pss_peak_mib"),
            &phase,
            "PSS peak in the level",
            "MiB",
            "lower",
            both(&|t| lv(t).map(|x| x.interval.pss_peak_kib as f64 / 1024.0)),
        );
        add(
            &key("rss_sum_end_mib"),
            &phase,
            "Σ VmRSS after drain (2nd.)",
            "MiB",
            "lower",
            both(&|t| lv(t).map(|x| x.rss_sum_end as f64 / 1024.0)),
        );
    }
    let whole = "whole run".to_owned();
    add(
        "unexpected_disconnects",
        &whole,
        "unexpected disconnects",
        "count",
        "lower",
        both(&|t| Some(t.disconnects.len() as f64)),
    );
    add(
        "errors",
        &whole,
        "errors (failures+disconnects)",
        "count",
        "lower",
        both(&|t| Some(t.errors() as f64)),
    );
    add(
        "pings_answered",
        &whole,
        "pings answered",
        "count",
        "",
        both(&|t| Some(t.pings as f64)),
    );
    add(
        "keepalives_sent",
        &whole,
        "keep-alive pings sent",
        "count",
        "",
        both(&|t| Some(t.keepalives as f64)),
    );
    add(
        "git_streams_refused",
        &whole,
        "git streams opened by target",
        "count",
        "",
        both(&|t| Some(t.opens as f64)),
    );

    let per_session = s.and_then(TargetResult::kib_per_session);
    let mem_met = per_session.is_some_and(|k| k <= TARGET_KIB_PER_SESSION);
    let errors_ok = seedd_out
        .is_some_and(|o| o.alive && o.result.errors() == 0 && o.result.established == cfg.sessions);
    let commit = git_describe();

    // Table.
    let mut t = String::new();
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "seedd {commit} vs radicle-node {} — p2p layer, loopback, one run per target (a run takes ~6 min), steady-state load (no cold/warm rows)",
        radicle_version()
    );
    let _ = writeln!(t, "{}", prov.line());
    let _ = writeln!(
        t,
        "ratio = seedd / radicle-node. Each target in its own cgroup on the server cores, the load generator on the load cores ({}).",
        Pinning::get().describe()
    );
    let _ = writeln!(
        t,
        "Target CPU and memory.peak: the target's cgroup ({}); memory.peak reset per phase, page cache included. PSS: Σ smaps_rollup of the cgroup's processes (peaks sampled every 20 ms). Σ VmRSS: secondary.",
        measure::cgroup_method()
    );
    let _ = writeln!(t);
    write_table(
        &mut t,
        ["phase", "metric", "seedd", "radicle-node", "ratio", "unit"],
        [36, 34, 10, 12, 8, 7],
        122,
        rows.iter().map(|r| TableLine {
            group: &r.phase,
            metric: &r.metric,
            seedd: fmt(r.seedd),
            other: fmt(r.radicle),
            ratio: r.ratio().map_or(String::new(), |x| {
                if x >= 100.0 {
                    format!("{x:.0}×")
                } else {
                    format!("{x:.2}×")
                }
            }),
            unit: r.unit,
            better: r.better,
        }),
    );
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "target: memory per idle session (ΔPSS/N) ≤ {TARGET_KIB_PER_SESSION:.0} KiB: seedd {} KiB → {}",
        fmt(per_session),
        if mem_met { "MET" } else { "NOT MET" }
    );
    let _ = writeln!(
        t,
        "target: {} concurrent sessions without errors: seedd {} established, {} errors → {}",
        cfg.sessions,
        fmt(s.map(|s| s.established as f64)),
        fmt(s.map(|s| s.errors() as f64)),
        if errors_ok { "MET" } else { "NOT MET" }
    );
    for n in &notes {
        let _ = writeln!(t, "note: {n}");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let _ = writeln!(t, "total bench time {elapsed:.0} s");
    print!("{t}");

    // JSON.
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let json = json!({
        "schema": 1,
        "unix_time": unix,
        "cpu_and_memory": measure::cgroup_method(),
        "pinning": Pinning::get().describe(),
        "rounds": 1,
        "duration_s": elapsed,
        "seedd_binary": seedd_bin.display().to_string(),
        "seedd_commit": commit,
        "radicle_node": radicle_version(),
        "settings": {
            "sessions_requested": requested,
            "sessions": cfg.sessions,
            "open_files_soft_limit": fd_soft,
            "handshakes_in_flight": cfg.inflight,
            "idle_s": IDLE.as_secs(),
            "gossip_levels": cfg.levels,
            "gossip_s": cfg.gossip_secs,
            "gossip_drain_max_s": cfg.drain_max.as_secs(),
            "gossip_rids": rids.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            "seedd": "RUST_LOG=info, [p2p] relay = \"always\", [policy] default = \"allow\"",
            "radicle_node": "--log-level info, relay always, seedingPolicy allow/all, peers static, no connect",
        },
        "rows": rows.iter().map(|r| json!({
            "key": r.key,
            "phase": r.phase,
            "metric": r.metric,
            "unit": r.unit,
            "seedd": r.seedd,
            "radicle_node": r.radicle,
            "ratio": r.ratio(),
            "better": r.better,
        })).collect::<Vec<_>>(),
        // The targets, in the layout benches/tools/targets.py reads.
        "targets": [
            {
                "target": "p2p: seedd memory per idle session (ΔPSS/N), KiB",
                "value": per_session,
                "goal": format!("≤ {TARGET_KIB_PER_SESSION:.0}"),
                "met": mem_met,
            },
            {
                "target": format!("p2p: seedd {} concurrent sessions without errors (errors)", cfg.sessions),
                "value": s.map(|s| s.errors() as f64),
                "goal": "0, all established, alive",
                "met": errors_ok,
            },
        ],
        "details": outcomes.iter().map(|o| o.result.details()).collect::<Vec<_>>(),
        "notes": notes,
    });
    let path = measure::write_result("p2p", prov, json);
    println!("JSON: {}", path.display());
}

// ------------------------------------------------------------------------------------------
// One target
// ------------------------------------------------------------------------------------------

struct LoadConfig {
    sessions: usize,
    /// Gossipers per gossip level.
    levels: Vec<usize>,
    gossip_secs: u64,
    drain_max: Duration,
    inflight: usize,
}

/// Gossipers that are new in level `l` (the first `levels[l]` sessions gossip; each new one
/// adds two routing entries).
fn new_gossipers(levels: &[usize], l: usize) -> usize {
    let before = levels[..l].iter().copied().max().unwrap_or(0);
    levels[l].saturating_sub(before)
}

/// One gossip level on one target.
#[derive(Clone)]
struct GossipResult {
    gossipers: usize,
    sent: u64,
    send_secs: f64,
    /// The target's CPU from the first send until the wait ended, seconds (cgroup).
    cpu: f64,
    /// The level measured on the target's scope: memory.peak (reset first), PSS and Σ RSS
    /// peaks.
    interval: Interval,
    frames: u64,
    drain_secs: f64,
    /// Whether the target went quiet within the drain limit.
    settled: bool,
    /// Its CPU use (cores) when the wait ended.
    cpu_rate_at_end: f64,
    /// PSS of the target's scope after the drain, KiB.
    pss_end: u64,
    /// Σ VmRSS of the target's scope after the drain, KiB (secondary).
    rss_sum_end: u64,
    routing_added: Option<u64>,
}

/// A node under test.
struct Target<'a> {
    label: &'static str,
    pid: u32,
    /// The cgroup the target (and all it starts) runs in.
    scope: Arc<Scope>,
    addr: SocketAddr,
    nid: NodeId,
    /// Number of routing-table entries (seedd: the gauge; radicle-node: `rad node routing`).
    routing: Box<dyn Fn() -> Option<u64> + 'a>,
}

/// What one target did under the load.
struct TargetResult {
    label: &'static str,
    established: usize,
    failures: Vec<String>,
    disconnects: Vec<String>,
    protocol_errors: u64,
    latencies_ms: Vec<f64>,
    ramp_secs: f64,
    ramp_cpu: f64,
    /// CPU from the start of the ramp until the relays have settled.
    setup_cpu: f64,
    settle_secs: f64,
    ramp_frames: u64,
    /// PSS of the target's scope before the ramp and with all sessions idle, KiB.
    pss_base: u64,
    pss_idle: u64,
    /// Σ VmRSS of the target's scope, the same two points, KiB (secondary).
    rss_sum_base: u64,
    rss_sum_idle: u64,
    /// Ramp, settle and idle measured on the target's scope (memory.peak reset first).
    setup: Interval,
    idle_cpu: f64,
    gossip: Vec<GossipResult>,
    pings: u64,
    keepalives: u64,
    opens: u64,
}

impl TargetResult {
    fn errors(&self) -> usize {
        self.failures.len() + self.disconnects.len() + self.protocol_errors as usize
    }

    /// (PSS idle − PSS before the ramp) / sessions, KiB.
    fn kib_per_session(&self) -> Option<f64> {
        (self.established > 0)
            .then(|| (self.pss_idle as f64 - self.pss_base as f64) / self.established as f64)
    }

    /// The same from Σ VmRSS (secondary).
    fn rss_kib_per_session(&self) -> Option<f64> {
        (self.established > 0).then(|| {
            (self.rss_sum_idle as f64 - self.rss_sum_base as f64) / self.established as f64
        })
    }

    fn latency_ms(&self, q: f64) -> Option<f64> {
        let mut v = self.latencies_ms.clone();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
        Some(v[i])
    }

    fn details(&self) -> Value {
        json!({
            "target": self.label,
            "handshake_failures": self.failures.iter().take(20).collect::<Vec<_>>(),
            "unexpected_disconnects": self.disconnects.iter().take(20).collect::<Vec<_>>(),
            "protocol_errors": self.protocol_errors,
            "ramp_s": self.ramp_secs,
            "settle_s": self.settle_secs,
            "keepalive_pings_sent": self.keepalives,
            "pss_base_kib": self.pss_base,
            "pss_idle_kib": self.pss_idle,
            "rss_sum_base_kib": self.rss_sum_base,
            "rss_sum_idle_kib": self.rss_sum_idle,
            "setup": interval_json(&self.setup),
            "gossip": self.gossip.iter().map(|g| json!({
                "gossipers": g.gossipers,
                "announcements": g.sent,
                "send_s": g.send_secs,
                "cpu_s": g.cpu,
                "drain_s": g.drain_secs,
                "settled": g.settled,
                "cpu_cores_at_end": g.cpu_rate_at_end,
                "frames_to_clients": g.frames,
                "pss_end_kib": g.pss_end,
                "rss_sum_end_kib": g.rss_sum_end,
                "level": interval_json(&g.interval),
                "routing_added": g.routing_added,
            })).collect::<Vec<_>>(),
        })
    }
}

/// A target's result, whether it survived, its log and (seedd) p2p metrics.
struct Outcome {
    result: TargetResult,
    alive: bool,
    logs: String,
    metrics: String,
}

fn run_target(
    rt: &tokio::runtime::Runtime,
    target: &Target<'_>,
    cfg: &LoadConfig,
    rids: &[RepoId],
    log: &dyn Fn(&str),
) -> TargetResult {
    let scope = &target.scope;
    let cpu = || scope.cpu_usec() as f64 / 1e6;
    std::thread::sleep(Duration::from_secs(2));
    let pss_base = scope.pss_kib();
    let rss_sum_base = scope.rss_kib();
    let routing_before = (target.routing)();
    let shared = Arc::new(Shared::default());
    let keys: Vec<Keypair> = (0..cfg.sessions)
        .map(|i| Keypair::mock(i as u64 + 1))
        .collect();

    // 1. Ramp, settle and idle, measured as one interval of the target's scope (its memory
    // peak reset first); CPU read between the steps.
    log(&format!(
        "{}: PSS {:.1} MiB (Σ RSS {:.1} MiB); opening {} sessions",
        target.label,
        pss_base as f64 / 1024.0,
        rss_sum_base as f64 / 1024.0,
        cfg.sessions
    ));
    let (setup_out, setup) = measure::measure(scope, || {
        let c0 = cpu();
        let t0 = Instant::now();
        let (senders, latencies, failures, tasks) =
            rt.block_on(ramp(target.nid, target.addr, cfg.inflight, &keys, &shared));
        let ramp_secs = t0.elapsed().as_secs_f64();
        let ramp_cpu = cpu() - c0;
        let established = latencies.len();
        log(&format!(
            "{}: {established} established, {} failed in {ramp_secs:.1} s ({:.0}/s); CPU {ramp_cpu:.2} s",
            target.label,
            failures.len(),
            established as f64 / ramp_secs
        ));
        let settle = rt.block_on(wait_settled(&shared, scope, SETTLE_MAX));
        if !settle.settled {
            log(&format!(
                "{}: WARNING: not settled after {:.0} s (still {:.2} cores busy)",
                target.label, settle.secs, settle.cpu_rate
            ));
        }
        let ramp_frames = shared.frames_in.load(Ordering::Relaxed);
        let c1 = cpu();
        let setup_cpu = c1 - c0;

        // 2. Idle.
        log(&format!(
            "{}: settled after {:.1} s more ({ramp_frames} frames received; CPU ramp + settle {setup_cpu:.2} s); idle {} s",
            target.label,
            settle.secs,
            IDLE.as_secs()
        ));
        std::thread::sleep(IDLE);
        let idle_cpu = cpu() - c1;
        let pss_idle = scope.pss_kib();
        let rss_sum_idle = scope.rss_kib();
        Setup {
            senders,
            latencies,
            failures,
            tasks,
            ramp_secs,
            ramp_cpu,
            setup_cpu,
            settle_secs: settle.secs,
            ramp_frames,
            idle_cpu,
            pss_idle,
            rss_sum_idle,
        }
    });
    let Setup {
        senders,
        latencies,
        failures,
        tasks,
        ramp_secs,
        ramp_cpu,
        setup_cpu,
        settle_secs,
        ramp_frames,
        idle_cpu,
        pss_idle,
        rss_sum_idle,
    } = setup_out;
    let established = latencies.len();
    log(&format!(
        "{}: PSS {:.1} MiB with {established} idle sessions → {:.1} KiB/session (Σ RSS {:.1} MiB); memory.peak {} MiB; idle CPU {idle_cpu:.2} s",
        target.label,
        pss_idle as f64 / 1024.0,
        (pss_idle as f64 - pss_base as f64) / established.max(1) as f64,
        rss_sum_idle as f64 / 1024.0,
        fmt(setup.memory_peak.map(|b| b as f64 / 1048576.0)),
    ));

    // 3. Gossip, level by level (the first `g` sessions gossip), each an interval of the
    // target's scope (memory peak reset first).
    let mut gossip_results = Vec::new();
    let mut routing_before = routing_before;
    for &g in &cfg.levels {
        let frames0 = shared.frames_in.load(Ordering::Relaxed);
        let gossipers: Vec<(Keypair, mpsc::Sender<Vec<u8>>)> = senders
            .iter()
            .take(g)
            .map(|(i, tx)| (keys[*i].clone(), tx.clone()))
            .collect();
        let ((sent, send_secs, settle), interval) = measure::measure(scope, || {
            let t2 = Instant::now();
            let sent = rt.block_on(gossip(&gossipers, target.nid, rids, cfg.gossip_secs));
            let send_secs = t2.elapsed().as_secs_f64();
            let settle = rt.block_on(wait_settled(&shared, scope, cfg.drain_max));
            (sent, send_secs, settle)
        });
        let cpu_used = interval.cpu_secs();
        let frames = shared.frames_in.load(Ordering::Relaxed) - frames0;
        let pss_end = scope.pss_kib();
        let rss_sum_end = scope.rss_kib();
        let routing_now = (target.routing)();
        let routing_added = match (routing_before, routing_now) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        routing_before = routing_now;
        log(&format!(
            "{}: {g} gossipers: {sent} announcements in {send_secs:.1} s, {} after {:.1} s more; CPU {cpu_used:.2} s, {frames} frames relayed, PSS {:.1} MiB, memory.peak {} MiB",
            target.label,
            if settle.settled {
                "settled".to_owned()
            } else {
                format!("NOT settled (still {:.2} cores busy)", settle.cpu_rate)
            },
            settle.secs,
            pss_end as f64 / 1024.0,
            fmt(interval.memory_peak.map(|b| b as f64 / 1048576.0)),
        ));
        gossip_results.push(GossipResult {
            gossipers: g,
            sent,
            send_secs,
            cpu: cpu_used,
            interval,
            frames,
            drain_secs: settle.secs,
            settled: settle.settled,
            cpu_rate_at_end: settle.cpu_rate,
            pss_end,
            rss_sum_end,
            routing_added,
        });
    }

    // Close everything.
    shared.closing.store(true, Ordering::SeqCst);
    drop(senders);
    rt.block_on(async {
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    });
    let disconnects = shared.disconnects.lock().unwrap().clone();
    TargetResult {
        label: target.label,
        established,
        failures,
        disconnects,
        protocol_errors: shared.protocol_errors.load(Ordering::Relaxed),
        latencies_ms: latencies,
        ramp_secs,
        ramp_cpu,
        setup_cpu,
        settle_secs,
        ramp_frames,
        pss_base,
        pss_idle,
        rss_sum_base,
        rss_sum_idle,
        setup,
        idle_cpu,
        gossip: gossip_results,
        pings: shared.pings.load(Ordering::Relaxed),
        keepalives: shared.keepalives.load(Ordering::Relaxed),
        opens: shared.opens.load(Ordering::Relaxed),
    }
}

/// What the ramp, settle and idle steps of [`run_target`] leave for the rest.
struct Setup {
    senders: Vec<(usize, mpsc::Sender<Vec<u8>>)>,
    latencies: Vec<f64>,
    failures: Vec<String>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    ramp_secs: f64,
    ramp_cpu: f64,
    setup_cpu: f64,
    settle_secs: f64,
    ramp_frames: u64,
    idle_cpu: f64,
    pss_idle: u64,
    rss_sum_idle: u64,
}

/// An [`Interval`] for the JSON details.
fn interval_json(iv: &Interval) -> Value {
    json!({
        "cpu_s": iv.cpu_secs(),
        "wall_s": iv.wall.as_secs_f64(),
        "memory_peak_bytes": iv.memory_peak,
        "pss_peak_kib": iv.pss_peak_kib,
        "rss_sum_peak_kib": iv.rss_peak_kib,
    })
}

// ------------------------------------------------------------------------------------------
// radicle-node
// ------------------------------------------------------------------------------------------

/// `RadNode::start` (copy of a fixture home, loopback, network test, static peers), but with
/// `--log-level info` (the harness uses debug), `relay: always` like seedd here, and the
/// fixture repositories `repos` added to its storage so that both targets hold the same ones.
/// It runs in `scope` (pinned to the server cores) through a wrapper written to `bin_dir` and
/// put first on `PATH` while it starts; `rad` and `git-remote-rad` beside it stay unwrapped.
fn start_radicle_node(name: &str, repos: &[&str], scope: &Scope, bin_dir: &Path) -> RadNode {
    let f = fixtures();
    let dir = tempfile::Builder::new()
        .prefix("rn")
        .tempdir_in("/tmp")
        .unwrap();
    let home = dir.path().join(name);
    copy_tree(&f.dir.join("homes").join(name), &home);
    for repo in repos {
        let canonical = f.rid(repo).trim_start_matches("rad:").to_owned();
        let to = home.join("storage").join(&canonical);
        if !to.exists() {
            copy_tree(&f.storage().join(&canonical), &to);
        }
    }
    let wrapped = scope.wrapper_dir(
        &radicle_bin("radicle-node"),
        bin_dir,
        &["rad", "git-remote-rad"],
    );
    measure::with_path_first(&wrapped, || {
        RadNode::start_with(
            name,
            &[],
            RadNodeOptions {
                dir: Some(dir),
                log_level: "info".into(),
                relay: Some("always".into()),
                wait_listening: true,
                ..RadNodeOptions::default()
            },
        )
    })
}

/// `rad <args>` as the node's user: trimmed stdout (empty on failure).
fn rad_cmd(node: &RadNode, args: &[&str]) -> String {
    Command::new(radicle_bin("rad"))
        .args(args)
        .env("RAD_HOME", &node.home)
        .env("RAD_PASSPHRASE", "")
        .env_remove("RAD_SOCKET")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

// ------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------

struct Row {
    key: String,
    phase: String,
    metric: String,
    unit: &'static str,
    seedd: Option<f64>,
    radicle: Option<f64>,
    /// "lower" or "higher" is better; "" for informational rows.
    better: &'static str,
}

impl Row {
    fn ratio(&self) -> Option<f64> {
        match (self.seedd, self.radicle) {
            _ if self.unit == "bool" => None,
            (Some(s), Some(r)) if r > 0.0 && s.is_finite() => Some(s / r),
            _ => None,
        }
    }
}

/// The workspace's commit (`+dirty` with local changes), for the record.
fn git_describe() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(workspace())
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let Some(head) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "(unknown commit)".into();
    };
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{head}+dirty")
    } else {
        head
    }
}

/// Up to `max` WARN/ERROR lines of a log (ANSI colours removed).
fn log_problems(logs: &str, max: usize) -> Vec<String> {
    logs.lines()
        .map(strip_ansi)
        .filter(|l| {
            ["WARN", "ERROR", "panic", "outbox_full", "Error", "error:"]
                .iter()
                .any(|w| l.contains(w))
        })
        .take(max)
        .chain(
            logs.lines()
                .rev()
                .take(3)
                .map(|l| format!("(last lines) {}", strip_ansi(l))),
        )
        .collect()
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// " (kind: first; …)" for a non-empty list, else "".
fn summarize(kind: &str, items: &[String]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let first: Vec<&str> = items.iter().take(3).map(String::as_str).collect();
    format!(
        "; {kind}: {}{}",
        first.join("; "),
        if items.len() > 3 { "; …" } else { "" }
    )
}
