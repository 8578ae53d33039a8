//! Issue 25 §1 and §4 against seedd as a process, with repositories made by real `git`:
//! one GET of a commit adding 8 MiB of empty lines, and one of a 500k-entry tree, each raise
//! seedd's peak RSS by < 64 MiB and answer within 5 s (a truncated diff, a 413); an archive
//! whose `export-subst` placeholders expand past its output bound is cut, and
//! `seedd_web_bounded_total` counts each cut.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use seedd_tests::proc::{reset_peak, status_kib};
use seedd_tests::{git_with_input, run, stdout, synthetic_repo, Seed, SeedOptions};
use serde_json::Value;

/// GET `path`: status, body and how long it took; the peak RSS rise (KiB) it caused.
fn measured_get(seed: &Seed, path: &str) -> (u16, Vec<u8>, Duration, u64) {
    let pid = seed.child.id();
    let before = reset_peak(pid);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let started = Instant::now();
    let resp = agent.get(seed.url(path)).call().unwrap();
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .with_config()
        .limit(256 << 20)
        .read_to_vec()
        .unwrap();
    let took = started.elapsed();
    let peak = status_kib(pid, "VmHWM:");
    (status, body, took, peak.saturating_sub(before))
}

fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)))
}

fn gd(path: &Path, args: &[&str]) -> String {
    stdout(&run(std::process::Command::new("git")
        .arg("--git-dir")
        .arg(path)
        .args(args)))
}

const RISE_KIB: u64 = 64 << 10;
const ANSWER: Duration = Duration::from_secs(5);

#[test]
fn huge_diffs_and_trees_cost_bounded_memory_and_time() {
    let seed = Seed::start(SeedOptions::default());
    let (rid, path) = synthetic_repo(&seed.storage(), "budget", |work, g| {
        std::fs::write(work.join("README"), "small\n").unwrap();
        g(&["add", "."]);
        g(&["commit", "-q", "-m", "First"]);
        // 8 MiB of empty lines: 8 Mi lines.
        std::fs::write(work.join("empty-lines.txt"), vec![b'\n'; 8 << 20]).unwrap();
        g(&["add", "."]);
        g(&["commit", "-q", "-m", "Eight million empty lines"]);
    });
    let big = gd(&path, &["rev-parse", "refs/heads/main"]);
    let parent = gd(&path, &["rev-parse", "refs/heads/main~1"]);
    // A commit whose root tree has 500k entries (all the empty blob), made with mktree.
    let empty = gd(&path, &["hash-object", "-w", "--stdin"]);
    let mut listing = String::with_capacity(500_000 * 64);
    for i in 0..500_000 {
        listing.push_str(&format!("100644 blob {empty}\tf{i:07}\n"));
    }
    let home = tempfile::tempdir().unwrap();
    let tree = git_with_input(home.path(), &path, &["mktree"], listing.as_bytes());
    drop(listing);
    let wide = gd(
        &path,
        &[
            "commit-tree",
            &tree,
            "-p",
            &big,
            "-m",
            "Half a million files",
        ],
    );
    gd(&path, &["update-ref", "refs/heads/main", &wide]);
    seed.rescan();

    // The commit page: 200 within 5 s, the file answered with its stats and no hunks.
    let bounded =
        |bound: &str| seed.metric("seedd_web_bounded_total", &[&format!("bound=\"{bound}\"")]);
    let (status, body, took, rise) =
        measured_get(&seed, &format!("/api/v1/repos/{rid}/commits/{big}"));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(took < ANSWER, "commit answered in {took:?}");
    assert!(rise < RISE_KIB, "commit raised peak RSS by {rise} KiB");
    let v = json(&body);
    let file = &v["diff"]["files"][0];
    assert_eq!(file["path"], "empty-lines.txt");
    assert_eq!(file["status"], "added");
    assert_eq!(file["diff"]["type"], "plain");
    assert_eq!(file["diff"]["truncated"], true);
    assert_eq!(file["diff"]["hunks"], serde_json::json!([]));
    assert_eq!(file["diff"]["stats"]["additions"], 8 << 20);
    assert_eq!(v["diff"]["stats"]["insertions"], 8 << 20);
    // The 8 MiB blob is left out of `files`.
    assert_eq!(v["files"], serde_json::json!({}), "{}", v["files"]);
    assert!(bounded("diff_truncated") >= 1.0);
    assert!(bounded("blob_omitted") >= 1.0);

    // The compare view and its stats: the same bounds.
    let (status, body, took, rise) =
        measured_get(&seed, &format!("/api/v1/repos/{rid}/diff/{parent}/{big}"));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(took < ANSWER, "diff answered in {took:?}");
    assert!(rise < RISE_KIB, "diff raised peak RSS by {rise} KiB");
    assert_eq!(json(&body)["diff"]["files"][0]["diff"]["truncated"], true);
    let (status, body, took, rise) = measured_get(
        &seed,
        &format!("/api/v1/repos/{rid}/diff/{parent}/{big}/stats"),
    );
    assert_eq!(status, 200);
    assert!(took < ANSWER && rise < RISE_KIB, "{took:?}, {rise} KiB");
    assert_eq!(
        json(&body),
        serde_json::json!({ "filesChanged": 1, "insertions": 8 << 20, "deletions": 0 })
    );

    // The 500k-entry tree: refused from its header, 413 within 5 s.
    let (status, body, took, rise) =
        measured_get(&seed, &format!("/api/v1/repos/{rid}/tree/{wide}/"));
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));
    assert_eq!(json(&body)["code"], 413);
    assert!(took < ANSWER, "tree answered in {took:?}");
    assert!(rise < RISE_KIB, "tree raised peak RSS by {rise} KiB");
    // And a commit that adds it: 413 too (its tree is not inflated either).
    let (status, _, took, rise) =
        measured_get(&seed, &format!("/api/v1/repos/{rid}/commits/{wide}"));
    assert_eq!(status, 413);
    assert!(took < ANSWER && rise < RISE_KIB, "{took:?}, {rise} KiB");
    assert!(bounded("too_large") >= 2.0);

    // The seed still answers the small tree.
    let (status, _, _, _) = measured_get(&seed, &format!("/api/v1/repos/{rid}/tree/{parent}/"));
    assert_eq!(status, 200);
}

