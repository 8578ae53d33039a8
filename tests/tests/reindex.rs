//! Scale: a fetch of one repository among thousands costs that repository only — it is
//! re-indexed from what changed (the namespace whose signed refs moved, the refs that moved),
//! and the inventory and visibility change by that repository, not by a pass over every record.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use seedd_tests::{
    bin, run, stdout, succeeded, wait_for, RadNode, RadNodeOptions, Seed, SeedOptions,
};

const HELD: usize = 2_000;

#[test]
fn a_fetch_among_thousands_of_repositories_touches_only_that_repository() {
    let data = tempfile::tempdir().unwrap();
    let storage = data.path().join("storage");
    // Thousands of valid Radicle repositories (signed identity documents and refs).
    run(Command::new(bin("gen-repos"))
        .args(["--count", &HELD.to_string(), "--out"])
        .arg(&storage));
    let seed = Seed::start(SeedOptions {
        data_dir: Some(data.path().to_owned()),
        ..SeedOptions::allowing()
    });
    let status = seed.api("/api/v1/status");
    assert_eq!(
        seed.metric("seedd_repos_indexed", &["visibility=\"public\""]),
        HELD as f64,
        "{status}"
    );
    let inventory =
        |seed: &Seed| seed.metric("seedd_identity_inventory_repos", &["identity=\"default\""]);
    assert_eq!(inventory(&seed), HELD as f64);

    // dave seeds only what he creates (he must not fetch the thousands back from seedd).
    let dave = RadNode::start_with(
        "dave",
        &[seed.p2p_peer()],
        RadNodeOptions {
            seeding_policy: serde_json::json!({ "default": "block" }),
            ..RadNodeOptions::default()
        },
    );
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    succeeded(
        dave.git_in(&proj, &["init", "-q", "-b", "main"]),
        "git init",
    );
    std::fs::write(proj.join("README"), "hello\n").unwrap();
    succeeded(dave.git_in(&proj, &["add", "README"]), "git add");
    succeeded(
        dave.git_in(&proj, &["commit", "-q", "-m", "first"]),
        "git commit",
    );
    wait_for("dave connected to seedd", Duration::from_secs(30), || {
        seed.api("/api/v1/peers")["peers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["nid"] == dave.nid.as_str() && p["state"] == "connected")
            .then_some(())
    });
    let init = succeeded(
        dave.rad_in(
            &proj,
            &[
                "init",
                "--name",
                "proj",
                "--description",
                "one among thousands",
                "--default-branch",
                "main",
                "--public",
                "--no-confirm",
            ],
        ),
        "rad init",
    );
    assert!(
        init.contains(&format!("synced to {}", seed.nid())),
        "{init}"
    );
    let rid = stdout(&dave.rad_in(&proj, &["."])).trim().to_owned();
    // The new repository: one re-index, its one namespace verified; it joins the inventory.
    let reindexed = |seed: &Seed| seed.metric("seedd_reindex_repos_total", &[]);
    let namespaces = |seed: &Seed, outcome: &str| {
        seed.metric(
            "seedd_reindex_namespaces_total",
            &[&format!("outcome=\"{outcome}\"")],
        )
    };
    let refs_written = |seed: &Seed| seed.metric("seedd_reindex_refs_written_total", &[]);
    wait_for(
        "the new repository indexed",
        Duration::from_secs(30),
        || (reindexed(&seed) >= 1.0).then_some(()),
    );
    wait_for(
        "the new repository in the inventory",
        Duration::from_secs(10),
        || (inventory(&seed) == (HELD + 1) as f64).then_some(()),
    );
    let before = (
        reindexed(&seed),
        namespaces(&seed, "verified"),
        namespaces(&seed, "reused"),
        refs_written(&seed),
    );
    assert_eq!(
        before.1, before.0,
        "one namespace verified per new repository"
    );

    // A push to it: exactly one more re-index, of that repository, verifying dave's namespace
    // only and writing only the refs that moved (not all of them, nor any other repository's).
    std::fs::write(proj.join("README"), "hello again\n").unwrap();
    succeeded(
        dave.git_in(&proj, &["commit", "-qam", "second"]),
        "git commit",
    );
    let push = succeeded(dave.git_in(&proj, &["push", "rad", "main"]), "git push rad");
    let second = stdout(&dave.git_in(&proj, &["rev-parse", "HEAD"]))
        .trim()
        .to_owned();
    wait_for("the push replicated", Duration::from_secs(60), || {
        let refs = seed.api(&format!("/api/v1/repos/{rid}"));
        (refs.to_string().contains(&second)).then_some(())
    });
    wait_for("the push re-indexed", Duration::from_secs(30), || {
        (reindexed(&seed) > before.0).then_some(())
    });
    // Let any straggling work land before reading the counters.
    std::thread::sleep(Duration::from_secs(2));
    let after = (
        reindexed(&seed),
        namespaces(&seed, "verified"),
        namespaces(&seed, "reused"),
        refs_written(&seed),
    );
    assert_eq!(after.0 - before.0, 1.0, "one repository re-indexed: {push}");
    assert_eq!(after.1 - before.1, 1.0, "dave's namespace verified once");
    assert_eq!(after.2, before.2, "no other namespace exists to reuse");
    let written = after.3 - before.3;
    assert!(
        (1.0..=4.0).contains(&written),
        "only the refs that moved (dave's branch, his signed refs, the canonical branch): {written}"
    );
    assert_eq!(inventory(&seed), (HELD + 1) as f64);
    assert_eq!(
        seed.metric("seedd_repos_indexed", &["visibility=\"public\""]),
        (HELD + 1) as f64
    );
}
