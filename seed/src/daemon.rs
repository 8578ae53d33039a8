//! `seedd run`: wire the modules together, start the listeners, handle signals.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

use crate::admin::{self, AdminState};
use crate::config::{Config, DefaultPolicy, UnknownHosts};
use crate::crypto::Keypair;
use crate::fetch::{FetchConfig, Fetcher};
use crate::fsutil::{self, Tightened};
use crate::http::{self, tls::ReloadingCert, HttpState};
use crate::index::scan::{self, ScanReport};
use crate::index::Index;
use crate::metrics::Metrics;
use crate::net::{Net, NetConfig, NetDeps};
use crate::policy::Policies;
use crate::serve::{GitServer, PackLimiter, StreamLimits};
use crate::storage::Storage;
use crate::tenant::ops::{ApplyRequest, Control};
use crate::tenant::Tenants;

/// How often TLS files are checked for changes.
const TLS_POLL: Duration = Duration::from_secs(10);
/// How long in-flight responses may run after SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(25);

/// Load the default identity's key: a configured file (must exist) or generated on first start.
pub fn load_identity(cfg: &Config) -> anyhow::Result<Keypair> {
    let passphrase = match &cfg.keys.passphrase_file {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("reading keys.passphrase_file {}", p.display()))?
                .trim_end_matches(['\n', '\r'])
                .to_owned(),
        ),
        None => None,
    };
    let path = cfg.secret_key_path();
    if cfg.keys.secret.is_some() {
        return Keypair::load(&path, passphrase.as_deref())
            .with_context(|| format!("loading keys.secret {}", path.display()));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let (key, created) = crate::crypto::load_or_generate(dir, passphrase.as_deref())
        .with_context(|| format!("loading or creating the node key in {}", dir.display()))?;
    if created {
        tracing::info!(nid = %key.nid(), path = %path.display(), "generated a new node key");
    }
    Ok(key)
}

/// Read the admin token, generating one at the default path on first start.
fn admin_token(cfg: &Config) -> anyhow::Result<[u8; 32]> {
    let path = cfg.admin_token_path();
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => Ok(admin::token_digest(&t)),
        Ok(_) => anyhow::bail!("admin token file {} is empty", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && cfg.admin.token_file.is_none() => {
            use rand::RngCore;
            let mut raw = [0u8; 32];
            rand::rngs::OsRng.fill_bytes(&mut raw);
            let token = hex::encode(raw);
            fsutil::write_private(&path, token.as_bytes())
                .with_context(|| format!("writing admin token {}", path.display()))?;
            tracing::info!(path = %path.display(), "generated admin token (seedctl --token-file)");
            Ok(admin::token_digest(&token))
        }
        Err(e) => Err(e).with_context(|| {
            format!(
                "reading admin.token_file {}: create it or unset admin.token_file",
                path.display()
            )
        }),
    }
}

/// `data_dir` and its top-level directories are 0700, also when they already exist (see
/// `fsutil`: a private parent keeps everything below from other users, whatever git and
/// RocksDB create it with).
fn private_data_dirs(cfg: &Config) -> anyhow::Result<()> {
    for dir in [
        cfg.data_dir.clone(),
        cfg.data_dir.join("keys"),
        cfg.storage_dir(),
        cfg.index_dir(),
        cfg.cache_dir(),
    ] {
        match fsutil::ensure_private_dir(&dir) {
            Ok(Tightened::No) => {}
            Ok(Tightened::Yes { from }) => tracing::warn!(
                path = %dir.display(),
                was = %format!("{from:o}"),
                "directory was accessible to other users; restricted it to 0700"
            ),
            // Created, but it cannot be tightened (e.g. a volume root owned by root): what
            // is below is still private when seedd created it.
            Err(e) if dir.is_dir() => tracing::warn!(
                path = %dir.display(),
                error = %e,
                "cannot restrict directory to 0700: give it to seedd's user with mode 0700, or keep its parent private"
            ),
            Err(e) => {
                return Err(e).with_context(|| format!("creating data directory {}", dir.display()))
            }
        }
    }
    let git_home = cfg.cache_dir().join("git-home");
    fsutil::create_private_dir(&git_home)
        .with_context(|| format!("creating data directory {}", git_home.display()))
}

