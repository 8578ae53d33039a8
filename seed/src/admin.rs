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

use crate::crypto::NodeId;
use crate::index::scan::ScanReport;
use crate::index::Index;
use crate::metrics::Metrics;

/// Runs a storage → index reconcile; provided by the daemon.
pub type Rescan = Arc<dyn Fn() -> Result<ScanReport, String> + Send + Sync>;

pub struct AdminState {
    pub nid: NodeId,
    pub alias: String,
    pub index: Index,
    pub metrics: Arc<Metrics>,
    pub ready: Arc<AtomicBool>,
    pub started: Instant,
    /// SHA-256 of the bearer token (compared digest to digest).
    pub token_digest: [u8; 32],
    pub http_listen: String,
    pub admin_listen: String,
    pub tls: bool,
    pub rescan: Rescan,
    /// The p2p shell (absent when no p2p listener/dialer runs, e.g. in some tests).
    pub net: Option<crate::net::Net>,
    pub policies: Option<crate::policy::Policies>,
    pub fetcher: Option<crate::fetch::Fetcher>,
}

pub fn router(state: Arc<AdminState>) -> Router {
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
pub fn token_digest(contents: &str) -> [u8; 32] {
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
        Some(d) if d == state.token_digest => next.run(req).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            Json(serde_json::json!({
                "error": "missing or wrong bearer token: pass the admin token file with seedctl --token-file"
            })),
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
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "indexing storage\n").into_response()
    }
}

async fn status(State(state): State<Arc<AdminState>>) -> Response {
    let index = state.index.clone();
    let repos = tokio::task::spawn_blocking(move || index.repos())
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    let repos = match repos {
        Ok(r) => r,
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(serde_json::json!({ "error": e })),
            )
                .into_response()
        }
    };
    let public = repos.iter().filter(|r| r.is_public()).count();
    Json(serde_json::json!({
        "nid": state.nid.to_string(),
        "did": state.nid.to_did(),
        "alias": state.alias,
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_seconds": state.started.elapsed().as_secs(),
        "ready": state.ready.load(Ordering::Acquire),
        "repos": { "total": repos.len(), "public": public, "private": repos.len() - public },
        "http": { "listen": state.http_listen, "tls": state.tls },
        "admin": { "listen": state.admin_listen },
        "p2p": state.net.as_ref().map(|n| n.status()),
    }))
    .into_response()
}

async fn rescan(State(state): State<Arc<AdminState>>) -> Response {
    let f = state.rescan.clone();
    match tokio::task::spawn_blocking(move || f()).await {
        Ok(Ok(report)) => Json(report).into_response(),
        Ok(Err(e)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(serde_json::json!({ "error": e })),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(serde_json::json!({ "error": e.to_string() })),
        )
            .into_response(),
    }
}

fn internal(e: impl std::fmt::Display) -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        Json(serde_json::json!({ "error": e.to_string() })),
    )
        .into_response()
}

async fn repos(State(state): State<Arc<AdminState>>) -> Response {
    let index = state.index.clone();
    match tokio::task::spawn_blocking(move || index.repos()).await {
        Ok(Ok(r)) => Json(serde_json::json!({ "repos": r })).into_response(),
        Ok(Err(e)) => internal(e),
        Err(e) => internal(e),
    }
}

async fn repo(State(state): State<Arc<AdminState>>, Path(rid): Path<String>) -> Response {
    let rid: crate::crypto::RepoId =
        match rid.parse() {
            Ok(r) => r,
            Err(e) => return (
                StatusCode::BAD_REQUEST,
                Json(serde_json::json!({ "error": format!("invalid repository id {rid:?}: {e}") })),
            )
                .into_response(),
        };
    let index = state.index.clone();
    let found = tokio::task::spawn_blocking(move || {
        let record = index.repo(&rid)?;
        let sigrefs = index.sigrefs(&rid)?;
        Ok::<_, crate::index::IndexError>(record.map(|r| (r, sigrefs)))
    })
    .await;
    match found {
        Ok(Ok(Some((record, sigrefs)))) => {
            Json(serde_json::json!({ "repo": record, "sigrefs": sigrefs })).into_response()
        }
        Ok(Ok(None)) => (
            StatusCode::NOT_FOUND,
            Json(serde_json::json!({ "error": format!("repository {rid} is not in the index") })),
        )
            .into_response(),
        Ok(Err(e)) => internal(e),
        Err(e) => internal(e),
    }
}

