//! HTTP status of domain errors in admin answers. The domain modules (`tenant`, `identity`)
//! know nothing of HTTP; the mapping lives here, at the edge.

use axum::http::StatusCode;
use axum::response::Response;

use crate::control::ControlError;
use seedd_core::tenant::TenantError;
use seedd_p2p::identity::IdentityError;

/// The status an admin answer carries for a domain error.
pub(crate) trait HttpStatus: std::fmt::Display {
    fn http_status(&self) -> StatusCode;
}

/// A one-line JSON error (`{"error": …}`) with the error's status.
pub(crate) fn error_response(e: impl HttpStatus) -> Response {
    super::error(e.http_status().as_u16(), e)
}

impl HttpStatus for TenantError {
    fn http_status(&self) -> StatusCode {
        match self {
            TenantError::Unknown(_) | TenantError::UnknownIdentity(_) => StatusCode::NOT_FOUND,
            TenantError::BadName(_) | TenantError::BadHost(_) | TenantError::BadAlias(_) => {
                StatusCode::BAD_REQUEST
            }
            TenantError::Index(_) | TenantError::Corrupt(..) => StatusCode::INTERNAL_SERVER_ERROR,
            TenantError::HostTaken { .. }
            | TenantError::Exists(_)
            | TenantError::Suspended(_)
            | TenantError::RepoQuota { .. }
            | TenantError::ByteQuota { .. }
            | TenantError::InventoryCap { .. }
            | TenantError::Denied { .. }
            | TenantError::AliasTaken { .. } => StatusCode::CONFLICT,
        }
    }
}

impl HttpStatus for ControlError {
    fn http_status(&self) -> StatusCode {
        match self {
            ControlError::Tenant(e) => e.http_status(),
            ControlError::Denied { .. } => StatusCode::CONFLICT,
            ControlError::Invalid(_) => StatusCode::BAD_REQUEST,
            ControlError::Purge { .. } | ControlError::Index(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

impl HttpStatus for IdentityError {
    fn http_status(&self) -> StatusCode {
        match self {
            IdentityError::BadName(_) => StatusCode::BAD_REQUEST,
            IdentityError::Exists(_) => StatusCode::CONFLICT,
            IdentityError::Start { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }
}
