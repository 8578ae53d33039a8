//! The service's configuration, inputs and outputs: timers, caps, visibility, sessions, and
//! what the shell must do ([`Output`]) and persist ([`Change`]).

use std::collections::HashMap;

use super::*;

/// Timers and ages (protocol.md §5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timers {
    /// Send a Ping when nothing was sent to a peer for this long (peers drop silent sessions
    /// after 120 s).
    pub keep_alive_ms: u64,
    /// Disconnect a peer that sent nothing for this long.
    pub stale_ms: u64,
    /// Relay queued inventory announcements this often.
    pub relay_interval_ms: u64,
    /// Announce our own inventory at most this often: a change within it of the last
    /// announcement waits for the tick (a bulk fetch of many new repositories announces a
    /// handful of inventories, not one per repository).
    pub inventory_interval_ms: u64,
    /// Prune stored gossip and routing this often.
    pub prune_interval_ms: u64,
    /// Stored gossip older than this is pruned.
    pub gossip_max_age_ms: u64,
    /// Routing entries older than this are pruned once the table exceeds `routing_max_size`.
    pub routing_max_age_ms: u64,
    pub routing_max_size: usize,
    /// Announcements more than this far in the future are refused (and the peer dropped).
    pub max_clock_skew_ms: u64,
}

impl Default for Timers {
    fn default() -> Self {
        Self {
            keep_alive_ms: 30 * SECOND,
            stale_ms: 120 * SECOND,
            relay_interval_ms: 6 * SECOND,
            inventory_interval_ms: SECOND,
            prune_interval_ms: 30 * MINUTE,
            gossip_max_age_ms: 14 * DAY,
            routing_max_age_ms: 7 * DAY,
            routing_max_size: 1000,
            max_clock_skew_ms: HOUR,
        }
    }
}

/// Upper bounds on the state other nodes can make us hold (whole nodes are evicted, see
/// [`Service::enforce_caps`]). radicle itself has no such caps (only `routing_max_size`,
/// a prune threshold, and `gossip_max_age`), so they are sized from memory (64-bit, approx.):
/// an address-book entry ~300 B (record, addresses, map slot) → 10,000 nodes ≈ 3 MB; a route
/// ~130 B (one `(rid, nid)` B-tree entry and the per-node index; measured with `heaptrack` under the
/// gossip_flood bench) → 250,000 routes ≈ 35 MB; a stored
/// announcement ~200 B plus its body (a refs announcement ~1 KiB, an inventory up to 60 KiB,
/// but an inventory of n repositories also holds n routes, so the route cap bounds those to
/// ~84 full inventories ≈ 5 MB) → 100,000 announcements ≈ 100 MB at the very worst, ~20 MB
/// typical. The network today has a few thousand nodes, so honest peers stay well within.
/// The defaults below; operators set them in `[p2p]` (`max_nodes`, `max_routes`,
/// `max_announcements`), e.g. a seed of a million repositories needs `max_routes` above that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caps {
    /// Address-book entries (seed nodes that announced themselves).
    pub max_nodes: usize,
    /// Routing-table entries (repository, node).
    pub max_routes: usize,
    /// Stored announcements (node, inventory and refs, ours included).
    pub max_announcements: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Self {
            max_nodes: 10_000,
            max_routes: 250_000,
            max_announcements: 100_000,
        }
    }
}

/// What the service announces and how it relays.
#[derive(Debug, Clone)]
pub struct Config {
    pub alias: Alias,
    pub user_agent: UserAgent,
    /// Addresses announced in the NodeAnnouncement (at most 16 are sent).
    pub external_addresses: Vec<Address>,
    /// Relay other nodes' announcements.
    pub relay: bool,
    /// Seed every repository (policy `allow`); otherwise only those in `seeded`.
    pub seed_all: bool,
    /// Repositories seeded by explicit policy (besides the inventory).
    pub seeded: BTreeSet<RepoId>,
    pub timers: Timers,
    pub caps: Caps,
}

/// Who may learn about a repository we hold: its identity document's visibility.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visibility {
    /// Everyone.
    Public,
    /// Only these nodes: the delegates and the document's allow list.
    Private { allowed: HashSet<NodeId> },
}

impl Visibility {
    /// Whether `nid` may learn about the repository.
    pub fn is_visible_to(&self, nid: &NodeId) -> bool {
        match self {
            Visibility::Public => true,
            Visibility::Private { allowed } => allowed.contains(nid),
        }
    }
}

/// The visibility of every repository we hold, pushed by the shell whenever its index
/// changes ([`Service::set_visibility`]). Shared, not copied, between identities.
///
/// Public repositories are a sorted list of RIDs (20 bytes each; a map entry with its
/// [`Visibility`] cost ~70 bytes in a table twice the size: ~150 MB at 1M repositories,
/// issue 30 §3), private ones a map to who may see them. A RID in neither is not held.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct VisibilityMap {
    public: Vec<RepoId>,
    private: HashMap<RepoId, Visibility>,
}

