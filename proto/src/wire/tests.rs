//! Byte-exact test vectors (protocol.md §9.1, §9.2) and error cases.
//!
//! Long by design: one file holds every codec vector of protocol.md §9 and the edge cases of
//! each message, next to each other, so a vector is found by its section number.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use super::address::{Address, Host, I2pAddr, OnionAddrV3, OnionError};
use super::filter::{self, Filter};
use super::frame::{decode_frame, Control, Frame, FrameDecoder, FrameError, FrameLimits};
use super::frame::{Link, StreamId, StreamKind};
use super::message::*;
use super::{codec, varint, DecodeError, EncodeError, TIMESTAMP_MAX};
use crate::crypto::{Keypair, NodeId, RepoId};

fn h(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    hex::decode(s).unwrap()
}

const PK_A: &str = "8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c";
const PK_B: &str = "8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394";
const HEARTWOOD: &str = "c0dc26955e1b6db81f1252205bdd7d4133365882";
const SIGREFS_OID: &str = "d96f425412c9f8ad5d9a9a05c9831d0728e2338d";
/// T = 1700000000000 ms.
const T: u64 = 1_700_000_000_000;

fn key_a() -> Keypair {
    Keypair::from_seed([1; 32])
}

fn key_b() -> Keypair {
    Keypair::from_seed([2; 32])
}

fn heartwood() -> RepoId {
    RepoId::from_oid_bytes(h(HEARTWOOD).try_into().unwrap())
}

fn sigrefs_oid() -> Oid {
    Oid::from_str(SIGREFS_OID).unwrap()
}

fn frame_bytes(frame: &Frame) -> Vec<u8> {
    frame.encode().unwrap()
}

fn decode_one(bytes: &[u8]) -> Frame {
    let (frame, used) = decode_frame(bytes, &FrameLimits::default())
        .unwrap()
        .expect("complete frame");
    assert_eq!(used, bytes.len());
    frame
}

// ---- §9.1 varint.rs test_encoding / test_encode_overflow -------------------------------

#[test]
fn varint_vectors() {
    let cases: [(u64, &str); 8] = [
        (0, "00"),
        (1, "01"),
        (10, "0a"),
        (37, "25"),
        (15293, "7bbd"),
        (494878333, "9d7f3e7d"),
        (151288809941952652, "c2197c5eff14e88c"),
        (10000000000, "c000000 2540be400"),
    ];
    for (value, hex) in cases {
        let bytes = h(hex);
        assert_eq!(varint::encode_to_vec(value).unwrap(), bytes, "{value}");
        assert_eq!(varint::decode(&bytes).unwrap(), (value, bytes.len()));
    }
    // Non-minimal encodings decode.
    assert_eq!(varint::decode(&h("4025")).unwrap(), (37, 2));
    assert_eq!(varint::decode(&h("800000 25")).unwrap(), (37, 4));
    // Limits.
    assert_eq!(
        varint::encode_to_vec(varint::MAX).unwrap(),
        h("ffffffffffffffff")
    );
    assert_eq!(
        varint::encode_to_vec(u64::MAX),
        Err(EncodeError::VarintOverflow(u64::MAX))
    );
    assert_eq!(
        varint::encode_to_vec(varint::MAX + 1),
        Err(EncodeError::VarintOverflow(1 << 62))
    );
    // Boundaries pick the shortest form.
    for (value, len) in [(63, 1), (64, 2), (16383, 2), (16384, 4), (1 << 30, 8)] {
        assert_eq!(varint::encode_to_vec(value).unwrap().len(), len);
        assert_eq!(varint::encoded_len(value), Some(len));
    }
    // Truncated input.
    assert!(matches!(
        varint::decode(&h("c0 00 00")),
        Err(DecodeError::UnexpectedEnd { .. })
    ));
    assert!(matches!(
        varint::decode(&[]),
        Err(DecodeError::UnexpectedEnd { .. })
    ));
}

// ---- §9.1 wire.rs test_string / test_alias / test_filter_invalid -------------------------

#[test]
fn string_and_alias_encoding() {
    let mut out = Vec::new();
    codec::put_string(&mut out, "hello").unwrap();
    assert_eq!(out, h("05 68656c6c6f"));
    assert_eq!(Alias::from_str("hello").unwrap().as_str(), "hello");
    // The alias encodes as a string inside a node announcement (offset 1 + 8 + 8).
    let ann = NodeAnnouncement {
        version: 1,
        features: 0,
        timestamp: 0,
        alias: "hello".parse().unwrap(),
        addresses: vec![],
        nonce: 0,
        agent: "/radicle/".parse().unwrap(),
    };
    let body = AnnouncementMessage::Node(ann).encode_body().unwrap();
    assert_eq!(&body[17..23], &h("05 68656c6c6f")[..]);

    let mut out = Vec::new();
    assert_eq!(
        codec::put_string(&mut out, &"x".repeat(256)),
        Err(EncodeError::StringTooLong(256))
    );
}

#[test]
fn alias_rules() {
    // radicle/src/node.rs test_alias.
    for ok in [
        "cloudhead",
        "cloud-head",
        "cl0ud.h3ad$__",
        "©loudhèâd",
        &"a".repeat(32),
    ] {
        assert!(Alias::from_str(ok).is_ok(), "{ok:?}");
    }
    assert_eq!(Alias::from_str(""), Err(AliasError::Empty));
    assert_eq!(Alias::from_str(" "), Err(AliasError::InvalidCharacter));
    assert_eq!(
        Alias::from_str("a\u{7f}"),
        Err(AliasError::InvalidCharacter)
    );
    assert_eq!(
        Alias::from_str("a\u{a0}b"),
        Err(AliasError::InvalidCharacter)
    );
    assert_eq!(Alias::from_str(&"a".repeat(33)), Err(AliasError::TooLong));
    // 32 bytes, not characters.
    assert_eq!(Alias::from_str(&"é".repeat(17)), Err(AliasError::TooLong));
}

