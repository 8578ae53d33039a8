//! The RocksDB index: typed accessors over column families. Never the only copy of git data:
//! everything in `repos`, `refs` and `sigrefs` can be rebuilt from storage (see `scan`).
//!
//! Schema (documented in ARCHITECTURE.md; keys are binary; values JSON unless noted, `repos`
//! and `sigrefs` in the versioned binary encoding of [`values`], JSON still read there):
//!
//! | CF | key | value |
//! |---|---|---|
//! | `meta` | `schema_version`; `own_ts/<type>` | utf-8; u64 BE |
//! | `repos` | rid (20 bytes) | [`RepoRecord`] |
//! | `refs` | rid (20) ‖ ref name | oid (20) ‖ kind (1: not an annotated tag), oid ‖ peeled oid ‖ kind (41: an annotated tag and the first non-tag object it leads to), a bare oid (20: not known whether it is a tag: written before peeled targets were kept, or peeling failed), or `ref: <target>` for symbolic refs ([`adverts`]); kind: what the ref leads to, `1` a commit, `2` something else, `0` not known (missing object, or written before kinds were kept — then a tag's value is 40 bytes) |
//! | `sigrefs` | rid (20) ‖ nid (32) | [`SigrefsRecord`] |
//! | `routing` | rid (20) ‖ nid (32) | u64 BE timestamp (see [`gossip`]) |
//! | `nodes` | nid (32) | address-book record |
//! | `announcements` | nid (32) ‖ kind (2) ‖ rid (20, refs only) | u64 BE received-at ‖ message |
//! | `policies` | `repo/` rid · `node/` nid | policy (replication issue) |
//! | `tenants` | tenant name | tenant record (operators issue) |
//! | `fetch_state` | `size/` ‖ rid (20) | u64 BE bytes on disk, measured after the last fetch ([`Index::put_repo_size`]) |
//! | `pack_cache` | cache key | pack cache entry metadata (performance issue) |
//! | `bans` | ip (text) | penalty/ban record |
//! | `maintenance` | rid (20) | maintenance record: debt, last run and outcome (`maintain`) |
//!
//! Durability: every write goes through [`Index::commit`]. Writes touching a column family that
//! cannot be rebuilt from storage or the network ([`durable`]: `meta`, `policies`, `tenants`,
//! `bans`) are synced (WAL fsync) before the accessor returns, so the admin API answers success
//! only for state that survives a power loss; the rest is rebuilt by the rescan or re-learnt
//! from gossip and is written without a sync.

pub(crate) mod adverts;
mod census;
pub mod gossip;
pub(crate) mod maintenance;
pub(crate) mod page;
pub mod policy;
mod ranked;
pub mod scan;
pub mod tenants;
pub(crate) mod tuning;
pub(crate) mod values;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use rocksdb::{ColumnFamilyDescriptor, Options, WriteBatch, WriteOptions, DB};
use serde::{Deserialize, Serialize};

use crate::storage::{FeatureLevel, RefTarget, Visibility};

/// A ref as [`Index::refs_under_commits`] gives it: name, target, the commit it leads to.
pub type RefCommit = (String, RefTarget, Option<Option<gix::ObjectId>>);
pub(crate) use adverts::{End, Peel, Peels};
use census::{Census, Named};
use seedd_proto::crypto::{NodeId, RepoId};
pub use tuning::Tuning;
pub use values::ValueEncoding;

pub(crate) const SCHEMA_VERSION: &str = "1";

pub(crate) const CF_META: &str = "meta";
pub(crate) const CF_REPOS: &str = "repos";
pub(crate) const CF_REFS: &str = "refs";
pub(crate) const CF_SIGREFS: &str = "sigrefs";
/// Rebuildable per-repository fetch bookkeeping (not synced): repository sizes.
pub(crate) const CF_FETCH_STATE: &str = "fetch_state";
/// Every column family, in creation order.
pub(crate) const COLUMN_FAMILIES: &[&str] = &[
    CF_META,
    CF_REPOS,
    CF_REFS,
    CF_SIGREFS,
    gossip::CF_ROUTING,
    gossip::CF_NODES,
    gossip::CF_ANNOUNCEMENTS,
    policy::CF_POLICIES,
    tenants::CF_TENANTS,
    CF_FETCH_STATE,
    "pack_cache",
    gossip::CF_BANS,
    maintenance::CF_MAINTENANCE,
];

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("index at {path}: {cause}")]
    Open {
        path: std::path::PathBuf,
        cause: rocksdb::Error,
    },
    #[error("index: {0}")]
    Db(rocksdb::Error),
    #[error("index: column family {0} missing")]
    MissingCf(&'static str),
    /// A record that does not decode (or does not belong to its key); `key` names it when
    /// the record has one (`rad:z…`, `rad:z…/z6Mk…`, else hex).
    #[error("index: corrupt record in {cf}{}: {reason}", at_key(.key.as_deref()))]
    Corrupt {
        cf: &'static str,
        key: Option<String>,
        reason: String,
    },
    #[error(
        "index schema version {found:?} is not {SCHEMA_VERSION}: delete the index directory to rebuild it from storage"
    )]
    Schema { found: String },
}

