//! One TCP connection: admission, the Noise handshake, then the frame loop of a session.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use seedd_proto::crypto::{Keypair, NodeId};
use seedd_proto::gossip::{self, SessionId};
use seedd_proto::wire::handshake::{Initiator, Responder, ACT1_LEN, ACT2_LEN, ACT3_LEN};
use seedd_proto::wire::{Control, Frame, FrameDecoder, FrameError, Link, StreamId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

use super::guard::Offence;
use super::input::{self, InputTx, SESSION_INPUT_BYTES, STREAM_INPUT_BYTES};
use super::stream::{self, StreamCtx, GIT_OUTBOX_BYTES};
use super::{
    link_label, now_ms, Core, Outgoing, OutgoingStream, SessionCmd, SessionHandle, Shared,
    OUTBOX_FRAMES,
};

/// A session that lasted this long resets the dialer's backoff.
const STABLE: Duration = Duration::from_secs(60);
/// Read buffer: starts small (idle sessions are the common case), doubles while reads fill
/// it, up to `READ_MAX`, and drops back after a short read.
const READ_MIN: usize = 4 * 1024;
const READ_MAX: usize = 64 * 1024;

/// Accepts inbound connections until shutdown.
pub(super) async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shared.shutdown.cancelled() => return,
        };
        let (stream, addr) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!(error = %seedd_core::logging::chain(&e), "p2p accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if let Some(reason) = admit(&shared, &addr) {
            shared
                .metrics
                .p2p
                .rejected
                .with_label_values(&[reason])
                .inc();
            tracing::debug!(%addr, reason, "refused inbound connection");
            drop(stream);
            continue;
        }
        let shared = shared.clone();
        tokio::spawn(async move {
            if let Err(e) = run(shared, stream, addr, Link::Inbound, None).await {
                tracing::debug!(%addr, error = %seedd_core::logging::chain(&*e), "inbound connection ended");
            }
        });
    }
}

/// Admission before the handshake: bans, per-IP rate, inbound limit (loopback exempt).
fn admit(shared: &Shared, addr: &SocketAddr) -> Option<&'static str> {
    let ip = addr.ip();
    let now = now_ms();
    let mut core = shared.lock();
    let (banned, lifted) = core.guard.banned(&ip, now);
    if let Some(ip) = lifted {
        if let Err(e) = shared.index.remove_ban(&ip) {
            tracing::error!(error = %seedd_core::logging::chain(&e), %ip, "cannot lift ban in index");
        }
        tracing::info!(%ip, "ban expired");
    }
    if banned {
        return Some("banned");
    }
    if !core.guard.admit_connection(&ip, now) {
        shared
            .metrics
            .p2p
            .rate_limited
            .with_label_values(&["ip"])
            .inc();
        return Some("rate_limited");
    }
    if !ip.is_loopback() {
        let inbound = core
            .sessions
            .values()
            .filter(|h| h.link == Link::Inbound && !h.addr.ip().is_loopback())
            .count()
            + core.inbound_handshaking;
        if inbound >= shared.cfg.max_inbound {
            return Some("inbound_limit");
        }
    }
    None
}

/// Dials `nid` at `addr` and keeps the session up, with backoff 2^n s in [3 s, 60 min].
pub(super) async fn dial_loop(
    shared: Arc<Shared>,
    nid: NodeId,
    addr: String,
    token: CancellationToken,
) {
    let mut attempts: u32 = 0;
    loop {
        if token.is_cancelled() {
            break;
        }
        let connected_already = {
            let core = shared.lock();
            let outbound = core
                .sessions
                .values()
                .filter(|h| h.link == Link::Outbound)
                .count();
            if outbound >= shared.cfg.max_outbound {
                tracing::debug!(peer = %nid, "outbound limit reached; waiting");
                true
            } else {
                core.sessions.values().any(|h| h.nid == nid)
            }
        };
        if connected_already {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(5)) => continue,
                _ = token.cancelled() => break,
            }
        }
        let started = Instant::now();
        tracing::info!(peer = %nid, %addr, attempt = attempts + 1, "dialing peer");
        let result = tokio::select! {
            r = dial_once(&shared, nid, &addr) => r,
            _ = token.cancelled() => break,
        };
        match result {
            Ok(()) => tracing::info!(peer = %nid, %addr, "session with peer ended"),
            Err(e) => {
                tracing::warn!(peer = %nid, %addr, error = %seedd_core::logging::chain(&*e), "connecting to peer failed; will retry")
            }
        }
        if started.elapsed() >= STABLE {
            attempts = 0;
        }
        let delay = Duration::from_secs(2u64.saturating_pow(attempts).clamp(3, 3600));
        attempts = attempts.saturating_add(1);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = token.cancelled() => break,
        }
    }
    let mut dialers = shared.dialers.lock().unwrap_or_else(|e| e.into_inner());
    if dialers.get(&nid).is_some_and(|(_, t)| t.is_cancelled()) {
        dialers.remove(&nid);
    }
}

