//! Admin API for tenants, quotas, hosts, deny lists, usage, the fetch queue, seed identities,
//! config reload, backup/restore and declarative apply (docs/admin-api.yaml).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use seedd_api as api;

use super::status::error_response;
use super::{convert, error, internal, parse_nid, parse_rid, AdminState};
use crate::control::Control;
use seedd_core::tenant::{State as TenantState, Tenant};

pub(super) fn routes() -> Router<Arc<AdminState>> {
    Router::new()
        .route("/api/v1/repos/{rid}/purge", post(purge))
        .route("/api/v1/tenants", get(list).post(create))
        .route("/api/v1/tenants/{name}", get(show).delete(remove))
        .route("/api/v1/tenants/{name}/suspend", post(suspend))
        .route("/api/v1/tenants/{name}/resume", post(resume))
        .route("/api/v1/tenants/{name}/quota", put(quota))
        .route("/api/v1/tenants/{name}/rate", put(rate))
        .route("/api/v1/tenants/{name}/hosts", post(host_add))
        .route("/api/v1/tenants/{name}/hosts/{host}", delete(host_rm))
        .route("/api/v1/deny", get(deny_ls))
        .route("/api/v1/deny/repos", post(deny_repo_add))
        .route("/api/v1/deny/repos/{rid}", delete(deny_repo_rm))
        .route("/api/v1/deny/nodes", post(deny_node_add))
        .route("/api/v1/deny/nodes/{nid}", delete(deny_node_rm))
        .route("/api/v1/queue", get(queue))
        .route("/api/v1/usage", get(usage))
        .route("/api/v1/identities", get(identities).post(identity_create))
        .route("/api/v1/config/reload", post(reload))
        .route("/api/v1/backup", get(backup))
        .route("/api/v1/restore", post(restore))
        .route("/api/v1/apply", post(apply))
}

/// Run a blocking tenant operation and answer with the tenant view.
async fn tenant_op(
    state: &AdminState,
    name: String,
    f: impl FnOnce(&Control, &str) -> Result<(), crate::control::ControlError> + Send + 'static,
) -> Response {
    let ctl = state.control.clone();
    let r = tokio::task::spawn_blocking(move || {
        f(&ctl, &name)?;
        Ok::<_, crate::control::ControlError>(tenant_view(&ctl, &name))
    })
    .await;
    match r {
        Ok(Ok(Some(v))) => Json(v).into_response(),
        Ok(Ok(None)) => error(404, "tenant vanished"),
        Ok(Err(e)) => error_response(e),
        Err(e) => internal(e),
    }
}

/// A tenant as the API shows it: the record, its usage, and per repository whether it owns it.
fn tenant_view(ctl: &Control, name: &str) -> Option<api::Tenant> {
    let (t, u) = ctl.tenants.get(name)?;
    Some(convert::tenant(t, u, |r| {
        ctl.tenants.owner(&r.rid).is_some_and(|(o, _)| o == name)
    }))
}

async fn list(State(state): State<Arc<AdminState>>) -> Response {
    let ctl = &state.control;
    let tenants = ctl
        .tenants
        .list()
        .iter()
        .filter_map(|(t, _)| tenant_view(ctl, &t.name))
        .collect();
    Json(api::TenantList { tenants }).into_response()
}

async fn create(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<api::TenantCreate>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let ctl = state.control.clone();
    let Json(b) = match body {
        Ok(b) => b,
        Err(e) => {
            return error(
                400,
                format!("expected {{\"name\": …, \"hosts\": [...]}}: {e}"),
            )
        }
    };
    let mut t = Tenant::new(&b.name);
    t.hosts = b.hosts;
    if let Some(i) = b.identity {
        t.identity = i;
    }
    t.quotas = b.quotas.map(convert::quotas_in).unwrap_or_default();
    t.rate = b.rate.map(convert::rate_in).unwrap_or_default();
    let name = b.name.clone();
    match tokio::task::spawn_blocking(move || {
        ctl.tenants.create(t)?;
        ctl.changed();
        Ok::<_, seedd_core::tenant::TenantError>(tenant_view(&ctl, &name))
    })
    .await
    {
        Ok(Ok(Some(v))) => (StatusCode::CREATED, Json(v)).into_response(),
        Ok(Ok(None)) => error(404, "tenant vanished"),
        Ok(Err(e)) => error_response(e),
        Err(e) => internal(e),
    }
}

