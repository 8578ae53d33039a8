//! The gossip service, sans-IO (protocol.md §4.9, §5): sessions, announcement checks,
//! de-duplication, the routing table and address book, relaying with subscription filters,
//! Subscribe answers and keep-alive timers.
//!
//! The shell (`seedd::net`) feeds it inputs — a session connected or closed, a decoded
//! message, a timer tick, a new inventory — each with the current time in milliseconds, and
//! drains [`Output`]s: messages to send, sessions to drop, changes to persist, events to count.
//! Nothing here blocks, sleeps, spawns or reads a clock.

pub mod limiter;
mod state;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::crypto::{Keypair, NodeId, RepoId};
use crate::wire::message::{FEATURE_SEED, INVENTORY_LIMIT, MAX_PONG_ZEROES};
use crate::wire::{
    Address, Alias, Announcement, AnnouncementMessage, Filter, Info, InventoryAnnouncement, Link,
    Message, MessageType, NodeAnnouncement, Ping, RefsAnnouncement, RefsAt, Subscribe, UserAgent,
    TIMESTAMP_MAX,
};

pub use state::{AnnouncementKey, NodeRecord, StoredAnnouncement};
use state::{GossipStore, Routing};

/// Milliseconds.
const SECOND: u64 = 1000;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

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
pub type VisibilityMap = HashMap<RepoId, Visibility>;

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
    /// A node announced (inventory) or updated (refs) repositories: a fetch may be wanted.
    Seeds {
        session: SessionId,
        author: NodeId,
        rids: Vec<RepoId>,
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
    subscriber: NodeId,
    filter: Filter,
    until: u64,
    /// Where the scan resumes: (timestamp, key), inclusive on the first batch only.
    from: (u64, AnnouncementKey),
    started: bool,
    /// A newer Subscribe on the same session supersedes this answer.
    generation: u64,
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

/// The gossip service.
pub struct Service {
    keypair: Keypair,
    nid: NodeId,
    config: Config,
    sessions: HashMap<SessionId, Session>,
    store: GossipStore,
    routing: Routing,
    nodes: HashMap<NodeId, NodeRecord>,
    last_own: HashMap<MessageType, u64>,
    node_announcement: Announcement,
    inventory: Vec<RepoId>,
    inventory_announcement: Announcement,
    /// Repositories we hold and who may see them. Refs announcements about a repository not
    /// in it are neither relayed nor answered (we cannot know whether it is private).
    visibility: Arc<VisibilityMap>,
    /// Inventory announcements waiting for the relay timer.
    relay_queue: Vec<(Announcement, HashSet<SessionId>)>,
    last_relay: u64,
    last_prune: u64,
    outputs: Vec<Output>,
    /// The current Subscribe answer of each session (its generation).
    answers: HashMap<SessionId, u64>,
    next_answer: u64,
}

impl Service {
    /// A service for `keypair` at time `now`, restoring persisted state. The node
    /// announcement gets a fresh timestamp, strictly above any used before.
    pub fn new(keypair: Keypair, config: Config, restored: Restored, now: u64) -> Self {
        let nid = keypair.nid();
        let mut store = GossipStore::default();
        for stored in restored.announcements {
            store.insert(stored);
        }
        let mut routing = Routing::default();
        for (rid, node, ts) in restored.routing {
            routing.insert(rid, node, ts);
        }
        let nodes = restored.nodes.into_iter().map(|n| (n.nid, n)).collect();
        let last_own: HashMap<MessageType, u64> = restored.own_timestamps.into_iter().collect();
        let placeholder = AnnouncementMessage::Inventory(InventoryAnnouncement {
            inventory: Vec::new(),
            timestamp: 0,
        });
        let mut service = Self {
            node_announcement: sign_infallible(placeholder.clone(), &keypair),
            inventory_announcement: sign_infallible(placeholder, &keypair),
            keypair,
            nid,
            config,
            sessions: HashMap::new(),
            store,
            routing,
            nodes,
            last_own,
            inventory: Vec::new(),
            visibility: Arc::default(),
            relay_queue: Vec::new(),
            last_relay: now,
            last_prune: now,
            outputs: Vec::new(),
            answers: HashMap::new(),
            next_answer: 0,
        };
        service.node_announcement = service.make_node_announcement(now);
        service.inventory_announcement = service.make_inventory_announcement(now);
        service.enforce_caps();
        service
    }

    /// Our node id.
    pub fn nid(&self) -> NodeId {
        self.nid
    }

    /// Takes the outputs produced so far.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.outputs)
    }

    /// Connected sessions.
    pub fn sessions(&self) -> impl Iterator<Item = &Session> {
        self.sessions.values()
    }

    pub fn session(&self, id: SessionId) -> Option<&Session> {
        self.sessions.get(&id)
    }

    /// The address book.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeRecord> {
        self.nodes.values()
    }

    /// Routing entries `(rid, nid, timestamp)`.
    pub fn routing(&self) -> impl Iterator<Item = (RepoId, NodeId, u64)> + '_ {
        self.routing.iter()
    }

    /// Nodes known to seed `rid`.
    pub fn seeds_of(&self, rid: &RepoId) -> Vec<(NodeId, u64)> {
        self.routing.seeds(rid)
    }

    pub fn routing_len(&self) -> usize {
        self.routing.len()
    }

    pub fn stored_announcements(&self) -> usize {
        self.store.len()
    }

    /// Our announced inventory.
    pub fn inventory(&self) -> &[RepoId] {
        &self.inventory
    }

    /// Our current node announcement.
    pub fn node_announcement(&self) -> &Announcement {
        &self.node_announcement
    }

    /// A timestamp for our next announcement of `kind`: `now`, or one above the last used.
    fn next_timestamp(&mut self, kind: MessageType, now: u64) -> u64 {
        let last = self.last_own.get(&kind).copied().unwrap_or(0);
        let ts = now.max(last.saturating_add(1)).min(TIMESTAMP_MAX);
        self.last_own.insert(kind, ts);
        self.outputs.push(Output::Persist(Change::OwnTimestamp {
            kind,
            timestamp: ts,
        }));
        ts
    }

    fn make_node_announcement(&mut self, now: u64) -> Announcement {
        let timestamp = self.next_timestamp(MessageType::NodeAnnouncement, now);
        let mut addresses = self.config.external_addresses.clone();
        addresses.truncate(crate::wire::message::ADDRESS_LIMIT);
        let ann = AnnouncementMessage::Node(NodeAnnouncement {
            version: crate::wire::message::NODE_ANNOUNCEMENT_VERSION,
            features: FEATURE_SEED,
            timestamp,
            alias: self.config.alias.clone(),
            addresses,
            nonce: 1,
            agent: self.config.user_agent.clone(),
        });
        let signed = sign_infallible(ann, &self.keypair);
        self.store_own(&signed, now);
        signed
    }

    fn make_inventory_announcement(&mut self, now: u64) -> Announcement {
        let timestamp = self.next_timestamp(MessageType::InventoryAnnouncement, now);
        let mut inventory = self.inventory.clone();
        if inventory.len() > INVENTORY_LIMIT {
            self.outputs.push(Output::Event(Event::InventoryTruncated {
                total: inventory.len(),
                announced: INVENTORY_LIMIT,
            }));
            inventory.truncate(INVENTORY_LIMIT);
        }
        let ann = AnnouncementMessage::Inventory(InventoryAnnouncement {
            inventory,
            timestamp,
        });
        let signed = sign_infallible(ann, &self.keypair);
        self.store_own(&signed, now);
        signed
    }

    fn store_own(&mut self, ann: &Announcement, now: u64) {
        let stored = StoredAnnouncement {
            announcement: ann.clone(),
            received_at: now,
        };
        self.store.insert(stored.clone());
        self.outputs
            .push(Output::Persist(Change::Announcement(stored)));
    }

    /// Replaces our inventory (the public repositories we serve). If it changed, a new
    /// inventory announcement is sent to every connected peer and our routing entries updated.
    /// Private repositories are never part of it, whatever the shell passes.
    pub fn set_inventory(&mut self, mut rids: Vec<RepoId>, now: u64) {
        rids.retain(|rid| !is_private(&self.visibility, rid));
        rids.sort();
        rids.dedup();
        if rids == self.inventory && self.inventory_announcement.timestamp() != 0 {
            return;
        }
        let old: BTreeSet<RepoId> = self.inventory.iter().copied().collect();
        let new: BTreeSet<RepoId> = rids.iter().copied().collect();
        for rid in old.difference(&new) {
            self.remove_route(*rid, self.nid);
        }
        let ts = now;
        for rid in &new {
            self.add_route(*rid, self.nid, ts);
        }
        self.inventory = rids;
        self.inventory_announcement = self.make_inventory_announcement(now);
        let to: Vec<SessionId> = self.sessions.keys().copied().collect();
        self.send(
            to,
            Message::Announcement(self.inventory_announcement.clone()),
            now,
        );
    }

    /// Replaces what we know of the visibility of the repositories we hold. From now on
    /// refs announcements about a private one go only to its delegates and allow list (relay,
    /// Subscribe answers, our own), those about a repository not in the map to nobody, and a
    /// private one leaves our inventory if it was in it.
    pub fn set_visibility(&mut self, visibility: Arc<VisibilityMap>, now: u64) {
        self.visibility = visibility;
        if self
            .inventory
            .iter()
            .any(|rid| is_private(&self.visibility, rid))
        {
            let inventory = self.inventory.clone();
            self.set_inventory(inventory, now);
        }
    }

    /// Whether `nid` may hear about `rid` from us: we hold it and it is public, or `nid` is
    /// a delegate or on its allow list.
    pub fn is_visible_to(&self, rid: &RepoId, nid: &NodeId) -> bool {
        self.visibility
            .get(rid)
            .is_some_and(|v| v.is_visible_to(nid))
    }

    /// Announces our `rad/sigrefs` of `rid` for the given namespaces to subscribed peers
    /// allowed to see the repository.
    pub fn announce_refs(&mut self, rid: RepoId, refs: Vec<RefsAt>, now: u64) {
        let timestamp = self.next_timestamp(MessageType::RefsAnnouncement, now);
        let ann = sign_infallible(
            AnnouncementMessage::Refs(RefsAnnouncement {
                rid,
                refs,
                timestamp,
            }),
            &self.keypair,
        );
        self.store_own(&ann, now);
        let to = self
            .sessions
            .values()
            .filter(|s| {
                s.subscription
                    .as_ref()
                    .is_some_and(|sub| sub.filter.contains(&rid))
            })
            .filter(|s| may_receive(&self.visibility, &ann, &s.nid))
            .map(|s| s.id)
            .collect();
        self.send(to, Message::Announcement(ann), now);
    }

    /// A session finished its handshake: send NodeAnnouncement, Inventory, Subscribe (§5.1).
    pub fn connected(&mut self, id: SessionId, nid: NodeId, link: Link, now: u64) {
        self.sessions.insert(
            id,
            Session {
                id,
                nid,
                link,
                connected_at: now,
                last_received: now,
                last_sent: now,
                subscription: None,
                ping: None,
                latency_ms: None,
            },
        );
        let since = match self.store.newest_timestamp() {
            Some(ts) => ts.saturating_sub(3 * MINUTE),
            None => now.saturating_sub(DAY),
        };
        let subscribe = Subscribe {
            filter: self.subscription_filter(),
            since: since.min(TIMESTAMP_MAX),
            until: TIMESTAMP_MAX,
        };
        self.send(
            vec![id],
            Message::Announcement(self.node_announcement.clone()),
            now,
        );
        self.send(
            vec![id],
            Message::Announcement(self.inventory_announcement.clone()),
            now,
        );
        self.send(vec![id], Message::Subscribe(subscribe), now);
    }

    /// The filter we subscribe with: everything when seeding all, else the seeded repos.
    pub fn subscription_filter(&self) -> Filter {
        if self.config.seed_all {
            Filter::default()
        } else {
            Filter::new(self.config.seeded.iter().chain(self.inventory.iter()))
        }
    }

    /// Changes what we seed; sends the new subscription filter to every peer.
    pub fn set_seeding(&mut self, seed_all: bool, seeded: BTreeSet<RepoId>, now: u64) {
        self.config.seed_all = seed_all;
        self.config.seeded = seeded;
        let filter = self.subscription_filter();
        let to: Vec<SessionId> = self.sessions.keys().copied().collect();
        let since = now.saturating_sub(3 * MINUTE);
        self.send(
            to,
            Message::Subscribe(Subscribe {
                filter,
                since,
                until: TIMESTAMP_MAX,
            }),
            now,
        );
    }

    /// We fetched `rid` from `nid`: it seeds the repository (routing, §5.6 (c)).
    pub fn fetched(&mut self, rid: RepoId, nid: NodeId, now: u64) {
        self.add_route(rid, nid, now);
        self.enforce_caps();
    }

    /// A session closed.
    pub fn disconnected(&mut self, id: SessionId) {
        self.sessions.remove(&id);
        self.answers.remove(&id);
        for (_, skip) in &mut self.relay_queue {
            skip.remove(&id);
        }
    }

    /// Asks the shell to close a session (operator command).
    pub fn disconnect(&mut self, id: SessionId) {
        if self.sessions.contains_key(&id) {
            self.outputs.push(Output::Disconnect {
                session: id,
                reason: DisconnectReason::Command,
            });
        }
    }

    fn seeds_repo(&self, rid: &RepoId) -> bool {
        self.config.seed_all
            || self.config.seeded.contains(rid)
            || self.inventory.binary_search(rid).is_ok()
    }

    fn send(&mut self, to: Vec<SessionId>, message: Message, now: u64) {
        if to.is_empty() {
            return;
        }
        for id in &to {
            if let Some(s) = self.sessions.get_mut(id) {
                s.last_sent = now;
            }
        }
        self.outputs.push(Output::Send { to, message });
    }

    fn disconnect_for(&mut self, id: SessionId, reason: DisconnectReason) {
        self.outputs.push(Output::Disconnect {
            session: id,
            reason,
        });
    }

    /// A decoded gossip message from a session.
    pub fn received(&mut self, id: SessionId, message: Message, now: u64) {
        let Some(session) = self.sessions.get_mut(&id) else {
            return;
        };
        session.last_received = now;
        match message {
            Message::Ping(Ping { ponglen, .. }) => {
                // Pings asking for more than the protocol allows are ignored (§4.3).
                if ponglen <= MAX_PONG_ZEROES {
                    self.send(vec![id], Message::Pong { zeroes: ponglen }, now);
                }
            }
            Message::Pong { zeroes } => {
                if let Some((sent, len)) = session.ping {
                    if len == zeroes {
                        let latency_ms = now.saturating_sub(sent);
                        session.ping = None;
                        session.latency_ms = Some(latency_ms);
                        self.outputs.push(Output::Event(Event::Pong {
                            session: id,
                            latency_ms,
                        }));
                    }
                }
            }
            Message::Subscribe(sub) => self.subscribed(id, sub, now),
            Message::Info(Info::RefsAlreadySynced { rid, .. }) => {
                let remote = session.nid;
                self.outputs
                    .push(Output::Event(Event::RefsSynced { rid, remote }));
            }
            Message::Announcement(ann) => self.announcement(id, ann, now),
        }
    }

    fn subscribed(&mut self, id: SessionId, sub: Subscribe, _now: u64) {
        let Some(session) = self.sessions.get_mut(&id) else {
            return;
        };
        let subscriber = session.nid;
        // Answer with stored gossip in [since, until) matching the filter (streamed, see
        // `subscribe_answer`); an inverted range is answered with nothing.
        if sub.since <= sub.until {
            self.next_answer += 1;
            self.answers.insert(id, self.next_answer);
            self.outputs.push(Output::SubscribeAnswer(SubscribeAnswer {
                session: id,
                subscriber,
                filter: sub.filter.clone(),
                until: sub.until,
                from: (sub.since, AnnouncementKey::MIN),
                started: false,
                generation: self.next_answer,
            }));
        } else {
            self.answers.remove(&id);
        }
        session.subscription = Some(sub);
    }

    /// The next (at most `max`) announcements of a Subscribe answer, scanning at most
    /// `16 × max` stored entries, and whether the answer is complete (also when its session
    /// closed or sent a newer Subscribe). Sends nothing itself: the shell queues them.
    pub fn subscribe_answer(
        &mut self,
        answer: &mut SubscribeAnswer,
        max: usize,
        now: u64,
    ) -> (Vec<Announcement>, bool) {
        if self.answers.get(&answer.session) != Some(&answer.generation) {
            return (Vec::new(), true);
        }
        let subscriber = answer.subscriber;
        // Never our own peer's gossip back to it. A non-relay node answers with its own
        // announcements only. Refs only of repositories we hold, of a private one only to its
        // delegates and allow list.
        let relay = self.config.relay;
        let own = self.nid;
        let visibility = &self.visibility;
        let max = max.max(1);
        let mut replies = Vec::new();
        let mut done = true;
        let range = self
            .store
            .range_from(answer.from, answer.started, answer.until);
        for (scanned, (pos, stored)) in range.enumerate() {
            if replies.len() >= max || scanned >= max.saturating_mul(16) {
                done = false;
                break;
            }
            answer.from = pos;
            answer.started = true;
            if stored.announcement.node != subscriber
                && (relay || stored.announcement.node == own)
                && stored.announcement.matches(&answer.filter)
                && may_receive(visibility, &stored.announcement, &subscriber)
            {
                replies.push(stored.announcement.clone());
            }
        }
        if done {
            self.answers.remove(&answer.session);
        }
        if !replies.is_empty() {
            if let Some(s) = self.sessions.get_mut(&answer.session) {
                s.last_sent = now;
            }
        }
        (replies, done)
    }

    fn announcement(&mut self, id: SessionId, ann: Announcement, now: u64) {
        // 1. Signature; own announcements are ignored.
        if !ann.verify() {
            self.disconnect_for(id, DisconnectReason::InvalidSignature);
            return;
        }
        if ann.node == self.nid {
            self.dropped(id, Dropped::Own);
            return;
        }
        // 2. Not too far in the future.
        let timestamp = ann.timestamp();
        if timestamp > now.saturating_add(self.config.timers.max_clock_skew_ms) {
            self.disconnect_for(id, DisconnectReason::InvalidTimestamp { timestamp, now });
            return;
        }
        // 3. Inventory and refs only from nodes in the address book.
        if !matches!(ann.message, AnnouncementMessage::Node(_))
            && !self.nodes.contains_key(&ann.node)
        {
            self.dropped(id, Dropped::UnknownAuthor);
            return;
        }
        // 4. Strictly newer than what is stored for the same key.
        let key = AnnouncementKey::of(&ann);
        if let Some(existing) = self.store.get(&key) {
            if existing.announcement.timestamp() >= timestamp {
                self.dropped(id, Dropped::Stale);
                return;
            }
        }
        let stored = StoredAnnouncement {
            announcement: ann.clone(),
            received_at: now,
        };
        self.store.insert(stored.clone());
        self.outputs
            .push(Output::Persist(Change::Announcement(stored)));
        let fresh = timestamp.saturating_add(HOUR) >= now;

        // 6. Act on it.
        let author = ann.node;
        let relay = match &ann.message {
            AnnouncementMessage::Node(node) => {
                if node.is_seed() {
                    let record = NodeRecord {
                        nid: author,
                        version: node.version,
                        features: node.features,
                        alias: node.alias.as_str().to_owned(),
                        agent: node.agent.as_str().to_owned(),
                        addresses: node.addresses.iter().map(ToString::to_string).collect(),
                        timestamp,
                        last_seen: now,
                    };
                    self.nodes.insert(author, record.clone());
                    self.outputs.push(Output::Persist(Change::Node(record)));
                }
                Relay::Now
            }
            AnnouncementMessage::Inventory(inv) => {
                let changed = self.replace_routes(author, &inv.inventory, timestamp);
                // A direct peer's repos join its subscription, so it hears about their refs.
                let direct: Vec<SessionId> = self
                    .sessions
                    .values()
                    .filter(|s| s.nid == author)
                    .map(|s| s.id)
                    .collect();
                for sid in &direct {
                    if let Some(sub) = self
                        .sessions
                        .get_mut(sid)
                        .and_then(|s| s.subscription.as_mut())
                    {
                        for rid in &inv.inventory {
                            sub.filter.insert(rid);
                        }
                    }
                }
                if !direct.is_empty() {
                    let rids: Vec<RepoId> = inv
                        .inventory
                        .iter()
                        .filter(|rid| self.seeds_repo(rid))
                        .copied()
                        .collect();
                    if !rids.is_empty() {
                        self.outputs.push(Output::Event(Event::Seeds {
                            session: id,
                            author,
                            rids,
                        }));
                    }
                }
                if changed {
                    Relay::Later
                } else {
                    Relay::No
                }
            }
            AnnouncementMessage::Refs(refs) => {
                if !refs.refs.is_empty() {
                    self.add_route(refs.rid, author, timestamp);
                    if refs.refs.iter().any(|r| r.remote == self.nid) {
                        self.outputs.push(Output::Event(Event::RefsSynced {
                            rid: refs.rid,
                            remote: author,
                        }));
                    }
                }
                if refs.refs.is_empty() || !self.seeds_repo(&refs.rid) {
                    Relay::No
                } else {
                    if self.sessions.get(&id).is_some_and(|s| s.nid == author) {
                        self.outputs.push(Output::Event(Event::Seeds {
                            session: id,
                            author,
                            rids: vec![refs.rid],
                        }));
                    }
                    Relay::Now
                }
            }
        };
        self.enforce_caps();
        if !self.config.relay || !(fresh || matches!(ann.message, AnnouncementMessage::Node(_))) {
            return;
        }
        match relay {
            Relay::No => {}
            Relay::Now => self.relay(ann, HashSet::from([id]), now),
            Relay::Later => self.relay_queue.push((ann, HashSet::from([id]))),
        }
    }

    fn dropped(&mut self, session: SessionId, reason: Dropped) {
        self.outputs
            .push(Output::Event(Event::Dropped { session, reason }));
    }

    /// Sends `ann` to connected peers except its author and the sessions in `skip`; refs
    /// announcements only to peers whose subscription contains the repository, only if we
    /// hold it and, for a private one, only to its delegates and allow list.
    fn relay(&mut self, ann: Announcement, skip: HashSet<SessionId>, now: u64) {
        let to: Vec<SessionId> = self
            .sessions
            .values()
            .filter(|s| s.nid != ann.node && !skip.contains(&s.id))
            .filter(|s| match &ann.message {
                AnnouncementMessage::Refs(refs) => s
                    .subscription
                    .as_ref()
                    .is_some_and(|sub| sub.filter.contains(&refs.rid)),
                _ => true,
            })
            .filter(|s| may_receive(&self.visibility, &ann, &s.nid))
            .map(|s| s.id)
            .collect();
        let kind = ann.message.message_type();
        let peers = to.len();
        self.send(to, Message::Announcement(ann), now);
        if peers > 0 {
            self.outputs
                .push(Output::Event(Event::Relayed { kind, peers }));
        }
    }

    fn add_route(&mut self, rid: RepoId, nid: NodeId, timestamp: u64) {
        if self.routing.insert(rid, nid, timestamp) {
            self.outputs.push(Output::Persist(Change::Routing {
                rid,
                nid,
                timestamp,
            }));
        }
    }

    fn remove_route(&mut self, rid: RepoId, nid: NodeId) -> bool {
        if self.routing.remove(&rid, &nid) {
            self.outputs
                .push(Output::Persist(Change::RoutingRemoved { rid, nid }));
            true
        } else {
            false
        }
    }

    /// Makes `nid`'s routing entries exactly `rids`; whether anything was added or removed.
    fn replace_routes(&mut self, nid: NodeId, rids: &[RepoId], timestamp: u64) -> bool {
        let new: BTreeSet<RepoId> = rids.iter().copied().collect();
        let old: Vec<RepoId> = self.routing.repos_of(&nid);
        let mut changed = false;
        for rid in old {
            if !new.contains(&rid) {
                changed |= self.remove_route(rid, nid);
            }
        }
        for rid in new {
            let existed = self.routing.contains(&rid, &nid);
            self.add_route(rid, nid, timestamp);
            changed |= !existed;
        }
        changed
    }

    /// Timer input; call about once a second. Pings quiet sessions, drops stale ones, relays
    /// queued inventories and prunes old gossip and routes.
    pub fn tick(&mut self, now: u64) {
        let timers = self.config.timers.clone();
        let mut stale = Vec::new();
        let mut ping = Vec::new();
        for s in self.sessions.values_mut() {
            if now.saturating_sub(s.last_received) >= timers.stale_ms {
                stale.push(s.id);
            } else if now.saturating_sub(s.last_sent) >= timers.keep_alive_ms {
                // Small pongs: we only need liveness, not 64 KiB of zeroes.
                let ponglen = (now % 16) as u16;
                s.ping = Some((now, ponglen));
                ping.push((s.id, ponglen));
            }
        }
        for id in stale {
            self.disconnect_for(id, DisconnectReason::Stale);
        }
        for (id, ponglen) in ping {
            self.send(vec![id], Message::Ping(Ping { ponglen, zeroes: 0 }), now);
        }
        if now.saturating_sub(self.last_relay) >= timers.relay_interval_ms {
            self.last_relay = now;
            for (ann, skip) in std::mem::take(&mut self.relay_queue) {
                self.relay(ann, skip, now);
            }
        }
        if now.saturating_sub(self.last_prune) >= timers.prune_interval_ms {
            self.last_prune = now;
            self.prune(now);
        }
    }

    fn over_caps(&self, slack: usize) -> bool {
        let caps = &self.config.caps;
        let within = |len: usize, cap: usize| len <= cap.saturating_sub(cap / 10 * slack);
        !(within(self.nodes.len(), caps.max_nodes)
            && within(self.routing.len(), caps.max_routes)
            && within(self.store.len(), caps.max_announcements))
    }

    /// Above any cap, forgets whole nodes (address-book entry, routes, announcements, each
    /// emitted as a `Change`) until every table is back under 90% of its cap, so the scan is
    /// amortised over many insertions. Never ourselves. Nodes that are not connected go first:
    /// those that announced none of the repositories we seed before the others, each group
    /// oldest `last_seen` (latest node announcement or announcement received) first. Connected
    /// peers go last, the one holding the most state first (a connected peer flooding refs
    /// announcements for ever new repositories is the only way to get there).
    pub fn enforce_caps(&mut self) {
        if !self.over_caps(0) {
            return;
        }
        let connected: HashSet<NodeId> = self.sessions.values().map(|s| s.nid).collect();
        let mut seen: HashMap<NodeId, (u64, Vec<AnnouncementKey>)> = HashMap::new();
        for r in self.nodes.values() {
            let e = seen.entry(r.nid).or_default();
            e.0 = e.0.max(r.last_seen);
        }
        for stored in self.store.iter() {
            let e = seen.entry(stored.announcement.node).or_default();
            e.0 = e.0.max(stored.received_at);
            e.1.push(stored.key());
        }
        for nid in self.routing.nodes() {
            seen.entry(nid).or_default();
        }
        // (connected, seeds one of ours, rank: last_seen, or for connected peers fewest
        // entries last), node, its announcement keys.
        type Victim = ((bool, bool, u64), NodeId, Vec<AnnouncementKey>);
        let mut victims: Vec<Victim> = seen
            .into_iter()
            .filter(|(nid, _)| *nid != self.nid)
            .map(|(nid, (last_seen, keys))| {
                let repos = self.routing.repos_of(&nid);
                let ours = repos.iter().any(|rid| self.seeds_repo(rid));
                let rank = if connected.contains(&nid) {
                    u64::MAX - (repos.len() + keys.len()) as u64
                } else {
                    last_seen
                };
                ((connected.contains(&nid), ours, rank), nid, keys)
            })
            .collect();
        victims.sort_unstable_by_key(|(order, nid, _)| (*order, *nid));
        for (_, nid, keys) in victims {
            if !self.over_caps(1) {
                break;
            }
            if self.nodes.remove(&nid).is_some() {
                self.outputs.push(Output::Persist(Change::NodeRemoved(nid)));
            }
            for rid in self.routing.repos_of(&nid) {
                self.remove_route(rid, nid);
            }
            for key in keys {
                self.store.remove(&key);
                self.outputs
                    .push(Output::Persist(Change::AnnouncementRemoved(key)));
            }
        }
    }

    /// Drops gossip older than the max age and, above the size limit, old routes.
    pub fn prune(&mut self, now: u64) {
        let timers = self.config.timers.clone();
        let cutoff = now.saturating_sub(timers.gossip_max_age_ms);
        for key in self.store.older_than(cutoff) {
            if key.node == self.nid {
                continue;
            }
            self.store.remove(&key);
            self.outputs
                .push(Output::Persist(Change::AnnouncementRemoved(key)));
        }
        if self.routing.len() > timers.routing_max_size {
            let cutoff = now.saturating_sub(timers.routing_max_age_ms);
            let own = self.nid;
            for (rid, nid) in self.routing.older_than(cutoff) {
                if nid != own {
                    self.remove_route(rid, nid);
                }
            }
        }
    }
}

