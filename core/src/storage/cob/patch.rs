//! Patches (`xyz.radicle.patch`, `radicle/src/cob/patch.rs`): revisions, reviews, merges and
//! their discussions; who may do what (delegates anything; the patch author edits and changes
//! the lifecycle; revision, review and comment authors their own; anyone proposes revisions,
//! reviews, comments and reacts); merges count once a threshold of delegates merged the same
//! revision into their default branch.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::evaluate::Authorization;
use super::evaluate::{Cob, Op, OpError, Repo};
use super::thread::{CodeLocation, Did, Edit, Embed, Id, Reaction, Thread};
use crate::storage::identity::Doc;
use seedd_proto::crypto::NodeId;

/// COB type name of patches.
pub const TYPE_NAME: &str = "xyz.radicle.patch";

/// The merge target: only `"delegates"` exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MergeTarget {
    Delegates,
}

/// Lifecycle an author can set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", tag = "status")]
pub enum Lifecycle {
    Open,
    Draft,
    Archived,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    Accept,
    Reject,
}

/// Patch state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Draft,
    /// Open; `conflicts` lists (revision, commit) pairs when more than one merge reached the
    /// threshold.
    Open {
        conflicts: Vec<(gix::ObjectId, gix::ObjectId)>,
    },
    Archived,
    Merged {
        revision: gix::ObjectId,
        commit: gix::ObjectId,
    },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
pub enum Action {
    #[serde(rename = "edit")]
    Edit {
        title: String,
        #[serde(rename = "target")]
        _target: MergeTarget,
    },
    #[serde(rename = "label")]
    Label { labels: BTreeSet<String> },
    #[serde(rename = "lifecycle")]
    Lifecycle { state: Lifecycle },
    #[serde(rename = "assign")]
    Assign { assignees: BTreeSet<Did> },
    #[serde(rename = "merge")]
    Merge { revision: Id, commit: Id },
    #[serde(rename = "review")]
    Review {
        revision: Id,
        #[serde(default)]
        summary: Option<String>,
        #[serde(default)]
        verdict: Option<Verdict>,
        #[serde(default)]
        labels: Vec<String>,
    },
    #[serde(rename = "review.edit")]
    ReviewEdit {
        review: Id,
        #[serde(default)]
        summary: Option<String>,
        #[serde(default)]
        verdict: Option<Verdict>,
        #[serde(default)]
        labels: Vec<String>,
    },
    #[serde(rename = "review.redact")]
    ReviewRedact { review: Id },
    #[serde(rename = "review.comment")]
    ReviewComment {
        review: Id,
        body: String,
        #[serde(default)]
        location: Option<CodeLocation>,
        #[serde(default, rename = "replyTo")]
        reply_to: Option<Id>,
        #[serde(default)]
        embeds: Vec<Embed>,
    },
    #[serde(rename = "review.comment.edit")]
    ReviewCommentEdit {
        review: Id,
        comment: Id,
        body: String,
        embeds: Vec<Embed>,
    },
    #[serde(rename = "review.comment.redact")]
    ReviewCommentRedact { review: Id, comment: Id },
    #[serde(rename = "review.comment.react")]
    ReviewCommentReact {
        review: Id,
        comment: Id,
        reaction: Reaction,
        active: bool,
    },
    #[serde(rename = "review.comment.resolve")]
    ReviewCommentResolve { review: Id, comment: Id },
    #[serde(rename = "review.comment.unresolve")]
    ReviewCommentUnresolve { review: Id, comment: Id },
    #[serde(rename = "revision")]
    Revision {
        description: String,
        base: Id,
        oid: Id,
        #[serde(default, rename = "resolves")]
        _resolves: BTreeSet<(Id, Id)>,
    },
    #[serde(rename = "revision.edit")]
    RevisionEdit {
        revision: Id,
        description: String,
        #[serde(default)]
        embeds: Vec<Embed>,
    },
    #[serde(rename = "revision.react")]
    RevisionReact {
        revision: Id,
        #[serde(default)]
        location: Option<CodeLocation>,
        reaction: Reaction,
        active: bool,
    },
    #[serde(rename = "revision.redact")]
    RevisionRedact { revision: Id },
    #[serde(rename = "revision.comment")]
    RevisionComment {
        revision: Id,
        #[serde(default)]
        location: Option<CodeLocation>,
        body: String,
        #[serde(default, rename = "replyTo")]
        reply_to: Option<Id>,
        #[serde(default)]
        embeds: Vec<Embed>,
    },
    #[serde(rename = "revision.comment.edit")]
    RevisionCommentEdit {
        revision: Id,
        comment: Id,
        body: String,
        embeds: Vec<Embed>,
    },
    #[serde(rename = "revision.comment.redact")]
    RevisionCommentRedact { revision: Id, comment: Id },
    #[serde(rename = "revision.comment.react")]
    RevisionCommentReact {
        revision: Id,
        comment: Id,
        reaction: Reaction,
        active: bool,
    },
}

