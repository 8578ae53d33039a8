//! What issues and patches share (`radicle/src/cob/thread.rs`, `cob/common.rs`): comments with
//! their edits, reactions and code locations, discussion threads, and the values actions carry
//! (object ids, DIDs, reactions, embeds) as radicle parses them.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::evaluate::OpError;
use seedd_proto::crypto::NodeId;

/// A git object id as actions carry it: 40 hex characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Id(pub gix::ObjectId);

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        gix::ObjectId::from_hex(s.as_bytes())
            .map(Id)
            .map_err(|_| serde::de::Error::custom(format!("invalid object id {s:?}")))
    }
}

/// A `did:key:z6Mk…` as actions carry it (assignees).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Did(pub(crate) NodeId);

impl<'de> Deserialize<'de> for Did {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        NodeId::from_did(&s)
            .map(Did)
            .map_err(|_| serde::de::Error::custom(format!("invalid DID {s:?}")))
    }
}

/// One emoji from the ranges radicle accepts (`common.rs` `Reaction::new`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reaction(pub char);

impl Reaction {
    fn valid(c: char) -> bool {
        matches!(
            c as u32,
            0x1F600..=0x1F64F
                | 0x1FA75..=0x1FA77
                | 0x1FAC0..=0x1FAC6
                | 0x1FAE0..=0x1FAF8
                | 0x1F300..=0x1F5FF
                | 0x2700..=0x27BF
                | 0x1F900..=0x1F9FF
                | 0x1F680..=0x1F6FF
        )
    }
}

impl<'de> Deserialize<'de> for Reaction {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if Reaction::valid(c) => Ok(Reaction(c)),
            _ => Err(serde::de::Error::custom(format!("invalid reaction {s:?}"))),
        }
    }
}

/// An embedded file: a name and a URI (`git:<blob oid>` or any other).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Embed {
    pub name: String,
    pub content: String,
}

/// Lines or characters of a file (`common.rs` `CodeRange`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum CodeRange {
    Lines { range: Span },
    Chars { line: usize, range: Span },
}

/// `Range<usize>` as serde writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

/// Where a patch comment or reaction points (`common.rs` `CodeLocation`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub struct CodeLocation {
    pub commit: Id,
    pub path: String,
    #[serde(default)]
    pub old: Option<CodeRange>,
    #[serde(default)]
    pub new: Option<CodeRange>,
}

/// One version of a comment body (or of a revision description).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub author: NodeId,
    /// Seconds.
    pub timestamp: u64,
    pub body: String,
    pub embeds: Vec<Embed>,
}

/// A comment: never without at least one edit (the original).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub author: NodeId,
    pub edits: Vec<Edit>,
    pub(crate) reactions: BTreeSet<(NodeId, Reaction)>,
    pub reply_to: Option<gix::ObjectId>,
    pub location: Option<CodeLocation>,
    pub resolved: bool,
}

impl Comment {
    pub(crate) fn new(
        author: NodeId,
        body: String,
        reply_to: Option<gix::ObjectId>,
        location: Option<CodeLocation>,
        embeds: Vec<Embed>,
        timestamp: u64,
    ) -> Self {
        Comment {
            author,
            edits: vec![Edit {
                author,
                timestamp,
                body,
                embeds,
            }],
            reactions: BTreeSet::new(),
            reply_to,
            location,
            resolved: false,
        }
    }

    /// The latest body.
    pub fn body(&self) -> &str {
        self.edits.last().map_or("", |e| e.body.as_str())
    }

    /// The latest embeds.
    pub fn embeds(&self) -> &[Embed] {
        self.edits.last().map_or(&[], |e| e.embeds.as_slice())
    }

    /// When the comment was first made.
    pub fn timestamp(&self) -> u64 {
        self.edits.first().map_or(0, |e| e.timestamp)
    }

    /// Reactions grouped by emoji (emoji order, then authors in key order).
    pub fn reactions(&self) -> BTreeMap<Reaction, Vec<NodeId>> {
        group(&self.reactions)
    }
}

/// `(author, emoji)` pairs grouped by emoji.
pub fn group(set: &BTreeSet<(NodeId, Reaction)>) -> BTreeMap<Reaction, Vec<NodeId>> {
    let mut out: BTreeMap<Reaction, Vec<NodeId>> = BTreeMap::new();
    for (author, reaction) in set {
        out.entry(*reaction).or_default().push(*author);
    }
    out
}

