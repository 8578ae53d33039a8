//! Admin listener: `/metrics`, `/healthz`, `/readyz` without auth (probes and scrapers), and the
//! admin API under `/api/v1` behind a bearer token (`seedctl` is its client).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use sha2::{Digest, Sha256};

use seedd_api as api;

use seedd_core::index::scan::ScanReport;
use seedd_core::index::Index;
use seedd_core::metrics::Metrics;
use seedd_proto::crypto::NodeId;

use failure::Failure;

mod convert;
mod failure;
mod maintain;
mod status;
mod tenants;

/// Runs a storage → index reconcile; provided by the daemon.
/// A rescan of all of storage (`None`) or of the repositories named.
pub(crate) type Rescan = Arc<
    dyn Fn(Option<Vec<seedd_proto::crypto::RepoId>>) -> Result<ScanReport, String> + Send + Sync,
>;
/// Re-reads and applies the configuration; provided by the daemon.
pub(crate) type Reload = Arc<dyn Fn() -> Result<Vec<String>, String> + Send + Sync>;

pub(crate) struct AdminState {
    pub nid: NodeId,
    pub alias: String,
    pub index: Index,
    pub metrics: Arc<Metrics>,
    pub ready: Arc<AtomicBool>,
    /// The first index is built (ready waits for a fleet replica's catch-up too).
    pub indexed: Arc<AtomicBool>,
    pub started: Instant,
    /// SHA-256 of each accepted bearer token (compared digest to digest).
    pub tokens: Arc<std::sync::RwLock<Vec<[u8; 32]>>>,
    pub http_listen: String,
    pub admin_listen: String,
    pub tls: bool,
    pub rescan: Rescan,
    /// The default identity's p2p shell.
    pub net: seedd_p2p::net::Net,
    pub policies: seedd_core::policy::Policies,
    pub fetcher: seedd_p2p::fetch::Fetcher,
    pub control: crate::control::Control,
    pub identities: seedd_p2p::identity::Identities,
    pub reload: Reload,
    pub data_dir: std::path::PathBuf,
    /// The default identity's key file (backup).
    pub key_path: std::path::PathBuf,
    /// Repository maintenance (`seedctl repo maintain`, `seedctl maintenance ls`).
    pub maintainer: seedd_core::maintain::Maintainer,
}

pub(crate) fn router(state: Arc<AdminState>) -> Router {
    let api = Router::new()
        .route("/api/v1/status", get(status))
        .route("/api/v1/rescan", post(rescan))
        .route("/api/v1/repos", get(repos))
        .route("/api/v1/repos/{rid}", get(repo))
        .route("/api/v1/peers", get(peers))
        .route("/api/v1/peers/connect", post(peers_connect))
        .route("/api/v1/peers/disconnect", post(peers_disconnect))
        .route("/api/v1/routing", get(routing))
        .route("/api/v1/nodes", get(nodes))
        .route("/api/v1/bans", get(bans))
        .route("/api/v1/policies", get(policies))
        .route("/api/v1/repos/{rid}/seed", post(repo_seed))
        .route("/api/v1/repos/{rid}/unseed", post(repo_unseed))
        .route("/api/v1/nodes/{nid}/{action}", post(node_policy))
        .route("/api/v1/fetch", post(fetch))
        .merge(tenants::routes())
        .merge(maintain::routes())
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .merge(api)
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found\n") })
        .with_state(state)
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// Token digest for a token file's contents (surrounding whitespace ignored).
pub(crate) fn token_digest(contents: &str) -> [u8; 32] {
    digest(contents.trim().as_bytes())
}

async fn require_token(State(state): State<Arc<AdminState>>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| digest(t.trim().as_bytes()));
    match presented {
        // Comparing fixed-size digests leaks nothing useful about the token.
        Some(d)
            if state
                .tokens
                .read()
                .map(|t| t.contains(&d))
                .unwrap_or(false) =>
        {
            next.run(req).await
        }
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            Json(api::ErrorBody::new(
                "missing or wrong bearer token: pass the admin token file with seedctl --token-file",
            )),
        )
            .into_response(),
    }
}

async fn metrics(State(state): State<Arc<AdminState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

async fn readyz(State(state): State<Arc<AdminState>>) -> Response {
    if state.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready\n").into_response()
    } else if state.indexed.load(Ordering::Acquire) {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "catching up with the shard's other replicas\n",
        )
            .into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "indexing storage\n").into_response()
    }
}

