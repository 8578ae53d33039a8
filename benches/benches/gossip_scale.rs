//! Gossip at 10,000 peers (issue 30 §2): how many unique announcements seedd verifies and
//! stores per second when each reaches it through 5 relaying peers, its CPU per announcement
//! at 1,000 and at 10,000 sessions, how long its relays take, its memory per session, and
//! whether any honest session is dropped. See `benches/README.md` and
//! `benches/runs/gossip_scale.md`.
//!
//! Per level (`SEEDD_BENCH_GOSSIP_SESSIONS`, default `1000,10000`) and round
//! (`SEEDD_BENCH_GOSSIP_ROUNDS`, default 5), on a fresh release seedd (its own cgroup
//! [`Scope`], pinned to the server cores; this process, the load generator, on the load cores;
//! `[p2p] relay = "always"`, `[policy] default = "allow"`, holding one small fixture
//! repository):
//!
//! 1. An introducer session announces `SEEDD_BENCH_GOSSIP_AUTHORS` (200) author nodes (SEED),
//!    so their refs announcements are accepted; then the N sessions connect
//!    (`seedd_benches::peers::ramp_with`) **without** announcing themselves — a relaying seed
//!    sends every node announcement to every session, and N² of them would be the whole
//!    measurement — and the first 20 subscribe to the fixture repository (the watchers).
//!    Memory per session = (PSS with the sessions idle − PSS before) / N.
//! 2. Burst: `SEEDD_BENCH_GOSSIP_BURST` (20,000) unique signed refs announcements (200
//!    authors × 100 repositories nobody holds), each written by 5 different sessions, all at
//!    once. Unique announcements/s = burst / (time until seedd has received every copy); CPU
//!    per unique announcement from the scope's `cpu.stat` until seedd is idle again (what it
//!    persists afterwards included; the paced phase then starts on an idle seed). Every unique one must then be in the
//!    routing table (verified and stored) and the other copies dropped as stale before any
//!    verification (`seedd_p2p_dropped_messages_total{reason="stale"}`).
//! 3. Paced: `SEEDD_BENCH_GOSSIP_RATE` (2,000) unique announcements/s for
//!    `SEEDD_BENCH_GOSSIP_SECS` (10) s, 5 copies each; one in 20 is about the fixture
//!    repository and carries its send time ([`peers::probe`]): seedd relays it to the
//!    watchers, who record the latency. CPU per unique announcement at that rate.
//! 4. Sessions seedd closed during the round: "honest peers dropped".
//!
//! Not run against radicle-node: it accepts about 7 sessions/s here (p2p bench), so 10,000
//! would take 25 minutes per round; the targets are seedd's own (issue 30 §2).
//! Writes `<target>/seedd-bench-gossip-scale.json`. Measures only; asserts nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use seedd_benches::measure::{self, Pinning, Scope, Summary};
use seedd_benches::peers::{self, ramp_with, SessionOptions, Shared};
use seedd_benches::{ensure_seedd, env_usize, fd_soft_limit, profile_dir};
use seedd_proto::crypto::{Keypair, NodeId, RepoId};
use seedd_proto::wire::message::{NodeAnnouncement, RefsAnnouncement};
use seedd_proto::wire::{AnnouncementMessage, Frame, Link, Message, Oid, RefsAt};
use seedd_tests::{fixtures, Seed, SeedOptions};
use serde_json::{json, Value};
use tokio::sync::mpsc;

const LEVELS: [usize; 2] = [1000, 10_000];
const ROUNDS: usize = 5;
const AUTHORS: usize = 200;
const BURST: usize = 20_000;
/// Copies of each announcement, each from a different session ("relayed by 5 peers").
const COPIES: usize = 5;
const RATE: usize = 2000;
const SECS: u64 = 10;
const WATCHERS: usize = 20;
/// One paced announcement in this many is a latency probe about the held repository.
const PROBE_EVERY: usize = 20;
const INFLIGHT: usize = 128;
const REPO: &str = "small-fixture";
/// Longest wait for seedd to take in a phase's copies.
const DRAIN_MAX: Duration = Duration::from_secs(120);

