//! The index's in-memory census of repositories: one small entry per indexed repository
//! (visibility, name, when indexed, seed count), the public ones counted, the repositories of
//! each name listed and the web API's listing kept in order, by [`super::Index`] with the
//! records, the routing table and the repository policies, so counts, names, the inventory
//! ranking and a listing page never read (or decode) more than what they return.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use seedd_proto::crypto::{NodeId, RepoId};

use super::ranked::RankedSet;
use super::RepoRecord;

/// Indexed repositories, their visibility, names and when each was indexed, with the public
/// ones counted and the repositories of each name listed (tenant aliases resolve names without
/// reading records; the over-the-cap inventory ranks by `indexed_at` without decoding
/// records). One entry per repository, kept small: at 100,000 repositories it is resident.
#[derive(Default)]
pub(super) struct Census {
    pub(super) repos: HashMap<RepoId, CensusEntry>,
    pub(super) public: usize,
    pub(super) by_name: HashMap<Arc<str>, Named>,
    /// Trigrams of the distinct names (the name search).
    pub(super) grams: Grams,
    /// Repositories with an explicit `block` policy (they are never listed).
    pub(super) denied: HashSet<RepoId>,
    /// The listing ([`CensusEntry::listable`], not denied) in RID order.
    pub(super) listed: RankedSet<RepoId>,
    /// The same, most seeded first (the seed count as shown: at least 1), then RID.
    pub(super) by_seeds: RankedSet<(Reverse<u32>, RepoId)>,
    /// The repositories of each delegate (the web API's delegate listing).
    pub(super) by_delegate: HashMap<NodeId, Named>,
}

pub(super) struct CensusEntry {
    pub(super) public: bool,
    pub(super) indexed_at: u64,
    pub(super) name: Arc<str>,
    /// Public, named and with a canonical head: what the web API may list (anything else
    /// would fail the explorer's schema for the whole list).
    pub(super) listable: bool,
    /// Routing entries of the repository (the nodes known to seed it).
    pub(super) seeds: u32,
    pub(super) delegates: Box<[NodeId]>,
    /// A private repository's allow list (`None`: public).
    pub(super) allow: Option<Box<[NodeId]>>,
}

impl CensusEntry {
    /// The seed count the web API shows (we seed it, so at least 1).
    pub(super) fn shown_seeds(&self) -> u32 {
        self.seeds.max(1)
    }
}

/// The repositories of one name: almost always one, so no set is allocated for it (a
/// one-element `BTreeSet` costs a whole B-tree node, ~200 bytes, per repository).
pub(super) enum Named {
    One(RepoId),
    Many(BTreeSet<RepoId>),
}

impl Named {
    fn insert(&mut self, rid: RepoId) {
        match self {
            Named::One(one) if *one == rid => {}
            Named::One(one) => *self = Named::Many(BTreeSet::from([*one, rid])),
            Named::Many(set) => {
                set.insert(rid);
            }
        }
    }

    /// Removes `rid`; whether none is left.
    fn remove(&mut self, rid: &RepoId) -> bool {
        match self {
            Named::One(one) => one == rid,
            Named::Many(set) => {
                set.remove(rid);
                set.is_empty()
            }
        }
    }

    pub(super) fn to_set(&self) -> BTreeSet<RepoId> {
        match self {
            Named::One(one) => BTreeSet::from([*one]),
            Named::Many(set) => set.clone(),
        }
    }
}

impl Census {
    /// Takes `rid` out of the listing (before its entry changes).
    fn unlist(&mut self, rid: &RepoId) {
        if let Some(e) = self.repos.get(rid) {
            let key = (Reverse(e.shown_seeds()), *rid);
            self.listed.remove(rid);
            self.by_seeds.remove(&key);
        }
    }

    /// Puts `rid` in the listing if its entry says so (after it changed).
    fn relist(&mut self, rid: &RepoId) {
        if let Some(e) = self.repos.get(rid) {
            if e.listable && !self.denied.contains(rid) {
                self.listed.insert(*rid);
                self.by_seeds.insert((Reverse(e.shown_seeds()), *rid));
            }
        }
    }