async fn dial_once(shared: &Arc<Shared>, nid: NodeId, addr: &str) -> anyhow::Result<()> {
    let timeout = shared.cfg.handshake_timeout;
    let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| anyhow::anyhow!("TCP connect timed out after {timeout:?}"))??;
    let peer = stream.peer_addr()?;
    run(shared.clone(), stream, peer, Link::Outbound, Some(nid)).await
}

/// Handshake, then the session until it ends.
async fn run(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    addr: SocketAddr,
    link: Link,
    remote: Option<NodeId>,
) -> anyhow::Result<()> {
    let _ = stream.set_nodelay(true);
    let m = &shared.metrics.p2p;
    let ll = link_label(link);
    let gauge = m.sessions.with_label_values(&[ll, "handshake"]);
    gauge.inc();
    if link == Link::Inbound {
        shared.lock().inbound_handshaking += 1;
    }
    let hs = tokio::time::timeout(
        shared.cfg.handshake_timeout,
        handshake(&shared.keypair, &mut stream, remote),
    )
    .await;
    gauge.dec();
    if link == Link::Inbound {
        let mut core = shared.lock();
        core.inbound_handshaking = core.inbound_handshaking.saturating_sub(1);
    }
    let remote = match hs {
        Err(_) => {
            m.handshakes.with_label_values(&[ll, "timeout"]).inc();
            anyhow::bail!("handshake timed out");
        }
        Ok(Err(e)) => {
            m.handshakes.with_label_values(&[ll, "error"]).inc();
            if let HandshakeFailure::Protocol(_) = e {
                let mut core = shared.lock();
                shared.penalise(&mut core, addr.ip(), Offence::Handshake, &e.to_string());
            }
            anyhow::bail!("handshake failed: {e}");
        }
        Ok(Ok(nid)) => nid,
    };
    if remote == shared.nid {
        m.handshakes.with_label_values(&[ll, "self"]).inc();
        anyhow::bail!("connected to ourselves");
    }
    if shared.policies.blocked(&remote) {
        m.handshakes.with_label_values(&[ll, "blocked"]).inc();
        anyhow::bail!("{remote} is blocked by policy");
    }
    session(shared, stream, addr, link, remote).await
}

