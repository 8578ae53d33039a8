//! Names of nodes (issue 27 §5): the alias each node gave in its latest node announcement the
//! seed holds (`Index::node_alias`), as radicle-httpd shows them from its node database.
//! Looked up per answer for the DIDs it names (bounded by the answer), remembered for
//! [`TTL`] in a map of at most [`MAX_REMEMBERED`] nodes (a node without one is looked up
//! again each time).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use seedd_core::index::Index;
use seedd_proto::crypto::NodeId;
use serde_json::Value;

/// How long a looked-up alias (or its absence) is reused.
const TTL: Duration = Duration::from_secs(60);
/// Nodes remembered at most (the map is emptied when full).
const MAX_REMEMBERED: usize = 16_384;

/// Remembered aliases.
#[derive(Default)]
pub(crate) struct Aliases {
    known: Mutex<HashMap<NodeId, (Option<String>, Instant)>>,
}

impl Aliases {
    /// `nid`'s alias, if the seed holds its node announcement.
    pub(crate) fn get(&self, index: &Index, nid: &NodeId) -> Option<String> {
        let now = Instant::now();
        if let Some((alias, at)) = self.lock().get(nid) {
            if now.duration_since(*at) < TTL {
                return alias.clone();
            }
        }
        let alias = match index.node_alias(nid) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(%nid, error = %seedd_core::logging::chain(&e), "reading a node's alias failed");
                None
            }
        };
        // Only a known alias is remembered: a node named before its announcement arrived is
        // named as soon as it does (an unknown one costs a point lookup per answer naming it).
        if alias.is_some() {
            let mut known = self.lock();
            if known.len() >= MAX_REMEMBERED {
                known.clear();
            }
            known.insert(*nid, (alias.clone(), now));
        }
        alias
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, (Option<String>, Instant)>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An API author (`{id: did, alias?}`) with its alias.
    pub(crate) fn author(&self, index: &Index, nid: &NodeId) -> seedd_web_api::Author {
        seedd_web_api::Author {
            id: nid.to_did(),
            alias: self.get(index, nid),
        }
    }

    /// Gives every author object in `value` (an object whose `id` is a `did:key:` and that has
    /// no `alias`) the alias of its node, as httpd does for COB authors, reviewers and
    /// assignees.
    pub(crate) fn name_authors(&self, index: &Index, value: &mut Value) {
        match value {
            Value::Array(items) => {
                for v in items {
                    self.name_authors(index, v);
                }
            }
            Value::Object(map) => {
                let nid = map
                    .get("id")
                    .and_then(Value::as_str)
                    .and_then(|id| id.strip_prefix("did:key:"))
                    .and_then(|n| n.parse::<NodeId>().ok());
                if let Some(nid) = nid {
                    if !map.contains_key("alias") {
                        if let Some(alias) = self.get(index, &nid) {
                            map.insert("alias".to_owned(), Value::String(alias));
                        }
                    }
                }
                for v in map.values_mut() {
                    self.name_authors(index, v);
                }
            }
            _ => {}
        }
    }
}
