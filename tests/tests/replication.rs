//! Replication with real Radicle nodes: seedd fetches what users push, validates it, serves it
//! to other nodes and over HTTP, and acknowledges the push (`rad sync`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use seedd_tests::{git, run, stdout, wait_for, RadNode, Seed, SeedOptions};

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: Output, what: &str) -> String {
    let t = text(&out);
    assert!(out.status.success(), "{what} failed:\n{t}");
    t
}

/// The commit an HTTP clone of `rid` from the seed checks out, if the clone works.
fn http_head(seed: &Seed, rid: &str, tmp: &Path) -> Option<String> {
    let dir = tmp.join(format!("http-{}", rand_suffix()));
    let out = git(tmp)
        .args(["clone", "-q", &seed.url(&format!("/{rid}.git"))])
        .arg(&dir)
        .output()
        .unwrap();
    if !out.status.success() {
        return None;
    }
    let head = stdout(&run(git(tmp)
        .arg("-C")
        .arg(&dir)
        .args(["rev-parse", "HEAD"])));
    Some(head.trim().to_owned())
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A user runs `rad init` and `git push rad` with seedd as their only seed: seedd replicates
/// each push (validated), the user's node reports seedd synced, `git clone` over HTTP returns
/// the pushed branch, and a second user's node, connected only to seedd, clones the latest.
#[test]
fn push_to_real_node_is_replicated_acknowledged_and_served() {
    let seed = Seed::start(SeedOptions {
        extra_config: "[policy]\ndefault = \"allow\"\n".into(),
        p2p_config: "relay = \"always\"\n".into(),
        ..Default::default()
    });
    let seed_nid = seed.nid();
    let dave = RadNode::start("dave", &[seed.p2p_peer()]);
    wait_for("dave connected to seedd", Duration::from_secs(30), || {
        seed.api("/api/v1/peers")["peers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["nid"] == dave.nid.as_str() && p["state"] == "connected")
            .then_some(())
    });
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    ok(
        dave.git_in(&proj, &["init", "-q", "-b", "main"]),
        "git init",
    );
    std::fs::write(proj.join("README"), "hello\n").unwrap();
    ok(dave.git_in(&proj, &["add", "README"]), "git add");
    ok(
        dave.git_in(&proj, &["commit", "-q", "-m", "first"]),
        "git commit",
    );
    let init = ok(
        dave.rad_in(
            &proj,
            &[
                "init",
                "--name",
                "proj",
                "--description",
                "replication test",
                "--default-branch",
                "main",
                "--public",
                "--no-confirm",
            ],
        ),
        "rad init",
    );
    // The user's node saw seedd's refs announcement for its namespace: synced (§5.8).
    assert!(init.contains(&format!("synced to {seed_nid}")), "{init}");
    let rid = stdout(&dave.rad_in(&proj, &["."])).trim().to_owned();
    assert!(rid.starts_with("rad:z"), "{rid}");
    let first = stdout(&dave.git_in(&proj, &["rev-parse", "HEAD"]))
        .trim()
        .to_owned();
    let head = wait_for(
        "HTTP clone of the replicated repo",
        Duration::from_secs(30),
        || http_head(&seed, &rid, tmp.path()),
    );
    assert_eq!(head, first);

    // A new push reaches seedd and the HTTP clone; the push reports the seed synced.
    std::fs::write(proj.join("README"), "hello again\n").unwrap();
    ok(
        dave.git_in(&proj, &["commit", "-qam", "second"]),
        "git commit",
    );
    let push = ok(dave.git_in(&proj, &["push", "rad", "main"]), "git push rad");
    assert!(push.contains("Synced with 1 seed"), "{push}");
    let second = stdout(&dave.git_in(&proj, &["rev-parse", "HEAD"]))
        .trim()
        .to_owned();
    wait_for(
        "the push in the HTTP clone",
        Duration::from_secs(30),
        || (http_head(&seed, &rid, tmp.path()).as_deref() == Some(second.as_str())).then_some(()),
    );
    let sync = ok(
        dave.rad_in(&proj, &["sync", "--announce"]),
        "rad sync --announce",
    );
    assert!(
        sync.contains("in sync") || sync.contains("Synced"),
        "{sync}"
    );
    assert!(seed.metric("seedd_fetches_total", &["result=\"ok\""]) >= 2.0);
    assert!(seed.metric("seedd_fetch_refs_updated_total", &[]) >= 1.0);
    assert_eq!(seed.metric("seedd_fetches_active", &[]), 0.0);

    // Another user's node, connected only to seedd, clones it and sees the latest push.
    let erin = RadNode::start("erin", &[seed.p2p_peer()]);
    wait_for(
        "erin to see seedd as a seed of the repo",
        Duration::from_secs(30),
        || {
            erin.routing()
                .contains(&(rid.clone(), seed_nid.clone()))
                .then_some(())
        },
    );
    let work = tempfile::tempdir().unwrap();
    ok(
        erin.rad_in(work.path(), &["clone", &rid, "wc", "--timeout", "30s"]),
        "rad clone",
    );
    let erin_head = stdout(&erin.git_in(&work.path().join("wc"), &["rev-parse", "HEAD"]))
        .trim()
        .to_owned();
    assert_eq!(erin_head, second);
}
