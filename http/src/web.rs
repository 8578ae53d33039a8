//! The radicle-httpd 0.27 JSON API (API 6.1.0) the radicle-explorer browses, plus `/raw/`
//! file bytes (shared/docs/http-api.md §1, checklist §5). Served on the public HTTP(S)
//! listener next to git smart-HTTP: `http::router` sends `/api…` and `/raw/…` here.
//!
//! Every request passes the same per-IP rate limit as clones (the layer wraps both), then
//! [`gate`]: CORS, `Host` → tenant (the same lookup as the git routes), suspension, the
//! tenant's rate limit and egress quota, `http.unknown_hosts`, and metrics per endpoint group. Handlers see
//! only the repositories the request's [`Scope`] shows; private, denied and other tenants'
//! repositories are 404 like unknown ones. Git work (trees, blobs, history, diffs) uses gix on
//! the blocking pool; the expensive kinds hold a permit of [`Web::heavy`].

mod aliases;
mod archive;
mod cobs;
mod diff;
mod error;
mod jobs;
mod node;
mod objects;
mod raw;
mod remotes;
mod repos;
mod source;
mod trees;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

pub(crate) use error::WebError;

use crate::HttpState;
use seedd_core::index::RepoRecord;
use seedd_proto::crypto::{NodeId, RepoId};

/// `apiVersion` of `GET /api/v1` (the radicle-httpd 0.27 API this module follows).
pub(crate) const API_VERSION: &str = "6.1.0";
/// Listing and delegate pages hold at most this many repositories (httpd's `MAX_PER_PAGE`).
pub(crate) const MAX_PER_PAGE: usize = 100;
/// Concurrent expensive requests (diffs, tree walks, raw blobs, history counts); more wait up
/// to [`HEAVY_WAIT`], then get 503.
pub(crate) const HEAVY_PERMITS: usize = 8;
/// How long an expensive request waits for a permit.
pub(crate) const HEAVY_WAIT: Duration = Duration::from_secs(2);
/// How long blocking git work may take before the request gets 503.
pub(crate) const WORK_DEADLINE: Duration = Duration::from_secs(20);

/// Test builds only: `SEEDD_TEST_HEAVY_PERMITS` replaces [`HEAVY_PERMITS`] and
/// `SEEDD_TEST_HEAVY_HOLD_MS` keeps every heavy permit that long before its work starts, so
/// that an integration test can show which requests need a permit. Release builds read neither.
mod test_seam {
    #[cfg(debug_assertions)]
    fn var(name: &str) -> Option<u64> {
        std::env::var(name).ok().and_then(|v| v.parse().ok())
    }

    pub(super) fn heavy_permits() -> usize {
        #[cfg(debug_assertions)]
        if let Some(n) = var("SEEDD_TEST_HEAVY_PERMITS") {
            return n as usize;
        }
        super::HEAVY_PERMITS
    }

    pub(super) fn hold_heavy() {
        #[cfg(debug_assertions)]
        if let Some(ms) = var("SEEDD_TEST_HEAVY_HOLD_MS") {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }
}

/// What the web API shows about the node serving a host (argument: the host's tenant, if
/// any). Read per request, so a config reload shows at once.
pub(crate) type NodeOf = Box<dyn Fn(Option<&str>) -> NodeFacts + Send + Sync>;

/// The node serving a host, as `/node`, `/nodes/{nid}` and pinned listings show it.
#[derive(Debug, Clone)]
pub struct NodeFacts {
    /// The identity the host's tenant is placed on, else the default one.
    pub nid: NodeId,
    /// The announced alias (config `alias`).
    pub alias: String,
    /// `config` of `/node` (its `seedingPolicy` is filled in from the live default policy).
    pub config: NodeSettings,
    /// `[web]` (or the tenant's `[[web.tenants]]` entry).
    pub web: seedd_core::config::WebProfile,
}

/// The parts of `config` of `/node` that come from seedd's configuration.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    pub listen: Vec<String>,
    pub external_addresses: Vec<String>,
    /// `nid@host:port` of `p2p.connect`.
    pub connect: Vec<String>,
    /// `p2p.relay`: `always`, `never` or `auto`.
    pub relay: String,
    /// `ERROR`…`TRACE`.
    pub log: &'static str,
    /// The routing table's cap.
    pub max_routes: usize,
    pub max_concurrent_fetches: usize,
    /// `p2p.rate.inbound` / `outbound`: (fill rate, capacity).
    pub inbound_rate: (f64, f64),
    pub outbound_rate: (f64, f64),
    pub max_inbound: usize,
    pub max_outbound: usize,
    pub max_concurrent_serves: usize,
}

