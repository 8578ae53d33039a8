//! Repository listing and `RepoInfo` (http-api.md §1.3, §1.6), from the index only.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use seedd_web_api::{
    CanonicalRefs, Payloads, Project, ProjectMeta, ProjectPayload, RepoInfo, SearchPayloads,
    SearchResult, TagRef, Visibility,
};
use serde::Deserialize;

use super::cobs::{counts, Counts};
use super::{author, visible_repos, Paging, Scope, WebError, MAX_PER_PAGE};
use crate::HttpState;
use seedd_core::index::RepoRecord;
use seedd_core::storage::RefTarget;
use seedd_proto::crypto::{NodeId, RepoId};

/// `r`'s delegates with the aliases their nodes announced.
fn named_delegates(state: &HttpState, r: &RepoRecord) -> Vec<seedd_web_api::Author> {
    r.delegates
        .iter()
        .map(|d| state.web.aliases.author(&state.index, d))
        .collect()
}

#[derive(Debug, Default, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(super) enum Show {
    /// `[web] pinned` (a tenant's hostname: its `[[web.tenants]]` entry), in that order.
    #[default]
    Pinned,
    All,
}

#[derive(Debug, Default, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(super) enum Sort {
    #[default]
    Rid,
    /// Falls back to RID order, as httpd does for `show=all` without its search backend.
    Activity,
    Seeding,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ListQuery {
    #[serde(default)]
    show: Show,
    #[serde(default)]
    sort: Sort,
    // Not `#[serde(flatten)]`: flattened numbers fail to parse from query strings.
    page: Option<usize>,
    per_page: Option<usize>,
}

/// Repositories this host lists: visible, with a project payload and a canonical head
/// (anything else would fail the explorer's schema for the whole list), and in a fleet served
/// by this shard (`Policies::served_here`).
pub(super) async fn listable(
    state: &Arc<HttpState>,
    scope: &Scope,
) -> Result<Vec<RepoRecord>, WebError> {
    let policies = &state.tenancy.policies;
    Ok(visible_repos(state, scope)
        .await?
        .into_iter()
        .filter(|r| !r.name.is_empty() && r.head.is_some() && policies.served_here(&r.rid))
        .collect())
}

/// How many seeds the routing table knows for a repository (at least us).
fn seeding(state: &HttpState, r: &RepoRecord) -> usize {
    state.index.seed_count(&r.rid).unwrap_or(0).max(1)
}

/// `RepoInfo` (zod `repoSchema`), with the repository's issue and patch counts.
pub(super) fn repo_info(
    r: &RepoRecord,
    seeds: usize,
    alias: Option<&String>,
    counts: &Counts,
) -> Option<RepoInfo> {
    let head = r.head.as_ref()?;
    if r.name.is_empty() {
        return None;
    }
    Some(RepoInfo {
        rid: r.rid.to_string(),
        payloads: Payloads {
            project: ProjectPayload {
                data: project(r),
                meta: ProjectMeta {
                    head: head.clone(),
                    issues: counts.issues(),
                    patches: counts.patches(),
                },
            },
        },
        delegates: r.delegates.iter().map(author).collect(),
        threshold: r.threshold,
        visibility: visibility(&r.visibility),
        seeding: seeds,
        // The explorer then shows `git clone https://<host>/<alias>.git`.
        alias: alias.cloned(),
        refs: None,
    })
}

/// The project of `r`'s identity document.
fn project(r: &RepoRecord) -> Project {
    Project {
        name: r.name.clone(),
        description: r.description.clone(),
        default_branch: r.default_branch.clone(),
    }
}

/// Who may see `r` (node ids as the index serialises them).
fn visibility(v: &seedd_core::storage::identity::Visibility) -> Visibility {
    use seedd_core::storage::identity::Visibility as V;
    match v {
        V::Public => Visibility::Public,
        V::Private { allow } => Visibility::Private {
            allow: allow.iter().map(ToString::to_string).collect(),
        },
    }
}

/// The tenant's short aliases on its hostname (`RepoInfo.alias`); none elsewhere.
fn aliases(state: &HttpState, scope: &Scope) -> HashMap<RepoId, String> {
    scope
        .tenant()
        .map(|t| state.tenancy.tenants.aliases(t))
        .unwrap_or_default()
}

