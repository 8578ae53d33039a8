//! The peer-to-peer shell: a tokio listener and dialers around the sans-IO `wire` codecs and
//! `gossip` service. Protocol rules live in `seedd_proto`; this module moves bytes, keeps
//! time, enforces connection/rate limits and bans, and persists gossip state.
//!
//! Locking: one `std::sync::Mutex` around the service and the session table (`Core`). It is
//! held only for a service call plus non-blocking `try_send`s of its outputs, so outputs reach
//! each session's outbox in the order the service produced them.

mod conn;
mod counters;
mod dispatch;
pub(crate) mod guard;
pub(crate) mod input;
mod persist;
pub(crate) mod stream;

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use seedd_proto::crypto::{Keypair, NodeId, RepoId};
use seedd_proto::gossip::{
    self, DisconnectReason, Event, Output, Restored, Service, SessionId, SubscribeAnswer,
    VisibilityMap,
};
use seedd_proto::wire::{Address, Frame, Link, Message};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use guard::{Guard, Offence};
use seedd_core::config::{Config, DefaultPolicy};
use seedd_core::index::gossip::BanRecord;
use seedd_core::index::Index;
use seedd_core::metrics::Metrics;

/// Outbox capacity per session, in frames. A peer that lets this fill is too slow and is
/// dropped rather than letting memory grow.
const OUTBOX_FRAMES: usize = 1024;
/// Timer tick of the gossip service.
const TICK: Duration = Duration::from_secs(1);

/// The public Radicle network's bootstrap seeds (radicle 0.25.1 `node/config.rs`), dialed only
/// with `p2p.bootstrap = true`.
pub(crate) const BOOTSTRAP_SEEDS: [&str; 2] = [
    "z6MkrLMMsiPWUcNPHcRajuMi9mDfYckSoJyPwwnknocNYPm7@iris.radicle.network:8776",
    "z6Mkmqogy2qEM2ummccUthFEaaHvyYmYBYh3dbe9W4ebScxo@rosa.radicle.network:8776",
];

/// Wall-clock milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub(crate) use seedd_core::metrics::labels::{link_label, type_label};

/// Settings of the p2p shell, derived from [`Config`].
#[derive(Debug, Clone)]
pub struct NetConfig {
    pub listen: Vec<SocketAddr>,
    /// Persistent peers: (node id, "host:port").
    pub connect: Vec<(NodeId, String)>,
    pub max_inbound: usize,
    pub max_outbound: usize,
    pub handshake_timeout: Duration,
    pub gossip: gossip::Config,
    pub rate: seedd_core::config::RateConfig,
    pub ban: seedd_core::config::BanConfig,
    /// Git streams served at once (all peers); separate from the fetch budget.
    pub max_concurrent_serves: usize,
    /// How long a stream waits for a serve slot before it is refused.
    pub serve_queue_timeout: Duration,
    /// A git stream with no traffic either way for this long is closed.
    pub stream_idle_timeout: Duration,
    /// Largest request (fetcher → us) accepted on one stream.
    pub max_stream_request_bytes: u64,
}

