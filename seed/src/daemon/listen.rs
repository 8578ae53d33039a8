//! The daemon's HTTP listeners (git over HTTPS, admin API), their certificates, and the
//! periodic tasks beside them (certificate polls, process and disk gauges).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::reload::{reload_admin_cert, reload_http_cert};
use crate::admin::{self, AdminState};
use seedd_core::config::Config;
use seedd_core::index::Index;
use seedd_core::metrics::Metrics;
use seedd_core::policy::Policies;
use seedd_core::serve::{GitServer, PackLimiter, StreamLimits};
use seedd_core::storage::Storage;
use seedd_core::tenant::Tenants;
use seedd_http::ratelimit::HttpLimiter;
use seedd_http::tls::{ReloadingCert, TlsError};
use seedd_http::{HttpState, Tenancy};

/// How often TLS files are checked for changes.
const TLS_POLL: Duration = Duration::from_secs(10);
/// How long in-flight responses may run after SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(25);
/// How long in-flight admin responses may run after SIGTERM.
const ADMIN_GRACE: Duration = Duration::from_secs(2);
/// How often process, disk and tenant gauges are sampled.
const GAUGES_EVERY: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot listen on {addr} for {what}: {cause}; pick another address with the `{what}.listen` key")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        cause: std::io::Error,
    },
    #[error("loading {what} certificate")]
    Cert {
        what: &'static str,
        #[source]
        source: TlsError,
    },
    #[error("loading admin.tls.client_ca")]
    ClientCa(#[source] TlsError),
    #[error("reading a listener's local address")]
    LocalAddr(#[source] std::io::Error),
}

/// The two HTTP listeners, bound early so that a taken port stops the start.
pub(super) struct Listeners {
    pub(super) admin: TcpListener,
    pub(super) http: TcpListener,
}

impl Listeners {
    pub(super) async fn bind(cfg: &Config) -> Result<Self, ListenError> {
        let admin = bind("admin", cfg.admin.listen).await?;
        let http = bind("http", cfg.http.listen).await?;
        Ok(Self { admin, http })
    }

    /// The local addresses of the git and the admin listener.
    pub(super) fn addrs(&self) -> Result<(SocketAddr, SocketAddr), ListenError> {
        let addr = |l: &TcpListener| l.local_addr().map_err(ListenError::LocalAddr);
        Ok((addr(&self.http)?, addr(&self.admin)?))
    }
}

async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, ListenError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError::Bind {
            what,
            addr,
            cause: source,
        })
}

/// The listeners' certificates (each reloaded when its files change).
pub(super) struct Certs {
    pub(super) http: Option<Arc<ReloadingCert>>,
    pub(super) admin: Option<Arc<ReloadingCert>>,
    /// The admin listener's TLS, optionally requiring client certificates.
    admin_tls: Option<Arc<rustls::ServerConfig>>,
}

impl Certs {
    pub(super) fn load(cfg: &Config) -> Result<Self, ListenError> {
        let load = |what, cert: &PathBuf, key: &PathBuf| {
            ReloadingCert::new(cert.clone(), key.clone())
                .map(Arc::new)
                .map_err(|source| ListenError::Cert { what, source })
        };
        let http = match &cfg.http.tls {
            Some(t) => Some(load("http.tls", &t.cert, &t.key)?),
            None => None,
        };
        let admin = match &cfg.admin.tls {
            Some(t) => Some(load("admin.tls", &t.cert, &t.key)?),
            None => None,
        };
        let client_ca = cfg.admin.tls.as_ref().and_then(|t| t.client_ca.as_ref());
        let admin_tls = match (&admin, client_ca) {
            (Some(c), Some(ca)) => Some(
                c.server_config_with_client_ca(ca)
                    .map_err(ListenError::ClientCa)?,
            ),
            (Some(c), None) => Some(c.server_config()),
            (None, _) => None,
        };
        Ok(Self {
            http,
            admin,
            admin_tls,
        })
    }
}

/// Serve the admin API; re-read its certificate every [`TLS_POLL`].
pub(super) fn start_admin(
    cfg: &Config,
    listener: TcpListener,
    certs: &Certs,
    state: Arc<AdminState>,
    shutdown: &watch::Receiver<bool>,
) -> JoinHandle<()> {
    tracing::info!(
        listen = %state.admin_listen,
        tls = certs.admin_tls.is_some(),
        client_certs = cfg.admin.tls.as_ref().is_some_and(|t| t.client_ca.is_some()),
        "admin listening (/metrics, /healthz, /readyz, /api/v1)"
    );
    let task = tokio::spawn(seedd_http::serve(
        listener,
        certs.admin_tls.clone(),
        admin::router(state),
        shutdown.clone(),
        ADMIN_GRACE,
        seedd_http::conn::ConnLimits::admin(),
    ));
    if let Some(cert) = certs.admin.clone() {
        every(TLS_POLL, shutdown, move || {
            reload_admin_cert(&cert, false);
        });
    }
    task
}

/// What the git listener shares with its handlers.
pub(super) struct HttpParts {
    pub(super) advertiser: Arc<seedd_core::serve::advertiser::Advertiser>,
    pub(super) pack_cache: Option<Arc<seedd_core::serve::packcache::PackCache>>,
    pub(super) storage: Storage,
    pub(super) index: Index,
    pub(super) metrics: Arc<Metrics>,
    pub(super) tenants: Tenants,
    pub(super) policies: Policies,
    pub(super) limiter: HttpLimiter,
    pub(super) unknown_hosts_all: Arc<AtomicBool>,
    /// The JSON API: node ids by tenant, alias, expensive-request permits.
    pub(super) web: seedd_http::web::Web,
}

