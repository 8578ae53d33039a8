//! Seeding and follow policy (protocol.md §5.5): the configured default plus explicit per-repo
//! and per-node policies kept in the index, changed at runtime through the admin API.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use crate::index::policy::{NodePolicy, RepoPolicy, Scope};
use crate::index::{Index, IndexError};
use crate::tenant::Tenants;
use seedd_proto::crypto::{NodeId, RepoId};

/// The namespaces a fetch asks a peer for (stage 1 refspecs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceFilter {
    /// Every namespace except these.
    All { except: Vec<NodeId> },
    /// Only these.
    Only(Vec<NodeId>),
}

/// Policy lookups. Cheap to clone. Precedence for a repository: the operator's explicit policy
/// (a `block` is the global deny list), then tenants' claims (owner's scope while one claimant is
/// active), then the configured default (hot-reloadable), which in a fleet covers only the
/// repositories placed on this seed's shard.
#[derive(Clone)]
pub struct Policies {
    index: Index,
    default: Arc<RwLock<RepoPolicy>>,
    tenants: Option<Tenants>,
    /// `[fleet]`: the placement and this seed's shard; the default policy only reaches the
    /// repositories placed on it.
    fleet: Option<(crate::placement::Watched, Arc<str>)>,
    /// When [`Policies::sync_placement`] last re-read the file (ms since the epoch).
    placement_synced: Arc<std::sync::atomic::AtomicU64>,
}