/// GET `path` over a raw connection: status line, whether the chunked body ended with its
/// last chunk, and the body bytes received (framing included).
fn raw_get(seed: &Seed, path: &str) -> (String, bool, usize) {
    let mut s = TcpStream::connect(seed.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        seed.http
    )
    .unwrap();
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            // A reset after the cut is an end too.
            Err(_) => break,
        }
    }
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("no response head");
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    assert!(
        head.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    let body = &buf[end + 4..];
    let complete = body.ends_with(b"\r\n0\r\n\r\n");
    (
        head.lines().next().unwrap_or_default().to_owned(),
        complete,
        body.len(),
    )
}

#[test]
fn export_subst_archives_are_cut_at_their_bound() {
    let seed = Seed::start(SeedOptions::default());
    // 2,000 `$Format:%B$` placeholders (24 KB) in a commit whose message is 16 KiB: git
    // would write 32 MiB of the file; its bound is 4 × the tree + 4 KiB per entry + 1 MiB.
    let (rid, path) = synthetic_repo(&seed.storage(), "subst", |work, g| {
        std::fs::write(work.join(".gitattributes"), "subst.txt export-subst\n").unwrap();
        std::fs::write(work.join("subst.txt"), "$Format:%B$\n".repeat(2_000)).unwrap();
        std::fs::write(work.join("plain.txt"), "plain\n").unwrap();
        g(&["add", "."]);
        let message = format!("Expands\n\n{}", "0123456789abcdef\n".repeat(1_000));
        std::fs::write(work.join("../message"), message).unwrap();
        g(&["commit", "-q", "-F", "../message"]);
    });
    let head = gd(&path, &["rev-parse", "refs/heads/main"]);
    seed.rescan();
    let cuts = || seed.metric("seedd_web_bounded_total", &["bound=\"archive_output\""]);
    assert_eq!(cuts(), 0.0);
    // What git would write without the bound.
    let full = run(std::process::Command::new("git")
        .arg("--git-dir")
        .arg(&path)
        .args(["archive", "--format=tar", &head]))
    .stdout
    .len();
    assert!(full > 30 << 20, "the fixture expands to {full} bytes");

    // (Zip of a tree with `export-subst` is stored, not deflated, so that it is cut too.)
    for (n, ext) in ["tar", "tar.gz", "zip"].into_iter().enumerate() {
        let started = Instant::now();
        let (status, complete, len) = raw_get(&seed, &format!("/raw/{rid}/{head}.{ext}"));
        assert!(status.contains(" 200 "), "{ext}: {status}");
        assert!(!complete, "{ext}: the archive was sent whole ({len} bytes)");
        assert!(len < 4 << 20, "{ext}: {len} bytes sent past the bound");
        assert!(started.elapsed() < Duration::from_secs(30));
        let want = (n + 1) as f64;
        seedd_tests::wait_for("the cut counted", Duration::from_secs(5), || {
            (cuts() >= want).then_some(())
        });
    }
}

