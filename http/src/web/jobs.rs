//! `GET /api/v1/repos/{rid}/jobs/{sha}` (http-api.md §1.5, httpd 0.25+): the CI jobs
//! (`xyz.radworks.job` COBs of the verified namespaces) for one commit, as
//! `[{jobId, commit, runs: [{runId, node: Author, status, log}]}]`, sorted by job id; jobs
//! without runs are left out (0.27). Jobs are materialised and cached like issues
//! (`cobs.rs`, `Kind::Job`). Runs are grouped by node in node-id order (httpd iterates a
//! `HashMap`, so its node order is arbitrary), each node's runs in the order they were added;
//! `node.alias` is omitted (seedd keeps no alias store). A commit the repository does not have
//! has no valid job (radicle refuses them), so it answers `[]`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::Value;

use super::cobs::{views, Kind};
use super::source::oid;
use super::{Scope, WebError};
use crate::HttpState;

/// The jobs of `commit` among `all` (COB id order, which is job-id order), runs only.
pub(super) fn for_commit(
    all: &[(gix::ObjectId, Arc<super::cobs::View>)],
    commit: &gix::ObjectId,
) -> Vec<Value> {
    let commit = commit.to_string();
    all.iter()
        .filter(|(_, v)| v.status == "runs" && v.json["commit"] == commit.as_str())
        .map(|(_, v)| v.json.clone())
        .collect()
}

/// `GET /repos/{rid}/jobs/{sha}`.
pub(super) async fn jobs(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, sha)): Path<(String, String)>,
) -> Result<Response, WebError> {
    let commit = oid(&sha)?;
    let r = super::repo(&state, &scope, &rid)?;
    let refs = state.index.refs(&r.rid).map_err(WebError::index)?;
    let infix = format!("/refs/cobs/{}/", seedd_core::storage::cob::job::TYPE_NAME);
    // Most repositories have no jobs: answer without touching git.
    if !refs.iter().any(|(name, _)| name.contains(infix.as_str())) {
        return Ok(Json(Vec::<Value>::new()).into_response());
    }
    let storage = state.storage.clone();
    let rid_ = r.rid;
    let present = super::blocking(move || {
        let repo = super::source::open(&storage, rid_)?;
        Ok(repo.find_header(commit).is_ok())
    })
    .await?;
    if !present {
        return Ok(Json(Vec::<Value>::new()).into_response());
    }
    let all = views(&state, &r, Kind::Job).await?;
    Ok(Json(for_commit(&all, &commit)).into_response())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use seedd_core::storage::cob::job::{Job, Reason, Run, Status, Uuid};
    use seedd_proto::crypto::NodeId;
    use serde_json::json;

    fn run(n: u8, status: Status) -> Run {
        Run {
            id: Uuid::parse(&format!("00000000-0000-0000-0000-0000000000{n:02}")).unwrap(),
            status,
            log: format!("https://ci.example/{n}"),
            timestamp: 1,
        }
    }

    #[test]
    fn jobs_have_the_httpd_shape_sorted_and_without_empty_ones() {
        let commit = gix::ObjectId::from_bytes_or_panic(&[7; 20]);
        let other = gix::ObjectId::from_bytes_or_panic(&[8; 20]);
        let alice = NodeId::from_bytes([1; 32]);
        let bob = NodeId::from_bytes([2; 32]);
        let job = Job {
            commit,
            runs: BTreeMap::from([
                (
                    bob,
                    vec![
                        run(1, Status::Started),
                        run(2, Status::Finished(Reason::Failed)),
                    ],
                ),
                (alice, vec![run(3, Status::Finished(Reason::Succeeded))]),
            ]),
        };
        let id_a = gix::ObjectId::from_bytes_or_panic(&[0xa; 20]);
        let id_b = gix::ObjectId::from_bytes_or_panic(&[0xb; 20]);
        let id_c = gix::ObjectId::from_bytes_or_panic(&[0xc; 20]);
        let view = |id: &gix::ObjectId, j: &Job| {
            Arc::new(crate::web::cobs::View {
                status: if j.has_runs() { "runs" } else { "empty" },
                timestamp: 0,
                json: crate::web::cobs::shapes::job_json(id, j),
            })
        };
        let empty = Job {
            commit,
            runs: BTreeMap::new(),
        };
        let elsewhere = Job {
            commit: other,
            ..job.clone()
        };
        let all = vec![
            (id_a, view(&id_a, &job)),
            (id_b, view(&id_b, &empty)),
            (id_c, view(&id_c, &elsewhere)),
        ];
        let got = for_commit(&all, &commit);
        assert_eq!(got.len(), 1, "no empty job, no other commit's: {got:?}");
        let j = &got[0];
        assert_eq!(j["jobId"], id_a.to_string());
        assert_eq!(j["commit"], commit.to_string());
        let runs = j["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 3);
        // Alice sorts before Bob (node id order); Bob's runs keep their order.
        assert_eq!(
            runs[0],
            json!({
                "runId": "00000000-0000-0000-0000-000000000003",
                "node": { "id": alice.to_did() },
                "status": "succeeded",
                "log": "https://ci.example/3",
            })
        );
        assert_eq!(runs[1]["node"]["id"], bob.to_did());
        assert_eq!(runs[1]["status"], "started");
        assert_eq!(runs[2]["status"], "failed");
        assert!(runs.iter().all(|r| r["node"].get("alias").is_none()));
        assert_eq!(
            for_commit(&all, &gix::ObjectId::from_bytes_or_panic(&[9; 20])),
            Vec::<Value>::new()
        );
    }
}
