//! Verification of the identity COB (`xyz.radicle.id`, protocol.md §1.3–§1.4) before a fetched
//! identity is trusted.
//!
//! [`verify_identity`] walks the COB history from a head back to its root and replays it with the
//! rules of `radicle-0.25.1/src/cob/identity.rs` (`from_root`, `action`, `adopt`), in the order of
//! `radicle-cob`'s change graph (topological, children by committer time then id). It returns the
//! latest *adopted* revision, which need not be the head's own (still unaccepted) proposal.
//!
//! Where radicle silently prunes a branch of the history that does not verify (a bad commit
//! signature, an unauthorised or badly signed action), this module rejects the whole identity: a
//! peer announcing a head whose history contains a forgery is not trusted at all.

pub mod budget;
pub mod evaluate;
pub(crate) mod graph;
pub mod issue;
pub mod job;
pub mod patch;
pub mod read;
mod rules;
pub mod thread;

use budget::{Budget, BudgetKind};

use super::identity::{Doc, Identity, IdentityError};
use seedd_proto::crypto::{NodeId, RepoId};

/// COB type name of identities.
const TYPE_NAME: &str = "xyz.radicle.id";
/// Where a revision change embeds its document.
const DOC_PATH: &str = "embeds/radicle.json";
/// Bound on the changes walked (real identities have a handful).
const MAX_CHANGES: usize = 10_000;
/// Largest manifest or action blob read (real ones are well under 1 KiB).
const MAX_BLOB_BYTES: u64 = 1024 * 1024;
/// Largest document blob read (`Doc::from_json` applies its own, smaller, limit).
const MAX_DOC_BYTES: u64 = 1024 * 1024;
const SSH_SIGNATURE_PEM: &[u8] = b"-----BEGIN SSH SIGNATURE-----";

