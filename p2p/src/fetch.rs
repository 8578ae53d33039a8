//! Replication: fetching a repository from a connected peer over a Radicle git stream,
//! validating what arrived and applying it (protocol.md §5.4–§5.7, §6.4–§6.6).
//!
//! The git protocol-v2 client is our own (`client.rs`, sans-IO; `transfer.rs` carries it on
//! the stream): the daemon sends the stream's header pkt-line (`git-upload-pack
//! /<rid>\0\0version=2\0`), reads the capability advertisement, lists the special refs with
//! `ls-refs`, and asks for the objects it lacks in one `fetch` round (wants, the tips it holds
//! as haves, `done`). The pack goes into `git index-pack --fix-thin` — git completes thin packs
//! and writes the index; that is the one process of a stage. Earlier versions ran `git fetch`
//! through an `ext::` bridge process, about ten processes per fetch.
//!
//! Objects and fetched refs land in a quarantine repository (in the fetch's work directory,
//! borrowing the live repository's objects through git's alternates); nothing reaches storage
//! before validation: fetched refs go to `refs/seedd-fetch/…` of the quarantine, each
//! namespace's signed refs are verified (signature, `rad/root`, levels, replay), compared with
//! what we hold (behind → ignored; diverged → ignored, or the whole fetch fails for a delegate),
//! every written ref must be signed with the same oid, and at least `threshold` delegates must
//! be valid; the identity never moves backwards (a stale or rewound `refs/rad/id` is ignored).
//! Then only the objects the accepted refs reach are migrated (`git pack-objects --local`),
//! and the refs are written in one transaction. A clone is built in a temporary directory
//! and renamed into storage at the end.

mod after;
mod apply;
mod client;
mod plumbing;
mod queue;
mod sync;
mod transfer;
mod workdir;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seedd_proto::crypto::{NodeId, RepoId};
use seedd_proto::wire::{Oid, RefsAt};

use crate::identity::Identities;
use crate::net::Net;
use seedd_core::index::policy::Scope;
use seedd_core::metrics::Metrics;
use seedd_core::policy::{NamespaceFilter, Policies};
use seedd_core::storage::Storage;

pub use after::AfterFetch;
pub(crate) use apply::{Outcome, ValidationError};
pub use client::ProtocolError;
use transfer::Stage;
pub use workdir::recover;
use workdir::{git_init, quarantine_init, RemoveOnDrop};

/// How long a fetch waits for the re-indexing of what it applied (its slots are held
/// meanwhile); past it the fetch goes on and the index catches up in the background.
pub(crate) const REINDEX_WAIT: Duration = Duration::from_secs(60);

/// Where fetched refs wait for validation.
pub(crate) const QUARANTINE: &str = "refs/seedd-fetch";

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot open a stream to {0}: {1}")]
    Stream(NodeId, crate::net::OpenError),
    /// The session carrying the stream ended before the transfer did.
    #[error("the session to the peer closed during the fetch")]
    SessionClosed,
    /// git ran and failed: what it said on stderr.
    #[error("git fetch failed: {0}")]
    Git(String),
    #[error("git fetch failed: spawning git: {0}")]
    Spawn(std::io::Error),
    /// The peer's `upload-pack` answered outside the protocol, refused, or hung up.
    #[error("git fetch failed: {0}")]
    Protocol(client::ProtocolError),
    /// Reading what arrived in the quarantine (gix).
    #[error("git fetch failed: {0}")]
    Repository(seedd_core::storage::GitError),
    #[error("received more than {0} bytes; aborted")]
    TooLarge(u64),
    #[error("a tenant's storage quota allows only {0} more bytes; fetch stopped (raise it with `seedctl quota set`)")]
    Quota(u64),
    #[error("no data from the peer for {0:?}")]
    Timeout(Duration),
    #[error("not finished within {0:?} (p2p.fetch_deadline_secs); aborted")]
    Deadline(Duration),
    #[error("validation failed: {0}")]
    Invalid(ValidationError),
    /// The repository was purged while its clone was fetched; the purge wins.
    #[error("the repository was purged while it was fetched; clone discarded")]
    Purged,
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The refs change could not be journaled in the index before it was made.
    #[error("journaling the refs change in the index: {0}")]
    Journal(seedd_core::index::IndexError),
    /// A blocking step of the fetch panicked or was cancelled.
    #[error("a fetch step did not finish: {0}")]
    Task(tokio::task::JoinError),
    /// A blocking step of the fetch panicked.
    #[error("a fetch step did not finish: {0}")]
    Step(String),
    /// The fetch's task ended without answering its waiter.
    #[error("the fetch task ended without a result")]
    NoResult,
}

