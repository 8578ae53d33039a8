//! Operations: the fetch queue, identities, configuration reload, backup, restore and
//! declarative apply.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{NodePolicy, RepoPolicy, TenantRecord, TenantSpec};

/// `GET /api/v1/queue`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueResponse {
    pub active: Vec<QueueActive>,
    pub queued: Vec<QueueQueued>,
}

/// A fetch running for `seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueActive {
    pub rid: String,
    pub from: String,
    pub seconds: u64,
}

/// A fetch waiting for a slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueQueued {
    pub rid: String,
    pub from: String,
}

/// `GET /api/v1/identities`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentitiesResponse {
    pub identities: Vec<IdentityInfo>,
}

/// A node identity (`POST /api/v1/identities` answers the created one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityInfo {
    pub name: String,
    pub nid: String,
    pub listen: Vec<String>,
    pub external_addresses: Vec<String>,
    pub tenants: Vec<String>,
    /// Repositories announced by this identity.
    pub inventory: usize,
    /// Inventory cap (at most 2973, one inventory message).
    pub cap: usize,
}

/// `POST /api/v1/identities`, and an identity's definition in a backup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityCreate {
    pub name: String,
    pub listen: Vec<String>,
    #[serde(default)]
    pub external_addresses: Vec<String>,
    /// Inventory cap (≤ 2,973).
    #[serde(default)]
    pub inventory_cap: Option<usize>,
}

/// An identity's definition in a backup.
pub type BackupIdentity = IdentityCreate;

/// `POST /api/v1/config/reload`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadResponse {
    pub reloaded: bool,
    /// One line per setting that changed.
    pub changes: Vec<String>,
}

/// `GET /api/v1/backup` (and the body of `POST /api/v1/restore`): the state that cannot be
/// re-fetched. It holds private keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backup {
    pub version: u32,
    pub created_at: u64,
    pub nid: String,
    /// Identity name → OpenSSH private key file contents.
    #[serde(default)]
    pub keys: BTreeMap<String, String>,
    #[serde(default)]
    pub identities: Vec<BackupIdentity>,
    #[serde(default)]
    pub tenants: Vec<TenantRecord>,
    #[serde(default)]
    pub policies: PolicySet,
    /// `meta` entries (hex key → hex value), schema version excluded.
    #[serde(default)]
    pub meta: BTreeMap<String, String>,
}

/// The operator's explicit policies in a backup (each entry flat: `{rid, policy, scope}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySet {
    #[serde(default)]
    pub repos: Vec<BackupRepoPolicy>,
    #[serde(default)]
    pub nodes: Vec<BackupNodePolicy>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupRepoPolicy {
    pub rid: String,
    #[serde(flatten)]
    pub policy: RepoPolicy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupNodePolicy {
    pub nid: String,
    #[serde(flatten)]
    pub policy: NodePolicy,
}

/// `POST /api/v1/restore`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreResponse {
    pub restored: Restored,
    pub warnings: Vec<String>,
}

/// What an online restore brought into the index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restored {
    pub tenants: usize,
    pub policies: usize,
}

/// `POST /api/v1/apply`: make the tenants match `tenants`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyRequest {
    #[serde(default)]
    pub tenants: Vec<TenantSpec>,
    /// Remove tenants the spec does not name.
    #[serde(default)]
    pub prune: bool,
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyResponse {
    /// One line per change (made, or to be made on a dry run).
    pub changes: Vec<String>,
    pub applied: bool,
}
