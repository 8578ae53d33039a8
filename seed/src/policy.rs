//! Seeding and follow policy (protocol.md §5.5): the configured default plus explicit per-repo
//! and per-node policies kept in the index, changed at runtime through the admin API.

use crate::crypto::{NodeId, RepoId};
use crate::index::policy::{NodePolicy, RepoPolicy, Scope};
use crate::index::{Index, IndexError};

/// Policy lookups. Cheap to clone.
#[derive(Clone)]
pub struct Policies {
    index: Index,
    default: RepoPolicy,
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
        Self { index, default }
    }

    /// The effective policy of a repository.
    pub fn repo(&self, rid: &RepoId) -> RepoPolicy {
        match self.index.repo_policy(rid) {
            Ok(Some(p)) => p,
            Ok(None) => self.default,
            Err(e) => {
                tracing::error!(%rid, error = %e, "reading repository policy failed; treating as blocked");
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
        matches!(self.default, RepoPolicy::Allow { .. })
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

    /// Whether namespace `nid` of a repository seeded with `scope` is wanted.
    pub fn wants_namespace(&self, scope: Scope, nid: &NodeId, is_delegate: bool) -> bool {
        if self.blocked(nid) {
            return false;
        }
        match scope {
            Scope::All => true,
            Scope::Followed => is_delegate || self.followed(nid),
        }
    }

    pub fn set_repo(&self, rid: &RepoId, p: Option<RepoPolicy>) -> Result<(), IndexError> {
        self.index.set_repo_policy(rid, p)
    }

    pub fn set_node(&self, nid: &NodeId, p: Option<NodePolicy>) -> Result<(), IndexError> {
        self.index.set_node_policy(nid, p)
    }

    /// Repositories with an explicit `allow`.
    pub fn explicitly_seeded(&self) -> Vec<(RepoId, Scope)> {
        match self.index.policies() {
            Ok((repos, _)) => repos
                .into_iter()
                .filter_map(|(rid, p)| match p {
                    RepoPolicy::Allow { scope } => Some((rid, scope)),
                    RepoPolicy::Block => None,
                })
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    pub fn index(&self) -> &Index {
        &self.index
    }
}