/// A discussion: comments by id (`None` once redacted) and the order things happened in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Thread {
    pub(crate) comments: BTreeMap<gix::ObjectId, Option<Comment>>,
    pub(crate) timeline: Vec<gix::ObjectId>,
}

impl Thread {
    /// A thread whose first comment is `comment`, made by change `id`.
    pub(crate) fn new(id: gix::ObjectId, comment: Comment) -> Self {
        Thread {
            comments: BTreeMap::from([(id, Some(comment))]),
            timeline: vec![id],
        }
    }

    /// Comments that are not redacted, in timeline order.
    pub fn comments(&self) -> impl Iterator<Item = (&gix::ObjectId, &Comment)> + '_ {
        self.timeline.iter().filter_map(|id| {
            self.comments
                .get(id)
                .and_then(Option::as_ref)
                .map(|c| (id, c))
        })
    }

    /// The live comment `id`, `None` if redacted, an error if it never existed.
    pub(crate) fn comment(&self, id: &gix::ObjectId) -> Result<Option<&Comment>, OpError> {
        match self.comments.get(id) {
            Some(c) => Ok(c.as_ref()),
            None => Err(OpError::Missing(*id)),
        }
    }

    /// `thread::comment`: a new comment made by change `entry`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn comment_on(
        &mut self,
        entry: gix::ObjectId,
        author: NodeId,
        timestamp: u64,
        body: String,
        reply_to: Option<gix::ObjectId>,
        location: Option<CodeLocation>,
        embeds: Vec<Embed>,
    ) -> Result<(), OpError> {
        if body.is_empty() {
            return Err(OpError::EmptyBody(entry));
        }
        if let Some(to) = reply_to {
            if !self.comments.contains_key(&to) {
                return Err(OpError::Missing(to));
            }
        }
        self.timeline.push(entry);
        self.comments.insert(
            entry,
            Some(Comment::new(
                author, body, reply_to, location, embeds, timestamp,
            )),
        );
        Ok(())
    }

    /// `thread::edit`: a new version of comment `id` (nothing if it was redacted).
    pub(crate) fn edit(
        &mut self,
        entry: gix::ObjectId,
        author: NodeId,
        id: gix::ObjectId,
        timestamp: u64,
        body: String,
        embeds: Vec<Embed>,
    ) -> Result<(), OpError> {
        if body.is_empty() {
            return Err(OpError::EmptyBody(entry));
        }
        self.timeline.push(entry);
        match self.comments.get_mut(&id) {
            Some(Some(c)) => {
                c.edits.push(Edit {
                    author,
                    timestamp,
                    body,
                    embeds,
                });
                Ok(())
            }
            Some(None) => Ok(()),
            None => Err(OpError::Missing(id)),
        }
    }

    /// `thread::redact`.
    pub(crate) fn redact(
        &mut self,
        entry: gix::ObjectId,
        id: gix::ObjectId,
    ) -> Result<(), OpError> {
        match self.comments.get_mut(&id) {
            Some(c) => {
                self.timeline.push(entry);
                *c = None;
                Ok(())
            }
            None => Err(OpError::Missing(entry)),
        }
    }

    /// `thread::react`.
    pub(crate) fn react(
        &mut self,
        entry: gix::ObjectId,
        author: NodeId,
        id: gix::ObjectId,
        reaction: Reaction,
        active: bool,
    ) -> Result<(), OpError> {
        match self.comments.get_mut(&id) {
            Some(Some(c)) => {
                self.timeline.push(entry);
                if active {
                    c.reactions.insert((author, reaction));
                } else {
                    c.reactions.remove(&(author, reaction));
                }
                Ok(())
            }
            Some(None) => Ok(()),
            None => Err(OpError::Missing(id)),
        }
    }

    /// `thread::resolve` / `unresolve`.
    pub(crate) fn resolve(
        &mut self,
        entry: gix::ObjectId,
        id: gix::ObjectId,
        resolved: bool,
    ) -> Result<(), OpError> {
        match self.comments.get_mut(&id) {
            Some(Some(c)) => {
                self.timeline.push(entry);
                c.resolved = resolved;
                Ok(())
            }
            Some(None) => Ok(()),
            None => Err(OpError::Missing(id)),
        }
    }
}