/// What the web API needs besides [`HttpState`]'s storage, index and tenancy.
pub struct Web {
    /// The node that serves a host.
    pub node_of: NodeOf,
    /// Permits for expensive requests.
    pub heavy: Arc<tokio::sync::Semaphore>,
    /// Materialised issues and patches.
    pub(crate) cobs: cobs::CobCache,
    /// Archive slots and known tree sizes (`archive.rs`).
    pub(crate) archives: archive::Archives,
    /// Serialised tree answers (`trees.rs`).
    pub(crate) trees: trees::TreeCache,
    /// Other serialised content-addressed answers (commits, diffs, blobs, READMEs, history
    /// counts) by repository, commit and endpoint (`source.rs` `at_commit`).
    pub(crate) answers: trees::TreeCache,
    /// Raw blob bytes shared by concurrent downloads (`raw.rs`).
    pub(crate) raw: raw::RawBlobs,
    /// Nodes' aliases from their announcements (`aliases.rs`).
    pub(crate) aliases: aliases::Aliases,
    /// What canonical refs' objects peel to (`repos.rs`).
    pub(crate) peels: Arc<repos::Peels>,
    /// In a fleet, the listed repositories this shard does not serve (`repos.rs`).
    pub(crate) fleet_hidden: repos::FleetHidden,
}

impl Web {
    pub fn new(node_of: impl Fn(Option<&str>) -> NodeFacts + Send + Sync + 'static) -> Self {
        Self {
            node_of: Box::new(node_of),
            heavy: Arc::new(tokio::sync::Semaphore::new(test_seam::heavy_permits())),
            cobs: cobs::CobCache::default(),
            archives: archive::Archives::default(),
            trees: trees::TreeCache::default(),
            answers: trees::TreeCache::default(),
            raw: raw::RawBlobs::default(),
            aliases: aliases::Aliases::default(),
            peels: Arc::default(),
            fleet_hidden: repos::FleetHidden::default(),
        }
    }
}

/// Which repositories a request may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// A tenant's hostname: only its repositories.
    Tenant(String),
    /// Any other host (when `http.unknown_hosts` serves them): every public repository that is
    /// not held only by suspended tenants.
    All,
}

impl Scope {
    fn tenant(&self) -> Option<&str> {
        match self {
            Scope::Tenant(t) => Some(t),
            Scope::All => None,
        }
    }
}

/// Endpoint groups: the `group` label of `seedd_web_*` (bounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    Node,
    Repos,
    Tree,
    Blob,
    History,
    Commit,
    Remotes,
    Raw,
    Other,
    Cobs,
    Archive,
}

