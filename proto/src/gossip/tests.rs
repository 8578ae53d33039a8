//! Behaviour of the gossip service, driven without sockets or clocks.
//!
//! Long by design: the service's behaviour scenarios share one set of helpers (sessions,
//! signed announcements, clocks) and read as the protocol.md §4.9/§5 checklist, top to bottom.

use super::*;
use crate::wire::message::MAX_CLOCK_SKEW_MS;

const T0: u64 = 1_700_000_000_000;

fn rid(n: u8) -> RepoId {
    RepoId::from_oid_bytes([n; 20])
}

fn config() -> Config {
    Config {
        alias: "seedd-test".parse().unwrap(),
        user_agent: UserAgent::seedd(),
        external_addresses: vec!["seed.example.com:8776".parse().unwrap()],
        relay: true,
        seed_all: true,
        seeded: BTreeSet::new(),
        timers: Timers::default(),
        caps: Caps::default(),
    }
}

fn service(seed: u64) -> Service {
    let mut s = Service::new(Keypair::mock(seed), config(), Restored::default(), T0);
    s.take_outputs();
    s
}

fn node_ann(key: &Keypair, ts: u64, features: u64) -> Announcement {
    AnnouncementMessage::Node(NodeAnnouncement {
        version: 1,
        features,
        timestamp: ts,
        alias: "peer".parse().unwrap(),
        addresses: vec!["127.0.0.1:8776".parse().unwrap()],
        nonce: 1,
        agent: "/radicle:test/".parse().unwrap(),
    })
    .sign(key)
    .unwrap()
}

fn inv_ann(key: &Keypair, ts: u64, rids: &[RepoId]) -> Announcement {
    AnnouncementMessage::Inventory(InventoryAnnouncement {
        inventory: rids.to_vec(),
        timestamp: ts,
    })
    .sign(key)
    .unwrap()
}

fn refs_ann(key: &Keypair, ts: u64, rid: RepoId, remote: NodeId) -> Announcement {
    AnnouncementMessage::Refs(RefsAnnouncement {
        rid,
        refs: vec![RefsAt {
            remote,
            at: crate::wire::Oid([7; 20]),
        }],
        timestamp: ts,
    })
    .sign(key)
    .unwrap()
}

/// Takes the outputs, with Subscribe answers drained (in small batches) into sends.
fn answered(s: &mut Service, now: u64) -> Vec<Output> {
    let mut out = Vec::new();
    for o in s.take_outputs() {
        match o {
            Output::SubscribeAnswer(mut answer) => loop {
                let (anns, done) = s.subscribe_answer(&mut answer, 2, now);
                for ann in anns {
                    out.push(Output::Send {
                        to: vec![answer.session],
                        message: Message::Announcement(ann),
                    });
                }
                if done {
                    break;
                }
            },
            other => out.push(other),
        }
    }
    out
}

fn sends(outputs: &[Output]) -> Vec<(Vec<SessionId>, Message)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Send { to, message } => Some((to.clone(), message.clone())),
            _ => None,
        })
        .collect()
}

fn sent_to(outputs: &[Output], id: SessionId) -> Vec<Message> {
    sends(outputs)
        .into_iter()
        .filter(|(to, _)| to.contains(&id))
        .map(|(_, m)| m)
        .collect()
}

fn disconnects(outputs: &[Output]) -> Vec<(SessionId, DisconnectReason)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Disconnect { session, reason } => Some((*session, reason.clone())),
            _ => None,
        })
        .collect()
}

fn events(outputs: &[Output]) -> Vec<Event> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// Connects a peer with `key` and makes it known (SEED node announcement + Subscribe all).
fn known_peer(s: &mut Service, id: SessionId, key: &Keypair, now: u64) {
    s.connected(id, key.nid(), Link::Inbound, now);
    s.received(
        id,
        Message::Announcement(node_ann(key, now, FEATURE_SEED)),
        now,
    );
    s.received(id, Message::Subscribe(Subscribe::all()), now);
    s.take_outputs();
}

#[test]
fn first_messages_are_node_inventory_subscribe_in_order() {
    let mut s = service(1);
    s.set_inventory(vec![rid(1), rid(2)], T0);
    s.take_outputs();
    let peer = Keypair::mock(2);
    s.connected(10, peer.nid(), Link::Inbound, T0 + 5);
    let out = s.take_outputs();
    let msgs = sent_to(&out, 10);
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    let Message::Announcement(node) = &msgs[0] else {
        panic!("first is not an announcement: {:?}", msgs[0]);
    };
    let AnnouncementMessage::Node(n) = &node.message else {
        panic!("first is not a node announcement");
    };
    assert!(n.is_seed());
    assert_eq!(n.nonce, 1);
    assert_eq!(n.addresses.len(), 1);
    assert!(node.verify());
    let Message::Announcement(inv) = &msgs[1] else {
        panic!("second is not an announcement");
    };
    assert_eq!(
        inv.message,
        AnnouncementMessage::Inventory(InventoryAnnouncement {
            inventory: vec![rid(1), rid(2)],
            timestamp: inv.timestamp()
        })
    );
    let Message::Subscribe(sub) = &msgs[2] else {
        panic!("third is not a subscribe");
    };
    assert!(sub.since <= sub.until);
    assert_eq!(sub.until, TIMESTAMP_MAX);
    assert_eq!(sub.filter, Filter::default());
}

#[test]
fn own_timestamps_strictly_increase_even_across_restarts_and_clock_steps() {
    let mut s = Service::new(Keypair::mock(1), config(), Restored::default(), T0);
    s.set_inventory(vec![rid(1)], T0);
    s.set_inventory(vec![rid(2)], T0); // same millisecond
    let out = s.take_outputs();
    let mut persisted = Vec::new();
    let mut inv_ts = Vec::new();
    for o in &out {
        if let Output::Persist(Change::OwnTimestamp { kind, timestamp }) = o {
            persisted.push((*kind, *timestamp));
            if *kind == MessageType::InventoryAnnouncement {
                inv_ts.push(*timestamp);
            }
        }
    }
    assert!(inv_ts.windows(2).all(|w| w[0] < w[1]), "{inv_ts:?}");
    let node_ts = s.node_announcement().timestamp();
    // Restart with the clock set back an hour: still strictly newer than before.
    let latest: HashMap<MessageType, u64> = persisted.into_iter().collect();
    let restored = Restored {
        own_timestamps: latest.into_iter().collect(),
        ..Restored::default()
    };
    let mut s2 = Service::new(Keypair::mock(1), config(), restored, T0 - HOUR);
    assert!(s2.node_announcement().timestamp() > node_ts);
    s2.set_inventory(vec![rid(3)], T0 - HOUR);
    assert!(s2.inventory_announcement.timestamp() > *inv_ts.last().unwrap());
}

