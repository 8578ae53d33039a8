//! Pack-cache hits over plain HTTP/1.1 sent with `sendfile(2)` (issue 13 §3: "sendfile where
//! the body is a plain file over plain TCP"): the file's pages go from the page cache to the
//! socket without being copied into seedd.
//!
//! hyper owns the connection and writes every byte of a response itself, so the file cannot
//! be handed to it. Instead the connection's IO ([`SpliceIo`]) and the response body
//! ([`SpliceBody`]) agree on a byte count:
//!
//! 1. The handler answers with `Content-Length: len` and a [`SpliceBody`], which first
//!    registers the file in the connection's [`Splicer`] slot and waits.
//! 2. A waiting body makes hyper flush what it buffered (the response head) and then flush
//!    the IO; [`SpliceIo::poll_flush`] is only reached with hyper's buffer empty, so at that
//!    point every byte before the body is on the socket. It takes the registered file as the
//!    *active* splice and wakes the body.
//! 3. The body yields `len` placeholder bytes (a static zero buffer: nothing is allocated or
//!    read). With `Content-Length` framing hyper writes body bytes as they are, in order, so
//!    the next `len` bytes hyper writes are the placeholders: [`SpliceIo`] sends that many
//!    bytes of the file with `sendfile` instead, reporting each call's count as written, and
//!    writes everything after them (the next response) normally.
//!
//! A file still being written (a generation in progress) goes out the same way over HTTP/1.1,
//! chunked ([`Splicer::growing_body`]): the body yields placeholders as the file grows, hyper
//! frames each frame as a chunk (`{size:X}\r\n`, data, `\r\n`; `0\r\n\r\n` at the end), and
//! the IO follows that framing ([`Chunks`]): the size lines and line ends are written as they
//! are (with `MSG_MORE` when data follow), each chunk's data is sent from the file. Framing it
//! does not expect is an error, not a guess.
//!
//! Only byte counts cross from hyper to the IO: however hyper buffers, copies or splits the
//! placeholders, the file's bytes go out exactly where they belong. A body dropped before it
//! yielded everything (the client left) poisons the slot: hyper closes such a connection
//! anyway, and the IO refuses to write anything more on it.
//!
//! `sendfile` reads the file on the calling thread, which is a runtime worker: a range the
//! page cache does not hold (probed at both ends with `preadv2(RWF_NOWAIT)`, like the copying
//! reader in `packcache::tail`) is first read on the blocking pool. Cache files were just
//! written or are hot, so that is the exception.
//!
//! TLS connections, HTTP/2 and Radicle streams get the reading follower (positional reads of
//! the file, finished or growing): their bytes are encrypted or framed in user
//! space anyway. So does an HTTP/1.0 request for a file still being written (no chunks).

use std::fs::File;
use std::future::Future as _;
use std::io::{self, IoSlice};
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll, Waker};

use bytes::Bytes;
use futures_util::Stream;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use seedd_core::metrics::Metrics;
use seedd_core::serve::packcache::tail::resident;

/// What the body hands hyper in place of the file's bytes (never sent).
static PLACEHOLDER: [u8; 1024 * 1024] = [0; 1024 * 1024];
/// Bytes sent by one `sendfile` call at most (and probed for residency at once).
const MAX_SENDFILE: u64 = 2 * 1024 * 1024;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A connection's splice slot: a response body registers its file here, the connection's IO
/// takes it once hyper flushed everything before the body.
#[derive(Clone, Default)]
pub(crate) struct Splicer {
    slot: Arc<Mutex<Slot>>,
}

#[derive(Default)]
struct Slot {
    /// A body waiting for the head before it to be flushed.
    pending: Option<Pending>,
    /// The body whose file became the IO's active splice.
    armed: Option<u64>,
    /// A splice was abandoned part-way: nothing more may be written on this connection.
    broken: bool,
    /// A second descriptor of the connection's socket, to see the client leave while a
    /// response waits for its first byte ([`Splicer::client_gone`]).
    peer: Option<std::os::fd::OwnedFd>,
}

