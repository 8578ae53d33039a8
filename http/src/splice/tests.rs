use std::io::{self, Write as _};
use std::pin::Pin;

use bytes::Bytes;
use futures_util::Stream;
use seedd_core::serve::packcache::tail::resident;

use super::body::PLACEHOLDER;
use super::chunks::Chunks;
use super::io::MAX_SENDFILE;
use super::*;
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
        // Advice, not an order: under load (the whole suite running) some pages can still be
        // in writeback or held; ask again until none of the first sendfile range is resident.
        for _ in 0..100 {
            rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
            if !resident(&f, 0, MAX_SENDFILE.min(len as u64)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
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
    route: impl Fn(&str, &Splicer) -> Option<(BoxStream, Option<u64>)> + Clone + Send + Sync + 'static,
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
        let lengths: Lengths = Box::pin(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)));
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

// ---------------------------------------------------------------------------------------------
// What the splice relies on in hyper's HTTP/1 server (module docs), pinned against hyper alone:
// a recording IO under `serve_connection`, no splice. If a hyper upgrade changes any of this,
// these tests fail with the recorded writes and flushes, before the splice sends a wrong byte.

/// Everything hyper did to the IO: the bytes written, in order, and the length written at
/// each flush.
#[derive(Default)]
struct Record {
    written: Vec<u8>,
    flushes: Vec<usize>,
    /// The body waiting for a flush (woken by the next one).
    waiting: Option<std::task::Waker>,
}

/// A connection that delivers one request, then waits; records every write and flush.
struct RecordingIo {
    request: std::io::Cursor<Vec<u8>>,
    record: Arc<Mutex<Record>>,
}

impl tokio::io::AsyncRead for RecordingIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let pos = self.request.position() as usize;
        let rest = &self.request.get_ref()[pos..];
        if rest.is_empty() {
            // The client waits for its answer: hyper must not need more input to send it.
            return std::task::Poll::Pending;
        }
        let n = rest.len().min(buf.remaining());
        buf.put_slice(&rest[..n]);
        self.request.set_position((pos + n) as u64);
        std::task::Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncWrite for RecordingIo {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        lock_record(&self.record).written.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        let mut r = lock_record(&self.record);
        let mut n = 0;
        for b in bufs {
            r.written.extend_from_slice(b);
            n += b.len();
        }
        std::task::Poll::Ready(Ok(n))
    }

    /// As `SpliceIo`: vectored, so hyper's queued (not flattened) write path is the one pinned.
    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(
        self: Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let mut r = lock_record(&self.record);
        let at = r.written.len();
        r.flushes.push(at);
        if let Some(w) = r.waiting.take() {
            w.wake();
        }
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

fn lock_record(r: &Mutex<Record>) -> std::sync::MutexGuard<'_, Record> {
    r.lock().unwrap_or_else(|p| p.into_inner())
}

/// A body that first waits for a flush of the IO (as `SpliceBody` waits for its head to be
/// out), then yields `frames`.
struct AfterFlush {
    record: Arc<Mutex<Record>>,
    frames: std::collections::VecDeque<Bytes>,
    woken: bool,
}

impl Stream for AfterFlush {
    type Item = Result<Bytes, io::Error>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        if !self.woken {
            self.woken = true;
            lock_record(&self.record).waiting = Some(cx.waker().clone());
            return std::task::Poll::Pending;
        }
        std::task::Poll::Ready(self.frames.pop_front().map(Ok))
    }
}

