//! The index's in-memory census of repositories: one small entry per indexed repository
//! (visibility, name, when indexed, seed count), the public ones counted, the repositories of
//! each name listed and the web API's listing kept in order, by [`super::Index`] with the
//! records, the routing table and the repository policies, so counts, names, the inventory
//! ranking and a listing page never read (or decode) more than what they return.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use foldhash::fast::RandomState;

use seedd_proto::crypto::{NodeId, RepoId};

use super::ranked::RankedSet;
use super::RepoRecord;

/// The census's maps: keyed by what strangers choose (RIDs, names, node ids), hashed with
/// foldhash seeded per map at random (no set of keys collides in every process), ~4× cheaper
/// than SipHash over 1M RIDs at start (issue 30 §3).
pub(super) type Map<K, V> = HashMap<K, V, RandomState>;
pub(super) type Set<K> = HashSet<K, RandomState>;
/// The two maps with an entry per repository: entries in one dense vector and a table of
/// 8-byte indices, where a hash table holds the entries themselves in twice as many buckets
/// as entries (at 1M repositories ~110 MB instead of ~185 MB for `repos`).
pub(super) type DenseMap<K, V> = indexmap::IndexMap<K, V, RandomState>;

/// Indexed repositories, their visibility, names and when each was indexed, with the public
/// ones counted and the repositories of each name listed (tenant aliases resolve names without
/// reading records; the over-the-cap inventory ranks by `indexed_at` without decoding
/// records). One entry per repository, kept small: at 100,000 repositories it is resident.
#[derive(Default)]
pub(super) struct Census {
    pub(super) repos: DenseMap<RepoId, CensusEntry>,
    pub(super) public: usize,
    pub(super) by_name: DenseMap<Arc<str>, Named>,
    /// Suffixes of the distinct names (the name search).
    pub(super) grams: Grams,
    /// Repositories with an explicit `block` policy (they are never listed).
    pub(super) denied: Set<RepoId>,
    /// The listing ([`CensusEntry::listable`], not denied) in RID order.
    pub(super) listed: RankedSet<RepoId>,
    /// The same, most seeded first (the seed count as shown: at least 1), then RID.
    pub(super) by_seeds: RankedSet<(Reverse<u32>, RepoId)>,
    /// The repositories of each delegate (the web API's delegate listing).
    pub(super) by_delegate: Map<NodeId, Named>,
    /// Bumped by every change that can move the listing (what a cache of something computed
    /// from the listing compares: [`super::Index::listing_at`]).
    pub(super) changes: u64,
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
    /// A census about to be filled from every record, about `expected` of them (maps sized
    /// once; the name search sorts once, in [`Census::built`]).
    pub(super) fn building(expected: usize) -> Self {
        let mut census = Self {
            grams: Grams::building(),
            ..Self::default()
        };
        census.repos.reserve(expected);
        census.by_name.reserve(expected);
        census.grams.ids.reserve(expected);
        census.grams.names.reserve(expected);
        census
    }

    pub(super) fn built(&mut self) {
        self.grams.built();
    }

    /// Sorts the names' suffixes (the name search) of a census loaded without them, holding
    /// `census`'s lock only to copy the names and to install the result: a start does not wait
    /// for it (at 1M names ~1.4 s), and until then a search checks every name one by one (the
    /// pending names of [`Grams`]), with the same answers.
    pub(super) fn build_name_search(census: &std::sync::Mutex<Census>) {
        let started = std::time::Instant::now();
        let lock = || census.lock().unwrap_or_else(|p| p.into_inner());
        let (upto, names) = {
            let c = lock();
            if !c.grams.building {
                return;
            }
            (
                c.grams.names.len(),
                c.grams.names.iter().map(Slot::live_copy).collect(),
            )
        };
        let mut sorted = Grams {
            names,
            building: true,
            ..Grams::default()
        };
        sorted.built();
        let suffixes = sorted.sorted.len();
        lock().grams.install(upto, sorted.sorted);
        tracing::info!(
            names = upto,
            suffixes,
            ms = started.elapsed().as_millis() as u64,
            "name search built"
        );
    }

