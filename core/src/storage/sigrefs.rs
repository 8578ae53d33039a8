//! Signed refs: read and verify a namespace's `rad/sigrefs` (protocol.md §2.3).

use std::collections::BTreeMap;

use seedd_proto::crypto::{NodeId, RepoId};

/// Largest `refs` blob [`parse_refs`] accepts.
const MAX_REFS_BLOB: usize = 64 * 1024 * 1024;

/// Bounds on the work verifying signed refs may do (objects are sized from their headers
/// before they are read, so an oversized one costs nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Commits walked below a head at a level under `Parent` (radicle walks such histories
    /// to find replays and downgrades; a head at `Parent` is never walked).
    pub max_history: usize,
    /// Largest `refs` blob (≈ 100 bytes per ref).
    pub max_refs_blob: u64,
    /// Largest sigrefs commit or tree object.
    pub max_object: u64,
    /// Bytes of objects read in all, over every namespace verified with one [`Budget`].
    pub max_total: u64,
}

/// The default limits: far beyond real use, small enough that a peer cannot make one fetch
/// read gigabytes or walk millions of commits.
pub(crate) const LIMITS: Limits = Limits {
    max_history: 10_000,
    max_refs_blob: 16 * 1024 * 1024,
    max_object: 1024 * 1024,
    max_total: 256 * 1024 * 1024,
};

/// What verifications sharing it may still read (one per fetch, or one per namespace).
#[derive(Debug, Clone)]
pub struct Budget {
    limits: Limits,
    read: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self::new(LIMITS)
    }
}

impl Budget {
    pub(crate) fn new(limits: Limits) -> Self {
        Self { limits, read: 0 }
    }

    /// Bytes of objects read so far.
    #[cfg(test)]
    pub fn read(&self) -> u64 {
        self.read
    }

    /// Sizes object `oid` from its header: refused if over `max` or the remaining budget.
    fn take(
        &mut self,
        git: &gix::Repository,
        oid: gix::ObjectId,
        kind: &'static str,
        max: u64,
    ) -> Result<(), SigrefsError> {
        let size = git.find_header(oid).map_err(git_err)?.size();
        if size > max {
            return Err(SigrefsError::ObjectTooLarge {
                oid,
                kind,
                size,
                max,
            });
        }
        self.read = self.read.saturating_add(size);
        if self.read > self.limits.max_total {
            return Err(SigrefsError::BudgetExhausted(self.limits.max_total));
        }
        Ok(())
    }
}

const SIGREFS: &str = "refs/rad/sigrefs";
const SIGREFS_PARENT: &str = "refs/rad/sigrefs-parent";
const ROOT: &str = "refs/rad/root";

#[derive(Debug, thiserror::Error)]
pub enum SigrefsError {
    #[error("no rad/sigrefs ref")]
    Missing,
    #[error("git: {0}")]
    Git(super::GitError),
    #[error("git: {0}")]
    Storage(Box<super::StorageError>),
    #[error("sigrefs commit {0} has more than one parent")]
    MultipleParents(gix::ObjectId),
    #[error("sigrefs commit {commit} lacks the `{blob}` blob")]
    MissingBlob {
        commit: gix::ObjectId,
        blob: &'static str,
    },
    #[error("malformed refs blob line {line}: {reason}")]
    Parse { line: usize, reason: &'static str },
    #[error("malformed refs blob line 0: {0}")]
    NotUtf8(std::str::Utf8Error),
    #[error("refs blob of {0} bytes is over the limit")]
    TooLarge(usize),
    #[error("signature is {0} bytes, expected 64")]
    SignatureLength(usize),
    #[error("signature does not verify against {0}")]
    BadSignature(NodeId),
    #[error("rad/root {root} does not embed the identity of this repository")]
    MismatchedIdentity { root: gix::ObjectId },
    #[error("refs/rad/sigrefs-parent does not match the commit's parent")]
    MismatchedParent,
    #[error("refs/rad/sigrefs-parent without refs/rad/root")]
    IdentityRootDowngrade,
    #[error("refs/rad/sigrefs-parent on a commit without parent")]
    DanglingParent,
    #[error("head is at feature level {head:?}, below {max:?} seen in its history")]
    Downgrade {
        head: FeatureLevel,
        max: FeatureLevel,
    },
    #[error("signed refs history longer than {0} commits")]
    HistoryTooLong(usize),
    #[error("{kind} {oid} is {size} bytes, over the limit of {max}")]
    ObjectTooLarge {
        oid: gix::ObjectId,
        kind: &'static str,
        size: u64,
        max: u64,
    },
    #[error("verifying signed refs would read more than {0} bytes in all; giving up")]
    BudgetExhausted(u64),
}

/// Protection level of a sigrefs commit (`storage/refs.rs` `FeatureLevel`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum FeatureLevel {
    None,
    Root,
    Parent,
}

