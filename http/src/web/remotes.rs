//! Remotes: the namespaces with verified signed refs and their branches (http-api.md §1.4),
//! from the index.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use seedd_web_api::Remote;

use super::{Scope, WebError};
use crate::HttpState;
use seedd_core::index::RepoRecord;
use seedd_core::storage::RefTarget;
use seedd_proto::crypto::NodeId;

/// `Remote` = `{id, delegate, heads: {branch: oid}, refs: {"refs/heads/…"|"refs/tags/…": oid}}`.
fn remotes(state: &HttpState, r: &RepoRecord) -> Result<BTreeMap<NodeId, Remote>, WebError> {
    let refs = state.index.refs(&r.rid).map_err(WebError::index)?;
    let mut out = BTreeMap::new();
    for nid in &r.namespaces {
        let prefix = format!("refs/namespaces/{nid}/");
        let mut heads = BTreeMap::new();
        let mut all = BTreeMap::new();
        for (name, target) in &refs {
            let (Some(rest), RefTarget::Oid(id)) = (name.strip_prefix(&prefix), target) else {
                continue;
            };
            if let Some(branch) = rest.strip_prefix("refs/heads/") {
                heads.insert(branch.to_owned(), id.to_string());
            }
            if rest.starts_with("refs/heads/") || rest.starts_with("refs/tags/") {
                all.insert(rest.to_owned(), id.to_string());
            }
        }
        out.insert(
            *nid,
            Remote {
                id: nid.to_string(),
                alias: state.web.aliases.get(&state.index, nid),
                delegate: r.delegates.contains(nid),
                heads,
                refs: all,
            },
        );
    }
    Ok(out)
}

/// `GET /repos/{rid}/remotes`: by node id (httpd's namespace order).
pub(super) async fn list(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path(rid): Path<String>,
) -> Result<Response, WebError> {
    let r = super::repo(&state, &scope, &rid)?;
    let mut all: Vec<(String, Remote)> = remotes(&state, &r)?
        .into_iter()
        .map(|(nid, v)| (nid.to_string(), v))
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Json(all.into_iter().map(|x| x.1).collect::<Vec<_>>()).into_response())
}

/// `GET /repos/{rid}/remotes/{nid}`.
pub(super) async fn one(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, nid)): Path<(String, String)>,
) -> Result<Response, WebError> {
    let r = super::repo(&state, &scope, &rid)?;
    let nid = super::parse_nid(&nid)?;
    remotes(&state, &r)?
        .remove(&nid)
        .map(|v| Json(v).into_response())
        .ok_or(WebError::NotFound("remote not found"))
}
