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
use crate::HttpState;
use seedd_core::serve::advert::{self, LsRefs, Snapshot};
use seedd_core::serve::refcache::Answer;
use seedd_core::serve::{self, View};
use seedd_proto::crypto::RepoId;

/// Answers at least this long go gzip-compressed to clients that accept it: a large ref list
/// (100,000 refs advertise 6.2 MB) shrinks to about a third, compressed once per snapshot and
/// then shared. Below it, compression saves too little to be worth a second rendered answer.
const GZIP_FROM: usize = 64 * 1024;

/// Whether the request's `Accept-Encoding` takes gzip (git sends `deflate, gzip, br, zstd`).
pub(super) fn accepts_gzip(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip"))
                && !refused
        })
}

/// `body` gzip-compressed (fast level: the bytes are on the wire once per request, the
/// compression is paid once per snapshot).
fn gzip(body: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 3),
        flate2::Compression::fast(),
    );
    // Writing into a Vec cannot fail; an empty result would send the plain bytes.
    enc.write_all(body)
        .and_then(|()| enc.finish())
        .unwrap_or_default()
}

/// The answer `key` rendered by `render` — for a client that takes gzip, compressed when it is
/// large: (bytes, whether they are gzip). One snapshot lookup either way (one count in
/// `seedd_git_ref_snapshot_lookups_total`): gzip-taking clients share their own rendered
/// answer, a flag byte followed by the bytes to send.
async fn answer_maybe_gzip(
    state: &Arc<HttpState>,
    rid: RepoId,
    repo: &Path,
    key: Answer,
    gzip_ok: bool,
    render: impl FnOnce(&Snapshot) -> Vec<u8> + Send + 'static,
) -> Option<(Bytes, bool)> {
    let adv = &state.advertiser;
    if !gzip_ok {
        return adv.answer(rid, repo, key, render).await.map(|b| (b, false));
    }
    let tagged = adv
        .answer(rid, repo, Answer::Gzip(Box::new(key)), move |snap| {
            let plain = render(snap);
            let packed = if plain.len() >= GZIP_FROM {
                gzip(&plain)
            } else {
                Vec::new()
            };
            // An empty `packed`: small, or compression failed; the plain bytes are sent.
            match packed.is_empty() {
                true => [&[0u8][..], &plain].concat(),
                false => [&[1u8][..], &packed].concat(),
            }
        })
        .await?;
    if tagged.is_empty() {
        return None;
    }
    let gzipped = tagged.first() == Some(&1);
    Some((tagged.slice(1..), gzipped))
}

/// The in-process answer to a request on `endpoint`, counted like git's would be (bytes,
/// egress; an `ls-refs` POST is an upload-pack response of protocol v2 for
/// `seedd_git_clone_duration_seconds`).
fn respond(
    state: &Arc<HttpState>,
    endpoint: Endpoint,
    (body, gzipped): (Bytes, bool),
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
    // The same URL answers differently by Accept-Encoding (for caches in between).
    h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if gzipped {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
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
    gzip_ok: bool,
    egress: Egress,
) -> Option<Response> {
    let started = Instant::now();
    let adv = &state.advertiser;
    let caps = adv.caps(&state.git).await?;
    let body = if serve::is_v2(protocol) {
        (caps.v2(), false)
    } else {
        let caps = caps.clone();
        let render = move |snap: &Snapshot| {
            // v0/v1 clients expect the smart-HTTP service preamble (as http-backend sends it).
            let mut body = b"001e# service=git-upload-pack\n0000".to_vec();
            body.extend_from_slice(&advert::advertise_v0(snap, view, &caps));
            body
        };
        answer_maybe_gzip(state, rid, repo, Answer::V0(view), gzip_ok, render).await?
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
    gzip_ok: bool,
    egress: Egress,
) -> Option<Response> {
    let started = Instant::now();
    let args = LsRefs::parse(body)?;
    state.advertiser.caps(&state.git).await?;
    let key = Answer::LsRefs(view, args.clone());
    let render = move |snap: &Snapshot| advert::ls_refs(snap, view, &args);
    let out = answer_maybe_gzip(state, rid, repo, key, gzip_ok, render).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_taken_as_clients_say() {
        let takes = |values: &[&str]| {
            let mut h = axum::http::HeaderMap::new();
            for v in values {
                h.append(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
            }
            accepts_gzip(&h)
        };
        assert!(takes(&["deflate, gzip, br, zstd"]));
        assert!(takes(&["GZIP"]));
        assert!(takes(&["br", "gzip;q=0.5"]));
        assert!(takes(&["x-gzip"]));
        assert!(!takes(&[]));
        assert!(!takes(&["deflate, br"]));
        assert!(!takes(&["gzip;q=0", "br"]));
        assert!(!takes(&["gzip; q=0.0"]));
        assert!(!takes(&["gzipped"]));
        // Compressed answers come back whole.
        let body: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 97).to_le_bytes())
            .collect();
        let packed = gzip(&body);
        let mut unpacked = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&packed[..]),
            &mut unpacked,
        )
        .unwrap();
        assert_eq!(unpacked, body);
    }
}
