//! The node: status, rescan, peers, routing, the address book, bans and policies.

use serde::{Deserialize, Serialize};

/// `GET /api/v1/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub nid: String,
    pub did: String,
    pub alias: String,
    pub version: String,
    pub uptime_seconds: u64,
    pub ready: bool,
    pub repos: RepoCounts,
    pub http: HttpStatus,
    pub admin: AdminStatus,
    /// `null` when no p2p layer runs.
    pub p2p: Option<P2pStatus>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoCounts {
    pub total: usize,
    pub public: usize,
    pub private: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpStatus {
    pub listen: String,
    pub tls: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminStatus {
    pub listen: String,
}

/// The default identity's p2p layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct P2pStatus {
    pub listen: Vec<String>,
    pub relay: bool,
    pub sessions: usize,
    pub inventory: usize,
    pub routing_entries: usize,
    pub known_nodes: usize,
    /// Timestamp (ms) of our latest node announcement.
    pub node_announcement_timestamp: u64,
}

/// `POST /api/v1/rescan` body (optional): the repositories to re-read; none or empty: all of
/// storage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RescanRequest {
    /// RIDs (`rad:z…` or `z…`) changed, added or removed outside seedd.
    #[serde(default)]
    pub repos: Vec<String>,
}

/// `POST /api/v1/rescan`: what a reconcile of storage and index did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanReport {
    pub scanned: usize,
    pub added: usize,
    pub updated: usize,
    pub unchanged: usize,
    pub removed: usize,
    pub failed: usize,
    /// `rid: reason` for repositories that could not be indexed.
    pub errors: Vec<String>,
    pub duration_ms: u64,
}

/// `GET /api/v1/peers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeersResponse {
    pub peers: Vec<Peer>,
}

/// A session, or a peer being dialed (`state` `connecting`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    pub nid: String,
    /// `inbound` or `outbound`.
    pub link: String,
    pub addr: String,
    /// `connected` or `connecting`.
    pub state: String,
    /// Unix ms.
    pub since: u64,
    pub latency_ms: Option<u64>,
    pub subscribed: bool,
    pub alias: Option<String>,
    pub agent: Option<String>,
}

/// `POST /api/v1/peers/connect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectRequest {
    /// `z6Mk…@host:port`
    pub addr: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectResponse {
    pub nid: String,
    pub addr: String,
    pub dialing: bool,
    /// False when it was dialed already.
    pub new: bool,
}

/// `POST /api/v1/peers/disconnect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisconnectRequest {
    pub nid: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisconnectResponse {
    pub nid: String,
    pub sessions_closed: usize,
}

/// `GET /api/v1/routing[?rid=R][&nid=N][&limit=L][&after=C]`: one page, in (RID, NID) order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutingResponse {
    pub routes: Vec<Route>,
    /// Cursor of the next page (pass it as `after`); `null` on the last page.
    #[serde(default)]
    pub next: Option<String>,
    /// Entries in the whole listing (with its filters), not only this page.
    #[serde(default)]
    pub total: usize,
}

/// A routing-table row: `nid` seeds `rid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    pub rid: String,
    pub nid: String,
    /// Unix ms of the information.
    pub timestamp: u64,
}

/// `GET /api/v1/nodes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodesResponse {
    pub nodes: Vec<NodeRecord>,
    /// Cursor of the next page (pass it as `after`); `null` on the last page.
    #[serde(default)]
    pub next: Option<String>,
    /// Nodes in the whole address book, not only this page.
    #[serde(default)]
    pub total: usize,
}

/// An address-book entry: a node that announced itself with the SEED feature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub nid: String,
    pub version: u8,
    pub features: u64,
    pub alias: String,
    pub agent: String,
    /// Announced addresses, `host:port`.
    pub addresses: Vec<String>,
    /// Timestamp of its latest node announcement (ms).
    pub timestamp: u64,
    /// When we last received its node announcement (ms).
    pub last_seen: u64,
}

/// `GET /api/v1/bans`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BansResponse {
    pub bans: Vec<Ban>,
}

/// Misbehaviour bookkeeping for one IP address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ban {
    pub ip: String,
    pub penalty: u32,
    /// Banned until this time (Unix ms), if banned.
    pub banned_until: Option<u64>,
    /// The latest misbehaviour.
    pub reason: String,
    /// Unix ms.
    pub updated_at: u64,
}

/// Which namespaces of a seeded repository are fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Every namespace.
    All,
    /// Delegates and followed nodes only.
    Followed,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::All => "all",
            Scope::Followed => "followed",
        }
    }
}

/// A repository's explicit seeding policy.
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
    Allow {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alias: Option<String>,
    },
    Block,
}

/// `GET /api/v1/policies`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoliciesResponse {
    pub repos: Vec<RepoPolicyEntry>,
    pub nodes: Vec<NodePolicyEntry>,
    /// Cursor of the next page (`node/<nid>` or `repo/<rid>`, pass it as `after`); `null` on
    /// the last page. A page holds up to `limit` policies of both kinds, node policies first.
    #[serde(default)]
    pub next: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoPolicyEntry {
    pub rid: String,
    pub policy: RepoPolicy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePolicyEntry {
    pub nid: String,
    pub policy: NodePolicy,
}

/// `POST /api/v1/nodes/{nid}/{follow,unfollow,block,unblock}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePolicyRequest {
    /// The followed node's alias (`follow` only).
    #[serde(default)]
    pub alias: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePolicyResponse {
    pub nid: String,
    /// `null` after `unfollow`/`unblock`.
    pub policy: Option<NodePolicy>,
    pub sessions_closed: usize,
}
