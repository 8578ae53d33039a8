//! Tenants: organisations hosted on this seed (operators.md §3). A tenant has hostnames, a set of
//! seeded repositories with scope, follows, deny lists, quotas and rate limits, and is placed on
//! one seed identity. Storage is shared by RID: a repository claimed by several tenants is stored
//! and fetched once. **Owner rule**: the oldest claim owns a repository — its scope, follows and
//! node deny list decide what is fetched; when the owner lets go, the next-oldest claim owns it.
//! The registry here is in memory behind one lock and written through to the index (CF
//! `tenants`); side effects (purge, inventory, fetch) are in [`ops`].

pub mod ops;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::crypto::{NodeId, RepoId};
use crate::index::policy::Scope;
use crate::index::tenants::Kind;
use crate::index::{Index, IndexError};
use crate::metrics::Metrics;

/// The identity a tenant is placed on unless it names another.
pub const DEFAULT_IDENTITY: &str = "default";
/// The most repositories one inventory message can carry (`INVENTORY_LIMIT`).
pub const INVENTORY_LIMIT: usize = 2_973;

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRepo {
    pub rid: RepoId,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// When the claim was made (ms since the epoch): the oldest claim owns the repository.
    #[serde(default)]
    pub since: u64,
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenant {
    pub name: String,
    #[serde(default)]
    pub state: State,
    #[serde(default = "default_identity")]
    pub identity: String,
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub repos: Vec<TenantRepo>,
    #[serde(default)]
    pub follows: Vec<NodeId>,
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
    DEFAULT_IDENTITY.to_owned()
}

impl Tenant {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            state: State::Active,
            identity: default_identity(),
            hosts: Vec::new(),
            repos: Vec::new(),
            follows: Vec::new(),
            deny: DenyList::default(),
            quotas: Quotas::default(),
            rate: Rate::default(),
            created_at: now_ms() / 1000,
        }
    }

    pub fn holds(&self, rid: &RepoId) -> bool {
        self.repos.iter().any(|r| &r.rid == rid)
    }

    pub fn active(&self) -> bool {
        self.state == State::Active
    }
}

/// What a tenant uses now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub repos: u64,
    pub stored_bytes: u64,
    pub egress_today_bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum TenantError {
    #[error("no tenant named `{0}`: list them with `seedctl tenant ls`")]
    Unknown(String),
    #[error("tenant `{0}` already exists")]
    Exists(String),
    #[error(
        "invalid tenant name `{0}`: use 1-63 of a-z, 0-9 and `-`, starting with a letter or digit"
    )]
    BadName(String),
    #[error("invalid hostname `{0}`: use a DNS name, optionally `*.` followed by a domain")]
    BadHost(String),
    #[error("hostname `{host}` already belongs to tenant `{tenant}`")]
    HostTaken { host: String, tenant: String },
    #[error("no seed identity named `{0}`: list them with `seedctl identity ls`")]
    UnknownIdentity(String),
    #[error("tenant `{0}` is suspended: resume it first")]
    Suspended(String),
    #[error("tenant `{tenant}` is at its repository quota ({limit}): raise it with `seedctl quota set {tenant} --repos N`")]
    RepoQuota { tenant: String, limit: u64 },
    #[error("tenant `{tenant}` is at its storage quota ({used} of {limit} bytes): raise it with `seedctl quota set {tenant} --bytes N`")]
    ByteQuota {
        tenant: String,
        used: u64,
        limit: u64,
    },
    #[error("identity `{identity}` already announces {count} repositories (cap {cap}); place tenant `{tenant}` on another identity")]
    InventoryCap {
        identity: String,
        tenant: String,
        count: usize,
        cap: usize,
    },
    #[error("{rid} is on {whose} deny list")]
    Denied { rid: RepoId, whose: String },
    #[error("invalid alias `{0}`: use letters, digits, `.`, `_` and `-`")]
    BadAlias(String),
    #[error("alias `{alias}` of tenant `{tenant}` already names {rid}")]
    AliasTaken {
        tenant: String,
        alias: String,
        rid: RepoId,
    },
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("tenant record `{0}` is corrupt: {1}")]
    Corrupt(String, String),
}