/// ` at key …` for [`IndexError::Corrupt`], or nothing.
fn at_key(key: Option<&str>) -> String {
    key.map(|k| format!(" at key {k}")).unwrap_or_default()
}

/// What the index knows about one repository.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepoRecord {
    pub rid: RepoId,
    pub name: String,
    pub description: String,
    pub default_branch: String,
    pub delegates: Vec<NodeId>,
    pub threshold: usize,
    pub visibility: Visibility,
    /// Identity COB head at top-level `refs/rad/id`.
    pub identity_head: String,
    /// Canonical default branch tip, if any.
    pub head: Option<String>,
    /// Hash over the repository's ref listing; unchanged → no reindex.
    pub fingerprint: String,
    pub ref_count: usize,
    /// Namespaces with valid signed refs.
    pub namespaces: Vec<NodeId>,
    /// Unix seconds of the last (re)index.
    pub indexed_at: u64,
}

impl RepoRecord {
    pub fn is_public(&self) -> bool {
        self.visibility.is_public()
    }
}

/// Verification outcome for one namespace's signed refs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SigrefsRecord {
    pub nid: NodeId,
    pub commit: Option<String>,
    pub level: Option<FeatureLevel>,
    /// `None` when verified; otherwise why verification failed.
    pub error: Option<String>,
}

/// What changed in an indexed repository ([`Index::update_repo`]).
#[derive(Debug)]
pub struct RepoDelta<'a> {
    pub record: &'a RepoRecord,
    pub refs: &'a [(String, RefTarget)],
    /// What the direct refs of `refs` peel to ([`Peel::Unknown`] when absent).
    pub(crate) peels: &'a Peels,
    pub gone: &'a [String],
    pub sigrefs: &'a [SigrefsRecord],
    pub gone_namespaces: &'a [NodeId],
}

/// Whether writes to `cf` must reach the disk (WAL fsync) before they are acknowledged: state
/// that exists nowhere else — the operator's policies, tenants and identities, our own
/// announcement timestamps (peers drop announcements that are not strictly newer), bans.
/// Repositories, refs and signed refs are rebuilt from storage by the rescan; routing, nodes
/// and announcements are re-learnt from gossip.
pub(crate) fn durable(cf: &str) -> bool {
    matches!(
        cf,
        CF_META | policy::CF_POLICIES | tenants::CF_TENANTS | gossip::CF_BANS
    )
}

/// The write options for a batch: synced iff it touches a [`durable`] column family.
fn write_options(sync: bool) -> WriteOptions {
    let mut o = WriteOptions::default();
    o.set_sync(sync);
    o
}

/// A write batch that remembers whether it touched a [`durable`] column family.
pub(crate) struct Batch<'a> {
    index: &'a Index,
    batch: WriteBatch,
    sync: bool,
}

impl Batch<'_> {
    pub(crate) fn put(
        &mut self,
        cf: &'static str,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<(), IndexError> {
        self.sync |= durable(cf);
        self.batch.put_cf(self.index.cf(cf)?, key, value);
        Ok(())
    }

    pub(crate) fn delete(
        &mut self,
        cf: &'static str,
        key: impl AsRef<[u8]>,
    ) -> Result<(), IndexError> {
        self.sync |= durable(cf);
        self.batch.delete_cf(self.index.cf(cf)?, key);
        Ok(())
    }

    /// Whether committing this batch syncs the WAL.
    #[cfg(test)]
    fn is_synced(&self) -> bool {
        self.sync
    }
}

/// Below this many repositories the name search is sorted inline when the index opens (a few
/// milliseconds); above, on a thread of its own while the seed starts.
const NAME_SEARCH_INLINE: usize = 20_000;

/// Handle to the index database. Cheap to clone.
#[derive(Clone)]
pub struct Index {
    db: Arc<DB>,
    /// Every indexed repository and whether it is public, kept with the records (read once at
    /// open, then updated by each write under this lock), so counts are O(1).
    census: Arc<Mutex<Census>>,
    /// How records are written ([`values`]): binary, except in compatibility tests and the
    /// bench's baseline.
    values: ValueEncoding,
}

/// The order of [`Index::listing_page`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListOrder {
    /// By repository id.
    Rid,
    /// Most seeded first, then by repository id.
    Seeding,
}

/// Repository counts of the index ([`Index::repo_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepoCounts {
    pub total: usize,
    pub public: usize,
}

impl Index {
    /// Opens (or creates) the index with the default [`Tuning`].
    pub fn open(path: &Path) -> Result<Self, IndexError> {
        Self::open_tuned(path, Tuning::default())
    }

    /// Opens (or creates) the index with the given RocksDB options ([`tuning`]).
    pub fn open_tuned(path: &Path, tuning: Tuning) -> Result<Self, IndexError> {
        Self::open_with(path, Options::default(), tuning)
    }

