//! Anonymous git smart-HTTP (http-api.md §2): `GET /<rid>[.git][/<nid>]/info/refs` and
//! `POST /<rid>[.git][/<nid>]/git-upload-pack`. Push is refused; private and unknown
//! repositories are indistinguishable (404).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::TryStreamExt;
use tokio::io::AsyncReadExt;

use super::ratelimit::PackPermit;
use super::refusal::Refusal;
use super::HttpState;

mod packs;
mod refs;
use seedd_core::serve::{self, GitOutput, Service, View};
use seedd_proto::crypto::{NodeId, RepoId};

/// What a git path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    InfoRefs,
    UploadPack,
    ReceivePack,
}

impl Endpoint {
    /// Every endpoint (metrics start each route at 0; a test in `metrics` keeps it complete).
    pub const ALL: [Endpoint; 3] = [
        Endpoint::InfoRefs,
        Endpoint::UploadPack,
        Endpoint::ReceivePack,
    ];
    /// The `route` of requests whose path is not a git URL.
    pub const OTHER_ROUTE: &'static str = seedd_core::metrics::labels::OTHER_ROUTE;

    /// Bounded metric label.
    pub fn route(self) -> &'static str {
        match self {
            Endpoint::InfoRefs => "info_refs",
            Endpoint::UploadPack => "upload_pack",
            Endpoint::ReceivePack => "receive_pack",
        }
    }
}

/// A parsed git URL path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GitPath {
    pub rid: RepoId,
    pub nid: Option<NodeId>,
    pub endpoint: Endpoint,
}

/// Why a path is not a git path; each maps to a 4xx.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    NotFound,
    BadRepoId,
}

/// Parse `/<rid>[.git][/<nid>]/<endpoint>`; `<rid>` with or without `rad:` (also `rad%3A`).
pub fn parse_path(path: &str) -> Result<GitPath, PathError> {
    let mut segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segs.len() < 2 || segs.len() > 4 {
        return Err(PathError::NotFound);
    }
    let endpoint = match segs.as_slice() {
        [.., "info", "refs"] => {
            segs.truncate(segs.len() - 2);
            Endpoint::InfoRefs
        }
        [.., "git-upload-pack"] => {
            segs.truncate(segs.len() - 1);
            Endpoint::UploadPack
        }
        [.., "git-receive-pack"] => {
            segs.truncate(segs.len() - 1);
            Endpoint::ReceivePack
        }
        _ => return Err(PathError::NotFound),
    };
    let (repo, nid) = match segs.as_slice() {
        [repo] => (*repo, None),
        [repo, nid] => (*repo, Some(*nid)),
        _ => return Err(PathError::NotFound),
    };
    let repo = repo.strip_suffix(".git").unwrap_or(repo);
    let repo = ["rad:", "rad%3A", "rad%3a"]
        .iter()
        .find_map(|p| repo.strip_prefix(p))
        .unwrap_or(repo);
    let rid: RepoId = repo.parse().map_err(|_| PathError::BadRepoId)?;
    let nid = match nid {
        None => None,
        Some(n) => Some(n.parse::<NodeId>().map_err(|_| PathError::NotFound)?),
    };
    Ok(GitPath { rid, nid, endpoint })
}

/// A streamed, uncacheable git response.
fn streamed(out: GitOutput, content_type: &'static str) -> Response {
    let mut resp = Response::new(Body::from_stream(out));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    no_cache(h);
    resp
}

fn no_cache(headers: &mut HeaderMap) {
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, max-age=0, must-revalidate"),
    );
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::EXPIRES,
        HeaderValue::from_static("Fri, 01 Jan 1980 00:00:00 GMT"),
    );
}

/// The `Host` of a request (HTTP/1 header or HTTP/2 authority).
pub(crate) fn request_host(req: &Request) -> Option<String> {
    req.headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_owned()))
}