struct Pending {
    id: u64,
    file: Arc<File>,
    /// `None`: chunked, as long as the body yields.
    len: Option<u64>,
    waker: Waker,
    metrics: Option<Arc<Metrics>>,
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

impl Splicer {
    /// A body that sends `len` bytes of `file` from its start (the file must hold them).
    pub(crate) fn body(
        &self,
        file: Arc<File>,
        len: u64,
        metrics: Option<Arc<Metrics>>,
    ) -> SpliceBody {
        self.new_body(file, Framing::Length { len, left: len }, metrics)
    }

    /// A body that sends `file` as it is written, chunked (HTTP/1.1 only): `lengths` says how
    /// much of it is written, each time that grows, and when it is whole
    /// ([`Tail::into_lengths`](seedd_core::serve::packcache::Tail::into_lengths)). No
    /// `Content-Length`: hyper frames it, and [`SpliceIo`] sends each chunk's bytes from the
    /// file.
    pub(crate) fn growing_body(
        &self,
        file: Arc<File>,
        lengths: Lengths,
        metrics: Option<Arc<Metrics>>,
    ) -> SpliceBody {
        let framing = Framing::Growing {
            lengths,
            sent: 0,
            written: 0,
            whole: false,
        };
        self.new_body(file, framing, metrics)
    }

