//! seedd as a process, real `git` as the client: anonymous clone over HTTP(S), v0 and v2,
//! shallow, partial, incremental, per-peer URLs, refusals and malformed input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use seedd_tests::*;

const HEARTWOOD: &str = "heartwood-fixture";
const SECRET: &str = "secret-fixture";
const SMALL: &str = "small-fixture";

fn seed_with_fixtures() -> Seed {
    Seed::start(SeedOptions {
        repos: vec![HEARTWOOD.into(), SECRET.into(), SMALL.into()],
        ..SeedOptions::default()
    })
}

fn canonical(rid: &str) -> &str {
    rid.trim_start_matches("rad:")
}

fn ls_remote(home: &Path, url: &str, v: &str) -> Vec<(String, String)> {
    let out = run(git(home).args(["-c", &format!("protocol.version={v}"), "ls-remote", url]));
    stdout(&out)
        .lines()
        .map(|l| {
            let (oid, name) = l.split_once('\t').unwrap();
            (oid.to_owned(), name.to_owned())
        })
        .collect()
}

#[test]
fn clone_over_http_v2_and_v0_gets_the_canonical_branch_and_tags() {
    let seed = seed_with_fixtures();
    let f = fixtures();
    let repo = f.repo(HEARTWOOD);
    let rid = f.rid(HEARTWOOD);
    let head = repo["head"].as_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for (v, url) in [
        ("2", seed.url(&format!("{}.git", canonical(&rid)))),
        ("0", seed.url(&rid)),
        ("1", seed.url(&format!("{rid}.git"))),
    ] {
        let dest = tmp.path().join(format!("clone-v{v}"));
        run(git(tmp.path())
            .args(["-c", &format!("protocol.version={v}"), "clone", "-q", &url])
            .arg(&dest));
        let got = stdout(&run(git(tmp.path())
            .arg("-C")
            .arg(&dest)
            .args(["rev-parse", "HEAD"])));
        assert_eq!(got, head, "protocol v{v}: HEAD");
        let branch = stdout(&run(git(tmp.path()).arg("-C").arg(&dest).args([
            "symbolic-ref",
            "--short",
            "HEAD",
        ])));
        assert_eq!(branch, repo["default_branch"].as_str().unwrap());
        let count: usize = stdout(&run(git(tmp.path())
            .arg("-C")
            .arg(&dest)
            .args(["rev-list", "--count", "HEAD"])))
        .parse()
        .unwrap();
        assert_eq!(
            count as u64,
            repo["commits"].as_u64().unwrap(),
            "v{v}: history"
        );
        run(git(tmp.path())
            .arg("-C")
            .arg(&dest)
            .args(["fsck", "--no-progress"]));
    }
    // The canonical URL advertises only the top-level refs.
    for v in ["0", "2"] {
        let refs = ls_remote(tmp.path(), &seed.url(&format!("{rid}.git")), v);
        assert!(!refs.is_empty());
        for (_, name) in &refs {
            assert!(
                name == "HEAD"
                    || name.starts_with("refs/heads/")
                    || name.starts_with("refs/tags/")
                    || name == "refs/rad/id",
                "v{v}: unexpected ref {name} on the canonical URL"
            );
        }
        assert!(
            refs.iter().any(|(_, n)| n == "refs/rad/id"),
            "v{v}: refs/rad/id missing"
        );
    }
    // Ref advertisements (v0 info/refs, v2 ls-refs) were answered without git: the first of a
    // repository read its refs, the later ones used that snapshot.
    let lookups = |r: &str| seed.metric("seedd_git_ref_snapshot_lookups_total", &[r]);
    assert!(lookups("result=\"miss\"") >= 1.0);
    assert!(lookups("result=\"hit\"") >= 1.0);
}

