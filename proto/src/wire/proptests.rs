//! Property tests: encode → decode is the identity for every message and frame, and the
//! decoders never panic on arbitrary or mutated bytes.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::collection::vec;
use proptest::prelude::*;

use super::address::{Address, Host, I2pAddr, OnionAddrV3};
use super::filter::{Filter, FILTER_SIZES};
use super::frame::{decode_frame, Control, Frame, FrameDecoder, FrameLimits, StreamId};
use super::message::*;
use super::{varint, TIMESTAMP_MAX};
use crate::crypto::{Keypair, NodeId, RepoId};

fn node_id() -> impl Strategy<Value = NodeId> {
    any::<[u8; 32]>().prop_map(NodeId::from_bytes)
}

fn rid() -> impl Strategy<Value = RepoId> {
    any::<[u8; 20]>().prop_map(RepoId::from_oid_bytes)
}

fn oid() -> impl Strategy<Value = Oid> {
    any::<[u8; 20]>().prop_map(Oid)
}

fn timestamp() -> impl Strategy<Value = u64> {
    prop_oneof![0..=TIMESTAMP_MAX, Just(TIMESTAMP_MAX), Just(0)]
}

fn signature() -> impl Strategy<Value = [u8; 64]> {
    vec(any::<u8>(), 64).prop_map(|v| {
        let mut sig = [0u8; 64];
        sig.copy_from_slice(&v);
        sig
    })
}

fn alias() -> impl Strategy<Value = Alias> {
    "\\PC{1,8}".prop_filter_map("valid alias", |s| s.parse().ok())
}

fn user_agent() -> impl Strategy<Value = UserAgent> {
    vec("[a-z0-9.-]{0,8}(:[!-~]{1,6})?", 1..4).prop_filter_map("valid user agent", |segments| {
        format!("/{}/", segments.join("/")).parse().ok()
    })
}

fn i2p() -> impl Strategy<Value = I2pAddr> {
    prop_oneof![
        (any::<[u8; 32]>(), any::<bool>())
            .prop_map(|(digest, alt)| I2pAddr::Base32 { digest, alt }),
        (vec(any::<u8>(), 35..80), any::<bool>())
            .prop_map(|(bytes, alt)| I2pAddr::ExtendedBase32 { bytes, alt }),
        ("[a-z0-9-]{0,20}", any::<bool>()).prop_map(|(name, alt)| I2pAddr::Name { name, alt }),
    ]
}

fn host() -> impl Strategy<Value = Host> {
    prop_oneof![
        any::<u32>().prop_map(|ip| Host::Ipv4(Ipv4Addr::from(ip))),
        any::<u128>().prop_map(|ip| Host::Ipv6(Ipv6Addr::from(ip))),
        "\\PC{0,40}".prop_map(Host::Dns),
        any::<[u8; 32]>().prop_map(|pk| Host::Onion(OnionAddrV3::from_public_key(pk))),
        i2p().prop_map(Host::I2p),
    ]
}

fn address() -> impl Strategy<Value = Address> {
    (host(), any::<u16>()).prop_map(|(host, port)| Address::new(host, port))
}

fn filter() -> impl Strategy<Value = Filter> {
    prop::sample::select(FILTER_SIZES.to_vec())
        .prop_flat_map(|size| vec(any::<u8>(), size))
        .prop_map(|bytes| Filter::from_bytes(bytes).unwrap())
}

fn node_announcement() -> impl Strategy<Value = NodeAnnouncement> {
    (
        any::<u8>(),
        any::<u64>(),
        timestamp(),
        alias(),
        vec(address(), 0..=ADDRESS_LIMIT),
        any::<u64>(),
        user_agent(),
    )
        .prop_map(
            |(version, features, timestamp, alias, addresses, nonce, agent)| NodeAnnouncement {
                version,
                features,
                timestamp,
                alias,
                addresses,
                nonce,
                agent,
            },
        )
}

fn announcement_message() -> impl Strategy<Value = AnnouncementMessage> {
    prop_oneof![
        node_announcement().prop_map(AnnouncementMessage::Node),
        (vec(rid(), 0..64), timestamp()).prop_map(|(inventory, timestamp)| {
            AnnouncementMessage::Inventory(InventoryAnnouncement {
                inventory,
                timestamp,
            })
        }),
        (rid(), vec((node_id(), oid()), 0..64), timestamp()).prop_map(|(rid, refs, timestamp)| {
            AnnouncementMessage::Refs(RefsAnnouncement {
                rid,
                refs: refs
                    .into_iter()
                    .map(|(remote, at)| RefsAt { remote, at })
                    .collect(),
                timestamp,
            })
        }),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (node_id(), signature(), announcement_message()).prop_map(|(node, signature, message)| {
            Message::Announcement(Announcement {
                node,
                signature,
                message,
            })
        }),
        (filter(), timestamp(), timestamp()).prop_map(|(filter, a, b)| {
            Message::Subscribe(Subscribe {
                filter,
                since: a.min(b),
                until: a.max(b),
            })
        }),
        (rid(), oid()).prop_map(|(rid, at)| Message::Info(Info::RefsAlreadySynced { rid, at })),
        (any::<u16>(), 0..=MAX_PING_ZEROES)
            .prop_map(|(ponglen, zeroes)| Message::Ping(Ping { ponglen, zeroes })),
        (0..=MAX_PONG_ZEROES).prop_map(|zeroes| Message::Pong { zeroes }),
    ]
}

