//! The front against fake replicas on loopback (plain TCP servers that answer fixed bytes): a
//! `git-upload-pack` answered with nothing by the repository's first replica (it lacks a wanted
//! object) is answered by the next one; a replica that refuses connections is skipped; both are
//! counted in `seedd_front_failovers_total`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seedd_core::placement::{replica_order, Placement};
use seedd_proto::crypto::RepoId;

/// Request body bytes every fake replica received.
static BYTES: AtomicUsize = AtomicUsize::new(0);

/// A fake replica: answers every request with `response`, counts the requests.
fn fake(response: &'static [u8]) -> (SocketAddr, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let count = n.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let count = count.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                loop {
                    // One request: headers, then Content-Length bytes.
                    let mut len = 0usize;
                    let mut chunked = false;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.to_ascii_lowercase();
                        if let Some(v) = l.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                        chunked |= l.starts_with("transfer-encoding:") && l.contains("chunked");
                        if line == "\r\n" {
                            break;
                        }
                    }
                    if chunked {
                        // size CRLF data CRLF … 0 CRLF CRLF
                        loop {
                            line.clear();
                            if r.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                            let n = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                            let mut chunk = vec![0; n + 2];
                            if r.read_exact(&mut chunk).is_err() {
                                return;
                            }
                            BYTES.fetch_add(n, Ordering::SeqCst);
                            if n == 0 {
                                break;
                            }
                        }
                    } else {
                        let mut body = vec![0; len];
                        if r.read_exact(&mut body).is_err() {
                            return;
                        }
                        BYTES.fetch_add(len, Ordering::SeqCst);
                    }
                    count.fetch_add(1, Ordering::SeqCst);
                    if s.write_all(response).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, n)
}

fn request(addr: SocketAddr, req: &str) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.as_bytes().to_vec())
        .unwrap_or_default();
    (status, body)
}

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A RID whose first replica (rendezvous order) is `first`.
fn rid_first_on(placement: &Path, first: SocketAddr) -> RepoId {
    let p = Placement::load(placement).unwrap();
    let shard = &p.shards()[0];
    (0u32..)
        .map(|i| {
            let mut b = [7u8; 20];
            b[..4].copy_from_slice(&i.to_be_bytes());
            RepoId::from_oid_bytes(b)
        })
        .find(|rid| replica_order(shard, rid.as_bytes())[0].http == format!("http://{first}"))
        .unwrap()
}

