//! Issue 25 §3 with seedd as a process: slow and stalled clients hold one buffer, not a
//! response. Clients that ask for a 10 MiB raw file or a 10 MiB pack-cache hit and never read
//! cost little memory and are cut after `http.write_timeout_secs` (releasing evicted cache
//! files); a real `git clone` succeeds meanwhile; connections over
//! `http.max_connections_per_ip` are refused and counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use seedd_tests::proc::status_kib;
use seedd_tests::*;

/// A synthetic repository of one incompressible blob of `mib` MiB.
fn big_repo(storage: &Path, mib: usize) -> (String, PathBuf) {
    synthetic_repo(storage, "big", |work, g| {
        let data = incompressible(0x9e3779b97f4a7c15, mib * 1024 * 1024);
        std::fs::write(work.join("blob.bin"), &data).unwrap();
        g(&["add", "."]);
        g(&["commit", "-q", "-m", "big"]);
    })
}

/// A v2 `fetch` of `head` without `have`s (a pack-cache key), as one HTTP/1.1 request.
fn fetch_request(rid: &str, head: &str, close: bool) -> String {
    v2_upload_pack_request(rid, &v2_fetch_body(head, &[]), close)
}

/// `n` connections that each send `request` and never read.
fn open_stalled(seed: &Seed, request: &str, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(seed.http).unwrap();
            s.write_all(request.as_bytes()).unwrap();
            s
        })
        .collect()
}

/// Waits until `n` connections were cut by the write timeout, and checks that it was not
/// before `timeout` since `opened`.
fn assert_cut_after(seed: &Seed, n: usize, opened: Instant, timeout: Duration) {
    wait_for(
        "the stalled clients to be cut",
        Duration::from_secs(60),
        || {
            (seed.metric("seedd_http_connections_cut_total", &["write_timeout"]) >= n as f64)
                .then_some(())
        },
    );
    assert!(opened.elapsed() >= timeout, "cut before the timeout");
}

/// The stalled clients raised RSS (KiB) by less than `limit` KiB.
fn assert_rss_rise_below(before: u64, after: u64, limit: u64) {
    assert!(
        after.saturating_sub(before) < limit,
        "the stalled clients cost {} KiB of RSS",
        after.saturating_sub(before)
    );
}

/// Descriptors of `pid` open on cache files that were unlinked.
fn deleted_cache_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|t| {
            let t = t.to_string_lossy();
            t.contains("cache/packs") && t.ends_with("(deleted)")
        })
        .count()
}

#[test]
fn stalled_clients_hold_one_buffer_and_are_cut_after_the_write_timeout() {
    const STALLED: usize = 400;
    let seed = Seed::start(SeedOptions {
        extra_config: format!(
            "[http.pack_cache]\nenabled = true\nadmission = \"first\"\nmax_bytes = {}\n[http.rate]\nper_ip_requests_per_second = 0.0\n",
            15 * 1024 * 1024
        ),
        env: vec![
            ("SEEDD_HTTP__WRITE_TIMEOUT_SECS".into(), "3".into()),
            ("SEEDD_HTTP__MAX_CONNECTIONS_PER_IP".into(), "1000".into()),
        ],
        ..SeedOptions::default()
    });
    let (rid, path) = big_repo(&seed.storage(), 10);
    seed.rescan();
    let pid = seed.child.id();
    let head = stdout(&run(git(seed.dir.path())
        .arg("--git-dir")
        .arg(&path)
        .args(["rev-parse", "HEAD"])));

    // Warm: one request read to its end generates the entry.
    let mut s = raw_request(seed.http, fetch_request(&rid, &head, true).as_bytes());
    let mut whole = Vec::new();
    s.read_to_end(&mut whole).unwrap();
    assert!(whole.starts_with(b"HTTP/1.1 200"));
    assert!(whole.len() > 10 * 1024 * 1024, "{} bytes", whole.len());
    wait_for("the generation", Duration::from_secs(30), || {
        (seed.metric("seedd_pack_cache_generation_seconds_count", &[]) == 1.0).then_some(())
    });
    let rss_before = status_kib(pid, "VmRSS:");

    // 400 clients ask for the hit and never read.
    let request = fetch_request(&rid, &head, false);
    let stalled = open_stalled(&seed, &request, STALLED);
    let opened = Instant::now();
    wait_for(
        "the stalled responses to start",
        Duration::from_secs(30),
        || (seed.metric("seedd_pack_cache_hits_total", &[]) >= STALLED as f64).then_some(()),
    );

    // A real clone succeeds meanwhile; a shallow one (another key) evicts the stalled
    // clients' file, which they keep open.
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    let url = seed.url(&format!("{rid}.git"));
    run(git(h)
        .args(["clone", "-q", "--bare", &url])
        .arg(h.join("full")));
    run(git(h)
        .args([
            "clone",
            "-q",
            "--bare",
            "--depth",
            "1",
            "--filter=blob:limit=1m",
            &url,
        ])
        .arg(h.join("other")));
    let got = stdout(&run(git(h)
        .arg("--git-dir")
        .arg(h.join("full"))
        .args(["rev-parse", "HEAD"])));
    assert_eq!(got, head);
    let rss_open = status_kib(pid, "VmRSS:");
    let still_open = opened.elapsed() < Duration::from_secs(3);
    let held = deleted_cache_fds(pid);
    eprintln!(
        "{STALLED} stalled: RSS {rss_before} → {rss_open} KiB, {held} descriptors on evicted files, {:?} after opening",
        opened.elapsed()
    );
    assert_rss_rise_below(rss_before, rss_open, 128 * 1024);

    // Cut after the timeout: counted, and the evicted file is released.
    assert_cut_after(&seed, STALLED, opened, Duration::from_secs(3));
    wait_for("evicted files released", Duration::from_secs(30), || {
        (deleted_cache_fds(pid) == 0).then_some(())
    });
    if still_open {
        // The eviction happened while they were held (else the check above proves nothing).
        assert!(held > 0, "no stalled client held the evicted file");
    }
    // A client sees the end of the connection once it reads what was buffered.
    let mut s = stalled.into_iter().next().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0usize;
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
    assert!(total < whole.len(), "the stalled client got a cut response");
    assert!(
        status_kib(pid, "VmHWM:").saturating_sub(rss_before) < 256 * 1024,
        "peak RSS"
    );
}

