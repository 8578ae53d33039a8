//! The single-flight pack cache (issue 13 §3) with seedd as a process and real `git` clients:
//! clones (full, shallow, partial; v2 and v0) answered directly, while being generated and from
//! the cache give the same refs and objects; identical concurrent clones share one generation;
//! a ref change is a new key; incremental fetches (with `have`s) go to git; the cache directory
//! stays within its budget.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use seedd_tests::*;

const HEARTWOOD: &str = "heartwood-fixture";

fn cached_seed(admission: &str, max_bytes: u64, repos: Vec<String>) -> Seed {
    Seed::start(SeedOptions {
        repos,
        extra_config: format!(
            "[http.pack_cache]\nenabled = true\nadmission = \"{admission}\"\nmax_bytes = {max_bytes}\n"
        ),
        ..SeedOptions::default()
    })
}

fn canonical(rid: &str) -> &str {
    rid.trim_start_matches("rad:")
}

/// Pack cache counters: (hits, misses).
fn counters(seed: &Seed) -> (f64, f64) {
    (
        seed.metric("seedd_pack_cache_hits_total", &[]),
        seed.metric("seedd_pack_cache_misses_total", &[]),
    )
}

fn sendfile_bytes(seed: &Seed) -> f64 {
    seed.metric("seedd_pack_cache_sendfile_bytes_total", &[])
}

/// `git clone --bare` with `args`; what it got: HEAD, refs, every object (missing ones marked).
fn clone(home: &Path, url: &str, v: &str, args: &[&str], dest: &Path) -> (String, String, String) {
    clone_by(&mut git(home), home, url, v, args, dest)
}

/// [`clone`] with the `git` command `cmd` (its environment).
fn clone_by(
    cmd: &mut std::process::Command,
    home: &Path,
    url: &str,
    v: &str,
    args: &[&str],
    dest: &Path,
) -> (String, String, String) {
    run(cmd
        .args([
            "-c",
            &format!("protocol.version={v}"),
            "clone",
            "-q",
            "--bare",
        ])
        .args(args)
        .arg(url)
        .arg(dest));
    inspect(home, dest)
}

fn inspect(home: &Path, repo: &Path) -> (String, String, String) {
    let g = |args: &[&str]| stdout(&run(git(home).arg("--git-dir").arg(repo).args(args)));
    g(&["fsck", "--no-progress"]);
    let head = g(&["rev-parse", "HEAD"]);
    let refs = g(&["for-each-ref", "--format=%(objectname) %(refname)"]);
    let mut objects: Vec<String> = g(&["rev-list", "--objects", "--all", "--missing=print"])
        .lines()
        .map(|l| l.split(' ').next().unwrap_or_default().to_owned())
        .collect();
    objects.sort();
    (head, refs, objects.join("\n"))
}

#[test]
fn clones_from_the_cache_equal_direct_ones() {
    let seed = cached_seed("second", 1 << 30, vec![HEARTWOOD.into()]);
    let f = fixtures();
    let rid = f.rid(HEARTWOOD);
    let url = seed.url(&format!("{rid}.git"));
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    let head = f.repo(HEARTWOOD)["head"].as_str().unwrap().to_owned();
    for v in ["2", "0"] {
        for (name, args) in [
            ("full", vec![]),
            ("depth1", vec!["--depth", "1"]),
            ("blobless", vec!["--filter=blob:none"]),
        ] {
            // First sighting: served by git directly; second: generated into the cache while
            // it is streamed; third: read from the cache. (A v0 shallow clone makes two
            // requests, so the counters move by at least one per clone.)
            let mut got = Vec::new();
            for path in ["direct", "generated", "hit"] {
                let before = counters(&seed);
                let sent_before = sendfile_bytes(&seed);
                let dest = h.join(format!("{name}-v{v}-{path}"));
                got.push(clone(h, &url, v, &args, &dest));
                let (hits, misses) = counters(&seed);
                let (hits, misses) = (hits - before.0, misses - before.1);
                let sent = sendfile_bytes(&seed) - sent_before;
                // Hits on plain HTTP/1.1 go out with sendfile (so does a generation that was
                // finished by the time its first reader looked); direct answers never do.
                let what = format!(
                    "v{v} {name} {path}: {hits} hits, {misses} misses, {sent} bytes sendfile'd"
                );
                match path {
                    "hit" => assert!(hits >= 1.0 && misses == 0.0 && sent > 0.0, "{what}"),
                    "generated" => assert!(hits == 0.0 && misses >= 1.0, "{what}"),
                    _ => assert!(hits == 0.0 && misses >= 1.0 && sent == 0.0, "{what}"),
                }
            }
            assert_eq!(got[0].0, head, "v{v} {name}: HEAD");
            for (i, g) in got.iter().enumerate().skip(1) {
                assert_eq!(
                    g, &got[0],
                    "v{v} {name}: clone {i} differs from the direct one"
                );
            }
            if name == "blobless" {
                assert!(
                    got[0].2.lines().any(|l| l.starts_with('?')),
                    "blobs were filtered"
                );
            }
            if name == "depth1" {
                let n = stdout(&run(git(h)
                    .arg("--git-dir")
                    .arg(h.join(format!("{name}-v{v}-hit")))
                    .args(["rev-list", "--count", "HEAD"])));
                assert_eq!(n, "1", "v{v}: shallow");
            }
        }
    }
    assert!(seed.metric("seedd_pack_cache_served_bytes_total", &[]) > 0.0);
    assert_eq!(seed.metric("seedd_git_packs_in_flight", &[]), 0.0);
}

