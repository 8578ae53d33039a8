//! The sync task's work list (protocol.md §5.2): seeded repositories we lack that a peer is
//! known to have. It is filled as things change — a full pass of the routing tables at start
//! and when seeding policies change (plus a slow scrub), the routes of each newly connected
//! peer, fetches that could not be queued or failed — and emptied as repositories arrive, so
//! a sync tick costs the repositories still missing, not the routing table (issue 30 §2).
//!
//! Pure: storage, policies, the queue and the routing tables reach it as closures.

use std::collections::{BTreeSet, HashMap, HashSet};

use seedd_proto::crypto::{NodeId, RepoId};

/// What a tick begins with ([`SyncList::begin`]); its fetches come from [`SyncList::due`].
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Tick {
    /// Peers connected since the last tick, whose routes the caller adds with
    /// [`SyncList::offer`].
    pub new_peers: Vec<NodeId>,
    /// Whether the caller should make a full pass (start, seeding changed, scrub due).
    pub full_pass: bool,
}

/// Ticks between two full passes without a seeding change (the scrub: at the 30 s tick, 1 h).
pub(crate) const SCRUB_TICKS: u64 = 120;

#[derive(Debug, Default)]
pub(crate) struct SyncList {
    missing: BTreeSet<RepoId>,
    connected: HashSet<NodeId>,
    /// The seeding generation of the last full pass (`None`: none yet).
    passed: Option<u64>,
    ticks_since_pass: u64,
    /// Where the last [`SyncList::due`] stopped.
    cursor: Option<RepoId>,
    /// Ticks so far, and the listed repositories whose fetch failed: not handed out again
    /// before the tick after the failure (a failing peer is retried every 30 s, not as fast
    /// as slots free up).
    ticks: u64,
    held_back: HashMap<RepoId, u64>,
}

impl SyncList {
    /// A repository that may be missing (the caller saw a route, a failed or unqueued fetch,
    /// a seeding policy): kept if it is seeded and not held. One `holds` check.
    pub(crate) fn offer(
        &mut self,
        rid: RepoId,
        seeded: impl Fn(&RepoId) -> bool,
        holds: impl Fn(&RepoId) -> bool,
    ) {
        if !self.missing.contains(&rid) && seeded(&rid) && !holds(&rid) {
            self.missing.insert(rid);
        }
    }

    /// A repository whose fetch failed: listed as by [`SyncList::offer`], but not handed out
    /// again before the next tick.
    pub(crate) fn offer_failed(
        &mut self,
        rid: RepoId,
        seeded: impl Fn(&RepoId) -> bool,
        holds: impl Fn(&RepoId) -> bool,
    ) {
        self.offer(rid, seeded, holds);
        if self.missing.contains(&rid) {
            self.held_back.insert(rid, self.ticks + 1);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.missing.len()
    }

    /// Whether `rid` is on the list.
    #[cfg(test)]
    fn contains(&self, rid: &RepoId) -> bool {
        self.missing.contains(rid)
    }

    /// Starts a tick: which peers are new and whether a full pass is due (`generation`
    /// counts seeding changes). The caller offers their routes, then calls [`SyncList::due`].
    pub(crate) fn begin(&mut self, connected: HashSet<NodeId>, generation: u64) -> Tick {
        let new_peers = connected.difference(&self.connected).copied().collect();
        self.connected = connected;
        self.ticks += 1;
        self.ticks_since_pass += 1;
        let full_pass = self.passed != Some(generation) || self.ticks_since_pass >= SCRUB_TICKS;
        if full_pass {
            self.passed = Some(generation);
            self.ticks_since_pass = 0;
        }
        Tick {
            new_peers,
            full_pass,
        }
    }

    /// Up to `limit` fetches to request now: listed repositories that are still seeded, not
    /// held and not queued, each from a connected peer `source` names. A repository that
    /// arrived, stopped being seeded or has no connected source leaves the list (a source
    /// that connects later brings it back through its routes); one whose sources are all busy
    /// ([`Source::Busy`]) stays. The walk goes on from where the last one stopped and visits
    /// at most `2 × limit + 64` entries, so handing the queue a few more fetches each time a
    /// slot frees up (the bulk path of a new seed) costs what it hands out, not the list.
    pub(crate) fn due(
        &mut self,
        limit: usize,
        seeded: impl Fn(&RepoId) -> bool,
        holds: impl Fn(&RepoId) -> bool,
        queued: impl Fn(&RepoId) -> bool,
        mut source: impl FnMut(&RepoId, &HashSet<NodeId>) -> Source,
    ) -> Vec<(RepoId, NodeId)> {
        use std::ops::Bound::{Excluded, Unbounded};
        let budget = limit
            .saturating_mul(2)
            .saturating_add(64)
            .min(self.missing.len());
        let visit: Vec<RepoId> = match self.cursor {
            Some(c) => self
                .missing
                .range((Excluded(c), Unbounded))
                .chain(self.missing.range(..=c))
                .take(budget)
                .copied()
                .collect(),
            None => self.missing.iter().take(budget).copied().collect(),
        };
        let mut requests = Vec::new();
        for rid in visit {
            if requests.len() >= limit {
                break;
            }
            self.cursor = Some(rid);
            let held_back = match self.held_back.get(&rid) {
                Some(&t) if t > self.ticks => true,
                Some(_) => {
                    self.held_back.remove(&rid);
                    false
                }
                None => false,
            };
            // Queued ones first: most of a long list is queued while a bulk runs, and that
            // check is a set lookup where `holds` is a `stat`.
            let keep = if queued(&rid) {
                true
            } else if !seeded(&rid) || holds(&rid) {
                false
            } else if held_back {
                true
            } else {
                match source(&rid, &self.connected) {
                    Source::Peer(nid) => {
                        requests.push((rid, nid));
                        true
                    }
                    Source::Busy => true,
                    Source::None => false,
                }
            };
            if !keep {
                self.missing.remove(&rid);
                self.held_back.remove(&rid);
            }
        }
        requests
    }
}

/// Where a listed repository can be fetched from now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// This connected peer has it and room in the queue.
    Peer(NodeId),
    /// Connected peers have it, but their share of the queue is full.
    Busy,
    /// No connected peer is known to have it.
    None,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn rid(n: u8) -> RepoId {
        RepoId::from([n; 20])
    }

