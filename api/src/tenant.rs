//! Tenants: records, quotas, rate limits, hosts, deny lists, usage and declarative specs.

use serde::{Deserialize, Serialize};

use crate::Scope;

/// A tenant's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TenantState {
    #[default]
    Active,
    Suspended,
}

impl TenantState {
    pub fn as_str(self) -> &'static str {
        match self {
            TenantState::Active => "active",
            TenantState::Suspended => "suspended",
        }
    }
}

/// Limits; `None` (`null`) = unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quotas {
    #[serde(default)]
    pub repos: Option<u64>,
    #[serde(default)]
    pub bytes: Option<u64>,
    #[serde(default)]
    pub egress_bytes_per_day: Option<u64>,
}

/// HTTP rate limit; `None` (`null`) = unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    #[serde(default)]
    pub requests_per_second: Option<u32>,
    #[serde(default)]
    pub burst: Option<u32>,
}

/// Denied repositories and nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenyList {
    #[serde(default)]
    pub repos: Vec<String>,
    #[serde(default)]
    pub nodes: Vec<String>,
}

/// What a tenant uses now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub repos: u64,
    pub stored_bytes: u64,
    pub egress_today_bytes: u64,
}

/// A tenant as the API shows it (`GET /api/v1/tenants/{name}`, and the answer of every
/// change to one): the record, its usage, and per repository whether it owns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenant {
    pub name: String,
    pub state: TenantState,
    pub identity: String,
    pub hosts: Vec<String>,
    pub repos: Vec<TenantRepo>,
    pub follows: Vec<String>,
    pub deny: DenyList,
    pub quotas: Quotas,
    pub rate: Rate,
    /// Unix seconds.
    pub created_at: u64,
    pub usage: Usage,
}

/// One of a tenant's repositories.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRepo {
    pub rid: String,
    pub scope: Scope,
    pub alias: Option<String>,
    /// Whether this tenant owns the repository (first claimant).
    pub owner: bool,
}

/// A tenant as stored (in backups): no usage; claims carry their time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRecord {
    pub name: String,
    #[serde(default)]
    pub state: TenantState,
    #[serde(default = "default_identity")]
    pub identity: String,
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub repos: Vec<TenantRepoRecord>,
    #[serde(default)]
    pub follows: Vec<String>,
    #[serde(default)]
    pub deny: DenyList,
    #[serde(default)]
    pub quotas: Quotas,
    #[serde(default)]
    pub rate: Rate,
    #[serde(default)]
    pub created_at: u64,
}

fn default_identity() -> String {
    "default".to_owned()
}

/// A stored claim of a tenant on a repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRepoRecord {
    pub rid: String,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// When the claim was made (ms since the epoch): the oldest claim owns the repository.
    #[serde(default)]
    pub since: u64,
}

/// `GET /api/v1/tenants`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantList {
    pub tenants: Vec<Tenant>,
}

/// `POST /api/v1/tenants`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantCreate {
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotas: Option<Quotas>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
}

/// `DELETE /api/v1/tenants/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRemoved {
    pub name: String,
    pub removed: bool,
    /// Repositories no other tenant held, deleted from storage.
    pub purged: Vec<String>,
}

/// `PUT /api/v1/tenants/{name}/quota`: a value sets, `null` clears (unlimited), an absent key
/// keeps the old value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotasPatch {
    #[serde(
        default,
        deserialize_with = "crate::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub repos: Option<Option<u64>>,
    #[serde(
        default,
        deserialize_with = "crate::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub bytes: Option<Option<u64>>,
    #[serde(
        default,
        deserialize_with = "crate::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub egress_bytes_per_day: Option<Option<u64>>,
}

