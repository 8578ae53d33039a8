//! The JSON shapes httpd 0.27 gives issues, patches and their comments (`api/json/cobs.rs`,
//! `api/json/thread.rs`, `api/json.rs`; zod `issueSchema`, `patchSchema`, `commentSchema`).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::super::author;
use seedd_core::storage::cob::issue::{self, Issue};
use seedd_core::storage::cob::job::Job;
use seedd_core::storage::cob::patch::{self, Patch};
use seedd_core::storage::cob::thread::{CodeLocation, CodeRange, Comment, Edit, Embed, Reaction};
use seedd_core::storage::RefTarget;
use seedd_proto::crypto::NodeId;

fn embeds_json(embeds: &[Embed]) -> Vec<Value> {
    embeds
        .iter()
        .map(|e| json!({ "name": e.name, "content": e.content }))
        .collect()
}

fn edit_json(e: &Edit) -> Value {
    json!({
        "author": author(&e.author),
        "body": e.body,
        "timestamp": e.timestamp,
        "embeds": embeds_json(&e.embeds),
    })
}

fn range_json(r: &CodeRange) -> Value {
    match r {
        CodeRange::Lines { range } => {
            json!({ "type": "lines", "range": { "start": range.start, "end": range.end } })
        }
        CodeRange::Chars { line, range } => json!({
            "type": "chars",
            "line": line,
            "range": { "start": range.start, "end": range.end },
        }),
    }
}

fn location_json(l: &CodeLocation) -> Value {
    let mut v = json!({ "commit": l.commit.0.to_string(), "path": l.path });
    if let Some(o) = v.as_object_mut() {
        if let Some(old) = &l.old {
            o.insert("old".into(), range_json(old));
        }
        if let Some(new) = &l.new {
            o.insert("new".into(), range_json(new));
        }
    }
    v
}

fn reactions_json(
    grouped: BTreeMap<Reaction, Vec<NodeId>>,
    location: Option<&CodeLocation>,
) -> Vec<Value> {
    grouped
        .into_iter()
        .map(|(emoji, authors)| {
            let authors: Vec<seedd_web_api::Author> = authors.iter().map(author).collect();
            let emoji = emoji.0.to_string();
            match location {
                Some(l) => {
                    json!({ "location": location_json(l), "emoji": emoji, "authors": authors })
                }
                None => json!({ "emoji": emoji, "authors": authors }),
            }
        })
        .collect()
}

/// A comment; patch comments carry `location` (`null` when none).
fn comment_json(id: &gix::ObjectId, c: &Comment, patch: bool) -> Value {
    let mut v = json!({
        "id": id.to_string(),
        "author": author(&c.author),
        "body": c.body(),
        "edits": c.edits.iter().map(edit_json).collect::<Vec<_>>(),
        "embeds": embeds_json(c.embeds()),
        "reactions": reactions_json(c.reactions(), None),
        "timestamp": c.timestamp(),
        "replyTo": c.reply_to.map(|r| r.to_string()),
        "resolved": c.resolved,
    });
    if let (true, Some(o)) = (patch, v.as_object_mut()) {
        o.insert(
            "location".into(),
            c.location.as_ref().map_or(Value::Null, location_json),
        );
    }
    v
}

pub(super) fn issue_json(id: &gix::ObjectId, i: &Issue) -> Value {
    let state = match i.state {
        issue::State::Open => json!({ "status": "open" }),
        issue::State::Closed { reason } => json!({
            "status": "closed",
            "reason": match reason {
                issue::CloseReason::Other => "other",
                issue::CloseReason::Solved => "solved",
            },
        }),
    };
    json!({
        "id": id.to_string(),
        "author": i.author().map(|a| author(&a)),
        "title": i.title,
        "state": state,
        "assignees": i.assignees.iter().map(author).collect::<Vec<_>>(),
        "discussion": i.thread.comments().map(|(id, c)| comment_json(id, c, false)).collect::<Vec<_>>(),
        "labels": i.labels,
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
        patch::State::Draft => json!({ "status": "draft" }),
        patch::State::Archived => json!({ "status": "archived" }),
        patch::State::Open { conflicts } if conflicts.is_empty() => json!({ "status": "open" }),
        patch::State::Open { conflicts } => json!({
            "status": "open",
            "conflicts": conflicts
                .iter()
                .map(|(r, c)| json!([r.to_string(), c.to_string()]))
                .collect::<Vec<_>>(),
        }),
        patch::State::Merged { revision, commit } => json!({
            "status": "merged",
            "revision": revision.to_string(),
            "commit": commit.to_string(),
        }),
    };
    let revisions: Vec<Value> = p
        .revisions()
        .map(|(rid, r)| {
            let reactions: Vec<Value> = r
                .reactions
                .iter()
                .flat_map(|(loc, set)| {
                    reactions_json(seedd_core::storage::cob::thread::group(set), loc.as_ref())
                })
                .collect();
            json!({
                "id": rid.to_string(),
                "author": author(&r.author),
                "description": r.description(),
                "edits": r.description.iter().map(edit_json).collect::<Vec<_>>(),
                "reactions": reactions,
                "base": r.base.to_string(),
                "oid": r.oid.to_string(),
                "refs": refs_at(refs, &r.author, &r.oid),
                "discussions": r.discussion.comments().map(|(id, c)| comment_json(id, c, true)).collect::<Vec<_>>(),
                "timestamp": r.timestamp,
                "reviews": r.reviews.values().map(|rv| json!({
                    "id": rv.id.to_string(),
                    "author": author(&rv.author),
                    "verdict": rv.verdict.map(|v| match v {
                        patch::Verdict::Accept => "accept",
                        patch::Verdict::Reject => "reject",
                    }),
                    "summary": rv.summary.as_deref().unwrap_or_default(),
                    "comments": rv.comments.comments().map(|(id, c)| comment_json(id, c, true)).collect::<Vec<_>>(),
                    "timestamp": rv.timestamp,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "id": id.to_string(),
        "author": author(&p.author),
        "title": p.title,
        "state": state,
        "target": "delegates",
        "labels": p.labels,
        "merges": p.merges.iter().map(|(nid, m)| json!({
            "author": author(nid),
            "commit": m.commit.to_string(),
            "timestamp": m.timestamp,
            "revision": m.revision.to_string(),
        })).collect::<Vec<_>>(),
        "assignees": p.assignees.iter().map(author).collect::<Vec<_>>(),
        "revisions": revisions,
    })
}
/// One job as httpd 0.27 serialises it.
pub(in crate::web) fn job_json(id: &gix::ObjectId, job: &Job) -> Value {
    let runs: Vec<Value> = job
        .runs
        .iter()
        .flat_map(|(node, runs)| {
            runs.iter().map(move |r| {
                json!({
                    "runId": r.id.as_str(),
                    "node": author(node),
                    "status": r.status.label(),
                    "log": r.log,
                })
            })
        })
        .collect();
    json!({ "jobId": id.to_string(), "commit": job.commit.to_string(), "runs": runs })
}
