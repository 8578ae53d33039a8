//! `/raw/`: file bytes with a Content-Type (http-api.md §1.7). Responses carry
//! `X-Content-Type-Options: nosniff` and (but PDFs) a sandbox CSP, so repository content
//! (SVG, HTML) cannot run script on the seed's origin; HTML is served as text.
//!
//! A blob's bytes are read once into a shared buffer ([`RawBlobs`], by object id, within
//! [`RAW_CACHE_BYTES`]): concurrent downloads of the same file hold one copy, and the body is
//! sent from it without further copies.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use bytes::Bytes;
use gix::ObjectId;

use super::source::{commit, oid};
use super::{heavy, Scope, WebError};
use crate::HttpState;

/// Raw files above this are 413 (httpd's 10 MiB).
pub(super) const MAX_RAW: u64 = 10 << 20;
/// Bytes of raw blobs kept for reuse (emptied when a new one would not fit).
pub(crate) const RAW_CACHE_BYTES: usize = 64 << 20;

/// Raw blobs by object id (content-addressed: the same bytes in every repository; each
/// request first checks that its repository has the object).
#[derive(Default)]
pub(crate) struct RawBlobs {
    inner: std::sync::Mutex<(std::collections::HashMap<ObjectId, Bytes>, usize)>,
}

impl RawBlobs {
    fn get(&self, id: &ObjectId) -> Option<Bytes> {
        self.inner.lock().ok()?.0.get(id).cloned()
    }

    fn put(&self, id: ObjectId, body: Bytes) {
        if let Ok(mut m) = self.inner.lock() {
            if m.1 + body.len() > RAW_CACHE_BYTES {
                m.0.clear();
                m.1 = 0;
            }
            m.1 += body.len();
            if let Some(old) = m.0.insert(id, body) {
                m.1 -= old.len();
            }
        }
    }
}

/// Content-Type by file extension (`None`: sniff the bytes).
pub(super) fn by_extension(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "ico" => "image/x-icon",
        "avif" => "image/avif",
        "bmp" => "image/bmp",
        "pdf" => "application/pdf",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "mp3" => "audio/mpeg",
        "ogg" => "audio/ogg",
        "json" => "application/json",
        "wasm" => "application/wasm",
        "zip" => "application/zip",
        "gz" | "tgz" => "application/gzip",
        "md" | "markdown" => "text/markdown; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "csv" => "text/csv; charset=utf-8",
        // Served as text: never rendered as a page on the seed's origin.
        "html" | "htm" | "xml" | "js" | "txt" | "rs" | "toml" | "yaml" | "yml" => {
            "text/plain; charset=utf-8"
        }
        _ => return None,
    })
}

/// Content-Type from the first bytes.
pub(super) fn sniff(bytes: &[u8]) -> &'static str {
    let starts = |m: &[u8]| bytes.starts_with(m);
    if starts(b"\x89PNG\r\n\x1a\n") {
        "image/png"
    } else if starts(b"\xff\xd8\xff") {
        "image/jpeg"
    } else if starts(b"GIF87a") || starts(b"GIF89a") {
        "image/gif"
    } else if starts(b"%PDF-") {
        "application/pdf"
    } else if bytes.len() > 12 && starts(b"RIFF") && &bytes[8..12] == b"WEBP" {
        "image/webp"
    } else if bytes.len() > 8 && &bytes[4..8] == b"ftyp" {
        "video/mp4"
    } else if starts(b"\x1a\x45\xdf\xa3") {
        "video/webm"
    } else if !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok() {
        "text/plain; charset=utf-8"
    } else {
        "application/octet-stream"
    }
}

fn read(repo: &gix::Repository, id: ObjectId, cache: &RawBlobs) -> Result<Bytes, WebError> {
    let header = repo
        .find_header(id)
        .map_err(|_| WebError::NotFound("object not found"))?;
    if header.kind() != gix::objs::Kind::Blob {
        return Err(WebError::NotFound("not a blob"));
    }
    if header.size() > MAX_RAW {
        return Err(WebError::TooLarge {
            what: "file",
            limit: MAX_RAW,
        });
    }
    if let Some(body) = cache.get(&id) {
        return Ok(body);
    }
    let body = Bytes::from(repo.find_object(id).map_err(WebError::git)?.detach().data);
    cache.put(id, body.clone());
    Ok(body)
}

fn bytes(content_type: &'static str, body: Bytes) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Browsers refuse to show a sandboxed PDF; PDFs run no script on the origin anyway.
    if content_type != "application/pdf" {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("sandbox"),
        );
    }
    r
}

/// `GET|HEAD /raw/{rid}/blobs/{oid}`: a blob by id, type sniffed from its bytes.
pub(super) async fn by_oid(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, id)): Path<(String, String)>,
) -> Result<Response, WebError> {
    let id = oid(&id)?;
    let record = super::repo(&state, &scope, &rid)?;
    let st = state.clone();
    let body = heavy(&state, move || {
        read(
            &super::source::open(&st.storage, record.rid)?,
            id,
            &st.web.raw,
        )
    })
    .await?;
    Ok(bytes(sniff(&body), body))
}

/// `GET|HEAD /raw/{rid}/{sha|head}/{*path}`: a file at a commit (or the default branch).
pub(super) async fn by_path(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, sha, path)): Path<(String, String, String)>,
) -> Result<Response, WebError> {
    let record = super::repo(&state, &scope, &rid)?;
    let sha = if sha == "head" {
        oid(record
            .head
            .as_deref()
            .ok_or(WebError::NotFound("no default branch"))?)?
    } else {
        oid(&sha)?
    };
    let st = state.clone();
    let name = path.clone();
    let body = heavy(&state, move || {
        let repo = super::source::open(&st.storage, record.rid)?;
        let c = commit(&repo, sha)?;
        let (id, mode) = super::source::lookup(&repo, c.tree, &path)?;
        if mode.is_tree() || mode.is_commit() {
            return Err(WebError::NotFound("not a file"));
        }
        read(&repo, id, &st.web.raw)
    })
    .await?;
    let ct = by_extension(&name).unwrap_or_else(|| sniff(&body));
    Ok(bytes(ct, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two downloads of one blob share one buffer; the cache stays within its budget.
    #[test]
    fn raw_blobs_are_shared_and_bounded() {
        let c = RawBlobs::default();
        let id = |n: u8| ObjectId::from_bytes_or_panic(&[n; 20]);
        let body = Bytes::from(vec![7u8; 1 << 20]);
        c.put(id(1), body.clone());
        let (a, b) = (c.get(&id(1)), c.get(&id(1)));
        let (Some(a), Some(b)) = (a, b) else {
            panic!("not kept")
        };
        assert_eq!(a.as_ptr(), b.as_ptr(), "one buffer for both");
        assert_eq!(a.as_ptr(), body.as_ptr(), "no copy");
        for n in 2..80u8 {
            c.put(id(n), Bytes::from(vec![n; 1 << 20]));
        }
        let held = c.inner.lock().map(|m| m.1).unwrap_or(usize::MAX);
        assert!(held <= RAW_CACHE_BYTES, "{held}");
        assert!(c.get(&id(79)).is_some());
    }
}
