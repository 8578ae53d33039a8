//! The gossip-state write queue: bounded by the state itself, never by the message rate.
//!
//! Changes are coalesced by what they write (an announcement key, a node, a route, an own
//! timestamp): a later change to the same key replaces the pending one, exactly what RocksDB
//! would hold after both. So the pending set never exceeds the gossip state (which
//! [`Caps`](seedd_proto::gossip::Caps) bounds), however fast changes arrive or slowly the disk
//! writes; producers never wait (they hold the core lock) and no change or flush is lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use seedd_proto::crypto::{NodeId, RepoId};
use seedd_proto::gossip::{AnnouncementKey, Change};
use tokio::sync::{mpsc, oneshot};

use crate::index::Index;

/// What a change writes: changes with the same key overwrite each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Announcement(AnnouncementKey),
    Node(NodeId),
    Route(RepoId, NodeId),
    Own(u16),
}

fn key(change: &Change) -> Key {
    match change {
        Change::Announcement(stored) => Key::Announcement(stored.key()),
        Change::AnnouncementRemoved(key) => Key::Announcement(*key),
        Change::Node(record) => Key::Node(record.nid),
        Change::NodeRemoved(nid) => Key::Node(*nid),
        Change::Routing { rid, nid, .. } | Change::RoutingRemoved { rid, nid } => {
            Key::Route(*rid, *nid)
        }
        Change::OwnTimestamp { kind, .. } => Key::Own(*kind as u16),
    }
}

#[derive(Default)]
struct Pending {
    changes: HashMap<Key, Change>,
    flushes: Vec<oneshot::Sender<()>>,
}

/// The producer side (cheap to clone). The writer task ends once every handle is dropped.
#[derive(Clone)]
pub(crate) struct PersistQueue {
    pending: Arc<Mutex<Pending>>,
    /// Capacity 1: a pending wake-up is enough, the writer takes everything queued.
    wake: mpsc::Sender<()>,
}

impl PersistQueue {
    /// A queue and the task that writes it to `index`.
    pub(crate) fn new(index: Index) -> (Self, impl std::future::Future<Output = ()>) {
        let (wake, rx) = mpsc::channel(1);
        let pending = Arc::new(Mutex::new(Pending::default()));
        let queue = Self {
            pending: pending.clone(),
            wake,
        };
        (queue, writer(index, pending, rx))
    }

    fn with(&self, f: impl FnOnce(&mut Pending)) {
        match self.pending.lock() {
            Ok(mut p) => f(&mut p),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
        let _ = self.wake.try_send(());
    }

    /// Queues changes (replacing pending ones with the same key).
    pub(crate) fn push(&self, changes: Vec<Change>) {
        self.with(|p| {
            for change in changes {
                p.changes.insert(key(&change), change);
            }
        });
    }

    /// `done` is answered once everything queued before is written.
    pub(crate) fn flush(&self, done: oneshot::Sender<()>) {
        self.with(|p| p.flushes.push(done));
    }

    /// Changes waiting to be written (distinct keys).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.pending.lock().map(|p| p.changes.len()).unwrap_or(0)
    }
}

/// Writes everything pending in one batch per wake-up, off the async threads.
async fn writer(index: Index, pending: Arc<Mutex<Pending>>, mut wake: mpsc::Receiver<()>) {
    while wake.recv().await.is_some() {
        let taken = match pending.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        if !taken.changes.is_empty() {
            let batch: Vec<Change> = taken.changes.into_values().collect();
            let index = index.clone();
            let result = tokio::task::spawn_blocking(move || index.apply_gossip(&batch)).await;
            match result {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "persisting gossip state failed"),
                Err(e) => tracing::error!(error = %e, "persisting gossip state panicked"),
            }
        }
        for done in taken.flushes {
            let _ = done.send(());
        }
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
}
