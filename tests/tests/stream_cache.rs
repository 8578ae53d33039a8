//! Radicle git streams served as a loop of protocol-v2 commands (issue 13 §2, §3): real
//! `radicle-node`s clone from seedd with the pack cache on — `ls-refs` from the ref snapshot
//! (no process), clones without `have`s through the pack cache (a miss that generates, then a
//! hit for the next node), an incremental fetch after a new push by git directly — and what
//! they get is checked by content.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use seedd_tests::{git, output_text, run, stdout, wait_for, RadNode, Seed, SeedOptions};

const HEARTWOOD: &str = "heartwood-fixture";

fn ok(out: Output, what: &str, seed: &Seed) -> String {
    let t = output_text(&out);
    assert!(
        out.status.success(),
        "{what} failed:\n{t}\nseedd log:\n{}",
        seed.logs()
    );
    t
}

/// `name objectid` of every ref under `prefix` (all when empty), sorted.
fn refs(repo: &Path, prefix: &str) -> Vec<String> {
    let mut args = vec!["for-each-ref", "--format=%(refname) %(objectname)"];
    if !prefix.is_empty() {
        args.push(prefix);
    }
    let out = stdout(&run(git(repo).arg("-C").arg(repo).args(&args)));
    let mut lines: Vec<String> = out.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

fn fsck(repo: &Path) {
    let out = git(repo)
        .arg("-C")
        .arg(repo)
        .args(["fsck", "--full", "--no-dangling"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git fsck {repo:?}: {}",
        output_text(&out)
    );
}

fn requests(seed: &Seed, answer: &str) -> f64 {
    seed.metric(
        "seedd_p2p_git_requests_total",
        &[&format!("answer=\"{answer}\"")],
    )
}

/// A node connected only to `seed` sees it as a seed of `rid`, then `rad clone`s it into
/// `work/wc`.
fn rad_clone(node: &RadNode, seed: &Seed, rid: &str, work: &Path) {
    wait_for(
        &format!("{} to see seedd as a seed", node.name),
        Duration::from_secs(30),
        || {
            node.routing()
                .contains(&(rid.to_owned(), seed.nid()))
                .then_some(())
        },
    );
    ok(
        node.rad_in(work, &["clone", rid, "wc", "--timeout", "30s"]),
        &format!("rad clone ({})", node.name),
        seed,
    );
}

#[test]
fn radicle_clones_use_the_pack_cache_and_ls_refs_needs_no_process() {
    let f = seedd_tests::fixtures();
    let rid = f.rid(HEARTWOOD);
    let seed = Seed::start(SeedOptions {
        repos: vec![HEARTWOOD.into()],
        extra_config: "[policy]\ndefault = \"allow\"\nscope = \"all\"\n\
             [http.pack_cache]\nenabled = true\nadmission = \"first\"\n"
            .into(),
        ..Default::default()
    });
    let held = seed.repo_path(&rid);
    // A tenant owns the repository: what streams send is charged to it.
    let (status, v) = seed.admin(
        "POST",
        "/api/v1/tenants",
        Some(serde_json::json!({ "name": "acme", "hosts": [] })),
    );
    assert_eq!(status, 201, "{v}");
    let (status, v) = seed.admin(
        "POST",
        &format!("/api/v1/repos/{rid}/seed"),
        Some(serde_json::json!({ "tenant": "acme", "scope": "all" })),
    );
    assert_eq!(status, 200, "{v}");
    let egress = || {
        seed.metric(
            "seedd_tenant_egress_bytes_total",
            &["tenant=\"acme\"", "transport=\"radicle\""],
        )
    };
    for answer in ["snapshot", "pack_cache", "git"] {
        assert_eq!(requests(&seed, answer), 0.0, "{answer}");
    }

    // 1. A first clone: ls-refs from the snapshot, the clone's fetch claims a cache entry.
    let carol = RadNode::start("carol", &[seed.p2p_peer()]);
    let carol_work = tempfile::tempdir().unwrap();
    rad_clone(&carol, &seed, &rid, carol_work.path());
    assert!(requests(&seed, "snapshot") >= 1.0, "ls-refs without git");
    assert!(seed.metric("seedd_git_ref_snapshot_lookups_total", &["result=\"miss\""]) >= 1.0);
    assert!(requests(&seed, "pack_cache") >= 1.0, "{}", seed.logs());
    let misses = seed.metric("seedd_pack_cache_misses_total", &[]);
    assert!(misses >= 1.0);
    assert!(seed.metric("seedd_pack_cache_generation_seconds_count", &[]) >= 1.0);
    assert!(seed.metric("seedd_p2p_git_serves_total", &["result=\"ok\""]) >= 1.0);
    let carol_repo = carol.repo_path(&rid);
    fsck(&carol_repo);

    // 2. Another fresh node clones the same: answered from the cache file.
    let hits = seed.metric("seedd_pack_cache_hits_total", &[]);
    let served = seed.metric("seedd_pack_cache_served_bytes_total", &[]);
    let read = seed.metric("seedd_pack_cache_read_bytes_total", &[]);
    let bytes = seed.metric("seedd_p2p_git_served_bytes_total", &[]);
    let dave = RadNode::start("dave", &[seed.p2p_peer()]);
    let dave_work = tempfile::tempdir().unwrap();
    rad_clone(&dave, &seed, &rid, dave_work.path());
    assert!(
        seed.metric("seedd_pack_cache_hits_total", &[]) > hits,
        "{}",
        seed.logs()
    );
    assert!(seed.metric("seedd_pack_cache_served_bytes_total", &[]) > served);
    // A finished file goes to the stream as chunks read (pread) from the file.
    assert!(seed.metric("seedd_pack_cache_read_bytes_total", &[]) > read);
    assert!(seed.metric("seedd_p2p_git_served_bytes_total", &[]) > bytes);
    // Every byte sent on streams (advertisements, ls-refs, cached and generated packs) was
    // charged to the owner.
    assert_eq!(
        egress(),
        seed.metric("seedd_p2p_git_served_bytes_total", &[]),
        "radicle egress"
    );
    let dave_repo = dave.repo_path(&rid);
    fsck(&dave_repo);
    // Both clones hold the seed's refs: identity, every namespace's signed refs and branches.
    let signed = |repo: &Path| -> Vec<String> {
        refs(repo, "")
            .into_iter()
            .filter(|l| {
                let name = l.split(' ').next().unwrap_or("");
                name == "refs/rad/id"
                    || (name.starts_with("refs/namespaces/")
                        && (name.contains("/refs/heads/") || name.ends_with("/refs/rad/sigrefs")))
            })
            .collect()
    };
    let expected = signed(&held);
    assert!(
        expected.iter().any(|l| l.contains("/refs/heads/")),
        "{expected:?}"
    );
    assert_eq!(signed(&carol_repo), expected, "carol");
    assert_eq!(signed(&dave_repo), expected, "dave");
    let head = |node: &RadNode, work: &Path| {
        stdout(&node.git_in(&work.join("wc"), &["rev-parse", "HEAD"]))
            .trim()
            .to_owned()
    };
    assert_eq!(
        head(&carol, carol_work.path()),
        head(&dave, dave_work.path())
    );
    if let Some(expected) = f.repo(HEARTWOOD)["head"].as_str() {
        assert_eq!(head(&dave, dave_work.path()), expected);
    }

    // Neither clone asked for anything git had to answer directly (no `have`s, every
    // `ls-refs` from the snapshot): the only git processes were cache generations.
    assert_eq!(requests(&seed, "git"), 0.0, "{}", seed.logs());

    // 3. carol pushes a branch twice; seedd fetches each push and so does dave. The second
    //    time dave holds carol's namespace: his fetch has `have`s and git answers it.
    let wc = carol_work.path().join("wc");
    ok(
        carol.git_in(&wc, &["checkout", "-q", "-b", "carol-idea"]),
        "git checkout",
        &seed,
    );
    let branch = format!("refs/namespaces/{}/refs/heads/carol-idea", carol.nid);
    let mut counts = Vec::new();
    for round in 0..2 {
        std::fs::write(wc.join("IDEA"), format!("carol {round}\n")).unwrap();
        ok(carol.git_in(&wc, &["add", "IDEA"]), "git add", &seed);
        ok(
            carol.git_in(&wc, &["commit", "-q", "-m", "idea"]),
            "git commit",
            &seed,
        );
        let idea = stdout(&carol.git_in(&wc, &["rev-parse", "HEAD"]))
            .trim()
            .to_owned();
        let before = (requests(&seed, "git"), requests(&seed, "pack_cache"));
        ok(
            carol.git_in(&wc, &["push", "rad", "carol-idea"]),
            "git push rad",
            &seed,
        );
        wait_for(
            "seedd to fetch carol's push",
            Duration::from_secs(30),
            || {
                refs(&held, &branch)
                    .iter()
                    .any(|l| l.ends_with(&idea))
                    .then_some(())
            },
        );
        let mut synced = false;
        for _ in 0..5 {
            let _ = dave.rad_in(&dave_work.path().join("wc"), &["sync", "--fetch"]);
            if refs(&dave_repo, &branch).iter().any(|l| l.ends_with(&idea)) {
                synced = true;
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        assert!(synced, "dave never got carol's push\n{}", seed.logs());
        let after = (requests(&seed, "git"), requests(&seed, "pack_cache"));
        counts.push((before, after));
    }
    eprintln!("(git, pack_cache) answers before and after each round: {counts:?}");
    let ((git_before, _), (git_after, _)) = counts[1];
    assert!(
        git_after > git_before,
        "an incremental fetch goes to git: {counts:?}"
    );
    fsck(&dave_repo);
    assert_eq!(refs(&dave_repo, &branch), refs(&held, &branch));
    assert_eq!(seed.metric("seedd_p2p_git_serves_in_flight", &[]), 0.0);
    // The direct answers were charged too.
    assert_eq!(
        egress(),
        seed.metric("seedd_p2p_git_served_bytes_total", &[])
    );
    assert_eq!(
        seed.metric("seedd_p2p_git_serves_total", &["result=\"error\""]),
        0.0
    );
    assert_eq!(
        seed.metric("seedd_p2p_git_serves_total", &["result=\"bad_request\""]),
        0.0
    );
}

/// seedd fetching from seedd: real `git fetch` (protocol v2 over the bridge, a stateful
/// connection that ends with a flush) is answered by the command loop, and the replica holds
/// the upstream's signed refs and every object they reach.
#[test]
fn seedd_replicates_from_seedd_over_the_command_loop() {
    let f = seedd_tests::fixtures();
    let rid = f.rid(HEARTWOOD);
    let upstream = Seed::start(SeedOptions {
        repos: vec![HEARTWOOD.into()],
        extra_config: "[policy]\ndefault = \"allow\"\nscope = \"all\"\n\
             [http.pack_cache]\nenabled = true\nadmission = \"first\"\n"
            .into(),
        p2p_config: "relay = \"always\"\n".into(),
        ..Default::default()
    });
    let replica = Seed::start(SeedOptions {
        extra_config: "[policy]\ndefault = \"allow\"\nscope = \"all\"\n".into(),
        p2p_config: format!(
            "relay = \"always\"\nconnect = [\"{}\"]\n",
            upstream.p2p_peer()
        ),
        ..Default::default()
    });
    let held = upstream.storage().join(rid.trim_start_matches("rad:"));
    let copy = replica.storage().join(rid.trim_start_matches("rad:"));
    let signed = |repo: &Path| -> Vec<String> {
        refs(repo, "")
            .into_iter()
            .filter(|l| {
                let name = l.split(' ').next().unwrap_or("");
                name == "refs/rad/id"
                    || (name.starts_with("refs/namespaces/")
                        && (name.contains("/refs/heads/") || name.ends_with("/refs/rad/sigrefs")))
            })
            .collect()
    };
    let expected = signed(&held);
    wait_for(
        "the replica to fetch from the upstream seed",
        Duration::from_secs(60),
        || (copy.join("HEAD").exists() && signed(&copy) == expected).then_some(()),
    );
    fsck(&copy);
    assert!(
        requests(&upstream, "snapshot") >= 1.0,
        "{}",
        upstream.logs()
    );
    assert!(requests(&upstream, "pack_cache") + requests(&upstream, "git") >= 1.0);
    assert!(upstream.metric("seedd_p2p_git_serves_total", &["result=\"ok\""]) >= 1.0);
    for bad in ["error", "bad_request", "timeout", "too_large"] {
        assert_eq!(
            upstream.metric(
                "seedd_p2p_git_serves_total",
                &[&format!("result=\"{bad}\"")]
            ),
            0.0,
            "{bad}\n{}",
            upstream.logs()
        );
    }
    eprintln!(
        "upstream answers: snapshot {}, pack_cache {}, git {}",
        requests(&upstream, "snapshot"),
        requests(&upstream, "pack_cache"),
        requests(&upstream, "git")
    );
}

/// When git's capabilities cannot be probed (here a file stands where the probe repository
/// would be made), a Radicle stream falls back to one stateful `git upload-pack` piped both
/// ways, and HTTP to git's own advertisement: a real radicle-node still clones the whole
/// repository, and no request goes through the command loop.
#[test]
fn without_probed_capabilities_streams_are_served_by_one_stateful_upload_pack() {
    let f = seedd_tests::fixtures();
    let rid = f.rid(HEARTWOOD);
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(data.path().join("cache")).unwrap();
    std::fs::write(data.path().join("cache/advert-probe"), "not a directory\n").unwrap();
    let seed = Seed::start(SeedOptions {
        repos: vec![HEARTWOOD.into()],
        data_dir: Some(data.path().to_owned()),
        extra_config: "[policy]\ndefault = \"allow\"\nscope = \"all\"\n".into(),
        ..Default::default()
    });
    let carol = RadNode::start("carol", &[seed.p2p_peer()]);
    let work = tempfile::tempdir().unwrap();
    rad_clone(&carol, &seed, &rid, work.path());
    let cloned = carol.repo_path(&rid);
    fsck(&cloned);
    let held = seed.repo_path(&rid);
    let sigrefs = |repo: &Path| -> Vec<String> {
        refs(repo, "")
            .into_iter()
            .filter(|l| l.contains("/refs/rad/sigrefs") || l.starts_with("refs/rad/id "))
            .collect()
    };
    assert!(!sigrefs(&held).is_empty());
    assert_eq!(sigrefs(&cloned), sigrefs(&held));
    assert!(seed.metric("seedd_p2p_git_serves_total", &["result=\"ok\""]) >= 1.0);
    for answer in ["snapshot", "pack_cache", "git"] {
        assert_eq!(requests(&seed, answer), 0.0, "{answer}: {}", seed.logs());
    }
    let logs = seed.logs();
    assert!(
        logs.contains("ref advertisements fall back to git upload-pack"),
        "{logs}"
    );
    assert!(logs.contains("serving git stream (stateful)"), "{logs}");
    // HTTP: git's own advertisement, then git's pack.
    let out = std::process::Command::new("git")
        .args(["ls-remote", &seed.url(&format!("{rid}.git"))])
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("refs/heads/"));
}
