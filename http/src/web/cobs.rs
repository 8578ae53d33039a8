//! Issues and patches (http-api.md §1.5, checklist rows 15–16) and their counts in `RepoInfo`:
//! COBs materialised from their change graphs (`storage::cob::evaluate`) and kept as the JSON
//! httpd 0.27 answers, per COB, in memory. An entry is keyed by repository, type and COB id and
//! remembers the tips it was built from (for patches also the repository's ref fingerprint, as
//! merges and revision refs read other refs); a fetch that moves a COB's tips makes the next
//! request rebuild it. Nothing else invalidates: a stale key is simply never asked for again.
//!
//! Each COB is evaluated within its own work budget (`storage::cob::budget::EVALUATION`); one
//! that passes it is remembered by its tips as over budget (left out of lists, 413 alone,
//! `seedd_cob_budget_exceeded_total`), like an invalid one. The blocking work holds its heavy
//! permit until it stops, and stops between changes when the request stops waiting (client
//! gone, [`super::WORK_DEADLINE`]); what it built until then is cached, so a repeated request
//! goes on from there.

mod cache;
pub(super) mod shapes;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::Value;

use super::{Scope, WebError};
use crate::HttpState;
use seedd_core::index::RepoRecord;
use seedd_core::storage::cob::budget::{self, Budget, BudgetKind};
use seedd_core::storage::cob::evaluate::{evaluate, GitRepo};
use seedd_core::storage::cob::issue::{self, Issue};
use seedd_core::storage::cob::job::{self, Job};
use seedd_core::storage::cob::patch::{self, Patch};
use seedd_core::storage::RefTarget;
use seedd_proto::crypto::NodeId;

pub(crate) use cache::CobCache;
use cache::Key;
use shapes::{issue_json, patch_json};

/// The COB types the API shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Issue,
    Patch,
    /// CI jobs (`/jobs/{sha}`).
    Job,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Issue => "issue",
            Kind::Patch => "patch",
            Kind::Job => "job",
        }
    }

    fn type_name(self) -> &'static str {
        match self {
            Kind::Issue => issue::TYPE_NAME,
            Kind::Patch => patch::TYPE_NAME,
            Kind::Job => job::TYPE_NAME,
        }
    }
}

/// One COB as the API shows it.
#[derive(Debug)]
pub(crate) struct View {
    /// `open`/`closed` (issues), `draft`/`open`/`archived`/`merged` (patches).
    pub(crate) status: &'static str,
    /// When it was opened: lists are newest first by this.
    pub(crate) timestamp: u64,
    pub(crate) json: Value,
}

/// What evaluating one COB gave (cached by its tips).
#[derive(Debug, Clone)]
pub(crate) enum Built {
    View(Arc<View>),
    /// Its root does not verify or initialise.
    Invalid,
    /// Its evaluation passed its work budget.
    OverBudget(BudgetKind),
}

impl Built {
    fn view(&self) -> Option<Arc<View>> {
        match self {
            Built::View(v) => Some(v.clone()),
            Built::Invalid | Built::OverBudget(_) => None,
        }
    }
}

/// COB id → its tips (sorted) over the verified namespaces, from the index's ref listing
/// (`refs/namespaces/<nid>/refs/cobs/<type>/<id>`).
fn heads(
    refs: &[(String, RefTarget)],
    namespaces: &[NodeId],
    kind: Kind,
) -> BTreeMap<gix::ObjectId, Vec<gix::ObjectId>> {
    let mut out: BTreeMap<gix::ObjectId, Vec<gix::ObjectId>> = BTreeMap::new();
    let infix = format!("/refs/cobs/{}/", kind.type_name());
    for (name, target) in refs {
        let RefTarget::Oid(tip) = target else {
            continue;
        };
        let Some((ns, id)) = name
            .strip_prefix("refs/namespaces/")
            .and_then(|rest| rest.split_once(infix.as_str()))
        else {
            continue;
        };
        let (Ok(nid), Ok(id)) = (ns.parse::<NodeId>(), gix::ObjectId::from_hex(id.as_bytes()))
        else {
            continue;
        };
        if namespaces.contains(&nid) {
            out.entry(id).or_default().push(*tip);
        }
    }
    for tips in out.values_mut() {
        tips.sort_unstable();
        tips.dedup();
    }
    out
}

