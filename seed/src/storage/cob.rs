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

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::Deserialize;

use super::identity::{Doc, Identity, IdentityError, Visibility};
use crate::crypto::{git_blob_oid, NodeId, RepoId};

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
    Git(#[source] super::GitError),
    #[error("git: {what} {id} is a {kind}, not a blob")]
    NotABlob {
        what: &'static str,
        id: gix::ObjectId,
        kind: gix::objs::Kind,
    },
    #[error("git: commit {commit}: committer: {source}")]
    Committer {
        commit: gix::ObjectId,
        source: super::GitError,
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
    #[error("change {commit}: gpgsig is not a usable SSH signature: {reason}")]
    SshSignature {
        commit: gix::ObjectId,
        reason: String,
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
        reason: String,
    },
    #[error("change {commit} is of COB type {found:?}, not {TYPE_NAME}")]
    WrongType {
        commit: gix::ObjectId,
        found: String,
    },
    #[error("change {commit}: {reason}")]
    Actions {
        commit: gix::ObjectId,
        reason: String,
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
    #[error("change {commit}: document {blob}: {source}")]
    Document {
        commit: gix::ObjectId,
        blob: gix::ObjectId,
        source: IdentityError,
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

fn git_err(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> CobError {
    CobError::Git(super::GitError::new(e))
}

/// A git object id as radicle serialises it in actions: 40 hex characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Oid(gix::ObjectId);

impl<'de> Deserialize<'de> for Oid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        gix::ObjectId::from_hex(s.as_bytes())
            .map(Oid)
            .map_err(|_| serde::de::Error::custom(format!("invalid object id {s:?}")))
    }
}

/// An action signature: raw Ed25519 (64 bytes) as multibase base58btc (`z…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sig([u8; 64]);

impl<'de> Deserialize<'de> for Sig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let encoded = s.strip_prefix('z').ok_or_else(|| {
            serde::de::Error::custom("signature is not multibase base58btc (`z…`)")
        })?;
        let bytes = bs58::decode(encoded)
            .into_vec()
            .map_err(|_| serde::de::Error::custom("signature is not valid base58"))?;
        let sig: [u8; 64] = bytes.as_slice().try_into().map_err(|_| {
            serde::de::Error::custom(format!("signature is {} bytes, expected 64", bytes.len()))
        })?;
        Ok(Sig(sig))
    }
}

/// Identity actions (`cob/identity.rs` `Action`). Titles and descriptions are required or
/// accepted as radicle does, but play no part in verification.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Action {
    #[serde(rename = "revision")]
    Revision {
        #[serde(rename = "title")]
        _title: String,
        #[serde(default, rename = "description")]
        _description: String,
        blob: Oid,
        parent: Option<Oid>,
        signature: Sig,
    },
    RevisionEdit {
        revision: Oid,
        #[serde(rename = "title")]
        _title: String,
        #[serde(default, rename = "description")]
        _description: String,
    },
    #[serde(rename = "revision.accept")]
    RevisionAccept { revision: Oid, signature: Sig },
    #[serde(rename = "revision.reject")]
    RevisionReject { revision: Oid },
    #[serde(rename = "revision.redact")]
    RevisionRedact { revision: Oid },
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(rename = "typeName", alias = "typename")]
    type_name: String,
    #[serde(default)]
    version: Option<u64>,
}

/// One loaded and signature-checked COB change.
struct Change {
    id: gix::ObjectId,
    /// The key in the commit's SSH signature, which verified over the tree id.
    author: NodeId,
    /// Committer time in seconds (radicle's ordering key; negative times wrap like radicle's).
    timestamp: u64,
    /// History parents: the commit's parents minus `Rad-Resource`/`Rad-Related` ones.
    parents: Vec<gix::ObjectId>,
    actions: Vec<Action>,
    /// Blob at `embeds/radicle.json`, if any.
    embed: Option<gix::ObjectId>,
}

/// Read a blob, bounded in size.
fn read_blob(
    git: &gix::Repository,
    commit: gix::ObjectId,
    id: gix::ObjectId,
    what: &'static str,
    limit: u64,
) -> Result<Vec<u8>, CobError> {
    let header = git.find_header(id).map_err(git_err)?;
    if header.kind() != gix::objs::Kind::Blob {
        return Err(CobError::NotABlob {
            what,
            id,
            kind: header.kind(),
        });
    }
    if header.size() > limit {
        return Err(CobError::TooLarge {
            commit,
            what,
            size: header.size(),
        });
    }
    let blob = git.find_blob(id).map_err(git_err)?;
    Ok(blob.data.clone())
}

/// Extract the key and the raw 64-byte Ed25519 signature from an SSHSIG PEM
/// (`radicle-crypto/src/ssh.rs` `ExtendedSignature::from_pem`). The SSHSIG namespace and hash
/// fields are not part of what is signed, so they are not interpreted (radicle does not either).
fn parse_sshsig(pem: &[u8]) -> Result<(NodeId, [u8; 64]), String> {
    if !pem.starts_with(SSH_SIGNATURE_PEM) {
        return Err("not an SSH signature PEM".to_owned());
    }
    let sig = ssh_key::SshSig::from_pem(pem).map_err(|e| e.to_string())?;
    let key = sig.public_key().ed25519().ok_or_else(|| {
        format!(
            "key type {} is not ssh-ed25519",
            sig.public_key().algorithm()
        )
    })?;
    if sig.signature().algorithm() != ssh_key::Algorithm::Ed25519 {
        return Err(format!(
            "signature type {} is not ssh-ed25519",
            sig.signature().algorithm()
        ));
    }
    let bytes = sig.signature().as_bytes();
    let raw: [u8; 64] = bytes
        .try_into()
        .map_err(|_| format!("signature is {} bytes, expected 64", bytes.len()))?;
    Ok((NodeId::from_bytes(key.0), raw))
}

