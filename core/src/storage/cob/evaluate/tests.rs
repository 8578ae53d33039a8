//! Issue and patch materialisation over hand-made change graphs (no git: a fake [`Repo`]):
//! visiting order, the actions, authorisation and pruning.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::storage::cob::issue::{self, Issue};
use crate::storage::cob::patch::{self, Patch};
use crate::storage::identity::Visibility;

/// The evaluation budget (these graphs are far inside it).
fn unlimited() -> Budget {
    Budget::with(super::super::budget::EVALUATION)
}

fn oid(n: u8) -> gix::ObjectId {
    gix::ObjectId::from_bytes_or_panic(&[n; 20])
}

fn hex(n: u8) -> String {
    oid(n).to_string()
}

fn nid(n: u8) -> NodeId {
    NodeId::from_bytes([n; 32])
}

/// The identity head every change commits to.
const IDENTITY: u8 = 0xee;
const DELEGATE: u8 = 1;
const ALICE: u8 = 2;
const BOB: u8 = 3;

#[derive(Default)]
struct Fake {
    entries: HashMap<gix::ObjectId, Entry>,
    /// Delegates' default branch tips.
    branches: HashMap<NodeId, gix::ObjectId>,
    /// (ancestor, head) pairs.
    ancestry: BTreeSet<(gix::ObjectId, gix::ObjectId)>,
    threshold: usize,
    delegates: Vec<NodeId>,
}

impl Fake {
    fn new() -> Self {
        Fake {
            threshold: 1,
            delegates: vec![nid(DELEGATE)],
            ..Fake::default()
        }
    }

    /// Add change `id` by `author` at `time` with `parents` and `actions`.
    fn change(&mut self, id: u8, author: u8, time: u64, parents: &[u8], actions: &[Value]) {
        self.entries.insert(
            oid(id),
            Entry {
                id: oid(id),
                author: nid(author),
                timestamp: time,
                parents: parents.iter().map(|p| oid(*p)).collect(),
                resource: Some(oid(IDENTITY)),
                actions: actions
                    .iter()
                    .enumerate()
                    .map(|(i, a)| (i as i8, serde_json::to_vec(a).unwrap().into()))
                    .collect(),
                embed: None,
            },
        );
    }

    /// Tips: changes nobody names as a parent.
    fn tips(&self) -> Vec<gix::ObjectId> {
        let parents: BTreeSet<gix::ObjectId> = self
            .entries
            .values()
            .flat_map(|e| e.parents.iter().copied())
            .collect();
        self.entries
            .keys()
            .copied()
            .filter(|k| !parents.contains(k))
            .collect()
    }

    fn issue(&self, root: u8) -> Issue {
        evaluate::<Issue>(self, oid(root), &self.tips(), &unlimited()).unwrap()
    }

    fn patch(&self, root: u8) -> Patch {
        evaluate::<Patch>(self, oid(root), &self.tips(), &unlimited()).unwrap()
    }
}

impl Repo for Fake {
    fn entry(&self, id: gix::ObjectId) -> Result<Entry, CobError> {
        let e = self
            .entries
            .get(&id)
            .ok_or(CobError::NoActions { commit: id })?;
        Ok(Entry {
            id: e.id,
            author: e.author,
            timestamp: e.timestamp,
            parents: e.parents.clone(),
            resource: e.resource,
            actions: e.actions.clone(),
            embed: e.embed,
        })
    }

    fn doc_at(&self, commit: gix::ObjectId) -> Result<Arc<Doc>, OpError> {
        assert_eq!(commit, oid(IDENTITY));
        let mut payload = serde_json::Map::new();
        payload.insert(
            "xyz.radicle.project".into(),
            json!({ "name": "p", "description": "", "defaultBranch": "main" }),
        );
        Ok(Arc::new(Doc {
            payload,
            delegates: self.delegates.clone(),
            threshold: self.threshold,
            visibility: Visibility::Public,
        }))
    }

    fn branch_tip(&self, nid: &NodeId, branch: &str) -> Option<gix::ObjectId> {
        assert_eq!(branch, "main");
        self.branches.get(nid).copied()
    }