#[test]
fn shallow_partial_and_incremental_fetches_work() {
    let seed = seed_with_fixtures();
    let f = fixtures();
    let rid = f.rid(HEARTWOOD);
    let url = seed.url(&format!("{rid}.git"));
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();

    let shallow = h.join("shallow");
    run(git(h)
        .args(["clone", "-q", "--depth", "1", &url])
        .arg(&shallow));
    let count = stdout(&run(git(h)
        .arg("-C")
        .arg(&shallow)
        .args(["rev-list", "--count", "HEAD"])));
    assert_eq!(count, "1");
    // Deepen it.
    run(git(h)
        .arg("-C")
        .arg(&shallow)
        .args(["fetch", "-q", "--unshallow"]));
    let count: usize = stdout(&run(git(h)
        .arg("-C")
        .arg(&shallow)
        .args(["rev-list", "--count", "HEAD"])))
    .parse()
    .unwrap();
    assert!(count > 1);

    for v in ["0", "2"] {
        let partial = h.join(format!("partial-v{v}"));
        run(git(h)
            .args([
                "-c",
                &format!("protocol.version={v}"),
                "clone",
                "-q",
                "--filter=blob:none",
                &url,
            ])
            .arg(&partial));
        let filter = stdout(&run(git(h)
            .arg("-C")
            .arg(&partial)
            .args(["config", "remote.origin.partialclonefilter"])));
        assert_eq!(filter, "blob:none");
        // Blobs of older commits were not sent.
        let missing = stdout(&run(git(h).arg("-C").arg(&partial).args([
            "rev-list",
            "--objects",
            "--missing=print",
            "--all",
        ])));
        assert!(
            missing.lines().any(|l| l.starts_with('?')),
            "v{v}: a blob:none clone should miss some historical blobs"
        );
    }

    // Incremental: a new commit lands in storage; a fetch brings just that.
    let clone = h.join("clone");
    run(git(h).args(["clone", "-q", &url]).arg(&clone));
    let work = h.join("work");
    run(git(h).args(["clone", "-q", &url]).arg(&work));
    std::fs::write(work.join("NEW.md"), "new\n").unwrap();
    run(git(h).arg("-C").arg(&work).args(["add", "NEW.md"]));
    run(git(h)
        .arg("-C")
        .arg(&work)
        .args(["commit", "-q", "-m", "new commit"]));
    let new_head = stdout(&run(git(h)
        .arg("-C")
        .arg(&work)
        .args(["rev-parse", "HEAD"])));
    let branch = f.repo(HEARTWOOD)["default_branch"]
        .as_str()
        .unwrap()
        .to_owned();
    let storage_repo = seed.storage().join(canonical(&rid));
    run(git(h)
        .arg("-C")
        .arg(&work)
        .arg("push")
        .arg("-q")
        .arg(&storage_repo)
        .arg(format!("HEAD:refs/heads/{branch}")));
    let report = seed.rescan();
    assert_eq!(report["updated"], 1, "{report}");
    for v in ["0", "2"] {
        run(git(h).arg("-C").arg(&clone).args([
            "-c",
            &format!("protocol.version={v}"),
            "fetch",
            "-q",
            "origin",
        ]));
        let got = stdout(&run(git(h)
            .arg("-C")
            .arg(&clone)
            .args(["rev-parse", &format!("origin/{branch}")])));
        assert_eq!(got, new_head, "v{v}");
    }
}

#[test]
fn per_peer_url_serves_that_namespace_and_any_object_can_be_wanted() {
    let seed = seed_with_fixtures();
    let f = fixtures();
    let rid = f.rid(HEARTWOOD);
    let alice = f.json["alice"]["nid"].as_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    let url = seed.url(&format!("{}.git/{alice}", canonical(&rid)));
    for v in ["0", "2"] {
        let refs = ls_remote(h, &url, v);
        assert!(
            refs.iter().any(|(_, n)| n == "refs/rad/sigrefs"),
            "v{v}: {refs:?}"
        );
        assert!(
            refs.iter().any(|(_, n)| n.starts_with("refs/heads/")),
            "v{v}: {refs:?}"
        );
        assert!(
            refs.iter().all(|(_, n)| !n.starts_with("refs/namespaces/")),
            "v{v}: {refs:?}"
        );
        // Tags are the peer's (only the default branch is canonical without crefs rules).
        for (tag, oid) in f.repo(HEARTWOOD)["tags"].as_object().unwrap() {
            assert!(
                refs.iter()
                    .any(|(o, n)| n == &format!("refs/tags/{tag}") && o == oid.as_str().unwrap()),
                "v{v}: tag {tag} missing: {refs:?}"
            );
        }
    }
    let dest = h.join("alice");
    run(git(h).args(["clone", "-q", "--bare", &url]).arg(&dest));
    // Unknown peer → 404.
    let other = "z6Mko9hTggMwjSTEaJaPUfE6tqcy2xvU6BnNq3e3o8qVBiyH";
    let (status, _) = http_get(
        &seed.url(&format!(
            "{rid}.git/{other}/info/refs?service=git-upload-pack"
        )),
        &[],
    )
    .unwrap();
    assert_eq!(status, 404);

    // A patch head lives only in a peer namespace; it can be fetched by id from the canonical URL.
    let patch_head = f.repo(HEARTWOOD)["patch_head"].as_str().unwrap();
    let clone = h.join("clone");
    run(git(h)
        .args(["clone", "-q", &seed.url(&format!("{rid}.git"))])
        .arg(&clone));
    for v in ["0", "2"] {
        run(git(h).arg("-C").arg(&clone).args([
            "-c",
            &format!("protocol.version={v}"),
            "fetch",
            "-q",
            "origin",
            patch_head,
        ]));
    }
    run(git(h)
        .arg("-C")
        .arg(&clone)
        .args(["cat-file", "-e", patch_head]));
}