    fn nid(n: u8) -> NodeId {
        NodeId::from([n; 32])
    }

    #[test]
    fn a_tick_costs_the_missing_repositories_not_the_routes() {
        let mut list = SyncList::default();
        let t = list.begin(HashSet::from([nid(1)]), 0);
        assert!(t.full_pass, "the first tick makes the full pass");
        assert_eq!(t.new_peers, vec![nid(1)]);
        // The full pass offers 256 routed repositories; we hold all but two.
        let checks = Cell::new(0);
        let holds = |r: &RepoId| {
            checks.set(checks.get() + 1);
            *r != rid(7) && *r != rid(9)
        };
        for n in 0..=255u8 {
            list.offer(rid(n), |_| true, holds);
        }
        assert_eq!(list.len(), 2);
        // Later ticks look at those two only.
        checks.set(0);
        let t = list.begin(HashSet::from([nid(1)]), 0);
        assert!(!t.full_pass && t.new_peers.is_empty());
        let first = |_: &RepoId, c: &HashSet<NodeId>| {
            c.iter().next().map_or(Source::None, |n| Source::Peer(*n))
        };
        let reqs = list.due(10, |_| true, holds, |_| false, first);
        assert_eq!(reqs, vec![(rid(7), nid(1)), (rid(9), nid(1))]);
        assert_eq!(checks.get(), 2, "one storage check per missing repository");
        // One arrives: it leaves the list; the other stays while it is queued.
        let holds = |r: &RepoId| *r != rid(9);
        let reqs = list.due(10, |_| true, holds, |r| *r == rid(9), |_, _| Source::None);
        assert!(reqs.is_empty());
        assert!(list.contains(&rid(9)) && !list.contains(&rid(7)));
        // No connected source: it leaves the list (a source's routes bring it back).
        let reqs = list.due(10, |_| true, holds, |_| false, |_, _| Source::None);
        assert!(reqs.is_empty());
        assert_eq!(list.len(), 0);
    }

    #[test]
    fn new_peers_and_seeding_changes_are_reported_once() {
        let mut list = SyncList::default();
        assert!(list.begin(HashSet::new(), 3).full_pass);
        let t = list.begin(HashSet::from([nid(1), nid(2)]), 3);
        assert!(!t.full_pass);
        let mut peers = t.new_peers;
        peers.sort();
        assert_eq!(peers, vec![nid(1), nid(2)]);
        // Still connected: not new again; one left and came back: new.
        assert!(list.begin(HashSet::from([nid(1)]), 3).new_peers.is_empty());
        assert_eq!(
            list.begin(HashSet::from([nid(1), nid(2)]), 3).new_peers,
            vec![nid(2)]
        );
        // A seeding change asks for a full pass, once.
        assert!(list.begin(HashSet::from([nid(1), nid(2)]), 4).full_pass);
        assert!(!list.begin(HashSet::from([nid(1), nid(2)]), 4).full_pass);
        // The scrub: a full pass every SCRUB_TICKS ticks.
        let passes = (0..SCRUB_TICKS)
            .filter(|_| list.begin(HashSet::new(), 4).full_pass)
            .count();
        assert_eq!(passes, 1);
    }