#[derive(Debug, thiserror::Error)]
enum HandshakeFailure {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Protocol(#[from] seedd_proto::wire::handshake::HandshakeError),
}

/// The Noise XK exchange (32/32/48 bytes, protocol.md §3.2). Returns the remote node id.
async fn handshake(
    local: &Keypair,
    stream: &mut TcpStream,
    remote: Option<NodeId>,
) -> Result<NodeId, HandshakeFailure> {
    // A fresh ephemeral per connection (the official node uses a fixed one; peers accept any).
    let ephemeral = Keypair::generate();
    match remote {
        Some(remote) => {
            let (awaiting, act1) = Initiator::new(local.clone(), ephemeral, remote).act1()?;
            stream.write_all(&act1).await?;
            let mut act2 = [0u8; ACT2_LEN];
            stream.read_exact(&mut act2).await?;
            let (act3, done) = awaiting.act3(&act2)?;
            stream.write_all(&act3).await?;
            Ok(done.remote)
        }
        None => {
            let mut act1 = [0u8; ACT1_LEN];
            stream.read_exact(&mut act1).await?;
            let (awaiting, act2) = Responder::new(local.clone(), ephemeral).act2(&act1)?;
            stream.write_all(&act2).await?;
            let mut act3 = [0u8; ACT3_LEN];
            stream.read_exact(&mut act3).await?;
            Ok(awaiting.finish(&act3)?.remote)
        }
    }
}

/// Resolves a duplicate session with the same node (protocol.md §3.9): with mixed
/// directions the connection dialed by the greater node id survives; otherwise the newer one
/// is closed. Returns the session to close: `None` (no conflict), the existing one, or
/// `Some(0)` for the new one.
fn resolve_conflict(
    local: &NodeId,
    remote: &NodeId,
    new_link: Link,
    existing: &[(SessionId, Link)],
) -> Option<SessionId> {
    let (id, old_link) = *existing.first()?;
    if old_link == new_link {
        return Some(0);
    }
    // The surviving link is ours-dialed (Outbound) if we have precedence.
    let winner = if local > remote {
        Link::Outbound
    } else {
        Link::Inbound
    };
    if new_link == winner {
        Some(id)
    } else {
        Some(0)
    }
}

/// The frame loop of an established session.
async fn session(
    shared: Arc<Shared>,
    stream: TcpStream,
    addr: SocketAddr,
    link: Link,
    remote: NodeId,
) -> anyhow::Result<()> {
    let m = &shared.metrics.p2p;
    let ll = link_label(link);
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, mut rx) = mpsc::channel::<Outgoing>(OUTBOX_FRAMES);
    let cancel = shared.shutdown.child_token();
    let close_reason = Arc::new(Mutex::new(None));
    let trusted = shared.trusted.contains(&remote);
    let streams_outbox = tx.clone();
    let (cmd_tx, mut cmd_rx) = mpsc::channel::<SessionCmd>(16);
    {
        let mut core = shared.lock();
        let existing: Vec<(SessionId, Link)> = core
            .sessions
            .iter()
            .filter(|(_, h)| h.nid == remote)
            .map(|(id, h)| (*id, h.link))
            .collect();
        match resolve_conflict(&shared.nid, &remote, link, &existing) {
            Some(0) => {
                m.handshakes.with_label_values(&[ll, "conflict"]).inc();
                tracing::info!(peer = %remote, %addr, link = ll, "duplicate connection; keeping the existing session");
                anyhow::bail!("duplicate connection with {remote}");
            }
            Some(old) => {
                tracing::info!(peer = %remote, %addr, link = ll, "duplicate connection; replacing the existing session");
                shared.close_session(&mut core, old, "conflict");
                core.service.disconnected(old);
                core.sessions.remove(&old);
            }
            None => {}
        }
        m.handshakes.with_label_values(&[ll, "ok"]).inc();
        core.sessions.insert(
            id,
            SessionHandle {
                nid: remote,
                link,
                addr,
                since: now_ms(),
                outbox: tx,
                cancel: cancel.clone(),
                close_reason: close_reason.clone(),
                commands: cmd_tx,
            },
        );
        core.service.connected(id, remote, link, now_ms());
        let outputs = core.service.take_outputs();
        shared.dispatch(&mut core, outputs);
    }
    m.sessions.with_label_values(&[ll, "connected"]).inc();
    tracing::info!(peer = %remote, %addr, link = ll, session = id, "peer connected");

    let mut streams = Streams {
        ctx: StreamCtx {
            shared: shared.clone(),
            remote,
            link,
            outbox: streams_outbox,
            budget: Arc::new(Semaphore::new(GIT_OUTBOX_BYTES)),
            client: seedd_core::config::client_key(addr.ip(), 64),
        },
        open: HashMap::new(),
        done: mpsc::unbounded_channel(),
        opened: 0,
        input_budget: input::session_budget(),
    };