/// Reconcile and publish the result in metrics; serialised so two rescans never overlap.
fn rescanner(
    storage: Storage,
    index: Index,
    metrics: Arc<Metrics>,
) -> Arc<dyn Fn() -> Result<ScanReport, String> + Send + Sync> {
    let lock = Arc::new(Mutex::new(()));
    Arc::new(move || {
        let _guard = lock.lock().map_err(|_| "rescan lock poisoned".to_owned())?;
        let started = Instant::now();
        let report = scan::reconcile(&storage, &index).map_err(|e| e.to_string())?;
        metrics
            .scan_duration
            .observe(started.elapsed().as_secs_f64());
        if let Ok(repos) = index.repos() {
            let public = repos.iter().filter(|r| r.is_public()).count();
            let public = i64::try_from(public).unwrap_or(i64::MAX);
            let total = i64::try_from(repos.len()).unwrap_or(i64::MAX);
            metrics
                .repos_indexed
                .with_label_values(&["public"])
                .set(public);
            metrics
                .repos_indexed
                .with_label_values(&["private"])
                .set(total - public);
        }
        Ok(report)
    })
}

/// After each successful rescan: tenants' repository sizes, then every identity's inventory.
fn with_inventory(
    rescan: Arc<dyn Fn() -> Result<ScanReport, String> + Send + Sync>,
    storage: Storage,
    identities: crate::identity::Identities,
    tenants: Tenants,
) -> Arc<dyn Fn() -> Result<ScanReport, String> + Send + Sync> {
    Arc::new(move || {
        let report = rescan()?;
        measure_tenant_repos(&storage, &tenants);
        identities.refresh();
        Ok(report)
    })
}

/// Bytes on disk of every repository a tenant holds (quota accounting).
fn measure_tenant_repos(storage: &Storage, tenants: &Tenants) {
    let held: std::collections::BTreeSet<_> = tenants
        .list()
        .into_iter()
        .flat_map(|(t, _)| t.repos.into_iter().map(|r| r.rid))
        .collect();
    for rid in held {
        let path = storage.path_of(&rid);
        let size = path
            .join("HEAD")
            .exists()
            .then(|| crate::tenant::dir_size(&path));
        tenants.set_size(rid, size);
    }
    tenants.refresh_metrics();
}

/// Where `seedctl restore --data-dir` leaves state for the next start.
pub const RESTORE_FILE: &str = "restore.json";

