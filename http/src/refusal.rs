//! Every refusal the smart-HTTP routes and the per-IP limit in front of them give, as one type:
//! its status, its one-line text body, its `Retry-After`, its bounded label and the counters it
//! moves. Handlers return it; the response is built in one place ([`IntoResponse`]).
//!
//! The convention every answer type of the crate follows (the web API's `WebError` too, and the
//! admin API's `Failure` in `seedd`): one type says status, body, label and `Retry-After`, is
//! `IntoResponse`, and handlers return `Result<_, It>` and use `?`. `Retry-After` is set by
//! [`with_retry_after`] only.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use seedd_core::metrics::Metrics;

/// Why a git request over HTTP is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The path is no git URL.
    NotGitPath,
    /// The path names something that is no repository id.
    BadRepoId,
    /// `git-receive-pack`, or `info/refs?service=git-receive-pack`.
    Push,
    /// The tenant of the `Host` is suspended.
    TenantSuspended,
    /// Unknown, private, denied, another tenant's, or only suspended tenants'.
    RepoNotFound,
    /// A host that belongs to no tenant while `http.unknown_hosts` is `deny`.
    UnknownHost,
    /// The tenant's request rate is exceeded.
    TenantRateLimited { retry_after_secs: u64 },
    /// The paying tenant's egress quota for today is used up.
    EgressExhausted { retry_after_secs: u64 },
    /// The index could not be read.
    IndexUnavailable,
    /// `info/refs` by another method than GET or HEAD.
    InfoRefsNotGet,
    /// `git-upload-pack` by another method than POST.
    UploadPackNotPost,
    /// `info/refs` without `?service=git-upload-pack` (dumb HTTP).
    DumbHttp,
    /// Every pack slot is busy and a clone already waits: new clones are shed.
    ClonesBacklogged,
    /// No slot for a git process (`reason`: the `seedd_git_pack_rejected_total` label).
    GitBusy { reason: &'static str },
    /// No pack slot of this repository.
    RepoBusy,
    /// git could not be started.
    GitUnavailable,
    /// A POST whose `Content-Type` is not a git upload-pack request.
    NotUploadPackRequest,
    /// A `Content-Encoding` other than gzip or none.
    UnsupportedEncoding,
    /// A declared request body over `http.max_request_bytes`.
    BodyTooLarge { max: u64 },
    /// A request body that does not start with a pkt-line.
    MalformedRequest,
    /// The client address is over its request rate (`http.rate`), before any routing.
    IpRateLimited { retry_after_secs: u64 },
}