/// Axum fallback handler for every path outside other routes.
pub async fn handle(State(state): State<Arc<HttpState>>, req: Request) -> Response {
    let route = match parse_path(req.uri().path()) {
        Ok(p) => p.endpoint.route(),
        Err(_) => Endpoint::OTHER_ROUTE,
    };
    let tenants = &state.tenancy.tenants;
    let tenant = request_host(&req)
        .and_then(|h| tenants.by_host(&h))
        .map(|h| (tenants.clone(), h));
    let response = match route_request(&state, tenant.as_ref().map(|(_, h)| h), req).await {
        Ok(r) => r,
        Err(refusal) => {
            refusal.record(&state.metrics);
            tracing::debug!(reason = refusal.label(), "git request refused");
            refusal.into_response()
        }
    };
    state
        .metrics
        .count_request(route, response.status().as_u16());
    if let Some((tenants, host)) = &tenant {
        tenants.count_request(&host.name, response.status().as_u16());
    }
    response
}

/// `/<alias>[.git]/…` on a tenant host → the same path with the aliased RID.
fn resolve_alias(state: &HttpState, tenant: &str, path: &str) -> Option<GitPath> {
    let tenancy = &state.tenancy;
    let trimmed = path.trim_start_matches('/');
    let (first, rest) = trimmed.split_once('/')?;
    let alias = first.strip_suffix(".git").unwrap_or(first);
    let rid = tenancy.tenants.alias(tenant, alias)?;
    parse_path(&format!("/{}/{rest}", rid.canonical())).ok()
}

async fn route_request(
    state: &Arc<HttpState>,
    host: Option<&seedd_core::tenant::HostTenant>,
    req: Request,
) -> Result<Response, Refusal> {
    let parsed = match (parse_path(req.uri().path()), host) {
        (Err(PathError::BadRepoId), Some(h)) => {
            resolve_alias(state, &h.name, req.uri().path()).ok_or(PathError::NotFound)
        }
        (r, _) => r,
    };
    let path = parsed.map_err(|e| match e {
        PathError::NotFound => Refusal::NotGitPath,
        PathError::BadRepoId => Refusal::BadRepoId,
    })?;
    let query = req.uri().query().unwrap_or("");
    let wants_receive = query.split('&').any(|kv| kv == "service=git-receive-pack");
    if path.endpoint == Endpoint::ReceivePack || wants_receive {
        return Err(Refusal::Push);
    }
    // Tenancy: a tenant host shows only its repositories; other hosts per `http.unknown_hosts`;
    // denied repositories and those only suspended tenants hold are not served.
    let tenancy = &state.tenancy;
    match host {
        Some(h) => {
            if !h.active {
                return Err(Refusal::TenantSuspended);
            }
            if !tenancy.tenants.shows(&h.name, &path.rid) {
                return Err(Refusal::RepoNotFound);
            }
            if let Err(wait_secs) = state.check_tenant_rate(h) {
                return Err(Refusal::TenantRateLimited {
                    retry_after_secs: wait_secs,
                });
            }
        }
        None => {
            if !tenancy.serve_unknown_hosts() {
                return Err(Refusal::UnknownHost);
            }
            if tenancy.tenants.only_suspended(&path.rid) {
                return Err(Refusal::RepoNotFound);
            }
        }
    }
    if tenancy.policies.denied(&path.rid) {
        return Err(Refusal::RepoNotFound);
    }
    // Visibility: private and unknown look the same — also to a client of a tenant whose
    // egress is used up, so visibility is decided before the quota (a 429 would say "held").
    // From the census (memory): no record decoded on the common path (at 1M repositories the
    // index outgrows the block cache, and a decode was a cache miss per request).
    if !state.index.is_public(&path.rid) {
        return Err(Refusal::RepoNotFound);
    }
    let payer = tenancy
        .tenants
        .payer(host.map(|h| h.name.as_str()), &path.rid);
    if let Some(p) = &payer {
        if let Some(secs) = tenancy.tenants.egress_exhausted(p) {
            return Err(Refusal::EgressExhausted {
                retry_after_secs: secs,
            });
        }
    }
    let egress = payer.map(|p| (tenancy.tenants.clone(), p));
    let view = match path.nid {
        None => View::Canonical,
        // A namespace view: the record says which namespaces are held.
        Some(nid) => match state.index.repo(&path.rid) {
            Ok(Some(r)) if r.is_public() && r.namespaces.contains(&nid) => View::Namespace(nid),
            Ok(_) => return Err(Refusal::RepoNotFound),
            Err(e) => {
                tracing::error!(rid = %path.rid, error = %seedd_core::logging::chain(&e), "index lookup failed");
                return Err(Refusal::IndexUnavailable);
            }
        },
    };
    let protocol = serve::git_protocol(
        req.headers()
            .get("git-protocol")
            .and_then(|v| v.to_str().ok()),
    );
    let repo_path = state.storage.path_of(&path.rid);
    match path.endpoint {
        Endpoint::InfoRefs => {
            if req.method() != Method::GET && req.method() != Method::HEAD {
                return Err(Refusal::InfoRefsNotGet);
            }
            if !query.split('&').any(|kv| kv == "service=git-upload-pack") {
                return Err(Refusal::DumbHttp);
            }
            // Admission at the start of a clone: while every pack slot is busy and a clone is
            // already waiting (globally or for this repository), refuse new clones before their
            // ref advertisement (a git process), so the slots and queue serve the clones already
            // under way (benches/README.md, overload bench).
            if state.rate.sheds_new_clones()
                && (state.limiter.backlogged() || state.rate.repo_backlogged(&path.rid.canonical()))
            {
                return Err(Refusal::ClonesBacklogged);
            }
            let gzip_ok = refs::accepts_gzip(req.headers());
            advertise(
                state,
                path.rid,
                &repo_path,
                view,
                protocol.as_deref(),
                gzip_ok,
                egress,
            )
            .await
        }
        Endpoint::UploadPack => {
            if req.method() != Method::POST {
                return Err(Refusal::UploadPackNotPost);
            }
            upload_pack(state, &repo_path, view, protocol, req, egress, path.rid).await
        }
        Endpoint::ReceivePack => Err(Refusal::Push),
    }
}

