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
//! TLS connections, HTTP/2 and Radicle streams get the copying reader: their bytes are
//! encrypted or framed in user space anyway.

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

use crate::metrics::Metrics;
use crate::serve::packcache::tail::resident;

/// What the body hands hyper in place of the file's bytes (never sent).
static PLACEHOLDER: [u8; 256 * 1024] = [0; 256 * 1024];
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
}

struct Pending {
    id: u64,
    file: Arc<File>,
    len: u64,
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
        SpliceBody {
            slot: self.slot.clone(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            state: BodyState::Start { file, metrics },
            len,
            left: len,
        }
    }

    /// The connection's IO over `stream`, sharing this slot.
    pub(crate) fn io(&self, stream: TcpStream) -> SpliceIo {
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

/// A response body of `len` placeholder bytes that the connection's [`SpliceIo`] replaces
/// with the file's (module docs). The response must carry `Content-Length: len`.
pub(crate) struct SpliceBody {
    slot: Arc<Mutex<Slot>>,
    id: u64,
    state: BodyState,
    len: u64,
    left: u64,
}

impl SpliceBody {
    /// The body's length (its `Content-Length`).
    pub(crate) fn content_length(&self) -> u64 {
        self.len
    }
}

impl Stream for SpliceBody {
    type Item = Result<Bytes, io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            match &this.state {
                BodyState::Start { file, metrics } => {
                    if this.len == 0 {
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
                        len: this.len,
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
                    if this.left == 0 {
                        return Poll::Ready(None);
                    }
                    let n = this.left.min(PLACEHOLDER.len() as u64);
                    this.left -= n;
                    let n = n as usize; // ≤ PLACEHOLDER.len()
                    return Poll::Ready(Some(Ok(Bytes::from_static(&PLACEHOLDER[..n]))));
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
                if self.left > 0 {
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
    end: u64,
    metrics: Option<Arc<Metrics>>,
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
            let count = want.min(active.end - active.offset).min(MAX_SENDFILE);
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
                    if active.offset == active.end {
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
        if this.active.is_none() {
            return Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        }
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        if total == 0 {
            return Poll::Ready(Ok(0));
        }
        // The placeholders come first; what follows them is written by a later call.
        this.poll_splice(cx, total)
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
                end: p.len,
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
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let splicer = Splicer::default();
            let io = hyper_util::rt::TokioIo::new(splicer.io(stream));
            let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                let splicer = splicer.clone();
                let files = files.clone();
                async move {
                    let path = req.uri().path().to_owned();
                    let resp = match files.iter().find(|(p, _, _)| *p == path) {
                        Some((_, file, len)) => {
                            let body = splicer.body(file.clone(), *len, None);
                            let n = body.content_length();
                            let body: BoxStream = if path == "/gone" {
                                Box::pin(futures_util::StreamExt::take(body, 1))
                            } else {
                                Box::pin(body)
                            };
                            hyper::Response::builder()
                                .header("content-length", n)
                                .body(axum::body::Body::from_stream(body))
                                .unwrap()
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
        let (g, g_data) = file(dir.path(), "g", 1024 * 1024, false);
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
}
