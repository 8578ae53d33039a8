//! The index's in-memory census of repositories: one small entry per indexed repository
//! (visibility, name, when indexed), the public ones counted and the repositories of each name
//! listed, kept with the records by [`super::Index`] so counts, names and the inventory ranking
//! never read RocksDB.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use seedd_proto::crypto::RepoId;

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
}

pub(super) struct CensusEntry {
    pub(super) public: bool,
    pub(super) indexed_at: u64,
    pub(super) name: Arc<str>,
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
    pub(super) fn insert(&mut self, record: &RepoRecord) {
        let rid = record.rid;
        let public = record.is_public();
        let name = record.name.as_str();
        let same_name = self.repos.get(&rid).is_some_and(|e| &*e.name == name);
        if !same_name {
            self.forget_name(&rid);
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
                }
            }
        }
        let entry = CensusEntry {
            public,
            indexed_at: record.indexed_at,
            name,
        };
        if self.repos.insert(rid, entry).is_some_and(|old| old.public) {
            self.public -= 1;
        }
        if public {
            self.public += 1;
        }
    }

    pub(super) fn remove(&mut self, rid: &RepoId) {
        self.forget_name(rid);
        if self.repos.remove(rid).is_some_and(|old| old.public) {
            self.public -= 1;
        }
    }

    fn forget_name(&mut self, rid: &RepoId) {
        let Some(old) = self.repos.get(rid).map(|e| e.name.clone()) else {
            return;
        };
        if let Some(named) = self.by_name.get_mut(&old) {
            if named.remove(rid) {
                self.by_name.remove(&old);
            }
        }
    }
}
