//! Reconcile the index with storage: on start, on SIGHUP and on an admin rescan.
//!
//! A repository is re-read only when its ref listing changed (fingerprint over ref names and
//! targets): startup reads refs, never walks objects of unchanged repositories. Repositories
//! are read on up to one thread per core (at most [`MAX_SCAN_THREADS`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use sha1::{Digest, Sha1};

use super::{Index, IndexError, RepoRecord, SigrefsRecord};
use crate::crypto::RepoId;
use crate::storage::{RefTarget, Repo, Storage, StorageError};

#[derive(Debug, thiserror::Error)]
pub(crate) enum ScanError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Index(#[from] IndexError),
}

/// What a reconcile pass did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(crate) struct ScanReport {
    pub scanned: usize,
    pub added: usize,
    pub updated: usize,
    pub unchanged: usize,
    pub removed: usize,
    pub failed: usize,
    /// `rid: reason` for repositories that could not be indexed.
    pub errors: Vec<String>,
    pub duration_ms: u64,
}

/// Outcome for one repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Indexed {
    Added,
    Updated,
    Unchanged,
}

/// Threads reading repositories during a reconcile pass (at most the number of cores).
const MAX_SCAN_THREADS: usize = 8;

/// Bring the index in line with storage (repositories read in parallel, bounded).
pub(crate) fn reconcile(storage: &Storage, index: &Index) -> Result<ScanReport, ScanError> {
    let started = Instant::now();
    let on_disk = storage.list()?;
    let mut report = ScanReport {
        scanned: on_disk.len(),
        ..ScanReport::default()
    };
    tracing::info!(repos = on_disk.len(), root = %storage.root().display(), "indexing storage");
    let present: BTreeSet<RepoId> = on_disk.iter().copied().collect();
    // Repositories are independent: read them on a few threads (bounded by the cores), each
    // taking the next one from a shared counter, so one slow repository does not hold the rest.
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_SCAN_THREADS)
        .min(on_disk.len().max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let shared = Mutex::new((ScanReport::default(), None::<IndexError>));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(rid) = on_disk.get(i) else { break };
                let outcome = index_repo(storage, index, *rid);
                let failed = match &outcome {
                    Err(ScanError::Storage(_)) => index.remove_repo(rid).err(),
                    _ => None,
                };
                let mut guard = shared.lock().unwrap_or_else(|p| p.into_inner());
                let (report, fatal) = &mut *guard;
                match outcome {
                    Ok(Indexed::Added) => report.added += 1,
                    Ok(Indexed::Updated) => report.updated += 1,
                    Ok(Indexed::Unchanged) => report.unchanged += 1,
                    Err(ScanError::Index(e)) => {
                        fatal.get_or_insert(e);
                        // Stop every worker: the index itself failed.
                        next.store(usize::MAX / 2, Ordering::Relaxed);
                    }
                    Err(e) => {
                        tracing::warn!(rid = %rid, error = %e, "repository not indexed: fix or remove it, then rescan");
                        report.failed += 1;
                        report.errors.push(format!("{rid}: {e}"));
                        // A repository we cannot read must not keep being served from a
                        // stale record (removed above).
                        if let Some(e) = failed {
                            fatal.get_or_insert(e);
                        }
                    }
                }
                drop(guard);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if n % 5000 == 0 {
                    tracing::info!(done = n, total = on_disk.len(), "indexing storage");
                }
            });
        }
    });
    let (counts, fatal) = shared.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = fatal {
        return Err(ScanError::Index(e));
    }
    report.added = counts.added;
    report.updated = counts.updated;
    report.unchanged = counts.unchanged;
    report.failed = counts.failed;
    report.errors = counts.errors;
    report.errors.sort();
    for record in index.repos()? {
        if !present.contains(&record.rid) {
            index.remove_repo(&record.rid)?;
            report.removed += 1;
        }
    }
    report.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::info!(
        scanned = report.scanned,
        added = report.added,
        updated = report.updated,
        unchanged = report.unchanged,
        removed = report.removed,
        failed = report.failed,
        ms = report.duration_ms,
        "index reconciled with storage"
    );
    Ok(report)
}

