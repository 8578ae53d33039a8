//! The identity COB's rules, without git: how a replayed history of changes makes revisions,
//! verdicts and the adopted document (`radicle-0.25.1/src/cob/identity.rs` `from_root`,
//! `action`, `adopt`) and in which order `radicle-cob` visits the changes. Documents are read
//! through [`Docs`] (git in `read.rs`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::budget::Budget;
use super::graph::Dag;
use super::CobError;
use crate::storage::identity::{Doc, Identity, Visibility};
use seedd_proto::crypto::{NodeId, RepoId};

/// Where the rules get the document a revision names: `blob`, as change `commit` embeds it
/// (checked: it hashes to its id and parses).
pub(super) trait Docs {
    fn doc(&self, commit: gix::ObjectId, blob: gix::ObjectId) -> Result<Doc, CobError>;
}

/// A git object id as radicle serialises it in actions: 40 hex characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Oid(pub(super) gix::ObjectId);

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
pub(super) struct Sig([u8; 64]);

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
pub(super) enum Action {
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

/// One loaded and signature-checked COB change.
pub(super) struct Change {
    pub(super) id: gix::ObjectId,
    /// The key in the commit's SSH signature, which verified over the tree id.
    pub(super) author: NodeId,
    /// Committer time in seconds (radicle's ordering key; negative times wrap like radicle's).
    pub(super) timestamp: u64,
    /// History parents: the commit's parents minus `Rad-Resource`/`Rad-Related` ones.
    pub(super) parents: Vec<gix::ObjectId>,
    pub(super) actions: Vec<Action>,
    /// Blob at `embeds/radicle.json`, if any.
    pub(super) embed: Option<gix::ObjectId>,
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
    pub author: NodeId,
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
    fn from_root(docs: &dyn Docs, rid: RepoId, root: &Change) -> Result<Evaluation, CobError> {
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
        let doc = docs.doc(commit, blob)?;
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
        docs: &dyn Docs,
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
            } => self.revision_action(docs, change, *blob, parent.map(|p| p.0), signature),
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
        docs: &dyn Docs,
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
        let doc = docs.doc(commit, blob)?;
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

/// The loaded history: changes and their change graph.
struct Graph {
    changes: BTreeMap<gix::ObjectId, Change>,
    dag: Dag,
}

/// The outcome of a replay: the adopted revision, who accepted it, and its lineage.
pub(super) struct Replayed {
    pub(super) identity: Identity,
    /// Delegates whose accept the adopted revision carries.
    pub(super) accepted_by: BTreeSet<NodeId>,
    /// The adopted revision and its ancestors, back to the root.
    pub(super) lineage: BTreeSet<gix::ObjectId>,
}

/// `Doc::majority` of `doc`, met by the delegates of `doc` among `keys`.
pub(super) fn quorum_of(doc: &Doc, keys: &BTreeSet<NodeId>) -> bool {
    keys.iter().filter(|k| doc.delegates.contains(k)).count() >= majority(doc)
}

/// Replays the history `changes` (ending at `head`) by the identity rules and returns the
/// latest adopted revision: one root, visited in `radicle-cob`'s order. `budget` is checked
/// for cancellation between changes.
pub(super) fn replay(
    docs: &dyn Docs,
    rid: RepoId,
    head: gix::ObjectId,
    changes: BTreeMap<gix::ObjectId, Change>,
    budget: &Budget,
) -> Result<Replayed, CobError> {
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
    let dag = Dag::new(
        changes
            .values()
            .map(|c| (c.id, c.timestamp, c.parents.clone())),
    );
    let graph = Graph { changes, dag };

    let root_change = graph.changes.get(&root).ok_or(CobError::NoRoot { head })?;
    let mut eval = Evaluation::from_root(docs, rid, root_change)?;
    for id in graph.dag.order(&root) {
        budget.check()?;
        let Some(change) = graph.changes.get(&id) else {
            continue;
        };
        for action in &change.actions {
            match eval.action(docs, change, action) {
                Ok(()) => {}
                // A stale edit is tolerated when other changes are concurrent with this one.
                Err(CobError::UnexpectedState { .. }) if graph.dag.has_concurrent(&id) => {}
                Err(e) => return Err(e),
            }
        }
    }

    let mut lineage = BTreeSet::new();
    let mut next = Some(eval.current);
    while let Some(id) = next {
        if !lineage.insert(id) {
            break;
        }
        next = eval.revisions.get(&id).and_then(|r| r.parent);
    }
    let current = eval
        .revisions
        .remove(&eval.current)
        .ok_or(CobError::MissingRevision {
            commit: head,
            revision: eval.current,
        })?;
    let accepted_by = current.accepts().copied().collect();
    Ok(Replayed {
        identity: Identity {
            doc: current.doc,
            head: eval.current,
            blob: current.blob,
        },
        accepted_by,
        lineage,
    })
}