/// Every valid COB of `kind` in `r`, from the cache or materialised now (holding a heavy
/// permit), in COB id order.
pub(crate) async fn views(
    state: &HttpState,
    r: &RepoRecord,
    kind: Kind,
) -> Result<Vec<(gix::ObjectId, Arc<View>)>, WebError> {
    let refs = Arc::new(state.index.refs(&r.rid).map_err(WebError::index)?);
    views_in(state, r, kind, refs).await
}

/// A repository's refs as the index lists them, shared by the views built from them.
pub(crate) type Refs = Arc<Vec<(String, RefTarget)>>;

/// [`views`], with the repository's refs already read.
pub(crate) async fn views_in(
    state: &HttpState,
    r: &RepoRecord,
    kind: Kind,
    refs: Refs,
) -> Result<Vec<(gix::ObjectId, Arc<View>)>, WebError> {
    Ok(views_of(state, r, kind, None, refs)
        .await?
        .into_iter()
        .filter_map(|(id, b)| Some((id, b.view()?)))
        .collect())
}

/// What each COB of `kind` in `r` (COB `only` alone when given) evaluates to.
async fn views_of(
    state: &HttpState,
    r: &RepoRecord,
    kind: Kind,
    only: Option<gix::ObjectId>,
    refs: Refs,
) -> Result<Vec<(gix::ObjectId, Built)>, WebError> {
    let mut heads = heads(&refs, &r.namespaces, kind);
    if let Some(id) = only {
        heads.retain(|k, _| *k == id);
    }
    let salt = match kind {
        Kind::Issue | Kind::Job => String::new(),
        Kind::Patch => r.fingerprint.clone(),
    };
    let cache = &state.web.cobs;
    let mut found: BTreeMap<gix::ObjectId, Built> = BTreeMap::new();
    let mut missing: Vec<(gix::ObjectId, Vec<gix::ObjectId>)> = Vec::new();
    for (id, tips) in heads {
        let key = Key {
            rid: r.rid,
            kind,
            id,
        };
        match cache.get(&key, &tips, &salt) {
            Some(built) => {
                found.insert(id, built);
            }
            None => missing.push((id, tips)),
        }
    }
    if !missing.is_empty() {
        let storage = state.storage.clone();
        let rid = r.rid;
        let started = Instant::now();
        let count = missing.len();
        let cache = cache.clone();
        let metrics = state.metrics.clone();
        let permit = super::counted_permit(state, &state.web.heavy).await?;
        // The permit moves into the work: it is held until the work itself stops, which it does
        // between changes once this request stops waiting (deadline or client gone).
        let built = seedd_core::blocking::run_cancellable(super::WORK_DEADLINE, move |cancel| {
            let _permit = permit;
            let git = super::source::open(&storage, rid)?;
            let mut out = Vec::with_capacity(missing.len());
            for (id, tips) in missing {
                if cancel.is_cancelled() {
                    break;
                }
                let budget = Budget::new(budget::EVALUATION, cancel.clone());
                let Some(built) = materialise(&git, &budget, kind, id, &tips, &refs) else {
                    break; // cancelled: nothing to remember
                };
                if let Built::OverBudget(k) = &built {
                    metrics
                        .cob_budget_exceeded
                        .with_label_values(&[k.label()])
                        .inc();
                }
                cache.put(Key { rid, kind, id }, tips, salt.clone(), built.clone());
                out.push((id, built));
            }
            Ok::<_, WebError>(out)
        })
        .await
        .map_err(WebError::Blocking)??;
        let elapsed_ms = started.elapsed().as_millis() as u64;
        if elapsed_ms >= 1000 {
            tracing::info!(rid = %rid, kind = kind.type_name(), count, elapsed_ms, "materialised COBs");
        } else {
            tracing::debug!(rid = %rid, kind = kind.type_name(), count, elapsed_ms, "materialised COBs");
        }
        found.extend(built);
    }
    Ok(found.into_iter().collect())
}