#[test]
fn filter_invalid_size() {
    let size = filter::FILTER_SIZE_M / 3;
    let mut msg = h("0008");
    msg.extend_from_slice(&(size as u16).to_be_bytes());
    msg.extend(vec![0u8; size]);
    msg.extend(h("0000000000000000 7fffffffffffffff"));
    assert_eq!(
        Message::decode(&msg),
        Err(DecodeError::InvalidFilterSize(1365))
    );
    assert_eq!(
        Filter::from_bytes(vec![0; size]),
        Err(DecodeError::InvalidFilterSize(1365))
    );
    for size in filter::FILTER_SIZES {
        assert_eq!(Filter::from_bytes(vec![0; size]).unwrap().size(), size);
    }
}

// ---- §9.1 frame.rs test_stream_id, §9.2 stream id 68 -----------------------------------

#[test]
fn stream_ids() {
    let id = |n| StreamId::new(n).unwrap();
    assert_eq!(id(0b000).kind(), Ok(StreamKind::Control));
    assert_eq!(id(0b010).kind(), Ok(StreamKind::Gossip));
    assert_eq!(id(0b100).kind(), Ok(StreamKind::Git));
    assert_eq!(id(0b110).kind(), Err(3));
    assert_eq!(id(0b001).link(), Link::Inbound);
    assert_eq!(id(0b000).link(), Link::Outbound);
    assert_eq!(id(0b101).link(), Link::Inbound);
    assert_eq!(id(0b100).link(), Link::Outbound);

    assert_eq!(StreamId::git_base(Link::Outbound).as_u64(), 4);
    assert_eq!(StreamId::control(Link::Outbound).as_u64(), 0);
    assert_eq!(StreamId::gossip(Link::Outbound).as_u64(), 2);
    assert_eq!(StreamId::git_base(Link::Inbound).as_u64(), 5);
    assert_eq!(StreamId::control(Link::Inbound).as_u64(), 1);
    assert_eq!(StreamId::gossip(Link::Inbound).as_u64(), 3);

    // Git streams: dialer 12, 20, 28, …; listener 13, 21, 29, ….
    let dialer: Vec<u64> = (1..=3)
        .map(|k| StreamId::git(Link::Outbound, k).unwrap().as_u64())
        .collect();
    let listener: Vec<u64> = (1..=3)
        .map(|k| StreamId::git(Link::Inbound, k).unwrap().as_u64())
        .collect();
    assert_eq!(dialer, [12, 20, 28]);
    assert_eq!(listener, [13, 21, 29]);

    // The dialer's 8th git stream is 68 = varint 40 44.
    let s68 = StreamId::git(Link::Outbound, 8).unwrap();
    assert_eq!(s68.as_u64(), 68);
    assert_eq!(varint::encode_to_vec(s68.as_u64()).unwrap(), h("4044"));
    let frame = Frame::git(s68, b"x".to_vec());
    assert_eq!(frame_bytes(&frame), h("72616401 4044 01 78"));
    assert_eq!(decode_one(&h("72616401 4044 01 78")), frame);

    assert!(StreamId::new(varint::MAX).is_ok());
    assert!(StreamId::new(varint::MAX + 1).is_err());
    assert!(StreamId::git(Link::Outbound, u64::MAX).is_err());
    assert!(StreamId::git(Link::Outbound, 1 << 59).is_err());
}

// ---- §9.2 frames ---------------------------------------------------------------------

#[test]
fn ping_pong_vectors() {
    let ping = Message::Ping(Ping {
        ponglen: 3,
        zeroes: 2,
    });
    let pong = Message::Pong { zeroes: 3 };
    assert_eq!(ping.encode().unwrap(), h("000a 0003 0002 0000"));
    assert_eq!(pong.encode().unwrap(), h("000c 0003 000000"));
    assert_eq!(Message::decode(&h("000a 0003 0002 0000")).unwrap(), ping);
    assert_eq!(Message::decode(&h("000c 0003 000000")).unwrap(), pong);

    let dialer_pong = Frame::gossip(Link::Outbound, pong);
    let listener_ping = Frame::gossip(Link::Inbound, ping);
    assert_eq!(
        frame_bytes(&dialer_pong),
        h("72616401 02 07 000c0003000000")
    );
    assert_eq!(
        frame_bytes(&listener_ping),
        h("72616401 03 08 000a000300020000")
    );
    assert_eq!(decode_one(&h("72616401 02 07 000c0003000000")), dialer_pong);
    assert_eq!(
        decode_one(&h("72616401 03 08 000a000300020000")),
        listener_ping
    );
}

#[test]
fn control_and_git_frame_vectors() {
    let s12 = StreamId::git(Link::Outbound, 1).unwrap();
    let cases = [
        (
            Frame::control(Link::Outbound, Control::Open { stream: s12 }),
            "72616401 00 00 0c",
        ),
        (
            Frame::control(Link::Outbound, Control::Eof { stream: s12 }),
            "72616401 00 02 0c",
        ),
        (
            Frame::control(Link::Inbound, Control::Close { stream: s12 }),
            "72616401 01 01 0c",
        ),
        (
            Frame::git(s12, b"0014command=ls-refs\n".to_vec()),
            "72616401 0c 14 30303134636f6d6d616e643d6c732d726566730a",
        ),
    ];
    for (frame, hex) in cases {
        assert_eq!(frame_bytes(&frame), h(hex));
        assert_eq!(decode_one(&h(hex)), frame);
    }
}

/// radicle-node `test_pong_message_with_extension`: bytes after the message inside a gossip
/// payload are ignored.
#[test]
fn pong_with_extension() {
    let mut gossip = Message::Pong { zeroes: 42 }.encode().unwrap();
    codec::put_string(&mut gossip, "extra").unwrap();
    gossip.push(48);
    let mut stream = h("72616401 02");
    varint::encode(gossip.len() as u64, &mut stream).unwrap();
    stream.extend_from_slice(&gossip);

    let mut decoder = FrameDecoder::new();
    decoder.push(&stream);
    assert_eq!(
        decoder.next_frame().unwrap(),
        Some(Frame::gossip(Link::Outbound, Message::Pong { zeroes: 42 }))
    );
    assert_eq!(decoder.next_frame().unwrap(), None);
    assert_eq!(decoder.buffered(), 0);
}