/// A verified set of signed refs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedRefs {
    pub nid: NodeId,
    /// The sigrefs commit the state was taken from (the oldest one on a replay).
    pub commit: gix::ObjectId,
    /// Refs relative to the namespace (`refs/heads/main` → oid), as signed.
    pub refs: BTreeMap<String, gix::ObjectId>,
    pub level: FeatureLevel,
}

/// One parsed sigrefs commit.
struct Entry {
    id: gix::ObjectId,
    parent: Option<gix::ObjectId>,
    refs: BTreeMap<String, gix::ObjectId>,
    signature: Vec<u8>,
    level: FeatureLevel,
}

fn git_err(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SigrefsError {
    SigrefsError::Git(super::GitError::new(e))
}

/// Parse a `refs` blob: `<40-hex oid> SP <refname> LF` per line.
pub(crate) fn parse_refs(bytes: &[u8]) -> Result<BTreeMap<String, gix::ObjectId>, SigrefsError> {
    if bytes.len() > MAX_REFS_BLOB {
        return Err(SigrefsError::TooLarge(bytes.len()));
    }
    let text = std::str::from_utf8(bytes).map_err(SigrefsError::NotUtf8)?;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let bad = |reason: &'static str| SigrefsError::Parse {
            line: i + 1,
            reason,
        };
        let (oid, name) = line.split_once(' ').ok_or_else(|| bad("no space"))?;
        let oid = gix::ObjectId::from_hex(oid.as_bytes()).map_err(|_| bad("bad object id"))?;
        if name.is_empty() || !name.starts_with("refs/") {
            return Err(bad("ref name must start with refs/"));
        }
        // Signed names become ref names in storage, `update-ref` input and advertisements:
        // git's rules (no `..`, control characters, spaces, `~^:?*[\`, `.lock` …).
        if gix::validate::reference::name(name.into()).is_err() {
            return Err(bad("invalid ref name"));
        }
        if name == SIGREFS || oid.is_null() {
            continue;
        }
        out.insert(name.to_owned(), oid);
    }
    Ok(out)
}

fn read_entry(
    git: &gix::Repository,
    rid: RepoId,
    nid: &NodeId,
    id: gix::ObjectId,
    budget: &mut Budget,
) -> Result<Entry, SigrefsError> {
    let max_object = budget.limits.max_object;
    budget.take(git, id, "sigrefs commit", max_object)?;
    let commit = git.find_commit(id).map_err(git_err)?;
    let parents: Vec<gix::ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
    if parents.len() > 1 {
        return Err(SigrefsError::MultipleParents(id));
    }
    let parent = parents.first().copied();
    let tree_id = commit.tree_id().map_err(git_err)?.detach();
    budget.take(git, tree_id, "sigrefs tree", max_object)?;
    let tree = commit.tree().map_err(git_err)?;
    let max_refs = budget.limits.max_refs_blob;
    let mut blob = |name: &'static str, max: u64| -> Result<Vec<u8>, SigrefsError> {
        let entry = tree.find_entry(name).ok_or(SigrefsError::MissingBlob {
            commit: id,
            blob: name,
        })?;
        let oid = entry.object_id();
        budget.take(git, oid, name, max)?;
        let mut found = git.find_blob(oid).map_err(git_err)?;
        Ok(found.take_data())
    };
    let refs_bytes = blob("refs", max_refs)?;
    // A signature is 64 bytes; anything larger is not read.
    let signature = blob("signature", 64)?;
    if signature.len() != 64 {
        return Err(SigrefsError::SignatureLength(signature.len()));
    }
    nid.verify(&refs_bytes, &signature)
        .map_err(|_| SigrefsError::BadSignature(*nid))?;
    let refs = parse_refs(&refs_bytes)?;

    let mut level = FeatureLevel::None;
    if let Some(root) = refs.get(ROOT) {
        if !embeds_identity(git, rid, *root, budget)? {
            return Err(SigrefsError::MismatchedIdentity { root: *root });
        }
        level = FeatureLevel::Root;
    }
    match (parent, refs.get(SIGREFS_PARENT)) {
        (Some(p), Some(sp)) => {
            if p != *sp {
                return Err(SigrefsError::MismatchedParent);
            }
            if level != FeatureLevel::Root {
                return Err(SigrefsError::IdentityRootDowngrade);
            }
            level = FeatureLevel::Parent;
        }
        (None, Some(_)) => return Err(SigrefsError::DanglingParent),
        (None, None) if level == FeatureLevel::Root => level = FeatureLevel::Parent,
        _ => {}
    }
    Ok(Entry {
        id,
        parent,
        refs,
        signature,
        level,
    })
}

