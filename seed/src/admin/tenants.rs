//! Admin API for tenants, quotas, hosts, deny lists, usage, the fetch queue, seed identities,
//! config reload, backup/restore and declarative apply (docs/admin-api.yaml).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde_json::{json, Value};

use super::status::error_response;
use super::{control, error, internal, parse_nid, parse_rid, AdminState};
use crate::tenant::ops::{ApplyRequest, Control};
use crate::tenant::{Quotas, Rate, State as TenantState, Tenant, Usage};

pub fn routes() -> Router<Arc<AdminState>> {
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
    f: impl FnOnce(&Control, &str) -> Result<(), crate::tenant::ops::ControlError> + Send + 'static,
) -> Response {
    let ctl = match control(state) {
        Ok(c) => c.clone(),
        Err(r) => return *r,
    };
    let r = tokio::task::spawn_blocking(move || {
        f(&ctl, &name)?;
        Ok::<_, crate::tenant::ops::ControlError>(tenant_json(&ctl, &name))
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
fn tenant_json(ctl: &Control, name: &str) -> Option<Value> {
    let (t, u): (Tenant, Usage) = ctl.tenants.get(name)?;
    let repos: Vec<Value> = t
        .repos
        .iter()
        .map(|r| {
            let owner = ctl.tenants.owner(&r.rid).is_some_and(|(o, _)| o == name);
            json!({ "rid": r.rid, "scope": r.scope, "alias": r.alias, "owner": owner })
        })
        .collect();
    let mut v = serde_json::to_value(&t).ok()?;
    let obj = v.as_object_mut()?;
    obj.insert("usage".into(), json!(u));
    obj.insert("repos".into(), json!(repos));
    Some(v)
}

async fn list(State(state): State<Arc<AdminState>>) -> Response {
    let ctl = match control(&state) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let v: Vec<Value> = ctl
        .tenants
        .list()
        .iter()
        .filter_map(|(t, _)| tenant_json(ctl, &t.name))
        .collect();
    Json(json!({ "tenants": v })).into_response()
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
    #[serde(default)]
    hosts: Vec<String>,
    #[serde(default)]
    identity: Option<String>,
    #[serde(default)]
    quotas: Option<Quotas>,
    #[serde(default)]
    rate: Option<Rate>,
}

async fn create(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<CreateBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let ctl = match control(&state) {
        Ok(c) => c.clone(),
        Err(r) => return *r,
    };
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
    t.quotas = b.quotas.unwrap_or_default();
    t.rate = b.rate.unwrap_or_default();
    let name = b.name.clone();
    match tokio::task::spawn_blocking(move || {
        ctl.tenants.create(t)?;
        (ctl.changed)();
        Ok::<_, crate::tenant::TenantError>(tenant_json(&ctl, &name))
    })
    .await
    {
        Ok(Ok(v)) => (StatusCode::CREATED, Json(v.unwrap_or_default())).into_response(),
        Ok(Err(e)) => error_response(e),
        Err(e) => internal(e),
    }
}

async fn show(State(state): State<Arc<AdminState>>, Path(name): Path<String>) -> Response {
    let ctl = match control(&state) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    match tenant_json(ctl, &name) {
        Some(v) => Json(v).into_response(),
        None => error(404, crate::tenant::TenantError::Unknown(name)),
    }
}

async fn remove(State(state): State<Arc<AdminState>>, Path(name): Path<String>) -> Response {
    let ctl = match control(&state) {
        Ok(c) => c.clone(),
        Err(r) => return *r,
    };
    let limiter_name = name.clone();
    match tokio::task::spawn_blocking(move || ctl.remove_tenant(&name).map(|p| (name, p))).await {
        Ok(Ok((name, purged))) => {
            tracing::info!(tenant = %limiter_name, purged = purged.len(), "tenant removed via admin API");
            Json(json!({ "name": name, "removed": true, "purged": purged })).into_response()
        }
        Ok(Err(e)) => error_response(e),
        Err(e) => internal(e),
    }
}

async fn suspend(State(state): State<Arc<AdminState>>, Path(name): Path<String>) -> Response {
    tenant_op(&state, name, |c, n| {
        c.tenants.set_state(n, TenantState::Suspended)?;
        (c.changed)();
        Ok(())
    })
    .await
}

async fn resume(State(state): State<Arc<AdminState>>, Path(name): Path<String>) -> Response {
    tenant_op(&state, name, |c, n| {
        c.tenants.set_state(n, TenantState::Active)?;
        (c.changed)();
        Ok(())
    })
    .await
}

/// `{"k": 5}` sets, `{"k": null}` clears (unlimited), an absent key keeps the old value.
fn patch_u64(body: &Value, key: &str, old: Option<u64>) -> Result<Option<u64>, String> {
    match body.get(key) {
        None => Ok(old),
        Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{key}: expected a non-negative integer or null")),
    }
}

async fn quota(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    let ctl = match control(&state) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let Some((t, _)) = ctl.tenants.get(&name) else {
        return error(404, crate::tenant::TenantError::Unknown(name));
    };
    let q = (|| {
        Ok::<_, String>(Quotas {
            repos: patch_u64(&body, "repos", t.quotas.repos)?,
            bytes: patch_u64(&body, "bytes", t.quotas.bytes)?,
            egress_bytes_per_day: patch_u64(
                &body,
                "egress_bytes_per_day",
                t.quotas.egress_bytes_per_day,
            )?,
        })
    })();
    match q {
        Ok(q) => {
            tenant_op(&state, name, move |c, n| {
                Ok(c.tenants.set_quotas(n, q).map(|_| ())?)
            })
            .await
        }
        Err(e) => error(400, e),
    }
}

async fn rate(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    let ctl = match control(&state) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let Some((t, _)) = ctl.tenants.get(&name) else {
        return error(404, crate::tenant::TenantError::Unknown(name));
    };
    let to_u32 = |v: Option<u64>| v.map(|x| u32::try_from(x).unwrap_or(u32::MAX));
    let r = (|| {
        Ok::<_, String>(Rate {
            requests_per_second: to_u32(patch_u64(
                &body,
                "requests_per_second",
                t.rate.requests_per_second.map(u64::from),
            )?),
            burst: to_u32(patch_u64(&body, "burst", t.rate.burst.map(u64::from))?),
        })
    })();
    match r {
        Ok(r) => {
            tenant_op(&state, name, move |c, n| {
                Ok(c.tenants.set_rate(n, r).map(|_| ())?)
            })
            .await
        }
        Err(e) => error(400, e),
    }
}

#[derive(serde::Deserialize)]
struct HostBody {
    host: String,
}

async fn host_add(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    body: Result<Json<HostBody>, axum::extract::rejection::JsonRejection>,
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
    let ctl = match control(&state) {
        Ok(c) => c.clone(),
        Err(r) => return *r,
    };
    let rid = match parse_rid(&rid) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    match tokio::task::spawn_blocking(move || ctl.purge(rid)).await {
        Ok(Ok(holders)) => {
            Json(json!({ "rid": rid, "purged": true, "tenants": holders })).into_response()
        }
        Ok(Err(e)) => error_response(e),
        Err(e) => internal(e),
    }
}

async fn deny_ls(State(state): State<Arc<AdminState>>) -> Response {
    let ctl = match control(&state) {
        Ok(c) => c.clone(),
        Err(r) => return *r,
    };
    let (repos, nodes) = match ctl.index.policies() {
        Ok(p) => p,
        Err(e) => return internal(e),
    };
    let mut r: Vec<Value> = repos
        .into_iter()
        .filter(|(_, p)| matches!(p, crate::index::policy::RepoPolicy::Block))
        .map(|(rid, _)| json!({ "rid": rid, "tenant": null }))
        .collect();
    let mut n: Vec<Value> = nodes
        .into_iter()
        .filter(|(_, p)| matches!(p, crate::index::policy::NodePolicy::Block))
        .map(|(nid, _)| json!({ "nid": nid, "tenant": null }))
        .collect();
    for (t, _) in ctl.tenants.list() {
        r.extend(
            t.deny
                .repos
                .iter()
                .map(|rid| json!({ "rid": rid, "tenant": t.name })),
        );
        n.extend(
            t.deny
                .nodes
                .iter()
                .map(|nid| json!({ "nid": nid, "tenant": t.name })),
        );
    }
    Json(json!({ "repos": r, "nodes": n })).into_response()
}

#[derive(serde::Deserialize)]
struct DenyBody {
    rid: Option<String>,
    nid: Option<String>,
    tenant: Option<String>,
}

#[derive(serde::Deserialize, Default)]
struct TenantQuery {
    tenant: Option<String>,
}

/// Deny or allow again a repository: for a tenant, or globally (operator `block` policy;
/// the repository stops being served and fetched; `seedctl repo purge` frees the disk).
fn deny_repo(
    ctl: &Control,
    rid: crate::crypto::RepoId,
    tenant: Option<&str>,
    deny: bool,
) -> Result<Value, crate::tenant::ops::ControlError> {
    match tenant {
        Some(t) => {
            ctl.tenants.deny_repo(t, rid, deny)?;
        }
        None => {
            if deny {
                ctl.policies
                    .set_repo(&rid, Some(crate::index::policy::RepoPolicy::Block))?;
            } else if ctl.policies.denied(&rid) {
                ctl.policies.set_repo(&rid, None)?;
            }
            (ctl.changed)();
        }
    }
    Ok(json!({ "rid": rid, "tenant": tenant, "denied": deny }))
}

fn deny_node(
    ctl: &Control,
    net: Option<&crate::net::Net>,
    nid: crate::crypto::NodeId,
    tenant: Option<&str>,
    deny: bool,
) -> Result<Value, crate::tenant::ops::ControlError> {
    match tenant {
        Some(t) => {
            ctl.tenants.deny_node(t, nid, deny)?;
        }
        None => {
            use crate::index::policy::NodePolicy;
            if deny {
                ctl.policies.set_node(&nid, Some(NodePolicy::Block))?;
                if let Some(net) = net {
                    net.disconnect(nid);
                }
            } else if ctl.policies.blocked(&nid) {
                ctl.policies.set_node(&nid, None)?;
            }
        }
    }
    Ok(json!({ "nid": nid, "tenant": tenant, "denied": deny }))
}

fn answer(r: Result<Value, crate::tenant::ops::ControlError>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => error_response(e),
    }
}

/// Parse the repository id of a deny-list request and apply it.
fn deny_repo_request(state: &AdminState, rid: &str, tenant: Option<&str>, deny: bool) -> Response {
    let (ctl, rid) = match (control(state), parse_rid(rid)) {
        (Ok(c), Ok(r)) => (c, r),
        (Err(r), _) | (_, Err(r)) => return *r,
    };
    answer(deny_repo(ctl, rid, tenant, deny))
}

/// Parse the node id of a deny-list request and apply it.
fn deny_node_request(state: &AdminState, nid: &str, tenant: Option<&str>, deny: bool) -> Response {
    let (ctl, nid) = match (control(state), parse_nid(nid)) {
        (Ok(c), Ok(n)) => (c, n),
        (Err(r), _) | (_, Err(r)) => return *r,
    };
    answer(deny_node(ctl, state.net.as_ref(), nid, tenant, deny))
}

async fn deny_repo_add(State(state): State<Arc<AdminState>>, Json(b): Json<DenyBody>) -> Response {
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

async fn deny_node_add(State(state): State<Arc<AdminState>>, Json(b): Json<DenyBody>) -> Response {
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
    let Some(f) = &state.fetcher else {
        return error(503, "replication is not running");
    };
    let (running, queued) = f.queue();
    Json(json!({
        "active": running.iter().map(|(rid, nid, secs)| json!({"rid": rid, "from": nid, "seconds": secs})).collect::<Vec<_>>(),
        "queued": queued.iter().map(|(rid, nid)| json!({"rid": rid, "from": nid})).collect::<Vec<_>>(),
    }))
    .into_response()
}

async fn usage(State(state): State<Arc<AdminState>>, Query(q): Query<TenantQuery>) -> Response {
    let ctl = match control(&state) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let rows: Vec<Value> = ctl
        .tenants
        .list()
        .into_iter()
        .filter(|(t, _)| q.tenant.as_ref().is_none_or(|n| n == &t.name))
        .map(|(t, u)| {
            json!({
                "tenant": t.name,
                "state": t.state,
                "identity": t.identity,
                "repos": u.repos,
                "quota_repos": t.quotas.repos,
                "stored_bytes": u.stored_bytes,
                "quota_bytes": t.quotas.bytes,
                "egress_today_bytes": u.egress_today_bytes,
                "quota_egress_bytes_per_day": t.quotas.egress_bytes_per_day,
            })
        })
        .collect();
    if let Some(n) = &q.tenant {
        if rows.is_empty() {
            return error(404, crate::tenant::TenantError::Unknown(n.clone()));
        }
    }
    Json(json!({ "usage": rows })).into_response()
}

async fn identities(State(state): State<Arc<AdminState>>) -> Response {
    match &state.identities {
        Some(i) => Json(json!({ "identities": i.list() })).into_response(),
        None => error(503, "the p2p layer is not running"),
    }
}

async fn identity_create(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<crate::identity::IdentitySpec>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Some(ids) = &state.identities else {
        return error(503, "the p2p layer is not running");
    };
    let Json(spec) = match body {
        Ok(b) => b,
        Err(e) => {
            return error(
                400,
                format!("expected {{\"name\": …, \"listen\": [\"ip:port\"]}}: {e}"),
            )
        }
    };
    match ids.start(spec, true).await {
        Ok(info) => (StatusCode::CREATED, Json(json!(info))).into_response(),
        Err(e) => error_response(e),
    }
}

async fn reload(State(state): State<Arc<AdminState>>) -> Response {
    let Some(r) = state.reload.clone() else {
        return error(503, "reload is not available");
    };
    match tokio::task::spawn_blocking(move || r()).await {
        Ok(Ok(changes)) => Json(json!({ "reloaded": true, "changes": changes })).into_response(),
        Ok(Err(e)) => error(400, e),
        Err(e) => internal(e),
    }
}

async fn backup(State(state): State<Arc<AdminState>>) -> Response {
    let ctl = match control(&state) {
        Ok(c) => c.clone(),
        Err(r) => return *r,
    };
    let specs = state
        .identities
        .as_ref()
        .map(|i| i.specs())
        .unwrap_or_default();
    let keys_dir = state.data_dir.join("keys");
    let mut keys = vec![(
        crate::tenant::DEFAULT_IDENTITY.to_owned(),
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
            Json(b).into_response()
        }
        Ok(Err(e)) => internal(e),
        Err(e) => internal(e),
    }
}

async fn restore(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<crate::backup::Backup>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let ctl = match control(&state) {
        Ok(c) => c.clone(),
        Err(r) => return *r,
    };
    let Json(b) = match body {
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
        (ctl.changed)();
        r
    })
    .await
    {
        Ok(Ok(r)) => Json(json!({ "restored": r, "warnings": warnings })).into_response(),
        Ok(Err(e)) => error(400, e),
        Err(e) => internal(e),
    }
}

async fn apply(
    State(state): State<Arc<AdminState>>,
    body: Result<Json<ApplyRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let ctl = match control(&state) {
        Ok(c) => c.clone(),
        Err(r) => return *r,
    };
    let Json(req) = match body {
        Ok(b) => b,
        Err(e) => return error(400, format!("expected {{\"tenants\": [...]}}: {e}")),
    };
    let dry = req.dry_run;
    match tokio::task::spawn_blocking(move || ctl.apply(&req)).await {
        Ok(Ok(changes)) => Json(json!({ "changes": changes, "applied": !dry })).into_response(),
        Ok(Err(e)) => error_response(e),
        Err(e) => internal(e),
    }
}