async fn show(State(state): State<Arc<AdminState>>, Path(name): Path<String>) -> Response {
    match tenant_view(&state.control, &name) {
        Some(v) => Json(v).into_response(),
        None => error(404, seedd_core::tenant::TenantError::Unknown(name)),
    }
}

async fn remove(State(state): State<Arc<AdminState>>, Path(name): Path<String>) -> Response {
    let ctl = state.control.clone();
    let limiter_name = name.clone();
    match tokio::task::spawn_blocking(move || ctl.remove_tenant(&name).map(|p| (name, p))).await {
        Ok(Ok((name, purged))) => {
            tracing::info!(tenant = %limiter_name, purged = purged.len(), "tenant removed via admin API");
            Json(api::TenantRemoved {
                name,
                removed: true,
                purged: purged.iter().map(ToString::to_string).collect(),
            })
            .into_response()
        }
        Ok(Err(e)) => error_response(e),
        Err(e) => internal(e),
    }
}

async fn suspend(State(state): State<Arc<AdminState>>, Path(name): Path<String>) -> Response {
    tenant_op(&state, name, |c, n| {
        c.tenants.set_state(n, TenantState::Suspended)?;
        c.changed();
        Ok(())
    })
    .await
}

async fn resume(State(state): State<Arc<AdminState>>, Path(name): Path<String>) -> Response {
    tenant_op(&state, name, |c, n| {
        c.tenants.set_state(n, TenantState::Active)?;
        c.changed();
        Ok(())
    })
    .await
}

/// A patch body (`{"k": 5}` sets, `{"k": null}` clears, an absent key keeps the old value;
/// anything but an object changes nothing), or the 400 answer naming the bad key.
fn patch<T: serde::de::DeserializeOwned + Default>(
    body: serde_json::Value,
    keys: &[&str],
) -> Result<T, Box<Response>> {
    if !body.is_object() {
        return Ok(T::default());
    }
    let bad = |key: &str| {
        Box::new(error(
            400,
            format!("{key}: expected a non-negative integer or null"),
        ))
    };
    for key in keys {
        if body.get(key).is_some_and(|v| !(v.is_null() || v.is_u64())) {
            return Err(bad(key));
        }
    }
    serde_json::from_value(body).map_err(|_| bad(&keys.join(", ")))
}

async fn quota(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    Json(body): Json<serde_json::Value>,
) -> Response {
    let Some((t, _)) = state.control.tenants.get(&name) else {
        return error(404, seedd_core::tenant::TenantError::Unknown(name));
    };
    let p: api::QuotasPatch = match patch(body, &["repos", "bytes", "egress_bytes_per_day"]) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let q = convert::quotas_in(p.apply(convert::quotas(t.quotas)));
    tenant_op(&state, name, move |c, n| {
        Ok(c.tenants.set_quotas(n, q).map(|_| ())?)
    })
    .await
}

async fn rate(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    Json(body): Json<serde_json::Value>,
) -> Response {
    let Some((t, _)) = state.control.tenants.get(&name) else {
        return error(404, seedd_core::tenant::TenantError::Unknown(name));
    };
    let p: api::RatePatch = match patch(body, &["requests_per_second", "burst"]) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let r = convert::rate_in(p.apply(convert::rate(t.rate)));
    tenant_op(&state, name, move |c, n| {
        Ok(c.tenants.set_rate(n, r).map(|_| ())?)
    })
    .await
}