impl FetchError {
    /// The metric label: one of [`seedd_core::metrics::labels::FETCH_ERRORS`] (a test in `metrics`
    /// checks that every variant's is listed there).
    pub fn label(&self) -> &'static str {
        match self {
            FetchError::Stream(..) | FetchError::SessionClosed => "stream",
            FetchError::Git(_)
            | FetchError::Spawn(_)
            | FetchError::Protocol(_)
            | FetchError::Repository(_) => "git",
            FetchError::TooLarge(_) => "too_large",
            FetchError::Quota(_) => "quota",
            FetchError::Timeout(_) => "timeout",
            FetchError::Deadline(_) => "deadline",
            FetchError::Invalid(_) => "invalid",
            FetchError::Io(_) | FetchError::Journal(_) => "io",
            FetchError::Purged => "purged",
            FetchError::Task(_) | FetchError::Step(_) | FetchError::NoResult => "internal",
        }
    }

    /// A blocking step that did not finish: at the deadline (it was told to stop), or a panic.
    fn blocking(e: seedd_core::blocking::BlockingError) -> Self {
        match e {
            seedd_core::blocking::BlockingError::Deadline(d) => FetchError::Deadline(d),
            seedd_core::blocking::BlockingError::Panicked(p) => FetchError::Step(p),
        }
    }

    /// A gix error reading the quarantine or the live repository.
    pub(crate) fn repository(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        FetchError::Repository(seedd_core::storage::GitError::new(e))
    }

    /// git exited unsuccessfully: its stderr.
    pub(crate) fn git_stderr(stderr: &[u8]) -> Self {
        FetchError::Git(String::from_utf8_lossy(stderr).trim().to_owned())
    }
}

/// Which namespaces of the repository a fetch takes: `(namespace, is a delegate)`.
type Wants = Arc<dyn Fn(&NodeId, bool) -> bool + Send + Sync>;

/// One fetch's places and namespace choice, passed to its stages.
struct Attempt {
    rid: RepoId,
    from: NodeId,
    /// The repository fetched into: storage's, or a clone being built in `work`.
    repo: PathBuf,
    /// Where everything the peer sends lands until it is validated.
    quarantine: PathBuf,
    wants: Wants,
    /// The identity resolved once for the whole fetch.
    identity: Arc<apply::IdentityMemo>,
}

impl Attempt {
    /// What a blocking step needs, owned: settings, repository, quarantine, live repository
    /// and the namespace choice.
    fn owned(&self, cfg: &FetchConfig) -> (FetchConfig, RepoId, PathBuf, PathBuf, Wants) {
        (
            cfg.clone(),
            self.rid,
            self.quarantine.clone(),
            self.repo.clone(),
            self.wants.clone(),
        )
    }
}

/// Settings of the replication layer.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    pub max_concurrent: usize,
    /// Of those, at most this many from one peer.
    pub max_per_peer: usize,
    /// Repositories that may wait for a slot (fetches someone waits for are not counted).
    pub max_queued: usize,
    /// Of those, at most this many from one peer.
    pub max_queued_per_peer: usize,
    pub max_pack_bytes: u64,
    /// Inactivity limit of a transfer.
    pub timeout: Duration,
    /// Limit on a whole fetch, however active.
    pub deadline: Duration,
    pub git: String,
    pub git_home: PathBuf,
    pub work_dir: PathBuf,
}

#[cfg(test)]
impl FetchConfig {
    /// One fetch at a time, 1 MiB, 5 s limits; work directories under `work_dir`.
    pub(crate) fn for_tests(git_home: PathBuf, work_dir: PathBuf) -> Self {
        FetchConfig {
            max_concurrent: 1,
            max_per_peer: 1,
            max_queued: 256,
            max_queued_per_peer: 32,
            max_pack_bytes: 1 << 20,
            timeout: Duration::from_secs(5),
            deadline: Duration::from_secs(5),
            git: "git".into(),
            git_home,
            work_dir,
        }
    }
}

