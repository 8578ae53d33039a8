//! Issues and patches in the radicle-httpd JSON API (issue 15, checklist rows 15–16): COBs made
//! by the real `rad` (the fixtures, and a user's node replicating to seedd) are listed, filtered,
//! paged, shown and counted in the httpd shapes the explorer's zod schemas require; private and
//! other tenants' repositories answer 404.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use seedd_tests::cob::{change_signature, signed_commit};
use seedd_tests::{
    fixtures, http_get, output_text, stdout, wait_for, Prober, RadNode, Seed, SeedOptions,
};
use serde_json::{json, Value};

fn get(seed: &Seed, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let (status, body) = http_get(&seed.url(path), headers).unwrap();
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// GET that must answer 200.
fn ok(seed: &Seed, path: &str) -> Value {
    let (status, v) = get(seed, path, &[]);
    assert_eq!(status, 200, "{path}: {v}");
    v
}

fn is_oid(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// zod `authorSchema`: `{id: did, alias?: string}` (never `null`).
fn assert_author(a: &Value) {
    assert!(a["id"].as_str().unwrap().starts_with("did:key:z6Mk"), "{a}");
    assert!(a.get("alias").is_none_or(Value::is_string), "{a}");
}

/// zod `commentSchema`; `patch`: the key `location` is present (null or a code location).
fn assert_comment(c: &Value, patch: bool) {
    assert!(is_oid(&c["id"]), "{c}");
    assert_author(&c["author"]);
    assert!(c["body"].is_string() && c["timestamp"].is_u64(), "{c}");
    assert!(c["resolved"].is_boolean(), "{c}");
    assert!(c["replyTo"].is_null() || is_oid(&c["replyTo"]), "{c}");
    for e in c["edits"].as_array().unwrap() {
        assert_author(&e["author"]);
        assert!(e["body"].is_string() && e["timestamp"].is_u64(), "{c}");
        assert!(e["embeds"].is_array(), "{c}");
    }
    assert!(!c["edits"].as_array().unwrap().is_empty(), "{c}");
    assert!(c["embeds"].is_array(), "{c}");
    for r in c["reactions"].as_array().unwrap() {
        assert!(r["emoji"].is_string(), "{c}");
        r["authors"]
            .as_array()
            .unwrap()
            .iter()
            .for_each(assert_author);
    }
    assert_eq!(c.get("location").is_some(), patch, "{c}");
}

/// `v` as the shared body type `T` (every field known, none missing).
fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone())
        .unwrap_or_else(|e| panic!("not a {} ({e}): {v}", std::any::type_name::<T>()))
}

/// zod `issueSchema`.
fn assert_issue(i: &Value) {
    let _: seedd_web_api::Issue = typed(i);
    assert!(is_oid(&i["id"]), "{i}");
    assert_author(&i["author"]);
    assert!(i["title"].is_string(), "{i}");
    match i["state"]["status"].as_str().unwrap() {
        "open" => {}
        "closed" => assert!(matches!(
            i["state"]["reason"].as_str(),
            Some("other" | "solved")
        )),
        s => panic!("state {s}"),
    }
    i["assignees"]
        .as_array()
        .unwrap()
        .iter()
        .for_each(assert_author);
    assert!(i["labels"].as_array().unwrap().iter().all(Value::is_string));
    let d = i["discussion"].as_array().unwrap();
    assert!(!d.is_empty(), "{i}");
    d.iter().for_each(|c| assert_comment(c, false));
}