impl NetConfig {
    pub fn from_config(cfg: &Config) -> anyhow::Result<Self> {
        let listen = cfg.p2p.listen.clone();
        let mut connect: Vec<(NodeId, String)> = cfg
            .p2p
            .connect
            .iter()
            .map(|p| (p.nid, p.addr.clone()))
            .collect();
        if cfg.p2p.bootstrap {
            for peer in BOOTSTRAP_SEEDS {
                let (nid, addr) = parse_peer(peer)?;
                if !connect.iter().any(|(n, _)| *n == nid) {
                    connect.push((nid, addr));
                }
            }
        }
        let external_addresses: Vec<Address> = cfg
            .p2p
            .external_addresses
            .iter()
            .map(|a| {
                a.parse::<Address>()
                    .map_err(|e| anyhow::anyhow!("p2p.external_addresses {a:?}: {e}"))
            })
            .collect::<Result<_, _>>()?;
        let relay = cfg.p2p.relay.enabled(!external_addresses.is_empty());
        let gossip = gossip::Config {
            alias: cfg
                .alias
                .parse()
                .map_err(|e| anyhow::anyhow!("alias {:?}: {e}", cfg.alias))?,
            user_agent: seedd_proto::wire::UserAgent::seedd(),
            external_addresses,
            relay,
            seed_all: cfg.policy.default == DefaultPolicy::Allow,
            seeded: Default::default(),
            timers: gossip::Timers::default(),
            caps: gossip::Caps {
                max_nodes: cfg.p2p.max_nodes,
                max_routes: cfg.p2p.max_routes,
                max_announcements: cfg.p2p.max_announcements,
            },
        };
        Ok(Self {
            listen,
            connect,
            max_inbound: cfg.p2p.max_inbound,
            max_outbound: cfg.p2p.max_outbound,
            handshake_timeout: cfg.p2p.handshake_timeout,
            gossip,
            rate: cfg.p2p.rate.clone(),
            ban: cfg.p2p.ban.clone(),
            max_concurrent_serves: cfg.p2p.max_concurrent_serves,
            serve_queue_timeout: cfg.p2p.serve_queue_timeout,
            stream_idle_timeout: cfg.p2p.stream_idle_timeout,
            max_stream_request_bytes: cfg.p2p.max_stream_request_bytes,
        })
    }
}

/// The gossip visibility of every indexed repository: public, or private to its delegates
/// and allow list (what `net::stream` checks before serving it).
/// From the index's in-memory census (no record decoded: issue 30 §3).
pub(crate) fn visibility_map(
    index: &Index,
) -> Result<VisibilityMap, seedd_core::index::IndexError> {
    let mut public = Vec::with_capacity(index.repo_count()?);
    let mut private = std::collections::HashMap::new();
    index.for_each_visibility(|rid, p| match p {
        None => public.push(rid),
        Some((delegates, allow)) => {
            private.insert(
                rid,
                gossip::Visibility::Private {
                    allowed: delegates.iter().chain(allow).copied().collect(),
                },
            );
        }
    });
    Ok(VisibilityMap::from_parts(public, private))
}

/// Who may learn about one repository from us (see [`visibility_map`]).
pub(crate) fn visibility_of(r: &seedd_core::index::RepoRecord) -> gossip::Visibility {
    match &r.visibility {
        seedd_core::storage::Visibility::Public => gossip::Visibility::Public,
        seedd_core::storage::Visibility::Private { allow } => gossip::Visibility::Private {
            allowed: r.delegates.iter().chain(allow).copied().collect(),
        },
    }
}

/// Parses `z6Mk…@host:port` (the rules of [`seedd_core::config::PeerAddr`]).
pub fn parse_peer(s: &str) -> anyhow::Result<(NodeId, String)> {
    let p: seedd_core::config::PeerAddr = s.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    Ok((p.nid, p.addr))
}

/// What goes into a session's outbox.
#[derive(Debug)]
pub(crate) enum Outgoing {
    /// Encoded frame bytes; `permit` (git output) returns its bytes to the session's budget
    /// once written.
    Frame {
        bytes: Bytes,
        permit: Option<tokio::sync::OwnedSemaphorePermit>,
    },
}

/// A live (handshaken) session, as the shell tracks it.
pub(crate) struct SessionHandle {
    pub nid: NodeId,
    pub link: Link,
    pub addr: SocketAddr,
    pub since: u64,
    pub outbox: mpsc::Sender<Outgoing>,
    pub cancel: CancellationToken,
    /// Why it is being closed (set before cancelling).
    pub close_reason: Arc<Mutex<Option<&'static str>>>,
    /// Requests to the session task (open an outgoing git stream).
    pub commands: mpsc::Sender<SessionCmd>,
}

/// A request to a session task.
pub(crate) enum SessionCmd {
    /// Open a git stream to the peer (we fetch); the reply carries the stream.
    OpenStream(tokio::sync::oneshot::Sender<OutgoingStream>),
}

