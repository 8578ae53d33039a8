//! seedd-http: the public HTTP(S) listener (hyper HTTP/1.1 + HTTP/2, optional rustls) serving
//! git smart-HTTP (`git`) and, beside it, the radicle-httpd JSON API and `/raw/` (`web`). The
//! accept loop here is shared with the admin listener.
//!
//! Public surface: [`HttpState`] and [`Tenancy`] (what the daemon hands in), [`serve`] and the
//! router, [`tls`] (reloadable certificate), [`ratelimit`] (the limiter, benchmarked on its own),
//! [`conn`] (per-connection limits) and [`web::Web`]. It knows the ground floor (`seedd-core`)
//! and never the Radicle side (`seedd-p2p`).
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod conn;
pub mod git;
pub mod ratelimit;
mod refusal;
pub(crate) mod splice;
pub mod tls;
pub mod web;

#[cfg(test)]
mod label_tests;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt as _;

use seedd_core::index::Index;
use seedd_core::metrics::Metrics;
use seedd_core::serve::{GitServer, PackLimiter};
use seedd_core::storage::Storage;

/// HTTP/1 request headers that take longer than this to arrive end the connection.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// TLS handshakes that take longer than this are dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What HTTP handlers share.
pub struct HttpState {
    pub storage: Storage,
    pub index: Index,
    pub git: GitServer,
    /// Pack generation (upload-pack POSTs).
    pub limiter: PackLimiter,
    /// Ref advertisements (info/refs GETs): cheap, but each is a process.
    pub ref_limiter: PackLimiter,
    pub metrics: Arc<Metrics>,
    pub max_request_bytes: u64,
    /// Per-tenant rate limits and per-repository pack admission.
    pub rate: ratelimit::HttpLimiter,
    /// Virtual hosting by tenant.
    pub tenancy: Tenancy,
    /// Ref advertisements without git (snapshots shared with replication, which invalidates).
    pub advertiser: Arc<seedd_core::serve::advertiser::Advertiser>,
    /// The JSON API's own state (`web`).
    pub web: crate::web::Web,
    /// Single-flight cache of upload-pack responses (`http.pack_cache`; `None` when disabled).
    pub pack_cache: Option<Arc<seedd_core::serve::packcache::PackCache>>,
}

impl HttpState {
    /// The tenant's request rate (`tenant rate`), shared by git and the JSON API: `Err` holds
    /// the seconds until a request would pass; the tenant's refusal counter moves, the
    /// `seedd_http_rate_limited_total{scope="tenant"}` one moves where the refusal is answered.
    pub fn check_tenant_rate(&self, h: &seedd_core::tenant::HostTenant) -> Result<(), u64> {
        let Some(rps) = h.rate.requests_per_second else {
            return Ok(());
        };
        let burst = h.rate.burst.unwrap_or(rps.saturating_mul(2)).max(1);
        self.rate.check_tenant(&h.name, rps, burst).map_err(|wait| {
            self.tenancy.tenants.count_rate_limited(&h.name);
            wait.as_secs_f64().ceil() as u64
        })
    }
}

/// What virtual hosting needs: tenants by hostname, the operator's deny list, and what hosts
/// that belong to no tenant get (`http.unknown_hosts`, hot-reloadable).
#[derive(Clone)]
pub struct Tenancy {
    pub tenants: seedd_core::tenant::Tenants,
    pub policies: seedd_core::policy::Policies,
    pub unknown_hosts_all: Arc<std::sync::atomic::AtomicBool>,
}

impl Tenancy {
    pub fn serve_unknown_hosts(&self) -> bool {
        self.unknown_hosts_all
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The public HTTP router: `/api…` and `/raw/…` are the JSON API (`web`), every other path is
/// a git path. Every request first passes the per-client-IP rate limit of `limiter` (429
/// before any work).
pub fn router(state: Arc<HttpState>, limiter: ratelimit::HttpLimiter) -> Router {
    let rate = ratelimit::IpRateLimitLayer::new(limiter, &state.metrics);
    let web = crate::web::router(state.clone());
    Router::new()
        .fallback(move |state: State<Arc<HttpState>>, req: Request| {
            let web = web.clone();
            async move {
                if crate::web::is_web_path(req.uri().path()) {
                    match web.oneshot(req).await {
                        Ok(r) => r,
                        Err(never) => match never {},
                    }
                } else {
                    git::handle(state, req).await
                }
            }
        })
        .with_state(state)
        .layer(rate)
}

/// Accept connections until `shutdown` flips to true, then let in-flight connections finish
/// for at most `grace`. Every connection is held to `limits` (`conn`): a per-IP cap at accept,
/// a write timeout while it answers.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: Router,
    mut shutdown: watch::Receiver<bool>,
    grace: Duration,
    limits: conn::ConnLimits,
) {
    let local = listener
        .local_addr()
        .map_or_else(|_| "?".to_owned(), |a| a.to_string());
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Slow-loris guard: a request's headers must arrive within this time.
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder.http2().timer(hyper_util::rt::TokioTimer::new());
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(listen = %local, error = %seedd_core::logging::chain(&e), "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        // Over the per-IP cap: refused before any work (plain HTTP gets a 429 if the socket
        // takes it at once). The slot is released when the connection's task ends.
        let Some(slot) = limits.admit(peer.ip()) else {
            if acceptor.is_none() {
                conn::ConnLimits::refuse(&stream);
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Plain TCP connections can send cache files with sendfile (`splice`).
        let splicer = splice::Splicer::default();
        let plain = acceptor.is_none();
        // The TCP peer, for rate limiting and handlers (`ConnectInfo<SocketAddr>` extension).
        let service = TowerToHyperService::new(app.clone().map_request({
            let splicer = splicer.clone();
            move |mut req: axum::http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                if plain {
                    req.extensions_mut().insert(splicer.clone());
                }
                req
            }
        }));
        let builder = builder.clone();
        match &acceptor {
            None => {
                let io = TokioIo::new(limits.watch(splicer.io(stream)));
                let conn = builder.serve_connection_with_upgrades(io, service);
                let conn = graceful.watch(conn.into_owned());
                tokio::spawn(async move {
                    let _slot = slot;
                    if let Err(e) = conn.await {
                        tracing::debug!(%peer, error = %seedd_core::logging::chain(&*e), "http connection ended with error");
                    }
                });
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let watcher = graceful.watcher();
                let stream = limits.watch(stream);
                tokio::spawn(async move {
                    let _slot = slot;
                    let tls = match tokio::time::timeout(
                        TLS_HANDSHAKE_TIMEOUT,
                        acceptor.accept(stream),
                    )
                    .await
                    {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %seedd_core::logging::chain(&e), "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    };
                    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
                    if let Err(e) = watcher.watch(conn.into_owned()).await {
                        tracing::debug!(%peer, error = %seedd_core::logging::chain(&*e), "https connection ended with error");
                    }
                });
            }
        }
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => tracing::debug!(listen = %local, "all connections closed"),
        _ = tokio::time::sleep(grace) => tracing::warn!(listen = %local, "connections still open after the grace period; closing"),
    }
}
