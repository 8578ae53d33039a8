//! Replication's steps after a fetch created or changed a repository, in order: re-index it
//! (identity document, signed refs verification), measure it for its tenants' storage quotas,
//! refresh every identity's inventory. They run on the blocking pool, never on an async
//! worker; the refs announcement (the pusher's acknowledgement) follows in `fetch`.

use std::sync::Arc;

use seedd_proto::crypto::RepoId;

use super::REINDEX_WAIT;
use crate::blocking::{self, BlockingError};
use crate::identity::Identities;
use crate::index::scan;
use crate::index::Index;
use crate::maintain::{Maintainer, RepoLocks};
use crate::serve::refcache::RefCache;
use crate::storage::Storage;
use crate::tenant::Tenants;

/// What the after-fetch steps touch. Cheap to clone.
#[derive(Clone)]
pub(crate) struct AfterFetch {
    inner: Arc<Parts>,
}

struct Parts {
    storage: Storage,
    index: Index,
    tenants: Tenants,
    identities: Identities,
    refs: Arc<RefCache>,
    /// Told of every changed repository (debounced maintenance); its per-repository lock
    /// serialises fetches with maintenance and purges.
    maintainer: Maintainer,
}

impl AfterFetch {
    pub(crate) fn new(
        storage: Storage,
        index: Index,
        tenants: Tenants,
        identities: Identities,
        refs: Arc<RefCache>,
        maintainer: Maintainer,
    ) -> Self {
        Self {
            inner: Arc::new(Parts {
                storage,
                index,
                tenants,
                identities,
                refs,
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
            this.refresh_inventory();
        };
        match blocking::run(REINDEX_WAIT, steps).await {
            Ok(()) => {}
            Err(e @ BlockingError::Deadline(_)) => {
                tracing::warn!(%rid, error = %e, "re-indexing after a fetch is slow; not waiting for it")
            }
            Err(e) => tracing::error!(%rid, error = %e, "re-indexing after a fetch failed"),
        }
        // Last: the fetch left a pack and loose refs; maintenance looks once fetches pause.
        self.inner.maintainer.after_fetch(rid);
    }

    /// The per-repository lock a fetch holds (shared with maintenance and purges).
    pub(crate) fn locks(&self) -> &RepoLocks {
        self.inner.maintainer.locks()
    }

    /// Re-read the repository into the index (identity, signed refs verification).
    fn reindex(&self, rid: RepoId) {
        let p = &self.inner;
        if let Err(e) = scan::index_repo(&p.storage, &p.index, rid) {
            tracing::error!(%rid, error = %e, "re-indexing after fetch failed");
        }
    }

    /// Bytes on disk of a repository tenants hold (quota accounting).
    fn measure(&self, rid: RepoId) {
        let p = &self.inner;
        if !p.tenants.claimants(&rid).is_empty() {
            let path = p.storage.path_of(&rid);
            p.tenants
                .set_size(rid, Some(crate::tenant::dir_size(&path)));
            p.tenants.refresh_metrics();
        }
    }

    /// Every identity announces its inventory again.
    fn refresh_inventory(&self) {
        self.inner.identities.refresh();
    }
}