/// Who pays for the egress of a response (tenant registry, tenant name).
type Egress = Option<(seedd_core::tenant::Tenants, String)>;

fn finish_hook(
    state: &Arc<HttpState>,
    route: &'static str,
    protocol: Option<&'static str>,
    egress: Egress,
) -> Box<dyn FnOnce(serve::Summary) + Send> {
    let metrics = state.metrics.clone();
    metrics.http_in_flight.with_label_values(&[route]).inc();
    Box::new(move |s| {
        if let Some((tenants, name)) = &egress {
            tenants.add_egress(name, "http", s.bytes);
        }
        metrics.http_in_flight.with_label_values(&[route]).dec();
        metrics
            .http_response_bytes
            .with_label_values(&[route])
            .inc_by(s.bytes);
        if let Some(reason) = s.aborted {
            metrics.git_aborted.with_label_values(&[reason]).inc();
            tracing::info!(route, reason, bytes = s.bytes, "git response aborted");
        }
        if let Some(p) = protocol {
            metrics.packs_in_flight.dec();
            if s.aborted.is_none() {
                metrics
                    .clone_duration
                    .with_label_values(&[p])
                    .observe(s.elapsed.as_secs_f64());
            }
        }
    })
}

/// What a pack answer holds while git runs: this repository's pack permit (short queue, else
/// 503), then a global pack slot ([`admit`]).
async fn pack_permits(
    state: &Arc<HttpState>,
    rid: &RepoId,
) -> Result<(PackPermit, serve::Permit), Refusal> {
    let repo_permit = state
        .rate
        .repo_permit(&rid.canonical())
        .await
        .map_err(|_| Refusal::RepoBusy)?;
    let permit = admit(state, &state.limiter, true).await?;
    Ok((repo_permit, permit))
}