impl Group {
    /// Every group (`seedd_core::metrics::labels::WEB_GROUPS` names each; a test in `metrics`
    /// checks it).
    #[cfg(test)]
    pub(crate) const ALL: [Group; 11] = [
        Group::Node,
        Group::Repos,
        Group::Tree,
        Group::Blob,
        Group::History,
        Group::Commit,
        Group::Remotes,
        Group::Raw,
        Group::Other,
        Group::Cobs,
        Group::Archive,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Group::Node => "node",
            Group::Repos => "repos",
            Group::Tree => "tree",
            Group::Blob => "blob",
            Group::History => "history",
            Group::Commit => "commit",
            Group::Remotes => "remotes",
            Group::Raw => "raw",
            Group::Other => "other",
            Group::Cobs => "cobs",
            Group::Archive => "archive",
        }
    }

    /// The group of a request path (`/api/v1/repos/<rid>/<what>/…`, `/raw/…`).
    pub(crate) fn of(path: &str) -> Group {
        if let Some(rest) = path.strip_prefix("/raw/") {
            // `/raw/{rid}/archive/…` and `/raw/{rid}/{sha}.tar.gz|.tar|.zip`.
            let segs: Vec<&str> = rest.splitn(3, '/').collect();
            return match segs.as_slice() {
                [_, "archive", _] => Group::Archive,
                [_, file] if archive::Format::detect(file).1.is_some() => Group::Archive,
                _ => Group::Raw,
            };
        }
        if matches!(path, "/api" | "/api/" | "/api/v1") {
            return Group::Node;
        }
        let Some(rest) = path.strip_prefix("/api/v1/") else {
            return Group::Other;
        };
        let mut segs = rest.split('/');
        match (segs.next(), segs.next(), segs.next()) {
            (Some("repos"), Some(_), Some(what)) => match what {
                "tree" | "stats" => Group::Tree,
                "blob" | "readme" => Group::Blob,
                "commits" if segs.next().is_some_and(|s| !s.is_empty()) => Group::Commit,
                "diff" => Group::Commit,
                "commits" | "activity" => Group::History,
                "remotes" => Group::Remotes,
                "issues" | "patches" | "jobs" => Group::Cobs,
                _ => Group::Other,
            },
            (Some("repos"), ..) | (Some("delegates"), ..) => Group::Repos,
            (Some("node" | "info" | "stats" | "nodes"), ..) | (Some(""), ..) => Group::Node,
            _ => Group::Other,
        }
    }
}

/// Whether `http::router` sends a path here.
pub(crate) fn is_web_path(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/") || path.starts_with("/raw/")
}

/// Query parameters shared by listings (unknown ones are ignored, as httpd does).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Paging {
    pub page: Option<usize>,
    pub per_page: Option<usize>,
}

impl Paging {
    pub(crate) fn new(page: Option<usize>, per_page: Option<usize>) -> Self {
        Self { page, per_page }
    }

    /// `(skip, take)` with `perPage` defaulting to `default` and clamped to `max`.
    pub(crate) fn window(&self, default: usize, max: usize) -> (usize, usize) {
        let take = self.per_page.unwrap_or(default).min(max);
        (self.page.unwrap_or(0).saturating_mul(take), take)
    }
}

/// The web routes; every response, 404s included, passes [`gate`].
pub(crate) fn router(state: Arc<HttpState>) -> Router {
    let api = Router::new()
        .route("/api", get(node::api_root))
        .route("/api/v1", get(node::v1_root))
        .route("/api/v1/", get(node::v1_root))
        .route("/api/v1/node", get(node::node))
        .route("/api/v1/info", get(node::info))
        .route("/api/v1/stats", get(node::stats))
        .route("/api/v1/nodes/{nid}", get(node::node_by_id))
        .route("/api/v1/nodes/{nid}/inventory", get(node::inventory))
        .route("/api/v1/node/policies/repos", get(node::policies))
        .route("/api/v1/node/policies/repos/{rid}", get(node::policy))
        .route("/api/v1/delegates/{did}/repos", get(repos::delegate_repos))
        .route("/api/v1/repos", get(repos::list))
        .route("/api/v1/repos/search", get(repos::search))
        .route("/api/v1/repos/{rid}", get(repos::one))
        .route("/api/v1/repos/{rid}/tree/{sha}", get(source::tree_root))
        .route("/api/v1/repos/{rid}/tree/{sha}/", get(source::tree_root))
        .route("/api/v1/repos/{rid}/tree/{sha}/{*path}", get(source::tree))
        .route("/api/v1/repos/{rid}/blob/{sha}/{*path}", get(source::blob))
        .route("/api/v1/repos/{rid}/readme/{sha}", get(source::readme))
        .route("/api/v1/repos/{rid}/commits", get(source::commits))
        .route("/api/v1/repos/{rid}/commits/{sha}", get(source::commit_one))
        .route(
            "/api/v1/repos/{rid}/stats/commits/{sha}",
            get(source::commit_count),
        )
        .route(
            "/api/v1/repos/{rid}/stats/tree/{sha}",
            get(source::tree_stats),
        )
        .route(
            "/api/v1/repos/{rid}/diff/{base}/{oid}",
            get(source::diff_between),
        )
        .route(
            "/api/v1/repos/{rid}/diff/{base}/{oid}/stats",
            get(source::diff_stats),
        )
        .route("/api/v1/repos/{rid}/activity", get(source::activity))
        .route("/api/v1/repos/{rid}/remotes", get(remotes::list))
        .route("/api/v1/repos/{rid}/remotes/{nid}", get(remotes::one))
        .route("/api/v1/repos/{rid}/issues", get(cobs::issues))
        .route("/api/v1/repos/{rid}/issues/{id}", get(cobs::issue))
        .route("/api/v1/repos/{rid}/patches", get(cobs::patches))
        .route("/api/v1/repos/{rid}/patches/{id}", get(cobs::patch))
        .route("/api/v1/repos/{rid}/jobs/{sha}", get(jobs::jobs))
        .route("/raw/{rid}/blobs/{oid}", get(raw::by_oid))
        .route("/raw/{rid}/archive/{*refname}", get(archive::by_ref))
        .route("/raw/{rid}/{sha}", get(archive::by_commit))
        .route("/raw/{rid}/{sha}/{*path}", get(raw::by_path));
    api.fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), gate))
        .with_state(state)
}

