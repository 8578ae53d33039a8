//! seedd-front: the thin, stateless router in front of a fleet (issue 28). `seedd front`
//! runs it; the Helm chart renders its placement.
//!
//! * [`route`]: which shard a request belongs to, from its path (pure);
//! * [`merge`]: node-wide answers merged over the shards (pure);
//! * [`upstream`]: replicas' health and forwarding with failover;
//! * [`metrics`]: the `seedd_front_*` metrics.
//!
//! What it keeps: nothing but the placement file (re-read when it changes) and each replica's
//! last health. Every repository's requests go to one replica of its shard while that one is
//! up (rendezvous order, `seedd_core::placement`), so a clone's three requests see one
//! replica's refs; a `git-upload-pack` answer that is empty (the replica lacked the objects
//! the client wants: it is behind its sibling) is retried on the next replica.
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod merge;
pub mod metrics;
pub mod route;
pub mod upstream;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::net::TcpListener;

use seedd_core::placement::{Placement, Watched};
use seedd_proto::crypto::RepoId;

use merge::{ListQuery, MAX_DEPTH, SHARD_PAGE};
use metrics::{result_label, FrontMetrics};
use route::{NodeWide, Route};
use upstream::{Body, Upstreams};

/// How the front runs (`seedd front` flags).
#[derive(Debug, Clone)]
pub struct FrontOptions {
    /// Public listener (clients, the ingress or the LoadBalancer).
    pub listen: SocketAddr,
    /// `/metrics`, `/healthz`, `/readyz` and `/fleet` (the placement in force, JSON).
    pub admin_listen: SocketAddr,
    /// The placement file (a ConfigMap key), re-read every `placement_poll`.
    pub placement: PathBuf,
    pub placement_poll: Duration,
    /// The shard that answers for the node itself (`/api/v1/node`, `/api`, git aliases); the
    /// first of the placement when unset.
    pub node_shard: Option<String>,
    /// `[web] pinned` of the seeds, in order (the merged `show=pinned` listing keeps it).
    pub pinned: Vec<RepoId>,
    /// How often every replica's `/readyz` is asked.
    pub health_interval: Duration,
}

/// Why the front cannot start.
#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    #[error(transparent)]
    Placement(#[from] seedd_core::placement::PlacementError),
    #[error("--node-shard {0:?} is not a shard of the placement file")]
    NodeShard(String),
    #[error("listening on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        error: std::io::Error,
    },
    #[error("registering metrics")]
    Metrics(#[from] prometheus::Error),
}

struct Front {
    placement: Watched,
    upstreams: Upstreams,
    metrics: Arc<FrontMetrics>,
    node_shard: Option<String>,
    pinned: Vec<RepoId>,
    /// Merged answers at once (each asks every shard for up to `MAX_DEPTH` entries).
    merges: tokio::sync::Semaphore,
}

/// Most client connections the front holds at once (each costs a task and two buffers).
const MAX_CONNECTIONS: usize = 16_384;
/// A request head must arrive within this long.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Most merged answers in flight; more get 503 with `Retry-After`.
const MAX_MERGES: usize = 32;

/// Run the front until `shutdown` resolves.
pub async fn run(
    opts: FrontOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), FrontError> {
    let placement = Watched::load(&opts.placement)?;
    if let Some(n) = &opts.node_shard {
        if placement.get().shard(n).is_none() {
            return Err(FrontError::NodeShard(n.clone()));
        }
    }
    let metrics = Arc::new(FrontMetrics::new()?);
    let version = placement.get().version().to_owned();
    metrics.placement.with_label_values(&[&version]).set(1);
    metrics.zero(
        &placement
            .get()
            .shards()
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
    );
    {
        let m = metrics.clone();
        let last = std::sync::Mutex::new(version);
        placement.spawn_watch(opts.placement_poll, move |new| {
            let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
            m.placement.with_label_values(&[last.as_str()]).set(0);
            *last = new.version().to_owned();
            m.placement.with_label_values(&[last.as_str()]).set(1);
            m.zero(
                &new.shards()
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>(),
            );
        });
    }
    let upstreams = Upstreams::new(metrics.clone());
    upstreams.spawn_health(placement.clone(), opts.health_interval);
    let front = Arc::new(Front {
        placement,
        upstreams,
        metrics,
        node_shard: opts.node_shard.clone(),
        pinned: opts.pinned.clone(),
        merges: tokio::sync::Semaphore::new(MAX_MERGES),
    });
    let bind = |addr: SocketAddr| async move {
        TcpListener::bind(addr)
            .await
            .map_err(|error| FrontError::Listen { addr, error })
    };
    let public = bind(opts.listen).await?;
    let admin = bind(opts.admin_listen).await?;
    tracing::info!(listen = %opts.listen, admin = %opts.admin_listen, placement = %opts.placement.display(), shards = front.placement.get().shards().len(), "front listening");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let f = front.clone();
    let public_task = tokio::spawn(accept(public, stop_rx.clone(), move |req, peer| {
        let f = f.clone();
        async move { f.handle(req, peer).await }
    }));
    let f = front.clone();
    let admin_task = tokio::spawn(accept(admin, stop_rx, move |req, _| {
        let f = f.clone();
        async move { f.admin(req) }
    }));
    shutdown.await;
    tracing::info!("front stopping: no new connections");
    let _ = stop_tx.send(true);
    let _ = tokio::join!(public_task, admin_task);
    Ok(())
}

