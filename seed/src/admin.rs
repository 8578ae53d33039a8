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

mod status;
mod tenants;

/// Runs a storage → index reconcile; provided by the daemon.
pub type Rescan = Arc<dyn Fn() -> Result<ScanReport, String> + Send + Sync>;
/// Re-reads and applies the configuration; provided by the daemon.
pub type Reload = Arc<dyn Fn() -> Result<Vec<String>, String> + Send + Sync>;

pub struct AdminState {
    pub nid: NodeId,
    pub alias: String,
    pub index: Index,
    pub metrics: Arc<Metrics>,
    pub ready: Arc<AtomicBool>,
    pub started: Instant,
    /// SHA-256 of each accepted bearer token (compared digest to digest).
    pub tokens: Arc<std::sync::RwLock<Vec<[u8; 32]>>>,
    pub http_listen: String,
    pub admin_listen: String,
    pub tls: bool,
    pub rescan: Rescan,
    /// The p2p shell (absent when no p2p listener/dialer runs, e.g. in some tests).
    pub net: Option<crate::net::Net>,
    pub policies: Option<crate::policy::Policies>,
    pub fetcher: Option<crate::fetch::Fetcher>,
    pub control: Option<crate::tenant::ops::Control>,
    pub identities: Option<crate::identity::Identities>,
    pub reload: Option<Reload>,
    pub data_dir: std::path::PathBuf,
    /// The default identity's key file (backup).
    pub key_path: std::path::PathBuf,
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
        .merge(tenants::routes())
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

#[derive(serde::Deserialize, Default)]
struct ReposQuery {
    tenant: Option<String>,
}

async fn repos(
    State(state): State<Arc<AdminState>>,
    axum::extract::Query(q): axum::extract::Query<ReposQuery>,
) -> Response {
    let index = state.index.clone();
    let only = match (&q.tenant, &state.control) {
        (Some(t), Some(c)) => match c.tenants.get(t) {
            Some((t, _)) => Some(t.repos.iter().map(|r| r.rid).collect::<Vec<_>>()),
            None => return error(404, crate::tenant::TenantError::Unknown(t.clone())),
        },
        _ => None,
    };
    let tenants = state.control.as_ref().map(|c| c.tenants.clone());
    let result = tokio::task::spawn_blocking(move || {
        let mut repos = index.repos()?;
        if let Some(only) = &only {
            repos.retain(|r| only.contains(&r.rid));
        }
        Ok::<_, crate::index::IndexError>(
            repos
                .into_iter()
                .map(|r| {
                    let mut v = serde_json::to_value(&r).unwrap_or_default();
                    if let (Some(t), Some(obj)) = (&tenants, v.as_object_mut()) {
                        obj.insert("tenants".into(), serde_json::json!(t.claimants(&r.rid)));
                    }
                    v
                })
                .collect::<Vec<_>>(),
        )
    })
    .await;
    match result {
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
    /// `z6Mk…@host:port` (connect first) or `z6Mk…`: fetch from this peer.
    from: Option<String>,
    /// Seed for this tenant (quota, deny list and inventory-cap checks; reference-counted).
    tenant: Option<String>,
    /// The tenant's short alias for the repository (`https://<tenant host>/<alias>.git`).
    alias: Option<String>,
}

fn control(state: &AdminState) -> Result<&crate::tenant::ops::Control, Box<Response>> {
    state.control.as_ref().ok_or_else(|| {
        Box::new(
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({ "error": "tenancy is not running" })),
            )
                .into_response(),
        )
    })
}

/// A one-line JSON error with the given status.
pub(crate) fn error(status: u16, msg: impl std::fmt::Display) -> Response {
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(serde_json::json!({ "error": msg.to_string() })),
    )
        .into_response()
}

async fn repo_seed(
    State(state): State<Arc<AdminState>>,
    Path(rid): Path<String>,
    body: Option<Json<SeedBody>>,
) -> Response {
    let (net, ctl) = match (net(&state), control(&state)) {
        (Ok(n), Ok(c)) => (n, c.clone()),
        (Err(r), _) | (_, Err(r)) => return *r,
    };
    let rid = match parse_rid(&rid) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let scope = match body.scope.as_deref() {
        None if body.tenant.is_some() => crate::index::policy::Scope::Followed,
        None | Some("all") => crate::index::policy::Scope::All,
        Some("followed") => crate::index::policy::Scope::Followed,
        Some(other) => {
            return bad_request(format!("scope {other:?}: expected \"all\" or \"followed\""))
        }
    };
    let from = match body.from.as_deref() {
        None => None,
        Some(f) if f.contains('@') => match crate::net::parse_peer(f) {
            Ok((nid, addr)) => {
                net.connect(nid, addr);
                Some(nid)
            }
            Err(e) => return bad_request(format!("from: {e}")),
        },
        Some(f) => match f.parse::<NodeId>() {
            Ok(n) => Some(n),
            Err(e) => return bad_request(format!("from: {e}")),
        },
    };
    let tenant = body.tenant.clone();
    let alias = body.alias.clone();
    let result =
        tokio::task::spawn_blocking(move || ctl.seed(tenant.as_deref(), rid, scope, alias, from))
            .await;
    match result {
        Ok(Ok(o)) => Json(serde_json::json!({
            "rid": o.rid, "seeded": o.seeded, "tenant": o.tenant, "owner": o.owner,
            "policy": "allow", "scope": scope, "fetching_from": from,
        }))
        .into_response(),
        Ok(Err(e)) => status::error_response(e),
        Err(e) => internal(e),
    }
}

#[derive(serde::Deserialize, Default)]
struct UnseedBody {
    tenant: Option<String>,
}

async fn repo_unseed(
    State(state): State<Arc<AdminState>>,
    Path(rid): Path<String>,
    body: Option<Json<UnseedBody>>,
) -> Response {
    let ctl = match control(&state) {
        Ok(c) => c.clone(),
        Err(r) => return *r,
    };
    let rid = match parse_rid(&rid) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let tenant = body.and_then(|Json(b)| b.tenant);
    match tokio::task::spawn_blocking(move || ctl.unseed(tenant.as_deref(), rid)).await {
        Ok(Ok(o)) => Json(serde_json::json!(o)).into_response(),
        Ok(Err(e)) => status::error_response(e),
        Err(e) => internal(e),
    }
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
    let (_, _, fetcher) = match parts(&state) {
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
    let connected = fetcher.connected();
    let from = match body.from.as_deref().map(str::parse::<NodeId>) {
        Some(Ok(n)) => n,
        Some(Err(e)) => return bad_request(format!("from: {e}")),
        None => match fetcher
            .routing(Some(rid))
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
