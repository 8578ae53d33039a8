//! Tests of identity COB verification: histories built with real `git` and SSH signatures.
//! Long by design: each case of the replay rules (adoption, rejection, concurrent revisions,
//! delegate changes, forgeries) shares one repository builder, so they stay in one file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use ed25519_dalek::{Signer as _, SigningKey};
use gix::objs::tree::{Entry, EntryKind};
use serde_json::{json, Value};

use super::read::parse_sshsig;
use super::*;
use crate::storage::identity;

/// [`super::verify_identity`] within a fetch's identity budget.
fn verify_identity(
    git: &gix::Repository,
    rid: RepoId,
    head: gix::ObjectId,
) -> Result<Identity, CobError> {
    super::verify_identity(git, rid, head, &Budget::with(budget::IDENTITY))
}

/// [`super::verify_identity_heads`] within a fetch's identity budget.
fn verify_identity_heads(
    git: &gix::Repository,
    rid: RepoId,
    heads: &[gix::ObjectId],
) -> Result<Identity, CobError> {
    super::verify_identity_heads(git, rid, heads, &Budget::with(budget::IDENTITY))
}

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
            || PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/seedd/fixtures"),
            PathBuf::from,
        );
        if !dir.join("fixtures.json").exists() {
            let script = std::env::var_os("CARGO_MANIFEST_DIR")
                .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
                .join("../scripts/make-fixtures.sh");
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
        serde_json::from_str(&std::fs::read_to_string(dir.join("fixtures.json")).unwrap()).unwrap();
    let repo = &json["repos"][name];
    Fixture {
        rid: repo["rid"].as_str().unwrap().parse().unwrap(),
        path: dir.join(repo["path"].as_str().unwrap()),
        identity_head: gix::ObjectId::from_hex(repo["identity_head"].as_str().unwrap().as_bytes())
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
    let blobs: Vec<gix::ObjectId> = actions
        .iter()
        .map(|a| {
            git.write_blob(serde_json::to_vec(a).unwrap())
                .unwrap()
                .detach()
        })
        .collect();
    cob_tree_embedding(git, "xyz.radicle.id", &blobs, doc)
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

/// A change on `parents` in which `by` proposes `blob` as the revision after `parent`.
fn propose(
    git: &gix::Repository,
    by: &SigningKey,
    parents: &[gix::ObjectId],
    blob: gix::ObjectId,
    parent: Option<gix::ObjectId>,
    time: i64,
) -> gix::ObjectId {
    let action = revision(blob, parent, sign_blob(by, blob));
    change(git, by, parents, &[action], Some(blob), time)
}

/// A change on `parent` in which `by` accepts `revision` (of `blob`).
fn accepts(
    git: &gix::Repository,
    by: &SigningKey,
    parent: gix::ObjectId,
    revision: gix::ObjectId,
    blob: gix::ObjectId,
    time: i64,
) -> gix::ObjectId {
    let action = accept(revision, sign_blob(by, blob));
    change(git, by, &[parent], &[action], None, time)
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
    let good = propose(&git, &alice, &[root], forged, Some(root), LATER);
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
    let child = propose(&git, &alice, &[forged], third, Some(forged), LATER + 1);
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
    let by_bob = propose(&git, &bob, &[root], other, Some(root), LATER);
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
    let proposal = propose(&git, &alice, &[head], blob, Some(head), LATER);
    // Alice's own accept is one of two needed: the current identity stays.
    let id = verify_identity(&git, fx.rid, proposal).unwrap();
    assert_eq!((id.head, id.doc.threshold), (head, 1));
    // Bob accepts: adopted.
    let accepted = accepts(&git, &bob, proposal, proposal, blob, LATER + 1);
    let id = verify_identity(&git, fx.rid, accepted).unwrap();
    assert_eq!((id.head, id.blob, id.doc.threshold), (proposal, blob, 2));
    // Bob's accept with a signature over another blob.
    let bad = accepts(&git, &bob, proposal, proposal, head, LATER + 1);
    let err = verify_identity(&git, fx.rid, bad).unwrap_err();
    assert!(matches!(err, CobError::ActionSignature { .. }), "{err}");
    // Carol is no delegate: her accept does not count, it is refused.
    let by_carol = accepts(&git, &carol, proposal, proposal, blob, LATER + 1);
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
    let unchanged = propose(&git, &alice, &[head], same, Some(head), LATER);
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
    let late = accepts(&git, &alice, rejected, proposal, blob, LATER + 2);
    assert_eq!(verify_identity(&git, fx.rid, late).unwrap().head, head);
    // An accept of a revision outside the history is a missing dependency.
    let dangling = accepts(&git, &bob, head, proposal, blob, LATER + 1);
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
    let proposal = propose(&git, &alice, &[head], blob, Some(head), LATER);
    let accepted = accepts(&git, &bob, proposal, proposal, blob, LATER + 1);
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
    let by_carol = accepts(&git, &carol, proposal, proposal, blob, LATER + 1);
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
        let id =
            verify_identity(&git, fx.rid, with_trailer).unwrap_or_else(|e| panic!("{token}: {e}"));
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
    let p1 = propose(&git, &alice, &[head], blob1, Some(head), LATER);
    let p2 = propose(&git, &bob, &[head], blob2, Some(head), LATER + 1);
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
    let skipped = accepts(&git, &alice, merge, p2, blob2, LATER + 3);
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
        parse_sshsig(b"-----BEGIN SSH SIGNATURE-----\n!!!\n-----END SSH SIGNATURE-----").is_err()
    );
}

/// A tree of another COB type: `manifest` and the given blobs as actions `0`, `1`, … (names
/// past 127 wrap to negative `i8` names, as 256 actions need).
fn cob_tree(git: &gix::Repository, type_name: &str, actions: &[gix::ObjectId]) -> gix::ObjectId {
    cob_tree_embedding(git, type_name, actions, None)
}

/// A COB tree: `manifest`, the actions, and `embeds/radicle.json` = `doc` when given.
fn cob_tree_embedding(
    git: &gix::Repository,
    type_name: &str,
    actions: &[gix::ObjectId],
    doc: Option<gix::ObjectId>,
) -> gix::ObjectId {
    let manifest = format!(r#"{{"typeName":"{type_name}","version":1}}"#);
    let mut entries = vec![Entry {
        mode: EntryKind::Blob.into(),
        filename: "manifest".into(),
        oid: git.write_blob(manifest.as_bytes()).unwrap().detach(),
    }];
    for (i, blob) in actions.iter().enumerate() {
        entries.push(Entry {
            mode: EntryKind::Blob.into(),
            filename: (i as u8 as i8).to_string().into(),
            oid: *blob,
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

/// An issue whose root is a real one-comment change and whose `n` later changes are one signed
/// tree of 256 copies of a comment of `body_bytes`, reused by every commit (the signature
/// covers only the tree). Returns the root and the tip.
fn issue_reusing_one_tree(
    git: &gix::Repository,
    fx: &Fixture,
    n: usize,
    body_bytes: usize,
) -> (gix::ObjectId, gix::ObjectId) {
    use super::issue::TYPE_NAME as ISSUE;
    let alice = key("alice");
    let message = format!("Change\n\nRad-Resource: {}\n", fx.identity_head);
    let open = git
        .write_blob(serde_json::to_vec(&json!({"type": "comment", "body": "Open"})).unwrap())
        .unwrap()
        .detach();
    let tree = cob_tree(git, ISSUE, &[open]);
    let root = write_commit(git, tree, &[], Some(&sshsig(&alice, tree)), LATER, &message);
    let body = "x".repeat(body_bytes);
    let comment = json!({"type": "comment", "body": body, "replyTo": root.to_string()});
    let blob = git
        .write_blob(serde_json::to_vec(&comment).unwrap())
        .unwrap()
        .detach();
    let tree = cob_tree(git, ISSUE, &[blob; 256]);
    let pem = sshsig(&alice, tree);
    let mut tip = root;
    for i in 0..n {
        tip = write_commit(
            git,
            tree,
            &[tip],
            Some(&pem),
            LATER + 1 + i as i64,
            &message,
        );
    }
    (root, tip)
}

/// Issue 25 §2: one signed tree of 256 actions reused by many commits. The evaluation stops at
/// its budget with a clear error instead of parsing every copy, reads the shared tree once, and
/// stops at once when cancelled.
#[test]
fn an_evaluation_reusing_one_tree_stops_at_its_budget_and_when_cancelled() {
    use super::budget::{BudgetKind, EVALUATION};
    use super::evaluate::{evaluate, EvalError, GitRepo};
    use super::issue::Issue;
    let fx = fixture(HEARTWOOD);
    let (_tmp, git) = copy(&fx);

    // Small actions: 300 changes × 256 actions pass the action budget (50,000).
    let (root, tip) = issue_reusing_one_tree(&git, &fx, 300, 16);
    let budget = Budget::with(EVALUATION);
    let repo = GitRepo::new(&git, &budget);
    let started = std::time::Instant::now();
    let err = evaluate::<Issue>(&repo, root, &[tip], &budget)
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            EvalError::Load(CobError::OverBudget {
                kind: BudgetKind::Actions,
                limit: 50_000
            })
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("over the evaluation budget"),
        "{err}"
    );
    assert!(budget.used(BudgetKind::Changes) < 300);
    // Loading (from the tip) stopped before the root: the shared tree was read from git once
    // for ~196 changes.
    assert_eq!(repo.tree_reads(), 1);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));

    // Large actions: 256 × 64 KiB per change passes the byte budget (16 MiB) at the second
    // change, before its blobs are parsed again.
    let (root, tip) = issue_reusing_one_tree(&git, &fx, 50, 64 * 1024);
    let budget = Budget::with(EVALUATION);
    let repo = GitRepo::new(&git, &budget);
    let err = evaluate::<Issue>(&repo, root, &[tip], &budget)
        .err()
        .unwrap();
    assert_eq!(err.over_budget(), Some(BudgetKind::Bytes), "{err}");
    assert!(budget.used(BudgetKind::Changes) <= 3);
    assert!(err.is_permanent());

    // A cancelled evaluation stops before the next change and is not a permanent result.
    let cancel = crate::blocking::Cancel::new();
    let budget = Budget::new(EVALUATION, cancel.clone());
    cancel.cancel();
    let repo = GitRepo::new(&git, &budget);
    let err = evaluate::<Issue>(&repo, root, &[tip], &budget)
        .err()
        .unwrap();
    assert!(matches!(err, EvalError::Load(CobError::Cancelled)), "{err}");
    assert!(!err.is_permanent());
    assert_eq!(budget.used(BudgetKind::Changes), 0);

    // Within its budget the same graph evaluates (3 changes of 256 small comments).
    let (root, tip) = issue_reusing_one_tree(&git, &fx, 3, 16);
    let budget = Budget::with(EVALUATION);
    let repo = GitRepo::new(&git, &budget);
    let issue = evaluate::<Issue>(&repo, root, &[tip], &budget).unwrap();
    assert!(issue.thread.comments().count() >= 1);
    // The root's tree and the shared one, each read once.
    assert_eq!(repo.tree_reads(), 2);
}

/// A copy of the heartwood fixture whose identity head gains 1,000 changes that all name one
/// signed tree of 256 action blobs of 64 KiB (issue 25 §2): (the copy, its RID, the fixture's
/// identity head, the forged tip).
pub fn identity_reusing_one_tree() -> (tempfile::TempDir, RepoId, gix::ObjectId, gix::ObjectId) {
    let fx = fixture(HEARTWOOD);
    let (tmp, git) = copy(&fx);
    let alice = key("alice");
    let pad = "x".repeat(64 * 1024);
    let edit =
        json!({"type": "RevisionEdit", "revision": fx.identity_head.to_string(), "title": pad});
    let blob = git
        .write_blob(serde_json::to_vec(&edit).unwrap())
        .unwrap()
        .detach();
    let tree = cob_tree(&git, TYPE_NAME, &[blob; 256]);
    let pem = sshsig(&alice, tree);
    let mut tip = fx.identity_head;
    for i in 0..1000 {
        tip = write_commit(&git, tree, &[tip], Some(&pem), LATER + i, "Change\n");
    }
    (tmp, fx.rid, fx.identity_head, tip)
}

/// The same trick in an identity history: verification stops at the fetch's identity budget.
#[test]
fn an_identity_history_reusing_one_tree_stops_at_the_fetch_budget() {
    use super::budget::{BudgetKind, IDENTITY};
    let (tmp, rid, _, tip) = identity_reusing_one_tree();
    let git = gix::open(tmp.path()).unwrap();
    let budget = Budget::with(IDENTITY);
    let started = std::time::Instant::now();
    let err = super::verify_identity(&git, rid, tip, &budget).unwrap_err();
    assert_eq!(err.over_budget(), Some(BudgetKind::Bytes), "{err}");
    assert!(budget.used(BudgetKind::Changes) <= 2);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // Cancelled: stops before reading anything.
    let cancel = crate::blocking::Cancel::new();
    cancel.cancel();
    let err = super::verify_identity(&git, rid, tip, &Budget::new(IDENTITY, cancel)).unwrap_err();
    assert!(matches!(err, CobError::Cancelled), "{err}");
}

/// The forged fork of issue 25 §5 in a copy of the heartwood fixture ([`retired_fork`]).
pub struct RetiredFork {
    pub tmp: tempfile::TempDir,
    pub rid: RepoId,
    /// R2, our adopted revision (alice alone).
    pub ours: gix::ObjectId,
    /// The COB head after R2's accept.
    pub(crate) ours_head: gix::ObjectId,
    /// The forged revision and its accepted head.
    pub(crate) fork: gix::ObjectId,
    pub fork_head: gix::ObjectId,
    /// R3, a successor of R2 by alice.
    pub successor: gix::ObjectId,
}

/// Builds [`RetiredFork`].
pub fn retired_fork() -> RetiredFork {
    let fx = fixture(HEARTWOOD);
    let (tmp, git) = copy(&fx);
    let (alice, bob) = (key("alice"), key("bob"));
    let carol = SigningKey::from_bytes(&[7; 32]);
    let did = |k: &SigningKey| json!(nid(k).to_did());
    let head = fx.identity_head;

    // R1: alice, bob, carol (majority 2), accepted by alice and bob.
    let blob1 = edited_doc(&git, head, |doc| {
        doc["delegates"] = json!([did(&alice), did(&bob), did(&carol)]);
    });
    let r1 = propose(&git, &alice, &[head], blob1, Some(head), LATER);
    let a1 = accepts(&git, &bob, r1, r1, blob1, LATER + 1);
    // R2: alice alone, accepted by alice and bob (2 of R1's 3).
    let blob2 = edited_doc(&git, r1, |doc| doc["delegates"] = json!([did(&alice)]));
    let r2 = propose(&git, &alice, &[a1], blob2, Some(r1), LATER + 10);
    let a2 = accepts(&git, &bob, r2, r2, blob2, LATER + 11);
    // The fork: bob and carol, both retired, from R1, dated before R2.
    let forged = edited_doc(&git, r1, |doc| {
        doc["delegates"] = json!([did(&bob), did(&carol)]);
    });
    let fork = propose(&git, &bob, &[a1], forged, Some(r1), LATER + 5);
    let fork_accepted = accepts(&git, &carol, fork, fork, forged, LATER + 6);
    // A successor of ours by our current delegate (alice alone).
    let blob3 = edited_doc(&git, r2, |doc| doc["threshold"] = json!(1));
    let blob3 = if blob3 == blob2 {
        edited_doc(&git, r2, |doc| {
            doc["payload"]["xyz.radicle.project"]["description"] = json!("rotated")
        })
    } else {
        blob3
    };
    let r3 = propose(&git, &alice, &[a2], blob3, Some(r2), LATER + 20);
    RetiredFork {
        tmp,
        rid: fx.rid,
        ours: r2,
        ours_head: a2,
        fork,
        fork_head: fork_accepted,
        successor: r3,
    }
}

/// Issue 25 §5: delegates {alice, bob} add carol, then rotate bob and carol out (alice alone).
/// Bob forges a fork of the revision that named all three, back-dated before the rotation and
/// accepted by carol: a majority of that retired set. The replay (timestamp order) adopts the
/// fork; [`verify_successor`] does not, because our current delegates (alice) never accepted it.
#[test]
fn a_back_dated_fork_by_a_retired_delegate_set_is_not_adopted() {
    let f = retired_fork();
    let git = gix::open(f.tmp.path()).unwrap();
    let ours = verify_identity(&git, f.rid, f.ours_head).unwrap();
    assert_eq!(ours.head, f.ours);
    assert_eq!(ours.doc.delegates, vec![nid(&key("alice"))]);
    // The rules alone adopt it (it comes first in timestamp order; R2 becomes a late fork).
    let merged = verify_identity_heads(&git, f.rid, &[f.fork_head, f.ours]).unwrap();
    assert_eq!(merged.head, f.fork);
    // Against our current document it is not adopted.
    let budget = Budget::with(budget::IDENTITY);
    let got = verify_successor(&git, f.rid, f.ours, &ours.doc, f.fork_head, &budget).unwrap();
    assert!(got.is_none(), "{:?}", got.map(|i| i.head));
    // A successor of ours, accepted by our current delegates, is.
    let budget = Budget::with(budget::IDENTITY);
    let got = verify_successor(&git, f.rid, f.ours, &ours.doc, f.successor, &budget).unwrap();
    assert_eq!(got.map(|i| i.head), Some(f.successor));
}