/// A git stream we opened on a session (we are the fetcher).
pub(crate) struct OutgoingStream {
    pub id: seedd_proto::wire::StreamId,
    pub(crate) link: Link,
    pub(crate) outbox: mpsc::Sender<Outgoing>,
    /// Bytes from the peer; ends when the peer closes the stream or the session ends.
    pub input: input::Input,
}

impl OutgoingStream {
    /// Sends git bytes (split into frames of at most 64 KiB).
    pub(crate) async fn send(&self, data: &[u8]) -> bool {
        for chunk in data.chunks(64 * 1024) {
            let Ok(bytes) = Frame::git(self.id, chunk.to_vec()).encode() else {
                return false;
            };
            let frame = Outgoing::Frame {
                bytes: Bytes::from(bytes),
                permit: None,
            };
            if self.outbox.send(frame).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Sends a control frame about this stream (Eof, Close).
    pub(crate) async fn control(&self, control: seedd_proto::wire::Control) -> bool {
        let Ok(bytes) = Frame::control(self.link, control).encode() else {
            return false;
        };
        self.outbox
            .send(Outgoing::Frame {
                bytes: Bytes::from(bytes),
                permit: None,
            })
            .await
            .is_ok()
    }
}

/// Why a stream could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("not connected to {0}")]
    NotConnected(NodeId),
    #[error("session with {0} ended")]
    SessionGone(NodeId),
}

/// State guarded by one mutex (see the module docs).
pub(crate) struct Core {
    pub service: Service,
    pub sessions: HashMap<SessionId, SessionHandle>,
    pub guard: Guard,
    pub inbound_handshaking: usize,
    /// Announcements being verified outside the lock, by author and signature: an identical
    /// copy from another session meanwhile is stale once the first is stored (or invalid like
    /// it), so it is dropped without a verification of its own.
    pub verifying: HashMap<(NodeId, [u8; 64]), seedd_proto::wire::Announcement>,
    /// Authors' keys, decompressed once.
    pub keys: KeyCache,
}

/// The decompressed keys of authors whose announcements verified (decompressing one is ~10 %
/// of a verification), at most [`KeyCache::CAP`] (~3 MiB; emptied when full).
#[derive(Default)]
pub(crate) struct KeyCache(HashMap<NodeId, seedd_proto::crypto::VerifyingKey>);

impl KeyCache {
    const CAP: usize = 16_384;

    pub(crate) fn get(&self, nid: &NodeId) -> Option<seedd_proto::crypto::VerifyingKey> {
        self.0.get(nid).cloned()
    }

    /// Keeps a key that verified a signature.
    pub(crate) fn keep(&mut self, key: seedd_proto::crypto::VerifyingKey) {
        if self.0.len() >= Self::CAP {
            self.0.clear();
        }
        self.0.insert(key.node(), key);
    }
}

pub(crate) struct Shared {
    /// Ourselves, for tasks spawned from `dispatch` (Subscribe answers).
    pub me: std::sync::Weak<Shared>,
    pub keypair: Keypair,
    pub nid: NodeId,
    pub cfg: NetConfig,
    pub core: Mutex<Core>,
    pub index: Index,
    pub metrics: Arc<Metrics>,
    /// Handles of the counters the gossip paths count per message and recipient.
    pub counters: counters::GossipCounters,
    pub persist: persist::PersistQueue,
    pub next_id: AtomicU64,
    pub shutdown: CancellationToken,
    /// Dial targets and the token that stops their dialer.
    pub dialers: Mutex<HashMap<NodeId, (String, CancellationToken)>>,
    pub trusted: HashSet<NodeId>,
    pub storage: seedd_core::storage::Storage,
    /// Spawns `git upload-pack` for git streams.
    pub git: seedd_core::serve::GitServer,
    /// `ls-refs` from ref snapshots, git's capabilities (shared with HTTP).
    pub advertiser: Arc<seedd_core::serve::advertiser::Advertiser>,
    /// Cacheable fetches (shared with HTTP; `None` when disabled).
    pub pack_cache: Option<Arc<seedd_core::serve::packcache::PackCache>>,
    pub serve_slots: Arc<tokio::sync::Semaphore>,
    /// Fetch triggers for the replication layer.
    pub hints: tokio::sync::broadcast::Sender<FetchHint>,
    pub policies: seedd_core::policy::Policies,
}

/// A reason to fetch (protocol.md §5.4), from gossip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FetchHint {
    /// The connected peer to fetch from.
    pub from: NodeId,
    pub rids: Vec<RepoId>,
    /// From an inventory: fetch only the repositories not held yet (protocol.md §5.4).
    pub clone_only: bool,
}