impl TenantError {
    /// The quota a refusal is about (metrics).
    pub fn quota(&self) -> Option<&'static str> {
        match self {
            TenantError::RepoQuota { .. } => Some("repos"),
            TenantError::ByteQuota { .. } => Some("bytes"),
            _ => None,
        }
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn today() -> u64 {
    now_ms() / 86_400_000
}

pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// Lower-case a hostname and check it (labels of a-z0-9-, optional leading `*.`).
pub fn normalise_host(host: &str) -> Option<String> {
    let h = host.trim().trim_end_matches('.').to_ascii_lowercase();
    let body = h.strip_prefix("*.").unwrap_or(&h);
    let ok = !body.is_empty()
        && body.len() <= 253
        && body.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        });
    ok.then_some(h)
}

fn valid_alias(a: &str) -> bool {
    !a.is_empty()
        && a.len() <= 100
        && !a.starts_with('.')
        && a.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct Egress {
    day: u64,
    bytes: u64,
}

#[derive(Default)]
struct Inner {
    tenants: BTreeMap<String, Tenant>,
    /// Exact host → tenant.
    hosts: HashMap<String, String>,
    /// `*.suffix` → tenant, matched on the longest suffix.
    wildcards: Vec<(String, String)>,
    /// rid → (since, tenant) claims, oldest first.
    claims: HashMap<RepoId, Vec<(u64, String)>>,
    /// Bytes on disk per repository (updated after scans and fetches).
    sizes: HashMap<RepoId, u64>,
    egress: HashMap<String, Egress>,
    /// Identity name → inventory cap.
    identities: BTreeMap<String, usize>,
    /// Recently purged repositories (ms): a fetch that started before must not bring them back.
    purged: HashMap<RepoId, u64>,
}

impl Inner {
    fn rebuild(&mut self) {
        self.hosts.clear();
        self.wildcards.clear();
        self.claims.clear();
        for t in self.tenants.values() {
            for h in &t.hosts {
                match h.strip_prefix("*.") {
                    Some(suffix) => self.wildcards.push((suffix.to_owned(), t.name.clone())),
                    None => {
                        self.hosts.insert(h.clone(), t.name.clone());
                    }
                }
            }
            for r in &t.repos {
                self.claims
                    .entry(r.rid)
                    .or_default()
                    .push((r.since, t.name.clone()));
            }
        }
        self.wildcards
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        for c in self.claims.values_mut() {
            c.sort();
        }
    }

    fn host_owner(&self, host: &str) -> Option<&String> {
        if let Some(t) = self.hosts.get(host) {
            return Some(t);
        }
        self.wildcards.iter().find_map(|(suffix, t)| {
            host.strip_suffix(suffix.as_str())
                .filter(|rest| rest.ends_with('.') && rest.len() > 1)
                .map(|_| t)
        })
    }

    fn usage(&self, t: &Tenant) -> Usage {
        let e = self.egress.get(&t.name).copied().unwrap_or_default();
        Usage {
            repos: t.repos.len() as u64,
            stored_bytes: t
                .repos
                .iter()
                .map(|r| self.sizes.get(&r.rid).copied().unwrap_or(0))
                .sum(),
            egress_today_bytes: if e.day == today() { e.bytes } else { 0 },
        }
    }

    /// The repositories an identity announces (claims of tenants placed on it).
    fn identity_repos(&self, identity: &str) -> BTreeSet<RepoId> {
        self.tenants
            .values()
            .filter(|t| t.identity == identity)
            .flat_map(|t| t.repos.iter().map(|r| r.rid))
            .collect()
    }
}

/// The tenant registry. Cheap to clone.
#[derive(Clone)]
pub struct Tenants {
    inner: Arc<RwLock<Inner>>,
    index: Index,
    metrics: Arc<Metrics>,
}

/// What the HTTP layer needs to know about the tenant a hostname belongs to.
#[derive(Debug, Clone)]
pub struct HostTenant {
    pub name: String,
    pub active: bool,
    pub rate: Rate,
}

impl Tenants {
    /// Load every tenant from the index.
    pub fn load(index: Index, metrics: Arc<Metrics>) -> Result<Self, TenantError> {
        let mut inner = Inner::default();
        for (name, bytes) in index.tenant_records(Kind::Tenant)? {
            let t: Tenant = serde_json::from_slice(&bytes)
                .map_err(|e| TenantError::Corrupt(name.clone(), e.to_string()))?;
            inner.tenants.insert(name, t);
        }
        for (name, bytes) in index.tenant_records(Kind::Egress)? {
            if let Ok(e) = serde_json::from_slice::<Egress>(&bytes) {
                inner.egress.insert(name, e);
            }
        }
        inner
            .identities
            .insert(DEFAULT_IDENTITY.to_owned(), INVENTORY_LIMIT);
        inner.rebuild();
        let this = Self {
            inner: Arc::new(RwLock::new(inner)),
            index,
            metrics,
        };
        this.refresh_metrics();
        Ok(this)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn persist(&self, t: &Tenant) -> Result<(), TenantError> {
        let bytes = serde_json::to_vec(t)
            .map_err(|e| TenantError::Corrupt(t.name.clone(), e.to_string()))?;
        self.index
            .put_tenant_record(Kind::Tenant, &t.name, &bytes)?;
        Ok(())
    }

    /// Change one tenant under the lock: validate on a copy, persist, then publish.
    fn update<R>(
        &self,
        name: &str,
        f: impl FnOnce(&Inner, &mut Tenant) -> Result<R, TenantError>,
    ) -> Result<(Tenant, R), TenantError> {
        let mut inner = self.write();
        let mut t = inner
            .tenants
            .get(name)
            .cloned()
            .ok_or_else(|| TenantError::Unknown(name.to_owned()))?;
        let r = f(&inner, &mut t)?;
        self.persist(&t)?;
        inner.tenants.insert(name.to_owned(), t.clone());
        inner.rebuild();
        drop(inner);
        self.refresh_metrics();
        Ok((t, r))
    }

    /// Register a seed identity (name → inventory cap).
    pub fn set_identity(&self, name: &str, cap: usize) {
        self.write()
            .identities
            .insert(name.to_owned(), cap.min(INVENTORY_LIMIT));
    }

    pub fn identities(&self) -> BTreeMap<String, usize> {
        self.read().identities.clone()
    }

    pub fn list(&self) -> Vec<(Tenant, Usage)> {
        let inner = self.read();
        inner
            .tenants
            .values()
            .map(|t| (t.clone(), inner.usage(t)))
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<(Tenant, Usage)> {
        let inner = self.read();
        inner.tenants.get(name).map(|t| (t.clone(), inner.usage(t)))
    }

    pub fn is_empty(&self) -> bool {
        self.read().tenants.is_empty()
    }

    /// Create a tenant from a full record (hosts, identity, quotas, rate; repos are added with
    /// [`Tenants::seed`]).
    pub fn create(&self, mut t: Tenant) -> Result<Tenant, TenantError> {
        if !valid_name(&t.name) {
            return Err(TenantError::BadName(t.name));
        }
        let mut inner = self.write();
        if inner.tenants.contains_key(&t.name) {
            return Err(TenantError::Exists(t.name));
        }
        if !inner.identities.contains_key(&t.identity) {
            return Err(TenantError::UnknownIdentity(t.identity));
        }
        let mut hosts = Vec::new();
        for h in &t.hosts {
            let h = normalise_host(h).ok_or_else(|| TenantError::BadHost(h.clone()))?;
            if let Some(other) = host_taken(&inner, &h, &t.name) {
                return Err(TenantError::HostTaken {
                    host: h,
                    tenant: other,
                });
            }
            hosts.push(h);
        }
        hosts.sort();
        hosts.dedup();
        t.hosts = hosts;
        t.repos.clear();
        if t.created_at == 0 {
            t.created_at = now_ms() / 1000;
        }
        self.persist(&t)?;
        inner.tenants.insert(t.name.clone(), t.clone());
        inner.rebuild();
        drop(inner);
        self.refresh_metrics();
        tracing::info!(tenant = %t.name, "tenant created");
        Ok(t)
    }

    /// Create or overwrite a tenant as recorded (restore); no quota checks.
    pub fn replace(&self, t: Tenant) -> Result<(), TenantError> {
        if !valid_name(&t.name) {
            return Err(TenantError::BadName(t.name));
        }
        let mut inner = self.write();
        self.persist(&t)?;
        inner.tenants.insert(t.name.clone(), t);
        inner.rebuild();
        drop(inner);
        self.refresh_metrics();
        Ok(())
    }

    /// Remove a tenant; returns the repositories no tenant holds any more.
    pub fn remove(&self, name: &str) -> Result<Vec<RepoId>, TenantError> {
        let mut inner = self.write();
        let t = inner
            .tenants
            .remove(name)
            .ok_or_else(|| TenantError::Unknown(name.to_owned()))?;
        if let Err(e) = self.index.delete_tenant_records(name) {
            inner.tenants.insert(name.to_owned(), t);
            return Err(e.into());
        }
        inner.egress.remove(name);
        inner.rebuild();
        let released = t
            .repos
            .iter()
            .map(|r| r.rid)
            .filter(|rid| !inner.claims.contains_key(rid))
            .collect();
        drop(inner);
        self.metrics.tenant.forget(name);
        self.refresh_metrics();
        tracing::info!(tenant = %name, "tenant removed");
        Ok(released)
    }

    pub fn set_state(&self, name: &str, state: State) -> Result<Tenant, TenantError> {
        let (t, ()) = self.update(name, |_, t| {
            t.state = state;
            Ok(())
        })?;
        tracing::info!(tenant = %name, state = state.as_str(), "tenant state changed");
        Ok(t)
    }

    pub fn set_quotas(&self, name: &str, q: Quotas) -> Result<Tenant, TenantError> {
        Ok(self
            .update(name, |_, t| {
                t.quotas = q;
                Ok(())
            })?
            .0)
    }

    pub fn set_rate(&self, name: &str, r: Rate) -> Result<Tenant, TenantError> {
        Ok(self
            .update(name, |_, t| {
                t.rate = r;
                Ok(())
            })?
            .0)
    }

    pub fn set_identity_of(&self, name: &str, identity: &str) -> Result<Tenant, TenantError> {
        Ok(self
            .update(name, |inner, t| {
                let Some(cap) = inner.identities.get(identity).copied() else {
                    return Err(TenantError::UnknownIdentity(identity.to_owned()));
                };
                if t.identity != identity {
                    let mut held = inner.identity_repos(identity);
                    held.extend(t.repos.iter().map(|r| r.rid));
                    if held.len() > cap {
                        return Err(TenantError::InventoryCap {
                            identity: identity.to_owned(),
                            tenant: name.to_owned(),
                            count: held.len(),
                            cap,
                        });
                    }
                }
                t.identity = identity.to_owned();
                Ok(())
            })?
            .0)
    }

    pub fn add_host(&self, name: &str, host: &str) -> Result<Tenant, TenantError> {
        let h = normalise_host(host).ok_or_else(|| TenantError::BadHost(host.to_owned()))?;
        Ok(self
            .update(name, |inner, t| {
                if let Some(other) = host_taken(inner, &h, name) {
                    return Err(TenantError::HostTaken {
                        host: h.clone(),
                        tenant: other,
                    });
                }
                if !t.hosts.contains(&h) {
                    t.hosts.push(h.clone());
                    t.hosts.sort();
                }
                Ok(())
            })?
            .0)
    }

    pub fn remove_host(&self, name: &str, host: &str) -> Result<Tenant, TenantError> {
        let h = normalise_host(host).unwrap_or_else(|| host.to_ascii_lowercase());
        Ok(self
            .update(name, |_, t| {
                t.hosts.retain(|x| x != &h);
                Ok(())
            })?
            .0)
    }

    pub fn set_follow(&self, name: &str, nid: NodeId, follow: bool) -> Result<Tenant, TenantError> {
        Ok(self
            .update(name, |_, t| {
                t.follows.retain(|n| n != &nid);
                if follow {
                    t.follows.push(nid);
                }
                Ok(())
            })?
            .0)
    }

    pub fn deny_repo(&self, name: &str, rid: RepoId, deny: bool) -> Result<Tenant, TenantError> {
        Ok(self
            .update(name, |_, t| {
                t.deny.repos.retain(|r| r != &rid);
                if deny {
                    t.deny.repos.push(rid);
                }
                Ok(())
            })?
            .0)
    }

    pub fn deny_node(&self, name: &str, nid: NodeId, deny: bool) -> Result<Tenant, TenantError> {
        Ok(self
            .update(name, |_, t| {
                t.deny.nodes.retain(|n| n != &nid);
                if deny {
                    t.deny.nodes.push(nid);
                }
                Ok(())
            })?
            .0)
    }

    /// Claim a repository for a tenant, enforcing state, deny list, repository and byte
    /// quotas and the identity's inventory cap. `operator_default` are the repositories the
    /// default identity announces for the operator itself. Returns whether the tenant owns it.
    pub fn seed(
        &self,
        name: &str,
        rid: RepoId,
        scope: Scope,
        alias: Option<String>,
        operator_default: &BTreeSet<RepoId>,
    ) -> Result<bool, TenantError> {
        if let Some(a) = &alias {
            if !valid_alias(a) {
                return Err(TenantError::BadAlias(a.clone()));
            }
        }
        let result = self.update(name, |inner, t| {
            if !t.active() {
                return Err(TenantError::Suspended(name.to_owned()));
            }
            if t.deny.repos.contains(&rid) {
                return Err(TenantError::Denied {
                    rid,
                    whose: format!("tenant `{name}`'s"),
                });
            }
            if let Some(a) = &alias {
                if let Some(other) = t
                    .repos
                    .iter()
                    .find(|r| r.alias.as_deref() == Some(a) && r.rid != rid)
                {
                    return Err(TenantError::AliasTaken {
                        tenant: name.to_owned(),
                        alias: a.clone(),
                        rid: other.rid,
                    });
                }
            }
            if let Some(r) = t.repos.iter_mut().find(|r| r.rid == rid) {
                // Already held: update scope / alias.
                r.scope = scope;
                if alias.is_some() {
                    r.alias = alias.clone();
                }
            } else {
                let usage = inner.usage(t);
                if let Some(limit) = t.quotas.repos {
                    if usage.repos >= limit {
                        return Err(TenantError::RepoQuota {
                            tenant: name.to_owned(),
                            limit,
                        });
                    }
                }
                if let Some(limit) = t.quotas.bytes {
                    if usage.stored_bytes >= limit {
                        return Err(TenantError::ByteQuota {
                            tenant: name.to_owned(),
                            used: usage.stored_bytes,
                            limit,
                        });
                    }
                }
                let mut held = inner.identity_repos(&t.identity);
                if t.identity == DEFAULT_IDENTITY {
                    held.extend(operator_default.iter().copied());
                }
                let cap = inner
                    .identities
                    .get(&t.identity)
                    .copied()
                    .unwrap_or(INVENTORY_LIMIT);
                if !held.contains(&rid) && held.len() >= cap {
                    return Err(TenantError::InventoryCap {
                        identity: t.identity.clone(),
                        tenant: name.to_owned(),
                        count: held.len(),
                        cap,
                    });
                }
                t.repos.push(TenantRepo {
                    rid,
                    scope,
                    alias: alias.clone(),
                    since: now_ms(),
                });
            }
            Ok(())
        });
        match result {
            Ok(_) => Ok(self.owner(&rid).is_some_and(|(o, _)| o == name)),
            Err(e) => {
                if let Some(q) = e.quota() {
                    self.metrics
                        .tenant
                        .quota_exceeded
                        .with_label_values(&[name, q])
                        .inc();
                }
                Err(e)
            }
        }
    }

    /// Let go of a repository; returns whether no tenant holds it any more.
    pub fn unseed(&self, name: &str, rid: &RepoId) -> Result<bool, TenantError> {
        self.update(name, |_, t| {
            t.repos.retain(|r| &r.rid != rid);
            Ok(())
        })?;
        Ok(!self.read().claims.contains_key(rid))
    }

    /// Drop every tenant's claim on a repository (purge); returns who held it.
    pub fn release_all(&self, rid: &RepoId) -> Result<Vec<String>, TenantError> {
        let holders = self.claimants(rid);
        for name in &holders {
            self.unseed(name, rid)?;
        }
        Ok(holders)
    }

    /// Tenants holding a repository, oldest claim first.
    pub fn claimants(&self, rid: &RepoId) -> Vec<String> {
        self.read()
            .claims
            .get(rid)
            .map(|c| c.iter().map(|(_, n)| n.clone()).collect())
            .unwrap_or_default()
    }

    /// The owner of a repository and its scope.
    pub fn owner(&self, rid: &RepoId) -> Option<(String, Scope)> {
        let inner = self.read();
        let (_, name) = inner.claims.get(rid)?.first()?;
        let t = inner.tenants.get(name)?;
        let r = t.repos.iter().find(|r| &r.rid == rid)?;
        Some((name.clone(), r.scope))
    }

    /// The scope a repository is seeded with because of tenants: the owner's, as long as one
    /// claimant is active (a repository only suspended tenants hold is not fetched).
    pub fn seeded_scope(&self, rid: &RepoId) -> Option<Scope> {
        let inner = self.read();
        let claims = inner.claims.get(rid)?;
        if !claims
            .iter()
            .any(|(_, n)| inner.tenants.get(n).is_some_and(Tenant::active))
        {
            return None;
        }
        let (_, owner) = claims.first()?;
        let t = inner.tenants.get(owner)?;
        t.repos.iter().find(|r| &r.rid == rid).map(|r| r.scope)
    }

    /// Every repository held by an active tenant.
    pub fn seeded(&self) -> Vec<(RepoId, Scope)> {
        let inner = self.read();
        inner
            .claims
            .keys()
            .filter_map(|rid| {
                let claims = inner.claims.get(rid)?;
                claims
                    .iter()
                    .any(|(_, n)| inner.tenants.get(n).is_some_and(Tenant::active))
                    .then_some(())?;
                let (_, owner) = claims.first()?;
                let t = inner.tenants.get(owner)?;
                t.repos
                    .iter()
                    .find(|r| &r.rid == rid)
                    .map(|r| (*rid, r.scope))
            })
            .collect()
    }

    /// The owner's say on a namespace: `Some(false)` if on its node deny list, `Some(true)`
    /// if it follows the node, `None` if it has no opinion.
    pub fn wants_namespace(&self, rid: &RepoId, nid: &NodeId) -> Option<bool> {
        let inner = self.read();
        let (_, owner) = inner.claims.get(rid)?.first()?;
        let t = inner.tenants.get(owner)?;
        if t.deny.nodes.contains(nid) {
            Some(false)
        } else if t.follows.contains(nid) {
            Some(true)
        } else {
            None
        }
    }

    /// The owner tenant's node deny list and follows for `rid` (what [`Self::wants_namespace`]
    /// consults), if a tenant owns it.
    pub fn namespace_lists(&self, rid: &RepoId) -> Option<(Vec<NodeId>, Vec<NodeId>)> {
        let inner = self.read();
        let (_, owner) = inner.claims.get(rid)?.first()?;
        let t = inner.tenants.get(owner)?;
        Some((t.deny.nodes.clone(), t.follows.clone()))
    }

    /// The tenant a `Host` header names (port stripped, case-insensitive).
    pub fn by_host(&self, host: &str) -> Option<HostTenant> {
        let host = host.trim().to_ascii_lowercase();
        let host = strip_port(&host);
        let inner = self.read();
        let name = inner.host_owner(host.trim_end_matches('.'))?;
        let t = inner.tenants.get(name)?;
        Some(HostTenant {
            name: t.name.clone(),
            active: t.active(),
            rate: t.rate,
        })
    }

    /// Whether a tenant's host may show a repository: held by it and not on its deny list.
    pub fn shows(&self, name: &str, rid: &RepoId) -> bool {
        self.read()
            .tenants
            .get(name)
            .is_some_and(|t| t.holds(rid) && !t.deny.repos.contains(rid))
    }

    /// Whether only suspended tenants hold a repository (then nobody serves it).
    pub fn only_suspended(&self, rid: &RepoId) -> bool {
        let inner = self.read();
        inner.claims.get(rid).is_some_and(|c| {
            c.iter()
                .all(|(_, n)| inner.tenants.get(n).is_some_and(|t| !t.active()))
        })
    }

    /// A tenant's short alias → repository (explicit aliases first, then the repository name
    /// if exactly one of its repositories has it).
    pub fn alias(
        &self,
        name: &str,
        alias: &str,
        repo_name: impl Fn(&RepoId) -> Option<String>,
    ) -> Option<RepoId> {
        let inner = self.read();
        let t = inner.tenants.get(name)?;
        if let Some(r) = t.repos.iter().find(|r| r.alias.as_deref() == Some(alias)) {
            return Some(r.rid);
        }
        let mut found = t
            .repos
            .iter()
            .filter(|r| r.alias.is_none() && repo_name(&r.rid).as_deref() == Some(alias));
        match (found.next(), found.next()) {
            (Some(r), None) => Some(r.rid),
            _ => None,
        }
    }

    /// The repositories a seed identity announces because of tenants placed on it.
    pub fn identity_repos(&self, identity: &str) -> BTreeSet<RepoId> {
        self.read().identity_repos(identity)
    }

    /// Repositories held only by tenants on other (dedicated) identities.
    pub fn dedicated_only(&self) -> BTreeSet<RepoId> {
        let inner = self.read();
        inner
            .claims
            .iter()
            .filter(|(_, c)| {
                c.iter().all(|(_, n)| {
                    inner
                        .tenants
                        .get(n)
                        .is_some_and(|t| t.identity != DEFAULT_IDENTITY)
                })
            })
            .map(|(rid, _)| *rid)
            .collect()
    }

    /// The most bytes a fetch of `rid` may add before a claimant's byte quota is exceeded
    /// (`None`: no quota applies).
    pub fn fetch_budget(&self, rid: &RepoId) -> Option<u64> {
        let inner = self.read();
        let claims = inner.claims.get(rid)?;
        claims
            .iter()
            .filter_map(|(_, n)| {
                let t = inner.tenants.get(n)?;
                let limit = t.quotas.bytes?;
                Some(limit.saturating_sub(inner.usage(t).stored_bytes))
            })
            .min()
    }

    /// Count a fetch refused or stopped by a byte quota against the claimants that have one.
    pub fn note_byte_quota(&self, rid: &RepoId) {
        let inner = self.read();
        for (_, n) in inner.claims.get(rid).into_iter().flatten() {
            if inner
                .tenants
                .get(n)
                .is_some_and(|t| t.quotas.bytes.is_some())
            {
                self.metrics
                    .tenant
                    .quota_exceeded
                    .with_label_values(&[n.as_str(), "bytes"])
                    .inc();
            }
        }
    }

    /// Record a purge (fetches that started earlier discard their clone).
    pub fn note_purged(&self, rid: RepoId) {
        let now = now_ms();
        let mut inner = self.write();
        inner
            .purged
            .retain(|_, t| now.saturating_sub(*t) < 3_600_000);
        inner.purged.insert(rid, now);
    }

    /// Whether `rid` was purged at or after `since` (ms).
    pub fn purged_since(&self, rid: &RepoId, since: u64) -> bool {
        self.read().purged.get(rid).is_some_and(|t| *t >= since)
    }

    pub fn set_size(&self, rid: RepoId, bytes: Option<u64>) {
        let mut inner = self.write();
        match bytes {
            Some(b) => inner.sizes.insert(rid, b),
            None => inner.sizes.remove(&rid),
        };
    }

    /// Egress: who pays for bytes served of `rid` — the host's tenant if given, else the
    /// repository's owner.
    pub fn payer(&self, host_tenant: Option<&str>, rid: &RepoId) -> Option<String> {
        match host_tenant {
            Some(t) => Some(t.to_owned()),
            None => self.owner(rid).map(|(o, _)| o),
        }
    }

    pub fn add_egress(&self, tenant: &str, transport: &str, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut inner = self.write();
        if !inner.tenants.contains_key(tenant) {
            return;
        }
        let day = today();
        let e = inner.egress.entry(tenant.to_owned()).or_default();
        if e.day != day {
            *e = Egress { day, bytes: 0 };
        }
        e.bytes = e.bytes.saturating_add(bytes);
        drop(inner);
        self.metrics
            .tenant
            .egress_bytes
            .with_label_values(&[tenant, transport])
            .inc_by(bytes);
    }

    /// If the tenant used up today's egress quota: seconds until it resets (UTC midnight).
    pub fn egress_exhausted(&self, tenant: &str) -> Option<u64> {
        let inner = self.read();
        let t = inner.tenants.get(tenant)?;
        let limit = t.quotas.egress_bytes_per_day?;
        if inner.usage(t).egress_today_bytes < limit {
            return None;
        }
        drop(inner);
        self.metrics
            .tenant
            .quota_exceeded
            .with_label_values(&[tenant, "egress"])
            .inc();
        let ms = now_ms();
        Some((86_400_000 - ms % 86_400_000).div_ceil(1000))
    }

    /// Persist egress counters (called periodically and at shutdown).
    pub fn flush_egress(&self) {
        let egress: Vec<(String, Egress)> = self
            .read()
            .egress
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        // One synced write for all tenants (not one fsync per tenant every 15 s).
        let records: Vec<(String, Vec<u8>)> = egress
            .into_iter()
            .filter_map(|(name, e)| serde_json::to_vec(&e).ok().map(|b| (name, b)))
            .collect();
        if records.is_empty() {
            return;
        }
        if let Err(err) = self.index.put_tenant_records(Kind::Egress, &records) {
            tracing::warn!(tenants = records.len(), error = %err, "saving egress counters failed; they are saved again in 15 s");
        }
    }

    pub fn count_request(&self, tenant: &str, status: u16) {
        let class = match status {
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        self.metrics
            .tenant
            .http_requests
            .with_label_values(&[tenant, class])
            .inc();
    }

    pub fn count_rate_limited(&self, tenant: &str) {
        self.metrics
            .tenant
            .rate_limited
            .with_label_values(&[tenant])
            .inc();
    }

    /// Recompute the per-tenant gauges.
    pub fn refresh_metrics(&self) {
        let inner = self.read();
        let m = &self.metrics.tenant;
        let active = inner.tenants.values().filter(|t| t.active()).count();
        m.tenants.with_label_values(&["active"]).set(active as i64);
        m.tenants
            .with_label_values(&["suspended"])
            .set((inner.tenants.len() - active) as i64);
        for t in inner.tenants.values() {
            let u = inner.usage(t);
            let n = t.name.as_str();
            m.init_tenant(n);
            m.repos.with_label_values(&[n]).set(u.repos as i64);
            m.stored_bytes
                .with_label_values(&[n])
                .set(i64::try_from(u.stored_bytes).unwrap_or(i64::MAX));
            for (q, used, limit) in [
                ("repos", u.repos, t.quotas.repos),
                ("bytes", u.stored_bytes, t.quotas.bytes),
                (
                    "egress",
                    u.egress_today_bytes,
                    t.quotas.egress_bytes_per_day,
                ),
            ] {
                match limit {
                    Some(l) if l > 0 => m
                        .quota_usage
                        .with_label_values(&[n, q])
                        .set(used as f64 / l as f64),
                    Some(_) => m.quota_usage.with_label_values(&[n, q]).set(1.0),
                    None => {
                        let _ = m.quota_usage.remove_label_values(&[n, q]);
                    }
                }
            }
        }
    }
}

fn host_taken(inner: &Inner, host: &str, me: &str) -> Option<String> {
    inner
        .tenants
        .values()
        .find(|t| t.name != me && t.hosts.iter().any(|h| h == host))
        .map(|t| t.name.clone())
}

/// `host:port` / `[v6]:port` → host.
fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|c| c.is_ascii_digit()) && !h.contains(':') => h,
        _ => host,
    }
}

/// Bytes on disk under a directory (files only; symlinks not followed).
pub fn dir_size(path: &std::path::Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(ft) if ft.is_dir() => stack.push(e.path()),
                Ok(ft) if ft.is_file() => {
                    total = total.saturating_add(e.metadata().map(|m| m.len()).unwrap_or(0))
                }
                _ => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests;
