//! Index documents, node info, stats and seeding policies (http-api.md §1.2).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::{cached, visible_repos, Scope, WebError, API_VERSION, TEN_MINUTES};
use crate::HttpState;

/// `agent` of `/node`: what radicle nodes announce, in the same `/name:version/` form.
fn agent() -> String {
    format!("/seedd:{}/", env!("CARGO_PKG_VERSION"))
}

fn link(href: &str, rel: &str) -> Value {
    json!({ "href": href, "rel": rel, "type": "GET" })
}

pub(super) async fn api_root() -> Response {
    Json(json!({ "path": "/api", "links": [link("/v1", "v1")] })).into_response()
}

pub(super) async fn v1_root(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
) -> Response {
    let nid = (state.web.node_of)(scope.tenant());
    Json(json!({
        "message": "Welcome!",
        "service": "seedd",
        "version": env!("CARGO_PKG_VERSION"),
        "apiVersion": API_VERSION,
        "nid": nid.to_string(),
        "path": "/api/v1",
        "links": [
            link("/repos", "repos"),
            link("/repos/:rid", "repo"),
            link("/info", "info"),
            link("/node", "node"),
            link("/nodes/:nid", "node"),
            link("/delegates/:did/repos", "repos"),
            link("/stats", "stats"),
        ],
    }))
    .into_response()
}

/// The `/node` object. `config` is null (the explorer then only misses the node address and
/// the policy explainer, http-api.md §1.2); seedd is running when it answers.
fn node_json(state: &HttpState, scope: &Scope) -> Value {
    let nid = (state.web.node_of)(scope.tenant());
    json!({ "id": nid.to_string(), "agent": agent(), "config": null, "state": "running" })
}

pub(super) async fn node(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
) -> Response {
    cached(TEN_MINUTES, &node_json(&state, &scope))
}

pub(super) async fn info(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
) -> Response {
    let body = json!({ "node": node_json(&state, &scope), "httpd": { "searchAvailable": false } });
    cached(TEN_MINUTES, &body)
}

/// `{repos: {total}}`: the repositories this host lists (not the whole inventory, so page
/// counts agree with `/repos?show=all`).
pub(super) async fn stats(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
) -> Result<Response, WebError> {
    let total = super::repos::listable(&state, &scope).await?.len();
    Ok(Json(json!({ "repos": { "total": total } })).into_response())
}

/// `{alias, did, ssh: {full, hash}}`; the alias is ours for the node serving this host, else
/// null (seedd keeps no alias per remote node here yet).
pub(super) async fn node_by_id(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path(nid): Path<String>,
) -> Result<Response, WebError> {
    let nid = super::parse_nid(&nid)?;
    let key = ssh_key::PublicKey::from(ssh_key::public::KeyData::Ed25519(
        ssh_key::public::Ed25519PublicKey(*nid.as_bytes()),
    ));
    let full = key
        .to_openssh()
        .map_err(|e| WebError::BadRequest(format!("invalid node key: {e}")))?;
    let hash = key.fingerprint(ssh_key::HashAlg::Sha256).to_string();
    let alias = ((state.web.node_of)(scope.tenant()) == nid).then(|| state.web.alias.clone());
    Ok(
        Json(json!({ "alias": alias, "did": nid.to_did(), "ssh": { "full": full, "hash": hash } }))
            .into_response(),
    )
}

/// The inventory of the node serving this host: the repositories it lists; other nodes' are
/// not known here (empty).
pub(super) async fn inventory(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path(nid): Path<String>,
) -> Result<Response, WebError> {
    let nid = super::parse_nid(&nid)?;
    let rids: Vec<String> = if (state.web.node_of)(scope.tenant()) == nid {
        visible_repos(&state, &scope)
            .await?
            .iter()
            .map(|r| r.rid.to_string())
            .collect()
    } else {
        Vec::new()
    };
    Ok(Json(rids).into_response())
}

/// `[{rid, policy: {policy, scope?}}]` of the repositories this host shows.
pub(super) async fn policies(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
) -> Result<Response, WebError> {
    let out: Vec<Value> = visible_repos(&state, &scope)
        .await?
        .iter()
        .map(|r| json!({ "rid": r.rid.to_string(), "policy": state.tenancy.policies.repo(&r.rid) }))
        .collect();
    Ok(Json(out).into_response())
}

/// `{policy: "allow", scope}` or `{policy: "block"}` (the effective policy, default included).
pub(super) async fn policy(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path(rid): Path<String>,
) -> Result<Response, WebError> {
    let r = super::repo(&state, &scope, &rid)?;
    Ok(Json(state.tenancy.policies.repo(&r.rid)).into_response())
}