async fn not_found() -> Response {
    WebError::NotFound("not found").into_response()
}

/// Every web request: CORS, tenancy, metrics.
async fn gate(State(state): State<Arc<HttpState>>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let group = Group::of(req.uri().path());
    let tenants = &state.tenancy.tenants;
    let host = crate::git::request_host(&req).and_then(|h| tenants.by_host(&h));
    let tenant = host.as_ref().map(|h| h.name.clone());
    let head = req.method() == Method::HEAD;
    let front_placement = req
        .headers()
        .get("x-seedd-placement")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(v) = &front_placement {
        // The fleet's front merges under this placement (`Policies::sync_placement`).
        state.tenancy.policies.sync_placement(v);
    }
    let mut admitted = false;
    let mut response = if req.method() == Method::OPTIONS {
        preflight()
    } else {
        match admit(&state, host) {
            Ok(scope) => {
                admitted = true;
                req.extensions_mut().insert(scope);
                next.run(req).await
            }
            Err(e) => e.into_response(),
        }
    };
    if front_placement.is_some() {
        // Which placement this answer was made under: the front merges only answers made
        // under one placement (it re-reads its own and asks again otherwise).
        if let Some(v) = state
            .tenancy
            .policies
            .placement_version()
            .and_then(|v| HeaderValue::from_str(&v).ok())
        {
            response.headers_mut().insert("x-seedd-placement", v);
        }
    }
    if let Some(t) = &tenant {
        tenants.count_request(t, response.status().as_u16());
        // An admitted answer goes out on the tenant's hostname: its egress (bodies here are
        // whole, so their size is exact; HEAD sends none).
        let bytes = hyper::body::Body::size_hint(response.body()).exact();
        if let (Some(n), true, false) = (bytes, admitted, head) {
            tenants.add_egress(t, "http", n);
        }
    }
    response.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
        count_bound(&state, "too_large", 1);
    }
    state
        .metrics
        .count_web(group.label(), response.status().as_u16(), started.elapsed());
    response
}

/// CORS preflight as httpd answers it: any origin, GET (and HEAD), `Content-Type`, one day.
fn preflight() -> Response {
    (
        StatusCode::NO_CONTENT,
        [
            (header::ACCESS_CONTROL_ALLOW_METHODS, "GET, HEAD"),
            (header::ACCESS_CONTROL_ALLOW_HEADERS, "content-type"),
            (header::ACCESS_CONTROL_MAX_AGE, "86400"),
        ],
    )
        .into_response()
}

