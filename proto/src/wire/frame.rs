//! Frames and stream ids (protocol.md §3.4, §3.6–§3.8).
//!
//! ```text
//! frame   = "rad" 0x01 ‖ varint stream-id ‖ body
//! body    = control: u8 type ‖ varint stream-id        (no length prefix)
//!         | gossip:  varint length ‖ encoded Message   (bytes after the message are ignored)
//!         | git:     varint length ‖ raw git bytes
//! ```
//!
//! Stream id = `(n << 3) | (kind << 1) | initiator`, where the initiator bit is **0 for the side
//! that dialed the TCP connection** (what the official code does; its doc comment says the
//! opposite).

use std::fmt;

use super::codec::{self, Reader};
use super::message::Message;
use super::{varint, DecodeError, EncodeError, MAX_MESSAGE_SIZE};

/// Magic and protocol version that start every frame: `"rad"` ‖ version 1.
pub const PROTOCOL_MAGIC: [u8; 4] = *b"rad\x01";

/// Undecoded bytes the official node buffers per peer before disconnecting it (2 MiB);
/// no frame can be larger.
pub const MAX_INBOX_SIZE: usize = 2 * 1024 * 1024;

/// Which side of the TCP connection a node is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Link {
    /// This node dialed the connection (initiator bit 0).
    Outbound,
    /// This node accepted the connection (initiator bit 1).
    Inbound,
}

impl Link {
    const fn bit(self) -> u64 {
        match self {
            Link::Outbound => 0,
            Link::Inbound => 1,
        }
    }
}

/// The kind of a stream: bits 1–2 of its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum StreamKind {
    /// Control frames (Open/Close/Eof).
    Control = 0,
    /// Gossip messages.
    Gossip = 1,
    /// Raw git protocol bytes.
    Git = 2,
}

impl StreamKind {
    const fn bits(self) -> u64 {
        (self as u64) << 1
    }
}

/// A stream id; always at most [`varint::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(u64);

impl StreamId {
    /// A stream id from its numeric value.
    pub fn new(id: u64) -> Result<Self, EncodeError> {
        if id > varint::MAX {
            return Err(EncodeError::VarintOverflow(id));
        }
        Ok(Self(id))
    }

    /// The control stream of the side `link` (0 for the dialer, 1 for the listener).
    pub const fn control(link: Link) -> Self {
        Self(StreamKind::Control.bits() | link.bit())
    }

    /// The gossip stream of the side `link` (2 for the dialer, 3 for the listener).
    pub const fn gossip(link: Link) -> Self {
        Self(StreamKind::Gossip.bits() | link.bit())
    }

    /// The base git id of the side `link` (4 / 5); real git streams are its [`nth`](Self::nth)
    /// ids with `n ≥ 1`.
    pub const fn git_base(link: Link) -> Self {
        Self(StreamKind::Git.bits() | link.bit())
    }

    /// The `n`-th git stream opened by side `link` (`n` counts from 1 per connection):
    /// the dialer opens 12, 20, 28, …; the listener 13, 21, 29, ….
    pub fn git(link: Link, n: u64) -> Result<Self, EncodeError> {
        Self::git_base(link).nth(n)
    }

    /// This id plus `n << 3`: the same kind and initiator, `n` steps further.
    pub fn nth(self, n: u64) -> Result<Self, EncodeError> {
        let id = n
            .checked_mul(8)
            .and_then(|step| self.0.checked_add(step))
            .ok_or(EncodeError::VarintOverflow(u64::MAX))?;
        Self::new(id)
    }

    /// The numeric id.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// The stream kind, or the invalid kind value 3.
    pub fn kind(self) -> Result<StreamKind, u8> {
        match (self.0 >> 1) & 0b11 {
            0 => Ok(StreamKind::Control),
            1 => Ok(StreamKind::Gossip),
            2 => Ok(StreamKind::Git),
            other => Err(other as u8),
        }
    }

