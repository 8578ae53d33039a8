//! The connection's IO under hyper: reads and ordinary writes go to the socket; the bytes that
//! stand for a spliced file go out with `sendfile(2)` (chunk framing written as it is), and the
//! flush that shows hyper's buffer is empty arms the waiting body.

use std::fs::File;
use std::future::Future as _;
use std::io::{self, IoSlice};
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use seedd_core::metrics::Metrics;
use seedd_core::serve::packcache::tail::resident;

use super::chunks::{framing_error, Chunks};
use super::{lock, Slot};

/// Bytes sent by one `sendfile` call at most (and probed for residency at once).
pub(super) const MAX_SENDFILE: u64 = 2 * 1024 * 1024;

/// The file bytes the IO sends in place of the placeholders hyper writes next.
pub(super) struct Active {
    file: Arc<File>,
    offset: u64,
    /// Where hyper's next bytes stand: a `Content-Length` body is one run of placeholders
    /// (`Data(len)`, then `Done`); a chunked one is followed through its framing.
    chunks: Chunks,
    chunked: bool,
    metrics: Option<Arc<Metrics>>,
}

/// A plain TCP connection's IO for hyper that can splice a cache file into the byte stream
/// (module docs). Reads, and writes outside a splice, go to the socket as they are.
pub(crate) struct SpliceIo {
    pub(super) stream: TcpStream,
    pub(super) slot: Arc<Mutex<Slot>>,
    pub(super) active: Option<Active>,
    /// Reading a range the page cache did not hold, on the blocking pool.
    pub(super) warming: Option<JoinHandle<io::Result<()>>>,
}

impl Drop for SpliceIo {
    /// The connection ends: its watching descriptor must not keep the socket open.
    fn drop(&mut self) {
        lock(&self.slot).peer = None;
    }
}

impl SpliceIo {
    /// Sends up to `want` bytes of the active splice; `Ok(0)` never (a file shorter than
    /// announced is an error).
    fn poll_splice(&mut self, cx: &mut Context<'_>, want: u64) -> Poll<io::Result<usize>> {
        loop {
            if let Some(warming) = &mut self.warming {
                let done = ready!(Pin::new(warming).poll(cx));
                self.warming = None;
                done.map_err(io::Error::other)??;
            }
            let Some(active) = &mut self.active else {
                return Poll::Ready(Err(io::Error::other("no active splice")));
            };
            let Chunks::Data(left) = active.chunks else {
                return Poll::Ready(Err(framing_error()));
            };
            let count = want.min(left).min(MAX_SENDFILE);
            if !resident(&active.file, active.offset, count) {
                let (file, offset) = (active.file.clone(), active.offset);
                self.warming = Some(tokio::task::spawn_blocking(move || {
                    warm(&file, offset, count)
                }));
                continue;
            }
            ready!(self.stream.poll_write_ready(cx))?;
            let mut offset = active.offset;
            let count = usize::try_from(count).unwrap_or(usize::MAX);
            let sent = self.stream.try_io(Interest::WRITABLE, || {
                rustix::fs::sendfile(&self.stream, &*active.file, Some(&mut offset), count)
                    .map_err(io::Error::from)
            });
            match sent {
                Ok(0) => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the cache file is shorter than its response",
                    )))
                }
                Ok(n) => {
                    active.offset += n as u64;
                    if let Some(m) = &active.metrics {
                        m.pack_cache.served_bytes.inc_by(n as u64);
                        m.pack_cache.sendfile_bytes.inc_by(n as u64);
                    }
                    active.chunks = match left.checked_sub(n as u64) {
                        Some(k) if k > 0 => Chunks::Data(k),
                        _ if active.chunked => Chunks::DataCr,
                        _ => Chunks::Done,
                    };
                    if active.chunks == Chunks::Done {
                        self.active = None;
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl SpliceIo {
    /// Writes the chunk framing at the start of `bufs` (up to the next placeholders, or the
    /// end of the body) as it is. With placeholders right after it, the kernel is told more
    /// follows (`MSG_MORE`), so that a chunk's size line leaves with its data.
    fn poll_framing(
        &mut self,
        cx: &mut Context<'_>,
        mut chunks: Chunks,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut line = [0u8; 64];
        let mut len = 0;
        for &b in bufs.iter().flat_map(|b| b.iter()) {
            if matches!(chunks, Chunks::Data(_) | Chunks::Done) || len == line.len() {
                break;
            }
            chunks = chunks.step(b).ok_or_else(framing_error)?;
            line[len] = b;
            len += 1;
        }
        let flags = match chunks {
            Chunks::Data(_) => rustix::net::SendFlags::MORE,
            _ => rustix::net::SendFlags::empty(),
        };
        let n = loop {
            ready!(self.stream.poll_write_ready(cx))?;
            let sent = self.stream.try_io(Interest::WRITABLE, || {
                rustix::net::send(&self.stream, &line[..len], flags).map_err(io::Error::from)
            });
            match sent {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        };
        if let Some(active) = &mut self.active {
            for &b in &line[..n] {
                active.chunks = active.chunks.step(b).ok_or_else(framing_error)?;
            }
            if active.chunks == Chunks::Done {
                self.active = None;
            }
        }
        Poll::Ready(Ok(n))
    }
}

/// Reads `count` bytes at `offset` so that the page cache holds them (blocking).
fn warm(file: &File, offset: u64, count: u64) -> io::Result<()> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut done = 0;
    while done < count {
        let want = (count - done).min(buf.len() as u64) as usize;
        match file.read_at(&mut buf[..want], offset + done) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the cache file is shorter than its response",
                ))
            }
            Ok(n) => done += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl AsyncRead for SpliceIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for SpliceIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if lock(&this.slot).broken {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "a spliced response was abandoned",
            )));
        }
        let Some(chunks) = this.active.as_ref().map(|a| a.chunks) else {
            return Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        };
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        if total == 0 {
            return Poll::Ready(Ok(0));
        }
        match chunks {
            // The placeholders come first; what follows them is written by a later call.
            Chunks::Data(_) => this.poll_splice(cx, total),
            chunks => this.poll_framing(cx, chunks, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(Pin::new(&mut this.stream).poll_flush(cx))?;
        // hyper flushes the IO only with its own buffer empty: whatever a waiting body
        // follows is on the socket now.
        let mut slot = lock(&this.slot);
        if let Some(p) = slot.pending.take() {
            if this.active.is_some() {
                slot.broken = true;
                return Poll::Ready(Err(io::Error::other(
                    "a new response was spliced before the last one was sent",
                )));
            }
            this.active = Some(Active {
                file: p.file,
                offset: 0,
                chunks: p.len.map_or(Chunks::Size(0), Chunks::Data),
                chunked: p.len.is_none(),
                metrics: p.metrics,
            });
            slot.armed = Some(p.id);
            p.waker.wake();
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