/// zod `patchSchema`.
fn assert_patch(p: &Value) {
    let _: seedd_web_api::Patch = typed(p);
    assert!(is_oid(&p["id"]), "{p}");
    assert_author(&p["author"]);
    assert!(p["title"].is_string(), "{p}");
    assert_eq!(p["target"], "delegates");
    match p["state"]["status"].as_str().unwrap() {
        "draft" | "archived" => {}
        "open" => assert!(p["state"].get("conflicts").is_none_or(Value::is_array)),
        "merged" => assert!(is_oid(&p["state"]["revision"]) && is_oid(&p["state"]["commit"])),
        s => panic!("state {s}"),
    }
    assert!(p["labels"].as_array().unwrap().iter().all(Value::is_string));
    p["assignees"]
        .as_array()
        .unwrap()
        .iter()
        .for_each(assert_author);
    for m in p["merges"].as_array().unwrap() {
        assert_author(&m["author"]);
        assert!(is_oid(&m["revision"]) && is_oid(&m["commit"]) && m["timestamp"].is_u64());
    }
    let revisions = p["revisions"].as_array().unwrap();
    assert!(!revisions.is_empty(), "{p}");
    for r in revisions {
        assert!(
            is_oid(&r["id"]) && is_oid(&r["base"]) && is_oid(&r["oid"]),
            "{r}"
        );
        assert_author(&r["author"]);
        assert!(
            r["description"].is_string() && r["timestamp"].is_u64(),
            "{r}"
        );
        assert!(!r["edits"].as_array().unwrap().is_empty(), "{r}");
        assert!(r["refs"].as_array().unwrap().iter().all(Value::is_string));
        assert!(r["reactions"].is_array());
        r["discussions"]
            .as_array()
            .unwrap()
            .iter()
            .for_each(|c| assert_comment(c, true));
        for rv in r["reviews"].as_array().unwrap() {
            assert!(is_oid(&rv["id"]));
            assert_author(&rv["author"]);
            assert!(
                rv["verdict"].is_null() || rv["verdict"] == "accept" || rv["verdict"] == "reject"
            );
            assert!(rv["summary"].is_null() || rv["summary"].is_string());
            assert!(rv["timestamp"].is_u64());
            rv["comments"]
                .as_array()
                .unwrap()
                .iter()
                .for_each(|c| assert_comment(c, true));
        }
    }
}

fn meta(seed: &Seed, rid: &str) -> Value {
    ok(seed, &format!("/api/v1/repos/{rid}"))["payloads"]["xyz.radicle.project"]["meta"].clone()
}