    /// [`Index::open_tuned`] with base options (tests enable statistics through them).
    fn open_with(path: &Path, mut opts: Options, tuning: Tuning) -> Result<Self, IndexError> {
        let shared = tuning.apply(&mut opts);
        let cfs = COLUMN_FAMILIES
            .iter()
            .map(|name| ColumnFamilyDescriptor::new(*name, tuning.cf_options(name, &shared)));
        let db = DB::open_cf_descriptors(&opts, path, cfs).map_err(|source| IndexError::Open {
            path: path.to_owned(),
            cause: source,
        })?;
        let mut index = Self {
            db: Arc::new(db),
            census: Arc::default(),
            values: ValueEncoding::default(),
        };
        index.check_schema()?;
        let started = std::time::Instant::now();
        // RocksDB's estimate of the records (no pass), so the census's maps are sized once.
        let expected = index
            .db
            .property_int_value_cf(index.cf(CF_REPOS)?, "rocksdb.estimate-num-keys")
            .ok()
            .flatten()
            .map_or(0, |n| usize::try_from(n).unwrap_or(0).min(1 << 24));
        let mut census = Census::building(expected);
        // Seed counts first (one pass over the routing table), so each entry is listed once.
        let seeds = index.seed_counts()?;
        let counted = started.elapsed();
        index.for_each_repo(|r| census.insert(&r, || seeds.get(&r.rid).copied().unwrap_or(0)))?;
        for rid in index.blocked_repos()? {
            census.set_denied(rid, true);
        }
        tracing::info!(
            repos = census.repos.len(),
            routes_ms = counted.as_millis() as u64,
            records_ms = (started.elapsed() - counted).as_millis() as u64,
            "index census loaded"
        );
        let small = census.repos.len() < NAME_SEARCH_INLINE;
        if small {
            census.built();
        }
        index.census = Arc::new(Mutex::new(census));
        if !small {
            // The name search is sorted beside the start, not before it (the thread holds
            // the census only, not the database: closing the index is not held up).
            let census = index.census.clone();
            let spawned = std::thread::Builder::new()
                .name("name-search".into())
                .spawn(move || Census::build_name_search(&census));
            if spawned.is_err() {
                Census::build_name_search(&index.census);
            }
        }
        Ok(index)
    }

    fn cf(&self, name: &'static str) -> Result<&rocksdb::ColumnFamily, IndexError> {
        self.db.cf_handle(name).ok_or(IndexError::MissingCf(name))
    }