    #[test]
    fn unseeded_and_held_repositories_are_not_listed() {
        let mut list = SyncList::default();
        list.offer(rid(1), |_| false, |_| false);
        list.offer(rid(2), |_| true, |_| true);
        list.offer(rid(3), |_| true, |_| false);
        assert_eq!(list.len(), 1);
        // Unseeded since: it leaves at the next tick without a request.
        let reqs = list.due(
            10,
            |_| false,
            |_| false,
            |_| false,
            |_, _| Source::Peer(nid(1)),
        );
        assert!(reqs.is_empty() && list.len() == 0);
    }

    /// The bulk path: each call hands out at most `limit` fetches and visits at most
    /// `2 × limit + 64` entries, going on where the last call stopped (wrapping around), so a
    /// long list is worked through a little each time a slot frees up; repositories whose
    /// sources are busy stay listed.
    #[test]
    fn due_hands_out_a_bounded_share_and_goes_on_where_it_stopped() {
        let mut list = SyncList::default();
        list.begin(HashSet::from([nid(1)]), 0);
        for n in 0..=199u8 {
            list.offer(rid(n), |_| true, |_| false);
        }
        // Visits are counted by the first check (`queued`), storage checks by `holds`.
        let (visited, stats) = (Cell::new(0), Cell::new(0));
        let holds = |_: &RepoId| {
            stats.set(stats.get() + 1);
            false
        };
        let queued = |is: fn(&RepoId) -> bool| {
            let visited = &visited;
            move |r: &RepoId| {
                visited.set(visited.get() + 1);
                is(r)
            }
        };
        let peer = |_: &RepoId, _: &HashSet<NodeId>| Source::Peer(nid(1));
        let reqs = list.due(3, |_| true, holds, queued(|_| false), peer);
        assert_eq!(
            reqs.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
            vec![rid(0), rid(1), rid(2)]
        );
        assert_eq!((visited.get(), stats.get()), (3, 3));
        // The next call starts after rid(2); queued ones are skipped (no storage check) but
        // counted.
        visited.set(0);
        stats.set(0);
        let reqs = list.due(2, |_| true, holds, queued(|r| *r == rid(3)), peer);
        assert_eq!(
            reqs.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
            vec![rid(4), rid(5)]
        );
        assert_eq!((visited.get(), stats.get()), (3, 2));
        // Everything queued: the walk stops after its budget (2 × 1 + 64), not the list, and
        // checks storage for none of them.
        visited.set(0);
        stats.set(0);
        let reqs = list.due(1, |_| true, holds, queued(|_| true), peer);
        assert!(reqs.is_empty());
        assert_eq!((visited.get(), stats.get()), (66, 0));
        // Busy sources keep their repositories listed; no source drops them.
        let reqs = list.due(200, |_| true, |_| false, |_| false, |_, _| Source::Busy);
        assert!(reqs.is_empty());
        assert_eq!(list.len(), 200);
        let reqs = list.due(1000, |_| true, |_| false, |_| false, |_, _| Source::None);
        assert!(reqs.is_empty());
        assert_eq!(list.len(), 0);
        // Wrapping around: after the end, the walk starts again at the first.
        for n in [10u8, 20, 30] {
            list.offer(rid(n), |_| true, |_| false);
        }
        assert_eq!(list.due(2, |_| true, |_| false, |_| false, peer).len(), 2);
        let reqs = list.due(2, |_| true, |_| false, |_| false, peer);
        assert_eq!(
            reqs.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
            vec![rid(30), rid(10)]
        );
    }

    /// A failed fetch is not handed out again before the next tick, then it is.
    #[test]
    fn a_failed_fetch_waits_for_the_next_tick() {
        let mut list = SyncList::default();
        list.begin(HashSet::from([nid(1)]), 0);
        let peer = |_: &RepoId, _: &HashSet<NodeId>| Source::Peer(nid(1));
        list.offer_failed(rid(1), |_| true, |_| false);
        list.offer(rid(2), |_| true, |_| false);
        let reqs = list.due(10, |_| true, |_| false, |_| false, peer);
        assert_eq!(reqs, vec![(rid(2), nid(1))]);
        assert!(list.contains(&rid(1)));
        list.begin(HashSet::from([nid(1)]), 0);
        let reqs = list.due(10, |_| true, |_| true, |_| false, peer);
        assert!(reqs.is_empty(), "held ones are checked like the others");
        list.offer_failed(rid(1), |_| true, |_| false);
        list.begin(HashSet::from([nid(1)]), 0);
        let reqs = list.due(10, |_| true, |_| false, |_| false, peer);
        assert_eq!(reqs, vec![(rid(1), nid(1))]);
        assert!(list.held_back.is_empty());
    }
}
