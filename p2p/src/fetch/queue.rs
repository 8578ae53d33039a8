//! The fetch queue's bookkeeping, without I/O: one fetch per repository at a time (later
//! requests coalesce into a follow-up), callers waiting for a result (admin fetches), and
//! per-peer fetch slots so one peer cannot hold every global slot.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use seedd_proto::crypto::{NodeId, RepoId};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use super::{FetchError, Outcome};

/// A fetch's result as every waiter of it receives it.
pub(super) type Shared = Result<Outcome, Arc<FetchError>>;
/// Someone waiting for the result of a fetch.
pub(super) type Waiter = oneshot::Sender<Shared>;

/// One repository's queued or running fetch and what follows it.
struct Entry {
    /// The peer of the queued or running fetch.
    peer: NodeId,
    /// Whether it holds its slots (transferring): a caller joining it now could miss refs.
    started: bool,
    waiters: Vec<Waiter>,
    /// Fetches to run after it, in order, each with its waiters. At most one has no waiter
    /// (gossip hints coalesce into it: the latest hinting peer wins).
    next: VecDeque<(NodeId, Vec<Waiter>)>,
}

/// What [`Queue::push`] did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Admit {
    /// A new entry: the caller spawns the task that runs it.
    Spawn,
    /// Coalesced with the repository's queued or running fetch (or its follow-up).
    Joined,
    /// The queue (or the peer's share of it) is full: dropped.
    Full,
}

/// Queued and running fetches, one entry per repository.
#[derive(Default)]
pub(super) struct Queue {
    repos: HashMap<RepoId, Entry>,
}

impl Queue {
    /// Adds a fetch of `rid` from `from`. Without a waiter (gossip hints, the sync task) a new
    /// entry is refused beyond `max` repositories or `max_per_peer` of one peer; with one (an
    /// operator's request) it is always admitted. A waiter is never attached to a fetch that
    /// already started: it gets a follow-up that starts after it.
    pub(super) fn push(
        &mut self,
        rid: RepoId,
        from: NodeId,
        waiter: Option<Waiter>,
        max: usize,
        max_per_peer: usize,
    ) -> Admit {
        let Some(entry) = self.repos.get_mut(&rid) else {
            if waiter.is_none() {
                let from_peer = self.repos.values().filter(|e| e.peer == from).count();
                if self.repos.len() >= max || from_peer >= max_per_peer {
                    return Admit::Full;
                }
            }
            self.repos.insert(
                rid,
                Entry {
                    peer: from,
                    started: false,
                    waiters: waiter.into_iter().collect(),
                    next: VecDeque::new(),
                },
            );
            return Admit::Spawn;
        };
        if !entry.started && entry.peer == from {
            entry.waiters.extend(waiter);
            return Admit::Joined;
        }
        if let Some((_, waiters)) = entry.next.iter_mut().find(|(p, _)| *p == from) {
            waiters.extend(waiter);
            return Admit::Joined;
        }
        if let Some((peer, waiters)) = entry.next.iter_mut().find(|(_, w)| w.is_empty()) {
            *peer = from;
            waiters.extend(waiter);
            return Admit::Joined;
        }
        entry.next.push_back((from, waiter.into_iter().collect()));
        Admit::Joined
    }

    /// The fetch of `rid` got its slots and starts transferring.
    pub(super) fn start(&mut self, rid: &RepoId) {
        if let Some(e) = self.repos.get_mut(rid) {
            e.started = true;
        }
    }

    /// The fetch of `rid` ended: its waiters get `result`. Returns the peer of the follow-up
    /// to run next, or `None` when the repository left the queue.
    pub(super) fn finish(&mut self, rid: &RepoId, result: &Shared) -> Option<NodeId> {
        let entry = self.repos.get_mut(rid)?;
        for w in entry.waiters.drain(..) {
            // A waiter that went away (client disconnected) does not matter.
            let _ = w.send(result.clone());
        }
        match entry.next.pop_front() {
            Some((peer, waiters)) => {
                entry.peer = peer;
                entry.started = false;
                entry.waiters = waiters;
                Some(peer)
            }
            None => {
                self.repos.remove(rid);
                None
            }
        }
    }

    #[cfg(test)]
    pub(super) fn contains(&self, rid: &RepoId) -> bool {
        self.repos.contains_key(rid)
    }

    pub(super) fn len(&self) -> usize {
        self.repos.len()
    }

