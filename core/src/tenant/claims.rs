//! Claims on repositories: seeding and unseeding by tenants, the **owner rule** (the oldest
//! active claim decides the scope), and what a tenant's follows and deny lists mean for a
//! repository's namespaces.

use super::*;

impl Tenants {
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
        self.read()
            .owner(rid)
            .map(|(name, scope)| (name.clone(), scope))
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
        inner.owner(rid).map(|(_, scope)| scope)
    }

    /// Every repository held by an active tenant.
    pub fn seeded(&self) -> Vec<(RepoId, Scope)> {
        let inner = self.read();
        inner
            .claims
            .iter()
            .filter_map(|(rid, claims)| {
                claims
                    .iter()
                    .any(|(_, n)| inner.tenants.get(n).is_some_and(Tenant::active))
                    .then_some(())?;
                inner.owner(rid).map(|(_, scope)| (*rid, scope))
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
}
