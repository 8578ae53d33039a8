//! The load generator of synthetic Radicle peers shared by the p2p and scale benches: one tokio
//! task per session, each with its own node key. A session connects, does the Noise handshake,
//! reads the target's three initial messages, sends its NodeAnnouncement (SEED feature, no
//! addresses) and a Subscribe (empty filter, `since` = now), then reads everything the target
//! sends, answers Ping with Pong, refuses git streams the target opens (Control Close) and
//! pings the target itself after [`KEEPALIVE`] of silence. Gossip is sent through each
//! session's command channel ([`gossip`], [`gossip_rounds`]); [`wait_settled`] waits until the
//! target has worked it off.
//!
//! [`ramp_with`] varies the start ([`SessionOptions`]): sessions that do not announce
//! themselves (so that N sessions do not make a relaying target send N² node announcements
//! before the measurement), and "watcher" sessions that subscribe to some repositories. A
//! watcher that receives a refs announcement carrying a [`probe`] records its relay latency in
//! [`Shared::relay_latencies_us`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use seedd_proto::crypto::{Keypair, NodeId, RepoId};
use seedd_proto::wire::message::{InventoryAnnouncement, NodeAnnouncement, RefsAnnouncement};
use seedd_proto::wire::{
    AnnouncementMessage, Control, Filter, Frame, FrameDecoder, Link, Message, Oid, Ping, RefsAt,
    Subscribe, TIMESTAMP_MAX,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};

/// Both nodes relay queued gossip every 6 s: wait at least this long for relays to arrive.
pub const RELAY_WAIT: Duration = Duration::from_secs(7);
/// "Settled" = no frame received by any session for this long (longer than the 6 s relay
/// interval) and the target using under [`IDLE_CPU`] of a core.
pub const QUIET: Duration = Duration::from_secs(7);
pub const IDLE_CPU: f64 = 0.05;
/// A session that has sent nothing for this long sends a Ping (both targets drop peers silent
/// for 120 s; they ping quiet peers themselves first, so this rarely fires).
pub const KEEPALIVE: Duration = Duration::from_secs(90);
/// Handshake (connect, the three acts, the target's first three messages) deadline.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Counters shared by all sessions of one target.
#[derive(Default)]
pub struct Shared {
    /// Frames received from the target by all sessions.
    pub frames_in: AtomicU64,
    /// Pings answered.
    pub pings: AtomicU64,
    /// Keep-alive pings sent.
    pub keepalives: AtomicU64,
    /// Git streams the target opened (each refused): the target tried to fetch from us.
    pub opens: AtomicU64,
    pub protocol_errors: AtomicU64,
    /// Set before the sessions are closed on purpose (their ends are then not disconnects).
    pub closing: AtomicBool,
    /// Sessions the target closed, or that failed, after their handshake.
    pub disconnects: Mutex<Vec<String>>,
    /// Relay latencies (µs) of [`probe`] announcements, as the watchers received them.
    pub relay_latencies_us: Mutex<Vec<u64>>,
}

/// How [`ramp_with`] starts its sessions.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Send a NodeAnnouncement (SEED) after the handshake ([`ramp`]: yes).
    pub announce: bool,
    /// The first `watchers` sessions subscribe to `watch` (the others: empty filter).
    pub watchers: usize,
    pub watch: Vec<RepoId>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            announce: true,
            watchers: 0,
            watch: Vec::new(),
        }
    }
}

/// The first 8 bytes of a probe's `RefsAt.at`; the next 8 are its send time (µs since the
/// Unix epoch, big-endian).
const PROBE_MAGIC: &[u8; 8] = b"SEEDDLAT";

/// The `at` of a refs announcement whose relay latency watchers record: stamped now.
pub fn probe() -> Oid {
    let mut at = [0u8; 20];
    at[..8].copy_from_slice(PROBE_MAGIC);
    at[8..16].copy_from_slice(&now_us().to_be_bytes());
    Oid(at)
}

/// Microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The send time of a probe announcement, if `ann` is one.
fn probe_sent_us(message: &Message) -> Option<u64> {
    let Message::Announcement(ann) = message else {
        return None;
    };
    let AnnouncementMessage::Refs(refs) = &ann.message else {
        return None;
    };
    let at = refs.refs.first()?.at.0;
    if &at[..8] != PROBE_MAGIC {
        return None;
    }
    Some(u64::from_be_bytes(at[8..16].try_into().ok()?))
}