#[test]
fn hits_over_tls_are_read_not_sendfiled() {
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = write_certs(certs.path(), "one");
    let seed = Seed::start(SeedOptions {
        repos: vec![HEARTWOOD.into()],
        tls: Some((cert, key)),
        extra_config: "[http.pack_cache]\nenabled = true\nadmission = \"first\"\n".into(),
        ..SeedOptions::default()
    });
    let rid = fixtures().rid(HEARTWOOD);
    let url = format!("https://localhost:{}/{rid}.git", seed.http.port());
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    let mut got = Vec::new();
    for (i, v) in ["2", "0", "2"].iter().enumerate() {
        let dest = h.join(format!("c{i}"));
        let mut cmd = git(h);
        cmd.env("GIT_SSL_CAINFO", &ca);
        got.push(clone_by(&mut cmd, h, &url, v, &[], &dest));
    }
    assert_eq!(got[2], got[0]);
    assert_eq!(got[1].1, got[0].1);
    let (hits, _) = counters(&seed);
    assert!(hits >= 1.0, "the third clone is a hit");
    assert!(seed.metric("seedd_pack_cache_served_bytes_total", &[]) > 0.0);
    assert_eq!(
        sendfile_bytes(&seed),
        0.0,
        "TLS bytes are encrypted in seedd"
    );
}

#[test]
fn a_ref_change_is_a_new_key_and_incremental_fetches_go_to_git() {
    let seed = cached_seed("first", 1 << 30, vec![HEARTWOOD.into()]);
    let f = fixtures();
    let rid = f.rid(HEARTWOOD);
    let url = seed.url(&format!("{rid}.git"));
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    let (cached_head, ..) = clone(h, &url, "2", &[], &h.join("a"));
    let (head_b, ..) = clone(h, &url, "2", &[], &h.join("b"));
    assert_eq!(cached_head, head_b);
    assert_eq!(counters(&seed), (1.0, 1.0));

    // A new commit lands in storage.
    // (The work tree is cloned from the local copy: only the requests below reach the seed.)
    let work = h.join("work");
    run(git(h).args(["clone", "-q"]).arg(h.join("a")).arg(&work));
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
    run(git(h)
        .arg("-C")
        .arg(&work)
        .arg("push")
        .arg("-q")
        .arg(seed.storage().join(canonical(&rid)))
        .arg(format!("HEAD:refs/heads/{branch}")));
    let report = seed.rescan();
    assert_eq!(report["updated"], 1, "{report}");

    // Incremental fetches (they send `have`s) are answered by git and bring the new commit.
    let before = counters(&seed);
    for (v, repo) in [("2", "a"), ("0", "b")] {
        run(git(h).arg("--git-dir").arg(h.join(repo)).args([
            "-c",
            &format!("protocol.version={v}"),
            "fetch",
            "-q",
            "origin",
            "+refs/heads/*:refs/heads/*",
        ]));
        let (got, ..) = inspect(h, &h.join(repo));
        assert_eq!(got, new_head, "v{v}: incremental fetch");
    }
    assert_eq!(
        counters(&seed),
        before,
        "negotiations do not go through the cache"
    );

    // The same clone request as before is a new key now: a miss, and the new history.
    let (got, ..) = clone(h, &url, "2", &[], &h.join("c"));
    assert_eq!(got, new_head);
    assert_eq!(counters(&seed), (1.0, 2.0));
    let (got, ..) = clone(h, &url, "2", &[], &h.join("d"));
    assert_eq!(got, new_head);
    assert_eq!(counters(&seed), (2.0, 2.0));
}

