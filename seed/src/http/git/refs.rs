//! Ref advertisements answered in process (issue 13 §2): `info/refs` (v0/v1 refs, v2
//! capabilities) and v2 `ls-refs` POSTs come from the repository's cached ref snapshot
//! ([`serve::advert`], [`RefCache`]) without a `git upload-pack` process or a pack slot. When
//! the capability probe failed, or a request is anything but a plain `ls-refs`, the caller
//! falls back to git.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use bytes::Bytes;

use super::{finish_hook, no_cache, Egress, Endpoint};
use crate::crypto::RepoId;
use crate::http::HttpState;
use crate::serve::advert::{self, LsRefs};
use crate::serve::refcache::Answer;
use crate::serve::{self, View};

/// The in-process answer to a request on `endpoint`, counted like git's would be (bytes,
/// egress; an `ls-refs` POST is an upload-pack response of protocol v2 for
/// `seedd_git_clone_duration_seconds`).
fn respond(
    state: &Arc<HttpState>,
    endpoint: Endpoint,
    body: Bytes,
    content_type: &'static str,
    egress: Egress,
    started: Instant,
) -> Response {
    let bytes = body.len() as u64;
    let finish = finish_hook(state, endpoint.route(), None, egress);
    if endpoint == Endpoint::UploadPack {
        state
            .metrics
            .clone_duration
            .with_label_values(&["v2"])
            .observe(started.elapsed().as_secs_f64());
    }
    let mut resp = Response::new(Body::from(body));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    no_cache(h);
    finish(serve::Summary {
        bytes,
        elapsed: started.elapsed(),
        aborted: None,
    });
    resp
}

/// `GET info/refs`, or `None` to ask git.
pub(super) async fn advertise(
    state: &Arc<HttpState>,
    rid: RepoId,
    repo: &Path,
    view: View,
    protocol: Option<&str>,
    egress: Egress,
) -> Option<Response> {
    let started = Instant::now();
    let adv = &state.advertiser;
    let caps = adv.caps(&state.git).await?;
    let body = if serve::is_v2(protocol) {
        caps.v2()
    } else {
        let caps = caps.clone();
        adv.answer(rid, repo, Answer::V0(view), move |snap| {
            // v0/v1 clients expect the smart-HTTP service preamble (as http-backend sends it).
            let mut body = b"001e# service=git-upload-pack\n0000".to_vec();
            body.extend_from_slice(&advert::advertise_v0(snap, view, &caps));
            body
        })
        .await?
    };
    Some(respond(
        state,
        Endpoint::InfoRefs,
        body,
        "application/x-git-upload-pack-advertisement",
        egress,
        started,
    ))
}

/// A v2 `POST git-upload-pack` whose whole body is `body`: answered here when it is a plain
/// `ls-refs`, else `None`.
pub(super) async fn ls_refs(
    state: &Arc<HttpState>,
    rid: RepoId,
    repo: &Path,
    view: View,
    body: &[u8],
    egress: Egress,
) -> Option<Response> {
    let started = Instant::now();
    let args = LsRefs::parse(body)?;
    state.advertiser.caps(&state.git).await?;
    let key = Answer::LsRefs(view, args.clone());
    let out = state
        .advertiser
        .answer(rid, repo, key, move |snap| {
            advert::ls_refs(snap, view, &args)
        })
        .await?;
    Some(respond(
        state,
        Endpoint::UploadPack,
        out,
        "application/x-git-upload-pack-result",
        egress,
        started,
    ))
}

/// Whether a v2 request body starting with these bytes may be an `ls-refs` (its first
/// pkt-line is `command=ls-refs\n`).
pub(super) fn may_be_ls_refs(start: &[u8]) -> bool {
    start.starts_with(b"0014command=ls-refs\n")
}

/// The fingerprint of `rid`'s ref snapshot (the pack cache's key), or `None` if the refs
/// cannot be read now.
pub(super) async fn fingerprint(state: &Arc<HttpState>, rid: RepoId, repo: &Path) -> Option<Bytes> {
    state.advertiser.fingerprint(rid, repo).await
}