fn bad_request(msg: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(serde_json::json!({ "error": msg })),
    )
        .into_response()
}

fn net(state: &AdminState) -> Result<&crate::net::Net, Box<Response>> {
    state.net.as_ref().ok_or_else(|| {
        Box::new(
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({ "error": "the p2p layer is not running" })),
            )
                .into_response(),
        )
    })
}

async fn peers(State(state): State<Arc<AdminState>>) -> Response {
    match net(&state) {
        Ok(n) => Json(serde_json::json!({ "peers": n.peers() })).into_response(),
        Err(r) => *r,
    }
}

#[derive(serde::Deserialize)]
struct ConnectBody {
    /// `z6Mk…@host:port`
    addr: String,
}

async fn peers_connect(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<ConnectBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let n = match net(&state) {
        Ok(n) => n,
        Err(r) => return *r,
    };
    let Ok(Json(body)) = body else {
        return bad_request("expected JSON {\"addr\": \"z6Mk…@host:port\"}".into());
    };
    match crate::net::parse_peer(&body.addr) {
        Ok((nid, addr)) => {
            if nid == state.nid {
                return bad_request(format!("{nid} is this node"));
            }
            let started = n.connect(nid, addr.clone());
            Json(serde_json::json!({ "nid": nid, "addr": addr, "dialing": true, "new": started }))
                .into_response()
        }
        Err(e) => bad_request(format!("invalid peer {:?}: {e}", body.addr)),
    }
}

#[derive(serde::Deserialize)]
struct DisconnectBody {
    nid: String,
}

async fn peers_disconnect(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<DisconnectBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let n = match net(&state) {
        Ok(n) => n,
        Err(r) => return *r,
    };
    let Ok(Json(body)) = body else {
        return bad_request("expected JSON {\"nid\": \"z6Mk…\"}".into());
    };
    match body.nid.parse::<NodeId>() {
        Ok(nid) => {
            let closed = n.disconnect(nid);
            Json(serde_json::json!({ "nid": nid, "sessions_closed": closed })).into_response()
        }
        Err(e) => bad_request(format!("invalid node id {:?}: {e}", body.nid)),
    }
}

#[derive(serde::Deserialize)]
struct RoutingQuery {
    rid: Option<String>,
    nid: Option<String>,
}

async fn routing(
    State(state): State<Arc<AdminState>>,
    axum::extract::Query(q): axum::extract::Query<RoutingQuery>,
) -> Response {
    let n = match net(&state) {
        Ok(n) => n,
        Err(r) => return *r,
    };
    let rid = match q.rid.as_deref().map(str::parse::<crate::crypto::RepoId>) {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => return bad_request(format!("invalid rid: {e}")),
    };
    let nid = match q.nid.as_deref().map(str::parse::<NodeId>) {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => return bad_request(format!("invalid nid: {e}")),
    };
    Json(serde_json::json!({ "routes": n.routing(rid, nid) })).into_response()
}

async fn nodes(State(state): State<Arc<AdminState>>) -> Response {
    match net(&state) {
        Ok(n) => Json(serde_json::json!({ "nodes": n.nodes() })).into_response(),
        Err(r) => *r,
    }
}

async fn bans(State(state): State<Arc<AdminState>>) -> Response {
    match net(&state) {
        Ok(n) => Json(serde_json::json!({ "bans": n.bans() })).into_response(),
        Err(r) => *r,
    }
}