    /// Adds or replaces the entry of `record`; `seeds` is asked only for a new repository.
    pub(super) fn insert(&mut self, record: &RepoRecord, seeds: impl FnOnce() -> u32) {
        let rid = record.rid;
        let seeds = match self.repos.get(&rid) {
            Some(e) => e.seeds,
            None => seeds(),
        };
        self.unlist(&rid);
        let public = record.is_public();
        let name = record.name.as_str();
        let same_name = self.repos.get(&rid).is_some_and(|e| &*e.name == name);
        if !same_name {
            self.forget_name(&rid);
        }
        self.forget_delegates(&rid);
        for d in &record.delegates {
            match self.by_delegate.get_mut(d) {
                Some(named) => named.insert(rid),
                None => {
                    self.by_delegate.insert(*d, Named::One(rid));
                }
            }
        }
        let name: Arc<str> = match self.by_name.get_key_value(name) {
            Some((n, _)) => n.clone(),
            None => Arc::from(name),
        };
        if !same_name {
            match self.by_name.get_mut(&name) {
                Some(named) => named.insert(rid),
                None => {
                    self.by_name.insert(name.clone(), Named::One(rid));
                    self.grams.add(&name);
                }
            }
        }
        let entry = CensusEntry {
            public,
            indexed_at: record.indexed_at,
            listable: public && !record.name.is_empty() && record.head.is_some(),
            name,
            seeds,
            delegates: record.delegates.clone().into_boxed_slice(),
            allow: match &record.visibility {
                crate::storage::Visibility::Public => None,
                crate::storage::Visibility::Private { allow } => {
                    Some(allow.clone().into_boxed_slice())
                }
            },
        };
        if self.repos.insert(rid, entry).is_some_and(|old| old.public) {
            self.public -= 1;
        }
        if public {
            self.public += 1;
        }
        self.relist(&rid);
    }

    /// A routing entry of `rid` appeared (`+1`) or went (`-1`).
    pub(super) fn seeds_changed(&mut self, rid: &RepoId, added: bool) {
        if !self.repos.contains_key(rid) {
            return;
        }
        self.unlist(rid);
        if let Some(e) = self.repos.get_mut(rid) {
            e.seeds = if added {
                e.seeds.saturating_add(1)
            } else {
                e.seeds.saturating_sub(1)
            };
        }
        self.relist(rid);
    }

    /// An explicit `block` policy of `rid` was set (`true`) or lifted.
    pub(super) fn set_denied(&mut self, rid: RepoId, denied: bool) {
        self.unlist(&rid);
        if denied {
            self.denied.insert(rid);
        } else {
            self.denied.remove(&rid);
        }
        self.relist(&rid);
    }

    pub(super) fn remove(&mut self, rid: &RepoId) {
        self.unlist(rid);
        self.forget_name(rid);
        self.forget_delegates(rid);
        if self.repos.remove(rid).is_some_and(|old| old.public) {
            self.public -= 1;
        }
    }

    fn forget_delegates(&mut self, rid: &RepoId) {
        let Some(old) = self.repos.get(rid).map(|e| e.delegates.clone()) else {
            return;
        };
        for d in old.iter() {
            if let Some(named) = self.by_delegate.get_mut(d) {
                if named.remove(rid) {
                    self.by_delegate.remove(d);
                }
            }
        }
    }

    fn forget_name(&mut self, rid: &RepoId) {
        let Some(old) = self.repos.get(rid).map(|e| e.name.clone()) else {
            return;
        };
        if let Some(named) = self.by_name.get_mut(&old) {
            if named.remove(rid) {
                self.by_name.remove(&old);
                self.grams.remove(&old);
            }
        }
    }
}

/// Trigram postings of the distinct repository names, for the web API's substring search
/// (issue 30 §1): a query of three bytes or more reads the postings of its rarest trigram and
/// checks those names, instead of every name. Removed names leave their postings behind
/// (their ids are free for reuse; candidates are always checked), compacted once the stale
/// postings outnumber the live ones.
#[derive(Default)]
pub(super) struct Grams {
    ids: HashMap<Arc<str>, u32>,
    names: Vec<Option<Arc<str>>>,
    free: Vec<u32>,
    postings: HashMap<[u8; 3], Vec<u32>>,
    live: usize,
    stale: usize,
}

