//! Repository maintenance with seedd as a process and real git: `seedctl repo maintain` turns
//! a repository of many packs and loose refs into one pack with a multi-pack index, a bitmap,
//! packed refs and a commit-graph while clones keep the same HEAD; `seedctl maintenance ls`
//! shows the debt dropping; the background scrub maintains due repositories on its own; and a
//! `kill -9` in the middle of a repack leaves a repository that clones and passes `git fsck`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use seedd_tests::*;
use serde_json::Value;

fn canonical(rid: &str) -> &str {
    rid.trim_start_matches("rad:")
}

/// A synthetic repository in `storage` whose history arrived in `pushes` separate packs (as
/// replicated updates leave it), each with `bytes` of incompressible data and a new tag (a
/// loose ref). Returns the RID and the path.
fn many_packs(storage: &Path, name: &str, pushes: usize, bytes: usize) -> (String, PathBuf) {
    let (rid, path) = synthetic_repo(storage, name, |work, g| {
        std::fs::write(work.join("README"), "hello\n").unwrap();
        g(&["add", "README"]);
        g(&["commit", "-q", "-m", "first"]);
    });
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let work = home.join("work");
    run(git(home).arg("clone").arg("-q").arg(&path).arg(&work));
    // Every push stays one pack in the repository, as a fetch's migration leaves it.
    run(git(home)
        .arg("--git-dir")
        .arg(&path)
        .args(["config", "receive.unpackLimit", "1"]));
    for i in 0..pushes {
        let data = seedd_tests::incompressible(
            0x9e37_79b9_7f4a_7c15 ^ ((name.len() as u64) << 32) ^ i as u64,
            bytes,
        );
        std::fs::write(work.join(format!("data-{i}.bin")), &data).unwrap();
        let wg = |args: &[&str]| run(git(home).arg("-C").arg(&work).args(args));
        wg(&["add", "."]);
        wg(&["commit", "-q", "-m", &format!("update {i}")]);
        wg(&["tag", &format!("v{i}")]);
        wg(&["push", "-q", "origin", "main", &format!("v{i}")]);
    }
    run(git(home)
        .arg("--git-dir")
        .arg(&path)
        .args(["config", "--unset", "receive.unpackLimit"]));
    (rid, path)
}

