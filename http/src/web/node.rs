//! Index documents, node info, stats and seeding policies (http-api.md §1.2).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use seedd_core::index::policy::RepoPolicy;
use seedd_web_api::{
    ApiRoot, ConnectionLimits, DefaultSeedingPolicy, Httpd, Info, Link, Node, NodeConfig,
    NodeIdentity, NodeLimits, PeersConfig, PolicyEntry, RateLimit, RateLimits, SeedingPolicy, Ssh,
    Stats, Total, V1Root,
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
    let nid = (state.web.node_of)(scope.tenant()).nid;
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

/// How long routes are kept, as radicle-node's `limits.routingMaxAge` (one week, seconds).
const ROUTING_MAX_AGE_SECS: u64 = 7 * 24 * 60 * 60;
/// Gossip older than this is ignored, as radicle-node's `limits.gossipMaxAge` (two weeks).
const GOSSIP_MAX_AGE_SECS: u64 = 14 * 24 * 60 * 60;
/// radicle-node's `limits.maxOpenFiles` default (seedd has no such setting).
const MAX_OPEN_FILES: usize = 4096;

/// The `/node` object: the node serving this host, its configuration as radicle-node's
/// `Config` serialises (addresses, the live default policy, limits) and the host's `[web]`
/// profile; seedd is running when it answers.
fn node_json(state: &HttpState, scope: &Scope) -> Node {
    let facts = (state.web.node_of)(scope.tenant());
    let seeding_policy = match state.tenancy.policies.default_policy() {
        RepoPolicy::Allow { scope } => DefaultSeedingPolicy::Allow {
            scope: scope.to_string(),
        },
        RepoPolicy::Block => DefaultSeedingPolicy::Block,
    };
    let c = facts.config;
    let bucket = |(fill_rate, capacity): (f64, f64)| RateLimit {
        fill_rate,
        capacity,
    };
    let set = |s: String| (!s.is_empty()).then_some(s);
    Node {
        id: facts.nid.to_string(),
        agent: agent(),
        config: Some(NodeConfig {
            alias: facts.alias,
            // A seed accepts and dials peers it learns of, not only the configured ones.
            peers: PeersConfig::Dynamic,
            listen: c.listen,
            connect: c.connect,
            external_addresses: c.external_addresses,
            log: c.log.to_owned(),
            network: "main".to_owned(),
            relay: c.relay,
            limits: NodeLimits {
                routing_max_size: c.max_routes,
                routing_max_age: ROUTING_MAX_AGE_SECS,
                fetch_concurrency: c.max_concurrent_fetches,
                gossip_max_age: GOSSIP_MAX_AGE_SECS,
                max_open_files: MAX_OPEN_FILES,
                rate: RateLimits {
                    inbound: bucket(c.inbound_rate),
                    outbound: bucket(c.outbound_rate),
                },
                connection: ConnectionLimits {
                    inbound: c.max_inbound,
                    outbound: c.max_outbound,
                },
            },
            workers: c.max_concurrent_serves,
            seeding_policy,
        }),
        state: "running".to_owned(),
        avatar_url: set(facts.web.avatar_url),
        banner_url: set(facts.web.banner_url),
        description: set(facts.web.description),
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
        // Name search is served from the index's census (`repos::search`); "most seeded" and
        // "recently active" are listings the explorer then asks for.
        httpd: Httpd {
            search_available: true,
        },
    };
    cached(TEN_MINUTES, &body)
}

/// `{repos: {total}}`: the repositories this host lists (not the whole inventory, so page
/// counts agree with `/repos?show=all`). From the index's listing: O(1) on the node's hosts
/// (plus the excluded set), O(the tenant's repositories) on a tenant's.
pub(super) async fn stats(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
) -> Result<Response, WebError> {
    let total =
        super::repos::Listing::of(&state, &scope, seedd_core::index::ListOrder::Rid).len(&state);
    Ok(Json(Stats {
        repos: Total { total },
    })
    .into_response())
}

/// `{alias, did, ssh: {full, hash}}`; the alias is ours for the node serving this host, else
/// the one the node announced (null when the seed holds no announcement of it).
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
    let ours = (state.web.node_of)(scope.tenant());
    let alias = if ours.nid == nid {
        Some(ours.alias)
    } else {
        state.web.aliases.get(&state.index, &nid)
    };
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
    let rids: Vec<String> = if (state.web.node_of)(scope.tenant()).nid == nid {
        visible_repos(&state, &scope)
            .await?
            .iter()
            .map(ToString::to_string)
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
        .map(|rid| PolicyEntry {
            rid: rid.to_string(),
            policy: seeding_policy(state.tenancy.policies.repo(rid)),
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