    fn is_ancestor(&self, ancestor: gix::ObjectId, head: gix::ObjectId) -> Result<bool, OpError> {
        Ok(self.ancestry.contains(&(ancestor, head)))
    }
}

fn comment(body: &str) -> Value {
    json!({ "type": "comment", "body": body })
}

fn reply(body: &str, to: u8) -> Value {
    json!({ "type": "comment", "body": body, "replyTo": hex(to) })
}

fn bodies(i: &Issue) -> Vec<String> {
    i.thread
        .comments()
        .map(|(_, c)| c.body().to_owned())
        .collect()
}

/// An issue opened by Alice (change 10) with a title.
fn opened() -> Fake {
    let mut f = Fake::new();
    f.change(
        10,
        ALICE,
        100,
        &[],
        &[
            comment("description"),
            json!({ "type": "edit", "title": "Bug" }),
        ],
    );
    f
}

#[test]
fn an_issue_is_its_root_comment_title_and_later_comments() {
    let mut f = opened();
    f.change(11, BOB, 110, &[10], &[reply("me too", 10)]);
    f.change(
        12,
        ALICE,
        120,
        &[11],
        &[json!({ "type": "comment.edit", "id": hex(11), "body": "edited", "embeds": [] })],
    );
    let i = f.issue(10);
    assert_eq!(i.title, "Bug");
    assert_eq!(i.state, issue::State::Open);
    assert_eq!(i.author(), Some(nid(ALICE)));
    assert_eq!(i.timestamp(), 100);
    // Alice may not edit Bob's comment: that change is pruned.
    assert_eq!(bodies(&i), ["description", "me too"]);

    f.change(
        13,
        BOB,
        130,
        &[12],
        &[json!({ "type": "comment.edit", "id": hex(11), "body": "me too, edited", "embeds": [] })],
    );
    // Change 13 depends on the pruned 12, so it goes too.
    assert_eq!(bodies(&f.issue(10)), ["description", "me too"]);

    let mut f = opened();
    f.change(11, BOB, 110, &[10], &[reply("me too", 10)]);
    f.change(
        12,
        BOB,
        120,
        &[11],
        &[
            json!({ "type": "comment.edit", "id": hex(11), "body": "me too!", "embeds": [] }),
            json!({ "type": "comment.react", "id": hex(10), "reaction": "👍", "active": true }),
        ],
    );
    let i = f.issue(10);
    assert_eq!(bodies(&i), ["description", "me too!"]);
    let (_, c) = i.thread.comments().nth(1).unwrap();
    assert_eq!(c.edits.len(), 2);
    assert_eq!(c.reply_to, Some(oid(10)));
    assert_eq!(
        c.timestamp(),
        110,
        "a comment's time is its first version's"
    );
    let (_, root) = i.root().unwrap();
    assert_eq!(
        root.reactions.iter().collect::<Vec<_>>(),
        [&(nid(BOB), crate::storage::cob::thread::Reaction('👍'))]
    );
}

#[test]
fn only_the_author_or_a_delegate_closes_an_issue() {
    let close = json!({ "type": "lifecycle", "state": { "status": "closed", "reason": "solved" } });
    // Bob (neither author nor delegate) closes: ignored; his later comment (a child) too.
    let mut f = opened();
    f.change(11, BOB, 110, &[10], std::slice::from_ref(&close));
    f.change(12, BOB, 120, &[11], &[comment("after closing")]);
    let i = f.issue(10);
    assert_eq!(i.state, issue::State::Open);
    assert_eq!(bodies(&i), ["description"]);

    // The author closes.
    let mut f = opened();
    f.change(11, ALICE, 110, &[10], std::slice::from_ref(&close));
    assert_eq!(
        f.issue(10).state,
        issue::State::Closed {
            reason: issue::CloseReason::Solved
        }
    );

    // A delegate closes, labels and assigns; Bob may not label.
    let mut f = opened();
    f.change(
        11,
        DELEGATE,
        110,
        &[10],
        &[
            close.clone(),
            json!({ "type": "label", "labels": ["bug"] }),
            json!({ "type": "assign", "assignees": [nid(BOB).to_did()] }),
        ],
    );
    f.change(
        12,
        BOB,
        120,
        &[11],
        &[json!({ "type": "label", "labels": ["wontfix"] })],
    );
    let i = f.issue(10);
    assert!(matches!(i.state, issue::State::Closed { .. }));
    assert_eq!(i.labels.iter().collect::<Vec<_>>(), ["bug"]);
    assert_eq!(i.assignees.iter().collect::<Vec<_>>(), [&nid(BOB)]);

    // Reopen by the author after a delegate closed.
    f.change(
        13,
        ALICE,
        130,
        &[11],
        &[json!({ "type": "lifecycle", "state": { "status": "open" } })],
    );
    assert_eq!(f.issue(10).state, issue::State::Open);
}

