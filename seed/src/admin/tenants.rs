//! Admin API for tenants, quotas, hosts, deny lists, usage, the fetch queue, seed identities,
//! config reload, backup/restore and declarative apply (docs/admin-api.yaml).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use seedd_api as api;

use super::failure::Failure;
use super::{convert, parse_nid, parse_rid, AdminState};
use crate::control::Control;
use seedd_core::tenant::{State as TenantState, Tenant, TenantError};

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
) -> Result<Json<api::Tenant>, Failure> {
    let ctl = state.control.clone();
    tokio::task::spawn_blocking(move || {
        f(&ctl, &name)?;
        Ok::<_, crate::control::ControlError>(tenant_view(&ctl, &name))
    })
    .await??
    .map(Json)
    .ok_or_else(|| Failure::not_found("tenant vanished"))
}

/// A tenant as the API shows it: the record, its usage, and per repository whether it owns it.
fn tenant_view(ctl: &Control, name: &str) -> Option<api::Tenant> {
    let (t, u) = ctl.tenants.get(name)?;
    Some(convert::tenant(t, u, |r| {
        ctl.tenants.owner(&r.rid).is_some_and(|(o, _)| o == name)
    }))
}

async fn list(State(state): State<Arc<AdminState>>) -> Json<api::TenantList> {
    let ctl = &state.control;
    let tenants = ctl
        .tenants
        .list()
        .iter()
        .filter_map(|(t, _)| tenant_view(ctl, &t.name))
        .collect();
    Json(api::TenantList { tenants })
}

async fn create(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<api::TenantCreate>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<api::Tenant>), Failure> {
    let ctl = state.control.clone();
    let Json(b) = body.map_err(|e| {
        Failure::bad_request(format!("expected {{\"name\": …, \"hosts\": [...]}}: {e}"))
    })?;
    let mut t = Tenant::new(&b.name);
    t.hosts = b.hosts;
    if let Some(i) = b.identity {
        t.identity = i;
    }
    t.quotas = b.quotas.map(convert::quotas_in).unwrap_or_default();
    t.rate = b.rate.map(convert::rate_in).unwrap_or_default();
    let name = b.name.clone();
    let v = tokio::task::spawn_blocking(move || {
        ctl.tenants.create(t)?;
        ctl.changed();
        Ok::<_, TenantError>(tenant_view(&ctl, &name))
    })
    .await??
    .ok_or_else(|| Failure::not_found("tenant vanished"))?;
    Ok((StatusCode::CREATED, Json(v)))
}

async fn show(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
) -> Result<Json<api::Tenant>, Failure> {
    match tenant_view(&state.control, &name) {
        Some(v) => Ok(Json(v)),
        None => Err(TenantError::Unknown(name).into()),
    }
}

async fn remove(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
) -> Result<Json<api::TenantRemoved>, Failure> {
    let ctl = state.control.clone();
    let limiter_name = name.clone();
    let (name, purged) =
        tokio::task::spawn_blocking(move || ctl.remove_tenant(&name).map(|p| (name, p))).await??;
    tracing::info!(tenant = %limiter_name, purged = purged.len(), "tenant removed via admin API");
    Ok(Json(api::TenantRemoved {
        name,
        removed: true,
        purged: purged.iter().map(ToString::to_string).collect(),
    }))
}

async fn suspend(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
) -> Result<Json<api::Tenant>, Failure> {
    tenant_op(&state, name, |c, n| {
        c.tenants.set_state(n, TenantState::Suspended)?;
        c.changed();
        Ok(())
    })
    .await
}

async fn resume(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
) -> Result<Json<api::Tenant>, Failure> {
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
) -> Result<T, Failure> {
    if !body.is_object() {
        return Ok(T::default());
    }
    let bad =
        |key: &str| Failure::bad_request(format!("{key}: expected a non-negative integer or null"));
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
) -> Result<Json<api::Tenant>, Failure> {
    let Some((t, _)) = state.control.tenants.get(&name) else {
        return Err(TenantError::Unknown(name).into());
    };
    let p: api::QuotasPatch = patch(body, &["repos", "bytes", "egress_bytes_per_day"])?;
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
) -> Result<Json<api::Tenant>, Failure> {
    let Some((t, _)) = state.control.tenants.get(&name) else {
        return Err(TenantError::Unknown(name).into());
    };
    let p: api::RatePatch = patch(body, &["requests_per_second", "burst"])?;
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
) -> Result<Json<api::Tenant>, Failure> {
    let Ok(Json(b)) = body else {
        return Err(Failure::bad_request(
            "expected {\"host\": \"acme.seed.example\"}",
        ));
    };
    tenant_op(&state, name, move |c, n| {
        Ok(c.tenants.add_host(n, &b.host).map(|_| ())?)
    })
    .await
}

async fn host_rm(
    State(state): State<Arc<AdminState>>,
    Path((name, host)): Path<(String, String)>,
) -> Result<Json<api::Tenant>, Failure> {
    tenant_op(&state, name, move |c, n| {
        Ok(c.tenants.remove_host(n, &host).map(|_| ())?)
    })
    .await
}

async fn purge(
    State(state): State<Arc<AdminState>>,
    Path(rid): Path<String>,
) -> Result<Json<api::PurgeResponse>, Failure> {
    let ctl = state.control.clone();
    let rid = parse_rid(&rid)?;
    let tenants = tokio::task::spawn_blocking(move || ctl.purge(rid)).await??;
    Ok(Json(api::PurgeResponse {
        rid: rid.to_string(),
        purged: true,
        tenants,
    }))
}

