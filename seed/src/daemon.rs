//! `seedd run`: wire the modules together, start the listeners, handle signals.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

use crate::admin::{self, AdminState};
use crate::config::Config;
use crate::crypto::Keypair;
use crate::fetch::{FetchConfig, Fetcher};
use crate::http::{self, tls::ReloadingCert, HttpState};
use crate::index::policy::Scope;
use crate::index::scan::{self, ScanReport};
use crate::index::Index;
use crate::metrics::Metrics;
use crate::net::{Net, NetConfig, NetDeps};
use crate::policy::Policies;
use crate::serve::{GitServer, PackLimiter, StreamLimits};
use crate::storage::Storage;

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
            write_private(&path, token.as_bytes())
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

fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
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

/// Our inventory: public repositories we hold and seed (§5.5).
pub(crate) fn refresh_inventory(index: &Index, net: &Net, policies: &Policies) {
    match index.repos() {
        Ok(repos) => net.set_inventory(
            repos
                .iter()
                .filter(|r| r.is_public() && policies.seeding(&r.rid).is_some())
                .map(|r| r.rid)
                .collect(),
        ),
        Err(e) => tracing::error!(error = %e, "reading the index for the inventory failed"),
    }
}

/// After each successful rescan, announce the public repositories as our inventory.
fn with_inventory(
    rescan: Arc<dyn Fn() -> Result<ScanReport, String> + Send + Sync>,
    index: Index,
    net: Net,
    policies: Policies,
) -> Arc<dyn Fn() -> Result<ScanReport, String> + Send + Sync> {
    Arc::new(move || {
        let report = rescan()?;
        refresh_inventory(&index, &net, &policies);
        Ok(report)
    })
}

pub async fn run(cfg: Config) -> anyhow::Result<()> {
    for dir in [
        cfg.data_dir.clone(),
        cfg.cache_dir(),
        cfg.cache_dir().join("git-home"),
    ] {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating data directory {}", dir.display()))?;
    }
    let key = load_identity(&cfg)?;
    let nid = key.nid();
    tracing::info!(nid = %nid, did = %nid.to_did(), alias = %cfg.alias, data_dir = %cfg.data_dir.display(), "starting seedd");

    let storage = Storage::open(cfg.storage_dir())?;
    let index = Index::open(&cfg.index_dir())?;
    let token = admin_token(&cfg)?;
    let metrics = Arc::new(Metrics::new()?);
    let ready = Arc::new(AtomicBool::new(false));
    let rescan = rescanner(storage.clone(), index.clone(), metrics.clone());

    let http_addr = cfg.http_listen()?;
    let admin_addr = cfg.admin_listen()?;
    let admin_listener = http::bind("admin", admin_addr).await?;
    let http_listener = http::bind("http", http_addr).await?;

    let policies = Policies::new(
        index.clone(),
        cfg.policy.default == "allow",
        if cfg.policy.scope == "followed" {
            Scope::Followed
        } else {
            Scope::All
        },
    );
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
            total: Duration::from_secs(cfg.http.request_timeout_secs),
        },
        metrics.clone(),
    );
    let net = Net::start(
        key.clone(),
        net_cfg,
        NetDeps {
            index: index.clone(),
            storage: storage.clone(),
            git: stream_git,
            metrics: metrics.clone(),
            policies: policies.clone(),
        },
        p2p_shutdown.clone(),
    )
    .await?;
    let rescan = with_inventory(rescan, index.clone(), net.clone(), policies.clone());

    // Replication: fetch what peers tell us about (policy allow), validate, apply, re-index.
    let fetch_cfg = FetchConfig {
        max_concurrent: cfg.p2p.max_concurrent_fetches,
        max_pack_bytes: cfg.p2p.max_fetch_bytes,
        timeout: Duration::from_secs(cfg.p2p.fetch_timeout_secs),
        git: cfg.http.git_binary.clone(),
        git_home: cfg.cache_dir().join("git-home"),
        work_dir: cfg.cache_dir().join("fetch"),
    };
    let on_change: Arc<dyn Fn(crate::crypto::RepoId) + Send + Sync> = {
        let (storage, index, net) = (storage.clone(), index.clone(), net.clone());
        let policies_c = policies.clone();
        Arc::new(move |rid| {
            match scan::index_repo(&storage, &index, rid) {
                Ok(_) => {}
                Err(e) => tracing::error!(%rid, error = %e, "re-indexing after fetch failed"),
            }
            refresh_inventory(&index, &net, &policies_c);
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

    let cert = match &cfg.http.tls {
        Some(t) => Some(Arc::new(
            ReloadingCert::new(t.cert.clone(), t.key.clone())
                .context("loading http.tls certificate")?,
        )),
        None => None,
    };
    let (shutdown_tx, shutdown_rx) = watch::channel(false);

    let admin_state = Arc::new(AdminState {
        nid,
        alias: cfg.alias.clone(),
        index: index.clone(),
        metrics: metrics.clone(),
        ready: ready.clone(),
        started: Instant::now(),
        token_digest: token,
        http_listen: http_listener.local_addr()?.to_string(),
        admin_listen: admin_listener.local_addr()?.to_string(),
        tls: cert.is_some(),
        rescan: rescan.clone(),
        net: Some(net.clone()),
        policies: Some(policies.clone()),
        fetcher: Some(fetcher.clone()),
    });
    tracing::info!(listen = %admin_state.admin_listen, "admin listening (/metrics, /healthz, /readyz, /api/v1)");
    let admin_task = tokio::spawn(http::serve(
        admin_listener,
        None,
        admin::router(admin_state.clone()),
        shutdown_rx.clone(),
        Duration::from_secs(2),
    ));

    let git = GitServer::new(
        cfg.http.git_binary.clone(),
        cfg.cache_dir().join("git-home"),
        StreamLimits {
            idle: Duration::from_secs(cfg.http.idle_timeout_secs),
            total: Duration::from_secs(cfg.http.request_timeout_secs),
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
            Duration::from_millis(cfg.http.pack_queue_timeout_ms),
        ),
        ref_limiter: PackLimiter::new(
            cfg.http.max_concurrent_packs.saturating_mul(4),
            cfg.http.pack_queue,
            Duration::from_millis(cfg.http.pack_queue_timeout_ms),
        ),
        metrics: metrics.clone(),
        max_request_bytes: cfg.http.max_request_bytes,
    });
    tracing::info!(listen = %admin_state.http_listen, tls = cert.is_some(), "http listening (git clone)");
    let http_task = tokio::spawn(http::serve(
        http_listener,
        cert.as_ref().map(|c| c.server_config()),
        http::router(http_state),
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
        tokio::spawn(async move {
            loop {
                let (m, d) = (metrics.clone(), data_dir.clone());
                let _ = tokio::task::spawn_blocking(move || m.sample_system(&d)).await;
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
                tracing::info!("SIGHUP: rescanning storage and reloading TLS");
                if let Some(cert) = &cert {
                    reload_tls(cert, &metrics, true);
                }
                let rescan = rescan.clone();
                tokio::task::spawn_blocking(move || {
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
    net.shutdown().await;
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