/// The hostile bench's archive: 4,096 `$Format:%B$` of a 64 KiB message, which git expands
/// in memory (256 MiB) before writing a byte of the file. The git of an `export-subst` tree
/// runs under a data limit (64 MiB + 3 × its largest blob): it stops there, the download fails
/// rather than ending short and clean, and `archive_memory` counts it; a plain archive of the
/// same seed is whole.
#[test]
fn an_export_subst_expansion_stops_at_the_data_limit() {
    let seed = Seed::start(SeedOptions::default());
    let attack = seedd_tests::hostile::export_subst(&seed.storage(), "subst-mem", 4096, 64 << 10);
    let (plain, plain_path) = synthetic_repo(&seed.storage(), "plain", |work, g| {
        std::fs::write(work.join("plain.txt"), "plain\n").unwrap();
        g(&["add", "."]);
        g(&["commit", "-q", "-m", "plain"]);
    });
    let plain_head = gd(&plain_path, &["rev-parse", "refs/heads/main"]);
    seed.rescan();
    let memory = || seed.metric("seedd_web_bounded_total", &["bound=\"archive_memory\""]);
    assert_eq!(memory(), 0.0);
    let started = Instant::now();
    let (status, complete, len) =
        raw_get(&seed, &format!("/raw/{}/{}.tar", attack.rid, attack.commit));
    assert!(status.contains(" 200 "), "{status}");
    assert!(!complete, "the archive ended clean ({len} bytes)");
    assert!(started.elapsed() < Duration::from_secs(30));
    seedd_tests::wait_for("the stop counted", Duration::from_secs(5), || {
        (memory() >= 1.0).then_some(())
    });
    assert!(
        seed.logs().contains("git exited unsuccessfully"),
        "{}",
        seed.logs()
    );
    let (status, complete, _) = raw_get(&seed, &format!("/raw/{plain}/{plain_head}.tar"));
    assert!(status.contains(" 200 ") && complete, "{status}");
}