struct Round {
    sessions: usize,
    established: usize,
    ramp_secs: f64,
    kib_per_session: f64,
    burst_per_s: f64,
    burst_cpu_us: f64,
    burst_stored: f64,
    burst_stale_share: f64,
    paced_cpu_us: f64,
    paced_sent: usize,
    relay_p50_ms: Option<f64>,
    relay_p99_ms: Option<f64>,
    relay_samples: usize,
    dropped: usize,
    drops: Vec<String>,
}

impl Round {
    fn json(&self) -> Value {
        json!({
            "sessions": self.sessions, "established": self.established,
            "ramp_secs": self.ramp_secs, "kib_per_session": self.kib_per_session,
            "burst_unique_per_s": self.burst_per_s, "burst_cpu_us_per_announcement": self.burst_cpu_us,
            "burst_routes_stored": self.burst_stored, "burst_stale_share_of_copies": self.burst_stale_share,
            "paced_cpu_us_per_announcement": self.paced_cpu_us, "paced_sent": self.paced_sent,
            "relay_p50_ms": self.relay_p50_ms, "relay_p99_ms": self.relay_p99_ms,
            "relay_samples": self.relay_samples, "sessions_dropped": self.dropped,
            "drops": self.drops.iter().take(10).collect::<Vec<_>>(),
        })
    }
}

