//! `POST git-upload-pack` through the pack cache ([`serve::packcache`], issue 13 §3): a
//! cacheable request (no `have` lines) is answered from a finished cache file, from one being
//! generated for an identical request, or by starting that generation (which takes the same
//! repository and global pack slots as a direct answer, and only while git runs). `None` sends
//! the request to git directly: not cacheable, not admitted yet, refs unreadable, or a
//! generation that failed before anything was sent.

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use bytes::Bytes;
use futures_util::Stream;

use super::{finish_hook, no_cache, pack_permits, refs, Egress, Endpoint};
use crate::refusal::Refusal;
use crate::splice::Splicer;
use crate::HttpState;
use seedd_core::serve::packcache::generate::Job;
use seedd_core::serve::packcache::{self, Key, Normalised, PackCache};
use seedd_core::serve::{self, Service, View};
use seedd_proto::crypto::RepoId;

/// A plain HTTP/1 connection's splicer, for a request whose response may be chunked (HTTP/1.1)
/// or not (HTTP/1.0).
pub(super) struct Splice {
    pub splicer: Splicer,
    pub chunked: bool,
}

/// The request `body` (whole) answered through `cache`, or `None` to ask git directly.
#[allow(clippy::too_many_arguments)]
pub(super) async fn serve(
    state: &Arc<HttpState>,
    cache: &Arc<PackCache>,
    rid: RepoId,
    repo: &Path,
    view: View,
    protocol: Option<&str>,
    body: &[u8],
    egress: Egress,
    splice: Option<&Splice>,
    client: Option<std::net::IpAddr>,
) -> Result<Option<Response>, Refusal> {
    let started = Instant::now();
    let v2 = serve::is_v2(protocol);
    let request = match Normalised::parse(v2, body) {
        Ok(r) => r,
        Err(why) => {
            tracing::debug!(%rid, reason = %why, "not cacheable; asking git");
            return Ok(None);
        }
    };
    let Some(fingerprint) = refs::fingerprint(state, rid, repo).await else {
        return Ok(None);
    };
    let key = Key::new(&rid, view, &fingerprint, &request);
    let job = || Job {
        git: state.git.clone(),
        repo: repo.to_owned(),
        service: Service::UploadPack,
        view,
        protocol: protocol.map(str::to_owned),
        request: Bytes::copy_from_slice(body),
    };
    // A claim takes this repository's pack permit, then a global pack slot (as a direct answer).
    let permits = || pack_permits(state, &rid);
    // New generations are admitted per client address (IPv6 by prefix), as the rate limiter
    // keys it.
    let client = client.map(|ip| crate::ratelimit::bucket_key(ip, state.rate.ipv6_prefix()));
    let lookup = packcache::reader(cache, key, client, job, permits);
    // A client that leaves while the answer waits for git's first byte drops its reader (so an
    // unpopular generation is cancelled) instead of holding it until the first write fails.
    let found = match splice {
        Some(s) => tokio::select! {
            r = lookup => r?,
            () = s.splicer.client_gone() => {
                tracing::debug!(%rid, "client left before the response started");
                let mut gone = Response::new(Body::empty());
                *gone.status_mut() = CLIENT_GONE;
                return Ok(Some(gone));
            }
        },
        None => lookup.await?,
    };
    let Some(tail) = found else {
        return Ok(None);
    };
    let label = if v2 { "v2" } else { "v0" };
    // A file over plain HTTP/1 is sent with sendfile (whole with its length, or chunked as it
    // grows); anything else is read.
    let metrics = Some(state.metrics.clone());
    let (inner, length): (BodyStream, _) = match (splice, tail.whole()) {
        (Some(s), Some((file, len))) => (Box::pin(s.splicer.body(file, len, metrics)), Some(len)),
        (Some(s), None) if s.chunked => {
            let file = tail.file();
            let lengths = futures_util::StreamExt::map(tail.into_lengths(), |r| {
                r.map_err(std::io::Error::other)
            });
            let body = s.splicer.growing_body(file, Box::pin(lengths), metrics);
            (Box::pin(body), None)
        }
        _ => (Box::pin(tail.into_stream()), None),
    };
    let out = Counted {
        inner,
        bytes: 0,
        ended: None,
        started,
        label,
        state: state.clone(),
        finish: Some(finish_hook(
            state,
            Endpoint::UploadPack.route(),
            None,
            egress,
        )),
    };
    let mut resp = Response::new(Body::from_stream(out));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-git-upload-pack-result"),
    );
    if let Some(len) = length {
        // A whole file's spliced bytes are framed by their length (`http::splice`).
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    no_cache(h);
    Ok(Some(resp))
}

/// The status of an answer nobody receives: the client closed its connection first (nginx's
/// 499, for the request metrics).
const CLIENT_GONE: axum::http::StatusCode = match axum::http::StatusCode::from_u16(499) {
    Ok(s) => s,
    Err(_) => axum::http::StatusCode::BAD_REQUEST,
};

type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + Send>>;

/// A cached body that reports, when dropped, what was sent (bytes, egress, clone duration) like
/// a direct answer does.
struct Counted {
    inner: BodyStream,
    bytes: u64,
    /// `Some(true)`: ended cleanly; `Some(false)`: ended with an error.
    ended: Option<bool>,
    started: Instant,
    label: &'static str,
    state: Arc<HttpState>,
    finish: Option<Box<dyn FnOnce(serve::Summary) + Send>>,
}

impl Stream for Counted {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let next = this.inner.as_mut().poll_next(cx);
        match &next {
            Poll::Ready(Some(Ok(chunk))) => this.bytes += chunk.len() as u64,
            Poll::Ready(Some(Err(_))) => this.ended = Some(false),
            Poll::Ready(None) => {
                this.ended.get_or_insert(true);
            }
            Poll::Pending => {}
        }
        next
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let aborted = match self.ended {
            Some(true) => None,
            Some(false) => Some("read_error"),
            None => Some("client_gone"),
        };
        if aborted.is_none() {
            self.state
                .metrics
                .clone_duration
                .with_label_values(&[self.label])
                .observe(self.started.elapsed().as_secs_f64());
        }
        if let Some(finish) = self.finish.take() {
            finish(serve::Summary {
                bytes: self.bytes,
                elapsed: self.started.elapsed(),
                aborted,
            });
        }
    }
}