    /// Takes `rid` out of the listing (before its entry changes).
    fn unlist(&mut self, rid: &RepoId) {
        // Every change of an entry, a policy or a seed count starts here.
        self.changes = self.changes.wrapping_add(1);
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
        if self.repos.swap_remove(rid).is_some_and(|old| old.public) {
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
                self.by_name.swap_remove(&old);
                self.grams.remove(&old);
            }
        }
    }
}

/// A suffix array over the distinct repository names, for the web API's substring search
/// (issue 30 §1): every suffix of every name (from each character boundary), in byte order,
/// so the names containing a needle are one binary search and a run of matches away —
/// whatever the names share. (Trigram postings, before, cost the names of the needle's rarest
/// trigram: all of them when every trigram of the needle is common, e.g. `000000` among names
/// `web100000-…`, or any needle shorter than three bytes.) 8 bytes per suffix: ~130 bytes
/// per name of 16 characters.
///
/// Ids are never reused. A removed name's suffixes stay, skipped, until they outnumber the
/// live ones (then dropped in one linear pass: no sort). Names added since the last merge
/// (ids from `merged`) are checked one by one, at most [`Grams::pending_cap`] of them, then
/// sorted and merged in: a binary search per new suffix and one copy of the array (at 100k
/// names ~1.6M suffixes, 13 MB, once per ~1,500 new names). The census built at start sorts
/// once ([`Grams::building`], [`Grams::built`]).
#[derive(Default)]
pub(super) struct Grams {
    ids: Map<Arc<str>, u32>,
    names: Vec<Slot>,
    /// `id << 16 | byte offset`, ordered by the name's bytes from that offset.
    sorted: Vec<u64>,
    /// Ids below this are in `sorted`; the rest are pending.
    merged: u32,
    /// Live names (those in `ids`).
    live: usize,
    /// Entries of `sorted` whose name was removed.
    stale: usize,
    /// No merge until [`Grams::built`] (the census's first build).
    building: bool,
}

/// A name by id: removed names stay while `sorted` holds their suffixes (the order needs
/// their bytes).
enum Slot {
    Live(Arc<str>),
    Removed(Arc<str>),
    Free,
}

impl Slot {
    /// A live name as is; anything else as free (a copy to sort from).
    fn live_copy(&self) -> Slot {
        match self {
            Slot::Live(n) => Slot::Live(n.clone()),
            _ => Slot::Free,
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Slot::Live(n) | Slot::Removed(n) => n.as_bytes(),
            Slot::Free => &[],
        }
    }
}

/// Suffixes start at offsets up to this (a longer name's tail is not indexed).
const MAX_OFFSET: usize = u16::MAX as usize;

fn entry(id: u32, offset: usize) -> u64 {
    (u64::from(id) << 16) | (offset.min(MAX_OFFSET) as u64)
}

fn entry_id(e: u64) -> u32 {
    (e >> 16) as u32
}

/// The offsets a needle can start at in `name` (character boundaries).
fn offsets(name: &str) -> impl Iterator<Item = usize> + '_ {
    name.char_indices()
        .map(|(i, _)| i)
        .take_while(|i| *i <= MAX_OFFSET)
}

impl Grams {
    /// A census being built: names are sorted once, by [`Grams::built`].
    pub(super) fn building() -> Self {
        Self {
            building: true,
            ..Self::default()
        }
    }

    fn suffix(&self, e: u64) -> &[u8] {
        let bytes = self
            .names
            .get(entry_id(e) as usize)
            .map_or(&[][..], Slot::bytes);
        bytes.get((e & 0xffff) as usize..).unwrap_or(&[])
    }

    /// Pending names checked one by one before a merge: a few times the square root of the
    /// names (the check costs up to ~4·√n names per query, a merge ~n suffixes copied per
    /// ~4·√n names added).
    fn pending_cap(&self) -> usize {
        (4.0 * (self.live as f64).sqrt()) as usize + 256
    }

