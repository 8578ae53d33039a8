//! Unit tests of the web API: path groups, paging, RID forms, object ids, line diffs,
//! content types.

use super::diff::{edit_script, lines, Op};
use super::raw::{by_extension, sniff};
use super::source::oid;
use super::*;

const RID: &str = "z3gqcJUoA1n9HaHKufZs5FCSGazv5";

#[test]
fn paths_fall_in_bounded_groups() {
    let cases = [
        ("/api/v1", Group::Node),
        ("/api/v1/node", Group::Node),
        ("/api/v1/stats", Group::Node),
        ("/api/v1/nodes/z6Mk", Group::Node),
        ("/api/v1/repos", Group::Repos),
        ("/api/v1/repos/rad:z3", Group::Repos),
        ("/api/v1/delegates/did:key:z6/repos", Group::Repos),
        ("/api/v1/repos/z3/tree/abc/src", Group::Tree),
        ("/api/v1/repos/z3/stats/commits/abc", Group::Tree),
        ("/api/v1/repos/z3/blob/abc/a.rs", Group::Blob),
        ("/api/v1/repos/z3/readme/abc", Group::Blob),
        ("/api/v1/repos/z3/commits", Group::History),
        ("/api/v1/repos/z3/commits/", Group::History),
        ("/api/v1/repos/z3/activity", Group::History),
        ("/api/v1/repos/z3/commits/abc", Group::Commit),
        ("/api/v1/repos/z3/diff/abc/def", Group::Commit),
        ("/api/v1/repos/z3/diff/abc/def/stats", Group::Commit),
        ("/api/v1/repos/z3/remotes/z6", Group::Remotes),
        ("/raw/z3/abc/a.png", Group::Raw),
        ("/api", Group::Node),
        ("/api/v2/x", Group::Other),
        ("/api/v1/repos/z3/issues", Group::Cobs),
        ("/api/v1/repos/z3/patches/abc", Group::Cobs),
        ("/api/v1/repos/z3/jobs/abc", Group::Cobs),
        ("/api/v1/repos/z3/unknown/abc", Group::Other),
        ("/raw/z3/archive/main", Group::Archive),
        ("/raw/z3/archive/feature/x.zip", Group::Archive),
        ("/raw/z3/abc.tar.gz", Group::Archive),
        ("/raw/z3/abc.zip", Group::Archive),
        ("/raw/z3/abc.tar", Group::Archive),
        ("/raw/z3/abc.tar.gz/x", Group::Raw),
        ("/raw/z3/blobs/abc", Group::Raw),
    ];
    for (path, group) in cases {
        assert_eq!(Group::of(path), group, "{path}");
    }
    // Every label is distinct (metrics zero-initialise each).
    let labels: std::collections::BTreeSet<_> = Group::ALL.iter().map(|g| g.label()).collect();
    assert_eq!(labels.len(), Group::ALL.len());
}

#[test]
fn only_api_and_raw_paths_leave_the_git_routes() {
    for p in ["/api", "/api/", "/api/v1/node", "/raw/z3/abc/x"] {
        assert!(is_web_path(p), "{p}");
    }
    for p in [
        "/",
        "/apix",
        "/raw",
        &format!("/{RID}.git/info/refs"),
        &format!("/rad:{RID}/git-upload-pack"),
    ] {
        assert!(!is_web_path(p), "{p}");
    }
}

#[test]
fn paging_defaults_and_clamps_per_page() {
    let p = Paging::new;
    assert_eq!(p(None, None).window(10, MAX_PER_PAGE), (0, 10));
    assert_eq!(p(Some(2), Some(24)).window(10, MAX_PER_PAGE), (48, 24));
    assert_eq!(p(Some(1), Some(1000)).window(10, MAX_PER_PAGE), (100, 100));
    assert_eq!(
        p(Some(usize::MAX), Some(100)).window(10, MAX_PER_PAGE).0,
        usize::MAX
    );
    // Unknown query parameters are ignored; numbers arrive as strings.
    let uri: axum::http::Uri = "/api/v1/repos?page=3&perPage=7&deployment_id=abc"
        .parse()
        .unwrap();
    let q = axum::extract::Query::<Paging>::try_from_uri(&uri)
        .unwrap()
        .0;
    assert_eq!((q.page, q.per_page), (Some(3), Some(7)));
}