async fn host_add(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    body: Result<Json<api::HostRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Ok(Json(b)) = body else {
        return error(400, "expected {\"host\": \"acme.seed.example\"}");
    };
    tenant_op(&state, name, move |c, n| {
        Ok(c.tenants.add_host(n, &b.host).map(|_| ())?)
    })
    .await
}

async fn host_rm(
    State(state): State<Arc<AdminState>>,
    Path((name, host)): Path<(String, String)>,
) -> Response {
    tenant_op(&state, name, move |c, n| {
        Ok(c.tenants.remove_host(n, &host).map(|_| ())?)
    })
    .await
}

async fn purge(State(state): State<Arc<AdminState>>, Path(rid): Path<String>) -> Response {
    let ctl = state.control.clone();
    let rid = match parse_rid(&rid) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    match tokio::task::spawn_blocking(move || ctl.purge(rid)).await {
        Ok(Ok(tenants)) => Json(api::PurgeResponse {
            rid: rid.to_string(),
            purged: true,
            tenants,
        })
        .into_response(),
        Ok(Err(e)) => error_response(e),
        Err(e) => internal(e),
    }
}

async fn deny_ls(State(state): State<Arc<AdminState>>) -> Response {
    let ctl = &state.control;
    let (repos, nodes) = match ctl.index.policies() {
        Ok(p) => p,
        Err(e) => return internal(e),
    };
    let mut entries = api::DenyEntries::default();
    entries.repos.extend(
        repos
            .into_iter()
            .filter(|(_, p)| matches!(p, seedd_core::index::policy::RepoPolicy::Block))
            .map(|(rid, _)| api::DenyRepoEntry {
                rid: rid.to_string(),
                tenant: None,
            }),
    );
    entries.nodes.extend(
        nodes
            .into_iter()
            .filter(|(_, p)| matches!(p, seedd_core::index::policy::NodePolicy::Block))
            .map(|(nid, _)| api::DenyNodeEntry {
                nid: nid.to_string(),
                tenant: None,
            }),
    );
    for (t, _) in ctl.tenants.list() {
        entries
            .repos
            .extend(t.deny.repos.iter().map(|rid| api::DenyRepoEntry {
                rid: rid.to_string(),
                tenant: Some(t.name.clone()),
            }));
        entries
            .nodes
            .extend(t.deny.nodes.iter().map(|nid| api::DenyNodeEntry {
                nid: nid.to_string(),
                tenant: Some(t.name.clone()),
            }));
    }
    Json(entries).into_response()
}

#[derive(serde::Deserialize, Default)]
struct TenantQuery {
    tenant: Option<String>,
}

/// Deny or allow again a repository: for a tenant, or globally (operator `block` policy;
/// the repository stops being served and fetched; `seedctl repo purge` frees the disk).
fn deny_repo(
    ctl: &Control,
    rid: seedd_proto::crypto::RepoId,
    tenant: Option<&str>,
    deny: bool,
) -> Result<api::DenyRepoChange, crate::control::ControlError> {
    match tenant {
        Some(t) => {
            ctl.tenants.deny_repo(t, rid, deny)?;
        }
        None => {
            if deny {
                ctl.policies
                    .set_repo(&rid, Some(seedd_core::index::policy::RepoPolicy::Block))?;
            } else if ctl.policies.denied(&rid) {
                ctl.policies.set_repo(&rid, None)?;
            }
            ctl.changed();
        }
    }
    Ok(api::DenyRepoChange {
        rid: rid.to_string(),
        tenant: tenant.map(str::to_owned),
        denied: deny,
    })
}

