//! The Radicle wire protocol against real peers: the official radicle-node 0.21.1 on loopback
//! (network test, no preferred seeds, static peers) and raw protocol clients built from
//! `seedd_proto` for the cases a well-behaved node never produces.
//!
//! Long by design: one scenario per wire-level behaviour, each starting its own seed and peers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use seedd_proto::crypto::Keypair;
use seedd_proto::wire::{AnnouncementMessage, Frame, Link, Message, Ping};
use seedd_tests::raw::{self, closed_within, node_announcement, now_ms, read_until};
use seedd_tests::{fixtures, wait_for, RadNode, Seed, SeedOptions};
use serde_json::Value;

const HEARTWOOD: &str = "heartwood-fixture";
const SMALL: &str = "small-fixture";

fn seed_with(repos: &[&str], p2p: &str) -> Seed {
    seed_in(repos, p2p, None)
}

fn seed_in(repos: &[&str], p2p: &str, data_dir: Option<std::path::PathBuf>) -> Seed {
    Seed::start(SeedOptions {
        repos: repos.iter().map(|s| s.to_string()).collect(),
        top_config: String::new(),
        p2p_config: format!("relay = \"always\"\n{p2p}"),
        data_dir,
        ..SeedOptions::allowing()
    })
}

fn seed_routes(seed: &Seed, query: &str) -> Vec<(String, String)> {
    let v = seed.api(&format!("/api/v1/routing{query}"));
    v["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rid"].as_str().unwrap().to_owned(),
                r["nid"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn peers(seed: &Seed) -> Vec<Value> {
    seed.api("/api/v1/peers")["peers"]
        .as_array()
        .unwrap()
        .clone()
}

fn raw_connect(seed: &Seed, src: &str, key: &Keypair) -> TcpStream {
    raw::connect(seed, src, key)
}

fn raw_tcp(to: SocketAddr, src: &str) -> TcpStream {
    raw::tcp(to, src)
}

fn send(stream: &mut TcpStream, message: Message) {
    raw::gossip(stream, message);
}

fn ban_record(seed: &Seed, ip: &str) -> Option<Value> {
    seed.api("/api/v1/bans")["bans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["ip"] == ip)
        .cloned()
}

/// The official node dials seedd: both routing tables learn the other's repositories, seedctl
/// shows the session, and it outlives radicle-node's 120 s idle limit while misbehaving raw
/// peers are disconnected and penalised without disturbing it.
#[test]
fn real_node_dials_seedd_and_stays_while_misbehaving_peers_are_dropped() {
    let f = fixtures();
    let seed = seed_with(&[HEARTWOOD], "");
    let seed_nid = seed.nid();
    let heartwood = f.rid(HEARTWOOD);
    let bob = RadNode::start("bob", &[seed.p2p_peer()]);

    // The real node lists seedd as a seed of seedd's repository…
    wait_for(
        "bob's routing table to list seedd",
        Duration::from_secs(30),
        || {
            bob.routing()
                .contains(&(heartwood.clone(), seed_nid.clone()))
                .then_some(())
        },
    );
    // …and seedd's routing table lists bob's repositories.
    wait_for(
        "seedd's routing table to list bob",
        Duration::from_secs(30),
        || {
            seed_routes(&seed, "")
                .contains(&(heartwood.clone(), bob.nid.clone()))
                .then_some(())
        },
    );
    let out = seed.seedctl(&["-o", "json", "routing", "ls", "--rid", &heartwood]);
    let routes: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(routes["routes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["nid"] == bob.nid.as_str()));
    let out = seed.seedctl(&["-o", "json", "routing", "ls", "--nid", &bob.nid]);
    let routes: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(routes["routes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["nid"] == bob.nid.as_str()));
    let out = seed.seedctl(&["-o", "json", "peers", "ls"]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let session = listed["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["nid"] == bob.nid.as_str())
        .cloned()
        .expect("bob in seedctl peers ls");
    assert_eq!(session["link"], "inbound");
    assert_eq!(session["state"], "connected");
    assert_eq!(session["alias"], "bob");
    let since = session["since"].as_u64().unwrap();
    let text = String::from_utf8(seed.seedctl(&["peers", "ls"]).stdout).unwrap();
    assert!(
        text.contains(&bob.nid) && text.contains("connected"),
        "{text}"
    );
    let connected_at = Instant::now();

    // A repository added on disk and picked up by a rescan is announced (new inventory) to
    // the connected node at once.
    let small = f.rid(SMALL);
    let canonical = small.trim_start_matches("rad:");
    seedd_tests::copy_tree(
        &f.storage().join(canonical),
        &seed.storage().join(canonical),
    );
    seed.rescan();
    wait_for(
        "bob to learn seedd's new repository",
        Duration::from_secs(20),
        || {
            bob.routing()
                .contains(&(small.clone(), seed_nid.clone()))
                .then_some(())
        },
    );
    assert_eq!(
        seed.metric("seedd_p2p_inventory_repos", &["state=\"announced\""]),
        2.0
    );

    // Misbehaving peers, each from its own loopback address.
    // 1. Bad magic.
    let mut s = raw_connect(&seed, "127.0.0.2", &Keypair::mock(101));
    s.write_all(b"rad\x02\x02\x01\x00").unwrap();
    assert!(
        closed_within(&mut s, Duration::from_secs(5)),
        "bad magic: still connected"
    );
    // 2. Oversized gossip frame (length 70 000 > 65 535).
    let mut s = raw_connect(&seed, "127.0.0.3", &Keypair::mock(102));
    s.write_all(&[b'r', b'a', b'd', 1, 0x02, 0x80, 0x01, 0x11, 0x70])
        .unwrap();
    assert!(
        closed_within(&mut s, Duration::from_secs(5)),
        "oversized: still connected"
    );
    // 3. Invalid signature.
    let key = Keypair::mock(103);
    let mut s = raw_connect(&seed, "127.0.0.4", &key);
    let mut ann = node_announcement(&key, now_ms());
    ann.signature[5] ^= 0x40;
    send(&mut s, Message::Announcement(ann));
    assert!(
        closed_within(&mut s, Duration::from_secs(5)),
        "bad signature: still connected"
    );
    // 4. Timestamp two hours in the future.
    let key = Keypair::mock(104);
    let mut s = raw_connect(&seed, "127.0.0.5", &key);
    send(
        &mut s,
        Message::Announcement(node_announcement(&key, now_ms() + 2 * 3600 * 1000)),
    );
    assert!(
        closed_within(&mut s, Duration::from_secs(5)),
        "future timestamp: still connected"
    );

    for (ip, penalty) in [
        ("127.0.0.2", 16),
        ("127.0.0.3", 16),
        ("127.0.0.4", 32),
        ("127.0.0.5", 32),
    ] {
        let r = wait_for(&format!("penalty for {ip}"), Duration::from_secs(5), || {
            ban_record(&seed, ip)
        });
        assert_eq!(r["penalty"], penalty, "{ip}: {r}");
        assert!(r["banned_until"].is_null(), "{ip} banned too early: {r}");
    }
    // The invalid announcements were not stored: the raw nodes are not in the address book.
    let nodes = seed.api("/api/v1/nodes");
    let raw_nids = [
        Keypair::mock(103).nid().to_string(),
        Keypair::mock(104).nid().to_string(),
    ];
    assert!(nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| !raw_nids.iter().any(|r| n["nid"] == r.as_str())));

    // 5. Repeat offender: two invalid signatures (64 points) → banned; the next connection is
    //    refused before the handshake.
    for _ in 0..2 {
        let key = Keypair::mock(105);
        let mut s = raw_connect(&seed, "127.0.0.6", &key);
        let mut ann = node_announcement(&key, now_ms());
        ann.signature[0] ^= 1;
        send(&mut s, Message::Announcement(ann));
        assert!(closed_within(&mut s, Duration::from_secs(5)));
    }
    let r = wait_for("ban of 127.0.0.6", Duration::from_secs(5), || {
        ban_record(&seed, "127.0.0.6").filter(|r| !r["banned_until"].is_null())
    });
    assert_eq!(r["penalty"], 64);
    let mut s = raw_tcp(seed.p2p, "127.0.0.6");
    assert!(
        closed_within(&mut s, Duration::from_secs(5)),
        "banned IP was served"
    );
    assert!(
        seed.metric(
            "seedd_p2p_connections_rejected_total",
            &["reason=\"banned\""]
        ) >= 1.0
    );
    assert!(seed.metric("seedd_p2p_bans_total", &[]) >= 1.0);
    // A session's disconnect is counted when its tasks end, which may be just after the
    // socket closed: wait for the counts rather than read them once.
    for (reason, at_least) in [
        ("decode_error", 2.0),
        ("invalid_signature", 3.0),
        ("invalid_timestamp", 1.0),
    ] {
        let label = format!("reason=\"{reason}\"");
        wait_for(
            &format!("{at_least} disconnects for {reason}"),
            Duration::from_secs(5),
            || {
                (seed.metric("seedd_p2p_disconnects_total", &[label.as_str()]) >= at_least)
                    .then_some(())
            },
        );
    }

    // The real node's session outlives its 120 s idle limit, untouched by the above.
    let idle_limit = Duration::from_secs(130);
    if let Some(rest) = idle_limit.checked_sub(connected_at.elapsed()) {
        std::thread::sleep(rest);
    }
    let session = peers(&seed)
        .into_iter()
        .find(|p| p["nid"] == bob.nid.as_str())
        .unwrap_or_else(|| panic!("bob's session is gone; seedd log:\n{}", seed.logs()));
    assert_eq!(session["since"].as_u64().unwrap(), since, "bob reconnected");
    let debug = bob.debug();
    let m = &debug["metrics"]["peers"][seed_nid.as_str()];
    assert_eq!(m["disconnects"], 0, "bob saw a disconnect: {debug}");
    assert_eq!(m["outboundConnectionAttempts"], 1, "bob redialed: {debug}");
    assert!(
        seed.metric(
            "seedd_p2p_sessions",
            &["link=\"inbound\"", "state=\"connected\""]
        ) >= 1.0
    );
}

/// seedd dials the official node (configured `connect` peer): the same exchange in the other
/// direction; the learned routes survive a restart of seedd.
#[test]
fn seedd_dials_real_node_and_routes_survive_restart() {
    let f = fixtures();
    let alice = RadNode::start("alice", &[]);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let seed = seed_in(
        &[HEARTWOOD],
        &format!("connect = [\"{}\"]\n", alice.peer()),
        Some(data.clone()),
    );
    let seed_nid = seed.nid();
    let heartwood = f.rid(HEARTWOOD);
    let small = f.rid(SMALL);
    wait_for(
        "alice's routing table to list seedd",
        Duration::from_secs(30),
        || {
            alice
                .routing()
                .contains(&(heartwood.clone(), seed_nid.clone()))
                .then_some(())
        },
    );
    wait_for(
        "seedd's routing table to list alice's repos",
        Duration::from_secs(30),
        || {
            seed_routes(&seed, &format!("?nid={}", alice.nid))
                .contains(&(small.clone(), alice.nid.clone()))
                .then_some(())
        },
    );
    let p = peers(&seed);
    let session = p.iter().find(|p| p["nid"] == alice.nid.as_str()).unwrap();
    assert_eq!(session["link"], "outbound");
    assert!(
        seed.metric(
            "seedd_p2p_handshakes_total",
            &["link=\"outbound\"", "result=\"ok\""]
        ) >= 1.0
    );

    // Restart without the connect peer: the routing table and address book come back from
    // RocksDB.
    let alice_nid = alice.nid.clone();
    drop(alice);
    assert!(seed.stop().success());
    let seed = seed_in(&[], "", Some(data));
    assert_eq!(alice_nid_of(&seed, &small), alice_nid);
    assert!(seed.api("/api/v1/nodes")["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["alias"] == "alice"));
    assert!(seed.metric("seedd_p2p_routing_entries", &[]) >= 1.0);
}

fn alice_nid_of(seed: &Seed, rid: &str) -> String {
    let routes = seed_routes(seed, &format!("?rid={rid}"));
    routes
        .first()
        .unwrap_or_else(|| panic!("no route for {rid} after restart"))
        .1
        .clone()
}

/// Two official nodes connected only through seedd learn of each other's repositories.
#[test]
fn relay_between_two_real_nodes() {
    let f = fixtures();
    // seedd seeds nothing (default policy block: it relays but does not fetch), so what bob
    // learns about alice can only come by relay.
    let seed = Seed::start(SeedOptions {
        p2p_config: "relay = \"always\"\n".into(),
        ..Default::default()
    });
    let small = f.rid(SMALL);
    let alice = RadNode::start("alice", &[seed.p2p_peer()]);
    let bob = RadNode::start("bob", &[seed.p2p_peer()]);
    wait_for(
        "bob to learn alice's repos through seedd",
        Duration::from_secs(40),
        || {
            bob.routing()
                .contains(&(small.clone(), alice.nid.clone()))
                .then_some(())
        },
    );
    assert!(
        !bob.routing().iter().any(|(_, n)| *n == seed.nid()),
        "seedd announced no repos"
    );
    // Bob never connected to alice directly.
    let debug = bob.debug();
    assert!(
        debug["metrics"]["peers"].get(alice.nid.as_str()).is_none(),
        "{debug}"
    );
    assert!(seed.metric("seedd_p2p_relayed_total", &[]) >= 1.0);
}

/// A raw client sees the session start exactly as protocol.md §5.1 says, gets exact pongs,
/// and is rate limited per node id when the limit is configured tight.
#[test]
fn raw_peer_session_start_pong_and_rate_limit() {
    let seed = seed_with(
        &[HEARTWOOD],
        "[p2p.rate]\nexempt_local = false\ninbound = { fill_rate = 0.5, capacity = 5.0 }\nconnect = { fill_rate = 0.1, capacity = 3.0 }\n",
    );
    let key = Keypair::mock(200);
    let mut s = raw_connect(&seed, "127.0.0.7", &key);
    let (frames, closed) = read_until(&mut s, Duration::from_secs(10), |f| f.len() >= 3);
    assert!(!closed);
    let kinds: Vec<_> = frames
        .iter()
        .map(|f| match f {
            Frame::Gossip { stream, message } => {
                // The listener sends on its own gossip stream id (3).
                assert_eq!(stream.as_u64(), 3);
                message.message_type() as u16
            }
            other => panic!("unexpected frame {other:?}"),
        })
        .collect();
    assert_eq!(&kinds[..3], &[2, 4, 8], "node, inventory, subscribe");
    let Frame::Gossip {
        message: Message::Announcement(node),
        ..
    } = &frames[0]
    else {
        unreachable!()
    };
    assert!(node.verify());
    assert_eq!(node.node.to_string(), seed.nid());
    let AnnouncementMessage::Node(n) = &node.message else {
        unreachable!()
    };
    assert!(n.is_seed());
    assert!(n.timestamp <= now_ms());

    // Ping → Pong with exactly ponglen zero bytes.
    send(
        &mut s,
        Message::Ping(Ping {
            ponglen: 777,
            zeroes: 3,
        }),
    );
    let (frames, _) = read_until(&mut s, Duration::from_secs(5), |f| {
        f.iter().any(|f| {
            matches!(
                f,
                Frame::Gossip {
                    message: Message::Pong { .. },
                    ..
                }
            )
        })
    });
    assert!(frames.iter().any(|f| matches!(
        f,
        Frame::Gossip {
            message: Message::Pong { zeroes: 777 },
            ..
        }
    )));

    // 20 pings at once against a 5-token bucket: most are dropped, the session survives.
    for _ in 0..20 {
        send(
            &mut s,
            Message::Ping(Ping {
                ponglen: 1,
                zeroes: 0,
            }),
        );
    }
    let (frames, closed) = read_until(&mut s, Duration::from_secs(3), |_| false);
    assert!(!closed, "rate limiting must drop messages, not the peer");
    let pongs = frames
        .iter()
        .filter(|f| {
            matches!(
                f,
                Frame::Gossip {
                    message: Message::Pong { zeroes: 1 },
                    ..
                }
            )
        })
        .count();
    assert!((2..20).contains(&pongs), "{pongs} pongs");
    assert!(seed.metric("seedd_p2p_rate_limited_total", &["scope=\"nid\""]) >= 1.0);

    // Connection attempts per IP: capacity 3 (one used above) → the 3rd new one is refused.
    let _a = raw_tcp(seed.p2p, "127.0.0.7");
    let _b = raw_tcp(seed.p2p, "127.0.0.7");
    let mut c = raw_tcp(seed.p2p, "127.0.0.7");
    assert!(closed_within(&mut c, Duration::from_secs(5)));
    assert!(
        seed.metric(
            "seedd_p2p_connections_rejected_total",
            &["reason=\"rate_limited\""]
        ) >= 1.0
    );
}

/// One host cycling through fresh node ids shares one message budget (`p2p.rate.host`):
/// every key has a full per-node bucket, yet pings beyond the host's budget are dropped
/// (scope `host`) without dropping the sessions, and another host keeps its own budget.
#[test]
fn fresh_node_ids_from_one_host_share_its_message_budget() {
    let seed = seed_with(
        &[SMALL],
        "[p2p.rate]\nexempt_local = false\nconnect = { fill_rate = 1.0, capacity = 100.0 }\nhost = { fill_rate = 0.1, capacity = 10.0 }\n",
    );
    let ping = || {
        Message::Ping(Ping {
            ponglen: 1,
            zeroes: 0,
        })
    };
    let pongs = |frames: &[Frame]| {
        frames
            .iter()
            .filter(|f| {
                matches!(
                    f,
                    Frame::Gossip {
                        message: Message::Pong { zeroes: 1 },
                        ..
                    }
                )
            })
            .count()
    };
    let mut sessions = Vec::new();
    let mut answered = 0;
    for i in 0..5 {
        let mut s = raw_connect(&seed, "127.0.0.9", &Keypair::mock(400 + i));
        for _ in 0..5 {
            send(&mut s, ping());
        }
        let (frames, closed) = read_until(&mut s, Duration::from_secs(2), |_| false);
        assert!(!closed, "rate limiting must drop messages, not the peer");
        answered += pongs(&frames);
        sessions.push(s);
    }
    // 25 pings, each within its node's bucket, against one 10-token host bucket (+ refill).
    assert!((10..=12).contains(&answered), "{answered} pongs");
    assert!(seed.metric("seedd_p2p_rate_limited_total", &["scope=\"host\""]) >= 13.0);
    assert_eq!(
        seed.metric("seedd_p2p_rate_limited_total", &["scope=\"nid\""]),
        0.0
    );
    let mut other = raw_connect(&seed, "127.0.0.10", &Keypair::mock(410));
    send(&mut other, ping());
    let (frames, _) = read_until(&mut other, Duration::from_secs(5), |f| pongs(f) == 1);
    assert_eq!(pongs(&frames), 1, "another host has its own budget");
    for s in &mut sessions {
        assert!(!closed_within(s, Duration::from_millis(300)));
    }
}

/// A Subscribe whose answer is far larger than a session's outbox (1024 frames) is streamed
/// as the subscriber reads: every stored announcement arrives and the subscriber stays
/// connected (it used to be dropped as a slow reader, `outbox_full`).
#[test]
fn subscribe_answer_larger_than_the_outbox_is_delivered_whole() {
    let seed = seed_with(&[SMALL], "");
    let n = 4000u64;
    let mut a = raw_connect(&seed, "127.0.0.11", &Keypair::mock(500));
    let t = now_ms() - 60_000;
    for i in 0..n {
        let key = Keypair::mock(10_000 + i);
        send(
            &mut a,
            Message::Announcement(node_announcement(&key, t + i)),
        );
    }
    // Messages of a session are handled in order: the Pong means all were stored.
    send(
        &mut a,
        Message::Ping(Ping {
            ponglen: 9,
            zeroes: 0,
        }),
    );
    let (_, closed) = read_until(&mut a, Duration::from_secs(60), |f| {
        f.iter().any(|f| {
            matches!(
                f,
                Frame::Gossip {
                    message: Message::Pong { zeroes: 9 },
                    ..
                }
            )
        })
    });
    assert!(!closed);
    let ours: seedd_proto::crypto::NodeId = seed.nid().parse().unwrap();
    let mut b = raw_connect(&seed, "127.0.0.12", &Keypair::mock(501));
    send(
        &mut b,
        Message::Subscribe(seedd_proto::wire::Subscribe::all()),
    );
    let count = |f: &[Frame]| {
        f.iter()
            .filter(|f| {
                matches!(
                    f,
                    Frame::Gossip {
                        message: Message::Announcement(ann),
                        ..
                    } if matches!(ann.message, AnnouncementMessage::Node(_))
                        && ann.node != ours
                )
            })
            .count()
    };
    let (frames, closed) = read_until(&mut b, Duration::from_secs(60), |f| count(f) >= n as usize);
    assert!(
        !closed,
        "subscriber dropped after {} announcements",
        count(&frames)
    );
    assert_eq!(count(&frames), n as usize);
    assert!(!closed_within(&mut b, Duration::from_millis(500)));
    assert_eq!(
        seed.metric(
            "seedd_p2p_dropped_messages_total",
            &["reason=\"outbox_full\""]
        ),
        0.0
    );
}

/// A fresh user's real node, connected only to seedd, `rad clone`s a repository from it over
/// Radicle git streams — issues and patches included — and is refused a private one.
#[test]
fn rad_clone_from_seedd_over_radicle_streams() {
    let f = fixtures();
    let seed = seed_with(&["heartwood-fixture", "secret-fixture"], "");
    let heartwood = f.rid(HEARTWOOD);
    let secret = f.rid("secret-fixture");
    let carol = RadNode::start("carol", &[seed.p2p_peer()]);
    wait_for(
        "carol to see seedd as a seed",
        Duration::from_secs(30),
        || {
            carol
                .routing()
                .contains(&(heartwood.clone(), seed.nid()))
                .then_some(())
        },
    );
    let work = tempfile::tempdir().unwrap();
    let out = carol.rad_in(
        work.path(),
        &["clone", &heartwood, "wc", "--timeout", "30s"],
    );
    assert!(
        out.status.success(),
        "rad clone failed: {}\n{}\nseedd log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        seed.logs()
    );
    let wc = work.path().join("wc");
    let issues = carol.rad_in(&wc, &["issue", "list"]);
    assert!(
        String::from_utf8_lossy(&issues.stdout).contains("Fixture issue"),
        "{}",
        String::from_utf8_lossy(&issues.stdout)
    );
    let patches = carol.rad_in(&wc, &["patch", "list", "--all"]);
    assert!(
        String::from_utf8_lossy(&patches.stdout).contains("Fixture patch"),
        "{}",
        String::from_utf8_lossy(&patches.stdout)
    );
    let expected = f.repo(HEARTWOOD)["head"].as_str().map(str::to_owned);
    let head = seedd_tests::stdout(&seedd_tests::run(
        seedd_tests::git(work.path())
            .current_dir(&wc)
            .args(["rev-parse", "HEAD"]),
    ));
    if let Some(expected) = expected {
        assert_eq!(head.trim(), expected);
    }
    assert!(seed.metric("seedd_p2p_git_serves_total", &["result=\"ok\""]) >= 1.0);
    assert!(seed.metric("seedd_p2p_git_served_bytes_total", &[]) > 0.0);

    // A private repository is not served to a node outside its allow list: the stream is
    // closed and the clone fails.
    let out = carol.rad_in(
        work.path(),
        &[
            "clone",
            &secret,
            "secret",
            "--seed",
            &seed.nid(),
            "--timeout",
            "15s",
        ],
    );
    assert!(!out.status.success(), "private repository was cloned");
    assert!(!work.path().join("secret").exists());
    wait_for("refusal counted", Duration::from_secs(10), || {
        (seed.metric(
            "seedd_p2p_git_serves_total",
            &["result=\"refused_private\""],
        ) >= 1.0)
            .then_some(())
    });
    assert_eq!(seed.metric("seedd_p2p_git_serves_in_flight", &[]), 0.0);
}

/// Serving over Radicle streams is capped: with one serve slot taken by a stalled fetcher, a
/// second stream waits for the queue timeout and is refused by closing it; the stalled one is
/// closed after the stream idle timeout. Unknown repositories are refused at once.
#[test]
fn git_stream_serving_is_capped_and_refusals_close_the_stream() {
    use seedd_proto::wire::{Control, StreamId};
    let f = fixtures();
    let heartwood = f.rid(HEARTWOOD);
    let seed = seed_with(
        &[HEARTWOOD],
        "max_concurrent_serves = 1\nserve_queue_timeout_secs = 1\nstream_idle_timeout_secs = 3\n",
    );
    let key = Keypair::mock(300);
    let mut s = raw_connect(&seed, "127.0.0.8", &key);
    let header = |rid: &str| {
        let payload = format!(
            "git-upload-pack /{}\0\0version=2\0",
            rid.trim_start_matches("rad:")
        );
        format!("{:04x}{payload}", payload.len() + 4).into_bytes()
    };
    let open = |s: &mut TcpStream, n: u64, rid: &str| {
        let id = StreamId::git(Link::Outbound, n).unwrap();
        raw::send_frame(
            s,
            Frame::control(Link::Outbound, Control::Open { stream: id }),
        );
        raw::send_frame(s, Frame::git(id, header(rid)));
        id
    };
    let closed = |frames: &[Frame], id: StreamId| {
        frames.iter().any(|f| {
            matches!(f, Frame::Control { control: Control::Close { stream }, .. } if *stream == id)
        })
    };
    // 1. Takes the only slot; upload-pack answers with its capability advertisement.
    let first = open(&mut s, 1, &heartwood);
    let (frames, _) = read_until(&mut s, Duration::from_secs(10), |fs| {
        fs.iter()
            .any(|f| matches!(f, Frame::Git { stream, .. } if *stream == first))
    });
    assert!(frames
        .iter()
        .any(|f| matches!(f, Frame::Git { stream, .. } if *stream == first)));
    // 2. Waits 1 s for a slot, then is refused (closed).
    let second = open(&mut s, 2, &heartwood);
    let (frames, _) = read_until(&mut s, Duration::from_secs(10), |fs| closed(fs, second));
    assert!(closed(&frames, second), "second stream not refused");
    assert!(seed.metric("seedd_p2p_git_serves_total", &["result=\"refused_busy\""]) >= 1.0);
    // 3. An unknown repository: closed at once.
    let third = open(&mut s, 3, "rad:z3gqcJUoA1n9HaHKufZs5FCSGazv5");
    let (frames, _) = read_until(&mut s, Duration::from_secs(5), |fs| closed(fs, third));
    assert!(closed(&frames, third));
    // 4. The stalled first stream is closed by the idle timeout; the session stays up.
    let (frames, gone) = read_until(&mut s, Duration::from_secs(10), |fs| closed(fs, first));
    assert!(
        closed(&frames, first) && !gone,
        "stalled stream not closed by the idle timeout"
    );
    // (Either our idle timer or upload-pack's own --timeout ends it.)
    let ended = seed.metric("seedd_p2p_git_serves_total", &["result=\"timeout\""])
        + seed.metric("seedd_p2p_git_serves_total", &["result=\"error\""]);
    assert!(ended >= 1.0);
    assert_eq!(seed.metric("seedd_p2p_git_serves_in_flight", &[]), 0.0);
}

/// Whether a node's gossip database (`node/node.db` and its WAL: routing, announcements,
/// sync status) holds `rid`, as text (`z…`) or as its 20 raw bytes (inside stored messages).
/// (Its seeding policy is in `policies.db`.)
fn node_db_mentions(node: &RadNode, rid: &str) -> bool {
    let text = rid.trim_start_matches("rad:").as_bytes().to_vec();
    let raw = rid
        .parse::<seedd_proto::crypto::RepoId>()
        .unwrap()
        .as_bytes()
        .to_vec();
    std::fs::read_dir(node.home.join("node"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("node.db"))
        })
        .filter_map(|p| std::fs::read(p).ok())
        .any(|bytes| {
            [&text, &raw]
                .iter()
                .any(|needle| bytes.windows(needle.len()).any(|w| w == needle.as_slice()))
        })
}

/// A private repository stays invisible to every node outside its delegates and allow list:
/// seedd (allowed) replicates it from its delegate; a node on the allow list hears seedd's refs
/// announcement and clones it; nodes not allowed — connected before (seedd's own announcement,
/// and the delegate's, which reaches seedd before seedd holds the repository, relayed) or after
/// (Subscribe answers) — have no route to it and store nothing about it.
#[test]
fn private_repository_is_announced_only_to_allowed_nodes() {
    let f = fixtures();
    let secret = f.rid("secret-fixture");
    let heartwood = f.rid(HEARTWOOD);
    let seed = seed_with(&[HEARTWOOD], "");
    let seed_nid = seed.nid();
    let subscribed = |node: &RadNode| {
        wait_for(
            &format!("{} subscribed to seedd", node.name),
            Duration::from_secs(30),
            || {
                peers(&seed)
                    .iter()
                    .any(|p| p["nid"] == node.nid.as_str() && p["subscribed"] == true)
                    .then_some(())
            },
        );
    };
    // Dave (to be allowed) and Carol (never allowed) know the RID and seed it: their
    // subscriptions name it, so only visibility can keep it from them.
    let dave = RadNode::start("dave", &[seed.p2p_peer()]);
    let carol = RadNode::start("carol", &[seed.p2p_peer()]);
    for node in [&dave, &carol] {
        subscribed(node);
        node.rad(&["seed", &secret, "--no-fetch"]);
    }

    // Alice, the delegate, allows seedd and dave (offline, before her node starts).
    let dir = tempfile::Builder::new()
        .prefix("rn")
        .tempdir_in("/tmp")
        .unwrap();
    let alice_home = dir.path().join("alice");
    seedd_tests::copy_tree(&f.dir.join("homes").join("alice"), &alice_home);
    seedd_tests::run(
        std::process::Command::new(seedd_tests::radicle_bin("rad"))
            .args([
                "id",
                "update",
                "--repo",
                &secret,
                "--title",
                "Allow the seed and dave",
                "--description",
                "Allow the seed and dave to see it.",
                "--allow",
                &format!("did:key:{seed_nid}"),
                "--allow",
                &format!("did:key:{}", dave.nid),
                "--no-confirm",
            ])
            .env("RAD_HOME", &alice_home)
            .env("RAD_PASSPHRASE", "")
            .env("RAD_SOCKET", dir.path().join("no-node.sock")),
    );
    let alice = RadNode::start_home(dir, "alice", &[seed.p2p_peer()]);
    wait_for("alice connected to seedd", Duration::from_secs(30), || {
        peers(&seed)
            .iter()
            .any(|p| p["nid"] == alice.nid.as_str() && p["state"] == "connected")
            .then_some(())
    });
    // seedd (allow list) replicates it from alice: on her announcement or when asked.
    let held = || {
        let (status, body) = seed.admin("GET", &format!("/api/v1/repos/{secret}"), None);
        (status == 200).then(|| body["repo"].clone())
    };
    let repo = wait_for(
        "seedd to replicate the private repository from its delegate",
        Duration::from_secs(60),
        || {
            if let Some(repo) = held() {
                return Some(repo);
            }
            seedd_tests::run_unchecked(&seed, &["fetch", &secret, "--from", &alice.nid]);
            held()
        },
    );
    assert_eq!(repo["visibility"]["type"], "private", "{repo}");
    assert_eq!(
        repo["visibility"]["allow"].as_array().map(Vec::len),
        Some(2),
        "{repo}"
    );

    // Dave (allow list) hears seedd's refs announcement and clones the repository from it.
    seedd_tests::wait_for_or(
        "dave to see seedd as a seed of the private repository",
        // Generous: on a loaded 2-core CI machine four real nodes and seedd share the CPU.
        Duration::from_secs(90),
        || {
            dave.routing()
                .contains(&(secret.clone(), seed_nid.clone()))
                .then_some(())
        },
        || format!("seedd log:\n{}\ndave log:\n{}", seed.logs(), dave.logs()),
    );
    let work = tempfile::tempdir().unwrap();
    let out = dave.rad_in(
        work.path(),
        &[
            "clone",
            &secret,
            "secret",
            "--seed",
            &seed_nid,
            "--timeout",
            "30s",
        ],
    );
    assert!(
        out.status.success(),
        "allowed node could not clone: {}{}\nseedd log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        seed.logs()
    );
    assert!(work.path().join("secret").join("SECRET.md").exists());
    assert!(
        node_db_mentions(&dave, &secret),
        "the check finds what is there"
    );

    // Erin (not allowed, seeding it too) connects afterwards: seedd's Subscribe answer must
    // leave it out.
    let erin = RadNode::start("erin", &[]);
    erin.rad(&["seed", &secret, "--no-fetch"]);
    erin.rad(&["node", "connect", &seed.p2p_peer(), "--timeout", "30s"]);
    wait_for(
        "erin to see seedd's public inventory",
        Duration::from_secs(30),
        || {
            erin.routing()
                .contains(&(heartwood.clone(), seed_nid.clone()))
                .then_some(())
        },
    );
    subscribed(&erin);
    // Anything sent would have arrived by now (dave already cloned; erin got the inventory).
    std::thread::sleep(Duration::from_secs(3));
    for node in [&carol, &erin] {
        let routes = node.routing();
        assert!(
            routes.iter().all(|(rid, _)| *rid != secret),
            "{} (not allowed) learnt of the private repository: {routes:?}\n{}",
            node.name,
            node.logs()
        );
        assert!(
            !node_db_mentions(node, &secret),
            "{}'s node database mentions the private repository",
            node.name
        );
        assert!(!node.repo_path(&secret).exists());
    }
    assert_eq!(
        seed.metric(
            "seedd_p2p_git_serves_total",
            &["result=\"refused_private\""]
        ),
        0.0,
        "a node not allowed tried to fetch it, so it heard of it"
    );
}

/// One peer cannot hold every fetch slot, and no fetch outlives `p2p.fetch_deadline_secs`: a
/// raw peer answers seedd's git streams by trickling a never-ending capability advertisement
/// (never silent, so the inactivity timeout never fires). With 2 slots and 1 per peer, its
/// second fetch waits for its own slot without taking the free global one, so a fetch from
/// the real node runs at once; both trickled fetches end at the deadline.
#[test]
fn a_trickling_peer_holds_one_slot_and_is_cut_at_the_fetch_deadline() {
    use seedd_proto::wire::{Control, StreamId};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let heartwood = fixtures().rid(HEARTWOOD);
    // Default policy block: only the admin requests below fetch.
    let seed = Seed::start(SeedOptions {
        p2p_config: "max_concurrent_fetches = 2\nmax_fetches_per_peer = 1\nfetch_timeout_secs = 30\nfetch_deadline_secs = 8\n".into(),
        ..Default::default()
    });
    let alice = RadNode::start("alice", &[seed.p2p_peer()]);
    let key = Keypair::mock(400);
    let raw_nid = key.nid().to_string();
    let s = raw_connect(&seed, "127.0.0.9", &key);
    wait_for(
        "alice and the raw peer connected",
        Duration::from_secs(30),
        || {
            let p = peers(&seed);
            let up = |nid: &str| {
                p.iter()
                    .any(|p| p["nid"] == nid && p["state"] == "connected")
            };
            (up(&alice.nid) && up(&raw_nid)).then_some(())
        },
    );
    // The raw peer: every stream seedd opens gets one byte every 300 ms of a protocol-v2
    // capability advertisement that never ends.
    let stop = Arc::new(AtomicBool::new(false));
    let trickler = {
        let stop = stop.clone();
        let mut s = s;
        std::thread::spawn(move || {
            let first = b"000eversion 2\n";
            let line = b"000dagent=raw\n";
            let mut streams: Vec<(StreamId, usize)> = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let (frames, closed) = read_until(&mut s, Duration::from_millis(300), |_| false);
                if closed {
                    return;
                }
                for f in frames {
                    if let Frame::Control {
                        control: Control::Open { stream },
                        ..
                    } = f
                    {
                        streams.push((stream, 0));
                    }
                }
                for (stream, at) in &mut streams {
                    let byte = match first.get(*at) {
                        Some(b) => *b,
                        None => line[(*at - first.len()) % line.len()],
                    };
                    *at += 1;
                    raw::send_frame(&mut s, Frame::git(*stream, vec![byte]));
                }
            }
        })
    };
    let fetch = |rid: String, from: String| {
        let seed = &seed;
        move || {
            let started = Instant::now();
            let (status, v) = seed.admin(
                "POST",
                "/api/v1/fetch",
                Some(serde_json::json!({ "rid": rid, "from": from })),
            );
            (status, v, started.elapsed(), Instant::now())
        }
    };
    std::thread::scope(|scope| {
        let raw1 = scope.spawn(fetch(
            "rad:z3gqcJUoA1n9HaHKufZs5FCSGazv5".into(),
            raw_nid.clone(),
        ));
        let raw2 = scope.spawn(fetch(fixtures().rid(SMALL), raw_nid.clone()));
        wait_for(
            "one trickled fetch running, one waiting",
            Duration::from_secs(10),
            || {
                (seed.metric("seedd_fetches_active", &[]) == 1.0
                    && seed.metric("seedd_fetch_queue_depth", &[]) == 1.0)
                    .then_some(())
            },
        );
        let (status, v, took, alice_done) = fetch(heartwood.clone(), alice.nid.clone())();
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["cloned"], true, "{v}");
        let (s1, v1, t1, done1) = raw1.join().unwrap();
        let (s2, v2, t2, done2) = raw2.join().unwrap();
        assert!(
            alice_done < done1.min(done2),
            "the real node's fetch ({took:?}) waited for the trickled ones"
        );
        for (status, v, t) in [(s1, v1, t1), (s2, v2, t2)] {
            assert_eq!(status, 502, "{v}");
            assert_eq!(v["reason"], "deadline", "{v}");
            assert!(t >= Duration::from_secs(7), "{t:?}");
        }
        // One after the other: the second waited for the peer's only slot.
        let (first, second) = (t1.min(t2), t1.max(t2));
        assert!(
            second >= first + Duration::from_secs(6),
            "{first:?} {second:?}"
        );
    });
    stop.store(true, Ordering::Relaxed);
    let _ = trickler.join();
    assert_eq!(
        seed.metric("seedd_fetches_total", &["result=\"deadline\""]),
        2.0
    );
    assert_eq!(seed.metric("seedd_fetches_active", &[]), 0.0);
}

/// A stream holds its serve slot only until its first request is answered, and then only while
/// git works for it: with one slot, a fetcher that got its `ls-refs` answer and then takes its
/// time (a Radicle fetch validates refs between rounds) does not block a second stream, which
/// is served at once instead of being refused after the queue timeout.
#[test]
fn an_idle_stream_between_requests_holds_no_serve_slot() {
    use seedd_proto::wire::{Control, StreamId};
    let heartwood = fixtures().rid(HEARTWOOD);
    let seed = seed_with(
        &[HEARTWOOD],
        "max_concurrent_serves = 1\nserve_queue_timeout_secs = 1\nstream_idle_timeout_secs = 60\n",
    );
    let key = Keypair::mock(302);
    let mut s = raw_connect(&seed, "127.0.0.11", &key);
    let header = {
        let payload = format!(
            "git-upload-pack /{}\0\0version=2\0",
            heartwood.trim_start_matches("rad:")
        );
        format!("{:04x}{payload}", payload.len() + 4).into_bytes()
    };
    let ls_refs = b"0014command=ls-refs\n00010000".to_vec();
    let git_bytes = |frames: &[Frame], id: StreamId| -> Vec<u8> {
        frames
            .iter()
            .filter_map(|f| match f {
                Frame::Git { stream, data } if *stream == id => Some(data.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    };
    let closed = |frames: &[Frame], id: StreamId| {
        frames.iter().any(|f| {
            matches!(f, Frame::Control { control: Control::Close { stream }, .. } if *stream == id)
        })
    };
    let has = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    // Open a stream, send `ls-refs` and read the refs; the stream then idles (not closed).
    let serve = |s: &mut TcpStream, n: u64| {
        let id = StreamId::git(Link::Outbound, n).unwrap();
        raw::send_frame(
            s,
            Frame::control(Link::Outbound, Control::Open { stream: id }),
        );
        raw::send_frame(s, Frame::git(id, header.clone()));
        raw::send_frame(s, Frame::git(id, ls_refs.clone()));
        let (frames, gone) = read_until(s, Duration::from_secs(10), |fs| {
            has(&git_bytes(fs, id), b"refs/") || closed(fs, id)
        });
        assert!(!gone, "session dropped");
        assert!(!closed(&frames, id), "stream {n} refused");
        assert!(
            has(&git_bytes(&frames, id), b"refs/"),
            "stream {n}: no refs"
        );
    };
    serve(&mut s, 1);
    // The first stream is idle between requests and holds no slot: the second one is served,
    // well within the queue timeout (before: refused after 1 s, `refused_busy`).
    let t0 = std::time::Instant::now();
    serve(&mut s, 2);
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(
        seed.metric("seedd_p2p_git_serves_total", &["result=\"refused_busy\""]),
        0.0
    );
}

/// Input a peer sends on a git stream that nobody reads yet (the serve waits for a slot) is
/// bounded: past 4 MiB on one stream, or 8 MiB over the streams of its session, the stream is
/// closed at once (not after the queue timeout), counted, and the session stays up.
#[test]
fn unread_git_stream_input_is_bounded_per_stream_and_per_session() {
    use seedd_proto::wire::{Control, StreamId};
    let heartwood = fixtures().rid(HEARTWOOD);
    let seed = seed_with(
        &[HEARTWOOD],
        "max_concurrent_serves = 1\nserve_queue_timeout_secs = 60\nstream_idle_timeout_secs = 120\n",
    );
    let key = Keypair::mock(301);
    let mut s = raw_connect(&seed, "127.0.0.10", &key);
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    let header = {
        let payload = format!(
            "git-upload-pack /{}\0\0version=2\0",
            heartwood.trim_start_matches("rad:")
        );
        format!("{:04x}{payload}", payload.len() + 4).into_bytes()
    };
    let open = |s: &mut TcpStream, n: u64, mib: usize| {
        let id = StreamId::git(Link::Outbound, n).unwrap();
        raw::send_frame(
            s,
            Frame::control(Link::Outbound, Control::Open { stream: id }),
        );
        raw::send_frame(s, Frame::git(id, header.clone()));
        for _ in 0..mib {
            raw::send_frame(s, Frame::git(id, vec![b'0'; 1024 * 1024]));
        }
        id
    };
    let closed = |frames: &[Frame], id: StreamId| {
        frames.iter().any(|f| {
            matches!(f, Frame::Control { control: Control::Close { stream }, .. } if *stream == id)
        })
    };
    // 1. Takes the only serve slot (answered with the capability advertisement).
    let first = open(&mut s, 1, 0);
    let (frames, _) = read_until(&mut s, Duration::from_secs(10), |fs| {
        fs.iter()
            .any(|f| matches!(f, Frame::Git { stream, .. } if *stream == first))
    });
    assert!(frames
        .iter()
        .any(|f| matches!(f, Frame::Git { stream, .. } if *stream == first)));
    // 2. Waits for a slot while 5 MiB arrive: closed at once.
    let second = open(&mut s, 2, 5);
    let (frames, gone) = read_until(&mut s, Duration::from_secs(5), |fs| closed(fs, second));
    assert!(
        closed(&frames, second) && !gone,
        "a stream holding 5 MiB of unread input was not closed"
    );
    assert_eq!(
        seed.metric("seedd_p2p_git_stream_overflows_total", &[]),
        1.0
    );
    // 3. Three waiting streams of 3 MiB each: within the stream bound, but the third passes
    //    the session's.
    let third = open(&mut s, 3, 3);
    let fourth = open(&mut s, 4, 3);
    let fifth = open(&mut s, 5, 3);
    let (frames, gone) = read_until(&mut s, Duration::from_secs(5), |fs| closed(fs, fifth));
    assert!(!gone);
    assert!(
        closed(&frames, fifth),
        "the session's bound was not applied"
    );
    assert!(!closed(&frames, third) && !closed(&frames, fourth));
    assert_eq!(
        seed.metric("seedd_p2p_git_stream_overflows_total", &[]),
        2.0
    );
    assert!(seed
        .logs()
        .contains("more git stream input than may wait unread"));
    // The session is still up.
    send(
        &mut s,
        Message::Ping(Ping {
            ponglen: 5,
            zeroes: 0,
        }),
    );
    let (frames, gone) = read_until(&mut s, Duration::from_secs(5), |fs| {
        fs.iter().any(|f| {
            matches!(
                f,
                Frame::Gossip {
                    message: Message::Pong { zeroes: 5 },
                    ..
                }
            )
        })
    });
    assert!(
        !gone
            && frames.iter().any(|f| matches!(
                f,
                Frame::Gossip {
                    message: Message::Pong { zeroes: 5 },
                    ..
                }
            )),
        "session dropped"
    );
}

/// Gossip about a repository seedd holds starts no fetch (protocol.md §5.4): an inventory
/// naming it (only a missing repository is cloned) and refs naming only seedd's own namespace
/// (a peer that has our refs has nothing for us). Refs naming the peer's namespace do start
/// one — the control that hints still flow.
#[test]
fn gossip_about_a_held_repository_starts_no_fetch() {
    use seedd_proto::crypto::RepoId;
    use seedd_proto::wire::message::{InventoryAnnouncement, RefsAnnouncement};
    use seedd_proto::wire::{Control, Oid, RefsAt, Subscribe};
    let seed = seed_with(&[HEARTWOOD], "");
    let rid: RepoId = fixtures().rid(HEARTWOOD).parse().unwrap();
    let me: seedd_proto::crypto::NodeId = seed.nid().parse().unwrap();
    let key = Keypair::mock(201);
    let mut s = raw_connect(&seed, "127.0.0.1", &key);
    let (_, closed) = read_until(&mut s, Duration::from_secs(10), |f| f.len() >= 3);
    assert!(!closed);
    let fetches = |seed: &Seed| seed.metric("seedd_fetches_total", &[]);
    let opened = |frames: &[Frame]| {
        frames.iter().any(|f| {
            matches!(
                f,
                Frame::Control {
                    control: Control::Open { .. },
                    ..
                }
            )
        })
    };
    let t = now_ms();
    send(&mut s, Message::Announcement(node_announcement(&key, t)));
    send(&mut s, Message::Subscribe(Subscribe::all()));
    let refs = |remote, ts| {
        AnnouncementMessage::Refs(RefsAnnouncement {
            rid,
            refs: vec![RefsAt {
                remote,
                at: Oid([7; 20]),
            }],
            timestamp: ts,
        })
        .sign(&key)
        .unwrap()
    };
    let inventory = AnnouncementMessage::Inventory(InventoryAnnouncement {
        inventory: vec![rid],
        timestamp: t,
    })
    .sign(&key)
    .unwrap();
    send(&mut s, Message::Announcement(inventory));
    send(&mut s, Message::Announcement(refs(me, t)));
    let (frames, closed) = read_until(&mut s, Duration::from_secs(5), opened);
    assert!(!closed);
    assert!(!opened(&frames), "seedd opened a git stream: {frames:?}");
    assert_eq!(fetches(&seed), 0.0);
    // The peer's own namespace is news: seedd fetches it (the stream is not answered).
    send(&mut s, Message::Announcement(refs(key.nid(), t + 1)));
    let (frames, _) = read_until(&mut s, Duration::from_secs(10), opened);
    assert!(opened(&frames), "no fetch for the peer's refs: {frames:?}");
}

/// Issue 30 §2: the gossip of one read is screened under the core lock, verified outside it
/// and acted on in order. A NodeAnnouncement and the Inventory written with it in one segment
/// (as peers do on connect) both count; copies of it from other sessions are dropped as stale
/// without a verification and without a penalty; a broken signature after a good
/// announcement in the same write disconnects the peer, the good one still stored.
#[test]
fn one_read_of_gossip_is_verified_outside_the_lock_in_order() {
    use seedd_proto::crypto::RepoId;
    use seedd_proto::wire::message::InventoryAnnouncement;
    let seed = seed_with(&[], "");
    let author = Keypair::mock(301);
    let t = now_ms();
    let rid = RepoId::from_oid_bytes([0x33; 20]);
    let inventory = |ts| {
        AnnouncementMessage::Inventory(InventoryAnnouncement {
            inventory: vec![rid],
            timestamp: ts,
        })
        .sign(&author)
        .unwrap()
    };
    let one_write = |stream: &mut TcpStream, messages: Vec<Message>| {
        let mut bytes = Vec::new();
        for m in messages {
            Frame::gossip(Link::Outbound, m)
                .encode_into(&mut bytes)
                .unwrap();
        }
        stream.write_all(&bytes).unwrap();
    };
    let mut s = raw_connect(&seed, "127.0.0.1", &author);
    let (_, closed) = read_until(&mut s, Duration::from_secs(10), |f| f.len() >= 3);
    assert!(!closed);
    one_write(
        &mut s,
        vec![
            Message::Announcement(node_announcement(&author, t)),
            Message::Announcement(inventory(t)),
        ],
    );
    let routed = |seed: &Seed| {
        seed_routes(seed, &format!("?rid={rid}"))
            .iter()
            .any(|(_, nid)| *nid == author.nid().to_string())
    };
    wait_for(
        "the inventory sent with the node announcement",
        Duration::from_secs(10),
        || routed(&seed).then_some(()),
    );
    // Four relaying peers send the same inventory: stale, dropped before verification.
    let stale =
        |seed: &Seed| seed.metric("seedd_p2p_dropped_messages_total", &["reason=\"stale\""]);
    let before = stale(&seed);
    let mut relays: Vec<TcpStream> = (0..4)
        .map(|i| {
            let key = Keypair::mock(310 + i);
            let mut r = raw_connect(&seed, "127.0.0.1", &key);
            read_until(&mut r, Duration::from_secs(10), |f| f.len() >= 3);
            one_write(&mut r, vec![Message::Announcement(inventory(t))]);
            r
        })
        .collect();
    wait_for("four stale copies", Duration::from_secs(10), || {
        (stale(&seed) >= before + 4.0).then_some(())
    });
    assert_eq!(
        seed.metric("seedd_p2p_penalties_total", &[]),
        0.0,
        "stale copies are no offence"
    );
    for r in &mut relays {
        let (_, closed) = read_until(r, Duration::from_millis(300), |_| false);
        assert!(!closed, "a relaying peer was dropped");
    }
    // A new inventory written by the four relays at once: one signature verification, the
    // other copies dropped as stale (identical to the one being verified, or stored by then).
    let verified = |seed: &Seed| seed.metric("seedd_p2p_signatures_verified_total", &[]);
    let (v0, before) = (verified(&seed), stale(&seed));
    let fresh = Message::Announcement(inventory(t + 1));
    for r in &mut relays {
        one_write(r, vec![fresh.clone()]);
    }
    wait_for("three more stale copies", Duration::from_secs(10), || {
        (stale(&seed) >= before + 3.0).then_some(())
    });
    assert_eq!(
        verified(&seed) - v0,
        1.0,
        "one verification for four copies"
    );
    // A newer inventory, then a broken one, in one write: the first is stored, the peer is
    // closed and penalised for the second.
    let newer = RepoId::from_oid_bytes([0x34; 20]);
    let good = AnnouncementMessage::Inventory(InventoryAnnouncement {
        inventory: vec![rid, newer],
        timestamp: t + 2,
    })
    .sign(&author)
    .unwrap();
    let mut broken = inventory(t + 3);
    broken.signature[3] ^= 1;
    one_write(
        &mut s,
        vec![Message::Announcement(good), Message::Announcement(broken)],
    );
    assert!(closed_within(&mut s, Duration::from_secs(10)));
    wait_for(
        "the good inventory before the broken one",
        Duration::from_secs(10),
        || {
            seed_routes(&seed, &format!("?rid={newer}"))
                .iter()
                .any(|(_, nid)| *nid == author.nid().to_string())
                .then_some(())
        },
    );
    assert_eq!(
        seed.metric(
            "seedd_p2p_penalties_total",
            &["reason=\"invalid_signature\""]
        ),
        1.0
    );
}
