//! Persistence of the gossip service's state (routing table, address book, stored
//! announcements, our own announcement timestamps) and of IP bans, in RocksDB.
//!
//! | CF | key | value |
//! |---|---|---|
//! | `routing` | rid (20) ‖ nid (32) | u64 BE timestamp (ms) |
//! | `nodes` | nid (32) | [`NodeRecord`] JSON |
//! | `announcements` | [`AnnouncementKey::to_bytes`] | u64 BE received-at (ms) ‖ encoded message |
//! | `meta` | `own_ts/<type id>` | u64 BE timestamp of our latest announcement of that kind |
//! | `bans` | IP address as text | [`BanRecord`] JSON |

use std::collections::HashMap;
use std::net::IpAddr;

use rocksdb::{IteratorMode, ReadOptions};
use serde::{Deserialize, Serialize};

use super::{Index, IndexError, CF_META};
use seedd_proto::crypto::{NodeId, RepoId};
use seedd_proto::gossip::{AnnouncementKey, Change, NodeRecord, Restored, StoredAnnouncement};
use seedd_proto::wire::{AnnouncementMessage, Message, MessageType};

pub(crate) const CF_ROUTING: &str = "routing";
pub(crate) const CF_NODES: &str = "nodes";
pub(crate) const CF_ANNOUNCEMENTS: &str = "announcements";
pub(crate) const CF_BANS: &str = "bans";

const OWN_TS_PREFIX: &str = "own_ts/";

type KeyValue = (Box<[u8]>, Box<[u8]>);

/// Misbehaviour bookkeeping for one IP address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BanRecord {
    pub ip: IpAddr,
    /// Accumulated penalty points.
    pub penalty: u32,
    /// Banned until this time (Unix ms), if banned.
    pub banned_until: Option<u64>,
    /// The latest misbehaviour.
    pub reason: String,
    /// When it was last updated (Unix ms).
    pub updated_at: u64,
}

fn corrupt(cf: &'static str, reason: impl ToString) -> IndexError {
    IndexError::Corrupt {
        cf,
        key: None,
        reason: reason.to_string(),
    }
}

fn u64_be(bytes: &[u8], cf: &'static str) -> Result<u64, IndexError> {
    let arr: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| corrupt(cf, "value shorter than 8 bytes"))?;
    Ok(u64::from_be_bytes(arr))
}

impl Index {
    /// Full scan of a column family (total order, ignoring any prefix extractor).
    fn scan(&self, cf: &'static str) -> Result<Vec<KeyValue>, IndexError> {
        let mut opts = ReadOptions::default();
        opts.set_total_order_seek(true);
        self.db
            .iterator_cf_opt(self.cf(cf)?, opts, IteratorMode::Start)
            .map(|r| r.map_err(IndexError::from))
            .collect()
    }

    /// How many nodes the routing table says seed `rid` (the web API's `seeding`).
    pub fn seed_count(&self, rid: &RepoId) -> Result<usize, IndexError> {
        let mut n = 0;
        for item in self
            .db
            .prefix_iterator_cf(self.cf(CF_ROUTING)?, rid.as_bytes())
        {
            let (k, _) = item?;
            if !k.starts_with(rid.as_bytes()) {
                break;
            }
            n += 1;
        }
        Ok(n)
    }

    /// How many routing entries each repository has: one pass over the routing table (the
    /// census's seed counts at open).
    pub(super) fn seed_counts(&self) -> Result<super::census::Map<RepoId, u32>, IndexError> {
        let mut opts = ReadOptions::default();
        opts.set_total_order_seek(true);
        let mut out = super::census::Map::<RepoId, u32>::default();
        for item in self
            .db
            .iterator_cf_opt(self.cf(CF_ROUTING)?, opts, IteratorMode::Start)
        {
            let (k, _) = item?;
            let Some(Ok(rid)) = k.get(..20).map(<[u8; 20]>::try_from) else {
                continue;
            };
            *out.entry(RepoId::from_oid_bytes(rid)).or_default() += 1;
        }
        Ok(out)
    }