#[test]
fn ping_is_answered_with_exact_pong_and_oversized_ping_ignored() {
    let mut s = service(1);
    s.connected(1, Keypair::mock(2).nid(), Link::Outbound, T0);
    s.take_outputs();
    s.received(
        1,
        Message::Ping(Ping {
            ponglen: 42,
            zeroes: 9,
        }),
        T0,
    );
    assert_eq!(
        sent_to(&s.take_outputs(), 1),
        vec![Message::Pong { zeroes: 42 }]
    );
    s.received(
        1,
        Message::Ping(Ping {
            ponglen: MAX_PONG_ZEROES + 1,
            zeroes: 0,
        }),
        T0,
    );
    assert!(sent_to(&s.take_outputs(), 1).is_empty());
}

#[test]
fn keepalive_pings_quiet_sessions_and_drops_silent_ones() {
    let mut s = service(1);
    s.connected(1, Keypair::mock(2).nid(), Link::Outbound, T0);
    s.take_outputs();
    s.tick(T0 + 10_000);
    assert!(s.take_outputs().is_empty());
    s.tick(T0 + 30_000);
    let out = s.take_outputs();
    let msgs = sent_to(&out, 1);
    let [Message::Ping(ping)] = msgs.as_slice() else {
        panic!("expected one ping: {msgs:?}");
    };
    // The peer answers: latency measured, session alive.
    s.received(
        1,
        Message::Pong {
            zeroes: ping.ponglen,
        },
        T0 + 30_050,
    );
    assert!(events(&s.take_outputs()).contains(&Event::Pong {
        session: 1,
        latency_ms: 50
    }));
    // Silent for 120 s after its last message: dropped.
    s.tick(T0 + 30_050 + 119_999);
    assert!(disconnects(&s.take_outputs()).is_empty());
    s.tick(T0 + 30_050 + 120_000);
    assert_eq!(
        disconnects(&s.take_outputs()),
        vec![(1, DisconnectReason::Stale)]
    );
}

#[test]
fn invalid_signature_disconnects() {
    let mut s = service(1);
    let peer = Keypair::mock(2);
    s.connected(1, peer.nid(), Link::Inbound, T0);
    s.take_outputs();
    let mut ann = node_ann(&peer, T0, FEATURE_SEED);
    ann.signature[0] ^= 1;
    s.received(1, Message::Announcement(ann), T0);
    let out = s.take_outputs();
    assert_eq!(
        disconnects(&out),
        vec![(1, DisconnectReason::InvalidSignature)]
    );
    assert!(
        !out.iter().any(|o| matches!(o, Output::Persist(_))),
        "nothing stored"
    );
    assert_eq!(s.nodes().count(), 0);
}

/// Copies of an announcement already stored (what every relaying peer sends again) are
/// dropped as stale before the signature is verified: a copy with a broken signature is
/// dropped, not a reason to disconnect, and changes nothing; a newer one is still verified.
#[test]
fn stale_copies_are_dropped_before_the_signature_is_verified() {
    let mut s = service(1);
    let peer = Keypair::mock(2);
    s.connected(1, peer.nid(), Link::Inbound, T0);
    s.received(
        1,
        Message::Announcement(node_ann(&peer, T0, FEATURE_SEED)),
        T0,
    );
    s.take_outputs();
    // Same timestamp, signature broken: stale, checked first.
    let mut copy = node_ann(&peer, T0, FEATURE_SEED);
    copy.signature[0] ^= 1;
    s.received(1, Message::Announcement(copy), T0 + 1);
    let out = s.take_outputs();
    assert!(disconnects(&out).is_empty(), "{out:?}");
    assert!(events(&out).contains(&Event::Dropped {
        session: 1,
        reason: Dropped::Stale
    }));
    assert!(!out.iter().any(|o| matches!(o, Output::Persist(_))));
    // Newer and broken: verified, and the peer is disconnected.
    let mut newer = node_ann(&peer, T0 + 1, FEATURE_SEED);
    newer.signature[0] ^= 1;
    s.received(1, Message::Announcement(newer), T0 + 2);
    let out = s.take_outputs();
    assert_eq!(
        disconnects(&out),
        vec![(1, DisconnectReason::InvalidSignature)]
    );
    assert!(!out.iter().any(|o| matches!(o, Output::Persist(_))));
}

/// The shell's path (issue 30 §2): `screen` under its lock, the signature verified outside
/// it, `received_verified` under the lock again. Copies from two sessions may both pass the
/// screen; only the first one handed back is stored and relayed, the other is stale then.
#[test]
fn screened_copies_verified_outside_are_acted_on_once() {
    let mut s = service(1);
    let author = Keypair::mock(2);
    let relay_a = Keypair::mock(3);
    let relay_b = Keypair::mock(4);
    let watcher = Keypair::mock(5);
    s.connected(1, relay_a.nid(), Link::Inbound, T0);
    s.connected(2, relay_b.nid(), Link::Inbound, T0);
    s.connected(3, watcher.nid(), Link::Inbound, T0);
    s.take_outputs();
    let ann = node_ann(&author, T0, FEATURE_SEED);
    // Both copies pass the screen (nothing stored yet); screening changes nothing.
    assert_eq!(s.screen(&ann), Ok(()));
    assert_eq!(s.screen(&ann), Ok(()));
    assert!(s.take_outputs().is_empty());
    let a = Verified::check(ann.clone()).expect("valid signature");
    let b = Verified::check(ann.clone()).expect("valid signature");
    s.received_verified(1, a, T0 + 1);
    let out = s.take_outputs();
    assert_eq!(
        out.iter()
            .filter(|o| matches!(o, Output::Persist(Change::Announcement(_))))
            .count(),
        1
    );
    assert!(out.iter().any(|o| matches!(o,
        Output::Send { to, message: Message::Announcement(_) } if to.contains(&3))));
    s.received_verified(2, b, T0 + 2);
    let out = s.take_outputs();
    assert_eq!(
        events(&out),
        vec![Event::Dropped {
            session: 2,
            reason: Dropped::Stale
        }]
    );
    assert!(!out
        .iter()
        .any(|o| matches!(o, Output::Persist(_) | Output::Send { .. })));
    // Now stale at the screen: no verification is asked for; the shell counts the drop.
    assert_eq!(s.screen(&ann), Err(Dropped::Stale));
    s.dropped_unverified(3, Dropped::Stale, T0 + 3);
    assert_eq!(
        events(&s.take_outputs()),
        vec![Event::Dropped {
            session: 3,
            reason: Dropped::Stale
        }]
    );
    // A broken signature never becomes `Verified`; the shell reports it.
    let mut broken = node_ann(&author, T0 + 5, FEATURE_SEED);
    broken.signature[0] ^= 1;
    assert_eq!(s.screen(&broken), Ok(()));
    let key = author.nid().verifying_key().expect("a valid key");
    assert!(Verified::check_with(broken.clone(), &key).is_none());
    assert!(Verified::check(broken).is_none());
    // A kept key verifies as `check` does, and only its own node's announcements.
    let good = node_ann(&author, T0 + 5, FEATURE_SEED);
    assert!(Verified::check_with(good.clone(), &key).is_some());
    let other = Keypair::mock(7).nid().verifying_key().expect("a valid key");
    assert!(Verified::check_with(good, &other).is_none());
    s.take_outputs();
    s.received_invalid_signature(1, T0 + 6);
    assert_eq!(
        disconnects(&s.take_outputs()),
        vec![(1, DisconnectReason::InvalidSignature)]
    );
    // Inventory from an author not (yet) in the address book is refused by the screen.
    let stranger = Keypair::mock(6);
    assert_eq!(
        s.screen(&inv_ann(&stranger, T0, &[rid(1)])),
        Err(Dropped::UnknownAuthor)
    );
    // A session that closed meanwhile: nothing acted on.
    let late = Verified::check(node_ann(&author, T0 + 9, FEATURE_SEED)).expect("valid");
    s.received_verified(99, late, T0 + 9);
    assert!(s.take_outputs().is_empty());
}