    fn pending(&self) -> usize {
        self.names.len() - self.merged as usize
    }

    pub(super) fn add(&mut self, name: &Arc<str>) {
        if self.ids.contains_key(name) {
            return;
        }
        let Ok(id) = u32::try_from(self.names.len()) else {
            return;
        };
        self.names.push(Slot::Live(name.clone()));
        self.ids.insert(name.clone(), id);
        self.live += 1;
        if !self.building && self.pending() > self.pending_cap() {
            self.merge();
        }
    }

    pub(super) fn remove(&mut self, name: &str) {
        let Some(id) = self.ids.remove(name) else {
            return;
        };
        self.live -= 1;
        let Some(slot) = self.names.get_mut(id as usize) else {
            return;
        };
        if id >= self.merged {
            // Pending: never in `sorted`.
            *slot = Slot::Free;
            return;
        }
        let old = std::mem::replace(slot, Slot::Free);
        if let Slot::Live(n) = old {
            self.stale += offsets(&n).count();
            *slot = Slot::Removed(n);
        }
        if self.stale > self.sorted.len() - self.stale + 4096 {
            self.drop_removed();
        }
    }

    /// Installs `sorted`, the suffixes of the names with ids below `upto` sorted from a copy
    /// ([`Census::build_name_search`]); names removed meanwhile (pending, so freed) are left
    /// out, names added meanwhile stay pending.
    fn install(&mut self, upto: usize, mut sorted: Vec<u64>) {
        if !self.building {
            return;
        }
        let names = &self.names;
        if names.iter().take(upto).any(|s| !matches!(s, Slot::Live(_))) {
            sorted.retain(|e| matches!(names.get(entry_id(*e) as usize), Some(Slot::Live(_))));
        }
        self.sorted = sorted;
        self.merged = u32::try_from(upto).unwrap_or(u32::MAX);
        self.stale = 0;
        self.building = false;
        if self.pending() > self.pending_cap() {
            self.merge();
        }
    }

    /// The census is built: sort what was added.
    pub(super) fn built(&mut self) {
        self.building = false;
        self.merge();
    }

    /// Merges the pending names' suffixes into `sorted`.
    fn merge(&mut self) {
        let mut new: Vec<u64> = Vec::new();
        for id in self.merged..self.names.len() as u32 {
            if let Some(Slot::Live(name)) = self.names.get(id as usize) {
                new.extend(offsets(name).map(|o| entry(id, o)));
            }
        }
        self.sort_suffixes(&mut new);
        if self.sorted.is_empty() {
            self.sorted = new;
        } else if !new.is_empty() {
            let mut out = Vec::with_capacity(self.sorted.len() + new.len());
            let mut from = 0;
            for e in new {
                let key = self.suffix(e);
                let at = from + self.sorted[from..].partition_point(|s| self.suffix(*s) < key);
                out.extend_from_slice(&self.sorted[from..at]);
                out.push(e);
                from = at;
            }
            out.extend_from_slice(&self.sorted[from..]);
            self.sorted = out;
        }
        self.merged = self.names.len() as u32;
    }