/// The tenant of the request's `Host` (if any) → the request's [`Scope`], or the refusal (the
/// git routes' rules, `http::git`).
fn admit(
    state: &HttpState,
    host: Option<seedd_core::tenant::HostTenant>,
) -> Result<Scope, WebError> {
    let tenancy = &state.tenancy;
    match host {
        Some(h) => {
            if !h.active {
                return Err(WebError::Forbidden("this tenant is suspended"));
            }
            state.check_tenant_rate(&h).map_err(|secs| {
                state
                    .metrics
                    .http_rate_limited
                    .with_label_values(&["tenant"])
                    .inc();
                WebError::RateLimited(secs)
            })?;
            if let Some(secs) = tenancy.tenants.egress_exhausted(&h.name) {
                return Err(WebError::EgressExhausted(secs));
            }
            Ok(Scope::Tenant(h.name))
        }
        None if tenancy.serve_unknown_hosts() => Ok(Scope::All),
        None => Err(WebError::NotFound("unknown host")),
    }
}

/// Whether `scope` may see a repository: public, not denied by the operator, and held by the
/// tenant (tenant host) or not held only by suspended tenants (other hosts).
pub(crate) fn visible(state: &HttpState, scope: &Scope, r: &RepoRecord) -> bool {
    r.is_public() && shown(state, scope, &r.rid)
}

/// Whether `scope` shows `rid` as far as policy and tenancy go ([`visible`] without the
/// record's visibility).
pub(crate) fn shown(state: &HttpState, scope: &Scope, rid: &RepoId) -> bool {
    let tenancy = &state.tenancy;
    !tenancy.policies.denied(rid)
        && match scope {
            Scope::Tenant(t) => tenancy.tenants.shows(t, rid),
            Scope::All => !tenancy.tenants.only_suspended(rid),
        }
}

/// The public repositories `scope` shows, in RID order (`/nodes/{nid}/inventory`, the policy
/// listing): from the index's census, no record read; each checked with [`shown`], on the
/// blocking pool under a [`heavy`] permit (the answer is as long as the inventory).
pub(crate) async fn visible_repos(
    state: &Arc<HttpState>,
    scope: &Scope,
) -> Result<Vec<RepoId>, WebError> {
    let (st, scope) = (state.clone(), scope.clone());
    heavy(state, move || {
        let rids = match &scope {
            Scope::Tenant(t) => {
                let mut mine = st.tenancy.tenants.shown_repos(t);
                mine.sort_unstable();
                mine
            }
            Scope::All => st.index.public_repos(),
        };
        Ok(rids
            .into_iter()
            .filter(|rid| st.index.is_public(rid) && shown(&st, &scope, rid))
            .collect())
    })
    .await
}

/// Parse a repository path segment: `rad:z…`, `z…` (also `rad%3A` decoded by axum) or, on a
/// tenant host, one of the tenant's aliases.
pub(crate) fn parse_rid(
    state: &HttpState,
    scope: &Scope,
    segment: &str,
) -> Result<RepoId, WebError> {
    let segment = segment.strip_suffix(".git").unwrap_or(segment);
    if let Ok(rid) = segment.parse::<RepoId>() {
        return Ok(rid);
    }
    scope
        .tenant()
        .and_then(|t| state.tenancy.tenants.alias(t, segment))
        .ok_or(WebError::NotFound("repository not found"))
}

/// A `z6Mk…` node id from a path.
pub(crate) fn parse_nid(s: &str) -> Result<NodeId, WebError> {
    s.parse()
        .map_err(|_| WebError::BadRequest("invalid node id: expected z6Mk…".into()))
}

/// The repository a path segment names, if `scope` may see it (404 otherwise).
pub(crate) fn repo(
    state: &HttpState,
    scope: &Scope,
    segment: &str,
) -> Result<RepoRecord, WebError> {
    let rid = parse_rid(state, scope, segment)?;
    match state.index.repo(&rid).map_err(WebError::index)? {
        Some(r) if visible(state, scope, &r) => Ok(r),
        _ => Err(WebError::NotFound("repository not found")),
    }
}

/// Run git work on the blocking pool, bounded by [`WORK_DEADLINE`].
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, WebError> + Send + 'static,
) -> Result<T, WebError> {
    seedd_core::blocking::run(WORK_DEADLINE, f)
        .await
        .map_err(WebError::Blocking)?
}