async fn status(State(state): State<Arc<AdminState>>) -> Response {
    // O(1): the index keeps its counts with its records.
    let counts = state.index.repo_counts();
    Json(api::Status {
        nid: state.nid.to_string(),
        did: state.nid.to_did(),
        alias: state.alias.clone(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        uptime_seconds: state.started.elapsed().as_secs(),
        ready: state.ready.load(Ordering::Acquire),
        repos: api::RepoCounts {
            total: counts.total,
            public: counts.public,
            private: counts.total.saturating_sub(counts.public),
        },
        http: api::HttpStatus {
            listen: state.http_listen.clone(),
            tls: state.tls,
        },
        admin: api::AdminStatus {
            listen: state.admin_listen.clone(),
        },
        p2p: Some(convert::p2p_status(state.net.status())),
    })
    .into_response()
}

async fn rescan(
    State(state): State<Arc<AdminState>>,
    body: Option<Json<api::RescanRequest>>,
) -> Result<Json<api::ScanReport>, Failure> {
    let repos = body.map(|Json(b)| b.repos).unwrap_or_default();
    let only = if repos.is_empty() {
        None
    } else {
        Some(
            repos
                .iter()
                .map(|r| parse_rid(r))
                .collect::<Result<Vec<_>, _>>()?,
        )
    };
    let f = state.rescan.clone();
    let report = tokio::task::spawn_blocking(move || f(only))
        .await?
        .map_err(Failure::internal)?;
    Ok(Json(convert::scan_report(report)))
}

#[derive(serde::Deserialize, Default)]
struct ReposQuery {
    tenant: Option<String>,
    limit: Option<usize>,
    after: Option<String>,
}

/// Rows read as `limit + 1` cut to `limit`, and the next page's cursor (the last row kept)
/// when the extra row shows that more follow.
fn split_page<T>(
    mut rows: Vec<T>,
    limit: usize,
    cursor: impl Fn(&T) -> String,
) -> (Vec<T>, Option<String>) {
    if rows.len() <= limit {
        return (rows, None);
    }
    rows.truncate(limit);
    let next = rows.last().map(cursor);
    (rows, next)
}

/// A page size from the query: the default when absent, at most `api::PAGE_MAX_LIMIT`.
pub(super) fn page_limit(limit: Option<usize>) -> Result<usize, Failure> {
    match limit {
        None => Ok(api::PAGE_DEFAULT_LIMIT),
        Some(0) => Err(Failure::bad_request("limit must be at least 1")),
        Some(n) => Ok(n.min(api::PAGE_MAX_LIMIT)),
    }
}

/// One page of the indexed repositories in RID order (`after`: the previous page's `next`).
/// The page is read from the index after the cursor; `total` is the in-memory count.
async fn repos(
    State(state): State<Arc<AdminState>>,
    axum::extract::Query(q): axum::extract::Query<ReposQuery>,
) -> Result<Json<api::ReposResponse>, Failure> {
    let limit = page_limit(q.limit)?;
    let after = q.after.as_deref().map(parse_rid).transpose()?;
    let index = state.index.clone();
    let only = match &q.tenant {
        Some(t) => match state.control.tenants.get(t) {
            Some((t, _)) => {
                let mut rids = t.repos.iter().map(|r| r.rid).collect::<Vec<_>>();
                rids.sort();
                rids.dedup();
                Some(rids)
            }
            None => return Err(seedd_core::tenant::TenantError::Unknown(t.clone()).into()),
        },
        None => None,
    };
    let total = only
        .as_ref()
        .map_or_else(|| index.repo_counts().total, Vec::len);
    let tenants = state.control.tenants.clone();
    let body = tokio::task::spawn_blocking(move || {
        let page = match &only {
            Some(rids) => index.repos_of_page(rids, after.as_ref(), limit)?,
            None => index.repos_page(after.as_ref(), limit)?,
        };
        let repos = page
            .items
            .into_iter()
            .map(|r| {
                let claimants = tenants.claimants(&r.rid);
                api::RepoRecord {
                    tenants: Some(claimants),
                    ..convert::repo_record(r)
                }
            })
            .collect::<Vec<_>>();
        Ok::<_, seedd_core::index::IndexError>(api::ReposResponse {
            repos,
            next: page.next.map(|r| r.to_string()),
            total,
        })
    })
    .await?
    .map_err(Failure::internal)?;
    Ok(Json(body))
}

async fn repo(
    State(state): State<Arc<AdminState>>,
    Path(rid): Path<String>,
) -> Result<Json<api::RepoResponse>, Failure> {
    let rid = parse_rid(&rid)?;
    let index = state.index.clone();
    let found = tokio::task::spawn_blocking(move || {
        let record = index.repo(&rid)?;
        let sigrefs = index.sigrefs(&rid)?;
        Ok::<_, seedd_core::index::IndexError>(record.map(|r| (r, sigrefs)))
    })
    .await?
    .map_err(Failure::internal)?;
    let Some((record, sigrefs)) = found else {
        return Err(Failure::not_found(format!(
            "repository {rid} is not in the index"
        )));
    };
    Ok(Json(api::RepoResponse {
        repo: convert::repo_record(record),
        sigrefs: sigrefs.into_iter().map(convert::sigrefs).collect(),
    }))
}

async fn peers(State(state): State<Arc<AdminState>>) -> Response {
    let peers = state.net.peers().into_iter().map(convert::peer).collect();
    Json(api::PeersResponse { peers }).into_response()
}

async fn peers_connect(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<api::ConnectRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<api::ConnectResponse>, Failure> {
    let Ok(Json(body)) = body else {
        return Err(Failure::bad_request(
            "expected JSON {\"addr\": \"z6Mk…@host:port\"}",
        ));
    };
    let (nid, addr) = seedd_p2p::net::parse_peer(&body.addr)
        .map_err(|e| Failure::bad_request(format!("invalid peer {:?}: {e}", body.addr)))?;
    if nid == state.nid {
        return Err(Failure::bad_request(format!("{nid} is this node")));
    }
    let new = state.net.connect(nid, addr.clone());
    Ok(Json(api::ConnectResponse {
        nid: nid.to_string(),
        addr,
        dialing: true,
        new,
    }))
}

async fn peers_disconnect(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<api::DisconnectRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<api::DisconnectResponse>, Failure> {
    let Ok(Json(body)) = body else {
        return Err(Failure::bad_request("expected JSON {\"nid\": \"z6Mk…\"}"));
    };
    let nid = body
        .nid
        .parse::<NodeId>()
        .map_err(|e| Failure::bad_request(format!("invalid node id {:?}: {e}", body.nid)))?;
    let sessions_closed = state.net.disconnect(nid);
    Ok(Json(api::DisconnectResponse {
        nid: nid.to_string(),
        sessions_closed,
    }))
}

#[derive(serde::Deserialize)]
struct RoutingQuery {
    rid: Option<String>,
    nid: Option<String>,
    limit: Option<usize>,
    after: Option<String>,
}

/// A routing-table cursor: `<rid>/<nid>` of the last entry of the previous page.
fn parse_route_cursor(cursor: &str) -> Result<(seedd_proto::crypto::RepoId, NodeId), Failure> {
    let bad = || {
        Failure::bad_request(format!(
            "invalid cursor {cursor:?}: pass the `next` of the previous page"
        ))
    };
    let (rid, nid) = cursor.split_once('/').ok_or_else(bad)?;
    Ok((
        rid.parse().map_err(|_| bad())?,
        nid.parse().map_err(|_| bad())?,
    ))
}

/// One page of the routing table in (RID, NID) order, optionally one repository's or one
/// node's; read under the gossip lock, costing the page.
async fn routing(
    State(state): State<Arc<AdminState>>,
    axum::extract::Query(q): axum::extract::Query<RoutingQuery>,
) -> Result<Json<api::RoutingResponse>, Failure> {
    let rid = q
        .rid
        .as_deref()
        .map(str::parse::<seedd_proto::crypto::RepoId>)
        .transpose()
        .map_err(|e| Failure::bad_request(format!("invalid rid: {e}")))?;
    let nid = q
        .nid
        .as_deref()
        .map(str::parse::<NodeId>)
        .transpose()
        .map_err(|e| Failure::bad_request(format!("invalid nid: {e}")))?;
    let limit = page_limit(q.limit)?;
    let after = q.after.as_deref().map(parse_route_cursor).transpose()?;
    let (rows, total) = state
        .net
        .routing_page(rid, nid, after, limit.saturating_add(1));
    let (rows, next) = split_page(rows, limit, |r| format!("{}/{}", r.rid, r.nid));
    let routes = rows.into_iter().map(convert::route).collect();
    Ok(Json(api::RoutingResponse {
        routes,
        next,
        total,
    }))
}

#[derive(serde::Deserialize)]
struct PageQuery {
    limit: Option<usize>,
    after: Option<String>,
}

/// One page of the address book by node id (`after`: the previous page's `next`).
async fn nodes(
    State(state): State<Arc<AdminState>>,
    axum::extract::Query(q): axum::extract::Query<PageQuery>,
) -> Result<Json<api::NodesResponse>, Failure> {
    let limit = page_limit(q.limit)?;
    let after = q.after.as_deref().map(parse_nid).transpose()?;
    let (rows, total) = state.net.nodes_page(after, limit.saturating_add(1));
    let (rows, next) = split_page(rows, limit, |n| n.nid.to_string());
    let nodes = rows.into_iter().map(convert::node).collect();
    Ok(Json(api::NodesResponse { nodes, next, total }))
}

async fn bans(State(state): State<Arc<AdminState>>) -> Response {
    let bans = state.net.bans().into_iter().map(convert::ban).collect();
    Json(api::BansResponse { bans }).into_response()
}

fn parse_rid(rid: &str) -> Result<seedd_proto::crypto::RepoId, Failure> {
    rid.parse()
        .map_err(|e| Failure::bad_request(format!("invalid repository id {rid:?}: {e}")))
}

fn parse_nid(nid: &str) -> Result<NodeId, Failure> {
    nid.parse()
        .map_err(|e| Failure::bad_request(format!("invalid node id {nid:?}: {e}")))
}

/// A policies cursor: `node/<nid>` or `repo/<rid>`.
fn parse_policy_cursor(cursor: &str) -> Result<seedd_core::index::policy::PolicyCursor, Failure> {
    use seedd_core::index::policy::PolicyCursor;
    match cursor.split_once('/') {
        Some(("node", nid)) => parse_nid(nid).map(PolicyCursor::Node),
        Some(("repo", rid)) => parse_rid(rid).map(PolicyCursor::Repo),
        _ => Err(Failure::bad_request(format!(
            "invalid cursor {cursor:?}: expected node/<nid> or repo/<rid> (a page's `next`)"
        ))),
    }
}

/// One page of explicit policies (node policies, then repository policies), read from the
/// index after the cursor.
async fn policies(
    State(state): State<Arc<AdminState>>,
    axum::extract::Query(q): axum::extract::Query<PageQuery>,
) -> Result<Json<api::PoliciesResponse>, Failure> {
    use seedd_core::index::policy::{PoliciesPage, PolicyCursor};
    let limit = page_limit(q.limit)?;
    let after = q.after.as_deref().map(parse_policy_cursor).transpose()?;
    let p = state.policies.clone();
    let PoliciesPage { repos, nodes, next } =
        tokio::task::spawn_blocking(move || p.index().policies_page(after, limit))
            .await?
            .map_err(Failure::internal)?;
    Ok(Json(api::PoliciesResponse {
        next: next.map(|c| match c {
            PolicyCursor::Node(nid) => format!("node/{nid}"),
            PolicyCursor::Repo(rid) => format!("repo/{rid}"),
        }),
        repos: repos
            .into_iter()
            .map(|(rid, p)| api::RepoPolicyEntry {
                rid: rid.to_string(),
                policy: convert::repo_policy(p),
            })
            .collect(),
        nodes: nodes
            .into_iter()
            .map(|(nid, p)| api::NodePolicyEntry {
                nid: nid.to_string(),
                policy: convert::node_policy(p),
            })
            .collect(),
    }))
}

async fn repo_seed(
    State(state): State<Arc<AdminState>>,
    Path(rid): Path<String>,
    body: Option<Json<api::SeedRequest>>,
) -> Result<Json<api::SeedResponse>, Failure> {
    let ctl = state.control.clone();
    let rid = parse_rid(&rid)?;
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let scope = match body.scope.as_deref() {
        None if body.tenant.is_some() => seedd_core::index::policy::Scope::Followed,
        None => seedd_core::index::policy::Scope::All,
        Some(s) => s
            .parse()
            .map_err(|e| Failure::bad_request(format!("scope {e}")))?,
    };
    let from = match body.from.as_deref() {
        None => None,
        Some(f) if f.contains('@') => {
            let (nid, addr) = seedd_p2p::net::parse_peer(f)
                .map_err(|e| Failure::bad_request(format!("from: {e}")))?;
            state.net.connect(nid, addr);
            Some(nid)
        }
        Some(f) => Some(
            f.parse::<NodeId>()
                .map_err(|e| Failure::bad_request(format!("from: {e}")))?,
        ),
    };
    let tenant = body.tenant.clone();
    let alias = body.alias.clone();
    let o =
        tokio::task::spawn_blocking(move || ctl.seed(tenant.as_deref(), rid, scope, alias, from))
            .await??;
    Ok(Json(api::SeedResponse {
        rid: o.rid.to_string(),
        seeded: o.seeded,
        tenant: o.tenant,
        owner: o.owner,
        policy: "allow".to_owned(),
        scope: convert::scope(scope),
        fetching_from: from.map(|n| n.to_string()),
    }))
}

async fn repo_unseed(
    State(state): State<Arc<AdminState>>,
    Path(rid): Path<String>,
    body: Option<Json<api::UnseedRequest>>,
) -> Result<Json<api::UnseedResponse>, Failure> {
    let ctl = state.control.clone();
    let rid = parse_rid(&rid)?;
    let tenant = body.and_then(|Json(b)| b.tenant);
    let o = tokio::task::spawn_blocking(move || ctl.unseed(tenant.as_deref(), rid)).await??;
    Ok(Json(api::UnseedResponse {
        rid: o.rid.to_string(),
        unseeded: o.unseeded,
        purged: o.purged,
    }))
}

async fn node_policy(
    State(state): State<Arc<AdminState>>,
    Path((nid, action)): Path<(String, String)>,
    body: Option<Json<api::NodePolicyRequest>>,
) -> Result<Json<api::NodePolicyResponse>, Failure> {
    let nid = parse_nid(&nid)?;
    use seedd_core::index::policy::NodePolicy;
    let policy = match action.as_str() {
        "follow" => Some(NodePolicy::Allow {
            alias: body.and_then(|Json(b)| b.alias),
        }),
        "block" => Some(NodePolicy::Block),
        "unblock" | "unfollow" => None,
        other => {
            return Err(Failure::bad_request(format!(
                "unknown action {other:?}: follow, unfollow, block, unblock"
            )))
        }
    };
    state
        .policies
        .set_node(&nid, policy.clone())
        .map_err(Failure::internal)?;
    let mut sessions_closed = 0;
    if matches!(policy, Some(NodePolicy::Block)) {
        sessions_closed = state.net.disconnect(nid);
    }
    Ok(Json(api::NodePolicyResponse {
        nid: nid.to_string(),
        policy: policy.map(convert::node_policy),
        sessions_closed,
    }))
}

async fn fetch(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<api::FetchRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<api::FetchResponse>, Failure> {
    let fetcher = &state.fetcher;
    let Ok(Json(body)) = body else {
        return Err(Failure::bad_request(
            "expected JSON {\"rid\": \"rad:…\", \"from\": \"z6Mk…\"}",
        ));
    };
    let rid = parse_rid(&body.rid)?;
    let connected = fetcher.connected();
    let from = match body.from.as_deref() {
        Some(f) => f
            .parse::<NodeId>()
            .map_err(|e| Failure::bad_request(format!("from: {e}")))?,
        None => fetcher
            .routing(Some(rid))
            .into_iter()
            .map(|r| r.nid)
            .find(|n| connected.contains(n))
            .ok_or_else(|| {
                Failure::conflict(format!(
                    "no connected peer is known to seed {rid}; pass --from"
                ))
            })?,
    };
    let o = fetcher.fetch_now(rid, from).await.map_err(|e| {
        Failure::new(
            StatusCode::BAD_GATEWAY,
            format!("fetching {rid} from {from}: {e}"),
        )
        .with_reason(e.label())
    })?;
    Ok(Json(api::FetchResponse {
        rid: rid.to_string(),
        from: from.to_string(),
        cloned: o.cloned,
        updated: o.updated.iter().map(|(n, _)| n.to_string()).collect(),
        pruned: o
            .pruned
            .iter()
            .map(|(n, l, r)| api::Pruned {
                nid: n.to_string(),
                reason: (*l).to_owned(),
                detail: r.clone(),
            })
            .collect(),
        refs_written: o.refs_written,
    }))
}
