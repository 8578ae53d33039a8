//! In-memory tables of the gossip service: stored announcements, routing table, address book.
//! Their changes are emitted as [`Change`](super::Change)s so the shell can persist them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::crypto::{NodeId, RepoId};
use crate::wire::{Announcement, AnnouncementMessage, MessageType};

/// De-duplication key of an announcement: (author, repository for refs, kind) (§4.9 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AnnouncementKey {
    pub node: NodeId,
    pub rid: Option<RepoId>,
    /// Message type id (2 node, 4 inventory, 6 refs).
    pub kind: u16,
}

impl AnnouncementKey {
    /// Sorts before every other key.
    pub const MIN: AnnouncementKey = AnnouncementKey {
        node: NodeId::from_bytes([0; 32]),
        rid: None,
        kind: 0,
    };

    pub fn of(ann: &Announcement) -> Self {
        let rid = match &ann.message {
            AnnouncementMessage::Refs(refs) => Some(refs.rid),
            _ => None,
        };
        Self {
            node: ann.node,
            rid,
            kind: ann.message.message_type() as u16,
        }
    }

    /// Binary form: nid (32) ‖ kind (2, BE) ‖ rid (20, refs only). Sorts like the key.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(54);
        out.extend_from_slice(self.node.as_bytes());
        out.extend_from_slice(&self.kind.to_be_bytes());
        if let Some(rid) = &self.rid {
            out.extend_from_slice(rid.as_bytes());
        }
        out
    }

    /// Parses [`to_bytes`](Self::to_bytes) output.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let node: [u8; 32] = bytes.get(..32)?.try_into().ok()?;
        let kind = u16::from_be_bytes(bytes.get(32..34)?.try_into().ok()?);
        MessageType::try_from(kind).ok()?;
        let rid = match bytes.get(34..) {
            Some([]) | None => None,
            Some(rest) => Some(RepoId::from_oid_bytes(rest.try_into().ok()?)),
        };
        Some(Self {
            node: NodeId::from_bytes(node),
            rid,
            kind,
        })
    }
}

/// A received (or our own) announcement and when it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAnnouncement {
    pub announcement: Announcement,
    /// Milliseconds since the epoch.
    pub received_at: u64,
}

impl StoredAnnouncement {
    pub fn key(&self) -> AnnouncementKey {
        AnnouncementKey::of(&self.announcement)
    }
}

/// An address-book entry: a node that announced itself with the SEED feature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub nid: NodeId,
    pub version: u8,
    pub features: u64,
    pub alias: String,
    pub agent: String,
    /// Announced addresses, as `host:port` strings.
    pub addresses: Vec<String>,
    /// Timestamp of its latest node announcement (ms).
    pub timestamp: u64,
    /// When we last received its node announcement (ms).
    pub last_seen: u64,
}

/// Stored announcements with lookups by key and by timestamp.
#[derive(Debug, Default)]
pub(super) struct GossipStore {
    by_key: HashMap<AnnouncementKey, StoredAnnouncement>,
    /// (announcement timestamp, key) — ordered for Subscribe answers (§4.9).
    by_time: BTreeSet<(u64, AnnouncementKey)>,
}

impl GossipStore {
    pub fn insert(&mut self, stored: StoredAnnouncement) {
        let key = stored.key();
        if let Some(old) = self.by_key.remove(&key) {
            self.by_time.remove(&(old.announcement.timestamp(), key));
        }
        self.by_time.insert((stored.announcement.timestamp(), key));
        self.by_key.insert(key, stored);
    }

    pub fn get(&self, key: &AnnouncementKey) -> Option<&StoredAnnouncement> {
        self.by_key.get(key)
    }

    pub fn remove(&mut self, key: &AnnouncementKey) {
        if let Some(old) = self.by_key.remove(key) {
            self.by_time.remove(&(old.announcement.timestamp(), *key));
        }
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &StoredAnnouncement> {
        self.by_key.values()
    }

    pub fn newest_timestamp(&self) -> Option<u64> {
        self.by_time.last().map(|(ts, _)| *ts)
    }

    /// Announcements from position `from` (excluded if `after`) with timestamp `< until`,
    /// oldest first, with their positions.
    pub fn range_from(
        &self,
        from: (u64, AnnouncementKey),
        after: bool,
        until: u64,
    ) -> impl Iterator<Item = ((u64, AnnouncementKey), &StoredAnnouncement)> {
        use std::ops::Bound;
        let start = if after {
            Bound::Excluded(from)
        } else {
            Bound::Included(from)
        };
        self.by_time
            .range((start, Bound::Unbounded))
            .take_while(move |(ts, _)| *ts < until)
            .filter_map(|pos| self.by_key.get(&pos.1).map(|s| (*pos, s)))
    }

    /// Keys of announcements whose timestamp is before `cutoff`.
    pub fn older_than(&self, cutoff: u64) -> Vec<AnnouncementKey> {
        self.by_time
            .iter()
            .take_while(|(ts, _)| *ts < cutoff)
            .map(|(_, key)| *key)
            .collect()
    }
}

/// The routing table: which nodes seed which repositories, with the time of the information.
///
/// One ordered map keyed by (repository, node) — a repository's seeds are a key range — plus
/// each node's repositories. No map per repository: a flood of inventories naming distinct
/// repositories costs one entry each (~100 B with the per-node index), not one B-tree per
/// repository (~500 B).
#[derive(Debug, Default)]
pub(super) struct Routing {
    by_repo: BTreeMap<(RepoId, NodeId), u64>,
    by_node: HashMap<NodeId, BTreeSet<RepoId>>,
}

const NID_MIN: NodeId = NodeId::from_bytes([0; 32]);
const NID_MAX: NodeId = NodeId::from_bytes([0xff; 32]);

impl Routing {
    /// Inserts or refreshes an entry; whether it was new or its timestamp changed.
    pub fn insert(&mut self, rid: RepoId, nid: NodeId, ts: u64) -> bool {
        match self.by_repo.insert((rid, nid), ts) {
            Some(old) => old != ts,
            None => {
                self.by_node.entry(nid).or_default().insert(rid);
                true
            }
        }
    }