/// What [`VisibilityMap::get`] answers for a public repository.
static PUBLIC: Visibility = Visibility::Public;

impl VisibilityMap {
    /// From the public repositories (any order, duplicates dropped) and the private ones (a
    /// `Public` value among them counts as public).
    pub fn from_parts(mut public: Vec<RepoId>, private: HashMap<RepoId, Visibility>) -> Self {
        let mut map = Self {
            public: Vec::new(),
            private: HashMap::with_capacity(private.len()),
        };
        for (rid, v) in private {
            match v {
                Visibility::Public => public.push(rid),
                v => {
                    map.private.insert(rid, v);
                }
            }
        }
        public.sort_unstable();
        public.dedup();
        public.retain(|rid| !map.private.contains_key(rid));
        map.public = public;
        map
    }

    /// The visibility of `rid`, `None` when it is not held.
    pub fn get(&self, rid: &RepoId) -> Option<&Visibility> {
        match self.private.get(rid) {
            Some(v) => Some(v),
            None => self.public.binary_search(rid).is_ok().then_some(&PUBLIC),
        }
    }

    /// Sets the visibility of `rid` (O(public) for a public one: for building small maps).
    pub fn insert(&mut self, rid: RepoId, v: Visibility) {
        match v {
            Visibility::Public => {
                self.private.remove(&rid);
                if let Err(at) = self.public.binary_search(&rid) {
                    self.public.insert(at, rid);
                }
            }
            v => {
                if let Ok(at) = self.public.binary_search(&rid) {
                    self.public.remove(at);
                }
                self.private.insert(rid, v);
            }
        }
    }

    /// The public repositories, in RID order.
    pub fn public(&self) -> &[RepoId] {
        &self.public
    }

    /// Every held repository with its visibility (public ones first, in RID order).
    pub fn iter(&self) -> impl Iterator<Item = (&RepoId, &Visibility)> + '_ {
        self.public
            .iter()
            .map(|rid| (rid, &PUBLIC))
            .chain(self.private.iter())
    }

    pub fn len(&self) -> usize {
        self.public.len() + self.private.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl FromIterator<(RepoId, Visibility)> for VisibilityMap {
    fn from_iter<I: IntoIterator<Item = (RepoId, Visibility)>>(iter: I) -> Self {
        Self::from_parts(Vec::new(), iter.into_iter().collect())
    }
}

impl<const N: usize> From<[(RepoId, Visibility); N]> for VisibilityMap {
    fn from(items: [(RepoId, Visibility); N]) -> Self {
        items.into_iter().collect()
    }
}

/// Identifies a session; assigned by the shell, never reused.
pub type SessionId = u64;

/// Why the service wants a session closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DisconnectReason {
    /// An announcement whose signature does not verify (misbehaviour).
    InvalidSignature,
    /// An announcement more than the allowed skew in the future (misbehaviour).
    InvalidTimestamp { timestamp: u64, now: u64 },
    /// Nothing received for longer than the stale limit.
    Stale,
    /// Asked for by an operator.
    Command,
}

impl DisconnectReason {
    /// Whether the peer misbehaved (penalised by the shell).
    pub fn is_misbehaviour(&self) -> bool {
        matches!(self, Self::InvalidSignature | Self::InvalidTimestamp { .. })
    }

    /// Every [`label`](Self::label) (metrics start each at 0; a test in seedd's `metrics` keeps
    /// it complete).
    pub const LABELS: &'static [&'static str] =
        &["invalid_signature", "invalid_timestamp", "stale", "command"];

    /// A short label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Self::InvalidSignature => "invalid_signature",
            Self::InvalidTimestamp { .. } => "invalid_timestamp",
            Self::Stale => "stale",
            Self::Command => "command",
        }
    }
}

impl std::fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::InvalidSignature => f.write_str("announcement with an invalid signature"),
            Self::InvalidTimestamp { timestamp, now } => write!(
                f,
                "announcement timestamp {timestamp} ms is {} s in the future",
                timestamp.saturating_sub(*now) / 1000
            ),
            Self::Stale => f.write_str("no message received for too long"),
            Self::Command => f.write_str("disconnected by the operator"),
        }
    }
}

/// A state change the shell must persist (so the service can be restored after a restart).
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Store (replace) an announcement under its key.
    Announcement(StoredAnnouncement),
    /// Forget an announcement.
    AnnouncementRemoved(AnnouncementKey),
    /// Insert or update an address-book entry.
    Node(NodeRecord),
    /// Forget an address-book entry (evicted by the caps).
    NodeRemoved(NodeId),
    /// `nid` seeds `rid`, as of `timestamp`.
    Routing {
        rid: RepoId,
        nid: NodeId,
        timestamp: u64,
    },
    /// `nid` no longer seeds `rid`.
    RoutingRemoved { rid: RepoId, nid: NodeId },
    /// The timestamp of our latest announcement of a kind (kept strictly increasing).
    OwnTimestamp { kind: MessageType, timestamp: u64 },
}

