//! The JSON shapes httpd 0.27 gives issues, patches and their comments (`api/json/cobs.rs`,
//! `api/json/thread.rs`, `api/json.rs`; zod `issueSchema`, `patchSchema`, `commentSchema`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::author;
use seedd_core::storage::cob::issue::{self, Issue};
use seedd_core::storage::cob::job::Job;
use seedd_core::storage::cob::patch::{self, Patch};
use seedd_core::storage::cob::thread::{CodeLocation, CodeRange, Comment, Edit, Embed, Reaction};
use seedd_core::storage::RefTarget;
use seedd_proto::crypto::NodeId;
use seedd_web_api as web;

/// A typed body as the `Value` the COB cache keeps.
fn value<T: serde::Serialize>(body: &T) -> Value {
    serde_json::to_value(body).unwrap_or(Value::Null)
}

fn embeds(embeds: &[Embed]) -> Vec<web::Embed> {
    embeds
        .iter()
        .map(|e| web::Embed {
            name: e.name.clone(),
            content: e.content.clone(),
        })
        .collect()
}

fn edit(e: &Edit) -> web::Edit {
    web::Edit {
        author: author(&e.author),
        body: e.body.clone(),
        timestamp: e.timestamp,
        embeds: embeds(&e.embeds),
    }
}

fn range(r: &CodeRange) -> web::CodeRange {
    let span = |s: &seedd_core::storage::cob::thread::Span| web::LineRange {
        start: s.start,
        end: s.end,
    };
    match r {
        CodeRange::Lines { range } => web::CodeRange::Lines { range: span(range) },
        CodeRange::Chars { line, range } => web::CodeRange::Chars {
            line: *line,
            range: span(range),
        },
    }
}

fn location(l: &CodeLocation) -> web::CodeLocation {
    web::CodeLocation {
        commit: l.commit.0.to_string(),
        path: l.path.clone(),
        old: l.old.as_ref().map(range),
        new: l.new.as_ref().map(range),
    }
}

fn reactions(
    grouped: BTreeMap<Reaction, Vec<NodeId>>,
    at: Option<&CodeLocation>,
) -> Vec<web::Reaction> {
    grouped
        .into_iter()
        .map(|(emoji, authors)| web::Reaction {
            location: at.map(location),
            emoji: emoji.0.to_string(),
            authors: authors.iter().map(author).collect(),
        })
        .collect()
}

/// A comment; patch comments carry `location` (`null` when none).
fn comment(id: &gix::ObjectId, c: &Comment, patch: bool) -> web::Comment {
    web::Comment {
        id: id.to_string(),
        author: author(&c.author),
        body: c.body().to_owned(),
        edits: c.edits.iter().map(edit).collect(),
        embeds: embeds(c.embeds()),
        reactions: reactions(c.reactions(), None),
        timestamp: c.timestamp(),
        reply_to: c.reply_to.map(|r| r.to_string()),
        resolved: c.resolved,
        location: patch.then(|| c.location.as_ref().map(location)),
    }
}

pub(super) fn issue_json(id: &gix::ObjectId, i: &Issue) -> Value {
    let state = match i.state {
        issue::State::Open => web::IssueState::Open,
        issue::State::Closed { reason } => web::IssueState::Closed {
            reason: match reason {
                issue::CloseReason::Other => "other",
                issue::CloseReason::Solved => "solved",
            }
            .to_owned(),
        },
    };
    value(&web::Issue {
        id: id.to_string(),
        author: i.author().map(|a| author(&a)),
        title: i.title.clone(),
        state,
        assignees: i.assignees.iter().map(author).collect(),
        discussion: i
            .thread
            .comments()
            .map(|(id, c)| comment(id, c, false))
            .collect(),
        labels: i.labels.iter().cloned().collect(),
    })
}

/// Ref names (without the namespace prefix) in `nid`'s namespace that point at `oid`, as
/// httpd reads them from the remote's signed refs.
fn refs_at(refs: &[(String, RefTarget)], nid: &NodeId, oid: &gix::ObjectId) -> Vec<String> {
    let prefix = format!("refs/namespaces/{nid}/");
    refs.iter()
        .filter_map(|(name, target)| {
            let rest = name.strip_prefix(&prefix)?;
            (rest != "refs/rad/sigrefs" && matches!(target, RefTarget::Oid(t) if t == oid))
                .then(|| rest.to_owned())
        })
        .collect()
}

pub(super) fn patch_json(id: &gix::ObjectId, p: &Patch, refs: &[(String, RefTarget)]) -> Value {
    let state = match &p.state {
        patch::State::Draft => web::PatchState::Draft,
        patch::State::Archived => web::PatchState::Archived,
        patch::State::Open { conflicts } => web::PatchState::Open {
            conflicts: conflicts
                .iter()
                .map(|(r, c)| (r.to_string(), c.to_string()))
                .collect(),
        },
        patch::State::Merged { revision, commit } => web::PatchState::Merged {
            revision: revision.to_string(),
            commit: commit.to_string(),
        },
    };
    let revisions = p
        .revisions()
        .map(|(rid, r)| web::Revision {
            id: rid.to_string(),
            author: author(&r.author),
            description: r.description().to_owned(),
            edits: r.description.iter().map(edit).collect(),
            reactions: r
                .reactions
                .iter()
                .flat_map(|(loc, set)| {
                    reactions(seedd_core::storage::cob::thread::group(set), loc.as_ref())
                })
                .collect(),
            base: r.base.to_string(),
            oid: r.oid.to_string(),
            refs: refs_at(refs, &r.author, &r.oid),
            discussions: r
                .discussion
                .comments()
                .map(|(id, c)| comment(id, c, true))
                .collect(),
            timestamp: r.timestamp,
            reviews: r
                .reviews
                .values()
                .map(|rv| web::Review {
                    id: rv.id.to_string(),
                    author: author(&rv.author),
                    verdict: rv.verdict.map(|v| {
                        match v {
                            patch::Verdict::Accept => "accept",
                            patch::Verdict::Reject => "reject",
                        }
                        .to_owned()
                    }),
                    summary: rv.summary.clone().unwrap_or_default(),
                    comments: rv
                        .comments
                        .comments()
                        .map(|(id, c)| comment(id, c, true))
                        .collect(),
                    timestamp: rv.timestamp,
                })
                .collect(),
        })
        .collect();
    value(&web::Patch {
        id: id.to_string(),
        author: author(&p.author),
        title: p.title.clone(),
        state,
        target: "delegates".to_owned(),
        labels: p.labels.iter().cloned().collect(),
        merges: p
            .merges
            .iter()
            .map(|(nid, m)| web::Merge {
                author: author(nid),
                commit: m.commit.to_string(),
                timestamp: m.timestamp,
                revision: m.revision.to_string(),
            })
            .collect(),
        assignees: p.assignees.iter().map(author).collect(),
        revisions,
    })
}

/// One job as httpd 0.27 serialises it.
pub(in crate::web) fn job_json(id: &gix::ObjectId, job: &Job) -> Value {
    let runs = job
        .runs
        .iter()
        .flat_map(|(node, runs)| {
            runs.iter().map(move |r| web::JobRun {
                run_id: r.id.as_str().to_owned(),
                node: author(node),
                status: r.status.label().to_owned(),
                log: r.log.clone(),
            })
        })
        .collect();
    value(&web::Job {
        job_id: id.to_string(),
        commit: job.commit.to_string(),
        runs,
    })
}
