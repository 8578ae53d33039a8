//! Seeding and follow policies in RocksDB (CF `policies`): `repo/` ‖ rid (20) and
//! `node/` ‖ nid (32) → JSON.

use rocksdb::{IteratorMode, ReadOptions};
use serde::{Deserialize, Serialize};

use super::{Index, IndexError};
use crate::crypto::{NodeId, RepoId};

pub(crate) const CF_POLICIES: &str = "policies";

pub(crate) use crate::config::Scope;

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

fn corrupt(e: impl ToString) -> IndexError {
    IndexError::Corrupt {
        cf: CF_POLICIES,
        reason: e.to_string(),
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
        match p {
            Some(p) => self.put(
                CF_POLICIES,
                repo_key(rid),
                serde_json::to_vec(&p).map_err(corrupt)?,
            ),
            None => self.delete(CF_POLICIES, repo_key(rid)),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