#[test]
fn concurrent_changes_apply_in_commit_time_order_not_id_order() {
    // 11 and 12 both follow 20 (the shared parent below the root); ids and times disagree.
    let mut f = opened();
    f.change(20, ALICE, 105, &[10], &[comment("first")]);
    f.change(12, BOB, 110, &[20], &[comment("earlier")]);
    f.change(11, DELEGATE, 120, &[20], &[comment("later")]);
    assert_eq!(
        bodies(&f.issue(10)),
        ["description", "first", "earlier", "later"]
    );
    // Swap the times: the order follows.
    let mut f = opened();
    f.change(20, ALICE, 105, &[10], &[comment("first")]);
    f.change(12, BOB, 130, &[20], &[comment("earlier")]);
    f.change(11, DELEGATE, 120, &[20], &[comment("later")]);
    assert_eq!(
        bodies(&f.issue(10)),
        ["description", "first", "later", "earlier"]
    );
    // A merge change after both sees both.
    f.change(30, ALICE, 140, &[11, 12], &[comment("merged")]);
    assert_eq!(
        bodies(&f.issue(10)),
        ["description", "first", "later", "earlier", "merged"]
    );
}

#[test]
fn bad_roots_and_undecodable_changes() {
    // A root that does not start with a comment makes no issue.
    let mut f = Fake::new();
    f.change(
        10,
        ALICE,
        100,
        &[],
        &[json!({ "type": "edit", "title": "x" })],
    );
    assert!(matches!(
        evaluate::<Issue>(&f, oid(10), &f.tips(), &unlimited()),
        Err(EvalError::Root { .. })
    ));
    // Unknown root.
    assert!(matches!(
        evaluate::<Issue>(&f, oid(99), &f.tips(), &unlimited()),
        Err(EvalError::NoRoot(_))
    ));
    // An action that does not decode (unknown reaction, a title with a newline, a reply to a
    // comment that never existed) prunes its change only.
    let mut f = opened();
    f.change(
        11,
        BOB,
        110,
        &[10],
        &[json!({ "type": "comment.react", "id": hex(10), "reaction": "x", "active": true })],
    );
    f.change(
        12,
        ALICE,
        120,
        &[10],
        &[json!({ "type": "edit", "title": "a\nb" })],
    );
    f.change(13, BOB, 130, &[10], &[reply("to nothing", 77)]);
    f.change(14, BOB, 140, &[10], &[comment("fine")]);
    let i = f.issue(10);
    assert_eq!(i.title, "Bug");
    assert_eq!(bodies(&i), ["description", "fine"]);
    assert!(i.root().unwrap().1.reactions.is_empty());
    // The root comment cannot be redacted, even by a delegate.
    f.change(
        15,
        DELEGATE,
        150,
        &[14],
        &[json!({ "type": "comment.redact", "id": hex(10) })],
    );
    assert_eq!(bodies(&f.issue(10)), ["description", "fine"]);
    // Any other comment can, by its author.
    f.change(
        16,
        BOB,
        160,
        &[14],
        &[json!({ "type": "comment.redact", "id": hex(14) })],
    );
    assert_eq!(bodies(&f.issue(10)), ["description"]);
}