fn deny_node(
    ctl: &Control,
    net: &seedd_p2p::net::Net,
    nid: seedd_proto::crypto::NodeId,
    tenant: Option<&str>,
    deny: bool,
) -> Result<api::DenyNodeChange, crate::control::ControlError> {
    match tenant {
        Some(t) => {
            ctl.tenants.deny_node(t, nid, deny)?;
        }
        None => {
            use seedd_core::index::policy::NodePolicy;
            if deny {
                ctl.policies.set_node(&nid, Some(NodePolicy::Block))?;
                net.disconnect(nid);
            } else if ctl.policies.blocked(&nid) {
                ctl.policies.set_node(&nid, None)?;
            }
        }
    }
    Ok(api::DenyNodeChange {
        nid: nid.to_string(),
        tenant: tenant.map(str::to_owned),
        denied: deny,
    })
}

fn answer<T: serde::Serialize>(r: Result<T, crate::control::ControlError>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => error_response(e),
    }
}

/// Parse the repository id of a deny-list request and apply it.
fn deny_repo_request(state: &AdminState, rid: &str, tenant: Option<&str>, deny: bool) -> Response {
    match parse_rid(rid) {
        Ok(rid) => answer(deny_repo(&state.control, rid, tenant, deny)),
        Err(r) => *r,
    }
}

/// Parse the node id of a deny-list request and apply it.
fn deny_node_request(state: &AdminState, nid: &str, tenant: Option<&str>, deny: bool) -> Response {
    match parse_nid(nid) {
        Ok(nid) => answer(deny_node(&state.control, &state.net, nid, tenant, deny)),
        Err(r) => *r,
    }
}

async fn deny_repo_add(
    State(state): State<Arc<AdminState>>,
    Json(b): Json<api::DenyRequest>,
) -> Response {
    deny_repo_request(
        &state,
        b.rid.as_deref().unwrap_or(""),
        b.tenant.as_deref(),
        true,
    )
}

async fn deny_repo_rm(
    State(state): State<Arc<AdminState>>,
    Path(rid): Path<String>,
    Query(q): Query<TenantQuery>,
) -> Response {
    deny_repo_request(&state, &rid, q.tenant.as_deref(), false)
}

async fn deny_node_add(
    State(state): State<Arc<AdminState>>,
    Json(b): Json<api::DenyRequest>,
) -> Response {
    deny_node_request(
        &state,
        b.nid.as_deref().unwrap_or(""),
        b.tenant.as_deref(),
        true,
    )
}

async fn deny_node_rm(
    State(state): State<Arc<AdminState>>,
    Path(nid): Path<String>,
    Query(q): Query<TenantQuery>,
) -> Response {
    deny_node_request(&state, &nid, q.tenant.as_deref(), false)
}

async fn queue(State(state): State<Arc<AdminState>>) -> Response {
    let (running, queued) = state.fetcher.queue();
    Json(api::QueueResponse {
        active: running
            .iter()
            .map(|(rid, nid, seconds)| api::QueueActive {
                rid: rid.to_string(),
                from: nid.to_string(),
                seconds: *seconds,
            })
            .collect(),
        queued: queued
            .iter()
            .map(|(rid, nid)| api::QueueQueued {
                rid: rid.to_string(),
                from: nid.to_string(),
            })
            .collect(),
    })
    .into_response()
}

async fn usage(State(state): State<Arc<AdminState>>, Query(q): Query<TenantQuery>) -> Response {
    let usage: Vec<api::TenantUsage> = state
        .control
        .tenants
        .list()
        .into_iter()
        .filter(|(t, _)| q.tenant.as_ref().is_none_or(|n| n == &t.name))
        .map(|(t, u)| api::TenantUsage {
            tenant: t.name,
            state: convert::state(t.state),
            identity: t.identity,
            repos: u.repos,
            quota_repos: t.quotas.repos,
            stored_bytes: u.stored_bytes,
            quota_bytes: t.quotas.bytes,
            egress_today_bytes: u.egress_today_bytes,
            quota_egress_bytes_per_day: t.quotas.egress_bytes_per_day,
        })
        .collect();
    if let Some(n) = &q.tenant {
        if usage.is_empty() {
            return error(404, seedd_core::tenant::TenantError::Unknown(n.clone()));
        }
    }
    Json(api::UsageResponse { usage }).into_response()
}