#[test]
fn push_private_unknown_and_malformed_requests_are_refused() {
    let seed = seed_with_fixtures();
    let f = fixtures();
    let rid = f.rid(HEARTWOOD);
    let secret = f.rid(SECRET);
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();

    // Push: 403 with a one-line reason, and git push fails.
    let (status, body) = http_get(
        &seed.url(&format!("{rid}.git/info/refs?service=git-receive-pack")),
        &[],
    )
    .unwrap();
    assert_eq!(status, 403);
    assert_eq!(body.trim().lines().count(), 1, "{body}");
    let (status, _) = http_post(
        &seed.url(&format!("{rid}.git/git-receive-pack")),
        &[],
        b"0000",
    )
    .unwrap();
    assert_eq!(status, 403);
    let clone = h.join("c");
    run(git(h)
        .args(["clone", "-q", &seed.url(&format!("{rid}.git"))])
        .arg(&clone));
    let out = git(h)
        .arg("-C")
        .arg(&clone)
        .args(["push", "origin", "HEAD:refs/heads/evil"])
        .output()
        .unwrap();
    assert!(!out.status.success());

    // Private and unknown repositories look the same.
    let unknown = "rad:z3gqcJUoA1n9HaHKufZs5FCSGazv5";
    let (s1, b1) = http_get(
        &seed.url(&format!("{secret}.git/info/refs?service=git-upload-pack")),
        &[],
    )
    .unwrap();
    let (s2, b2) = http_get(
        &seed.url(&format!("{unknown}.git/info/refs?service=git-upload-pack")),
        &[],
    )
    .unwrap();
    assert_eq!((s1, s2), (404, 404));
    assert_eq!(b1, b2);
    let out = git(h)
        .args(["clone", "-q", &seed.url(&format!("{secret}.git"))])
        .arg(h.join("secret"))
        .output()
        .unwrap();
    assert!(!out.status.success());

    // Malformed requests → 4xx.
    let (s, _) = http_get(
        &seed.url("not-a-rid.git/info/refs?service=git-upload-pack"),
        &[],
    )
    .unwrap();
    assert_eq!(s, 400);
    let (s, _) = http_get(&seed.url("/"), &[]).unwrap();
    assert_eq!(s, 404);
    let (s, _) = http_get(&seed.url(&format!("{rid}.git/info/refs")), &[]).unwrap();
    assert_eq!(s, 403, "dumb HTTP is not served");
    let (s, _) = http_get(&seed.url(&format!("{rid}.git/git-upload-pack")), &[]).unwrap();
    assert_eq!(s, 405);
    let (s, _) = http_post(
        &seed.url(&format!("{rid}.git/git-upload-pack")),
        &[("Content-Type", "text/plain")],
        b"0000",
    )
    .unwrap();
    assert_eq!(s, 415);
    let (s, _) = http_post(
        &seed.url(&format!("{rid}.git/git-upload-pack")),
        &[("Content-Type", "application/x-git-upload-pack-request")],
        b"this is not a pkt-line",
    )
    .unwrap();
    assert_eq!(s, 400);
    // Oversized (declared) body → 413 without reading it.
    let mut s = raw_request(
        seed.http,
        format!(
            "POST /{rid}.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: {}\r\n\r\n",
            1u64 << 40
        )
        .as_bytes(),
    );
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 413"));
    // Garbage on the socket never takes the server down.
    let mut s = raw_request(seed.http, b"\x00\x01\x02 garbage\r\n\r\n");
    let _ = s.read(&mut buf);
    let (status, _) = http_get(&seed.admin_url("/healthz"), &[]).unwrap();
    assert_eq!(status, 200);
}