/// What the p2p layer needs from the rest of the daemon.
#[derive(Clone)]
pub struct NetDeps {
    pub policies: seedd_core::policy::Policies,
    pub index: Index,
    pub storage: seedd_core::storage::Storage,
    pub git: seedd_core::serve::GitServer,
    pub advertiser: Arc<seedd_core::serve::advertiser::Advertiser>,
    pub pack_cache: Option<Arc<seedd_core::serve::packcache::PackCache>>,
    pub metrics: Arc<Metrics>,
}

/// Handle to the running p2p shell. Cheap to clone.
#[derive(Clone)]
pub struct Net {
    shared: Arc<Shared>,
    local_addrs: Arc<Vec<SocketAddr>>,
}

/// A session, for operators (`seedctl peers ls`).
#[derive(Debug, Clone, Serialize)]
pub struct PeerInfo {
    pub nid: NodeId,
    pub link: &'static str,
    pub addr: String,
    pub state: &'static str,
    /// Unix ms.
    pub since: u64,
    pub latency_ms: Option<u64>,
    pub subscribed: bool,
    pub alias: Option<String>,
    pub agent: Option<String>,
}

/// A routing-table row.
#[derive(Debug, Clone, Serialize)]
pub struct RouteInfo {
    pub rid: RepoId,
    pub nid: NodeId,
    /// Unix ms of the information.
    pub timestamp: u64,
}

