//! Gossip flood from one host (issue 11 point 4, "gossip state and work are bounded per
//! host"): memory stays flat while one IP cycles through thousands of fresh node ids sending
//! full inventories, and an honest peer keeps its session. See `benches/README.md`.
//!
//! 1. Starts the release seedd on loopback with `p2p.rate.exempt_local = false` (loopback
//!    peers are otherwise not limited) and a connect-attempt bucket raised out of the way, so
//!    that the flood's sessions are admitted and only the gossip limits and caps are tested.
//!    `SEEDD_FLOOD_HOST_BUCKET=<fill_rate>,<capacity>` sets the per-host message bucket.
//! 2. An honest raw peer (fixed key, from 127.0.0.2) connects, announces itself (SEED) and a
//!    small inventory, answers pings and stays.
//! 3. From 127.0.0.3, N fresh node ids (`SEEDD_FLOOD_NODES`, default 2,000), a few at a time
//!    (`SEEDD_FLOOD_INFLIGHT`, default 8), each: connect, handshake, NodeAnnouncement (SEED),
//!    an InventoryAnnouncement with the wire maximum of 2,973 random repository ids, then
//!    close and wait for seedd to close too.
//! 4. Before, every 250 nodes (`SEEDD_FLOOD_EVERY`) and after: seedd's VmRSS / VmHWM / CPU, its
//!    `/metrics` (rate-limit hits by scope, address book, routing entries, stored
//!    announcements) and the honest peer's ping round trip. At the end: is the honest peer
//!    still connected (`GET /api/v1/peers`), and are its routes kept?
//!
//! Prints a table and writes JSON to `<target>/seedd-bench-gossip-flood.json`. Measures only;
//! asserts nothing about the figures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use seedd_benches::procfs::{alive, clk_tck, cpu_ticks, loadavg, reset_hwm, status_kib};
use seedd_benches::{ensure_seedd, env_usize, fmt, profile_dir};
use seedd_proto::crypto::{Keypair, NodeId, RepoId};
use seedd_proto::wire::message::{InventoryAnnouncement, NodeAnnouncement, INVENTORY_LIMIT};
use seedd_proto::wire::{AnnouncementMessage, Frame, Link, Message, Ping};
use seedd_tests::{http_get, workspace, Seed, SeedOptions};
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

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    seedd_benches::measure::provenance("gossip_flood");
    let started = Instant::now();
    let log = |msg: &str| eprintln!("[{:6.1}s] {msg}", started.elapsed().as_secs_f64());
    let nodes = env_usize("SEEDD_FLOOD_NODES", NODES).max(1);
    let inflight = env_usize("SEEDD_FLOOD_INFLIGHT", INFLIGHT).max(1);
    let every = env_usize("SEEDD_FLOOD_EVERY", EVERY).max(1);
    let mut notes: Vec<String> = Vec::new();
    let load_start = loadavg();
    log(&format!(
        "{nodes} fresh node ids from {FLOOD_IP}, {inflight} in flight, a sample every {every}; load average {load_start}"
    ));

    let profile = profile_dir();
    let target_dir = profile.parent().unwrap().to_owned();
    let seedd_bin = ensure_seedd(&log, &profile);
    let tck = clk_tck();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    log(&format!("starting seedd ({})", seedd_bin.display()));
    let rate = rate_config();
    log(&format!("seedd rate config: {}", rate.replace('\n', "; ")));
    let seed = Seed::start(SeedOptions {
        extra_config: rate.clone(),
        // The production default level; the harness default is debug.
        env: vec![("RUST_LOG".into(), "info".into())],
        ..SeedOptions::default()
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

    let probe = |rt: &tokio::runtime::Runtime| -> Option<f64> {
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
    let cpu0 = cpu_ticks(pid);
    let sample = |sent: usize, rt: &tokio::runtime::Runtime, started: Instant| -> Sample {
        let text = http_get(&seed.admin_url("/metrics"), &[])
            .map(|(_, t)| t)
            .unwrap_or_default();
        let m = |name: &str, labels: &[&str]| seedd_tests::metric_in(&text, name, labels);
        Sample {
            nodes: sent,
            secs: started.elapsed().as_secs_f64(),
            rss_kib: status_kib(pid, "VmRSS"),
            hwm_kib: status_kib(pid, "VmHWM"),
            cpu_s: cpu_ticks(pid).saturating_sub(cpu0) as f64 / tck,
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
            honest_ping_ms: probe(rt),
        }
    };

    // Before the flood.
    let rss_before = status_kib(pid, "VmRSS");
    reset_hwm(pid);
    let flood_start = Instant::now();
    let mut samples = vec![sample(0, &rt, flood_start)];
    log(&format!("before: {}", samples[0].line()));

    // The flood, in chunks of `every` nodes.
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let ok = Arc::new(AtomicU64::new(0));
    let sem = Arc::new(Semaphore::new(inflight));
    let mut sent = 0;
    while sent < nodes {
        let chunk = every.min(nodes - sent);
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
        let s = sample(sent, &rt, flood_start);
        log(&s.line());
        samples.push(s);
    }
    let flood_secs = flood_start.elapsed().as_secs_f64();
    // Let the persistence queue and the gauges catch up.
    std::thread::sleep(GAUGE_TICK * 3);
    let after = sample(sent, &rt, flood_start);
    log(&format!("after: {}", after.line()));
    let hwm_kib = status_kib(pid, "VmHWM");

    // The honest peer.
    let peers = seed.api("/api/v1/peers");
    let honest_listed = peers["peers"].as_array().is_some_and(|ps| {
        ps.iter()
            .any(|p| p["nid"].as_str() == Some(honest_nid.to_string().as_str()))
    });
    let routes = seed.api(&format!("/api/v1/routing?nid={honest_nid}"));
    let honest_routes = routes["routes"].as_array().map_or(0, Vec::len);
    let honest_closed = honest.closed.load(Ordering::SeqCst);
    let honest_kept = honest_listed && !honest_closed && after.honest_ping_ms.is_some();
    let seedd_alive = alive(pid);
    let load_end = loadavg();
    let failures = failures.lock().unwrap().clone();
    if !failures.is_empty() {
        notes.push(format!(
            "{} flood nodes failed; first: {}",
            failures.len(),
            failures
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    if honest_closed {
        notes.push(format!(
            "the honest session was closed: {}",
            honest.reason.lock().unwrap()
        ));
    }
    if !seedd_alive {
        notes.push("seedd exited during the bench".into());
    }
    let logs = seed.logs();
    let warns: Vec<String> = logs
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .take(5)
        .map(str::to_owned)
        .collect();
    if !warns.is_empty() {
        notes.push(format!("seedd warnings: {}", warns.join(" | ")));
    }
    let first = &samples[0];
    let peak_rss = samples
        .iter()
        .chain(std::iter::once(&after))
        .map(|s| s.rss_kib)
        .max()
        .unwrap_or(0);

    // Table.
    let mib = |k: u64| Some(k as f64 / 1024.0);
    println!();
    println!(
        "gossip flood: {nodes} fresh node ids from {FLOOD_IP}, each a NodeAnnouncement + an inventory of {INVENTORY_LIMIT} repositories; seedd {} ({}), load average {load_start} → {load_end}",
        git_describe(),
        seedd_bin.display()
    );
    println!();
    println!(
        "{:>6} {:>7} {:>8} {:>8} {:>7} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9}",
        "nodes",
        "time s",
        "RSS MiB",
        "HWM MiB",
        "CPU s",
        "inv. in",
        "lim.host",
        "lim.nid",
        "addrbook",
        "routes",
        "stored",
        "honest ms"
    );
    println!("{}", "-".repeat(106));
    for s in samples.iter().chain(std::iter::once(&after)) {
        println!(
            "{:>6} {:>7} {:>8} {:>8} {:>7} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9}",
            s.nodes,
            fmt(Some(s.secs)),
            fmt(mib(s.rss_kib)),
            fmt(mib(s.hwm_kib)),
            fmt(Some(s.cpu_s)),
            fmt(Some(s.inventories_in)),
            fmt(Some(s.limited_host)),
            fmt(Some(s.limited_nid)),
            fmt(Some(s.address_book)),
            fmt(Some(s.routes)),
            fmt(Some(s.stored)),
            fmt(s.honest_ping_ms),
        );
    }
    println!("(the last line is 3.6 s after the flood ended; gauges lag by up to 1 s)");
    println!();
    let summary = [
        (
            "flood nodes completed / failed",
            format!("{} / {}", ok.load(Ordering::Relaxed), failures.len()),
        ),
        (
            "flood duration",
            format!(
                "{} s ({} nodes/s)",
                fmt(Some(flood_secs)),
                fmt(Some(nodes as f64 / flood_secs))
            ),
        ),
        (
            "seedd RSS start / peak (VmHWM) / end",
            format!(
                "{} / {} / {} MiB (peak sampled VmRSS {} MiB)",
                fmt(mib(rss_before)),
                fmt(mib(hwm_kib)),
                fmt(mib(after.rss_kib)),
                fmt(mib(peak_rss))
            ),
        ),
        (
            "seedd CPU during the flood",
            format!("{} s", fmt(Some(after.cpu_s))),
        ),
        (
            "messages rate-limited: host / nid / connect (ip)",
            format!(
                "{} / {} / {}",
                fmt(Some(after.limited_host - first.limited_host)),
                fmt(Some(after.limited_nid - first.limited_nid)),
                fmt(Some(after.limited_ip - first.limited_ip))
            ),
        ),
        (
            "address book / routing entries / stored announcements at end",
            format!(
                "{} / {} / {}",
                fmt(Some(after.address_book)),
                fmt(Some(after.routes)),
                fmt(Some(after.stored))
            ),
        ),
        (
            "honest session kept (listed in /api/v1/peers, answers pings)",
            format!(
                "{} (listed {honest_listed}, closed {honest_closed}, ping {} ms, pings from seedd answered {})",
                if honest_kept { "yes" } else { "NO" },
                fmt(after.honest_ping_ms),
                honest.pings.load(Ordering::Relaxed)
            ),
        ),
        (
            "honest peer's routes kept",
            format!("{honest_routes} of {HONEST_REPOS}"),
        ),
    ];
    for (k, v) in &summary {
        println!("{k:<62} {v}");
    }
    for n in &notes {
        println!("note: {n}");
    }

    let json_samples: Vec<Value> = samples
        .iter()
        .chain(std::iter::once(&after))
        .map(Sample::json)
        .collect();
    let out = json!({
        "bench": "gossip_flood",
        "commit": git_describe(),
        "loadavg_start": load_start,
        "loadavg_end": load_end,
        "config": {
            "nodes": nodes,
            "inflight": inflight,
            "every": every,
            "inventory_per_node": INVENTORY_LIMIT,
            "flood_ip": FLOOD_IP,
            "honest_ip": HONEST_IP,
            "seedd_config": rate,
        },
        "samples": json_samples,
        "summary": {
            "flood_ok": ok.load(Ordering::Relaxed),
            "flood_failed": failures.len(),
            "flood_secs": flood_secs,
            "rss_start_kib": rss_before,
            "hwm_kib": hwm_kib,
            "rss_peak_sampled_kib": peak_rss,
            "rss_end_kib": after.rss_kib,
            "cpu_s": after.cpu_s,
            "rate_limited_host": after.limited_host - first.limited_host,
            "rate_limited_nid": after.limited_nid - first.limited_nid,
            "rate_limited_ip": after.limited_ip - first.limited_ip,
            "address_book_end": after.address_book,
            "routes_end": after.routes,
            "stored_end": after.stored,
            "honest_kept": honest_kept,
            "honest_listed": honest_listed,
            "honest_closed": honest_closed,
            "honest_routes": honest_routes,
            "seedd_alive": seedd_alive,
        },
        "notes": notes,
    });
    let path = target_dir.join("seedd-bench-gossip-flood.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&seedd_benches::measure::stamped(&out)).unwrap(),
    )
    .unwrap();
    log(&format!("wrote {}", path.display()));
    drop(probe_tx);
    rt.shutdown_timeout(Duration::from_secs(2));
    drop(seed);
}

// ------------------------------------------------------------------------------------------
// Samples
// ------------------------------------------------------------------------------------------

struct Sample {
    nodes: usize,
    secs: f64,
    rss_kib: u64,
    hwm_kib: u64,
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
            "{} nodes, {:.1} s: RSS {:.1} MiB (HWM {:.1}), CPU {:.2} s, inventories in {}, rate-limited host {} nid {}, address book {}, routes {}, stored {}, honest ping {}",
            self.nodes,
            self.secs,
            self.rss_kib as f64 / 1024.0,
            self.hwm_kib as f64 / 1024.0,
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
            "rss_kib": self.rss_kib,
            "hwm_kib": self.hwm_kib,
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