impl Refusal {
    /// Bounded label (logs, metrics).
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Refusal::NotGitPath => "not_git_path",
            Refusal::BadRepoId => "bad_repo_id",
            Refusal::Push => "push",
            Refusal::TenantSuspended => "tenant_suspended",
            Refusal::RepoNotFound => "repo_not_found",
            Refusal::UnknownHost => "unknown_host",
            Refusal::TenantRateLimited { .. } => "tenant_rate_limited",
            Refusal::EgressExhausted { .. } => "egress_exhausted",
            Refusal::IndexUnavailable => "index_unavailable",
            Refusal::InfoRefsNotGet => "info_refs_not_get",
            Refusal::UploadPackNotPost => "upload_pack_not_post",
            Refusal::DumbHttp => "dumb_http",
            Refusal::ClonesBacklogged => "clones_backlogged",
            Refusal::GitBusy { .. } => "git_busy",
            Refusal::RepoBusy => "repo_busy",
            Refusal::GitUnavailable => "git_unavailable",
            Refusal::NotUploadPackRequest => "not_upload_pack_request",
            Refusal::UnsupportedEncoding => "unsupported_encoding",
            Refusal::BodyTooLarge { .. } => "body_too_large",
            Refusal::MalformedRequest => "malformed_request",
            Refusal::IpRateLimited { .. } => "ip_rate_limited",
        }
    }

    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Refusal::NotGitPath | Refusal::RepoNotFound | Refusal::UnknownHost => {
                StatusCode::NOT_FOUND
            }
            Refusal::BadRepoId | Refusal::MalformedRequest => StatusCode::BAD_REQUEST,
            Refusal::Push | Refusal::TenantSuspended | Refusal::DumbHttp => StatusCode::FORBIDDEN,
            Refusal::TenantRateLimited { .. }
            | Refusal::EgressExhausted { .. }
            | Refusal::IpRateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Refusal::IndexUnavailable | Refusal::GitUnavailable => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            Refusal::InfoRefsNotGet | Refusal::UploadPackNotPost => StatusCode::METHOD_NOT_ALLOWED,
            Refusal::ClonesBacklogged | Refusal::GitBusy { .. } | Refusal::RepoBusy => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Refusal::NotUploadPackRequest | Refusal::UnsupportedEncoding => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            Refusal::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        }
    }

    /// The text body (one line).
    pub(crate) fn message(&self) -> String {
        match self {
            Refusal::NotGitPath => "not found".into(),
            Refusal::BadRepoId => {
                "invalid repository id: expected rad:z… or z… (base58btc, 20 bytes)".into()
            }
            Refusal::Push => {
                "push is not accepted over HTTP: publish with `git push rad` from a Radicle node"
                    .into()
            }
            Refusal::TenantSuspended => "this tenant is suspended; contact the operator".into(),
            Refusal::RepoNotFound => "repository not found".into(),
            Refusal::UnknownHost => "unknown host".into(),
            Refusal::TenantRateLimited { .. } => {
                "too many requests for this tenant; slow down".into()
            }
            Refusal::EgressExhausted { .. } => {
                "this tenant's egress quota for today is used up".into()
            }
            Refusal::IndexUnavailable => "index unavailable".into(),
            Refusal::UploadPackNotPost => "use POST for git-upload-pack".into(),
            Refusal::InfoRefsNotGet => "use GET for info/refs".into(),
            Refusal::DumbHttp => {
                "only smart HTTP is served: use a git client that sends ?service=git-upload-pack"
                    .into()
            }
            Refusal::ClonesBacklogged => "too many clones in progress; retry shortly".into(),
            Refusal::GitBusy { .. } => "too many git requests in progress; retry shortly".into(),
            Refusal::RepoBusy => {
                "too many clones of this repository in progress; retry shortly".into()
            }
            Refusal::GitUnavailable => "git unavailable".into(),
            Refusal::NotUploadPackRequest => {
                "expected Content-Type: application/x-git-upload-pack-request".into()
            }
            Refusal::UnsupportedEncoding => "unsupported Content-Encoding (gzip or none)".into(),
            Refusal::BodyTooLarge { max } => format!("request body over {max} bytes"),
            Refusal::MalformedRequest => "malformed git request: expected pkt-lines".into(),
            Refusal::IpRateLimited { retry_after_secs } => format!(
                "too many requests: slow down; retry after {} s",
                (*retry_after_secs).max(1)
            ),
        }
    }

    /// Seconds for `Retry-After` (at least 1), for refusals that pass.
    pub(crate) fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Refusal::TenantRateLimited { retry_after_secs }
            | Refusal::EgressExhausted { retry_after_secs }
            | Refusal::IpRateLimited { retry_after_secs } => Some((*retry_after_secs).max(1)),
            Refusal::ClonesBacklogged | Refusal::GitBusy { .. } | Refusal::RepoBusy => Some(1),
            _ => None,
        }
    }

    /// Moves the counters that say why requests were turned away (the per-route request
    /// counters are moved for every response by the handler).
    pub(crate) fn record(&self, metrics: &Metrics) {
        match self {
            Refusal::TenantRateLimited { .. } => metrics
                .http_rate_limited
                .with_label_values(&["tenant"])
                .inc(),
            Refusal::RepoBusy => metrics.http_rate_limited.with_label_values(&["repo"]).inc(),
            Refusal::ClonesBacklogged => metrics
                .pack_rejected
                .with_label_values(&["backlogged"])
                .inc(),
            Refusal::GitBusy { reason } => metrics.pack_rejected.with_label_values(&[reason]).inc(),
            Refusal::BodyTooLarge { .. } => metrics
                .git_aborted
                .with_label_values(&["body_too_large"])
                .inc(),
            _ => {}
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let r = (
            self.status(),
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{}\n", self.message()),
        )
            .into_response();
        with_retry_after(r, self.retry_after_secs())
    }
}

/// `r` with `Retry-After: secs` (at least 1) when a retry can pass; the one place the crate's
/// answers set the header.
pub(crate) fn with_retry_after(mut r: Response, secs: Option<u64>) -> Response {
    if let Some(secs) = secs {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_refusals_say_when_to_retry() {
        let r = Refusal::TenantRateLimited {
            retry_after_secs: 0,
        }
        .into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let r = Refusal::EgressExhausted {
            retry_after_secs: 3600,
        }
        .into_response();
        assert_eq!(r.headers()[header::RETRY_AFTER], "3600");
        let r = Refusal::GitBusy {
            reason: "queue_full",
        }
        .into_response();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let r = Refusal::IpRateLimited {
            retry_after_secs: 7,
        }
        .into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "7");
        let r = Refusal::RepoNotFound.into_response();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
    }

    #[test]
    fn every_refusal_has_its_own_bounded_label() {
        let all = [
            Refusal::NotGitPath,
            Refusal::BadRepoId,
            Refusal::Push,
            Refusal::TenantSuspended,
            Refusal::RepoNotFound,
            Refusal::UnknownHost,
            Refusal::TenantRateLimited {
                retry_after_secs: 1,
            },
            Refusal::EgressExhausted {
                retry_after_secs: 1,
            },
            Refusal::IndexUnavailable,
            Refusal::InfoRefsNotGet,
            Refusal::UploadPackNotPost,
            Refusal::DumbHttp,
            Refusal::ClonesBacklogged,
            Refusal::GitBusy { reason: "x" },
            Refusal::RepoBusy,
            Refusal::GitUnavailable,
            Refusal::NotUploadPackRequest,
            Refusal::UnsupportedEncoding,
            Refusal::BodyTooLarge { max: 1 },
            Refusal::MalformedRequest,
            Refusal::IpRateLimited {
                retry_after_secs: 1,
            },
        ];
        let labels: std::collections::BTreeSet<&str> = all.iter().map(Refusal::label).collect();
        assert_eq!(labels.len(), all.len(), "labels are distinct");
        assert!(labels
            .iter()
            .all(|l| l.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
    }
}
