//! HTTP status of domain errors in admin answers. The domain modules (`tenant`, `identity`)
//! know nothing of HTTP; the mapping lives here, at the edge.

use axum::http::StatusCode;

use crate::control::ControlError;
use seedd_core::maintain::MaintainError;
use seedd_core::tenant::TenantError;
use seedd_p2p::identity::IdentityError;

/// The status an admin answer carries for a domain error (the answer itself is a
/// [`super::failure::Failure`], made from the error with `?`).
pub(crate) trait HttpStatus: std::fmt::Display {
    fn http_status(&self) -> StatusCode;
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

impl HttpStatus for MaintainError {
    fn http_status(&self) -> StatusCode {
        match self {
            MaintainError::NotHeld(_) => StatusCode::NOT_FOUND,
            MaintainError::Measure { .. }
            | MaintainError::Index(_)
            | MaintainError::Storage(_)
            | MaintainError::Task(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}