/// Take a slot from `limiter` or answer 503 + `Retry-After` at once, before any work.
async fn admit(
    state: &Arc<HttpState>,
    limiter: &serve::PackLimiter,
    pack: bool,
) -> Result<serve::Permit, Refusal> {
    let depth = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    if pack {
        state
            .metrics
            .pack_queue_depth
            .set(depth(limiter.waiting() + 1));
    }
    let permit = limiter.acquire().await;
    if pack {
        state.metrics.pack_queue_depth.set(depth(limiter.waiting()));
    }
    permit.map_err(|why| {
        let reason = match (pack, why) {
            (true, _) => why.reason(),
            (false, serve::Admission::QueueFull) => "refs_queue_full",
            (false, serve::Admission::QueueTimeout) => "refs_queue_timeout",
        };
        Refusal::GitBusy { reason }
    })
}

async fn advertise(
    state: &Arc<HttpState>,
    rid: RepoId,
    repo: &std::path::Path,
    view: View,
    protocol: Option<&str>,
    gzip_ok: bool,
    egress: Egress,
) -> Result<Response, Refusal> {
    if let Some(r) =
        refs::advertise(state, rid, repo, view, protocol, gzip_ok, egress.clone()).await
    {
        return Ok(r);
    }
    let permit = admit(state, &state.ref_limiter, false).await?;
    let mut proc = match state
        .git
        .spawn(repo, Service::AdvertiseRefs, view, protocol)
    {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %seedd_core::logging::chain(&e), "spawning git failed");
            return Err(Refusal::GitUnavailable);
        }
    };
    // v0/v1 clients expect the smart-HTTP service preamble; v2 has none (as http-backend does).
    let prefix = (!serve::is_v2(protocol))
        .then(|| Bytes::from_static(b"001e# service=git-upload-pack\n0000"));
    proc.stdin = None;
    let out = GitOutput::new(
        prefix,
        proc.stdout,
        proc.child,
        state.git.limits,
        Some(permit),
        finish_hook(state, Endpoint::InfoRefs.route(), None, egress),
    );
    Ok(streamed(out, "application/x-git-upload-pack-advertisement"))
}

