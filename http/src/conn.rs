//! What one HTTP connection may hold (issue 25 §3: slow and stalled clients hold one buffer,
//! not a response):
//!
//! - **Write idle timeout** ([`Watched`]): the connection's IO (under TLS, or the `sendfile`
//!   IO of plain connections, [`super::splice::SpliceIo`]) fails with `TimedOut` once a write
//!   or flush has waited this long without the client taking a byte. hyper then ends the
//!   connection and drops the response: its git process is killed, a pack-cache reader lets go
//!   of its file (so an evicted file's blocks are released once its last reader is cut). It
//!   covers every response — JSON, raw files, archives, git output, pack-cache hits spliced with
//!   `sendfile` or read — because it watches the socket, not the body.
//!   `http.write_timeout_secs`; cuts counted in `seedd_http_connections_cut_total{reason}`.
//! - **Per-IP connection cap** ([`PerIpConns`]): at most `http.max_connections_per_ip` open
//!   connections per client address (IPv6 by its prefix, `http.rate.ipv6_prefix`, as the rate
//!   limiter keys it). At accept time the client is the socket peer; a configured trusted proxy
//!   (`http.rate.trusted_proxies`) carries many clients' connections, so it is not capped (its
//!   clients' requests are still rate-limited by their forwarded address). A connection over the
//!   cap is answered `429` (plain HTTP: one non-blocking write, then closed; TLS: closed) and
//!   counted in `seedd_http_connections_refused_total{reason="per_ip"}`.

use std::collections::HashMap;
use std::future::Future as _;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use seedd_core::config::Cidr;
use seedd_core::metrics::Metrics;

/// The admin listener's write timeout (the git listener's is `http.write_timeout_secs`, 60 s by
/// default): a response the client takes no byte of for this long
/// is cut.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// The answer to a connection over the per-IP cap (plain HTTP).
const REFUSED: &[u8] = b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";

/// What every connection of a listener is held to.
#[derive(Clone)]
pub struct ConnLimits {
    pub write_timeout: Duration,
    pub per_ip: Option<Arc<PerIpConns>>,
    pub metrics: Option<Arc<Metrics>>,
}

impl ConnLimits {
    /// The admin listener: a write timeout, no per-IP cap (it is behind bearer tokens).
    pub fn admin() -> Self {
        Self {
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            per_ip: None,
            metrics: None,
        }
    }

    fn count(&self, f: impl FnOnce(&Metrics)) {
        if let Some(m) = &self.metrics {
            f(m);
        }
    }

    /// A connection from `peer` may be served: its slot (released when dropped), or `None`
    /// (over the cap; counted).
    pub(crate) fn admit(&self, peer: IpAddr) -> Option<Option<ConnSlot>> {
        let Some(per_ip) = &self.per_ip else {
            return Some(None);
        };
        match per_ip.admit(peer) {
            Admit::Exempt => Some(None),
            Admit::Slot(s) => Some(Some(s)),
            Admit::Refused => {
                self.count(|m| {
                    m.http_connections_refused
                        .with_label_values(&["per_ip"])
                        .inc()
                });
                None
            }
        }
    }

    /// Answers a refused plain connection with a 429 if its socket takes it at once.
    pub(crate) fn refuse(stream: &tokio::net::TcpStream) {
        let _ = stream.try_write(REFUSED);
    }

    /// `io` held to the write timeout.
    pub(crate) fn watch<T>(&self, io: T) -> Watched<T> {
        Watched {
            io,
            timeout: self.write_timeout,
            stalled: None,
            metrics: self.metrics.clone(),
        }
    }
}

/// Open connections per client address.
pub struct PerIpConns {
    max: usize,
    v6_prefix: u8,
    trusted: Vec<Cidr>,
    open: Mutex<HashMap<u128, usize>>,
}

enum Admit {
    Exempt,
    Slot(ConnSlot),
    Refused,
}

impl PerIpConns {
    pub fn new(max: usize, v6_prefix: u8, trusted: Vec<Cidr>) -> Arc<Self> {
        Arc::new(Self {
            max,
            v6_prefix,
            trusted,
            open: Mutex::new(HashMap::new()),
        })
    }

    fn admit(self: &Arc<Self>, peer: IpAddr) -> Admit {
        let peer = peer.to_canonical();
        if self.trusted.iter().any(|c| c.contains(peer)) {
            return Admit::Exempt;
        }
        let key = super::ratelimit::bucket_key(peer, self.v6_prefix);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(key).or_insert(0);
        if *n >= self.max {
            return Admit::Refused;
        }
        *n += 1;
        Admit::Slot(ConnSlot {
            conns: self.clone(),
            key,
        })
    }

    /// Open connections of `peer`'s address.
    #[cfg(test)]
    fn open(&self, peer: IpAddr) -> usize {
        let key = super::ratelimit::bucket_key(peer.to_canonical(), self.v6_prefix);
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(&key).copied().unwrap_or(0)
    }
}