    fn new_body(
        &self,
        file: Arc<File>,
        framing: Framing,
        metrics: Option<Arc<Metrics>>,
    ) -> SpliceBody {
        SpliceBody {
            slot: self.slot.clone(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            state: BodyState::Start { file, metrics },
            framing,
        }
    }

    /// Resolves once the client closed (or reset) its connection, seen without reading from it:
    /// hyper does not read while a response is pending, so a client that sent its request and
    /// left would otherwise be noticed only at the first write (issue 25 §4: a pack-cache
    /// generation waiting for git's first byte is abandoned when its reader goes). Never
    /// resolves when the client sent more (a pipelined request) or the socket cannot be watched.
    pub(crate) async fn client_gone(&self) {
        let fd = lock(&self.slot)
            .peer
            .as_ref()
            .and_then(|f| f.try_clone().ok());
        let watched = fd.and_then(|fd| {
            let s = std::net::TcpStream::from(fd);
            s.set_nonblocking(true).ok()?;
            TcpStream::from_std(s).ok()
        });
        if let Some(s) = watched {
            let mut byte = [0u8; 1];
            match s.peek(&mut byte).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
        std::future::pending::<()>().await;
    }

    /// The connection's IO over `stream`, sharing this slot.
    pub(crate) fn io(&self, stream: TcpStream) -> SpliceIo {
        lock(&self.slot).peer = std::os::fd::AsFd::as_fd(&stream).try_clone_to_owned().ok();
        SpliceIo {
            stream,
            slot: self.slot.clone(),
            active: None,
            warming: None,
        }
    }
}

enum BodyState {
    Start {
        file: Arc<File>,
        metrics: Option<Arc<Metrics>>,
    },
    Waiting,
    Sending,
}

/// How much of a growing file is written: `(bytes, whole)` each time that grows.
pub(crate) type Lengths = Pin<Box<dyn Stream<Item = Result<(u64, bool), io::Error>> + Send>>;

/// How a body's placeholders are counted.
enum Framing {
    /// `Content-Length: len` framing: `left` placeholders still to yield.
    Length { len: u64, left: u64 },
    /// Chunked, following the file as it is written.
    Growing {
        lengths: Lengths,
        /// Placeholders yielded.
        sent: u64,
        /// Bytes known to be in the file.
        written: u64,
        /// `written` is the whole file.
        whole: bool,
    },
}

impl Framing {
    /// Every placeholder was yielded.
    fn finished(&self) -> bool {
        match self {
            Framing::Length { left, .. } => *left == 0,
            Framing::Growing {
                sent,
                written,
                whole,
                ..
            } => *whole && sent == written,
        }
    }
}

/// A response body of placeholder bytes that the connection's [`SpliceIo`] replaces with the
/// file's (module docs): `len` of them with `Content-Length: len` ([`Splicer::body`]), or as
/// many as the file grows, chunked ([`Splicer::growing_body`]).
pub(crate) struct SpliceBody {
    slot: Arc<Mutex<Slot>>,
    id: u64,
    state: BodyState,
    framing: Framing,
}

impl SpliceBody {
    /// The body's length (its `Content-Length`); `None` for a growing file.
    pub(crate) fn content_length(&self) -> Option<u64> {
        match self.framing {
            Framing::Length { len, .. } => Some(len),
            Framing::Growing { .. } => None,
        }
    }
}

/// The next `n` (at most the placeholder buffer's length) placeholder bytes.
fn placeholders(n: u64) -> Bytes {
    let n = n.min(PLACEHOLDER.len() as u64) as usize; // ≤ PLACEHOLDER.len()
    Bytes::from_static(&PLACEHOLDER[..n])
}

impl Stream for SpliceBody {
    type Item = Result<Bytes, io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            match &this.state {
                BodyState::Start { file, metrics } => {
                    if matches!(this.framing, Framing::Length { left: 0, .. }) {
                        this.state = BodyState::Sending;
                        continue;
                    }
                    let mut slot = lock(&this.slot);
                    if slot.pending.is_some() || slot.broken {
                        return Poll::Ready(Some(Err(io::Error::other(
                            "another response is being spliced on this connection",
                        ))));
                    }
                    slot.pending = Some(Pending {
                        id: this.id,
                        file: file.clone(),
                        len: this.content_length(),
                        waker: cx.waker().clone(),
                        metrics: metrics.clone(),
                    });
                    drop(slot);
                    this.state = BodyState::Waiting;
                    // hyper now flushes the head; the IO wakes us once it is out.
                    return Poll::Pending;
                }
                BodyState::Waiting => {
                    let mut slot = lock(&this.slot);
                    if slot.armed == Some(this.id) {
                        slot.armed = None;
                        drop(slot);
                        this.state = BodyState::Sending;
                        continue;
                    }
                    match &mut slot.pending {
                        Some(p) if p.id == this.id => {
                            p.waker.clone_from(cx.waker());
                            return Poll::Pending;
                        }
                        _ => {
                            return Poll::Ready(Some(Err(io::Error::other(
                                "the connection dropped the spliced response",
                            ))))
                        }
                    }
                }
                BodyState::Sending => {
                    return match &mut this.framing {
                        Framing::Length { left: 0, .. } => Poll::Ready(None),
                        Framing::Length { left, .. } => {
                            let chunk = placeholders(*left);
                            *left -= chunk.len() as u64;
                            Poll::Ready(Some(Ok(chunk)))
                        }
                        Framing::Growing {
                            lengths,
                            sent,
                            written,
                            whole,
                        } => loop {
                            if sent < written {
                                let chunk = placeholders(*written - *sent);
                                *sent += chunk.len() as u64;
                                break Poll::Ready(Some(Ok(chunk)));
                            }
                            if *whole {
                                break Poll::Ready(None);
                            }
                            match ready!(lengths.as_mut().poll_next(cx)) {
                                Some(Ok((n, w))) => {
                                    *written = n.max(*written);
                                    *whole = w;
                                }
                                Some(Err(e)) => break Poll::Ready(Some(Err(e))),
                                None => {
                                    break Poll::Ready(Some(Err(io::Error::other(
                                        "the cache file's writer went away",
                                    ))))
                                }
                            }
                        },
                    };
                }
            }
        }
    }
}

impl Drop for SpliceBody {
    fn drop(&mut self) {
        let mut slot = lock(&self.slot);
        match self.state {
            BodyState::Start { .. } => {}
            BodyState::Waiting => {
                if slot.pending.as_ref().is_some_and(|p| p.id == self.id) {
                    slot.pending = None;
                }
                if slot.armed == Some(self.id) {
                    // The IO took the file but hyper will write no placeholder for it.
                    slot.armed = None;
                    slot.broken = true;
                }
            }
            BodyState::Sending => {
                if !self.framing.finished() {
                    slot.broken = true;
                }
            }
        }
    }
}

/// The file bytes the IO sends in place of the placeholders hyper writes next.
struct Active {
    file: Arc<File>,
    offset: u64,
    /// Where hyper's next bytes stand: a `Content-Length` body is one run of placeholders
    /// (`Data(len)`, then `Done`); a chunked one is followed through its framing.
    chunks: Chunks,
    chunked: bool,
    metrics: Option<Arc<Metrics>>,
}

/// Where a chunked body (RFC 9112 §7.1, as hyper writes it: `{size:X}\r\n`, data, `\r\n`;
/// a last chunk of size 0 and no trailers) stands: the data are placeholders, the rest is sent
/// as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunks {
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
    fn step(self, b: u8) -> Option<Chunks> {
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

fn framing_error() -> io::Error {
    io::Error::other("unexpected chunk framing around a spliced body")
}

/// A plain TCP connection's IO for hyper that can splice a cache file into the byte stream
/// (module docs). Reads, and writes outside a splice, go to the socket as they are.
pub(crate) struct SpliceIo {
    stream: TcpStream,
    slot: Arc<Mutex<Slot>>,
    active: Option<Active>,
    /// Reading a range the page cache did not hold, on the blocking pool.
    warming: Option<JoinHandle<io::Result<()>>>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// A file of `len` patterned bytes, written through and (if `cold`) dropped from the page
    /// cache.
    fn file(dir: &std::path::Path, name: &str, len: usize, cold: bool) -> (Arc<File>, Vec<u8>) {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 253) as u8).collect();
        let path = dir.join(name);
        let mut f = File::create(&path).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
        let f = File::open(&path).unwrap();
        if cold {
            rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        }
        (Arc::new(f), data)
    }

