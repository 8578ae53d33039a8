//! Signed refs: read and verify a namespace's `rad/sigrefs` (protocol.md §2.3).

use std::collections::BTreeMap;

use crate::crypto::{NodeId, RepoId};

/// Bound on the history walked when the head is below level `Parent`.
const MAX_HISTORY: usize = 100_000;
/// Largest `refs` blob accepted (radicle allows many refs; 64 MiB is far beyond real use).
const MAX_REFS_BLOB: usize = 64 * 1024 * 1024;

const SIGREFS: &str = "refs/rad/sigrefs";
const SIGREFS_PARENT: &str = "refs/rad/sigrefs-parent";
const ROOT: &str = "refs/rad/root";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SigrefsError {
    #[error("no rad/sigrefs ref")]
    Missing,
    #[error("git: {0}")]
    Git(String),
    #[error("sigrefs commit {0} has more than one parent")]
    MultipleParents(gix::ObjectId),
    #[error("sigrefs commit {commit} lacks the `{blob}` blob")]
    MissingBlob {
        commit: gix::ObjectId,
        blob: &'static str,
    },
    #[error("malformed refs blob line {line}: {reason}")]
    Parse { line: usize, reason: String },
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
    #[error("history longer than {MAX_HISTORY} commits")]
    HistoryTooLong,
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

fn git_err(e: impl std::fmt::Display) -> SigrefsError {
    SigrefsError::Git(e.to_string())
}

/// Parse a `refs` blob: `<40-hex oid> SP <refname> LF` per line.
pub fn parse_refs(bytes: &[u8]) -> Result<BTreeMap<String, gix::ObjectId>, SigrefsError> {
    if bytes.len() > MAX_REFS_BLOB {
        return Err(SigrefsError::TooLarge(bytes.len()));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| SigrefsError::Parse {
        line: 0,
        reason: e.to_string(),
    })?;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let bad = |reason: &str| SigrefsError::Parse {
            line: i + 1,
            reason: reason.to_owned(),
        };
        let (oid, name) = line.split_once(' ').ok_or_else(|| bad("no space"))?;
        let oid = gix::ObjectId::from_hex(oid.as_bytes()).map_err(|_| bad("bad object id"))?;
        if name.is_empty() || !name.starts_with("refs/") {
            return Err(bad("ref name must start with refs/"));
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
) -> Result<Entry, SigrefsError> {
    let commit = git.find_commit(id).map_err(git_err)?;
    let parents: Vec<gix::ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
    if parents.len() > 1 {
        return Err(SigrefsError::MultipleParents(id));
    }
    let parent = parents.first().copied();
    let tree = commit.tree().map_err(git_err)?;
    let blob = |name: &'static str| -> Result<Vec<u8>, SigrefsError> {
        let entry = tree.find_entry(name).ok_or(SigrefsError::MissingBlob {
            commit: id,
            blob: name,
        })?;
        let oid = entry.object_id();
        let blob = git.find_blob(oid).map_err(git_err)?;
        Ok(blob.data.clone())
    };
    let refs_bytes = blob("refs")?;
    let signature = blob("signature")?;
    if signature.len() != 64 {
        return Err(SigrefsError::SignatureLength(signature.len()));
    }
    nid.verify(&refs_bytes, &signature)
        .map_err(|_| SigrefsError::BadSignature(*nid))?;
    let refs = parse_refs(&refs_bytes)?;

    let mut level = FeatureLevel::None;
    if let Some(root) = refs.get(ROOT) {
        if !embeds_identity(git, rid, *root)? {
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
) -> Result<bool, SigrefsError> {
    let Ok(commit) = git.find_commit(root) else {
        return Ok(false);
    };
    let tree = commit.tree().map_err(git_err)?;
    let entry = tree
        .lookup_entry_by_path("embeds/radicle.json")
        .map_err(git_err)?;
    Ok(entry.is_some_and(|e| e.object_id().as_bytes() == rid.as_bytes()))
}

/// Verify the sigrefs chain whose tip is `tip` for namespace `nid` of repository `rid`.
pub(crate) fn verify(
    git: &gix::Repository,
    rid: RepoId,
    nid: &NodeId,
    tip: gix::ObjectId,
) -> Result<SignedRefs, SigrefsError> {
    let head = read_entry(git, rid, nid, tip)?;
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
        if seen > MAX_HISTORY {
            return Err(SigrefsError::HistoryTooLong);
        }
        let e = read_entry(git, rid, nid, id)?;
        max = max.max(e.level);
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
            b"\xff\xfe",
        ] {
            assert!(parse_refs(bad).is_err());
        }
    }
}