fn main() {
    let prov = measure::provenance("gossip_scale");
    Pinning::pin_self_to_load();
    measure::record_config_diff("seedd: [p2p] relay = \"always\" (default auto)");
    measure::record_config_diff("seedd: [policy] default = \"allow\" (default block)");
    measure::record_config_diff(
        "bench sessions do not announce themselves (N² relayed node announcements otherwise)",
    );
    let started = Instant::now();
    let log = |msg: &str| eprintln!("[{:6.1}s] {msg}", started.elapsed().as_secs_f64());
    let levels: Vec<usize> = std::env::var("SEEDD_BENCH_GOSSIP_SESSIONS")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| LEVELS.to_vec());
    if levels != LEVELS {
        measure::record_override(&format!("SEEDD_BENCH_GOSSIP_SESSIONS = {levels:?}"));
    }
    let rounds = env_usize("SEEDD_BENCH_GOSSIP_ROUNDS", ROUNDS).max(1);
    let authors = env_usize("SEEDD_BENCH_GOSSIP_AUTHORS", AUTHORS).max(1);
    let burst = env_usize("SEEDD_BENCH_GOSSIP_BURST", BURST).max(1);
    let rate = env_usize("SEEDD_BENCH_GOSSIP_RATE", RATE).max(100);
    let secs = env_usize("SEEDD_BENCH_GOSSIP_SECS", SECS as usize).max(1) as u64;
    for (name, v, d) in [
        ("SEEDD_BENCH_GOSSIP_ROUNDS", rounds, ROUNDS),
        ("SEEDD_BENCH_GOSSIP_AUTHORS", authors, AUTHORS),
        ("SEEDD_BENCH_GOSSIP_BURST", burst, BURST),
        ("SEEDD_BENCH_GOSSIP_RATE", rate, RATE),
        ("SEEDD_BENCH_GOSSIP_SECS", secs as usize, SECS as usize),
    ] {
        if v != d {
            measure::record_override(&format!("{name} = {v} (default {d})"));
        }
    }
    let max_level = levels.iter().copied().max().unwrap_or(0);
    if let Some(soft) = fd_soft_limit() {
        if soft < max_level as u64 + 500 {
            log(&format!(
                "WARNING: open-files limit {soft} < {max_level} sessions + 500: run `ulimit -n 20000` first; handshakes will fail"
            ));
            measure::record_override(&format!("open-files limit {soft} (below the sessions)"));
        }
    }
    let profile = profile_dir();
    let seedd_bin = ensure_seedd(&log, &profile);
    let rid: RepoId = fixtures().rid(REPO).parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let author_keys: Vec<Keypair> = (0..authors)
        .map(|i| Keypair::mock(5_000_000 + i as u64))
        .collect();
    let keys: Vec<Keypair> = (0..max_level)
        .map(|i| Keypair::mock(1 + i as u64))
        .collect();
    let mut results: Vec<Round> = Vec::new();
    for &n in &levels {
        for round in 0..rounds {
            log(&format!("{n} sessions, round {}/{rounds}", round + 1));
            let work = tempfile::Builder::new()
                .prefix("gossip-scale")
                .tempdir_in("/tmp")
                .unwrap();
            let scope = Arc::new(Scope::new(&format!("gossip-scale-{n}-{round}")));
            let bin_dir = scope.wrapper_dir(&seedd_bin, &work.path().join("bin"), &["seedctl"]);
            let seed = measure::with_test_bin_dir(&bin_dir, || {
                Seed::start(SeedOptions {
                    repos: vec![REPO.into()],
                    extra_config: "[policy]\ndefault = \"allow\"\n".into(),
                    p2p_config: "relay = \"always\"\n".into(),
                    env: vec![("RUST_LOG".into(), "info".into())],
                    ..SeedOptions::default()
                })
            });
            let r = rt.block_on(run_round(
                &seed,
                &scope,
                &keys[..n],
                &author_keys,
                rid,
                (burst, rate, secs),
                &log,
            ));
            log(&format!(
                "  {} established in {:.1} s, {:.1} KiB/session; burst {:.0} unique/s, {:.1} µs CPU each ({} routes stored, {:.0} % of copies stale); paced {:.1} µs each; relay p50 {} p99 {} ms ({} samples); dropped {}",
                r.established, r.ramp_secs, r.kib_per_session, r.burst_per_s, r.burst_cpu_us,
                r.burst_stored, 100.0 * r.burst_stale_share, r.paced_cpu_us,
                seedd_benches::fmt(r.relay_p50_ms), seedd_benches::fmt(r.relay_p99_ms),
                r.relay_samples, r.dropped
            ));
            results.push(r);
            drop(seed);
            drop(scope);
        }
    }
    rt.shutdown_timeout(Duration::from_secs(5));

    // Medians per level, ratios 10k / 1k.
    let summary = |n: usize, f: &dyn Fn(&Round) -> Option<f64>| {
        let v: Vec<f64> = results
            .iter()
            .filter(|r| r.sessions == n)
            .filter_map(f)
            .collect();
        Summary::of(&v)
    };
    type Figure = (
        &'static str,
        &'static str,
        &'static str,
        fn(&Round) -> Option<f64>,
    );
    let figures: [Figure; 9] = [
        ("established", "sessions established", "", |r| {
            Some(r.established as f64)
        }),
        (
            "kib_per_session",
            "memory per session (ΔPSS/N)",
            "KiB",
            |r| Some(r.kib_per_session),
        ),
        (
            "burst_unique_per_s",
            "burst: unique announcements verified/s",
            "1/s",
            |r| Some(r.burst_per_s),
        ),
        (
            "burst_cpu_us",
            "burst: CPU per unique announcement",
            "µs",
            |r| Some(r.burst_cpu_us),
        ),
        (
            "burst_stale_share",
            "burst: copies dropped stale, unverified",
            "share",
            |r| Some(r.burst_stale_share),
        ),
        (
            "paced_cpu_us",
            "paced: CPU per unique announcement",
            "µs",
            |r| Some(r.paced_cpu_us),
        ),
        ("relay_p50_ms", "paced: relay latency p50", "ms", |r| {
            r.relay_p50_ms
        }),
        ("relay_p99_ms", "paced: relay latency p99", "ms", |r| {
            r.relay_p99_ms
        }),
        ("dropped", "sessions dropped by seedd", "", |r| {
            Some(r.dropped as f64)
        }),
    ];
    let mut table = String::from("| figure | unit |");
    for n in &levels {
        table += &format!(" {n} sessions |");
    }
    table += "\n|---|---|";
    table += &"---|".repeat(levels.len());
    table += "\n";
    let mut by_level = serde_json::Map::new();
    for (key, label, unit, f) in &figures {
        table += &format!("| {label} | {unit} |");
        let mut per = serde_json::Map::new();
        for &n in &levels {
            let s = summary(n, f);
            table += &format!(" {} |", s.map_or("-".into(), |s| s.to_string()));
            per.insert(n.to_string(), s.map_or(Value::Null, |s| s.to_json()));
        }
        table += "\n";
        by_level.insert((*key).into(), Value::Object(per));
    }
    println!("{}", measure::stamped_text(&table));
    let (lo, hi) = (
        levels.iter().copied().min().unwrap_or(0),
        levels.iter().copied().max().unwrap_or(0),
    );
    let med = |n: usize, f: fn(&Round) -> Option<f64>| summary(n, &f).map(|s| s.median);
    let cpu_ratio = |f: fn(&Round) -> Option<f64>| match (med(hi, f), med(lo, f)) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let burst_ratio = cpu_ratio(|r| Some(r.burst_cpu_us));
    let paced_ratio = cpu_ratio(|r| Some(r.paced_cpu_us));
    let unique = med(hi, |r| Some(r.burst_per_s));
    let p99 = med(hi, |r| r.relay_p99_ms);
    let kib = med(hi, |r| Some(r.kib_per_session));
    let dropped: usize = results.iter().map(|r| r.dropped).sum();
    let met = |v: Option<f64>, ok: fn(f64) -> bool| v.map_or(Value::Null, |v| Value::Bool(ok(v)));
    let targets = json!([
        {"target": format!("gossip_scale: unique verified announcements/s at {hi} sessions, 5 copies each (median)"),
         "value": unique, "goal": "≥ 20,000", "met": met(unique, |v| v >= 20_000.0)},
        {"target": format!("gossip_scale: CPU per unique announcement, burst, {hi} / {lo} sessions"),
         "value": burst_ratio, "goal": "≤ 1.2", "met": met(burst_ratio, |v| v <= 1.2)},
        {"target": format!("gossip_scale: CPU per unique announcement, paced, {hi} / {lo} sessions"),
         "value": paced_ratio, "goal": "≤ 1.2", "met": met(paced_ratio, |v| v <= 1.2)},
        {"target": format!("gossip_scale: relay latency p99 at {hi} sessions, ms (median)"),
         "value": p99, "goal": "≤ 100", "met": met(p99, |v| v <= 100.0)},
        {"target": format!("gossip_scale: memory per session at {hi} sessions, KiB (median)"),
         "value": kib, "goal": "≤ 24", "met": met(kib, |v| v <= 24.0)},
        {"target": "gossip_scale: honest sessions dropped, all rounds",
         "value": dropped as f64, "goal": "0", "met": dropped == 0},
    ]);
    let doc = json!({
        "levels": levels,
        "rounds": rounds,
        "authors": authors, "burst": burst, "rate": rate, "secs": secs, "copies": COPIES,
        "watchers": WATCHERS,
        "by_level": by_level,
        "per_round": results.iter().map(Round::json).collect::<Vec<_>>(),
        "targets": targets,
        "table": table,
    });
    let path = measure::write_result("gossip-scale", prov, doc);
    log(&format!("wrote {}", path.display()));
}