#[test]
fn object_ids_must_be_full_hex() {
    let full = "bb7698e78dbfc780c69b1c7319f86ee289c57742";
    assert_eq!(oid(full).unwrap().to_string(), full);
    for bad in ["bb7698e", "", &format!("{full}0"), &"z".repeat(40)] {
        assert!(matches!(oid(bad), Err(WebError::BadRequest(_))), "{bad}");
    }
}

#[test]
fn rid_forms_parse_and_private_errors_are_404_json() {
    let bare: seedd_proto::crypto::RepoId = RID.parse().unwrap();
    let prefixed: seedd_proto::crypto::RepoId = format!("rad:{RID}").parse().unwrap();
    assert_eq!(bare, prefixed);
    let e = WebError::NotFound("repository not found");
    assert_eq!(e.status(), axum::http::StatusCode::NOT_FOUND);
    let e = WebError::Git("secret path /var/lib/x".into());
    assert_eq!(e.status(), axum::http::StatusCode::INTERNAL_SERVER_ERROR);
}

/// Apply an edit script to `a`, which must give `b`.
fn apply(a: &[&[u8]], b: &[&[u8]], ops: &[Op]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for op in ops {
        match *op {
            Op::Eq(i, j) => {
                assert_eq!(a[i], b[j]);
                out.push(a[i].to_vec());
            }
            Op::Del(_) => {}
            Op::Ins(j) => out.push(b[j].to_vec()),
        }
    }
    out
}

#[test]
fn line_diffs_are_minimal_and_reproduce_the_new_side() {
    let cases: [(&str, &str, usize); 6] = [
        ("", "a\n", 1),
        ("a\n", "", 1),
        ("a\nb\nc\n", "a\nb\nc\n", 0),
        ("a\nb\nc\n", "a\nx\nc\n", 2),
        ("a\nb\nc\nd\n", "b\nc\nd\ne\n", 2),
        ("1\n2\n3\n4\n5\n6\n", "1\n3\n4\n7\n5\n6\n", 2),
    ];
    for (a, b, edits) in cases {
        let (al, bl) = (lines(a.as_bytes()), lines(b.as_bytes()));
        let ops = edit_script(&al, &bl).unwrap();
        let changed = ops.iter().filter(|o| !matches!(o, Op::Eq(..))).count();
        assert_eq!(changed, edits, "{a:?} → {b:?}: {ops:?}");
        let got = apply(&al, &bl, &ops);
        let want: Vec<Vec<u8>> = bl.iter().map(|l| l.to_vec()).collect();
        assert_eq!(got, want, "{a:?} → {b:?}");
    }
}