impl QuotasPatch {
    /// `old` with the keys that are present replaced.
    pub fn apply(self, old: Quotas) -> Quotas {
        Quotas {
            repos: self.repos.unwrap_or(old.repos),
            bytes: self.bytes.unwrap_or(old.bytes),
            egress_bytes_per_day: self
                .egress_bytes_per_day
                .unwrap_or(old.egress_bytes_per_day),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.repos.is_none() && self.bytes.is_none() && self.egress_bytes_per_day.is_none()
    }
}

/// `PUT /api/v1/tenants/{name}/rate`: like [`QuotasPatch`]; values above `u32::MAX` are
/// taken as `u32::MAX`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RatePatch {
    #[serde(
        default,
        deserialize_with = "crate::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub requests_per_second: Option<Option<u64>>,
    #[serde(
        default,
        deserialize_with = "crate::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub burst: Option<Option<u64>>,
}

impl RatePatch {
    /// `old` with the keys that are present replaced.
    pub fn apply(self, old: Rate) -> Rate {
        let clamp = |v: Option<u64>| v.map(|x| u32::try_from(x).unwrap_or(u32::MAX));
        Rate {
            requests_per_second: self
                .requests_per_second
                .map_or(old.requests_per_second, clamp),
            burst: self.burst.map_or(old.burst, clamp),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.requests_per_second.is_none() && self.burst.is_none()
    }
}

/// `POST /api/v1/tenants/{name}/hosts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRequest {
    pub host: String,
}

/// `GET /api/v1/deny`: the global list (`tenant` null) and every tenant's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenyEntries {
    pub repos: Vec<DenyRepoEntry>,
    pub nodes: Vec<DenyNodeEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenyRepoEntry {
    pub rid: String,
    pub tenant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenyNodeEntry {
    pub nid: String,
    pub tenant: Option<String>,
}

/// `POST /api/v1/deny/repos` (`rid`) and `/api/v1/deny/nodes` (`nid`); without `tenant`, the
/// operator's global list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenyRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// A repository deny-list change (`denied` false after a removal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenyRepoChange {
    pub rid: String,
    pub tenant: Option<String>,
    pub denied: bool,
}

/// A node deny-list change (`denied` false after a removal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenyNodeChange {
    pub nid: String,
    pub tenant: Option<String>,
    pub denied: bool,
}

/// `GET /api/v1/usage[?tenant=T]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageResponse {
    pub usage: Vec<TenantUsage>,
}

/// What one tenant uses against its quotas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantUsage {
    pub tenant: String,
    pub state: TenantState,
    pub identity: String,
    pub repos: u64,
    pub quota_repos: Option<u64>,
    pub stored_bytes: u64,
    pub quota_bytes: Option<u64>,
    pub egress_today_bytes: u64,
    pub quota_egress_bytes_per_day: Option<u64>,
}

/// A tenant as declared in `tenants.yaml` or the config file (`[[tenants]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TenantState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotas: Option<Quotas>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    #[serde(default)]
    pub repos: Vec<RepoSpec>,
    #[serde(default)]
    pub follows: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<DenyList>,
}

/// One repository of a [`TenantSpec`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoSpec {
    pub rid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_patch_tells_an_absent_key_from_null() {
        let p: QuotasPatch = serde_json::from_str(r#"{"repos": 5, "bytes": null}"#).unwrap();
        assert_eq!(p.repos, Some(Some(5)));
        assert_eq!(p.bytes, Some(None));
        assert_eq!(p.egress_bytes_per_day, None);
        let old = Quotas {
            repos: Some(1),
            bytes: Some(2),
            egress_bytes_per_day: Some(3),
        };
        assert_eq!(
            p.apply(old),
            Quotas {
                repos: Some(5),
                bytes: None,
                egress_bytes_per_day: Some(3),
            }
        );
        assert_eq!(
            serde_json::to_value(p).unwrap(),
            serde_json::json!({"repos": 5, "bytes": null})
        );
    }

    #[test]
    fn rate_values_above_u32_are_clamped() {
        let p: RatePatch = serde_json::from_str(r#"{"requests_per_second": 5000000000}"#).unwrap();
        let r = p.apply(Rate {
            requests_per_second: None,
            burst: Some(7),
        });
        assert_eq!(r.requests_per_second, Some(u32::MAX));
        assert_eq!(r.burst, Some(7));
    }
}