#[test]
fn future_timestamp_disconnects_but_59_minutes_is_fine() {
    let mut s = service(1);
    let peer = Keypair::mock(2);
    s.connected(1, peer.nid(), Link::Inbound, T0);
    s.take_outputs();
    let ok = node_ann(&peer, T0 + MAX_CLOCK_SKEW_MS, FEATURE_SEED);
    s.received(1, Message::Announcement(ok), T0);
    assert!(disconnects(&s.take_outputs()).is_empty());
    let bad = node_ann(&peer, T0 + MAX_CLOCK_SKEW_MS + 2, FEATURE_SEED);
    s.received(1, Message::Announcement(bad), T0);
    let d = disconnects(&s.take_outputs());
    assert!(
        matches!(
            d.as_slice(),
            [(1, DisconnectReason::InvalidTimestamp { .. })]
        ),
        "{d:?}"
    );
    assert!(d[0].1.is_misbehaviour());
}

#[test]
fn inventory_from_unknown_or_non_seed_author_is_ignored() {
    let mut s = service(1);
    let peer = Keypair::mock(2);
    s.connected(1, peer.nid(), Link::Inbound, T0);
    s.received(1, Message::Announcement(inv_ann(&peer, T0, &[rid(9)])), T0);
    assert!(events(&s.take_outputs()).contains(&Event::Dropped {
        session: 1,
        reason: Dropped::UnknownAuthor
    }));
    // A node announcement without the SEED bit does not make it known either.
    s.received(1, Message::Announcement(node_ann(&peer, T0, 0)), T0);
    s.received(
        1,
        Message::Announcement(inv_ann(&peer, T0 + 1, &[rid(9)])),
        T0,
    );
    assert!(events(&s.take_outputs()).contains(&Event::Dropped {
        session: 1,
        reason: Dropped::UnknownAuthor
    }));
    assert!(s.seeds_of(&rid(9)).is_empty());
}

#[test]
fn inventory_updates_routing_as_full_replacement_and_dedupes() {
    let mut s = service(1);
    let peer = Keypair::mock(2);
    known_peer(&mut s, 1, &peer, T0);
    assert_eq!(s.nodes().count(), 1);
    s.received(
        1,
        Message::Announcement(inv_ann(&peer, T0 + 1, &[rid(1), rid(2)])),
        T0 + 1,
    );
    let out = s.take_outputs();
    assert!(out.contains(&Output::Persist(Change::Routing {
        rid: rid(1),
        nid: peer.nid(),
        timestamp: T0 + 1
    })));
    assert_eq!(s.seeds_of(&rid(2)), vec![(peer.nid(), T0 + 1)]);
    // Same timestamp again: stale.
    s.received(
        1,
        Message::Announcement(inv_ann(&peer, T0 + 1, &[rid(3)])),
        T0 + 2,
    );
    assert!(events(&s.take_outputs()).contains(&Event::Dropped {
        session: 1,
        reason: Dropped::Stale
    }));
    assert!(s.seeds_of(&rid(3)).is_empty());
    // Newer: replaces (rid 1 gone, rid 3 added).
    s.received(
        1,
        Message::Announcement(inv_ann(&peer, T0 + 5, &[rid(2), rid(3)])),
        T0 + 5,
    );
    let out = s.take_outputs();
    assert!(out.contains(&Output::Persist(Change::RoutingRemoved {
        rid: rid(1),
        nid: peer.nid()
    })));
    assert!(s.seeds_of(&rid(1)).is_empty());
    assert_eq!(s.seeds_of(&rid(3)).len(), 1);
    // A direct peer's repos that we seed are reported (fetch trigger for replication), to be
    // cloned if we do not hold them.
    assert!(events(&out).iter().any(|e| matches!(
        e,
        Event::Seeds { author, clone_only: true, .. } if *author == peer.nid()
    )));
}

#[test]
fn relays_node_at_once_inventory_on_timer_and_never_back_to_sender() {
    let mut s = service(1);
    let (a, b, c) = (Keypair::mock(2), Keypair::mock(3), Keypair::mock(4));
    known_peer(&mut s, 1, &a, T0);
    known_peer(&mut s, 2, &b, T0);
    // C's node announcement arrives via A: relayed at once to B only.
    s.received(
        1,
        Message::Announcement(node_ann(&c, T0 + 1, FEATURE_SEED)),
        T0 + 1,
    );
    let out = s.take_outputs();
    let relayed = sends(&out);
    assert_eq!(relayed.len(), 1);
    assert_eq!(relayed[0].0, vec![2]);
    // C's inventory via A: queued, sent by the 6 s timer to B only.
    s.received(
        1,
        Message::Announcement(inv_ann(&c, T0 + 2, &[rid(5)])),
        T0 + 2,
    );
    assert!(sends(&s.take_outputs()).is_empty());
    s.tick(T0 + 6_000);
    let out = s.take_outputs();
    let inv: Vec<_> = sends(&out)
        .into_iter()
        .filter(|(_, m)| m.message_type() == MessageType::InventoryAnnouncement)
        .collect();
    assert_eq!(inv.len(), 1);
    assert_eq!(inv[0].0, vec![2]);
}

#[test]
fn no_relay_when_relay_is_off() {
    let mut cfg = config();
    cfg.relay = false;
    let mut s = Service::new(Keypair::mock(1), cfg, Restored::default(), T0);
    let (a, b, c) = (Keypair::mock(2), Keypair::mock(3), Keypair::mock(4));
    known_peer(&mut s, 1, &a, T0);
    known_peer(&mut s, 2, &b, T0);
    s.received(
        1,
        Message::Announcement(node_ann(&c, T0 + 1, FEATURE_SEED)),
        T0 + 1,
    );
    assert!(sends(&s.take_outputs()).is_empty());
}