/// What [`ramp`] returns: the established sessions' (index, command sender), handshake
/// latencies (ms), failures and the sessions' tasks.
pub type Ramp = (
    Vec<(usize, mpsc::Sender<Vec<u8>>)>,
    Vec<f64>,
    Vec<String>,
    Vec<tokio::task::JoinHandle<()>>,
);

/// Starts one task per session and waits until every one is established or has failed.
/// Returns the command senders of the established sessions (in order of establishment),
/// handshake latencies (ms), failures and the tasks.
/// `nid`/`addr`: the target; `inflight`: handshakes at once; one session per key.
pub async fn ramp(
    nid: NodeId,
    addr: SocketAddr,
    inflight: usize,
    keys: &[Keypair],
    shared: &Arc<Shared>,
) -> Ramp {
    ramp_with(
        nid,
        addr,
        inflight,
        keys,
        shared,
        &SessionOptions::default(),
    )
    .await
}

/// [`ramp`] with [`SessionOptions`].
pub async fn ramp_with(
    nid: NodeId,
    addr: SocketAddr,
    inflight: usize,
    keys: &[Keypair],
    shared: &Arc<Shared>,
    options: &SessionOptions,
) -> Ramp {
    let sem = Arc::new(Semaphore::new(inflight));
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel();
    let mut pending = Vec::with_capacity(keys.len());
    let mut tasks = Vec::with_capacity(keys.len());
    for (i, key) in keys.iter().enumerate() {
        let (tx, rx) = mpsc::channel::<Vec<u8>>(4);
        pending.push(Some(tx));
        let filter = if i < options.watchers {
            Filter::new(options.watch.iter())
        } else {
            Filter::empty()
        };
        tasks.push(tokio::spawn(session(
            i,
            key.clone(),
            nid,
            addr,
            sem.clone(),
            shared.clone(),
            ready_tx.clone(),
            rx,
            (options.announce, filter),
        )));
    }
    drop(ready_tx);
    let mut senders = Vec::new();
    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    while let Some((i, res)) = ready_rx.recv().await {
        match res {
            Ok(ms) => {
                latencies.push(ms);
                senders.push((i, pending[i].take().unwrap()));
            }
            Err(e) => failures.push(format!("session {i}: {e}")),
        }
        if latencies.len() + failures.len() == keys.len() {
            break;
        }
    }
    (senders, latencies, failures, tasks)
}

/// How a [`wait_settled`] ended.
pub struct Settle {
    /// Seconds waited.
    pub secs: f64,
    /// Whether the target went quiet (else `max` was reached).
    pub settled: bool,
    /// CPU use (cores) over the last second of the wait.
    pub cpu_rate: f64,
}

/// Waits at least [`RELAY_WAIT`], then until no session has received a frame for [`QUIET`]
/// and the target's CPU use over the last second (its cgroup `scope`: every process of it) is
/// under [`IDLE_CPU`]; at most `max`. Returns how long it waited and whether the target
/// settled.
pub async fn wait_settled(shared: &Shared, scope: &crate::measure::Scope, max: Duration) -> Settle {
    let start = Instant::now();
    let mut last = shared.frames_in.load(Ordering::Relaxed);
    let mut changed = Instant::now();
    // (when, CPU µs) samples of the last ~second.
    let mut samples = std::collections::VecDeque::from([(Instant::now(), scope.cpu_usec())]);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = shared.frames_in.load(Ordering::Relaxed);
        if now != last {
            last = now;
            changed = Instant::now();
        }
        samples.push_back((Instant::now(), scope.cpu_usec()));
        while samples.len() > 2 && samples[1].0.elapsed() >= Duration::from_secs(1) {
            samples.pop_front();
        }
        let (t0, c0) = samples[0];
        let (t1, c1) = samples[samples.len() - 1];
        let span = t1.duration_since(t0).as_secs_f64();
        let cpu_rate = if span >= 0.9 {
            c1.saturating_sub(c0) as f64 / 1e6 / span
        } else {
            f64::INFINITY
        };
        let waited = start.elapsed();
        let settled = waited >= RELAY_WAIT && changed.elapsed() >= QUIET && cpu_rate < IDLE_CPU;
        if settled || waited >= max {
            return Settle {
                secs: waited.as_secs_f64(),
                settled,
                cpu_rate,
            };
        }
    }
}