/// Load a change (`radicle-cob/src/backend/git/change.rs` `load`) and verify its commit signature
/// (`change/store.rs` `valid_signatures`): exactly one SSH signature, plain Ed25519 over the 20 raw
/// bytes of the tree id.
fn load_change(git: &gix::Repository, id: gix::ObjectId) -> Result<Change, CobError> {
    let commit = git.find_commit(id).map_err(git_err)?;
    let decoded = commit.decode().map_err(git_err)?;
    let tree_id = decoded.tree();

    let signatures: Vec<&gix::bstr::BStr> = decoded.extra_headers().find_all("gpgsig").collect();
    let pem = match signatures.as_slice() {
        [] => return Err(CobError::Unsigned { commit: id }),
        [one] => *one,
        many => {
            return Err(CobError::MultipleSignatures {
                commit: id,
                count: many.len(),
            })
        }
    };
    let (author, signature) = parse_sshsig(pem.trim_ascii())
        .map_err(|reason| CobError::SshSignature { commit: id, reason })?;
    author
        .verify(tree_id.as_bytes(), &signature)
        .map_err(|_| CobError::CommitSignature {
            commit: id,
            signer: author,
            tree: tree_id,
        })?;

    let timestamp = decoded
        .committer()
        .and_then(|c| c.time())
        .map_err(|e| CobError::Committer {
            commit: id,
            source: super::GitError::new(e),
        })?
        .seconds as u64;

    // Trailers: parents named by `Rad-Resource`/`Rad-Related` are not history parents
    // (`change.rs` `load`, `trailers.rs`). Other trailers are ignored.
    let mut resources = Vec::new();
    let mut related = Vec::new();
    if let Some(body) = decoded.message().body() {
        for trailer in body.trailers() {
            let target = if trailer.token == "Rad-Resource" {
                &mut resources
            } else if trailer.token == "Rad-Related" {
                &mut related
            } else {
                continue;
            };
            let value = trailer.value.trim_ascii();
            let oid = gix::ObjectId::from_hex(value).map_err(|_| CobError::Trailer {
                commit: id,
                reason: format!("{}: invalid object id {:?}", trailer.token, trailer.value),
            })?;
            target.push(oid);
        }
    }
    if resources.len() > 1 {
        return Err(CobError::Trailer {
            commit: id,
            reason: "more than one Rad-Resource".to_owned(),
        });
    }
    let parents: Vec<gix::ObjectId> = decoded
        .parents()
        .filter(|p| !resources.contains(p) && !related.contains(p))
        .collect();

    // Tree: `manifest`, numbered action blobs, `embeds/radicle.json`.
    let tree = git.find_tree(tree_id).map_err(git_err)?;
    let mut manifest = None;
    let mut numbered: BTreeMap<i8, gix::ObjectId> = BTreeMap::new();
    for entry in &tree.decode().map_err(git_err)?.entries {
        if !entry.mode.is_blob() {
            continue;
        }
        if entry.filename == "manifest" {
            manifest = Some(entry.oid.to_owned());
        } else if let Some(ix) = std::str::from_utf8(entry.filename)
            .ok()
            .and_then(|name| name.parse::<i8>().ok())
        {
            // radicle keys actions by the name parsed as `i8`; two names for one index would be
            // resolved arbitrarily there, so they are refused here.
            if numbered.insert(ix, entry.oid.to_owned()).is_some() {
                return Err(CobError::Actions {
                    commit: id,
                    reason: format!("two action blobs for index {ix}"),
                });
            }
        }
    }
    let manifest = manifest.ok_or_else(|| CobError::Manifest {
        commit: id,
        reason: "no manifest blob".to_owned(),
    })?;
    let bytes = read_blob(git, id, manifest, "manifest", MAX_BLOB_BYTES)?;
    let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| CobError::Manifest {
        commit: id,
        reason: e.to_string(),
    })?;
    if manifest.version == Some(0) {
        return Err(CobError::Manifest {
            commit: id,
            reason: "version 0".to_owned(),
        });
    }
    if manifest.type_name != TYPE_NAME {
        return Err(CobError::WrongType {
            commit: id,
            found: manifest.type_name,
        });
    }
    if numbered.is_empty() {
        return Err(CobError::Actions {
            commit: id,
            reason: "no actions".to_owned(),
        });
    }
    let mut actions = Vec::with_capacity(numbered.len());
    for (ix, blob) in numbered {
        let bytes = read_blob(git, id, blob, "action", MAX_BLOB_BYTES)?;
        let action: Action = serde_json::from_slice(&bytes).map_err(|e| CobError::Actions {
            commit: id,
            reason: format!("action {ix}: {e}"),
        })?;
        actions.push(action);
    }
    let embed = match tree.lookup_entry_by_path(DOC_PATH).map_err(git_err)? {
        Some(entry) if entry.mode().is_blob() => Some(entry.object_id()),
        _ => None,
    };

    Ok(Change {
        id,
        author,
        timestamp,
        parents,
        actions,
        embed,
    })
}

/// Load and check the document blob `blob` of change `commit`.
fn load_doc(
    git: &gix::Repository,
    commit: gix::ObjectId,
    blob: gix::ObjectId,
) -> Result<Doc, CobError> {
    let bytes = read_blob(git, commit, blob, "document", MAX_DOC_BYTES)?;
    if git_blob_oid(&bytes) != blob.as_bytes() {
        return Err(CobError::Corrupt {
            commit,
            object: blob,
        });
    }
    Doc::from_json(&bytes).map_err(|source| CobError::Document {
        commit,
        blob,
        source,
    })
}

/// Documents compared as radicle's `Doc: PartialEq` does (its `allow` list is a set).
fn same_doc(a: &Doc, b: &Doc) -> bool {
    fn allow(v: &Visibility) -> Option<BTreeSet<NodeId>> {
        match v {
            Visibility::Public => None,
            Visibility::Private { allow } => Some(allow.iter().copied().collect()),
        }
    }
    a.payload == b.payload
        && a.delegates == b.delegates
        && a.threshold == b.threshold
        && allow(&a.visibility) == allow(&b.visibility)
}

/// `Doc::majority`: ⌊n/2⌋+1 of the delegate set.
fn majority(doc: &Doc) -> usize {
    doc.delegates.len() / 2 + 1
}

/// `Doc::verify_signature`: `key` is a delegate of `doc` and signed the 20 raw bytes of `blob`.
fn verify_doc_signature(doc: &Doc, key: &NodeId, sig: &Sig, blob: gix::ObjectId) -> bool {
    doc.delegates.contains(key) && key.verify(blob.as_bytes(), &sig.0).is_ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Active,
    Accepted,
    Rejected,
    Redacted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Accept,
    Reject,
}

struct Revision {
    blob: gix::ObjectId,
    doc: Doc,
    author: NodeId,
    parent: Option<gix::ObjectId>,
    state: State,
    verdicts: BTreeMap<NodeId, Verdict>,
    children: Vec<gix::ObjectId>,
}

impl Revision {
    fn accepts(&self) -> impl Iterator<Item = &NodeId> + '_ {
        self.verdicts
            .iter()
            .filter(|(_, v)| **v == Verdict::Accept)
            .map(|(k, _)| k)
    }
}

/// The identity state machine of `cob/identity.rs`, without the parts that only matter for
/// display (titles, timeline) and with "why a revision was rejected/redacted" collapsed (it only
/// changes log messages there).
struct Evaluation {
    revisions: BTreeMap<gix::ObjectId, Revision>,
    current: gix::ObjectId,
}

impl Evaluation {
    /// `Identity::from_root`.
    fn from_root(
        git: &gix::Repository,
        rid: RepoId,
        root: &Change,
    ) -> Result<Evaluation, CobError> {
        let commit = root.id;
        let (blob, parent, signature) = match root.actions.as_slice() {
            [Action::Revision {
                blob,
                parent,
                signature,
                ..
            }] => (blob.0, parent, signature),
            [] | [_] => {
                return Err(CobError::Root {
                    commit,
                    reason: "the first action must be of type `revision`",
                })
            }
            _ => {
                return Err(CobError::Root {
                    commit,
                    reason: "the root change must contain exactly one action",
                })
            }
        };
        if parent.is_some() {
            return Err(CobError::Root {
                commit,
                reason: "the initial revision must not have a parent",
            });
        }
        let embedded = root.embed.ok_or(CobError::Root {
            commit,
            reason: "no document at embeds/radicle.json",
        })?;
        if embedded != blob {
            return Err(CobError::RootBlob {
                commit,
                embedded,
                blob,
            });
        }
        if embedded.as_bytes() != rid.as_bytes() {
            return Err(CobError::RootNotRid {
                commit,
                blob: embedded,
                rid,
            });
        }
        let doc = load_doc(git, commit, blob)?;
        let founder = doc.delegates.first().copied().ok_or(CobError::Root {
            commit,
            reason: "the document has no delegates",
        })?;
        if founder != root.author {
            return Err(CobError::Founder {
                commit,
                author: root.author,
                founder,
            });
        }
        if !verify_doc_signature(&doc, &founder, signature, blob) {
            return Err(CobError::ActionSignature {
                commit,
                signer: founder,
                blob,
            });
        }
        let revision = Revision {
            blob,
            doc,
            author: root.author,
            parent: None,
            state: State::Accepted,
            verdicts: BTreeMap::from([(root.author, Verdict::Accept)]),
            children: Vec::new(),
        };
        Ok(Evaluation {
            revisions: BTreeMap::from([(commit, revision)]),
            current: commit,
        })
    }