/// A synthetic repository with one large incompressible blob, so a clone takes a while.
fn big_repo(storage: &Path, mib: usize) -> String {
    let (rid, _) = synthetic_repo(storage, "big", |work, g| {
        let data = incompressible(0x9e3779b97f4a7c15, mib * 1024 * 1024);
        std::fs::write(work.join("big.bin"), &data).unwrap();
        g(&["add", "big.bin"]);
        g(&["commit", "-q", "-m", "big"]);
    });
    rid
}

/// A seed with one pack slot and no queue, plus `env`.
fn single_slot_seed(env: &[(&str, &str)]) -> Seed {
    let mut all = vec![
        (
            "SEEDD_HTTP__MAX_CONCURRENT_PACKS".to_owned(),
            "1".to_owned(),
        ),
        ("SEEDD_HTTP__PACK_QUEUE".to_owned(), "0".to_owned()),
    ];
    all.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    Seed::start(SeedOptions {
        env: all,
        ..SeedOptions::default()
    })
}

/// Send `req`, read the response head (200 expected), then stop reading; the caller keeps the
/// connection open.
fn stalled_request(seed: &Seed, req: &[u8]) -> std::net::TcpStream {
    let mut s = raw_request(seed.http, req);
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    s
}

/// Add a big synthetic repo to `seed` and build a raw v2 fetch request for its HEAD.
fn big_repo_fetch(seed: &Seed, mib: usize) -> (String, std::path::PathBuf, Vec<u8>) {
    let rid = big_repo(&seed.storage(), mib);
    seed.rescan();
    let repo_path = seed.storage().join(canonical(&rid));
    let head = stdout(&run(git(seed.dir.path())
        .arg("--git-dir")
        .arg(&repo_path)
        .args(["rev-parse", "HEAD"])));
    let req = v2_upload_pack_request(&rid, &v2_fetch_body(&head, &[]), false).into_bytes();
    (rid, repo_path, req)
}

fn seedd_children(pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) {
            // pid (comm) state ppid ...
            if let Some(rest) = stat.rsplit_once(") ") {
                let fields: Vec<&str> = rest.1.split(' ').collect();
                if fields.get(1) == Some(&pid.to_string().as_str()) {
                    out.push(stat.clone());
                }
            }
        }
    }
    out
}

#[test]
fn client_disconnect_mid_clone_kills_the_work_and_leaves_no_process() {
    let seed = Seed::start(SeedOptions::default());
    let (_rid, repo_path, req) = big_repo_fetch(&seed, 48);
    let mut s = raw_request(seed.http, &req);
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0;
    while got < 256 * 1024 {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "server closed early");
        got += n;
    }
    // The pack is still being generated/streamed: there are git children.
    let needle = repo_path.to_str().unwrap().to_owned();
    assert!(
        !processes_mentioning(&needle).is_empty(),
        "expected upload-pack to run"
    );
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let procs = processes_mentioning(&needle);
        let zombies: Vec<String> = seedd_children(seed.child.id())
            .into_iter()
            .filter(|s| s.contains(") Z "))
            .collect();
        if procs.is_empty() && zombies.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "git processes left behind after the client went away: {procs:?} zombies: {zombies:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, metrics) = http_get(&seed.admin_url("/metrics"), &[]).unwrap();
    assert!(
        metrics.contains("seedd_git_aborted_total{reason=\"client_gone\"} 1"),
        "{metrics}"
    );
}