/// Whether a session with `to` may receive `ann`. Refs announcements (ours or relayed) only
/// about repositories we hold, and about a private one only to its delegates and allow list.
/// A repository we do not hold (yet) may be private — e.g. its delegate announces it to us
/// because we are on its allow list, before we fetched it — so its refs are not passed on
/// (radicle-node does the same). Other announcements name no private repository (our
/// inventory leaves them out; other nodes' are theirs to sign).
fn may_receive(visibility: &VisibilityMap, ann: &Announcement, to: &NodeId) -> bool {
    let AnnouncementMessage::Refs(refs) = &ann.message else {
        return true;
    };
    visibility
        .get(&refs.rid)
        .is_some_and(|v| v.is_visible_to(to))
}

fn is_private(visibility: &VisibilityMap, rid: &RepoId) -> bool {
    matches!(visibility.get(rid), Some(Visibility::Private { .. }))
}

enum Relay {
    No,
    Now,
    Later,
}

/// Signing only fails for messages over a protocol limit; ours are built within them.
fn sign_infallible(message: AnnouncementMessage, keypair: &Keypair) -> Announcement {
    match message.clone().sign(keypair) {
        Ok(ann) => ann,
        Err(_) => {
            // Unreachable by construction (lists are truncated to their limits); fall back to
            // an empty body of the same kind rather than panic.
            let empty = match message {
                AnnouncementMessage::Inventory(inv) => {
                    AnnouncementMessage::Inventory(InventoryAnnouncement {
                        inventory: Vec::new(),
                        timestamp: inv.timestamp,
                    })
                }
                other => other,
            };
            Announcement {
                node: keypair.nid(),
                signature: keypair.sign(&empty.encode_body().unwrap_or_default()),
                message: empty,
            }
        }
    }
}