fn start_front(placement: &Path) -> (SocketAddr, SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let (listen, admin) = (free_addr(), free_addr());
    let opts = seedd_front::FrontOptions {
        listen,
        admin_listen: admin,
        placement: placement.to_owned(),
        placement_poll: Duration::from_secs(1),
        node_shard: None,
        pinned: Vec::new(),
        health_interval: Duration::from_millis(200),
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            seedd_front::run(opts, async move {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
    });
    let end = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(admin).is_err() {
        assert!(Instant::now() < end, "the front did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    (listen, admin, tx)
}

fn metric(admin: SocketAddr, series: &str) -> f64 {
    let (_, body) = request(
        admin,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .map(|v| v.trim().parse().unwrap_or(-1.0))
        })
        .unwrap_or(-1.0)
}

#[test]
fn an_empty_upload_pack_answer_goes_to_the_next_replica() {
    // `behind` answers a fetch with nothing, as git does when a wanted object is missing.
    let (behind, behind_n) = fake(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-git-upload-pack-result\r\nContent-Length: 0\r\n\r\n");
    let (ahead, ahead_n) = fake(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-git-upload-pack-result\r\nContent-Length: 8\r\n\r\n0008NAK\n");
    let dir = tempfile::tempdir().unwrap();
    let placement = dir.path().join("placement.toml");
    std::fs::write(
        &placement,
        format!(
            "[[shards]]\nname = \"s0\"\nreplicas = [\"http://{behind}\", \"http://{ahead}\"]\n"
        ),
    )
    .unwrap();
    let rid = rid_first_on(&placement, behind);
    let (front, admin, stop) = start_front(&placement);
    let body = "0014command=fetch\n0001000dwant abc\n0009done\n0000";
    let (status, answer) = request(
        front,
        &format!(
            "POST /{}.git/git-upload-pack HTTP/1.1\r\nHost: seed.example\r\nContent-Type: application/x-git-upload-pack-request\r\nGit-Protocol: version=2\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            rid.canonical(),
            body.len()
        ),
    );
    assert_eq!(status, 200);
    assert_eq!(answer, b"0008NAK\n", "{}", String::from_utf8_lossy(&answer));
    assert_eq!(
        behind_n.load(Ordering::SeqCst),
        1,
        "the first choice was asked first"
    );
    assert_eq!(ahead_n.load(Ordering::SeqCst), 1, "then the next replica");
    assert_eq!(
        metric(
            admin,
            "seedd_front_failovers_total{reason=\"lacked_objects\",shard=\"s0\"}"
        ),
        1.0
    );
    // A GET is not retried on an empty answer: it is the answer.
    let (status, _) = request(
        front,
        &format!(
            "GET /{}.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: seed.example\r\nConnection: close\r\n\r\n",
            rid.canonical()
        ),
    );
    assert_eq!(status, 200);
    assert_eq!(behind_n.load(Ordering::SeqCst), 2);
    assert_eq!(ahead_n.load(Ordering::SeqCst), 1);
    let _ = stop.send(());
}

#[test]
fn a_replica_that_refuses_connections_is_skipped() {
    let dead = free_addr(); // nothing listens there
    let (alive, alive_n) = fake(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    let dir = tempfile::tempdir().unwrap();
    let placement = dir.path().join("placement.toml");
    std::fs::write(
        &placement,
        format!("[[shards]]\nname = \"s0\"\nreplicas = [\"http://{dead}\", \"http://{alive}\"]\n"),
    )
    .unwrap();
    let rid = rid_first_on(&placement, dead);
    let (front, admin, stop) = start_front(&placement);
    for _ in 0..3 {
        let (status, body) = request(
            front,
            &format!(
                "GET /api/v1/repos/{rid} HTTP/1.1\r\nHost: seed.example\r\nConnection: close\r\n\r\n"
            ),
        );
        assert_eq!((status, body.as_slice()), (200, &b"ok"[..]));
    }
    assert_eq!(alive_n.load(Ordering::SeqCst), 3);
    // The refused connection counted once; then the replica is out (answered as "down").
    assert_eq!(
        metric(
            admin,
            "seedd_front_failovers_total{reason=\"connect\",shard=\"s0\"}"
        ),
        1.0
    );
    assert_eq!(
        metric(
            admin,
            "seedd_front_failovers_total{reason=\"down\",shard=\"s0\"}"
        ),
        2.0
    );
    let _ = stop.send(());
}

#[test]
fn request_bodies_past_the_kept_size_are_streamed_to_one_replica() {
    let (only, only_n) = fake(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n0008NAK\n");
    let dir = tempfile::tempdir().unwrap();
    let placement = dir.path().join("placement.toml");
    std::fs::write(
        &placement,
        format!("[[shards]]\nname = \"s0\"\nreplicas = [\"http://{only}\"]\n"),
    )
    .unwrap();
    let rid = rid_first_on(&placement, only);
    let (front, _admin, stop) = start_front(&placement);
    let before = BYTES.load(Ordering::SeqCst);
    // 3 MiB with a Content-Length, then 3 MiB chunked (the front reads 1 MiB, then streams).
    let big = "x".repeat(3 << 20);
    let head = format!(
        "POST /{}.git/git-upload-pack HTTP/1.1\r\nHost: seed.example\r\nContent-Type: application/x-git-upload-pack-request\r\nConnection: close\r\n",
        rid.canonical()
    );
    let (status, body) = request(
        front,
        &format!("{head}Content-Length: {}\r\n\r\n{big}", big.len()),
    );
    assert_eq!((status, body.as_slice()), (200, &b"0008NAK\n"[..]));
    let mut chunked = format!("{head}Transfer-Encoding: chunked\r\n\r\n");
    for piece in big.as_bytes().chunks(100_000) {
        chunked.push_str(&format!(
            "{:x}\r\n{}\r\n",
            piece.len(),
            String::from_utf8_lossy(piece)
        ));
    }
    chunked.push_str("0\r\n\r\n");
    let (status, body) = request(front, &chunked);
    assert_eq!((status, body.as_slice()), (200, &b"0008NAK\n"[..]));
    assert_eq!(only_n.load(Ordering::SeqCst), 2);
    // Every byte reached the replica (the other tests here send a few hundred bytes at most).
    let got = BYTES.load(Ordering::SeqCst) - before;
    assert!(
        (2 * big.len()..2 * big.len() + 4096).contains(&got),
        "{got}"
    );
    let _ = stop.send(());
}