fn revision(base: u8, head: u8, description: &str) -> Value {
    json!({ "type": "revision", "description": description, "base": hex(base), "oid": hex(head) })
}

/// A patch opened by Alice (change 10): base 0xb0, head 0xc0.
fn proposed() -> Fake {
    let mut f = Fake::new();
    f.change(
        10,
        ALICE,
        100,
        &[],
        &[
            revision(0xb0, 0xc0, "please merge"),
            json!({ "type": "edit", "title": "Fix", "target": "delegates" }),
        ],
    );
    f
}

#[test]
fn a_patch_is_revised_reviewed_and_merged_by_the_delegates() {
    let mut f = proposed();
    let p = f.patch(10);
    assert_eq!(p.title, "Fix");
    assert_eq!(p.author, nid(ALICE));
    assert_eq!(p.state, patch::State::Open { conflicts: vec![] });
    assert_eq!(p.timestamp(), 100);

    f.change(11, ALICE, 110, &[10], &[revision(0xb0, 0xc1, "v2")]);
    f.change(
        12,
        DELEGATE,
        120,
        &[11],
        &[
            json!({ "type": "review", "revision": hex(11), "summary": "good", "verdict": "accept" }),
            json!({ "type": "revision.comment", "revision": hex(11), "body": "nit",
                    "location": { "commit": hex(0xc1), "path": "a.rs",
                                  "new": { "type": "lines", "range": { "start": 1, "end": 2 } } } }),
        ],
    );
    // A merge of a commit that is not on the delegate's branch does not count.
    f.change(
        13,
        DELEGATE,
        130,
        &[12],
        &[json!({ "type": "merge", "revision": hex(11), "commit": hex(0xc1) })],
    );
    assert_eq!(f.patch(10).state, patch::State::Open { conflicts: vec![] });
    f.branches.insert(nid(DELEGATE), oid(0xd0));
    f.ancestry.insert((oid(0xc1), oid(0xd0)));
    let p = f.patch(10);
    assert_eq!(
        p.state,
        patch::State::Merged {
            revision: oid(11),
            commit: oid(0xc1)
        }
    );
    let revisions: Vec<_> = p
        .revisions()
        .map(|(id, r)| (*id, r.description().to_owned()))
        .collect();
    assert_eq!(
        revisions,
        [(oid(10), "please merge".into()), (oid(11), "v2".into())]
    );
    let (_, v2) = p.revisions().nth(1).unwrap();
    let review = v2.reviews.get(&nid(DELEGATE)).unwrap();
    assert_eq!(review.verdict, Some(patch::Verdict::Accept));
    assert_eq!(review.summary.as_deref(), Some("good"));
    let (_, nit) = v2.discussion.comments().next().unwrap();
    assert_eq!(nit.body(), "nit");
    assert_eq!(nit.location.as_ref().unwrap().path, "a.rs");
    assert_eq!(p.merges.len(), 1);

    // With a threshold of two, one delegate's merge is not enough.
    f.threshold = 2;
    f.delegates.push(nid(BOB));
    assert_eq!(f.patch(10).state, patch::State::Open { conflicts: vec![] });
}