#[test]
fn pack_generation_is_capped_and_overflow_gets_503_with_retry_after() {
    let seed = single_slot_seed(&[]);
    let (rid, _repo_path, req) = big_repo_fetch(&seed, 32);
    // First request holds the only slot: read its headers, then stop reading.
    let first = stalled_request(&seed, &req);
    let mut buf = [0u8; 512];
    // Second is refused at once.
    let mut second = raw_request(seed.http, &req);
    let mut resp = String::new();
    let started = Instant::now();
    let n = second.read(&mut buf).unwrap();
    resp.push_str(&String::from_utf8_lossy(&buf[..n]));
    assert!(resp.starts_with("HTTP/1.1 503"), "{resp}");
    assert!(
        resp.to_ascii_lowercase().contains("retry-after: 1"),
        "{resp}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(first);
    // Once the slot is free, clones work again.
    let tmp = tempfile::tempdir().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = git(tmp.path())
            .args(["ls-remote", &seed.url(&format!("{rid}.git"))])
            .output()
            .unwrap();
        let (_, m) = http_get(&seed.admin_url("/metrics"), &[]).unwrap();
        if out.status.success() && m.contains("seedd_git_packs_in_flight 0") {
            break;
        }
        assert!(Instant::now() < deadline, "slot never released");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn repos_added_on_disk_appear_after_a_rescan_not_a_reload() {
    let seed = Seed::start(SeedOptions::default());
    let f = fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let rid = f.rid(SMALL);
    let url = seed.url(&format!("{rid}.git/info/refs?service=git-upload-pack"));
    assert_eq!(http_get(&url, &[]).unwrap().0, 404);
    copy_tree(
        &f.storage().join(canonical(&rid)),
        &seed.storage().join(canonical(&rid)),
    );
    // SIGHUP reloads the configuration only: no pass over storage.
    let scans = seed.metric("seedd_index_scan_duration_seconds_count", &[]);
    let reloads = seed.metric("seedd_config_reloads_total", &["ok"]);
    seed.signal(1);
    let deadline = Instant::now() + Duration::from_secs(20);
    while seed.metric("seedd_config_reloads_total", &["ok"]) == reloads {
        assert!(Instant::now() < deadline, "SIGHUP not acted on");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        http_get(&url, &[]).unwrap().0,
        404,
        "a reload rescanned storage"
    );
    assert_eq!(
        seed.metric("seedd_index_scan_duration_seconds_count", &[]),
        scans,
        "a reload rescanned storage"
    );
    // `seedctl rescan`, the operator's tool, finds it.
    let out = run(Command::new(bin("seedctl"))
        .args(["--admin", &seed.admin_url(""), "--token-file"])
        .arg(seed.token_file())
        .args(["rescan", "-o", "json"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["added"], 1, "{v}");
    assert_eq!(http_get(&url, &[]).unwrap().0, 200);
    run(git(tmp.path())
        .args(["clone", "-q", &seed.url(&format!("{rid}.git"))])
        .arg(tmp.path().join(SMALL)));
    let status = seed.stop();
    assert!(status.success(), "seedd exited with {status}");
}

/// Issue 30 §3: `seedctl rescan --repo` re-reads only the repositories named (added,
/// changed or removed on disk outside seedd), not storage; a restart reads only what seedd
/// journaled, so a repository copied in by hand waits for a rescan.
#[test]
fn a_rescan_of_named_repositories_reads_only_them() {
    let seed = Seed::start(SeedOptions {
        repos: vec![HEARTWOOD.into()],
        ..SeedOptions::default()
    });
    let f = fixtures();
    let (small, hw) = (f.rid(SMALL), f.rid(HEARTWOOD));
    let refs = |rid: &str| {
        let url = seed.url(&format!("{rid}.git/info/refs?service=git-upload-pack"));
        http_get(&url, &[]).unwrap().0
    };
    let rescan = |args: &[&str]| {
        let out = Command::new(bin("seedctl"))
            .args(["--admin", &seed.admin_url(""), "--token-file"])
            .arg(seed.token_file())
            .arg("rescan")
            .args(args)
            .args(["-o", "json"])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(refs(&hw), 200);
    copy_tree(
        &f.storage().join(canonical(&small)),
        &seed.storage().join(canonical(&small)),
    );
    // Named: the new one read, nothing else (one repository scanned of two on disk).
    let (ok, out, err) = rescan(&["--repo", &small]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["scanned"].as_u64(), v["added"].as_u64()),
        (Some(1), Some(1)),
        "{v}"
    );
    assert_eq!(refs(&small), 200);
    // Removed on disk: a rescan of it drops it from the index.
    std::fs::remove_dir_all(seed.storage().join(canonical(&hw))).unwrap();
    let (ok, out, err) = rescan(&["--repo", &hw]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["scanned"].as_u64(), v["removed"].as_u64()),
        (Some(1), Some(1)),
        "{v}"
    );
    assert_eq!(refs(&hw), 404);
    // Not a repository id: refused, naming it.
    let (ok, _, err) = rescan(&["--repo", "rad:nonsense"]);
    assert!(!ok && err.contains("rad:nonsense"), "{err}");
    let status = seed.stop();
    assert!(status.success(), "seedd exited with {status}");
}

#[test]
fn a_client_that_stops_reading_is_timed_out_and_frees_its_slot() {
    let seed = single_slot_seed(&[("SEEDD_HTTP__IDLE_TIMEOUT_SECS", "1")]);
    let (_rid, repo_path, req) = big_repo_fetch(&seed, 32);
    // Read the status line, then stall with the connection open.
    let stalled = stalled_request(&seed, &req);
    let mut buf = [0u8; 256];
    let needle = repo_path.to_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, m) = http_get(&seed.admin_url("/metrics"), &[]).unwrap();
        if m.contains("seedd_git_aborted_total{reason=\"idle_timeout\"} 1")
            && processes_mentioning(&needle).is_empty()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "stalled client never timed out: {m}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The slot is free again although the stalled connection is still open.
    let mut next = raw_request(seed.http, &req);
    let n = next.read(&mut buf).unwrap();
    assert!(
        String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    drop(stalled);
}

/// GET `path` on the seed's HTTP listener with `extra` headers: (head, body), the whole answer.
fn get_raw(seed: &Seed, path: &str, extra: &str) -> (String, Vec<u8>) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n");
    let mut s = raw_request(seed.http, req.as_bytes());
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&all[..split]).to_lowercase();
    (head, all[split + 4..].to_vec())
}

/// A large ref advertisement (2,500 tags, ~170 kB) goes gzip-compressed to clients that take
/// gzip — real git says `Accept-Encoding: deflate, gzip, br, zstd` — and decompresses to the
/// plain answer byte for byte; clients that do not take it, and small answers, get it plain.
/// Real git lists every ref through it, v0 and v2.
#[test]
fn large_advertisements_are_gzipped_for_clients_that_take_it() {
    let seed = Seed::start(SeedOptions {
        repos: vec![SMALL.into()],
        ..SeedOptions::default()
    });
    let (rid, _) = synthetic_repo(&seed.storage(), "many-tags", |work, g| {
        g(&["commit", "-q", "--allow-empty", "-m", "one"]);
        let head = g(&["rev-parse", "HEAD"]);
        let mut packed = String::from("# pack-refs with: peeled fully-peeled sorted \n");
        for i in 0..2500 {
            packed.push_str(&format!("{head} refs/tags/t{i:05}\n"));
        }
        std::fs::write(work.join(".git/packed-refs"), packed).unwrap();
    });
    seed.rescan();
    let path = format!("/{rid}.git/info/refs?service=git-upload-pack");
    let (head, plain) = get_raw(&seed, &path, "");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(!head.contains("content-encoding"), "{head}");
    assert!(head.contains("vary: accept-encoding"), "{head}");
    assert!(plain.len() > 100_000, "{} bytes", plain.len());
    let lookups = || {
        seed.metric("seedd_git_ref_snapshot_lookups_total", &["result=\"hit\""])
            + seed.metric("seedd_git_ref_snapshot_lookups_total", &["result=\"miss\""])
    };
    let before = lookups();
    let (head, packed) = get_raw(&seed, &path, "Accept-Encoding: deflate, gzip, br, zstd\r\n");
    assert_eq!(lookups(), before + 1.0, "one snapshot lookup per request");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(
        packed.len() * 3 < plain.len(),
        "{} of {}",
        packed.len(),
        plain.len()
    );
    let mut unpacked = Vec::new();
    flate2::read::GzDecoder::new(&packed[..])
        .read_to_end(&mut unpacked)
        .unwrap();
    assert_eq!(unpacked, plain);
    // Refused with q=0, and a small answer: plain.
    let (head, _) = get_raw(&seed, &path, "Accept-Encoding: gzip;q=0\r\n");
    assert!(!head.contains("content-encoding"), "{head}");
    let small = format!(
        "/{}.git/info/refs?service=git-upload-pack",
        fixtures().rid(SMALL)
    );
    let (head, _) = get_raw(&seed, &small, "Accept-Encoding: gzip\r\n");
    assert!(!head.contains("content-encoding"), "{head}");
    // Real git, v0 (info/refs) and v2 (ls-refs POST): every tag, received gzip-compressed.
    let url = seed.url(&format!("{rid}.git"));
    for v in ["0", "2"] {
        let out = run(git(seed.dir.path())
            .env("GIT_TRACE_CURL", "1")
            .env("GIT_TRACE_CURL_NO_DATA", "1")
            .args([
                "-c",
                &format!("protocol.version={v}"),
                "ls-remote",
                "--tags",
                &url,
            ]));
        let tags = stdout(&out)
            .lines()
            .filter(|l| l.contains("refs/tags/t"))
            .count();
        assert_eq!(tags, 2500, "protocol {v}");
        let trace = String::from_utf8_lossy(&out.stderr).to_lowercase();
        assert!(
            trace.contains("recv header: content-encoding: gzip"),
            "protocol {v}: no gzip answer"
        );
    }
}
