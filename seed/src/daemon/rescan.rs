//! Storage rescans (start, `seedctl rescan`): reconcile the index with storage,
//! publish the result in metrics, then measure tenants' repositories and refresh every
//! identity's inventory.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use seedd_core::index::scan::{self, ScanReport};
use seedd_core::index::Index;
use seedd_core::metrics::Metrics;
use seedd_core::serve::refcache::RefCache;
use seedd_core::storage::Storage;
use seedd_core::tenant::Tenants;
use seedd_p2p::identity::Identities;
use seedd_proto::crypto::RepoId;

/// One rescan at a time. Cheap to clone.
#[derive(Clone)]
pub(super) struct Rescanner {
    storage: Storage,
    index: Index,
    metrics: Arc<Metrics>,
    tenants: Tenants,
    identities: Identities,
    /// Ref snapshots: refs may have been changed outside seedd.
    refs: Arc<RefCache>,
    /// Serialises rescans so two never overlap.
    lock: Arc<Mutex<()>>,
}

impl Rescanner {
    pub(super) fn new(
        storage: Storage,
        index: Index,
        metrics: Arc<Metrics>,
        tenants: Tenants,
        identities: Identities,
        refs: Arc<RefCache>,
    ) -> Self {
        Self {
            storage,
            index,
            metrics,
            tenants,
            identities,
            refs,
            lock: Arc::new(Mutex::new(())),
        }
    }

    /// Reconcile, then (when it succeeded) tenants' repository sizes and every identity's
    /// inventory.
    pub(super) fn rescan(&self) -> Result<ScanReport, String> {
        let report = self.reconcile()?;
        // Rescans exist for changes made outside seedd: any ref may have moved.
        self.refs.clear();
        let sizes = measure_tenant_repos(&self.storage, &self.index, &self.tenants, Measure::All);
        tracing::info!(
            measured = sizes.measured,
            gone = sizes.gone,
            "tenant repository sizes"
        );
        self.identities.refresh();
        Ok(report)
    }

    /// `seedctl rescan --repo`: only the repositories named (their ref snapshots dropped, the
    /// sizes of those tenants hold measured again), then every identity's inventory.
    pub(super) fn rescan_repos(&self, rids: &[RepoId]) -> Result<ScanReport, String> {
        let report =
            self.reconcile_with(|storage, index| scan::reconcile_repos(storage, index, rids))?;
        for rid in rids {
            self.refs.invalidate(rid);
        }
        let held: BTreeSet<RepoId> = rids
            .iter()
            .filter(|rid| !self.tenants.claimants(rid).is_empty())
            .copied()
            .collect();
        for rid in held {
            measure_one(&self.storage, &self.tenants, rid);
        }
        self.tenants.refresh_metrics();
        self.identities.refresh();
        Ok(report)
    }

    /// At start: index what is new or was left dirty ([`scan::reconcile_changed`]), then
    /// tenants' sizes (remembered ones kept, only the others walked) and every identity's
    /// inventory.
    pub(super) fn startup(&self) -> Result<ScanReport, String> {
        let report = self.reconcile_with(scan::reconcile_changed)?;
        let sizes =
            measure_tenant_repos(&self.storage, &self.index, &self.tenants, Measure::Unknown);
        tracing::info!(
            known = sizes.known,
            measured = sizes.measured,
            gone = sizes.gone,
            "tenant repository sizes"
        );
        self.identities.refresh();
        Ok(report)
    }

    fn reconcile(&self) -> Result<ScanReport, String> {
        self.reconcile_with(scan::reconcile)
    }

    fn reconcile_with(
        &self,
        pass: impl FnOnce(&Storage, &Index) -> Result<ScanReport, scan::ScanError>,
    ) -> Result<ScanReport, String> {
        let _guard = self
            .lock
            .lock()
            .map_err(|_| "rescan lock poisoned".to_owned())?;
        let started = Instant::now();
        let report = pass(&self.storage, &self.index).map_err(|e| e.to_string())?;
        let metrics = &self.metrics;
        metrics
            .scan_duration
            .observe(started.elapsed().as_secs_f64());
        let counts = self.index.repo_counts();
        let public = i64::try_from(counts.public).unwrap_or(i64::MAX);
        let total = i64::try_from(counts.total).unwrap_or(i64::MAX);
        metrics
            .repos_indexed
            .with_label_values(&["public"])
            .set(public);
        metrics
            .repos_indexed
            .with_label_values(&["private"])
            .set(total - public);
        Ok(report)
    }
}

/// Which tenant repositories [`measure_tenant_repos`] walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Measure {
    /// Every one (`seedctl rescan`: storage may have changed outside seedd).
    All,
    /// Only those without a remembered size (the start: sizes are remembered after each fetch).
    Unknown,
}

/// What [`measure_tenant_repos`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sizes {
    /// Remembered sizes kept without a walk.
    pub(super) known: usize,
    /// Directories walked.
    pub(super) measured: usize,
    /// Held repositories not (or no longer) in storage.
    pub(super) gone: usize,
}

/// Bytes on disk of every repository a tenant holds (quota accounting). With
/// [`Measure::Unknown`] a remembered size of a repository the index holds is kept as is.
pub(super) fn measure_tenant_repos(
    storage: &Storage,
    index: &Index,
    tenants: &Tenants,
    which: Measure,
) -> Sizes {
    let held: BTreeSet<_> = tenants
        .list()
        .into_iter()
        .flat_map(|(t, _)| t.repos.into_iter().map(|r| r.rid))
        .collect();
    let mut sizes = Sizes::default();
    for rid in held {
        if which == Measure::Unknown
            && tenants.size(&rid).is_some()
            && index.repo_name(&rid).is_some()
        {
            sizes.known += 1;
            continue;
        }
        match measure_one(storage, tenants, rid) {
            Some(_) => sizes.measured += 1,
            None => sizes.gone += 1,
        }
    }
    tenants.refresh_metrics();
    sizes
}

/// Bytes on disk of `rid` (`None`: not in storage), remembered for its tenants.
fn measure_one(storage: &Storage, tenants: &Tenants, rid: RepoId) -> Option<u64> {
    let path = storage.path_of(&rid);
    let size = path
        .join("HEAD")
        .exists()
        .then(|| seedd_core::tenant::dir_size(&path));
    tenants.set_size(rid, size);
    size
}
