//! Bounds-checked primitive readers and writers (protocol.md §4.1).

use super::{varint, DecodeError, EncodeError};

/// A cursor over a byte slice whose reads fail with [`DecodeError::UnexpectedEnd`] instead of
/// panicking.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let available = self.remaining();
        let end = self.pos.checked_add(n).filter(|_| n <= available).ok_or(
            DecodeError::UnexpectedEnd {
                needed: n,
                available,
            },
        )?;
        let bytes = self
            .buf
            .get(self.pos..end)
            .ok_or(DecodeError::UnexpectedEnd {
                needed: n,
                available,
            })?;
        self.pos = end;
        Ok(bytes)
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(u8::from_be_bytes(self.array()?))
    }

    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// A QUIC varint (§3.5).
    pub(crate) fn varint(&mut self) -> Result<u64, DecodeError> {
        let first = *self.buf.get(self.pos).ok_or(DecodeError::UnexpectedEnd {
            needed: 1,
            available: 0,
        })?;
        let len = varint::len_from_first_byte(first);
        let bytes = self.take(len)?;
        Ok(varint::value_from_bytes(bytes))
    }

    /// `u8 length ‖ UTF-8 bytes`.
    pub(crate) fn string(&mut self) -> Result<String, DecodeError> {
        let len = self.u8()?;
        let bytes = self.take(usize::from(len))?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::InvalidUtf8)
    }

    /// A timestamp in milliseconds, at most `i64::MAX`.
    pub(crate) fn timestamp(&mut self) -> Result<u64, DecodeError> {
        let ms = self.u64()?;
        if ms > super::TIMESTAMP_MAX {
            return Err(DecodeError::InvalidTimestamp(ms));
        }
        Ok(ms)
    }

    /// A `u16` item count that must not exceed `max`.
    pub(crate) fn bounded_count(
        &mut self,
        what: &'static str,
        max: usize,
    ) -> Result<usize, DecodeError> {
        let count = usize::from(self.u16()?);
        if count > max {
            return Err(DecodeError::TooManyItems { what, count, max });
        }
        Ok(count)
    }
}

pub(crate) fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// `u8 length ‖ bytes`; errors if longer than 255 bytes.
pub(crate) fn put_string(out: &mut Vec<u8>, s: &str) -> Result<(), EncodeError> {
    let len = u8::try_from(s.len()).map_err(|_| EncodeError::StringTooLong(s.len()))?;
    out.push(len);
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

pub(crate) fn put_timestamp(out: &mut Vec<u8>, ms: u64) -> Result<(), EncodeError> {
    if ms > super::TIMESTAMP_MAX {
        return Err(EncodeError::InvalidTimestamp(ms));
    }
    put_u64(out, ms);
    Ok(())
}

/// `u16 count`, checked against the protocol limit `max` (which is below `u16::MAX`).
pub(crate) fn put_count(
    out: &mut Vec<u8>,
    what: &'static str,
    count: usize,
    max: usize,
) -> Result<(), EncodeError> {
    let too_many = EncodeError::TooManyItems { what, count, max };
    if count > max {
        return Err(too_many);
    }
    let count = u16::try_from(count).map_err(|_| too_many)?;
    put_u16(out, count);
    Ok(())
}