/// Expensive git work: waits up to [`HEAVY_WAIT`] for one of [`HEAVY_PERMITS`] (else 503),
/// then runs on the blocking pool holding the permit until the work itself ends (also when
/// the request stopped waiting at [`WORK_DEADLINE`]).
pub(crate) async fn heavy<T: Send + 'static>(
    state: &HttpState,
    f: impl FnOnce() -> Result<T, WebError> + Send + 'static,
) -> Result<T, WebError> {
    heavy_cancellable(state, move |_| f()).await
}

/// [`heavy`] for work that checks a [`Cancel`](seedd_core::blocking::Cancel) between its units
/// (commits of a walk, files of a diff): the flag is set when the client goes away (this
/// future is dropped) or at [`WORK_DEADLINE`], so the work and its permit end within one unit.
/// The permit is held inside the blocking work, until it returns.
pub(crate) async fn heavy_cancellable<T: Send + 'static>(
    state: &HttpState,
    f: impl FnOnce(&seedd_core::blocking::Cancel) -> Result<T, WebError> + Send + 'static,
) -> Result<T, WebError> {
    let permit = counted_permit(state, &state.web.heavy).await?;
    let metrics = state.metrics.clone();
    seedd_core::blocking::run_cancellable(WORK_DEADLINE, move |cancel| {
        let _permit = permit;
        test_seam::hold_heavy();
        let r = f(cancel);
        if cancel.is_cancelled() && r.is_err() {
            metrics.web_bounded.with_label_values(&["cancelled"]).inc();
        }
        r
    })
    .await
    .map_err(WebError::Blocking)?
}

/// The error of work that saw its cancel flag (nobody waits for the answer any longer; the
/// status is the deadline's 503 should anyone still read it).
pub(crate) fn cancelled(_: seedd_core::blocking::Cancelled) -> WebError {
    WebError::Blocking(seedd_core::blocking::BlockingError::Deadline(WORK_DEADLINE))
}

/// Counts one cut of a response bound in `seedd_web_bounded_total{bound}`.
pub(crate) fn count_bound(state: &HttpState, bound: &'static str, n: u64) {
    if n > 0 {
        state
            .metrics
            .web_bounded
            .with_label_values(&[bound])
            .inc_by(n);
    }
}

/// [`permit`] within [`HEAVY_WAIT`], counting a refusal in `seedd_web_rejected_total{reason="busy"}`.
pub(crate) async fn counted_permit(
    state: &HttpState,
    slots: &Arc<tokio::sync::Semaphore>,
) -> Result<tokio::sync::OwnedSemaphorePermit, WebError> {
    let got = permit(slots, HEAVY_WAIT).await;
    if got.is_err() {
        state
            .metrics
            .web_rejected
            .with_label_values(&["busy"])
            .inc();
    }
    got
}

/// One of `slots`, waiting at most `wait` ([`WebError::Busy`] then).
pub(crate) async fn permit(
    slots: &Arc<tokio::sync::Semaphore>,
    wait: Duration,
) -> Result<tokio::sync::OwnedSemaphorePermit, WebError> {
    match tokio::time::timeout(wait, slots.clone().acquire_owned()).await {
        Ok(Ok(p)) => Ok(p),
        _ => Err(WebError::Busy),
    }
}

/// JSON with a `Cache-Control` value (httpd's, http-api.md §1.1).
pub(crate) fn cached<T: serde::Serialize>(cache: &'static str, value: &T) -> Response {
    let mut r = axum::Json(value).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    r
}

/// An already serialised JSON answer with a `Cache-Control` header.
pub(crate) fn cached_bytes(cache: &'static str, body: bytes::Bytes) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    r
}

/// Content-addressed answers (`/tree/{sha}`, `/commits/{sha}`, …).
pub(crate) const IMMUTABLE: &str = "public, max-age=604800, immutable";
/// `/node`, `/info`.
pub(crate) const TEN_MINUTES: &str = "public, max-age=600, must-revalidate";
/// `/activity`.
pub(crate) const ONE_HOUR: &str = "public, max-age=3600, must-revalidate";

/// `{id: "did:key:…"}` (the `alias` key is omitted: the explorer's zod schema rejects `null`).
pub(crate) fn author(nid: &NodeId) -> seedd_web_api::Author {
    seedd_web_api::Author {
        id: nid.to_did(),
        alias: None,
    }
}

#[cfg(test)]
mod tests;