    let (mut reader, mut writer) = stream.into_split();
    // Writer: drains the outbox; ends on error or cancellation.
    let writer_cancel = cancel.clone();
    let writer_task = tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                n = rx.recv() => n,
                _ = writer_cancel.cancelled() => None,
            };
            let Some(Outgoing::Frame { bytes, permit }) = next else {
                break;
            };
            writer.write_all(&bytes).await?;
            drop(permit);
        }
        let _ = writer.shutdown().await;
        Ok::<(), std::io::Error>(())
    });

    let mut decoder = FrameDecoder::new();
    let mut buf = vec![0u8; READ_MIN];
    let outcome: &'static str = loop {
        let n = tokio::select! {
            r = reader.read(&mut buf) => r,
            _ = cancel.cancelled() => break "cancelled",
            Some(done) = streams.done.1.recv() => {
                streams.open.remove(&done);
                continue;
            }
            Some(cmd) = cmd_rx.recv() => {
                streams.command(cmd).await;
                continue;
            }
        };
        let n = match n {
            Ok(0) => break "peer_closed",
            Ok(n) => n,
            Err(_) => break "io_error",
        };
        let Some(chunk) = buf.get(..n) else {
            break "io_error";
        };
        decoder.push(chunk);
        let mut failed = None;
        // The gossip of one read is handled together: two core-lock holds for the batch,
        // the signatures verified between them, outside the lock (`on_gossip`).
        let mut gossip = Vec::new();
        loop {
            let before = decoder.buffered();
            match decoder.next_frame() {
                Ok(Some(Frame::Gossip { message, .. })) => {
                    let size = before.saturating_sub(decoder.buffered()) as u64;
                    gossip.push((message, size));
                }
                Ok(Some(Frame::Control { control, .. })) => {
                    let size = before.saturating_sub(decoder.buffered()) as u64;
                    m.messages.with_label_values(&["in", "control"]).inc();
                    m.message_bytes
                        .with_label_values(&["in", "control"])
                        .inc_by(size);
                    streams.control(control);
                }
                Ok(Some(Frame::Git { stream, data })) => {
                    let size = before.saturating_sub(decoder.buffered()) as u64;
                    m.messages.with_label_values(&["in", "git"]).inc();
                    m.message_bytes
                        .with_label_values(&["in", "git"])
                        .inc_by(size);
                    streams.data(stream, data).await;
                }
                Ok(None) => break,
                Err(e) => {
                    failed = Some(decode_failure(&shared, remote, addr, &e));
                    break;
                }
            }
        }
        if !gossip.is_empty() {
            // Back-pressure from the disk: while the gossip write queue is above its mark
            // this session stops reading (its peer's TCP window closes).
            shared.persist.ready().await;
            on_gossip(&shared, id, remote, addr, link, trusted, gossip).await;
        }
        if let Some(reason) = failed {
            break reason;
        }
        decoder.shrink(16 * 1024);
        if n == buf.len() && buf.len() < READ_MAX {
            buf = vec![0u8; buf.len() * 2];
        } else if n < buf.len() / 8 && buf.len() > READ_MIN {
            buf = vec![0u8; READ_MIN];
        }
    };
    cancel.cancel();
    streams.close_all();
    let _ = writer_task.await;

    // Why we closed it, when we did (a misbehaving peer, a conflict): whatever the reader saw
    // after that — the peer closing its end as a result, often the first of the two events
    // `select!` picks — is a consequence, not the reason.
    let decided = close_reason.lock().ok().and_then(|r| *r);
    let reason = match (decided, outcome) {
        (Some(reason), _) => reason,
        (None, "cancelled") => "shutdown",
        (None, other) => other,
    };
    {
        let mut core = shared.lock();
        // A conflict may already have removed (and replaced) this session.
        if core.sessions.contains_key(&id) {
            core.sessions.remove(&id);
            core.service.disconnected(id);
        }
    }
    m.sessions.with_label_values(&[ll, "connected"]).dec();
    m.disconnects.with_label_values(&[reason]).inc();
    tracing::info!(peer = %remote, %addr, link = ll, reason, "peer disconnected");
    Ok(())
}

fn decode_failure(
    shared: &Shared,
    remote: NodeId,
    addr: SocketAddr,
    e: &FrameError,
) -> &'static str {
    tracing::warn!(peer = %remote, %addr, error = %seedd_core::logging::chain(&e), "malformed frame; disconnecting peer");
    let mut core = shared.lock();
    shared.penalise(&mut core, addr.ip(), Offence::DecodeError, &e.to_string());
    "decode_error"
}

/// Announcements of one batch verified inline on the session's task; a larger batch is
/// verified on the blocking pool (an Ed25519 verification is ~35 µs), unless the process has
/// one core ([`one_core`]).
const VERIFY_INLINE: usize = 8;

