//! Seeding and follow policies in RocksDB (CF `policies`): `repo/` ‖ rid (20) and
//! `node/` ‖ nid (32) → JSON.

use rocksdb::{IteratorMode, ReadOptions};
use serde::{Deserialize, Serialize};

use super::{Index, IndexError};
use seedd_proto::crypto::{NodeId, RepoId};

pub(crate) const CF_POLICIES: &str = "policies";

pub use crate::config::Scope;

/// A repository's seeding policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "lowercase")]
pub enum RepoPolicy {
    Allow { scope: Scope },
    Block,
}

/// A node's follow policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "lowercase")]
pub enum NodePolicy {
    /// Followed (its namespaces are fetched with scope `followed`).
    Allow {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alias: Option<String>,
    },
    /// Blocked: disconnected, never fetched from, its namespaces never written.
    Block,
}

fn repo_key(rid: &RepoId) -> Vec<u8> {
    [b"repo/".as_slice(), rid.as_bytes()].concat()
}

fn node_key(nid: &NodeId) -> Vec<u8> {
    [b"node/".as_slice(), nid.as_bytes()].concat()
}

fn corrupt(e: impl std::error::Error) -> IndexError {
    IndexError::Corrupt {
        cf: CF_POLICIES,
        key: None,
        reason: crate::logging::chain(&e).to_string(),
    }
}

impl Index {
    pub fn repo_policy(&self, rid: &RepoId) -> Result<Option<RepoPolicy>, IndexError> {
        match self
            .db
            .get_pinned_cf(self.cf(CF_POLICIES)?, repo_key(rid))?
        {
            Some(v) => Ok(Some(serde_json::from_slice(&v).map_err(corrupt)?)),
            None => Ok(None),
        }
    }

    pub fn set_repo_policy(&self, rid: &RepoId, p: Option<RepoPolicy>) -> Result<(), IndexError> {
        // Under the census lock: a `block` takes the repository out of the web listing.
        let mut census = self.census();
        match p {
            Some(p) => self.put(
                CF_POLICIES,
                repo_key(rid),
                serde_json::to_vec(&p).map_err(corrupt)?,
            )?,
            None => self.delete(CF_POLICIES, repo_key(rid))?,
        }
        census.set_denied(*rid, p == Some(RepoPolicy::Block));
        Ok(())
    }

    /// Repositories with an explicit `block` policy.
    pub(super) fn blocked_repos(&self) -> Result<Vec<RepoId>, IndexError> {
        Ok(self
            .policies()?
            .0
            .into_iter()
            .filter(|(_, p)| *p == RepoPolicy::Block)
            .map(|(rid, _)| rid)
            .collect())
    }

    pub fn node_policy(&self, nid: &NodeId) -> Result<Option<NodePolicy>, IndexError> {
        match self
            .db
            .get_pinned_cf(self.cf(CF_POLICIES)?, node_key(nid))?
        {
            Some(v) => Ok(Some(serde_json::from_slice(&v).map_err(corrupt)?)),
            None => Ok(None),
        }
    }

    pub fn set_node_policy(&self, nid: &NodeId, p: Option<NodePolicy>) -> Result<(), IndexError> {
        match p {
            Some(p) => self.put(
                CF_POLICIES,
                node_key(nid),
                serde_json::to_vec(&p).map_err(corrupt)?,
            ),
            None => self.delete(CF_POLICIES, node_key(nid)),
        }
    }

    /// Every explicit node policy (a prefix scan: repository policies are not read).
    pub fn node_policies(&self) -> Result<Vec<(NodeId, NodePolicy)>, IndexError> {
        let mut opts = ReadOptions::default();
        opts.set_total_order_seek(true);
        let mut nodes = Vec::new();
        let from = IteratorMode::From(b"node/", rocksdb::Direction::Forward);
        for item in self.db.iterator_cf_opt(self.cf(CF_POLICIES)?, opts, from) {
            let (k, v) = item?;
            let Some(nid) = k.strip_prefix(b"node/") else {
                break;
            };
            let Ok(nid) = <[u8; 32]>::try_from(nid) else {
                continue;
            };
            nodes.push((
                NodeId::from_bytes(nid),
                serde_json::from_slice(&v).map_err(corrupt)?,
            ));
        }
        Ok(nodes)
    }

    /// Up to `limit` explicit policies after `after`, in key order (node policies, then
    /// repository policies, each by id), and the cursor of the next page. Reads the page only.
    pub fn policies_page(
        &self,
        after: Option<PolicyCursor>,
        limit: usize,
    ) -> Result<PoliciesPage, IndexError> {
        let mut opts = ReadOptions::default();
        opts.set_total_order_seek(true);
        let after_key = after.map(|c| c.key());
        let mode = match &after_key {
            Some(k) => IteratorMode::From(k, rocksdb::Direction::Forward),
            None => IteratorMode::Start,
        };
        let mut page = PoliciesPage::default();
        let mut taken = 0usize;
        let mut last = None;
        for item in self.db.iterator_cf_opt(self.cf(CF_POLICIES)?, opts, mode) {
            let (k, v) = item?;
            if after_key.as_deref() == Some(&*k) {
                continue;
            }
            let cursor = if let Some(rid) = k.strip_prefix(b"repo/") {
                let Ok(rid) = <[u8; 20]>::try_from(rid) else {
                    continue;
                };
                PolicyCursor::Repo(RepoId::from_oid_bytes(rid))
            } else if let Some(nid) = k.strip_prefix(b"node/") {
                let Ok(nid) = <[u8; 32]>::try_from(nid) else {
                    continue;
                };
                PolicyCursor::Node(NodeId::from_bytes(nid))
            } else {
                continue;
            };
            if taken == limit {
                page.next = last;
                return Ok(page);
            }
            match cursor {
                PolicyCursor::Repo(rid) => page
                    .repos
                    .push((rid, serde_json::from_slice(&v).map_err(corrupt)?)),
                PolicyCursor::Node(nid) => page
                    .nodes
                    .push((nid, serde_json::from_slice(&v).map_err(corrupt)?)),
            }
            taken += 1;
            last = Some(cursor);
        }
        Ok(page)
    }