#[test]
fn info_refs_already_synced_vector() {
    let info = Message::Info(Info::RefsAlreadySynced {
        rid: heartwood(),
        at: sigrefs_oid(),
    });
    let bytes = h(&format!("000e 0001 0014 {HEARTWOOD} 0014 {SIGREFS_OID}"));
    assert_eq!(info.encode().unwrap(), bytes);
    assert_eq!(Message::decode(&bytes).unwrap(), info);
}

// ---- §9.1 filter.rs, §9.2 bloom bits and Subscribe --------------------------------------

#[test]
fn bloom_bits_for_heartwood() {
    let rid = heartwood();
    assert_eq!(
        rid,
        RepoId::from_str("rad:z3gqcJUoA1n9HaHKufZs5FCSGazv5").unwrap()
    );
    assert_eq!(
        filter::sip_hashes(&rid),
        (0xac32f93f918ad83e, 0x704997fe2ec4acff)
    );
    let mut bits = filter::bit_indices(&rid, 8 * 1024);
    bits.sort_unstable();
    assert_eq!(bits, [1342, 1808, 3194, 4676, 6206, 6582, 8022]);

    let mut f = Filter::empty();
    assert!(!f.contains(&rid));
    f.insert(&rid);
    assert!(f.contains(&rid));
    let set: Vec<usize> = (0..8 * 1024)
        .filter(|i| f.as_bytes()[i / 8] & (1 << (i % 8)) != 0)
        .collect();
    assert_eq!(set, [1342, 1808, 3194, 4676, 6206, 6582, 8022]);
    assert!(Filter::default().contains(&rid));
}

/// radicle-protocol `service/filter.rs` `compatible`: a filter captured from a live node.
#[test]
fn bloom_compatible_fixture() {
    #[rustfmt::skip]
    const FIXTURE: [(usize, u8); 100] = [
        (0x002, 0xa8), (0x010, 0x08), (0x016, 0x40), (0x01b, 0x20), (0x04d, 0x04),
        (0x050, 0x04), (0x05a, 0x02), (0x05e, 0x80), (0x06d, 0x40), (0x075, 0x08),
        (0x082, 0x80), (0x084, 0x80), (0x089, 0x01), (0x08b, 0x08), (0x099, 0x04),
        (0x0a1, 0x40), (0x0a7, 0x40), (0x0be, 0x40), (0x0d3, 0x01), (0x0e2, 0x01),
        (0x0ee, 0x08), (0x0f2, 0x04), (0x109, 0x08), (0x119, 0x10), (0x15b, 0x40),
        (0x160, 0x44), (0x163, 0x01), (0x168, 0x08), (0x16b, 0x01), (0x16d, 0x04),
        (0x176, 0x80), (0x17e, 0x40), (0x189, 0x20), (0x18f, 0x04), (0x19f, 0x20),
        (0x1b2, 0x08), (0x1b5, 0x04), (0x1b8, 0x20), (0x1ed, 0x10), (0x1f1, 0x40),
        (0x1f3, 0x04), (0x1fa, 0x40), (0x20b, 0x08), (0x20e, 0x04), (0x218, 0x01),
        (0x231, 0x02), (0x23d, 0x80), (0x248, 0x10), (0x24e, 0x04), (0x250, 0x01),
        (0x251, 0x01), (0x255, 0x04), (0x25a, 0x10), (0x265, 0x20), (0x27c, 0x01),
        (0x284, 0x04), (0x285, 0x20), (0x28d, 0x81), (0x29f, 0x01), (0x2a6, 0x10),
        (0x2ac, 0x40), (0x2ad, 0x10), (0x2b4, 0x04), (0x2b8, 0x02), (0x2cb, 0x01),
        (0x2d1, 0x80), (0x2d4, 0x01), (0x2d7, 0x40), (0x2ed, 0x80), (0x2f7, 0x01),
        (0x302, 0x80), (0x303, 0x40), (0x307, 0x40), (0x309, 0x04), (0x318, 0x04),
        (0x31e, 0x10), (0x335, 0x01), (0x336, 0x40), (0x338, 0x40), (0x351, 0x80),
        (0x353, 0x10), (0x359, 0x0c), (0x360, 0x40), (0x367, 0x01), (0x36b, 0x08),
        (0x36c, 0x40), (0x37b, 0x10), (0x37d, 0x40), (0x399, 0x02), (0x39f, 0x02),
        (0x3a6, 0x02), (0x3a9, 0x04), (0x3ab, 0x01), (0x3cb, 0x04), (0x3e2, 0x01),
        (0x3e5, 0x10), (0x3ea, 0x40), (0x3ed, 0x40), (0x3f2, 0x02), (0x3f5, 0x80),
    ];
    let mut bytes = vec![0u8; 1024];
    for (i, v) in FIXTURE {
        bytes[i] = v;
    }
    let f = Filter::from_bytes(bytes).unwrap();
    assert!(f.contains(&heartwood()));
    assert!(!f.contains(&RepoId::from_oid_bytes([0; 20])));
}

/// radicle-protocol `service/filter.rs` `test_parameters` / `test_sizes`.
#[test]
fn bloom_sizing() {
    assert_eq!(filter::optimal_bytes(10_000), 11_981);
    assert_eq!(filter::optimal_bytes(1_000), 1198);
    assert_eq!(filter::optimal_bytes(100), 119);
    assert_eq!(filter::size_for(0), filter::FILTER_SIZE_S);
    assert_eq!(filter::size_for(10), filter::FILTER_SIZE_S);
    assert_eq!(filter::size_for(855), filter::FILTER_SIZE_S);
    assert_eq!(filter::size_for(856), filter::FILTER_SIZE_M);
    assert_eq!(filter::size_for(1000), filter::FILTER_SIZE_M);
    assert_eq!(filter::size_for(3420), filter::FILTER_SIZE_L);

    let rids: Vec<RepoId> = (0..1000u32)
        .map(|i| {
            let mut oid = [0u8; 20];
            oid[..4].copy_from_slice(&i.to_be_bytes());
            RepoId::from_oid_bytes(oid)
        })
        .collect();
    let f = Filter::new(&rids);
    assert_eq!(f.size(), filter::FILTER_SIZE_M);
    assert!(rids.iter().all(|rid| f.contains(rid)));
    assert_eq!(Filter::new(&rids[..10]).size(), filter::FILTER_SIZE_S);
}