#[test]
fn raw_content_types_come_from_the_name_then_the_bytes() {
    assert_eq!(by_extension("docs/logo.PNG"), Some("image/png"));
    assert_eq!(by_extension("a.svg"), Some("image/svg+xml"));
    assert_eq!(
        by_extension("index.html"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(by_extension("Makefile"), None);
    assert_eq!(sniff(b"\x89PNG\r\n\x1a\n...."), "image/png");
    assert_eq!(sniff(b"%PDF-1.7"), "application/pdf");
    assert_eq!(sniff(b"hello\n"), "text/plain; charset=utf-8");
    assert_eq!(sniff(&[0, 159, 146, 150]), "application/octet-stream");
}

#[tokio::test]
async fn expensive_requests_wait_briefly_for_a_slot_then_get_503() {
    let slots = Arc::new(tokio::sync::Semaphore::new(1));
    let held = permit(&slots, Duration::from_millis(50)).await.unwrap();
    let started = std::time::Instant::now();
    let busy = permit(&slots, Duration::from_millis(50)).await;
    assert!(matches!(busy, Err(WebError::Busy)), "{busy:?}");
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(
        WebError::Busy.status(),
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    );
    // A slot freed while waiting is taken.
    let waiter = tokio::spawn({
        let slots = slots.clone();
        async move { permit(&slots, Duration::from_secs(5)).await.is_ok() }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(held);
    assert!(waiter.await.unwrap());
}

/// Issue 27 §1: a moved file and a copied one are answered in httpd's shapes (`moved` with
/// `current` when unchanged; `copied` with both sides and the diff), counted once each, and
/// the moved file's old path is no longer listed as deleted.
#[test]
fn moves_and_copies_render_as_httpd_shows_them() {
    use super::diff::{find_renames, render, tree_changes, Budget, Render};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let git = |args: &[&str]| seedd_core::git::testing::ok(dir, args);
    git(&["init", "-q"]);
    let text: String = (0..20).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.join("a.txt"), &text).unwrap();
    std::fs::write(dir.join("b.txt"), text.replace("line 1\n", "one\n")).unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "one"]);
    let before = git(&["rev-parse", "HEAD^{tree}"]);
    std::fs::create_dir(dir.join("moved")).unwrap();
    git(&["mv", "a.txt", "moved/a.txt"]);
    // b.txt is modified; c.txt is new, a near copy.
    std::fs::write(dir.join("b.txt"), format!("{text}tail\n")).unwrap();
    std::fs::write(dir.join("c.txt"), text.replace("line 2\n", "two\n")).unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "two"]);
    let after = git(&["rev-parse", "HEAD^{tree}"]);
    let want = git(&["diff", "-M", "-C", "--name-status", &before, &after]);
    let status: Vec<&str> = want.lines().map(|l| &l[..1]).collect();
    assert_eq!(status, ["M", "C", "R"], "git: {want}");

    let repo = gix::open(dir).unwrap();
    let id = |s: &str| gix::ObjectId::from_hex(s.as_bytes()).unwrap();
    let cancel = seedd_core::blocking::Cancel::new();
    let changes = tree_changes(&repo, Some(id(&before)), Some(id(&after)), &cancel).unwrap();
    assert_eq!(changes.len(), 4, "a.txt, b.txt, c.txt, moved/a.txt");
    let (changes, cut) = find_renames(&repo, changes, &cancel).unwrap();
    assert!(!cut);
    let (diff, _) = render(
        &repo,
        &changes,
        Render::Full,
        &mut Budget::default(),
        &cancel,
    )
    .unwrap();
    let json = serde_json::to_value(&diff).unwrap();
    let files = json["files"].as_array().unwrap();
    let by = |s: &str| files.iter().find(|f| f["status"] == s).cloned().unwrap();
    assert_eq!(files.len(), 3, "{json}");
    let moved = by("moved");
    assert_eq!(moved["oldPath"], "a.txt");
    assert_eq!(moved["newPath"], "moved/a.txt");
    assert!(moved["current"]["oid"].is_string(), "{moved}");
    assert!(moved.get("diff").is_none() && moved.get("path").is_none());
    let copied = by("copied");
    // c.txt is closer to a.txt than to b.txt: git copies it from a.txt (a deleted source used
    // twice: the copy first in path order, the move last).
    assert!(want.contains("a.txt\tc.txt"), "git: {want}");
    assert_eq!(copied["oldPath"], "a.txt");
    assert_eq!(copied["newPath"], "c.txt");
    assert_eq!(copied["diff"]["type"], "plain");
    assert!(copied["old"]["oid"].is_string() && copied["new"]["oid"].is_string());
    assert_eq!(by("modified")["path"], "b.txt");
    assert_eq!(json["stats"]["filesChanged"], 3);
    let typed: seedd_web_api::Diff = serde_json::from_value(json).unwrap();
    assert_eq!(typed.files.len(), 3);
}

