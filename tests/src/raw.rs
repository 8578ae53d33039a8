//! A minimal raw Radicle peer built from `seedd_proto`, for what a well-behaved node never
//! sends (malformed frames, bad signatures, floods) and for byte-level checks.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use seedd_proto::crypto::Keypair;
use seedd_proto::wire::handshake::{Initiator, ACT2_LEN};
use seedd_proto::wire::{
    Announcement, AnnouncementMessage, Frame, FrameDecoder, Link, Message, NodeAnnouncement,
};

use crate::Seed;

/// Wall-clock milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// TCP to `to` from `src` (a 127.0.0.0/8 address, so limits, penalties and bans are per
/// client).
pub fn tcp(to: SocketAddr, src: &str) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let from: SocketAddr = format!("{src}:0").parse().unwrap();
    socket.bind(&from.into()).unwrap();
    socket.connect(&to.into()).unwrap();
    let stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// TCP from `src`, then the Noise XK initiator handshake with the seed as `key`.
pub fn connect(seed: &Seed, src: &str, key: &Keypair) -> TcpStream {
    let mut stream = tcp(seed.p2p, src);
    let remote = seed.nid().parse().unwrap();
    let (awaiting, act1) = Initiator::new(key.clone(), Keypair::generate(), remote)
        .act1()
        .unwrap();
    stream.write_all(&act1).unwrap();
    let mut act2 = [0u8; ACT2_LEN];
    stream.read_exact(&mut act2).unwrap();
    let (act3, _) = awaiting.act3(&act2).unwrap();
    stream.write_all(&act3).unwrap();
    stream
}

/// Writes one frame.
pub fn send_frame(stream: &mut TcpStream, frame: Frame) {
    stream.write_all(&frame.encode().unwrap()).unwrap();
}

/// Writes one gossip message on the dialer's gossip stream.
pub fn gossip(stream: &mut TcpStream, message: Message) {
    send_frame(stream, Frame::gossip(Link::Outbound, message));
}

/// Reads frames until `want` is satisfied, the peer closes (`true`), or `timeout`.
pub fn read_until(
    stream: &mut TcpStream,
    timeout: Duration,
    mut want: impl FnMut(&[Frame]) -> bool,
) -> (Vec<Frame>, bool) {
    let deadline = Instant::now() + timeout;
    let mut decoder = FrameDecoder::new();
    let mut frames = Vec::new();
    let mut buf = [0u8; 65536];
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    loop {
        if want(&frames) || Instant::now() > deadline {
            return (frames, false);
        }
        match stream.read(&mut buf) {
            Ok(0) => return (frames, true),
            Ok(n) => {
                decoder.push(&buf[..n]);
                while let Ok(Some(f)) = decoder.next_frame() {
                    frames.push(f);
                }
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return (frames, true),
        }
    }
}

/// Whether the peer closes the connection within `timeout`.
pub fn closed_within(stream: &mut TcpStream, timeout: Duration) -> bool {
    read_until(stream, timeout, |_| false).1
}

/// A SEED node announcement by `key` at `timestamp`.
pub fn node_announcement(key: &Keypair, timestamp: u64) -> Announcement {
    AnnouncementMessage::Node(NodeAnnouncement {
        version: 1,
        features: 1,
        timestamp,
        alias: "raw".parse().unwrap(),
        addresses: vec![],
        nonce: 1,
        agent: "/raw:test/".parse().unwrap(),
    })
    .sign(key)
    .unwrap()
}