    /// The side that created this id (from bit 0: 0 = the dialer).
    pub fn link(self) -> Link {
        if self.0 & 1 == 0 {
            Link::Outbound
        } else {
            Link::Inbound
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A control message (§3.7), sent on the sender's control stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Control {
    /// "I am starting a fetch on this stream" (type 0).
    Open { stream: StreamId },
    /// "My worker for this stream has finished" (type 1).
    Close { stream: StreamId },
    /// "I have finished writing to this stream" (type 2).
    Eof { stream: StreamId },
}

impl Control {
    /// The stream the control message is about.
    pub fn target(&self) -> StreamId {
        match *self {
            Control::Open { stream } | Control::Close { stream } | Control::Eof { stream } => {
                stream
            }
        }
    }

    fn type_byte(&self) -> u8 {
        match self {
            Control::Open { .. } => 0,
            Control::Close { .. } => 1,
            Control::Eof { .. } => 2,
        }
    }
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A control frame on a control stream.
    Control { stream: StreamId, control: Control },
    /// A gossip message on a gossip stream.
    Gossip { stream: StreamId, message: Message },
    /// A chunk of a git byte stream.
    Git { stream: StreamId, data: Vec<u8> },
}

impl Frame {
    /// A control frame on the control stream of side `link`.
    pub fn control(link: Link, control: Control) -> Self {
        Frame::Control {
            stream: StreamId::control(link),
            control,
        }
    }

    /// A gossip frame on the gossip stream of side `link`.
    pub fn gossip(link: Link, message: Message) -> Self {
        Frame::Gossip {
            stream: StreamId::gossip(link),
            message,
        }
    }

    /// A git frame.
    pub fn git(stream: StreamId, data: Vec<u8>) -> Self {
        Frame::Git { stream, data }
    }

    /// The id of the stream the frame was sent on.
    pub fn stream(&self) -> StreamId {
        match self {
            Frame::Control { stream, .. }
            | Frame::Gossip { stream, .. }
            | Frame::Git { stream, .. } => *stream,
        }
    }

    /// Encodes the frame into a new vector.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Appends the encoded frame to `out`; on error `out` is left unchanged.
    ///
    /// Fails if the stream id's kind does not match the frame variant, if a gossip message
    /// cannot be encoded, or if a length exceeds the varint range.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        let result = self.encode_unchecked(out);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    fn encode_unchecked(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let stream = self.stream();
        let expected = match self {
            Frame::Control { .. } => StreamKind::Control,
            Frame::Gossip { .. } => StreamKind::Gossip,
            Frame::Git { .. } => StreamKind::Git,
        };
        if stream.kind() != Ok(expected) {
            return Err(EncodeError::StreamKindMismatch {
                stream: stream.as_u64(),
            });
        }
        out.extend_from_slice(&PROTOCOL_MAGIC);
        varint::encode(stream.as_u64(), out)?;
        match self {
            Frame::Control { control, .. } => {
                codec::put_u8(out, control.type_byte());
                varint::encode(control.target().as_u64(), out)?;
            }
            Frame::Gossip { message, .. } => {
                let payload = message.encode()?;
                varint::encode(payload.len() as u64, out)?;
                out.extend_from_slice(&payload);
            }
            Frame::Git { data, .. } => {
                varint::encode(data.len() as u64, out)?;
                out.extend_from_slice(data);
            }
        }
        Ok(())
    }
}

/// Size limits a [`FrameDecoder`] enforces (§3.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    /// Largest gossip payload (default 65 535, the largest message an encoder produces).
    pub max_gossip_payload: usize,
    /// Largest frame including its header (default 2 MiB, the official inbox size).
    pub max_frame_size: usize,
}

impl Default for FrameLimits {
    fn default() -> Self {
        Self {
            max_gossip_payload: MAX_MESSAGE_SIZE,
            max_frame_size: MAX_INBOX_SIZE,
        }
    }
}

/// Errors while decoding frames. Every one of them is fatal for the connection (§3.8).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The frame does not start with `rad\x01` (the bytes seen so far are given).
    #[error("invalid protocol magic/version {0:02x?}")]
    InvalidMagic(Vec<u8>),
    /// A stream id of kind 3.
    #[error("invalid stream kind in stream id {0}")]
    InvalidStreamKind(u64),
    /// An unknown control message type.
    #[error("invalid control message type {0}")]
    InvalidControlType(u8),
    /// A gossip frame longer than [`FrameLimits::max_gossip_payload`].
    #[error("gossip payload of {len} bytes exceeds {max} bytes")]
    GossipTooLarge { len: u64, max: usize },
    /// A frame longer than [`FrameLimits::max_frame_size`].
    #[error("frame of {len} bytes exceeds {max} bytes")]
    FrameTooLarge { len: u64, max: usize },
    /// The gossip payload is not a valid message.
    #[error("invalid gossip message: {0}")]
    Message(DecodeError),
}