/// Whether commit `root` embeds a document whose blob id is the RID.
fn embeds_identity(
    git: &gix::Repository,
    rid: RepoId,
    root: gix::ObjectId,
    budget: &mut Budget,
) -> Result<bool, SigrefsError> {
    if git.try_find_header(root).map_err(git_err)?.is_none() {
        return Ok(false);
    }
    let max_object = budget.limits.max_object;
    budget.take(git, root, "identity root commit", max_object)?;
    let Ok(commit) = git.find_commit(root) else {
        return Ok(false);
    };
    let tree_id = commit.tree_id().map_err(git_err)?.detach();
    budget.take(git, tree_id, "identity root tree", max_object)?;
    let tree = commit.tree().map_err(git_err)?;
    let entry = tree
        .lookup_entry_by_path("embeds/radicle.json")
        .map_err(git_err)?;
    Ok(entry.is_some_and(|e| e.object_id().as_bytes() == rid.as_bytes()))
}

/// Verify the sigrefs chain whose tip is `tip` for namespace `nid` of repository `rid`,
/// within the default [`LIMITS`].
pub(crate) fn verify(
    git: &gix::Repository,
    rid: RepoId,
    nid: &NodeId,
    tip: gix::ObjectId,
) -> Result<SignedRefs, SigrefsError> {
    verify_within(git, rid, nid, tip, &mut Budget::default())
}