#[test]
fn subscribe_all_vector() {
    let sub = Message::Subscribe(Subscribe::all());
    let mut expected = h("0008 0400");
    expected.extend(vec![0xff; 1024]);
    expected.extend(h("0000000000000000 7fffffffffffffff"));
    assert_eq!(expected.len(), 1044);
    assert_eq!(sub.encode().unwrap(), expected);
    assert_eq!(Message::decode(&expected).unwrap(), sub);

    let inverted = Message::Subscribe(Subscribe {
        filter: Filter::default(),
        since: 2,
        until: 1,
    });
    assert_eq!(
        inverted.encode(),
        Err(EncodeError::InvertedRange { since: 2, until: 1 })
    );
}

// ---- §9.2 announcements signed by key A -------------------------------------------------

const NODE_BODY: &str = "01 0000000000000001 0000018bcfe56800 04 73656564 0002 01 7f000001 2248 \
     03 10 736565642e6578616d706c652e636f6d 2248 0000000000000001 0f 2f72616469636c653a312e362e302f";
const NODE_SIG: &str = "1ea1d9f48dae0dc547e05fd71d019af0b1017ff0f819aee0a1541fa71e4c2b30\
     a90f11f97f2996292c877f5fecbdd37e9155feb15ef5b87ca4ef7177e339b50b";
const INV_SIG: &str = "c1bd36500b1ef46508ad8c6a441b07991b5193107e2b6fc155af5bc2f61d7f50\
     db5822b587ee85fe2047eb7e15f7d304c00b0fa2bf3b22f106a730f6e206d507";
const REFS_SIG: &str = "ae154fb14125006fb26cc4a5947722d69c3c5bd9409b33bccefc63bb0d90ce45\
     11d4cb620ab35e5c7b3f198ef55270d53f630b7030cf62924af5482323040c0c";

fn node_announcement() -> NodeAnnouncement {
    NodeAnnouncement {
        version: 1,
        features: FEATURE_SEED,
        timestamp: T,
        alias: "seed".parse().unwrap(),
        addresses: vec![
            Address::new(Host::Ipv4(Ipv4Addr::new(127, 0, 0, 1)), 8776),
            Address::new(Host::Dns("seed.example.com".into()), 8776),
        ],
        nonce: 1,
        agent: "/radicle:1.6.0/".parse().unwrap(),
    }
}

#[test]
fn keys_a_and_b() {
    assert_eq!(key_a().nid().as_bytes().to_vec(), h(PK_A));
    assert_eq!(key_b().nid().as_bytes().to_vec(), h(PK_B));
    assert_eq!(
        key_a().nid().to_string(),
        "z6Mkon3Necd6NkkyfoGoHxid2znGc59LU3K7mubaRcFbLfLX"
    );
}

#[test]
fn node_announcement_body_vector() {
    let msg = AnnouncementMessage::Node(node_announcement());
    assert_eq!(msg.encode_body().unwrap(), h(NODE_BODY));
    assert_eq!(
        AnnouncementMessage::decode_body(MessageType::NodeAnnouncement, &h(NODE_BODY)).unwrap(),
        msg
    );
}

#[test]
fn signed_node_announcement_vector() {
    let ann = AnnouncementMessage::Node(node_announcement())
        .sign(&key_a())
        .unwrap();
    assert_eq!(ann.signature.to_vec(), h(NODE_SIG));
    assert!(ann.verify());
    let bytes = h(&format!("0002 {PK_A} {NODE_SIG} {NODE_BODY}"));
    let msg = Message::Announcement(ann);
    assert_eq!(msg.encode().unwrap(), bytes);
    let decoded = Message::decode(&bytes).unwrap();
    assert_eq!(decoded, msg);
    let Message::Announcement(decoded) = decoded else {
        unreachable!()
    };
    assert!(decoded.verify());
    assert_eq!(decoded.node, key_a().nid());
}

#[test]
fn signed_inventory_vector() {
    let ann = AnnouncementMessage::Inventory(InventoryAnnouncement {
        inventory: vec![heartwood()],
        timestamp: T,
    })
    .sign(&key_a())
    .unwrap();
    assert!(ann.verify());
    let bytes = h(&format!(
        "0004 {PK_A} {INV_SIG} 0001 0014 {HEARTWOOD} 0000018bcfe56800"
    ));
    let msg = Message::Announcement(ann);
    assert_eq!(msg.encode().unwrap(), bytes);
    assert_eq!(Message::decode(&bytes).unwrap(), msg);
}

#[test]
fn signed_refs_vector_and_frame() {
    let ann = AnnouncementMessage::Refs(RefsAnnouncement {
        rid: heartwood(),
        refs: vec![RefsAt {
            remote: key_b().nid(),
            at: sigrefs_oid(),
        }],
        timestamp: T,
    })
    .sign(&key_a())
    .unwrap();
    assert!(ann.verify());
    let bytes = h(&format!(
        "0006 {PK_A} {REFS_SIG} 0014 {HEARTWOOD} 0001 {PK_B} 0014 {SIGREFS_OID} 0000018bcfe56800"
    ));
    assert_eq!(bytes.len(), 184);
    let msg = Message::Announcement(ann);
    assert_eq!(msg.encode().unwrap(), bytes);
    assert_eq!(Message::decode(&bytes).unwrap(), msg);

    let frame = Frame::gossip(Link::Outbound, msg);
    let mut expected = h("72616401 02 40b8");
    expected.extend_from_slice(&bytes);
    assert_eq!(frame_bytes(&frame), expected);
    assert_eq!(decode_one(&expected), frame);
}

#[test]
fn tampered_announcements_fail_verification() {
    let ann = AnnouncementMessage::Node(node_announcement())
        .sign(&key_a())
        .unwrap();
    let mut wrong_key = ann.clone();
    wrong_key.node = key_b().nid();
    assert!(!wrong_key.verify());
    let mut wrong_sig = ann.clone();
    wrong_sig.signature[0] ^= 1;
    assert!(!wrong_sig.verify());
    let mut wrong_body = ann.clone();
    if let AnnouncementMessage::Node(node) = &mut wrong_body.message {
        node.nonce = 2;
    }
    assert!(!wrong_body.verify());
    let mut not_a_point = ann;
    not_a_point.node = NodeId::from_bytes([0xff; 32]);
    assert!(!not_a_point.verify());
}

