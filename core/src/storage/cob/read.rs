//! Reading the identity COB from git: changes (commit signature over the tree, manifest,
//! actions, embedded document), bounded blobs and SSHSIG parsing.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde::Deserialize;

use super::budget::{Budget, BudgetKind};
use super::rules::{Action, Change, Docs};
use super::{
    CobError, SshSigError, MAX_BLOB_BYTES, MAX_CHANGES, MAX_DOC_BYTES, SSH_SIGNATURE_PEM, TYPE_NAME,
};
use crate::storage::identity::Doc;
use seedd_proto::crypto::{git_blob_oid, NodeId};

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
    blob_size(git, commit, id, what, limit)?;
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
pub struct Entry {
    pub(crate) id: gix::ObjectId,
    /// The key in the commit's SSH signature, which verified over the tree id.
    pub(crate) author: NodeId,
    /// Committer time in seconds.
    pub(crate) timestamp: u64,
    /// History parents: the commit's parents minus `Rad-Resource`/`Rad-Related` ones.
    pub(crate) parents: Vec<gix::ObjectId>,
    /// The `Rad-Resource` trailer: the identity head the change commits to.
    pub(crate) resource: Option<gix::ObjectId>,
    /// Action blobs by their numeric names, in order (shared with the [`Memo`]: a blob named
    /// by many changes is held once).
    pub(crate) actions: Vec<(i8, Arc<[u8]>)>,
    /// Blob at `embeds/radicle.json`, if any (read for identity changes only).
    pub(crate) embed: Option<gix::ObjectId>,
}

/// What a change's tree names: `manifest`, numbered action blobs, the embedded document.
struct Listing {
    manifest: Option<gix::ObjectId>,
    numbered: Vec<(i8, gix::ObjectId)>,
    /// An index named twice (refused for every change of this tree).
    duplicate: Option<i8>,
    embed: Option<gix::ObjectId>,
}

/// Trees, blobs and commit signatures already read or checked within one evaluation, by id:
/// a tree reused by any number of changes is read from git, and its blobs inflated, once.
/// Holds no more than the [`Budget`] let the evaluation read.
#[derive(Default)]
pub(crate) struct Memo {
    trees: RefCell<HashMap<gix::ObjectId, Arc<Listing>>>,
    blobs: RefCell<HashMap<gix::ObjectId, Arc<[u8]>>>,
    /// Blob sizes from their headers (a loose object's header costs an inflate).
    sizes: RefCell<HashMap<gix::ObjectId, u64>>,
    /// (tree, signer, signature) triples that verified.
    signatures: RefCell<HashSet<(gix::ObjectId, NodeId, [u8; 64])>>,
    /// Trees read from git (tests check that a reused tree is read once).
    tree_reads: Cell<usize>,
}

impl Memo {
    #[cfg(test)]
    pub(crate) fn tree_reads(&self) -> usize {
        self.tree_reads.get()
    }

    /// The listing of tree `id` (of change `commit`), read once.
    fn listing(
        &self,
        git: &gix::Repository,
        budget: &Budget,
        commit: gix::ObjectId,
        id: gix::ObjectId,
        want_embed: bool,
    ) -> Result<Arc<Listing>, CobError> {
        if let Some(l) = self.trees.borrow().get(&id) {
            return Ok(l.clone());
        }
        self.tree_reads.set(self.tree_reads.get() + 1);
        let tree = read_tree(git, budget, commit, id)?;
        let mut manifest = None;
        let mut numbered: BTreeMap<i8, gix::ObjectId> = BTreeMap::new();
        let mut duplicate = None;
        let mut embeds = None;
        for entry in &tree.entries {
            if entry.filename == "embeds" && entry.mode.is_tree() {
                embeds = Some(entry.oid);
            }
            if !entry.mode.is_blob() {
                continue;
            }
            if entry.filename == "manifest" {
                manifest = Some(entry.oid);
            } else if let Some(ix) = std::str::from_utf8(&entry.filename)
                .ok()
                .and_then(|name| name.parse::<i8>().ok())
            {
                // radicle keys actions by the name parsed as `i8`; two names for one index
                // would be resolved arbitrarily there, so they are refused here.
                if numbered.insert(ix, entry.oid).is_some() {
                    duplicate.get_or_insert(ix);
                }
            }
        }
        let embed = match embeds {
            Some(sub) if want_embed => read_tree(git, budget, commit, sub)?
                .entries
                .iter()
                .find(|e| e.filename == "radicle.json" && e.mode.is_blob())
                .map(|e| e.oid),
            _ => None,
        };
        let listing = Arc::new(Listing {
            manifest,
            numbered: numbered.into_iter().collect(),
            duplicate,
            embed,
        });
        self.trees.borrow_mut().insert(id, listing.clone());
        Ok(listing)
    }