/// The distinct trigrams of `s` (bytes; a name shorter than 3 has none).
fn trigrams(s: &str) -> Vec<[u8; 3]> {
    let mut out: Vec<[u8; 3]> = s
        .as_bytes()
        .windows(3)
        .filter_map(|w| <[u8; 3]>::try_from(w).ok())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

impl Grams {
    fn add(&mut self, name: &Arc<str>) {
        if self.ids.contains_key(name) {
            return;
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.names.push(None);
                (self.names.len() - 1) as u32
            }
        };
        if let Some(slot) = self.names.get_mut(id as usize) {
            *slot = Some(name.clone());
        }
        self.ids.insert(name.clone(), id);
        let grams = trigrams(name);
        self.live += grams.len();
        for g in grams {
            self.postings.entry(g).or_default().push(id);
        }
    }

    fn remove(&mut self, name: &str) {
        let Some(id) = self.ids.remove(name) else {
            return;
        };
        if let Some(slot) = self.names.get_mut(id as usize) {
            *slot = None;
        }
        self.free.push(id);
        let n = trigrams(name).len();
        self.live -= n;
        self.stale += n;
        if self.stale > self.live + 4096 {
            self.compact();
        }
    }

    fn compact(&mut self) {
        self.postings.clear();
        for (id, name) in self.names.iter().enumerate() {
            if let Some(name) = name {
                for g in trigrams(name) {
                    self.postings.entry(g).or_default().push(id as u32);
                }
            }
        }
        self.stale = 0;
    }

    /// The names containing `needle`, if it is long enough to be looked up (3 bytes or more;
    /// `None`: scan the names instead). Costs the rarest trigram's postings.
    pub(super) fn matching(&self, needle: &str) -> Option<Vec<Arc<str>>> {
        let grams = trigrams(needle);
        if grams.is_empty() {
            return None;
        }
        let mut rarest: Option<&Vec<u32>> = None;
        for g in &grams {
            match self.postings.get(g) {
                None => return Some(Vec::new()),
                Some(p) if rarest.is_none_or(|r| p.len() < r.len()) => rarest = Some(p),
                Some(_) => {}
            }
        }
        // Checked before anything is copied: with names sharing a prefix, the rarest trigram
        // can still be in most of them, and few contain the whole needle.
        let mut hits: Vec<Arc<str>> = rarest
            .map(|ids| {
                ids.iter()
                    .filter_map(|id| self.names.get(*id as usize).and_then(Option::as_ref))
                    .filter(|name| name.contains(needle))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        // A reused id can be listed twice under one trigram.
        hits.sort_unstable();
        hits.dedup();
        Some(hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(names: &[&str], needle: &str) -> Vec<String> {
        let mut v: Vec<String> = names
            .iter()
            .filter(|n| n.contains(needle))
            .map(|n| n.to_string())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    fn looked_up(g: &Grams, needle: &str) -> Vec<String> {
        let mut v: Vec<String> = g
            .matching(needle)
            .expect("long enough")
            .iter()
            .map(|n| n.to_string())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn trigram_lookups_agree_with_a_scan_through_adds_removes_and_compaction() {
        let mut g = Grams::default();
        let mut live: Vec<String> = Vec::new();
        for i in 0..3000 {
            let name = format!(
                "proj-{}-{}",
                i % 97,
                ["radicle", "heartwood", "seed", "ü-nicode"][i % 4]
            );
            g.add(&Arc::from(name.as_str()));
            live.push(name);
            if i % 3 == 0 {
                let gone = live.remove(i % live.len());
                if !live.contains(&gone) {
                    g.remove(&gone);
                }
            }
        }
        let refs: Vec<&str> = live.iter().map(String::as_str).collect();
        for needle in [
            "proj-1",
            "wood",
            "-9-s",
            "ü-n",
            "nothing",
            "dicle",
            "proj-96-radicle",
        ] {
            assert_eq!(looked_up(&g, needle), naive(&refs, needle), "{needle}");
        }
        assert!(g.matching("ab").is_none(), "short queries scan");
        assert!(g.stale <= g.live + 4096);
    }
}