#[test]
fn announcement_helpers() {
    let ann = AnnouncementMessage::Refs(RefsAnnouncement {
        rid: heartwood(),
        refs: vec![],
        timestamp: T,
    })
    .sign(&key_a())
    .unwrap();
    assert_eq!(ann.timestamp(), T);
    assert!(ann.timestamp_acceptable(T - MAX_CLOCK_SKEW_MS));
    assert!(!ann.timestamp_acceptable(T - MAX_CLOCK_SKEW_MS - 1));
    assert!(ann.matches(&Filter::default()));
    assert!(!ann.matches(&Filter::empty()));
    assert!(node_announcement().is_seed());
}

// ---- §9.1 message.rs test_*_max_size ----------------------------------------------------

#[test]
fn max_size_announcements_fit() {
    let key = Keypair::mock(247);
    let node = AnnouncementMessage::Node(NodeAnnouncement {
        version: 1,
        features: 0,
        timestamp: TIMESTAMP_MAX,
        alias: "@".repeat(32).parse().unwrap(),
        addresses: (0..ADDRESS_LIMIT)
            .map(|i| Address::new(Host::Dns(format!("{i:0>255}")), u16::MAX))
            .collect(),
        nonce: u64::MAX,
        agent: format!("/{}/", "a".repeat(62)).parse().unwrap(),
    });
    let inventory = AnnouncementMessage::Inventory(InventoryAnnouncement {
        inventory: (0..INVENTORY_LIMIT)
            .map(|i| RepoId::from_oid_bytes([i as u8; 20]))
            .collect(),
        timestamp: TIMESTAMP_MAX,
    });
    let refs = AnnouncementMessage::Refs(RefsAnnouncement {
        rid: heartwood(),
        refs: (0..REF_REMOTE_LIMIT)
            .map(|i| RefsAt {
                remote: NodeId::from_bytes([i as u8; 32]),
                at: Oid([i as u8; 20]),
            })
            .collect(),
        timestamp: TIMESTAMP_MAX,
    });
    for ann in [node, inventory, refs] {
        let msg = Message::Announcement(ann.sign(&key).unwrap());
        let bytes = msg.encode().unwrap();
        assert!(bytes.len() < u16::MAX as usize, "{}", bytes.len());
        assert_eq!(Message::decode(&bytes).unwrap(), msg);
        let frame = Frame::gossip(Link::Inbound, msg);
        assert_eq!(decode_one(&frame.encode().unwrap()), frame);
    }
}

#[test]
fn list_limits() {
    let key = key_a();
    let too_many_addresses = AnnouncementMessage::Node(NodeAnnouncement {
        addresses: vec![Address::new(Host::Ipv4(Ipv4Addr::LOCALHOST), 1); ADDRESS_LIMIT + 1],
        ..node_announcement()
    });
    let err = EncodeError::TooManyItems {
        what: "addresses",
        count: 17,
        max: 16,
    };
    assert_eq!(too_many_addresses.sign(&key), Err(err));

    let too_many_rids = AnnouncementMessage::Inventory(InventoryAnnouncement {
        inventory: vec![heartwood(); INVENTORY_LIMIT + 1],
        timestamp: T,
    });
    assert!(matches!(
        too_many_rids.encode_body(),
        Err(EncodeError::TooManyItems { count: 2974, .. })
    ));
    let too_many_refs = AnnouncementMessage::Refs(RefsAnnouncement {
        rid: heartwood(),
        refs: vec![
            RefsAt {
                remote: key.nid(),
                at: sigrefs_oid()
            };
            REF_REMOTE_LIMIT + 1
        ],
        timestamp: T,
    });
    assert!(matches!(
        too_many_refs.encode_body(),
        Err(EncodeError::TooManyItems { count: 1025, .. })
    ));

    // Decoders reject counts above the limits before reading items.
    let header = format!("{PK_A} {NODE_SIG}");
    let inv = h(&format!("0004 {header} 0b9e"));
    assert_eq!(
        Message::decode(&inv),
        Err(DecodeError::TooManyItems {
            what: "inventory",
            count: 2974,
            max: 2973
        })
    );
    let refs = h(&format!("0006 {header} 0014 {HEARTWOOD} 0401"));
    assert_eq!(
        Message::decode(&refs),
        Err(DecodeError::TooManyItems {
            what: "refs",
            count: 1025,
            max: 1024
        })
    );
    let node = h(&format!(
        "0002 {header} 01 0000000000000001 0000018bcfe56800 04 73656564 0011"
    ));
    assert_eq!(
        Message::decode(&node),
        Err(DecodeError::TooManyItems {
            what: "addresses",
            count: 17,
            max: 16
        })
    );
}

#[test]
fn ping_pong_limits() {
    let max_ping = Message::Ping(Ping {
        ponglen: 0,
        zeroes: MAX_PING_ZEROES,
    });
    assert_eq!(max_ping.encode().unwrap().len(), 65535);
    let max_pong = Message::Pong {
        zeroes: MAX_PONG_ZEROES,
    };
    assert_eq!(max_pong.encode().unwrap().len(), 65535);
    assert_eq!(
        Message::Ping(Ping {
            ponglen: 0,
            zeroes: MAX_PING_ZEROES + 1
        })
        .encode(),
        Err(EncodeError::MessageTooLarge(65536))
    );
    assert_eq!(
        Message::Pong {
            zeroes: MAX_PONG_ZEROES + 1
        }
        .encode(),
        Err(EncodeError::MessageTooLarge(65536))
    );
    // Truncated zero bytes.
    assert!(matches!(
        Message::decode(&h("000c 0003 0000")),
        Err(DecodeError::UnexpectedEnd { .. })
    ));
    // Zero bytes are not checked to be zero.
    assert_eq!(
        Message::decode(&h("000c 0002 ffff")).unwrap(),
        Message::Pong { zeroes: 2 }
    );
}

// ---- §9.1 radicle/src/node.rs test_user_agent ---------------------------------------------

