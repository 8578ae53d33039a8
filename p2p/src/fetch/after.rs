//! Replication's steps after a fetch created or changed a repository, in order: re-index it
//! (identity document, signed refs verification), measure it for its tenants' storage quotas,
//! update every identity's view of it (visibility, inventory). They run on the blocking pool, never on an async
//! worker; the refs announcement (the pusher's acknowledgement) follows in `fetch`.

use std::sync::Arc;

use seedd_proto::crypto::RepoId;

use super::REINDEX_WAIT;
use crate::identity::Identities;
use seedd_core::blocking::{self, BlockingError};
use seedd_core::index::scan;
use seedd_core::index::Index;
use seedd_core::maintain::{Maintainer, RepoLocks};
use seedd_core::metrics::Metrics;
use seedd_core::serve::refcache::RefCache;
use seedd_core::storage::Storage;
use seedd_core::tenant::Tenants;

/// What the after-fetch steps touch. Cheap to clone.
#[derive(Clone)]
pub struct AfterFetch {
    inner: Arc<Parts>,
}

struct Parts {
    storage: Storage,
    index: Index,
    tenants: Tenants,
    identities: Identities,
    refs: Arc<RefCache>,
    metrics: Arc<Metrics>,
    /// Told of every changed repository (debounced maintenance); its per-repository lock
    /// serialises fetches with maintenance and purges.
    maintainer: Maintainer,
}

impl AfterFetch {
    pub fn new(
        storage: Storage,
        index: Index,
        tenants: Tenants,
        identities: Identities,
        refs: Arc<RefCache>,
        metrics: Arc<Metrics>,
        maintainer: Maintainer,
    ) -> Self {
        Self {
            inner: Arc::new(Parts {
                storage,
                index,
                tenants,
                identities,
                refs,
                metrics,
                maintainer,
            }),
        }
    }

    /// Every step for `rid` on the blocking pool, waiting at most [`REINDEX_WAIT`] (past it
    /// the fetch goes on and the steps finish in the background).
    pub(super) async fn run(&self, rid: RepoId) {
        // First: the refs changed, so advertisements must stop using the old snapshot now.
        self.inner.refs.invalidate(&rid);
        let this = self.clone();
        let steps = move || {
            this.reindex(rid);
            this.measure(rid);
            this.refresh_inventory(rid);
        };
        match blocking::run(REINDEX_WAIT, steps).await {
            Ok(()) => {}
            Err(e @ BlockingError::Deadline(_)) => {
                tracing::warn!(%rid, error = %seedd_core::logging::chain(&e), "re-indexing after a fetch is slow; not waiting for it")
            }
            Err(e) => {
                tracing::error!(%rid, error = %seedd_core::logging::chain(&e), "re-indexing after a fetch failed")
            }
        }
        // Last: the fetch left a pack and loose refs; maintenance looks once fetches pause.
        self.inner.maintainer.after_fetch(rid);
    }

    /// Journal that `rid`'s refs are about to change ([`seedd_core::index::Index::mark_dirty`]);
    /// the re-index in [`AfterFetch::run`] clears it.
    pub(super) async fn mark_dirty(&self, rid: RepoId) -> Result<(), super::FetchError> {
        // A synced write: on the blocking pool.
        let index = self.inner.index.clone();
        match blocking::run(REINDEX_WAIT, move || index.mark_dirty(&rid)).await {
            Ok(r) => r.map_err(super::FetchError::Journal),
            Err(e) => Err(super::FetchError::Io(std::io::Error::other(e.to_string()))),
        }
    }

    /// Takes back [`AfterFetch::mark_dirty`] for a clone that moved nothing into storage. A
    /// failure leaves the mark: the next start looks, finds no repository and clears it.
    pub(super) async fn clear_mark(&self, rid: RepoId) {
        let index = self.inner.index.clone();
        if let Ok(Err(e)) = blocking::run(REINDEX_WAIT, move || index.clear_dirty(&rid)).await {
            tracing::debug!(%rid, error = %seedd_core::logging::chain(&e), "clearing the journal mark of a failed clone; the next start clears it");
        }
    }

    /// The per-repository lock a fetch holds (shared with maintenance and purges).
    pub(crate) fn locks(&self) -> &RepoLocks {
        self.inner.maintainer.locks()
    }

    /// Re-read the repository into the index (identity, signed refs verification).
    fn reindex(&self, rid: RepoId) {
        let p = &self.inner;
        match scan::index_repo_counted(&p.storage, &p.index, rid) {
            Ok((indexed, work)) => {
                if let Err(e) = p.index.clear_dirty(&rid) {
                    tracing::warn!(%rid, error = %seedd_core::logging::chain(&e), "clearing the re-index mark; the next start re-reads this repository");
                }
                if indexed == scan::Indexed::Unchanged {
                    return;
                }
                let m = &p.metrics;
                m.reindex_repos.inc();
                let ns = &m.reindex_namespaces;
                ns.with_label_values(&["verified"])
                    .inc_by(work.verified as u64);
                ns.with_label_values(&["reused"]).inc_by(work.reused as u64);
                m.reindex_refs_written.inc_by(work.refs_written as u64);
                // O(1): the index keeps its counts in memory.
                let counts = p.index.repo_counts();
                let public = i64::try_from(counts.public).unwrap_or(i64::MAX);
                let total = i64::try_from(counts.total).unwrap_or(i64::MAX);
                m.repos_indexed.with_label_values(&["public"]).set(public);
                m.repos_indexed
                    .with_label_values(&["private"])
                    .set(total - public);
            }
            Err(e) => {
                tracing::error!(%rid, error = %seedd_core::logging::chain(&e), "re-indexing after fetch failed")
            }
        }
    }

    /// Bytes on disk of a repository tenants hold (quota accounting).
    fn measure(&self, rid: RepoId) {
        let p = &self.inner;
        if !p.tenants.claimants(&rid).is_empty() {
            let path = p.storage.path_of(&rid);
            p.tenants
                .set_size(rid, Some(seedd_core::tenant::dir_size(&path)));
            p.tenants.refresh_metrics();
        }
    }

    /// The repository's visibility and inventory membership, for every identity (this
    /// repository only: no other record is read).
    fn refresh_inventory(&self, rid: RepoId) {
        self.inner.identities.repo_changed(rid);
    }
}