/// The issue's own test: 400 connections ask for a 10 MiB file under `/raw/` and never read.
/// They share one buffer of the blob (`RAW_CACHE_BYTES`), so they hold < 128 MiB of extra RSS;
/// a real `git clone` succeeds while they are open; each is cut after the write timeout.
#[test]
fn stalled_raw_file_clients_share_one_buffer_and_are_cut() {
    const STALLED: usize = 400;
    let seed = Seed::start(SeedOptions {
        extra_config: "[http.rate]\nper_ip_requests_per_second = 0.0\n".into(),
        env: vec![
            ("SEEDD_HTTP__WRITE_TIMEOUT_SECS".into(), "5".into()),
            ("SEEDD_HTTP__MAX_CONNECTIONS_PER_IP".into(), "1000".into()),
        ],
        ..SeedOptions::default()
    });
    let (rid, path) = big_repo(&seed.storage(), 10);
    seed.rescan();
    let pid = seed.child.id();
    let head = stdout(&run(git(seed.dir.path())
        .arg("--git-dir")
        .arg(&path)
        .args(["rev-parse", "HEAD"])));
    let raw = format!("/raw/{rid}/{head}/blob.bin");
    // Warm: one whole read (the blob is read once into the shared buffer).
    let mut s = raw_request(
        seed.http,
        format!("GET {raw} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    let mut whole = Vec::new();
    s.read_to_end(&mut whole).unwrap();
    assert!(whole.starts_with(b"HTTP/1.1 200"));
    assert!(whole.len() > 10 * 1024 * 1024, "{} bytes", whole.len());
    let rss_before = status_kib(pid, "VmRSS:");
    let ok_before = seed.metric(
        "seedd_web_requests_total",
        &["group=\"raw\"", "status=\"200\""],
    );

    let request = format!("GET {raw} HTTP/1.1\r\nHost: x\r\n\r\n");
    let stalled = open_stalled(&seed, &request, STALLED);
    let opened = Instant::now();
    wait_for(
        "the stalled answers to start",
        Duration::from_secs(30),
        || {
            let answered = seed.metric(
                "seedd_web_requests_total",
                &["group=\"raw\"", "status=\"200\""],
            );
            (answered - ok_before >= STALLED as f64).then_some(())
        },
    );

    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    run(git(h)
        .args(["clone", "-q", "--bare", &seed.url(&format!("{rid}.git"))])
        .arg(h.join("clone")));
    let got = stdout(&run(git(h)
        .arg("--git-dir")
        .arg(h.join("clone"))
        .args(["rev-parse", "HEAD"])));
    assert_eq!(got, head);
    let rss_open = status_kib(pid, "VmRSS:");
    eprintln!(
        "{STALLED} stalled on /raw: RSS {rss_before} → {rss_open} KiB, {:?} after opening",
        opened.elapsed()
    );
    assert!(
        opened.elapsed() < Duration::from_secs(5),
        "the clone ran after the timeout: the check proves nothing"
    );
    assert_rss_rise_below(rss_before, rss_open, 128 * 1024);
    assert_cut_after(&seed, STALLED, opened, Duration::from_secs(5));
    drop(stalled);
}

#[test]
fn connections_over_the_per_ip_cap_are_refused_and_counted() {
    let seed = Seed::start(SeedOptions {
        env: vec![("SEEDD_HTTP__MAX_CONNECTIONS_PER_IP".into(), "4".into())],
        ..SeedOptions::default()
    });
    let held: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(seed.http).unwrap())
        .collect();
    // Each is accepted and counted before the fifth arrives.
    std::thread::sleep(Duration::from_millis(500));
    let mut over = raw_request(seed.http, b"GET /api/v1 HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut answer = Vec::new();
    let _ = over.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert_eq!(
        seed.metric("seedd_http_connections_refused_total", &["per_ip"]),
        1.0
    );
    // A connection that ends frees its place.
    drop(held);
    wait_for("a place", Duration::from_secs(10), || {
        let mut s = raw_request(
            seed.http,
            b"GET /api/v1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        (!answer.starts_with(b"HTTP/1.1 429")).then_some(())
    });
}