impl Policies {
    /// `default` is `policy.default` / `policy.scope` from the config.
    pub fn new(index: Index, default_allow: bool, default_scope: Scope) -> Self {
        let default = if default_allow {
            RepoPolicy::Allow {
                scope: default_scope,
            }
        } else {
            RepoPolicy::Block
        };
        Self {
            index,
            default: Arc::new(RwLock::new(default)),
            tenants: None,
            fleet: None,
            placement_synced: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    /// In a fleet: the default policy seeds only what `placement` puts on `shard` (explicit
    /// operator and tenant policies still apply, so a move's copy can be seeded by hand).
    pub fn with_placement(mut self, placement: crate::placement::Watched, shard: &str) -> Self {
        self.fleet = Some((placement, Arc::from(shard)));
        self
    }

    /// Whether this seed's shard serves `rid` to readers: the placement puts it here (a copy a
    /// move is making, or one a finished move left until its purge, is not listed, so the
    /// fleet's merged listings and counts hold each repository once). Always, outside a fleet.
    pub fn served_here(&self, rid: &RepoId) -> bool {
        match &self.fleet {
            Some((placement, shard)) => placement.get().shard_of(rid).name == **shard,
            None => true,
        }
    }

    /// The front names the placement it merges under (`x-seedd-placement`): a seed that has
    /// not read that version yet re-reads the file now (at most every 20 ms, whoever asks),
    /// so a count merged right after a change counts each repository once.
    pub fn sync_placement(&self, version: &str) {
        let Some((placement, _)) = &self.fleet else {
            return;
        };
        if placement.get().version() == version {
            return;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let last = self
            .placement_synced
            .load(std::sync::atomic::Ordering::Relaxed);
        if now.saturating_sub(last) < 20
            || self
                .placement_synced
                .compare_exchange(
                    last,
                    now,
                    std::sync::atomic::Ordering::Relaxed,
                    std::sync::atomic::Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        if let Err(e) = placement.reload() {
            tracing::warn!(error = %e, "re-reading the placement for the front failed");
        }
    }

    /// The version of the placement in force (`None` outside a fleet).
    pub fn placement_version(&self) -> Option<String> {
        self.fleet
            .as_ref()
            .map(|(placement, _)| placement.get().version().to_owned())
    }

    /// Whether the placement puts `rid` on this seed's shard (always, outside a fleet).
    pub fn placed_here(&self, rid: &RepoId) -> bool {
        match &self.fleet {
            Some((placement, shard)) => placement.get().seeds(shard, rid),
            None => true,
        }
    }

    /// Consult tenants' claims too.
    pub fn with_tenants(mut self, tenants: Tenants) -> Self {
        self.tenants = Some(tenants);
        self
    }

    pub fn tenants(&self) -> Option<&Tenants> {
        self.tenants.as_ref()
    }

    /// The default policy (`policy.default`, `policy.scope`, as last reloaded).
    pub fn default_policy(&self) -> RepoPolicy {
        *self.default.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Replace the default policy (config reload).
    pub fn set_default(&self, allow: bool, scope: Scope) {
        *self.default.write().unwrap_or_else(|e| e.into_inner()) = if allow {
            RepoPolicy::Allow { scope }
        } else {
            RepoPolicy::Block
        };
    }

    /// The effective policy of a repository.
    pub fn repo(&self, rid: &RepoId) -> RepoPolicy {
        match self.index.repo_policy(rid) {
            Ok(Some(p)) => p,
            Ok(None) => match self.tenants.as_ref().and_then(|t| t.seeded_scope(rid)) {
                Some(scope) => RepoPolicy::Allow { scope },
                None if self.placed_here(rid) => self.default_policy(),
                None => RepoPolicy::Block,
            },
            Err(e) => {
                tracing::error!(%rid, error = %crate::logging::chain(&e), "reading repository policy failed; treating as blocked");
                RepoPolicy::Block
            }
        }
    }

    /// The scope a repository is seeded with, or `None` if it is not seeded.
    pub fn seeding(&self, rid: &RepoId) -> Option<Scope> {
        match self.repo(rid) {
            RepoPolicy::Allow { scope } => Some(scope),
            RepoPolicy::Block => None,
        }
    }

    /// Whether the default policy seeds every repository.
    pub fn seeds_by_default(&self) -> bool {
        matches!(self.default_policy(), RepoPolicy::Allow { .. })
    }

    /// Whether the operator denies a repository (explicit `block`).
    pub fn denied(&self, rid: &RepoId) -> bool {
        matches!(self.index.repo_policy(rid), Ok(Some(RepoPolicy::Block)))
    }

    /// Whether the operator seeds a repository itself (explicit `allow`).
    pub fn operator_seeds(&self, rid: &RepoId) -> bool {
        matches!(
            self.index.repo_policy(rid),
            Ok(Some(RepoPolicy::Allow { .. }))
        )
    }

    /// The most bytes a fetch of `rid` may bring before a tenant byte quota is exceeded.
    pub fn fetch_budget(&self, rid: &RepoId) -> Option<u64> {
        self.tenants.as_ref().and_then(|t| t.fetch_budget(rid))
    }

    pub fn node(&self, nid: &NodeId) -> Option<NodePolicy> {
        self.index.node_policy(nid).ok().flatten()
    }

    pub fn blocked(&self, nid: &NodeId) -> bool {
        matches!(self.node(nid), Some(NodePolicy::Block))
    }

    pub fn followed(&self, nid: &NodeId) -> bool {
        matches!(self.node(nid), Some(NodePolicy::Allow { .. }))
    }

    /// Whether namespace `nid` of repository `rid`, seeded with `scope`, is wanted: never a
    /// globally blocked node or one on the owner tenant's deny list; the owner's follows count
    /// as followed.
    pub fn wants_namespace(
        &self,
        rid: &RepoId,
        scope: Scope,
        nid: &NodeId,
        is_delegate: bool,
    ) -> bool {
        if self.blocked(nid) {
            return false;
        }
        match self
            .tenants
            .as_ref()
            .and_then(|t| t.wants_namespace(rid, nid))
        {
            Some(false) => return false,
            Some(true) => return true,
            None => {}
        }
        match scope {
            Scope::All => true,
            Scope::Followed => is_delegate || self.followed(nid),
        }
    }

    /// Which namespaces a fetch of `rid` asks for at all (the same rules as
    /// [`Self::wants_namespace`], as lists): with scope `all` every namespace but blocked
    /// nodes' (global block, owner tenant's deny list); with scope `followed` only `delegates`',
    /// followed nodes' and the owner tenant's follows — never a blocked one.
    pub fn namespace_filter(
        &self,
        rid: &RepoId,
        scope: Scope,
        delegates: &[NodeId],
    ) -> NamespaceFilter {
        let nodes = self.index.node_policies().unwrap_or_else(|e| {
            tracing::warn!(error = %crate::logging::chain(&e), "cannot read node policies; fetching without them");
            Vec::new()
        });
        let (deny, follows) = self
            .tenants
            .as_ref()
            .and_then(|t| t.namespace_lists(rid))
            .unwrap_or_default();
        let mut blocked: BTreeSet<NodeId> = deny.into_iter().collect();
        let mut followed: BTreeSet<NodeId> = follows.into_iter().collect();
        for (nid, p) in nodes {
            match p {
                NodePolicy::Block => blocked.insert(nid),
                NodePolicy::Allow { .. } => followed.insert(nid),
            };
        }
        match scope {
            Scope::All => NamespaceFilter::All {
                except: blocked.into_iter().collect(),
            },
            Scope::Followed => NamespaceFilter::Only(
                followed
                    .into_iter()
                    .chain(delegates.iter().copied())
                    .filter(|n| !blocked.contains(n))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect(),
            ),
        }
    }

    pub fn set_repo(&self, rid: &RepoId, p: Option<RepoPolicy>) -> Result<(), IndexError> {
        self.index.set_repo_policy(rid, p)
    }

    pub fn set_node(&self, nid: &NodeId, p: Option<NodePolicy>) -> Result<(), IndexError> {
        self.index.set_node_policy(nid, p)
    }

    /// Repositories with an explicit `allow` or held by an active tenant (not denied).
    pub fn explicitly_seeded(&self) -> Vec<(RepoId, Scope)> {
        let mut out: Vec<(RepoId, Scope)> = Vec::new();
        let mut denied = std::collections::HashSet::new();
        if let Ok((repos, _)) = self.index.policies() {
            for (rid, p) in repos {
                match p {
                    RepoPolicy::Allow { scope } => out.push((rid, scope)),
                    RepoPolicy::Block => {
                        denied.insert(rid);
                    }
                }
            }
        }
        if let Some(t) = &self.tenants {
            // A set, not a scan of `out` per repository: tens of thousands of claims.
            let mut listed: std::collections::HashSet<RepoId> =
                out.iter().map(|(r, _)| *r).collect();
            for (rid, scope) in t.seeded() {
                if !denied.contains(&rid) && listed.insert(rid) {
                    out.push((rid, scope));
                }
            }
        }
        out
    }

    pub fn index(&self) -> &Index {
        &self.index
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn namespace_filter_lists_what_wants_namespace_allows() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path()).unwrap();
        let p = Policies::new(index, true, Scope::All);
        let n = |b: u8| NodeId::from_bytes([b; 32]);
        let rid = RepoId::from_oid_bytes([7; 20]);
        p.set_node(&n(1), Some(NodePolicy::Block)).unwrap();
        p.set_node(&n(2), Some(NodePolicy::Allow { alias: None }))
            .unwrap();
        p.set_repo(&rid, Some(RepoPolicy::Allow { scope: Scope::All }))
            .unwrap();
        assert_eq!(
            p.namespace_filter(&rid, Scope::All, &[n(3)]),
            NamespaceFilter::All { except: vec![n(1)] }
        );
        // Followed: followed nodes and delegates, a blocked delegate never.
        assert_eq!(
            p.namespace_filter(&rid, Scope::Followed, &[n(3), n(1)]),
            NamespaceFilter::Only(vec![n(2), n(3)])
        );
        for (nid, delegate) in [(n(1), true), (n(2), false), (n(3), true), (n(4), false)] {
            let listed = match p.namespace_filter(&rid, Scope::Followed, &[n(3), n(1)]) {
                NamespaceFilter::Only(l) => l.contains(&nid),
                NamespaceFilter::All { .. } => unreachable!(),
            };
            assert_eq!(
                listed,
                p.wants_namespace(&rid, Scope::Followed, &nid, delegate),
                "{nid}"
            );
        }
    }
}