    /// A new batch; write it with [`Index::commit`].
    pub(crate) fn batch(&self) -> Batch<'_> {
        Batch {
            index: self,
            batch: WriteBatch::default(),
            sync: false,
        }
    }

    /// The one write path: atomically, synced when the batch touched a [`durable`] CF.
    pub(crate) fn commit(&self, batch: Batch<'_>) -> Result<(), IndexError> {
        self.db.write_opt(batch.batch, &write_options(batch.sync))?;
        Ok(())
    }

    /// One put, through [`Index::commit`].
    pub(crate) fn put(
        &self,
        cf: &'static str,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<(), IndexError> {
        let mut b = self.batch();
        b.put(cf, key, value)?;
        self.commit(b)
    }

    /// One delete, through [`Index::commit`].
    pub(crate) fn delete(&self, cf: &'static str, key: impl AsRef<[u8]>) -> Result<(), IndexError> {
        let mut b = self.batch();
        b.delete(cf, key)?;
        self.commit(b)
    }

    fn check_schema(&self) -> Result<(), IndexError> {
        let meta = self.cf(CF_META)?;
        match self.db.get_cf(meta, b"schema_version")? {
            None => self.put(CF_META, b"schema_version", SCHEMA_VERSION)?,
            Some(v) if v == SCHEMA_VERSION.as_bytes() => {}
            Some(v) => {
                return Err(IndexError::Schema {
                    found: String::from_utf8_lossy(&v).into_owned(),
                })
            }
        }
        Ok(())
    }

    pub fn repo(&self, rid: &RepoId) -> Result<Option<RepoRecord>, IndexError> {
        match self.db.get_pinned_cf(self.cf(CF_REPOS)?, rid.as_bytes())? {
            None => Ok(None),
            Some(v) => values::decode(rid.as_bytes(), &v).map(Some),
        }
    }

    pub fn repos(&self) -> Result<Vec<RepoRecord>, IndexError> {
        let mut out = Vec::new();
        self.for_each_repo(|r| out.push(r))?;
        Ok(out)
    }

    /// Every record in RID order, decoded one at a time and handed to `f`: what needs to see
    /// every repository without holding them all (the census at open, the inventories), so
    /// the start's peak memory is one record, not 100,000 of them.
    pub fn for_each_repo(&self, mut f: impl FnMut(RepoRecord)) -> Result<(), IndexError> {
        for item in self
            .db
            .iterator_cf(self.cf(CF_REPOS)?, rocksdb::IteratorMode::Start)
        {
            let (k, v) = item?;
            f(values::decode(&k, &v)?);
        }
        Ok(())
    }

    pub fn repo_count(&self) -> Result<usize, IndexError> {
        Ok(self.repo_counts().total)
    }

    /// How many repositories are indexed, and how many of them are public: O(1).
    pub fn repo_counts(&self) -> RepoCounts {
        let census = self.census();
        RepoCounts {
            total: census.repos.len(),
            public: census.public,
        }
    }

    /// The indexed repositories named `name` (the identity document's name), from memory.
    pub fn repos_named(&self, name: &str) -> BTreeSet<RepoId> {
        self.census()
            .by_name
            .get(name)
            .map(Named::to_set)
            .unwrap_or_default()
    }

    /// Public indexed repositories whose name contains `needle` (case-sensitive, as httpd's
    /// search), each with whether the name starts with it, from memory, no record read: a
    /// binary search in the census's suffix array and the matches (an empty needle: a pass
    /// over the distinct names). Sorted: prefix matches first, then by RID.
    pub fn search_names(&self, needle: &str) -> Vec<(RepoId, bool)> {
        let mut out: Vec<(RepoId, bool)> = {
            let census = self.census();
            let hits = |name: &str, named: &Named| {
                let prefix = name.starts_with(needle);
                named
                    .to_set()
                    .into_iter()
                    .filter(|rid| census.repos.get(rid).is_some_and(|e| e.public))
                    .map(move |rid| (rid, prefix))
                    .collect::<Vec<_>>()
            };
            match census.grams.matching(needle) {
                Some(names) => names
                    .iter()
                    .filter_map(|name| census.by_name.get(name).map(|named| hits(name, named)))
                    .flatten()
                    .collect(),
                // Empty: every distinct name.
                None => census
                    .by_name
                    .iter()
                    .filter(|(name, _)| name.contains(needle))
                    .flat_map(|(name, named)| hits(name, named))
                    .collect(),
            }
        };
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }

    /// A page of the web API's listing — public, named repositories with a canonical head and
    /// no `block` policy — in `order`, leaving out `excluded` (what the caller hides besides:
    /// repositories of suspended tenants), from position `skip` of what remains: each
    /// repository with the seed count shown (at least 1), and how many remain in all. Costs
    /// the page, the excluded set and one pass over the listing's blocks, never a record.
    pub fn listing_page(
        &self,
        order: ListOrder,
        skip: usize,
        take: usize,
        excluded: &HashSet<RepoId>,
    ) -> (Vec<(RepoId, usize)>, usize) {
        use std::cmp::Reverse;
        let census = self.census();
        let key = |rid: &RepoId| {
            census
                .repos
                .get(rid)
                .map(|e| (Reverse(e.shown_seeds()), *rid))
        };
        let listed: Vec<&RepoId> = excluded
            .iter()
            .filter(|rid| census.listed.contains(rid))
            .collect();
        let total = census.listed.len() - listed.len();
        // The position of the `skip`-th entry that is not excluded.
        let mut ranks: Vec<usize> = listed
            .iter()
            .filter_map(|rid| match order {
                ListOrder::Rid => Some(census.listed.rank(rid)),
                ListOrder::Seeding => key(rid).map(|k| census.by_seeds.rank(&k)),
            })
            .collect();
        ranks.sort_unstable();
        let mut pos = skip;
        for r in ranks {
            if r <= pos {
                pos += 1;
            } else {
                break;
            }
        }
        let seeds = |rid: &RepoId| {
            census
                .repos
                .get(rid)
                .map_or(1, |e| e.shown_seeds() as usize)
        };
        let page = match order {
            ListOrder::Rid => census
                .listed
                .iter_from(pos)
                .filter(|rid| !excluded.contains(rid))
                .take(take)
                .map(|rid| (*rid, seeds(rid)))
                .collect(),
            ListOrder::Seeding => census
                .by_seeds
                .iter_from(pos)
                .filter(|(_, rid)| !excluded.contains(rid))
                .take(take)
                .map(|(n, rid)| (*rid, n.0 as usize))
                .collect(),
        };
        (page, total)
    }

    /// Of `rids`, those in the listing ([`Index::listing_page`]), each with its seed count
    /// shown, in `order`: O(`rids`), from memory.
    pub fn listed_of(&self, rids: &[RepoId], order: ListOrder) -> Vec<(RepoId, usize)> {
        let census = self.census();
        let mut out: Vec<(RepoId, usize)> = rids
            .iter()
            .filter(|rid| census.listed.contains(rid))
            .map(|rid| {
                let seeds = census
                    .repos
                    .get(rid)
                    .map_or(1, |e| e.shown_seeds() as usize);
                (*rid, seeds)
            })
            .collect();
        match order {
            ListOrder::Rid => out.sort_unstable_by_key(|r| r.0),
            ListOrder::Seeding => out.sort_unstable_by_key(|r| (std::cmp::Reverse(r.1), r.0)),
        }
        out.dedup_by_key(|r| r.0);
        out
    }

    /// The indexed repositories `nid` is a delegate of, from memory.
    pub fn delegated_by(&self, nid: &NodeId) -> Vec<RepoId> {
        self.census()
            .by_delegate
            .get(nid)
            .map(|n| n.to_set().into_iter().collect())
            .unwrap_or_default()
    }

    /// Every indexed repository with who may see it: `None` for a public one, else its
    /// delegates and allow list. From memory, no record decoded (the gossip layer's
    /// visibility maps at start, rescans and policy or tenant changes).
    pub fn for_each_visibility(&self, mut f: impl FnMut(RepoId, Option<(&[NodeId], &[NodeId])>)) {
        let census = self.census();
        for (rid, e) in &census.repos {
            f(*rid, e.allow.as_deref().map(|allow| (&*e.delegates, allow)));
        }
    }

    /// The public indexed repositories in RID order, from memory.
    pub fn public_repos(&self) -> Vec<RepoId> {
        let mut out: Vec<RepoId> = self
            .census()
            .repos
            .iter()
            .filter(|(_, e)| e.public)
            .map(|(rid, _)| *rid)
            .collect();
        out.sort_unstable();
        out
    }

    /// Whether `rid` is indexed and public, from memory.
    pub fn is_public(&self, rid: &RepoId) -> bool {
        self.census().repos.get(rid).is_some_and(|e| e.public)
    }

    /// The whole listing in RID order ([`Index::listing_page`] without paging), from memory.
    pub fn listing(&self) -> Vec<RepoId> {
        self.listing_at().0
    }

    /// [`Index::listing`], with the count of census changes it was read at.
    pub fn listing_at(&self) -> (Vec<RepoId>, u64) {
        let census = self.census();
        (
            census.listed.iter_from(0).copied().collect(),
            census.changes,
        )
    }

    /// How many changes the census has seen (entries, policies, seed counts): anything
    /// computed from [`Index::listing_at`] at this count is still current.
    pub fn listing_changes(&self) -> u64 {
        self.census().changes
    }

    /// The seed count the web API shows for an indexed repository (at least 1), from memory.
    pub fn shown_seeds(&self, rid: &RepoId) -> usize {
        self.census()
            .repos
            .get(rid)
            .map_or(1, |e| e.shown_seeds() as usize)
    }

    /// The name of an indexed repository, from memory.
    pub fn repo_name(&self, rid: &RepoId) -> Option<String> {
        self.census().repos.get(rid).map(|e| e.name.to_string())
    }

    /// When an indexed repository was last indexed (its record's `indexed_at`), from memory.
    pub fn indexed_at(&self, rid: &RepoId) -> Option<u64> {
        self.census().repos.get(rid).map(|e| e.indexed_at)
    }

    /// [`Index::indexed_at`] of each of `rids`, under one lock (an inventory ranking asks for
    /// every held repository).
    pub fn indexed_at_each(&self, rids: &[RepoId]) -> Vec<Option<u64>> {
        let census = self.census();
        rids.iter()
            .map(|rid| census.repos.get(rid).map(|e| e.indexed_at))
            .collect()
    }

    fn census(&self) -> std::sync::MutexGuard<'_, Census> {
        self.census.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The stored ref snapshot of a repository.
    pub fn refs(&self, rid: &RepoId) -> Result<Vec<(String, RefTarget)>, IndexError> {
        self.refs_under(rid, "")
    }

    /// The refs of `rid` whose names start with `prefix` (e.g. `refs/heads/`), read from the
    /// first such key on: the scan costs those refs, not the repository's namespaces.
    pub fn refs_under(
        &self,
        rid: &RepoId,
        prefix: &str,
    ) -> Result<Vec<(String, RefTarget)>, IndexError> {
        let mut out = Vec::new();
        self.each_ref_under(rid, prefix, |name, v| {
            out.push((name, decode_target(v)?));
            Ok(())
        })?;
        Ok(out)
    }

    /// [`Index::refs_under`], with the commit each direct ref leads to after its tags:
    /// `Some(Some(commit))`; `Some(None)` when it leads to a tree or a blob; `None` when the
    /// index does not know (a symbolic ref, a missing object, or refs written before kinds
    /// were kept — then read the repository).
    pub fn refs_under_commits(
        &self,
        rid: &RepoId,
        prefix: &str,
    ) -> Result<Vec<RefCommit>, IndexError> {
        let mut out = Vec::new();
        self.each_ref_under(rid, prefix, |name, v| {
            let (target, peel) = decode_peeled(v)?;
            let commit = match &target {
                RefTarget::Oid(oid) => peel.commit(*oid),
                RefTarget::Symbolic(_) => None,
            };
            out.push((name, target, commit));
            Ok(())
        })?;
        Ok(out)
    }

    fn each_ref_under(
        &self,
        rid: &RepoId,
        prefix: &str,
        mut each: impl FnMut(String, &[u8]) -> Result<(), IndexError>,
    ) -> Result<(), IndexError> {
        let start = [rid.as_bytes().as_slice(), prefix.as_bytes()].concat();
        for item in self.db.prefix_iterator_cf(self.cf(CF_REFS)?, &start) {
            let (k, v) = item?;
            if !k.starts_with(&start) {
                break;
            }
            each(String::from_utf8_lossy(&k[20..]).into_owned(), &v)?;
        }
        Ok(())
    }

    /// Every ref of `rid` with what it peels to ([`Peel::Unknown`] for symbolic refs), the
    /// name's bytes as stored, in key (bytewise name) order.
    pub(crate) fn refs_peeled(
        &self,
        rid: &RepoId,
    ) -> Result<Vec<(Vec<u8>, RefTarget, Peel)>, IndexError> {
        let mut out = Vec::new();
        for item in self
            .db
            .prefix_iterator_cf(self.cf(CF_REFS)?, rid.as_bytes())
        {
            let (k, v) = item?;
            if !k.starts_with(rid.as_bytes()) {
                break;
            }
            let (target, peel) = decode_peeled(&v)?;
            out.push((k[20..].to_vec(), target, peel));
        }
        Ok(out)
    }

    /// Whether `rid` is marked by [`Index::mark_dirty`] (its refs may be ahead of the index).
    pub fn is_dirty(&self, rid: &RepoId) -> Result<bool, IndexError> {
        Ok(self
            .db
            .get_pinned_cf(self.cf(CF_META)?, dirty_key(rid))?
            .is_some())
    }

    /// Whether `rid` is indexed (from memory).
    pub fn holds(&self, rid: &RepoId) -> bool {
        self.census().repos.contains_key(rid)
    }

    pub fn sigrefs(&self, rid: &RepoId) -> Result<Vec<SigrefsRecord>, IndexError> {
        let mut out = Vec::new();
        for item in self
            .db
            .prefix_iterator_cf(self.cf(CF_SIGREFS)?, rid.as_bytes())
        {
            let (k, v) = item?;
            if !k.starts_with(rid.as_bytes()) {
                break;
            }
            out.push(values::decode(&k, &v)?);
        }
        Ok(out)
    }

    /// Replace everything known about `record.rid` in one atomic batch.
    pub fn put_repo(
        &self,
        record: &RepoRecord,
        refs: &[(String, RefTarget)],
        sigrefs: &[SigrefsRecord],
    ) -> Result<(), IndexError> {
        self.put_repo_peeled(record, refs, &Peels::new(), sigrefs)
    }

    /// [`Index::put_repo`], with what the direct refs peel to ([`Peel::Unknown`] when absent).
    pub(crate) fn put_repo_peeled(
        &self,
        record: &RepoRecord,
        refs: &[(String, RefTarget)],
        peels: &Peels,
        sigrefs: &[SigrefsRecord],
    ) -> Result<(), IndexError> {
        let rid = record.rid;
        let mut batch = self.batch();
        self.delete_repo_into(&mut batch, &rid)?;
        let value = values::encode(rid.as_bytes(), record, self.values)?;
        batch.put(CF_REPOS, rid.as_bytes(), value)?;
        for (name, target) in refs {
            let mut key = rid.as_bytes().to_vec();
            key.extend_from_slice(name.as_bytes());
            batch.put(CF_REFS, key, encode_target(target, peel_of(peels, name)))?;
        }
        for s in sigrefs {
            let mut key = rid.as_bytes().to_vec();
            key.extend_from_slice(s.nid.as_bytes());
            let value = values::encode(&key, s, self.values)?;
            batch.put(CF_SIGREFS, key, value)?;
        }
        let mut census = self.census();
        self.commit(batch)?;
        census.insert(record, || self.seed_count(&rid).unwrap_or(0) as u32);
        Ok(())
    }

    /// Apply what changed in a repository already indexed, in one atomic batch: its record,
    /// the refs that moved or appeared (`refs`), the refs that went (`gone`), the signed refs
    /// outcomes of the namespaces re-verified (`sigrefs`) and of those that went
    /// (`gone_namespaces`). Nothing else of the repository is rewritten.
    pub fn update_repo(&self, delta: &RepoDelta<'_>) -> Result<(), IndexError> {
        let rid = delta.record.rid;
        let mut batch = self.batch();
        let value = values::encode(rid.as_bytes(), delta.record, self.values)?;
        batch.put(CF_REPOS, rid.as_bytes(), value)?;
        let key = |suffix: &[u8]| {
            let mut key = rid.as_bytes().to_vec();
            key.extend_from_slice(suffix);
            key
        };
        for name in delta.gone {
            batch.delete(CF_REFS, key(name.as_bytes()))?;
        }
        for (name, target) in delta.refs {
            let peel = peel_of(delta.peels, name);
            batch.put(CF_REFS, key(name.as_bytes()), encode_target(target, peel))?;
        }
        for nid in delta.gone_namespaces {
            batch.delete(CF_SIGREFS, key(nid.as_bytes()))?;
        }
        for s in delta.sigrefs {
            let k = key(s.nid.as_bytes());
            let value = values::encode(&k, s, self.values)?;
            batch.put(CF_SIGREFS, k, value)?;
        }
        let mut census = self.census();
        self.commit(batch)?;
        census.insert(delta.record, || self.seed_count(&rid).unwrap_or(0) as u32);
        Ok(())
    }

    /// Before a fetch moves the refs of a repository whose new identity document is private:
    /// the record takes that visibility now, so that nothing the same fetch brings is served
    /// as public between the refs moving and the re-index (which writes the whole record).
    /// Only ever narrows: nothing for a public `visibility` or an unknown repository. Returns
    /// whether the record changed.
    pub fn narrow_visibility(
        &self,
        rid: &RepoId,
        visibility: &crate::storage::Visibility,
    ) -> Result<bool, IndexError> {
        if visibility.is_public() {
            return Ok(false);
        }
        let Some(mut record) = self.repo(rid)? else {
            return Ok(false);
        };
        if record.visibility == *visibility {
            return Ok(false);
        }
        record.visibility = visibility.clone();
        self.update_repo(&RepoDelta {
            record: &record,
            refs: &[],
            peels: &Peels::new(),
            gone: &[],
            sigrefs: &[],
            gone_namespaces: &[],
        })?;
        Ok(true)
    }

    /// Journal a repository whose refs are about to change (a fetch applies refs, then
    /// re-indexes it and clears the mark): a crash in between leaves the mark, and the next
    /// start re-reads that repository. Synced (CF `meta`), so it is on disk before the refs move.
    pub fn mark_dirty(&self, rid: &RepoId) -> Result<(), IndexError> {
        self.put(CF_META, dirty_key(rid), [])
    }

    /// Whether the one-off step `name` is recorded as done (CF `meta`, key `done/<name>`).
    pub fn done(&self, name: &str) -> Result<bool, IndexError> {
        Ok(self
            .db
            .get_pinned_cf(self.cf(CF_META)?, done_key(name))?
            .is_some())
    }

    /// Records the one-off step `name` as done (synced: it is not redone after a crash).
    pub fn set_done(&self, name: &str) -> Result<(), IndexError> {
        self.put(CF_META, done_key(name), [])
    }

    /// The repository is indexed as it is on disk ([`Index::mark_dirty`]).
    pub fn clear_dirty(&self, rid: &RepoId) -> Result<(), IndexError> {
        self.delete(CF_META, dirty_key(rid))
    }

    /// Repositories marked by [`Index::mark_dirty`] and not cleared since.
    pub fn dirty(&self) -> Result<Vec<RepoId>, IndexError> {
        let mut out = Vec::new();
        let iter = self.db.iterator_cf(
            self.cf(CF_META)?,
            rocksdb::IteratorMode::From(DIRTY_PREFIX, rocksdb::Direction::Forward),
        );
        for item in iter {
            let (k, _) = item?;
            let Some(rid) = k.strip_prefix(DIRTY_PREFIX) else {
                break;
            };
            let bytes: [u8; 20] = rid.try_into().map_err(|_| IndexError::Corrupt {
                cf: CF_META,
                key: None,
                reason: format!("dirty mark of {} bytes", rid.len()),
            })?;
            out.push(RepoId::from_oid_bytes(bytes));
        }
        Ok(out)
    }

    /// Remember the bytes on disk of a repository (tenant quotas), so a start reads it instead
    /// of walking the directory. Not synced: a size lost in a crash is measured again.
    pub fn put_repo_size(&self, rid: &RepoId, bytes: u64) -> Result<(), IndexError> {
        self.put(CF_FETCH_STATE, size_key(rid), bytes.to_be_bytes())
    }

    pub fn delete_repo_size(&self, rid: &RepoId) -> Result<(), IndexError> {
        self.delete(CF_FETCH_STATE, size_key(rid))
    }

    /// Every remembered repository size ([`Index::put_repo_size`]).
    pub fn repo_sizes(&self) -> Result<HashMap<RepoId, u64>, IndexError> {
        let mut opts = rocksdb::ReadOptions::default();
        opts.set_total_order_seek(true);
        let mut out = HashMap::new();
        let iter = self.db.iterator_cf_opt(
            self.cf(CF_FETCH_STATE)?,
            opts,
            rocksdb::IteratorMode::From(SIZE_PREFIX, rocksdb::Direction::Forward),
        );
        for item in iter {
            let (k, v) = item?;
            let Some(rid) = k.strip_prefix(SIZE_PREFIX) else {
                break;
            };
            let corrupt = |what: &str| IndexError::Corrupt {
                cf: CF_FETCH_STATE,
                key: None,
                reason: format!("size record: {what}"),
            };
            let rid: [u8; 20] = rid.try_into().map_err(|_| corrupt("key"))?;
            let bytes: [u8; 8] = (*v).try_into().map_err(|_| corrupt("value"))?;
            out.insert(RepoId::from_oid_bytes(rid), u64::from_be_bytes(bytes));
        }
        Ok(out)
    }

    /// Every repository the index holds (from memory).
    pub fn indexed(&self) -> Vec<RepoId> {
        self.census().repos.keys().copied().collect()
    }

    /// Forget a repository (it left storage).
    pub fn remove_repo(&self, rid: &RepoId) -> Result<(), IndexError> {
        let mut batch = self.batch();
        self.delete_repo_into(&mut batch, rid)?;
        let mut census = self.census();
        self.commit(batch)?;
        census.remove(rid);
        Ok(())
    }

    /// Deletes, in `batch`, the record of `rid` and every ref and signed refs entry it has,
    /// key by key. Not RocksDB range deletions: the index writes one per repository when it is
    /// rebuilt, and every prefix scan then had to step through range tombstones until a
    /// compaction dropped them — at 100,000 repositories the largest index cost of a fetch.
    /// A repository's keys are few (its refs); finding them is one prefix scan per family (a
    /// new repository's answered by the prefix bloom filter).
    fn delete_repo_into(&self, batch: &mut Batch<'_>, rid: &RepoId) -> Result<(), IndexError> {
        batch.delete(CF_REPOS, rid.as_bytes())?;
        for cf in [CF_REFS, CF_SIGREFS] {
            for item in self.db.prefix_iterator_cf(self.cf(cf)?, rid.as_bytes()) {
                let (k, _) = item?;
                if !k.starts_with(rid.as_bytes()) {
                    break;
                }
                batch.delete(cf, &k)?;
            }
        }
        Ok(())
    }
}