/// Whether this process may run on one core only (affinity or cgroup quota): then the blocking
/// pool runs nothing in parallel and handing it a batch costs two thread wake-ups (~10 % of a
/// gossip burst's CPU, perf), so batches are verified inline, still outside the core lock.
fn one_core() -> bool {
    static ONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ONE.get_or_init(|| std::thread::available_parallelism().map_or(true, |n| n.get() == 1))
}

/// Verifies each announcement with its author's key (the cached one, else decompressed here);
/// gives back, with each outcome, a key decompressed here that verified (to be kept).
fn verify_each(
    anns: Vec<(
        seedd_proto::wire::Announcement,
        Option<seedd_proto::crypto::VerifyingKey>,
    )>,
) -> Vec<(
    Option<gossip::Verified>,
    Option<seedd_proto::crypto::VerifyingKey>,
)> {
    anns.into_iter()
        .map(|(ann, cached)| {
            let fresh = cached.is_none();
            let Some(key) = cached.or_else(|| ann.node.verifying_key().ok()) else {
                return (None, None);
            };
            let verified = gossip::Verified::check_with(ann, &key);
            let keep = (fresh && verified.is_some()).then_some(key);
            (verified, keep)
        })
        .collect()
}

/// Handles the gossip messages of one read, in order: per-node and per-host rate limits and
/// the service's cheap checks under the core lock, then the signatures of the announcements
/// still wanted verified outside it, then those announcements handed to the service under the
/// lock again. The lock is never held for a verification, and a relayed copy that is stale
/// (every copy but the first) costs no verification at all.
async fn on_gossip(
    shared: &Arc<Shared>,
    id: SessionId,
    remote: NodeId,
    addr: SocketAddr,
    link: Link,
    trusted: bool,
    batch: Vec<(seedd_proto::wire::Message, u64)>,
) {
    let c = &shared.counters;
    let mut wanted = Vec::new();
    // From the first announcement to verify on, the batch's messages in order (announcements
    // as their index in `wanted`): acted on after the verification, so a session's messages
    // take effect in the order it sent them (a Ping after announcements is answered once
    // they are stored).
    let mut after: Vec<Next> = Vec::new();
    // Authors whose node announcement is in `wanted`: their inventory and refs in the same
    // batch (a peer sends its NodeAnnouncement and Inventory together on connect) are
    // verified too, and checked again after the node announcement is stored.
    let mut announcing = std::collections::HashSet::new();
    // What this batch put in `Core::verifying` (taken out again however the batch ends).
    let mut registered = Verifying {
        shared: shared.clone(),
        keys: Vec::new(),
    };
    {
        let now = now_ms();
        let mut core = shared.lock();
        for (message, size) in batch {
            c.incoming(message.message_type()).count(1, size);
            let admitted =
                core.guard
                    .admit_message(&remote, &addr.ip(), link == Link::Inbound, trusted, now);
            if !admitted {
                c.rate_limited_nid.inc();
                c.dropped_rate_limited.inc();
                continue;
            }
            if !core.guard.admit_host_message(&addr.ip(), trusted, now) {
                c.rate_limited_host.inc();
                c.dropped_rate_limited.inc();
                continue;
            }
            match message {
                seedd_proto::wire::Message::Announcement(ann) => {
                    let verdict = match core.service.screen(&ann) {
                        Err(gossip::Dropped::UnknownAuthor) if announcing.contains(&ann.node) => {
                            Ok(())
                        }
                        v => v,
                    };
                    if let Err(reason) = verdict {
                        core.service.dropped_unverified(id, reason, now);
                        continue;
                    }
                    // An identical copy another session is verifying: its outcome is ours.
                    let key = (ann.node, ann.signature);
                    match core.verifying.get(&key) {
                        Some(other) if *other == ann => {
                            core.service
                                .dropped_unverified(id, gossip::Dropped::Stale, now);
                            continue;
                        }
                        Some(_) => {}
                        None => {
                            core.verifying.insert(key, ann.clone());
                            registered.keys.push(key);
                        }
                    }
                    if matches!(ann.message, seedd_proto::wire::AnnouncementMessage::Node(_)) {
                        announcing.insert(ann.node);
                    }
                    after.push(Next::Verified(wanted.len()));
                    let key = core.keys.get(&ann.node);
                    wanted.push((ann, key));
                }
                other if after.is_empty() => core.service.received(id, other, now),
                other => after.push(Next::Other(other)),
            }
        }
        let outputs = core.service.take_outputs();
        shared.dispatch(&mut core, outputs);
    }
    if wanted.is_empty() {
        return;
    }
    shared
        .metrics
        .p2p
        .signatures_verified
        .inc_by(wanted.len() as u64);
    let checked = if wanted.len() <= VERIFY_INLINE || one_core() {
        verify_each(wanted)
    } else {
        match tokio::task::spawn_blocking(move || verify_each(wanted)).await {
            Ok(checked) => checked,
            // The blocking pool is shutting down: nothing is acted on.
            Err(_) => return,
        }
    };
    let now = now_ms();
    let mut core = shared.lock();
    registered.release(&mut core);
    let mut checked: Vec<Option<gossip::Verified>> = checked
        .into_iter()
        .map(|(verified, key)| {
            if let Some(key) = key {
                core.keys.keep(key);
            }
            verified
        })
        .collect();
    for next in after {
        match next {
            Next::Other(message) => core.service.received(id, message, now),
            Next::Verified(i) => match checked.get_mut(i).and_then(Option::take) {
                Some(v) => core.service.received_verified(id, v, now),
                None => {
                    // The session is closed for it; what followed in the batch is not acted on.
                    core.service.received_invalid_signature(id, now);
                    break;
                }
            },
        }
    }
    let outputs = core.service.take_outputs();
    shared.dispatch(&mut core, outputs);
}