/// Runs fetches: one per repository at a time, `max_concurrent` overall.
#[derive(Clone)]
pub struct Fetcher {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: FetchConfig,
    /// Every seed identity's p2p layer: their peers' hints are followed and their sessions
    /// used to fetch from peers connected only to them.
    identities: Identities,
    storage: Storage,
    metrics: Arc<Metrics>,
    policies: Policies,
    slots: queue::Slots,
    /// Repositories queued or being fetched, their follow-ups and who waits for them.
    active: Mutex<queue::Queue>,
    /// Fetches holding a slot now, since when.
    running: Mutex<HashMap<RepoId, (NodeId, Instant)>>,
    /// The sync task's list of seeded repositories we lack.
    sync: Mutex<sync::SyncList>,
    /// Wakes the sync task when a fetch ended and the list has more ([`Fetcher::refill_soon`]).
    refill: tokio::sync::Notify,
    seq: std::sync::atomic::AtomicU64,
    /// The steps after a repository was created or changed (re-index, sizes, inventory).
    after: AfterFetch,
}

impl Fetcher {
    pub fn new(
        cfg: FetchConfig,
        identities: Identities,
        storage: Storage,
        metrics: Arc<Metrics>,
        policies: Policies,
        after: AfterFetch,
    ) -> Self {
        let slots = queue::Slots::new(cfg.max_concurrent, cfg.max_per_peer);
        Self {
            inner: Arc::new(Inner {
                cfg,
                identities,
                storage,
                metrics,
                policies,
                slots,
                active: Mutex::new(queue::Queue::default()),
                running: Mutex::new(HashMap::new()),
                sync: Mutex::default(),
                refill: tokio::sync::Notify::new(),
                seq: std::sync::atomic::AtomicU64::new(0),
                after,
            }),
        }
    }

    /// The per-repository lock fetches hold (purges and maintenance take it too).
    pub fn locks(&self) -> &seedd_core::maintain::RepoLocks {
        self.inner.after.locks()
    }

    /// Every identity's p2p layer, the default first.
    fn nets(&self) -> Vec<Net> {
        self.inner.identities.nets()
    }

    /// The identity with a session to `peer` (the default one if none has).
    fn net_for(&self, peer: &NodeId) -> Net {
        self.nets()
            .into_iter()
            .find(|n| n.connected().contains(peer))
            .unwrap_or_else(|| self.inner.identities.default_net().clone())
    }

    /// Nodes connected to any identity.
    pub fn connected(&self) -> HashSet<NodeId> {
        self.nets().iter().flat_map(Net::connected).collect()
    }

    /// Routing entries known to any identity.
    pub fn routing(&self, rid: Option<RepoId>) -> Vec<crate::net::RouteInfo> {
        let mut seen = HashSet::new();
        self.nets()
            .iter()
            .flat_map(|n| n.routing(rid, None))
            .filter(|r| seen.insert((r.rid, r.nid)))
            .collect()
    }

    /// Follows every identity's fetch hints until the process ends, also those of identities
    /// started later.
    pub fn spawn_hint_loop(&self) {
        let mut started = self.inner.identities.started();
        let mut followed = HashSet::new();
        self.follow_new_nets(&mut followed);
        let this = self.clone();
        tokio::spawn(async move {
            while started.changed().await.is_ok() {
                this.follow_new_nets(&mut followed);
            }
        });
    }

    /// Follows the hints of every identity not followed yet.
    fn follow_new_nets(&self, followed: &mut HashSet<NodeId>) {
        for net in self.nets() {
            if followed.insert(net.nid()) {
                self.follow_hints(&net);
            }
        }
    }

    fn follow_hints(&self, net: &Net) {
        let this = self.clone();
        let mut hints = net.fetch_events();
        tokio::spawn(async move {
            loop {
                match hints.recv().await {
                    Ok(hint) => {
                        let p = &this.inner.policies;
                        if p.blocked(&hint.from) {
                            continue;
                        }
                        for rid in hint.rids {
                            // An inventory names what the peer holds: a reason to clone, not
                            // to fetch again what we hold (refs announcements bring updates).
                            if hint.clone_only && this.holds(&rid) {
                                continue;
                            }
                            if p.seeding(&rid).is_some() {
                                this.request(rid, hint.from);
                            }
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "fetch hints lagged");
                    }
                    Err(_) => return,
                }
            }
        });
    }