async fn upload_pack(
    state: &Arc<HttpState>,
    repo: &std::path::Path,
    view: View,
    protocol: Option<String>,
    req: Request,
    egress: Egress,
    rid: RepoId,
) -> Result<Response, Refusal> {
    let headers = req.headers().clone();
    let headers = &headers;
    // The client (behind trusted proxies, the forwarded one): pack-cache admission per client.
    let client = req
        .extensions()
        .get::<crate::ratelimit::ClientIp>()
        .map(|c| c.0);
    // Cache files on a plain HTTP/1 connection go out with sendfile (a growing one only over
    // HTTP/1.1, which can frame it in chunks).
    let splicer = match req.version() {
        v @ (axum::http::Version::HTTP_10 | axum::http::Version::HTTP_11) => req
            .extensions()
            .get::<crate::splice::Splicer>()
            .map(|s| packs::Splice {
                splicer: s.clone(),
                chunked: v == axum::http::Version::HTTP_11,
            }),
        _ => None,
    };
    if headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        != Some("application/x-git-upload-pack-request")
    {
        return Err(Refusal::NotUploadPackRequest);
    }
    let max = state.max_request_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(Refusal::BodyTooLarge { max });
    }
    let gzip = match headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
    {
        None | Some("identity") => false,
        Some("gzip") | Some("x-gzip") => true,
        Some(_) => return Err(Refusal::UnsupportedEncoding),
    };

    // The request body, decompressed if needed, capped at `max` (+1 to detect overflow).
    let body = req
        .into_body()
        .into_data_stream()
        .map_err(std::io::Error::other);
    let reader = tokio_util::io::StreamReader::new(body);
    let mut body: Box<dyn tokio::io::AsyncRead + Send + Unpin> = if gzip {
        Box::new(async_compression::tokio::bufread::GzipDecoder::new(reader).take(max + 1))
    } else {
        Box::new(reader.take(max + 1))
    };
    // A git request starts with a pkt-line length: reject anything else before spawning git.
    let mut first = [0u8; 4];
    let valid = match body.read_exact(&mut first).await {
        Ok(_) => first.iter().all(u8::is_ascii_hexdigit),
        Err(_) => false,
    };
    if !valid {
        return Err(Refusal::MalformedRequest);
    }
    // What was read of the body so far (handed to git first if git answers).
    let mut head = first.to_vec();
    // A v2 `ls-refs` (the only command whose first pkt-line is 0x14 long) is answered from the
    // ref snapshot, without a pack slot or a process.
    if serve::is_v2(protocol.as_deref()) && &first == b"0014" {
        let limit = serve::advert::MAX_LS_REFS_REQUEST as u64;
        if (&mut body)
            .take(limit)
            .read_to_end(&mut head)
            .await
            .is_err()
        {
            return Err(Refusal::MalformedRequest);
        }
        if refs::may_be_ls_refs(&head) {
            let gzip_ok = refs::accepts_gzip(headers);
            if let Some(r) =
                refs::ls_refs(state, rid, repo, view, &head, gzip_ok, egress.clone()).await
            {
                return Ok(r);
            }
        }
    }

    // A pack request (not `ls-refs`): the repository is wanted (what an identity over its
    // inventory cap announces first).
    state.metrics.demand.record(rid);

    // A cacheable request (no `have`s) is answered through the pack cache (issue 13 §3): the
    // whole body is read first (bounded in size and time), then handed to git as usual if it is
    // not cacheable or not all there.
    if let Some(cache) = &state.pack_cache {
        let limit = serve::packcache::MAX_CACHEABLE_REQUEST;
        let whole = read_rest(&mut body, &mut head, limit, CACHE_BODY_WAIT)
            .await
            .map_err(|_| Refusal::MalformedRequest)?;
        // Over `max_request_bytes`, the body was cut (`take(max + 1)`): git reports that.
        if whole && head.len() as u64 <= max {
            let v = protocol.as_deref();
            if let Some(r) = packs::serve(
                state,
                cache,
                rid,
                repo,
                view,
                v,
                &head,
                egress.clone(),
                splicer.as_ref(),
                client,
            )
            .await?
            {
                return Ok(r);
            }
        }
    }

    // Admission before any work: this repository's pack slots (short queue), then the global ones.
    let (repo_permit, permit) = pack_permits(state, &rid).await?;

    let mut proc = match state
        .git
        .spawn(repo, Service::UploadPack, view, protocol.as_deref())
    {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %seedd_core::logging::chain(&e), "spawning git failed");
            return Err(Refusal::GitUnavailable);
        }
    };
    state.metrics.packs_in_flight.inc();

    // Request body → child stdin, capped.
    if let Some(mut stdin) = proc.stdin.take() {
        let metrics = state.metrics.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let read = head.len() as u64;
            let copied = match stdin.write_all(&head).await {
                Ok(()) => tokio::io::copy(&mut body, &mut stdin)
                    .await
                    .map(|n| n + read),
                Err(e) => Err(e),
            };
            match copied {
                Ok(n) if n > max => {
                    metrics
                        .git_aborted
                        .with_label_values(&["body_too_large"])
                        .inc();
                    tracing::warn!(
                        bytes = n,
                        "upload-pack request body over the limit; truncated"
                    );
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(error = %seedd_core::logging::chain(&e), "upload-pack request body ended early")
                }
            }
            // Dropping stdin closes it: upload-pack sees the end of the request.
        });
    }
    let label = if serve::is_v2(protocol.as_deref()) {
        "v2"
    } else {
        "v0"
    };
    let out = GitOutput::new(
        None,
        proc.stdout,
        proc.child,
        state.git.limits,
        Some(permit),
        {
            let hook = finish_hook(state, Endpoint::UploadPack.route(), Some(label), egress);
            // The repository slot is held until the response ends.
            Box::new(move |s| {
                let _slot = repo_permit;
                hook(s)
            })
        },
    );
    Ok(streamed(out, "application/x-git-upload-pack-result"))
}