/// The fixture issue and patch (made by `rad issue open` and `git push rad HEAD:refs/patches`)
/// are listed, filtered, paged, shown and counted; ids are checked; private and other
/// tenants' repositories answer 404.
#[test]
fn fixture_issue_and_patch_are_listed_shown_and_counted() {
    let f = fixtures();
    let seed = Seed::start(SeedOptions {
        repos: vec![
            "heartwood-fixture".into(),
            "small-fixture".into(),
            "secret-fixture".into(),
        ],
        ..SeedOptions::default()
    });
    let hw = f.repo("heartwood-fixture");
    let rid = f.rid("heartwood-fixture");
    let issue_id = hw["issue_id"].as_str().unwrap();
    let patch_id = hw["patch_id"].as_str().unwrap();
    let patch_head = hw["patch_head"].as_str().unwrap();
    let alice = f.json["alice"]["did"].as_str().unwrap();

    // Counts in `RepoInfo`, on the repository and in the listing.
    let m = meta(&seed, &rid);
    assert_eq!(m["issues"], json!({ "open": 1, "closed": 0 }), "{m}");
    assert_eq!(
        m["patches"],
        json!({ "open": 1, "draft": 0, "archived": 0, "merged": 0 }),
        "{m}"
    );
    let listed = ok(&seed, "/api/v1/repos?show=all");
    let entry = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rid"] == rid.as_str())
        .unwrap();
    assert_eq!(entry["payloads"]["xyz.radicle.project"]["meta"], m);
    let small = f.rid("small-fixture");
    assert_eq!(
        meta(&seed, &small)["issues"],
        json!({ "open": 0, "closed": 0 })
    );

    // Issues: open by default, `closed` empty, `all` the same one.
    let issues = ok(&seed, &format!("/api/v1/repos/{rid}/issues"));
    assert_eq!(issues.as_array().unwrap().len(), 1, "{issues}");
    let issue = &issues[0];
    assert_issue(issue);
    assert_eq!(issue["id"], issue_id);
    assert_eq!(issue["title"], "Fixture issue");
    assert_eq!(issue["state"], json!({ "status": "open" }));
    assert_eq!(issue["author"]["id"], alice);
    assert_eq!(
        issue["discussion"][0]["body"],
        "An issue created by make-fixtures.sh."
    );
    assert_eq!(
        issue["discussion"][0]["id"], issue_id,
        "the root comment is the COB id"
    );
    assert_eq!(issue["discussion"][0]["replyTo"], Value::Null);
    assert_eq!(
        ok(&seed, &format!("/api/v1/repos/{rid}/issues?status=closed")),
        json!([])
    );
    assert_eq!(
        ok(
            &seed,
            &format!("/api/v1/repos/{rid}/issues?status=all&page=0&perPage=5&deployment_id=x")
        ),
        issues
    );
    assert_eq!(
        ok(
            &seed,
            &format!("/api/v1/repos/{rid}/issues?status=all&page=1&perPage=1")
        ),
        json!([])
    );
    assert_eq!(
        &ok(&seed, &format!("/api/v1/repos/{rid}/issues/{issue_id}")),
        issue
    );
    let (s, v) = get(
        &seed,
        &format!("/api/v1/repos/{rid}/issues/{patch_id}"),
        &[],
    );
    assert_eq!(s, 404, "a patch is no issue: {v}");
    assert_eq!(v["code"], 404);
    let (s, _) = get(&seed, &format!("/api/v1/repos/{rid}/issues/1234"), &[]);
    assert_eq!(s, 400, "short ids are rejected");

    // Patches.
    let patches = ok(&seed, &format!("/api/v1/repos/{rid}/patches"));
    assert_eq!(patches.as_array().unwrap().len(), 1, "{patches}");
    let patch = &patches[0];
    assert_patch(patch);
    assert_eq!(patch["id"], patch_id);
    assert_eq!(patch["title"], "Fixture patch");
    assert_eq!(patch["state"], json!({ "status": "open" }));
    assert_eq!(patch["author"]["id"], alice);
    let rev = &patch["revisions"][0];
    assert_eq!(rev["id"], patch_id, "the first revision is the COB id");
    assert_eq!(rev["oid"], patch_head);
    assert_eq!(rev["description"], "A patch created by make-fixtures.sh.");
    assert!(
        rev["refs"]
            .as_array()
            .unwrap()
            .contains(&json!(format!("refs/heads/patches/{patch_id}"))),
        "{rev}"
    );
    for status in ["draft", "archived", "merged"] {
        assert_eq!(
            ok(
                &seed,
                &format!("/api/v1/repos/{rid}/patches?status={status}")
            ),
            json!([]),
            "{status}"
        );
    }
    assert_eq!(
        ok(&seed, &format!("/api/v1/repos/{rid}/patches?status=all")),
        patches
    );
    assert_eq!(
        &ok(&seed, &format!("/api/v1/repos/{rid}/patches/{patch_id}")),
        patch
    );
    let (s, _) = get(
        &seed,
        &format!("/api/v1/repos/{rid}/patches/{issue_id}"),
        &[],
    );
    assert_eq!(s, 404);
    let (s, _) = get(
        &seed,
        &format!("/api/v1/repos/{rid}/patches?status=bogus"),
        &[],
    );
    assert_eq!(s, 400);
    // Answers come from the cache the second time (same JSON).
    assert_eq!(ok(&seed, &format!("/api/v1/repos/{rid}/patches")), patches);
    assert!(
        seed.metric(
            "seedd_web_requests_total",
            &["group=\"cobs\"", "status=\"200\""]
        ) >= 10.0
    );

    // A private repository's COBs are not found.
    let secret = f.rid("secret-fixture");
    for what in ["issues", "patches"] {
        let (s, _) = get(&seed, &format!("/api/v1/repos/{secret}/{what}"), &[]);
        assert_eq!(s, 404, "{what}");
    }

    // On a tenant's host, another repository's COBs are not found; its own are.
    let (s, v) = seed.admin(
        "POST",
        "/api/v1/tenants",
        Some(json!({ "name": "acme", "hosts": ["acme.seed.test"] })),
    );
    assert_eq!(s, 201, "{v}");
    let (s, v) = seed.admin(
        "POST",
        &format!("/api/v1/repos/{small}/seed"),
        Some(json!({ "tenant": "acme" })),
    );
    assert_eq!(s, 200, "{v}");
    let acme = [("Host", "acme.seed.test")];
    let (s, _) = get(&seed, &format!("/api/v1/repos/{rid}/issues"), &acme);
    assert_eq!(s, 404);
    let (s, _) = get(
        &seed,
        &format!("/api/v1/repos/{rid}/patches/{patch_id}"),
        &acme,
    );
    assert_eq!(s, 404);
    let (s, v) = get(
        &seed,
        &format!("/api/v1/repos/{small}/issues?status=all"),
        &acme,
    );
    assert_eq!((s, v), (200, json!([])));
}