    /// Every repository in the queue with the peer of its current fetch.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&RepoId, &NodeId)> {
        self.repos.iter().map(|(rid, e)| (rid, &e.peer))
    }
}

/// Fetch slots: `global` fetches at once, at most `per_peer` of them from one peer. A fetch
/// first waits for its peer's slot, holding nothing, then for a global one; so a slow peer
/// cannot hold every global slot.
pub(super) struct Slots {
    global: Semaphore,
    per_peer: usize,
    peers: Mutex<HashMap<NodeId, Arc<Semaphore>>>,
}

/// A fetch's slots; released (and the peer forgotten when unused) on drop.
pub(super) struct Slot<'a> {
    slots: &'a Slots,
    peer: Option<OwnedSemaphorePermit>,
    global: Option<tokio::sync::SemaphorePermit<'a>>,
}

impl Slots {
    pub(super) fn new(global: usize, per_peer: usize) -> Self {
        Self {
            global: Semaphore::new(global.max(1)),
            per_peer: per_peer.max(1),
            peers: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, Arc<Semaphore>>> {
        self.peers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for one of `peer`'s slots, then for a global one (first come, first served).
    pub(super) async fn acquire(&self, peer: NodeId) -> Slot<'_> {
        let sem = self
            .lock()
            .entry(peer)
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_peer)))
            .clone();
        // The semaphores are never closed; on the impossible error the fetch runs unlimited.
        let mut slot = Slot {
            slots: self,
            peer: sem.acquire_owned().await.ok(),
            global: None,
        };
        slot.global = self.global.acquire().await.ok();
        slot
    }

    /// Slots of `peer` taken (or being taken) now.
    #[cfg(test)]
    pub(super) fn peer_in_use(&self, peer: &NodeId) -> usize {
        self.lock()
            .get(peer)
            .map_or(0, |s| self.per_peer.saturating_sub(s.available_permits()))
    }

    /// Peers with a slot taken or awaited.
    #[cfg(test)]
    pub(super) fn peers(&self) -> usize {
        self.lock().len()
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        drop(self.global.take());
        drop(self.peer.take());
        // Forget peers nobody holds or waits for (only the map refers to them).
        self.slots.lock().retain(|_, s| Arc::strong_count(s) > 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn nid(b: u8) -> NodeId {
        NodeId::from([b; 32])
    }

    fn rid(b: u8) -> RepoId {
        RepoId::from([b; 20])
    }

    fn ok(refs: usize) -> Shared {
        Ok(Outcome {
            refs_written: refs,
            ..Outcome::default()
        })
    }

    #[test]
    fn hints_coalesce_into_one_fetch_and_one_follow_up() {
        let mut q = Queue::default();
        assert_eq!(q.push(rid(1), nid(1), None, 8, 8), Admit::Spawn);
        // Queued, same peer: nothing more to do.
        assert_eq!(q.push(rid(1), nid(1), None, 8, 8), Admit::Joined);
        q.start(&rid(1));
        // Running: later hints make one follow-up, from the latest peer.
        assert_eq!(q.push(rid(1), nid(2), None, 8, 8), Admit::Joined);
        assert_eq!(q.push(rid(1), nid(3), None, 8, 8), Admit::Joined);
        assert_eq!(q.finish(&rid(1), &ok(1)), Some(nid(3)));
        assert_eq!(q.finish(&rid(1), &ok(1)), None);
        assert!(!q.contains(&rid(1)));
    }

    #[test]
    fn hints_are_bounded_but_waiters_are_admitted() {
        let mut q = Queue::default();
        assert_eq!(q.push(rid(1), nid(1), None, 2, 1), Admit::Spawn);
        // One per peer.
        assert_eq!(q.push(rid(2), nid(1), None, 2, 1), Admit::Full);
        assert_eq!(q.push(rid(2), nid(2), None, 2, 1), Admit::Spawn);
        // Two in all.
        assert_eq!(q.push(rid(3), nid(3), None, 2, 1), Admit::Full);
        let (tx, _rx) = oneshot::channel();
        assert_eq!(q.push(rid(3), nid(3), Some(tx), 2, 1), Admit::Spawn);
        assert_eq!(q.len(), 3);
    }

    /// Concurrent operator requests for one repository share fetches instead of running
    /// their own: two waiters before it starts get its result, later ones a single follow-up
    /// that starts after it.
    #[test]
    fn waiters_share_the_queued_fetch_or_one_follow_up() {
        let mut q = Queue::default();
        let (a, mut ra) = oneshot::channel();
        let (b, mut rb) = oneshot::channel();
        let (c, mut rc) = oneshot::channel();
        let (d, mut rd) = oneshot::channel();
        assert_eq!(q.push(rid(1), nid(1), Some(a), 8, 8), Admit::Spawn);
        assert_eq!(q.push(rid(1), nid(1), Some(b), 8, 8), Admit::Joined);
        q.start(&rid(1));
        // Started: c and d wait for one follow-up; a gossip hint from another peer gets the
        // next one.
        assert_eq!(q.push(rid(1), nid(1), Some(c), 8, 8), Admit::Joined);
        assert_eq!(q.push(rid(1), nid(2), None, 8, 8), Admit::Joined);
        assert_eq!(q.push(rid(1), nid(1), Some(d), 8, 8), Admit::Joined);
        assert!(rc.try_recv().is_err());
        assert_eq!(q.finish(&rid(1), &ok(1)), Some(nid(1)));
        assert_eq!(
            ra.try_recv()
                .ok()
                .and_then(|r| r.ok())
                .map(|o| o.refs_written),
            Some(1)
        );
        assert_eq!(
            rb.try_recv()
                .ok()
                .and_then(|r| r.ok())
                .map(|o| o.refs_written),
            Some(1)
        );
        assert!(
            rc.try_recv().is_err(),
            "c got the result of a fetch that started before it"
        );
        q.start(&rid(1));
        assert_eq!(q.finish(&rid(1), &ok(2)), Some(nid(2)));
        assert_eq!(
            rc.try_recv()
                .ok()
                .and_then(|r| r.ok())
                .map(|o| o.refs_written),
            Some(2)
        );
        assert_eq!(
            rd.try_recv()
                .ok()
                .and_then(|r| r.ok())
                .map(|o| o.refs_written),
            Some(2)
        );
        assert_eq!(q.finish(&rid(1), &ok(3)), None);
        assert!(!q.contains(&rid(1)));
    }

    #[test]
    fn waiters_for_another_peer_get_their_own_follow_up() {
        let mut q = Queue::default();
        let (a, mut ra) = oneshot::channel();
        let (b, mut rb) = oneshot::channel();
        assert_eq!(q.push(rid(1), nid(1), None, 8, 8), Admit::Spawn);
        assert_eq!(q.push(rid(1), nid(2), Some(a), 8, 8), Admit::Joined);
        assert_eq!(q.push(rid(1), nid(3), Some(b), 8, 8), Admit::Joined);
        // A later hint from peer 4 does not take over a waiter's follow-up.
        assert_eq!(q.push(rid(1), nid(4), None, 8, 8), Admit::Joined);
        let err: Shared = Err(Arc::new(FetchError::Git("boom".into())));
        assert_eq!(q.finish(&rid(1), &ok(0)), Some(nid(2)));
        assert_eq!(q.finish(&rid(1), &err), Some(nid(3)));
        assert!(matches!(ra.try_recv(), Ok(Err(_))));
        assert!(rb.try_recv().is_err());
        assert_eq!(q.finish(&rid(1), &ok(3)), Some(nid(4)));
        assert!(matches!(rb.try_recv(), Ok(Ok(_))));
        assert_eq!(q.finish(&rid(1), &ok(0)), None);
    }

    /// A peer at its cap waits for its own slot without taking a global one: other peers
    /// still get the free global slots, and nothing of the peer is kept once it is done.
    #[tokio::test]
    async fn a_peer_at_its_cap_waits_without_taking_a_global_slot() {
        let slots = Slots::new(2, 1);
        let a1 = slots.acquire(nid(1)).await;
        assert_eq!(slots.peer_in_use(&nid(1)), 1);
        let mut second = Box::pin(slots.acquire(nid(1)));
        let waited = tokio::time::timeout(Duration::from_millis(50), &mut second).await;
        assert!(waited.is_err(), "a fetch from a peer at its cap got a slot");
        let b = tokio::time::timeout(Duration::from_millis(50), slots.acquire(nid(2)))
            .await
            .expect("another peer is held up by a peer at its cap");
        drop(a1);
        // The waiting fetch gets A's slot, then the global slot A released.
        let a2 = tokio::time::timeout(Duration::from_millis(50), &mut second)
            .await
            .expect("a released slot was not handed on");
        drop((a2, b, second));
        assert_eq!(slots.peers(), 0);
    }

    #[test]
    fn a_hint_from_another_peer_before_the_start_becomes_the_follow_up() {
        let mut q = Queue::default();
        assert_eq!(q.push(rid(1), nid(1), None, 8, 8), Admit::Spawn);
        assert_eq!(q.push(rid(1), nid(2), None, 8, 8), Admit::Joined);
        assert_eq!(q.len(), 1, "one entry per repository");
        assert_eq!(q.iter().map(|(_, p)| *p).collect::<Vec<_>>(), [nid(1)]);
        assert_eq!(q.finish(&rid(1), &ok(1)), Some(nid(2)));
        // The follow-up is now the repository's fetch, not started yet.
        assert_eq!(q.iter().map(|(_, p)| *p).collect::<Vec<_>>(), [nid(2)]);
        assert_eq!(q.push(rid(1), nid(2), None, 8, 8), Admit::Joined);
        assert_eq!(q.finish(&rid(1), &ok(1)), None);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn hints_for_a_queued_repository_coalesce_even_when_the_queue_is_full() {
        let mut q = Queue::default();
        assert_eq!(q.push(rid(1), nid(1), None, 1, 1), Admit::Spawn);
        assert_eq!(q.push(rid(2), nid(2), None, 1, 1), Admit::Full);
        // Not a new entry: no bound applies.
        assert_eq!(q.push(rid(1), nid(2), None, 1, 1), Admit::Joined);
        assert_eq!(q.push(rid(1), nid(1), None, 1, 1), Admit::Joined);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn a_finished_repository_frees_its_place_in_both_bounds() {
        let mut q = Queue::default();
        assert_eq!(q.push(rid(1), nid(1), None, 1, 1), Admit::Spawn);
        assert_eq!(q.push(rid(2), nid(1), None, 2, 1), Admit::Full, "per peer");
        assert_eq!(q.push(rid(2), nid(2), None, 1, 1), Admit::Full, "overall");
        q.start(&rid(1));
        assert_eq!(q.finish(&rid(1), &ok(0)), None);
        assert_eq!(q.push(rid(2), nid(1), None, 1, 1), Admit::Spawn);
    }

    #[test]
    fn unknown_repositories_and_departed_waiters_are_harmless() {
        let mut q = Queue::default();
        q.start(&rid(9));
        assert_eq!(q.finish(&rid(9), &ok(0)), None);
        let (tx, rx) = oneshot::channel();
        assert_eq!(q.push(rid(1), nid(1), Some(tx), 8, 8), Admit::Spawn);
        // The operator's client went away before the result.
        drop(rx);
        q.start(&rid(1));
        assert_eq!(q.finish(&rid(1), &ok(1)), None);
        assert_eq!(q.len(), 0);
    }

    /// The global slots bound fetches across peers: a second peer waits for the first
    /// peer's global slot.
    #[tokio::test]
    async fn global_slots_bound_fetches_across_peers() {
        let slots = Slots::new(1, 2);
        let a = slots.acquire(nid(1)).await;
        let mut b = Box::pin(slots.acquire(nid(2)));
        let waited = tokio::time::timeout(Duration::from_millis(50), &mut b).await;
        assert!(waited.is_err(), "more fetches than global slots");
        // It holds its peer slot meanwhile.
        assert_eq!(slots.peer_in_use(&nid(2)), 1);
        drop(a);
        let b = tokio::time::timeout(Duration::from_millis(50), &mut b)
            .await
            .expect("the released global slot was not handed on");
        assert_eq!(slots.peers(), 1);
        drop(b);
        assert_eq!(slots.peers(), 0);
    }

    #[tokio::test]
    async fn a_peer_gets_up_to_its_share_of_slots() {
        let slots = Slots::new(4, 2);
        let a = slots.acquire(nid(1)).await;
        let b = slots.acquire(nid(1)).await;
        assert_eq!(slots.peer_in_use(&nid(1)), 2);
        let third = tokio::time::timeout(Duration::from_millis(50), slots.acquire(nid(1))).await;
        assert!(third.is_err(), "a peer got more than its share");
        drop((a, b));
        assert_eq!(slots.peers(), 0);
    }

    #[tokio::test]
    async fn zero_limits_still_allow_one_fetch() {
        let slots = Slots::new(0, 0);
        let a = tokio::time::timeout(Duration::from_millis(50), slots.acquire(nid(1)))
            .await
            .expect("no slot with limits of 0");
        assert_eq!(slots.peer_in_use(&nid(1)), 1);
        drop(a);
    }
}