/// Key in CF `meta` of a one-off step recorded by [`Index::set_done`].
fn done_key(name: &str) -> Vec<u8> {
    [b"done/".as_slice(), name.as_bytes()].concat()
}

/// Key prefix of [`Index::mark_dirty`] marks in CF `meta` (followed by the 20-byte RID).
const DIRTY_PREFIX: &[u8] = b"dirty/";

/// Key prefix of [`Index::put_repo_size`] records in CF `fetch_state` (then the 20-byte RID).
const SIZE_PREFIX: &[u8] = b"size/";

fn size_key(rid: &RepoId) -> Vec<u8> {
    [SIZE_PREFIX, &rid.as_bytes()[..]].concat()
}

fn dirty_key(rid: &RepoId) -> Vec<u8> {
    let mut key = DIRTY_PREFIX.to_vec();
    key.extend_from_slice(rid.as_bytes());
    key
}

fn peel_of<'a>(peels: &'a Peels, name: &str) -> &'a Peel {
    peels.get(name).unwrap_or(&Peel::Unknown)
}

/// A `refs` value (see the schema above).
fn encode_target(t: &RefTarget, peel: &Peel) -> Vec<u8> {
    match (t, peel) {
        (RefTarget::Oid(oid), Peel::Unknown) => oid.as_bytes().to_vec(),
        (RefTarget::Oid(oid), Peel::Plain(end)) => [oid.as_bytes(), &[end_byte(*end)]].concat(),
        (RefTarget::Oid(oid), Peel::Tag(peeled, End::Unknown)) => {
            [oid.as_bytes(), peeled.as_bytes()].concat()
        }
        (RefTarget::Oid(oid), Peel::Tag(peeled, end)) => {
            [oid.as_bytes(), peeled.as_bytes(), &[end_byte(*end)]].concat()
        }
        (RefTarget::Symbolic(name), _) => format!("ref: {name}").into_bytes(),
    }
}