    fn revision(&self, commit: gix::ObjectId, id: gix::ObjectId) -> Result<&Revision, CobError> {
        self.revisions.get(&id).ok_or(CobError::MissingRevision {
            commit,
            revision: id,
        })
    }

    fn revision_mut(
        &mut self,
        commit: gix::ObjectId,
        id: gix::ObjectId,
    ) -> Result<&mut Revision, CobError> {
        self.revisions
            .get_mut(&id)
            .ok_or(CobError::MissingRevision {
                commit,
                revision: id,
            })
    }

    /// `Identity::action`. Errors are fatal here (radicle prunes the change and what depends on
    /// it), except where radicle tolerates them.
    fn action(
        &mut self,
        git: &gix::Repository,
        change: &Change,
        action: &Action,
    ) -> Result<(), CobError> {
        let commit = change.id;
        let author = change.author;
        match action {
            Action::RevisionAccept {
                revision: Oid(id),
                signature,
            } => self.verdict(commit, author, *id, Some(signature)),
            Action::RevisionReject { revision: Oid(id) } => self.verdict(commit, author, *id, None),
            Action::RevisionEdit {
                revision: Oid(id), ..
            } => {
                let revision = self.revision(commit, *id)?;
                // Checked before the state (radicle checks it after), so that even a tolerated
                // edit comes from the revision's author, who was a delegate.
                if revision.author != author {
                    return Err(CobError::NotRevisionAuthor {
                        commit,
                        author,
                        revision: *id,
                        action: "edit",
                    });
                }
                if revision.state != State::Active {
                    return Err(CobError::UnexpectedState {
                        commit,
                        revision: *id,
                    });
                }
                Ok(())
            }
            Action::RevisionRedact { revision: Oid(id) } => {
                let revision = self.revision_mut(commit, *id)?;
                if revision.author != author {
                    return Err(CobError::NotRevisionAuthor {
                        commit,
                        author,
                        revision: *id,
                        action: "redact",
                    });
                }
                if revision.state == State::Active {
                    revision.state = State::Redacted;
                    self.cascade(*id, State::Redacted);
                }
                Ok(())
            }
            Action::Revision {
                blob: Oid(blob),
                parent,
                signature,
                ..
            } => self.revision_action(git, change, *blob, parent.map(|p| p.0), signature),
        }
    }

    /// `revision.accept` (`signature` is `Some`) and `revision.reject`.
    fn verdict(
        &mut self,
        commit: gix::ObjectId,
        author: NodeId,
        id: gix::ObjectId,
        signature: Option<&Sig>,
    ) -> Result<(), CobError> {
        let action = if signature.is_some() {
            "accept a revision"
        } else {
            "reject a revision"
        };
        let revision = self.revision(commit, id)?;
        let (blob, state, parent_id) = (revision.blob, revision.state, revision.parent);
        let parent = match parent_id {
            Some(p) => self.revision(commit, p)?,
            // Only the root has no parent; its own delegates authorise.
            None => revision,
        };
        if !parent.doc.delegates.contains(&author) {
            // radicle skips verdicts on settled revisions without looking at the author; a
            // change by a non-delegate is refused here in every case.
            return Err(CobError::NotDelegate {
                commit,
                author,
                action,
            });
        }
        if state != State::Active {
            return Ok(()); // already accepted/rejected/redacted: skipped, as radicle does
        }
        let Some(parent_id) = parent_id else {
            return Err(CobError::MissingParent { commit });
        };
        match signature {
            Some(signature) => {
                // A delegate accepts at most one active child of a parent; later accepts of a
                // sibling are skipped (old histories did not enforce it).
                if self.accepted_active_child(parent_id, &author).is_some() {
                    return Ok(());
                }
                if !verify_doc_signature(&parent.doc, &author, signature, blob) {
                    return Err(CobError::ActionSignature {
                        commit,
                        signer: author,
                        blob,
                    });
                }
                let revision = self.revision_mut(commit, id)?;
                if revision.verdicts.insert(author, Verdict::Accept).is_some() {
                    return Err(CobError::DuplicateVerdict {
                        commit,
                        author,
                        revision: id,
                    });
                }
                self.adopt(id);
            }
            None => {
                let rejection_threshold = parent.doc.delegates.len() - majority(&parent.doc);
                let revision = self.revision_mut(commit, id)?;
                if revision.verdicts.insert(author, Verdict::Reject).is_some() {
                    return Err(CobError::DuplicateVerdict {
                        commit,
                        author,
                        revision: id,
                    });
                }
                let rejections = revision
                    .verdicts
                    .values()
                    .filter(|v| **v == Verdict::Reject)
                    .count();
                if rejections > rejection_threshold {
                    revision.state = State::Rejected;
                    self.cascade(id, State::Rejected);
                }
            }
        }
        Ok(())
    }

    /// A new `revision`.
    fn revision_action(
        &mut self,
        git: &gix::Repository,
        change: &Change,
        blob: gix::ObjectId,
        parent: Option<gix::ObjectId>,
        signature: &Sig,
    ) -> Result<(), CobError> {
        let commit = change.id;
        let author = change.author;
        if self.revisions.contains_key(&commit) {
            return Err(CobError::MultipleRevisions { commit });
        }
        // rad always embeds the proposed document in the change that proposes it.
        if change.embed != Some(blob) {
            return Err(CobError::EmbedMismatch {
                commit,
                blob,
                embedded: change.embed,
            });
        }
        let doc = load_doc(git, commit, blob)?;
        let parent_id = parent.ok_or(CobError::MissingParent { commit })?;
        let parent = self
            .revisions
            .get(&parent_id)
            .ok_or(CobError::UnknownParent {
                commit,
                parent: parent_id,
            })?;
        if !parent.doc.delegates.contains(&author) {
            return Err(CobError::NotDelegate {
                commit,
                author,
                action: "create a revision",
            });
        }
        if same_doc(&doc, &parent.doc) {
            return Err(CobError::DocUnchanged { commit });
        }
        if !verify_doc_signature(&parent.doc, &author, signature, blob) {
            return Err(CobError::ActionSignature {
                commit,
                signer: author,
                blob,
            });
        }
        // A child of a rejected/redacted parent is dead on arrival; a child of an accepted parent
        // that already has an accepted child is a late fork.
        let state = match parent.state {
            State::Rejected => State::Rejected,
            State::Redacted => State::Redacted,
            State::Active => State::Active,
            State::Accepted => {
                let sibling_accepted = parent.children.iter().any(|c| {
                    self.revisions
                        .get(c)
                        .is_some_and(|r| r.state == State::Accepted)
                });
                if sibling_accepted {
                    State::Rejected
                } else {
                    State::Active
                }
            }
        };
        // Checked before inserting, so the new revision is not its own sibling: an author who
        // already accepted an active sibling loses the implicit accept of their own proposal.
        let strip_author_accept =
            state == State::Active && self.accepted_active_child(parent_id, &author).is_some();

        let mut verdicts = BTreeMap::new();
        if !strip_author_accept {
            verdicts.insert(author, Verdict::Accept);
        }
        self.revisions.insert(
            commit,
            Revision {
                blob,
                doc,
                author,
                parent: Some(parent_id),
                state,
                verdicts,
                children: Vec::new(),
            },
        );
        if let Some(parent) = self.revisions.get_mut(&parent_id) {
            parent.children.push(commit);
        }
        if state == State::Active {
            self.adopt(commit);
        }
        Ok(())
    }