/// Why an announcement was not acted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Not newer than what is stored for the same (author, repo, kind).
    Stale,
    /// Inventory or refs from a node without a (SEED) node announcement.
    UnknownAuthor,
    /// Authored by ourselves.
    Own,
}

impl Dropped {
    /// Every reason (metrics start each at 0; a test in seedd's `metrics` keeps it complete).
    pub const ALL: [Dropped; 3] = [Self::Stale, Self::UnknownAuthor, Self::Own];

    pub fn label(&self) -> &'static str {
        match self {
            Self::Stale => "stale",
            Self::UnknownAuthor => "unknown_author",
            Self::Own => "own",
        }
    }
}

/// Something worth counting or logging.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A received announcement was dropped.
    Dropped { session: SessionId, reason: Dropped },
    /// An announcement was relayed to `peers` sessions.
    Relayed { kind: MessageType, peers: usize },
    /// Our inventory has more repositories than one message carries.
    InventoryTruncated { total: usize, announced: usize },
    /// A node told us it has our `rad/sigrefs` of `rid` at `at` (for replication).
    RefsSynced { rid: RepoId, remote: NodeId },
    /// A Pong with the expected length arrived.
    Pong { session: SessionId, latency_ms: u64 },
    /// A node announced (inventory) or updated (refs) repositories: a fetch may be wanted
    /// (protocol.md §5.4). From an inventory `clone_only` is set: only the repositories we do
    /// not hold yet are to be fetched. A refs announcement is reported only when it names a
    /// namespace other than ours (a node that has our refs has nothing for us).
    Seeds {
        session: SessionId,
        author: NodeId,
        rids: Vec<RepoId>,
        clone_only: bool,
    },
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send `message` to each of `to` (encode once, write many).
    Send {
        to: Vec<SessionId>,
        message: Message,
    },
    /// Close a session.
    Disconnect {
        session: SessionId,
        reason: DisconnectReason,
    },
    Persist(Change),
    Event(Event),
    /// Answer a Subscribe with stored gossip: the shell pulls it in batches with
    /// [`Service::subscribe_answer`] as the subscriber's outbox has room.
    SubscribeAnswer(SubscribeAnswer),
}

/// A Subscribe answer being streamed (a cursor over the store, oldest first): an answer larger
/// than the subscriber's outbox is delivered whole, and the store is never copied at once.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscribeAnswer {
    pub session: SessionId,
    pub(super) subscriber: NodeId,
    pub(super) filter: Filter,
    pub(super) until: u64,
    /// Where the scan resumes: (timestamp, key), inclusive on the first batch only.
    pub(super) from: (u64, AnnouncementKey),
    pub(super) started: bool,
    /// A newer Subscribe on the same session supersedes this answer.
    pub(super) generation: u64,
}

/// A connected peer, as the service sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub id: SessionId,
    pub nid: NodeId,
    pub link: Link,
    pub connected_at: u64,
    /// Last time a message arrived.
    pub last_received: u64,
    /// Last time something was sent.
    pub last_sent: u64,
    /// The peer's subscription (`None` until it sends Subscribe: no refs relayed to it).
    pub subscription: Option<Subscribe>,
    /// Outstanding ping: (sent at, expected pong length).
    pub ping: Option<(u64, u16)>,
    pub latency_ms: Option<u64>,
}

/// Persisted state handed to [`Service::new`] at startup.
#[derive(Debug, Default, Clone)]
pub struct Restored {
    pub announcements: Vec<StoredAnnouncement>,
    pub nodes: Vec<NodeRecord>,
    pub routing: Vec<(RepoId, NodeId, u64)>,
    pub own_timestamps: Vec<(MessageType, u64)>,
}

/// An announcement whose signature verified: the only way into
/// [`Service::received_verified`], so the service never stores or relays an unchecked one
/// although the shell verifies outside its lock.
#[derive(Debug, Clone)]
pub struct Verified(Announcement);

impl Verified {
    /// Verifies `ann`'s signature (one Ed25519 verification); `None` if it does not verify.
    pub fn check(ann: Announcement) -> Option<Self> {
        ann.verify().then_some(Self(ann))
    }

    /// [`Verified::check`] with the author's key decompressed beforehand (`None` for another
    /// node's key).
    pub fn check_with(ann: Announcement, key: &crate::crypto::VerifyingKey) -> Option<Self> {
        ann.verify_with(key).then_some(Self(ann))
    }

    pub fn announcement(&self) -> &Announcement {
        &self.0
    }

    pub(super) fn into_inner(self) -> Announcement {
        self.0
    }
}
