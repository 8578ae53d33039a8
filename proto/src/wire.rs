//! Sans-IO codecs of the Radicle peer-to-peer wire protocol (protocol.md §3.3–§3.8, §4.1–§4.8).
//!
//! Nothing in this module does I/O, spawns tasks or reads a clock: it turns bytes into typed
//! values and back. Every decoder returns a typed error on malformed input and never panics.
//!
//! Deliberate differences from the official decoder (both only affect peers that already
//! violate the protocol): a gossip frame longer than 65 535 bytes is rejected (the official
//! node would decode the message and drop the rest), and a message cut short inside its gossip
//! payload is an error (the official node waits for more bytes that never come).
//!
//! * [`varint`] — QUIC variable-length integers (stream ids, frame lengths).
//! * [`frame`] — `rad\x01` frames, stream ids, control frames and the incremental
//!   [`FrameDecoder`].
//! * [`message`] — gossip messages (announcements, subscribe, ping/pong, info) and
//!   announcement signing.
//! * [`address`] — the address encodings inside node announcements.
//! * [`filter`] — the subscription bloom filter.
//! * [`handshake`] — the (non-standard) Noise XK handshake that precedes the frames.

pub mod address;
pub mod filter;
pub mod frame;
pub mod handshake;
pub mod message;
pub mod varint;

mod codec;

#[cfg(test)]
mod proptests;
impl From<AliasError> for DecodeError {
    fn from(e: AliasError) -> Self {
        DecodeError::InvalidAlias(e)
    }
}

impl From<address::OnionError> for DecodeError {
    fn from(e: address::OnionError) -> Self {
        DecodeError::InvalidOnion(e)
    }
}

impl From<address::I2pError> for DecodeError {
    fn from(e: address::I2pError) -> Self {
        DecodeError::InvalidI2p(e)
    }
}

#[cfg(test)]
mod tests;

pub use address::{Address, Host, I2pAddr, OnionAddrV3};
pub use filter::Filter;
pub use frame::{
    decode_frame, Control, Frame, FrameDecoder, FrameError, FrameLimits, Link, StreamId,
    StreamKind, PROTOCOL_MAGIC,
};
pub use message::{
    Alias, AliasError, Announcement, AnnouncementMessage, Info, InventoryAnnouncement, Message,
    MessageType, NodeAnnouncement, Oid, Ping, RefsAnnouncement, RefsAt, Subscribe, UserAgent,
};

/// Largest encoded gossip message, including its 2-byte type (`u16::MAX`, §3.8).
pub const MAX_MESSAGE_SIZE: usize = u16::MAX as usize;

/// Largest timestamp (milliseconds) a decoder accepts: `i64::MAX` (§4.1).
pub const TIMESTAMP_MAX: u64 = i64::MAX as u64;

/// Errors while decoding gossip messages and their fields.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended in the middle of a value.
    #[error("unexpected end of input: {needed} more bytes needed, {available} available")]
    UnexpectedEnd { needed: usize, available: usize },
    /// Unknown gossip message type id.
    #[error("invalid message type {0}")]
    InvalidMessageType(u16),
    /// Unknown `Info` message sub-type.
    #[error("invalid info message type {0}")]
    InvalidInfoType(u16),
    /// Unknown address type byte.
    #[error("invalid address type {0}")]
    InvalidAddressType(u8),
    /// A git object id whose length prefix is not 20.
    #[error("invalid git object id length {0} (expected 20)")]
    InvalidOidLength(u16),
    /// A bounded list holds more items than allowed.
    #[error("too many {what}: {count} (at most {max})")]
    TooManyItems {
        what: &'static str,
        count: usize,
        max: usize,
    },
    /// A bloom filter whose size is not 1, 4 or 16 KiB.
    #[error("invalid filter size {0} (expected 1024, 4096 or 16384)")]
    InvalidFilterSize(usize),
    /// A string field is not valid UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// An invalid node alias.
    #[error("invalid alias: {0}")]
    InvalidAlias(AliasError),
    /// An invalid user agent string.
    #[error("invalid user agent {0:?}")]
    InvalidUserAgent(String),
    /// A timestamp larger than `i64::MAX` milliseconds.
    #[error("invalid timestamp {0} ms")]
    InvalidTimestamp(u64),
    /// An invalid Tor v3 onion address.
    #[error("invalid onion address: {0}")]
    InvalidOnion(address::OnionError),
    /// An invalid I2P address.
    #[error("invalid i2p address: {0}")]
    InvalidI2p(address::I2pError),
}

/// Errors while encoding; the codecs report these instead of panicking.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A value does not fit a QUIC varint (at most 2^62 − 1).
    #[error("value {0} exceeds the varint limit 2^62-1")]
    VarintOverflow(u64),
    /// A string longer than 255 bytes (its length prefix is one byte).
    #[error("string of {0} bytes exceeds 255 bytes")]
    StringTooLong(usize),
    /// A bounded list holds more items than the protocol allows.
    #[error("too many {what}: {count} (at most {max})")]
    TooManyItems {
        what: &'static str,
        count: usize,
        max: usize,
    },
    /// A timestamp larger than `i64::MAX` milliseconds.
    #[error("timestamp {0} ms exceeds i64::MAX")]
    InvalidTimestamp(u64),
    /// The encoded message would exceed 65 535 bytes.
    #[error("encoded message of {0} bytes exceeds {MAX_MESSAGE_SIZE} bytes")]
    MessageTooLarge(usize),
    /// A frame whose stream id is of another kind than the frame variant.
    #[error("stream id {stream} has the wrong kind for this frame")]
    StreamKindMismatch { stream: u64 },
    /// A `since` timestamp after `until` in a Subscribe (it panics the official node).
    #[error("subscribe range is inverted: since {since} > until {until}")]
    InvertedRange { since: u64, until: u64 },
}
