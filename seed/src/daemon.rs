//! `seedd run`: the daemon is built, then run. [`Daemon::build`] assembles it from small
//! `open_*`/`start_*` steps, each taking what it needs explicitly, in this order: private
//! directories and key, storage and index, tenants and policies with a pending restore
//! imported, the seed identities' p2p layers, replication, tenant control (with the config
//! file's `[[tenants]]`), the admin and git listeners, the initial index. [`Daemon::run`] then
//! handles signals (SIGHUP config reload (no rescan), SIGTERM/SIGINT graceful stop) until the end.
//!
//! `files`: data directory, key and admin tokens; `rescan`: storage rescans; `reload`: hot
//! reload; `listen`: HTTP listeners, certificates and periodic gauges.

mod catchup;
mod files;
mod listen;
mod reload;
mod rescan;

use seedd_core::serve::advertiser::Advertiser;
use seedd_core::serve::packcache::PackCache;
use seedd_core::serve::refcache::{self, RefCache};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use files::{load_identity, FileError};
pub use listen::ListenError;

use crate::admin::AdminState;
use crate::backup::{self, BackupError};
use crate::control::{ApplyRequest, Control};
use listen::{Certs, HttpParts, Listeners};
use reload::Reloader;
use rescan::Rescanner;
use seedd_core::config::{Config, Overrides};
use seedd_core::index::{Index, IndexError, Tuning};
use seedd_core::maintain::{self, Maintainer};
use seedd_core::metrics::Metrics;
use seedd_core::placement::Watched;
use seedd_core::policy::Policies;
use seedd_core::serve::{GitServer, StreamLimits};
use seedd_core::storage::{Storage, StorageError};
use seedd_core::tenant::{TenantError, Tenants};
use seedd_http::ratelimit::HttpLimiter;
use seedd_p2p::fetch::{AfterFetch, FetchConfig, Fetcher};
use seedd_p2p::identity::{Identities, IdentityError, Launch};
use seedd_p2p::net::{Net, NetConfig, NetDeps};
use seedd_proto::crypto::Keypair;

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Files(#[from] FileError),
    #[error("opening storage")]
    Storage(#[from] StorageError),
    #[error("opening the index")]
    Index(#[from] IndexError),
    #[error("registering metrics")]
    Metrics(#[from] prometheus::Error),
    #[error(transparent)]
    Listen(#[from] ListenError),
    #[error("loading tenants")]
    Tenants(#[from] TenantError),
    #[error("importing restore.json (written by seedctl restore --data-dir)")]
    Restore(#[from] BackupError),
    #[error("p2p configuration")]
    NetConfig(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("starting the p2p layer")]
    Net(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("starting an identity from [[identities]]")]
    Identity(#[from] IdentityError),
    #[error("config key `fleet.placement`")]
    Placement(#[from] seedd_core::placement::PlacementError),
    #[error("config key `fleet.shard`: no shard {shard:?} in the placement file {file} (its [[shards]] names: {names})")]
    NoSuchShard {
        shard: String,
        file: String,
        names: String,
    },
}

/// Why the daemon stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("installing the signal handlers")]
    Signals(#[source] std::io::Error),
}

/// The state and storage every room shares. Cheap to clone.
#[derive(Clone)]
struct Core {
    storage: Storage,
    index: Index,
    metrics: Arc<Metrics>,
    /// Ref snapshots: replication invalidates, the git listener advertises from them.
    refs: Arc<RefCache>,
    /// Answers from the ref snapshots and git's probed capabilities, for HTTP and streams.
    advertiser: Arc<Advertiser>,
    /// The pack cache (`http.pack_cache`), for HTTP and streams; `None` when disabled.
    pack_cache: Option<Arc<PackCache>>,
}

/// A built daemon: listeners serving, replication running; [`run`](Self::run) waits.
pub struct Daemon {
    tenants: Tenants,
    identities: Identities,
    reloader: Reloader,
    shutdown: watch::Sender<bool>,
    http_task: JoinHandle<()>,
    admin_task: JoinHandle<()>,
    /// Stops the maintenance worker's loops.
    maintenance_stop: CancellationToken,
}

impl Daemon {
    /// Assemble and start everything; `config_file` and `overrides` are kept for reloads.
    pub async fn build(
        cfg: Config,
        config_file: Option<PathBuf>,
        overrides: Overrides,
    ) -> Result<Self, BuildError> {
        files::private_data_dirs(&cfg)?;
        let key = load_identity(&cfg)?;
        let nid = key.nid();
        tracing::info!(nid = %nid, did = %nid.to_did(), alias = %cfg.alias, data_dir = %cfg.data_dir.display(), "starting seedd");
        let index = Index::open_tuned(
            &cfg.index_dir(),
            Tuning::Tuned {
                cache_bytes: cfg.index.cache_bytes(),
            },
        )?;
        let metrics = Arc::new(Metrics::new()?);
        // Snapshots missing from the cache are read from the index (its refs, peeled).
        let refs = Arc::new(
            RefCache::new(refcache::DEFAULT_BUDGET, refcache::DEFAULT_MAX_AGE)
                .with_source(Arc::new(index.clone())),
        );
        let core = Core {
            storage: Storage::open(cfg.storage_dir())?,
            advertiser: Arc::new(Advertiser::new(
                refs.clone(),
                cfg.cache_dir().join("advert-probe"),
                metrics.clone(),
            )),
            pack_cache: listen::open_pack_cache(&cfg, &metrics),
            refs,
            index,
            metrics,
        };
        let token = files::admin_token(&cfg)?;
        let listeners = Listeners::bind(&cfg).await?;
        let (tenants, policies, placement) = open_state(&cfg, &core)?;
        let identities = start_identities(&cfg, key, &core, &tenants, &policies).await?;
        if let Some(placement) = &placement {
            // A new placement changes what this shard seeds and announces.
            let ids = identities.clone();
            placement.spawn_watch(PLACEMENT_POLL, move |_| ids.refresh_soon());
        }
        let maintenance_stop = CancellationToken::new();
        let maintainer = start_maintenance(&cfg, &core, maintenance_stop.clone());
        let fetcher = start_replication(
            &cfg,
            &core,
            &tenants,
            &policies,
            &identities,
            maintainer.clone(),
        );
        let catch_up = match &placement {
            Some(p) => Some(catchup::CatchUp {
                placement: p.clone(),
                shard: cfg.fleet.shard.clone(),
                nid,
                // The fleet shares one admin token (the chart's Secret): it opens the siblings'
                // admin APIs too.
                token: std::fs::read_to_string(cfg.admin_token_path())
                    .map(|t| t.trim().to_owned())
                    .unwrap_or_default(),
                index: core.index.clone(),
                net: identities.default_net().clone(),
                fetcher: fetcher.clone(),
                timeout: cfg.fleet.catch_up_timeout,
                interval: cfg.fleet.compare_interval,
                metrics: core.metrics.clone(),
            }),
            None => None,
        };
        let control = start_control(&cfg, &core, &tenants, &policies, &fetcher, &identities);
        let rescanner = Rescanner::new(
            core.storage.clone(),
            core.index.clone(),
            core.metrics.clone(),
            tenants.clone(),
            identities.clone(),
            core.refs.clone(),
        );

        let certs = Certs::load(&cfg)?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let limiter = HttpLimiter::new(&cfg.http.rate);
        let unknown_hosts_all = Arc::new(AtomicBool::new(
            cfg.http.unknown_hosts == seedd_core::config::UnknownHosts::All,
        ));
        let tokens = Arc::new(RwLock::new(files::admin_tokens(&cfg, token)?));
        let reloader = Reloader {
            file: config_file,
            overrides,
            current: Arc::new(Mutex::new(cfg.clone())),
            policies: policies.clone(),
            identities: identities.clone(),
            control: control.clone(),
            limiter: limiter.clone(),
            unknown_hosts_all: unknown_hosts_all.clone(),
            cert: certs.http.clone(),
            admin_cert: certs.admin.clone(),
            metrics: core.metrics.clone(),
            tokens: tokens.clone(),
            first_token: token,
        };
        let ready = Arc::new(AtomicBool::new(false));
        let indexed = Arc::new(AtomicBool::new(false));
        let (http_listen, admin_listen) = listeners.addrs()?;
        let admin_state = Arc::new(AdminState {
            nid,
            alias: cfg.alias.clone(),
            index: core.index.clone(),
            metrics: core.metrics.clone(),
            ready: ready.clone(),
            indexed: indexed.clone(),
            started: Instant::now(),
            tokens,
            http_listen: http_listen.to_string(),
            admin_listen: admin_listen.to_string(),
            tls: certs.http.is_some(),
            rescan: {
                let r = rescanner.clone();
                Arc::new(move |only| match only {
                    None => r.rescan(),
                    Some(rids) => r.rescan_repos(&rids),
                })
            },
            net: identities.default_net().clone(),
            policies: policies.clone(),
            fetcher,
            control,
            identities: identities.clone(),
            reload: {
                let r = reloader.clone();
                Arc::new(move || r.reload())
            },
            data_dir: cfg.data_dir.clone(),
            key_path: cfg.secret_key_path(),
            maintainer,
        });
        let admin_task =
            listen::start_admin(&cfg, listeners.admin, &certs, admin_state, &shutdown_rx);
        let http_parts = HttpParts {
            advertiser: core.advertiser.clone(),
            pack_cache: core.pack_cache.clone(),
            storage: core.storage.clone(),
            index: core.index.clone(),
            metrics: core.metrics.clone(),
            tenants: tenants.clone(),
            policies,
            limiter,
            unknown_hosts_all,
            web: web_state(reloader.current.clone(), &identities, &tenants),
        };
        let http_task = listen::start_http(&cfg, listeners.http, &certs, http_parts, &shutdown_rx)?;
        start_initial_index(rescanner, ready, indexed, catch_up);
        listen::start_gauges(&cfg, core.metrics.clone(), tenants.clone(), &shutdown_rx);
        Ok(Self {
            tenants,
            identities,
            reloader,
            shutdown,
            http_task,
            admin_task,
            maintenance_stop,
        })
    }

    /// Handle signals until SIGTERM or SIGINT, then stop gracefully: no new connections,
    /// in-flight responses finish, tenants' egress is written, sessions close.
    pub async fn run(self) -> Result<(), RunError> {
        let mut hup = signal(SignalKind::hangup()).map_err(RunError::Signals)?;
        let mut term = signal(SignalKind::terminate()).map_err(RunError::Signals)?;
        let mut int = signal(SignalKind::interrupt()).map_err(RunError::Signals)?;
        loop {
            tokio::select! {
                _ = hup.recv() => self.hangup(),
                _ = term.recv() => break,
                _ = int.recv() => break,
            }
        }
        tracing::info!("shutting down: no new connections; finishing in-flight responses");
        let _ = self.shutdown.send(true);
        self.maintenance_stop.cancel();
        self.tenants.flush_egress();
        self.identities.shutdown().await;
        let _ = tokio::join!(self.http_task, self.admin_task);
        tracing::info!("stopped");
        Ok(())
    }

    /// SIGHUP: reload the configuration and TLS (on the blocking pool), as `seedctl config
    /// reload` does. Storage is not rescanned: a reload costs the config file, not a pass over
    /// every repository (`seedctl rescan` is that pass, for changes made outside seedd).
    fn hangup(&self) {
        tracing::info!("SIGHUP: reloading the configuration and TLS (storage is not rescanned: `seedctl rescan` does that)");
        let reloader = self.reloader.clone();
        tokio::task::spawn_blocking(move || match reloader.reload() {
            Ok(changes) => tracing::info!(?changes, "configuration reloaded"),
            Err(e) => {
                tracing::error!(error = %e, "configuration reload failed")
            }
        });
    }
}

/// Tenants and policies from the index, then a pending `restore.json` imported into them.
fn open_state(
    cfg: &Config,
    core: &Core,
) -> Result<(Tenants, Policies, Option<Watched>), BuildError> {
    let tenants = Tenants::load(core.index.clone(), core.metrics.clone())?;
    let (allow, scope) = reload::default_policy(cfg);
    let mut policies =
        Policies::new(core.index.clone(), allow, scope).with_tenants(tenants.clone());
    let placement = open_placement(cfg)?;
    if let Some(p) = &placement {
        policies = policies.with_placement(p.clone(), &cfg.fleet.shard);
    }
    if let Some(r) = backup::import_pending(&cfg.data_dir, &core.index, &tenants, &policies)? {
        tracing::info!(
            tenants = r.tenants,
            policies = r.policies,
            "restored state from restore.json"
        );
    }
    Ok((tenants, policies, placement))
}

/// How often a fleet member re-reads its placement file (the kubelet updates a ConfigMap
/// volume in place, typically within a minute of `kubectl apply`).
const PLACEMENT_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// `[fleet]`: the placement file, which must name this seed's shard.
fn open_placement(cfg: &Config) -> Result<Option<Watched>, BuildError> {
    let Some(path) = cfg
        .fleet
        .placement
        .as_deref()
        .filter(|_| cfg.fleet.enabled())
    else {
        return Ok(None);
    };
    let watched = Watched::load(path)?;
    let p = watched.get();
    if p.shard(&cfg.fleet.shard).is_none() {
        return Err(BuildError::NoSuchShard {
            shard: cfg.fleet.shard.clone(),
            file: path.display().to_string(),
            names: seedd_core::placement::shard_names(&p)
                .into_iter()
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    tracing::info!(shard = %cfg.fleet.shard, placement = %path.display(), version = %p.version(), shards = p.shards().len(), "fleet member: seeding what the placement puts on this shard");
    Ok(Some(watched))
}

/// The p2p layers: the default identity (gossip state restored, listening, dialing the
/// configured peers), then `[[identities]]`, then identities created at runtime earlier.
async fn start_identities(
    cfg: &Config,
    key: Keypair,
    core: &Core,
    tenants: &Tenants,
    policies: &Policies,
) -> Result<Identities, BuildError> {
    let p2p_shutdown = CancellationToken::new();
    let mut net_cfg = NetConfig::from_config(cfg).map_err(|e| BuildError::NetConfig(e.into()))?;
    net_cfg.gossip.seeded = policies
        .explicitly_seeded()
        .into_iter()
        .map(|(rid, _)| rid)
        .collect();
    let stream_git = GitServer::new(
        cfg.http.git_binary.clone(),
        cfg.cache_dir().join("git-home"),
        StreamLimits {
            idle: net_cfg.stream_idle_timeout,
            total: cfg.http.request_timeout,
        },
        core.metrics.clone(),
    );
    let deps = NetDeps {
        index: core.index.clone(),
        storage: core.storage.clone(),
        git: stream_git,
        advertiser: core.advertiser.clone(),
        pack_cache: core.pack_cache.clone(),
        metrics: core.metrics.clone(),
        policies: policies.clone(),
    };
    let launch = Launch {
        keys_dir: cfg.data_dir.join("keys"),
        passphrase: files::passphrase(cfg)?,
        base: {
            let mut base = net_cfg.clone();
            base.gossip.seeded = Default::default();
            base.gossip.seed_all = false;
            base
        },
        deps: deps.clone(),
        shutdown: p2p_shutdown.clone(),
    };
    let net = Net::start(key, net_cfg, deps, p2p_shutdown)
        .await
        .map_err(|e| BuildError::Net(e.into()))?;
    let identities = Identities::new(
        net,
        cfg.p2p.inventory_cap,
        launch,
        tenants.clone(),
        policies.clone(),
        core.index.clone(),
        core.metrics.clone(),
    );
    for spec in cfg.identities.clone() {
        identities.start(spec, false).await?;
    }
    for spec in identities.persisted() {
        if cfg.identities.iter().any(|s| s.name == spec.name) {
            continue;
        }
        let name = spec.name.clone();
        if let Err(e) = identities.start(spec, false).await {
            tracing::error!(identity = %name, error = %seedd_core::logging::chain(&e), "starting a seed identity failed");
        }
    }
    Ok(identities)
}

/// Replication: fetch what peers of every identity tell us about (policy allow), validate,
/// apply, then the after-fetch steps. Leftovers of an interrupted fetch are removed first.
fn start_replication(
    cfg: &Config,
    core: &Core,
    tenants: &Tenants,
    policies: &Policies,
    identities: &Identities,
    maintainer: Maintainer,
) -> Fetcher {
    let p2p = &cfg.p2p;
    let fetch_cfg = FetchConfig {
        max_concurrent: p2p.max_concurrent_fetches,
        max_per_peer: p2p.max_fetches_per_peer,
        max_queued: p2p.max_queued_fetches,
        max_queued_per_peer: p2p.max_queued_fetches_per_peer,
        max_pack_bytes: p2p.max_fetch_bytes,
        timeout: p2p.fetch_timeout,
        deadline: p2p.fetch_deadline,
        git: cfg.http.git_binary.clone(),
        git_home: cfg.cache_dir().join("git-home"),
        work_dir: cfg.cache_dir().join("fetch"),
    };
    seedd_p2p::fetch::recover(&fetch_cfg, &core.storage, &core.index);
    let after = AfterFetch::new(
        core.storage.clone(),
        core.index.clone(),
        tenants.clone(),
        identities.clone(),
        core.refs.clone(),
        core.metrics.clone(),
        maintainer,
    );
    let fetcher = Fetcher::new(
        fetch_cfg,
        identities.clone(),
        core.storage.clone(),
        core.metrics.clone(),
        policies.clone(),
        after,
    );
    fetcher.spawn_hint_loop();
    fetcher.spawn_sync_loop();
    fetcher
}

/// The repository maintenance worker (`[maintenance]`), its loops running until `stop`.
fn start_maintenance(cfg: &Config, core: &Core, stop: CancellationToken) -> Maintainer {
    let settings = maintain::Settings::from_config(
        &cfg.maintenance,
        cfg.http.git_binary.clone(),
        cfg.cache_dir().join("git-home"),
    );
    let maintainer = Maintainer::new(
        settings,
        core.storage.clone(),
        core.index.clone(),
        core.metrics.clone(),
    );
    maintainer.spawn(stop);
    maintainer
}

/// Tenant and policy operations; the trash of earlier purges is emptied and the config
/// file's `[[tenants]]` applied (an error is logged, the daemon starts anyway).
fn start_control(
    cfg: &Config,
    core: &Core,
    tenants: &Tenants,
    policies: &Policies,
    fetcher: &Fetcher,
    identities: &Identities,
) -> Control {
    let control = Control {
        tenants: tenants.clone(),
        policies: policies.clone(),
        storage: core.storage.clone(),
        index: core.index.clone(),
        trash: cfg.cache_dir().join("trash"),
        fetcher: fetcher.clone(),
        identities: identities.clone(),
    };
    control.empty_trash();
    if !cfg.tenants.is_empty() {
        let request = ApplyRequest {
            tenants: cfg.tenants.clone(),
            prune: false,
            dry_run: false,
        };
        match control.apply(&request) {
            Ok(changes) => {
                for c in &changes {
                    tracing::info!(change = %c, "tenants from the config file");
                }
            }
            Err(e) => {
                tracing::error!(error = %seedd_core::logging::chain(&e), "applying [[tenants]] from the config file failed")
            }
        }
    }
    control
}

/// Index what is new in storage or was left dirty by a crash (unchanged repositories are not
/// read); probes report ready afterwards.
fn start_initial_index(
    rescanner: Rescanner,
    ready: Arc<AtomicBool>,
    indexed: Arc<AtomicBool>,
    catch_up: Option<catchup::CatchUp>,
) {
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        if let Err(e) = rescanner.startup() {
            tracing::error!(error = %e, "initial index failed; fix the cause and send SIGHUP");
        }
        indexed.store(true, Ordering::Release);
        match catch_up {
            // A fleet replica takes reads once it caught up with its siblings, then keeps
            // comparing with them.
            Some(c) => {
                runtime.spawn(async move {
                    if c.timeout.is_zero() {
                        ready.store(true, Ordering::Release);
                    } else {
                        c.run(ready).await;
                    }
                    if !c.interval.is_zero() {
                        c.watch().await;
                    }
                });
            }
            None => ready.store(true, Ordering::Release),
        }
    });
}

/// The JSON API's node lookup: a tenant's host is served by the identity the tenant is placed
/// on, any other host by the default identity; what `/node` shows of it comes from the
/// running configuration (`current`, replaced by reloads).
fn web_state(
    current: Arc<Mutex<Config>>,
    identities: &Identities,
    tenants: &Tenants,
) -> seedd_http::web::Web {
    let (identities, tenants) = (identities.clone(), tenants.clone());
    seedd_http::web::Web::new(move |tenant| {
        let placed = tenant
            .and_then(|name| tenants.identity_of(name))
            .unwrap_or_else(|| seedd_core::config::DEFAULT_IDENTITY.to_owned());
        let all = identities.list();
        let identity = all.iter().find(|i| i.name == placed).or_else(|| {
            all.iter()
                .find(|i| i.name == seedd_core::config::DEFAULT_IDENTITY)
        });
        let nid = identity
            .and_then(|i| i.nid.parse().ok())
            .unwrap_or_else(|| identities.default_net().nid());
        let (listen, mut external_addresses) = identity
            .map(|i| (i.listen.clone(), i.external_addresses.clone()))
            .unwrap_or_default();
        // Read under the lock, not copied: this runs on every `/node` and pinned listing
        // (identities and tenants are read first, so their locks are never taken under it).
        let cfg = current.lock().unwrap_or_else(|e| e.into_inner());
        if identity.is_none_or(|i| i.name == seedd_core::config::DEFAULT_IDENTITY) {
            // The default identity announces `p2p.external_addresses`.
            external_addresses.clone_from(&cfg.p2p.external_addresses);
        }
        node_facts(&cfg, nid, listen, external_addresses, tenant)
    })
}

/// `/node`'s view of the configuration for the node `nid` listening on `listen`.
fn node_facts(
    cfg: &Config,
    nid: seedd_proto::crypto::NodeId,
    listen: Vec<String>,
    external_addresses: Vec<String>,
    tenant: Option<&str>,
) -> seedd_http::web::NodeFacts {
    let p2p = &cfg.p2p;
    seedd_http::web::NodeFacts {
        nid,
        alias: cfg.alias.clone(),
        config: seedd_http::web::NodeSettings {
            listen,
            external_addresses,
            connect: p2p.connect.iter().map(ToString::to_string).collect(),
            relay: p2p.relay.to_string(),
            log: log_level(&cfg.log.level),
            max_routes: p2p.max_routes,
            max_concurrent_fetches: p2p.max_concurrent_fetches,
            inbound_rate: (p2p.rate.inbound.fill_rate, p2p.rate.inbound.capacity),
            outbound_rate: (p2p.rate.outbound.fill_rate, p2p.rate.outbound.capacity),
            max_inbound: p2p.max_inbound,
            max_outbound: p2p.max_outbound,
            max_concurrent_serves: p2p.max_concurrent_serves,
        },
        web: cfg.web.profile(tenant),
    }
}

/// The level a `log.level` filter starts with (`info,seedd=debug` → `INFO`), as radicle-node's
/// `log` names it.
fn log_level(filter: &str) -> &'static str {
    let first = filter.split(',').next().unwrap_or_default().trim();
    match first.to_ascii_lowercase().as_str() {
        "error" => "ERROR",
        "warn" => "WARN",
        "debug" => "DEBUG",
        "trace" => "TRACE",
        _ => "INFO",
    }
}