    /// Every explicit policy.
    #[allow(clippy::type_complexity)]
    pub fn policies(
        &self,
    ) -> Result<(Vec<(RepoId, RepoPolicy)>, Vec<(NodeId, NodePolicy)>), IndexError> {
        let mut opts = ReadOptions::default();
        opts.set_total_order_seek(true);
        let mut repos = Vec::new();
        let mut nodes = Vec::new();
        for item in self
            .db
            .iterator_cf_opt(self.cf(CF_POLICIES)?, opts, IteratorMode::Start)
        {
            let (k, v) = item?;
            if let Some(rid) = k.strip_prefix(b"repo/") {
                let Ok(rid) = <[u8; 20]>::try_from(rid) else {
                    continue;
                };
                repos.push((
                    RepoId::from_oid_bytes(rid),
                    serde_json::from_slice(&v).map_err(corrupt)?,
                ));
            } else if let Some(nid) = k.strip_prefix(b"node/") {
                let Ok(nid) = <[u8; 32]>::try_from(nid) else {
                    continue;
                };
                nodes.push((
                    NodeId::from_bytes(nid),
                    serde_json::from_slice(&v).map_err(corrupt)?,
                ));
            }
        }
        Ok((repos, nodes))
    }
}

/// Where a page of policies ends (`node/<nid>` or `repo/<rid>` on the admin API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyCursor {
    Node(NodeId),
    Repo(RepoId),
}

impl PolicyCursor {
    fn key(&self) -> Vec<u8> {
        match self {
            PolicyCursor::Node(nid) => [b"node/".as_slice(), nid.as_bytes()].concat(),
            PolicyCursor::Repo(rid) => [b"repo/".as_slice(), rid.as_bytes()].concat(),
        }
    }
}

/// One page of explicit policies.
#[derive(Debug, Default)]
pub struct PoliciesPage {
    pub repos: Vec<(RepoId, RepoPolicy)>,
    pub nodes: Vec<(NodeId, NodePolicy)>,
    /// The last entry of this page when more follow.
    pub next: Option<PolicyCursor>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_come_in_pages_that_cover_them_once() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path()).unwrap();
        for b in 0..7u8 {
            index
                .set_node_policy(&NodeId::from_bytes([b; 32]), Some(NodePolicy::Block))
                .unwrap();
        }
        for b in 0..5u8 {
            index
                .set_repo_policy(
                    &RepoId::from_oid_bytes([b; 20]),
                    Some(RepoPolicy::Allow { scope: Scope::All }),
                )
                .unwrap();
        }
        let (mut repos, mut nodes, mut pages) = (Vec::new(), Vec::new(), 0);
        let mut after = None;
        loop {
            let page = index.policies_page(after, 3).unwrap();
            assert!(page.repos.len() + page.nodes.len() <= 3);
            repos.extend(page.repos.into_iter().map(|r| r.0));
            nodes.extend(page.nodes.into_iter().map(|n| n.0));
            pages += 1;
            match page.next {
                Some(c) => after = Some(c),
                None => break,
            }
        }
        assert_eq!(pages, 4, "12 policies, 3 a page");
        assert_eq!(
            nodes,
            (0..7u8)
                .map(|b| NodeId::from_bytes([b; 32]))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            repos,
            (0..5u8)
                .map(|b| RepoId::from_oid_bytes([b; 20]))
                .collect::<Vec<_>>()
        );
        let (all_repos, all_nodes) = index.policies().unwrap();
        assert_eq!((all_repos.len(), all_nodes.len()), (5, 7));
    }

    #[test]
    fn policies_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path()).unwrap();
        let rid = RepoId::from_oid_bytes([1; 20]);
        let nid = NodeId::from_bytes([2; 32]);
        assert_eq!(index.repo_policy(&rid).unwrap(), None);
        index
            .set_repo_policy(
                &rid,
                Some(RepoPolicy::Allow {
                    scope: Scope::Followed,
                }),
            )
            .unwrap();
        index
            .set_node_policy(&nid, Some(NodePolicy::Block))
            .unwrap();
        assert_eq!(
            index.repo_policy(&rid).unwrap(),
            Some(RepoPolicy::Allow {
                scope: Scope::Followed
            })
        );
        let (repos, nodes) = index.policies().unwrap();
        assert_eq!(repos.len(), 1);
        assert_eq!(nodes, vec![(nid, NodePolicy::Block)]);
        index.set_repo_policy(&rid, None).unwrap();
        assert_eq!(index.repo_policy(&rid).unwrap(), None);
    }
}