/// One COB → what it evaluates to (invalid ones logged); `None` if the evaluation was
/// cancelled.
fn materialise(
    git: &gix::Repository,
    budget: &Budget,
    kind: Kind,
    id: gix::ObjectId,
    tips: &[gix::ObjectId],
    refs: &[(String, RefTarget)],
) -> Option<Built> {
    let repo = GitRepo::new(git, budget);
    let view = match kind {
        Kind::Issue => evaluate::<Issue>(&repo, id, tips, budget).map(|i| View {
            status: match i.state {
                issue::State::Open => "open",
                issue::State::Closed { .. } => "closed",
            },
            timestamp: i.timestamp(),
            json: issue_json(&id, &i),
        }),
        Kind::Patch => evaluate::<Patch>(&repo, id, tips, budget).map(|p| View {
            status: match p.state {
                patch::State::Draft => "draft",
                patch::State::Open { .. } => "open",
                patch::State::Archived => "archived",
                patch::State::Merged { .. } => "merged",
            },
            timestamp: p.timestamp(),
            json: patch_json(&id, &p, refs),
        }),
        Kind::Job => evaluate::<Job>(&repo, id, tips, budget).map(|j| View {
            // Jobs have no status filter; `has_runs` decides whether one is shown.
            status: if j.has_runs() { "runs" } else { "empty" },
            timestamp: 0,
            json: shapes::job_json(&id, &j),
        }),
    };
    match view {
        Ok(v) => Some(Built::View(Arc::new(v))),
        Err(e) if !e.is_permanent() => {
            tracing::debug!(cob = %id, kind = kind.type_name(), error = %seedd_core::logging::chain(&e), "COB evaluation stopped");
            // Cancelled: not remembered. A git read error is not permanent either, but this
            // request still answers without the COB.
            if budget.check().is_err() {
                None
            } else {
                Some(Built::Invalid)
            }
        }
        Err(e) => {
            tracing::debug!(cob = %id, kind = kind.type_name(), error = %seedd_core::logging::chain(&e), "invalid COB left out");
            Some(match e.over_budget() {
                Some(k) => Built::OverBudget(k),
                None => Built::Invalid,
            })
        }
    }
}

/// `meta.issues` and `meta.patches` of `RepoInfo`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) open_issues: usize,
    pub(crate) closed_issues: usize,
    pub(crate) open: usize,
    pub(crate) draft: usize,
    pub(crate) archived: usize,
    pub(crate) merged: usize,
}

impl Counts {
    pub(crate) fn issues(&self) -> seedd_web_api::IssueCounts {
        seedd_web_api::IssueCounts {
            open: self.open_issues,
            closed: self.closed_issues,
        }
    }

    pub(crate) fn patches(&self) -> seedd_web_api::PatchCounts {
        seedd_web_api::PatchCounts {
            open: self.open,
            draft: self.draft,
            archived: self.archived,
            merged: self.merged,
        }
    }
}

/// The issue and patch counts of `r`, whose refs are `refs` (every ref of the repository).
pub(crate) async fn counts(
    state: &HttpState,
    r: &RepoRecord,
    refs: Refs,
) -> Result<Counts, WebError> {
    let mut c = Counts::default();
    for (_, v) in views_in(state, r, Kind::Issue, Arc::clone(&refs)).await? {
        match v.status {
            "closed" => c.closed_issues += 1,
            _ => c.open_issues += 1,
        }
    }
    for (_, v) in views_in(state, r, Kind::Patch, refs).await? {
        match v.status {
            "draft" => c.draft += 1,
            "archived" => c.archived += 1,
            "merged" => c.merged += 1,
            _ => c.open += 1,
        }
    }
    Ok(c)
}

/// `status` of the issue list.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum IssueStatus {
    #[default]
    Open,
    Closed,
    All,
}

/// `status` of the patch list.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum PatchStatus {
    #[default]
    Open,
    Draft,
    Archived,
    Merged,
    All,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CobsQuery<S> {
    status: Option<S>,
    page: Option<usize>,
    per_page: Option<usize>,
}

/// Newest first (ties by id), then `page`/`perPage` (10 by default, not clamped, as httpd).
fn page(
    mut all: Vec<(gix::ObjectId, Arc<View>)>,
    keep: impl Fn(&str) -> bool,
    page: Option<usize>,
    per_page: Option<usize>,
) -> Vec<Value> {
    all.retain(|(_, v)| keep(v.status));
    all.sort_by(|a, b| b.1.timestamp.cmp(&a.1.timestamp).then(a.0.cmp(&b.0)));
    let take = per_page.unwrap_or(10);
    all.into_iter()
        .skip(page.unwrap_or(0).saturating_mul(take))
        .take(take)
        .map(|(_, v)| v.json.clone())
        .collect()
}

