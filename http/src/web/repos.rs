//! Repository listing and `RepoInfo` (http-api.md §1.3, §1.6), from the index only.

use std::collections::{HashMap, HashSet};
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
use super::{author, Paging, Scope, WebError, MAX_PER_PAGE};
use crate::HttpState;
use seedd_core::index::{ListOrder, RefCommit, RepoRecord};
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

/// What this host lists, as (repository, seeds shown) rows: visible, with a project payload
/// and a canonical head (anything else would fail the explorer's schema for the whole list),
/// not denied, and in a fleet served by this shard (`Policies::served_here`). The index keeps
/// that listing in order with the records, routing and policies ([`Index::listing_page`]).
///
/// [`Index::listing_page`]: seedd_core::index::Index::listing_page
pub(super) enum Listing {
    /// The node's hosts: the index's listing minus `excluded` (repositories held only by
    /// suspended tenants; in a fleet, those this shard does not serve).
    Node { excluded: HashSet<RepoId> },
    /// A tenant's host: its repositories that are listed, in order (O(the tenant's)).
    Tenant(Vec<(RepoId, usize)>),
}

impl Listing {
    pub(super) fn of(state: &HttpState, scope: &Scope, order: ListOrder) -> Self {
        let tenancy = &state.tenancy;
        match scope {
            Scope::Tenant(t) => {
                let mine: Vec<RepoId> = tenancy
                    .tenants
                    .shown_repos(t)
                    .into_iter()
                    .filter(|rid| tenancy.policies.served_here(rid))
                    .collect();
                Self::Tenant(state.index.listed_of(&mine, order))
            }
            Scope::All => {
                let mut excluded = tenancy.tenants.suspended_only();
                if let Some(version) = tenancy.policies.placement_version() {
                    // A fleet: what this shard holds but does not serve (copies of moves):
                    // a pass over the listing in memory once per placement version and
                    // listing change, not per request.
                    let hidden =
                        state
                            .web
                            .fleet_hidden
                            .get(&version, state.index.listing_changes(), || {
                                let (listing, at) = state.index.listing_at();
                                let hidden = listing
                                    .into_iter()
                                    .filter(|rid| !tenancy.policies.served_here(rid))
                                    .collect();
                                (hidden, at)
                            });
                    excluded.extend(hidden.iter().copied());
                }
                Self::Node { excluded }
            }
        }
    }

    /// Rows `skip..skip + take` in `order` (the order [`Listing::of`] was given for a tenant).
    pub(super) fn page(
        &self,
        state: &HttpState,
        order: ListOrder,
        skip: usize,
        take: usize,
    ) -> Vec<(RepoId, usize)> {
        match self {
            Self::Node { excluded } => state.index.listing_page(order, skip, take, excluded).0,
            Self::Tenant(rows) => rows.iter().skip(skip).take(take).copied().collect(),
        }
    }

    /// How many repositories the listing holds.
    pub(super) fn len(&self, state: &HttpState) -> usize {
        match self {
            Self::Node { excluded } => state.index.listing_page(ListOrder::Rid, 0, 0, excluded).1,
            Self::Tenant(rows) => rows.len(),
        }
    }

