//! Repositories from the generator (`seedd_benches::generate`) are valid Radicle repositories:
//! seedd indexes all of them as valid and serves them over HTTP, and the official
//! radicle-node clones one from seedd over the Radicle protocol (verifying its identity and
//! signed refs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use seedd_benches::generate::{generate, Spec};
use seedd_tests::{git, run, stdout, wait_for, RadNode, Seed, SeedOptions};

#[test]
fn seedd_and_radicle_node_accept_generated_repositories() {
    let data = tempfile::tempdir().unwrap();
    let storage = data.path().join("storage");
    let report = generate(&storage, &Spec::new(20), &|_| {}).unwrap();
    assert_eq!(report.repos.len(), 20);

    let seed = Seed::start(SeedOptions {
        data_dir: Some(data.path().to_owned()),
        extra_config: "[policy]\ndefault = \"allow\"\nscope = \"all\"\n".into(),
        ..Default::default()
    });
    let listed = seed.api("/api/v1/repos");
    let listed = listed["repos"].as_array().unwrap();
    assert_eq!(listed.len(), 20, "{listed:?}");
    for g in &report.repos {
        let rid = g.rid.to_string();
        let record = listed
            .iter()
            .find(|r| r["rid"] == rid.as_str())
            .unwrap_or_else(|| panic!("{rid} not listed"));
        assert_eq!(record["name"], g.name.as_str());
        assert_eq!(record["head"], g.head.as_str());
        assert_eq!(record["identity_head"], g.identity.as_str());
        assert_eq!(
            record["namespaces"],
            serde_json::json!([g.delegate.to_string()]),
            "{rid}: the delegate's signed refs must verify"
        );
        let detail = seed.api(&format!("/api/v1/repos/{rid}"));
        let sigrefs = detail["sigrefs"].as_array().unwrap();
        assert_eq!(sigrefs.len(), 1, "{detail}");
        assert_eq!(sigrefs[0]["level"], "parent", "{detail}");
        assert!(sigrefs[0]["error"].is_null(), "{detail}");
    }
    let status = seed.api("/api/v1/status");
    assert_eq!(status["repos"]["total"], 20, "{status}");

    // Anonymous git clone over HTTP gets the canonical branch.
    let g = &report.repos[7];
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("clone");
    run(git(tmp.path())
        .args(["clone", "-q", &seed.url(&format!("{}.git", g.rid))])
        .arg(&dest));
    let head = stdout(&run(git(tmp.path())
        .arg("-C")
        .arg(&dest)
        .args(["rev-parse", "HEAD"])));
    assert_eq!(head, g.head);
    assert!(dest.join("README.md").is_file());

    // radicle-node clones it from seedd: its fetch verifies the identity COB and signed refs.
    let rid = g.rid.to_string();
    let node = RadNode::start("genclone", &[seed.p2p_peer()]);
    wait_for(
        "radicle-node sees seedd's inventory",
        Duration::from_secs(60),
        || {
            node.routing()
                .contains(&(rid.clone(), seed.nid()))
                .then_some(())
        },
    );
    let work = tempfile::tempdir().unwrap();
    let out = node.rad_in(work.path(), &["clone", &rid, "wc", "--timeout", "30s"]);
    assert!(
        out.status.success(),
        "rad clone: {}\n{}\nseedd log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        seed.logs()
    );
    let wc = work.path().join("wc");
    let head = node.git_in(&wc, &["rev-parse", "HEAD"]);
    assert_eq!(String::from_utf8_lossy(&head.stdout).trim(), g.head);
    let ids = node.rad_in(&wc, &["id", "list"]);
    let ids = String::from_utf8_lossy(&ids.stdout);
    assert!(ids.contains("accepted"), "{ids}");
}