/// Why an identity COB was not trusted.
#[derive(Debug, thiserror::Error)]
pub enum CobError {
    #[error("git: {0}")]
    Git(super::GitError),
    #[error("git: {what} {id} is a {kind}, not a blob")]
    NotABlob {
        what: &'static str,
        id: gix::ObjectId,
        kind: gix::objs::Kind,
    },
    #[error("git: commit {commit}: committer: {cause}")]
    Committer {
        commit: gix::ObjectId,
        cause: super::GitError,
    },
    #[error("identity history has more than {MAX_CHANGES} changes")]
    TooLong,
    #[error("change {commit}: {what} blob of {size} bytes is over the limit")]
    TooLarge {
        commit: gix::ObjectId,
        what: &'static str,
        size: u64,
    },
    #[error("change {commit}: object {object} does not hash to its id")]
    Corrupt {
        commit: gix::ObjectId,
        object: gix::ObjectId,
    },
    #[error("change {commit} is not signed (no gpgsig header)")]
    Unsigned { commit: gix::ObjectId },
    #[error("change {commit} has {count} gpgsig headers, expected exactly one")]
    MultipleSignatures { commit: gix::ObjectId, count: usize },
    #[error("change {commit}: gpgsig is not a usable SSH signature: {cause}")]
    SshSignature {
        commit: gix::ObjectId,
        cause: SshSigError,
    },
    #[error("change {commit}: commit signature by {signer} does not verify over its tree {tree}")]
    CommitSignature {
        commit: gix::ObjectId,
        signer: NodeId,
        tree: gix::ObjectId,
    },
    #[error("change {commit}: trailer: {reason}")]
    Trailer {
        commit: gix::ObjectId,
        reason: String,
    },
    #[error("change {commit}: manifest: {reason}")]
    Manifest {
        commit: gix::ObjectId,
        reason: &'static str,
    },
    #[error("change {commit}: manifest: {cause}")]
    ManifestJson {
        commit: gix::ObjectId,
        cause: serde_json::Error,
    },
    #[error("change {commit} is of COB type {found:?}, not {expected}")]
    WrongType {
        commit: gix::ObjectId,
        found: String,
        expected: &'static str,
    },
    #[error("change {commit}: no actions")]
    NoActions { commit: gix::ObjectId },
    #[error("change {commit}: two action blobs for index {index}")]
    DuplicateAction { commit: gix::ObjectId, index: i8 },
    #[error("change {commit}: action {index}: {cause}")]
    ActionJson {
        commit: gix::ObjectId,
        index: i8,
        cause: serde_json::Error,
    },
    #[error("no identity head given")]
    NoHeads,
    #[error("identity history from {head} has no root change")]
    NoRoot { head: gix::ObjectId },
    #[error("identity history has {} root changes ({}), expected one", roots.len(), list(roots))]
    MultipleRoots { roots: Vec<gix::ObjectId> },
    #[error("root change {commit}: {reason}")]
    Root {
        commit: gix::ObjectId,
        reason: &'static str,
    },
    #[error(
        "root change {commit}: embedded document {embedded} is not the revision's blob {blob}"
    )]
    RootBlob {
        commit: gix::ObjectId,
        embedded: gix::ObjectId,
        blob: gix::ObjectId,
    },
    #[error("root change {commit}: document blob {blob} is not the repository id {rid}")]
    RootNotRid {
        commit: gix::ObjectId,
        blob: gix::ObjectId,
        rid: RepoId,
    },
    #[error("root change {commit}: signed by {author}, but the first delegate is {founder}")]
    Founder {
        commit: gix::ObjectId,
        author: NodeId,
        founder: NodeId,
    },
    #[error("change {commit}: document {blob}: {cause}")]
    Document {
        commit: gix::ObjectId,
        blob: gix::ObjectId,
        cause: IdentityError,
    },
    #[error("change {commit}: document blob {blob} is not embedded at {DOC_PATH} (found {})", opt(.embedded))]
    EmbedMismatch {
        commit: gix::ObjectId,
        blob: gix::ObjectId,
        embedded: Option<gix::ObjectId>,
    },
    #[error("change {commit}: signature by {signer} over document {blob} does not verify")]
    ActionSignature {
        commit: gix::ObjectId,
        signer: NodeId,
        blob: gix::ObjectId,
    },
    #[error(
        "change {commit}: {author} is not a delegate of the parent revision and may not {action}"
    )]
    NotDelegate {
        commit: gix::ObjectId,
        author: NodeId,
        action: &'static str,
    },
    #[error(
        "change {commit}: {author} did not author revision {revision} and may not {action} it"
    )]
    NotRevisionAuthor {
        commit: gix::ObjectId,
        author: NodeId,
        revision: gix::ObjectId,
        action: &'static str,
    },
    #[error("change {commit}: revision {revision} is not known (missing causal dependency)")]
    MissingRevision {
        commit: gix::ObjectId,
        revision: gix::ObjectId,
    },
    #[error("change {commit}: revision has no parent revision")]
    MissingParent { commit: gix::ObjectId },
    #[error("change {commit}: revision {parent} named as parent is not known")]
    UnknownParent {
        commit: gix::ObjectId,
        parent: gix::ObjectId,
    },
    #[error("change {commit}: revision does not change the document")]
    DocUnchanged { commit: gix::ObjectId },
    #[error("change {commit}: {author} already gave a verdict on revision {revision}")]
    DuplicateVerdict {
        commit: gix::ObjectId,
        author: NodeId,
        revision: gix::ObjectId,
    },
    #[error("change {commit}: revision {revision} is no longer active and cannot be edited")]
    UnexpectedState {
        commit: gix::ObjectId,
        revision: gix::ObjectId,
    },
    #[error("change {commit} holds more than one revision")]
    MultipleRevisions { commit: gix::ObjectId },
    /// The evaluation passed its total work budget ([`budget`]).
    #[error("over the evaluation budget: more than {limit} {}", .kind.label())]
    OverBudget { kind: BudgetKind, limit: u64 },
    /// Nobody waits for the evaluation any longer.
    #[error("cancelled: nobody waits for this evaluation any longer")]
    Cancelled,
}