    /// Whether `rid` is in it.
    fn contains(&self, state: &HttpState, rid: &RepoId) -> bool {
        match self {
            Self::Node { excluded } => {
                !excluded.contains(rid)
                    && !state.index.listed_of(&[*rid], ListOrder::Rid).is_empty()
            }
            Self::Tenant(rows) => rows.iter().any(|(r, _)| r == rid),
        }
    }
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

/// The `RepoInfo` of each row: its record, issue and patch counts, delegates' aliases and
/// canonical refs. O(rows).
async fn infos(
    state: &HttpState,
    scope: &Scope,
    rows: Vec<(RepoId, usize)>,
) -> Result<Vec<RepoInfo>, WebError> {
    let aliases = aliases(state, scope);
    let mut out = Vec::new();
    let mut refs = Vec::new();
    for (rid, seeds) in rows {
        let Some(r) = state.index.repo(&rid).map_err(WebError::index)? else {
            continue;
        };
        let (all, top) = row_refs(state, &r.rid)?;
        let counts = counts(state, &r, all).await?;
        if let Some(mut info) = repo_info(&r, seeds, aliases.get(&r.rid), &counts) {
            info.delegates = named_delegates(state, &r);
            out.push(info);
            refs.push((r.rid, top));
        }
    }
    // `refs` as `one` gives them (httpd lists them too): from the peel cache, else peeled in
    // one blocking pass per page.
    let peels = state.web.peels.clone();
    let canonical = match refs
        .iter()
        .map(|(_, refs)| peels.canonical(refs))
        .collect::<Option<Vec<_>>>()
    {
        Some(all) => all,
        None => {
            let storage = state.storage.clone();
            super::blocking(move || {
                refs.into_iter()
                    .map(|(rid, refs)| canonical_refs(&storage, &peels, rid, refs))
                    .collect::<Result<Vec<_>, _>>()
            })
            .await?
        }
    };
    for (info, refs) in out.iter_mut().zip(canonical) {
        info.refs = Some(refs);
    }
    Ok(out)
}

/// The listing's order for a query (`sort=seeding` with `show=all`; RID order otherwise,
/// as httpd without its search backend).
fn order(q: &ListQuery) -> ListOrder {
    if q.sort == Sort::Seeding && q.show == Show::All {
        ListOrder::Seeding
    } else {
        ListOrder::Rid
    }
}

/// `GET /api/v1/repos?show&sort&page&perPage`: a page of the listing, or of `[web] pinned` (or
/// the tenant's) in its order as far as this host lists them. Costs the page (and the pinned
/// list), never the repositories before it.
pub(super) async fn list(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Query(q): Query<ListQuery>,
) -> Result<Response, WebError> {
    let (skip, take) = Paging::new(q.page, q.per_page).window(10, MAX_PER_PAGE);
    let order = order(&q);
    let listing = Listing::of(&state, &scope, order);
    let rows = if q.show == Show::Pinned {
        let pinned = (state.web.node_of)(scope.tenant()).web.pinned;
        let mut seen = HashSet::new();
        pinned
            .iter()
            .filter(|rid| seen.insert(**rid) && listing.contains(&state, rid))
            .skip(skip)
            .take(take)
            .map(|rid| (*rid, state.index.shown_seeds(rid)))
            .collect()
    } else {
        listing.page(&state, order, skip, take)
    };
    Ok(Json(infos(&state, &scope, rows).await?).into_response())
}

/// `GET /api/v1/repos/{rid}`.
pub(super) async fn one(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path(rid): Path<String>,
) -> Result<Response, WebError> {
    let r = super::repo(&state, &scope, &rid)?;
    let alias = aliases(&state, &scope).remove(&r.rid);
    let (all, refs) = row_refs(&state, &r.rid)?;
    let counts = counts(&state, &r, all).await?;
    let seeds = state.index.shown_seeds(&r.rid);
    let mut info = repo_info(&r, seeds, alias.as_ref(), &counts).ok_or(WebError::NotFound(
        "repository has no project or no default branch",
    ))?;
    info.delegates = named_delegates(&state, &r);
    let peels = state.web.peels.clone();
    let canonical = match peels.canonical(&refs) {
        Some(c) => c,
        None => {
            let storage = state.storage.clone();
            super::blocking(move || canonical_refs(&storage, &peels, r.rid, refs)).await?
        }
    };
    info.refs = Some(canonical);
    Ok(Json(info).into_response())
}

/// Every ref of `rid` (for the COB heads of the issue and patch counts) and, of them, the
/// canonical branches and tags with the commit each leads to where the index knows it: one
/// read of the index (an iterator costs more than the few refs a row reads).
fn row_refs(
    state: &HttpState,
    rid: &RepoId,
) -> Result<(super::cobs::Refs, Vec<RefCommit>), WebError> {
    let read = state
        .index
        .refs_under_commits(rid, "")
        .map_err(WebError::index)?;
    let top = read
        .iter()
        .filter(|(name, _, _)| wanted(name))
        .cloned()
        .collect();
    let all = read.into_iter().map(|(name, t, _)| (name, t)).collect();
    Ok((Arc::new(all), top))
}

/// `refs` of `RepoInfo`: the canonical (top-level) branches and tags, peeled to commits —
/// from the index (which keeps what each ref leads to), else from `peels`, else by opening
/// the repository for the objects neither knows.
pub(super) fn canonical_refs(
    storage: &seedd_core::storage::Storage,
    peels: &Peels,
    rid: seedd_proto::crypto::RepoId,
    refs: Vec<RefCommit>,
) -> Result<CanonicalRefs, WebError> {
    if let Some(known) = peels.canonical(&refs) {
        return Ok(known);
    }
    let repo = super::source::open(storage, rid)?;
    let mut found = HashMap::new();
    for (name, target, indexed) in &refs {
        let RefTarget::Oid(id) = target else { continue };
        if !wanted(name) || indexed.is_some() {
            continue;
        }
        let peeled = match peels.get(id) {
            Some(known) => known,
            // A ref whose object is missing or does not peel to a commit is left out; a
            // missing object is not remembered (a fetch may bring it).
            None => match repo.find_object(*id) {
                Ok(o) => {
                    let commit = o.peel_to_kind(gix::object::Kind::Commit).ok().map(|c| c.id);
                    peels.keep(*id, commit);
                    commit
                }
                Err(_) => None,
            },
        };
        found.insert(*id, peeled);
    }
    Ok(canonical_of(&refs, |id| found.get(id).copied()))
}

/// The canonical refs of `refs` known to lead to commits (by the index, else by `peeled`).
fn canonical_of(
    refs: &[RefCommit],
    peeled: impl Fn(&gix::ObjectId) -> Option<Option<gix::ObjectId>>,
) -> CanonicalRefs {
    let mut out = CanonicalRefs::default();
    for (name, target, indexed) in refs {
        let RefTarget::Oid(id) = target else { continue };
        if !wanted(name) {
            continue;
        }
        let Some(Some(commit)) = indexed.or_else(|| peeled(id)) else {
            continue;
        };
        if name.starts_with("refs/tags/") {
            out.tags.insert(
                name.clone(),
                TagRef {
                    commit: commit.to_string(),
                },
            );
        } else {
            out.refs.insert(name.clone(), commit.to_string());
        }
    }
    out
}

/// A canonical branch or tag (the only refs `RepoInfo` lists).
fn wanted(name: &str) -> bool {
    name.starts_with("refs/heads/") || name.starts_with("refs/tags/")
}

/// What an object peels to as a commit (`None`: not a commit, e.g. a tag of a tree), by
/// object id: content-addressed, so never stale. A listing page or a repository's info then
/// needs no repository opened for refs seen before (opening one is most of a row's CPU).
/// At most [`Peels::CAP`] ids (~5 MiB; emptied when full).
#[derive(Default)]
pub(crate) struct Peels(std::sync::Mutex<HashMap<gix::ObjectId, Option<gix::ObjectId>>>);

impl Peels {
    const CAP: usize = 65_536;

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<gix::ObjectId, Option<gix::ObjectId>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, id: &gix::ObjectId) -> Option<Option<gix::ObjectId>> {
        self.lock().get(id).copied()
    }

