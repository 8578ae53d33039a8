//! Tenants: organisations hosted on this seed (operators.md §3). A tenant has hostnames, a set of
//! seeded repositories with scope, follows, deny lists, quotas and rate limits, and is placed on
//! one seed identity. Storage is shared by RID: a repository claimed by several tenants is stored
//! and fetched once. **Owner rule**: the oldest claim owns a repository — its scope, follows and
//! node deny list decide what is fetched; when the owner lets go, the next-oldest claim owns it.
//! The registry here is in memory behind one lock and written through to the index (CF
//! `tenants`); side effects (purge, inventory, fetch) are in `control`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::index::policy::Scope;
use crate::index::tenants::Kind;
use crate::index::{Index, IndexError};
use crate::metrics::Metrics;
use seedd_proto::crypto::{NodeId, RepoId};

use crate::config::{valid_name, DEFAULT_IDENTITY, INVENTORY_LIMIT};
pub use crate::config::{DenyList, Quotas, Rate, State};

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
    /// Derived per-tenant maps (rebuilt when tenants change), so per-request lookups are O(1).
    views: HashMap<String, View>,
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

/// One tenant's repositories as maps: what a request on its host asks (held? denied? which
/// RID has this alias?) and its stored bytes, without walking its repository list.
#[derive(Debug, Default)]
struct View {
    /// Every repository held → its scope and whether it has an explicit alias (then it is not
    /// also found by name). The first entry of a RID in the tenant's list counts.
    repos: HashMap<RepoId, (Scope, bool)>,
    /// Explicit alias → repository (the first in list order when a restore recorded two).
    aliases: HashMap<String, RepoId>,
    denied: HashSet<RepoId>,
    /// Sum of the known sizes of `repos` (updated by [`Tenants::set_size`]).
    stored_bytes: u64,
}

impl View {
    fn of(t: &Tenant, sizes: &HashMap<RepoId, u64>) -> Self {
        let mut v = View {
            denied: t.deny.repos.iter().copied().collect(),
            ..View::default()
        };
        for r in &t.repos {
            if let Some(a) = &r.alias {
                v.aliases.entry(a.clone()).or_insert(r.rid);
            }
            if let std::collections::hash_map::Entry::Vacant(e) = v.repos.entry(r.rid) {
                e.insert((r.scope, r.alias.is_some()));
                v.stored_bytes = v
                    .stored_bytes
                    .saturating_add(sizes.get(&r.rid).copied().unwrap_or(0));
            }
        }
        v
    }

    fn scope(&self, rid: &RepoId) -> Option<Scope> {
        self.repos.get(rid).map(|(s, _)| *s)
    }
}

impl Inner {
    fn rebuild(&mut self) {
        self.hosts.clear();
        self.wildcards.clear();
        self.claims.clear();
        self.views.clear();
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
            self.views.insert(t.name.clone(), View::of(t, &self.sizes));
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

    fn stored_bytes(&self, name: &str) -> u64 {
        self.views.get(name).map_or(0, |v| v.stored_bytes)
    }

    fn egress_today(&self, name: &str) -> u64 {
        let e = self.egress.get(name).copied().unwrap_or_default();
        if e.day == today() {
            e.bytes
        } else {
            0
        }
    }

    fn usage(&self, t: &Tenant) -> Usage {
        Usage {
            repos: t.repos.len() as u64,
            stored_bytes: self.stored_bytes(&t.name),
            egress_today_bytes: self.egress_today(&t.name),
        }
    }

    /// The scope the owner (oldest claim) gave `rid`, and the owner's name.
    fn owner(&self, rid: &RepoId) -> Option<(&String, Scope)> {
        let (_, name) = self.claims.get(rid)?.first()?;
        Some((name, self.views.get(name)?.scope(rid)?))
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
            let t: Tenant = serde_json::from_slice(&bytes).map_err(|e| {
                TenantError::Corrupt(name.clone(), crate::logging::chain(&e).to_string())
            })?;
            inner.tenants.insert(name, t);
        }
        for (name, bytes) in index.tenant_records(Kind::Egress)? {
            if let Ok(e) = serde_json::from_slice::<Egress>(&bytes) {
                inner.egress.insert(name, e);
            }
        }
        // Sizes measured before (after fetches, at seeding, by rescans): the start trusts them
        // and walks only repositories it has no size for (`daemon::rescan`).
        inner.sizes = index.repo_sizes()?;
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
        let bytes = serde_json::to_vec(t).map_err(|e| {
            TenantError::Corrupt(t.name.clone(), crate::logging::chain(&e).to_string())
        })?;
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

mod claims;
mod hosts;
mod usage;