fn decode_target(v: &[u8]) -> Result<RefTarget, IndexError> {
    decode_peeled(v).map(|(t, _)| t)
}

fn decode_peeled(v: &[u8]) -> Result<(RefTarget, Peel), IndexError> {
    if let Some(name) = v.strip_prefix(b"ref: ") {
        return Ok((
            RefTarget::Symbolic(String::from_utf8_lossy(name).into_owned()),
            Peel::Unknown,
        ));
    }
    let corrupt = |reason: String| IndexError::Corrupt {
        cf: CF_REFS,
        key: None,
        reason,
    };
    let oid = |b: &[u8]| {
        gix::ObjectId::try_from(b).map_err(|e| corrupt(crate::logging::chain(&e).to_string()))
    };
    match v.len() {
        20 => Ok((RefTarget::Oid(oid(v)?), Peel::Unknown)),
        21 => Ok((
            RefTarget::Oid(oid(&v[..20])?),
            Peel::Plain(byte_end(v[20])?),
        )),
        40 => Ok((
            RefTarget::Oid(oid(&v[..20])?),
            Peel::Tag(oid(&v[20..])?, End::Unknown),
        )),
        41 => Ok((
            RefTarget::Oid(oid(&v[..20])?),
            Peel::Tag(oid(&v[20..40])?, byte_end(v[40])?),
        )),
        n => Err(corrupt(format!("a ref value of {n} bytes"))),
    }
}

/// The kind byte of a `refs` value (0: not known, as written before kinds were kept).
fn end_byte(end: End) -> u8 {
    match end {
        End::Unknown => 0,
        End::Commit => 1,
        End::Other => 2,
    }
}

fn byte_end(b: u8) -> Result<End, IndexError> {
    match b {
        0 => Ok(End::Unknown),
        1 => Ok(End::Commit),
        2 => Ok(End::Other),
        b => Err(IndexError::Corrupt {
            cf: CF_REFS,
            key: None,
            reason: format!("a ref value's object kind {b}"),
        }),
    }
}

impl From<rocksdb::Error> for IndexError {
    fn from(e: rocksdb::Error) -> Self {
        IndexError::Db(e)
    }
}

#[cfg(test)]
mod tests;