#[test]
fn refs_relayed_only_to_subscribers_of_the_repo() {
    let mut s = service(1);
    // Repositories we hold, public (refs of others are not passed on: see the private tests).
    s.set_visibility(
        Arc::new(VisibilityMap::from([
            (rid(7), Visibility::Public),
            (rid(8), Visibility::Public),
        ])),
        T0,
    );
    let (a, b, c) = (Keypair::mock(2), Keypair::mock(3), Keypair::mock(4));
    known_peer(&mut s, 1, &a, T0);
    // B subscribes to rid 7 only, C never subscribes.
    s.connected(2, b.nid(), Link::Inbound, T0);
    s.received(
        2,
        Message::Subscribe(Subscribe {
            filter: Filter::new([&rid(7)]),
            since: T0,
            until: TIMESTAMP_MAX,
        }),
        T0,
    );
    s.connected(3, c.nid(), Link::Inbound, T0);
    s.take_outputs();
    s.received(
        1,
        Message::Announcement(refs_ann(&a, T0 + 1, rid(7), a.nid())),
        T0 + 1,
    );
    let out = s.take_outputs();
    let r = sends(&out);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0].0, vec![2]);
    assert_eq!(s.seeds_of(&rid(7)), vec![(a.nid(), T0 + 1)]);
    // Refs for a repo nobody subscribed to: stored, routed, but sent to nobody.
    s.received(
        1,
        Message::Announcement(refs_ann(&a, T0 + 2, rid(8), a.nid())),
        T0 + 2,
    );
    assert!(sends(&s.take_outputs()).is_empty());
}

#[test]
fn refs_mentioning_us_report_sync() {
    let mut s = service(1);
    let a = Keypair::mock(2);
    known_peer(&mut s, 1, &a, T0);
    let me = s.nid();
    s.received(
        1,
        Message::Announcement(refs_ann(&a, T0 + 1, rid(7), me)),
        T0 + 1,
    );
    let out = events(&s.take_outputs());
    assert!(out.contains(&Event::RefsSynced {
        rid: rid(7),
        remote: a.nid()
    }));
    // Only our own namespace: nothing to fetch (§5.4).
    assert!(
        !out.iter().any(|e| matches!(e, Event::Seeds { .. })),
        "{out:?}"
    );
    // The author's own namespace: fetch from it.
    s.received(
        1,
        Message::Announcement(refs_ann(&a, T0 + 2, rid(7), a.nid())),
        T0 + 2,
    );
    assert!(events(&s.take_outputs()).contains(&Event::Seeds {
        session: 1,
        author: a.nid(),
        rids: vec![rid(7)],
        clone_only: false,
    }));
}

#[test]
fn subscribe_is_answered_from_store_in_range_without_the_subscribers_own() {
    let mut s = service(1);
    s.set_visibility(
        Arc::new(VisibilityMap::from([(rid(1), Visibility::Public)])),
        T0,
    );
    let (a, b) = (Keypair::mock(2), Keypair::mock(3));
    known_peer(&mut s, 1, &a, T0);
    s.received(
        1,
        Message::Announcement(inv_ann(&a, T0 + 10, &[rid(1)])),
        T0 + 10,
    );
    s.received(
        1,
        Message::Announcement(refs_ann(&a, T0 + 20, rid(1), a.nid())),
        T0 + 20,
    );
    s.connected(2, b.nid(), Link::Outbound, T0 + 30);
    s.take_outputs();
    // B asks for [T0+10, T0+20): only A's inventory (and our own from that window).
    s.received(
        2,
        Message::Subscribe(Subscribe {
            filter: Filter::default(),
            since: T0 + 10,
            until: T0 + 20,
        }),
        T0 + 31,
    );
    let msgs = sent_to(&answered(&mut s, T0 + 31), 2);
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0].message_type(), MessageType::InventoryAnnouncement);
    // Everything: A's node, inventory, refs and our own node + inventory; A gets none of its own.
    s.received(2, Message::Subscribe(Subscribe::all()), T0 + 32);
    let msgs = sent_to(&answered(&mut s, T0 + 32), 2);
    assert_eq!(msgs.len(), 5, "{msgs:?}");
    s.received(1, Message::Subscribe(Subscribe::all()), T0 + 33);
    let msgs = sent_to(&answered(&mut s, T0 + 33), 1);
    assert!(msgs.iter().all(|m| match m {
        Message::Announcement(ann) => ann.node != a.nid(),
        _ => true,
    }));
    // An inverted range is answered with nothing (and does not panic).
    s.received(
        2,
        Message::Subscribe(Subscribe {
            filter: Filter::default(),
            since: 10,
            until: 5,
        }),
        T0 + 34,
    );
    assert!(sent_to(&answered(&mut s, T0 + 34), 2).is_empty());
}

#[test]
fn restored_state_survives_restart() {
    let mut s = service(1);
    let a = Keypair::mock(2);
    s.connected(1, a.nid(), Link::Inbound, T0);
    s.received(1, Message::Announcement(node_ann(&a, T0, FEATURE_SEED)), T0);
    s.received(
        1,
        Message::Announcement(inv_ann(&a, T0 + 10, &[rid(1)])),
        T0 + 10,
    );
    // Replay the persisted changes into a Restored, as the shell does with RocksDB.
    let mut restored = Restored::default();
    let mut s0 = Service::new(Keypair::mock(1), config(), Restored::default(), T0);
    let mut all = s0.take_outputs();
    all.extend(s.take_outputs());
    let mut anns: HashMap<AnnouncementKey, StoredAnnouncement> = HashMap::new();
    for o in all {
        match o {
            Output::Persist(Change::Announcement(st)) => {
                anns.insert(st.key(), st);
            }
            Output::Persist(Change::Node(n)) => restored.nodes.push(n),
            Output::Persist(Change::Routing {
                rid,
                nid,
                timestamp,
            }) => restored.routing.push((rid, nid, timestamp)),
            _ => {}
        }
    }
    restored.announcements = anns.into_values().collect();
    let s2 = Service::new(Keypair::mock(1), config(), restored, T0 + 100);
    assert_eq!(s2.seeds_of(&rid(1)), vec![(a.nid(), T0 + 10)]);
    assert_eq!(s2.nodes().count(), 1);
    assert!(s2.stored_announcements() >= 3);
}

#[test]
fn prune_drops_old_gossip_but_keeps_our_own() {
    let mut s = service(1);
    let a = Keypair::mock(2);
    known_peer(&mut s, 1, &a, T0);
    let before = s.stored_announcements();
    s.prune(T0 + 15 * DAY);
    let out = s.take_outputs();
    assert!(out.iter().any(
        |o| matches!(o, Output::Persist(Change::AnnouncementRemoved(k)) if k.node == a.nid())
    ));
    assert!(s.stored_announcements() < before);
    assert!(s.stored_announcements() >= 2, "own node + inventory stay");
}