    /// Sorts `entries` by their suffixes: by 8 bytes of each at a time, held beside the entry
    /// (comparisons touch no name; names are read once per 8 bytes of a shared prefix), each
    /// run of equal keys sorted again 8 bytes deeper. ~3× faster than comparing the suffixes
    /// (100k generated names sharing a 10-byte prefix: 0.15 s instead of 0.5 s); 16 bytes per
    /// entry while sorting.
    fn sort_suffixes(&self, entries: &mut [u64]) {
        // By first byte, in place (American flag sort: no copy), then each bucket by 8-byte
        // keys on up to one thread per core: the keys are held for one bucket at a time, not
        // for every suffix (at 1M names: ~100 MB at most instead of 320 MB, issue 30 §3).
        let total = entries.len();
        let mut counts = [0usize; 256];
        for e in entries.iter() {
            counts[self.first_byte(*e)] += 1;
        }
        let mut starts = [0usize; 256];
        let mut at = 0;
        for (b, n) in counts.iter().enumerate() {
            starts[b] = at;
            at += n;
        }
        let ends: [usize; 256] = std::array::from_fn(|b| starts[b] + counts[b]);
        let mut next = starts;
        for b in 0..256 {
            while next[b] < ends[b] {
                let e = entries[next[b]];
                let to = self.first_byte(e);
                if to == b {
                    next[b] += 1;
                } else {
                    entries.swap(next[b], next[to]);
                    next[to] += 1;
                }
            }
        }
        let mut buckets: Vec<&mut [u64]> = Vec::new();
        let mut rest = entries;
        for n in counts {
            let (bucket, tail) = rest.split_at_mut(n);
            if n > 1 {
                buckets.push(bucket);
            }
            rest = tail;
        }
        // Largest first, taken from a shared list by each thread.
        buckets.sort_by_key(|b| std::cmp::Reverse(b.len()));
        let work = std::sync::Mutex::new(buckets);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
        let sort_some = || loop {
            let bucket = {
                let mut w = work.lock().unwrap_or_else(|p| p.into_inner());
                if w.is_empty() {
                    break;
                }
                w.remove(0)
            };
            let mut keyed: Vec<(u64, u64)> = bucket.iter().map(|e| (self.key(*e, 0), *e)).collect();
            self.sort_keyed(&mut keyed, 0);
            for (slot, (_, e)) in bucket.iter_mut().zip(keyed) {
                *slot = e;
            }
        };
        if threads > 1 && total > 100_000 {
            std::thread::scope(|scope| {
                for _ in 1..threads {
                    scope.spawn(sort_some);
                }
                sort_some();
            });
        } else {
            sort_some();
        }
    }

    /// The first byte of `e`'s suffix (0 when it is empty).
    fn first_byte(&self, e: u64) -> usize {
        self.suffix(e).first().map_or(0, |b| usize::from(*b))
    }

    /// The 8 bytes of `e`'s suffix from `depth` on, big-endian, zero-padded: ordered as the
    /// bytes are, except that a suffix ending inside them ties with one going on in zeros.
    fn key(&self, e: u64, depth: usize) -> u64 {
        let bytes = self.suffix(e).get(depth..).unwrap_or(&[]);
        if let Some(eight) = bytes.first_chunk::<8>() {
            // A fixed-size load, not a `memcpy` call per key.
            return u64::from_be_bytes(*eight);
        }
        let mut k = [0u8; 8];
        let n = bytes.len().min(8);
        k[..n].copy_from_slice(&bytes[..n]);
        u64::from_be_bytes(k)
    }

    /// Sorts `keyed` (keys at depth 0) with an explicit stack of runs still to sort: suffixes
    /// sharing a long prefix (names are published by strangers) cost depth, not stack.
    fn sort_keyed(&self, keyed: &mut [(u64, u64)], depth: usize) {
        let mut todo: Vec<(usize, usize, usize)> = vec![(0, keyed.len(), depth)];
        while let Some((from, to, depth)) = todo.pop() {
            let part = &mut keyed[from..to];
            part.sort_unstable_by_key(|(k, _)| *k);
            let mut start = 0;
            while start < part.len() {
                let k = part[start].0;
                let len = part[start..]
                    .iter()
                    .take_while(|(other, _)| *other == k)
                    .count();
                let run = &mut part[start..start + len];
                if len > 1 {
                    let deeper = depth + 8;
                    if run.iter().all(|(_, e)| self.suffix(*e).len() <= deeper) {
                        // Equal up to where each ends (then zeros): the shorter first.
                        run.sort_unstable_by_key(|(_, e)| self.suffix(*e).len());
                    } else {
                        for (key, e) in run.iter_mut() {
                            *key = self.key(*e, deeper);
                        }
                        todo.push((from + start, from + start + len, deeper));
                    }
                }
                start += len;
            }
        }
    }