/// Serves `request` with hyper's HTTP/1 server over a recording IO, answering with
/// `content_length` (if any) and the body `frames` (yielded only after a flush); returns the
/// record once `done` holds for what was written, failing after 10 s with the record.
async fn hyper_writes(
    request: &str,
    content_length: Option<usize>,
    frames: &[&[u8]],
    done: impl Fn(&[u8]) -> bool,
) -> (Vec<u8>, Vec<usize>) {
    let record = Arc::new(Mutex::new(Record::default()));
    let io = RecordingIo {
        request: std::io::Cursor::new(request.as_bytes().to_vec()),
        record: record.clone(),
    };
    let frames: std::collections::VecDeque<Bytes> =
        frames.iter().map(|f| Bytes::copy_from_slice(f)).collect();
    let body_record = record.clone();
    let service = hyper::service::service_fn(move |_req: hyper::Request<_>| {
        let body = AfterFlush {
            record: body_record.clone(),
            frames: frames.clone(),
            woken: false,
        };
        async move {
            let mut resp = hyper::Response::builder();
            if let Some(n) = content_length {
                resp = resp.header("content-length", n);
            }
            Ok::<_, std::convert::Infallible>(
                resp.body(axum::body::Body::from_stream(body)).unwrap(),
            )
        }
    });
    let conn = tokio::spawn(
        hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(io), service),
    );
    let finished = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            if done(&lock_record(&record).written) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    conn.abort();
    let r = lock_record(&record);
    assert!(
        finished.is_ok(),
        "hyper did not finish the response: wrote {:?}, flushed at {:?}",
        String::from_utf8_lossy(&r.written),
        r.flushes
    );
    (r.written.clone(), r.flushes.clone())
}

/// The end of the response head in `written`.
fn head_len(written: &[u8]) -> usize {
    written
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
        .expect("a response head")
}

/// `Content-Length` framing: a waiting body makes hyper write the whole head and then flush
/// the IO (`SpliceIo::poll_flush` arms the splice there), and the body's bytes follow exactly
/// as yielded, nothing added, split or reordered (the IO counts them as placeholders).
#[tokio::test]
async fn hyper_flushes_the_whole_head_for_a_waiting_body_then_writes_its_bytes_as_they_are() {
    let frames: [&[u8]; 3] = [b"abc", &[0u8; 70_000], b"xyz"];
    let len = frames.iter().map(|f| f.len()).sum::<usize>();
    let (written, flushes) = hyper_writes(
        "GET /x HTTP/1.1\r\nhost: seed\r\n\r\n",
        Some(len),
        &frames,
        |w| {
            w.windows(4)
                .position(|x| x == b"\r\n\r\n")
                .is_some_and(|h| w.len() >= h + 4 + len)
        },
    )
    .await;
    let head = head_len(&written);
    assert!(
        written.starts_with(b"HTTP/1.1 200 OK\r\n"),
        "{:?}",
        String::from_utf8_lossy(&written[..head])
    );
    assert!(
        flushes.contains(&head),
        "no flush right after the head ({head} bytes): flushes at {flushes:?}"
    );
    assert_eq!(
        written[head..],
        frames.concat()[..],
        "the body's bytes, as yielded"
    );
}

/// Chunked framing (HTTP/1.1, no length): each frame is one chunk, `{size:x}\r\n`, its bytes,
/// `\r\n`, and the body ends with `0\r\n\r\n` and no trailers: the framing `Chunks` follows.
#[tokio::test]
async fn hyper_frames_each_body_frame_as_one_chunk_in_the_form_the_splice_follows() {
    let frames: [&[u8]; 3] = [b"abc", &[7u8; 70_000], b"z"];
    let (written, flushes) = hyper_writes(
        "GET /x HTTP/1.1\r\nhost: seed\r\n\r\n",
        None,
        &frames,
        |w| w.ends_with(b"\r\n0\r\n\r\n"),
    )
    .await;
    let head = head_len(&written);
    let head_text = String::from_utf8_lossy(&written[..head]).to_ascii_lowercase();
    assert!(
        head_text.contains("transfer-encoding: chunked"),
        "{head_text}"
    );
    assert!(
        flushes.contains(&head),
        "no flush right after the head ({head} bytes): flushes at {flushes:?}"
    );
    let mut want = Vec::new();
    for f in frames {
        want.extend_from_slice(format!("{:x}\r\n", f.len()).as_bytes());
        want.extend_from_slice(f);
        want.extend_from_slice(b"\r\n");
    }
    want.extend_from_slice(b"0\r\n\r\n");
    assert_eq!(written[head..], want[..], "hyper's chunked framing changed");
    // And `Chunks` accepts exactly that framing around the data.
    let mut c = Chunks::Size(0);
    let mut rest = &written[head..];
    while c != Chunks::Done {
        match c {
            Chunks::Data(n) => {
                rest = &rest[n as usize..];
                c = Chunks::DataCr;
            }
            _ => {
                c = c.step(rest[0]).expect("framing the splice follows");
                rest = &rest[1..];
            }
        }
    }
    assert!(rest.is_empty());
}