/// A message of a batch after its first announcement to verify ([`on_gossip`]).
enum Next {
    /// The announcement at this index of the batch's verified ones.
    Verified(usize),
    Other(seedd_proto::wire::Message),
}

/// The keys a batch registered in [`Core::verifying`]: released under the core lock once the
/// batch is acted on, or, if the batch never gets there (its task dropped), when this drops.
struct Verifying {
    shared: Arc<Shared>,
    keys: Vec<(NodeId, [u8; 64])>,
}

impl Verifying {
    fn release(&mut self, core: &mut Core) {
        for key in self.keys.drain(..) {
            core.verifying.remove(&key);
        }
    }
}

impl Drop for Verifying {
    fn drop(&mut self) {
        if !self.keys.is_empty() {
            let shared = self.shared.clone();
            self.release(&mut shared.lock());
        }
    }
}

/// A registered stream.
enum OpenStream {
    /// The peer fetches from us: its input (until `Eof`) and the serving task.
    Served(Option<InputTx>, tokio::task::AbortHandle),
    /// We fetch from the peer: where its bytes go.
    Fetching(InputTx),
}

/// A session's git streams opened by the peer (we are the responder).
struct Streams {
    ctx: StreamCtx,
    /// Registered streams; `None` input once the peer sent `Eof`.
    open: HashMap<StreamId, OpenStream>,
    done: (
        mpsc::UnboundedSender<StreamId>,
        mpsc::UnboundedReceiver<StreamId>,
    ),
    /// Git streams we opened so far (ids are never reused within a connection).
    opened: u64,
    /// Unread input of the streams the peer opened, together.
    input_budget: Arc<Semaphore>,
}

/// Streams one peer may have open at once (radicle fetches one at a time per peer).
const MAX_STREAMS_PER_SESSION: usize = 4;

impl Streams {
    async fn command(&mut self, cmd: SessionCmd) {
        match cmd {
            SessionCmd::OpenStream(reply) => {
                self.opened += 1;
                let Ok(id) = StreamId::git(self.ctx.link, self.opened) else {
                    return;
                };
                let (tx, rx) = input::channel(None);
                let stream = OutgoingStream {
                    id,
                    link: self.ctx.link,
                    outbox: self.ctx.outbox.clone(),
                    input: rx,
                };
                if !stream.control(Control::Open { stream: id }).await {
                    return;
                }
                self.open.insert(id, OpenStream::Fetching(tx));
                let _ = reply.send(stream);
            }
        }
    }

