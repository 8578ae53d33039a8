//! Admin API for repository maintenance (docs/admin-api.yaml): run one now, list every held
//! repository's debt and last run.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use seedd_api as api;

use super::failure::Failure;
use super::{parse_rid, AdminState};
use seedd_core::maintain::{Record, Run};

pub(super) fn routes() -> Router<Arc<AdminState>> {
    Router::new()
        .route("/api/v1/repos/{rid}/maintain", post(maintain))
        .route("/api/v1/maintenance", get(list))
}

fn debt(r: &Record) -> api::RepoDebt {
    let d = &r.debt;
    api::RepoDebt {
        score: r.score,
        packs: d.packs,
        pack_bytes: d.pack_bytes,
        loose_objects: d.loose_objects,
        loose_refs: d.loose_refs,
        bitmap: d.bitmap,
        midx: d.midx,
        commit_graph: d.commit_graph,
        measured_at: r.measured_at,
    }
}

fn run(r: &Run) -> api::MaintenanceRun {
    api::MaintenanceRun {
        at: r.at,
        result: r.result.clone(),
        error: r.error.clone(),
        duration_ms: r.duration_ms,
        repack: r.repack.clone(),
        packs_before: r.packs_before,
        packs_after: r.packs_after,
    }
}

/// Runs maintenance of one repository now and waits for it (after a running fetch of it).
async fn maintain(
    State(state): State<Arc<AdminState>>,
    Path(rid): Path<String>,
) -> Result<Json<api::MaintainResponse>, Failure> {
    let rid = parse_rid(&rid)?;
    let report = state.maintainer.run_now(rid).await?;
    Ok(Json(api::MaintainResponse {
        rid: report.rid.to_string(),
        run: run(&report.run),
        before: debt(&report.before),
        after: debt(&report.after),
    }))
}

#[derive(serde::Deserialize)]
struct ListQuery {
    limit: Option<usize>,
    after: Option<String>,
}

/// A maintenance cursor: `<score>/<rid>` of the previous page's last entry.
fn parse_cursor(cursor: &str) -> Result<(u64, seedd_proto::crypto::RepoId), Failure> {
    cursor
        .split_once('/')
        .and_then(|(score, rid)| Some((score.parse().ok()?, rid.parse().ok()?)))
        .ok_or_else(|| {
            Failure::bad_request(format!(
                "invalid cursor {cursor:?}: expected <score>/<rid> (a page's `next`)"
            ))
        })
}

/// Held repositories, measured now, with their last run; highest debt first, a page of
/// `limit` after the cursor `after` (every repository is measured for each page: the order is
/// by current debt).
async fn list(
    State(state): State<Arc<AdminState>>,
    axum::extract::Query(q): axum::extract::Query<ListQuery>,
) -> Result<Json<api::MaintenanceResponse>, Failure> {
    let limit = super::page_limit(q.limit)?;
    let after = q.after.as_deref().map(parse_cursor).transpose()?;
    let m = &state.maintainer;
    let mut statuses = m.list().await?;
    statuses.sort_by(|a, b| b.record.score.cmp(&a.record.score).then(a.rid.cmp(&b.rid)));
    let total = statuses.len();
    let start = after.map_or(0, |(score, rid)| {
        statuses
            .iter()
            .position(|s| s.record.score < score || (s.record.score == score && s.rid > rid))
            .unwrap_or(total)
    });
    let page = &statuses[start..(start + limit).min(total)];
    let next = (start + limit < total)
        .then(|| page.last().map(|s| format!("{}/{}", s.record.score, s.rid)))
        .flatten();
    let (queued, waiting) = m.pending();
    Ok(Json(api::MaintenanceResponse {
        enabled: m.enabled(),
        queued,
        waiting,
        next,
        total,
        repos: page
            .iter()
            .map(|s| api::MaintenanceEntry {
                rid: s.rid.to_string(),
                debt: debt(&s.record),
                due: s.due.map(str::to_owned),
                last_run: s.record.last_run.as_ref().map(run),
            })
            .collect(),
    }))
}