#[test]
fn inventory_over_the_message_cap_is_truncated_with_a_warning() {
    let mut s = service(1);
    let rids: Vec<RepoId> = (0..3000u32)
        .map(|i| {
            let mut b = [0u8; 20];
            b[..4].copy_from_slice(&i.to_be_bytes());
            RepoId::from_oid_bytes(b)
        })
        .collect();
    s.set_inventory(rids, T0);
    let out = s.take_outputs();
    assert!(events(&out).contains(&Event::InventoryTruncated {
        total: 3000,
        announced: INVENTORY_LIMIT
    }));
    let ann = &s.inventory_announcement;
    assert!(ann.verify());
    assert!(Message::Announcement(ann.clone()).encode().is_ok());
}

#[test]
fn announcement_key_bytes_round_trip() {
    let a = Keypair::mock(2);
    for ann in [
        node_ann(&a, T0, 1),
        inv_ann(&a, T0, &[rid(1)]),
        refs_ann(&a, T0, rid(3), a.nid()),
    ] {
        let key = AnnouncementKey::of(&ann);
        assert_eq!(AnnouncementKey::from_bytes(&key.to_bytes()), Some(key));
    }
    assert_eq!(AnnouncementKey::from_bytes(&[0; 10]), None);
}

/// Private `rid(7)`: delegate `a` and allow-listed `b` may see it, `c` may not.
fn private_setup() -> (Service, Keypair, Keypair, Keypair) {
    let mut s = service(1);
    let (a, b, c) = (Keypair::mock(2), Keypair::mock(3), Keypair::mock(4));
    known_peer(&mut s, 1, &a, T0);
    known_peer(&mut s, 2, &b, T0);
    known_peer(&mut s, 3, &c, T0);
    let visibility = VisibilityMap::from([
        (
            rid(7),
            Visibility::Private {
                allowed: HashSet::from([a.nid(), b.nid()]),
            },
        ),
        (rid(8), Visibility::Public),
    ]);
    s.set_visibility(Arc::new(visibility), T0);
    s.take_outputs();
    (s, a, b, c)
}

/// What `pick` takes from each announcement sent to session `id` in `outputs`.
fn announced_to<T>(
    outputs: &[Output],
    id: SessionId,
    pick: impl Fn(AnnouncementMessage) -> Option<T>,
) -> Vec<T> {
    sent_to(outputs, id)
        .into_iter()
        .filter_map(|m| match m {
            Message::Announcement(Announcement { message, .. }) => pick(message),
            _ => None,
        })
        .collect()
}

fn refs_sent_to(outputs: &[Output], id: SessionId) -> Vec<RepoId> {
    announced_to(outputs, id, |m| match m {
        AnnouncementMessage::Refs(r) => Some(r.rid),
        _ => None,
    })
}

#[test]
fn private_refs_are_relayed_only_to_delegates_and_the_allow_list() {
    let (mut s, a, b, c) = private_setup();
    assert!(s.is_visible_to(&rid(7), &b.nid()));
    assert!(!s.is_visible_to(&rid(7), &c.nid()));
    // The delegate announces new refs of the private repository: B hears, C does not.
    s.received(
        1,
        Message::Announcement(refs_ann(&a, T0 + 1, rid(7), a.nid())),
        T0 + 1,
    );
    let out = s.take_outputs();
    assert_eq!(refs_sent_to(&out, 2), vec![rid(7)]);
    assert!(refs_sent_to(&out, 3).is_empty(), "{out:?}");
    // Relayed by B (allowed, not the author): still never to C.
    s.received(
        2,
        Message::Announcement(refs_ann(&b, T0 + 2, rid(7), b.nid())),
        T0 + 2,
    );
    let out = s.take_outputs();
    assert_eq!(refs_sent_to(&out, 1), vec![rid(7)]);
    assert!(refs_sent_to(&out, 3).is_empty(), "{out:?}");
    // Public: relayed to everyone subscribed.
    s.received(
        1,
        Message::Announcement(refs_ann(&a, T0 + 3, rid(8), a.nid())),
        T0 + 3,
    );
    let out = s.take_outputs();
    assert_eq!(refs_sent_to(&out, 2), vec![rid(8)]);
    assert_eq!(refs_sent_to(&out, 3), vec![rid(8)]);
    // A repository we do not hold (yet) may be private — we hear of it because we are on its
    // allow list: not passed on to anyone, though it is stored and routed.
    s.received(
        1,
        Message::Announcement(refs_ann(&a, T0 + 4, rid(9), a.nid())),
        T0 + 4,
    );
    let out = s.take_outputs();
    assert!(sends(&out).is_empty(), "{out:?}");
    assert_eq!(s.seeds_of(&rid(9)), vec![(a.nid(), T0 + 4)]);
    assert!(!s.is_visible_to(&rid(9), &b.nid()));
    s.received(2, Message::Subscribe(Subscribe::all()), T0 + 5);
    assert!(!refs_sent_to(&answered(&mut s, T0 + 5), 2).contains(&rid(9)));
}

#[test]
fn subscribe_answers_leave_out_private_refs_for_others() {
    let (mut s, a, _b, _c) = private_setup();
    s.received(
        1,
        Message::Announcement(refs_ann(&a, T0 + 1, rid(7), a.nid())),
        T0 + 1,
    );
    s.announce_refs(
        rid(7),
        vec![RefsAt {
            remote: a.nid(),
            at: crate::wire::Oid([9; 20]),
        }],
        T0 + 2,
    );
    s.received(
        1,
        Message::Announcement(refs_ann(&a, T0 + 3, rid(8), a.nid())),
        T0 + 3,
    );
    s.take_outputs();
    // C asks for everything: the public repository's refs only.
    s.received(3, Message::Subscribe(Subscribe::all()), T0 + 4);
    assert_eq!(refs_sent_to(&answered(&mut s, T0 + 4), 3), vec![rid(8)]);
    // B (allow list) gets A's and our refs of the private repository too.
    s.received(2, Message::Subscribe(Subscribe::all()), T0 + 5);
    let mut got = refs_sent_to(&answered(&mut s, T0 + 5), 2);
    got.sort();
    assert_eq!(got, vec![rid(7), rid(7), rid(8)]);
}