    /// Blobs `ids` of change `commit`, each bounded by `limit`: their total size is charged to
    /// `budget` (whether read now or before) before any is read.
    fn blobs(
        &self,
        git: &gix::Repository,
        budget: &Budget,
        commit: gix::ObjectId,
        ids: &[gix::ObjectId],
        what: &'static str,
        limit: u64,
    ) -> Result<Vec<Arc<[u8]>>, CobError> {
        let mut total = 0u64;
        for id in ids {
            let known = self.sizes.borrow().get(id).copied();
            let size = match known {
                Some(size) => size,
                None => {
                    budget.check()?;
                    let size = blob_size(git, commit, *id, what, limit)?;
                    self.sizes.borrow_mut().insert(*id, size);
                    size
                }
            };
            if size > limit {
                return Err(CobError::TooLarge { commit, what, size });
            }
            total = total.saturating_add(size);
        }
        budget.charge(BudgetKind::Bytes, total)?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(b) = self.blobs.borrow().get(id) {
                out.push(b.clone());
                continue;
            }
            budget.check()?;
            let blob: Arc<[u8]> = read_blob(git, commit, *id, what, limit)?.into();
            self.blobs.borrow_mut().insert(*id, blob.clone());
            out.push(blob);
        }
        Ok(out)
    }
}

/// Tree `id` of change `commit`, bounded by [`MAX_BLOB_BYTES`] and charged to `budget`.
fn read_tree(
    git: &gix::Repository,
    budget: &Budget,
    commit: gix::ObjectId,
    id: gix::ObjectId,
) -> Result<gix::objs::Tree, CobError> {
    let header = git.find_header(id).map_err(git_err)?;
    if header.size() > MAX_BLOB_BYTES {
        return Err(CobError::TooLarge {
            commit,
            what: "tree",
            size: header.size(),
        });
    }
    budget.charge(BudgetKind::Bytes, header.size())?;
    let tree = git.find_tree(id).map_err(git_err)?;
    let decoded = tree.decode().map_err(git_err)?;
    Ok(decoded.into())
}

/// Size of blob `id` from its header, refused over `limit` or if it is no blob.
fn blob_size(
    git: &gix::Repository,
    commit: gix::ObjectId,
    id: gix::ObjectId,
    what: &'static str,
    limit: u64,
) -> Result<u64, CobError> {
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
    Ok(header.size())
}

