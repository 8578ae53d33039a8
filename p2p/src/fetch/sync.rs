//! The sync task's work list (protocol.md §5.2): seeded repositories we lack that a peer is
//! known to have. It is filled as things change — a full pass of the routing tables at start
//! and when seeding policies change (plus a slow scrub), the routes of each newly connected
//! peer, fetches that could not be queued or failed — and emptied as repositories arrive, so
//! a sync tick costs the repositories still missing, not the routing table (issue 30 §2).
//!
//! Pure: storage, policies, the queue and the routing tables reach it as closures.

use std::collections::{BTreeSet, HashSet};

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

    /// The fetches to request now: each listed repository that is still seeded, not held and
    /// not queued, from a connected peer `source` names. A repository that arrived, stopped
    /// being seeded or has no connected source leaves the list (a source that connects later
    /// brings it back through its routes). Costs the list, never the routing table.
    pub(crate) fn due(
        &mut self,
        seeded: impl Fn(&RepoId) -> bool,
        holds: impl Fn(&RepoId) -> bool,
        queued: impl Fn(&RepoId) -> bool,
        mut source: impl FnMut(&RepoId, &HashSet<NodeId>) -> Option<NodeId>,
    ) -> Vec<(RepoId, NodeId)> {
        let mut requests = Vec::new();
        let connected = &self.connected;
        self.missing.retain(|rid| {
            if !seeded(rid) || holds(rid) {
                return false;
            }
            if queued(rid) {
                return true;
            }
            match source(rid, connected) {
                Some(nid) => {
                    requests.push((*rid, nid));
                    true
                }
                None => false,
            }
        });
        requests
    }
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
        let reqs = list.due(|_| true, holds, |_| false, |_, c| c.iter().next().copied());
        assert_eq!(reqs, vec![(rid(7), nid(1)), (rid(9), nid(1))]);
        assert_eq!(checks.get(), 2, "one storage check per missing repository");
        // One arrives: it leaves the list; the other stays while it is queued.
        let holds = |r: &RepoId| *r != rid(9);
        let reqs = list.due(|_| true, holds, |r| *r == rid(9), |_, _| None);
        assert!(reqs.is_empty());
        assert!(list.contains(&rid(9)) && !list.contains(&rid(7)));
        // No connected source: it leaves the list (a source's routes bring it back).
        let reqs = list.due(|_| true, holds, |_| false, |_, _| None);
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
        let reqs = list.due(|_| false, |_| false, |_| false, |_, _| Some(nid(1)));
        assert!(reqs.is_empty() && list.len() == 0);
    }
}
