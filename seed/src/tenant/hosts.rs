//! Virtual hosting: which tenant a hostname belongs to, which repositories it shows, aliases,
//! and which repositories each seed identity announces.

use super::*;

impl Tenants {
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

    /// The identities of the tenants claiming `rid` (empty: no tenant holds it).
    pub fn identities_of(&self, rid: &RepoId) -> BTreeSet<String> {
        let inner = self.read();
        inner
            .claims
            .get(rid)
            .into_iter()
            .flatten()
            .filter_map(|(_, n)| inner.tenants.get(n).map(|t| t.identity.clone()))
            .collect()
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
}
