//! Ref snapshots for advertisements ([`crate::serve::refcache::RefSource`]) read from the index:
//! CF `refs` holds every ref of a repository (and its `HEAD`) with what it peels to, so the
//! `info/refs` and `ls-refs` answers of a repository not in the snapshot cache cost one prefix
//! scan instead of opening the repository and reading its objects.
//!
//! The index answers only when it is as current as storage and complete: the repository is
//! indexed, not marked dirty (a fetch moved refs and has not re-indexed yet), and every direct
//! ref's peeled target is known. Otherwise `None`, and the cache reads the repository.

use std::collections::HashMap;

use gix::bstr::BString;
use gix::ObjectId;

use super::Index;
use crate::serve::advert::{Snapshot, Target};
use crate::serve::refcache::RefSource;
use crate::storage::RefTarget;
use seedd_proto::crypto::RepoId;

/// What a direct ref peels to, as `git upload-pack` advertises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Peel {
    /// Not known (an index written before peeled targets were kept, or peeling failed).
    Unknown,
    /// Not an annotated tag (or its object is missing): advertised without a peeled line.
    Plain(End),
    /// An annotated tag, and the first non-tag object it leads to.
    Tag(ObjectId, End),
}

/// What kind of object a ref finally leads to (after its tags): what the web API needs to
/// list a ref as a commit without opening the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    Commit,
    /// A tree or a blob.
    Other,
    /// Not known: indexed before kinds were kept, or the object is missing.
    Unknown,
}

impl Peel {
    /// The commit a ref with this peel and target `oid` leads to: `Some(None)` when it leads
    /// to something else, `None` when that is not known.
    pub(crate) fn commit(&self, oid: ObjectId) -> Option<Option<ObjectId>> {
        let (end, id) = match self {
            Peel::Unknown => return None,
            Peel::Plain(end) => (end, oid),
            Peel::Tag(peeled, end) => (end, *peeled),
        };
        match end {
            End::Commit => Some(Some(id)),
            End::Other => Some(None),
            End::Unknown => None,
        }
    }

    /// Whether something is left to learn by reading the object again.
    pub(crate) fn incomplete(&self) -> bool {
        matches!(
            self,
            Peel::Unknown | Peel::Plain(End::Unknown) | Peel::Tag(_, End::Unknown)
        )
    }
}

/// Peeled targets of direct refs, by full ref name.
pub(crate) type Peels = HashMap<String, Peel>;

/// What `oid` peels to in `repo` (the advertisement's own rule, [`crate::serve::advert::peel`]),
/// and the kind of object it ends at.
pub(crate) fn peel(repo: &gix::Repository, oid: ObjectId) -> Peel {
    let end = |kind: gix::object::Kind| match kind {
        gix::object::Kind::Commit => End::Commit,
        _ => End::Other,
    };
    match crate::serve::advert::peel_kind(repo, oid) {
        Ok(None) => Peel::Plain(End::Unknown),
        Ok(Some(p)) => match p.tag_target {
            Some(target) => Peel::Tag(target, end(p.kind)),
            None => Peel::Plain(end(p.kind)),
        },
        Err(_) => Peel::Unknown,
    }
}

/// A name the index could have stored lossily (a ref name that is not UTF-8).
fn lossy(name: &[u8]) -> bool {
    name.windows(3).any(|w| w == "\u{FFFD}".as_bytes())
}

impl RefSource for Index {
    fn snapshot(&self, rid: &RepoId) -> Option<Snapshot> {
        if !self.holds(rid) {
            return None;
        }
        match self.is_dirty(rid) {
            Ok(false) => {}
            Ok(true) => return None,
            Err(e) => {
                tracing::debug!(%rid, error = %crate::logging::chain(&e), "reading the re-index mark; reading the repository");
                return None;
            }
        }
        let stored = match self.refs_peeled(rid) {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(%rid, error = %crate::logging::chain(&e), "reading indexed refs; reading the repository");
                return None;
            }
        };
        let mut head = None;
        let mut refs = Vec::with_capacity(stored.len());
        for (name, target, peel) in stored {
            if lossy(&name) {
                return None;
            }
            let target = match (target, peel) {
                (RefTarget::Symbolic(t), _) => Target::Symbolic(t.into()),
                (RefTarget::Oid(_), Peel::Unknown) => return None,
                (RefTarget::Oid(oid), Peel::Plain(_)) => Target::Direct { oid, peeled: None },
                (RefTarget::Oid(oid), Peel::Tag(p, _)) => Target::Direct {
                    oid,
                    peeled: Some(p),
                },
            };
            if name == b"HEAD" {
                head = Some(target);
            } else if name.starts_with(b"refs/") {
                refs.push((BString::from(name), target));
            } else {
                // The index keeps refs under `refs/` and `HEAD` only; anything else is not ours.
                return None;
            }
        }
        Some(Snapshot::from_parts(head, refs))
    }
}