/// How long the rest of a request body may take to arrive for the pack cache to consider it:
/// git clients send a clone's small body at once; a slower one goes to git as it comes (and a
/// client that stalls holds its pack slot then, as without the cache).
const CACHE_BODY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Appends the rest of `body` to `head` until its end, more than `limit` bytes in all, or
/// `wait`: whether the whole body is in `head`. Reads of a slice are cancel-safe, so what
/// arrived before the deadline stays in `head` for git.
async fn read_rest(
    body: &mut (dyn tokio::io::AsyncRead + Send + Unpin),
    head: &mut Vec<u8>,
    limit: usize,
    wait: std::time::Duration,
) -> std::io::Result<bool> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut buf = vec![0u8; 16 * 1024];
    while head.len() <= limit {
        match tokio::time::timeout_at(deadline, body.read(&mut buf)).await {
            Ok(Ok(0)) => return Ok(true),
            Ok(Ok(n)) => head.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(false),
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RID: &str = "z3gqcJUoA1n9HaHKufZs5FCSGazv5";
    const NID: &str = "z6Mkon3Necd6NkkyfoGoHxid2znGc59LU3K7mubaRcFbLfLX";

    #[test]
    fn parses_every_url_form() {
        for p in [
            format!("/{RID}.git/info/refs"),
            format!("/{RID}/info/refs"),
            format!("/rad:{RID}.git/info/refs"),
            format!("/rad%3A{RID}/info/refs"),
        ] {
            let g = parse_path(&p).unwrap();
            assert_eq!(g.rid.canonical(), RID);
            assert_eq!(g.endpoint, Endpoint::InfoRefs);
            assert!(g.nid.is_none());
        }
        let g = parse_path(&format!("/{RID}.git/{NID}/git-upload-pack")).unwrap();
        assert_eq!(g.nid.unwrap().to_string(), NID);
        assert_eq!(g.endpoint, Endpoint::UploadPack);
        let g = parse_path(&format!("/{RID}.git/git-receive-pack")).unwrap();
        assert_eq!(g.endpoint, Endpoint::ReceivePack);
    }

    #[tokio::test]
    async fn a_body_is_read_whole_only_if_small_and_prompt() {
        use tokio::io::AsyncWriteExt;
        let wait = std::time::Duration::from_millis(100);
        let mut head = b"0032".to_vec();
        let mut body: &[u8] = b"rest";
        assert!(read_rest(&mut body, &mut head, 64, wait).await.unwrap());
        assert_eq!(head, b"0032rest");
        // Too big: not whole (what was read stays, for git).
        let mut head = Vec::new();
        let mut body: &[u8] = &[b'0'; 100];
        assert!(!read_rest(&mut body, &mut head, 64, wait).await.unwrap());
        let mut head = Vec::new();
        // A client that stalls: what arrived is kept, the rest goes to git as it comes.
        let (mut client, mut server) = tokio::io::duplex(64);
        client.write_all(b"0032abc").await.unwrap();
        let started = std::time::Instant::now();
        assert!(!read_rest(&mut server, &mut head, 64, wait).await.unwrap());
        assert!(started.elapsed() >= wait);
        assert_eq!(head, b"0032abc");
    }

    #[test]
    fn rejects_bad_paths() {
        assert_eq!(parse_path("/"), Err(PathError::NotFound));
        assert_eq!(parse_path("/favicon.ico"), Err(PathError::NotFound));
        assert_eq!(parse_path("/zzz/info/refs"), Err(PathError::BadRepoId));
        assert_eq!(
            parse_path(&format!("/{RID}/notanid/info/refs")),
            Err(PathError::NotFound)
        );
        assert_eq!(
            parse_path(&format!("/{RID}/objects/info/packs")),
            Err(PathError::NotFound)
        );
        assert_eq!(
            parse_path(&format!("/{RID}/a/b/c/info/refs")),
            Err(PathError::NotFound)
        );
    }
}