    fn keep(&self, id: gix::ObjectId, commit: Option<gix::ObjectId>) {
        let mut map = self.lock();
        if map.len() >= Self::CAP {
            map.clear();
        }
        map.insert(id, commit);
    }

    /// The canonical refs of `refs` when every wanted one's commit is known, by the index or
    /// here (one lock, taken only when the index does not know one).
    pub(super) fn canonical(&self, refs: &[RefCommit]) -> Option<CanonicalRefs> {
        let unknown = |(name, target, indexed): &&RefCommit| {
            matches!(target, RefTarget::Oid(_)) && wanted(name) && indexed.is_none()
        };
        if !refs.iter().any(|r| unknown(&r)) {
            return Some(canonical_of(refs, |_| None));
        }
        let map = self.lock();
        let known = refs
            .iter()
            .filter(unknown)
            .all(|(_, target, _)| match target {
                RefTarget::Oid(id) => map.contains_key(id),
                _ => true,
            });
        known.then(|| canonical_of(refs, |id| map.get(id).copied()))
    }
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
    // The delegate's repositories from the index's census, then the listing's rules: O(the
    // delegate's repositories), not O(the node's).
    let (skip, take) = Paging::new(q.page, q.per_page).window(10, MAX_PER_PAGE);
    let order = order(&q);
    let theirs = state.index.delegated_by(&nid);
    let rows: Vec<(RepoId, usize)> = match Listing::of(&state, &scope, ListOrder::Rid) {
        Listing::Tenant(mine) => {
            let mine: HashSet<RepoId> = mine.into_iter().map(|(r, _)| r).collect();
            let theirs: Vec<RepoId> = theirs.into_iter().filter(|r| mine.contains(r)).collect();
            state.index.listed_of(&theirs, order)
        }
        Listing::Node { excluded } => {
            let theirs: Vec<RepoId> = theirs
                .into_iter()
                .filter(|r| !excluded.contains(r))
                .collect();
            state.index.listed_of(&theirs, order)
        }
    };
    let rows: Vec<(RepoId, usize)> = if q.show == Show::Pinned {
        // The pinned ones among them, in the pinned order.
        let pinned = (state.web.node_of)(scope.tenant()).web.pinned;
        let seeds: HashMap<RepoId, usize> = rows.into_iter().collect();
        let mut seen = HashSet::new();
        pinned
            .iter()
            .filter(|rid| seen.insert(**rid))
            .filter_map(|rid| seeds.get(rid).map(|s| (*rid, *s)))
            .collect()
    } else {
        rows
    };
    let rows = rows.into_iter().skip(skip).take(take).collect();
    Ok(Json(infos(&state, &scope, rows).await?).into_response())
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
/// Served from the index's in-memory census of names (a suffix array: a binary search and the
/// matches, no record read); only candidates this host shows are read, at most
/// [`MAX_SEARCH_RANKED`], on the blocking pool under a heavy permit.
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
            hits.push((!prefix, st.index.shown_seeds(&r.rid), r));
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

/// In a fleet, the listed repositories this shard does not serve, as of a placement version
/// and a count of the index's listing changes ([`seedd_core::index::Index::listing_changes`]):
/// computed again only when either moved, so a listing costs its page, not a pass over the
/// shard's repositories per request.
#[derive(Default)]
pub(crate) struct FleetHidden(std::sync::Mutex<Option<Hidden>>);

/// A placement version, a listing change count and the hidden set as of both.
type Hidden = (String, u64, Arc<HashSet<RepoId>>);

impl FleetHidden {
    /// The set for `version` at `changes`: the one kept, or `compute`'s (which returns the
    /// change count it read the listing at; kept under that count).
    pub(super) fn get(
        &self,
        version: &str,
        changes: u64,
        compute: impl FnOnce() -> (HashSet<RepoId>, u64),
    ) -> Arc<HashSet<RepoId>> {
        let lock = || self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((v, at, hidden)) = &*lock() {
            if v == version && *at == changes {
                return hidden.clone();
            }
        }
        let (hidden, at) = compute();
        let hidden = Arc::new(hidden);
        *lock() = Some((version.to_owned(), at, hidden.clone()));
        hidden
    }
}