/// A merge by one delegate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merge {
    pub revision: gix::ObjectId,
    pub commit: gix::ObjectId,
    pub timestamp: u64,
}

/// A review of a revision (one per author).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub id: gix::ObjectId,
    pub author: NodeId,
    pub verdict: Option<Verdict>,
    pub summary: Option<String>,
    pub comments: Thread,
    pub(crate) labels: Vec<String>,
    pub timestamp: u64,
}

/// A revision: a proposed head on a base, with its description's edits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    pub author: NodeId,
    pub description: Vec<Edit>,
    pub base: gix::ObjectId,
    pub oid: gix::ObjectId,
    pub discussion: Thread,
    pub reviews: BTreeMap<NodeId, Review>,
    pub timestamp: u64,
    pub reactions: BTreeMap<Option<CodeLocation>, BTreeSet<(NodeId, Reaction)>>,
}

impl Revision {
    /// The latest description.
    pub fn description(&self) -> &str {
        self.description.last().map_or("", |e| e.body.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub title: String,
    pub author: NodeId,
    pub state: State,
    pub labels: BTreeSet<String>,
    pub merges: BTreeMap<NodeId, Merge>,
    /// By revision id (the change that proposed it); `None` once redacted.
    pub(crate) revisions: BTreeMap<gix::ObjectId, Option<Revision>>,
    pub assignees: BTreeSet<NodeId>,
    /// Every applied change, in order: the order of revisions.
    pub(crate) timeline: Vec<gix::ObjectId>,
    /// Review id → (revision, reviewer); `None` once redacted.
    pub(crate) reviews: BTreeMap<gix::ObjectId, Option<(gix::ObjectId, NodeId)>>,
}

impl Patch {
    /// Live revisions in timeline order.
    pub fn revisions(&self) -> impl Iterator<Item = (&gix::ObjectId, &Revision)> + '_ {
        self.timeline.iter().filter_map(|id| {
            self.revisions
                .get(id)
                .and_then(Option::as_ref)
                .map(|r| (id, r))
        })
    }

    /// The patch author's first revision (`Patch::root`).
    fn root(&self) -> Option<(&gix::ObjectId, &Revision)> {
        self.revisions().find(|(_, r)| r.author == self.author)
    }

    /// When the patch was opened: its root revision's time.
    pub fn timestamp(&self) -> u64 {
        self.root().map_or(0, |(_, r)| r.timestamp)
    }

    /// A revision: `Some` if live, `None` if redacted, an error if never seen.
    fn revision(&self, id: &gix::ObjectId) -> Result<Option<&Revision>, OpError> {
        match self.revisions.get(id) {
            Some(r) => Ok(r.as_ref()),
            None => Err(OpError::Missing(*id)),
        }
    }

    fn revision_mut(&mut self, id: &gix::ObjectId) -> Result<Option<&mut Revision>, OpError> {
        match self.revisions.get_mut(id) {
            Some(r) => Ok(r.as_mut()),
            None => Err(OpError::Missing(*id)),
        }
    }

    /// A review and its revision (`lookup::review`).
    fn review(&self, id: &gix::ObjectId) -> Result<Option<(&Revision, &Review)>, OpError> {
        match self.reviews.get(id) {
            Some(Some((revision, author))) => match self.revisions.get(revision) {
                Some(Some(rev)) => {
                    let review = rev.reviews.get(author).ok_or(OpError::Missing(*id))?;
                    Ok(Some((rev, review)))
                }
                Some(None) => Ok(None),
                None => Err(OpError::Missing(*revision)),
            },
            Some(None) => Ok(None),
            None => Err(OpError::Missing(*id)),
        }
    }

    fn review_mut(&mut self, id: &gix::ObjectId) -> Result<Option<&mut Review>, OpError> {
        match self.reviews.get(id) {
            Some(Some((revision, author))) => match self.revisions.get_mut(revision) {
                Some(Some(rev)) => rev
                    .reviews
                    .get_mut(author)
                    .map(Some)
                    .ok_or(OpError::Missing(*id)),
                Some(None) => Ok(None),
                None => Err(OpError::Missing(*revision)),
            },
            Some(None) => Ok(None),
            None => Err(OpError::Missing(*id)),
        }
    }

    /// `Patch::authorization`.
    fn authorization(
        &self,
        action: &Action,
        actor: &NodeId,
        doc: &Doc,
    ) -> Result<Authorization, OpError> {
        if doc.delegates.contains(actor) {
            return Ok(Authorization::Allow);
        }
        let is_author = *actor == self.author;
        Ok(match action {
            Action::Edit { .. } | Action::Lifecycle { .. } => Authorization::from(is_author),
            Action::Label { labels } => Authorization::from(*labels == self.labels),
            Action::Assign { .. } | Action::Merge { .. } => Authorization::Deny,
            Action::Review { .. }
            | Action::ReviewComment { .. }
            | Action::ReviewCommentReact { .. }
            | Action::Revision { .. }
            | Action::RevisionReact { .. }
            | Action::RevisionComment { .. }
            | Action::RevisionCommentReact { .. } => Authorization::Allow,
            Action::ReviewRedact { review } | Action::ReviewEdit { review, .. } => {
                match self.review(&review.0)? {
                    Some((_, r)) => Authorization::from(*actor == r.author),
                    None => Authorization::Unknown,
                }
            }
            Action::ReviewCommentEdit {
                review, comment, ..
            }
            | Action::ReviewCommentRedact { review, comment } => {
                match self
                    .review(&review.0)?
                    .and_then(|(_, r)| r.comments.comments.get(&comment.0)?.as_ref())
                {
                    Some(c) => Authorization::from(*actor == c.author),
                    None => Authorization::Unknown,
                }
            }
            Action::ReviewCommentResolve { review, comment }
            | Action::ReviewCommentUnresolve { review, comment } => {
                match self.review(&review.0)?.and_then(|(rev, r)| {
                    let c = r.comments.comments.get(&comment.0)?.as_ref()?;
                    Some((rev, r, c))
                }) {
                    Some((rev, r, c)) => Authorization::from(
                        *actor == c.author || *actor == r.author || *actor == rev.author,
                    ),
                    None => Authorization::Unknown,
                }
            }
            Action::RevisionEdit { revision, .. } | Action::RevisionRedact { revision } => {
                match self.revision(&revision.0)? {
                    Some(r) => Authorization::from(*actor == r.author),
                    None => Authorization::Unknown,
                }
            }
            Action::RevisionCommentEdit {
                revision, comment, ..
            }
            | Action::RevisionCommentRedact { revision, comment } => {
                match self
                    .revision(&revision.0)?
                    .and_then(|r| r.discussion.comments.get(&comment.0)?.as_ref())
                {
                    Some(c) => Authorization::from(*actor == c.author),
                    None => Authorization::Unknown,
                }
            }
        })
    }

    /// `Patch::action`.
    fn action(
        &mut self,
        action: Action,
        op: (gix::ObjectId, NodeId, u64),
        doc: &Doc,
        repo: &dyn Repo,
    ) -> Result<(), OpError> {
        let (entry, author, timestamp) = op;
        match action {
            Action::Edit { title, .. } => self.title = title,
            Action::Lifecycle { state } => {
                let settable = matches!(&self.state, State::Draft | State::Archived)
                    || self.state == State::Open { conflicts: vec![] };
                if settable {
                    self.state = match state {
                        Lifecycle::Open => State::Open { conflicts: vec![] },
                        Lifecycle::Draft => State::Draft,
                        Lifecycle::Archived => State::Archived,
                    };
                }
            }
            Action::Label { labels } => self.labels = labels,
            Action::Assign { assignees } => {
                self.assignees = assignees.into_iter().map(|d| d.0).collect();
            }
            Action::RevisionEdit {
                revision,
                description,
                embeds,
            } => {
                if let Some(r) = self.revision_mut(&revision.0)? {
                    r.description.push(Edit {
                        author,
                        timestamp,
                        body: description,
                        embeds,
                    });
                }
            }
            Action::Revision {
                description,
                base,
                oid,
                ..
            } => {
                self.revisions.insert(
                    entry,
                    Some(Revision {
                        author,
                        description: vec![Edit {
                            author,
                            timestamp,
                            body: description,
                            embeds: Vec::new(),
                        }],
                        base: base.0,
                        oid: oid.0,
                        discussion: Thread::default(),
                        reviews: BTreeMap::new(),
                        timestamp,
                        reactions: BTreeMap::new(),
                    }),
                );
            }
            Action::RevisionReact {
                revision,
                location,
                reaction,
                active,
            } => {
                if let Some(r) = self.revision_mut(&revision.0)? {
                    let set = r.reactions.entry(location).or_default();
                    if active {
                        set.insert((author, reaction));
                    } else {
                        set.remove(&(author, reaction));
                    }
                }
            }
            Action::RevisionRedact { revision } => {
                if self.root().map(|(id, _)| *id) == Some(revision.0) {
                    return Err(OpError::NotAllowed(entry));
                }
                let merged = self.merges.values().any(|m| m.revision == revision.0);
                match self.revisions.get_mut(&revision.0) {
                    Some(_) if merged => {}
                    Some(r) => *r = None,
                    None => return Err(OpError::Missing(revision.0)),
                }
            }
            Action::Review {
                revision,
                summary,
                verdict,
                labels,
            } => {
                // A review of an unknown or redacted revision is ignored; a second review by
                // the same author too.
                if let Some(Some(rev)) = self.revisions.get_mut(&revision.0) {
                    if let std::collections::btree_map::Entry::Vacant(e) = rev.reviews.entry(author)
                    {
                        e.insert(Review {
                            id: entry,
                            author,
                            verdict,
                            summary,
                            comments: Thread::default(),
                            labels,
                            timestamp,
                        });
                        self.reviews.insert(entry, Some((revision.0, author)));
                    }
                }
            }
            Action::ReviewEdit {
                review,
                summary,
                verdict,
                labels,
            } => {
                if summary.is_none() && verdict.is_none() {
                    return Err(OpError::EmptyReview);
                }
                if let Some(r) = self.review_mut(&review.0)? {
                    r.verdict = verdict;
                    r.summary = summary;
                    r.labels = labels;
                }
            }
            Action::ReviewCommentReact {
                review,
                comment,
                reaction,
                active,
            } => {
                if let Some(r) = self.review_mut(&review.0)? {
                    r.comments
                        .react(entry, author, comment.0, reaction, active)?;
                }
            }
            Action::ReviewCommentRedact { review, comment } => {
                if let Some(r) = self.review_mut(&review.0)? {
                    r.comments.redact(entry, comment.0)?;
                }
            }
            Action::ReviewCommentEdit {
                review,
                comment,
                body,
                embeds,
            } => {
                if let Some(r) = self.review_mut(&review.0)? {
                    r.comments
                        .edit(entry, author, comment.0, timestamp, body, embeds)?;
                }
            }
            Action::ReviewCommentResolve { review, comment } => {
                if let Some(r) = self.review_mut(&review.0)? {
                    r.comments.resolve(entry, comment.0, true)?;
                }
            }
            Action::ReviewCommentUnresolve { review, comment } => {
                if let Some(r) = self.review_mut(&review.0)? {
                    r.comments.resolve(entry, comment.0, false)?;
                }
            }
            Action::ReviewComment {
                review,
                body,
                location,
                reply_to,
                embeds,
            } => {
                if let Some(r) = self.review_mut(&review.0)? {
                    r.comments.comment_on(
                        entry,
                        author,
                        timestamp,
                        body,
                        reply_to.map(|x| x.0),
                        location,
                        embeds,
                    )?;
                }
            }
            Action::ReviewRedact { review } => {
                let Some(locator) = self.reviews.get_mut(&review.0) else {
                    return Err(OpError::Missing(review.0));
                };
                let Some((revision, reviewer)) = *locator else {
                    return Ok(());
                };
                match self.revisions.get_mut(&revision) {
                    None => return Err(OpError::Missing(revision)),
                    Some(None) => return Ok(()),
                    Some(Some(rev)) => {
                        rev.reviews.remove(&reviewer);
                    }
                }
                if let Some(locator) = self.reviews.get_mut(&review.0) {
                    *locator = None;
                }
            }
            Action::Merge { revision, commit } => {
                if self.revision_mut(&revision.0)?.is_none() {
                    return Ok(());
                }
                // The merge counts only if the commit is on the merging delegate's default
                // branch (the branch can move later; then the merge is skipped, not an error).
                let branch = doc
                    .project()
                    .map(|p| p.default_branch)
                    .ok_or(OpError::Init("identity document has no project"))?;
                let Some(head) = repo.branch_tip(&author, &branch) else {
                    return Ok(());
                };
                if commit.0 != head && !repo.is_ancestor(commit.0, head)? {
                    return Ok(());
                }
                self.merges.insert(
                    author,
                    Merge {
                        revision: revision.0,
                        commit: commit.0,
                        timestamp,
                    },
                );
                let mut counts: BTreeMap<(gix::ObjectId, gix::ObjectId), usize> = BTreeMap::new();
                for m in self.merges.values() {
                    *counts.entry((m.revision, m.commit)).or_default() += 1;
                }
                let quorum: Vec<(gix::ObjectId, gix::ObjectId)> = counts
                    .into_iter()
                    .filter(|(_, n)| *n >= doc.threshold)
                    .map(|(k, _)| k)
                    .collect();
                match quorum.as_slice() {
                    [] => {}
                    [(revision, commit)] => {
                        self.state = State::Merged {
                            revision: *revision,
                            commit: *commit,
                        }
                    }
                    many => {
                        self.state = State::Open {
                            conflicts: many.to_vec(),
                        }
                    }
                }
            }
            Action::RevisionComment {
                revision,
                location,
                body,
                reply_to,
                embeds,
            } => {
                if let Some(r) = self.revision_mut(&revision.0)? {
                    r.discussion.comment_on(
                        entry,
                        author,
                        timestamp,
                        body,
                        reply_to.map(|x| x.0),
                        location,
                        embeds,
                    )?;
                }
            }
            Action::RevisionCommentEdit {
                revision,
                comment,
                body,
                embeds,
            } => {
                if let Some(r) = self.revision_mut(&revision.0)? {
                    r.discussion
                        .edit(entry, author, comment.0, timestamp, body, embeds)?;
                }
            }
            Action::RevisionCommentRedact { revision, comment } => {
                if let Some(r) = self.revision_mut(&revision.0)? {
                    r.discussion.redact(entry, comment.0)?;
                }
            }
            Action::RevisionCommentReact {
                revision,
                comment,
                reaction,
                active,
            } => {
                if let Some(r) = self.revision_mut(&revision.0)? {
                    r.discussion
                        .react(entry, author, comment.0, reaction, active)?;
                }
            }
        }
        Ok(())
    }

    fn authorised(
        &mut self,
        action: Action,
        op: (gix::ObjectId, NodeId, u64),
        doc: &Doc,
        repo: &dyn Repo,
    ) -> Result<(), OpError> {
        match self.authorization(&action, &op.1, doc)? {
            Authorization::Allow => self.action(action, op, doc, repo),
            Authorization::Deny => Err(OpError::NotAuthorized {
                author: op.1,
                action: "carry out this patch action",
            }),
            Authorization::Unknown => Ok(()),
        }
    }
}

impl Cob for Patch {
    type Action = Action;