/// Every second for `secs` s, each gossiper sends a fresh signed InventoryAnnouncement (all
/// `rids`) and a RefsAnnouncement (one rid; `RefsAt` of the target's own namespace, so the
/// target records "synced" and has nothing to fetch). Returns the announcements sent.
pub async fn gossip(
    gossipers: &[(Keypair, mpsc::Sender<Vec<u8>>)],
    target: NodeId,
    rids: &[RepoId],
    secs: u64,
) -> u64 {
    gossip_rounds(gossipers, target, secs, |g, _| {
        (rids.to_vec(), rids[g % rids.len()])
    })
    .await
}

/// Every second for `secs` s, each gossiper `g` sends a fresh signed InventoryAnnouncement and
/// a RefsAnnouncement, with `pick(g, round)` = (the inventory, the refs' repository); the
/// refs' `RefsAt` is the target's own namespace, so the target records "synced" and has
/// nothing to fetch. Returns the announcements sent.
pub async fn gossip_rounds(
    gossipers: &[(Keypair, mpsc::Sender<Vec<u8>>)],
    target: NodeId,
    secs: u64,
    mut pick: impl FnMut(usize, u64) -> (Vec<RepoId>, RepoId),
) -> u64 {
    let start = tokio::time::Instant::now();
    let mut sent = 0;
    let mut last = 0;
    for round in 0..secs {
        tokio::time::sleep_until(start + Duration::from_secs(round)).await;
        // Strictly increasing per author and kind.
        let ts = now_ms().max(last + 1);
        last = ts;
        for (g, (key, tx)) in gossipers.iter().enumerate() {
            let (inventory, refs_rid) = pick(g, round);
            let inventory = AnnouncementMessage::Inventory(InventoryAnnouncement {
                inventory,
                timestamp: ts,
            });
            let mut at = [0u8; 20];
            at[..8].copy_from_slice(&(g as u64).to_be_bytes());
            at[8..16].copy_from_slice(&round.to_be_bytes());
            let refs = AnnouncementMessage::Refs(RefsAnnouncement {
                rid: refs_rid,
                refs: vec![RefsAt {
                    remote: target,
                    at: Oid(at),
                }],
                timestamp: ts,
            });
            let mut bytes = Vec::new();
            for m in [inventory, refs] {
                let ann = m.sign(key).unwrap();
                Frame::gossip(Link::Outbound, Message::Announcement(ann))
                    .encode_into(&mut bytes)
                    .unwrap();
            }
            if tx.send(bytes).await.is_ok() {
                sent += 2;
            }
        }
    }
    sent
}

// ------------------------------------------------------------------------------------------
// One session of the load generator
// ------------------------------------------------------------------------------------------

