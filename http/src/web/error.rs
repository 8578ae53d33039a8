//! Web API errors and their JSON bodies (`{"error": …, "code": …}` as httpd answers,
//! http-api.md §1.1).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use seedd_core::blocking::BlockingError;
use seedd_core::index::IndexError;

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

    pub(crate) fn git(e: impl std::fmt::Display) -> Self {
        WebError::Git(e.to_string())
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
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(error = ?self, "web request failed");
            "Internal Server Error".to_owned()
        } else {
            self.to_string()
        };
        let body = serde_json::json!({ "error": message, "code": status.as_u16() });
        let mut r = (status, axum::Json(body)).into_response();
        let retry = match &self {
            WebError::RateLimited(secs) | WebError::EgressExhausted(secs) => {
                Some((*secs).max(1).to_string())
            }
            WebError::Busy | WebError::Blocking(BlockingError::Deadline(_)) => Some("1".into()),
            _ => None,
        };
        if let Some(v) = retry.and_then(|v| HeaderValue::from_str(&v).ok()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        r
    }
}