    fn from_root(op: Op<Action>, repo: &dyn Repo) -> Result<Self, OpError> {
        let doc = op.doc(repo)?;
        let mut actions = op.actions.into_iter();
        let Some(Action::Revision {
            description,
            base,
            oid,
            ..
        }) = actions.next()
        else {
            return Err(OpError::Init("the first action must be of type `revision`"));
        };
        let Some(Action::Edit { title, .. }) = actions.next() else {
            return Err(OpError::Init("the second action must be of type `edit`"));
        };
        let revision = Revision {
            author: op.author,
            description: vec![Edit {
                author: op.author,
                timestamp: op.timestamp,
                body: description,
                embeds: Vec::new(),
            }],
            base: base.0,
            oid: oid.0,
            discussion: Thread::default(),
            reviews: BTreeMap::new(),
            timestamp: op.timestamp,
            reactions: BTreeMap::new(),
        };
        let mut patch = Patch {
            title,
            author: op.author,
            state: State::Open { conflicts: vec![] },
            labels: BTreeSet::new(),
            merges: BTreeMap::new(),
            revisions: BTreeMap::from([(op.id, Some(revision))]),
            assignees: BTreeSet::new(),
            timeline: vec![op.id],
            reviews: BTreeMap::new(),
        };
        for action in actions {
            patch.authorised(action, (op.id, op.author, op.timestamp), &doc, repo)?;
        }
        Ok(patch)
    }

    fn apply(&mut self, op: Op<Action>, repo: &dyn Repo) -> Result<(), OpError> {
        self.timeline.push(op.id);
        let doc = op.doc(repo)?;
        for action in op.actions {
            self.authorised(action, (op.id, op.author, op.timestamp), &doc, repo)?;
        }
        Ok(())
    }
}