/// We announced refs of a repository before its visibility was known (the after-fetch
/// re-index was slower than the announcement): each peer a later visibility change admits gets
/// our stored announcement once, whether the change comes for one repository or as a whole map.
#[test]
fn own_refs_reach_peers_once_a_visibility_change_admits_them() {
    let (mut s, a, b, _c) = private_setup();
    let at = vec![RefsAt {
        remote: a.nid(),
        at: crate::wire::Oid([9; 20]),
    }];
    s.announce_refs(rid(9), at, T0 + 1);
    assert!(sends(&s.take_outputs()).is_empty());
    let only = |nids: &[&Keypair]| Visibility::Private {
        allowed: nids.iter().map(|k| k.nid()).collect(),
    };
    s.set_repo_visibility(rid(9), Some(only(&[&a])), T0 + 2);
    let out = s.take_outputs();
    assert_eq!(refs_sent_to(&out, 1), vec![rid(9)]);
    assert!(refs_sent_to(&out, 2).is_empty() && refs_sent_to(&out, 3).is_empty());
    // The same visibility again: nothing.
    s.set_repo_visibility(rid(9), Some(only(&[&a])), T0 + 3);
    assert!(sends(&s.take_outputs()).is_empty());
    // B joins the allow list: B only (A has it).
    s.set_repo_visibility(rid(9), Some(only(&[&a, &b])), T0 + 4);
    let out = s.take_outputs();
    assert_eq!(refs_sent_to(&out, 2), vec![rid(9)]);
    assert!(refs_sent_to(&out, 1).is_empty() && refs_sent_to(&out, 3).is_empty());
    // A rescan makes it public: C only.
    s.set_visibility(
        Arc::new(VisibilityMap::from([(rid(9), Visibility::Public)])),
        T0 + 5,
    );
    let out = s.take_outputs();
    assert_eq!(refs_sent_to(&out, 3), vec![rid(9)]);
    assert!(refs_sent_to(&out, 1).is_empty() && refs_sent_to(&out, 2).is_empty());
    assert!(s.is_visible_to(&rid(9), &b.nid()));
    // Dropped (purged): nobody may hear of it any more.
    s.set_repo_visibility(rid(9), None, T0 + 6);
    assert!(!s.is_visible_to(&rid(9), &a.nid()));
}

/// A repository that turns private leaves the inventory at once.
#[test]
fn a_repository_turning_private_leaves_the_inventory() {
    let (mut s, a, _b, _c) = private_setup();
    s.set_inventory(vec![rid(8)], T0 + 1);
    s.take_outputs();
    assert_eq!(s.inventory(), &[rid(8)]);
    s.set_repo_visibility(
        rid(8),
        Some(Visibility::Private {
            allowed: HashSet::from([a.nid()]),
        }),
        T0 + 2,
    );
    assert!(s.inventory().is_empty());
}

#[test]
fn own_refs_of_a_private_repo_go_only_to_allowed_peers() {
    let (mut s, a, _b, _c) = private_setup();
    let at = vec![RefsAt {
        remote: a.nid(),
        at: crate::wire::Oid([9; 20]),
    }];
    s.announce_refs(rid(7), at.clone(), T0 + 1);
    let out = s.take_outputs();
    assert_eq!(refs_sent_to(&out, 1), vec![rid(7)]);
    assert_eq!(refs_sent_to(&out, 2), vec![rid(7)]);
    assert!(refs_sent_to(&out, 3).is_empty(), "{out:?}");
    // Public: everyone subscribed.
    s.announce_refs(rid(8), at.clone(), T0 + 2);
    assert_eq!(refs_sent_to(&s.take_outputs(), 3), vec![rid(8)]);
    // A repository whose visibility we do not know (not indexed): nobody.
    s.announce_refs(rid(9), at, T0 + 3);
    assert!(sends(&s.take_outputs()).is_empty());
}

/// The inventories announced to session `id` in `out`.
fn inventories_sent_to(out: &[Output], id: SessionId) -> Vec<Vec<RepoId>> {
    announced_to(out, id, |m| match m {
        AnnouncementMessage::Inventory(inv) => Some(inv.inventory),
        _ => None,
    })
}

#[test]
fn private_repos_never_enter_the_inventory() {
    let (mut s, _a, _b, c) = private_setup();
    s.set_inventory(vec![rid(7), rid(8)], T0 + 1);
    assert_eq!(s.inventory(), &[rid(8)]);
    let inventories = |out: &[Output]| inventories_sent_to(out, 3);
    assert_eq!(inventories(&s.take_outputs()), vec![vec![rid(8)]]);
    // A repository that becomes private leaves the inventory at once.
    s.set_visibility(
        Arc::new(VisibilityMap::from([(
            rid(8),
            Visibility::Private {
                allowed: HashSet::new(),
            },
        )])),
        T0 + 2,
    );
    assert!(s.inventory().is_empty());
    assert_eq!(inventories(&s.take_outputs()), vec![Vec::<RepoId>::new()]);
    assert!(s.seeds_of(&rid(8)).is_empty(), "our route withdrawn");
    // A new session gets the inventory without it.
    s.connected(9, c.nid(), Link::Inbound, T0 + 3);
    let msgs = sent_to(&s.take_outputs(), 9);
    assert!(msgs.iter().all(|m| match m {
        Message::Announcement(ann) => match &ann.message {
            AnnouncementMessage::Inventory(inv) => inv.inventory.is_empty(),
            _ => true,
        },
        _ => true,
    }));
}

/// Fills the address book past its cap with fresh nodes: whole nodes are evicted (address
/// book, routes, announcements, each emitted as a change), the oldest first, never a connected
/// peer nor (before the others) a node seeding a repository we seed.
#[test]
fn caps_evict_whole_nodes_oldest_first_keeping_connected_and_useful_ones() {
    let mut cfg = config();
    cfg.seed_all = false;
    cfg.seeded = BTreeSet::from([rid(1)]);
    cfg.caps = Caps {
        max_nodes: 20,
        max_routes: 1000,
        max_announcements: 1000,
    };
    let mut s = Service::new(Keypair::mock(1), cfg, Restored::default(), T0);
    s.take_outputs();
    let connected = Keypair::mock(2);
    known_peer(&mut s, 1, &connected, T0);
    // A disconnected node seeding a repository we seed, seen long ago.
    let useful = Keypair::mock(3);
    s.received(
        1,
        Message::Announcement(node_ann(&useful, T0, FEATURE_SEED)),
        T0,
    );
    s.received(
        1,
        Message::Announcement(inv_ann(&useful, T0, &[rid(1)])),
        T0,
    );
    let mut all = Vec::new();
    for i in 0..100u64 {
        let key = Keypair::mock(1000 + i);
        let t = T0 + 1000 * (i + 1);
        s.received(1, Message::Announcement(node_ann(&key, t, FEATURE_SEED)), t);
        s.received(1, Message::Announcement(inv_ann(&key, t, &[rid(2)])), t);
        all.extend(s.take_outputs());
        assert!(
            s.nodes().count() <= 20,
            "address book {}",
            s.nodes().count()
        );
    }
    assert!(s.stored_announcements() <= 2 * 20 + 2);
    assert!(s.routing_len() <= 20);
    let nodes: HashSet<NodeId> = s.nodes().map(|n| n.nid).collect();
    assert!(nodes.contains(&connected.nid()), "connected peer kept");
    assert!(
        nodes.contains(&useful.nid()),
        "node seeding our repository kept"
    );
    assert!(nodes.contains(&Keypair::mock(1099).nid()), "newest kept");
    assert!(
        !nodes.contains(&Keypair::mock(1000).nid()),
        "oldest evicted"
    );
    assert_eq!(s.seeds_of(&rid(1)).len(), 1);
    // The index is told: the evicted node's entry, route and announcements are removed.
    let gone = Keypair::mock(1000).nid();
    assert!(all.contains(&Output::Persist(Change::NodeRemoved(gone))));
    assert!(all.contains(&Output::Persist(Change::RoutingRemoved {
        rid: rid(2),
        nid: gone
    })));
    let removed = all
        .iter()
        .filter(|o| matches!(o, Output::Persist(Change::AnnouncementRemoved(k)) if k.node == gone))
        .count();
    assert_eq!(removed, 2, "its node and inventory announcements");
    // An evicted node's later inventory is unknown-author until it announces itself again.
    let t = T0 + 200_000;
    s.received(
        1,
        Message::Announcement(inv_ann(&Keypair::mock(1000), t, &[rid(2)])),
        t,
    );
    assert!(events(&s.take_outputs()).contains(&Event::Dropped {
        session: 1,
        reason: Dropped::UnknownAuthor
    }));
}

