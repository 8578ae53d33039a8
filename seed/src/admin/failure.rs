//! Every error answer of the admin API (`/api/v1`), as one type: its status and its
//! [`api::ErrorBody`] (`{"error": …}`, a failed fetch adds `reason`). Handlers return
//! `Result<_, Failure>` and use `?`; domain errors become a `Failure` through their
//! [`HttpStatus`] (admin/status.rs), a task that did not finish through [`JoinError`]; the
//! response is built in one place ([`IntoResponse`]).

use std::fmt::Display;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use seedd_api as api;
use tokio::task::JoinError;

use super::status::HttpStatus;

/// Why an admin API request is not answered with its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    status: StatusCode,
    body: api::ErrorBody,
}

impl Failure {
    /// An answer with the given status and one-line message.
    pub(crate) fn new(status: StatusCode, msg: impl Display) -> Self {
        Self {
            status,
            body: api::ErrorBody::new(msg),
        }
    }

    /// 400: the request is malformed or names something invalid.
    pub(crate) fn bad_request(msg: impl Display) -> Self {
        Self::new(StatusCode::BAD_REQUEST, msg)
    }

    /// 404: the request names something that does not exist.
    pub(crate) fn not_found(msg: impl Display) -> Self {
        Self::new(StatusCode::NOT_FOUND, msg)
    }

    /// 409: the request conflicts with the node's state.
    pub(crate) fn conflict(msg: impl Display) -> Self {
        Self::new(StatusCode::CONFLICT, msg)
    }

    /// 500: the node failed; the error is logged and its message answered.
    pub(crate) fn internal(e: impl Display) -> Self {
        let f = Self::new(StatusCode::INTERNAL_SERVER_ERROR, e);
        f.log();
        f
    }

    /// The same answer with `reason` (a bounded label, e.g. a failed fetch's metric label).
    pub(crate) fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.body.reason = Some(reason.into());
        self
    }

    /// Server errors are logged (the client sees the message; the operator should too).
    fn log(&self) {
        if self.status.is_server_error() {
            tracing::warn!(status = self.status.as_u16(), error = %self.body.error, "admin API request failed");
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

/// A domain error answers with its own status and its message.
impl<E: HttpStatus> From<E> for Failure {
    fn from(e: E) -> Self {
        let f = Self::new(e.http_status(), e);
        f.log();
        f
    }
}

/// A blocking task that panicked or was cancelled: 500.
impl From<JoinError> for Failure {
    fn from(e: JoinError) -> Self {
        Self::internal(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::ControlError;
    use seedd_core::maintain::MaintainError;
    use seedd_core::tenant::TenantError;
    use seedd_p2p::identity::IdentityError;

    /// The status and the JSON body an answer carries.
    async fn answered(f: Failure) -> (StatusCode, serde_json::Value) {
        let r = f.into_response();
        let status = r.status();
        assert_eq!(r.headers()["content-type"], "application/json");
        let bytes = axum::body::to_bytes(r.into_body(), 4096).await.unwrap();
        let body = serde_json::from_slice(&bytes).unwrap();
        (status, body)
    }

    #[tokio::test]
    async fn each_constructor_answers_its_status_and_one_line() {
        let cases = [
            (Failure::bad_request("limit must be at least 1"), 400),
            (Failure::not_found("repository x is not in the index"), 404),
            (Failure::conflict("no connected peer"), 409),
            (Failure::internal("index: closed"), 500),
            (
                Failure::new(StatusCode::UNPROCESSABLE_ENTITY, "cannot start"),
                422,
            ),
        ];
        for (f, status) in cases {
            let msg = f.body.error.clone();
            assert_eq!(f.status.as_u16(), status);
            assert_eq!(f.body.reason, None);
            let (s, body) = answered(f).await;
            assert_eq!(s.as_u16(), status);
            assert_eq!(body, serde_json::json!({ "error": msg }), "no reason key");
        }
    }

    #[tokio::test]
    async fn a_reason_is_added_to_the_body() {
        let f = Failure::new(
            StatusCode::BAD_GATEWAY,
            "fetching rad:z1 from z6Mk: timed out",
        )
        .with_reason("timeout");
        let (s, body) = answered(f).await;
        assert_eq!(s, StatusCode::BAD_GATEWAY);
        assert_eq!(
            body,
            serde_json::json!({
                "error": "fetching rad:z1 from z6Mk: timed out",
                "reason": "timeout",
            })
        );
    }

    #[test]
    fn domain_errors_answer_with_their_status_and_message() {
        let e = TenantError::Unknown("acme".into());
        let msg = e.to_string();
        let f = Failure::from(e);
        assert_eq!(f.status, StatusCode::NOT_FOUND);
        assert_eq!(f.body, api::ErrorBody::new(msg));

        let f = Failure::from(TenantError::Exists("acme".into()));
        assert_eq!(f.status, StatusCode::CONFLICT);

        let e = ControlError::Invalid("bad apply".into());
        let f = Failure::from(e);
        assert_eq!(f.status, StatusCode::BAD_REQUEST);
        assert_eq!(f.body.error, "bad apply");

        let f = Failure::from(ControlError::Tenant(TenantError::Unknown("x".into())));
        assert_eq!(f.status, StatusCode::NOT_FOUND);

        let f = Failure::from(IdentityError::Start {
            name: "b".into(),
            reason: "address in use".into(),
        });
        assert_eq!(f.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(f.body.error, "identity `b`: address in use");

        let rid = seedd_proto::crypto::RepoId::from([7; 20]);
        let f = Failure::from(MaintainError::NotHeld(rid));
        assert_eq!(f.status, StatusCode::NOT_FOUND);
        assert_eq!(f.body.error, format!("{rid} is not held in storage"));
    }

    #[tokio::test]
    async fn a_task_that_did_not_finish_is_a_server_error() {
        let task = tokio::spawn(std::future::pending::<()>());
        task.abort();
        let Err(e) = task.await else {
            panic!("an aborted task finishes with an error");
        };
        let msg = e.to_string();
        let f = Failure::from(e);
        assert_eq!(f.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(f.body.error, msg);
    }
}
