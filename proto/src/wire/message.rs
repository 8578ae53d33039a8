//! Gossip messages (protocol.md §4.1–§4.3, §4.6, §4.8).
//!
//! A gossip payload is `u16 type ‖ fields`. Announcements (node, inventory, refs) travel in a
//! signed envelope `NodeId ‖ Signature ‖ body`, where the signature covers exactly the encoded
//! body. Decoders ignore bytes after a complete message (§9 `test_pong_message_with_extension`).

use std::fmt;
use std::str::FromStr;

use super::address::Address;
use super::codec::{self, Reader};
use super::filter::Filter;
use super::{DecodeError, EncodeError, MAX_MESSAGE_SIZE};
use crate::crypto::{Keypair, NodeId, RepoId};

/// Most addresses in a node announcement.
pub const ADDRESS_LIMIT: usize = 16;
/// Most repositories in an inventory announcement.
pub const INVENTORY_LIMIT: usize = 2973;
/// Most `RefsAt` entries in a refs announcement.
pub const REF_REMOTE_LIMIT: usize = 1024;
/// Most zero bytes in a Ping (its encoding is then exactly 65 535 bytes).
pub const MAX_PING_ZEROES: u16 = 65529;
/// Most zero bytes in a Pong, and the largest `ponglen` a Ping may ask for.
pub const MAX_PONG_ZEROES: u16 = 65531;
/// Feature bit 0: the node is a seed. Every official node sets it.
pub const FEATURE_SEED: u64 = 0x1;
/// The `version` field official nodes put in node announcements.
pub const NODE_ANNOUNCEMENT_VERSION: u8 = 1;
/// Longest alias in bytes.
pub const MAX_ALIAS_LENGTH: usize = 32;
/// Longest user agent in bytes.
pub const MAX_USER_AGENT_LENGTH: usize = 64;
/// User agent substituted when a node announcement ends before its agent field.
pub const TRUNCATED_USER_AGENT: &str = "/radicle/message/truncated/";
/// How far in the future an announcement timestamp may be (60 minutes, in ms).
pub const MAX_CLOCK_SKEW_MS: u64 = 60 * 60 * 1000;

/// Gossip message type ids (§4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum MessageType {
    NodeAnnouncement = 2,
    InventoryAnnouncement = 4,
    RefsAnnouncement = 6,
    Subscribe = 8,
    Ping = 10,
    Pong = 12,
    Info = 14,
}

impl MessageType {
    /// Every message type (for metric labels; a test in seedd's `metrics` keeps it complete).
    pub const ALL: [MessageType; 7] = [
        MessageType::NodeAnnouncement,
        MessageType::InventoryAnnouncement,
        MessageType::RefsAnnouncement,
        MessageType::Subscribe,
        MessageType::Ping,
        MessageType::Pong,
        MessageType::Info,
    ];
}

impl TryFrom<u16> for MessageType {
    type Error = DecodeError;

    fn try_from(id: u16) -> Result<Self, Self::Error> {
        Ok(match id {
            2 => MessageType::NodeAnnouncement,
            4 => MessageType::InventoryAnnouncement,
            6 => MessageType::RefsAnnouncement,
            8 => MessageType::Subscribe,
            10 => MessageType::Ping,
            12 => MessageType::Pong,
            14 => MessageType::Info,
            other => return Err(DecodeError::InvalidMessageType(other)),
        })
    }
}

/// `Info` sub-type of [`Info::RefsAlreadySynced`].
const INFO_REFS_ALREADY_SYNCED: u16 = 1;

/// A 20-byte git object id (SHA-1), encoded as `u16 20 ‖ bytes`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Oid(pub [u8; 20]);

impl Oid {
    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }
}

impl From<[u8; 20]> for Oid {
    fn from(bytes: [u8; 20]) -> Self {
        Self(bytes)
    }
}

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Oid({self})")
    }
}

impl FromStr for Oid {
    type Err = hex::FromHexError;

    /// 40 hex digits.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut bytes = [0u8; 20];
        hex::decode_to_slice(s, &mut bytes)?;
        Ok(Self(bytes))
    }
}

/// Why a string is not a valid [`Alias`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    #[error("alias cannot be empty")]
    Empty,
    #[error("alias cannot be longer than {MAX_ALIAS_LENGTH} bytes")]
    TooLong,
    #[error("alias cannot contain whitespace or control characters")]
    InvalidCharacter,
}