async fn page(
    state: &HttpState,
    scope: &Scope,
    mut repos: Vec<RepoRecord>,
    q: &ListQuery,
) -> Result<Vec<RepoInfo>, WebError> {
    if q.show == Show::Pinned {
        // `[web] pinned` (or the tenant's), in its order, as far as this host lists them.
        let pinned = (state.web.node_of)(scope.tenant()).web.pinned;
        let mut by_rid: HashMap<RepoId, RepoRecord> = repos.drain(..).map(|r| (r.rid, r)).collect();
        repos = pinned.iter().filter_map(|rid| by_rid.remove(rid)).collect();
    }
    let paging = Paging::new(q.page, q.per_page);
    let (skip, take) = paging.window(10, MAX_PER_PAGE);
    let aliases = aliases(state, scope);
    let mut seeded: Vec<(RepoRecord, usize)> = repos
        .drain(..)
        .map(|r| {
            let s = seeding(state, &r);
            (r, s)
        })
        .collect();
    if q.sort == Sort::Seeding && q.show == Show::All {
        // Most seeded first, then RID (stable sort keeps the index's RID order).
        seeded.sort_by_key(|a| std::cmp::Reverse(a.1));
    }
    let mut out = Vec::new();
    let mut refs = Vec::new();
    for (r, s) in seeded.iter().skip(skip).take(take) {
        let counts = counts(state, r).await?;
        if let Some(mut info) = repo_info(r, *s, aliases.get(&r.rid), &counts) {
            info.delegates = named_delegates(state, r);
            out.push(info);
            refs.push((r.rid, top_level_refs(state, &r.rid)?));
        }
    }
    // `refs` as `one` gives them (httpd lists them too), peeled in one blocking pass per page.
    let storage = state.storage.clone();
    let canonical = super::blocking(move || {
        refs.into_iter()
            .map(|(rid, refs)| canonical_refs(&storage, rid, refs))
            .collect::<Result<Vec<_>, _>>()
    })
    .await?;
    for (info, refs) in out.iter_mut().zip(canonical) {
        info.refs = Some(refs);
    }
    Ok(out)
}

/// `GET /api/v1/repos?show&sort&page&perPage`.
pub(super) async fn list(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Query(q): Query<ListQuery>,
) -> Result<Response, WebError> {
    let repos = listable(&state, &scope).await?;
    Ok(Json(page(&state, &scope, repos, &q).await?).into_response())
}

/// `GET /api/v1/repos/{rid}`.
pub(super) async fn one(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path(rid): Path<String>,
) -> Result<Response, WebError> {
    let r = super::repo(&state, &scope, &rid)?;
    let alias = aliases(&state, &scope).remove(&r.rid);
    let counts = counts(&state, &r).await?;
    let mut info = repo_info(&r, seeding(&state, &r), alias.as_ref(), &counts).ok_or(
        WebError::NotFound("repository has no project or no default branch"),
    )?;
    info.delegates = named_delegates(&state, &r);
    let refs = top_level_refs(&state, &r.rid)?;
    let storage = state.storage.clone();
    let canonical = super::blocking(move || canonical_refs(&storage, r.rid, refs)).await?;
    info.refs = Some(canonical);
    Ok(Json(info).into_response())
}

/// The canonical branches and tags of `rid` from the index (namespaces are not read).
fn top_level_refs(state: &HttpState, rid: &RepoId) -> Result<Vec<(String, RefTarget)>, WebError> {
    let mut refs = state
        .index
        .refs_under(rid, "refs/heads/")
        .map_err(WebError::index)?;
    refs.extend(
        state
            .index
            .refs_under(rid, "refs/tags/")
            .map_err(WebError::index)?,
    );
    Ok(refs)
}