#[test]
fn user_agents() {
    for ok in [
        "/radicle:1.0.0/",
        "/radicle:1.0.0/heartwood:0.9/",
        "/radicle:1.0.0/heartwood:0.9/rust:1.77/",
        "/radicle:1.0.0-rc.1/",
        "/radicle:@a.b.c/",
        "/radicle/",
        "/rad/icle/",
        "/rad:ic/le/",
        "/heartwood:1.8.0-6-gf223afd9d-dirty/",
        "/radicle/message/truncated/",
        "/a//b/",
        "/radi cle/",
        "/a:b:c/",
    ] {
        assert!(UserAgent::from_str(ok).is_ok(), "{ok:?} should be valid");
    }
    for bad in [
        "/:/",
        "//",
        "",
        "/",
        "radicle:1.0.0/",
        "/radicle:1.0.0",
        "/radi cle:1.0/",
        "/radi\ncle:1.0/",
        "/radicle:/",
        "/:1.0/",
        "/é:1/",
    ] {
        assert!(
            UserAgent::from_str(bad).is_err(),
            "{bad:?} should be invalid"
        );
    }
    let max = format!("/{}/", "a".repeat(62));
    assert!(UserAgent::from_str(&max).is_ok());
    assert!(UserAgent::from_str(&format!("/{}/", "a".repeat(63))).is_err());
    assert!(UserAgent::seedd().as_str().starts_with("/seedd:"));
    assert!(UserAgent::from_str(UserAgent::seedd().as_str()).is_ok());
}

#[test]
fn node_announcement_decode_rules() {
    let header = format!("0002 {PK_A} {NODE_SIG}");
    let prefix = "01 0000000000000001 0000018bcfe56800";
    // Truncated before the agent: substituted.
    let truncated = h(&format!(
        "{header} {prefix} 04 73656564 0000 0000000000000001"
    ));
    let Message::Announcement(Announcement {
        message: AnnouncementMessage::Node(node),
        ..
    }) = Message::decode(&truncated).unwrap()
    else {
        panic!("not a node announcement")
    };
    assert_eq!(node.agent.as_str(), "/radicle/message/truncated/");
    // Truncated inside the agent: also substituted.
    let partial = h(&format!(
        "{header} {prefix} 04 73656564 0000 0000000000000001 0f 2f72"
    ));
    assert!(Message::decode(&partial).is_ok());
    // Invalid agent.
    let bad_agent = h(&format!(
        "{header} {prefix} 04 73656564 0000 0000000000000001 03 616263"
    ));
    assert_eq!(
        Message::decode(&bad_agent),
        Err(DecodeError::InvalidUserAgent("abc".into()))
    );
    // Empty alias.
    let empty_alias = h(&format!("{header} {prefix} 00 0000"));
    assert_eq!(
        Message::decode(&empty_alias),
        Err(DecodeError::InvalidAlias(AliasError::Empty))
    );
    // Alias with a space; invalid UTF-8.
    let space = h(&format!("{header} {prefix} 03 612062"));
    assert_eq!(
        Message::decode(&space),
        Err(DecodeError::InvalidAlias(AliasError::InvalidCharacter))
    );
    let utf8 = h(&format!("{header} {prefix} 02 c328"));
    assert_eq!(Message::decode(&utf8), Err(DecodeError::InvalidUtf8));
    // Timestamp above i64::MAX.
    let ts = h(&format!("{header} 01 0000000000000001 8000000000000000"));
    assert_eq!(
        Message::decode(&ts),
        Err(DecodeError::InvalidTimestamp(1 << 63))
    );
    // Any version and feature bits are accepted.
    let mut other = node_announcement();
    other.version = 7;
    other.features = u64::MAX;
    let msg = Message::Announcement(AnnouncementMessage::Node(other).sign(&key_a()).unwrap());
    assert_eq!(Message::decode(&msg.encode().unwrap()).unwrap(), msg);
    // Encoding a timestamp above i64::MAX fails.
    let mut future = node_announcement();
    future.timestamp = 1 << 63;
    assert_eq!(
        AnnouncementMessage::Node(future).encode_body(),
        Err(EncodeError::InvalidTimestamp(1 << 63))
    );
}

#[test]
fn message_decode_errors() {
    assert_eq!(
        Message::decode(&h("0003")),
        Err(DecodeError::InvalidMessageType(3))
    );
    assert_eq!(
        Message::decode(&h("0000")),
        Err(DecodeError::InvalidMessageType(0))
    );
    assert_eq!(
        Message::decode(&h("000e 0002")),
        Err(DecodeError::InvalidInfoType(2))
    );
    assert_eq!(
        Message::decode(&h(&format!("000e 0001 0013 {HEARTWOOD}"))),
        Err(DecodeError::InvalidOidLength(19))
    );
    assert_eq!(
        Message::decode(&h(&format!("000e 0001 0014 {HEARTWOOD} 0020"))),
        Err(DecodeError::InvalidOidLength(32))
    );
    assert!(matches!(
        Message::decode(&h("00")),
        Err(DecodeError::UnexpectedEnd { .. })
    ));
    assert!(matches!(
        Message::decode(&[]),
        Err(DecodeError::UnexpectedEnd { .. })
    ));
    // Subscribe timestamps above i64::MAX.
    let mut sub = Message::Subscribe(Subscribe::all()).encode().unwrap();
    let len = sub.len();
    sub[len - 8] = 0x80;
    assert_eq!(
        Message::decode(&sub),
        Err(DecodeError::InvalidTimestamp(0x80ff_ffff_ffff_ffff))
    );
    // Subscribe with since > until decodes (the service must handle it).
    let inverted = h(&format!(
        "0008 0400 {} 0000000000000002 0000000000000001",
        "00".repeat(1024)
    ));
    assert!(Message::decode(&inverted).is_ok());
    // decode_prefix reports the consumed length.
    let mut two = Message::Pong { zeroes: 1 }.encode().unwrap();
    two.extend(h("ffff"));
    assert_eq!(
        Message::decode_prefix(&two).unwrap(),
        (Message::Pong { zeroes: 1 }, 5)
    );
}

// ---- addresses ----------------------------------------------------------------------------

