//! The answers of a refused request: 429 or 503 with `Retry-After`.

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::per_repo::Shed;

/// Whole seconds for `Retry-After`, rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

fn rejection(status: StatusCode, wait: Duration, msg: &str) -> Response {
    let secs = retry_after_secs(wait);
    let mut r = (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{msg}; retry after {secs} s\n"),
    )
        .into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    r
}

/// 429 + `Retry-After` for a request over a rate limit.
pub fn too_many_requests(wait: Duration) -> Response {
    rejection(
        StatusCode::TOO_MANY_REQUESTS,
        wait,
        "too many requests: slow down",
    )
}

/// 503 + `Retry-After` for a request shed by a repository's pack queue.
pub fn shed_response(shed: &Shed) -> Response {
    rejection(
        StatusCode::SERVICE_UNAVAILABLE,
        shed.retry_after,
        "too many clones of this repository in progress",
    )
}
