//! Specs the configuration declares (`[[identities]]`, `[[tenants]]`) and the plain values they
//! are made of. The same types arrive through the admin API (`seedctl apply`, identity create).

use seedd_proto::crypto::{NodeId, RepoId};
use serde::{Deserialize, Serialize};

use super::values::Scope;

/// A secondary identity's definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentitySpec {
    pub name: String,
    pub listen: Vec<String>,
    #[serde(default)]
    pub external_addresses: Vec<String>,
    /// Inventory cap (≤ 2,973).
    #[serde(default)]
    pub inventory_cap: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum State {
    #[default]
    Active,
    Suspended,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Active => "active",
            State::Suspended => "suspended",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenyList {
    #[serde(default)]
    pub repos: Vec<RepoId>,
    #[serde(default)]
    pub nodes: Vec<NodeId>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quotas {
    #[serde(default)]
    pub repos: Option<u64>,
    #[serde(default)]
    pub bytes: Option<u64>,
    #[serde(default)]
    pub egress_bytes_per_day: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    #[serde(default)]
    pub requests_per_second: Option<u32>,
    #[serde(default)]
    pub burst: Option<u32>,
}

/// One repository of a declarative tenant spec.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct RepoSpec {
    pub rid: RepoId,
    #[serde(default)]
    pub scope: Option<Scope>,
    #[serde(default)]
    pub alias: Option<String>,
}

/// A tenant as declared in `tenants.yaml` / the config file (`[[tenants]]`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    pub name: String,
    #[serde(default)]
    pub state: Option<State>,
    #[serde(default)]
    pub identity: Option<String>,
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub quotas: Option<Quotas>,
    #[serde(default)]
    pub rate: Option<Rate>,
    #[serde(default)]
    pub repos: Vec<RepoSpec>,
    #[serde(default)]
    pub follows: Vec<NodeId>,
    #[serde(default)]
    pub deny: Option<DenyList>,
}
