//! The gossip-state write queue: coalesced per key, bounded, with back-pressure on readers.
//!
//! Changes are coalesced by what they write (an announcement key, a node, a route, an own
//! timestamp): a later change to the same key replaces the pending one, exactly what RocksDB
//! would hold after both. Producers never wait (they hold the core lock), so the bound is kept
//! one step earlier: a session reader calls [`PersistQueue::ready`] before it hands the core a
//! gossip message, and waits (stops reading its socket) while more than [`HIGH_WATER`] keys are
//! pending. Removals of evicted state are keys too (not bounded by the capped state), so a peer
//! cycling through fresh node ids meets this bound instead of growing the queue faster than the
//! disk drains it. Route changes (the bulk of a flood: every inventory entry is one) are kept as
//! ~70-byte map entries, not as whole [`Change`]s, and the writer commits in chunks of
//! [`CHUNK`] so a large backlog is never materialised twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use seedd_proto::crypto::{NodeId, RepoId};
use seedd_proto::gossip::{AnnouncementKey, Change};
use tokio::sync::{mpsc, oneshot, Notify};

use seedd_core::index::Index;

/// Pending keys above which session readers wait for the writer.
pub(crate) const HIGH_WATER: usize = 100_000;
/// Changes per RocksDB write batch.
const CHUNK: usize = 20_000;

/// What a (non-route) change writes: changes with the same key overwrite each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Announcement(AnnouncementKey),
    Node(NodeId),
    Own(u16),
}

/// Where a change goes in [`Pending`].
enum Slot {
    Route(RepoId, NodeId, Option<u64>),
    Other(Key),
}

fn slot(change: &Change) -> Slot {
    match change {
        Change::Announcement(stored) => Slot::Other(Key::Announcement(stored.key())),
        Change::AnnouncementRemoved(key) => Slot::Other(Key::Announcement(*key)),
        Change::Node(record) => Slot::Other(Key::Node(record.nid)),
        Change::NodeRemoved(nid) => Slot::Other(Key::Node(*nid)),
        Change::Routing {
            rid,
            nid,
            timestamp,
        } => Slot::Route(*rid, *nid, Some(*timestamp)),
        Change::RoutingRemoved { rid, nid } => Slot::Route(*rid, *nid, None),
        Change::OwnTimestamp { kind, .. } => Slot::Other(Key::Own(*kind as u16)),
    }
}

#[derive(Default)]
struct Pending {
    /// (rid, nid) → the timestamp to write, or `None` to delete.
    routes: HashMap<(RepoId, NodeId), Option<u64>>,
    other: HashMap<Key, Change>,
    flushes: Vec<oneshot::Sender<()>>,
}

impl Pending {
    fn len(&self) -> usize {
        self.routes.len() + self.other.len()
    }
}

struct Shared {
    pending: Mutex<Pending>,
    /// Signalled by the writer after each write.
    drained: Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        match self.pending.lock() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// The producer side (cheap to clone). The writer task ends once every handle is dropped.
#[derive(Clone)]
pub(crate) struct PersistQueue {
    shared: Arc<Shared>,
    /// Capacity 1: a pending wake-up is enough, the writer takes everything queued.
    wake: mpsc::Sender<()>,
}

impl PersistQueue {
    /// A queue and the task that writes it to `index`.
    pub(crate) fn new(index: Index) -> (Self, impl std::future::Future<Output = ()>) {
        let (wake, rx) = mpsc::channel(1);
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            drained: Notify::new(),
        });
        let queue = Self {
            shared: shared.clone(),
            wake,
        };
        (queue, writer(index, shared, rx))
    }

    fn with(&self, f: impl FnOnce(&mut Pending)) {
        f(&mut self.shared.lock());
        let _ = self.wake.try_send(());
    }

    /// Queues changes (replacing pending ones with the same key).
    pub(crate) fn push(&self, changes: Vec<Change>) {
        self.with(|p| {
            for change in changes {
                match slot(&change) {
                    Slot::Route(rid, nid, ts) => {
                        p.routes.insert((rid, nid), ts);
                    }
                    Slot::Other(key) => {
                        p.other.insert(key, change);
                    }
                }
            }
        });
    }

    /// `done` is answered once everything queued before is written.
    pub(crate) fn flush(&self, done: oneshot::Sender<()>) {
        self.with(|p| p.flushes.push(done));
    }

    /// Changes waiting to be written (distinct keys).
    pub(crate) fn len(&self) -> usize {
        self.shared.lock().len()
    }

    /// Returns once at most [`HIGH_WATER`] keys are pending (at once if so). Called by session
    /// readers, never under the core lock.
    pub(crate) async fn ready(&self) {
        self.ready_below(HIGH_WATER).await
    }

    async fn ready_below(&self, limit: usize) {
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            // Registered before the check, so a write finishing in between is not missed.
            drained.as_mut().enable();
            if self.len() <= limit {
                return;
            }
            drained.await;
        }
    }
}

/// Writes everything pending in chunked batches per wake-up, off the async threads.
async fn writer(index: Index, shared: Arc<Shared>, mut wake: mpsc::Receiver<()>) {
    while wake.recv().await.is_some() {
        let taken = std::mem::take(&mut *shared.lock());
        if taken.len() > 0 {
            let index = index.clone();
            let result =
                tokio::task::spawn_blocking(move || write(&index, taken.routes, taken.other)).await;
            match result {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(error = %seedd_core::logging::chain(&e), "persisting gossip state failed")
                }
                Err(e) => {
                    tracing::error!(error = %seedd_core::logging::chain(&e), "persisting gossip state panicked")
                }
            }
        }
        shared.drained.notify_waiters();
        for done in taken.flushes {
            let _ = done.send(());
        }
    }
}