/// A synthetic repository whose clone takes a while (one incompressible blob of `mib` MiB).
fn big_repo(storage: &Path, mib: usize, commits: usize) -> (String, PathBuf) {
    synthetic_repo(storage, "big", |work, g| {
        for c in 0..commits {
            let data = incompressible(
                0x9e3779b97f4a7c15 ^ c as u64,
                mib * 1024 * 1024 / commits.max(1),
            );
            std::fs::write(work.join(format!("blob{c}.bin")), &data).unwrap();
            g(&["add", "."]);
            g(&["commit", "-q", "-m", &format!("commit {c}")]);
        }
    })
}

#[test]
fn identical_concurrent_clones_share_one_generation() {
    const N: usize = 8;
    let seed = cached_seed("first", 1 << 30, vec![]);
    let (rid, path) = big_repo(&seed.storage(), 24, 1);
    seed.rescan();
    let head = stdout(&run(git(seed.dir.path())
        .arg("--git-dir")
        .arg(&path)
        .args(["rev-parse", "HEAD"])));
    let url = seed.url(&format!("{rid}.git"));
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path().to_owned();
    let clones: Vec<_> = (0..N)
        .map(|i| {
            let (h, url) = (h.clone(), url.clone());
            std::thread::spawn(move || {
                let dest = h.join(format!("c{i}"));
                let out = git(&h)
                    .args(["clone", "-q", "--bare", &url])
                    .arg(&dest)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "clone {i}: {out:?}");
                inspect(&h, &dest)
            })
        })
        .collect();
    let got: Vec<_> = clones.into_iter().map(|c| c.join().unwrap()).collect();
    for g in &got {
        assert_eq!(g.0, head);
        assert_eq!(g, &got[0]);
    }
    assert_eq!(counters(&seed), ((N - 1) as f64, 1.0), "one miss, N-1 hits");
    assert_eq!(
        seed.metric("seedd_pack_cache_generation_seconds_count", &[]),
        1.0,
        "one git run for all"
    );
    let served = seed.metric("seedd_pack_cache_served_bytes_total", &[]);
    let cached = seed.metric("seedd_pack_cache_bytes", &[]);
    assert!(cached > 24.0 * 1024.0 * 1024.0, "{cached}");
    assert_eq!(served, cached * N as f64);
    // Over plain HTTP/1.1 every byte went out with sendfile, followers of the generation
    // (chunked, as the file grew) as well as later hits.
    assert_eq!(sendfile_bytes(&seed), served);
    assert_eq!(seed.metric("seedd_git_packs_in_flight", &[]), 0.0);
    let files = cache_files(&seed);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].0.ends_with(".pack"));
}

/// The files in `cache/packs` with their sizes; one removed while it is listed (an abandoned
/// generation's) is left out.
fn cache_files(seed: &Seed) -> Vec<(String, u64)> {
    std::fs::read_dir(seed.data_dir().join("cache/packs"))
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let len = match e.metadata() {
                Ok(m) => m.len(),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
                Err(err) => panic!("{}: {err}", e.path().display()),
            };
            Some((e.file_name().to_string_lossy().into_owned(), len))
        })
        .collect()
}

#[test]
fn the_cache_stays_within_its_budget() {
    // 8 commits of 64 KiB each: a `--depth k` clone is about k × 64 KiB.
    let budget: u64 = 300 * 1024;
    let seed = cached_seed("first", budget, vec![]);
    let (rid, _) = synthetic_repo(&seed.storage(), "steps", |work, g| {
        for c in 0..8 {
            let data = incompressible(0x243f6a8885a308d3 ^ c as u64, 64 * 1024);
            std::fs::write(work.join("blob.bin"), &data).unwrap();
            g(&["add", "."]);
            g(&["commit", "-q", "-m", &format!("commit {c}")]);
        }
    });
    seed.rescan();
    let url = seed.url(&format!("{rid}.git"));
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    for depth in 1..=8 {
        let d = depth.to_string();
        clone(h, &url, "2", &["--depth", &d], &h.join(format!("d{depth}")));
        // Eviction runs right after the response is complete.
        wait_for(
            "the cache within its budget",
            Duration::from_secs(5),
            || {
                let on_disk: u64 = cache_files(&seed).iter().map(|(_, n)| n).sum();
                let gauge = seed.metric("seedd_pack_cache_bytes", &[]);
                (on_disk <= budget && gauge <= budget as f64 && gauge == on_disk as f64)
                    .then_some(())
            },
        );
    }
    assert_eq!(counters(&seed), (0.0, 8.0), "eight different requests");
    assert!(seed.metric("seedd_pack_cache_evictions_total", &[]) >= 1.0);
    let files = cache_files(&seed);
    assert!(files.iter().all(|(n, _)| n.ends_with(".pack")), "{files:?}");
}