/// One open connection of a client address; dropped when the connection ends.
pub(crate) struct ConnSlot {
    conns: Arc<PerIpConns>,
    key: u128,
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        let mut open = self.conns.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// A connection's IO whose writes fail once they waited [`ConnLimits::write_timeout`] for the
/// client to take a byte.
pub(crate) struct Watched<T> {
    io: T,
    timeout: Duration,
    /// Since when a write or flush is waiting for the client.
    stalled: Option<Pin<Box<Sleep>>>,
    metrics: Option<Arc<Metrics>>,
}

impl<T> Watched<T> {
    /// A write or flush answered `poll`: progress clears the watch, waiting arms it (and fails
    /// once it runs out).
    fn watch<R>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        match poll {
            Poll::Pending => {
                let timeout = self.timeout;
                let sleep = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                if sleep.as_mut().poll(cx).is_ready() {
                    if let Some(m) = &self.metrics {
                        m.http_connections_cut
                            .with_label_values(&["write_timeout"])
                            .inc();
                    }
                    tracing::debug!(
                        ?timeout,
                        "client took no byte of a response; connection cut"
                    );
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client stopped reading",
                    )));
                }
                Poll::Pending
            }
            ready => {
                self.stalled = None;
                ready
            }
        }
    }

    #[cfg(test)]
    fn stalled_since(&self) -> Option<tokio::time::Instant> {
        self.stalled.as_ref().map(|s| s.deadline() - self.timeout)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_shutdown(cx);
        self.watch(cx, poll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    fn limits(timeout: Duration) -> ConnLimits {
        ConnLimits {
            write_timeout: timeout,
            per_ip: None,
            metrics: Some(Arc::new(Metrics::new().unwrap())),
        }
    }

    /// A peer that stops reading: the writer fails with `TimedOut` after the timeout (not
    /// before), and the cut is counted.
    #[tokio::test]
    async fn a_client_that_stops_reading_is_cut_after_the_timeout() {
        let (a, mut b) = tokio::io::duplex(64 * 1024);
        let l = limits(Duration::from_millis(300));
        let mut w = l.watch(a);
        let started = std::time::Instant::now();
        let chunk = vec![7u8; 16 * 1024];
        let err = loop {
            if let Err(e) = w.write_all(&chunk).await {
                break e;
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        let m = l.metrics.as_ref().unwrap();
        assert_eq!(
            m.http_connections_cut
                .with_label_values(&["write_timeout"])
                .get(),
            1
        );
        // The peer still gets what was written before the cut.
        let mut buf = vec![0u8; 1024];
        assert!(b.read(&mut buf).await.unwrap() > 0);
    }

    /// A slow reader that keeps taking bytes is never cut, however long the response takes.
    #[tokio::test]
    async fn a_slow_reader_that_keeps_reading_is_not_cut() {
        let (a, mut b) = tokio::io::duplex(8 * 1024);
        let l = limits(Duration::from_millis(200));
        let mut w = l.watch(a);
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; 1024];
            let mut got = 0;
            while got < 64 * 1024 {
                let n = b.read(&mut buf).await.unwrap();
                assert!(n > 0);
                got += n;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            got
        });
        // Roughly 640 ms of writing, more than three timeouts.
        w.write_all(&vec![1u8; 64 * 1024]).await.unwrap();
        w.flush().await.unwrap();
        assert!(w.stalled_since().is_none());
        assert_eq!(reader.await.unwrap(), 64 * 1024);
    }

    #[test]
    fn the_per_ip_cap_counts_open_connections_and_ipv6_by_prefix() {
        let trusted: Cidr = "10.0.0.1/32".parse().unwrap();
        let conns = PerIpConns::new(2, 64, vec![trusted]);
        let l = ConnLimits {
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            per_ip: Some(conns.clone()),
            metrics: Some(Arc::new(Metrics::new().unwrap())),
        };
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let s1 = l.admit(a).unwrap();
        let s2 = l.admit(a).unwrap();
        assert!(l.admit(a).is_none(), "third connection refused");
        // The IPv4-mapped form is the same client.
        assert!(l.admit("::ffff:192.0.2.1".parse().unwrap()).is_none());
        assert!(
            l.admit("192.0.2.2".parse().unwrap()).is_some(),
            "another client"
        );
        drop(s1);
        assert_eq!(conns.open(a), 1);
        let s3 = l.admit(a).unwrap();
        // One /64 is one client.
        let v6 = |s: &str| s.parse::<IpAddr>().unwrap();
        let _x = l.admit(v6("2001:db8::1")).unwrap();
        let _y = l.admit(v6("2001:db8::2:3")).unwrap();
        assert!(l.admit(v6("2001:db8::ffff")).is_none());
        assert!(l.admit(v6("2001:db8:0:1::1")).is_some(), "another /64");
        // A trusted proxy is not capped.
        let p: IpAddr = "10.0.0.1".parse().unwrap();
        let proxied: Vec<_> = (0..5).map(|_| l.admit(p).unwrap()).collect();
        assert!(proxied.iter().all(Option::is_none));
        let m = l.metrics.as_ref().unwrap();
        let refused = m.http_connections_refused.with_label_values(&["per_ip"]);
        assert_eq!(refused.get(), 3);
        drop((s2, s3));
        assert_eq!(conns.open(a), 0);
    }
}