    /// Drops the removed names' suffixes (order kept: no sort) and their bytes.
    fn drop_removed(&mut self) {
        let names = &self.names;
        self.sorted
            .retain(|e| matches!(names.get(entry_id(*e) as usize), Some(Slot::Live(_))));
        for slot in &mut self.names {
            if matches!(slot, Slot::Removed(_)) {
                *slot = Slot::Free;
            }
        }
        self.stale = 0;
    }

    /// The names containing `needle` (`None` for an empty needle: every name does). Costs a
    /// binary search, the matching suffixes and the pending names.
    pub(super) fn matching(&self, needle: &str) -> Option<Vec<Arc<str>>> {
        if needle.is_empty() {
            return None;
        }
        let key = needle.as_bytes();
        let from = self.sorted.partition_point(|e| self.suffix(*e) < key);
        let mut ids: Vec<u32> = self.sorted[from..]
            .iter()
            .take_while(|e| self.suffix(**e).starts_with(key))
            .map(|e| entry_id(*e))
            .collect();
        ids.extend((self.merged..self.names.len() as u32).filter(|id| {
            match self.names.get(*id as usize) {
                Some(Slot::Live(name)) => name.contains(needle),
                _ => false,
            }
        }));
        ids.sort_unstable();
        ids.dedup();
        Some(
            ids.into_iter()
                .filter_map(|id| match self.names.get(id as usize) {
                    Some(Slot::Live(name)) => Some(name.clone()),
                    _ => None,
                })
                .collect(),
        )
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

    /// The suffix array answers as a scan of the live names does, for needles of any length
    /// (one byte, common to every name, longer than any name, non-ASCII), through adds and
    /// removes, merges of pending names, the dropping of removed names' suffixes, and a
    /// census built in one sort.
    #[test]
    fn suffix_lookups_agree_with_a_scan_through_adds_removes_merges_and_drops() {
        for building in [false, true] {
            let mut g = if building {
                Grams::building()
            } else {
                Grams::default()
            };
            let mut live: Vec<String> = Vec::new();
            let mut merges = 0;
            let mut drops = 0;
            for i in 0..6000 {
                let name = format!(
                    "web10000-{:06}-{}",
                    (i * 7919) % 5003,
                    ["radicle", "heartwood", "seed", "ü-nicode", ""][i % 5]
                );
                let before = g.merged;
                if !live.contains(&name) {
                    live.push(name.clone());
                }
                g.add(&Arc::from(name.as_str()));
                merges += usize::from(g.merged != before);
                // Past the first half, most names go again (two for one added).
                let removals = if i > 3000 && live.len() > 300 { 2 } else { 0 };
                for k in 0..removals {
                    let gone = live.remove((i * 31 + k) % live.len());
                    let stale = g.stale;
                    g.remove(&gone);
                    drops += usize::from(g.stale < stale);
                }
                if building && i == 2999 {
                    assert_eq!(g.merged, 0, "no merge while building");
                    g.built();
                    assert_eq!(g.pending(), 0);
                }
            }
            assert!(merges > 3, "{merges} merges");
            assert!(drops > 0, "removed suffixes dropped");
            assert!(g.pending() > 0, "some names pending");
            let refs: Vec<&str> = live.iter().map(String::as_str).collect();
            for needle in [
                "web10000-",
                "000000",
                "0001",
                "w",
                "0",
                "wood",
                "-9-s",
                "ü",
                "ü-n",
                "nothing",
                "dicle",
                "-004999-seed",
                "web10000-000000-radicle-and-more",
            ] {
                assert_eq!(looked_up(&g, needle), naive(&refs, needle), "{needle}");
            }
            assert!(
                g.matching("").is_none(),
                "every name contains the empty needle"
            );
            assert!(g.stale <= g.sorted.len() - g.stale + 4096);
        }
    }

    /// The keyed sort orders suffixes as their bytes do: through zero bytes, prefixes of one
    /// another, shared prefixes far longer than a key, and multi-byte characters.
    #[test]
    fn a_name_search_sorted_beside_the_start_answers_the_same_before_during_and_after() {
        let names: Vec<String> = (0..300).map(|i| format!("proj-{i}-{}", i % 7)).collect();
        let mut g = Grams::building();
        for n in &names {
            g.add(&Arc::from(n.as_str()));
        }
        let mut live: Vec<String> = names.clone();
        let check = |g: &Grams, live: &[String]| {
            for needle in ["proj-1", "-3", "9-", "12-5", "x", "-0", "p"] {
                let mut got: Vec<String> = g
                    .matching(needle)
                    .unwrap()
                    .iter()
                    .map(|n| n.to_string())
                    .collect();
                got.sort();
                let mut want: Vec<String> = live
                    .iter()
                    .filter(|n| n.contains(needle))
                    .cloned()
                    .collect();
                want.sort();
                assert_eq!(got, want, "{needle}");
            }
        };
        // Before: every name pending, checked one by one.
        check(&g, &live);
        // The copy is sorted while names come and go.
        let upto = g.names.len();
        let mut copy = Grams {
            names: g.names.iter().map(Slot::live_copy).collect(),
            building: true,
            ..Grams::default()
        };
        copy.built();
        for gone in ["proj-12-5", "proj-3-3", "proj-299-5"] {
            g.remove(gone);
            live.retain(|n| n != gone);
        }
        for new in ["proj-12-5-again", "proj-900-0"] {
            g.add(&Arc::from(new));
            live.push(new.to_owned());
        }
        check(&g, &live);
        g.install(upto, copy.sorted);
        assert!(!g.building);
        assert!(g
            .sorted
            .iter()
            .all(|e| matches!(g.names[entry_id(*e) as usize], Slot::Live(_))));
        check(&g, &live);
        // Later changes merge as usual.
        g.remove("proj-1-1");
        live.retain(|n| n != "proj-1-1");
        check(&g, &live);
    }

    #[test]
    fn a_large_build_sorts_by_buckets_on_several_threads_in_byte_order() {
        // Over 100,000 suffixes: the first-byte buckets are sorted on several threads.
        let mut g = Grams::building();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for i in 0..12_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Shared prefixes, zero bytes, multi-byte chars, every first byte.
            let name = format!("{}pre{}-\0ü{:x}", char::from((x % 96) as u8 + 1), i % 50, x);
            g.add(&Arc::from(name.as_str()));
        }
        g.built();
        assert!(g.sorted.len() > 100_000);
        let suffixes: Vec<&[u8]> = g.sorted.iter().map(|e| g.suffix(*e)).collect();
        assert!(suffixes.windows(2).all(|w| w[0] <= w[1]));
        let mut naive = suffixes.clone();
        naive.sort();
        assert_eq!(suffixes, naive);
    }

