//! Reconcile the index with storage: on start and on an admin rescan (`seedctl rescan`; SIGHUP only reloads the config).
//!
//! A full pass ([`reconcile`]) re-reads a repository only when its ref listing changed
//! (fingerprint over ref names and targets); the start ([`reconcile_changed`]) reads only
//! repositories new to the index or marked dirty by a fetch a crash interrupted. Repositories
//! are read on up to one thread per core (at most [`MAX_SCAN_THREADS`]); a re-read costs what
//! changed ([`index_repo_counted`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use sha1::{Digest, Sha1};

use super::adverts::{self, Peel, Peels};
use super::{Index, IndexError, RepoDelta, RepoRecord, SigrefsRecord};
use crate::storage::{RefTarget, Repo, Storage, StorageError};
use seedd_proto::crypto::{NodeId, RepoId};

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Index(#[from] IndexError),
}

/// What a reconcile pass did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct ScanReport {
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
pub enum Indexed {
    Added,
    Updated,
    Unchanged,
}

/// Threads reading repositories during a reconcile pass (at most the number of cores).
const MAX_SCAN_THREADS: usize = 8;

/// Bring the index in line with storage, reading every repository (`seedctl rescan`:
/// changes made outside seedd). Unchanged repositories cost a ref listing each.
pub fn reconcile(storage: &Storage, index: &Index) -> Result<ScanReport, ScanError> {
    pass(storage, index, Pass::Full)
}

/// Bring the index in line with storage at start: only repositories the index does not hold
/// and those a crash left marked ([`Index::mark_dirty`]: a fetch moved refs but did not
/// re-index) are read; repositories gone from storage are dropped. seedd is the only writer of
/// its storage, so every other repository is as indexed — changes made outside seedd need a
/// rescan (`seedctl rescan`).
pub fn reconcile_changed(storage: &Storage, index: &Index) -> Result<ScanReport, ScanError> {
    pass(storage, index, Pass::Changed)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    Full,
    Changed,
}