async fn deny_ls(State(state): State<Arc<AdminState>>) -> Result<Json<api::DenyEntries>, Failure> {
    let ctl = &state.control;
    let (repos, nodes) = ctl.index.policies().map_err(Failure::internal)?;
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
    Ok(Json(entries))
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

/// Parse the repository id of a deny-list request and apply it.
fn deny_repo_request(
    state: &AdminState,
    rid: &str,
    tenant: Option<&str>,
    deny: bool,
) -> Result<Json<api::DenyRepoChange>, Failure> {
    let rid = parse_rid(rid)?;
    Ok(Json(deny_repo(&state.control, rid, tenant, deny)?))
}

/// Parse the node id of a deny-list request and apply it.
fn deny_node_request(
    state: &AdminState,
    nid: &str,
    tenant: Option<&str>,
    deny: bool,
) -> Result<Json<api::DenyNodeChange>, Failure> {
    let nid = parse_nid(nid)?;
    Ok(Json(deny_node(
        &state.control,
        &state.net,
        nid,
        tenant,
        deny,
    )?))
}

async fn deny_repo_add(
    State(state): State<Arc<AdminState>>,
    Json(b): Json<api::DenyRequest>,
) -> Result<Json<api::DenyRepoChange>, Failure> {
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
) -> Result<Json<api::DenyRepoChange>, Failure> {
    deny_repo_request(&state, &rid, q.tenant.as_deref(), false)
}

async fn deny_node_add(
    State(state): State<Arc<AdminState>>,
    Json(b): Json<api::DenyRequest>,
) -> Result<Json<api::DenyNodeChange>, Failure> {
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
) -> Result<Json<api::DenyNodeChange>, Failure> {
    deny_node_request(&state, &nid, q.tenant.as_deref(), false)
}

async fn queue(State(state): State<Arc<AdminState>>) -> Json<api::QueueResponse> {
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
}

async fn usage(
    State(state): State<Arc<AdminState>>,
    Query(q): Query<TenantQuery>,
) -> Result<Json<api::UsageResponse>, Failure> {
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
            return Err(TenantError::Unknown(n.clone()).into());
        }
    }
    Ok(Json(api::UsageResponse { usage }))
}

async fn identities(State(state): State<Arc<AdminState>>) -> Json<api::IdentitiesResponse> {
    let identities = state
        .identities
        .list()
        .into_iter()
        .map(convert::identity)
        .collect();
    Json(api::IdentitiesResponse { identities })
}

async fn identity_create(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<api::IdentityCreate>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<api::IdentityInfo>), Failure> {
    let Json(spec) = body.map_err(|e| {
        Failure::bad_request(format!(
            "expected {{\"name\": …, \"listen\": [\"ip:port\"]}}: {e}"
        ))
    })?;
    let info = state
        .identities
        .start(convert::identity_spec(spec), true)
        .await?;
    Ok((StatusCode::CREATED, Json(convert::identity(info))))
}

async fn reload(
    State(state): State<Arc<AdminState>>,
) -> Result<Json<api::ReloadResponse>, Failure> {
    let r = state.reload.clone();
    let changes = tokio::task::spawn_blocking(move || r())
        .await?
        .map_err(Failure::bad_request)?;
    Ok(Json(api::ReloadResponse {
        reloaded: true,
        changes,
    }))
}

async fn backup(State(state): State<Arc<AdminState>>) -> Result<Json<api::Backup>, Failure> {
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
    let b = tokio::task::spawn_blocking(move || {
        crate::backup::export(&nid, &keys, specs, &ctl.index, &ctl.tenants)
    })
    .await?
    .map_err(Failure::internal)?;
    tracing::info!(
        tenants = b.tenants.len(),
        keys = b.keys.len(),
        "backup taken"
    );
    Ok(Json(convert::backup(b)))
}

async fn restore(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<api::Backup>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<api::RestoreResponse>, Failure> {
    let ctl = state.control.clone();
    let b: crate::backup::Backup = body
        .map_err(|e| e.body_text())
        .and_then(|Json(b)| convert::checked(b).map_err(|e| e.to_string()))
        .map_err(|e| Failure::bad_request(format!("not a seedd backup: {e}")))?;
    let mut warnings = Vec::new();
    if b.nid != state.nid.to_string() {
        warnings.push(format!(
            "the backup is of node {} but this node is {}: keys are restored only offline (seedctl restore --data-dir)",
            b.nid, state.nid
        ));
    }
    let r = tokio::task::spawn_blocking(move || {
        let r = crate::backup::restore_state(&b, &ctl.index, &ctl.tenants, &ctl.policies, false);
        ctl.changed();
        r
    })
    .await?
    .map_err(Failure::bad_request)?;
    Ok(Json(api::RestoreResponse {
        restored: convert::restored(r),
        warnings,
    }))
}

async fn apply(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<api::ApplyRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<api::ApplyResponse>, Failure> {
    let ctl = state.control.clone();
    let req: crate::control::ApplyRequest = body
        .map_err(|e| e.body_text())
        .and_then(|Json(b)| convert::checked(b).map_err(|e| e.to_string()))
        .map_err(|e| Failure::bad_request(format!("expected {{\"tenants\": [...]}}: {e}")))?;
    let dry = req.dry_run;
    let changes = tokio::task::spawn_blocking(move || ctl.apply(&req)).await??;
    Ok(Json(api::ApplyResponse {
        changes,
        applied: !dry,
    }))
}
