//! QUIC variable-length integers (RFC 9000 §16; protocol.md §3.5).
//!
//! The two most significant bits of the first byte give the encoded length (1, 2, 4 or 8
//! bytes); the remaining bits hold the value, big-endian. Encoders always pick the shortest
//! form; the decoder also accepts longer (non-minimal) forms, e.g. `40 25` is 37.

use super::codec::Reader;
use super::{DecodeError, EncodeError};

/// The largest encodable value, 2^62 − 1.
pub const MAX: u64 = (1 << 62) - 1;

/// Number of bytes the shortest encoding of `value` takes, or `None` above [`MAX`].
pub fn encoded_len(value: u64) -> Option<usize> {
    if value < 1 << 6 {
        Some(1)
    } else if value < 1 << 14 {
        Some(2)
    } else if value < 1 << 30 {
        Some(4)
    } else if value <= MAX {
        Some(8)
    } else {
        None
    }
}

/// Appends the shortest encoding of `value` to `out`.
pub fn encode(value: u64, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    match encoded_len(value) {
        Some(1) => out.push(value as u8),
        Some(2) => out.extend_from_slice(&((value as u16) | 0x4000).to_be_bytes()),
        Some(4) => out.extend_from_slice(&((value as u32) | 0x8000_0000).to_be_bytes()),
        Some(_) => out.extend_from_slice(&(value | 0xC000_0000_0000_0000).to_be_bytes()),
        None => return Err(EncodeError::VarintOverflow(value)),
    }
    Ok(())
}

/// The shortest encoding of `value` as a new vector.
pub fn encode_to_vec(value: u64) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(8);
    encode(value, &mut out)?;
    Ok(out)
}

/// Decodes a varint at the start of `buf`; returns the value and the bytes consumed.
/// Fails with [`DecodeError::UnexpectedEnd`] if `buf` holds only part of it.
pub fn decode(buf: &[u8]) -> Result<(u64, usize), DecodeError> {
    let mut reader = Reader::new(buf);
    let value = reader.varint()?;
    Ok((value, reader.position()))
}

/// Encoded length announced by the first byte of a varint.
pub(crate) fn len_from_first_byte(first: u8) -> usize {
    1 << (first >> 6)
}

/// The value of a complete varint (`bytes.len()` as given by [`len_from_first_byte`]).
pub(crate) fn value_from_bytes(bytes: &[u8]) -> u64 {
    bytes.iter().enumerate().fold(0u64, |acc, (i, &b)| {
        let b = if i == 0 { b & 0x3F } else { b };
        (acc << 8) | u64::from(b)
    })
}