#[test]
fn address_encodings() {
    let cases = [
        (
            Address::new(Host::Ipv4(Ipv4Addr::new(127, 0, 0, 1)), 8776),
            "01 7f000001 2248",
        ),
        (
            Address::new(Host::Ipv6(Ipv6Addr::LOCALHOST), 8776),
            "02 00000000000000000000000000000001 2248",
        ),
        (
            Address::new(Host::Dns("seed.example.com".into()), 8776),
            "03 10 736565642e6578616d706c652e636f6d 2248",
        ),
    ];
    for (address, hex) in cases {
        assert_eq!(address.encode().unwrap(), h(hex));
        assert_eq!(
            Address::decode_prefix(&h(hex)).unwrap(),
            (address, h(hex).len())
        );
    }
    for ty in [0u8, 6, 255] {
        assert_eq!(
            Address::decode_prefix(&[ty, 0, 0, 0, 0, 0, 0]),
            Err(DecodeError::InvalidAddressType(ty))
        );
    }
    assert_eq!(
        Address::new(Host::Dns("x".repeat(256)), 1).encode(),
        Err(EncodeError::StringTooLong(256))
    );
}

#[test]
fn onion_addresses() {
    // cypheraddr tor.rs `display_from_str` / `binary_code`.
    let text = "vww6ybal4bd7szmgncyruucpgfkqahzddi37ktceo3ah7ngmcopnpyyd.onion";
    let onion = OnionAddrV3::from_str(text).unwrap();
    assert_eq!(onion.to_string(), text);
    let raw = onion.to_raw_bytes();
    assert_eq!(raw[34], 3);
    assert_eq!(OnionAddrV3::from_raw_bytes(raw).unwrap(), onion);

    let address = Address::new(Host::Onion(onion), 8776);
    let mut expected = vec![4];
    expected.extend_from_slice(&raw);
    expected.extend(h("2248"));
    assert_eq!(address.encode().unwrap(), expected);
    assert_eq!(
        Address::decode_prefix(&expected).unwrap(),
        (address, expected.len())
    );

    let mut bad_version = raw;
    bad_version[34] = 2;
    assert_eq!(
        OnionAddrV3::from_raw_bytes(bad_version),
        Err(OnionError::UnsupportedVersion(2))
    );
    let mut bad_checksum = raw;
    bad_checksum[32] ^= 1;
    assert!(matches!(
        OnionAddrV3::from_raw_bytes(bad_checksum),
        Err(OnionError::InvalidChecksum { .. })
    ));
    let mut wire = expected.clone();
    wire[33] ^= 1;
    assert!(matches!(
        Address::decode_prefix(&wire),
        Err(DecodeError::InvalidOnion(
            OnionError::InvalidChecksum { .. }
        ))
    ));
}

#[test]
fn i2p_addresses() {
    // cypheraddr i2p.rs `roundtrip` / `invalid`.
    for raw in [
        "khpazz3f747z5zet72s6g3dccw53bfdqyhxt5da4sv7ouve5veuq.b32.i2p",
        "udhdrtrcetjm5sxzskjyr5ztpeszydbh4dpl3pl4utgqqw2v4jna.b32.i2p",
        "i2p-projekt.i2p",
        "shx5vqsw7usdaunyzr2qmes2fq37oumybpudrd4jjj4e4vk4uusa.b32.i2p",
        "lhxgk47niirkle3zb35fyq2iyzgvpmzydjqbirzcjng3lookrmmxalzz.b32.i2p",
    ] {
        assert_eq!(I2pAddr::from_str(raw).unwrap().to_string(), raw);
        let alt = format!("{raw}.alt");
        assert_eq!(I2pAddr::from_str(&alt).unwrap().to_string(), alt);
        let address = Address::new(Host::I2p(raw.parse().unwrap()), 1);
        let bytes = address.encode().unwrap();
        assert_eq!(bytes[0], 5);
        assert_eq!(usize::from(bytes[1]), raw.len());
        assert_eq!(&bytes[2..2 + raw.len()], raw.as_bytes());
        assert_eq!(Address::decode_prefix(&bytes).unwrap().0, address);
    }
    for bad in [
        "khpazz3f747z5zet72s6g3dccw53bfdqyhxt5da4sv7ouve5veuq",
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.b32.i2p",
        "x.b32.i2p",
        "khpazz3f747z5zet72s6g3dccw53bfdqyhxt5da4sv7ouve5ve1q.b32.i2p",
    ] {
        assert!(I2pAddr::from_str(bad).is_err(), "{bad:?}");
    }
    // Upper case is accepted and printed in lower case, like cypheraddr.
    let upper = "KHPAZZ3F747Z5ZET72S6G3DCCW53BFDQYHXT5DA4SV7OUVE5VEUQ.b32.i2p";
    assert_eq!(
        I2pAddr::from_str(upper).unwrap().to_string(),
        "khpazz3f747z5zet72s6g3dccw53bfdqyhxt5da4sv7ouve5veuq.b32.i2p"
    );
    // A 52-character name ending in `=` decodes to fewer than 32 bytes.
    let padded = format!("{}=.b32.i2p", "a".repeat(51));
    assert!(I2pAddr::from_str(&padded).is_err());
}

#[test]
fn address_from_str() {
    let cases = [
        ("127.0.0.1:8776", Host::Ipv4(Ipv4Addr::new(127, 0, 0, 1))),
        ("[::1]:8776", Host::Ipv6(Ipv6Addr::LOCALHOST)),
        (
            "seed.example.com:8776",
            Host::Dns("seed.example.com".into()),
        ),
        (
            "vww6ybal4bd7szmgncyruucpgfkqahzddi37ktceo3ah7ngmcopnpyyd.onion:8776",
            Host::Onion(
                "vww6ybal4bd7szmgncyruucpgfkqahzddi37ktceo3ah7ngmcopnpyyd.onion"
                    .parse()
                    .unwrap(),
            ),
        ),
        (
            "i2p-projekt.i2p:8776",
            Host::I2p("i2p-projekt.i2p".parse().unwrap()),
        ),
    ];
    for (text, host) in cases {
        let address = Address::from_str(text).unwrap();
        assert_eq!(address, Address::new(host, 8776));
        assert_eq!(address.to_string(), text);
    }
    for bad in [
        "",
        "host",
        "host:",
        "host:99999",
        ":8776",
        "::1:8776",
        "a b:1",
    ] {
        assert!(Address::from_str(bad).is_err(), "{bad:?}");
    }
}

