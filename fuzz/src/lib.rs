//! Shared pieces of the fuzz targets: the round-trip checks and the sample values the seed
//! corpus is made of (`examples/seed_corpus.rs`).

use std::net::{Ipv4Addr, Ipv6Addr};

use seedd_proto::crypto::{Keypair, RepoId};
use seedd_proto::wire::address::{Host, I2pAddr, OnionAddrV3};
use seedd_proto::wire::handshake::FIXED_EPHEMERAL_SEED;
use seedd_proto::wire::message::{InventoryAnnouncement, NodeAnnouncement, RefsAnnouncement};
use seedd_proto::wire::{
    decode_frame, Address, AnnouncementMessage, Control, EncodeError, Filter, Frame, FrameLimits,
    Info, Link, Message, Oid, Ping, RefsAt, StreamId, Subscribe, MAX_MESSAGE_SIZE,
};

/// Seed of the responder's static key in `handshake_responder`.
pub const RESPONDER_SEED: [u8; 32] = [2; 32];

/// The responder's static and ephemeral keys in `handshake_responder` (the ephemeral is the
/// fixed one every official node uses).
pub fn responder_keys() -> (Keypair, Keypair) {
    (
        Keypair::from_seed(RESPONDER_SEED),
        Keypair::from_seed(FIXED_EPHEMERAL_SEED),
    )
}

/// Encoding a decoded message may fail only where the protocol lets the decoder accept what
/// the encoder refuses on purpose:
/// * a Subscribe with `since > until` decodes (the service must handle it) but is never sent
///   (it panics official nodes);
/// * a message read from more than [`MAX_MESSAGE_SIZE`] bytes (only reachable through
///   `Message::decode`, not through frames, whose gossip payload is capped).
fn encode_refusal_allowed(message: &Message, err: &EncodeError, consumed: usize) -> bool {
    match err {
        EncodeError::InvertedRange { .. } => {
            matches!(message, Message::Subscribe(sub) if sub.since > sub.until)
        }
        EncodeError::MessageTooLarge(_) => consumed > MAX_MESSAGE_SIZE,
        _ => false,
    }
}

/// A decoded message re-encodes (unless [`encode_refusal_allowed`]) and the encoding decodes
/// to an equal message, consuming exactly the encoding. `consumed` is how many input bytes
/// the first decode took.
pub fn check_message_round_trip(message: &Message, consumed: usize) {
    let bytes = match message.encode() {
        Ok(bytes) => bytes,
        Err(err) if encode_refusal_allowed(message, &err, consumed) => return,
        Err(err) => panic!("decoded message does not re-encode: {err}: {message:?}"),
    };
    assert!(
        bytes.len() <= MAX_MESSAGE_SIZE,
        "encoder exceeded the size cap"
    );
    match Message::decode_prefix(&bytes) {
        Ok((again, used)) => {
            assert_eq!(&again, message, "re-encoded message decodes differently");
            assert_eq!(used, bytes.len(), "re-encoded message not fully consumed");
        }
        Err(err) => panic!("re-encoded message does not decode: {err}: {message:?}"),
    }
}

/// A decoded frame re-encodes (a gossip frame's message under the same exceptions as
/// [`check_message_round_trip`]) and decodes to an equal frame, consuming exactly the
/// encoding.
pub fn check_frame_round_trip(frame: &Frame) {
    let bytes = match frame.encode() {
        Ok(bytes) => bytes,
        Err(err) => match frame {
            // The payload was at most MAX_MESSAGE_SIZE bytes.
            Frame::Gossip { message, .. } if encode_refusal_allowed(message, &err, 0) => return,
            _ => panic!("decoded frame does not re-encode: {err}: {frame:?}"),
        },
    };
    match decode_frame(&bytes, &FrameLimits::default()) {
        Ok(Some((again, used))) => {
            assert_eq!(&again, frame, "re-encoded frame decodes differently");
            assert_eq!(used, bytes.len(), "re-encoded frame not fully consumed");
        }
        Ok(None) => panic!("re-encoded frame is incomplete: {frame:?}"),
        Err(err) => panic!("re-encoded frame does not decode: {err}: {frame:?}"),
    }
}

/// 1700000000000 ms.
pub const T: u64 = 1_700_000_000_000;

fn rid(n: u8) -> RepoId {
    let mut bytes = [0u8; 20];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = n.wrapping_mul(31).wrapping_add(i as u8);
    }
    RepoId::from_oid_bytes(bytes)
}

/// Valid messages of every kind (announcements signed by `Keypair::from_seed([1; 32])`).
pub fn sample_messages() -> Vec<Message> {
    let key = Keypair::from_seed([1; 32]);
    let rids: Vec<RepoId> = (0..50).map(rid).collect();
    let node = NodeAnnouncement {
        version: 1,
        features: 1,
        timestamp: T,
        alias: "seed.example".parse().expect("valid alias"),
        addresses: vec![
            Address::new(Host::Ipv4(Ipv4Addr::new(192, 0, 2, 1)), 8776),
            Address::new(Host::Ipv6(Ipv6Addr::LOCALHOST), 8776),
            Address::new(Host::Dns("seed.example.com".into()), 8776),
            Address::new(Host::Onion(OnionAddrV3::from_public_key([7; 32])), 8776),
            Address::new(
                Host::I2p(I2pAddr::Base32 {
                    digest: [9; 32],
                    alt: false,
                }),
                8776,
            ),
            Address::new(
                Host::I2p(I2pAddr::Name {
                    name: "seed".into(),
                    alt: true,
                }),
                8776,
            ),
        ],
        nonce: 1,
        agent: "/radicle:1.6.0/".parse().expect("valid agent"),
    };
    let inventory = InventoryAnnouncement {
        inventory: rids.clone(),
        timestamp: T,
    };
    let refs = RefsAnnouncement {
        rid: rid(1),
        refs: (0..3u8)
            .map(|i| RefsAt {
                remote: Keypair::from_seed([i + 10; 32]).nid(),
                at: Oid([i; 20]),
            })
            .collect(),
        timestamp: T,
    };
    let mut messages: Vec<Message> = [
        AnnouncementMessage::Node(node),
        AnnouncementMessage::Inventory(inventory),
        AnnouncementMessage::Refs(refs),
    ]
    .into_iter()
    .map(|ann| Message::Announcement(ann.sign(&key).expect("signable")))
    .collect();
    messages.extend([
        Message::Subscribe(Subscribe::all()),
        Message::Subscribe(Subscribe {
            filter: Filter::new(&rids),
            since: T - 1000,
            until: T,
        }),
        Message::Ping(Ping {
            ponglen: 4,
            zeroes: 8,
        }),
        Message::Pong { zeroes: 4 },
        Message::Info(Info::RefsAlreadySynced {
            rid: rid(2),
            at: Oid([3; 20]),
        }),
    ]);
    messages
}

/// Valid frames: one gossip frame per sample message, control frames and a git frame.
pub fn sample_frames() -> Vec<Frame> {
    let git = StreamId::git(Link::Outbound, 1).expect("small stream id");
    let mut frames: Vec<Frame> = sample_messages()
        .into_iter()
        .map(|m| Frame::gossip(Link::Inbound, m))
        .collect();
    frames.extend([
        Frame::control(Link::Outbound, Control::Open { stream: git }),
        Frame::git(git, b"0014command=ls-refs\n0000".to_vec()),
        Frame::control(Link::Outbound, Control::Eof { stream: git }),
        Frame::control(Link::Inbound, Control::Close { stream: git }),
    ]);
    frames
}