/// Issue 30 §1: canonical refs peel as before (a branch to its commit, an annotated tag to its
/// commit, a ref to a tree or to a missing object left out), and refs seen once are answered
/// again without the repository (the peel cache is content-addressed), as are refs whose commits
/// the index knows.
#[test]
fn canonical_refs_peel_once_then_come_from_the_cache() {
    use seedd_core::storage::RefTarget;
    let tmp = tempfile::tempdir().unwrap();
    let rid = seedd_proto::crypto::RepoId::from_oid_bytes([7; 20]);
    let bare = tmp.path().join(rid.canonical());
    std::fs::create_dir_all(&bare).unwrap();
    let git = |args: &[&str]| seedd_core::git::testing::ok(&bare, args);
    git(&["init", "-q", "--bare"]);
    let tree = git(&["write-tree"]);
    let tree = tree.trim().to_owned();
    let commit = git(&[
        "-c",
        "user.name=a",
        "-c",
        "user.email=a@b",
        "commit-tree",
        &tree,
        "-m",
        "one",
    ]);
    let commit = commit.trim().to_owned();
    git(&["update-ref", "refs/heads/main", &commit]);
    git(&[
        "-c",
        "user.name=a",
        "-c",
        "user.email=a@b",
        "tag",
        "-a",
        "v1",
        "-m",
        "v1",
        &commit,
    ]);
    let tag = git(&["rev-parse", "refs/tags/v1"]);
    let tag = tag.trim().to_owned();
    assert_ne!(tag, commit, "an annotated tag object");
    let id = |s: &str| gix::ObjectId::from_hex(s.as_bytes()).unwrap();
    let missing = id("1111111111111111111111111111111111111111");
    // Not known to the index (as for refs indexed before kinds were kept).
    let mut refs: Vec<seedd_core::index::RefCommit> = vec![
        (
            "refs/heads/main".to_owned(),
            RefTarget::Oid(id(&commit)),
            None,
        ),
        ("refs/tags/v1".to_owned(), RefTarget::Oid(id(&tag)), None),
        ("refs/tags/tree".to_owned(), RefTarget::Oid(id(&tree)), None),
        ("refs/rad/id".to_owned(), RefTarget::Oid(id(&commit)), None),
        ("refs/heads/gone".to_owned(), RefTarget::Oid(missing), None),
    ];
    let storage = seedd_core::storage::Storage::open(tmp.path().to_owned()).unwrap();
    let peels = super::repos::Peels::default();
    let first = super::repos::canonical_refs(&storage, &peels, rid, refs.clone()).unwrap();
    let json = serde_json::to_value(&first).unwrap();
    assert_eq!(
        json["refs"],
        serde_json::json!({ "refs/heads/main": commit }),
        "{json}"
    );
    assert_eq!(
        json["tags"]["refs/tags/v1"]["commit"],
        commit.as_str(),
        "{json}"
    );
    assert!(json["tags"].get("refs/tags/tree").is_none(), "{json}");
    // The missing object is not remembered (a fetch may bring it): the repository is needed.
    assert!(peels.canonical(&refs).is_none());
    refs.pop();
    // Everything else is known: answered with the repository gone.
    std::fs::remove_dir_all(&bare).unwrap();
    let again = super::repos::canonical_refs(&storage, &peels, rid, refs).unwrap();
    assert_eq!(serde_json::to_value(&again).unwrap(), json);
    // What the index knows needs neither the repository nor the cache (a tag's commit as the
    // index peeled it; a ref to a tree known to lead to no commit).
    let indexed: Vec<seedd_core::index::RefCommit> = vec![
        (
            "refs/heads/main".to_owned(),
            RefTarget::Oid(id(&commit)),
            Some(Some(id(&commit))),
        ),
        (
            "refs/tags/v1".to_owned(),
            RefTarget::Oid(id(&tag)),
            Some(Some(id(&commit))),
        ),
        (
            "refs/tags/tree".to_owned(),
            RefTarget::Oid(id(&tree)),
            Some(None),
        ),
    ];
    let empty = super::repos::Peels::default();
    let from_index = super::repos::canonical_refs(&storage, &empty, rid, indexed).unwrap();
    assert_eq!(serde_json::to_value(&from_index).unwrap(), json);
}

/// Issue 30 §1: a fleet shard's hidden set is computed once per placement version and
/// listing change count, not per request.
#[test]
fn fleet_hidden_set_is_computed_again_only_when_the_placement_or_listing_moved() {
    use std::collections::HashSet;
    let cache = super::repos::FleetHidden::default();
    let rid = |n: u8| seedd_proto::crypto::RepoId::from_oid_bytes([n; 20]);
    let computed = std::cell::Cell::new(0);
    let get = |version: &str, changes: u64, hidden: u8| {
        cache.get(version, changes, || {
            computed.set(computed.get() + 1);
            (HashSet::from([rid(hidden)]), changes)
        })
    };
    assert!(get("v1", 7, 1).contains(&rid(1)));
    assert!(get("v1", 7, 2).contains(&rid(1)), "kept");
    assert_eq!(computed.get(), 1);
    assert!(get("v1", 8, 2).contains(&rid(2)), "the listing changed");
    assert!(get("v2", 8, 3).contains(&rid(3)), "the placement changed");
    assert!(get("v2", 8, 4).contains(&rid(3)));
    assert_eq!(computed.get(), 3);
}