#[allow(clippy::too_many_arguments)]
async fn session(
    i: usize,
    key: Keypair,
    remote: NodeId,
    addr: SocketAddr,
    sem: Arc<Semaphore>,
    shared: Arc<Shared>,
    ready: mpsc::UnboundedSender<(usize, Result<f64, String>)>,
    mut cmds: mpsc::Receiver<Vec<u8>>,
    (announce, filter): (bool, Filter),
) {
    let permit = sem.acquire_owned().await;
    let t = Instant::now();
    let established = tokio::time::timeout(HANDSHAKE_TIMEOUT, establish(&key, remote, addr)).await;
    let latency_ms = t.elapsed().as_secs_f64() * 1000.0;
    drop(permit);
    let (mut stream, mut decoder, frames) = match established {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => {
            let _ = ready.send((i, Err(e)));
            return;
        }
        Err(_) => {
            let _ = ready.send((i, Err(format!("timed out after {HANDSHAKE_TIMEOUT:?}"))));
            return;
        }
    };
    shared.frames_in.fetch_add(frames, Ordering::Relaxed);
    // Own node announcement (SEED, so the target accepts our inventory) and a Subscribe for
    // new gossip only, with an empty filter: relayed refs reach only the peers whose
    // inventory holds the repository.
    let mut out = Vec::new();
    let now = now_ms();
    let node = AnnouncementMessage::Node(NodeAnnouncement {
        version: 1,
        features: 1,
        timestamp: now,
        alias: format!("bench{i}").parse().unwrap(),
        addresses: vec![],
        nonce: 1,
        agent: "/seedd-bench:0.1/".parse().unwrap(),
    })
    .sign(&key)
    .unwrap();
    let subscribe = Subscribe {
        filter,
        since: now,
        until: TIMESTAMP_MAX,
    };
    let first = announce.then_some(Message::Announcement(node));
    for m in first.into_iter().chain([Message::Subscribe(subscribe)]) {
        Frame::gossip(Link::Outbound, m)
            .encode_into(&mut out)
            .unwrap();
    }
    if let Err(e) = stream.write_all(&out).await {
        let _ = ready.send((i, Err(format!("sending node announcement: {e}"))));
        return;
    }
    let _ = ready.send((i, Ok(latency_ms)));
    drop(ready);

    let started = Instant::now();
    let (mut rd, mut wr) = stream.split();
    let mut buf = vec![0u8; 16 * 1024];
    let mut last_sent = tokio::time::Instant::now();
    loop {
        tokio::select! {
            r = rd.read(&mut buf) => {
                let n = match r {
                    Ok(0) => {
                        if !shared.closing.load(Ordering::SeqCst) {
                            shared.disconnects.lock().unwrap().push(format!(
                                "session {i}: closed by the target {:.1} s after the handshake",
                                started.elapsed().as_secs_f64()
                            ));
                        }
                        return;
                    }
                    Ok(n) => n,
                    Err(e) => {
                        if !shared.closing.load(Ordering::SeqCst) {
                            shared.disconnects.lock().unwrap().push(format!(
                                "session {i}: read error {:.1} s after the handshake: {e}",
                                started.elapsed().as_secs_f64()
                            ));
                        }
                        return;
                    }
                };
                decoder.push(&buf[..n]);
                let mut reply = Vec::new();
                loop {
                    match decoder.next_frame() {
                        Ok(Some(frame)) => {
                            shared.frames_in.fetch_add(1, Ordering::Relaxed);
                            respond(&frame, &shared, &mut reply);
                        }
                        Ok(None) => break,
                        Err(e) => {
                            shared.protocol_errors.fetch_add(1, Ordering::Relaxed);
                            shared.disconnects.lock().unwrap().push(format!(
                                "session {i}: undecodable frame from the target: {e}"
                            ));
                            return;
                        }
                    }
                }
                decoder.shrink(16 * 1024);
                if !reply.is_empty() {
                    // A failed write shows up as a failed read next.
                    let _ = wr.write_all(&reply).await;
                    last_sent = tokio::time::Instant::now();
                }
            }
            cmd = cmds.recv() => match cmd {
                Some(bytes) => {
                    let _ = wr.write_all(&bytes).await;
                    last_sent = tokio::time::Instant::now();
                }
                None => return,
            },
            _ = tokio::time::sleep_until(last_sent + KEEPALIVE) => {
                shared.keepalives.fetch_add(1, Ordering::Relaxed);
                let ping = Frame::gossip(Link::Outbound, Message::Ping(Ping { ponglen: 1, zeroes: 0 }));
                let _ = wr.write_all(&ping.encode().unwrap()).await;
                last_sent = tokio::time::Instant::now();
            }
        }
    }
}

/// Connect, handshake as initiator, read the target's first three gossip messages. Returns
/// the stream, the decoder (it may hold further bytes) and the number of frames decoded.
async fn establish(
    key: &Keypair,
    remote: NodeId,
    addr: SocketAddr,
) -> Result<(TcpStream, FrameDecoder, u64), String> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (decoder, frames) = crate::establish(&mut stream, key, remote).await?;
    Ok((stream, decoder, frames))
}

/// Pong for Ping; Close for a git stream the target opens (we serve no repositories).
fn respond(frame: &Frame, shared: &Shared, reply: &mut Vec<u8>) {
    match frame {
        Frame::Gossip {
            message: Message::Ping(ping),
            ..
        } => {
            shared.pings.fetch_add(1, Ordering::Relaxed);
            Frame::gossip(
                Link::Outbound,
                Message::Pong {
                    zeroes: ping.ponglen,
                },
            )
            .encode_into(reply)
            .unwrap();
        }
        Frame::Control {
            control: Control::Open { stream },
            ..
        } => {
            shared.opens.fetch_add(1, Ordering::Relaxed);
            Frame::control(Link::Outbound, Control::Close { stream: *stream })
                .encode_into(reply)
                .unwrap();
        }
        Frame::Gossip { message, .. } => {
            if let Some(sent) = probe_sent_us(message) {
                let latency = now_us().saturating_sub(sent);
                shared.relay_latencies_us.lock().unwrap().push(latency);
            }
        }
        _ => {}
    }
}

/// Milliseconds since the Unix epoch (announcement timestamps).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
