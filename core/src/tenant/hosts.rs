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
            .views
            .get(name)
            .is_some_and(|v| v.repos.contains_key(rid) && !v.denied.contains(rid))
    }

    /// The repositories a tenant's host may show ([`Tenants::shows`]): O(the tenant's).
    pub fn shown_repos(&self, name: &str) -> Vec<RepoId> {
        self.read()
            .views
            .get(name)
            .map(|v| {
                v.repos
                    .keys()
                    .filter(|rid| !v.denied.contains(rid))
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The repositories held only by suspended tenants ([`Tenants::only_suspended`]): O(the
    /// suspended tenants' repositories).
    pub fn suspended_only(&self) -> HashSet<RepoId> {
        let inner = self.read();
        inner
            .tenants
            .values()
            .filter(|t| !t.active())
            .filter_map(|t| inner.views.get(&t.name))
            .flat_map(|v| v.repos.keys())
            .filter(|rid| {
                inner.claims.get(rid).is_some_and(|c| {
                    c.iter()
                        .all(|(_, n)| inner.tenants.get(n).is_some_and(|t| !t.active()))
                })
            })
            .copied()
            .collect()
    }

    /// Whether a tenant holds a repository (`None`: no such tenant).
    pub fn holds(&self, name: &str, rid: &RepoId) -> Option<bool> {
        self.read()
            .views
            .get(name)
            .map(|v| v.repos.contains_key(rid))
    }

    /// The seed identity a tenant is placed on.
    pub fn identity_of(&self, name: &str) -> Option<String> {
        self.read().tenants.get(name).map(|t| t.identity.clone())
    }

    /// A tenant's explicit aliases, by repository.
    pub fn aliases(&self, name: &str) -> HashMap<RepoId, String> {
        self.read()
            .views
            .get(name)
            .map(|v| v.aliases.iter().map(|(a, rid)| (*rid, a.clone())).collect())
            .unwrap_or_default()
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
    /// if exactly one of its repositories without an explicit alias has it). O(1) in the
    /// tenant's repositories: its alias map, then the index's in-memory name map (only the
    /// repositories of that name are looked at).
    pub fn alias(&self, name: &str, alias: &str) -> Option<RepoId> {
        let inner = self.read();
        let v = inner.views.get(name)?;
        if let Some(rid) = v.aliases.get(alias) {
            return Some(*rid);
        }
        let named = self.index.repos_named(alias);
        let mut found = named
            .iter()
            .filter(|rid| v.repos.get(rid).is_some_and(|(_, aliased)| !aliased));
        match (found.next(), found.next()) {
            (Some(rid), None) => Some(*rid),
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