    /// `Identity::has_accepted_active_sibling`: an active child of `parent` accepted by `who`.
    fn accepted_active_child(&self, parent: gix::ObjectId, who: &NodeId) -> Option<gix::ObjectId> {
        let parent = self.revisions.get(&parent)?;
        parent.children.iter().copied().find(|child| {
            self.revisions.get(child).is_some_and(|r| {
                r.state == State::Active && r.verdicts.get(who) == Some(&Verdict::Accept)
            })
        })
    }

    /// `Identity::adopt`, iteratively: a revision becomes current when its parent is current and
    /// its accepts reach the majority of the current (parent's) delegates; its active siblings are
    /// rejected, and its own active children are then re-evaluated under its delegate set.
    fn adopt(&mut self, id: gix::ObjectId) {
        let mut work = vec![id];
        while let Some(id) = work.pop() {
            if self.current == id {
                continue;
            }
            let Some(candidate) = self.revisions.get(&id) else {
                continue;
            };
            // radicle asserts this; a revision rejected meanwhile as a sibling is not adopted.
            if candidate.state != State::Active || candidate.parent != Some(self.current) {
                continue;
            }
            let Some(current) = self.revisions.get(&self.current) else {
                continue;
            };
            if candidate.accepts().count() < majority(&current.doc) {
                continue;
            }
            let siblings: Vec<gix::ObjectId> = current
                .children
                .iter()
                .copied()
                .filter(|c| *c != id)
                .collect();
            for sibling in siblings {
                if let Some(r) = self.revisions.get_mut(&sibling) {
                    if r.state == State::Active {
                        r.state = State::Rejected;
                        self.cascade(sibling, State::Rejected);
                    }
                }
            }
            self.current = id;
            let Some(adopted) = self.revisions.get_mut(&id) else {
                continue;
            };
            adopted.state = State::Accepted;
            let Some(adopted) = self.revisions.get(&id) else {
                continue;
            };
            let queued: Vec<gix::ObjectId> = adopted
                .children
                .iter()
                .copied()
                .filter(|c| {
                    self.revisions.get(c).is_some_and(|r| {
                        r.state == State::Active
                            && r.accepts()
                                .filter(|k| adopted.doc.delegates.contains(k))
                                .count()
                                >= majority(&adopted.doc)
                    })
                })
                .collect();
            // Depth-first in child order, like radicle's recursion.
            work.extend(queued.into_iter().rev());
        }
    }

    /// `Identity::cascade`: all active descendants of `parent` take `state`.
    fn cascade(&mut self, parent: gix::ObjectId, state: State) {
        let mut stack: Vec<gix::ObjectId> = self
            .revisions
            .get(&parent)
            .map(|r| r.children.clone())
            .unwrap_or_default();
        while let Some(next) = stack.pop() {
            let Some(r) = self.revisions.get_mut(&next) else {
                continue;
            };
            if r.state != State::Active {
                continue;
            }
            r.state = state;
            stack.extend(r.children.iter().copied());
        }
    }
}

/// The loaded history: changes and their history children.
struct Graph {
    changes: BTreeMap<gix::ObjectId, Change>,
    dependents: BTreeMap<gix::ObjectId, BTreeSet<gix::ObjectId>>,
}

impl Graph {
    fn children(&self, id: &gix::ObjectId) -> impl Iterator<Item = gix::ObjectId> + '_ {
        self.dependents.get(id).into_iter().flatten().copied()
    }

    /// Children in radicle's visiting order: by (committer time, id), iterated in reverse.
    fn ordered_children(&self, id: &gix::ObjectId) -> Vec<gix::ObjectId> {
        let mut children: Vec<(u64, gix::ObjectId)> = self
            .children(id)
            .filter_map(|c| self.changes.get(&c).map(|ch| (ch.timestamp, c)))
            .collect();
        children.sort();
        children.into_iter().rev().map(|(_, c)| c).collect()
    }

    /// The evaluation order of `radicle-cob` (`ChangeGraph::evaluate` → `Dag::prune_by` with
    /// `chronological`): for each child of the root in id order, a depth-first visit whose
    /// post-order is prepended to the result. Iterative, to bound stack use.
    fn order(&self, root: &gix::ObjectId) -> VecDeque<gix::ObjectId> {
        let mut visited = BTreeSet::new();
        let mut order = VecDeque::new();
        for start in self.children(root) {
            if !visited.insert(start) {
                continue;
            }
            let mut stack = vec![(start, self.ordered_children(&start), 0usize)];
            while let Some((key, children, next)) = stack.last_mut() {
                if let Some(child) = children.get(*next).copied() {
                    *next += 1;
                    if visited.insert(child) {
                        let grandchildren = self.ordered_children(&child);
                        stack.push((child, grandchildren, 0));
                    }
                } else {
                    order.push_front(*key);
                    stack.pop();
                }
            }
        }
        order
    }

    /// Whether some change is neither an ancestor nor a descendant of `id` (radicle's
    /// "concurrent" entries, which make a stale edit tolerable).
    fn has_concurrent(&self, id: &gix::ObjectId) -> bool {
        let mut related = BTreeSet::from([*id]);
        let mut stack: Vec<gix::ObjectId> = self
            .changes
            .get(id)
            .map(|c| c.parents.clone())
            .unwrap_or_default();
        while let Some(next) = stack.pop() {
            if related.insert(next) {
                if let Some(c) = self.changes.get(&next) {
                    stack.extend(c.parents.iter().copied());
                }
            }
        }
        let mut stack: Vec<gix::ObjectId> = self.children(id).collect();
        while let Some(next) = stack.pop() {
            if related.insert(next) {
                stack.extend(self.children(&next));
            }
        }
        related.len() < self.changes.len()
    }
}

/// Verify the identity COB history ending at `head` for repository `rid` and return the latest
/// adopted revision's document (`head`/`blob` of the result are that revision's change and blob).
///
/// Every change reachable from `head` through history parents must be a signed `xyz.radicle.id`
/// change; the history must have exactly one root, whose document is the RID; every action must
/// be authorised and correctly signed (see the module documentation and protocol.md §1.4).
pub fn verify_identity(
    git: &gix::Repository,
    rid: RepoId,
    head: gix::ObjectId,
) -> Result<Identity, CobError> {
    verify_identity_heads(git, rid, &[head])
}

