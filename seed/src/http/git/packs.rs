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
use crate::crypto::RepoId;
use crate::http::refusal::Refusal;
use crate::http::splice::{SpliceBody, Splicer};
use crate::http::HttpState;
use crate::serve::packcache::generate::Job;
use crate::serve::packcache::{self, Key, Normalised, PackCache};
use crate::serve::{self, Service, View};

/// How long a reader on plain HTTP/1 waits for a generation to finish before it follows the
/// file as it grows: a response git writes within this time (most clones) then goes out with
/// sendfile, sparing seedd a copy of every byte; a longer one starts flowing after it.
const SPLICE_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

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
    splicer: Option<&Splicer>,
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
    let Some(mut tail) = packcache::reader(cache, key, job, permits).await? else {
        return Ok(None);
    };
    let label = if v2 { "v2" } else { "v0" };
    // Over plain HTTP/1 a generation that finishes soon is waited for, so that the whole
    // response goes out with sendfile (with its length) rather than chunk by chunk.
    if splicer.is_some() && tail.whole().is_none() {
        tail.finished_within(SPLICE_WAIT).await;
    }
    // A finished file over plain HTTP/1 is sent with sendfile; anything else is read.
    let spliced = match (splicer, tail.whole()) {
        (Some(s), Some((file, len))) => Some(s.body(file, len, Some(state.metrics.clone()))),
        _ => None,
    };
    let length = spliced.as_ref().map(SpliceBody::content_length);
    let inner: BodyStream = match spliced {
        Some(body) => Box::pin(body),
        None => Box::pin(tail.into_stream()),
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
        // Spliced bytes are framed by their length (`http::splice`), never chunked.
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    no_cache(h);
    Ok(Some(resp))
}

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
