//! Reconcile the index with storage: on start, on SIGHUP and on an admin rescan.
//!
//! A repository is re-read only when its ref listing changed (fingerprint over ref names and
//! targets): startup reads refs, never walks objects of unchanged repositories.

use std::collections::{BTreeMap, BTreeSet};
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

/// Bring the index in line with storage.
pub(crate) fn reconcile(storage: &Storage, index: &Index) -> Result<ScanReport, ScanError> {
    let started = Instant::now();
    let on_disk = storage.list()?;
    let mut report = ScanReport {
        scanned: on_disk.len(),
        ..ScanReport::default()
    };
    tracing::info!(repos = on_disk.len(), root = %storage.root().display(), "indexing storage");
    let present: BTreeSet<RepoId> = on_disk.iter().copied().collect();
    for (i, rid) in on_disk.iter().enumerate() {
        match index_repo(storage, index, *rid) {
            Ok(Indexed::Added) => report.added += 1,
            Ok(Indexed::Updated) => report.updated += 1,
            Ok(Indexed::Unchanged) => report.unchanged += 1,
            Err(ScanError::Index(e)) => return Err(ScanError::Index(e)),
            Err(e) => {
                tracing::warn!(rid = %rid, error = %e, "repository not indexed: fix or remove it, then rescan");
                report.failed += 1;
                report.errors.push(format!("{rid}: {e}"));
                // A repository we cannot read must not keep being served from a stale record.
                index.remove_repo(rid)?;
            }
        }
        if (i + 1) % 500 == 0 {
            tracing::info!(done = i + 1, total = on_disk.len(), "indexing storage");
        }
    }
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
