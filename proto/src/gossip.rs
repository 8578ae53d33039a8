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
mod types;
mod upkeep;

pub use types::*;

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
    /// When our inventory was last announced by a change (`None`: not since the start), and
    /// whether a change waits for the tick.
    inventory_sent: Option<u64>,
    inventory_pending: bool,
    /// Repositories we hold and who may see them. Refs announcements about a repository not
    /// in it are neither relayed nor answered (we cannot know whether it is private).
    visibility: Visibilities,
    /// Inventory announcements waiting for the relay timer.
    relay_queue: Vec<(Announcement, HashSet<SessionId>)>,
    last_relay: u64,
    last_prune: u64,
    outputs: Vec<Output>,
    /// The current Subscribe answer of each session (its generation).
    answers: HashMap<SessionId, u64>,
    next_answer: u64,
    /// The filter our last Subscribe to every peer carried ([`Service::set_seeding`]): an
    /// unchanged filter is not sent again (each Subscribe makes every peer replay its gossip).
    sent_filter: Option<Filter>,
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
            inventory_sent: None,
            inventory_pending: false,
            visibility: Visibilities::default(),
            relay_queue: Vec::new(),
            last_relay: now,
            last_prune: now,
            outputs: Vec::new(),
            answers: HashMap::new(),
            next_answer: 0,
            sent_filter: None,
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

    /// A page of the routing table: entries strictly after `after` in (repository, node)
    /// order, optionally only one repository's or one node's, with how many entries that
    /// selection has in all. Costs the page (plus, for one repository, its seed count).
    pub fn routing_page(
        &self,
        rid: Option<RepoId>,
        nid: Option<NodeId>,
        after: Option<(RepoId, NodeId)>,
        limit: usize,
    ) -> (Vec<(RepoId, NodeId, u64)>, usize) {
        match (rid, nid) {
            (Some(rid), Some(nid)) => {
                let hit = self.routing.get(&rid, &nid).map(|ts| (rid, nid, ts));
                let total = usize::from(hit.is_some());
                let rows = hit
                    .filter(|(r, n, _)| after.is_none_or(|a| (*r, *n) > a))
                    .into_iter()
                    .take(limit)
                    .collect();
                (rows, total)
            }
            (Some(rid), None) => {
                // A cursor from another repository: start before or after all of this one's.
                let rows = match after {
                    Some((r, _)) if r > rid => Vec::new(),
                    Some((r, n)) if r == rid => {
                        self.routing.seeds_after(rid, Some(n)).take(limit).collect()
                    }
                    _ => self.routing.seeds_after(rid, None).take(limit).collect(),
                };
                (rows, self.routing.seed_count(&rid))
            }
            (None, Some(nid)) => {
                use std::ops::Bound;
                // Within one node, (repository, node) order is repository order: after the
                // cursor (r, n) come r itself if `nid` sorts after n, then every later one.
                let lower = match after {
                    None => Bound::Unbounded,
                    Some((r, n)) if nid > n => Bound::Included(r),
                    Some((r, _)) => Bound::Excluded(r),
                };
                let rows = self.routing.of_node_from(nid, lower).take(limit).collect();
                (rows, self.routing.node_count(&nid))
            }
            (None, None) => (
                self.routing.iter_after(after).take(limit).collect(),
                self.routing.len(),
            ),
        }
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

    /// Replaces our inventory (the public repositories we serve). If it changed, our routing
    /// entries are updated and a new inventory announcement is sent to every connected peer:
    /// at once when a repository left it or none was sent for `timers.inventory_interval_ms`,
    /// else at the first [`Service::tick`] after that interval (many repositories fetched in
    /// a row are announced a few times, not once each). Private repositories are never part
    /// of it, whatever the shell passes.
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
        // Only what is new: an unchanged entry keeps its timestamp (no write per held repository).
        for rid in new.difference(&old) {
            self.add_route(*rid, self.nid, now);
        }
        self.inventory = rids;
        // A repository leaving (made private, purged) leaves at once; additions within the
        // interval of the last announcement wait for the tick.
        let removed = old.difference(&new).next().is_some();
        let interval = self.config.timers.inventory_interval_ms;
        if removed
            || self
                .inventory_sent
                .is_none_or(|t| now.saturating_sub(t) >= interval)
        {
            self.announce_inventory(now);
        } else {
            self.inventory_pending = true;
        }
    }

    /// Signs the current inventory and sends it to every session.
    pub(crate) fn announce_inventory(&mut self, now: u64) {
        self.inventory_pending = false;
        self.inventory_sent = Some(now);
        self.inventory_announcement = self.make_inventory_announcement(now);
        let to: Vec<SessionId> = self.sessions.keys().copied().collect();
        self.send(
            to,
            Message::Announcement(self.inventory_announcement.clone()),
            now,
        );
    }

    /// Whether an inventory change waits for the tick to be announced.
    pub fn inventory_pending(&self) -> bool {
        self.inventory_pending
    }

    /// Replaces what we know of the visibility of the repositories we hold. From now on
    /// refs announcements about a private one go only to its delegates and allow list (relay,
    /// Subscribe answers, our own), those about a repository not in the map to nobody, and a
    /// private one leaves our inventory if it was in it.
    pub fn set_visibility(&mut self, visibility: Arc<VisibilityMap>, now: u64) {
        let before = std::mem::take(&mut self.visibility);
        self.visibility = Visibilities {
            base: visibility,
            overlay: HashMap::new(),
        };
        // Our refs announcements of repositories whose audience grew reach the newly admitted
        // subscribers now (they were skipped when we announced). Rare: start and rescans.
        let own: Vec<RepoId> = self
            .store
            .iter()
            .filter(|s| s.announcement.node == self.nid)
            .filter_map(|s| match &s.announcement.message {
                AnnouncementMessage::Refs(r) => Some(r.rid),
                _ => None,
            })
            .collect();
        for rid in own {
            self.resend_own_refs(rid, before.get(&rid).cloned(), now);
        }
        if self
            .inventory
            .iter()
            .any(|rid| is_private(&self.visibility, rid))
        {
            let inventory = self.inventory.clone();
            self.set_inventory(inventory, now);
        }
    }

    /// Replaces the visibility of one repository (`None`: we no longer hold it): what a fetch
    /// or a purge changed, at the cost of that repository only. Subscribers it newly admits get
    /// our stored refs announcement of it; a repository that turned private leaves the inventory.
    pub fn set_repo_visibility(&mut self, rid: RepoId, visibility: Option<Visibility>, now: u64) {
        let before = self.visibility.get(&rid).cloned();
        if before == visibility {
            return;
        }
        let private = matches!(visibility, Some(Visibility::Private { .. }));
        self.visibility.overlay.insert(rid, visibility);
        self.resend_own_refs(rid, before, now);
        if private && self.inventory.contains(&rid) {
            let inventory = self.inventory.clone();
            self.set_inventory(inventory, now);
        }
    }

    /// Sends our stored refs announcement of `rid` to the subscribed sessions that may receive
    /// it now but could not under `before`.
    fn resend_own_refs(&mut self, rid: RepoId, before: Option<Visibility>, now: u64) {
        let key = AnnouncementKey {
            node: self.nid,
            rid: Some(rid),
            kind: MessageType::RefsAnnouncement as u16,
        };
        let Some(stored) = self.store.get(&key) else {
            return;
        };
        let ann = stored.announcement.clone();
        let to: Vec<SessionId> = self
            .sessions
            .values()
            .filter(|s| {
                s.subscription
                    .as_ref()
                    .is_some_and(|sub| sub.filter.contains(&rid))
            })
            .filter(|s| !before.as_ref().is_some_and(|v| v.is_visible_to(&s.nid)))
            .filter(|s| may_receive(&self.visibility, &ann, &s.nid))
            .map(|s| s.id)
            .collect();
        self.send(to, Message::Announcement(ann), now);
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

    /// Changes what we seed; sends the new subscription filter to every peer when it differs
    /// from the one they last got.
    pub fn set_seeding(&mut self, seed_all: bool, seeded: BTreeSet<RepoId>, now: u64) {
        self.config.seed_all = seed_all;
        self.config.seeded = seeded;
        let filter = self.subscription_filter();
        if self.sent_filter.as_ref() == Some(&filter) {
            return;
        }
        self.sent_filter = Some(filter.clone());
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

    /// An announcement the shell has not verified: checked, verified here, then acted on.
    fn announcement(&mut self, id: SessionId, ann: Announcement, now: u64) {
        if !self.worth_verifying(id, &ann) {
            return;
        }
        match Verified::check(ann) {
            Some(verified) => self.accept(id, verified, now),
            None => self.disconnect_for(id, DisconnectReason::InvalidSignature),
        }
    }

    /// Whether an announcement would be acted on if its signature verifies (`Ok`), or why it
    /// would be dropped. Changes nothing: the shell calls this under its lock, counts the
    /// drops ([`Service::dropped_unverified`]), verifies the rest outside the lock, then hands
    /// them to [`Service::received_verified`], which checks again.
    ///
    /// What is dropped without acting on it is dropped before the signature is verified (an
    /// Ed25519 verification is ~40 µs; each announcement reaches a well-connected seed once
    /// per relaying peer, and all copies but the first are stale): own announcements,
    /// inventory and refs from authors not in the address book, and anything not strictly
    /// newer than what is stored for the same key. Nothing is stored, relayed or acted on
    /// before the signature is checked.
    pub fn screen(&self, ann: &Announcement) -> Result<(), Dropped> {
        // 1. Own announcements are ignored.
        if ann.node == self.nid {
            return Err(Dropped::Own);
        }
        // 2. Inventory and refs only from nodes in the address book.
        if !matches!(ann.message, AnnouncementMessage::Node(_))
            && !self.nodes.contains_key(&ann.node)
        {
            return Err(Dropped::UnknownAuthor);
        }
        // 3. Strictly newer than what is stored for the same key.
        if let Some(existing) = self.store.get(&AnnouncementKey::of(ann)) {
            if existing.announcement.timestamp() >= ann.timestamp() {
                return Err(Dropped::Stale);
            }
        }
        Ok(())
    }

    /// The shell dropped an announcement from session `id` that [`Service::screen`] refused.
    pub fn dropped_unverified(&mut self, id: SessionId, reason: Dropped, now: u64) {
        if let Some(session) = self.sessions.get_mut(&id) {
            session.last_received = now;
        }
        self.dropped(id, reason);
    }

    fn worth_verifying(&mut self, id: SessionId, ann: &Announcement) -> bool {
        match self.screen(ann) {
            Ok(()) => true,
            Err(reason) => {
                self.dropped(id, reason);
                false
            }
        }
    }

    /// An announcement from session `id` whose signature the shell verified (outside its
    /// lock, after [`Service::screen`]). The cheap checks run again: a copy from another
    /// session may have been stored meanwhile, which makes this one stale.
    pub fn received_verified(&mut self, id: SessionId, ann: Verified, now: u64) {
        let Some(session) = self.sessions.get_mut(&id) else {
            return;
        };
        session.last_received = now;
        if self.worth_verifying(id, ann.announcement()) {
            self.accept(id, ann, now);
        }
    }

    /// The shell found the signature of an announcement from session `id` invalid.
    pub fn received_invalid_signature(&mut self, id: SessionId, now: u64) {
        let Some(session) = self.sessions.get_mut(&id) else {
            return;
        };
        session.last_received = now;
        self.disconnect_for(id, DisconnectReason::InvalidSignature);
    }

    /// Steps 5 and 6 for an announcement that passed the cheap checks and verified.
    fn accept(&mut self, id: SessionId, ann: Verified, now: u64) {
        let ann = ann.into_inner();
        let timestamp = ann.timestamp();
        // 5. Not too far in the future.
        if timestamp > now.saturating_add(self.config.timers.max_clock_skew_ms) {
            self.disconnect_for(id, DisconnectReason::InvalidTimestamp { timestamp, now });
            return;
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
                            clone_only: true,
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
                    // Our own namespace is never fetched (§5.4).
                    let news = refs.refs.iter().any(|r| r.remote != self.nid);
                    if news && self.sessions.get(&id).is_some_and(|s| s.nid == author) {
                        self.outputs.push(Output::Event(Event::Seeds {
                            session: id,
                            author,
                            rids: vec![refs.rid],
                            clone_only: false,
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
        // Refs of a repository we do not hold reach nobody (`may_receive`): no session is
        // looked at. Otherwise the repository is hashed once for every session's filter.
        let probe = match &ann.message {
            AnnouncementMessage::Refs(refs) => {
                if self.visibility.get(&refs.rid).is_none() {
                    return;
                }
                Some(crate::wire::filter::Probe::new(&refs.rid))
            }
            _ => None,
        };
        let to: Vec<SessionId> = self
            .sessions
            .values()
            .filter(|s| s.nid != ann.node && !skip.contains(&s.id))
            .filter(|s| match &probe {
                Some(probe) => s
                    .subscription
                    .as_ref()
                    .is_some_and(|sub| sub.filter.contains_probe(probe)),
                None => true,
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
}

/// Whether a session with `to` may receive `ann`. Refs announcements (ours or relayed) only
/// about repositories we hold, and about a private one only to its delegates and allow list.
/// A repository we do not hold (yet) may be private — e.g. its delegate announces it to us
/// because we are on its allow list, before we fetched it — so its refs are not passed on
/// (radicle-node does the same). Other announcements name no private repository (our
/// inventory leaves them out; other nodes' are theirs to sign).
fn may_receive(visibility: &Visibilities, ann: &Announcement, to: &NodeId) -> bool {
    let AnnouncementMessage::Refs(refs) = &ann.message else {
        return true;
    };
    visibility
        .get(&refs.rid)
        .is_some_and(|v| v.is_visible_to(to))
}

fn is_private(visibility: &Visibilities, rid: &RepoId) -> bool {
    matches!(visibility.get(rid), Some(Visibility::Private { .. }))
}

/// What the shell last told us of the visibility of the repositories we hold: the whole map
/// (shared between identities, replaced on rescans) and the repositories changed one by one since.
#[derive(Debug, Default)]
struct Visibilities {
    base: Arc<VisibilityMap>,
    /// `None`: no longer held.
    overlay: HashMap<RepoId, Option<Visibility>>,
}

impl Visibilities {
    fn get(&self, rid: &RepoId) -> Option<&Visibility> {
        match self.overlay.get(rid) {
            Some(v) => v.as_ref(),
            None => self.base.get(rid),
        }
    }
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