    /// Whether storage holds `rid` (one `stat`, as the sync task checks).
    fn holds(&self, rid: &RepoId) -> bool {
        self.inner.storage.path_of(rid).join("HEAD").exists()
    }

    /// Queues a fetch of `rid` from `from` (coalesced with one already running or queued for
    /// the same repository). At most `max_queued` repositories wait; beyond that the request
    /// is dropped (counted) and the sync task retries it later.
    pub fn request(&self, rid: RepoId, from: NodeId) {
        self.enqueue(rid, from, None);
    }

    /// Adds a fetch to the queue, starting the repository's task when it has none. With a
    /// waiter the queue's bounds do not apply (an operator asked).
    fn enqueue(&self, rid: RepoId, from: NodeId, waiter: Option<queue::Waiter>) {
        let admit = {
            let mut active = self.inner.active.lock().unwrap_or_else(|e| e.into_inner());
            let cfg = &self.inner.cfg;
            let admit = active.push(rid, from, waiter, cfg.max_queued, cfg.max_queued_per_peer);
            if admit == queue::Admit::Full {
                // Fair across peers: one peer cannot fill the queue.
                tracing::warn!(%rid, peer = %from, queued = active.len(), "fetch queue full; dropping request (the sync task retries)");
            }
            admit
        };
        match admit {
            queue::Admit::Joined => return,
            queue::Admit::Full => {
                self.inner
                    .metrics
                    .p2p
                    .fetches
                    .with_label_values(&["queue_full"])
                    .inc();
                self.offer_missing(rid, false);
                return;
            }
            queue::Admit::Spawn => {}
        }
        let this = self.clone();
        tokio::spawn(async move {
            let mut from = from;
            loop {
                let result = this.measured(rid, from).await.map_err(Arc::new);
                if result.is_err() {
                    // The sync task retries it (if we still lack it) from a connected peer,
                    // at its next tick.
                    this.offer_missing(rid, true);
                }
                let next = this
                    .inner
                    .active
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .finish(&rid, &result);
                match next {
                    Some(n) => from = n,
                    None => break,
                }
            }
            this.refill_soon();
        });
    }