/// CPU seconds (user + system) the process has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the name.
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[test]
fn history_walks_stop_when_the_client_goes_away() {
    let seed = Seed::start(SeedOptions::default());
    let (rid, path) = synthetic_repo(&seed.storage(), "long", |work, g| {
        std::fs::write(work.join("README"), "long history\n").unwrap();
        g(&["add", "."]);
        g(&["commit", "-q", "-m", "First"]);
    });
    let first = gd(&path, &["rev-parse", "refs/heads/main"]);
    // 300k empty commits on top, with fast-import.
    let mut stream = String::with_capacity(300_000 * 80);
    for i in 0..300_000u32 {
        stream.push_str(&format!(
            "commit refs/heads/main\ncommitter t <t@example.com> {} +0000\ndata 0\n",
            1_700_000_000 + i
        ));
        if i == 0 {
            stream.push_str(&format!("from {first}\n"));
        }
        stream.push('\n');
    }
    let home = tempfile::tempdir().unwrap();
    git_with_input(
        home.path(),
        &path,
        &["fast-import", "--quiet"],
        stream.as_bytes(),
    );
    drop(stream);
    let head = gd(&path, &["rev-parse", "refs/heads/main"]);
    seed.rescan();
    let cancelled = || seed.metric("seedd_web_bounded_total", &["bound=\"cancelled\""]);
    assert_eq!(cancelled(), 0.0);

    // The client gives up after 300 ms, long before a 300k-commit walk ends.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_millis(300)))
        .build()
        .into();
    let gone = agent
        .get(seed.url(&format!("/api/v1/repos/{rid}/stats/commits/{head}")))
        .call();
    assert!(gone.is_err(), "the walk answered within 300 ms");
    drop(agent);
    // Well before the 20 s work deadline, the walk saw its flag and stopped.
    seedd_tests::wait_for("the walk cancelled", Duration::from_secs(8), || {
        (cancelled() >= 1.0).then_some(())
    });
    let pid = seed.child.id();
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_seconds(pid) - before;
    assert!(
        used < 0.5,
        "seedd used {used} s of CPU after the client left"
    );
}

/// Issue 25 §4 and issue 30 §1: the listing pages (`/repos`, a delegate's repositories) are
/// read from the index's in-memory listing in O(page) and need no heavy permit; what still
/// reads records beyond the page (name search: up to 1,000 candidates; the policy listing:
/// every repository) takes one like a tree walk. With one permit (test builds:
/// `SEEDD_TEST_HEAVY_PERMITS`) held 5 s by a tree request (`SEEDD_TEST_HEAVY_HOLD_MS`), those
/// wait their 2 s and answer 503 (counted as `busy`) while the pages and one repository's
/// record answer 200; once the permit is free every listing answers 200.
#[test]
fn listings_take_a_heavy_permit() {
    let f = seedd_tests::fixtures();
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into()],
        env: vec![
            ("SEEDD_TEST_HEAVY_PERMITS".into(), "1".into()),
            ("SEEDD_TEST_HEAVY_HOLD_MS".into(), "5000".into()),
        ],
        ..SeedOptions::default()
    });
    let rid = f.rid("small-fixture");
    let fixture = f.repo("small-fixture");
    let head = fixture["head"].as_str().unwrap().to_owned();
    let delegate = fixture["delegates"][0].as_str().unwrap().to_owned();
    let busy = || seed.metric("seedd_web_rejected_total", &["reason=\"busy\""]);
    assert_eq!(busy(), 0.0);

    let holder = {
        let url = seed.url(&format!("/api/v1/repos/{rid}/tree/{head}/"));
        std::thread::spawn(move || seedd_tests::http_get(&url, &[]).unwrap().0)
    };
    std::thread::sleep(Duration::from_millis(500));
    let listings = [
        "/api/v1/repos".to_owned(),
        "/api/v1/repos/search?q=small".to_owned(),
        "/api/v1/node/policies/repos".to_owned(),
        format!("/api/v1/delegates/{delegate}/repos"),
    ];
    let waiting: Vec<_> = listings
        .iter()
        .map(|path| {
            let url = seed.url(path);
            std::thread::spawn(move || seedd_tests::http_get(&url, &[]).unwrap().0)
        })
        .collect();
    let (one, _) = seedd_tests::http_get(&seed.url(&format!("/api/v1/repos/{rid}")), &[]).unwrap();
    assert_eq!(one, 200, "one record needs no permit");
    let statuses: Vec<u16> = waiting.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(statuses, vec![200, 503, 503, 200], "{listings:?}");
    assert_eq!(busy(), 2.0);
    assert_eq!(holder.join().unwrap(), 200);
    for path in &listings {
        let (status, _) = seedd_tests::http_get(&seed.url(path), &[]).unwrap();
        assert_eq!(status, 200, "{path}");
    }
}