/// `refs` of `RepoInfo`: the canonical (top-level) branches and tags, peeled to commits.
fn canonical_refs(
    storage: &seedd_core::storage::Storage,
    rid: seedd_proto::crypto::RepoId,
    refs: Vec<(String, RefTarget)>,
) -> Result<CanonicalRefs, WebError> {
    let repo = super::source::open(storage, rid)?;
    let mut out = CanonicalRefs::default();
    for (name, target) in refs {
        let RefTarget::Oid(id) = target else { continue };
        let is_tag = name.starts_with("refs/tags/");
        if !is_tag && !name.starts_with("refs/heads/") {
            continue;
        }
        // A ref whose object is missing or does not peel to a commit is left out.
        let Some(commit) = repo
            .find_object(id)
            .ok()
            .and_then(|o| o.peel_to_kind(gix::object::Kind::Commit).ok())
        else {
            continue;
        };
        if is_tag {
            out.tags.insert(
                name,
                TagRef {
                    commit: commit.id.to_string(),
                },
            );
        } else {
            out.refs.insert(name, commit.id.to_string());
        }
    }
    Ok(out)
}

/// `GET /api/v1/delegates/{did}/repos?show&page&perPage`: repositories `did` delegates.
pub(super) async fn delegate_repos(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path(did): Path<String>,
    Query(q): Query<ListQuery>,
) -> Result<Response, WebError> {
    let nid = NodeId::from_did(&did)
        .or_else(|_| did.parse())
        .map_err(|_| WebError::BadRequest("invalid delegate: expected did:key:z6Mk…".into()))?;
    let repos = listable(&state, &scope)
        .await?
        .into_iter()
        .filter(|r| r.delegates.contains(&nid))
        .collect();
    Ok(Json(page(&state, &scope, repos, &q).await?).into_response())
}

/// `q` of `/repos/search` is cut to this many characters (httpd's limit).
const MAX_QUERY_CHARS: usize = 256;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SearchQuery {
    #[serde(default)]
    q: String,
    page: Option<usize>,
    per_page: Option<usize>,
}

/// Search candidates ranked at most (prefix matches first, then RID order; later ones are not
/// shown): bounds the records read and the routing scans for seed counts per search.
pub(super) const MAX_SEARCH_RANKED: usize = 1_000;

/// `GET /api/v1/repos/search?q&page&perPage`: a case-sensitive substring match on the project
/// name, as httpd's storage walk does; names starting with `q` first, then most seeded, then
/// RID. `SearchResult` carries the raw project payload (no `data`/`meta`) and `seeds`.
///
/// Served from the index's in-memory census of names (one pass over the distinct names, no
/// record read); only candidates this host shows are read, at most [`MAX_SEARCH_RANKED`], on
/// the blocking pool under a heavy permit.
pub(super) async fn search(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Query(q): Query<SearchQuery>,
) -> Result<Response, WebError> {
    let needle: String = q.q.chars().take(MAX_QUERY_CHARS).collect();
    let (st, sc) = (state.clone(), scope.clone());
    let mut hits: Vec<(bool, usize, RepoRecord)> = super::heavy(&state, move || {
        let mut hits = Vec::new();
        for (rid, prefix) in st.index.search_names(&needle) {
            if hits.len() >= MAX_SEARCH_RANKED {
                break;
            }
            if !super::shown(&st, &sc, &rid) {
                continue;
            }
            let Some(r) = st.index.repo(&rid).map_err(WebError::index)? else {
                continue;
            };
            if r.name.is_empty()
                || r.head.is_none()
                || !super::visible(&st, &sc, &r)
                || !st.tenancy.policies.served_here(&r.rid)
            {
                continue;
            }
            hits.push((!prefix, seeding(&st, &r), r));
        }
        Ok(hits)
    })
    .await?;
    hits.sort_by_key(|h| (h.0, std::cmp::Reverse(h.1)));
    let (skip, take) = Paging::new(q.page, q.per_page).window(10, MAX_PER_PAGE);
    let out: Vec<SearchResult> = hits
        .iter()
        .skip(skip)
        .take(take)
        .map(|(_, seeds, r)| SearchResult {
            rid: r.rid.to_string(),
            payloads: SearchPayloads {
                project: project(r),
            },
            delegates: named_delegates(&state, r),
            seeds: *seeds,
        })
        .collect();
    Ok(super::cached(super::TEN_MINUTES, &out))
}