/// [`verify_identity`] over the union of several heads' histories (ours and a peer's, say):
/// the change graph is merged and replayed once, so which revision is adopted is decided by
/// the identity rules alone, never by which side's head was read last. All heads must share
/// the one root.
pub fn verify_identity_heads(
    git: &gix::Repository,
    rid: RepoId,
    heads: &[gix::ObjectId],
) -> Result<Identity, CobError> {
    let head = *heads.first().ok_or(CobError::NoHeads)?;
    let mut changes: BTreeMap<gix::ObjectId, Change> = BTreeMap::new();
    let mut stack = heads.to_vec();
    while let Some(id) = stack.pop() {
        if changes.contains_key(&id) {
            continue;
        }
        if changes.len() >= MAX_CHANGES {
            return Err(CobError::TooLong);
        }
        let change = load_change(git, id)?;
        stack.extend(change.parents.iter().copied());
        changes.insert(id, change);
    }
    let roots: Vec<gix::ObjectId> = changes
        .values()
        .filter(|c| c.parents.is_empty())
        .map(|c| c.id)
        .collect();
    let root = match roots.as_slice() {
        [root] => *root,
        [] => return Err(CobError::NoRoot { head }),
        _ => return Err(CobError::MultipleRoots { roots }),
    };
    let mut dependents: BTreeMap<gix::ObjectId, BTreeSet<gix::ObjectId>> = BTreeMap::new();
    for change in changes.values() {
        for parent in &change.parents {
            dependents.entry(*parent).or_default().insert(change.id);
        }
    }
    let graph = Graph {
        changes,
        dependents,
    };

    let root_change = graph.changes.get(&root).ok_or(CobError::NoRoot { head })?;
    let mut eval = Evaluation::from_root(git, rid, root_change)?;
    for id in graph.order(&root) {
        let Some(change) = graph.changes.get(&id) else {
            continue;
        };
        for action in &change.actions {
            match eval.action(git, change, action) {
                Ok(()) => {}
                // A stale edit is tolerated when other changes are concurrent with this one.
                Err(CobError::UnexpectedState { .. }) if graph.has_concurrent(&id) => {}
                Err(e) => return Err(e),
            }
        }
    }

    let current = eval
        .revisions
        .remove(&eval.current)
        .ok_or(CobError::MissingRevision {
            commit: head,
            revision: eval.current,
        })?;
    Ok(Identity {
        doc: current.doc,
        head: eval.current,
        blob: current.blob,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::OnceLock;

    use ed25519_dalek::{Signer as _, SigningKey};
    use gix::objs::tree::{Entry, EntryKind};
    use serde_json::{json, Value};

    use super::*;
    use crate::storage::identity;

    const HEARTWOOD: &str = "heartwood-fixture";
    const SECRET: &str = "secret-fixture";
    const SMALL: &str = "small-fixture";
    /// After every fixture commit (make-fixtures.sh starts at 1700000000).
    const LATER: i64 = 1_800_000_000;

    /// The fixtures made by the real `rad` (scripts/make-fixtures.sh), like `tests/src/lib.rs`.
    fn fixtures_dir() -> &'static Path {
        static DIR: OnceLock<PathBuf> = OnceLock::new();
        DIR.get_or_init(|| {
            let dir = std::env::var_os("SEEDD_FIXTURES_DIR").map_or_else(
                || {
                    PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                        .join(".cache/seedd/fixtures")
                },
                PathBuf::from,
            );
            if !dir.join("fixtures.json").exists() {
                let script =
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/make-fixtures.sh");
                let status = Command::new("bash")
                    .arg(&script)
                    .arg(&dir)
                    .status()
                    .expect("run scripts/make-fixtures.sh");
                assert!(
                    status.success(),
                    "scripts/make-fixtures.sh {} failed (it needs the Radicle binaries, \
                     see scripts/install-radicle.sh)",
                    dir.display()
                );
            }
            dir
        })
    }

    struct Fixture {
        rid: RepoId,
        path: PathBuf,
        identity_head: gix::ObjectId,
        delegates: Vec<NodeId>,
    }

    fn fixture(name: &str) -> Fixture {
        let dir = fixtures_dir();
        let json: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("fixtures.json")).unwrap())
                .unwrap();
        let repo = &json["repos"][name];
        Fixture {
            rid: repo["rid"].as_str().unwrap().parse().unwrap(),
            path: dir.join(repo["path"].as_str().unwrap()),
            identity_head: gix::ObjectId::from_hex(
                repo["identity_head"].as_str().unwrap().as_bytes(),
            )
            .unwrap(),
            delegates: repo["delegates"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| NodeId::from_did(d.as_str().unwrap()).unwrap())
                .collect(),
        }
    }

    /// A writable copy of a fixture repository.
    fn copy(fx: &Fixture) -> (tempfile::TempDir, gix::Repository) {
        let tmp = tempfile::tempdir().unwrap();
        let status = Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", fx.path.display()))
            .arg(tmp.path())
            .status()
            .unwrap();
        assert!(status.success());
        let git = gix::open(tmp.path()).unwrap();
        (tmp, git)
    }

    /// A fixture user's node key (`homes/<who>/keys/radicle`, unencrypted).
    fn key(who: &str) -> SigningKey {
        let path = fixtures_dir().join(format!("homes/{who}/keys/radicle"));
        let private = ssh_key::PrivateKey::read_openssh_file(&path).unwrap();
        let pair = private.key_data().ed25519().unwrap();
        SigningKey::from_bytes(&pair.private.to_bytes())
    }

    fn nid(key: &SigningKey) -> NodeId {
        NodeId::from_bytes(key.verifying_key().to_bytes())
    }

    /// Action signature: raw Ed25519 over the blob id bytes, multibase base58btc.
    fn sign_blob(key: &SigningKey, blob: gix::ObjectId) -> String {
        let sig = key.sign(blob.as_bytes());
        format!("z{}", bs58::encode(sig.to_bytes()).into_string())
    }

    /// The SSHSIG PEM rad puts in `gpgsig`: raw Ed25519 over the tree id bytes.
    fn sshsig(key: &SigningKey, tree: gix::ObjectId) -> String {
        let sig = key.sign(tree.as_bytes());
        ssh_key::SshSig::new(
            ssh_key::public::KeyData::Ed25519(ssh_key::public::Ed25519PublicKey(
                key.verifying_key().to_bytes(),
            )),
            "radicle",
            ssh_key::HashAlg::Sha256,
            ssh_key::Signature::new(ssh_key::Algorithm::Ed25519, sig.to_bytes().to_vec()).unwrap(),
        )
        .unwrap()
        .to_pem(ssh_key::LineEnding::LF)
        .unwrap()
    }

    fn write_tree(
        git: &gix::Repository,
        actions: &[Value],
        doc: Option<gix::ObjectId>,
    ) -> gix::ObjectId {
        let blob = |bytes: &[u8]| git.write_blob(bytes).unwrap().detach();
        let mut entries = vec![Entry {
            mode: EntryKind::Blob.into(),
            filename: "manifest".into(),
            oid: blob(br#"{"typeName":"xyz.radicle.id","version":1}"#),
        }];
        for (i, action) in actions.iter().enumerate() {
            entries.push(Entry {
                mode: EntryKind::Blob.into(),
                filename: i.to_string().into(),
                oid: blob(&serde_json::to_vec(action).unwrap()),
            });
        }
        if let Some(doc) = doc {
            let embeds = gix::objs::Tree {
                entries: vec![Entry {
                    mode: EntryKind::Blob.into(),
                    filename: "radicle.json".into(),
                    oid: doc,
                }],
            };
            entries.push(Entry {
                mode: EntryKind::Tree.into(),
                filename: "embeds".into(),
                oid: git.write_object(&embeds).unwrap().detach(),
            });
        }
        entries.sort();
        git.write_object(&gix::objs::Tree { entries })
            .unwrap()
            .detach()
    }

    fn write_commit(
        git: &gix::Repository,
        tree: gix::ObjectId,
        parents: &[gix::ObjectId],
        gpgsig: Option<&str>,
        time: i64,
        message: &str,
    ) -> gix::ObjectId {
        let who = gix::actor::Signature {
            name: "tester".into(),
            email: "tester@example.invalid".into(),
            time: gix::date::Time {
                seconds: time,
                offset: 0,
            },
        };
        let commit = gix::objs::Commit {
            tree,
            parents: parents.iter().copied().collect(),
            author: who.clone(),
            committer: who,
            encoding: None,
            message: message.into(),
            extra_headers: gpgsig
                .map(|s| vec![("gpgsig".into(), s.trim_end().into())])
                .unwrap_or_default(),
        };
        git.write_object(&commit).unwrap().detach()
    }

    /// A change signed like rad signs it.
    fn change(
        git: &gix::Repository,
        signer: &SigningKey,
        parents: &[gix::ObjectId],
        actions: &[Value],
        doc: Option<gix::ObjectId>,
        time: i64,
    ) -> gix::ObjectId {
        let tree = write_tree(git, actions, doc);
        let pem = sshsig(signer, tree);
        write_commit(git, tree, parents, Some(&pem), time, "Change\n")
    }

    fn revision(blob: gix::ObjectId, parent: Option<gix::ObjectId>, signature: String) -> Value {
        json!({
            "type": "revision",
            "title": "A revision",
            "blob": blob.to_string(),
            "parent": parent.map(|p| p.to_string()),
            "signature": signature,
        })
    }

    fn accept(revision: gix::ObjectId, signature: String) -> Value {
        json!({"type": "revision.accept", "revision": revision.to_string(), "signature": signature})
    }

    /// The document at `commit` as JSON, and a new blob with `edit` applied to it.
    fn edited_doc(
        git: &gix::Repository,
        commit: gix::ObjectId,
        edit: impl FnOnce(&mut Value),
    ) -> gix::ObjectId {
        let id = identity::read(git, commit).unwrap();
        let bytes = git.find_blob(id.blob).unwrap().data.clone();
        let mut doc: Value = serde_json::from_slice(&bytes).unwrap();
        edit(&mut doc);
        git.write_blob(serde_json::to_vec(&doc).unwrap())
            .unwrap()
            .detach()
    }

    fn root_of(git: &gix::Repository, head: gix::ObjectId) -> gix::ObjectId {
        let mut id = head;
        loop {
            let parent = git.find_commit(id).unwrap().parent_ids().next();
            match parent {
                Some(p) => id = p.detach(),
                None => return id,
            }
        }
    }

    #[test]
    fn identities_made_by_rad_verify() {
        for name in [HEARTWOOD, SECRET, SMALL] {
            let fx = fixture(name);
            let git = gix::open(&fx.path).unwrap();
            let head = git.find_reference("refs/rad/id").unwrap().id().detach();
            assert_eq!(head, fx.identity_head, "{name}");
            let verified =
                verify_identity(&git, fx.rid, head).unwrap_or_else(|e| panic!("{name}: {e}"));
            // rad adopted its own revisions: the head is the current revision.
            let read = identity::read(&git, head).unwrap();
            assert_eq!(verified.head, head, "{name}");
            assert_eq!(verified.blob, read.blob, "{name}");
            assert_eq!(verified.doc, read.doc, "{name}");
            assert_eq!(verified.doc.delegates, fx.delegates, "{name}");
            // The root alone verifies too, as the initial document.
            let root = root_of(&git, head);
            let initial = verify_identity(&git, fx.rid, root).unwrap();
            assert_eq!(initial.head, root);
            assert_eq!(initial.blob.as_bytes(), fx.rid.as_bytes());
        }
        // heartwood-fixture: `rad id update` added bob (the root has alice alone).
        let fx = fixture(HEARTWOOD);
        let git = gix::open(&fx.path).unwrap();
        let root = root_of(&git, fx.identity_head);
        assert_ne!(root, fx.identity_head);
        assert_eq!(
            verify_identity(&git, fx.rid, root)
                .unwrap()
                .doc
                .delegates
                .len(),
            1
        );
        assert_eq!(
            verify_identity(&git, fx.rid, fx.identity_head)
                .unwrap()
                .doc
                .delegates
                .len(),
            2
        );
    }

    #[test]
    fn another_repositorys_identity_is_refused() {
        let small = fixture(SMALL);
        let fx = fixture(HEARTWOOD);
        let git = gix::open(&fx.path).unwrap();
        let err = verify_identity(&git, small.rid, fx.identity_head).unwrap_err();
        assert!(matches!(err, CobError::RootNotRid { .. }), "{err}");
    }

    #[test]
    fn changed_document_with_the_old_signature_is_refused() {
        let fx = fixture(HEARTWOOD);
        let (_tmp, git) = copy(&fx);
        let alice = key("alice");
        let head = fx.identity_head;
        let root = root_of(&git, head);
        // The signature alice made for the real "Add bob" revision.
        let tree = git.find_commit(head).unwrap().tree().unwrap();
        let entry = tree.find_entry("0").unwrap().object_id();
        let action: Value = serde_json::from_slice(&git.find_blob(entry).unwrap().data).unwrap();
        let old_sig = action["signature"].as_str().unwrap().to_owned();
        // A different document (threshold 2) under that signature, in a correctly signed commit.
        let forged = edited_doc(&git, head, |doc| doc["threshold"] = json!(2));
        let bad = change(
            &git,
            &alice,
            &[root],
            &[revision(forged, Some(root), old_sig)],
            Some(forged),
            LATER,
        );
        let err = verify_identity(&git, fx.rid, bad).unwrap_err();
        assert!(
            matches!(err, CobError::ActionSignature { signer, blob, .. } if signer == nid(&alice) && blob == forged),
            "{err}"
        );
        // Control: the same change with a fresh signature is adopted.
        let good = change(
            &git,
            &alice,
            &[root],
            &[revision(forged, Some(root), sign_blob(&alice, forged))],
            Some(forged),
            LATER,
        );
        let ok = verify_identity(&git, fx.rid, good).unwrap();
        assert_eq!((ok.head, ok.blob, ok.doc.threshold), (good, forged, 2));
        // The embedded document must be the one the action names.
        let other = edited_doc(&git, head, |doc| doc["threshold"] = json!(1));
        let mismatched = change(
            &git,
            &alice,
            &[root],
            &[revision(forged, Some(root), sign_blob(&alice, forged))],
            Some(other),
            LATER,
        );
        let err = verify_identity(&git, fx.rid, mismatched).unwrap_err();
        assert!(matches!(err, CobError::EmbedMismatch { .. }), "{err}");
    }

    #[test]
    fn commit_signature_must_cover_the_tree() {
        let fx = fixture(HEARTWOOD);
        let (_tmp, git) = copy(&fx);
        let head = fx.identity_head;
        let root = root_of(&git, head);
        // The real head commit with its real gpgsig, but another (well-formed) tree.
        let mut commit: gix::objs::Commit = git
            .find_commit(head)
            .unwrap()
            .decode()
            .unwrap()
            .try_into()
            .unwrap();
        let other = edited_doc(&git, head, |doc| doc["threshold"] = json!(2));
        commit.tree = write_tree(
            &git,
            &[revision(other, Some(root), sign_blob(&key("alice"), other))],
            Some(other),
        );
        let forged = git.write_object(&commit).unwrap().detach();
        let err = verify_identity(&git, fx.rid, forged).unwrap_err();
        assert!(
            matches!(err, CobError::CommitSignature { commit, .. } if commit == forged),
            "{err}"
        );
        // A forged ancestor taints every descendant.
        let alice = key("alice");
        let third = edited_doc(&git, head, |doc| doc["threshold"] = json!(1));
        let child = change(
            &git,
            &alice,
            &[forged],
            &[revision(third, Some(forged), sign_blob(&alice, third))],
            Some(third),
            LATER + 1,
        );
        let err = verify_identity(&git, fx.rid, child).unwrap_err();
        assert!(
            matches!(err, CobError::CommitSignature { commit, .. } if commit == forged),
            "{err}"
        );
        // No signature at all.
        let tree = git.find_commit(head).unwrap().tree_id().unwrap().detach();
        let unsigned = write_commit(&git, tree, &[root], None, LATER, "Unsigned\n");
        let err = verify_identity(&git, fx.rid, unsigned).unwrap_err();
        assert!(matches!(err, CobError::Unsigned { .. }), "{err}");
        // Signed by bob, who is not a delegate of the root revision it builds on.
        let bob = key("bob");
        let by_bob = change(
            &git,
            &bob,
            &[root],
            &[revision(other, Some(root), sign_blob(&bob, other))],
            Some(other),
            LATER,
        );
        let err = verify_identity(&git, fx.rid, by_bob).unwrap_err();
        assert!(
            matches!(err, CobError::NotDelegate { author, .. } if author == nid(&bob)),
            "{err}"
        );
    }

    #[test]
    fn root_must_embed_the_rid_and_be_signed_by_the_founder() {
        let fx = fixture(HEARTWOOD);
        let (_tmp, git) = copy(&fx);
        let (alice, bob) = (key("alice"), key("bob"));
        let root = root_of(&git, fx.identity_head);
        // A well-formed root (founder alice, everything signed) of another document.
        let doc = edited_doc(&git, root, |doc| {
            doc["payload"]["xyz.radicle.project"]["name"] = json!("forged")
        });
        let forged = change(
            &git,
            &alice,
            &[],
            &[revision(doc, None, sign_blob(&alice, doc))],
            Some(doc),
            LATER,
        );
        let err = verify_identity(&git, fx.rid, forged).unwrap_err();
        assert!(
            matches!(err, CobError::RootNotRid { blob, .. } if blob == doc),
            "{err}"
        );
        // Control: it is a valid identity of the repository it does name.
        let own_rid = RepoId::from_oid_bytes(doc.as_bytes().try_into().unwrap());
        assert_eq!(verify_identity(&git, own_rid, forged).unwrap().head, forged);
        // A change on the real history that brings in that second root.
        let merge_doc = edited_doc(&git, fx.identity_head, |doc| doc["threshold"] = json!(2));
        let merge = change(
            &git,
            &alice,
            &[fx.identity_head, forged],
            &[revision(
                merge_doc,
                Some(fx.identity_head),
                sign_blob(&alice, merge_doc),
            )],
            Some(merge_doc),
            LATER + 1,
        );
        let err = verify_identity(&git, fx.rid, merge).unwrap_err();
        assert!(
            matches!(err, CobError::MultipleRoots { ref roots } if roots.len() == 2),
            "{err}"
        );
        // The real root's document, but the commit signed by bob (not the first delegate).
        let real_blob = identity::read(&git, root).unwrap().blob;
        let by_bob = change(
            &git,
            &bob,
            &[],
            &[revision(real_blob, None, sign_blob(&alice, real_blob))],
            Some(real_blob),
            LATER,
        );
        let err = verify_identity(&git, fx.rid, by_bob).unwrap_err();
        assert!(matches!(err, CobError::Founder { .. }), "{err}");
        // The real root's document with a bad founder signature.
        let bad_sig = change(
            &git,
            &alice,
            &[],
            &[revision(real_blob, None, sign_blob(&alice, doc))],
            Some(real_blob),
            LATER,
        );
        let err = verify_identity(&git, fx.rid, bad_sig).unwrap_err();
        assert!(matches!(err, CobError::ActionSignature { .. }), "{err}");
        // An action blob that differs from the embedded document.
        let mismatched = change(
            &git,
            &alice,
            &[],
            &[revision(doc, None, sign_blob(&alice, doc))],
            Some(real_blob),
            LATER,
        );
        let err = verify_identity(&git, fx.rid, mismatched).unwrap_err();
        assert!(matches!(err, CobError::RootBlob { .. }), "{err}");
        // A root with a parent revision named.
        let with_parent = change(
            &git,
            &alice,
            &[],
            &[revision(
                real_blob,
                Some(root),
                sign_blob(&alice, real_blob),
            )],
            Some(real_blob),
            LATER,
        );
        let err = verify_identity(&git, fx.rid, with_parent).unwrap_err();
        assert!(matches!(err, CobError::Root { .. }), "{err}");
    }

    #[test]
    fn revisions_are_adopted_by_a_majority_of_the_parent_delegates() {
        let fx = fixture(HEARTWOOD);
        let (_tmp, git) = copy(&fx);
        let (alice, bob) = (key("alice"), key("bob"));
        let carol = SigningKey::from_bytes(&[7; 32]);
        let head = fx.identity_head; // delegates alice and bob: majority 2
        let blob = edited_doc(&git, head, |doc| doc["threshold"] = json!(2));
        let proposal = change(
            &git,
            &alice,
            &[head],
            &[revision(blob, Some(head), sign_blob(&alice, blob))],
            Some(blob),
            LATER,
        );
        // Alice's own accept is one of two needed: the current identity stays.
        let id = verify_identity(&git, fx.rid, proposal).unwrap();
        assert_eq!((id.head, id.doc.threshold), (head, 1));
        // Bob accepts: adopted.
        let accepted = change(
            &git,
            &bob,
            &[proposal],
            &[accept(proposal, sign_blob(&bob, blob))],
            None,
            LATER + 1,
        );
        let id = verify_identity(&git, fx.rid, accepted).unwrap();
        assert_eq!((id.head, id.blob, id.doc.threshold), (proposal, blob, 2));
        // Bob's accept with a signature over another blob.
        let bad = change(
            &git,
            &bob,
            &[proposal],
            &[accept(proposal, sign_blob(&bob, head))],
            None,
            LATER + 1,
        );
        let err = verify_identity(&git, fx.rid, bad).unwrap_err();
        assert!(matches!(err, CobError::ActionSignature { .. }), "{err}");
        // Carol is no delegate: her accept does not count, it is refused.
        let by_carol = change(
            &git,
            &carol,
            &[proposal],
            &[accept(proposal, sign_blob(&carol, blob))],
            None,
            LATER + 1,
        );
        let err = verify_identity(&git, fx.rid, by_carol).unwrap_err();
        assert!(
            matches!(err, CobError::NotDelegate { author, .. } if author == nid(&carol)),
            "{err}"
        );
        // Nor may she propose.
        let carol_blob = edited_doc(&git, head, |doc| {
            doc["delegates"] = json!([nid(&carol).to_did()]);
        });
        let carol_rev = change(
            &git,
            &carol,
            &[head],
            &[revision(
                carol_blob,
                Some(head),
                sign_blob(&carol, carol_blob),
            )],
            Some(carol_blob),
            LATER,
        );
        let err = verify_identity(&git, fx.rid, carol_rev).unwrap_err();
        assert!(matches!(err, CobError::NotDelegate { .. }), "{err}");
        // A revision must change the document.
        let same = identity::read(&git, head).unwrap().blob;
        let unchanged = change(
            &git,
            &alice,
            &[head],
            &[revision(same, Some(head), sign_blob(&alice, same))],
            Some(same),
            LATER,
        );
        let err = verify_identity(&git, fx.rid, unchanged).unwrap_err();
        assert!(matches!(err, CobError::DocUnchanged { .. }), "{err}");
        // Bob rejects instead: more than n - majority = 0 rejections reject it; a later accept
        // of the rejected revision is ignored.
        let rejected = change(
            &git,
            &bob,
            &[proposal],
            &[json!({"type": "revision.reject", "revision": proposal.to_string()})],
            None,
            LATER + 1,
        );
        assert_eq!(verify_identity(&git, fx.rid, rejected).unwrap().head, head);
        let late = change(
            &git,
            &alice,
            &[rejected],
            &[accept(proposal, sign_blob(&alice, blob))],
            None,
            LATER + 2,
        );
        assert_eq!(verify_identity(&git, fx.rid, late).unwrap().head, head);
        // An accept of a revision outside the history is a missing dependency.
        let dangling = change(
            &git,
            &bob,
            &[head],
            &[accept(proposal, sign_blob(&bob, blob))],
            None,
            LATER + 1,
        );
        let err = verify_identity(&git, fx.rid, dangling).unwrap_err();
        assert!(matches!(err, CobError::MissingRevision { .. }), "{err}");
    }

    #[test]
    fn merged_heads_are_decided_by_the_identity_rules_not_by_order() {
        let fx = fixture(HEARTWOOD);
        let (_tmp, git) = copy(&fx);
        let (alice, bob) = (key("alice"), key("bob"));
        let head = fx.identity_head; // delegates alice and bob: majority 2
        let blob = edited_doc(&git, head, |doc| doc["threshold"] = json!(2));
        let proposal = change(
            &git,
            &alice,
            &[head],
            &[revision(blob, Some(head), sign_blob(&alice, blob))],
            Some(blob),
            LATER,
        );
        let accepted = change(
            &git,
            &bob,
            &[proposal],
            &[accept(proposal, sign_blob(&bob, blob))],
            None,
            LATER + 1,
        );
        // Ours behind the accepted revision, in either order: the accepted one.
        for heads in [[head, accepted], [accepted, head]] {
            let id = verify_identity_heads(&git, fx.rid, &heads).unwrap();
            assert_eq!((id.head, id.doc.threshold), (proposal, 2));
        }
        // A proposal not yet accepted adopts nothing new, whichever head is read last.
        for heads in [[head, proposal], [proposal, head]] {
            assert_eq!(
                verify_identity_heads(&git, fx.rid, &heads).unwrap().head,
                head
            );
        }
        // A forged change in one head's history fails the merge as a whole.
        let carol = SigningKey::from_bytes(&[7; 32]);
        let by_carol = change(
            &git,
            &carol,
            &[proposal],
            &[accept(proposal, sign_blob(&carol, blob))],
            None,
            LATER + 1,
        );
        assert!(verify_identity_heads(&git, fx.rid, &[accepted, by_carol]).is_err());
        assert!(matches!(
            verify_identity_heads(&git, fx.rid, &[]),
            Err(CobError::NoHeads)
        ));
    }

    #[test]
    fn resource_and_related_parents_are_not_history() {
        let fx = fixture(HEARTWOOD);
        let (_tmp, git) = copy(&fx);
        let alice = key("alice");
        let head = fx.identity_head;
        let code = git.find_reference("refs/heads/main").unwrap().id().detach();
        let blob = edited_doc(&git, head, |doc| doc["threshold"] = json!(2));
        let actions = [revision(blob, Some(head), sign_blob(&alice, blob))];
        let tree = write_tree(&git, &actions, Some(blob));
        let pem = sshsig(&alice, tree);
        for token in ["Rad-Related", "Rad-Resource"] {
            let message = format!("Propose revision\n\n{token}: {code}\n");
            let with_trailer = write_commit(&git, tree, &[head, code], Some(&pem), LATER, &message);
            let id = verify_identity(&git, fx.rid, with_trailer)
                .unwrap_or_else(|e| panic!("{token}: {e}"));
            // Alice alone is one of two delegates: not adopted, but verified.
            assert_eq!(id.head, head);
        }
        // Without the trailer the code commit is a history parent, and not a COB change.
        let plain = write_commit(&git, tree, &[head, code], Some(&pem), LATER, "Propose\n");
        let err = verify_identity(&git, fx.rid, plain).unwrap_err();
        assert!(
            matches!(err, CobError::Unsigned { commit } if commit == code),
            "{err}"
        );
        // A malformed trailer value is refused.
        let bad = write_commit(
            &git,
            tree,
            &[head],
            Some(&pem),
            LATER,
            "Propose\n\nRad-Related: nope\n",
        );
        let err = verify_identity(&git, fx.rid, bad).unwrap_err();
        assert!(matches!(err, CobError::Trailer { .. }), "{err}");
    }

    #[test]
    fn a_delegate_accepts_one_active_sibling_and_stale_edits_need_concurrency() {
        let fx = fixture(HEARTWOOD);
        let (_tmp, git) = copy(&fx);
        let (alice, bob) = (key("alice"), key("bob"));
        let head = fx.identity_head; // alice and bob: majority 2
        let blob1 = edited_doc(&git, head, |doc| doc["threshold"] = json!(2));
        let blob2 = edited_doc(&git, head, |doc| {
            doc["payload"]["xyz.radicle.project"]["description"] = json!("bob's")
        });
        let p1 = change(
            &git,
            &alice,
            &[head],
            &[revision(blob1, Some(head), sign_blob(&alice, blob1))],
            Some(blob1),
            LATER,
        );
        let p2 = change(
            &git,
            &bob,
            &[head],
            &[revision(blob2, Some(head), sign_blob(&bob, blob2))],
            Some(blob2),
            LATER + 1,
        );
        // Bob's own proposal p2 carries his accept, so his accept of the sibling p1 is skipped.
        let merge = change(
            &git,
            &bob,
            &[p1, p2],
            &[accept(p1, sign_blob(&bob, blob1))],
            None,
            LATER + 2,
        );
        assert_eq!(verify_identity(&git, fx.rid, merge).unwrap().head, head);
        // Alice's accept of p2 is skipped too: her own p1 is active and carries her accept.
        let skipped = change(
            &git,
            &alice,
            &[merge],
            &[accept(p2, sign_blob(&alice, blob2))],
            None,
            LATER + 3,
        );
        assert_eq!(verify_identity(&git, fx.rid, skipped).unwrap().head, head);
        // Once she redacts p1, her accept counts and p2 (bob's accept + alice's) is adopted.
        let redact = json!({"type": "revision.redact", "revision": p1.to_string()});
        let adopt = change(
            &git,
            &alice,
            &[merge],
            &[redact, accept(p2, sign_blob(&alice, blob2))],
            None,
            LATER + 3,
        );
        let id = verify_identity(&git, fx.rid, adopt).unwrap();
        assert_eq!((id.head, id.blob), (p2, blob2));

        let edit = |revision: gix::ObjectId| json!({"type": "RevisionEdit", "revision": revision.to_string(), "title": "Renamed"});
        // Editing the already adopted head revision, with nothing concurrent: refused.
        let stale = change(&git, &alice, &[head], &[edit(head)], None, LATER);
        let err = verify_identity(&git, fx.rid, stale).unwrap_err();
        assert!(matches!(err, CobError::UnexpectedState { .. }), "{err}");
        // The same with a concurrent change (p1) in the history: tolerated, as radicle does.
        let stale = change(&git, &alice, &[head], &[edit(head)], None, LATER + 5);
        let joined = change(&git, &alice, &[stale, p1], &[edit(p1)], None, LATER + 6);
        assert_eq!(verify_identity(&git, fx.rid, joined).unwrap().head, head);
        // Only a revision's author may edit it.
        let by_bob = change(&git, &bob, &[p1], &[edit(p1)], None, LATER + 1);
        let err = verify_identity(&git, fx.rid, by_bob).unwrap_err();
        assert!(matches!(err, CobError::NotRevisionAuthor { .. }), "{err}");
    }

    #[test]
    fn sshsig_parsing() {
        let alice = key("alice");
        let tree = gix::ObjectId::from_hex(b"242f8bf8830b62856771c2c07ae34ad5151e5bf3").unwrap();
        let pem = sshsig(&alice, tree);
        let (signer, sig) = parse_sshsig(pem.as_bytes()).unwrap();
        assert_eq!(signer, nid(&alice));
        signer.verify(tree.as_bytes(), &sig).unwrap();
        assert!(parse_sshsig(b"-----BEGIN PGP SIGNATURE-----\nabc\n").is_err());
        assert!(
            parse_sshsig(b"-----BEGIN SSH SIGNATURE-----\n!!!\n-----END SSH SIGNATURE-----")
                .is_err()
        );
    }
}