    /// Every 30 s (§5.2 sync task): seeded repositories we lack — explicitly allowed ones, and
    /// with a default `allow` any that a connected peer is known to have — are fetched from a
    /// connected peer the routing table names. This also retries fetches cut short by a crash
    /// (their inventory announcements are already stored, so gossip alone would not retry)
    /// and fetches that failed or found the queue full. A tick costs the repositories on the
    /// sync list and the routes of peers connected since the last one; the routing table is
    /// read (a page per core-lock hold) only at start, after a seeding change and once an
    /// hour ([`sync::SCRUB_TICKS`]).
    pub fn spawn_sync_loop(&self) {
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let mut tick = tokio::time::interval(Duration::from_secs(30));
            loop {
                let full = tokio::select! {
                    _ = tick.tick() => true,
                    _ = this.inner.refill.notified() => false,
                };
                let this = this.clone();
                // Policy reads and `stat`s: the blocking pool.
                let _ = tokio::task::spawn_blocking(move || {
                    if full {
                        this.sync_once()
                    } else {
                        this.refill_once()
                    }
                })
                .await;
            }
        });
    }

    fn sync_list(&self) -> std::sync::MutexGuard<'_, sync::SyncList> {
        self.inner.sync.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts `rid` on the sync list if it is seeded and we lack it; when its fetch `failed`, it
    /// is not handed out again before the next tick.
    fn offer_missing(&self, rid: RepoId, failed: bool) {
        let p = &self.inner.policies;
        let seeded = |r: &RepoId| p.seeding(r).is_some();
        let holds = |r: &RepoId| self.holds(r);
        let mut list = self.sync_list();
        if failed {
            list.offer_failed(rid, seeded, holds);
        } else {
            list.offer(rid, seeded, holds);
        }
    }

    fn sync_once(&self) {
        let inner = &self.inner;
        let p = &inner.policies;
        let connected = self.connected();
        let tick = self
            .sync_list()
            .begin(connected.clone(), inner.identities.seeding_generation());
        let mut offers: Vec<RepoId> = Vec::new();
        if tick.full_pass {
            offers.extend(p.explicitly_seeded().into_iter().map(|(rid, _)| rid));
            if p.seeds_by_default() {
                for net in self.nets() {
                    offers.extend(routes_of(&net, None, &connected));
                }
            }
        } else if p.seeds_by_default() {
            for peer in &tick.new_peers {
                for net in self.nets() {
                    offers.extend(routes_of(&net, Some(*peer), &connected));
                }
            }
        }
        let seeded = |r: &RepoId| p.seeding(r).is_some();
        let holds = |r: &RepoId| self.holds(r);
        {
            let mut list = self.sync_list();
            for rid in offers {
                list.offer(rid, seeded, holds);
            }
        }
        let handed = self.hand_out(&connected);
        if handed > 0 {
            tracing::info!(
                fetches = handed,
                missing = self.sync_list().len(),
                "sync: fetching seeded repositories we lack (more as slots free up)"
            );
        }
    }

    /// Hands the queue as many listed repositories as it has room for, each from a connected
    /// peer with room in its share (the rest stay listed). Costs what it hands out
    /// ([`sync::SyncList::due`]).
    fn hand_out(&self, connected: &HashSet<NodeId>) -> usize {
        let inner = &self.inner;
        let p = &inner.policies;
        let (queued, mut per_peer): (HashSet<RepoId>, HashMap<NodeId, usize>) = {
            let active = inner.active.lock().unwrap_or_else(|e| e.into_inner());
            let mut per_peer = HashMap::new();
            let queued = active
                .iter()
                .map(|(rid, nid)| {
                    *per_peer.entry(*nid).or_insert(0) += 1;
                    *rid
                })
                .collect();
            (queued, per_peer)
        };
        let share = inner.cfg.max_queued_per_peer;
        // What the queue and the connected peers' shares of it can take: a list worked
        // through from one peer hands out one fetch as one ends, walking a few entries.
        let free: usize = connected
            .iter()
            .filter(|n| !p.blocked(n))
            .map(|n| share.saturating_sub(per_peer.get(n).copied().unwrap_or(0)))
            .sum();
        let room = inner.cfg.max_queued.saturating_sub(queued.len()).min(free);
        if room == 0 {
            let listed = self.sync_list().len();
            inner.metrics.p2p.sync_missing.set(listed as i64);
            return 0;
        }
        let requests = self.sync_list().due(
            room,
            |r| p.seeding(r).is_some(),
            |r| self.holds(r),
            |r| queued.contains(r),
            |rid, _| {
                let mut busy = false;
                for s in self.routing(Some(*rid)) {
                    if !connected.contains(&s.nid) || p.blocked(&s.nid) {
                        continue;
                    }
                    let n = per_peer.entry(s.nid).or_insert(0);
                    if *n < share {
                        *n += 1;
                        return sync::Source::Peer(s.nid);
                    }
                    busy = true;
                }
                if busy {
                    sync::Source::Busy
                } else {
                    sync::Source::None
                }
            },
        );
        let listed = self.sync_list().len();
        inner.metrics.p2p.sync_missing.set(listed as i64);
        let handed = requests.len();
        for (rid, peer) in requests {
            tracing::debug!(%rid, %peer, "sync: fetching a seeded repository we lack");
            self.request(rid, peer);
        }
        handed
    }

    /// A fetch ended (a slot and a queue place are free): if the sync list has more, the sync
    /// task hands the queue more now rather than at its next tick.
    fn refill_soon(&self) {
        if self.sync_list().len() > 0 {
            self.inner.refill.notify_one();
        }
    }

    /// The sync task's hand-out between ticks (no new routes are offered), to the peers
    /// connected now.
    fn refill_once(&self) {
        let connected = self.connected();
        self.hand_out(&connected);
    }
}