fn parts(
    state: &AdminState,
) -> Result<
    (
        &crate::net::Net,
        &crate::policy::Policies,
        &crate::fetch::Fetcher,
    ),
    Box<Response>,
> {
    let n = net(state)?;
    match (&state.policies, &state.fetcher) {
        (Some(p), Some(f)) => Ok((n, p, f)),
        _ => Err(Box::new(
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({ "error": "replication is not running" })),
            )
                .into_response(),
        )),
    }
}

fn parse_rid(rid: &str) -> Result<crate::crypto::RepoId, Box<Response>> {
    rid.parse()
        .map_err(|e| Box::new(bad_request(format!("invalid repository id {rid:?}: {e}"))))
}

fn parse_nid(nid: &str) -> Result<NodeId, Box<Response>> {
    nid.parse()
        .map_err(|e| Box::new(bad_request(format!("invalid node id {nid:?}: {e}"))))
}

/// After a policy change: new subscription filter, inventory.
fn policy_changed(state: &AdminState, net: &crate::net::Net, p: &crate::policy::Policies) {
    let seeded = p.explicitly_seeded().into_iter().map(|(r, _)| r).collect();
    net.set_seeding(p.seeds_by_default(), seeded);
    crate::daemon::refresh_inventory(&state.index, net, p);
}

async fn policies(State(state): State<Arc<AdminState>>) -> Response {
    let p = match &state.policies {
        Some(p) => p.clone(),
        None => return internal("policies are not available"),
    };
    match tokio::task::spawn_blocking(move || p.index().policies()).await {
        Ok(Ok((repos, nodes))) => Json(serde_json::json!({
            "repos": repos.iter().map(|(rid, p)| serde_json::json!({"rid": rid, "policy": p})).collect::<Vec<_>>(),
            "nodes": nodes.iter().map(|(nid, p)| serde_json::json!({"nid": nid, "policy": p})).collect::<Vec<_>>(),
        }))
        .into_response(),
        Ok(Err(e)) => internal(e),
        Err(e) => internal(e),
    }
}

#[derive(serde::Deserialize, Default)]
struct SeedBody {
    scope: Option<String>,
    /// `z6Mk…@host:port`: connect to this peer and fetch from it.
    from: Option<String>,
}