/// A node alias: 1–32 bytes of UTF-8 without whitespace or control characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Alias(String);

impl Alias {
    /// The alias text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Alias {
    type Err = AliasError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(AliasError::Empty);
        }
        if s.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(AliasError::InvalidCharacter);
        }
        if s.len() > MAX_ALIAS_LENGTH {
            return Err(AliasError::TooLong);
        }
        Ok(Self(s.to_owned()))
    }
}

impl TryFrom<String> for Alias {
    type Error = AliasError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl fmt::Display for Alias {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A user agent such as `/radicle:1.6.0/` (the rules of radicle's `UserAgent::from_str`):
/// at most 64 bytes, starts and ends with `/`, something in between; each `/`-separated
/// segment that contains `:` needs a non-empty client (printable ASCII without `/` or `:`)
/// before the first `:` and a non-empty version after it. Segments without `:` are not
/// checked (so `/rad/icle/` and even `/a//b/` are valid).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UserAgent(String);

impl UserAgent {
    /// The user agent text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `/radicle/message/truncated/`, which decoders substitute for a missing agent field.
    pub fn truncated() -> Self {
        Self(TRUNCATED_USER_AGENT.to_owned())
    }

    /// `/seedd:<crate version>/`.
    pub fn seedd() -> Self {
        Self(concat!("/seedd:", env!("CARGO_PKG_VERSION"), "/").to_owned())
    }

    fn is_valid(input: &str) -> bool {
        if input.len() > MAX_USER_AGENT_LENGTH {
            return false;
        }
        let Some(inner) = input.strip_prefix('/').and_then(|s| s.strip_suffix('/')) else {
            return false;
        };
        !inner.is_empty()
            && inner
                .split('/')
                .all(|segment| match segment.split_once(':') {
                    Some((client, version)) => {
                        !client.is_empty()
                            && !version.is_empty()
                            && client
                                .chars()
                                .all(|c| c.is_ascii_graphic() && c != '/' && c != ':')
                    }
                    None => true,
                })
    }
}

impl FromStr for UserAgent {
    type Err = DecodeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if Self::is_valid(s) {
            Ok(Self(s.to_owned()))
        } else {
            Err(DecodeError::InvalidUserAgent(s.to_owned()))
        }
    }
}

impl fmt::Display for UserAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A namespace and the oid of its `rad/sigrefs` commit: `NodeId ‖ u16 20 ‖ oid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RefsAt {
    pub remote: NodeId,
    pub at: Oid,
}

/// Signed body of a node announcement (§4.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAnnouncement {
    /// Protocol version (informational; official nodes send 1).
    pub version: u8,
    /// Feature bits ([`FEATURE_SEED`]).
    pub features: u64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    pub alias: Alias,
    /// At most [`ADDRESS_LIMIT`].
    pub addresses: Vec<Address>,
    /// Proof-of-work nonce (not enforced; official nodes send 1).
    pub nonce: u64,
    pub agent: UserAgent,
}

/// Signed body of an inventory announcement: the node's complete inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryAnnouncement {
    /// At most [`INVENTORY_LIMIT`].
    pub inventory: Vec<RepoId>,
    pub timestamp: u64,
}

/// Signed body of a refs announcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefsAnnouncement {
    pub rid: RepoId,
    /// At most [`REF_REMOTE_LIMIT`].
    pub refs: Vec<RefsAt>,
    pub timestamp: u64,
}

/// The signed part of an announcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnnouncementMessage {
    Node(NodeAnnouncement),
    Inventory(InventoryAnnouncement),
    Refs(RefsAnnouncement),
}

/// A signed announcement: `NodeId ‖ Signature ‖ body`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    /// The announcing node.
    pub node: NodeId,
    /// Ed25519 signature by `node` over the encoded body.
    pub signature: [u8; 64],
    pub message: AnnouncementMessage,
}

/// "Send me stored announcements with `since ≤ timestamp < until` matching the filter, and
/// relay matching refs announcements from now on."
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    pub filter: Filter,
    pub since: u64,
    pub until: u64,
}

impl Subscribe {
    /// Everything: the all-ones filter, since 0, until `i64::MAX`.
    pub fn all() -> Self {
        Self {
            filter: Filter::default(),
            since: 0,
            until: super::TIMESTAMP_MAX,
        }
    }
}

/// "Answer with a Pong of `ponglen` zero bytes"; `zeroes` is padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping {
    pub ponglen: u16,
    pub zeroes: u16,
}

/// Informational, non-relayed messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Info {
    /// "I already have your `rad/sigrefs` of `rid` at `at`" (info type 1).
    RefsAlreadySynced { rid: RepoId, at: Oid },
}

/// A gossip message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Subscribe(Subscribe),
    Announcement(Announcement),
    Info(Info),
    Ping(Ping),
    /// A Pong carrying `zeroes` zero bytes.
    Pong {
        zeroes: u16,
    },
}

fn read_oid(r: &mut Reader<'_>) -> Result<[u8; 20], DecodeError> {
    let len = r.u16()?;
    if len != 20 {
        return Err(DecodeError::InvalidOidLength(len));
    }
    r.array()
}

fn put_oid(out: &mut Vec<u8>, oid: &[u8; 20]) {
    codec::put_u16(out, 20);
    out.extend_from_slice(oid);
}

fn read_node_id(r: &mut Reader<'_>) -> Result<NodeId, DecodeError> {
    Ok(NodeId::from_bytes(r.array()?))
}

fn read_rid(r: &mut Reader<'_>) -> Result<RepoId, DecodeError> {
    Ok(RepoId::from_oid_bytes(read_oid(r)?))
}

/// `u16 count ‖ bytes` whose contents are not checked; returns the count.
fn read_zero_bytes(r: &mut Reader<'_>) -> Result<u16, DecodeError> {
    let count = r.u16()?;
    r.take(usize::from(count))?;
    Ok(count)
}

fn put_zero_bytes(out: &mut Vec<u8>, count: u16) {
    codec::put_u16(out, count);
    out.resize(out.len().saturating_add(usize::from(count)), 0);
}

impl NodeAnnouncement {
    fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        codec::put_u8(out, self.version);
        codec::put_u64(out, self.features);
        codec::put_timestamp(out, self.timestamp)?;
        codec::put_string(out, self.alias.as_str())?;
        codec::put_count(out, "addresses", self.addresses.len(), ADDRESS_LIMIT)?;
        for address in &self.addresses {
            address.encode_into(out)?;
        }
        codec::put_u64(out, self.nonce);
        codec::put_string(out, self.agent.as_str())
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let version = r.u8()?;
        let features = r.u64()?;
        let timestamp = r.timestamp()?;
        let alias = Alias::from_str(&r.string()?)?;
        let count = r.bounded_count("addresses", ADDRESS_LIMIT)?;
        let addresses = (0..count)
            .map(|_| Address::read(r))
            .collect::<Result<_, _>>()?;
        let nonce = r.u64()?;
        // Old peers end the message before the agent (radicle substitutes a marker).
        let agent = match r.string() {
            Ok(agent) => UserAgent::from_str(&agent)?,
            Err(DecodeError::UnexpectedEnd { .. }) => UserAgent::truncated(),
            Err(err) => return Err(err),
        };
        Ok(Self {
            version,
            features,
            timestamp,
            alias,
            addresses,
            nonce,
            agent,
        })
    }

    /// Whether the SEED feature bit is set.
    pub fn is_seed(&self) -> bool {
        self.features & FEATURE_SEED != 0
    }
}

impl InventoryAnnouncement {
    fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        codec::put_count(out, "inventory", self.inventory.len(), INVENTORY_LIMIT)?;
        for rid in &self.inventory {
            put_oid(out, rid.as_bytes());
        }
        codec::put_timestamp(out, self.timestamp)
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let count = r.bounded_count("inventory", INVENTORY_LIMIT)?;
        let inventory = (0..count).map(|_| read_rid(r)).collect::<Result<_, _>>()?;
        let timestamp = r.timestamp()?;
        Ok(Self {
            inventory,
            timestamp,
        })
    }
}

impl RefsAnnouncement {
    fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_oid(out, self.rid.as_bytes());
        codec::put_count(out, "refs", self.refs.len(), REF_REMOTE_LIMIT)?;
        for refs_at in &self.refs {
            out.extend_from_slice(refs_at.remote.as_bytes());
            put_oid(out, refs_at.at.as_bytes());
        }
        codec::put_timestamp(out, self.timestamp)
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let rid = read_rid(r)?;
        let count = r.bounded_count("refs", REF_REMOTE_LIMIT)?;
        let refs = (0..count)
            .map(|_| {
                Ok(RefsAt {
                    remote: read_node_id(r)?,
                    at: Oid(read_oid(r)?),
                })
            })
            .collect::<Result<_, DecodeError>>()?;
        let timestamp = r.timestamp()?;
        Ok(Self {
            rid,
            refs,
            timestamp,
        })
    }
}

impl From<NodeAnnouncement> for AnnouncementMessage {
    fn from(ann: NodeAnnouncement) -> Self {
        Self::Node(ann)
    }
}

impl From<InventoryAnnouncement> for AnnouncementMessage {
    fn from(ann: InventoryAnnouncement) -> Self {
        Self::Inventory(ann)
    }
}

impl From<RefsAnnouncement> for AnnouncementMessage {
    fn from(ann: RefsAnnouncement) -> Self {
        Self::Refs(ann)
    }
}

impl AnnouncementMessage {
    /// The message type id of this announcement kind.
    pub fn message_type(&self) -> MessageType {
        match self {
            Self::Node(_) => MessageType::NodeAnnouncement,
            Self::Inventory(_) => MessageType::InventoryAnnouncement,
            Self::Refs(_) => MessageType::RefsAnnouncement,
        }
    }

    /// The announcement's timestamp (ms).
    pub fn timestamp(&self) -> u64 {
        match self {
            Self::Node(ann) => ann.timestamp,
            Self::Inventory(ann) => ann.timestamp,
            Self::Refs(ann) => ann.timestamp,
        }
    }

    fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            Self::Node(ann) => ann.encode_into(out),
            Self::Inventory(ann) => ann.encode_into(out),
            Self::Refs(ann) => ann.encode_into(out),
        }
    }

    /// The encoded body: exactly the bytes the signature covers (§4.6).
    pub fn encode_body(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Decodes a body of the given kind (as produced by [`encode_body`](Self::encode_body));
    /// bytes after it are ignored.
    pub fn decode_body(kind: MessageType, body: &[u8]) -> Result<Self, DecodeError> {
        Self::read(kind, &mut Reader::new(body))
    }

    fn read(kind: MessageType, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match kind {
            MessageType::NodeAnnouncement => Self::Node(NodeAnnouncement::read(r)?),
            MessageType::InventoryAnnouncement => Self::Inventory(InventoryAnnouncement::read(r)?),
            MessageType::RefsAnnouncement => Self::Refs(RefsAnnouncement::read(r)?),
            other => return Err(DecodeError::InvalidMessageType(other as u16)),
        })
    }

    /// Signs the encoded body with `keypair` (deterministic Ed25519).
    pub fn sign(self, keypair: &Keypair) -> Result<Announcement, EncodeError> {
        let body = self.encode_body()?;
        Ok(Announcement {
            node: keypair.nid(),
            signature: keypair.sign(&body),
            message: self,
        })
    }
}

impl Announcement {
    /// Whether `signature` is `node`'s valid Ed25519 signature over the encoded body (with
    /// `ed25519_dalek`'s non-strict verification, like radicle).
    pub fn verify(&self) -> bool {
        self.node
            .verifying_key()
            .is_ok_and(|key| self.verify_with(&key))
    }

    /// [`Announcement::verify`] with `node`'s key decompressed beforehand; false for another
    /// node's key.
    pub fn verify_with(&self, key: &crate::crypto::VerifyingKey) -> bool {
        if key.node() != self.node {
            return false;
        }
        match self.message.encode_body() {
            Ok(body) => key.verify(&body, &self.signature).is_ok(),
            Err(_) => false,
        }
    }

    /// The announcement's timestamp (ms).
    pub fn timestamp(&self) -> u64 {
        self.message.timestamp()
    }

    /// Whether the timestamp is at most [`MAX_CLOCK_SKEW_MS`] after `now_ms` (receivers
    /// disconnect peers that send announcements further in the future).
    pub fn timestamp_acceptable(&self, now_ms: u64) -> bool {
        self.timestamp() <= now_ms.saturating_add(MAX_CLOCK_SKEW_MS)
    }

    /// Whether a subscriber with `filter` wants it: node and inventory announcements always,
    /// refs announcements if the filter contains the repository.
    pub fn matches(&self, filter: &Filter) -> bool {
        match &self.message {
            AnnouncementMessage::Node(_) | AnnouncementMessage::Inventory(_) => true,
            AnnouncementMessage::Refs(refs) => filter.contains(&refs.rid),
        }
    }
}

impl From<Announcement> for Message {
    fn from(ann: Announcement) -> Self {
        Self::Announcement(ann)
    }
}

impl Message {
    /// The message type.
    pub fn message_type(&self) -> MessageType {
        match self {
            Self::Subscribe(_) => MessageType::Subscribe,
            Self::Announcement(ann) => ann.message.message_type(),
            Self::Info(_) => MessageType::Info,
            Self::Ping(_) => MessageType::Ping,
            Self::Pong { .. } => MessageType::Pong,
        }
    }

    /// Encodes the message (type id included). Fails if a field breaks a protocol limit or
    /// the result would exceed [`MAX_MESSAGE_SIZE`].
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        codec::put_u16(&mut out, self.message_type() as u16);
        match self {
            Self::Subscribe(sub) => {
                if sub.since > sub.until {
                    return Err(EncodeError::InvertedRange {
                        since: sub.since,
                        until: sub.until,
                    });
                }
                sub.filter.encode_into(&mut out);
                codec::put_timestamp(&mut out, sub.since)?;
                codec::put_timestamp(&mut out, sub.until)?;
            }
            Self::Announcement(ann) => {
                out.extend_from_slice(ann.node.as_bytes());
                out.extend_from_slice(&ann.signature);
                ann.message.encode_into(&mut out)?;
            }
            Self::Info(Info::RefsAlreadySynced { rid, at }) => {
                codec::put_u16(&mut out, INFO_REFS_ALREADY_SYNCED);
                put_oid(&mut out, rid.as_bytes());
                put_oid(&mut out, at.as_bytes());
            }
            Self::Ping(ping) => {
                codec::put_u16(&mut out, ping.ponglen);
                put_zero_bytes(&mut out, ping.zeroes);
            }
            Self::Pong { zeroes } => put_zero_bytes(&mut out, *zeroes),
        }
        if out.len() > MAX_MESSAGE_SIZE {
            return Err(EncodeError::MessageTooLarge(out.len()));
        }
        Ok(out)
    }

    /// Decodes a gossip payload. Bytes after the message are ignored (extension space).
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        Self::decode_prefix(payload).map(|(message, _)| message)
    }

    /// Decodes a message at the start of `buf`; returns it and the bytes it took.
    pub fn decode_prefix(buf: &[u8]) -> Result<(Self, usize), DecodeError> {
        let mut r = Reader::new(buf);
        let message = Self::read(&mut r)?;
        Ok((message, r.position()))
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let kind = MessageType::try_from(r.u16()?)?;
        Ok(match kind {
            MessageType::NodeAnnouncement
            | MessageType::InventoryAnnouncement
            | MessageType::RefsAnnouncement => {
                let node = read_node_id(r)?;
                let signature = r.array()?;
                let message = AnnouncementMessage::read(kind, r)?;
                Self::Announcement(Announcement {
                    node,
                    signature,
                    message,
                })
            }
            MessageType::Subscribe => {
                let filter = Filter::read(r)?;
                let since = r.timestamp()?;
                let until = r.timestamp()?;
                Self::Subscribe(Subscribe {
                    filter,
                    since,
                    until,
                })
            }
            MessageType::Ping => {
                let ponglen = r.u16()?;
                let zeroes = read_zero_bytes(r)?;
                Self::Ping(Ping { ponglen, zeroes })
            }
            MessageType::Pong => Self::Pong {
                zeroes: read_zero_bytes(r)?,
            },
            MessageType::Info => match r.u16()? {
                INFO_REFS_ALREADY_SYNCED => Self::Info(Info::RefsAlreadySynced {
                    rid: read_rid(r)?,
                    at: Oid(read_oid(r)?),
                }),
                other => return Err(DecodeError::InvalidInfoType(other)),
            },
        })
    }
}