/// A COB id from a path: 40 hex digits (400 otherwise).
fn cob_id(s: &str) -> Result<gix::ObjectId, WebError> {
    if s.len() != 40 {
        return Err(WebError::BadRequest(format!("invalid object id {s:?}")));
    }
    gix::ObjectId::from_hex(s.as_bytes())
        .map_err(|_| WebError::BadRequest(format!("invalid object id {s:?}")))
}

/// `GET /repos/{rid}/issues?status&page&perPage`.
pub(super) async fn issues(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path(rid): Path<String>,
    Query(q): Query<CobsQuery<IssueStatus>>,
) -> Result<Response, WebError> {
    let r = super::repo(&state, &scope, &rid)?;
    let status = q.status.unwrap_or_default();
    let all = views(&state, &r, Kind::Issue).await?;
    let keep = |s: &str| match status {
        IssueStatus::All => true,
        IssueStatus::Open => s == "open",
        IssueStatus::Closed => s == "closed",
    };
    let mut out = Value::Array(page(all, keep, q.page, q.per_page));
    state.web.aliases.name_authors(&state.index, &mut out);
    Ok(Json(out).into_response())
}

/// `GET /repos/{rid}/patches?status&page&perPage`.
pub(super) async fn patches(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path(rid): Path<String>,
    Query(q): Query<CobsQuery<PatchStatus>>,
) -> Result<Response, WebError> {
    let r = super::repo(&state, &scope, &rid)?;
    let status = q.status.unwrap_or_default();
    let all = views(&state, &r, Kind::Patch).await?;
    let keep = |s: &str| match status {
        PatchStatus::All => true,
        PatchStatus::Open => s == "open",
        PatchStatus::Draft => s == "draft",
        PatchStatus::Archived => s == "archived",
        PatchStatus::Merged => s == "merged",
    };
    let mut out = Value::Array(page(all, keep, q.page, q.per_page));
    state.web.aliases.name_authors(&state.index, &mut out);
    Ok(Json(out).into_response())
}

async fn one(
    state: &HttpState,
    scope: &Scope,
    rid: &str,
    id: &str,
    kind: Kind,
) -> Result<Response, WebError> {
    let r = super::repo(state, scope, rid)?;
    let id = cob_id(id)?;
    let refs = Arc::new(state.index.refs(&r.rid).map_err(WebError::index)?);
    let built = views_of(state, &r, kind, Some(id), refs)
        .await?
        .into_iter()
        .find(|(i, _)| *i == id)
        .map(|(_, b)| b);
    match built {
        Some(Built::View(v)) => {
            let mut out = v.json.clone();
            state.web.aliases.name_authors(&state.index, &mut out);
            Ok(Json(out).into_response())
        }
        Some(Built::OverBudget(k)) => Err(WebError::OverBudget(format!(
            "this {} is over the evaluation budget ({})",
            kind.noun(),
            k.label()
        ))),
        Some(Built::Invalid) | None => Err(match kind {
            Kind::Issue => WebError::NotFound("issue not found"),
            Kind::Patch => WebError::NotFound("patch not found"),
            Kind::Job => WebError::NotFound("job not found"),
        }),
    }
}

/// `GET /repos/{rid}/issues/{id}`.
pub(super) async fn issue(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, id)): Path<(String, String)>,
) -> Result<Response, WebError> {
    one(&state, &scope, &rid, &id, Kind::Issue).await
}