/// (Re)index one repository if its refs changed.
pub(crate) fn index_repo(
    storage: &Storage,
    index: &Index,
    rid: RepoId,
) -> Result<Indexed, ScanError> {
    let repo = storage.repo(rid)?;
    let refs = repo.refs()?;
    let fingerprint = fingerprint(&refs);
    let previous = index.repo(&rid)?;
    if previous
        .as_ref()
        .is_some_and(|p| p.fingerprint == fingerprint)
    {
        return Ok(Indexed::Unchanged);
    }
    let (record, sigrefs) = build_record(&repo, &refs, fingerprint)?;
    let refs: Vec<(String, RefTarget)> = refs.into_iter().collect();
    index.put_repo(&record, &refs, &sigrefs)?;
    tracing::debug!(rid = %rid, refs = refs.len(), namespaces = record.namespaces.len(), "indexed repository");
    Ok(if previous.is_some() {
        Indexed::Updated
    } else {
        Indexed::Added
    })
}

fn build_record(
    repo: &Repo,
    refs: &BTreeMap<String, RefTarget>,
    fingerprint: String,
) -> Result<(RepoRecord, Vec<SigrefsRecord>), ScanError> {
    let rid = repo.rid();
    let identity = repo.identity()?;
    let project = identity.doc.project();
    let mut sigrefs = Vec::new();
    let mut namespaces = Vec::new();
    for nid in Repo::namespaces(refs) {
        match repo.verify_sigrefs(&nid) {
            Ok(s) => {
                namespaces.push(nid);
                sigrefs.push(SigrefsRecord {
                    nid,
                    commit: Some(s.commit.to_string()),
                    level: Some(s.level),
                    error: None,
                });
            }
            Err(e) => {
                tracing::warn!(rid = %rid, nid = %nid, error = %e, "signed refs do not verify; namespace not served");
                sigrefs.push(SigrefsRecord {
                    nid,
                    commit: None,
                    level: None,
                    error: Some(e.to_string()),
                });
            }
        }
    }
    let head = repo.resolve("HEAD")?.map(|o| o.to_string());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (name, description, default_branch) = match project {
        Some(p) => (p.name, p.description, p.default_branch),
        None => (String::new(), String::new(), String::new()),
    };
    let record = RepoRecord {
        rid,
        name,
        description,
        default_branch,
        delegates: identity.doc.delegates.clone(),
        threshold: identity.doc.threshold,
        visibility: identity.doc.visibility.clone(),
        identity_head: identity.head.to_string(),
        head,
        fingerprint,
        ref_count: refs.len(),
        namespaces,
        indexed_at: now,
    };
    Ok((record, sigrefs))
}

/// Hash of the ref listing: any ref change (including HEAD) changes it.
fn fingerprint(refs: &BTreeMap<String, RefTarget>) -> String {
    let mut h = Sha1::new();
    for (name, target) in refs {
        h.update(name.as_bytes());
        h.update([0]);
        match target {
            RefTarget::Oid(oid) => h.update(oid.as_bytes()),
            RefTarget::Symbolic(s) => {
                h.update(b"ref: ");
                h.update(s.as_bytes());
            }
        }
        h.update([b'\n']);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Repositories that cannot be read are counted, reported in a stable order and their
    /// stale records removed, whichever thread read them; directories that are not
    /// repositories are skipped.
    #[test]
    fn a_parallel_pass_reports_every_unreadable_repository_and_drops_its_record() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("storage");
        std::fs::create_dir_all(&root).unwrap();
        let storage = Storage::open(&root).unwrap();
        let index = Index::open(&dir.path().join("index")).unwrap();
        let rids: Vec<RepoId> = (1..=40u8)
            .map(|n| RepoId::from_oid_bytes([n; 20]))
            .collect();
        for rid in &rids {
            // Looks like a repository (a HEAD file) but is none.
            let path = storage.path_of(rid);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join("HEAD"), "not a ref\n").unwrap();
        }
        std::fs::create_dir_all(root.join("not-a-rid")).unwrap();
        let report = reconcile(&storage, &index).unwrap();
        assert_eq!(report.scanned, 40);
        assert_eq!(report.failed, 40, "{report:?}");
        assert_eq!(report.added + report.updated + report.unchanged, 0);
        assert_eq!(report.errors.len(), 40);
        let mut sorted = report.errors.clone();
        sorted.sort();
        assert_eq!(report.errors, sorted);
        assert!(index.repos().unwrap().is_empty());
    }
}
