//! Issues (`xyz.radicle.issue`, `radicle/src/cob/issue.rs`): actions, who may carry them out
//! (delegates anything; authors edit and close or reopen their issue and their comments;
//! anyone comments and reacts), and the state they build.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::evaluate::Authorization;
use super::evaluate::{Cob, Op, OpError, Repo};
use super::thread::{Comment, Did, Embed, Id, Reaction, Thread};
use crate::storage::identity::Doc;
use seedd_proto::crypto::NodeId;

/// COB type name of issues.
pub const TYPE_NAME: &str = "xyz.radicle.issue";

/// Why an issue was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CloseReason {
    Other,
    Solved,
}

/// Open, or closed with a reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", tag = "status")]
pub enum State {
    Closed {
        reason: CloseReason,
    },
    #[default]
    Open,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
pub enum Action {
    #[serde(rename = "assign")]
    Assign { assignees: BTreeSet<Did> },
    #[serde(rename = "edit")]
    Edit { title: String },
    #[serde(rename = "lifecycle")]
    Lifecycle { state: State },
    #[serde(rename = "label")]
    Label { labels: BTreeSet<String> },
    #[serde(rename = "comment")]
    Comment {
        body: String,
        #[serde(default, rename = "replyTo")]
        reply_to: Option<Id>,
        #[serde(default)]
        embeds: Vec<Embed>,
    },
    #[serde(rename = "comment.edit")]
    CommentEdit {
        id: Id,
        body: String,
        embeds: Vec<Embed>,
    },
    #[serde(rename = "comment.redact")]
    CommentRedact { id: Id },
    #[serde(rename = "comment.react")]
    CommentReact {
        id: Id,
        reaction: Reaction,
        active: bool,
    },
}

/// An issue: the first comment of its thread is its description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub assignees: BTreeSet<NodeId>,
    pub title: String,
    pub state: State,
    pub labels: BTreeSet<String>,
    pub thread: Thread,
}

impl Issue {
    /// The root comment (there is always one).
    pub(crate) fn root(&self) -> Option<(&gix::ObjectId, &Comment)> {
        self.thread.comments().next()
    }

    /// The author of the root comment.
    pub fn author(&self) -> Option<NodeId> {
        self.root().map(|(_, c)| c.author)
    }

    /// When the issue was opened (the root comment's time).
    pub fn timestamp(&self) -> u64 {
        self.root().map_or(0, |(_, c)| c.timestamp())
    }

    /// `Issue::authorization`.
    fn authorization(
        &self,
        action: &Action,
        actor: &NodeId,
        doc: &Doc,
    ) -> Result<Authorization, OpError> {
        if doc.delegates.contains(actor) {
            return Ok(Authorization::Allow);
        }
        let author = self.author();
        Ok(match action {
            // Only a no-op assignment or labelling (backwards compatibility).
            Action::Assign { assignees } => Authorization::from(
                assignees
                    .iter()
                    .map(|d| d.0)
                    .eq(self.assignees.iter().copied()),
            ),
            Action::Label { labels } => Authorization::from(*labels == self.labels),
            Action::Edit { .. } | Action::Lifecycle { .. } => {
                Authorization::from(Some(*actor) == author)
            }
            Action::Comment { .. } | Action::CommentReact { .. } => Authorization::Allow,
            Action::CommentEdit { id, .. } | Action::CommentRedact { id } => {
                match self.thread.comment(&id.0)? {
                    Some(c) => Authorization::from(*actor == c.author),
                    None => Authorization::Unknown,
                }
            }
        })
    }

    fn action(
        &mut self,
        action: Action,
        entry: gix::ObjectId,
        author: NodeId,
        timestamp: u64,
    ) -> Result<(), OpError> {
        match action {
            Action::Assign { assignees } => {
                self.assignees = assignees.into_iter().map(|d| d.0).collect();
            }
            Action::Edit { title } => {
                if title.contains(['\n', '\r']) {
                    return Err(OpError::InvalidTitle(title));
                }
                self.title = title;
            }
            Action::Lifecycle { state } => self.state = state,
            Action::Label { labels } => self.labels = labels,
            Action::Comment {
                body,
                reply_to,
                embeds,
            } => self.thread.comment_on(
                entry,
                author,
                timestamp,
                body,
                reply_to.map(|r| r.0),
                None,
                embeds,
            )?,
            Action::CommentEdit { id, body, embeds } => self
                .thread
                .edit(entry, author, id.0, timestamp, body, embeds)?,
            Action::CommentRedact { id } => {
                if self.root().map(|(r, _)| *r) == Some(id.0) {
                    return Err(OpError::NotAllowed(entry));
                }
                self.thread.redact(entry, id.0)?;
            }
            Action::CommentReact {
                id,
                reaction,
                active,
            } => self.thread.react(entry, author, id.0, reaction, active)?,
        }
        Ok(())
    }

    /// Authorise, then apply or skip; a denied action fails the op.
    fn authorised(
        &mut self,
        action: Action,
        op: (gix::ObjectId, NodeId, u64),
        doc: &Doc,
    ) -> Result<(), OpError> {
        let (entry, author, timestamp) = op;
        match self.authorization(&action, &author, doc)? {
            Authorization::Allow => self.action(action, entry, author, timestamp),
            Authorization::Deny => Err(OpError::NotAuthorized {
                author,
                action: "carry out this issue action",
            }),
            Authorization::Unknown => Ok(()),
        }
    }
}

impl Cob for Issue {
    type Action = Action;

    fn from_root(op: Op<Action>, repo: &dyn Repo) -> Result<Self, OpError> {
        let doc = op.doc(repo)?;
        let mut actions = op.actions.into_iter();
        let Some(Action::Comment {
            body,
            reply_to: None,
            embeds,
        }) = actions.next()
        else {
            return Err(OpError::Init("the first action must be of type `comment`"));
        };
        let comment = Comment::new(op.author, body, None, None, embeds, op.timestamp);
        let mut issue = Issue {
            assignees: BTreeSet::new(),
            title: String::new(),
            state: State::Open,
            labels: BTreeSet::new(),
            thread: Thread::new(op.id, comment),
        };
        for action in actions {
            issue.authorised(action, (op.id, op.author, op.timestamp), &doc)?;
        }
        Ok(issue)
    }

    fn apply(&mut self, op: Op<Action>, repo: &dyn Repo) -> Result<(), OpError> {
        let doc = op.doc(repo)?;
        for action in op.actions {
            self.authorised(action, (op.id, op.author, op.timestamp), &doc)?;
        }
        Ok(())
    }
}
