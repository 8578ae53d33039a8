//! Reading the identity COB from git: changes (commit signature over the tree, manifest,
//! actions, embedded document), bounded blobs and SSHSIG parsing.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::rules::{Action, Change, Docs};
use super::{
    CobError, SshSigError, DOC_PATH, MAX_BLOB_BYTES, MAX_CHANGES, MAX_DOC_BYTES, SSH_SIGNATURE_PEM,
    TYPE_NAME,
};
use crate::crypto::{git_blob_oid, NodeId};
use crate::storage::identity::Doc;

fn git_err(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> CobError {
    CobError::Git(crate::storage::GitError::new(e))
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(rename = "typeName", alias = "typename")]
    type_name: String,
    #[serde(default)]
    version: Option<u64>,
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
pub(super) fn parse_sshsig(pem: &[u8]) -> Result<(NodeId, [u8; 64]), SshSigError> {
    if !pem.starts_with(SSH_SIGNATURE_PEM) {
        return Err(SshSigError::NotPem);
    }
    let sig = ssh_key::SshSig::from_pem(pem)?;
    let key = sig
        .public_key()
        .ed25519()
        .ok_or_else(|| SshSigError::KeyType(sig.public_key().algorithm()))?;
    if sig.signature().algorithm() != ssh_key::Algorithm::Ed25519 {
        return Err(SshSigError::SignatureType(sig.signature().algorithm()));
    }
    let bytes = sig.signature().as_bytes();
    let raw: [u8; 64] = bytes
        .try_into()
        .map_err(|_| SshSigError::Length(bytes.len()))?;
    Ok((NodeId::from_bytes(key.0), raw))
}

/// One COB change as `radicle-cob` loads it (`backend/git/change.rs` `load`), of any type:
/// the commit signature checked, the actions still raw JSON blobs.
pub(crate) struct Entry {
    pub(crate) id: gix::ObjectId,
    /// The key in the commit's SSH signature, which verified over the tree id.
    pub(crate) author: NodeId,
    /// Committer time in seconds.
    pub(crate) timestamp: u64,
    /// History parents: the commit's parents minus `Rad-Resource`/`Rad-Related` ones.
    pub(crate) parents: Vec<gix::ObjectId>,
    /// The `Rad-Resource` trailer: the identity head the change commits to.
    pub(crate) resource: Option<gix::ObjectId>,
    /// Action blobs by their numeric names, in order.
    pub(crate) actions: Vec<(i8, Vec<u8>)>,
    /// The change's tree.
    pub(crate) tree: gix::ObjectId,
}

/// Load a change (`radicle-cob/src/backend/git/change.rs` `load`) and verify its commit signature
/// (`change/store.rs` `valid_signatures`): exactly one SSH signature, plain Ed25519 over the 20 raw
/// bytes of the tree id. With `type_name`, the manifest must name that COB type.
pub(crate) fn load_entry(
    git: &gix::Repository,
    id: gix::ObjectId,
    type_name: Option<&'static str>,
) -> Result<Entry, CobError> {
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
        .map_err(|source| CobError::SshSignature { commit: id, source })?;
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
            source: crate::storage::GitError::new(e),
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

    // Tree: `manifest` and numbered action blobs (other entries are embeds).
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
                return Err(CobError::DuplicateAction {
                    commit: id,
                    index: ix,
                });
            }
        }
    }
    let manifest = manifest.ok_or_else(|| CobError::Manifest {
        commit: id,
        reason: "no manifest blob",
    })?;
    let bytes = read_blob(git, id, manifest, "manifest", MAX_BLOB_BYTES)?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|source| CobError::ManifestJson { commit: id, source })?;
    if manifest.version == Some(0) {
        return Err(CobError::Manifest {
            commit: id,
            reason: "version 0",
        });
    }
    if let Some(expected) = type_name {
        if manifest.type_name != expected {
            return Err(CobError::WrongType {
                commit: id,
                found: manifest.type_name,
                expected,
            });
        }
    }
    if numbered.is_empty() {
        return Err(CobError::NoActions { commit: id });
    }
    let mut actions = Vec::with_capacity(numbered.len());
    for (ix, blob) in numbered {
        actions.push((ix, read_blob(git, id, blob, "action", MAX_BLOB_BYTES)?));
    }
    Ok(Entry {
        id,
        author,
        timestamp,
        parents,
        resource: resources.pop(),
        actions,
        tree: tree_id,
    })
}

/// Load an identity change: [`load_entry`] of type `xyz.radicle.id`, its actions parsed and
/// the document it embeds at `embeds/radicle.json`.
fn load_change(git: &gix::Repository, id: gix::ObjectId) -> Result<Change, CobError> {
    let entry = load_entry(git, id, Some(TYPE_NAME))?;
    let mut actions = Vec::with_capacity(entry.actions.len());
    for (ix, bytes) in &entry.actions {
        let action: Action =
            serde_json::from_slice(bytes).map_err(|source| CobError::ActionJson {
                commit: id,
                index: *ix,
                source,
            })?;
        actions.push(action);
    }
    let tree = git.find_tree(entry.tree).map_err(git_err)?;
    let embed = match tree.lookup_entry_by_path(DOC_PATH).map_err(git_err)? {
        Some(e) if e.mode().is_blob() => Some(e.object_id()),
        _ => None,
    };

    Ok(Change {
        id,
        author: entry.author,
        timestamp: entry.timestamp,
        parents: entry.parents,
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

impl Docs for gix::Repository {
    fn doc(&self, commit: gix::ObjectId, blob: gix::ObjectId) -> Result<Doc, CobError> {
        load_doc(self, commit, blob)
    }
}

/// Every change reachable from `heads` through history parents (at most `MAX_CHANGES`).
pub(super) fn load_history(
    git: &gix::Repository,
    heads: &[gix::ObjectId],
) -> Result<BTreeMap<gix::ObjectId, Change>, CobError> {
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
    Ok(changes)
}