fn run_ok(out: Output, what: &str) -> String {
    let t = output_text(&out);
    assert!(out.status.success(), "{what} failed:\n{t}");
    t
}

/// The ids of `node`'s COBs of `type_name` in repository `rid` (its own namespace).
fn cob_ids(node: &RadNode, rid: &str, type_name: &str) -> Vec<String> {
    let repo = node.repo_path(rid);
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args([
            "for-each-ref",
            "--format=%(refname:lstrip=6)",
            &format!("refs/namespaces/{}/refs/cobs/{type_name}/", node.nid),
        ])
        .output()
        .unwrap();
    stdout(&out).lines().map(str::to_owned).collect()
}

fn git_line(node: &RadNode, dir: &Path, args: &[&str]) -> String {
    stdout(&node.git_in(dir, args)).trim().to_owned()
}

/// A user opens, comments and closes an issue with `rad issue`, and opens, revises and merges
/// a patch with `git push rad`; after each step seedd replicates the COBs and the API shows the
/// new state and counts.
#[test]
fn issues_and_patches_made_with_rad_are_served_after_replication() {
    let seed = Seed::start(SeedOptions {
        p2p_config: "relay = \"always\"\n".into(),
        ..SeedOptions::allowing()
    });
    let user = RadNode::start("cobuser", &[seed.p2p_peer()]);
    wait_for(
        "the user connected to seedd",
        Duration::from_secs(30),
        || {
            seed.api("/api/v1/peers")["peers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["nid"] == user.nid.as_str() && p["state"] == "connected")
                .then_some(())
        },
    );
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    run_ok(
        user.git_in(&proj, &["init", "-q", "-b", "main"]),
        "git init",
    );
    std::fs::write(proj.join("README"), "hello\n").unwrap();
    run_ok(user.git_in(&proj, &["add", "README"]), "git add");
    run_ok(
        user.git_in(&proj, &["commit", "-q", "-m", "first"]),
        "git commit",
    );
    run_ok(
        user.rad_in(
            &proj,
            &[
                "init",
                "--name",
                "cobs",
                "--description",
                "COB test",
                "--default-branch",
                "main",
                "--public",
                "--no-confirm",
            ],
        ),
        "rad init",
    );
    let rid = stdout(&user.rad_in(&proj, &["."])).trim().to_owned();
    wait_for("the repository on seedd", Duration::from_secs(30), || {
        let (s, _) = get(&seed, &format!("/api/v1/repos/{rid}"), &[]);
        (s == 200).then_some(())
    });
    let issues_at = |status: &str| {
        ok(
            &seed,
            &format!("/api/v1/repos/{rid}/issues?status={status}"),
        )
    };

    // Open an issue.
    run_ok(
        user.rad_in(
            &proj,
            &[
                "issue",
                "open",
                "--title",
                "Replicated issue",
                "--description",
                "Opened with rad.",
            ],
        ),
        "rad issue open",
    );
    let ids = cob_ids(&user, &rid, "xyz.radicle.issue");
    assert_eq!(ids.len(), 1, "{ids:?}");
    let issue_id = ids[0].clone();
    let issue = wait_for("the issue on seedd", Duration::from_secs(30), || {
        issues_at("open").as_array().unwrap().first().cloned()
    });
    assert_issue(&issue);
    assert_eq!(issue["id"], issue_id.as_str());
    assert_eq!(issue["title"], "Replicated issue");
    assert_eq!(issue["discussion"][0]["body"], "Opened with rad.");
    assert_eq!(issue["author"]["id"], format!("did:key:{}", user.nid));
    // Issue 27 §5: authors, delegates, remotes and `/nodes/{nid}` carry the alias the user's
    // node announced when it connected (as httpd shows it from its node database).
    let named = wait_for("the author's alias", Duration::from_secs(30), || {
        let i = ok(&seed, &format!("/api/v1/repos/{rid}/issues/{issue_id}"));
        i["author"].get("alias").cloned()
    });
    assert_eq!(named, "cobuser");
    let repo = ok(&seed, &format!("/api/v1/repos/{rid}"));
    assert_eq!(repo["delegates"][0]["alias"], "cobuser", "{repo}");
    let remotes = ok(&seed, &format!("/api/v1/repos/{rid}/remotes"));
    let mine = remotes
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == user.nid.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("{remotes}"));
    assert_eq!(mine["alias"], "cobuser", "{remotes}");
    assert_eq!(
        ok(&seed, &format!("/api/v1/nodes/{}", user.nid))["alias"],
        "cobuser"
    );

    // Comment on it: the new comment follows the description, replying to it.
    run_ok(
        user.rad_in(
            &proj,
            &[
                "issue",
                "comment",
                &issue_id,
                "--message",
                "A first comment.",
            ],
        ),
        "rad issue comment",
    );
    let issue = wait_for("the comment on seedd", Duration::from_secs(30), || {
        let i = ok(&seed, &format!("/api/v1/repos/{rid}/issues/{issue_id}"));
        (i["discussion"].as_array().unwrap().len() == 2).then_some(i)
    });
    assert_issue(&issue);
    assert_eq!(issue["discussion"][1]["body"], "A first comment.");
    assert_eq!(issue["discussion"][1]["replyTo"], issue_id.as_str());

    // Another user (no delegate) clones through seedd and comments: their namespace replicates
    // and the comment joins the discussion, by its author.
    let peer = RadNode::start("cobpeer", &[seed.p2p_peer()]);
    wait_for(
        "the peer to see seedd as a seed of the repo",
        Duration::from_secs(30),
        || {
            peer.routing()
                .contains(&(rid.clone(), seed.nid()))
                .then_some(())
        },
    );
    let work = tempfile::tempdir().unwrap();
    run_ok(
        peer.rad_in(work.path(), &["clone", &rid, "wc", "--timeout", "30s"]),
        "rad clone",
    );
    let wc = work.path().join("wc");
    run_ok(
        peer.rad_in(
            &wc,
            &[
                "issue",
                "comment",
                &issue_id,
                "--message",
                "Seen from another node.",
            ],
        ),
        "rad issue comment (peer)",
    );
    let issue = wait_for(
        "the peer's comment on seedd",
        Duration::from_secs(30),
        || {
            let i = ok(&seed, &format!("/api/v1/repos/{rid}/issues/{issue_id}"));
            (i["discussion"].as_array().unwrap().len() == 3).then_some(i)
        },
    );
    assert_issue(&issue);
    assert_eq!(issue["discussion"][2]["body"], "Seen from another node.");
    assert_eq!(
        issue["discussion"][2]["author"]["id"],
        format!("did:key:{}", peer.nid)
    );
    assert_eq!(issue["author"]["id"], format!("did:key:{}", user.nid));

    // Close it: it moves from `open` to `closed` and the counts follow.
    run_ok(
        user.rad_in(&proj, &["issue", "state", &issue_id, "--solved"]),
        "rad issue state --solved",
    );
    wait_for("the issue closed on seedd", Duration::from_secs(30), || {
        issues_at("open")
            .as_array()
            .unwrap()
            .is_empty()
            .then_some(())
    });
    let closed = issues_at("closed");
    assert_eq!(closed[0]["id"], issue_id.as_str());
    assert_eq!(
        closed[0]["state"],
        json!({ "status": "closed", "reason": "solved" })
    );
    assert_eq!(
        meta(&seed, &rid)["issues"],
        json!({ "open": 0, "closed": 1 })
    );

    // Open a patch from a branch.
    run_ok(
        user.git_in(&proj, &["checkout", "-q", "-b", "fix"]),
        "git checkout",
    );
    std::fs::write(proj.join("FIX"), "v1\n").unwrap();
    run_ok(user.git_in(&proj, &["add", "FIX"]), "git add");
    run_ok(
        user.git_in(&proj, &["commit", "-q", "-m", "Fix it"]),
        "git commit",
    );
    let v1 = git_line(&user, &proj, &["rev-parse", "HEAD"]);
    run_ok(
        user.git_in(
            &proj,
            &[
                "push",
                "-o",
                "patch.message=Replicated patch",
                "rad",
                "HEAD:refs/patches",
            ],
        ),
        "git push rad HEAD:refs/patches",
    );
    let ids = cob_ids(&user, &rid, "xyz.radicle.patch");
    assert_eq!(ids.len(), 1, "{ids:?}");
    let patch_id = ids[0].clone();
    let patch = wait_for("the patch on seedd", Duration::from_secs(30), || {
        ok(&seed, &format!("/api/v1/repos/{rid}/patches"))
            .as_array()
            .unwrap()
            .first()
            .cloned()
    });
    assert_patch(&patch);
    assert_eq!(patch["id"], patch_id.as_str());
    assert_eq!(patch["title"], "Replicated patch");
    assert_eq!(patch["revisions"][0]["oid"], v1.as_str());

    // Revise it: a second revision with the new head.
    std::fs::write(proj.join("FIX"), "v2\n").unwrap();
    run_ok(
        user.git_in(&proj, &["commit", "-qam", "Fix it better"]),
        "git commit",
    );
    let v2 = git_line(&user, &proj, &["rev-parse", "HEAD"]);
    run_ok(
        user.git_in(
            &proj,
            &[
                "push",
                "-f",
                "-o",
                "patch.message=Second revision",
                "rad",
                &format!("HEAD:refs/heads/patches/{patch_id}"),
            ],
        ),
        "git push rad (revision)",
    );
    let patch = wait_for("the revision on seedd", Duration::from_secs(30), || {
        let p = ok(&seed, &format!("/api/v1/repos/{rid}/patches/{patch_id}"));
        (p["revisions"].as_array().unwrap().len() == 2).then_some(p)
    });
    assert_patch(&patch);
    assert_eq!(patch["revisions"][1]["oid"], v2.as_str());

    // Merge it into main: git-remote-rad records the merge; the patch is merged.
    run_ok(
        user.git_in(&proj, &["checkout", "-q", "main"]),
        "git checkout main",
    );
    run_ok(
        user.git_in(&proj, &["merge", "-q", "--ff-only", "fix"]),
        "git merge",
    );
    run_ok(
        user.git_in(&proj, &["push", "rad", "main"]),
        "git push rad main",
    );
    let patch = wait_for("the merge on seedd", Duration::from_secs(30), || {
        let p = ok(&seed, &format!("/api/v1/repos/{rid}/patches?status=merged"));
        p.as_array().unwrap().first().cloned()
    });
    assert_patch(&patch);
    assert_eq!(patch["state"]["status"], "merged");
    assert_eq!(patch["state"]["commit"], v2.as_str());
    assert_eq!(
        patch["merges"][0]["author"]["id"],
        format!("did:key:{}", user.nid)
    );
    assert_eq!(
        meta(&seed, &rid)["patches"],
        json!({ "open": 0, "draft": 0, "archived": 0, "merged": 1 })
    );
    assert_eq!(
        ok(&seed, &format!("/api/v1/repos/{rid}/patches")),
        json!([]),
        "no open patch"
    );
}