/// Serve git over HTTP(S); re-read its certificate every [`TLS_POLL`].
pub(super) fn start_http(
    cfg: &Config,
    listener: TcpListener,
    certs: &Certs,
    parts: HttpParts,
    shutdown: &watch::Receiver<bool>,
) -> Result<JoinHandle<()>, ListenError> {
    let h = &cfg.http;
    let git = GitServer::new(
        h.git_binary.clone(),
        cfg.cache_dir().join("git-home"),
        StreamLimits {
            idle: h.idle_timeout,
            total: h.request_timeout,
        },
        parts.metrics.clone(),
    );
    let queue_timeout = h.pack_queue_timeout;
    let metrics = parts.metrics.clone();
    let state = Arc::new(HttpState {
        storage: parts.storage,
        index: parts.index,
        git,
        limiter: PackLimiter::new(h.max_concurrent_packs, h.pack_queue, queue_timeout),
        ref_limiter: PackLimiter::new(
            h.max_concurrent_packs.saturating_mul(4),
            h.pack_queue,
            queue_timeout,
        ),
        metrics: parts.metrics,
        max_request_bytes: h.max_request_bytes,
        rate: parts.limiter.clone(),
        tenancy: Tenancy {
            tenants: parts.tenants,
            policies: parts.policies,
            unknown_hosts_all: parts.unknown_hosts_all,
        },
        advertiser: parts.advertiser,
        web: parts.web,
        pack_cache: parts.pack_cache,
    });
    let listen = listener.local_addr().map_err(ListenError::LocalAddr)?;
    tracing::info!(listen = %listen, tls = certs.http.is_some(), "http listening (git clone)");
    let limits = seedd_http::conn::ConnLimits {
        write_timeout: h.write_timeout,
        per_ip: Some(seedd_http::conn::PerIpConns::new(
            h.max_connections_per_ip,
            h.rate.ipv6_prefix,
            h.rate.trusted_proxies.clone(),
        )),
        metrics: Some(metrics.clone()),
    };
    let task = tokio::spawn(seedd_http::serve(
        listener,
        certs.http.as_ref().map(|c| c.server_config()),
        seedd_http::router(state, parts.limiter),
        shutdown.clone(),
        SHUTDOWN_GRACE,
        limits,
    ));
    if let Some(cert) = &certs.http {
        if let Some(t) = cert.not_after() {
            metrics
                .tls_cert_expiry
                .set(i64::try_from(t).unwrap_or(i64::MAX));
        }
        let cert = cert.clone();
        every(TLS_POLL, shutdown, move || {
            reload_http_cert(&cert, &metrics, false);
        });
    }
    Ok(task)
}

/// The pack cache in `<data_dir>/cache/packs` (emptied now), unless disabled or unusable (then
/// every clone is served by git directly).
pub(super) fn open_pack_cache(
    cfg: &Config,
    metrics: &Arc<Metrics>,
) -> Option<Arc<seedd_core::serve::packcache::PackCache>> {
    let c = &cfg.http.pack_cache;
    if !c.enabled {
        return None;
    }
    let dir = cfg.cache_dir().join("packs");
    let settings = seedd_core::serve::packcache::Settings {
        max_bytes: c.max_bytes,
        max_age: c.max_age,
        admit_first: c.admission == seedd_core::config::PackCacheAdmission::First,
        max_generations_per_client: c.max_generations_per_client,
    };
    match seedd_core::serve::packcache::PackCache::open(
        dir.clone(),
        settings,
        Some(metrics.clone()),
    ) {
        Ok(cache) => {
            tracing::info!(dir = %dir.display(), max_bytes = c.max_bytes, admission = %c.admission, "pack cache enabled");
            Some(Arc::new(cache))
        }
        Err(e) => {
            tracing::error!(dir = %dir.display(), error = %seedd_core::logging::chain(&e), "pack cache unusable; clones are served without it");
            None
        }
    }
}

/// Process and disk gauges, tenants' egress and metrics, every [`GAUGES_EVERY`] (first now).
pub(super) fn start_gauges(
    cfg: &Config,
    metrics: Arc<Metrics>,
    tenants: Tenants,
    shutdown: &watch::Receiver<bool>,
) {
    let data_dir = cfg.data_dir.clone();
    let mut stop = shutdown.clone();
    tokio::spawn(async move {
        loop {
            let (m, d, t) = (metrics.clone(), data_dir.clone(), tenants.clone());
            let _ = tokio::task::spawn_blocking(move || {
                m.sample_system(&d);
                t.flush_egress();
                t.refresh_metrics();
            })
            .await;
            tokio::select! {
                _ = tokio::time::sleep(GAUGES_EVERY) => {}
                _ = stop.changed() => return,
            }
        }
    });
}

/// Runs `f` after each `period` until shutdown.
fn every(period: Duration, shutdown: &watch::Receiver<bool>, f: impl Fn() + Send + 'static) {
    let mut stop = shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = stop.changed() => return,
            }
            f();
        }
    });
}