/// Load a change (`radicle-cob/src/backend/git/change.rs` `load`) and verify its commit signature
/// (`change/store.rs` `valid_signatures`): exactly one SSH signature, plain Ed25519 over the 20 raw
/// bytes of the tree id. With `type_name`, the manifest must name that COB type. The change, its
/// actions and the bytes parsed are charged to `budget`; trees, blobs and signatures already
/// seen in `memo` are not read or checked again.
pub(crate) fn load_entry(
    git: &gix::Repository,
    id: gix::ObjectId,
    type_name: Option<&'static str>,
    budget: &Budget,
    memo: &Memo,
) -> Result<Entry, CobError> {
    budget.charge(BudgetKind::Changes, 1)?;
    let header = git.find_header(id).map_err(git_err)?;
    if header.size() > MAX_BLOB_BYTES {
        return Err(CobError::TooLarge {
            commit: id,
            what: "commit",
            size: header.size(),
        });
    }
    budget.charge(BudgetKind::Bytes, header.size())?;
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
    let (author, signature) =
        parse_sshsig(pem.trim_ascii()).map_err(|source| CobError::SshSignature {
            commit: id,
            cause: source,
        })?;
    let checked = (tree_id, author, signature);
    if !memo.signatures.borrow().contains(&checked) {
        author
            .verify(tree_id.as_bytes(), &signature)
            .map_err(|_| CobError::CommitSignature {
                commit: id,
                signer: author,
                tree: tree_id,
            })?;
        memo.signatures.borrow_mut().insert(checked);
    }

    let timestamp = decoded
        .committer()
        .and_then(|c| c.time())
        .map_err(|e| CobError::Committer {
            commit: id,
            cause: crate::storage::GitError::new(e),
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
    let listing = memo.listing(git, budget, id, tree_id, type_name == Some(TYPE_NAME))?;
    if let Some(index) = listing.duplicate {
        return Err(CobError::DuplicateAction { commit: id, index });
    }
    let manifest = listing.manifest.ok_or(CobError::Manifest {
        commit: id,
        reason: "no manifest blob",
    })?;
    let bytes = memo
        .blobs(git, budget, id, &[manifest], "manifest", MAX_BLOB_BYTES)?
        .pop()
        .ok_or(CobError::Manifest {
            commit: id,
            reason: "no manifest blob",
        })?;
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|source| CobError::ManifestJson {
            commit: id,
            cause: source,
        })?;
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
    if listing.numbered.is_empty() {
        return Err(CobError::NoActions { commit: id });
    }
    budget.charge(BudgetKind::Actions, listing.numbered.len() as u64)?;
    let ids: Vec<gix::ObjectId> = listing.numbered.iter().map(|(_, b)| *b).collect();
    let blobs = memo.blobs(git, budget, id, &ids, "action", MAX_BLOB_BYTES)?;
    let actions = listing
        .numbered
        .iter()
        .map(|(ix, _)| *ix)
        .zip(blobs)
        .collect();
    Ok(Entry {
        id,
        author,
        timestamp,
        parents,
        resource: resources.pop(),
        actions,
        embed: listing.embed,
    })
}

/// Load an identity change: [`load_entry`] of type `xyz.radicle.id`, its actions parsed and
/// the document it embeds at `embeds/radicle.json`.
fn load_change(
    git: &gix::Repository,
    id: gix::ObjectId,
    budget: &Budget,
    memo: &Memo,
) -> Result<Change, CobError> {
    let entry = load_entry(git, id, Some(TYPE_NAME), budget, memo)?;
    let mut actions = Vec::with_capacity(entry.actions.len());
    for (ix, bytes) in &entry.actions {
        let action: Action =
            serde_json::from_slice(bytes).map_err(|source| CobError::ActionJson {
                commit: id,
                index: *ix,
                cause: source,
            })?;
        actions.push(action);
    }
    Ok(Change {
        id,
        author: entry.author,
        timestamp: entry.timestamp,
        parents: entry.parents,
        actions,
        embed: entry.embed,
    })
}

/// [`Docs`] over git: each document blob is read, checked and parsed once per verification,
/// its bytes charged to the budget.
pub(super) struct GitDocs<'a> {
    pub(super) git: &'a gix::Repository,
    pub(super) budget: &'a Budget,
    pub(super) memo: &'a Memo,
    docs: RefCell<HashMap<gix::ObjectId, Doc>>,
}

impl<'a> GitDocs<'a> {
    pub(super) fn new(git: &'a gix::Repository, budget: &'a Budget, memo: &'a Memo) -> Self {
        GitDocs {
            git,
            budget,
            memo,
            docs: RefCell::new(HashMap::new()),
        }
    }
}

impl Docs for GitDocs<'_> {
    fn doc(&self, commit: gix::ObjectId, blob: gix::ObjectId) -> Result<Doc, CobError> {
        if let Some(doc) = self.docs.borrow().get(&blob) {
            return Ok(doc.clone());
        }
        let bytes = self
            .memo
            .blobs(
                self.git,
                self.budget,
                commit,
                &[blob],
                "document",
                MAX_DOC_BYTES,
            )?
            .pop()
            .ok_or(CobError::Corrupt {
                commit,
                object: blob,
            })?;
        if git_blob_oid(&bytes) != blob.as_bytes() {
            return Err(CobError::Corrupt {
                commit,
                object: blob,
            });
        }
        let doc = Doc::from_json(&bytes).map_err(|source| CobError::Document {
            commit,
            blob,
            cause: source,
        })?;
        self.docs.borrow_mut().insert(blob, doc.clone());
        Ok(doc)
    }
}

/// Every change reachable from `heads` through history parents (at most `MAX_CHANGES`), each
/// charged to `budget`, which is checked for cancellation between changes.
pub(super) fn load_history(
    git: &gix::Repository,
    heads: &[gix::ObjectId],
    budget: &Budget,
    memo: &Memo,
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
        budget.check()?;
        let change = load_change(git, id, budget, memo)?;
        stack.extend(change.parents.iter().copied());
        changes.insert(id, change);
    }
    Ok(changes)
}