    /// Writes a batch of gossip changes atomically. Routing entries that appear or go move
    /// their repository's seed count in the census (checked against the table under the
    /// census lock, so two identities persisting the same route count it once).
    pub fn apply_gossip(&self, changes: &[Change]) -> Result<(), IndexError> {
        let routes = changes
            .iter()
            .any(|c| matches!(c, Change::Routing { .. } | Change::RoutingRemoved { .. }));
        let mut census = routes.then(|| self.census());
        let routing = self.cf(CF_ROUTING)?;
        // (rid, added) per entry whose existence changes, in order; a key's last change wins.
        let mut moved: HashMap<Vec<u8>, (RepoId, bool, bool)> = HashMap::new();
        // Records that the routing entry `key` of `rid` will exist (or not) after the batch.
        let mut route = |key: &Vec<u8>, rid: RepoId, exists: bool| -> Result<(), IndexError> {
            if !moved.contains_key(key) {
                let existed = self.db.get_pinned_cf(routing, key)?.is_some();
                moved.insert(key.clone(), (rid, existed, existed));
            }
            if let Some(m) = moved.get_mut(key) {
                m.2 = exists;
            }
            Ok(())
        };
        let mut batch = self.batch();
        for change in changes {
            match change {
                Change::Announcement(stored) => {
                    let mut value = stored.received_at.to_be_bytes().to_vec();
                    let encoded = Message::Announcement(stored.announcement.clone())
                        .encode()
                        .map_err(|e| corrupt(CF_ANNOUNCEMENTS, e))?;
                    value.extend_from_slice(&encoded);
                    batch.put(CF_ANNOUNCEMENTS, stored.key().to_bytes(), value)?;
                }
                Change::AnnouncementRemoved(key) => {
                    batch.delete(CF_ANNOUNCEMENTS, key.to_bytes())?;
                }
                Change::Node(record) => {
                    let value = serde_json::to_vec(record).map_err(|e| corrupt(CF_NODES, e))?;
                    batch.put(CF_NODES, record.nid.as_bytes(), value)?;
                }
                Change::NodeRemoved(nid) => {
                    batch.delete(CF_NODES, nid.as_bytes())?;
                }
                Change::Routing {
                    rid,
                    nid,
                    timestamp,
                } => {
                    let key = routing_key(rid, nid);
                    route(&key, *rid, true)?;
                    batch.put(CF_ROUTING, key, timestamp.to_be_bytes())?;
                }
                Change::RoutingRemoved { rid, nid } => {
                    let key = routing_key(rid, nid);
                    route(&key, *rid, false)?;
                    batch.delete(CF_ROUTING, key)?;
                }
                Change::OwnTimestamp { kind, timestamp } => {
                    // Synced: peers drop our announcements unless strictly newer.
                    batch.put(
                        CF_META,
                        format!("{OWN_TS_PREFIX}{}", *kind as u16),
                        timestamp.to_be_bytes(),
                    )?;
                }
            }
        }
        self.commit(batch)?;
        if let Some(census) = census.as_mut() {
            for (rid, before, after) in moved.into_values() {
                if before != after {
                    census.seeds_changed(&rid, after);
                }
            }
        }
        Ok(())
    }

    /// Everything the gossip service needs at startup. Undecodable records are skipped with a
    /// warning (they are caches of network data, not the only copy of anything).
    pub fn load_gossip(&self) -> Result<Restored, IndexError> {
        let mut restored = Restored::default();
        for (key, value) in self.scan(CF_ROUTING)? {
            let (Some(rid), Some(nid)) = (key.get(..20), key.get(20..52)) else {
                tracing::warn!(cf = CF_ROUTING, "skipping malformed routing key");
                continue;
            };
            let (Ok(rid), Ok(nid)) = (<[u8; 20]>::try_from(rid), <[u8; 32]>::try_from(nid)) else {
                continue;
            };
            restored.routing.push((
                RepoId::from_oid_bytes(rid),
                NodeId::from_bytes(nid),
                u64_be(&value, CF_ROUTING)?,
            ));
        }
        for (_, value) in self.scan(CF_NODES)? {
            match serde_json::from_slice::<NodeRecord>(&value) {
                Ok(n) => restored.nodes.push(n),
                Err(e) => {
                    tracing::warn!(cf = CF_NODES, error = %crate::logging::chain(&e), "skipping corrupt node record")
                }
            }
        }
        for (key, value) in self.scan(CF_ANNOUNCEMENTS)? {
            let received_at = u64_be(&value, CF_ANNOUNCEMENTS)?;
            match Message::decode(value.get(8..).unwrap_or_default()) {
                Ok(Message::Announcement(announcement))
                    if AnnouncementKey::from_bytes(&key)
                        == Some(AnnouncementKey::of(&announcement)) =>
                {
                    restored.announcements.push(StoredAnnouncement {
                        announcement,
                        received_at,
                    })
                }
                _ => tracing::warn!(
                    cf = CF_ANNOUNCEMENTS,
                    "skipping corrupt stored announcement"
                ),
            }
        }
        let meta = self.cf(CF_META)?;
        for kind in [
            MessageType::NodeAnnouncement,
            MessageType::InventoryAnnouncement,
            MessageType::RefsAnnouncement,
        ] {
            if let Some(v) = self
                .db
                .get_cf(meta, format!("{OWN_TS_PREFIX}{}", kind as u16))?
            {
                restored.own_timestamps.push((kind, u64_be(&v, CF_META)?));
            }
        }
        Ok(restored)
    }