    pub fn remove(&mut self, rid: &RepoId, nid: &NodeId) -> bool {
        if self.by_repo.remove(&(*rid, *nid)).is_none() {
            return false;
        }
        if let Some(repos) = self.by_node.get_mut(nid) {
            repos.remove(rid);
            if repos.is_empty() {
                self.by_node.remove(nid);
            }
        }
        true
    }

    /// The entry's timestamp, if there is one.
    pub fn get(&self, rid: &RepoId, nid: &NodeId) -> Option<u64> {
        self.by_repo.get(&(*rid, *nid)).copied()
    }

    pub fn contains(&self, rid: &RepoId, nid: &NodeId) -> bool {
        self.by_repo.contains_key(&(*rid, *nid))
    }

    pub fn repos_of(&self, nid: &NodeId) -> Vec<RepoId> {
        self.by_node
            .get(nid)
            .map(|r| r.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Nodes with at least one entry.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.by_node.keys().copied()
    }

    pub fn seeds(&self, rid: &RepoId) -> Vec<(NodeId, u64)> {
        self.by_repo
            .range((*rid, NID_MIN)..=(*rid, NID_MAX))
            .map(|((_, nid), ts)| (*nid, *ts))
            .collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = (RepoId, NodeId, u64)> + '_ {
        self.by_repo
            .iter()
            .map(|((rid, nid), ts)| (*rid, *nid, *ts))
    }

    /// Entries strictly after `after` in (repository, node) order: a page of the table
    /// costs the page, not the table.
    pub fn iter_after(
        &self,
        after: Option<(RepoId, NodeId)>,
    ) -> impl Iterator<Item = (RepoId, NodeId, u64)> + '_ {
        use std::ops::Bound;
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.by_repo
            .range((lower, Bound::Unbounded))
            .map(|((rid, nid), ts)| (*rid, *nid, *ts))
    }

    /// One repository's seeds after node `after`, in node order.
    pub fn seeds_after(
        &self,
        rid: RepoId,
        after: Option<NodeId>,
    ) -> impl Iterator<Item = (RepoId, NodeId, u64)> + '_ {
        use std::ops::Bound;
        let lower = after.map_or(Bound::Included((rid, NID_MIN)), |n| {
            Bound::Excluded((rid, n))
        });
        self.by_repo
            .range((lower, Bound::Included((rid, NID_MAX))))
            .map(|((rid, nid), ts)| (*rid, *nid, *ts))
    }

    /// One node's entries from repository bound `lower` on, in repository order.
    pub fn of_node_from(
        &self,
        nid: NodeId,
        lower: std::ops::Bound<RepoId>,
    ) -> impl Iterator<Item = (RepoId, NodeId, u64)> + '_ {
        use std::ops::Bound;
        self.by_node
            .get(&nid)
            .into_iter()
            .flat_map(move |repos| repos.range((lower, Bound::Unbounded)))
            .filter_map(move |rid| self.by_repo.get(&(*rid, nid)).map(|ts| (*rid, nid, *ts)))
    }

    /// How many entries a repository has.
    pub fn seed_count(&self, rid: &RepoId) -> usize {
        self.by_repo
            .range((*rid, NID_MIN)..=(*rid, NID_MAX))
            .count()
    }

    /// How many entries a node has: O(1).
    pub fn node_count(&self, nid: &NodeId) -> usize {
        self.by_node.get(nid).map_or(0, BTreeSet::len)
    }

    pub fn older_than(&self, cutoff: u64) -> Vec<(RepoId, NodeId)> {
        self.iter()
            .filter(|(_, _, ts)| *ts < cutoff)
            .map(|(rid, nid, _)| (rid, nid))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.by_repo.len()
    }
}
