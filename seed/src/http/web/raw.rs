//! `/raw/`: file bytes with a Content-Type (http-api.md §1.7). Responses carry
//! `X-Content-Type-Options: nosniff` and (but PDFs) a sandbox CSP, so repository content
//! (SVG, HTML) cannot run script on the seed's origin; HTML is served as text.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use gix::ObjectId;

use super::source::{commit, oid};
use super::{heavy, Scope, WebError};
use crate::http::HttpState;

/// Raw files above this are 413 (httpd's 10 MiB).
pub(super) const MAX_RAW: u64 = 10 << 20;

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

fn read(repo: &gix::Repository, id: ObjectId) -> Result<Vec<u8>, WebError> {
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
    Ok(repo.find_object(id).map_err(WebError::git)?.data.clone())
}

fn bytes(content_type: &'static str, body: Vec<u8>) -> Response {
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
    let storage = state.storage.clone();
    let body = heavy(&state, move || {
        read(&super::source::open(&storage, record.rid)?, id)
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
    let storage = state.storage.clone();
    let name = path.clone();
    let body = heavy(&state, move || {
        let repo = super::source::open(&storage, record.rid)?;
        let c = commit(&repo, sha)?;
        let (id, mode) = super::source::lookup(&repo, c.tree, &path)?;
        if mode.is_tree() || mode.is_commit() {
            return Err(WebError::NotFound("not a file"));
        }
        read(&repo, id)
    })
    .await?;
    let ct = by_extension(&name).unwrap_or_else(|| sniff(&body));
    Ok(bytes(ct, body))
}