#[test]
fn patch_lifecycle_and_authorisation() {
    let draft = json!({ "type": "lifecycle", "state": { "status": "draft" } });
    let archive = json!({ "type": "lifecycle", "state": { "status": "archived" } });
    // The author drafts; Bob may not archive, merge, or redact the author's revision.
    let mut f = proposed();
    f.change(11, ALICE, 110, &[10], std::slice::from_ref(&draft));
    f.change(12, BOB, 120, &[11], std::slice::from_ref(&archive));
    f.change(
        13,
        BOB,
        121,
        &[11],
        &[json!({ "type": "merge", "revision": hex(10), "commit": hex(0xc0) })],
    );
    f.change(14, BOB, 122, &[11], &[revision(0xb0, 0xc2, "bob's take")]);
    f.change(
        15,
        BOB,
        123,
        &[14],
        &[json!({ "type": "revision.redact", "revision": hex(10) })],
    );
    let p = f.patch(10);
    assert_eq!(p.state, patch::State::Draft);
    assert!(p.merges.is_empty());
    // Anyone may propose a revision; Bob's stays, Alice's root is untouched.
    assert_eq!(p.revisions().count(), 2);
    assert_eq!(
        p.timestamp(),
        100,
        "the patch's time is its author's first revision's"
    );

    // A delegate archives; then the author may reopen.
    f.change(16, DELEGATE, 130, &[14], std::slice::from_ref(&archive));
    assert_eq!(f.patch(10).state, patch::State::Archived);
    f.change(
        17,
        ALICE,
        140,
        &[16],
        &[json!({ "type": "lifecycle", "state": { "status": "open" } })],
    );
    assert_eq!(f.patch(10).state, patch::State::Open { conflicts: vec![] });
    // Bob redacts his own revision.
    f.change(
        18,
        BOB,
        150,
        &[17],
        &[json!({ "type": "revision.redact", "revision": hex(14) })],
    );
    assert_eq!(f.patch(10).revisions().count(), 1);

    // A root without the title edit makes no patch.
    let mut f = Fake::new();
    f.change(10, ALICE, 100, &[], &[revision(0xb0, 0xc0, "x")]);
    assert!(evaluate::<Patch>(&f, oid(10), &f.tips(), &unlimited()).is_err());
}

#[test]
fn a_job_collects_every_nodes_runs_and_drops_undecodable_changes() {
    use crate::storage::cob::job::Job;
    let commit = hex(0x42);
    let u1 = "00000000-0000-0000-0000-000000000001";
    let u2 = "00000000-0000-0000-0000-000000000002";
    let mut f = Fake::new();
    // Root by Alice (any node may create a job): the request and her first run.
    f.change(
        10,
        ALICE,
        100,
        &[],
        &[
            json!({ "Request": { "oid": commit } }),
            json!({ "Run": { "uuid": u1, "log": "https://ci.alice/1" } }),
        ],
    );
    // Bob runs too; Alice finishes her run; Bob's attempt to finish Alice's run is ignored.
    f.change(
        11,
        BOB,
        110,
        &[10],
        &[json!({ "Run": { "uuid": u2, "log": "https://ci.bob/2" } })],
    );
    f.change(
        12,
        ALICE,
        120,
        &[10],
        &[json!({ "Finished": { "uuid": u1, "reason": "Failed" } })],
    );
    f.change(
        13,
        BOB,
        130,
        &[11, 12],
        &[json!({ "Finished": { "uuid": u1, "reason": "Succeeded" } })],
    );
    // `rad cob create`'s generic actions carry a `parents` key: radicle-job cannot decode
    // them, so the change (and what depends on it) is pruned.
    f.change(
        14,
        BOB,
        140,
        &[13],
        &[json!({ "Finished": { "uuid": u2, "reason": "Succeeded" }, "parents": [] })],
    );
    f.change(
        15,
        BOB,
        150,
        &[14],
        &[json!({ "Finished": { "uuid": u2, "reason": "Failed" } })],
    );
    let job = evaluate::<Job>(&f, oid(10), &f.tips(), &unlimited()).unwrap();
    assert_eq!(job.commit, oid(0x42));
    let alice = &job.runs[&nid(ALICE)];
    assert_eq!(alice.len(), 1);
    assert_eq!(alice[0].status.label(), "failed");
    assert_eq!(alice[0].timestamp, 120);
    let bob = &job.runs[&nid(BOB)];
    assert_eq!(bob.len(), 1);
    assert_eq!(bob[0].id.as_str(), u2);
    assert_eq!(bob[0].log, "https://ci.bob/2");
    assert_eq!(bob[0].status.label(), "started", "14 and 15 pruned");

    // A root that is not a request is no job.
    let mut f = Fake::new();
    f.change(
        10,
        ALICE,
        100,
        &[],
        &[json!({ "Run": { "uuid": u1, "log": "https://ci/1" } })],
    );
    assert!(matches!(
        evaluate::<Job>(&f, oid(10), &f.tips(), &unlimited()),
        Err(EvalError::Root { .. })
    ));
}