/// One round on a started seedd.
async fn run_round(
    seed: &Seed,
    scope: &Arc<Scope>,
    keys: &[Keypair],
    authors: &[Keypair],
    held: RepoId,
    (burst, rate, secs): (usize, usize, u64),
    log: &dyn Fn(&str),
) -> Round {
    let target: NodeId = seed.nid().parse().unwrap();
    let addr = seed.p2p;
    let metric = |name: &str, labels: &[&str]| seed.metric(name, labels);
    tokio::time::sleep(Duration::from_secs(2)).await;

    // 1. Authors, through one introducer session; then the N sessions.
    let intro_shared = Arc::new(Shared::default());
    let intro_key = [Keypair::mock(9_000_000)];
    let (intro, _, _, _intro_tasks) = ramp_with(
        target,
        addr,
        1,
        &intro_key,
        &intro_shared,
        &SessionOptions::default(),
    )
    .await;
    let mut bytes = Vec::new();
    let now = peers::now_ms();
    for (i, a) in authors.iter().enumerate() {
        let node = AnnouncementMessage::Node(NodeAnnouncement {
            version: 1,
            features: 1,
            timestamp: now,
            alias: format!("author{i}").parse().unwrap(),
            addresses: vec![],
            nonce: 1,
            agent: "/seedd-bench:0.1/".parse().unwrap(),
        })
        .sign(a)
        .unwrap();
        Frame::gossip(Link::Outbound, Message::Announcement(node))
            .encode_into(&mut bytes)
            .unwrap();
    }
    intro[0].1.send(bytes).await.unwrap();
    let book_deadline = Instant::now() + Duration::from_secs(30);
    while (metric("seedd_p2p_address_book_nodes", &[]) as usize) < authors.len() + 1
        && Instant::now() < book_deadline
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pss_base = scope.pss_kib();
    let shared = Arc::new(Shared::default());
    let options = SessionOptions {
        announce: false,
        watchers: WATCHERS.min(keys.len()),
        watch: vec![held],
    };
    let t0 = Instant::now();
    let (senders, latencies, failures, _tasks) =
        ramp_with(target, addr, INFLIGHT, keys, &shared, &options).await;
    let ramp_secs = t0.elapsed().as_secs_f64();
    if !failures.is_empty() {
        log(&format!(
            "  {} handshakes failed: {}",
            failures.len(),
            failures[0]
        ));
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let established = latencies.len();
    let kib_per_session = (scope.pss_kib() as f64 - pss_base as f64) / established.max(1) as f64;
    // Senders: every session but the watchers (they only receive).
    let txs: Vec<&mpsc::Sender<Vec<u8>>> = senders
        .iter()
        .filter(|(i, _)| *i >= options.watchers)
        .map(|(_, tx)| tx)
        .collect();
    let in_refs = || {
        metric(
            "seedd_p2p_messages_total",
            &["direction=\"in\"", "type=\"refs\""],
        )
    };
    let stale = || metric("seedd_p2p_dropped_messages_total", &["reason=\"stale\""]);

    // 2. Burst: `burst` unique announcements, 5 copies each, written at once.
    let ts = peers::now_ms();
    let mut batches: Vec<Vec<u8>> = vec![Vec::new(); txs.len()];
    for i in 0..burst {
        let a = &authors[i % authors.len()];
        let mut r = [0u8; 20];
        r[..8].copy_from_slice(&(i as u64).to_be_bytes());
        r[8..12].copy_from_slice(b"burs");
        let frame = refs_frame(a, RepoId::from_oid_bytes(r), target, Oid([7; 20]), ts);
        for k in 0..COPIES {
            batches[(i * COPIES + k) % txs.len()].extend_from_slice(&frame);
        }
    }
    let (in0, stale0, routes0) = (in_refs(), stale(), metric("seedd_p2p_routing_entries", &[]));
    let cpu0 = scope.cpu_usec();
    let t1 = Instant::now();
    for (tx, batch) in txs.iter().zip(batches) {
        let _ = tx.send(batch).await;
    }
    let want = in0 + (burst * COPIES) as f64;
    while in_refs() < want && t1.elapsed() < DRAIN_MAX {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let burst_secs = t1.elapsed().as_secs_f64();
    // CPU until seedd is idle again: what the burst left to do (persisting it) counts, and
    // the paced phase starts on an idle seed.
    let scope_idle = scope.clone();
    let settled = tokio::task::spawn_blocking(move || measure::wait_idle(&scope_idle, DRAIN_MAX))
        .await
        .unwrap_or(false);
    if !settled {
        log("  WARNING: seedd not idle after the burst");
    }
    let burst_cpu = scope.cpu_usec().saturating_sub(cpu0) as f64;
    // The routing gauge is refreshed every second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let burst_stored = metric("seedd_p2p_routing_entries", &[]) - routes0;
    let burst_stale_share = (stale() - stale0) / (burst * COPIES) as f64;

    // 3. Paced, with probes about the held repository.
    let ticks = secs * 100;
    let per_tick = (rate / 100).max(1);
    let cpu1 = scope.cpu_usec();
    let in1 = in_refs();
    let start = tokio::time::Instant::now();
    let mut sent = 0usize;
    for tick in 0..ticks {
        tokio::time::sleep_until(start + Duration::from_millis(10 * tick)).await;
        let ts = peers::now_ms();
        let mut batches: Vec<Vec<u8>> = vec![Vec::new(); txs.len()];
        for _ in 0..per_tick {
            let i = sent;
            sent += 1;
            let a = &authors[i % authors.len()];
            let frame = if i.is_multiple_of(PROBE_EVERY) {
                refs_frame(
                    a,
                    held,
                    target,
                    peers::probe(),
                    ts + i as u64 / authors.len() as u64,
                )
            } else {
                let mut r = [0u8; 20];
                r[..8].copy_from_slice(&(i as u64).to_be_bytes());
                r[8..12].copy_from_slice(b"pace");
                refs_frame(a, RepoId::from_oid_bytes(r), target, Oid([9; 20]), ts)
            };
            for k in 0..COPIES {
                batches[(i * COPIES + k) % txs.len()].extend_from_slice(&frame);
            }
        }
        for (tx, batch) in txs.iter().zip(batches) {
            if !batch.is_empty() {
                let _ = tx.send(batch).await;
            }
        }
    }
    let want = in1 + (sent * COPIES) as f64;
    let t2 = Instant::now();
    while in_refs() < want && t2.elapsed() < DRAIN_MAX {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let scope_idle = scope.clone();
    let _ = tokio::task::spawn_blocking(move || measure::wait_idle(&scope_idle, DRAIN_MAX)).await;
    let paced_cpu = scope.cpu_usec().saturating_sub(cpu1) as f64;
    let mut lat: Vec<u64> = std::mem::take(&mut *shared.relay_latencies_us.lock().unwrap());
    lat.sort_unstable();
    let pct = |p: f64| {
        (!lat.is_empty())
            .then(|| lat[((lat.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0)
    };
    shared.closing.store(true, Ordering::SeqCst);
    intro_shared.closing.store(true, Ordering::SeqCst);
    let drops: Vec<String> = shared.disconnects.lock().unwrap().clone();
    Round {
        sessions: keys.len(),
        established,
        ramp_secs,
        kib_per_session,
        burst_per_s: burst as f64 / burst_secs,
        burst_cpu_us: burst_cpu / burst as f64,
        burst_stored,
        burst_stale_share,
        paced_cpu_us: paced_cpu / sent.max(1) as f64,
        paced_sent: sent,
        relay_p50_ms: pct(0.50),
        relay_p99_ms: pct(0.99),
        relay_samples: lat.len(),
        dropped: drops.len() + failures.len(),
        drops,
    }
}

/// A signed refs announcement by `author` about `rid`, framed.
fn refs_frame(author: &Keypair, rid: RepoId, target: NodeId, at: Oid, ts: u64) -> Vec<u8> {
    let ann = AnnouncementMessage::Refs(RefsAnnouncement {
        rid,
        refs: vec![RefsAt { remote: target, at }],
        timestamp: ts,
    })
    .sign(author)
    .unwrap();
    Frame::gossip(Link::Outbound, Message::Announcement(ann))
        .encode()
        .unwrap()
}