    /// The alias `nid` gave in its latest node announcement we hold (from any node, seed or
    /// not: a delegate's node announces itself when it connects to fetch or be fetched from).
    /// One point lookup; `None` when we hold none (it ages out with the announcement).
    pub fn node_alias(&self, nid: &NodeId) -> Result<Option<String>, IndexError> {
        let key = AnnouncementKey {
            node: *nid,
            rid: None,
            kind: MessageType::NodeAnnouncement as u16,
        };
        let cf = self.cf(CF_ANNOUNCEMENTS)?;
        let Some(value) = self.db.get_cf(cf, key.to_bytes())? else {
            return Ok(None);
        };
        match Message::decode(value.get(8..).unwrap_or_default()) {
            Ok(Message::Announcement(ann)) if ann.node == *nid => match ann.message {
                AnnouncementMessage::Node(node) => {
                    let alias = node.alias.as_str().to_owned();
                    Ok((!alias.is_empty()).then_some(alias))
                }
                _ => Ok(None),
            },
            _ => {
                tracing::warn!(cf = CF_ANNOUNCEMENTS, %nid, "skipping a corrupt node announcement");
                Ok(None)
            }
        }
    }

    /// Stores (replaces) an IP's misbehaviour record.
    pub fn put_ban(&self, record: &BanRecord) -> Result<(), IndexError> {
        let value = serde_json::to_vec(record).map_err(|e| corrupt(CF_BANS, e))?;
        self.put(CF_BANS, record.ip.to_string(), value)
    }

    /// Forgets an IP's record (ban lifted).
    pub fn remove_ban(&self, ip: &IpAddr) -> Result<(), IndexError> {
        self.delete(CF_BANS, ip.to_string())
    }

    /// All misbehaviour records.
    pub fn bans(&self) -> Result<Vec<BanRecord>, IndexError> {
        let mut out = Vec::new();
        for (_, value) in self.scan(CF_BANS)? {
            match serde_json::from_slice(&value) {
                Ok(r) => out.push(r),
                Err(e) => {
                    tracing::warn!(cf = CF_BANS, error = %crate::logging::chain(&e), "skipping corrupt ban record")
                }
            }
        }
        Ok(out)
    }
}

fn routing_key(rid: &RepoId, nid: &NodeId) -> Vec<u8> {
    let mut key = rid.as_bytes().to_vec();
    key.extend_from_slice(nid.as_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use seedd_proto::crypto::Keypair;
    use seedd_proto::wire::{AnnouncementMessage, InventoryAnnouncement};

    #[test]
    fn gossip_state_round_trips_through_rocksdb() {
        let dir = tempfile::tempdir().unwrap();
        let key = Keypair::mock(5);
        let rid = RepoId::from_oid_bytes([3; 20]);
        let ann = AnnouncementMessage::Inventory(InventoryAnnouncement {
            inventory: vec![rid],
            timestamp: 77,
        })
        .sign(&key)
        .unwrap();
        let stored = StoredAnnouncement {
            announcement: ann,
            received_at: 99,
        };
        let node = NodeRecord {
            nid: key.nid(),
            version: 1,
            features: 1,
            alias: "n".into(),
            agent: "/radicle/".into(),
            addresses: vec!["127.0.0.1:8776".into()],
            timestamp: 1,
            last_seen: 2,
        };
        {
            let index = Index::open(dir.path()).unwrap();
            let other = RepoId::from_oid_bytes([4; 20]);
            index
                .apply_gossip(&[
                    Change::Announcement(stored.clone()),
                    Change::Node(node.clone()),
                    Change::Routing {
                        rid,
                        nid: key.nid(),
                        timestamp: 77,
                    },
                    Change::Routing {
                        rid: other,
                        nid: key.nid(),
                        timestamp: 70,
                    },
                    Change::RoutingRemoved {
                        rid: other,
                        nid: key.nid(),
                    },
                    Change::OwnTimestamp {
                        kind: MessageType::NodeAnnouncement,
                        timestamp: 1234,
                    },
                ])
                .unwrap();
            index
                .put_ban(&BanRecord {
                    ip: "127.0.0.2".parse().unwrap(),
                    penalty: 64,
                    banned_until: Some(5),
                    reason: "x".into(),
                    updated_at: 1,
                })
                .unwrap();
        }
        let index = Index::open(dir.path()).unwrap();
        let r = index.load_gossip().unwrap();
        assert_eq!(r.announcements, vec![stored.clone()]);
        assert_eq!(r.nodes, vec![node]);
        assert_eq!(r.routing, vec![(rid, key.nid(), 77)]);
        assert_eq!(
            r.own_timestamps,
            vec![(MessageType::NodeAnnouncement, 1234)]
        );
        assert_eq!(index.bans().unwrap().len(), 1);
        index.remove_ban(&"127.0.0.2".parse().unwrap()).unwrap();
        assert!(index.bans().unwrap().is_empty());
        index
            .apply_gossip(&[
                Change::AnnouncementRemoved(stored.key()),
                Change::NodeRemoved(key.nid()),
            ])
            .unwrap();
        let r = index.load_gossip().unwrap();
        assert!(r.announcements.is_empty());
        assert!(r.nodes.is_empty());
    }
}