async fn accept<F, Fut>(
    listener: TcpListener,
    mut stop: tokio::sync::watch::Receiver<bool>,
    serve: F,
) where
    F: Fn(Request<Incoming>, SocketAddr) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Body>> + Send + 'static,
{
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // A client that does not finish its request head in time is cut (slow-loris).
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    // Connections at once: beyond it, new ones wait in the kernel's backlog.
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let serve = serve.clone();
        let svc = hyper::service::service_fn(move |req| {
            let serve = serve.clone();
            async move { Ok::<_, Infallible>(serve(req, peer).await) }
        });
        let conn = builder
            .serve_connection(TokioIo::new(stream), svc)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
            drop(slot);
        });
    }
    graceful.shutdown().await;
}

impl Front {
    fn node_shard<'a>(&self, p: &'a Placement) -> &'a seedd_core::placement::Shard {
        self.node_shard
            .as_deref()
            .and_then(|n| p.shard(n))
            .unwrap_or(&p.shards()[0])
    }

    async fn handle(&self, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        let started = Instant::now();
        let placement = self.placement.get();
        let path = req.uri().path().to_owned();
        let host = req
            .headers()
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(|h| {
                h.rsplit_once(':').map_or(h, |(name, port)| {
                    if port.chars().all(|c| c.is_ascii_digit()) {
                        name
                    } else {
                        h
                    }
                })
            })
            .unwrap_or("")
            .to_owned();
        let route = route::classify(&path);
        let hosted = placement.shard_for_host(&host);
        let (label, resp, shard_name) = match (&route, hosted) {
            (Route::Repo { rid, kind }, _) => {
                let shard = hosted.unwrap_or_else(|| placement.shard_of(rid));
                let r = self
                    .upstreams
                    .forward(shard, rid.as_bytes(), req, peer)
                    .await;
                (kind.label(), r, shard.name.clone())
            }
            (_, Some(shard)) => {
                let key = host.clone();
                let r = self
                    .upstreams
                    .forward(shard, key.as_bytes(), req, peer)
                    .await;
                ("node", r, shard.name.clone())
            }
            (Route::NodeWide(kind), None) => {
                let r = self.merged(*kind, &placement, req, peer).await;
                ("node_wide", r, "fleet".to_owned())
            }
            (Route::Node, None) => {
                let shard = self.node_shard(&placement);
                let r = self.upstreams.forward(shard, b"node", req, peer).await;
                ("node", r, shard.name.clone())
            }
        };
        self.metrics
            .requests
            .with_label_values(&[&shard_name, label, result_label(resp.status().as_u16())])
            .inc();
        self.metrics
            .duration
            .with_label_values(&[label])
            .observe(started.elapsed().as_secs_f64());
        resp
    }

    /// A node-wide endpoint: every shard's part, merged as one seed would answer.
    async fn merged(
        &self,
        kind: NodeWide,
        placement: &std::sync::Arc<Placement>,
        req: Request<Incoming>,
        peer: SocketAddr,
    ) -> Response<Body> {
        let Ok(_permit) = self.merges.try_acquire() else {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many fleet-wide listings at once; retry shortly",
            );
        };
        let path = req.uri().path().trim_end_matches('/').to_owned();
        let query = req.uri().query().unwrap_or("").to_owned();
        let headers = req.headers().clone();
        let listing = matches!(
            kind,
            NodeWide::Repos | NodeWide::Search | NodeWide::DelegateRepos
        );
        // Stats and policies take no paging: their query is passed on as it is.
        let q = match ListQuery::parse(&query) {
            Ok(q) => q,
            Err(e) if listing => return error(StatusCode::BAD_REQUEST, &e),
            Err(_) => ListQuery::default(),
        };
        // Each shard: its first `depth` entries in the listing's order, page by page.
        let pages = |base: String| {
            let n = q.depth().div_ceil(SHARD_PAGE).max(1);
            (0..n)
                .map(move |p| format!("{base}&page={p}&perPage={SHARD_PAGE}"))
                .collect::<Vec<_>>()
        };
        let per_shard: Vec<String>;
        let list: bool;
        match kind {
            NodeWide::Repos | NodeWide::DelegateRepos => {
                let show = if q.pinned { "pinned" } else { "all" };
                let sort = match q.sort {
                    merge::Sort::Rid => "rid",
                    merge::Sort::Seeding => "seeding",
                };
                per_shard = pages(format!("{path}?show={show}&sort={sort}"));
                list = true;
            }
            NodeWide::Search => {
                let needle = encode(&q.q);
                per_shard = pages(format!("{path}?q={needle}"));
                list = true;
            }
            NodeWide::Stats | NodeWide::Policies => {
                per_shard = vec![if query.is_empty() {
                    path.clone()
                } else {
                    format!("{path}?{query}")
                }];
                list = false;
            }
        }
        // Every shard's part under one placement: an answer made under another version (a
        // placement change in flight) makes the front re-read its own and ask again, once.
        let mut placement = placement.clone();
        let mut attempt = 0;
        let (parts, head) = loop {
            attempt += 1;
            let futures = placement.shards().iter().map(|shard| {
                let urls = per_shard.clone();
                let headers = headers.clone();
                let version = placement.version().to_owned();
                async move {
                    let mut got: Vec<Value> = Vec::new();
                    let mut head: Option<hyper::HeaderMap> = None;
                    let mut same = true;
                    for url in urls {
                        let (h, v) = self
                            .upstreams
                            .json(shard, &url, &headers, peer, &version)
                            .await?;
                        same &= h
                            .get("x-seedd-placement")
                            .and_then(|v| v.to_str().ok())
                            .is_none_or(|v| v == version);
                        head.get_or_insert(h);
                        match v {
                            Value::Array(items) if list => {
                                let short = items.len() < SHARD_PAGE;
                                got.extend(items);
                                if short || got.len() >= MAX_DEPTH {
                                    break;
                                }
                            }
                            Value::Array(items) => got.extend(items),
                            other => {
                                got.push(other);
                                break;
                            }
                        }
                    }
                    Ok::<_, upstream::ShardFailure>((head, got, same))
                }
            });
            let results = futures_util::future::join_all(futures).await;
            let mut parts = Vec::with_capacity(results.len());
            let mut head = None;
            let mut same = true;
            for r in results {
                match r {
                    Ok((h, v, s)) => {
                        if head.is_none() {
                            head = h;
                        }
                        same &= s;
                        parts.push(v);
                    }
                    // A listing without a shard's part would be a wrong answer, not a short one.
                    Err(f) => return f.into_response(),
                }
            }
            if same || attempt >= 2 {
                break (parts, head);
            }
            if let Err(e) = self.placement.reload() {
                tracing::warn!(error = %e, "re-reading the placement failed");
            }
            placement = self.placement.get();
            // The seeds re-read theirs at most every 20 ms (`Policies::sync_placement`).
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let body = match kind {
            NodeWide::Repos | NodeWide::DelegateRepos => {
                Value::Array(merge::repos(parts, &q, &self.pinned))
            }
            NodeWide::Search => Value::Array(merge::search(parts, &q)),
            NodeWide::Stats => merge::stats(&parts.into_iter().flatten().collect::<Vec<_>>()),
            NodeWide::Policies => Value::Array(merge::policies(parts)),
        };
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        let mut resp = Response::new(full(Bytes::from(bytes)));
        if let Some(h) = head {
            for (k, v) in h.iter() {
                if k != hyper::header::CONTENT_LENGTH && k != hyper::header::TRANSFER_ENCODING {
                    resp.headers_mut().append(k.clone(), v.clone());
                }
            }
        }
        resp.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        resp
    }

    /// The admin listener: `/metrics`, `/healthz`, `/readyz` (some replica of every shard
    /// takes reads) and `/fleet` (placement version, shards, replicas and their health).
    fn admin(&self, req: Request<Incoming>) -> Response<Body> {
        if let Some(rid) = req.uri().path().strip_prefix("/fleet/where/") {
            return self.where_is(rid);
        }
        match req.uri().path() {
            "/metrics" => {
                let mut r = Response::new(full(Bytes::from(self.metrics.render())));
                r.headers_mut().insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; version=0.0.4"),
                );
                r
            }
            "/healthz" => Response::new(full(Bytes::from_static(b"ok\n"))),
            "/readyz" => {
                let p = self.placement.get();
                let down: Vec<&str> = p
                    .shards()
                    .iter()
                    .filter(|s| !s.replicas.iter().any(|r| self.upstreams.is_up(&r.http)))
                    .map(|s| s.name.as_str())
                    .collect();
                if down.is_empty() {
                    Response::new(full(Bytes::from_static(b"ready\n")))
                } else {
                    let mut r = Response::new(full(Bytes::from(format!(
                        "no replica takes reads for shard(s) {}\n",
                        down.join(", ")
                    ))));
                    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                    r
                }
            }
            "/fleet" => {
                let p = self.placement.get();
                let shards: Vec<Value> = p
                    .shards()
                    .iter()
                    .map(|s| {
                        serde_json::json!({
                            "name": s.name,
                            "replicas": s.replicas.iter().map(|r| serde_json::json!({
                                "http": r.http,
                                "admin": r.admin,
                                "up": self.upstreams.is_up(&r.http),
                            })).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                let body = serde_json::json!({
                    "placement": p.version(),
                    "file": self.placement.path().display().to_string(),
                    "shards": shards,
                    "repos": p.explicit().map(|(r, s)| (r.to_string(), s)).collect::<std::collections::BTreeMap<_, _>>(),
                    "moving": p.moves().map(|(r, s)| (r.to_string(), s)).collect::<std::collections::BTreeMap<_, _>>(),
                    "hosts": p.hosts().collect::<std::collections::BTreeMap<_, _>>(),
                });
                let mut r = Response::new(full(Bytes::from(
                    serde_json::to_vec(&body).unwrap_or_default(),
                )));
                r.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                r
            }
            _ => error(StatusCode::NOT_FOUND, "not found"),
        }
    }
}

impl Front {
    /// `/fleet/where/<rid>`: the shard that serves a repository and the order its replicas
    /// take its requests in (the first that takes reads answers).
    fn where_is(&self, rid: &str) -> Response<Body> {
        let Ok(rid) = rid.parse::<RepoId>() else {
            return error(StatusCode::BAD_REQUEST, "expected a RID (rad:z…)");
        };
        let p = self.placement.get();
        let shard = p.shard_of(&rid);
        let order: Vec<Value> = seedd_core::placement::replica_order(shard, rid.as_bytes())
            .into_iter()
            .map(|r| serde_json::json!({"http": r.http, "admin": r.admin, "up": self.upstreams.is_up(&r.http)}))
            .collect();
        let body = serde_json::json!({
            "rid": rid.to_string(),
            "shard": shard.name,
            "explicit": p.explicit().any(|(r, _)| *r == rid),
            "moving_to": p.moving_to(&rid).map(|s| s.name.clone()),
            "replicas": order,
            "placement": p.version(),
        });
        let mut r = Response::new(full(Bytes::from(
            serde_json::to_vec(&body).unwrap_or_default(),
        )));
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        r
    }
}

/// Percent-encode a query value.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(crate) fn full(b: Bytes) -> Body {
    Full::new(b).map_err(|never| match never {}).boxed()
}

/// An error in radicle-httpd's JSON shape (`{error, code}`).
pub(crate) fn error(status: StatusCode, msg: &str) -> Response<Body> {
    let body = serde_json::json!({ "error": msg, "code": status.as_u16() });
    let mut r = Response::new(full(Bytes::from(
        serde_json::to_vec(&body).unwrap_or_default(),
    )));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::BAD_GATEWAY {
        r.headers_mut()
            .insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}