async fn identities(State(state): State<Arc<AdminState>>) -> Response {
    let identities = state
        .identities
        .list()
        .into_iter()
        .map(convert::identity)
        .collect();
    Json(api::IdentitiesResponse { identities }).into_response()
}

async fn identity_create(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<api::IdentityCreate>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(spec) = match body {
        Ok(b) => b,
        Err(e) => {
            return error(
                400,
                format!("expected {{\"name\": …, \"listen\": [\"ip:port\"]}}: {e}"),
            )
        }
    };
    match state
        .identities
        .start(convert::identity_spec(spec), true)
        .await
    {
        Ok(info) => (StatusCode::CREATED, Json(convert::identity(info))).into_response(),
        Err(e) => error_response(e),
    }
}

async fn reload(State(state): State<Arc<AdminState>>) -> Response {
    let r = state.reload.clone();
    match tokio::task::spawn_blocking(move || r()).await {
        Ok(Ok(changes)) => Json(api::ReloadResponse {
            reloaded: true,
            changes,
        })
        .into_response(),
        Ok(Err(e)) => error(400, e),
        Err(e) => internal(e),
    }
}

async fn backup(State(state): State<Arc<AdminState>>) -> Response {
    let ctl = state.control.clone();
    let specs = state.identities.specs();
    let keys_dir = state.data_dir.join("keys");
    let mut keys = vec![(
        seedd_core::config::DEFAULT_IDENTITY.to_owned(),
        state.key_path.clone(),
    )];
    for s in &specs {
        keys.push((s.name.clone(), keys_dir.join(&s.name).join("radicle")));
    }
    let nid = state.nid;
    match tokio::task::spawn_blocking(move || {
        crate::backup::export(&nid, &keys, specs, &ctl.index, &ctl.tenants)
    })
    .await
    {
        Ok(Ok(b)) => {
            tracing::info!(
                tenants = b.tenants.len(),
                keys = b.keys.len(),
                "backup taken"
            );
            Json(convert::backup(b)).into_response()
        }
        Ok(Err(e)) => internal(e),
        Err(e) => internal(e),
    }
}

async fn restore(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<api::Backup>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let ctl = state.control.clone();
    let b: crate::backup::Backup = match body
        .map_err(|e| e.body_text())
        .and_then(|Json(b)| convert::checked(b).map_err(|e| e.to_string()))
    {
        Ok(b) => b,
        Err(e) => return error(400, format!("not a seedd backup: {e}")),
    };
    let mut warnings = Vec::new();
    if b.nid != state.nid.to_string() {
        warnings.push(format!(
            "the backup is of node {} but this node is {}: keys are restored only offline (seedctl restore --data-dir)",
            b.nid, state.nid
        ));
    }
    match tokio::task::spawn_blocking(move || {
        let r = crate::backup::restore_state(&b, &ctl.index, &ctl.tenants, &ctl.policies, false);
        ctl.changed();
        r
    })
    .await
    {
        Ok(Ok(r)) => Json(api::RestoreResponse {
            restored: convert::restored(r),
            warnings,
        })
        .into_response(),
        Ok(Err(e)) => error(400, e),
        Err(e) => internal(e),
    }
}

async fn apply(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<api::ApplyRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let ctl = state.control.clone();
    let req: crate::control::ApplyRequest = match body
        .map_err(|e| e.body_text())
        .and_then(|Json(b)| convert::checked(b).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => return error(400, format!("expected {{\"tenants\": [...]}}: {e}")),
    };
    let dry = req.dry_run;
    match tokio::task::spawn_blocking(move || ctl.apply(&req)).await {
        Ok(Ok(changes)) => Json(api::ApplyResponse {
            changes,
            applied: !dry,
        })
        .into_response(),
        Ok(Err(e)) => error_response(e),
        Err(e) => internal(e),
    }
}
