//! Index documents, node info, stats and seeding policies (http-api.md §1.2).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use seedd_core::index::policy::RepoPolicy;
use seedd_web_api::{
    ApiRoot, Httpd, Info, Link, Node, NodeIdentity, PolicyEntry, SeedingPolicy, Ssh, Stats, Total,
    V1Root,
};

use super::{cached, visible_repos, Scope, WebError, API_VERSION, TEN_MINUTES};
use crate::HttpState;

/// `agent` of `/node`: what radicle nodes announce, in the same `/name:version/` form.
fn agent() -> String {
    format!("/seedd:{}/", env!("CARGO_PKG_VERSION"))
}

pub(super) async fn api_root() -> Response {
    Json(ApiRoot {
        path: "/api".to_owned(),
        links: vec![Link::get("/v1", "v1")],
    })
    .into_response()
}

pub(super) async fn v1_root(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
) -> Response {
    let nid = (state.web.node_of)(scope.tenant());
    Json(V1Root {
        message: "Welcome!".to_owned(),
        service: "seedd".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        api_version: API_VERSION.to_owned(),
        nid: nid.to_string(),
        path: "/api/v1".to_owned(),
        links: vec![
            Link::get("/repos", "repos"),
            Link::get("/repos/:rid", "repo"),
            Link::get("/info", "info"),
            Link::get("/node", "node"),
            Link::get("/nodes/:nid", "node"),
            Link::get("/delegates/:did/repos", "repos"),
            Link::get("/stats", "stats"),
        ],
    })
    .into_response()
}

/// The `/node` object. `config` is null (the explorer then only misses the node address and
/// the policy explainer, http-api.md §1.2); seedd is running when it answers.
fn node_json(state: &HttpState, scope: &Scope) -> Node {
    let nid = (state.web.node_of)(scope.tenant());
    Node {
        id: nid.to_string(),
        agent: agent(),
        config: None,
        state: "running".to_owned(),
    }
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
    let body = Info {
        node: node_json(&state, &scope),
        httpd: Httpd {
            search_available: false,
        },
    };
    cached(TEN_MINUTES, &body)
}

/// `{repos: {total}}`: the repositories this host lists (not the whole inventory, so page
/// counts agree with `/repos?show=all`).
pub(super) async fn stats(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
) -> Result<Response, WebError> {
    let total = super::repos::listable(&state, &scope).await?.len();
    Ok(Json(Stats {
        repos: Total { total },
    })
    .into_response())
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
    Ok(Json(NodeIdentity {
        alias,
        did: nid.to_did(),
        ssh: Ssh { full, hash },
    })
    .into_response())
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
    let out: Vec<PolicyEntry> = visible_repos(&state, &scope)
        .await?
        .iter()
        .map(|r| PolicyEntry {
            rid: r.rid.to_string(),
            policy: seeding_policy(state.tenancy.policies.repo(&r.rid)),
        })
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
    Ok(Json(seeding_policy(state.tenancy.policies.repo(&r.rid))).into_response())
}

/// The effective policy as the API shows it.
fn seeding_policy(p: RepoPolicy) -> SeedingPolicy {
    match p {
        RepoPolicy::Allow { scope } => SeedingPolicy::Allow {
            scope: scope.to_string(),
        },
        RepoPolicy::Block => SeedingPolicy::Block,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use seedd_core::index::policy::Scope;

    /// The API's policy body is the JSON the index's policy type has always serialised to.
    #[test]
    fn seeding_policies_keep_their_json() {
        for p in [
            RepoPolicy::Allow { scope: Scope::All },
            RepoPolicy::Allow {
                scope: Scope::Followed,
            },
            RepoPolicy::Block,
        ] {
            assert_eq!(
                serde_json::to_value(seeding_policy(p)).unwrap(),
                serde_json::to_value(p).unwrap()
            );
        }
    }
}