/// Restored state over the caps is trimmed at startup (with the changes to persist).
#[test]
fn restored_state_over_the_caps_is_trimmed() {
    let mut restored = Restored::default();
    for i in 0..50u64 {
        let key = Keypair::mock(1000 + i);
        restored.announcements.push(StoredAnnouncement {
            announcement: node_ann(&key, T0 + i, FEATURE_SEED),
            received_at: T0 + i,
        });
        restored.routing.push((rid(2), key.nid(), T0 + i));
    }
    let mut cfg = config();
    cfg.caps = Caps {
        max_nodes: 1000,
        max_routes: 10,
        max_announcements: 1000,
    };
    let mut s = Service::new(Keypair::mock(1), cfg, restored, T0 + 100);
    assert!(s.routing_len() <= 10);
    let removed = s
        .take_outputs()
        .into_iter()
        .filter(|o| matches!(o, Output::Persist(Change::RoutingRemoved { .. })))
        .count();
    assert!(removed >= 40);
}

/// A Subscribe answer is a cursor the shell pulls in bounded batches: thousands of stored
/// announcements arrive whole and in order, a batch never exceeds its size, and a newer
/// Subscribe or a closed session ends the old answer.
#[test]
fn subscribe_answer_streams_in_bounded_batches_and_is_superseded() {
    let mut s = service(1);
    let a = Keypair::mock(2);
    known_peer(&mut s, 1, &a, T0);
    let n = 3000u64;
    for i in 0..n {
        let key = Keypair::mock(10_000 + i);
        let t = T0 + 1 + i;
        s.received(1, Message::Announcement(node_ann(&key, t, FEATURE_SEED)), t);
    }
    let b = Keypair::mock(3);
    s.connected(2, b.nid(), Link::Inbound, T0 + n + 10);
    s.take_outputs();
    s.received(2, Message::Subscribe(Subscribe::all()), T0 + n + 11);
    let outputs = s.take_outputs();
    assert!(sends(&outputs).is_empty(), "nothing queued at once");
    let mut answer = outputs
        .into_iter()
        .find_map(|o| match o {
            Output::SubscribeAnswer(a) => Some(a),
            _ => None,
        })
        .unwrap();
    let mut got = Vec::new();
    let mut batches = 0;
    loop {
        let (anns, done) = s.subscribe_answer(&mut answer, 100, T0 + n + 12);
        assert!(anns.len() <= 100);
        got.extend(anns);
        batches += 1;
        if done {
            break;
        }
    }
    // A's node announcement, the 3000 others, our own node + inventory.
    assert_eq!(got.len(), n as usize + 3);
    assert!(batches > 30);
    assert!(got.windows(2).all(|w| w[0].timestamp() <= w[1].timestamp()));
    // A newer Subscribe supersedes the first answer; disconnecting ends the second.
    s.received(2, Message::Subscribe(Subscribe::all()), T0 + n + 13);
    let mut first = match s.take_outputs().pop() {
        Some(Output::SubscribeAnswer(a)) => a,
        other => panic!("{other:?}"),
    };
    s.received(2, Message::Subscribe(Subscribe::all()), T0 + n + 14);
    let mut second = match s.take_outputs().pop() {
        Some(Output::SubscribeAnswer(a)) => a,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        s.subscribe_answer(&mut first, 10, T0 + n + 15),
        (Vec::new(), true)
    );
    assert_eq!(s.subscribe_answer(&mut second, 10, T0 + n + 15).0.len(), 10);
    s.disconnected(2);
    assert_eq!(
        s.subscribe_answer(&mut second, 10, T0 + n + 16),
        (Vec::new(), true)
    );
}

/// A connected peer flooding refs announcements for ever new repositories cannot grow the
/// state past the caps either: connected peers are evicted last, the largest first, so an
/// honest connected peer keeps its entries.
#[test]
fn caps_hold_against_a_connected_peer_flooding_refs() {
    let mut cfg = config();
    cfg.caps = Caps {
        max_nodes: 100,
        max_routes: 50,
        max_announcements: 50,
    };
    let mut s = Service::new(Keypair::mock(1), cfg, Restored::default(), T0);
    s.take_outputs();
    let (honest, flooder) = (Keypair::mock(2), Keypair::mock(3));
    known_peer(&mut s, 1, &honest, T0);
    s.received(
        1,
        Message::Announcement(inv_ann(&honest, T0, &[rid(1)])),
        T0,
    );
    known_peer(&mut s, 2, &flooder, T0);
    for i in 0..500u64 {
        let t = T0 + 1 + i;
        let mut bytes = [9u8; 20];
        bytes[..8].copy_from_slice(&i.to_be_bytes());
        let r = RepoId::from_oid_bytes(bytes);
        s.received(
            2,
            Message::Announcement(refs_ann(&flooder, t, r, flooder.nid())),
            t,
        );
        assert!(s.stored_announcements() <= 50);
        assert!(s.routing_len() <= 50);
    }
    assert_eq!(s.seeds_of(&rid(1)).len(), 1, "honest peer's route kept");
    assert!(s.nodes().any(|n| n.nid == honest.nid()));
}