impl CobError {
    /// Whether the same objects would fail the same way again, so that the failure may be
    /// remembered by tips: not for git read errors (an object may arrive later) or
    /// cancellation.
    pub fn is_permanent(&self) -> bool {
        !matches!(self, CobError::Git(_) | CobError::Cancelled)
    }

    /// Which budget was exceeded, if that is why the evaluation stopped.
    pub fn over_budget(&self) -> Option<BudgetKind> {
        match self {
            CobError::OverBudget { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

/// Why a commit's `gpgsig` is no usable SSH signature.
#[derive(Debug, thiserror::Error)]
pub enum SshSigError {
    #[error("not an SSH signature PEM")]
    NotPem,
    #[error(transparent)]
    Parse(#[from] ssh_key::Error),
    #[error("key type {0} is not ssh-ed25519")]
    KeyType(ssh_key::Algorithm),
    #[error("signature type {0} is not ssh-ed25519")]
    SignatureType(ssh_key::Algorithm),
    #[error("signature is {0} bytes, expected 64")]
    Length(usize),
}

fn list(ids: &[gix::ObjectId]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn opt(id: &Option<gix::ObjectId>) -> String {
    id.map_or_else(|| "none".to_owned(), |id| id.to_string())
}

/// Verify the identity COB history ending at `head` for repository `rid` and return the latest
/// adopted revision's document (`head`/`blob` of the result are that revision's change and blob).
///
/// Every change reachable from `head` through history parents must be a signed `xyz.radicle.id`
/// change; the history must have exactly one root, whose document is the RID; every action must
/// be authorised and correctly signed (see the module documentation and protocol.md §1.4). The
/// work is charged to `budget` ([`budget::IDENTITY`] for a fetch).
pub fn verify_identity(
    git: &gix::Repository,
    rid: RepoId,
    head: gix::ObjectId,
    budget: &Budget,
) -> Result<Identity, CobError> {
    verify_identity_heads(git, rid, &[head], budget)
}

/// [`verify_identity`] over the union of several heads' histories (ours and a peer's, say):
/// the change graph is merged and replayed once, so which revision is adopted is decided by
/// the identity rules alone, never by which side's head was read last. All heads must share
/// the one root.
pub(crate) fn verify_identity_heads(
    git: &gix::Repository,
    rid: RepoId,
    heads: &[gix::ObjectId],
    budget: &Budget,
) -> Result<Identity, CobError> {
    replay_heads(git, rid, heads, budget).map(|r| r.identity)
}

fn replay_heads(
    git: &gix::Repository,
    rid: RepoId,
    heads: &[gix::ObjectId],
    budget: &Budget,
) -> Result<rules::Replayed, CobError> {
    let head = *heads.first().ok_or(CobError::NoHeads)?;
    let memo = read::Memo::default();
    let changes = read::load_history(git, heads, budget, &memo)?;
    let docs = read::GitDocs::new(git, budget, &memo);
    rules::replay(&docs, rid, head, changes, budget)
}

/// The revision the merged history of `offered` and `ours` (our adopted revision, whose
/// document is `ours_doc`) adopts, if we may adopt it: one that descends from ours, or one
/// that diverges from ours but carries the accepts of a majority of *our current* delegates.
/// `None`: it diverges without them — a fork from an older revision, say, back-dated so that
/// the replay's timestamp order visits it first and signed by a majority of a delegate set
/// that was since retired; ours stands (issue 25 §5).
pub fn verify_successor(
    git: &gix::Repository,
    rid: RepoId,
    ours: gix::ObjectId,
    ours_doc: &Doc,
    offered: gix::ObjectId,
    budget: &Budget,
) -> Result<Option<Identity>, CobError> {
    let merged = replay_heads(git, rid, &[offered, ours], budget)?;
    if merged.lineage.contains(&ours) || rules::quorum_of(ours_doc, &merged.accepted_by) {
        Ok(Some(merged.identity))
    } else {
        Ok(None)
    }
}

/// The identity tests and the fixtures they build, which replication's tests reuse (feature
/// `testing`: `identity_reusing_one_tree`, `retired_fork`).
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::unwrap_used, clippy::expect_used, dead_code, unused_imports)]
pub mod tests;
