//! Replication with real Radicle nodes: seedd fetches what users push, validates it, serves it
//! to other nodes and over HTTP, and acknowledges the push (`rad sync`).
//!
//! Long by design: one scenario per replication rule (issue 11's trust boundaries among them),
//! each with its own seed and real nodes, sharing the storage-tampering helpers below.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use seedd_tests::cob::{blob_signature, change_signature, signed_commit};
use seedd_tests::{
    git, git_at, output_text, run, stdout, succeeded, wait_for, Prober, Published, RadNode, Seed,
    SeedOptions,
};

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
        p2p_config: "relay = \"always\"\n".into(),
        ..SeedOptions::allowing()
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
    let init = succeeded(
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
    succeeded(
        dave.git_in(&proj, &["commit", "-qam", "second"]),
        "git commit",
    );
    let push = succeeded(dave.git_in(&proj, &["push", "rad", "main"]), "git push rad");
    assert!(push.contains("Synced with 1 seed"), "{push}");
    let second = stdout(&dave.git_in(&proj, &["rev-parse", "HEAD"]))
        .trim()
        .to_owned();
    wait_for(
        "the push in the HTTP clone",
        Duration::from_secs(30),
        || (http_head(&seed, &rid, tmp.path()).as_deref() == Some(second.as_str())).then_some(()),
    );
    let sync = succeeded(
        dave.rad_in(&proj, &["sync", "--announce"]),
        "rad sync --announce",
    );
    assert!(
        sync.contains("in sync") || sync.contains("Synced"),
        "{sync}"
    );
    assert!(seed.metric("seedd_fetches_total", &["result=\"ok\""]) >= 2.0);
    assert!(seed.metric("seedd_fetch_refs_updated_total", &[]) >= 1.0);
    // The node we fetched from is in the routing table as a seed of the repository.
    let routes = seed.api(&format!("/api/v1/routing?rid={rid}"));
    assert!(
        routes["routes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["nid"] == dave.nid.as_str()),
        "{routes}"
    );
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
    succeeded(
        erin.rad_in(work.path(), &["clone", &rid, "wc", "--timeout", "30s"]),
        "rad clone",
    );
    let erin_head = stdout(&erin.git_in(&work.path().join("wc"), &["rev-parse", "HEAD"]))
        .trim()
        .to_owned();
    assert_eq!(erin_head, second);
}

fn git_input(repo: &Path, args: &[&str], input: &str) -> String {
    seedd_tests::git_with_input(repo, repo, args, input.as_bytes())
        .trim()
        .to_owned()
}

/// Rewrites `nid`'s signed refs in `repo` (a peer's storage): `refs/heads/<branch>` now names
/// `oid` in a new refs blob carrying the old signature, committed on the old parents.
fn forge_sigrefs(repo: &Path, nid: &str, branch: &str, oid: &str) {
    let suffix = format!(" refs/heads/{branch}");
    rewrite_sigrefs(repo, nid, None, false, |l, _| {
        l.ends_with(&suffix).then(|| format!("{oid}{suffix}"))
    });
    git_at(
        repo,
        &[
            "update-ref",
            &format!("refs/namespaces/{nid}/refs/heads/{branch}"),
            oid,
        ],
    );
}

/// Rewrites `nid`'s signed refs in a peer's storage: each refs-blob line for which `edit`
/// (given the line and the current sigrefs tip) returns a replacement is replaced. The
/// signature is kept (`key: None`, a forgery) or made with `key`; the new commit sits on the
/// tip's parents (`on_tip: false`, a sibling) or on the tip. Returns the new commit.
fn rewrite_sigrefs(
    repo: &Path,
    nid: &str,
    key: Option<&seedd_proto::crypto::Keypair>,
    on_tip: bool,
    edit: impl Fn(&str, &str) -> Option<String>,
) -> String {
    let sigrefs = format!("refs/namespaces/{nid}/refs/rad/sigrefs");
    let tip = git_at(repo, &["rev-parse", &sigrefs]);
    let refs_blob = git_at(repo, &["cat-file", "-p", &format!("{tip}:refs")]);
    let rewritten: String = refs_blob
        .lines()
        .map(|l| format!("{}\n", edit(l, &tip).unwrap_or_else(|| l.to_owned())))
        .collect();
    assert_ne!(rewritten.trim(), refs_blob.trim(), "nothing rewritten");
    let refs_id = git_input(repo, &["hash-object", "-w", "--stdin"], &rewritten);
    let sig_id = match key {
        Some(key) => {
            let file = repo.join("seedd-test-signature");
            std::fs::write(&file, key.sign(rewritten.as_bytes())).unwrap();
            let id = git_at(repo, &["hash-object", "-w", file.to_str().unwrap()]);
            std::fs::remove_file(&file).unwrap();
            id
        }
        None => git_at(repo, &["rev-parse", &format!("{tip}:signature")]),
    };
    let tree = git_input(
        repo,
        &["mktree"],
        &format!("100644 blob {refs_id}\trefs\n100644 blob {sig_id}\tsignature\n"),
    );
    let mut args = vec![
        "commit-tree".to_owned(),
        tree,
        "-m".into(),
        "rewritten".into(),
    ];
    let parents = if on_tip {
        vec![tip.clone()]
    } else {
        git_at(repo, &["rev-list", "--parents", "-n", "1", &tip])
            .split_whitespace()
            .skip(1)
            .map(str::to_owned)
            .collect()
    };
    for p in parents {
        args.push("-p".into());
        args.push(p);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let commit = git_at(repo, &args);
    git_at(repo, &["update-ref", &sigrefs, &commit]);
    commit
}

/// A peer whose storage was tampered with: a forged signature on the only delegate's signed
/// refs (below threshold: the whole fetch is refused, nothing written); a forged signature on a
/// second delegate's signed refs (that namespace is pruned, the rest applies); an unsigned
/// branch (never fetched, never written: data refs come from signed refs only).
#[test]
fn tampered_peer_storage_is_rejected_and_nothing_unsigned_is_written() {
    let f = seedd_tests::fixtures();
    let small = f.rid("small-fixture");
    let heartwood = f.rid("heartwood-fixture");
    let alice_nid = "z6MkeYAdpK8EPmUhABhVB2k6Bd6kSGzrh3e6QoUjxM4U48jz";
    let bob_nid = "z6MkiCRcNkMLR1HFy2j6ih12FuEtDbWTLJJKzMRpoUj4yjgf";
    let seed = Seed::start(SeedOptions::allowing());
    // Tampered copies of the fixture homes, prepared before the nodes start: alice serves
    // heartwood only, bob serves small-fixture only (a copy of alice's).
    let homes = tempfile::Builder::new()
        .prefix("tamper")
        .tempdir_in("/tmp")
        .unwrap();
    let bob_home = tempfile::Builder::new()
        .prefix("tamper")
        .tempdir_in("/tmp")
        .unwrap();
    seedd_tests::copy_tree(
        &f.dir.join("homes").join("alice"),
        &homes.path().join("alice"),
    );
    seedd_tests::copy_tree(
        &f.dir.join("homes").join("bob"),
        &bob_home.path().join("bob"),
    );
    let storage = homes.path().join("alice").join("storage");
    let bob_storage = bob_home.path().join("bob").join("storage");
    let small_dir = small.trim_start_matches("rad:");
    let heartwood_dir = heartwood.trim_start_matches("rad:");
    seedd_tests::copy_tree(&storage.join(small_dir), &bob_storage.join(small_dir));
    std::fs::remove_dir_all(storage.join(small_dir)).unwrap();
    std::fs::remove_dir_all(bob_storage.join(heartwood_dir)).unwrap();
    // 1. small-fixture at bob's: alice's (the only delegate's) signed refs forged.
    let repo = bob_storage.join(small_dir);
    let other = git_at(
        &repo,
        &[
            "rev-parse",
            &format!("refs/namespaces/{alice_nid}/refs/rad/id"),
        ],
    );
    forge_sigrefs(&repo, alice_nid, "master", &other);
    // 2. heartwood at alice's: bob's signed refs forged; an unsigned branch of alice's.
    let repo = storage.join(heartwood_dir);
    let feature = git_at(
        &repo,
        &[
            "rev-parse",
            &format!("refs/namespaces/{alice_nid}/refs/heads/feature"),
        ],
    );
    forge_sigrefs(&repo, bob_nid, "main", &feature);
    git_at(
        &repo,
        &[
            "update-ref",
            &format!("refs/namespaces/{alice_nid}/refs/heads/evil"),
            &feature,
        ],
    );

    let alice = RadNode::start_home(homes, "alice", &[seed.p2p_peer()]);
    let bob = RadNode::start_home(bob_home, "bob", &[seed.p2p_peer()]);
    wait_for("heartwood replicated", Duration::from_secs(40), || {
        seed.storage()
            .join(heartwood.trim_start_matches("rad:"))
            .join("HEAD")
            .exists()
            .then_some(())
    });
    wait_for("both fetches finished", Duration::from_secs(40), || {
        (seed.metric("seedd_fetches_total", &[]) >= 2.0).then_some(())
    });
    // Later fetches (refs announcements) may still run: let them finish before listing refs.
    wait_for("no fetch running", Duration::from_secs(40), || {
        (seed.metric("seedd_fetches_active", &[]) == 0.0).then_some(())
    });
    let held = seed.repo_path(&heartwood);
    let refs = git_at(&held, &["for-each-ref", "--format=%(refname)"]);
    assert!(
        refs.contains(&format!("refs/namespaces/{alice_nid}/refs/rad/sigrefs")),
        "{refs}"
    );
    assert!(!refs.contains(bob_nid), "forged namespace written:\n{refs}");
    assert!(
        !refs.contains("refs/heads/evil"),
        "unsigned ref written:\n{refs}"
    );
    assert!(
        !refs.contains("seedd-fetch"),
        "quarantine refs left:\n{refs}"
    );
    assert!(
        !seed
            .storage()
            .join(small.trim_start_matches("rad:"))
            .exists(),
        "forged data written"
    );
    let logs = seed.logs();
    assert!(
        seed.metric(
            "seedd_fetch_validation_failures_total",
            &["reason=\"invalid_sigrefs\""]
        ) >= 2.0,
        "{logs}"
    );
    assert!(
        seed.metric(
            "seedd_fetch_validation_failures_total",
            &["reason=\"threshold\""]
        ) >= 1.0,
        "{logs}"
    );
    assert!(seed.metric("seedd_fetches_total", &["result=\"invalid\""]) >= 1.0);
    assert!(logs.contains("signature does not verify"), "{logs}");
    drop((alice, bob));
}

/// Deterministic incompressible bytes (xorshift), so the pack is as large as the data.
fn noise(len: usize, mut state: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// `kill -9` of seedd in the middle of a large fetch: after a restart storage and index are
/// consistent (no half-built repository, no quarantine refs, no leftovers) and the fetch is
/// retried and succeeds.
#[test]
fn kill_9_during_a_fetch_leaves_storage_consistent_and_the_fetch_is_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let port = seedd_tests::free_port();
    let opts = || SeedOptions {
        data_dir: Some(data.clone()),
        p2p_port: Some(port),
        ..SeedOptions::allowing()
    };
    let seed = Seed::start(opts());
    let frank = RadNode::start("frank", &[seed.p2p_peer()]);
    let proj = tmp.path().join("big");
    std::fs::create_dir_all(&proj).unwrap();
    succeeded(
        frank.git_in(&proj, &["init", "-q", "-b", "main"]),
        "git init",
    );
    for i in 0..4u64 {
        std::fs::write(
            proj.join(format!("blob{i}")),
            noise(10 << 20, 0x9e37_79b9 + i),
        )
        .unwrap();
    }
    succeeded(frank.git_in(&proj, &["add", "."]), "git add");
    succeeded(
        frank.git_in(&proj, &["commit", "-q", "-m", "big"]),
        "git commit",
    );
    // rad init announces the repository; seedd starts fetching ~40 MB.
    let init = {
        let home = frank.home.clone();
        let proj = proj.clone();
        let rad = seedd_tests::radicle_bin("rad");
        std::thread::spawn(move || {
            std::process::Command::new(rad)
                .args([
                    "init",
                    "--name",
                    "big",
                    "--description",
                    "big",
                    "--default-branch",
                    "main",
                    "--public",
                    "--no-confirm",
                ])
                .current_dir(&proj)
                .env("RAD_HOME", home)
                .env("RAD_PASSPHRASE", "")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env_remove("RAD_SOCKET")
                .output()
                .unwrap()
        })
    };
    wait_for("a fetch to be running", Duration::from_secs(60), || {
        (seed.metric("seedd_fetches_active", &[]) >= 1.0).then_some(())
    });
    let mut seed = seed;
    seed.child.kill().unwrap(); // SIGKILL
    seed.child.wait().unwrap();
    let _ = init.join();
    let rid = stdout(&frank.rad_in(&proj, &["."])).trim().to_owned();
    assert!(rid.starts_with("rad:z"), "{rid}");
    let repo_dir = data.join("storage").join(rid.trim_start_matches("rad:"));
    assert!(
        !repo_dir.exists(),
        "a half-fetched clone was left in storage"
    );
    drop(seed);

    // Restarted, it also dials frank (frank may not notice the dead session for a while).
    let seed = Seed::start(SeedOptions {
        p2p_config: format!("connect = [\"{}\"]\n", frank.peer()),
        ..opts()
    });
    let leftovers: Vec<_> = std::fs::read_dir(data.join("cache").join("fetch"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert!(!seed.logs().contains("panicked"));
    // frank's node reconnects (persistent peer) and re-announces: the fetch is retried.
    wait_for(
        "the fetch retried after restart",
        Duration::from_secs(180),
        || repo_dir.join("HEAD").exists().then_some(()),
    );
    let refs = stdout(&run(git(&repo_dir)
        .arg("-C")
        .arg(&repo_dir)
        .args(["for-each-ref", "--format=%(refname)"])));
    assert!(!refs.contains("seedd-fetch"), "{refs}");
    wait_for("the index lists it", Duration::from_secs(10), || {
        seed.api("/api/v1/repos")["repos"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["rid"] == rid.as_str())
            .then_some(())
    });
    let head = http_head(&seed, &rid, tmp.path()).expect("HTTP clone after restart");
    let expected = stdout(&frank.git_in(&proj, &["rev-parse", "HEAD"]))
        .trim()
        .to_owned();
    assert_eq!(head, expected);
}

/// Scope `followed`: delegates' namespaces are fetched, a non-delegate's only once followed.
#[test]
fn followed_scope_fetches_delegates_and_followed_nodes_only() {
    let f = seedd_tests::fixtures();
    let heartwood = f.rid("heartwood-fixture");
    let seed = Seed::start(SeedOptions {
        extra_config: "[policy]\ndefault = \"allow\"\nscope = \"followed\"\n".into(),
        ..Default::default()
    });
    let held = seed.repo_path(&heartwood);
    let refs = |repo: &Path| {
        stdout(&run(git(repo)
            .arg("-C")
            .arg(repo)
            .args(["for-each-ref", "--format=%(refname)"])))
    };
    let alice = RadNode::start("alice", &[seed.p2p_peer()]);
    wait_for(
        "heartwood fetched from alice",
        Duration::from_secs(30),
        || held.join("HEAD").exists().then_some(()),
    );
    // carol (not a delegate) clones from seedd and pushes a branch of her own.
    let carol = RadNode::start("carol", &[seed.p2p_peer()]);
    wait_for("carol sees seedd", Duration::from_secs(30), || {
        carol
            .routing()
            .contains(&(heartwood.clone(), seed.nid()))
            .then_some(())
    });
    let work = tempfile::tempdir().unwrap();
    succeeded(
        carol.rad_in(
            work.path(),
            &["clone", &heartwood, "wc", "--timeout", "30s"],
        ),
        "rad clone",
    );
    let wc = work.path().join("wc");
    // What seedd replicated from alice includes the collaborative objects.
    let issues = output_text(&carol.rad_in(&wc, &["issue", "list"]));
    assert!(issues.contains("Fixture issue"), "{issues}");
    let patches = output_text(&carol.rad_in(&wc, &["patch", "list", "--all"]));
    assert!(patches.contains("Fixture patch"), "{patches}");
    succeeded(
        carol.git_in(&wc, &["checkout", "-q", "-b", "carol-idea"]),
        "git checkout",
    );
    std::fs::write(wc.join("IDEA"), "carol\n").unwrap();
    succeeded(carol.git_in(&wc, &["add", "IDEA"]), "git add");
    succeeded(
        carol.git_in(&wc, &["commit", "-q", "-m", "idea"]),
        "git commit",
    );
    succeeded(
        carol.git_in(&wc, &["push", "rad", "carol-idea"]),
        "git push rad",
    );
    // seedd hears carol's refs announcement and fetches, but her namespace is not wanted.
    wait_for("a fetch from carol", Duration::from_secs(30), || {
        (seed.metric("seedd_fetches_total", &["result=\"ok\""]) >= 2.0).then_some(())
    });
    let r = refs(&held);
    assert!(
        !r.contains(&carol.nid),
        "non-delegate namespace written under scope followed:\n{r}"
    );
    assert!(r.contains(&alice.nid), "{r}");
    // Followed → fetched.
    seed.seedctl(&["node", "follow", &carol.nid, "--alias", "carol"]);
    let out = seed.seedctl(&["-o", "json", "fetch", &heartwood, "--from", &carol.nid]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["updated"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == carol.nid.as_str()),
        "{v}"
    );
    let r = refs(&held);
    assert!(
        r.contains(&format!(
            "refs/namespaces/{}/refs/heads/carol-idea",
            carol.nid
        )),
        "{r}"
    );
}

/// A delegate's signed refs replayed (an older, validly signed state) are ignored; a diverged
/// history of a delegate's signed refs fails the whole fetch. Nothing is written either way.
#[test]
fn replayed_and_diverged_delegate_sigrefs_are_rejected() {
    let f = seedd_tests::fixtures();
    let heartwood = f.rid("heartwood-fixture");
    let alice_nid = "z6MkeYAdpK8EPmUhABhVB2k6Bd6kSGzrh3e6QoUjxM4U48jz";
    let seed = Seed::start(SeedOptions::allowing());
    let alice = RadNode::start("alice", &[seed.p2p_peer()]);
    let held = seed.repo_path(&heartwood);
    wait_for("heartwood fetched", Duration::from_secs(30), || {
        held.join("HEAD").exists().then_some(())
    });
    let sigrefs = format!("refs/namespaces/{alice_nid}/refs/rad/sigrefs");
    let held_tip = git_at(&held, &["rev-parse", &sigrefs]);
    let theirs = alice.repo_path(&heartwood);
    let tip = git_at(&theirs, &["rev-parse", &sigrefs]);
    assert_eq!(tip, held_tip);
    let parent = git_at(&theirs, &["rev-parse", &format!("{tip}^")]);

    // Replay: alice's storage goes back to the previous (validly signed) sigrefs.
    git_at(&theirs, &["update-ref", &sigrefs, &parent]);
    let out = seed.seedctl(&["-o", "json", "fetch", &heartwood, "--from", &alice.nid]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["updated"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(
        git_at(&held, &["rev-parse", &sigrefs]),
        held_tip,
        "replayed sigrefs applied"
    );

    // Diverged: a sibling of the tip (same signed refs, another commit on the old parent).
    let tree = git_at(&theirs, &["rev-parse", &format!("{tip}^{{tree}}")]);
    let sibling = git_at(
        &theirs,
        &["commit-tree", &tree, "-p", &parent, "-m", "diverged"],
    );
    git_at(&theirs, &["update-ref", &sigrefs, &sibling]);
    let out = seedd_tests::run_unchecked(&seed, &["fetch", &heartwood, "--from", &alice.nid]);
    assert!(!out.status.success(), "diverged delegate accepted");
    assert!(
        output_text(&out).contains("diverged"),
        "{}",
        output_text(&out)
    );
    assert_eq!(
        git_at(&held, &["rev-parse", &sigrefs]),
        held_tip,
        "diverged sigrefs applied"
    );
    assert!(
        seed.metric(
            "seedd_fetch_validation_failures_total",
            &["reason=\"delegate_diverged\""]
        ) >= 1.0
    );
    let r = stdout(&run(git(&held)
        .arg("-C")
        .arg(&held)
        .args(["for-each-ref", "--format=%(refname)"])));
    assert!(!r.contains("seedd-fetch"), "{r}");
}

/// A fetch receiving more than `p2p.max_fetch_bytes` is stopped; nothing is written.
#[test]
fn fetch_over_the_size_cap_is_stopped_and_nothing_written() {
    let f = seedd_tests::fixtures();
    let heartwood = f.rid("heartwood-fixture");
    let seed = Seed::start(SeedOptions {
        p2p_config: "max_fetch_bytes = 2000\n".into(),
        ..SeedOptions::allowing()
    });
    let _alice = RadNode::start("alice", &[seed.p2p_peer()]);
    wait_for("fetches refused for size", Duration::from_secs(30), || {
        (seed.metric("seedd_fetches_total", &["result=\"too_large\""]) >= 1.0).then_some(())
    });
    assert_eq!(seed.metric("seedd_fetches_total", &["result=\"ok\""]), 0.0);
    assert!(!seed
        .storage()
        .join(heartwood.trim_start_matches("rad:"))
        .exists());
    assert!(
        seed.logs().contains("received more than 2000 bytes"),
        "{}",
        seed.logs()
    );
}

/// Concurrent `POST /api/v1/fetch` of one repository go through the per-repository queue:
/// they share the queued fetch or one follow-up, never run side by side, and each caller gets
/// a result.
#[test]
fn concurrent_admin_fetches_of_one_repository_are_coalesced() {
    let f = seedd_tests::fixtures();
    let heartwood = f.rid("heartwood-fixture");
    // Default policy block: only the admin requests fetch.
    let seed = Seed::start(SeedOptions::default());
    let alice = RadNode::start("alice", &[seed.p2p_peer()]);
    wait_for("alice connected", Duration::from_secs(30), || {
        seed.api("/api/v1/peers")["peers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["nid"] == alice.nid.as_str() && p["state"] == "connected")
            .then_some(())
    });
    let body = serde_json::json!({ "rid": heartwood, "from": alice.nid });
    let answers: Vec<(u16, serde_json::Value)> = std::thread::scope(|s| {
        let calls: Vec<_> = (0..4)
            .map(|_| s.spawn(|| seed.admin("POST", "/api/v1/fetch", Some(body.clone()))))
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    for (status, v) in &answers {
        assert_eq!(*status, 200, "{v}");
    }
    assert!(
        answers.iter().any(|(_, v)| v["cloned"] == true),
        "{answers:?}"
    );
    // One fetch, plus at most one follow-up for the requests that came while it ran.
    let fetches = seed.metric("seedd_fetches_total", &[]);
    assert!(
        (1.0..=2.0).contains(&fetches),
        "{fetches} fetches for 4 concurrent requests"
    );
    assert!(seed
        .storage()
        .join(heartwood.trim_start_matches("rad:"))
        .join("HEAD")
        .exists());
}

/// `xyz.radicle.crefs` rules make delegate-agreed tags canonical on seedd (a top-level
/// `refs/tags/*` an HTTP clone sees), and the identity update itself replicates.
#[test]
fn crefs_rules_publish_canonical_tags() {
    let seed = Seed::start(SeedOptions::allowing());
    let gina = RadNode::start("gina", &[seed.p2p_peer()]);
    let Published {
        dir: tmp,
        proj,
        rid,
        held,
        ..
    } = gina.publish_to(&seed, "tags");
    succeeded(
        gina.rad_in(
            &proj,
            &[
                "id",
                "update",
                "--title",
                "crefs",
                "--no-confirm",
                "--payload",
                "xyz.radicle.crefs",
                "rules",
                r#"{"refs/tags/*": {"allow": "delegates", "threshold": 1}}"#,
            ],
        ),
        "rad id update",
    );
    succeeded(gina.git_in(&proj, &["tag", "v1.0"]), "git tag");
    let tagged = stdout(&gina.git_in(&proj, &["rev-parse", "v1.0"]))
        .trim()
        .to_owned();
    succeeded(
        gina.git_in(&proj, &["push", "rad", "--tags"]),
        "git push --tags",
    );
    wait_for("canonical tag on seedd", Duration::from_secs(30), || {
        let out = git(&held)
            .arg("-C")
            .arg(&held)
            .args(["rev-parse", "--verify", "-q", "refs/tags/v1.0"])
            .output()
            .unwrap();
        (out.status.success() && stdout(&out).trim() == tagged).then_some(())
    });
    let clone = tmp.path().join("clone");
    run(git(tmp.path())
        .args(["clone", "-q", &seed.url(&format!("/{rid}.git"))])
        .arg(&clone));
    let tags = stdout(&run(git(&clone).arg("-C").arg(&clone).args(["tag", "-l"])));
    assert!(tags.contains("v1.0"), "{tags}");
}

/// Two delegates, threshold 2: seedd's canonical branch moves only when both agree.
#[test]
fn threshold_two_canonical_branch_moves_when_both_delegates_agree() {
    let seed = Seed::start(SeedOptions::allowing());
    let hank = RadNode::start("hank", &[seed.p2p_peer()]);
    let ines = RadNode::start("ines", &[seed.p2p_peer()]);
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    succeeded(
        hank.git_in(&proj, &["init", "-q", "-b", "main"]),
        "git init",
    );
    succeeded(
        hank.git_in(&proj, &["commit", "-q", "--allow-empty", "-m", "c1"]),
        "git commit",
    );
    let c1 = stdout(&hank.git_in(&proj, &["rev-parse", "HEAD"]))
        .trim()
        .to_owned();
    succeeded(
        hank.rad_in(
            &proj,
            &[
                "init",
                "--name",
                "t2",
                "--description",
                "t",
                "--default-branch",
                "main",
                "--public",
                "--no-confirm",
            ],
        ),
        "rad init",
    );
    let rid = stdout(&hank.rad_in(&proj, &["."])).trim().to_owned();
    let held = seed.repo_path(&rid);
    let canonical = || {
        let out = git(&held)
            .arg("-C")
            .arg(&held)
            .args(["rev-parse", "-q", "--verify", "refs/heads/main"])
            .output()
            .unwrap();
        stdout(&out).trim().to_owned()
    };
    wait_for("replicated", Duration::from_secs(30), || {
        held.join("HEAD").exists().then_some(())
    });
    // ines clones (her fork of main is c1), then becomes the second delegate, threshold 2.
    wait_for("ines sees seedd", Duration::from_secs(30), || {
        ines.routing().iter().any(|(r, _)| *r == rid).then_some(())
    });
    let work = tempfile::tempdir().unwrap();
    succeeded(
        ines.rad_in(work.path(), &["clone", &rid, "wc", "--timeout", "30s"]),
        "rad clone (ines)",
    );
    let ines_wc = work.path().join("wc");
    let ines_did = format!("did:key:{}", ines.nid);
    // ines publishes her fork (main at c1); seedd gets it; hank follows her and fetches it
    // (a delegate must be present locally for the identity update).
    succeeded(
        ines.git_in(&ines_wc, &["push", "rad", "main"]),
        "git push (ines fork)",
    );
    wait_for("ines's fork on seedd", Duration::from_secs(30), || {
        let r = format!("refs/namespaces/{}/refs/rad/sigrefs", ines.nid);
        let out = git(&held)
            .arg("-C")
            .arg(&held)
            .args(["rev-parse", "-q", "--verify", &r])
            .output()
            .unwrap();
        out.status.success().then_some(())
    });
    succeeded(hank.rad_in(&proj, &["follow", &ines_did]), "rad follow");
    succeeded(
        hank.rad_in(&proj, &["sync", "--fetch"]),
        "rad sync --fetch (hank)",
    );
    succeeded(
        hank.rad_in(
            &proj,
            &[
                "id",
                "update",
                "--title",
                "two",
                "--delegate",
                &ines_did,
                "--threshold",
                "2",
                "--no-confirm",
            ],
        ),
        "rad id update",
    );
    succeeded(hank.rad_in(&proj, &["sync", "--announce"]), "rad sync");
    // hank alone moves to c2: the canonical branch stays at c1 (both contain it).
    succeeded(
        hank.git_in(&proj, &["commit", "-q", "--allow-empty", "-m", "c2"]),
        "git commit",
    );
    let c2 = stdout(&hank.git_in(&proj, &["rev-parse", "HEAD"]))
        .trim()
        .to_owned();
    succeeded(
        hank.git_in(&proj, &["push", "rad", "main"]),
        "git push (hank)",
    );
    wait_for("hank's c2 on seedd", Duration::from_secs(30), || {
        let r = format!("refs/namespaces/{}/refs/heads/main", hank.nid);
        let out = git(&held)
            .arg("-C")
            .arg(&held)
            .args(["rev-parse", "-q", "--verify", &r])
            .output()
            .unwrap();
        (stdout(&out).trim() == c2).then_some(())
    });
    assert_eq!(canonical(), c1, "canonical moved with one of two delegates");
    // ines catches up and pushes c2: both agree, the canonical branch moves.
    succeeded(
        ines.rad_in(&ines_wc, &["sync", "--fetch"]),
        "rad sync --fetch (ines)",
    );
    let remotes = stdout(&ines.git_in(&ines_wc, &["remote"]));
    let hank_remote = remotes
        .lines()
        .find(|r| r.contains(&hank.nid) || r.starts_with("hank"))
        .unwrap_or_else(|| panic!("no remote for hank in {remotes}"))
        .to_owned();
    succeeded(
        ines.git_in(&ines_wc, &["fetch", "-q", &hank_remote]),
        "git fetch hank",
    );
    succeeded(
        ines.git_in(
            &ines_wc,
            &["merge", "-q", "--ff-only", &format!("{hank_remote}/main")],
        ),
        "git merge",
    );
    succeeded(
        ines.git_in(&ines_wc, &["push", "rad", "main"]),
        "git push (ines)",
    );
    wait_for("canonical branch at c2", Duration::from_secs(30), || {
        (canonical() == c2).then_some(())
    });
}

/// A delegate's signed refs that are validly signed but name a wrong `refs/rad/root` (another
/// repository's identity) are pruned; the other delegate's namespace applies.
#[test]
fn validly_signed_refs_with_a_wrong_rad_root_are_pruned() {
    use seedd_proto::crypto::Keypair;
    let f = seedd_tests::fixtures();
    let heartwood = f.rid("heartwood-fixture");
    let alice_nid = "z6MkeYAdpK8EPmUhABhVB2k6Bd6kSGzrh3e6QoUjxM4U48jz";
    let bob_nid = "z6MkiCRcNkMLR1HFy2j6ih12FuEtDbWTLJJKzMRpoUj4yjgf";
    let seed = Seed::start(SeedOptions::allowing());
    let home = tempfile::Builder::new()
        .prefix("root")
        .tempdir_in("/tmp")
        .unwrap();
    seedd_tests::copy_tree(
        &f.dir.join("homes").join("alice"),
        &home.path().join("alice"),
    );
    let repo = home
        .path()
        .join("alice")
        .join("storage")
        .join(heartwood.trim_start_matches("rad:"));
    // Re-sign bob's refs blob with bob's real key, rad/root pointing elsewhere.
    let bob_key = Keypair::load(
        &f.dir.join("homes").join("bob").join("keys").join("radicle"),
        None,
    )
    .unwrap();
    let elsewhere = git_at(
        &repo,
        &[
            "rev-parse",
            &format!("refs/namespaces/{alice_nid}/refs/heads/feature"),
        ],
    );
    rewrite_sigrefs(&repo, bob_nid, Some(&bob_key), true, |l, tip| {
        if l.ends_with(" refs/rad/root") {
            Some(format!("{elsewhere} refs/rad/root"))
        } else if l.ends_with(" refs/rad/sigrefs-parent") {
            // A consistent parent, so only the root is wrong.
            Some(format!("{tip} refs/rad/sigrefs-parent"))
        } else {
            None
        }
    });
    git_at(
        &repo,
        &[
            "update-ref",
            &format!("refs/namespaces/{bob_nid}/refs/rad/root"),
            &elsewhere,
        ],
    );

    let alice = RadNode::start_home(home, "alice", &[seed.p2p_peer()]);
    let held = seed.repo_path(&heartwood);
    wait_for("heartwood replicated", Duration::from_secs(40), || {
        held.join("HEAD").exists().then_some(())
    });
    wait_for("no fetch running", Duration::from_secs(40), || {
        (seed.metric("seedd_fetches_active", &[]) == 0.0).then_some(())
    });
    let refs = git_at(&held, &["for-each-ref", "--format=%(refname)"]);
    assert!(
        !refs.contains(bob_nid),
        "namespace with a wrong rad/root written:\n{refs}"
    );
    assert!(refs.contains(alice_nid), "{refs}");
    assert!(
        seed.metric(
            "seedd_fetch_validation_failures_total",
            &["reason=\"invalid_sigrefs\""]
        ) >= 1.0
    );
    let logs = seed.logs();
    assert!(
        logs.contains("does not embed the identity of this repository"),
        "{logs}"
    );
    drop(alice);
}

/// Objects of `repo`: loose + packed count, and the bytes of `objects/` on disk.
fn object_usage(repo: &Path) -> (u64, u64) {
    let v = git_at(repo, &["count-objects", "-v"]);
    let field = |k: &str| -> u64 {
        v.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}: ")))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    };
    fn du(p: &Path) -> u64 {
        std::fs::read_dir(p)
            .map(|d| {
                d.flatten()
                    .map(|e| match e.metadata() {
                        Ok(m) if m.is_dir() => du(&e.path()),
                        Ok(m) => m.len(),
                        Err(_) => 0,
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    (field("count") + field("in-pack"), du(&repo.join("objects")))
}

/// A commit on `parent` in `repo` adding one 2 MiB incompressible blob (seeded by `seed`):
/// `(commit, tree, blob)`.
fn big_commit(repo: &Path, tmp: &Path, parent: &str, seed: u64) -> (String, String, String) {
    let file = tmp.join("big");
    std::fs::write(&file, noise(2 << 20, seed)).unwrap();
    let blob = git_at(repo, &["hash-object", "-w", file.to_str().unwrap()]);
    let tree = git_input(repo, &["mktree"], &format!("100644 blob {blob}\tbig\n"));
    let commit = git_at(repo, &["commit-tree", &tree, "-p", parent, "-m", "big"]);
    (commit, tree, blob)
}

/// Whether the seed serves `oid` by id over HTTP (`allowAnySHA1InWant`).
fn http_fetchable(seed: &Seed, rid: &str, oid: &str, tmp: &Path) -> bool {
    let dir = tmp.join(format!("byid-{}", rand_suffix()));
    run(git(tmp).args(["init", "-q", "--bare"]).arg(&dir));
    git(tmp)
        .arg("-C")
        .arg(&dir)
        .args(["fetch", "-q", &seed.url(&format!("/{rid}.git")), oid])
        .output()
        .unwrap()
        .status
        .success()
}

/// Nothing a rejected fetch brought stays: a delegate's validly signed but diverged signed refs
/// naming a new commit (new commit, tree and blob, fetched before validation fails) leave the
/// repository's object count and disk usage unchanged and the new objects are neither in
/// storage nor fetchable by id over HTTP. The same update made properly (on the tip) applies and
/// its objects are migrated.
#[test]
fn a_rejected_fetch_leaves_no_objects_in_storage() {
    use seedd_proto::crypto::Keypair;
    let f = seedd_tests::fixtures();
    let heartwood = f.rid("heartwood-fixture");
    let alice_nid = "z6MkeYAdpK8EPmUhABhVB2k6Bd6kSGzrh3e6QoUjxM4U48jz";
    let seed = Seed::start(SeedOptions {
        p2p_config: "max_fetch_bytes = 1000000\n".into(),
        ..SeedOptions::allowing()
    });
    let alice = RadNode::start("alice", &[seed.p2p_peer()]);
    let alice_key = Keypair::load(&alice.home.join("keys").join("radicle"), None).unwrap();
    let held = seed.repo_path(&heartwood);
    wait_for("heartwood fetched", Duration::from_secs(30), || {
        held.join("HEAD").exists().then_some(())
    });
    wait_for("no fetch running", Duration::from_secs(40), || {
        (seed.metric("seedd_fetches_active", &[]) == 0.0).then_some(())
    });
    let tmp = tempfile::tempdir().unwrap();
    let theirs = alice.repo_path(&heartwood);
    let sigrefs = format!("refs/namespaces/{alice_nid}/refs/rad/sigrefs");
    let main = format!("refs/namespaces/{alice_nid}/refs/heads/main");
    let tip = git_at(&theirs, &["rev-parse", &sigrefs]);
    let main_tip = git_at(&theirs, &["rev-parse", &main]);
    // A new commit with a new blob in alice's storage, named by her (validly signed) refs.
    let blob = git_input(
        &theirs,
        &["hash-object", "-w", "--stdin"],
        &format!("never accepted {}\n", rand_suffix()),
    );
    let tree = git_input(&theirs, &["mktree"], &format!("100644 blob {blob}\tnew\n"));
    let commit = git_at(
        &theirs,
        &["commit-tree", &tree, "-p", &main_tip, "-m", "new"],
    );
    git_at(&theirs, &["update-ref", &main, &commit]);
    let suffix = " refs/heads/main";
    let edit = |l: &str, _: &str| l.ends_with(suffix).then(|| format!("{commit}{suffix}"));
    let before = object_usage(&held);

    // Diverged (a sibling of the tip): the data is fetched, then the whole fetch is refused.
    rewrite_sigrefs(&theirs, alice_nid, Some(&alice_key), false, edit);
    let out = seedd_tests::run_unchecked(&seed, &["fetch", &heartwood, "--from", &alice.nid]);
    assert!(!out.status.success(), "diverged delegate accepted");
    assert!(
        output_text(&out).contains("diverged"),
        "{}",
        output_text(&out)
    );
    assert_eq!(
        object_usage(&held),
        before,
        "a rejected fetch changed storage"
    );
    for oid in [&commit, &tree, &blob] {
        let present = git(&held)
            .arg("-C")
            .arg(&held)
            .args(["cat-file", "-e", oid])
            .output()
            .unwrap()
            .status
            .success();
        assert!(!present, "rejected object {oid} is in storage");
    }
    assert!(
        !http_fetchable(&seed, &heartwood, &commit, tmp.path()),
        "a rejected object is served by id"
    );
    let leftovers: Vec<_> = std::fs::read_dir(seed.data_dir().join("cache").join("fetch"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // A valid update too large for `max_fetch_bytes`: stopped mid-transfer, nothing stays
    // (no partial pack either).
    let (big, _, _) = big_commit(&theirs, tmp.path(), &main_tip, 0x5eed);
    git_at(&theirs, &["update-ref", &sigrefs, &tip]);
    git_at(&theirs, &["update-ref", &main, &big]);
    rewrite_sigrefs(&theirs, alice_nid, Some(&alice_key), true, |l, tip| {
        if l.ends_with(" refs/rad/sigrefs-parent") {
            Some(format!("{tip} refs/rad/sigrefs-parent"))
        } else {
            l.ends_with(suffix).then(|| format!("{big}{suffix}"))
        }
    });
    let out = seedd_tests::run_unchecked(&seed, &["fetch", &heartwood, "--from", &alice.nid]);
    assert!(!out.status.success(), "an oversized fetch was accepted");
    assert!(
        output_text(&out).contains("more than"),
        "{}",
        output_text(&out)
    );
    assert_eq!(
        object_usage(&held),
        before,
        "a stopped fetch changed storage"
    );
    assert!(!http_fetchable(&seed, &heartwood, &big, tmp.path()));

    // The same change on the tip is accepted: its objects are migrated and served.
    git_at(&theirs, &["update-ref", &main, &commit]);
    git_at(&theirs, &["update-ref", &sigrefs, &tip]);
    rewrite_sigrefs(&theirs, alice_nid, Some(&alice_key), true, |l, tip| {
        if l.ends_with(" refs/rad/sigrefs-parent") {
            Some(format!("{tip} refs/rad/sigrefs-parent"))
        } else {
            edit(l, tip)
        }
    });
    let out = seed.seedctl(&["-o", "json", "fetch", &heartwood, "--from", &alice.nid]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_eq!(
        git_at(&held, &["rev-parse", &main]),
        commit,
        "the valid update was not applied: {}",
        output_text(&out)
    );
    assert_eq!(git_at(&held, &["cat-file", "-t", &blob]), "blob");
    let after = object_usage(&held);
    // Exactly what the accepted refs reach: commit, tree, blob, and the signed refs' commit,
    // tree, refs blob and signature blob.
    assert_eq!(after.0, before.0 + 7, "{before:?} → {after:?}");
    assert!(http_fetchable(&seed, &heartwood, &commit, tmp.path()));
    let packs = std::fs::read_dir(held.join("objects").join("pack"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .count();
    assert!(packs >= 1);
}

/// The seed's canonical `refs/rad/id` and whether an HTTP clone of `rid` works.
fn identity_and_visible(seed: &Seed, held: &Path, rid: &str, tmp: &Path) -> (String, bool) {
    (
        git_at(held, &["rev-parse", "refs/rad/id"]),
        http_head(seed, rid, tmp).is_some(),
    )
}

/// The identity never moves backwards (protocol.md §6.4 stage 1). A real user makes a repository
/// private with `rad id update` (the seed allowed), revokes a reader, then adds a second
/// delegate. A peer whose `refs/rad/id` was rewound — to the single-delegate revision, to the
/// one that still allowed the revoked reader, then to the public one (what a stale peer offers
/// too) — leaves the seed on the newest revision: both delegates, the allow list as it is, the
/// repository private (no HTTP clone, not public in the index).
#[test]
fn a_stale_or_rewound_identity_never_rolls_the_seed_back() {
    use seedd_proto::crypto::Keypair;
    let seed = Seed::start(SeedOptions::allowing());
    let seed_did = format!("did:key:{}", seed.nid());
    let reader = format!("did:key:{}", Keypair::mock(411).nid());
    let gina = RadNode::start("gina", &[seed.p2p_peer()]);
    let Published {
        dir: tmp,
        proj,
        rid,
        held,
        theirs,
    } = gina.publish_to(&seed, "rollback");
    let public = git_at(&theirs, &["rev-parse", "refs/rad/id"]);
    wait_for(
        "the public revision on the seed",
        Duration::from_secs(30),
        || (git_at(&held, &["rev-parse", "refs/rad/id"]) == public).then_some(()),
    );
    assert!(
        http_head(&seed, &rid, tmp.path()).is_some(),
        "public repo not served"
    );

    let update = |args: &[&str]| -> String {
        let mut all = vec!["id", "update", "--no-confirm"];
        all.extend_from_slice(args);
        succeeded(gina.rad_in(&proj, &all), "rad id update");
        // Announce it (what `git push` would do); the seed fetches from the announcement.
        let _ = gina.rad_in(&proj, &["sync", "--announce", "--timeout", "5s"]);
        let rev = git_at(&theirs, &["rev-parse", "refs/rad/id"]);
        let deadline = std::time::Instant::now() + Duration::from_secs(40);
        while git_at(&held, &["rev-parse", "refs/rad/id"]) != rev {
            assert!(
                std::time::Instant::now() < deadline,
                "the new revision {rev} did not reach the seed:\n{}",
                seed.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        rev
    };
    let private = update(&[
        "--title",
        "private",
        "--visibility",
        "private",
        "--allow",
        &seed_did,
        "--allow",
        &reader,
    ]);
    let revoked = update(&["--title", "revoke", "--disallow", &reader]);
    assert_ne!(private, revoked);
    // A second delegate and threshold 2 in one revision (accepted by gina alone: revisions are
    // adopted by a majority of the *previous* delegates): a rollback would drop both.
    let other_key = Keypair::mock(412);
    let other_nid = other_key.nid().to_string();
    let other = format!("did:key:{other_nid}");
    // `rad` wants a new delegate's signed refs before it raises the threshold: give the other
    // key a namespace in gina's storage (gina's refs, signed refs re-signed by that key).
    let ns = format!("refs/namespaces/{}/", gina.nid);
    let refs = git_at(
        &theirs,
        &["for-each-ref", "--format=%(objectname) %(refname)", &ns],
    );
    for line in refs.lines() {
        let (oid, name) = line.split_once(' ').unwrap();
        let name = name.replacen(&gina.nid, &other_nid, 1);
        git_at(&theirs, &["update-ref", &name, oid]);
    }
    rewrite_sigrefs(&theirs, &other_nid, Some(&other_key), true, |l, tip| {
        l.ends_with(" refs/rad/sigrefs-parent")
            .then(|| format!("{tip} refs/rad/sigrefs-parent"))
    });
    let added = update(&["--title", "add", "--delegate", &other, "--threshold", "2"]);
    assert_ne!(added, revoked);
    assert_eq!(
        identity_and_visible(&seed, &held, &rid, tmp.path()),
        (added.clone(), false)
    );
    let delegates = |seed: &Seed| {
        seed.api(&format!("/api/v1/repos/{rid}"))["repo"]["delegates"]
            .as_array()
            .map(Vec::len)
    };
    assert_eq!(delegates(&seed), Some(2));
    let threshold = || {
        let doc = git_at(&held, &["show", "refs/rad/id:embeds/radicle.json"]);
        let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
        v["threshold"].as_u64()
    };
    assert_eq!(threshold(), Some(2));

    for (stale, what) in [
        (&revoked, "single-delegate"),
        (&private, "revoked reader"),
        (&public, "public"),
    ] {
        // The peer's canonical identity goes back; the seed fetches from it.
        git_at(&theirs, &["update-ref", "refs/rad/id", stale]);
        let out = seed.seedctl(&["-o", "json", "fetch", &rid, "--from", &gina.nid]);
        assert!(out.status.success(), "{}", output_text(&out));
        assert_eq!(
            identity_and_visible(&seed, &held, &rid, tmp.path()),
            (added.clone(), false),
            "rolled back to the {what} revision"
        );
        assert_eq!(delegates(&seed), Some(2), "a delegate was dropped");
        assert_eq!(threshold(), Some(2), "the threshold was lowered");
        let doc = git_at(&held, &["show", "refs/rad/id:embeds/radicle.json"]);
        assert!(
            !doc.contains(reader.trim_start_matches("did:key:")),
            "{doc}"
        );
        let repo = seed.api(&format!("/api/v1/repos/{rid}"));
        let visibility = &repo["repo"]["visibility"];
        assert_eq!(visibility["type"], "private", "{repo}");
        assert!(
            !visibility
                .to_string()
                .contains(reader.trim_start_matches("did:key:")),
            "{repo}"
        );
    }
    assert!(seed.logs().contains("keeping our identity revision"));
}

/// A loopback TCP proxy to `to`; while `throttle` is set, bytes from the connecting side to
/// `to` are forwarded at ~20 KB/s (the other direction is never slowed).
struct SlowLink {
    addr: std::net::SocketAddr,
    throttle: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

fn slow_link(to: std::net::SocketAddr) -> SlowLink {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let throttle = Arc::new(AtomicBool::new(false));
    let pump = |mut from: TcpStream, mut to: TcpStream, throttle: Option<Arc<AtomicBool>>| {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut rest = &buf[..n];
                while !rest.is_empty() {
                    let slow = throttle.as_ref().is_some_and(|t| t.load(Ordering::Relaxed));
                    let take = if slow {
                        rest.len().min(1024)
                    } else {
                        rest.len()
                    };
                    if to.write_all(&rest[..take]).is_err() {
                        return;
                    }
                    rest = &rest[take..];
                    if slow {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        });
    };
    let t = throttle.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(upstream) = TcpStream::connect(to) else {
                continue;
            };
            pump(
                client.try_clone().unwrap(),
                upstream.try_clone().unwrap(),
                Some(t.clone()),
            );
            pump(upstream, client, None);
        }
    });
    SlowLink { addr, throttle }
}

/// A fetch cut by the whole-fetch deadline (`p2p.fetch_deadline_secs`) while a large pack is
/// arriving leaves the repository's object count and disk usage unchanged, no work dir, and the
/// commit it was bringing is not fetchable by id; once the link is fast again the same fetch
/// succeeds and brings it (so the first one really was cut mid-transfer).
#[test]
fn a_fetch_cut_by_its_deadline_leaves_no_objects_in_storage() {
    use seedd_proto::crypto::Keypair;
    use std::sync::atomic::Ordering;
    let f = seedd_tests::fixtures();
    let heartwood = f.rid("heartwood-fixture");
    let alice_nid = "z6MkeYAdpK8EPmUhABhVB2k6Bd6kSGzrh3e6QoUjxM4U48jz";
    let seed = Seed::start(SeedOptions {
        p2p_config: "fetch_deadline_secs = 6\n".into(),
        ..SeedOptions::allowing()
    });
    // Alice reaches the seed only through the slow link.
    let link = slow_link(seed.p2p);
    let alice = RadNode::start("alice", &[format!("{}@{}", seed.nid(), link.addr)]);
    let alice_key = Keypair::load(&alice.home.join("keys").join("radicle"), None).unwrap();
    let held = seed.repo_path(&heartwood);
    wait_for("heartwood fetched", Duration::from_secs(30), || {
        held.join("HEAD").exists().then_some(())
    });
    wait_for("no fetch running", Duration::from_secs(40), || {
        (seed.metric("seedd_fetches_active", &[]) == 0.0).then_some(())
    });
    let tmp = tempfile::tempdir().unwrap();
    let theirs = alice.repo_path(&heartwood);
    let main = format!("refs/namespaces/{alice_nid}/refs/heads/main");
    let main_tip = git_at(&theirs, &["rev-parse", &main]);
    // A validly signed update whose pack is ~2 MiB of incompressible data.
    let (big, big_tree, big_blob) = big_commit(&theirs, tmp.path(), &main_tip, 0xdead11);
    git_at(&theirs, &["update-ref", &main, &big]);
    let suffix = " refs/heads/main";
    rewrite_sigrefs(&theirs, alice_nid, Some(&alice_key), true, |l, tip| {
        if l.ends_with(" refs/rad/sigrefs-parent") {
            Some(format!("{tip} refs/rad/sigrefs-parent"))
        } else {
            l.ends_with(suffix).then(|| format!("{big}{suffix}"))
        }
    });
    let before = object_usage(&held);

    link.throttle.store(true, Ordering::Relaxed);
    let fetch = || {
        seed.admin(
            "POST",
            "/api/v1/fetch",
            Some(serde_json::json!({ "rid": heartwood, "from": alice.nid })),
        )
    };
    let (status, v) = fetch();
    assert_eq!(status, 502, "{v}");
    assert_eq!(v["reason"], "deadline", "{v}");
    wait_for("the work dir removed", Duration::from_secs(20), || {
        let left: Vec<_> = std::fs::read_dir(seed.data_dir().join("cache").join("fetch"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        left.is_empty().then_some(())
    });
    assert_eq!(
        object_usage(&held),
        before,
        "a fetch cut by its deadline changed storage"
    );
    for oid in [&big, &big_tree, &big_blob] {
        let present = git(&held)
            .arg("-C")
            .arg(&held)
            .args(["cat-file", "-e", oid])
            .output()
            .unwrap()
            .status
            .success();
        assert!(!present, "object {oid} of the cut fetch is in storage");
    }
    assert!(!http_fetchable(&seed, &heartwood, &big, tmp.path()));

    // The same fetch over a fast link brings the commit.
    link.throttle.store(false, Ordering::Relaxed);
    wait_for(
        "the cut fetch succeeds on a fast link",
        Duration::from_secs(60),
        || {
            let (status, _) = fetch();
            (status == 200).then_some(())
        },
    );
    assert!(http_fetchable(&seed, &heartwood, &big, tmp.path()));
    assert!(
        seed.metric("seedd_fetches_total", &["result=\"deadline\""]) >= 1.0,
        "{}",
        seed.logs()
    );
}

/// An identity COB change made by hand in `repo`: `action` as action `0`, the document blob
/// `doc` embedded when given, signed by `key`, on `parent`, committed at `time`.
fn identity_change(
    repo: &Path,
    key: &seedd_proto::crypto::Keypair,
    parent: &str,
    action: &serde_json::Value,
    doc: Option<&str>,
    time: u64,
) -> String {
    let manifest = git_input(
        repo,
        &["hash-object", "-w", "--stdin"],
        r#"{"typeName":"xyz.radicle.id","version":1}"#,
    );
    let action = git_input(repo, &["hash-object", "-w", "--stdin"], &action.to_string());
    let mut listing = format!("100644 blob {manifest}\tmanifest\n100644 blob {action}\t0\n");
    if let Some(doc) = doc {
        let embeds = git_input(
            repo,
            &["mktree"],
            &format!("100644 blob {doc}\tradicle.json\n"),
        );
        listing.push_str(&format!("040000 tree {embeds}\tembeds\n"));
    }
    let tree = git_input(repo, &["mktree"], &listing);
    let pem = change_signature(key, &tree);
    let commit = signed_commit(&tree, &[parent.to_owned()], &pem, time, "Update identity");
    git_input(
        repo,
        &["hash-object", "-w", "-t", "commit", "--stdin"],
        &commit,
    )
}

/// Committer time of `commit` in `repo`.
fn commit_time(repo: &Path, commit: &str) -> u64 {
    git_at(repo, &["show", "-s", "--format=%ct", commit])
        .parse()
        .unwrap()
}

/// Issue 25 §5: a real user adds two delegates with `rad id update` (gina, o1, o2), then
/// proposes to rotate both out (`rad id update --rescind`), which o1 accepts: gina alone. The
/// retired o1 and o2 then forge a fork of the three-delegate revision, dated before the rotation
/// (the replay's timestamp order visits it first) and accepted by both: a majority of the
/// retired set. A peer offering it leaves the seed's `refs/rad/id` on the rotation.
#[test]
fn a_back_dated_fork_signed_by_retired_delegates_is_not_adopted() {
    use seedd_proto::crypto::Keypair;
    let seed = Seed::start(SeedOptions::allowing());
    let gina = RadNode::start("gina", &[seed.p2p_peer()]);
    let Published {
        dir: _tmp,
        proj,
        rid,
        held,
        theirs,
    } = gina.publish_to(&seed, "retired");
    let fetch = || {
        let out =
            seedd_tests::run_unchecked(&seed, &["-o", "json", "fetch", &rid, "--from", &gina.nid]);
        if !out.status.success() {
            let logs = gina.logs();
            let tail: Vec<&str> = logs.lines().rev().take(40).collect();
            panic!("{}\n{tail:#?}", output_text(&out));
        }
    };
    let (o1, o2) = (Keypair::mock(521), Keypair::mock(522));
    let did = |k: &Keypair| format!("did:key:{}", k.nid());
    succeeded(
        gina.rad_in(
            &proj,
            &[
                "id",
                "update",
                "--no-confirm",
                "--title",
                "three",
                "--delegate",
                &did(&o1),
                "--delegate",
                &did(&o2),
            ],
        ),
        "rad id update --delegate",
    );
    let r1 = git_at(&theirs, &["rev-parse", "refs/rad/id"]);
    fetch();
    assert_eq!(git_at(&held, &["rev-parse", "refs/rad/id"]), r1);

    // The rotation: gina proposes, o1 accepts (2 of 3).
    succeeded(
        gina.rad_in(
            &proj,
            &[
                "id",
                "update",
                "--no-confirm",
                "--title",
                "rotate",
                "--rescind",
                &did(&o1),
                "--rescind",
                &did(&o2),
            ],
        ),
        "rad id update --rescind",
    );
    // gina's identity COB ref (named by the identity's root): its head is the proposal.
    let cob = git_at(
        &theirs,
        &[
            "for-each-ref",
            "--format=%(refname)",
            &format!("refs/namespaces/{}/refs/cobs/xyz.radicle.id/", gina.nid),
        ],
    );
    let r2 = git_at(&theirs, &["rev-parse", &cob]);
    assert_ne!(r2, r1, "no rotation proposal");
    let r2_blob = git_at(
        &theirs,
        &["rev-parse", &format!("{r2}:embeds/radicle.json")],
    );
    let accept_r2 = identity_change(
        &theirs,
        &o1,
        &r2,
        &serde_json::json!({"type": "revision.accept", "revision": r2, "signature": blob_signature(&o1, &r2_blob)}),
        // radicle-node reads the document at `refs/rad/id`: accepts carry it too.
        Some(&r2_blob),
        commit_time(&theirs, &r2) + 1,
    );
    git_at(&theirs, &["update-ref", "refs/rad/id", &accept_r2]);
    fetch();
    assert_eq!(
        git_at(&held, &["rev-parse", "refs/rad/id"]),
        r2,
        "the rotation was not adopted:\n{}",
        seed.logs()
    );

    // The fork of R1 by the retired o1 and o2, dated before the rotation.
    let doc = git_at(&theirs, &["show", &format!("{r1}:embeds/radicle.json")]);
    let mut doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    doc["delegates"] = serde_json::json!([did(&o1), did(&o2)]);
    let forged = git_input(&theirs, &["hash-object", "-w", "--stdin"], &doc.to_string());
    let t1 = commit_time(&theirs, &r1);
    let fork = identity_change(
        &theirs,
        &o1,
        &r1,
        &serde_json::json!({"type": "revision", "title": "fork", "description": "", "blob": forged, "parent": r1, "signature": blob_signature(&o1, &forged)}),
        Some(&forged),
        t1 + 1,
    );
    let fork_head = identity_change(
        &theirs,
        &o2,
        &fork,
        &serde_json::json!({"type": "revision.accept", "revision": fork, "signature": blob_signature(&o2, &forged)}),
        Some(&forged),
        t1 + 2,
    );
    // Offered: the seed replays it merged with ours; the rules alone would adopt the fork.
    git_at(&theirs, &["update-ref", "refs/rad/id", &fork_head]);
    let out = seed.seedctl(&["-o", "json", "fetch", &rid, "--from", &gina.nid]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_eq!(
        git_at(&held, &["rev-parse", "refs/rad/id"]),
        r2,
        "the forged fork moved refs/rad/id:\n{}",
        seed.logs()
    );
    let delegates = seed.api(&format!("/api/v1/repos/{rid}"))["repo"]["delegates"]
        .as_array()
        .map(Vec::len);
    assert_eq!(delegates, Some(1));
    assert!(seed
        .logs()
        .contains("without the accepts of our current delegates"));
}

/// Issue 25 §2 over replication: a real `radicle-node` offers an identity history of 2,000
/// changes that all name one tree of 256 action blobs of 1 MiB (one blob; the tree embeds the
/// document, so the node serves it), signed with the real key of the `rad` profile that made
/// the repository. The fetch is refused well within its deadline (the fetch's identity
/// budget), the refusal is counted and remembered (the next fetch is refused at once), the
/// seed's `refs/rad/id` stays, its CPU is idle 5 s later, and another repository's `/tree`
/// answers 200 meanwhile.
#[test]
fn an_identity_history_reusing_one_tree_is_refused_within_the_fetch_deadline() {
    let f = seedd_tests::fixtures();
    let seed = Seed::start(SeedOptions {
        p2p_config: "fetch_deadline_secs = 60\n".into(),
        repos: vec!["small-fixture".into()],
        ..SeedOptions::allowing()
    });
    let gina = RadNode::start("gina", &[seed.p2p_peer()]);
    let Published {
        dir: _tmp,
        rid,
        held,
        theirs,
        ..
    } = gina.publish_to(&seed, "heavyid");
    let ours = wait_for("the identity on the seed", Duration::from_secs(30), || {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&held)
            .args(["rev-parse", "-q", "--verify", "refs/rad/id"])
            .output()
            .unwrap();
        out.status.success().then(|| stdout(&out).trim().to_owned())
    });
    let key =
        seedd_proto::crypto::Keypair::load(&gina.home.join("keys").join("radicle"), None).unwrap();
    let head = git_at(&theirs, &["rev-parse", "refs/rad/id"]);
    let doc = git_at(
        &theirs,
        &["rev-parse", &format!("{head}:embeds/radicle.json")],
    );

    let manifest = git_input(
        &theirs,
        &["hash-object", "-w", "--stdin"],
        r#"{"typeName":"xyz.radicle.id","version":1}"#,
    );
    let edit = format!(
        r#"{{"type":"RevisionEdit","revision":"{head}","title":"{}"}}"#,
        "x".repeat(1024 * 1024 - 200)
    );
    let big = git_input(&theirs, &["hash-object", "-w", "--stdin"], &edit);
    let embeds = git_input(
        &theirs,
        &["mktree"],
        &format!("100644 blob {doc}\tradicle.json\n"),
    );
    let mut listing = format!("100644 blob {manifest}\tmanifest\n040000 tree {embeds}\tembeds\n");
    for i in 0..256i32 {
        listing.push_str(&format!("100644 blob {big}\t{}\n", i - 128));
    }
    let tree = git_input(&theirs, &["mktree"], &listing);
    let pem = change_signature(&key, &tree);
    let commit = |parents: &[String], time: u64| {
        signed_commit(&tree, parents, &pem, time, "Update identity")
    };
    let t0 = commit_time(&theirs, &head);
    let dir = tempfile::tempdir().unwrap();
    let mut paths = String::new();
    for i in 0..2_000u64 {
        let path = dir.path().join(format!("c{i}"));
        std::fs::write(&path, commit(std::slice::from_ref(&head), t0 + 1 + i)).unwrap();
        paths.push_str(&format!("{}\n", path.display()));
    }
    let list = dir.path().join("paths");
    std::fs::write(&list, paths).unwrap();
    let out = git(&theirs)
        .arg("--git-dir")
        .arg(&theirs)
        .args(["hash-object", "-w", "-t", "commit", "--stdin-paths"])
        .stdin(std::fs::File::open(&list).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success());
    let changes: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert_eq!(changes.len(), 2_000);
    let tip = git_input(
        &theirs,
        &["hash-object", "-w", "-t", "commit", "--stdin"],
        &commit(&changes, t0 + 10_000),
    );
    git_at(&theirs, &["update-ref", "refs/rad/id", &tip]);

    let small = f.rid("small-fixture");
    let small_head = f.repo("small-fixture")["head"].as_str().unwrap().to_owned();
    let trees = Prober::start(seed.url(&format!("/api/v1/repos/{small}/tree/{small_head}/")));

    let started = std::time::Instant::now();
    let out = seedd_tests::run_unchecked(&seed, &["fetch", &rid, "--from", &gina.nid]);
    let took = started.elapsed();
    assert!(
        !out.status.success(),
        "the fetch was accepted: {}",
        output_text(&out)
    );
    assert!(
        output_text(&out).contains("evaluation budget"),
        "{}\n{}",
        output_text(&out),
        seed.logs()
    );
    assert!(took < Duration::from_secs(60), "refused after {took:?}");
    assert!(seed.metric("seedd_cob_budget_exceeded_total", &["kind=\"bytes\""]) >= 1.0);
    assert_eq!(git_at(&held, &["rev-parse", "refs/rad/id"]), ours);
    // Remembered by tips: the next fetch of the same history is refused without verifying.
    let out = seedd_tests::run_unchecked(&seed, &["fetch", &rid, "--from", &gina.nid]);
    assert!(!out.status.success());
    assert!(
        output_text(&out).contains("refused before"),
        "{}",
        output_text(&out)
    );

    let pid = seed.child.id();
    seedd_tests::proc::assert_goes_idle(pid, Duration::from_secs(5), "the refusal");

    trees.assert_all_ok(Duration::from_secs(5));
}

/// The bulk path of a new seed (issue 30 §4): a peer's inventory of many repositories we lack
/// is worked through as fetch slots free up, not a queue's worth per 30 s sync tick. With a
/// queue of 4 (and 4 per peer) and 40 repositories, the inventory hint queues 4 and drops the
/// rest onto the sync list; without the refill the list would be handed out 4 per tick
/// (~5 min), with it everything arrives within the minute. Every fetch succeeds once, and the
/// identity's capped inventory (its most wanted, selected again at most once a second as
/// repositories join) ends up current.
#[test]
fn a_new_seed_fetches_a_peers_whole_inventory_as_slots_free_up() {
    const REPOS: usize = 40;
    let dir = tempfile::Builder::new()
        .prefix("rb")
        .tempdir_in("/tmp")
        .unwrap();
    // The source: a fresh identity whose storage holds the generated repositories.
    let home = dir.path().join("bulksrc");
    seedd_tests::rad_auth(&home, "bulksrc");
    let storage = home.join("storage");
    let _ = std::fs::remove_dir_all(&storage);
    run(std::process::Command::new(seedd_tests::bin("gen-repos"))
        .args(["--count", &REPOS.to_string(), "--prefix", "bulk", "--out"])
        .arg(&storage));
    let repos: Vec<String> = std::fs::read_dir(&storage)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('z'))
        .collect();
    assert_eq!(repos.len(), REPOS);

    let seed = Seed::start(SeedOptions {
        // An inventory cap below what arrives: the identity's most wanted are selected again
        // (debounced) as repositories join.
        p2p_config: "max_concurrent_fetches = 2\nmax_fetches_per_peer = 2\n\
                     max_queued_fetches = 4\nmax_queued_fetches_per_peer = 4\n\
                     inventory_cap = 10\n"
            .into(),
        ..SeedOptions::allowing()
    });
    let _source = seedd_tests::RadNode::start_home(dir, "bulksrc", &[seed.p2p_peer()]);
    let held = |seed: &Seed| {
        repos
            .iter()
            .filter(|r| seed.storage().join(r).join("HEAD").exists())
            .count()
    };
    wait_for(
        "every repository of the peer's inventory in seedd's storage",
        Duration::from_secs(60),
        || (held(&seed) == REPOS).then_some(()),
    );
    // The queue was the limit (hints dropped, then handed out again by the sync task) and
    // each repository was fetched once.
    wait_for("the fetches counted", Duration::from_secs(30), || {
        (seed.metric("seedd_fetches_total", &["result=\"ok\""]) >= REPOS as f64).then_some(())
    });
    assert!(
        seed.metric("seedd_fetches_total", &["result=\"queue_full\""]) > 0.0,
        "the queue of 4 never filled: the test does not exercise the sync list"
    );
    assert_eq!(
        seed.metric("seedd_fetches_total", &["result=\"ok\""]),
        REPOS as f64
    );
    // The capped inventory caught up with every arrival: 10 announced, the rest counted.
    wait_for("the capped inventory", Duration::from_secs(30), || {
        (seed.metric(
            "seedd_identity_inventory_unannounced_repos",
            &["identity=\"default\""],
        ) == (REPOS - 10) as f64)
            .then_some(())
    });
    assert_eq!(
        seed.metric("seedd_identity_inventory_repos", &["identity=\"default\""]),
        10.0
    );
}