/// The repositories `net` routes to `node` (to every connected peer with `None`), read a page
/// per core-lock hold.
fn routes_of(net: &Net, node: Option<NodeId>, connected: &HashSet<NodeId>) -> Vec<RepoId> {
    const PAGE: usize = 4096;
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let (rows, _) = net.routing_page(None, node, after, PAGE);
        let Some(last) = rows.last() else {
            break;
        };
        after = Some((last.rid, last.nid));
        let full = rows.len() == PAGE;
        out.extend(
            rows.into_iter()
                .filter(|r| connected.contains(&r.nid))
                .map(|r| r.rid),
        );
        if !full {
            break;
        }
    }
    out.dedup();
    out
}

impl Fetcher {
    /// The fetch queue: running fetches (repository, peer, seconds so far) and queued ones.
    #[allow(clippy::type_complexity)]
    pub fn queue(&self) -> (Vec<(RepoId, NodeId, u64)>, Vec<(RepoId, NodeId)>) {
        let running: Vec<(RepoId, NodeId, u64)> = self
            .inner
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(rid, (nid, t))| (*rid, *nid, t.elapsed().as_secs()))
            .collect();
        let queued = self
            .inner
            .active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(rid, _)| !running.iter().any(|(r, _, _)| r == *rid))
            .map(|(rid, nid)| (*rid, *nid))
            .collect();
        (running, queued)
    }

    /// Fetches through the queue and waits for the result (admin requests): coalesced with
    /// the repository's queued fetch from the same peer, else run after the running one, so
    /// two fetches of one repository never overlap.
    pub async fn fetch_now(&self, rid: RepoId, from: NodeId) -> Result<Outcome, Arc<FetchError>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.enqueue(rid, from, Some(tx));
        rx.await
            .unwrap_or_else(|_| Err(Arc::new(FetchError::NoResult)))
    }

    /// One fetch in a slot, counted and logged.
    async fn measured(&self, rid: RepoId, from: NodeId) -> Result<Outcome, FetchError> {
        // The repository's lock first, holding no slot while a maintenance run or purge of it
        // finishes: the quarantine borrows the live objects and a repack must not delete packs
        // under it (`maintain::RepoLocks`).
        let _repo = self.inner.after.locks().lock(rid).await;
        let m = &self.inner.metrics.p2p;
        m.fetch_queue.inc();
        // The peer's slot first (holding nothing while it waits), then a global one.
        let slot = self.inner.slots.acquire(from).await;
        m.fetch_queue.dec();
        self.inner
            .active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .start(&rid);
        m.fetches_active.inc();
        let started = Instant::now();
        self.inner
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(rid, (from, started));
        let deadline = self.inner.cfg.deadline;
        let result = tokio::time::timeout(deadline, self.fetch(rid, from))
            .await
            .unwrap_or(Err(FetchError::Deadline(deadline)));
        self.inner
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&rid);
        m.fetches_active.dec();
        m.fetch_duration.observe(started.elapsed().as_secs_f64());
        drop(slot);
        match &result {
            Ok(outcome) => {
                m.fetches.with_label_values(&["ok"]).inc();
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs() as i64)
                    .unwrap_or(0);
                m.fetch_last_success
                    .with_label_values(&[if outcome.cloned { "clone" } else { "update" }])
                    .set(now);
                tracing::info!(%rid, peer = %from, updated = outcome.updated.len(), pruned = outcome.pruned.len(), refs = outcome.refs_written, clone = outcome.cloned, ms = started.elapsed().as_millis() as u64, "fetched repository");
            }
            Err(e) => {
                m.fetches.with_label_values(&[e.label()]).inc();
                if let FetchError::Invalid(v) = e {
                    m.validation_failures.with_label_values(&[v.label()]).inc();
                    if let Some(kind) = v.over_budget() {
                        self.inner
                            .metrics
                            .cob_budget_exceeded
                            .with_label_values(&[kind.label()])
                            .inc();
                    }
                }
                tracing::warn!(%rid, peer = %from, error = %seedd_core::logging::chain(&e), "fetch failed");
            }
        }
        result
    }

    async fn fetch(&self, rid: RepoId, from: NodeId) -> Result<Outcome, FetchError> {
        let inner = &self.inner;
        let existing = inner.storage.path_of(&rid);
        let clone = !existing.join("HEAD").exists();
        let started_ms = seedd_core::tenant::now_ms();
        let seq = inner.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let work = inner
            .cfg
            .work_dir
            .join(format!("fetch-{}-{seq}", std::process::id()));
        seedd_core::fsutil::create_private_dir(&work)?;
        let _cleanup = RemoveOnDrop(work.clone());
        let repo = if clone {
            let tmp = work.join("repo.git");
            git_init(&inner.cfg, &tmp).await?;
            tmp
        } else {
            existing.clone()
        };
        // Everything the peer sends lands in a quarantine repository that borrows the live
        // one's objects (git's alternates, as `receive-pack`'s incoming quarantine does); only
        // what validation accepts is migrated. A failed fetch leaves nothing behind: the work
        // directory goes with it (and with a crash, at the next start).
        let quarantine = work.join("quarantine.git");
        quarantine_init(&quarantine, &repo).await?;

        let policies = inner.policies.clone();
        let scope = policies.seeding(&rid).unwrap_or(Scope::All);
        let wants: Wants = Arc::new(move |nid: &NodeId, delegate: bool| {
            policies.wants_namespace(&rid, scope, nid, delegate)
        });
        let net = self.net_for(&from);
        let local = net.nid();
        let attempt = Attempt {
            rid,
            from,
            repo,
            quarantine,
            wants,
            identity: Arc::default(),
        };

        // 1.–3. Special refs, data, validation (each a step below).
        let received = self.special_refs(&attempt, scope).await?;
        let received = received + self.data_refs(&attempt, received).await?;
        inner.metrics.p2p.fetch_received_bytes.inc_by(received);
        // Journal the refs change (or, for a clone, the new repository) before it happens: a
        // crash before the re-index below makes the next start read this repository
        // (`index::scan::reconcile_changed`; a start lists no storage, it reads the journal).
        inner.after.mark_dirty(rid).await?;
        let outcome = match self.validate_and_apply(&attempt, local).await {
            Ok(outcome) => outcome,
            Err(e) => {
                // A clone that failed left nothing in storage: no mark to keep (strangers'
                // failing repositories must not pile up in the journal).
                if clone {
                    inner.after.clear_mark(rid).await;
                }
                return Err(e);
            }
        };
        let Attempt { repo, .. } = attempt;

        // 4. A clone moves into storage in one rename — unless the repository was purged
        //    while it was being fetched (the purge wins; the clone is discarded).
        if clone
            && inner
                .policies
                .tenants()
                .is_some_and(|t| t.purged_since(&rid, started_ms))
        {
            inner.after.clear_mark(rid).await;
            return Err(FetchError::Purged);
        }
        if clone {
            if let Some(parent) = existing.parent() {
                seedd_core::fsutil::create_private_dir(parent)?;
            }
            std::fs::rename(&repo, &existing)?;
        }
        inner
            .metrics
            .p2p
            .refs_updated
            .inc_by(outcome.refs_written as u64);
        inner.after.run(rid).await;
        net.fetched_from(rid, from);

        // 5. Tell subscribers which namespaces we now hold (the pusher's ack, §5.8).
        if !outcome.updated.is_empty() {
            let refs = outcome
                .updated
                .iter()
                .map(|(nid, oid)| RefsAt {
                    remote: *nid,
                    at: Oid(*oid),
                })
                .collect();
            // On the identity the peer reached us through: the pusher's acknowledgement.
            net.announce_refs(rid, refs);
        }
        Ok(Outcome {
            cloned: clone,
            ..outcome
        })
    }

    /// Stage 1 (§6.4 stages 1–2): the canonical identity and the `rad/id` and `rad/sigrefs`
    /// of the namespaces in scope and not blocked, into the quarantine. With scope `followed`
    /// the delegates are those of the identity we hold; when the verified identity names
    /// others (a clone, a new delegate), they follow. Returns the bytes received.
    async fn special_refs(&self, a: &Attempt, scope: Scope) -> Result<u64, FetchError> {
        let inner = &self.inner;
        let held_delegates = inner
            .policies
            .index()
            .repo(&a.rid)
            .ok()
            .flatten()
            .map(|r| r.delegates)
            .unwrap_or_default();
        let filter = inner
            .policies
            .namespace_filter(&a.rid, scope, &held_delegates);
        let mut received = self.transfer(a, Stage::Special(filter.clone()), 0).await?;
        if let NamespaceFilter::Only(asked) = &filter {
            let (cfg, rid, q, repo, _) = a.owned(&inner.cfg);
            let memo = a.identity.clone();
            // Told to stop when the fetch stops waiting (its deadline dropped this future).
            let delegates =
                seedd_core::blocking::run_cancellable(inner.cfg.deadline, move |cancel| {
                    apply::identity_delegates(&cfg, rid, &q, &repo, &memo, cancel)
                })
                .await
                .map_err(FetchError::blocking)??;
            let more: Vec<NodeId> = delegates
                .into_iter()
                .filter(|d| !asked.contains(d) && (a.wants)(d, true))
                .collect();
            if !more.is_empty() {
                received += self
                    .transfer(a, Stage::Special(NamespaceFilter::Only(more)), received)
                    .await?;
            }
        }
        Ok(received)
    }

    /// Stage 2 (§6.4 stage 3): the objects the wanted namespaces' verified signed refs name
    /// and we lack — nothing unsigned, nothing of unwanted or blocked namespaces. Returns the
    /// bytes received (`spent` before it).
    async fn data_refs(&self, a: &Attempt, spent: u64) -> Result<u64, FetchError> {
        let (cfg, rid, q, repo, wants) = a.owned(&self.inner.cfg);
        let memo = a.identity.clone();
        let data = seedd_core::blocking::run_cancellable(self.inner.cfg.deadline, move |cancel| {
            let wants = |n: &NodeId, d: bool| wants(n, d);
            apply::data_wants(&cfg, rid, &q, &repo, &wants, &memo, cancel)
        })
        .await
        .map_err(FetchError::blocking)??;
        if data.is_empty() {
            return Ok(0);
        }
        self.transfer(a, Stage::Data(data), spent).await
    }

    /// Stage 3: validate what the quarantine holds and apply it (blocking: gix + git
    /// update-ref); pruned namespaces are counted by reason.
    async fn validate_and_apply(&self, a: &Attempt, local: NodeId) -> Result<Outcome, FetchError> {
        let (cfg, rid, q, repo, wants) = a.owned(&self.inner.cfg);
        let metrics = self.inner.metrics.clone();
        let pruned = move |label: &'static str| {
            metrics
                .p2p
                .validation_failures
                .with_label_values(&[label])
                .inc();
        };
        let wants = move |nid: &NodeId, delegate: bool| wants(nid, delegate);
        // A repository this fetch makes private is private in the index before its refs move.
        let index = self.inner.policies.index().clone();
        let narrow = move |doc: &seedd_core::storage::identity::Doc| -> Result<(), FetchError> {
            if index
                .narrow_visibility(&rid, &doc.visibility)
                .map_err(FetchError::Journal)?
            {
                tracing::info!(%rid, "the fetched identity makes the repository private; hidden before its refs move");
            }
            Ok(())
        };
        let memo = a.identity.clone();
        let outcome =
            seedd_core::blocking::run_cancellable(self.inner.cfg.deadline, move |cancel| {
                let hooks = apply::Hooks {
                    on_prune: &pruned,
                    wants: &wants,
                    before_write: &narrow,
                };
                apply::validate_and_apply(&cfg, rid, &q, &repo, &local, &hooks, &memo, cancel)
            })
            .await
            .map_err(FetchError::blocking)??;
        pause_after_apply().await;
        Ok(outcome)
    }
}

/// Test builds only: `SEEDD_TEST_PAUSE_AFTER_APPLY_MS` holds a fetch between applying its refs
/// and re-indexing, so that an integration test can look at what is served in that window.
#[cfg(debug_assertions)]
async fn pause_after_apply() {
    if let Some(ms) = std::env::var("SEEDD_TEST_PAUSE_AFTER_APPLY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

#[cfg(not(debug_assertions))]
async fn pause_after_apply() {}

impl From<ValidationError> for FetchError {
    fn from(e: ValidationError) -> Self {
        FetchError::Invalid(e)
    }
}

impl From<client::ProtocolError> for FetchError {
    fn from(e: client::ProtocolError) -> Self {
        FetchError::Protocol(e)
    }
}

impl From<tokio::task::JoinError> for FetchError {
    fn from(e: tokio::task::JoinError) -> Self {
        FetchError::Task(e)
    }
}
