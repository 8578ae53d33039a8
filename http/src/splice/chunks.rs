//! hyper's chunked framing of a spliced body, followed byte by byte: the IO sends the size
//! lines and line ends as they are and each chunk's data from the file.

use std::io;

/// Where a chunked body (RFC 9112 §7.1, as hyper writes it: `{size:X}\r\n`, data, `\r\n`;
/// a last chunk of size 0 and no trailers) stands: the data are placeholders, the rest is sent
/// as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chunks {
    /// In a chunk-size line: the size so far.
    Size(u64),
    /// After the size line's `\r`.
    SizeLf(u64),
    /// Placeholders of the current chunk still to come.
    Data(u64),
    /// The `\r\n` after a chunk's data.
    DataCr,
    DataLf,
    /// The empty line after the last chunk.
    EndCr,
    EndLf,
    /// The body is over.
    Done,
}

impl Chunks {
    /// The state after framing byte `b`; `None` if hyper wrote something unexpected.
    pub(super) fn step(self, b: u8) -> Option<Chunks> {
        Some(match (self, b) {
            (Chunks::Size(n), b'\r') => Chunks::SizeLf(n),
            (Chunks::Size(n), _) => {
                let d = u64::from(char::from(b).to_digit(16)?);
                Chunks::Size(n.checked_mul(16)?.checked_add(d)?)
            }
            (Chunks::SizeLf(0), b'\n') => Chunks::EndCr,
            (Chunks::SizeLf(n), b'\n') => Chunks::Data(n),
            (Chunks::DataCr, b'\r') => Chunks::DataLf,
            (Chunks::DataLf, b'\n') => Chunks::Size(0),
            (Chunks::EndCr, b'\r') => Chunks::EndLf,
            (Chunks::EndLf, b'\n') => Chunks::Done,
            _ => return None,
        })
    }
}

pub(super) fn framing_error() -> io::Error {
    io::Error::other("unexpected chunk framing around a spliced body")
}