fn write(
    index: &Index,
    routes: HashMap<(RepoId, NodeId), Option<u64>>,
    other: HashMap<Key, Change>,
) -> Result<(), seedd_core::index::IndexError> {
    let routes = routes.into_iter().map(|((rid, nid), ts)| match ts {
        Some(timestamp) => Change::Routing {
            rid,
            nid,
            timestamp,
        },
        None => Change::RoutingRemoved { rid, nid },
    });
    let mut all = other.into_values().chain(routes);
    let mut chunk = Vec::with_capacity(CHUNK);
    loop {
        chunk.clear();
        chunk.extend(all.by_ref().take(CHUNK));
        if chunk.is_empty() {
            return Ok(());
        }
        index.apply_gossip(&chunk)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seedd_proto::crypto::Keypair;
    use seedd_proto::gossip::{NodeRecord, StoredAnnouncement};
    use seedd_proto::wire::{AnnouncementMessage, InventoryAnnouncement};

    fn record(nid: NodeId, last_seen: u64) -> NodeRecord {
        NodeRecord {
            nid,
            version: 1,
            features: 1,
            alias: "n".into(),
            agent: "/radicle/".into(),
            addresses: vec![],
            timestamp: 1,
            last_seen,
        }
    }

    #[tokio::test]
    async fn pending_changes_coalesce_by_key_and_flushes_see_the_last_write() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path()).unwrap();
        let (queue, writer) = PersistQueue::new(index.clone());
        // Many changes to few keys while the writer is not running: memory stays per key.
        let a = Keypair::mock(1).nid();
        let b = Keypair::mock(2).nid();
        for i in 0..10_000 {
            queue.push(vec![Change::Node(record(a, i)), Change::Node(record(b, i))]);
        }
        assert_eq!(queue.len(), 2);
        let ann = AnnouncementMessage::Inventory(InventoryAnnouncement {
            inventory: vec![],
            timestamp: 5,
        })
        .sign(&Keypair::mock(1))
        .unwrap();
        let stored = StoredAnnouncement {
            announcement: ann,
            received_at: 6,
        };
        queue.push(vec![
            Change::Announcement(stored.clone()),
            Change::NodeRemoved(b),
        ]);
        queue.push(vec![Change::AnnouncementRemoved(stored.key())]);
        assert_eq!(queue.len(), 3);
        let task = tokio::spawn(writer);
        let (tx, rx) = oneshot::channel();
        queue.flush(tx);
        rx.await.unwrap();
        let r = index.load_gossip().unwrap();
        assert_eq!(r.nodes, vec![record(a, 9_999)]);
        assert!(r.announcements.is_empty());
        assert_eq!(queue.len(), 0);
        // Flushes after later changes see them too; the writer ends with the last handle.
        queue.push(vec![Change::NodeRemoved(a)]);
        let (tx, rx) = oneshot::channel();
        queue.flush(tx);
        rx.await.unwrap();
        assert!(index.load_gossip().unwrap().nodes.is_empty());
        drop(queue);
        tokio::time::timeout(std::time::Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }
    #[tokio::test]
    async fn readers_wait_while_the_backlog_is_above_the_high_water_mark() {
        use futures_util::FutureExt;
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path()).unwrap();
        let (queue, writer) = PersistQueue::new(index.clone());
        let nid = Keypair::mock(7).nid();
        // Distinct route keys, added and removed: removals are keys too.
        let rids: Vec<RepoId> = (0..50u8).map(|i| RepoId::from_oid_bytes([i; 20])).collect();
        queue.push(
            rids.iter()
                .map(|rid| Change::Routing {
                    rid: *rid,
                    nid,
                    timestamp: 1,
                })
                .collect(),
        );
        queue.push(
            rids.iter()
                .take(10)
                .map(|rid| Change::RoutingRemoved { rid: *rid, nid })
                .collect(),
        );
        assert_eq!(queue.len(), 50);
        // Nothing drains the queue yet: a reader above the mark waits, one below does not.
        assert!(queue.ready_below(49).now_or_never().is_none());
        assert!(queue.ready_below(50).now_or_never().is_some());
        let waiting = tokio::spawn({
            let queue = queue.clone();
            async move { queue.ready_below(10).await }
        });
        let task = tokio::spawn(writer);
        tokio::time::timeout(std::time::Duration::from_secs(30), waiting)
            .await
            .unwrap()
            .unwrap();
        let (tx, rx) = oneshot::channel();
        queue.flush(tx);
        rx.await.unwrap();
        let routes = index.load_gossip().unwrap().routing;
        assert_eq!(
            routes.len(),
            40,
            "the 10 removals won over the earlier adds"
        );
        drop(queue);
        tokio::time::timeout(std::time::Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }

    #[test]
    fn a_backlog_larger_than_a_chunk_is_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path()).unwrap();
        let nid = Keypair::mock(8).nid();
        let routes: HashMap<(RepoId, NodeId), Option<u64>> = (0..(CHUNK as u32 * 2 + 7))
            .map(|i| {
                let mut b = [0u8; 20];
                b[..4].copy_from_slice(&i.to_be_bytes());
                ((RepoId::from_oid_bytes(b), nid), Some(u64::from(i)))
            })
            .collect();
        write(&index, routes, HashMap::new()).unwrap();
        assert_eq!(index.load_gossip().unwrap().routing.len(), CHUNK * 2 + 7);
    }
}