pub async fn run(
    cfg: Config,
    config_file: Option<std::path::PathBuf>,
    overrides: crate::config::Overrides,
) -> anyhow::Result<()> {
    private_data_dirs(&cfg)?;
    let key = load_identity(&cfg)?;
    let nid = key.nid();
    tracing::info!(nid = %nid, did = %nid.to_did(), alias = %cfg.alias, data_dir = %cfg.data_dir.display(), "starting seedd");

    let storage = Storage::open(cfg.storage_dir())?;
    let index = Index::open(&cfg.index_dir())?;
    let token = admin_token(&cfg)?;
    let metrics = Arc::new(Metrics::new()?);
    let ready = Arc::new(AtomicBool::new(false));
    let rescan = rescanner(storage.clone(), index.clone(), metrics.clone());

    let http_addr = cfg.http.listen;
    let admin_addr = cfg.admin.listen;
    let admin_listener = http::bind("admin", admin_addr).await?;
    let http_listener = http::bind("http", http_addr).await?;

    let tenants = Tenants::load(index.clone(), metrics.clone()).context("loading tenants")?;
    let policies = Policies::new(
        index.clone(),
        cfg.policy.default == DefaultPolicy::Allow,
        cfg.policy.scope,
    )
    .with_tenants(tenants.clone());
    let restored = crate::backup::import_pending(&cfg.data_dir, &index, &tenants, &policies)
        .context("importing restore.json (written by seedctl restore --data-dir)")?;
    if let Some(r) = restored {
        tracing::info!(
            tenants = r.tenants,
            policies = r.policies,
            "restored state from restore.json"
        );
    }
    // The p2p layer: restore gossip state, listen, dial configured peers.
    let p2p_shutdown = tokio_util::sync::CancellationToken::new();
    let mut net_cfg = NetConfig::from_config(&cfg)?;
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
        metrics.clone(),
    );
    let net_deps = NetDeps {
        index: index.clone(),
        storage: storage.clone(),
        git: stream_git,
        metrics: metrics.clone(),
        policies: policies.clone(),
    };
    let launch = crate::identity::Launch {
        keys_dir: cfg.data_dir.join("keys"),
        passphrase: match &cfg.keys.passphrase_file {
            Some(p) => std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim_end_matches(['\n', '\r']).to_owned()),
            None => None,
        },
        base: {
            let mut base = net_cfg.clone();
            base.gossip.seeded = Default::default();
            base.gossip.seed_all = false;
            base
        },
        deps: net_deps.clone(),
        shutdown: p2p_shutdown.clone(),
    };
    let net = Net::start(key.clone(), net_cfg, net_deps, p2p_shutdown.clone()).await?;
    let identities = crate::identity::Identities::new(
        net.clone(),
        cfg.p2p.inventory_cap,
        launch,
        tenants.clone(),
        policies.clone(),
        index.clone(),
        metrics.clone(),
    );
    for spec in cfg.identities.clone() {
        identities
            .start(spec, false)
            .await
            .context("starting an identity from [[identities]]")?;
    }
    for spec in identities.persisted() {
        if cfg.identities.iter().any(|s| s.name == spec.name) {
            continue;
        }
        let name = spec.name.clone();
        if let Err(e) = identities.start(spec, false).await {
            tracing::error!(identity = %name, error = %e, "starting a seed identity failed");
        }
    }
    let rescan = with_inventory(rescan, storage.clone(), identities.clone(), tenants.clone());

    // Replication: fetch what peers tell us about (policy allow), validate, apply, re-index.
    let fetch_cfg = FetchConfig {
        max_concurrent: cfg.p2p.max_concurrent_fetches,
        max_per_peer: cfg.p2p.max_fetches_per_peer,
        max_pack_bytes: cfg.p2p.max_fetch_bytes,
        timeout: cfg.p2p.fetch_timeout,
        deadline: cfg.p2p.fetch_deadline,
        git: cfg.http.git_binary.clone(),
        git_home: cfg.cache_dir().join("git-home"),
        work_dir: cfg.cache_dir().join("fetch"),
    };
    let on_change: Arc<dyn Fn(crate::crypto::RepoId) + Send + Sync> = {
        let (storage, index, identities) = (storage.clone(), index.clone(), identities.clone());
        let tenants = tenants.clone();
        Arc::new(move |rid| {
            match scan::index_repo(&storage, &index, rid) {
                Ok(_) => {}
                Err(e) => tracing::error!(%rid, error = %e, "re-indexing after fetch failed"),
            }
            if !tenants.claimants(&rid).is_empty() {
                let path = storage.path_of(&rid);
                tenants.set_size(rid, Some(crate::tenant::dir_size(&path)));
                tenants.refresh_metrics();
            }
            identities.refresh();
        })
    };
    crate::fetch::recover(&fetch_cfg, &storage);
    let fetcher = Fetcher::new(
        fetch_cfg,
        net.clone(),
        storage.clone(),
        metrics.clone(),
        policies.clone(),
        on_change,
    );
    fetcher.spawn_hint_loop();
    fetcher.spawn_sync_loop();
    identities.set_fetcher(fetcher.clone());

    let control = Control {
        tenants: tenants.clone(),
        policies: policies.clone(),
        storage: storage.clone(),
        index: index.clone(),
        trash: cfg.cache_dir().join("trash"),
        fetch: fetch_trigger(fetcher.clone()),
        changed: {
            let identities = identities.clone();
            Arc::new(move || identities.refresh())
        },
    };
    control.empty_trash();
    if !cfg.tenants.is_empty() {
        match control.apply(&ApplyRequest {
            tenants: cfg.tenants.clone(),
            prune: false,
            dry_run: false,
        }) {
            Ok(changes) => {
                for c in &changes {
                    tracing::info!(change = %c, "tenants from the config file");
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "applying [[tenants]] from the config file failed")
            }
        }
    }

    let cert = match &cfg.http.tls {
        Some(t) => Some(Arc::new(
            ReloadingCert::new(t.cert.clone(), t.key.clone())
                .context("loading http.tls certificate")?,
        )),
        None => None,
    };
    // The admin listener's own certificate (HTTPS), optionally requiring client certificates.
    let admin_cert = match &cfg.admin.tls {
        Some(t) => Some(Arc::new(
            ReloadingCert::new(t.cert.clone(), t.key.clone())
                .context("loading admin.tls certificate")?,
        )),
        None => None,
    };
    let admin_tls = match (
        &admin_cert,
        cfg.admin.tls.as_ref().and_then(|t| t.client_ca.as_ref()),
    ) {
        (Some(c), Some(ca)) => Some(
            c.server_config_with_client_ca(ca)
                .context("loading admin.tls.client_ca")?,
        ),
        (Some(c), None) => Some(c.server_config()),
        (None, _) => None,
    };
    let (shutdown_tx, shutdown_rx) = watch::channel(false);

    let http_limiter = http::ratelimit::HttpLimiter::new(&cfg.http.rate);
    let unknown_hosts_all = Arc::new(AtomicBool::new(cfg.http.unknown_hosts == UnknownHosts::All));
    let tokens = Arc::new(std::sync::RwLock::new(admin_tokens(&cfg, token)?));
    let reloader = Reloader {
        file: config_file,
        overrides,
        current: Arc::new(Mutex::new(cfg.clone())),
        policies: policies.clone(),
        identities: identities.clone(),
        control: control.clone(),
        limiter: http_limiter.clone(),
        unknown_hosts_all: unknown_hosts_all.clone(),
        cert: cert.clone(),
        metrics: metrics.clone(),
        tokens: tokens.clone(),
        first_token: token,
    };
    let reload: admin::Reload = {
        let r = reloader.clone();
        let admin_cert = admin_cert.clone();
        Arc::new(move || {
            let mut changes = r.reload()?;
            if let Some(c) = &admin_cert {
                changes.extend(reload_admin_cert(c, true));
            }
            Ok(changes)
        })
    };
    let admin_state = Arc::new(AdminState {
        nid,
        alias: cfg.alias.clone(),
        index: index.clone(),
        metrics: metrics.clone(),
        ready: ready.clone(),
        started: Instant::now(),
        tokens,
        http_listen: http_listener.local_addr()?.to_string(),
        admin_listen: admin_listener.local_addr()?.to_string(),
        tls: cert.is_some(),
        rescan: rescan.clone(),
        net: Some(net.clone()),
        policies: Some(policies.clone()),
        fetcher: Some(fetcher.clone()),
        control: Some(control.clone()),
        identities: Some(identities.clone()),
        reload: Some(reload.clone()),
        data_dir: cfg.data_dir.clone(),
        key_path: cfg.secret_key_path(),
    });
    tracing::info!(
        listen = %admin_state.admin_listen,
        tls = admin_tls.is_some(),
        client_certs = cfg.admin.tls.as_ref().is_some_and(|t| t.client_ca.is_some()),
        "admin listening (/metrics, /healthz, /readyz, /api/v1)"
    );
    let admin_task = tokio::spawn(http::serve(
        admin_listener,
        admin_tls,
        admin::router(admin_state.clone()),
        shutdown_rx.clone(),
        Duration::from_secs(2),
    ));
    if let Some(cert) = admin_cert.clone() {
        let mut stop = shutdown_rx.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(TLS_POLL) => {}
                    _ = stop.changed() => return,
                }
                reload_admin_cert(&cert, false);
            }
        });
    }

    let git = GitServer::new(
        cfg.http.git_binary.clone(),
        cfg.cache_dir().join("git-home"),
        StreamLimits {
            idle: cfg.http.idle_timeout,
            total: cfg.http.request_timeout,
        },
        metrics.clone(),
    );
    let http_state = Arc::new(HttpState {
        storage: storage.clone(),
        index: index.clone(),
        git,
        limiter: PackLimiter::new(
            cfg.http.max_concurrent_packs,
            cfg.http.pack_queue,
            cfg.http.pack_queue_timeout,
        ),
        ref_limiter: PackLimiter::new(
            cfg.http.max_concurrent_packs.saturating_mul(4),
            cfg.http.pack_queue,
            cfg.http.pack_queue_timeout,
        ),
        metrics: metrics.clone(),
        max_request_bytes: cfg.http.max_request_bytes,
        rate: Some(http_limiter.clone()),
        tenancy: Some(http::Tenancy {
            tenants: tenants.clone(),
            policies: policies.clone(),
            unknown_hosts_all,
        }),
    });
    tracing::info!(listen = %admin_state.http_listen, tls = cert.is_some(), "http listening (git clone)");
    let http_task = tokio::spawn(http::serve(
        http_listener,
        cert.as_ref().map(|c| c.server_config()),
        http::router(http_state, http_limiter.clone()),
        shutdown_rx.clone(),
        SHUTDOWN_GRACE,
    ));

    // Index what is in storage; probes report ready afterwards.
    {
        let rescan = rescan.clone();
        let ready = ready.clone();
        tokio::task::spawn_blocking(move || {
            match rescan() {
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(error = %e, "initial index failed; fix the cause and send SIGHUP")
                }
            }
            ready.store(true, Ordering::Release);
        });
    }

    if let Some(t) = cert.as_ref().and_then(|c| c.not_after()) {
        metrics
            .tls_cert_expiry
            .set(i64::try_from(t).unwrap_or(i64::MAX));
    }
    {
        // Process and disk gauges, every 15 s.
        let metrics = metrics.clone();
        let data_dir = cfg.data_dir.clone();
        let mut stop = shutdown_rx.clone();
        let tenants = tenants.clone();
        tokio::spawn(async move {
            loop {
                let (m, d) = (metrics.clone(), data_dir.clone());
                let t = tenants.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    m.sample_system(&d);
                    t.flush_egress();
                    t.refresh_metrics();
                })
                .await;
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(15)) => {}
                    _ = stop.changed() => return,
                }
            }
        });
    }
    if let Some(cert) = cert.clone() {
        let metrics = metrics.clone();
        let mut stop = shutdown_rx.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(TLS_POLL) => {}
                    _ = stop.changed() => return,
                }
                reload_tls(&cert, &metrics, false);
            }
        });
    }

    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    loop {
        tokio::select! {
            _ = hup.recv() => {
                tracing::info!("SIGHUP: reloading the configuration and TLS, rescanning storage");
                let rescan = rescan.clone();
                let reload = reload.clone();
                tokio::task::spawn_blocking(move || {
                    match reload() {
                        Ok(changes) => tracing::info!(?changes, "configuration reloaded"),
                        Err(e) => tracing::error!(error = %e, "configuration reload failed"),
                    }
                    if let Err(e) = rescan() {
                        tracing::error!(error = %e, "rescan failed");
                    }
                });
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    tracing::info!("shutting down: no new connections; finishing in-flight responses");
    let _ = shutdown_tx.send(true);
    tenants.flush_egress();
    identities.shutdown().await;
    let _ = tokio::join!(http_task, admin_task);
    tracing::info!("stopped");
    Ok(())
}

fn reload_tls(cert: &ReloadingCert, metrics: &Metrics, force: bool) {
    let result = cert.reload(force);
    if let Some(t) = cert.not_after() {
        metrics
            .tls_cert_expiry
            .set(i64::try_from(t).unwrap_or(i64::MAX));
    }
    match result {
        Ok(true) => metrics.tls_reloads.with_label_values(&["ok"]).inc(),
        Ok(false) => {}
        Err(e) => {
            metrics.tls_reloads.with_label_values(&["error"]).inc();
            tracing::error!(error = %e, "TLS reload failed; keeping the previous certificate");
        }
    }
}

/// Reload the admin listener's certificate (if changed, or always with `force`); on error the
/// previous one stays. Returns a line for the reload report when something happened.
fn reload_admin_cert(cert: &ReloadingCert, force: bool) -> Option<String> {
    match cert.reload(force) {
        Ok(true) => Some("admin.tls: certificate reloaded".to_owned()),
        Ok(false) => None,
        Err(e) => {
            tracing::error!(error = %e, "admin TLS reload failed; keeping the previous certificate");
            Some(format!(
                "admin.tls: reload failed, previous certificate kept: {e}"
            ))
        }
    }
}

/// Start fetching a repository: from `from` once it is connected (up to 10 s), else from a
/// connected node the routing table names; otherwise the sync loop picks it up later.
fn fetch_trigger(
    fetcher: Fetcher,
) -> Arc<dyn Fn(crate::crypto::RepoId, Option<crate::crypto::NodeId>) + Send + Sync> {
    Arc::new(move |rid, from| {
        let source = from.or_else(|| {
            let connected = fetcher.connected();
            fetcher
                .routing(Some(rid))
                .into_iter()
                .map(|r| r.nid)
                .find(|n| connected.contains(n))
        });
        let Some(nid) = source else {
            tracing::info!(%rid, "no connected seed of this repository yet; the sync loop fetches it later");
            return;
        };
        let fetcher = fetcher.clone();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        handle.spawn(async move {
            for _ in 0..100 {
                if fetcher.connected().contains(&nid) {
                    fetcher.request(rid, nid);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tracing::warn!(%rid, peer = %nid, "seed: peer did not connect; fetch later by sync");
        });
    })
}

/// Every accepted admin token digest: the main one plus `admin.token_files`.
fn admin_tokens(cfg: &Config, first: [u8; 32]) -> anyhow::Result<Vec<[u8; 32]>> {
    let mut out = vec![first];
    for path in &cfg.admin.token_files {
        let t = std::fs::read_to_string(path)
            .with_context(|| format!("reading admin.token_files entry {}", path.display()))?;
        if t.trim().is_empty() {
            anyhow::bail!("admin.token_files entry {} is empty", path.display());
        }
        out.push(admin::token_digest(&t));
    }
    Ok(out)
}

/// Hot reload (SIGHUP, `seedctl config reload`): re-read the file with the same environment
/// and flags; if it is valid apply log level, default policy, HTTP limits, unknown-host policy,
/// admin tokens, `[[tenants]]` and the TLS certificate without dropping connections. A bad
/// file is rejected and the running configuration kept. Changes that need a restart
/// (listeners, identities, keys, data directory) are reported, not applied.
#[derive(Clone)]
struct Reloader {
    file: Option<std::path::PathBuf>,
    overrides: crate::config::Overrides,
    current: Arc<Mutex<Config>>,
    policies: Policies,
    identities: crate::identity::Identities,
    control: Control,
    limiter: http::ratelimit::HttpLimiter,
    unknown_hosts_all: Arc<AtomicBool>,
    cert: Option<Arc<ReloadingCert>>,
    metrics: Arc<Metrics>,
    tokens: Arc<std::sync::RwLock<Vec<[u8; 32]>>>,
    first_token: [u8; 32],
}

impl Reloader {
    fn reload(&self) -> Result<Vec<String>, String> {
        let result = self.try_reload();
        let label = if result.is_ok() { "ok" } else { "error" };
        self.metrics
            .config_reloads
            .with_label_values(&[label])
            .inc();
        result
    }

    fn try_reload(&self) -> Result<Vec<String>, String> {
        let keep = "; keeping the previous configuration";
        let (new, _) = Config::load(self.file.as_deref(), &self.overrides)
            .map_err(|e| format!("{e}{keep}"))?;
        if !crate::logging::valid_level(&new.log.level) {
            return Err(format!(
                "log.level {:?} is not a valid filter{keep}",
                new.log.level
            ));
        }
        let tokens = admin_tokens(&new, self.first_token).map_err(|e| format!("{e:#}{keep}"))?;
        let mut cur = self
            .current
            .lock()
            .map_err(|_| "reload lock poisoned".to_owned())?;
        let mut changes = Vec::new();
        if new.log.level != cur.log.level {
            crate::logging::set_level(&new.log.level).map_err(|e| format!("{e}{keep}"))?;
            changes.push(format!("log.level: {} → {}", cur.log.level, new.log.level));
        }
        if new.policy != cur.policy {
            self.policies
                .set_default(new.policy.default == DefaultPolicy::Allow, new.policy.scope);
            changes.push(format!(
                "policy: {}/{} → {}/{}",
                cur.policy.default, cur.policy.scope, new.policy.default, new.policy.scope
            ));
        }
        if new.http.rate != cur.http.rate {
            self.limiter.reconfigure(&new.http.rate);
            changes.push("http.rate: limits replaced".to_owned());
        }
        if new.http.unknown_hosts != cur.http.unknown_hosts {
            self.unknown_hosts_all.store(
                new.http.unknown_hosts == UnknownHosts::All,
                Ordering::Relaxed,
            );
            changes.push(format!(
                "http.unknown_hosts: {} → {}",
                cur.http.unknown_hosts, new.http.unknown_hosts
            ));
        }
        if new.admin.token_files != cur.admin.token_files {
            changes.push(format!(
                "admin.token_files: {} file(s)",
                new.admin.token_files.len()
            ));
        }
        if let Ok(mut t) = self.tokens.write() {
            *t = tokens;
        }
        if new.tenants != cur.tenants {
            let diff = self
                .control
                .apply(&ApplyRequest {
                    tenants: new.tenants.clone(),
                    prune: false,
                    dry_run: false,
                })
                .map_err(|e| format!("[[tenants]]: {e}"))?;
            changes.extend(diff);
        }
        if let Some(cert) = &self.cert {
            match cert.reload(true) {
                Ok(true) => {
                    self.metrics.tls_reloads.with_label_values(&["ok"]).inc();
                    changes.push("http.tls: certificate reloaded".to_owned());
                }
                Ok(false) => {}
                Err(e) => {
                    self.metrics.tls_reloads.with_label_values(&["error"]).inc();
                    changes.push(format!(
                        "http.tls: reload failed, previous certificate kept: {e}"
                    ));
                }
            }
            if let Some(t) = cert.not_after() {
                self.metrics
                    .tls_cert_expiry
                    .set(i64::try_from(t).unwrap_or(i64::MAX));
            }
        }
        if new.p2p.rate != cur.p2p.rate || new.p2p.ban != cur.p2p.ban {
            self.identities.set_p2p_limits(&new.p2p.rate, &new.p2p.ban);
            changes.push("p2p.rate / p2p.ban: limits replaced".to_owned());
        }
        let p2p_rest = |c: &Config| {
            let mut p = c.p2p.clone();
            p.rate = Default::default();
            p.ban = Default::default();
            p
        };
        for (key, differs) in [
            ("p2p (except rate, ban)", p2p_rest(&new) != p2p_rest(&cur)),
            ("http.listen", new.http.listen != cur.http.listen),
            ("admin.listen", new.admin.listen != cur.admin.listen),
            ("identities", new.identities != cur.identities),
            ("keys", new.keys != cur.keys),
            ("data_dir", new.data_dir != cur.data_dir),
        ] {
            if differs {
                changes.push(format!("{key}: changed; takes effect after a restart"));
            }
        }
        self.identities.refresh();
        *cur = new;
        Ok(changes)
    }
}