/// Decodes one frame from the start of `buf`.
///
/// Returns `Ok(None)` if `buf` holds only the beginning of a valid frame, or the frame and the
/// number of bytes it took. Errors are reported as soon as the bytes seen prove the frame
/// invalid (a wrong magic byte, an oversized length), without waiting for the rest.
pub fn decode_frame(
    buf: &[u8],
    limits: &FrameLimits,
) -> Result<Option<(Frame, usize)>, FrameError> {
    let seen = buf.get(..PROTOCOL_MAGIC.len()).unwrap_or(buf);
    if PROTOCOL_MAGIC.get(..seen.len()) != Some(seen) {
        return Err(FrameError::InvalidMagic(seen.to_vec()));
    }
    let mut reader = Reader::new(buf);
    if reader.take(PROTOCOL_MAGIC.len()).is_err() {
        return Ok(None);
    }
    let Ok(id) = reader.varint() else {
        return Ok(None);
    };
    let stream = StreamId(id);
    let kind = stream
        .kind()
        .map_err(|_| FrameError::InvalidStreamKind(id))?;

    if kind == StreamKind::Control {
        let Ok(ty) = reader.u8() else {
            return Ok(None);
        };
        if ty > 2 {
            return Err(FrameError::InvalidControlType(ty));
        }
        let Ok(target) = reader.varint() else {
            return Ok(None);
        };
        let target = StreamId(target);
        let control = match ty {
            0 => Control::Open { stream: target },
            1 => Control::Close { stream: target },
            _ => Control::Eof { stream: target },
        };
        return Ok(Some((
            Frame::Control { stream, control },
            reader.position(),
        )));
    }

    let Ok(len) = reader.varint() else {
        return Ok(None);
    };
    if kind == StreamKind::Gossip && len > limits.max_gossip_payload as u64 {
        return Err(FrameError::GossipTooLarge {
            len,
            max: limits.max_gossip_payload,
        });
    }
    let total = len.saturating_add(reader.position() as u64);
    if total > limits.max_frame_size as u64 {
        return Err(FrameError::FrameTooLarge {
            len: total,
            max: limits.max_frame_size,
        });
    }
    // `len` is bounded by `max_frame_size`, a usize.
    let len = usize::try_from(len).map_err(|_| FrameError::FrameTooLarge {
        len,
        max: limits.max_frame_size,
    })?;
    let Ok(payload) = reader.take(len) else {
        return Ok(None);
    };
    let frame = if kind == StreamKind::Gossip {
        Frame::Gossip {
            stream,
            message: Message::decode(payload)?,
        }
    } else {
        Frame::Git {
            stream,
            data: payload.to_vec(),
        }
    };
    Ok(Some((frame, reader.position())))
}

/// Incremental frame decoder: feed it byte chunks of any size with [`push`](Self::push) and
/// take complete frames with [`next_frame`](Self::next_frame) (or iterate).
///
/// Bounded: a frame whose header announces more than the [`FrameLimits`] fails immediately, so
/// after draining, at most one incomplete frame (≤ `max_frame_size`) stays buffered. After an
/// error the decoder stays failed: `next_frame` keeps returning that error.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
    limits: FrameLimits,
    error: Option<FrameError>,
    reported: bool,
}

impl FrameDecoder {
    /// A decoder with the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with custom limits.
    pub fn with_limits(limits: FrameLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Releases the buffer's memory if nothing is pending and it grew beyond `keep` bytes
    /// (idle sessions should not hold on to the capacity a large frame once needed).
    pub fn shrink(&mut self, keep: usize) {
        if self.buffered() == 0 && self.buf.capacity() > keep {
            self.buf = Vec::new();
            self.start = 0;
        }
    }

    /// Number of received bytes not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len().saturating_sub(self.start)
    }

    /// The next complete frame, `Ok(None)` if more bytes are needed, or the (sticky) error.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if let Some(err) = &self.error {
            return Err(err.clone());
        }
        let pending = self.buf.get(self.start..).unwrap_or_default();
        match decode_frame(pending, &self.limits) {
            Ok(Some((frame, used))) => {
                self.start = self.start.saturating_add(used);
                if self.start >= self.buf.len() {
                    self.buf.clear();
                    self.start = 0;
                }
                Ok(Some(frame))
            }
            Ok(None) => Ok(None),
            Err(err) => {
                self.buf = Vec::new();
                self.start = 0;
                self.error = Some(err.clone());
                Err(err)
            }
        }
    }
}

/// Yields complete frames; an error is yielded once, then iteration ends.
impl Iterator for FrameDecoder {
    type Item = Result<Frame, FrameError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.reported {
            return None;
        }
        match self.next_frame() {
            Ok(frame) => frame.map(Ok),
            Err(err) => {
                self.reported = true;
                Some(Err(err))
            }
        }
    }
}

impl From<DecodeError> for FrameError {
    fn from(e: DecodeError) -> Self {
        FrameError::Message(e)
    }
}