async fn repo_seed(
    State(state): State<Arc<AdminState>>,
    Path(rid): Path<String>,
    body: Option<Json<SeedBody>>,
) -> Response {
    let (net, p, fetcher) = match parts(&state) {
        Ok(x) => x,
        Err(r) => return *r,
    };
    let rid = match parse_rid(&rid) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let scope = match body.scope.as_deref() {
        None | Some("all") => crate::index::policy::Scope::All,
        Some("followed") => crate::index::policy::Scope::Followed,
        Some(other) => {
            return bad_request(format!("scope {other:?}: expected \"all\" or \"followed\""))
        }
    };
    let from = match body.from.as_deref().map(crate::net::parse_peer) {
        None => None,
        Some(Ok(x)) => Some(x),
        Some(Err(e)) => return bad_request(format!("from: {e}")),
    };
    if let Err(e) = p.set_repo(
        &rid,
        Some(crate::index::policy::RepoPolicy::Allow { scope }),
    ) {
        return internal(e);
    }
    policy_changed(&state, net, p);
    // Fetch from the given peer, or from a connected node known to seed it.
    let source = match from {
        Some((nid, addr)) => {
            net.connect(nid, addr);
            Some(nid)
        }
        None => {
            let connected = net.connected();
            net.routing(Some(rid), None)
                .into_iter()
                .map(|r| r.nid)
                .find(|n| connected.contains(n))
        }
    };
    if let Some(nid) = source {
        let (net, fetcher) = (net.clone(), fetcher.clone());
        tokio::spawn(async move {
            for _ in 0..100 {
                if net.connected().contains(&nid) {
                    fetcher.request(rid, nid);
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            tracing::warn!(%rid, peer = %nid, "seed: peer did not connect; fetch later by sync");
        });
    }
    Json(serde_json::json!({ "rid": rid, "policy": "allow", "scope": scope, "fetching_from": source }))
        .into_response()
}

async fn repo_unseed(State(state): State<Arc<AdminState>>, Path(rid): Path<String>) -> Response {
    let (net, p, _) = match parts(&state) {
        Ok(x) => x,
        Err(r) => return *r,
    };
    let rid = match parse_rid(&rid) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    if let Err(e) = p.set_repo(&rid, Some(crate::index::policy::RepoPolicy::Block)) {
        return internal(e);
    }
    policy_changed(&state, net, p);
    Json(serde_json::json!({ "rid": rid, "policy": "block" })).into_response()
}

#[derive(serde::Deserialize, Default)]
struct NodeBody {
    alias: Option<String>,
}

async fn node_policy(
    State(state): State<Arc<AdminState>>,
    Path((nid, action)): Path<(String, String)>,
    body: Option<Json<NodeBody>>,
) -> Response {
    let (net, p, _) = match parts(&state) {
        Ok(x) => x,
        Err(r) => return *r,
    };
    let nid = match parse_nid(&nid) {
        Ok(n) => n,
        Err(r) => return *r,
    };
    use crate::index::policy::NodePolicy;
    let policy = match action.as_str() {
        "follow" => Some(NodePolicy::Allow {
            alias: body.and_then(|Json(b)| b.alias),
        }),
        "block" => Some(NodePolicy::Block),
        "unblock" | "unfollow" => None,
        other => {
            return bad_request(format!(
                "unknown action {other:?}: follow, unfollow, block, unblock"
            ))
        }
    };
    if let Err(e) = p.set_node(&nid, policy.clone()) {
        return internal(e);
    }
    let mut closed = 0;
    if matches!(policy, Some(NodePolicy::Block)) {
        closed = net.disconnect(nid);
    }
    Json(serde_json::json!({ "nid": nid, "policy": policy, "sessions_closed": closed }))
        .into_response()
}

#[derive(serde::Deserialize)]
struct FetchBody {
    rid: String,
    from: Option<String>,
}

async fn fetch(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<FetchBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let (net, _, fetcher) = match parts(&state) {
        Ok(x) => x,
        Err(r) => return *r,
    };
    let Ok(Json(body)) = body else {
        return bad_request("expected JSON {\"rid\": \"rad:…\", \"from\": \"z6Mk…\"}".into());
    };
    let rid = match parse_rid(&body.rid) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let connected = net.connected();
    let from = match body.from.as_deref().map(str::parse::<NodeId>) {
        Some(Ok(n)) => n,
        Some(Err(e)) => return bad_request(format!("from: {e}")),
        None => match net
            .routing(Some(rid), None)
            .into_iter()
            .map(|r| r.nid)
            .find(|n| connected.contains(n))
        {
            Some(n) => n,
            None => {
                return (
                    StatusCode::CONFLICT,
                    Json(serde_json::json!({ "error": format!("no connected peer is known to seed {rid}; pass --from") })),
                )
                    .into_response()
            }
        },
    };
    match fetcher.fetch_now(rid, from).await {
        Ok(o) => Json(serde_json::json!({
            "rid": rid,
            "from": from,
            "cloned": o.cloned,
            "updated": o.updated.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>(),
            "pruned": o.pruned.iter().map(|(n, l, r)| serde_json::json!({"nid": n, "reason": l, "detail": r})).collect::<Vec<_>>(),
            "refs_written": o.refs_written,
        }))
        .into_response(),
        Err(e) => (
            StatusCode::BAD_GATEWAY,
            Json(serde_json::json!({ "error": format!("fetching {rid} from {from}: {e}"), "reason": e.label() })),
        )
            .into_response(),
    }
}