impl Net {
    /// Restores gossip state from the index, binds the listeners and starts the dialers and
    /// timers. Stops when `shutdown` fires.
    pub async fn start(
        keypair: Keypair,
        cfg: NetConfig,
        deps: NetDeps,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let NetDeps {
            policies,
            index,
            storage,
            git,
            advertiser,
            pack_cache,
            metrics,
        } = deps;
        let restored: Restored = index.load_gossip().context("loading gossip state")?;
        let bans = index.bans().context("loading bans")?;
        tracing::info!(
            routes = restored.routing.len(),
            nodes = restored.nodes.len(),
            announcements = restored.announcements.len(),
            bans = bans.len(),
            "restored gossip state"
        );
        // Who may see which repository, from the index as it was left, before any peer can
        // connect: restored announcements may name private repositories.
        let visibility = visibility_map(&index).context("reading the repository index")?;
        let now = now_ms();
        let mut service = Service::new(keypair.clone(), cfg.gossip.clone(), restored, now);
        service.set_visibility(Arc::new(visibility), now);
        let guard = Guard::new(cfg.rate.clone(), cfg.ban.clone(), bans);
        let (persist_tx, persist_writer) = persist::PersistQueue::new(index.clone());
        let trusted = cfg.connect.iter().map(|(nid, _)| *nid).collect();
        let cfg_serves = cfg.max_concurrent_serves;
        let shared = Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            nid: keypair.nid(),
            keypair,
            cfg,
            core: Mutex::new(Core {
                service,
                sessions: HashMap::new(),
                guard,
                inbound_handshaking: 0,
                verifying: HashMap::new(),
                keys: KeyCache::default(),
            }),
            index: index.clone(),
            counters: counters::GossipCounters::new(&metrics.p2p),
            metrics,
            persist: persist_tx,
            next_id: AtomicU64::new(1),
            shutdown: shutdown.clone(),
            dialers: Mutex::new(HashMap::new()),
            trusted,
            storage,
            git,
            advertiser,
            pack_cache,
            serve_slots: Arc::new(tokio::sync::Semaphore::new(cfg_serves.max(1))),
            hints: tokio::sync::broadcast::channel(1024).0,
            policies,
        });
        // Persist what the constructor produced (own announcements, timestamps).
        {
            let mut core = shared.lock();
            let outputs = core.service.take_outputs();
            shared.dispatch(&mut core, outputs);
        }
        tokio::spawn(persist_writer);

        let mut local_addrs = Vec::new();
        for addr in &shared.cfg.listen {
            let listener = TcpListener::bind(addr).await.with_context(|| {
                format!("binding p2p listener on {addr} (p2p.listen): is the port in use?")
            })?;
            let local = listener.local_addr()?;
            tracing::info!(listen = %local, nid = %shared.nid, "p2p listening");
            local_addrs.push(local);
            tokio::spawn(conn::accept_loop(shared.clone(), listener));
        }
        for (nid, addr) in shared.cfg.connect.clone() {
            start_dialer(&shared, nid, addr);
        }
        tokio::spawn(dispatch::ticker(shared.clone()));
        Ok(Self {
            shared,
            local_addrs: Arc::new(local_addrs),
        })
    }

    /// Addresses the listeners are bound to.
    pub(crate) fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    pub fn nid(&self) -> NodeId {
        self.shared.nid
    }

    /// Replaces the inventory (public repositories served); announces it if it changed.
    pub(crate) fn set_inventory(&self, rids: Vec<RepoId>) {
        let total = rids.len();
        let mut core = self.shared.lock();
        core.service.set_inventory(rids, now_ms());
        let outputs = core.service.take_outputs();
        self.shared.dispatch(&mut core, outputs);
        drop(core);
        let announced = total.min(seedd_proto::wire::message::INVENTORY_LIMIT);
        let inv = &self.shared.metrics.p2p.inventory;
        inv.with_label_values(&["announced"]).set(announced as i64);
        inv.with_label_values(&["unannounced"])
            .set((total - announced) as i64);
    }

    /// The inventory we announce now.
    pub(crate) fn inventory(&self) -> Vec<RepoId> {
        self.shared.lock().service.inventory().to_vec()
    }

    /// Replaces who may see which of our repositories (after every index change, before the
    /// inventory): refs announcements of a private repository then reach only its delegates
    /// and allow list.
    pub(crate) fn set_visibility(&self, visibility: Arc<VisibilityMap>) {
        let mut core = self.shared.lock();
        core.service.set_visibility(visibility, now_ms());
        let outputs = core.service.take_outputs();
        self.shared.dispatch(&mut core, outputs);
    }

    /// The visibility of one repository changed (a fetch or purge; `None`: no longer held):
    /// peers it newly admits get our refs announcement of it.
    pub(crate) fn set_repo_visibility(&self, rid: RepoId, visibility: Option<gossip::Visibility>) {
        let mut core = self.shared.lock();
        core.service.set_repo_visibility(rid, visibility, now_ms());
        let outputs = core.service.take_outputs();
        self.shared.dispatch(&mut core, outputs);
    }

    /// Replace the rate limits and ban settings (config reload).
    pub(crate) fn set_limits(
        &self,
        rate: seedd_core::config::RateConfig,
        ban: seedd_core::config::BanConfig,
    ) {
        self.shared.lock().guard.reconfigure(rate, ban);
    }

    /// Stops listening and dialing, closes every session and waits (up to 5 s) until the
    /// gossip state is written.
    pub(crate) async fn shutdown(&self) {
        self.shared.shutdown.cancel();
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.shared.persist.flush(tx);
        let _ = tokio::time::timeout(Duration::from_secs(5), rx).await;
        tracing::info!("p2p stopped; gossip state saved");
    }

    /// Summary for `seedctl status` (the admin API maps it to its own body).
    pub fn status(&self) -> P2pStatus {
        let core = self.shared.lock();
        P2pStatus {
            listen: self.local_addrs.iter().map(ToString::to_string).collect(),
            relay: self.shared.cfg.gossip.relay,
            sessions: core.sessions.len(),
            inventory: core.service.inventory().len(),
            routing_entries: core.service.routing_len(),
            known_nodes: core.service.nodes().count(),
            node_announcement_timestamp: core.service.node_announcement().timestamp(),
        }
    }

    /// Connected sessions.
    pub fn peers(&self) -> Vec<PeerInfo> {
        let core = self.shared.lock();
        let mut out: Vec<PeerInfo> = core
            .sessions
            .iter()
            .map(|(id, h)| {
                let s = core.service.session(*id);
                let node = core.service.nodes().find(|n| n.nid == h.nid);
                PeerInfo {
                    nid: h.nid,
                    link: link_label(h.link),
                    addr: h.addr.to_string(),
                    state: "connected",
                    since: h.since,
                    latency_ms: s.and_then(|s| s.latency_ms),
                    subscribed: s.is_some_and(|s| s.subscription.is_some()),
                    alias: node.map(|n| n.alias.clone()),
                    agent: node.map(|n| n.agent.clone()),
                }
            })
            .collect();
        drop(core);
        let dialers = self.shared.dialers_lock();
        for (nid, (addr, _)) in dialers.iter() {
            if !out.iter().any(|p| p.nid == *nid) {
                out.push(PeerInfo {
                    nid: *nid,
                    link: "outbound",
                    addr: addr.clone(),
                    state: "connecting",
                    since: 0,
                    latency_ms: None,
                    subscribed: false,
                    alias: None,
                    agent: None,
                });
            }
        }
        out.sort_by(|a, b| a.nid.cmp(&b.nid).then(a.link.cmp(b.link)));
        out
    }

    /// Routing entries, optionally filtered.
    pub(crate) fn routing(&self, rid: Option<RepoId>, nid: Option<NodeId>) -> Vec<RouteInfo> {
        let core = self.shared.lock();
        let rows: Vec<RouteInfo> = match rid {
            Some(rid) => core
                .service
                .seeds_of(&rid)
                .into_iter()
                .map(|(n, ts)| (rid, n, ts))
                .filter(|(_, n, _)| nid.is_none_or(|x| x == *n))
                .map(|(rid, nid, timestamp)| RouteInfo {
                    rid,
                    nid,
                    timestamp,
                })
                .collect(),
            None => core
                .service
                .routing()
                .filter(|(_, n, _)| nid.is_none_or(|x| x == *n))
                .map(|(rid, nid, timestamp)| RouteInfo {
                    rid,
                    nid,
                    timestamp,
                })
                .collect(),
        };
        rows
    }

    /// A page of the routing table after `after` (in (RID, NID) order, optionally one
    /// repository's or one node's) and how many entries that selection has: costs the page.
    pub fn routing_page(
        &self,
        rid: Option<RepoId>,
        nid: Option<NodeId>,
        after: Option<(RepoId, NodeId)>,
        limit: usize,
    ) -> (Vec<RouteInfo>, usize) {
        let core = self.shared.lock();
        let (rows, total) = core.service.routing_page(rid, nid, after, limit);
        let rows = rows
            .into_iter()
            .map(|(rid, nid, timestamp)| RouteInfo {
                rid,
                nid,
                timestamp,
            })
            .collect();
        (rows, total)
    }

    /// Up to `limit` address-book entries with node ids after `after`, by node id, and the
    /// size of the whole book. Only the page is cloned under the lock.
    pub fn nodes_page(
        &self,
        after: Option<NodeId>,
        limit: usize,
    ) -> (Vec<gossip::NodeRecord>, usize) {
        let core = self.shared.lock();
        let mut v: Vec<&gossip::NodeRecord> = core
            .service
            .nodes()
            .filter(|n| after.is_none_or(|a| n.nid > a))
            .collect();
        let total = core.service.nodes().count();
        if v.len() > limit {
            v.select_nth_unstable_by_key(limit, |n| n.nid);
            v.truncate(limit);
        }
        v.sort_unstable_by_key(|n| n.nid);
        (v.into_iter().cloned().collect(), total)
    }

    /// Penalty and ban records.
    pub fn bans(&self) -> Vec<BanRecord> {
        let core = self.shared.lock();
        let mut v: Vec<_> = core.guard.records().cloned().collect();
        v.sort_by_key(|r| r.ip);
        v
    }

    /// Starts dialing `nid` at `addr` (kept until [`disconnect`](Self::disconnect)).
    pub fn connect(&self, nid: NodeId, addr: String) -> bool {
        if nid == self.shared.nid {
            return false;
        }
        start_dialer(&self.shared, nid, addr)
    }

    /// Opens a git stream to a connected peer (we will fetch over it).
    pub(crate) async fn open_stream(&self, nid: NodeId) -> Result<OutgoingStream, OpenError> {
        let commands = {
            let core = self.shared.lock();
            core.sessions
                .values()
                .find(|h| h.nid == nid)
                .map(|h| h.commands.clone())
                .ok_or(OpenError::NotConnected(nid))?
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        commands
            .send(SessionCmd::OpenStream(tx))
            .await
            .map_err(|_| OpenError::SessionGone(nid))?;
        rx.await.map_err(|_| OpenError::SessionGone(nid))
    }

    /// Node ids of connected peers.
    pub(crate) fn connected(&self) -> Vec<NodeId> {
        let core = self.shared.lock();
        core.sessions.values().map(|h| h.nid).collect()
    }

    /// Records that `nid` served us `rid` (routing table).
    pub(crate) fn fetched_from(&self, rid: RepoId, nid: NodeId) {
        let mut core = self.shared.lock();
        core.service.fetched(rid, nid, now_ms());
        let outputs = core.service.take_outputs();
        self.shared.dispatch(&mut core, outputs);
    }

    /// Announces our signed refs of `rid` for the given namespaces to subscribed peers.
    pub(crate) fn announce_refs(&self, rid: RepoId, refs: Vec<seedd_proto::wire::RefsAt>) {
        let mut core = self.shared.lock();
        core.service.announce_refs(rid, refs, now_ms());
        let outputs = core.service.take_outputs();
        self.shared.dispatch(&mut core, outputs);
    }

    /// Re-subscribes with a new filter after a seeding policy change.
    pub(crate) fn set_seeding(&self, seed_all: bool, seeded: Vec<RepoId>) {
        let mut core = self.shared.lock();
        core.service
            .set_seeding(seed_all, seeded.into_iter().collect(), now_ms());
        let outputs = core.service.take_outputs();
        self.shared.dispatch(&mut core, outputs);
    }

    /// Subscribes to events that may call for a fetch.
    pub(crate) fn fetch_events(&self) -> tokio::sync::broadcast::Receiver<FetchHint> {
        self.shared.hints.subscribe()
    }

    /// Closes every session with `nid` and stops dialing it. Returns the sessions closed.
    pub fn disconnect(&self, nid: NodeId) -> usize {
        if let Some((_, token)) = self.shared.dialers_lock().remove(&nid) {
            token.cancel();
        }
        let mut core = self.shared.lock();
        let ids: Vec<SessionId> = core
            .sessions
            .iter()
            .filter(|(_, h)| h.nid == nid)
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            core.service.disconnect(*id);
        }
        let outputs = core.service.take_outputs();
        self.shared.dispatch(&mut core, outputs);
        ids.len()
    }
}

/// Starts a dialer for `nid` unless one runs. Returns whether a new one was started.
fn start_dialer(shared: &Arc<Shared>, nid: NodeId, addr: String) -> bool {
    let token = shared.shutdown.child_token();
    {
        let mut dialers = shared.dialers_lock();
        if dialers.contains_key(&nid) {
            return false;
        }
        dialers.insert(nid, (addr.clone(), token.clone()));
    }
    tokio::spawn(conn::dial_loop(shared.clone(), nid, addr, token));
    true
}

/// What the gossip shell is doing, for `seedctl status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct P2pStatus {
    /// Addresses the identity listens on.
    pub listen: Vec<String>,
    /// Whether announcements are relayed (`gossip.relay`).
    pub relay: bool,
    /// Connected sessions.
    pub sessions: usize,
    /// Repositories announced.
    pub inventory: usize,
    /// Entries in the routing table.
    pub routing_entries: usize,
    /// Nodes in the address book.
    pub known_nodes: usize,
    /// Timestamp (ms) of our latest node announcement.
    pub node_announcement_timestamp: u64,
}

#[cfg(test)]
mod tests;