/// A stream id of the given kind (0, 1, 2) with random counter and initiator bit.
fn stream_of_kind(kind: u64) -> impl Strategy<Value = StreamId> {
    (0u64..(1 << 59), any::<bool>())
        .prop_map(move |(n, bit)| StreamId::new((n << 3) | (kind << 1) | u64::from(bit)).unwrap())
}

fn frame() -> impl Strategy<Value = Frame> {
    let control = (0u8..3, stream_of_kind(0), 0..=varint::MAX).prop_map(|(ty, stream, target)| {
        let target = StreamId::new(target).unwrap();
        let control = match ty {
            0 => Control::Open { stream: target },
            1 => Control::Close { stream: target },
            _ => Control::Eof { stream: target },
        };
        Frame::Control { stream, control }
    });
    let gossip = (stream_of_kind(1), message())
        .prop_map(|(stream, message)| Frame::Gossip { stream, message });
    let git = (stream_of_kind(2), vec(any::<u8>(), 0..2000))
        .prop_map(|(stream, data)| Frame::Git { stream, data });
    prop_oneof![control, gossip, git]
}

/// Splits `bytes` at the given (sorted, deduplicated) cut points.
fn chunks(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    points.dedup();
    let mut out = Vec::new();
    let mut start = 0;
    for p in points {
        out.push(bytes[start..p].to_vec());
        start = p;
    }
    out.push(bytes[start..].to_vec());
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn prop_varint_round_trip(value in prop_oneof![0..=varint::MAX, 0u64..100_000]) {
        let bytes = varint::encode_to_vec(value).unwrap();
        prop_assert_eq!(Some(bytes.len()), varint::encoded_len(value));
        prop_assert_eq!(varint::decode(&bytes).unwrap(), (value, bytes.len()));
    }

    /// A probe (the repository hashed once for a relay, its bit indices taken for every
    /// filter size) answers as `contains` (the indices computed for the filter), at each of
    /// the three sizes.
    #[test]
    fn prop_filter_probe_agrees_with_contains(
        members in proptest::collection::vec(rid(), 0..40),
        others in proptest::collection::vec(rid(), 1..20),
        extra in prop_oneof![Just(0u32), Just(2_000), Just(20_000)],
    ) {
        let mut all = members.clone();
        all.extend((0..extra).map(|n| {
            let mut b = [0u8; 20];
            b[..4].copy_from_slice(&n.to_be_bytes());
            RepoId::from_oid_bytes(b)
        }));
        let filter = Filter::new(all.iter());
        let want = match extra {
            0 => crate::wire::filter::FILTER_SIZE_S,
            2_000 => crate::wire::filter::FILTER_SIZE_M,
            _ => crate::wire::filter::FILTER_SIZE_L,
        };
        prop_assert_eq!(filter.size(), want);
        for r in members.iter().chain(&others) {
            prop_assert_eq!(
                filter.contains_probe(&crate::wire::filter::Probe::new(r)),
                filter.contains(r)
            );
        }
        for r in &members {
            prop_assert!(filter.contains_probe(&crate::wire::filter::Probe::new(r)));
        }
    }

    #[test]
    fn prop_varint_overflow(value in (varint::MAX + 1)..=u64::MAX) {
        prop_assert!(varint::encode_to_vec(value).is_err());
        prop_assert!(StreamId::new(value).is_err());
    }

    #[test]
    fn prop_address_round_trip(address in address()) {
        let bytes = address.encode().unwrap();
        prop_assert_eq!(Address::decode_prefix(&bytes).unwrap(), (address, bytes.len()));
    }

    #[test]
    fn prop_message_round_trip(message in message()) {
        let bytes = message.encode().unwrap();
        prop_assert!(bytes.len() <= super::MAX_MESSAGE_SIZE);
        prop_assert_eq!(Message::decode_prefix(&bytes).unwrap(), (message.clone(), bytes.len()));
        // Trailing bytes are ignored.
        let mut extended = bytes.clone();
        extended.extend_from_slice(b"\x05extra0");
        prop_assert_eq!(Message::decode(&extended).unwrap(), message);
    }

    #[test]
    fn prop_announcement_body_round_trip(message in announcement_message()) {
        let body = message.encode_body().unwrap();
        let decoded = AnnouncementMessage::decode_body(message.message_type(), &body).unwrap();
        prop_assert_eq!(decoded, message);
    }

    #[test]
    fn prop_signed_announcements_verify(seed in any::<[u8; 32]>(), message in announcement_message()) {
        let key = Keypair::from_seed(seed);
        let ann = message.sign(&key).unwrap();
        prop_assert!(ann.verify());
        let bytes = Message::Announcement(ann.clone()).encode().unwrap();
        let Message::Announcement(decoded) = Message::decode(&bytes).unwrap() else {
            panic!("not an announcement");
        };
        prop_assert!(decoded.verify());
        prop_assert_eq!(decoded, ann);
    }

    #[test]
    fn prop_filter_contains_inserted(rids in vec(rid(), 0..200)) {
        let f = Filter::new(&rids);
        prop_assert!(rids.iter().all(|rid| f.contains(rid)));
        prop_assert!(Filter::default().contains(&rids.first().copied().unwrap_or(RepoId::from_oid_bytes([0; 20]))));
    }

    #[test]
    fn prop_frame_round_trip(frame in frame()) {
        let bytes = frame.encode().unwrap();
        let (decoded, used) = decode_frame(&bytes, &FrameLimits::default()).unwrap().unwrap();
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!(decoded, frame.clone());
        // Every proper prefix is incomplete, not an error.
        for cut in [0, 1, 3, 4, 5, bytes.len() / 2, bytes.len() - 1] {
            if cut < bytes.len() {
                prop_assert_eq!(decode_frame(&bytes[..cut], &FrameLimits::default()), Ok(None));
            }
        }
    }

    #[test]
    fn prop_frame_decoder_any_chunking(
        frames in vec(frame(), 1..6),
        cuts in vec(any::<usize>(), 0..12),
    ) {
        let bytes: Vec<u8> = frames.iter().flat_map(|f| f.encode().unwrap()).collect();
        let mut decoder = FrameDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks(&bytes, &cuts) {
            decoder.push(&chunk);
            while let Some(frame) = decoder.next_frame().unwrap() {
                out.push(frame);
            }
        }
        prop_assert_eq!(out, frames);
        prop_assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn prop_message_decode_never_panics(bytes in vec(any::<u8>(), 0..600)) {
        let _ = Message::decode(&bytes);
        let _ = Address::decode_prefix(&bytes);
        let _ = varint::decode(&bytes);
        for kind in [MessageType::NodeAnnouncement, MessageType::InventoryAnnouncement, MessageType::RefsAnnouncement, MessageType::Ping] {
            let _ = AnnouncementMessage::decode_body(kind, &bytes);
        }
    }

    #[test]
    fn prop_message_decode_never_panics_typed(ty in prop::sample::select(vec![2u16, 4, 6, 8, 10, 12, 14]), bytes in vec(any::<u8>(), 0..600)) {
        let mut input = ty.to_be_bytes().to_vec();
        input.extend_from_slice(&bytes);
        let _ = Message::decode(&input);
    }

    #[test]
    fn prop_mutated_messages_never_panic(
        message in message(),
        flips in vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let mut bytes = message.encode().unwrap();
        for (pos, value) in flips {
            let len = bytes.len();
            bytes[pos % len] ^= value;
        }
        let _ = Message::decode(&bytes);
        bytes.truncate(cut % (bytes.len() + 1));
        let _ = Message::decode(&bytes);
    }

    #[test]
    fn prop_frame_decoder_never_panics(
        bytes in vec(any::<u8>(), 0..600),
        cuts in vec(any::<usize>(), 0..8),
        framed in any::<bool>(),
    ) {
        // Half the cases start with a valid magic so the decoder gets past it.
        let mut input = if framed { b"rad\x01".to_vec() } else { Vec::new() };
        input.extend_from_slice(&bytes);
        let _ = decode_frame(&input, &FrameLimits::default());
        let mut decoder = FrameDecoder::new();
        for chunk in chunks(&input, &cuts) {
            decoder.push(&chunk);
            while let Ok(Some(_)) = decoder.next_frame() {}
        }
        prop_assert!(decoder.buffered() <= input.len());
    }

    #[test]
    fn prop_mutated_frames_never_panic(
        frames in vec(frame(), 1..4),
        flips in vec((any::<usize>(), any::<u8>()), 1..8),
        cuts in vec(any::<usize>(), 0..8),
    ) {
        let mut bytes: Vec<u8> = frames.iter().flat_map(|f| f.encode().unwrap()).collect();
        for (pos, value) in flips {
            let len = bytes.len();
            bytes[pos % len] ^= value;
        }
        let mut decoder = FrameDecoder::new();
        for chunk in chunks(&bytes, &cuts) {
            decoder.push(&chunk);
            while let Ok(Some(_)) = decoder.next_frame() {}
        }
    }
}