    #[test]
    fn suffixes_are_in_byte_order_whatever_they_share() {
        let long = "x".repeat(100);
        let names: Vec<String> = vec![
            "a".into(),
            "a\0".into(),
            "a\0b".into(),
            "a\0\0".into(),
            "ab".into(),
            format!("{long}1"),
            format!("{long}2"),
            long.clone(),
            format!("{long}\0"),
            "ü-ü-ü-ü-ü-ü-ü-ü".into(),
            "ü-ü-ü-ü-ü-ü-ü-".into(),
            "12345678".into(),
            "123456789".into(),
            "1234567".into(),
        ];
        for building in [true, false] {
            let mut g = if building {
                Grams::building()
            } else {
                Grams::default()
            };
            for n in &names {
                g.add(&Arc::from(n.as_str()));
            }
            if building {
                g.built();
            } else {
                g.merge();
            }
            let suffixes: Vec<&[u8]> = g.sorted.iter().map(|e| g.suffix(*e)).collect();
            assert!(suffixes.windows(2).all(|w| w[0] <= w[1]), "{:?}", suffixes);
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            for needle in [
                "a\0",
                "\0",
                "x1",
                &long,
                "xx2",
                "ü-",
                "5678",
                "a",
                "-ü-ü-ü-ü-ü-ü-ü",
            ] {
                assert_eq!(looked_up(&g, needle), naive(&refs, needle), "{needle:?}");
            }
        }
    }
}
