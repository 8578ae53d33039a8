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
    Plain,
    /// An annotated tag, and the first non-tag object it leads to.
    Tag(ObjectId),
}

/// Peeled targets of direct refs, by full ref name.
pub(crate) type Peels = HashMap<String, Peel>;

/// What `oid` peels to in `repo` ([`crate::serve::advert::peel`], the advertisement's own rule).
pub(crate) fn peel(repo: &gix::Repository, oid: ObjectId) -> Peel {
    match crate::serve::advert::peel(repo, oid) {
        Ok(Some(peeled)) => Peel::Tag(peeled),
        Ok(None) => Peel::Plain,
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
                (RefTarget::Oid(oid), Peel::Plain) => Target::Direct { oid, peeled: None },
                (RefTarget::Oid(oid), Peel::Tag(p)) => Target::Direct {
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
