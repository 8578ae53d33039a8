//! Repositories: the index's records, seeding, unseeding, purging and fetching.

use serde::{Deserialize, Serialize};

use crate::Scope;

/// `GET /api/v1/repos[?tenant=T][&limit=N][&after=C]`: one page, in RID order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReposResponse {
    pub repos: Vec<RepoRecord>,
    /// Cursor of the next page (pass it as `after`); `null` on the last page.
    #[serde(default)]
    pub next: Option<String>,
    /// Repositories in the whole listing (for a tenant: its claims), not only this page.
    #[serde(default)]
    pub total: usize,
}

/// What the index knows about one repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoRecord {
    pub rid: String,
    pub name: String,
    pub description: String,
    pub default_branch: String,
    pub delegates: Vec<String>,
    pub threshold: usize,
    pub visibility: Visibility,
    /// Identity COB head at top-level `refs/rad/id`.
    pub identity_head: String,
    /// Canonical default branch tip, if any.
    pub head: Option<String>,
    /// Hash over the repository's ref listing.
    pub fingerprint: String,
    pub ref_count: usize,
    /// Namespaces with valid signed refs.
    pub namespaces: Vec<String>,
    /// Unix seconds of the last (re)index.
    pub indexed_at: u64,
    /// The tenants that seed it (in the repository list only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants: Option<Vec<String>>,
}

/// Who may see a repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum Visibility {
    Public,
    Private {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        allow: Vec<String>,
    },
}

impl Visibility {
    pub fn label(&self) -> &'static str {
        match self {
            Visibility::Public => "public",
            Visibility::Private { .. } => "private",
        }
    }
}

/// `GET /api/v1/repos/{rid}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoResponse {
    pub repo: RepoRecord,
    pub sigrefs: Vec<Sigrefs>,
}

/// Verification outcome of one namespace's signed refs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sigrefs {
    pub nid: String,
    pub commit: Option<String>,
    pub level: Option<FeatureLevel>,
    /// `None` when verified; otherwise why verification failed.
    pub error: Option<String>,
}

/// Signed-refs feature level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureLevel {
    None,
    Root,
    Parent,
}

impl FeatureLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            FeatureLevel::None => "none",
            FeatureLevel::Root => "root",
            FeatureLevel::Parent => "parent",
        }
    }
}

/// `POST /api/v1/repos/{rid}/seed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedRequest {
    /// `all` or `followed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// `z6Mk…@host:port` (connect first) or `z6Mk…`: fetch from this peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Seed for this tenant (quota, deny list and inventory-cap checks; reference-counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The tenant's short alias for the repository (`https://<tenant host>/<alias>.git`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedResponse {
    pub rid: String,
    pub seeded: bool,
    pub tenant: Option<String>,
    /// Whether the tenant owns it (first claimant).
    pub owner: bool,
    /// Always `allow`.
    pub policy: String,
    pub scope: Scope,
    pub fetching_from: Option<String>,
}

/// `POST /api/v1/repos/{rid}/unseed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnseedRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnseedResponse {
    pub rid: String,
    /// False when it was not seeded (for that tenant).
    pub unseeded: bool,
    /// Nobody seeds it any more: deleted from storage.
    pub purged: bool,
}

/// `POST /api/v1/repos/{rid}/purge`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgeResponse {
    pub rid: String,
    pub purged: bool,
    /// The tenants it was removed from.
    pub tenants: Vec<String>,
}

/// `POST /api/v1/fetch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchRequest {
    pub rid: String,
    #[serde(default)]
    pub from: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchResponse {
    pub rid: String,
    pub from: String,
    /// The repository is new here.
    pub cloned: bool,
    /// Namespaces updated.
    pub updated: Vec<String>,
    /// Namespaces dropped.
    pub pruned: Vec<Pruned>,
    pub refs_written: usize,
}

/// A namespace a fetch dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pruned {
    pub nid: String,
    /// Metric label.
    pub reason: String,
    pub detail: String,
}