/// A popular generation (a second client followed it) does not stop when its clients go away
/// mid-response: it completes and the next identical request is a hit. (An unpopular one is
/// cancelled: `abandoned_deepen_requests_stop_and_the_cache_stays_within_its_budget`.)
#[test]
fn a_popular_generation_completes_after_its_clients_left() {
    use std::io::Read;
    let seed = cached_seed("first", 1 << 30, vec![]);
    let (rid, path) = big_repo(&seed.storage(), 16, 1);
    seed.rescan();
    let head = stdout(&run(git(seed.dir.path())
        .arg("--git-dir")
        .arg(&path)
        .args(["rev-parse", "HEAD"])));
    let req = v2_upload_pack_request(&rid, &v2_fetch_body(&head, &[]), false);
    let mut clients = Vec::new();
    for _ in 0..2 {
        let mut s = raw_request(seed.http, req.as_bytes());
        let mut buf = vec![0u8; 64 * 1024];
        let n = s.read(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        clients.push(s);
    }
    drop(clients);
    wait_for(
        "the generation to complete",
        Duration::from_secs(30),
        || (seed.metric("seedd_pack_cache_generation_seconds_count", &[]) == 1.0).then_some(()),
    );
    // The same request again, read to its end: a hit, whole. (The first one may have spliced
    // some of the file while it grew.)
    let spliced_before = sendfile_bytes(&seed);
    let again = req.replacen("Host: x\r\n", "Host: x\r\nConnection: close\r\n", 1);
    let mut s = raw_request(seed.http, again.as_bytes());
    let mut response = Vec::new();
    s.read_to_end(&mut response).unwrap();
    assert!(response.starts_with(b"HTTP/1.1 200"));
    assert_eq!(counters(&seed), (2.0, 1.0), "the later requests were hits");
    // A hit is the whole file, framed by its length (and sent with sendfile).
    let head_end = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&response[..head_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap_or_else(|| panic!("no content-length: {head}"))
        .trim()
        .parse()
        .unwrap();
    let body = &response[head_end..];
    assert_eq!(body.len(), length, "a complete body");
    assert!(body.ends_with(b"0000"), "ends with a flush packet");
    let cached = seed.metric("seedd_pack_cache_bytes", &[]);
    assert!(cached > 16.0 * 1024.0 * 1024.0, "{cached}");
    assert_eq!(length as f64, cached);
    assert_eq!(sendfile_bytes(&seed) - spliced_before, cached);
    let files = cache_files(&seed);
    assert_eq!(files.len(), 1, "{files:?}");
}

/// Issue 25 §4: distinct `deepen N` requests, each sent and abandoned (the POST body, then the
/// connection closed as soon as the cache has looked it up). One client starts at most
/// `max_generations_per_client` generations, the rest are answered directly (and killed as
/// their client is gone); generations whose only reader left are killed and removed. Then a
/// real clone succeeds at once, no git is left running, and `cache/packs` stays within
/// `max_bytes` plus one generation throughout.
///
/// The seed's git waits two seconds before answering a fetch (`http.git_binary` is a
/// wrapper), so that every generation outlasts its client however fast the machine: without
/// it, a fast generation may end before its client's departure is seen (neither abandoned nor
/// refused).
#[test]
fn abandoned_deepen_requests_stop_and_the_cache_stays_within_its_budget() {
    // Each `deepen N` pack is about N MiB.
    const COMMITS: usize = 32;
    const BLOB: usize = 1024 * 1024;
    let budget: u64 = 4 * 1024 * 1024;
    let bin = tempfile::tempdir().unwrap();
    let slow_git = slow_fetching_git(bin.path());
    let seed = Seed::start(SeedOptions {
        extra_config: format!(
            "[http.pack_cache]\nenabled = true\nadmission = \"first\"\nmax_bytes = {budget}\n[http.rate]\nper_ip_requests_per_second = 0.0\n"
        ),
        env: vec![(
            "SEEDD_HTTP__GIT_BINARY".into(),
            slow_git.display().to_string(),
        )],
        ..SeedOptions::default()
    });
    let (rid, path) = synthetic_repo(&seed.storage(), "deep", |work, g| {
        for c in 0..COMMITS {
            let data = incompressible(0x243f6a8885a308d3 ^ c as u64, BLOB);
            std::fs::write(work.join(format!("blob{c}.bin")), &data).unwrap();
            g(&["add", "."]);
            g(&["commit", "-q", "-m", &format!("commit {c}")]);
        }
    });
    seed.rescan();
    let head = stdout(&run(git(seed.dir.path())
        .arg("--git-dir")
        .arg(&path)
        .args(["rev-parse", "HEAD"])));
    // The largest generation: the whole history.
    let one_generation = (COMMITS * BLOB) as u64 + 1024 * 1024;
    let on_disk = || -> u64 { cache_files(&seed).iter().map(|(_, n)| n).sum() };
    let mut peak = 0u64;
    // Four at once, held until all are looked up: the first two claim (and their git waits),
    // the next two are over the client's `max_generations_per_client` (2) and go to git.
    let looked_up = seed.metric("seedd_pack_cache_misses_total", &[]);
    let burst: Vec<_> = (65..=68)
        .map(|n| {
            let deepen = format!("deepen {n}");
            let req = v2_upload_pack_request(&rid, &v2_fetch_body(&head, &[&deepen]), false);
            raw_request(seed.http, req.as_bytes())
        })
        .collect();
    wait_for("the burst looked up", Duration::from_secs(30), || {
        (seed.metric("seedd_pack_cache_misses_total", &[]) >= looked_up + 4.0).then_some(())
    });
    drop(burst);
    let per_client = seed.metric(
        "seedd_pack_cache_generations_refused_total",
        &["reason=\"per_client\""],
    );
    assert!(per_client >= 1.0, "{per_client} refused per client");
    // Then one at a time.
    for n in 1..=64 {
        let deepen = format!("deepen {n}");
        let req = v2_upload_pack_request(&rid, &v2_fetch_body(&head, &[&deepen]), false);
        // The connection closes once the cache has looked the request up (a miss: claimed or
        // refused); closed earlier, the request is dropped before it costs anything at all.
        let looked_up = seed.metric("seedd_pack_cache_misses_total", &[]);
        let client = raw_request(seed.http, req.as_bytes());
        wait_for("the request looked up", Duration::from_secs(30), || {
            (seed.metric("seedd_pack_cache_misses_total", &[]) > looked_up).then_some(())
        });
        drop(client);
        peak = peak.max(on_disk());
    }
    // A real clone, at once.
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    let url = seed.url(&format!("{rid}.git"));
    let started = std::time::Instant::now();
    let (got, ..) = clone(h, &url, "2", &[], &h.join("full"));
    assert_eq!(got, head);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the clone took {:?}",
        started.elapsed()
    );
    peak = peak.max(on_disk());
    // Nothing runs on for the clients that left.
    wait_for(
        "no generation left running",
        Duration::from_secs(30),
        || {
            peak = peak.max(on_disk());
            (seed.metric("seedd_git_packs_in_flight", &[]) == 0.0).then_some(())
        },
    );
    wait_for(
        "the cache within its budget",
        Duration::from_secs(10),
        || (on_disk() <= budget + one_generation).then_some(()),
    );
    assert!(
        peak <= budget + one_generation,
        "cache/packs held {peak} bytes (budget {budget}, one generation {one_generation})"
    );
    let refused = seed.metric("seedd_pack_cache_generations_refused_total", &[]);
    let abandoned = seed.metric("seedd_pack_cache_generations_abandoned_total", &[]);
    assert!(
        abandoned >= 1.0,
        "{refused} generations refused, {abandoned} abandoned"
    );
    let files = cache_files(&seed);
    assert!(files.iter().all(|(n, _)| n.ends_with(".pack")), "{files:?}");
}

/// A `git` in `dir` that sleeps two seconds before an `upload-pack` that answers a request (not
/// an advertisement), then runs the real git (as its own process, so that killing the process
/// group ends the sleep too).
fn slow_fetching_git(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let real = stdout(&run(
        std::process::Command::new("sh").args(["-c", "command -v git"])
    ));
    let script = format!(
        "#!/bin/sh\ncase \" $* \" in\n  *\" --advertise-refs \"*) ;;\n  *\" upload-pack \"*) sleep 2 ;;\nesac\nexec {} \"$@\"\n",
        real.trim()
    );
    let path = dir.join("git");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}
