//! Web API errors and their JSON bodies (`{"error": …, "code": …}` as httpd answers,
//! http-api.md §1.1). The crate's answer convention (`crate::refusal`): one type says status,
//! body, label and `Retry-After`; handlers return `Result<_, WebError>` and use `?`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use seedd_core::blocking::BlockingError;
use seedd_core::index::IndexError;

use seedd_web_api::ErrorBody;

use crate::refusal::with_retry_after;

#[derive(Debug, thiserror::Error)]
pub(crate) enum WebError {
    #[error("{0}")]
    NotFound(&'static str),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Forbidden(&'static str),
    /// Seconds until the tenant's limit lets a request through.
    #[error("too many requests for this tenant; slow down")]
    RateLimited(u64),
    /// Seconds until the tenant's daily egress quota resets (UTC midnight).
    #[error("this tenant's egress quota for today is used up")]
    EgressExhausted(u64),
    #[error("{what} is over the {limit}-byte limit")]
    TooLarge { what: &'static str, limit: u64 },
    #[error("too many expensive requests in progress; retry shortly")]
    Busy,
    #[error("reading the index")]
    Index(#[source] IndexError),
    #[error("reading git objects: {0}")]
    Git(String),
    #[error("git work")]
    Blocking(#[source] BlockingError),
    /// The object's evaluation passed its work budget (413).
    #[error("{0}")]
    OverBudget(String),
}

impl WebError {
    pub(crate) fn index(e: IndexError) -> Self {
        WebError::Index(e)
    }

    pub(crate) fn git(e: impl std::error::Error) -> Self {
        WebError::Git(seedd_core::logging::chain(&e).to_string())
    }

    pub(crate) fn status(&self) -> StatusCode {
        match self {
            WebError::NotFound(_) => StatusCode::NOT_FOUND,
            WebError::BadRequest(_) => StatusCode::BAD_REQUEST,
            WebError::Forbidden(_) => StatusCode::FORBIDDEN,
            WebError::RateLimited(_) | WebError::EgressExhausted(_) => {
                StatusCode::TOO_MANY_REQUESTS
            }
            WebError::TooLarge { .. } | WebError::OverBudget(_) => StatusCode::PAYLOAD_TOO_LARGE,
            WebError::Busy | WebError::Blocking(BlockingError::Deadline(_)) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            WebError::Index(_) | WebError::Git(_) | WebError::Blocking(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }

    /// Bounded label (logs, metrics).
    pub(crate) fn label(&self) -> &'static str {
        match self {
            WebError::NotFound(_) => "not_found",
            WebError::BadRequest(_) => "bad_request",
            WebError::Forbidden(_) => "forbidden",
            WebError::RateLimited(_) => "tenant_rate_limited",
            WebError::EgressExhausted(_) => "egress_exhausted",
            WebError::TooLarge { .. } => "too_large",
            WebError::Busy => "busy",
            WebError::Index(_) => "index",
            WebError::Git(_) => "git",
            WebError::Blocking(BlockingError::Deadline(_)) => "deadline",
            WebError::Blocking(_) => "blocking",
            WebError::OverBudget(_) => "over_budget",
        }
    }

    /// Seconds for `Retry-After` (at least 1), for answers a retry can pass.
    pub(crate) fn retry_after_secs(&self) -> Option<u64> {
        match self {
            WebError::RateLimited(secs) | WebError::EgressExhausted(secs) => Some((*secs).max(1)),
            WebError::Busy | WebError::Blocking(BlockingError::Deadline(_)) => Some(1),
            _ => None,
        }
    }
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(reason = self.label(), error = ?self, "web request failed");
            "Internal Server Error".to_owned()
        } else {
            tracing::debug!(
                reason = self.label(),
                status = status.as_u16(),
                "web request refused"
            );
            self.to_string()
        };
        let body = ErrorBody {
            error: message,
            code: status.as_u16(),
        };
        with_retry_after(
            (status, axum::Json(body)).into_response(),
            self.retry_after_secs(),
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use axum::http::header;

    use super::*;

    async fn answer(e: WebError) -> (StatusCode, Option<String>, ErrorBody) {
        let r = e.into_response();
        let status = r.status();
        let retry = r
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (status, retry, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn errors_answer_httpds_body_with_their_status_and_retry_after() {
        let (s, retry, body) = answer(WebError::NotFound("repository not found")).await;
        assert_eq!((s, retry), (StatusCode::NOT_FOUND, None));
        assert_eq!(
            body,
            ErrorBody {
                error: "repository not found".into(),
                code: 404
            }
        );
        let (s, retry, body) = answer(WebError::RateLimited(0)).await;
        assert_eq!(
            (s, retry.as_deref()),
            (StatusCode::TOO_MANY_REQUESTS, Some("1"))
        );
        assert_eq!(body.code, 429);
        let (s, retry, _) = answer(WebError::EgressExhausted(3600)).await;
        assert_eq!(
            (s, retry.as_deref()),
            (StatusCode::TOO_MANY_REQUESTS, Some("3600"))
        );
        let (s, retry, _) = answer(WebError::Busy).await;
        assert_eq!(
            (s, retry.as_deref()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("1"))
        );
        let (s, _, body) = answer(WebError::TooLarge {
            what: "blob",
            limit: 4,
        })
        .await;
        assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(body.error, "blob is over the 4-byte limit");
    }

    /// A server error answers no detail (it is logged).
    #[tokio::test]
    async fn server_errors_answer_no_detail() {
        let (s, retry, body) = answer(WebError::Git("secret path /srv/x".into())).await;
        assert_eq!((s, retry), (StatusCode::INTERNAL_SERVER_ERROR, None));
        assert_eq!(body.error, "Internal Server Error");
    }

    #[test]
    fn labels_are_bounded_and_distinct() {
        let all = [
            WebError::NotFound("x"),
            WebError::BadRequest("x".into()),
            WebError::Forbidden("x"),
            WebError::RateLimited(1),
            WebError::EgressExhausted(1),
            WebError::TooLarge {
                what: "x",
                limit: 1,
            },
            WebError::Busy,
            WebError::Git("x".into()),
            WebError::OverBudget("x".into()),
        ];
        let labels: std::collections::BTreeSet<&str> = all.iter().map(WebError::label).collect();
        assert_eq!(labels.len(), all.len());
        assert!(labels
            .iter()
            .all(|l| l.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
    }
}