    fn control(&mut self, control: Control) {
        match control {
            Control::Open { stream } => {
                // An Open for a registered id is ignored (§3.7); kinds other than git too.
                if self.open.contains_key(&stream)
                    || stream.kind() != Ok(seedd_proto::wire::StreamKind::Git)
                {
                    return;
                }
                if self.open.len() >= MAX_STREAMS_PER_SESSION {
                    tracing::warn!(peer = %self.ctx.remote, %stream, "too many git streams from peer; refusing");
                    let ctx = self.ctx.clone();
                    tokio::spawn(async move {
                        ctx.shared
                            .metrics
                            .p2p
                            .git_serves
                            .with_label_values(&["refused_busy"])
                            .inc();
                        if let Ok(bytes) =
                            Frame::control(ctx.link, Control::Close { stream }).encode()
                        {
                            let _ = ctx
                                .outbox
                                .send(Outgoing::Frame {
                                    bytes: Bytes::from(bytes),
                                    permit: None,
                                })
                                .await;
                        }
                    });
                    return;
                }
                let (tx, rx) = input::channel(Some(self.input_budget.clone()));
                let ctx = self.ctx.clone();
                let done = self.done.0.clone();
                let task = tokio::spawn(async move {
                    stream::serve(ctx, stream, rx).await;
                    let _ = done.send(stream);
                });
                self.open
                    .insert(stream, OpenStream::Served(Some(tx), task.abort_handle()));
            }
            Control::Eof { stream } => {
                if let Some(OpenStream::Served(input, _)) = self.open.get_mut(&stream) {
                    *input = None;
                }
            }
            Control::Close { stream } => match self.open.remove(&stream) {
                // Aborting drops upload-pack (killed with its process group).
                Some(OpenStream::Served(_, task)) => task.abort(),
                // Dropping the sender ends the fetcher's input.
                Some(OpenStream::Fetching(_)) | None => {}
            },
        }
    }

    /// Git bytes for a stream; unknown streams are ignored. A stream the peer opened is
    /// closed when its unread input would pass its bound or the session's; our fetches get
    /// back-pressure (the session stops reading until the fetch catches up).
    async fn data(&mut self, stream: StreamId, data: Vec<u8>) {
        let overflow = match self.open.get(&stream) {
            Some(OpenStream::Served(Some(input), _)) => input.try_send(data).is_err(),
            Some(OpenStream::Fetching(input)) => {
                let _ = input.send(data).await;
                false
            }
            _ => false,
        };
        if overflow {
            self.overflow(stream).await;
        }
    }

    /// Closes a served stream whose peer sent more than may wait unread.
    async fn overflow(&mut self, stream: StreamId) {
        if let Some(OpenStream::Served(_, task)) = self.open.remove(&stream) {
            task.abort();
        }
        self.ctx.shared.metrics.p2p.git_stream_overflows.inc();
        tracing::warn!(peer = %self.ctx.remote, %stream, "peer sent more git stream input than may wait unread ({STREAM_INPUT_BYTES} bytes per stream, {SESSION_INPUT_BYTES} per session); closing the stream");
        self.ctx.send_close(stream).await;
    }

    fn close_all(&mut self) {
        for (_, s) in self.open.drain() {
            if let OpenStream::Served(_, task) = s {
                task.abort();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_resolution_follows_node_id_precedence() {
        let low = NodeId::from_bytes([1; 32]);
        let high = NodeId::from_bytes([2; 32]);
        // No existing session: no conflict.
        assert_eq!(resolve_conflict(&high, &low, Link::Inbound, &[]), None);
        // Same direction: the new one goes.
        assert_eq!(
            resolve_conflict(&high, &low, Link::Inbound, &[(7, Link::Inbound)]),
            Some(0)
        );
        // We are higher: our dial (outbound) survives.
        assert_eq!(
            resolve_conflict(&high, &low, Link::Outbound, &[(7, Link::Inbound)]),
            Some(7)
        );
        assert_eq!(
            resolve_conflict(&high, &low, Link::Inbound, &[(7, Link::Outbound)]),
            Some(0)
        );
        // We are lower: their dial (our inbound) survives.
        assert_eq!(
            resolve_conflict(&low, &high, Link::Inbound, &[(7, Link::Outbound)]),
            Some(7)
        );
        assert_eq!(
            resolve_conflict(&low, &high, Link::Outbound, &[(7, Link::Inbound)]),
            Some(0)
        );
    }
}