/// Issue 25 §2: an issue of 10,000 changes that all name one signed tree of 256 action blobs of
/// 1 MiB (one blob, so the repository stays a few MB), signed with the real key of a `rad`
/// profile, in a repository seedd serves. Unbounded, evaluating it parses terabytes. The API
/// answers within its deadline (413: over the evaluation budget), the answer is remembered by
/// tips (a second request is answered at once, counted once), seedd's CPU is idle 5 s later,
/// and another repository's `/tree` answers 200 meanwhile.
#[test]
fn an_issue_reusing_one_signed_tree_is_refused_within_budget_and_the_seed_goes_idle() {
    let f = fixtures();
    let data = tempfile::tempdir().unwrap();
    for name in ["heartwood-fixture", "small-fixture"] {
        let canonical = f.rid(name).trim_start_matches("rad:").to_owned();
        seedd_tests::copy_tree(
            &f.storage().join(&canonical),
            &data.path().join("storage").join(&canonical),
        );
    }
    let rid = f.rid("heartwood-fixture");
    let repo = data
        .path()
        .join("storage")
        .join(rid.trim_start_matches("rad:"));
    let identity = f.repo("heartwood-fixture")["identity_head"]
        .as_str()
        .unwrap()
        .to_owned();
    let message = format!("Change\n\nRad-Resource: {identity}");
    let key =
        seedd_proto::crypto::Keypair::load(&f.dir.join("homes/alice/keys/radicle"), None).unwrap();
    let alice = key.nid();
    let home = data.path().join("git-home");
    std::fs::create_dir_all(&home).unwrap();
    let git = |args: &[&str], input: &[u8]| -> String {
        seedd_tests::git_with_input(&home, &repo, args, input)
            .trim()
            .to_owned()
    };
    let blob = |bytes: &[u8]| git(&["hash-object", "-w", "--stdin"], bytes);
    let manifest = blob(br#"{"typeName":"xyz.radicle.issue","version":1}"#);
    let open = blob(br#"{"type":"comment","body":"Open"}"#);
    let root_tree = git(
        &["mktree"],
        format!("100644 blob {manifest}\tmanifest\n100644 blob {open}\t0\n").as_bytes(),
    );
    let pem = change_signature(&key, &root_tree);
    let root = git(
        &["hash-object", "-w", "-t", "commit", "--stdin"],
        signed_commit(&root_tree, &[], &pem, 1_800_000_000, &message).as_bytes(),
    );
    // One 1 MiB comment, named 256 times by one tree.
    let big = format!(
        r#"{{"type":"comment","body":"{}","replyTo":"{root}"}}"#,
        "x".repeat(1024 * 1024 - 100)
    );
    let big = blob(big.as_bytes());
    let mut listing = format!("100644 blob {manifest}\tmanifest\n");
    for i in 0..256i32 {
        listing.push_str(&format!("100644 blob {big}\t{}\n", i - 128));
    }
    let tree = git(&["mktree"], listing.as_bytes());
    let pem = change_signature(&key, &tree);
    // 10,000 changes on the root, each its own commit of that one tree, then one change that
    // merges them all: written with one git process.
    let dir = tempfile::tempdir().unwrap();
    let mut paths = String::new();
    for i in 0..10_000u64 {
        let path = dir.path().join(format!("c{i}"));
        let text = signed_commit(
            &tree,
            std::slice::from_ref(&root),
            &pem,
            1_800_000_001 + i,
            &message,
        );
        std::fs::write(&path, text).unwrap();
        paths.push_str(&format!("{}\n", path.display()));
    }
    let list = dir.path().join("paths");
    std::fs::write(&list, paths).unwrap();
    let out = seedd_tests::git(&home)
        .arg("--git-dir")
        .arg(&repo)
        .args(["hash-object", "-w", "-t", "commit", "--stdin-paths"])
        .stdin(std::fs::File::open(&list).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success());
    let changes: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert_eq!(changes.len(), 10_000);
    let tip = git(
        &["hash-object", "-w", "-t", "commit", "--stdin"],
        signed_commit(&tree, &changes, &pem, 1_800_020_000, &message).as_bytes(),
    );
    git(
        &[
            "update-ref",
            &format!("refs/namespaces/{alice}/refs/cobs/xyz.radicle.issue/{root}"),
            &tip,
        ],
        b"",
    );

    let seed = Seed::start(SeedOptions {
        data_dir: Some(data.path().to_owned()),
        ..SeedOptions::default()
    });
    let pid = seed.child.id();
    let small = f.rid("small-fixture");
    let small_head = f.repo("small-fixture")["head"].as_str().unwrap().to_owned();
    // Another repository's tree, asked for all along.
    let trees = Prober::start(seed.url(&format!("/api/v1/repos/{small}/tree/{small_head}/")));

    let started = std::time::Instant::now();
    let (status, body) = get(&seed, &format!("/api/v1/repos/{rid}/issues/{root}"), &[]);
    let took = started.elapsed();
    if status != 413 {
        let logs = seed.logs();
        let tail: Vec<&str> = logs.lines().rev().take(30).collect();
        panic!("{status} {body} after {took:?}; log tail: {tail:#?}");
    }
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("evaluation budget"),
        "{body}"
    );
    assert!(took < Duration::from_secs(20), "answered after {took:?}");
    assert_eq!(
        seed.metric("seedd_cob_budget_exceeded_total", &["kind=\"bytes\""]),
        1.0
    );
    // Remembered by tips: at once, not counted again; the list leaves it out.
    let started = std::time::Instant::now();
    let (status, _) = get(&seed, &format!("/api/v1/repos/{rid}/issues/{root}"), &[]);
    assert_eq!(status, 413);
    assert!(started.elapsed() < Duration::from_secs(2));
    let issues = ok(&seed, &format!("/api/v1/repos/{rid}/issues?status=all"));
    assert!(
        issues
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["id"] != root.as_str()),
        "{issues}"
    );
    assert_eq!(
        seed.metric("seedd_cob_budget_exceeded_total", &["kind=\"bytes\""]),
        1.0
    );

    seedd_tests::proc::assert_goes_idle(pid, Duration::from_secs(5), "the answer");

    trees.assert_all_ok(Duration::from_secs(5));
}