/// [`verify`] charging what it reads to `budget` (share one across the namespaces of a fetch
/// to bound the fetch as a whole).
pub fn verify_within(
    git: &gix::Repository,
    rid: RepoId,
    nid: &NodeId,
    tip: gix::ObjectId,
    budget: &mut Budget,
) -> Result<SignedRefs, SigrefsError> {
    let head = read_entry(git, rid, nid, tip, budget)?;
    if head.level == FeatureLevel::Parent {
        return Ok(SignedRefs {
            nid: *nid,
            commit: head.id,
            refs: head.refs,
            level: head.level,
        });
    }
    // Below `Parent`: walk the history for downgrades and replays (§2.3 step 4).
    let mut max = head.level;
    let mut oldest_same_sig: Option<Entry> = None;
    let mut next = head.parent;
    let mut seen = 0usize;
    while let Some(id) = next {
        seen += 1;
        if seen > budget.limits.max_history {
            return Err(SigrefsError::HistoryTooLong(budget.limits.max_history));
        }
        let e = read_entry(git, rid, nid, id, budget)?;
        max = max.max(e.level);
        if max == FeatureLevel::Parent {
            // The highest level, above the head's: a downgrade whatever comes before.
            return Err(SigrefsError::Downgrade {
                head: head.level,
                max,
            });
        }
        next = e.parent;
        if e.signature == head.signature {
            oldest_same_sig = Some(e);
        }
    }
    if head.level < max {
        return Err(SigrefsError::Downgrade {
            head: head.level,
            max,
        });
    }
    let effective = oldest_same_sig.unwrap_or(head);
    Ok(SignedRefs {
        nid: *nid,
        commit: effective.id,
        refs: effective.refs,
        level: effective.level,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_refs_blob() {
        let blob = b"2098c4afadaceff8b1c8032b5c532b145af815d4 refs/cobs/xyz.radicle.id/2098c4afadaceff8b1c8032b5c532b145af815d4\n\
2fdf5d0d2beb4e52ef38722f497e9575f14c03ef refs/heads/feature\n\
d223097149e30b4ea4c2a7b99e523344bb2c2cab refs/heads/master\n\
2098c4afadaceff8b1c8032b5c532b145af815d4 refs/rad/id\n\
2098c4afadaceff8b1c8032b5c532b145af815d4 refs/rad/root\n\
d0c3cfc831431fe61176235fe18d43acd01fa60a refs/rad/sigrefs-parent\n";
        let refs = parse_refs(blob).unwrap();
        assert_eq!(refs.len(), 6);
        assert_eq!(
            refs["refs/heads/master"].to_string(),
            "d223097149e30b4ea4c2a7b99e523344bb2c2cab"
        );
    }

    #[test]
    fn skips_sigrefs_and_zero_oids() {
        let blob = b"0000000000000000000000000000000000000000 refs/heads/gone\n\
d223097149e30b4ea4c2a7b99e523344bb2c2cab refs/rad/sigrefs\n";
        assert!(parse_refs(blob).unwrap().is_empty());
    }

    #[test]
    fn malformed_lines_are_errors_not_panics() {
        for bad in [
            &b"zz refs/heads/x\n"[..],
            b"d223097149e30b4ea4c2a7b99e523344bb2c2cab\n",
            b"d223097149e30b4ea4c2a7b99e523344bb2c2cab heads/x\n",
            b"d223097149e30b4ea4c2a7b99e523344bb2c2cab refs/heads/../../x\n",
            b"d223097149e30b4ea4c2a7b99e523344bb2c2cab refs/heads/a b\n",
            b"d223097149e30b4ea4c2a7b99e523344bb2c2cab refs/heads/x.lock\n",
            b"d223097149e30b4ea4c2a7b99e523344bb2c2cab refs/heads/x\x01\n",
            b"d223097149e30b4ea4c2a7b99e523344bb2c2cab refs/heads/x:y\n",
            b"d223097149e30b4ea4c2a7b99e523344bb2c2cab refs/heads//x\n",
            b"\xff\xfe",
        ] {
            assert!(parse_refs(bad).is_err());
        }
    }

    /// A bare repository to build sigrefs histories in.
    fn repo() -> (tempfile::TempDir, gix::Repository) {
        let tmp = tempfile::tempdir().unwrap();
        let git = gix::init_bare(tmp.path()).unwrap();
        (tmp, git)
    }

    /// A sigrefs commit (level `None`: no `rad/root`) with `refs` signed by `key`, or with
    /// `signature` as the signature blob.
    fn commit(
        git: &gix::Repository,
        key: &seedd_proto::crypto::Keypair,
        refs: &[u8],
        parent: Option<gix::ObjectId>,
        signature: Option<&[u8]>,
    ) -> gix::ObjectId {
        use gix::objs::tree::{Entry as TreeEntry, EntryKind};
        let sig = key.sign(refs);
        let blob = |bytes: &[u8]| git.write_blob(bytes).unwrap().detach();
        let mut entries = vec![
            TreeEntry {
                mode: EntryKind::Blob.into(),
                filename: "refs".into(),
                oid: blob(refs),
            },
            TreeEntry {
                mode: EntryKind::Blob.into(),
                filename: "signature".into(),
                oid: blob(signature.unwrap_or(&sig[..])),
            },
        ];
        entries.sort();
        let tree = git
            .write_object(&gix::objs::Tree { entries })
            .unwrap()
            .detach();
        let who = gix::actor::Signature {
            name: "tester".into(),
            email: "tester@example.invalid".into(),
            time: gix::date::Time {
                seconds: 1_700_000_000,
                offset: 0,
            },
        };
        let commit = gix::objs::Commit {
            tree,
            parents: parent.into_iter().collect(),
            author: who.clone(),
            committer: who,
            encoding: None,
            message: "Update signed refs\n".into(),
            extra_headers: Vec::new(),
        };
        git.write_object(&commit).unwrap().detach()
    }

    fn refs_blob(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| format!("d223097149e30b4ea4c2a7b99e523344bb2c2cab refs/heads/b{i:06}\n"))
            .collect::<String>()
            .into_bytes()
    }

    /// A linear history of `len` commits (each a new state), the tip returned.
    fn history(
        git: &gix::Repository,
        key: &seedd_proto::crypto::Keypair,
        len: usize,
    ) -> gix::ObjectId {
        let mut tip = None;
        for i in 0..len {
            tip = Some(commit(git, key, &refs_blob(i + 1), tip, None));
        }
        tip.unwrap()
    }

    fn small(limits: impl FnOnce(&mut Limits)) -> Budget {
        let mut l = LIMITS;
        limits(&mut l);
        Budget::new(l)
    }

    const RID: [u8; 20] = [7; 20];

    #[test]
    fn a_chain_within_the_limits_verifies() {
        let (_tmp, git) = repo();
        let key = seedd_proto::crypto::Keypair::mock(1);
        let tip = history(&git, &key, 3);
        let signed = verify(&git, RepoId::from(RID), &key.nid(), tip).unwrap();
        assert_eq!(signed.commit, tip);
        assert_eq!(signed.refs.len(), 3);
        assert_eq!(signed.level, FeatureLevel::None);
    }

    #[test]
    fn an_oversized_refs_blob_is_refused_without_reading_it() {
        let (_tmp, git) = repo();
        let key = seedd_proto::crypto::Keypair::mock(1);
        let refs = refs_blob(100);
        let tip = commit(&git, &key, &refs, None, None);
        let mut budget = small(|l| l.max_refs_blob = 1024);
        let err = verify_within(&git, RepoId::from(RID), &key.nid(), tip, &mut budget).unwrap_err();
        assert!(
            matches!(err, SigrefsError::ObjectTooLarge { kind: "refs", size, max: 1024, .. } if size == refs.len() as u64),
            "{err}"
        );
        // Sized from the header: the blob itself was not charged.
        assert!(budget.read() < 1024, "{}", budget.read());
    }

    #[test]
    fn an_oversized_signature_blob_is_refused() {
        let (_tmp, git) = repo();
        let key = seedd_proto::crypto::Keypair::mock(1);
        let huge = vec![0u8; 1024 * 1024];
        let tip = commit(&git, &key, &refs_blob(1), None, Some(&huge));
        let err = verify(&git, RepoId::from(RID), &key.nid(), tip).unwrap_err();
        assert!(
            matches!(
                err,
                SigrefsError::ObjectTooLarge {
                    kind: "signature",
                    max: 64,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_history_longer_than_the_limit_is_refused() {
        let (_tmp, git) = repo();
        let key = seedd_proto::crypto::Keypair::mock(1);
        let rid = RepoId::from(RID);
        let tip = history(&git, &key, 6);
        // The head and 5 commits below it: within a limit of 5.
        let mut budget = small(|l| l.max_history = 5);
        assert!(verify_within(&git, rid, &key.nid(), tip, &mut budget).is_ok());
        let tip = commit(&git, &key, &refs_blob(7), Some(tip), None);
        let mut budget = small(|l| l.max_history = 5);
        let err = verify_within(&git, rid, &key.nid(), tip, &mut budget).unwrap_err();
        assert!(matches!(err, SigrefsError::HistoryTooLong(5)), "{err:?}");
        assert!(err.to_string().contains("longer than 5 commits"));
    }

    /// One budget over several namespaces (a fetch) stops once it is spent.
    #[test]
    fn a_shared_budget_bounds_the_namespaces_together() {
        let (_tmp, git) = repo();
        let rid = RepoId::from(RID);
        let (a, b) = (
            seedd_proto::crypto::Keypair::mock(1),
            seedd_proto::crypto::Keypair::mock(2),
        );
        let tip_a = history(&git, &a, 20);
        let tip_b = history(&git, &b, 20);
        let mut probe = Budget::default();
        verify_within(&git, rid, &a.nid(), tip_a, &mut probe).unwrap();
        let one = probe.read();
        let mut budget = small(|l| l.max_total = one + one / 2);
        verify_within(&git, rid, &a.nid(), tip_a, &mut budget).unwrap();
        let err = verify_within(&git, rid, &b.nid(), tip_b, &mut budget).unwrap_err();
        assert!(
            matches!(err, SigrefsError::BudgetExhausted(n) if n == one + one / 2),
            "{err:?}"
        );
    }
}