/// `GET /repos/{rid}/patches/{id}`.
pub(super) async fn patch(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, id)): Path<(String, String)>,
) -> Result<Response, WebError> {
    one(&state, &scope, &rid, &id, Kind::Patch).await
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use seedd_proto::crypto::RepoId;

    fn oid(n: u8) -> gix::ObjectId {
        gix::ObjectId::from_bytes_or_panic(&[n; 20])
    }

    fn view(status: &'static str) -> Built {
        Built::View(Arc::new(View {
            status,
            timestamp: 1,
            json: json!({}),
        }))
    }

    #[test]
    fn cache_entries_hold_for_their_tips_and_evict_the_least_used() {
        let rid: RepoId = "rad:z3gqcJUoA1n9HaHKufZs5FCSGazv5".parse().unwrap();
        let cache = CobCache::new(10);
        let key = |n: u8| Key {
            rid,
            kind: Kind::Issue,
            id: oid(n),
        };
        cache.put(key(1), vec![oid(100)], String::new(), view("open"));
        assert!(cache.get(&key(1), &[oid(100)], "").is_some());
        // Moved tips or another salt: a miss.
        assert!(cache.get(&key(1), &[oid(101)], "").is_none());
        assert!(cache.get(&key(1), &[oid(100)], "x").is_none());
        // Invalid COBs are remembered as such.
        cache.put(key(2), vec![oid(102)], String::new(), Built::Invalid);
        assert!(matches!(
            cache.get(&key(2), &[oid(102)], ""),
            Some(Built::Invalid)
        ));
        // So are COBs over their evaluation budget.
        cache.put(
            key(3),
            vec![oid(103)],
            String::new(),
            Built::OverBudget(BudgetKind::Bytes),
        );
        assert!(matches!(
            cache.get(&key(3), &[oid(103)], ""),
            Some(Built::OverBudget(BudgetKind::Bytes))
        ));
        for n in 3..=10 {
            cache.put(key(n), vec![oid(n)], String::new(), view("open"));
        }
        assert_eq!(cache.len(), 10);
        // Use key 1 so that key 2 is the least recently used.
        assert!(cache.get(&key(1), &[oid(100)], "").is_some());
        cache.put(key(11), vec![oid(11)], String::new(), view("open"));
        assert_eq!(cache.len(), 10);
        assert!(cache.get(&key(2), &[oid(102)], "").is_none(), "evicted");
        assert!(cache.get(&key(1), &[oid(100)], "").is_some(), "kept");
    }

    #[test]
    fn heads_come_from_verified_namespaces_only() {
        let a: NodeId = NodeId::from_bytes([1; 32]);
        let b: NodeId = NodeId::from_bytes([2; 32]);
        let id = oid(7);
        let refs = vec![
            (
                format!("refs/namespaces/{a}/refs/cobs/xyz.radicle.issue/{id}"),
                RefTarget::Oid(oid(20)),
            ),
            (
                format!("refs/namespaces/{b}/refs/cobs/xyz.radicle.issue/{id}"),
                RefTarget::Oid(oid(10)),
            ),
            (
                format!("refs/namespaces/{a}/refs/cobs/xyz.radicle.patch/{id}"),
                RefTarget::Oid(oid(30)),
            ),
            (
                format!("refs/namespaces/{a}/refs/heads/main"),
                RefTarget::Oid(oid(40)),
            ),
        ];
        let both = heads(&refs, &[a, b], Kind::Issue);
        assert_eq!(both.get(&id).unwrap(), &vec![oid(10), oid(20)]);
        let only_a = heads(&refs, &[a], Kind::Issue);
        assert_eq!(only_a.get(&id).unwrap(), &vec![oid(20)]);
        assert_eq!(
            heads(&refs, &[a], Kind::Patch).get(&id).unwrap(),
            &vec![oid(30)]
        );
        assert!(heads(&refs, &[b], Kind::Patch).is_empty());
    }

    #[test]
    fn lists_are_newest_first_filtered_and_paged() {
        let v = |t: u64, s: &'static str, n: u8| {
            (
                oid(n),
                Arc::new(View {
                    status: s,
                    timestamp: t,
                    json: json!(n),
                }),
            )
        };
        let all = vec![
            v(1, "open", 1),
            v(3, "closed", 2),
            v(2, "open", 3),
            v(2, "open", 4),
        ];
        assert_eq!(
            page(all.clone(), |_| true, None, None),
            vec![json!(2), json!(3), json!(4), json!(1)]
        );
        assert_eq!(
            page(all.clone(), |s| s == "open", Some(1), Some(2)),
            vec![json!(1)]
        );
        assert_eq!(
            page(all, |s| s == "merged", None, None),
            Vec::<Value>::new()
        );
    }
}
