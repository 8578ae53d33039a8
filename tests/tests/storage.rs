//! Storage as written by the real `rad`: identity documents, delegates, visibility and signed
//! refs are read and verified; forged signed refs are rejected and that peer is not served.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use seedd_tests::*;

fn repo_json(seed: &Seed, rid: &str) -> serde_json::Value {
    let out = run(Command::new(bin("seedctl"))
        .args(["--admin", &seed.admin_url(""), "--token-file"])
        .arg(seed.token_file())
        .args(["repo", "show", rid, "-o", "json"]));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn identity_documents_and_signed_refs_made_by_rad_are_read_and_verified() {
    let seed = Seed::start(SeedOptions {
        repos: vec![
            "heartwood-fixture".into(),
            "secret-fixture".into(),
            "small-fixture".into(),
        ],
        ..SeedOptions::default()
    });
    let f = fixtures();
    for name in ["heartwood-fixture", "secret-fixture", "small-fixture"] {
        let want = f.repo(name);
        let rid = f.rid(name);
        let v = repo_json(&seed, &rid);
        let r = &v["repo"];
        assert_eq!(r["rid"], rid.as_str());
        assert_eq!(r["name"], want["name"], "{name}");
        assert_eq!(r["default_branch"], want["default_branch"], "{name}");
        assert_eq!(r["threshold"], want["threshold"], "{name}");
        assert_eq!(r["head"], want["head"], "{name}");
        let private = want["private"].as_bool().unwrap();
        assert_eq!(r["visibility"]["type"] == "private", private, "{name}: {r}");
        let dels: Vec<String> = r["delegates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| format!("did:key:{}", d.as_str().unwrap()))
            .collect();
        let want_dels: Vec<String> = want["delegates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(dels, want_dels, "{name}");
        // Every namespace rad made verifies.
        let sigrefs = v["sigrefs"].as_array().unwrap();
        assert!(!sigrefs.is_empty(), "{name}");
        for s in sigrefs {
            assert!(s["error"].is_null(), "{name}: {s}");
            assert!(s["level"].is_string(), "{name}: {s}");
        }
        let mut nss: Vec<String> = sigrefs
            .iter()
            .map(|s| s["nid"].as_str().unwrap().to_owned())
            .collect();
        let mut want_ns: Vec<String> = want["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect();
        nss.sort();
        want_ns.sort();
        assert_eq!(nss, want_ns, "{name}");
    }
}

/// Rewrite `nid`'s sigrefs in `repo` so the refs blob no longer matches the signature.
fn forge_sigrefs(home: &std::path::Path, repo: &std::path::Path, nid: &str) {
    let g = |args: &[&str]| stdout(&run(git(home).arg("--git-dir").arg(repo).args(args)));
    let sigref = format!("refs/namespaces/{nid}/refs/rad/sigrefs");
    let tip = g(&["rev-parse", &sigref]);
    let refs = g(&["cat-file", "blob", &format!("{tip}:refs")]);
    let sig = g(&["rev-parse", &format!("{tip}:signature")]);
    // Point the default branch somewhere else (any other commit), keeping the old signature.
    let forged_refs: String = refs
        .lines()
        .map(|l| {
            if l.ends_with(" refs/heads/main") || l.ends_with(" refs/heads/master") {
                let (_, name) = l.split_once(' ').unwrap();
                format!("{} {name}\n", "1".repeat(40))
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_ne!(forged_refs.trim_end(), refs.trim_end());
    let blob = git_with_input(
        home,
        repo,
        &["hash-object", "-w", "--stdin"],
        forged_refs.as_bytes(),
    );
    let tree = git_with_input(
        home,
        repo,
        &["mktree"],
        format!("100644 blob {blob}\trefs\n100644 blob {sig}\tsignature\n").as_bytes(),
    );
    let commit = g(&["commit-tree", &tree, "-p", &tip, "-m", "Update signed refs"]);
    g(&["update-ref", &sigref, &commit]);
}

#[test]
fn forged_signed_refs_are_rejected_and_that_peer_is_not_served() {
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into()],
        ..SeedOptions::default()
    });
    let f = fixtures();
    let rid = f.rid("small-fixture");
    let alice = f.json["alice"]["nid"].as_str().unwrap().to_owned();
    let peer_url = seed.url(&format!(
        "{rid}.git/{alice}/info/refs?service=git-upload-pack"
    ));
    assert_eq!(http_get(&peer_url, &[]).unwrap().0, 200);
    let tmp = tempfile::tempdir().unwrap();
    let repo = seed.repo_path(&rid);
    forge_sigrefs(tmp.path(), &repo, &alice);
    let report = seed.rescan();
    assert_eq!(report["updated"], 1, "{report}");
    let v = repo_json(&seed, &rid);
    let s = v["sigrefs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["nid"] == alice.as_str())
        .unwrap();
    assert!(
        s["error"]
            .as_str()
            .unwrap()
            .contains("signature does not verify"),
        "{s}"
    );
    assert_eq!(http_get(&peer_url, &[]).unwrap().0, 404);
    // The log says which peer and why.
    assert!(seed.logs().contains("signed refs do not verify"));
}