/// Repositories read in parallel, bounded (see the module documentation).
fn pass(storage: &Storage, index: &Index, kind: Pass) -> Result<ScanReport, ScanError> {
    let started = Instant::now();
    // Once, on the first start of an index written before `refs` kept peeled targets: every
    // repository is read so its refs are rewritten with them (advertisements then come from
    // the index; until then they read the repository, as before).
    let upgrade = kind == Pass::Changed && !index.done(PEELED_REFS)?;
    // A full rescan reads every repository's refs anyway: until one has gone through without
    // a failure, it also fills in what older versions did not keep (kinds); then it no longer
    // reads the indexed refs of unchanged repositories to look.
    let fill_kinds = kind == Pass::Full && !index.done(REFS_KINDS)?;
    let fill = upgrade || fill_kinds;
    let dirty: HashSet<RepoId> = index.dirty()?.into_iter().collect();
    // seedd is its storage's only writer and journals every change before making it (a fetch
    // marks the repository before its refs move and before a new one moves in, a purge before
    // its directory goes): a start with an index that a listing pass completed reads the
    // journaled repositories only — no listing of storage, no `stat` per repository (issue 30
    // §3: O(changed) at 1M). What changed outside seedd is found by `seedctl rescan`.
    if kind == Pass::Changed && !upgrade && index.done(LISTED)? {
        return journaled(storage, index, dirty, started);
    }
    let indexed: HashSet<RepoId> = match kind {
        Pass::Changed if !upgrade => index.indexed().into_iter().collect(),
        _ => HashSet::new(),
    };
    // An indexed repository's directory is taken as it is (no `stat` inside it): one whose
    // files were removed outside seedd is found by `seedctl rescan`.
    let on_disk = storage.list_with(&|rid| indexed.contains(rid))?;
    let mut report = ScanReport {
        scanned: on_disk.len(),
        ..ScanReport::default()
    };
    let present: BTreeSet<RepoId> = on_disk.iter().copied().collect();
    let to_read: Vec<RepoId> = match kind {
        Pass::Full => on_disk,
        Pass::Changed if upgrade => on_disk,
        Pass::Changed => on_disk
            .into_iter()
            .filter(|rid| !indexed.contains(rid) || dirty.contains(rid))
            .collect(),
    };
    let skipped = report.scanned - to_read.len();
    tracing::info!(
        repos = report.scanned,
        to_read = to_read.len(),
        root = %storage.root().display(),
        "indexing storage"
    );
    if upgrade && index.repo_counts().total > 0 {
        tracing::info!(
            repos = to_read.len(),
            "keeping peeled tag targets in the index (once after an upgrade): every repository's refs are read"
        );
    }
    // Repositories are independent: read them on a few threads (bounded by the cores), each
    // taking the next one from a shared counter, so one slow repository does not hold the rest.
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_SCAN_THREADS)
        .min(to_read.len().max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let shared = Mutex::new((ScanReport::default(), None::<IndexError>));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(rid) = to_read.get(i) else { break };
                let mut outcome =
                    index_repo_with(storage, index, *rid, fill).map(|(indexed, _)| indexed);
                if outcome.is_ok() && dirty.contains(rid) {
                    if let Err(e) = index.clear_dirty(rid) {
                        outcome = Err(e.into());
                    }
                }
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
                        tracing::warn!(rid = %rid, error = %crate::logging::chain(&e), "repository not indexed: fix or remove it, then rescan");
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
                    tracing::info!(done = n, total = to_read.len(), "indexing storage");
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
    report.unchanged = counts.unchanged + skipped;
    report.failed = counts.failed;
    report.errors = counts.errors;
    report.errors.sort();
    // From the in-memory census: no record is decoded to find what left storage.
    for rid in index.indexed() {
        if !present.contains(&rid) {
            index.remove_repo(&rid)?;
            report.removed += 1;
        }
    }
    for rid in dirty.iter().filter(|rid| !present.contains(rid)) {
        index.clear_dirty(rid)?;
    }
    if upgrade {
        index.set_done(PEELED_REFS)?;
    }
    // Storage and index agree now (a failed repository's record was dropped): later starts
    // may trust the journal.
    if !index.done(LISTED)? {
        index.set_done(LISTED)?;
    }
    if fill_kinds && report.failed == 0 {
        index.set_done(REFS_KINDS)?;
    }
    report.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::info!(
        scanned = report.scanned,
        read = to_read.len(),
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

/// [`Index::done`] once a pass listed storage and brought the index in line with it: from
/// then on every change seedd makes to storage is journaled first ([`Index::mark_dirty`]), so
/// a start reads the journaled repositories only ([`journaled`]). An index written by a
/// version that did not journal new repositories lists storage once more.
const LISTED: &str = "storage-listed";

/// The start of a seed whose index agrees with storage: only the repositories a fetch or purge
/// journaled and did not finish are read (or dropped, when their directory is gone).
fn journaled(
    storage: &Storage,
    index: &Index,
    dirty: HashSet<RepoId>,
    started: Instant,
) -> Result<ScanReport, ScanError> {
    let total = index.repo_counts().total;
    let mut dirty: Vec<RepoId> = dirty.into_iter().collect();
    dirty.sort();
    let (mut report, known) = read_each(storage, index, &dirty)?;
    // The others are as indexed.
    report.unchanged += total.saturating_sub(known);
    Ok(reported(
        report,
        started,
        "journaled repositories only (`seedctl rescan` finds changes made outside seedd)",
    ))
}

/// `report` with its duration, logged as the pass `what`.
fn reported(mut report: ScanReport, started: Instant, what: &'static str) -> ScanReport {
    report.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::info!(
        read = report.scanned,
        added = report.added,
        updated = report.updated,
        unchanged = report.unchanged,
        removed = report.removed,
        failed = report.failed,
        ms = report.duration_ms,
        pass = what,
        "index reconciled with storage"
    );
    report
}

/// Bring the index in line with storage for `rids` only (`seedctl rescan --repo`: repositories
/// changed, added or removed outside seedd, when the operator knows which): each is read, or
/// dropped from the index when its directory is gone. O(given), whatever storage holds.
pub fn reconcile_repos(
    storage: &Storage,
    index: &Index,
    rids: &[RepoId],
) -> Result<ScanReport, ScanError> {
    let started = Instant::now();
    let (report, _) = read_each(storage, index, rids)?;
    Ok(reported(report, started, "the repositories named"))
}

/// Reads each of `rids` into the index (refs re-peeled with their kinds), or drops its record
/// when its directory is gone or unreadable; clears its journal mark once the index agrees.
/// Returns the report and how many of them were indexed before.
fn read_each(
    storage: &Storage,
    index: &Index,
    rids: &[RepoId],
) -> Result<(ScanReport, usize), ScanError> {
    let mut report = ScanReport::default();
    let mut known = 0;
    for &rid in rids {
        report.scanned += 1;
        let was_indexed = index.indexed_at(&rid).is_some();
        known += usize::from(was_indexed);
        if !storage.path_of(&rid).is_dir() {
            if was_indexed {
                index.remove_repo(&rid)?;
                report.removed += 1;
            }
            index.clear_dirty(&rid)?;
            continue;
        }
        match index_repo_with(storage, index, rid, true) {
            Ok((indexed, _)) => {
                index.clear_dirty(&rid)?;
                match indexed {
                    Indexed::Added => report.added += 1,
                    Indexed::Updated => report.updated += 1,
                    Indexed::Unchanged => report.unchanged += 1,
                }
            }
            Err(ScanError::Index(e)) => return Err(ScanError::Index(e)),
            Err(e) => {
                tracing::warn!(rid = %rid, error = %crate::logging::chain(&e), "repository not indexed: fix or remove it, then rescan");
                // Not served from a stale record; the mark stays, so the next start retries.
                index.remove_repo(&rid)?;
                report.failed += 1;
                report.errors.push(format!("{rid}: {e}"));
            }
        }
    }
    Ok((report, known))
}

/// [`Index::done`] once every repository's refs were written with their peeled targets.
/// The kinds of object they lead to (kept since) are not a reason to read every repository
/// before the seed is ready: refs without them are rewritten when their repository is next
/// re-indexed or by a full rescan (`seedctl rescan`), and the web API reads the repository for
/// them meanwhile.
const PEELED_REFS: &str = "refs-peeled";

/// [`Index::done`] once a full rescan wrote every repository's refs with their kinds (refs
/// written since always have them; one whose object is missing is re-read when it changes).
const REFS_KINDS: &str = "refs-kinds";

/// What re-indexing one repository cost: work proportional to what changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    /// Namespaces whose signed refs were verified (new, moved, or failing before).
    pub verified: usize,
    /// Namespaces whose earlier outcome was kept (their signed refs did not move).
    pub reused: usize,
    /// Refs written or deleted in the index.
    pub refs_written: usize,
    /// Whether the identity document was read (`refs/rad/id` moved, or a new repository).
    pub identity_read: bool,
}

/// What the index held for a repository before this pass.
struct Prior {
    record: RepoRecord,
    /// Refs as indexed, and whether their peeled target is known.
    refs: BTreeMap<String, (RefTarget, Peel)>,
    sigrefs: HashMap<NodeId, SigrefsRecord>,
}

/// (Re)index one repository if its refs changed, saying what it did. A repository already
/// indexed is updated from the difference: only namespaces whose `rad/sigrefs` moved are
/// verified again, the identity is read again only if `refs/rad/id` moved, and only refs that
/// moved or went (or were indexed without their peeled target) are written.
pub fn index_repo_counted(
    storage: &Storage,
    index: &Index,
    rid: RepoId,
) -> Result<(Indexed, Work), ScanError> {
    index_repo_with(storage, index, rid, false)
}

/// [`index_repo_counted`]; with `upgrade`, a repository whose refs did not move is still
/// updated when some of its indexed refs lack their peeled target.
fn index_repo_with(
    storage: &Storage,
    index: &Index,
    rid: RepoId,
    upgrade: bool,
) -> Result<(Indexed, Work), ScanError> {
    let repo = storage.repo(rid)?;
    let refs = repo.refs()?;
    let fingerprint = fingerprint(&refs);
    let Some(previous) = index.repo(&rid)? else {
        let (record, sigrefs, mut work) = build_record(&repo, &refs, fingerprint, None)?;
        let refs: Vec<(String, RefTarget)> = refs.into_iter().collect();
        let peels = peels(&repo, &refs);
        index.put_repo_peeled(&record, &refs, &peels, &sigrefs)?;
        work.refs_written = refs.len();
        tracing::debug!(rid = %rid, refs = refs.len(), namespaces = record.namespaces.len(), "indexed repository");
        return Ok((Indexed::Added, work));
    };
    let indexed: BTreeMap<String, (RefTarget, Peel)> = if previous.fingerprint == fingerprint {
        if !upgrade {
            return Ok((Indexed::Unchanged, Work::default()));
        }
        let indexed = indexed_refs(index, &rid)?;
        if !indexed.values().any(unpeeled) {
            return Ok((Indexed::Unchanged, Work::default()));
        }
        indexed
    } else {
        indexed_refs(index, &rid)?
    };
    let prior = Prior {
        refs: indexed,
        sigrefs: index
            .sigrefs(&rid)?
            .into_iter()
            .map(|s| (s.nid, s))
            .collect(),
        record: previous,
    };
    let (record, sigrefs, mut work) = build_record(&repo, &refs, fingerprint, Some(&prior))?;
    // Moved, new, or indexed without its peeled target.
    let moved: Vec<(String, RefTarget)> = refs
        .iter()
        .filter(|(name, target)| match prior.refs.get(*name) {
            Some(before) => before.0 != **target || unpeeled(before),
            None => true,
        })
        .map(|(n, t)| (n.clone(), t.clone()))
        .collect();
    let peels = peels(&repo, &moved);
    let gone: Vec<String> = prior
        .refs
        .keys()
        .filter(|name| !refs.contains_key(*name))
        .cloned()
        .collect();
    let changed_sigrefs: Vec<SigrefsRecord> = sigrefs
        .into_iter()
        .filter(|s| prior.sigrefs.get(&s.nid) != Some(s))
        .collect();
    let present: BTreeSet<NodeId> = Repo::namespaces(&refs).into_iter().collect();
    let gone_namespaces: Vec<NodeId> = prior
        .sigrefs
        .keys()
        .filter(|nid| !present.contains(nid))
        .copied()
        .collect();
    index.update_repo(&RepoDelta {
        record: &record,
        refs: &moved,
        peels: &peels,
        gone: &gone,
        sigrefs: &changed_sigrefs,
        gone_namespaces: &gone_namespaces,
    })?;
    work.refs_written = moved.len() + gone.len();
    tracing::debug!(
        rid = %rid,
        refs_written = work.refs_written,
        verified = work.verified,
        reused = work.reused,
        "re-indexed repository"
    );
    Ok((Indexed::Updated, work))
}

/// The refs of `rid` as indexed.
fn indexed_refs(
    index: &Index,
    rid: &RepoId,
) -> Result<BTreeMap<String, (RefTarget, Peel)>, IndexError> {
    Ok(index
        .refs_peeled(rid)?
        .into_iter()
        .map(|(name, target, peel)| (String::from_utf8_lossy(&name).into_owned(), (target, peel)))
        .collect())
}

/// A direct ref indexed without its peeled target or the kind of object it leads to.
fn unpeeled((target, peel): &(RefTarget, Peel)) -> bool {
    matches!(target, RefTarget::Oid(_)) && peel.incomplete()
}

/// What the direct refs among `refs` peel to (an object header read each; tags read through).
fn peels(repo: &Repo, refs: &[(String, RefTarget)]) -> Peels {
    refs.iter()
        .filter_map(|(name, target)| match target {
            RefTarget::Oid(oid) => Some((name.clone(), adverts::peel(repo.git(), *oid))),
            RefTarget::Symbolic(_) => None,
        })
        .collect()
}

fn build_record(
    repo: &Repo,
    refs: &BTreeMap<String, RefTarget>,
    fingerprint: String,
    prior: Option<&Prior>,
) -> Result<(RepoRecord, Vec<SigrefsRecord>, Work), ScanError> {
    let rid = repo.rid();
    let mut work = Work::default();
    let mut sigrefs = Vec::new();
    let mut namespaces = Vec::new();
    for nid in Repo::namespaces(refs) {
        // Verification reads only the history from the `rad/sigrefs` tip: a tip that did not
        // move keeps its outcome.
        let tip = refs.get(&format!("refs/namespaces/{nid}/refs/rad/sigrefs"));
        let kept = prior.and_then(|p| {
            let before = p.sigrefs.get(&nid)?;
            let verified_at = before
                .commit
                .as_deref()
                .filter(|_| before.error.is_none())?;
            let verified_at = gix::ObjectId::from_hex(verified_at.as_bytes()).ok()?;
            matches!(tip, Some(RefTarget::Oid(oid)) if *oid == verified_at).then(|| before.clone())
        });
        if let Some(before) = kept {
            work.reused += 1;
            namespaces.push(nid);
            sigrefs.push(before);
            continue;
        }
        work.verified += 1;
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
                tracing::warn!(rid = %rid, nid = %nid, error = %crate::logging::chain(&e), "signed refs do not verify; namespace not served");
                sigrefs.push(SigrefsRecord {
                    nid,
                    commit: None,
                    level: None,
                    error: Some(crate::logging::chain(&e).to_string()),
                });
            }
        }
    }
    let head = repo.resolve("HEAD")?.map(|o| o.to_string());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // The identity document is immutable for a given `refs/rad/id`.
    let same_identity = prior.filter(|p| {
        p.refs.get("refs/rad/id").map(|(t, _)| t).is_some()
            && p.refs.get("refs/rad/id").map(|(t, _)| t) == refs.get("refs/rad/id")
    });
    let record = match same_identity {
        Some(p) => RepoRecord {
            head,
            fingerprint,
            ref_count: refs.len(),
            namespaces,
            indexed_at: now,
            ..p.record.clone()
        },
        None => {
            work.identity_read = true;
            let identity = repo.identity()?;
            let (name, description, default_branch) = match identity.doc.project() {
                Some(p) => (p.name, p.description, p.default_branch),
                None => (String::new(), String::new(), String::new()),
            };
            RepoRecord {
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
            }
        }
    };
    Ok((record, sigrefs, work))
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

    /// The fixtures made by the real `rad` (scripts/make-fixtures.sh, as the COB tests use).
    fn heartwood() -> (RepoId, std::path::PathBuf) {
        let dir = std::env::var_os("SEEDD_FIXTURES_DIR").map_or_else(
            || {
                std::path::PathBuf::from(std::env::var_os("HOME").unwrap())
                    .join(".cache/seedd/fixtures")
            },
            std::path::PathBuf::from,
        );
        if !dir.join("fixtures.json").exists() {
            // Cargo's run-time value first: the compile-time one may name another checkout
            // that built into the same target dir.
            let script = std::env::var_os("CARGO_MANIFEST_DIR")
                .map_or_else(
                    || std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")),
                    std::path::PathBuf::from,
                )
                .join("../scripts/make-fixtures.sh");
            let ok = std::process::Command::new("bash")
                .arg(&script)
                .arg(&dir)
                .status()
                .unwrap()
                .success();
            assert!(
                ok,
                "scripts/make-fixtures.sh failed (needs the Radicle binaries)"
            );
        }
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("fixtures.json")).unwrap())
                .unwrap();
        let repo = &json["repos"]["heartwood-fixture"];
        (
            repo["rid"].as_str().unwrap().parse().unwrap(),
            dir.join(repo["path"].as_str().unwrap()),
        )
    }

    /// A storage (in a temporary directory) holding a copy of the heartwood fixture: (its RID,
    /// the directory, the storage, the repository's path).
    fn held_heartwood() -> (RepoId, tempfile::TempDir, Storage, std::path::PathBuf) {
        let (rid, fixture) = heartwood();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("storage");
        std::fs::create_dir_all(&root).unwrap();
        let storage = Storage::open(&root).unwrap();
        let path = storage.path_of(&rid);
        let ok = std::process::Command::new("cp")
            .arg("-a")
            .arg(&fixture)
            .arg(&path)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        (rid, dir, storage, path)
    }

    /// Issue 30 §3: a start with an index that agrees with storage lists no storage; it reads
    /// the repositories seedd journaled (a new one before it moved in, one about to go) and
    /// trusts the rest; changes made outside seedd wait for a full rescan; an index no pass
    /// listed storage for (first start, an older version's) lists it once.
    #[test]
    fn a_start_reads_the_journal_not_storage() {
        let (rid, dir, storage, path) = held_heartwood();
        let index = Index::open(&dir.path().join("index")).unwrap();
        let aside = dir.path().join("aside");
        let start = || reconcile_changed(&storage, &index).unwrap();
        let counts = |r: &ScanReport| (r.added, r.unchanged, r.removed, r.failed);
        // First start: storage listed, the repository added.
        assert_eq!(counts(&start()), (1, 0, 0, 0));
        assert_eq!(counts(&start()), (0, 1, 0, 0));
        // Removed outside seedd: a start trusts the index; a rescan finds it gone.
        std::fs::rename(&path, &aside).unwrap();
        let r = start();
        assert_eq!((counts(&r), r.scanned), ((0, 1, 0, 0), 0), "no listing");
        assert_eq!(index.repo_count().unwrap(), 1);
        assert_eq!(reconcile(&storage, &index).unwrap().removed, 1);
        // Added outside seedd: not seen by a start (nothing journaled), seen once journaled.
        std::fs::rename(&aside, &path).unwrap();
        assert_eq!(counts(&start()), (0, 0, 0, 0));
        index.mark_dirty(&rid).unwrap();
        assert_eq!(
            counts(&start()),
            (1, 0, 0, 0),
            "a clone a crash interrupted"
        );
        assert!(index.dirty().unwrap().is_empty());
        // Journaled, then gone (a purge a crash interrupted): dropped by the start.
        index.mark_dirty(&rid).unwrap();
        std::fs::rename(&path, &aside).unwrap();
        assert_eq!(counts(&start()), (0, 0, 1, 0));
        assert!(index.dirty().unwrap().is_empty());
        assert_eq!(index.repo_count().unwrap(), 0);
        // An index without the mark of a listing pass (an older version's): listed once.
        std::fs::rename(&aside, &path).unwrap();
        index
            .delete(super::super::CF_META, super::super::done_key(LISTED))
            .unwrap();
        assert_eq!(counts(&start()), (1, 0, 0, 0));
        assert!(index.done(LISTED).unwrap());
    }

    /// `git tag` in `repo` with a fixed tagger.
    fn tag_in(repo: &std::path::Path, args: &[&str]) {
        let mut all = vec!["-c", "user.name=t", "-c", "user.email=t@example.com", "tag"];
        all.extend_from_slice(args);
        git(repo, &all);
    }

    fn git(repo: &std::path::Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(repo)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// Everything the index holds of a repository, but when it was indexed.
    fn held(
        index: &Index,
        rid: &RepoId,
    ) -> (RepoRecord, Vec<(String, RefTarget)>, Vec<SigrefsRecord>) {
        let mut record = index.repo(rid).unwrap().unwrap();
        record.indexed_at = 0;
        (
            record,
            index.refs(rid).unwrap(),
            index.sigrefs(rid).unwrap(),
        )
    }

    /// After each change to a held repository, the incremental re-index does only the work the
    /// change calls for (namespaces verified, identity read, refs written), and leaves the index
    /// exactly as a re-index from scratch would.
    #[test]
    fn a_reindex_costs_what_changed_and_equals_a_rebuild() {
        let (rid, dir, storage, path) = held_heartwood();
        let index = Index::open(&dir.path().join("index")).unwrap();
        let (indexed, work) = index_repo_counted(&storage, &index, rid).unwrap();
        assert_eq!(indexed, Indexed::Added);
        let namespaces = index.repo(&rid).unwrap().unwrap().namespaces.len();
        assert!(
            namespaces >= 2,
            "the fixture has alice's and bob's namespaces"
        );
        assert_eq!(
            (work.verified, work.reused, work.identity_read),
            (namespaces, 0, true)
        );
        let rebuilt = |step: &str| {
            let fresh = tempfile::tempdir().unwrap();
            let other = Index::open(fresh.path()).unwrap();
            index_repo_counted(&storage, &other, rid).unwrap();
            assert_eq!(held(&index, &rid), held(&other, &rid), "after {step}");
        };
        // Unchanged: nothing at all.
        let (indexed, work) = index_repo_counted(&storage, &index, rid).unwrap();
        assert_eq!((indexed, work), (Indexed::Unchanged, Work::default()));
        // A new canonical branch: one ref written, no namespace verified, identity kept.
        let head = git(&path, &["rev-parse", "HEAD"]);
        git(&path, &["update-ref", "refs/heads/feature", &head]);
        let (indexed, work) = index_repo_counted(&storage, &index, rid).unwrap();
        assert_eq!(indexed, Indexed::Updated);
        assert_eq!(
            (
                work.verified,
                work.reused,
                work.refs_written,
                work.identity_read
            ),
            (0, namespaces, 1, false)
        );
        rebuilt("a new branch");
        // One namespace's signed refs moved (to a commit that does not verify for it): that
        // namespace only is verified again, and is no longer served.
        let record = index.repo(&rid).unwrap().unwrap();
        let (moved, other) = (record.namespaces[0], record.namespaces[1]);
        let theirs = git(
            &path,
            &[
                "rev-parse",
                &format!("refs/namespaces/{other}/refs/rad/sigrefs"),
            ],
        );
        git(
            &path,
            &[
                "update-ref",
                &format!("refs/namespaces/{moved}/refs/rad/sigrefs"),
                &theirs,
            ],
        );
        let (_, work) = index_repo_counted(&storage, &index, rid).unwrap();
        assert_eq!(
            (work.verified, work.reused, work.refs_written),
            (1, namespaces - 1, 1)
        );
        let record = index.repo(&rid).unwrap().unwrap();
        assert!(!record.namespaces.contains(&moved));
        rebuilt("a moved rad/sigrefs");
        // A namespace that failed is verified again at every change (its tip is not recorded).
        git(&path, &["update-ref", "-d", "refs/heads/feature"]);
        let (_, work) = index_repo_counted(&storage, &index, rid).unwrap();
        assert_eq!(
            (work.verified, work.reused, work.refs_written),
            (1, namespaces - 1, 1)
        );
        rebuilt("a deleted branch");
        // A namespace removed: its refs and signed refs outcome go, the rest is kept.
        let gone: Vec<String> = git(
            &path,
            &[
                "for-each-ref",
                "--format=%(refname)",
                &format!("refs/namespaces/{moved}/"),
            ],
        )
        .lines()
        .map(str::to_owned)
        .collect();
        let prefix = format!("refs/namespaces/{moved}/");
        let indexed_there = index
            .refs(&rid)
            .unwrap()
            .iter()
            .filter(|(name, _)| name.starts_with(&prefix))
            .count();
        assert!(indexed_there > 0);
        for r in &gone {
            git(&path, &["update-ref", "--no-deref", "-d", r]);
        }
        let (_, work) = index_repo_counted(&storage, &index, rid).unwrap();
        assert_eq!(
            (work.verified, work.reused, work.refs_written),
            (0, namespaces - 1, indexed_there)
        );
        assert!(index.sigrefs(&rid).unwrap().iter().all(|s| s.nid != moved));
        rebuilt("a removed namespace");
    }

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

    /// The index answers a repository's ref snapshot exactly as reading the repository does
    /// (annotated tags peeled, a tag of a tag, lightweight tags, symbolic `HEAD`s, namespaces),
    /// after it is indexed and after refs move; not while it is marked dirty; and an index
    /// written without peeled targets is rewritten with them by the first start's pass, once.
    #[test]
    fn indexed_refs_give_the_repository_s_snapshot() {
        use crate::serve::advert::Snapshot;
        use crate::serve::refcache::RefSource;
        let (rid, dir, storage, path) = held_heartwood();
        let tag = |args: &[&str]| tag_in(&path, args);
        let head = git(&path, &["rev-parse", "HEAD"]);
        tag(&["-a", "-m", "one", "v1", &head]);
        tag(&["-a", "-m", "of a tag", "v1-signed", "v1"]);
        tag(&["light", &head]);
        let read = || {
            let repo = gix::open_opts(&path, gix::open::Options::isolated()).unwrap();
            Snapshot::read(&repo).unwrap()
        };
        let index = Index::open(&dir.path().join("index")).unwrap();
        assert_eq!(RefSource::snapshot(&index, &rid), None, "not indexed yet");
        index_repo_counted(&storage, &index, rid).unwrap();
        // Equal to the repository's, peeled targets included (`read` peels the two tags).
        let snap = RefSource::snapshot(&index, &rid).expect("answered by the index");
        assert_eq!(snap, read());
        // A tag moves to another tag object: re-indexed with its new peeled target.
        tag(&["-f", "-a", "-m", "two", "v1", &head]);
        index.mark_dirty(&rid).unwrap();
        assert_eq!(RefSource::snapshot(&index, &rid), None, "dirty");
        index_repo_counted(&storage, &index, rid).unwrap();
        index.clear_dirty(&rid).unwrap();
        assert_eq!(RefSource::snapshot(&index, &rid), Some(read()));
        // An index written before peeled targets were kept: the repository is read instead,
        // until the first start's pass rewrites its refs, once.
        let record = index.repo(&rid).unwrap().unwrap();
        let refs = index.refs(&rid).unwrap();
        let sigrefs = index.sigrefs(&rid).unwrap();
        index.put_repo(&record, &refs, &sigrefs).unwrap();
        assert_eq!(
            RefSource::snapshot(&index, &rid),
            None,
            "peeled targets unknown"
        );
        let report = reconcile_changed(&storage, &index).unwrap();
        assert_eq!((report.updated, report.failed), (1, 0), "{report:?}");
        assert_eq!(RefSource::snapshot(&index, &rid), Some(read()));
        index.put_repo(&record, &refs, &sigrefs).unwrap();
        let report = reconcile_changed(&storage, &index).unwrap();
        assert_eq!(report.updated, 0, "the upgrade runs once");
        assert_eq!(RefSource::snapshot(&index, &rid), None);
        // Any later change of the repository's refs rewrites the unpeeled ones too.
        git(&path, &["update-ref", "refs/heads/feature", &head]);
        index_repo_counted(&storage, &index, rid).unwrap();
        assert_eq!(RefSource::snapshot(&index, &rid), Some(read()));
    }

    /// Issue 30 §1: the index keeps what each ref leads to after its tags — a commit, or
    /// something else — so the web API lists canonical refs without opening the repository;
    /// refs written before kinds were kept (the same bytes older versions wrote) are not
    /// known until rewritten: by the one-off start pass of an index older than peeled targets,
    /// by a full rescan, or when the repository changes — never by a start otherwise.
    #[test]
    fn indexed_refs_know_the_commit_they_lead_to() {
        use std::collections::HashMap;
        let (rid, dir, storage, path) = held_heartwood();
        let tag = |args: &[&str]| tag_in(&path, args);
        let head = git(&path, &["rev-parse", "HEAD"]);
        let tree = git(&path, &["rev-parse", "HEAD^{tree}"]);
        tag(&["-a", "-m", "one", "v1", &head]);
        tag(&["-a", "-m", "of a tag", "v2", "v1"]);
        tag(&["-a", "-m", "of a tree", "tree-annotated", &tree]);
        tag(&["tree", &tree]);
        let id = |s: &str| gix::ObjectId::from_hex(s.as_bytes()).unwrap();
        let index = Index::open(&dir.path().join("index")).unwrap();
        index_repo_counted(&storage, &index, rid).unwrap();
        let commits = |prefix: &str| -> HashMap<String, Option<Option<gix::ObjectId>>> {
            index
                .refs_under_commits(&rid, prefix)
                .unwrap()
                .into_iter()
                .map(|(name, _, commit)| (name, commit))
                .collect()
        };
        let tags = commits("refs/tags/");
        assert_eq!(tags["refs/tags/v1"], Some(Some(id(&head))));
        assert_eq!(
            tags["refs/tags/v2"],
            Some(Some(id(&head))),
            "a tag of a tag"
        );
        assert_eq!(tags["refs/tags/tree"], Some(None));
        assert_eq!(tags["refs/tags/tree-annotated"], Some(None));
        let heads = index.refs_under_commits(&rid, "refs/heads/").unwrap();
        assert!(!heads.is_empty());
        for (name, target, commit) in &heads {
            let RefTarget::Oid(oid) = target else {
                panic!("{name} is symbolic")
            };
            assert_eq!(*commit, Some(Some(*oid)), "{name}");
        }
        // As an older version wrote them: the same targets, kinds unknown.
        let legacy: Peels = index
            .refs_peeled(&rid)
            .unwrap()
            .into_iter()
            .map(|(name, _, peel)| {
                let peel = match peel {
                    Peel::Plain(_) => Peel::Plain(super::super::End::Unknown),
                    Peel::Tag(p, _) => Peel::Tag(p, super::super::End::Unknown),
                    Peel::Unknown => Peel::Unknown,
                };
                (String::from_utf8(name).unwrap(), peel)
            })
            .collect();
        let record = index.repo(&rid).unwrap().unwrap();
        let refs = index.refs(&rid).unwrap();
        let sigrefs = index.sigrefs(&rid).unwrap();
        index
            .put_repo_peeled(&record, &refs, &legacy, &sigrefs)
            .unwrap();
        assert!(commits("refs/tags/").values().all(Option::is_none));
        assert!(commits("refs/heads/").values().all(Option::is_none));
        // A first start of an index older than peeled targets reads every repository.
        let report = reconcile_changed(&storage, &index).unwrap();
        assert_eq!((report.updated, report.failed), (1, 0), "{report:?}");
        assert_eq!(commits("refs/tags/"), tags, "rewritten with their kinds");
        let report = reconcile_changed(&storage, &index).unwrap();
        assert_eq!(report.updated, 0, "the upgrade runs once");
        // Peeled but without kinds (this version's predecessor): a start does not wait to read
        // every repository for them; a full rescan, or the repository's next change, fills them.
        index
            .put_repo_peeled(&record, &refs, &legacy, &sigrefs)
            .unwrap();
        let report = reconcile_changed(&storage, &index).unwrap();
        assert_eq!(report.updated, 0, "not at start");
        assert!(commits("refs/tags/").values().all(Option::is_none));
        let report = reconcile(&storage, &index).unwrap();
        assert_eq!((report.updated, report.failed), (1, 0), "{report:?}");
        assert_eq!(commits("refs/tags/"), tags, "a rescan fills them in");
        index
            .put_repo_peeled(&record, &refs, &legacy, &sigrefs)
            .unwrap();
        tag(&["v3", &head]);
        index_repo_counted(&storage, &index, rid).unwrap();
        let mut moved = tags.clone();
        moved.insert("refs/tags/v3".into(), Some(Some(id(&head))));
        assert_eq!(
            commits("refs/tags/"),
            moved,
            "so does a change of the repository"
        );
    }
}