fn packs_in(repo: &Path) -> usize {
    std::fs::read_dir(repo.join("objects/pack"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
        .count()
}

fn loose_refs(repo: &Path) -> usize {
    let mut n = 0;
    let mut dirs = vec![repo.join("refs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else {
                n += 1;
            }
        }
    }
    n
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The `seedctl maintenance ls -o json` entry of `rid`.
fn entry(seed: &Seed, rid: &str) -> Value {
    let ls = json(&seed.seedctl(&["maintenance", "ls", "-o", "json"]));
    ls["repos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["rid"] == rid)
        .cloned()
        .unwrap_or_else(|| panic!("{rid} not in {ls}"))
}

/// Clones `rid` over HTTP into a new directory, checks it with fsck, returns its HEAD.
fn clone_head(seed: &Seed, rid: &str, tmp: &Path, name: &str) -> String {
    let dest = tmp.join(name);
    run(git(tmp)
        .args(["clone", "-q", &seed.url(&format!("{}.git", canonical(rid)))])
        .arg(&dest));
    run(git(tmp)
        .arg("-C")
        .arg(&dest)
        .args(["fsck", "--no-progress"]));
    stdout(&run(git(tmp)
        .arg("-C")
        .arg(&dest)
        .args(["rev-parse", "HEAD"])))
}

fn fsck(repo: &Path) {
    let tmp = tempfile::tempdir().unwrap();
    run(git(tmp.path())
        .arg("--git-dir")
        .arg(repo)
        .args(["fsck", "--no-progress", "--strict"]));
}

fn seed_on(data: &Path, env: &[(&str, &str)]) -> Seed {
    Seed::start(SeedOptions {
        data_dir: Some(data.to_owned()),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..SeedOptions::default()
    })
}

#[test]
fn maintain_now_repacks_packs_refs_and_clones_stay_the_same() {
    let data = tempfile::tempdir().unwrap();
    let storage = data.path().join("storage");
    std::fs::create_dir_all(&storage).unwrap();
    let (rid, repo) = many_packs(&storage, "packs", 8, 64 * 1024);
    assert!(packs_in(&repo) >= 8);
    let seed = seed_on(data.path(), &[("SEEDD_MAINTENANCE__ENABLED", "false")]);
    let tmp = tempfile::tempdir().unwrap();
    let head = clone_head(&seed, &rid, tmp.path(), "before");

    let before = entry(&seed, &rid);
    assert!(before["debt"]["packs"].as_u64().unwrap() >= 8, "{before}");
    assert!(
        before["debt"]["loose_refs"].as_u64().unwrap() >= 8,
        "{before}"
    );
    assert_eq!(before["debt"]["bitmap"], false);
    assert_eq!(before["due"], "packs", "{before}");
    assert!(before["last_run"].is_null());
    let score_before = before["debt"]["score"].as_u64().unwrap();
    assert!(score_before >= 70, "{before}");

    let out = json(&seed.seedctl(&["repo", "maintain", &rid, "-o", "json"]));
    assert_eq!(out["run"]["result"], "ok", "{out}");
    assert_eq!(out["run"]["repack"], "full", "{out}");
    assert!(out["before"]["packs"].as_u64().unwrap() >= 8, "{out}");
    assert_eq!(out["after"]["packs"], 1, "{out}");
    for key in ["bitmap", "midx", "commit_graph"] {
        assert_eq!(out["after"][key], true, "{key}: {out}");
    }
    assert_eq!(out["after"]["loose_refs"], 0, "{out}");
    assert_eq!(out["after"]["score"], 0, "{out}");

    // On disk: what git serves from.
    assert_eq!(packs_in(&repo), 1);
    let pack_dir: Vec<String> = std::fs::read_dir(repo.join("objects/pack"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        pack_dir.iter().any(|n| n == "multi-pack-index"),
        "{pack_dir:?}"
    );
    assert!(
        pack_dir.iter().any(|n| n.ends_with(".bitmap")),
        "{pack_dir:?}"
    );
    assert!(repo
        .join("objects/info/commit-graphs/commit-graph-chain")
        .is_file());
    assert!(repo.join("packed-refs").is_file());
    assert_eq!(loose_refs(&repo), 0, "every ref packed");
    let config = std::fs::read_to_string(repo.join("config")).unwrap();
    assert!(config.contains("allowPackReuse"), "{config}");
    fsck(&repo);

    // Served the same, from the new layout.
    assert_eq!(clone_head(&seed, &rid, tmp.path(), "after"), head);
    let (status, refs) = http_get(
        &seed.url(&format!(
            "{}.git/info/refs?service=git-upload-pack",
            canonical(&rid)
        )),
        &[],
    )
    .unwrap();
    assert_eq!(status, 200);
    assert!(refs.contains("refs/tags/v7"), "{refs}");

    // The listing shows the debt gone and the run.
    let after = entry(&seed, &rid);
    assert!(
        after["debt"]["score"].as_u64().unwrap() < score_before,
        "{after}"
    );
    assert_eq!(after["debt"]["packs"], 1);
    assert!(after["due"].is_null(), "{after}");
    assert_eq!(after["last_run"]["result"], "ok", "{after}");
    assert!(after["last_run"]["packs_before"].as_u64().unwrap() >= 8);

    // Text output names the packs before and after.
    let text = stdout(&seed.seedctl(&["repo", "maintain", &rid]));
    assert!(
        text.contains("before: 1 packs") && text.contains("after:  1 packs"),
        "{text}"
    );
    let text = stdout(&seed.seedctl(&["maintenance", "ls"]));
    assert!(
        text.contains("background maintenance off") && text.contains(&rid),
        "{text}"
    );

    // Metrics.
    assert_eq!(
        seed.metric("seedd_maintenance_runs_total", &["result=\"ok\""]),
        2.0
    );
    assert!(seed.metric("seedd_maintenance_duration_seconds_count", &[]) >= 2.0);
    assert!(seed.metric("seedd_repo_packs_count", &[]) >= 1.0);

    // An unknown repository is a clear error.
    let out = run_unchecked(
        &seed,
        &["repo", "maintain", "rad:z3gqcJUoA1n9HaHKufZs5FCSGazv5"],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not held"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_scrub_maintains_only_due_repositories() {
    let data = tempfile::tempdir().unwrap();
    let storage = data.path().join("storage");
    std::fs::create_dir_all(&storage).unwrap();
    let (due, due_path) = many_packs(&storage, "due", 6, 4 * 1024);
    let (fine, fine_path) = many_packs(&storage, "fine", 1, 4 * 1024);
    let fine_packs = packs_in(&fine_path);
    assert!(fine_packs < 4);
    let seed = seed_on(
        data.path(),
        &[
            ("SEEDD_MAINTENANCE__SWEEP_INTERVAL_SECS", "1"),
            ("SEEDD_MAINTENANCE__MAX_PACKS", "4"),
        ],
    );
    let e = wait_for(
        "the scrub to maintain the due repository",
        Duration::from_secs(60),
        || {
            let e = entry(&seed, &due);
            (e["last_run"]["result"] == "ok").then_some(e)
        },
    );
    assert_eq!(e["debt"]["packs"], 1, "{e}");
    assert_eq!(packs_in(&due_path), 1);
    assert!(due_path.join("objects/pack/multi-pack-index").is_file());
    // Below every threshold: left alone.
    let f = entry(&seed, &fine);
    assert!(f["last_run"].is_null(), "{f}");
    assert_eq!(packs_in(&fine_path), fine_packs);
    assert!(seed.logs().contains("maintenance scrub pass done"));
    fsck(&due_path);
}

/// Pids of processes whose command line mentions `needle` and `what`.
fn pids_running(needle: &str, what: &str) -> Vec<u32> {
    processes_mentioning(needle)
        .iter()
        .filter(|p| p.contains(what))
        .filter_map(|p| {
            p.strip_prefix("/proc/")
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse().ok())
        })
        .collect()
}

#[test]
fn kill_9_during_a_repack_leaves_a_repository_that_serves_and_is_consistent() {
    let data = tempfile::tempdir().unwrap();
    let storage = data.path().join("storage");
    std::fs::create_dir_all(&storage).unwrap();
    let (rid, repo) = many_packs(&storage, "large", 12, 3 * 1024 * 1024);
    let mut seed = seed_on(data.path(), &[("SEEDD_MAINTENANCE__ENABLED", "false")]);
    let tmp = tempfile::tempdir().unwrap();
    let head = clone_head(&seed, &rid, tmp.path(), "before");

    let mut maintain = seed
        .seedctl_command()
        .args(["repo", "maintain", &rid])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let needle = repo.to_string_lossy().into_owned();
    let started = Instant::now();
    let repack = loop {
        let pids = pids_running(&needle, "repack");
        if let Some(pid) = pids.first() {
            break *pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no repack started: {}",
            seed.logs()
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    // The daemon dies mid-repack, and so does the repack it started (its process group: a
    // machine that loses power), leaving whatever git had half-written.
    seed.child.kill().unwrap();
    seed.child.wait().unwrap();
    // Only a process group the repack leads (seedd starts each git step in its own group).
    let stat = std::fs::read_to_string(format!("/proc/{repack}/stat")).unwrap_or_default();
    let pgrp = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.split(' ').nth(2))
        .and_then(|g| g.parse::<u32>().ok());
    if repack > 1 && pgrp == Some(repack) {
        let _ = std::process::Command::new("kill")
            .args(["-9", "--", &format!("-{repack}")])
            .status();
    }
    let _ = maintain.wait();
    wait_for(
        "the killed repack to be gone",
        Duration::from_secs(30),
        || pids_running(&needle, "repack").is_empty().then_some(()),
    );
    drop(seed);
    // Cut before it finished: the old packs are all still there.
    assert!(
        packs_in(&repo) >= 12,
        "{} packs; repack {repack} in group {pgrp:?}",
        packs_in(&repo)
    );
    fsck(&repo);

    let seed = seed_on(data.path(), &[("SEEDD_MAINTENANCE__ENABLED", "false")]);
    assert_eq!(clone_head(&seed, &rid, tmp.path(), "after-kill"), head);
    // Maintenance picks up where it was cut, while clones go on: every clone made during the
    // repack gets the same HEAD and passes fsck (nothing served goes missing).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cloner = {
        let (stop, url) = (stop.clone(), seed.url(&format!("{}.git", canonical(&rid))));
        let dir = tmp.path().join("during");
        std::thread::spawn(move || {
            let mut heads = Vec::new();
            while heads.is_empty() || !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let dest = dir.join(heads.len().to_string());
                run(git(&dir).args(["clone", "-q", &url]).arg(&dest));
                run(git(&dir)
                    .arg("-C")
                    .arg(&dest)
                    .args(["fsck", "--no-progress"]));
                heads.push(stdout(&run(git(&dir)
                    .arg("-C")
                    .arg(&dest)
                    .args(["rev-parse", "HEAD"]))));
            }
            heads
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let out = json(&seed.seedctl(&["repo", "maintain", &rid, "-o", "json"]));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let heads = cloner.join().unwrap();
    assert!(heads.iter().all(|h| *h == head), "{heads:?}");
    assert_eq!(out["run"]["result"], "ok", "{out}");
    assert_eq!(out["after"]["packs"], 1, "{out}");
    assert_eq!(out["after"]["bitmap"], true, "{out}");
    fsck(&repo);
    assert_eq!(clone_head(&seed, &rid, tmp.path(), "after-maintain"), head);
}

#[test]
fn a_purge_waits_for_a_running_maintenance_of_the_repository() {
    let data = tempfile::tempdir().unwrap();
    let storage = data.path().join("storage");
    std::fs::create_dir_all(&storage).unwrap();
    let (rid, repo) = many_packs(&storage, "purged", 12, 3 * 1024 * 1024);
    let seed = seed_on(data.path(), &[("SEEDD_MAINTENANCE__ENABLED", "false")]);
    let mut maintain = seed
        .seedctl_command()
        .args(["repo", "maintain", &rid, "-o", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let needle = repo.to_string_lossy().into_owned();
    wait_for("the repack to start", Duration::from_secs(60), || {
        (!pids_running(&needle, "repack").is_empty()).then_some(())
    });
    // The purge takes the repository's lock: it returns only once the run is over.
    let purged = json(&seed.seedctl(&["repo", "purge", &rid, "-o", "json"]));
    assert_eq!(purged["purged"], true, "{purged}");
    assert!(
        maintain.try_wait().unwrap().is_some() || pids_running(&needle, "repack").is_empty(),
        "the purge returned while the repack was running"
    );
    let out = maintain.wait_with_output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["run"]["result"], "ok", "{report}");
    assert!(!repo.exists(), "purged after the run");
    let logs = seed.logs();
    let maintained = logs.find("repository maintained").unwrap();
    let purged_at = logs.find("repository purged").unwrap();
    assert!(maintained < purged_at, "{logs}");
    let ls = json(&seed.seedctl(&["maintenance", "ls", "-o", "json"]));
    assert!(
        !ls["repos"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["rid"] == rid),
        "{ls}"
    );
}