// ---- frame decoder ------------------------------------------------------------------------

#[test]
fn frame_decoder_byte_by_byte() {
    let s12 = StreamId::git(Link::Outbound, 1).unwrap();
    let frames = vec![
        Frame::control(Link::Outbound, Control::Open { stream: s12 }),
        Frame::git(s12, b"0014command=ls-refs\n".to_vec()),
        Frame::gossip(Link::Outbound, Message::Subscribe(Subscribe::all())),
        Frame::git(s12, vec![]),
        Frame::control(Link::Outbound, Control::Eof { stream: s12 }),
    ];
    let bytes: Vec<u8> = frames.iter().flat_map(frame_bytes).collect();
    let mut decoder = FrameDecoder::new();
    let mut out = Vec::new();
    for byte in &bytes {
        decoder.push(std::slice::from_ref(byte));
        while let Some(frame) = decoder.next_frame().unwrap() {
            out.push(frame);
        }
    }
    assert_eq!(out, frames);
    assert_eq!(decoder.buffered(), 0);

    // All at once, via the iterator.
    let mut decoder = FrameDecoder::new();
    decoder.push(&bytes);
    let all: Result<Vec<Frame>, FrameError> = decoder.by_ref().collect();
    assert_eq!(all.unwrap(), frames);
}

#[test]
fn frame_errors() {
    let limits = FrameLimits::default();
    // Bad magic or version, detected from the first wrong byte.
    assert_eq!(
        decode_frame(b"rad\x02\x02\x00", &limits),
        Err(FrameError::InvalidMagic(b"rad\x02".to_vec()))
    );
    assert_eq!(
        decode_frame(b"x", &limits),
        Err(FrameError::InvalidMagic(b"x".to_vec()))
    );
    assert_eq!(decode_frame(b"ra", &limits), Ok(None));
    assert_eq!(decode_frame(b"", &limits), Ok(None));
    // Stream kind 3 (ids 6, 7, 14, …).
    assert_eq!(
        decode_frame(&h("72616401 06 00"), &limits),
        Err(FrameError::InvalidStreamKind(6))
    );
    assert_eq!(
        decode_frame(&h("72616401 0f"), &limits),
        Err(FrameError::InvalidStreamKind(15))
    );
    // Unknown control type.
    assert_eq!(
        decode_frame(&h("72616401 00 03"), &limits),
        Err(FrameError::InvalidControlType(3))
    );
    // Incomplete frames.
    for partial in [
        "72616401",
        "72616401 00",
        "72616401 00 00",
        "72616401 0c 14 3030",
        "72616401 40",
    ] {
        assert_eq!(decode_frame(&h(partial), &limits), Ok(None), "{partial}");
    }
    // Oversized gossip payload, detected from the header alone.
    assert_eq!(
        decode_frame(&h("72616401 02 80010000"), &limits),
        Err(FrameError::GossipTooLarge {
            len: 65536,
            max: 65535
        })
    );
    // Oversized git payload.
    assert_eq!(
        decode_frame(&h("72616401 0c 80200000"), &limits),
        Err(FrameError::FrameTooLarge {
            len: 2 * 1024 * 1024 + 9,
            max: 2 * 1024 * 1024
        })
    );
    assert!(matches!(
        decode_frame(&h("72616401 0c ffffffffffffffff"), &limits),
        Err(FrameError::FrameTooLarge { .. })
    ));
    // A git frame of exactly the limit is accepted.
    let small = FrameLimits {
        max_gossip_payload: 10,
        max_frame_size: 16,
    };
    let mut exact = h("72616401 0c 0a");
    exact.extend([7u8; 9]);
    assert_eq!(decode_frame(&exact, &small), Ok(None));
    exact.push(7);
    assert!(decode_frame(&exact, &small).unwrap().is_some());
    // A gossip payload holding a truncated or invalid message.
    assert!(matches!(
        decode_frame(&h("72616401 02 03 000c00"), &limits),
        Err(FrameError::Message(DecodeError::UnexpectedEnd { .. }))
    ));
    assert_eq!(
        decode_frame(&h("72616401 02 02 0010"), &limits),
        Err(FrameError::Message(DecodeError::InvalidMessageType(16)))
    );
    // Encoding checks the stream kind.
    let s12 = StreamId::git(Link::Outbound, 1).unwrap();
    assert_eq!(
        Frame::Git {
            stream: StreamId::gossip(Link::Outbound),
            data: vec![]
        }
        .encode(),
        Err(EncodeError::StreamKindMismatch { stream: 2 })
    );
    let mut out = vec![1, 2, 3];
    assert!(Frame::Control {
        stream: s12,
        control: Control::Open { stream: s12 }
    }
    .encode_into(&mut out)
    .is_err());
    assert_eq!(out, [1, 2, 3]);

    // The decoder's error is sticky; the iterator yields it once.
    let mut decoder = FrameDecoder::new();
    decoder.push(&h("72616401 02 07 000c0003000000 72616402"));
    assert!(decoder.next_frame().unwrap().is_some());
    let err = decoder.next_frame().unwrap_err();
    assert_eq!(decoder.next_frame().unwrap_err(), err);
    decoder.push(&h("72616401 02 07 000c0003000000"));
    assert_eq!(decoder.next_frame().unwrap_err(), err);
    let mut decoder = FrameDecoder::new();
    decoder.push(b"GET / HTTP/1.1\r\n");
    assert!(matches!(
        decoder.next(),
        Some(Err(FrameError::InvalidMagic(_)))
    ));
    assert!(decoder.next().is_none());
}

#[test]
fn control_frames_for_any_stream() {
    // Control frames may name any stream id (no kind check), with long varints.
    let big = StreamId::new(varint::MAX).unwrap();
    for control in [
        Control::Open { stream: big },
        Control::Close { stream: big },
        Control::Eof { stream: big },
    ] {
        let frame = Frame::control(Link::Inbound, control);
        let bytes = frame.encode().unwrap();
        assert_eq!(bytes.len(), 4 + 1 + 1 + 8);
        assert_eq!(decode_one(&bytes), frame);
        assert_eq!(control.target(), big);
    }
}
