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
}

pub fn router(state: Arc<AdminState>) -> Router {
    let api = Router::new()
        .route("/api/v1/status", get(status))
        .route("/api/v1/rescan", post(rescan))
        .route("/api/v1/repos", get(repos))
        .route("/api/v1/repos/{rid}", get(repo))
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