/// Each Subscribe makes every peer replay its gossip: one goes out only when the filter
/// changed, not on every refresh of what we seed.
#[test]
fn subscribe_is_sent_again_only_when_the_filter_changes() {
    let mut s = service(1);
    let peer = Keypair::mock(2);
    known_peer(&mut s, 10, &peer, T0);
    let subscribes = |out: &[Output]| {
        sent_to(out, 10)
            .into_iter()
            .filter(|m| matches!(m, Message::Subscribe(_)))
            .count()
    };
    s.set_seeding(false, BTreeSet::from([rid(1)]), T0 + 1);
    assert_eq!(subscribes(&s.take_outputs()), 1, "a new filter is sent");
    s.set_seeding(false, BTreeSet::from([rid(1)]), T0 + 2);
    assert_eq!(subscribes(&s.take_outputs()), 0, "the same filter is not");
    s.set_seeding(false, BTreeSet::from([rid(1), rid(2)]), T0 + 3);
    assert_eq!(subscribes(&s.take_outputs()), 1, "a changed one is");
    s.set_seeding(true, BTreeSet::new(), T0 + 4);
    assert_eq!(subscribes(&s.take_outputs()), 1);
    s.set_seeding(true, BTreeSet::from([rid(3)]), T0 + 5);
    assert_eq!(
        subscribes(&s.take_outputs()),
        0,
        "seed-all matches everything already"
    );
}

/// A new repository in our inventory writes one routing entry, not one per held repository;
/// entries already there keep their timestamp.
#[test]
fn inventory_changes_write_only_the_routes_that_changed() {
    let mut s = service(1);
    let rids: Vec<RepoId> = (1..=50).map(rid).collect();
    s.set_inventory(rids.clone(), T0);
    let writes = |out: &[Output]| {
        out.iter()
            .filter(|o| matches!(o, Output::Persist(Change::Routing { .. })))
            .count()
    };
    assert_eq!(writes(&s.take_outputs()), 50);
    let mut more = rids.clone();
    more.push(rid(51));
    s.set_inventory(more, T0 + 1000);
    let out = s.take_outputs();
    assert_eq!(writes(&out), 1, "only the new repository");
    let removed = |out: &[Output]| {
        out.iter()
            .filter(|o| matches!(o, Output::Persist(Change::RoutingRemoved { .. })))
            .count()
    };
    s.set_inventory(rids, T0 + 2000);
    let out = s.take_outputs();
    assert_eq!((writes(&out), removed(&out)), (0, 1));
    assert_eq!(s.seeds_of(&rid(1)), vec![(s.nid(), T0)], "timestamp kept");
}

#[test]
fn routing_pages_follow_the_cursor_for_every_filter() {
    let mut s = service(1);
    let nids: Vec<NodeId> = (10..13).map(|k| Keypair::mock(k).nid()).collect();
    for r in 1..=5u8 {
        for n in &nids {
            s.routing.insert(rid(r), *n, T0 + u64::from(r));
        }
    }
    // Walks a selection page by page, the cursor being the last row returned.
    let walk = |s: &Service, rid: Option<RepoId>, nid: Option<NodeId>, limit: usize| {
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let (rows, total) = s.routing_page(rid, nid, after, limit);
            all.extend(rows.iter().copied());
            match rows.last() {
                Some((r, n, _)) if rows.len() == limit => after = Some((*r, *n)),
                _ => return (all, total),
            }
        }
    };
    let everything: Vec<_> = s.routing().collect();
    assert_eq!(everything.len(), 15);
    for limit in [1, 2, 4, 15, 100] {
        assert_eq!(walk(&s, None, None, limit), (everything.clone(), 15));
        let one_repo: Vec<_> = everything
            .iter()
            .copied()
            .filter(|e| e.0 == rid(3))
            .collect();
        assert_eq!(walk(&s, Some(rid(3)), None, limit), (one_repo, 3));
        for n in &nids {
            let one_node: Vec<_> = everything.iter().copied().filter(|e| e.1 == *n).collect();
            assert_eq!(walk(&s, None, Some(*n), limit), (one_node, 5));
        }
        assert_eq!(
            walk(&s, Some(rid(2)), Some(nids[1]), limit),
            (vec![(rid(2), nids[1], T0 + 2)], 1)
        );
    }
    // A cursor taken from the whole table works in a filtered listing (and vice versa).
    let mut sorted = nids.clone();
    sorted.sort();
    let (rows, _) = s.routing_page(None, Some(sorted[0]), Some((rid(2), sorted[1])), 10);
    assert_eq!(rows.first().map(|r| r.0), Some(rid(3)));
    let (rows, _) = s.routing_page(None, Some(sorted[2]), Some((rid(2), sorted[1])), 10);
    assert_eq!(rows.first().map(|r| r.0), Some(rid(2)));
    let (rows, _) = s.routing_page(Some(rid(2)), None, Some((rid(4), sorted[0])), 10);
    assert!(rows.is_empty());
    // Nothing after the last entry; an unknown node has none.
    let last = everything.last().map(|e| (e.0, e.1));
    assert_eq!(s.routing_page(None, None, last, 10), (Vec::new(), 15));
    assert_eq!(
        s.routing_page(None, Some(Keypair::mock(99).nid()), None, 10),
        (Vec::new(), 0)
    );
}

/// Our inventory growing by one repository at a time (a new seed's bulk fetch) is announced
/// once per `inventory_interval_ms`, with everything added meanwhile, at the tick; a
/// repository leaving it is announced at once.
#[test]
fn inventory_additions_are_announced_once_per_interval() {
    let (mut s, _a, _b, _c) = private_setup();
    let visibility: VisibilityMap = (10..40u8).map(|n| (rid(n), Visibility::Public)).collect();
    s.set_visibility(Arc::new(visibility), T0);
    s.take_outputs();
    let inventories = |out: &[Output]| inventories_sent_to(out, 3);
    let interval = Timers::default().inventory_interval_ms;
    // The first change goes out at once.
    let mut held = vec![rid(10)];
    s.set_inventory(held.clone(), T0 + 1);
    assert_eq!(inventories(&s.take_outputs()), vec![vec![rid(10)]]);
    // Twenty more within the interval: nothing sent, the inventory and routes are current.
    for n in 11..31u8 {
        held.push(rid(n));
        s.set_inventory(held.clone(), T0 + 1 + u64::from(n));
    }
    assert!(inventories(&s.take_outputs()).is_empty());
    assert_eq!(s.inventory(), &held[..]);
    let nid = s.nid();
    assert!(s.seeds_of(&rid(30)).iter().any(|(n, _)| *n == nid));
    s.tick(T0 + interval / 2);
    assert!(inventories(&s.take_outputs()).is_empty());
    // The first tick past the interval sends one announcement with all of them.
    let t1 = T0 + 1 + interval;
    s.tick(t1);
    assert_eq!(inventories(&s.take_outputs()), vec![held.clone()]);
    s.tick(t1 + 1);
    assert!(inventories(&s.take_outputs()).is_empty(), "sent twice");
    // Within the next interval an addition waits, a removal does not.
    held.push(rid(31));
    s.set_inventory(held.clone(), t1 + 2);
    assert!(inventories(&s.take_outputs()).is_empty());
    held.retain(|r| *r != rid(10));
    s.set_inventory(held.clone(), t1 + 3);
    assert_eq!(inventories(&s.take_outputs()), vec![held]);
}
