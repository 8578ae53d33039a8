//! Every request and response body of the seedd admin API (`/api/v1`, described in
//! `docs/admin-api.yaml`). seedd serialises the responses and deserialises the requests;
//! `seedctl` does the reverse; `tests/tests/openapi.rs` checks them against the document.
//!
//! Serde types only (no RocksDB, no gix, no tokio): identifiers are strings (`z6Mk…` node ids,
//! `rad:z…` repository ids), checked where they are used. Limits are `Option<u64>`: `None`
//! (JSON `null`) is unlimited.
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

mod maintain;
mod node;
mod ops;
mod repo;
mod tenant;

pub use maintain::{
    MaintainResponse, MaintenanceEntry, MaintenanceResponse, MaintenanceRun, RepoDebt,
};
pub use node::{
    AdminStatus, Ban, BansResponse, ConnectRequest, ConnectResponse, DisconnectRequest,
    DisconnectResponse, HttpStatus, NodePolicy, NodePolicyEntry, NodePolicyRequest,
    NodePolicyResponse, NodeRecord, NodesResponse, P2pStatus, Peer, PeersResponse,
    PoliciesResponse, RepoCounts, RepoPolicy, RepoPolicyEntry, RescanRequest, Route,
    RoutingResponse, ScanReport, Scope, Status,
};
pub use ops::{
    ApplyRequest, ApplyResponse, Backup, BackupIdentity, BackupNodePolicy, BackupRepoPolicy,
    IdentitiesResponse, IdentityCreate, IdentityInfo, PolicySet, QueueActive, QueueQueued,
    QueueResponse, ReloadResponse, RestoreResponse, Restored,
};
pub use repo::{
    FeatureLevel, FetchRequest, FetchResponse, Pruned, PurgeResponse, RepoRecord, RepoResponse,
    ReposResponse, SeedRequest, SeedResponse, Sigrefs, UnseedRequest, UnseedResponse, Visibility,
};
pub use tenant::{
    DenyEntries, DenyList, DenyNodeChange, DenyNodeEntry, DenyRepoChange, DenyRepoEntry,
    DenyRequest, HostRequest, Quotas, QuotasPatch, Rate, RatePatch, RepoSpec, Tenant, TenantCreate,
    TenantList, TenantRecord, TenantRemoved, TenantRepo, TenantRepoRecord, TenantSpec, TenantState,
    TenantUsage, Usage, UsageResponse,
};

use serde::{Deserialize, Serialize};

/// Every error answer (4xx/5xx) of `/api/v1`: one clear line; a failed fetch adds its metric
/// label as `reason`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ErrorBody {
    pub fn new(error: impl std::fmt::Display) -> Self {
        Self {
            error: error.to_string(),
            reason: None,
        }
    }
}

/// `Some(value)` for a key that is present (even `null`), so that `Option<Option<T>>` tells
/// an absent key (`None`) from an explicit `null` (`Some(None)`).
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// Paged listings (`GET /api/v1/repos`, `/api/v1/routing`): `limit` rows per page unless the
/// query says otherwise, at most [`PAGE_MAX_LIMIT`] (a larger `limit` is lowered to it); the
/// answer's `next` is the `after` cursor of the next page, `null` on the last one.
pub const PAGE_DEFAULT_LIMIT: usize = 1000;
/// The largest page (see [`PAGE_DEFAULT_LIMIT`]).
pub const PAGE_MAX_LIMIT: usize = 10_000;