    /// Serves one connection: `/a` and `/b` splice their files, `/plain` answers "hello",
    /// `/gone` starts a splice whose body ends early.
    async fn server(
        files: Vec<(&'static str, Arc<File>, u64)>,
    ) -> (
        std::net::SocketAddr,
        tokio::task::JoinHandle<Result<(), hyper::Error>>,
    ) {
        serve_one(move |path, splicer| {
            let (_, file, len) = files.iter().find(|(p, _, _)| *p == path)?;
            let body = splicer.body(file.clone(), *len, None);
            let body: BoxStream = if path == "/gone" {
                Box::pin(futures_util::StreamExt::take(body, 1))
            } else {
                Box::pin(body)
            };
            Some((body, Some(*len)))
        })
        .await
    }

    /// Serves one connection: `route` answers a path with a body (and its length, if known),
    /// anything else is "hello".
    async fn serve_one(
        route: impl Fn(&str, &Splicer) -> Option<(BoxStream, Option<u64>)>
            + Clone
            + Send
            + Sync
            + 'static,
    ) -> (
        std::net::SocketAddr,
        tokio::task::JoinHandle<Result<(), hyper::Error>>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let splicer = Splicer::default();
            let io = hyper_util::rt::TokioIo::new(splicer.io(stream));
            let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                let splicer = splicer.clone();
                let route = route.clone();
                async move {
                    let resp = match route(req.uri().path(), &splicer) {
                        Some((body, len)) => {
                            let mut resp = hyper::Response::builder();
                            if let Some(n) = len {
                                resp = resp.header("content-length", n);
                            }
                            resp.body(axum::body::Body::from_stream(body)).unwrap()
                        }
                        None => hyper::Response::new(axum::body::Body::from("hello")),
                    };
                    Ok::<_, std::convert::Infallible>(resp)
                }
            });
            hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await
        });
        (addr, task)
    }

    type BoxStream = Pin<Box<dyn Stream<Item = Result<Bytes, io::Error>> + Send>>;

    /// Reads one response (head, then `Content-Length` bytes), slowly when `slow`.
    async fn response(c: &mut tokio::net::TcpStream, pending: &mut Vec<u8>, slow: bool) -> Vec<u8> {
        let mut buf = vec![0u8; 64 * 1024];
        let head_end = loop {
            if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = c.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed before a response head");
            pending.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&pending[..head_end]).to_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(!head.contains("transfer-encoding"), "{head}");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        pending.drain(..head_end);
        let mut reads = 0;
        while pending.len() < len {
            let n = c.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed inside a body");
            pending.extend_from_slice(&buf[..n]);
            reads += 1;
            if slow && reads % 16 == 0 {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        }
        pending.drain(..len).collect()
    }

    #[tokio::test]
    async fn spliced_responses_carry_the_file_and_what_follows_them_is_intact() {
        let dir = tempfile::tempdir().unwrap();
        // Larger than loopback's socket buffers, so that sendfile meets a full socket.
        let (a, a_data) = file(dir.path(), "a", 24 * 1024 * 1024 + 13, false);
        let (b, b_data) = file(dir.path(), "b", 1000, false);
        let (addr, server) = server(vec![
            ("/a", a.clone(), a_data.len() as u64),
            ("/b", b.clone(), b_data.len() as u64),
        ])
        .await;
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        // Pipelined: each answer's head directly follows the spliced body before it.
        let reqs = ["/a", "/plain", "/b", "/a", "/plain"]
            .iter()
            .map(|p| format!("GET {p} HTTP/1.1\r\nhost: x\r\n\r\n"))
            .collect::<String>();
        c.write_all(reqs.as_bytes()).await.unwrap();
        let mut pending = Vec::new();
        assert!(response(&mut c, &mut pending, true).await == a_data, "a");
        assert_eq!(response(&mut c, &mut pending, false).await, b"hello");
        assert!(response(&mut c, &mut pending, false).await == b_data, "b");
        assert!(
            response(&mut c, &mut pending, false).await == a_data,
            "a again"
        );
        assert_eq!(response(&mut c, &mut pending, false).await, b"hello");
        drop(c);
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn ranges_the_page_cache_lost_are_read_back_first() {
        let dir = tempfile::tempdir().unwrap();
        let (a, a_data) = file(dir.path(), "a", 6 * 1024 * 1024 + 5, true);
        assert!(
            !resident(&a, 0, MAX_SENDFILE),
            "the test needs the file out of the page cache"
        );
        let (addr, server) = server(vec![("/a", a.clone(), a_data.len() as u64)]).await;
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /a HTTP/1.1\r\nhost: x\r\n\r\nGET /plain HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut pending = Vec::new();
        assert!(response(&mut c, &mut pending, false).await == a_data);
        assert_eq!(response(&mut c, &mut pending, false).await, b"hello");
        drop(c);
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_body_that_ends_early_ends_the_connection_not_the_framing() {
        let dir = tempfile::tempdir().unwrap();
        let (g, g_data) = file(dir.path(), "g", 3 * PLACEHOLDER.len(), false);
        let (addr, server) = server(vec![("/gone", g.clone(), g_data.len() as u64)]).await;
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /gone HTTP/1.1\r\nhost: x\r\n\r\nGET /plain HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).await.unwrap();
        // The head and at most the one placeholder chunk's worth of the file; never "hello".
        let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let body = &got[head_end..];
        assert!(body.len() <= PLACEHOLDER.len(), "{} bytes", body.len());
        assert_eq!(body, &g_data[..body.len()]);
        assert!(server.await.unwrap().is_err());
    }

    /// Reads one chunked response: its head, then the chunks decoded, up to the last one.
    async fn chunked_response(c: &mut tokio::net::TcpStream, pending: &mut Vec<u8>) -> Vec<u8> {
        let mut buf = vec![0u8; 64 * 1024];
        let line_end = |pending: &Vec<u8>, from: usize| {
            pending[from..]
                .windows(2)
                .position(|w| w == b"\r\n")
                .map(|i| from + i)
        };
        let mut body = Vec::new();
        let mut at;
        // The head.
        loop {
            if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&pending[..i]).to_lowercase();
                assert!(head.starts_with("http/1.1 200"), "{head}");
                assert!(head.contains("transfer-encoding: chunked"), "{head}");
                assert!(!head.contains("content-length"), "{head}");
                at = i + 4;
                break;
            }
            let n = c.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before a head");
            pending.extend_from_slice(&buf[..n]);
        }
        loop {
            let Some(end) = line_end(pending, at) else {
                let n = c.read(&mut buf).await.unwrap();
                assert!(n > 0, "closed inside a chunked body");
                pending.extend_from_slice(&buf[..n]);
                continue;
            };
            let size =
                usize::from_str_radix(std::str::from_utf8(&pending[at..end]).unwrap(), 16).unwrap();
            while pending.len() < end + 2 + size + 2 {
                let n = c.read(&mut buf).await.unwrap();
                assert!(n > 0, "closed inside a chunk");
                pending.extend_from_slice(&buf[..n]);
            }
            assert_eq!(&pending[end + 2 + size..end + 4 + size], b"\r\n");
            body.extend_from_slice(&pending[end + 2..end + 2 + size]);
            at = end + 4 + size;
            if size == 0 {
                pending.drain(..at);
                return body;
            }
        }
    }

    /// A file written while it is sent: chunked, each chunk's bytes from the file, the end
    /// only once the writer says it is whole; the next response on the connection is intact.
    #[tokio::test]
    async fn a_growing_file_goes_out_chunked_and_what_follows_is_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g");
        let mut writer = File::create(&path).unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        let data: Vec<u8> = (0..5 * 1024 * 1024 + 77)
            .map(|i| (i * 13 % 251) as u8)
            .collect();
        let (mut c, server, tx) = growing(file).await;
        let feed = {
            let data = data.clone();
            tokio::spawn(async move {
                let mut written = 0u64;
                for piece in data.chunks(300_001) {
                    writer.write_all(piece).unwrap();
                    written += piece.len() as u64;
                    let whole = written == data.len() as u64;
                    tx.send(Ok((written, whole))).unwrap();
                    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
                }
            })
        };
        let mut pending = Vec::new();
        let got = chunked_response(&mut c, &mut pending).await;
        assert!(got == data, "{} bytes of {}", got.len(), data.len());
        assert_eq!(response(&mut c, &mut pending, false).await, b"hello");
        feed.await.unwrap();
        drop(c);
        server.await.unwrap().unwrap();
    }

    /// A writer that fails: the connection ends without the last chunk, so the client sees a
    /// truncated body, never a whole one, and nothing after it.
    #[tokio::test]
    async fn a_growing_file_whose_writer_fails_ends_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let (g, g_data) = file(dir.path(), "g", 1024 * 1024, false);
        let (mut c, server, tx) = growing(g).await;
        tx.send(Ok((1000, false))).unwrap();
        tx.send(Err(io::Error::other("failed"))).unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).await.unwrap();
        let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let body = &got[head_end..];
        // At most the chunk of the 1,000 written bytes (hyper may drop it with the connection),
        // then nothing: no last chunk, no "hello".
        let mut expected = b"3E8\r\n".to_vec();
        expected.extend_from_slice(&g_data[..1000]);
        expected.extend_from_slice(b"\r\n");
        assert!(
            expected.starts_with(body),
            "{:?}",
            &body[..body.len().min(10)]
        );
        assert!(!got.windows(5).any(|w| w == b"hello"));
        drop(server);
    }

    type Growth = tokio::sync::mpsc::UnboundedSender<Result<(u64, bool), io::Error>>;

    /// A server whose `/grow` sends `file` as a growing body, its lengths those sent on the
    /// returned channel; and a client that asked for `/grow`, then `/plain`, pipelined.
    async fn growing(
        file: Arc<File>,
    ) -> (
        tokio::net::TcpStream,
        tokio::task::JoinHandle<Result<(), hyper::Error>>,
        Growth,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let rx = Arc::new(Mutex::new(Some(rx)));
        let (addr, server) = serve_one(move |path, splicer| {
            if path != "/grow" {
                return None;
            }
            let mut rx = rx.lock().unwrap().take()?;
            let lengths: Lengths =
                Box::pin(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)));
            let body = splicer.growing_body(file.clone(), lengths, None);
            Some((Box::pin(body) as BoxStream, None))
        })
        .await;
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /grow HTTP/1.1\r\nhost: x\r\n\r\nGET /plain HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        (c, server, tx)
    }

    #[test]
    fn chunk_framing_is_followed_and_anything_else_is_refused() {
        let mut c = Chunks::Size(0);
        for &b in b"1A\r\n" {
            c = c.step(b).unwrap();
        }
        assert_eq!(c, Chunks::Data(26));
        let mut c = Chunks::DataCr;
        for &b in b"\r\n0\r\n\r\n" {
            c = c.step(b).unwrap();
        }
        assert_eq!(c, Chunks::Done);
        assert_eq!(Chunks::Size(0).step(b'x'), None);
        assert_eq!(Chunks::DataCr.step(b'x'), None);
        assert_eq!(Chunks::Size(u64::MAX).step(b'f'), None);
    }
}
