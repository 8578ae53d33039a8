//! Hot reload (SIGHUP, `seedctl config reload`) and the TLS certificates' reloads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::files::admin_tokens;
use crate::control::{ApplyRequest, Control};
use seedd_core::config::{Config, Overrides};
use seedd_core::index::policy::Scope;
use seedd_core::metrics::Metrics;
use seedd_core::policy::Policies;
use seedd_http::ratelimit::HttpLimiter;
use seedd_http::tls::ReloadingCert;
use seedd_p2p::identity::Identities;

/// The default policy's `(allow, scope)` from `policy.default` / `policy.scope`.
pub(super) fn default_policy(cfg: &Config) -> (bool, Scope) {
    (
        cfg.policy.default == seedd_core::config::DefaultPolicy::Allow,
        cfg.policy.scope,
    )
}

/// Re-read the file with the same environment and flags; if it is valid apply log level,
/// default policy, HTTP limits, unknown-host policy, admin tokens, `[[tenants]]` and the TLS
/// certificate without dropping connections. A bad file is rejected and the running
/// configuration kept. Changes that need a restart (listeners, identities, keys, data
/// directory, `[maintenance]`, `[index]`) are reported, not applied.
#[derive(Clone)]
pub(super) struct Reloader {
    pub(super) file: Option<std::path::PathBuf>,
    pub(super) overrides: Overrides,
    pub(super) current: Arc<Mutex<Config>>,
    pub(super) policies: Policies,
    pub(super) identities: Identities,
    pub(super) control: Control,
    pub(super) limiter: HttpLimiter,
    pub(super) unknown_hosts_all: Arc<AtomicBool>,
    pub(super) cert: Option<Arc<ReloadingCert>>,
    pub(super) admin_cert: Option<Arc<ReloadingCert>>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) tokens: Arc<RwLock<Vec<[u8; 32]>>>,
    pub(super) first_token: [u8; 32],
}

impl Reloader {
    /// The configuration, then the admin listener's certificate (always re-read).
    pub(super) fn reload(&self) -> Result<Vec<String>, String> {
        let result = self.try_reload();
        let label = if result.is_ok() { "ok" } else { "error" };
        self.metrics
            .config_reloads
            .with_label_values(&[label])
            .inc();
        let mut changes = result?;
        if let Some(c) = &self.admin_cert {
            changes.extend(reload_admin_cert(c, true));
        }
        Ok(changes)
    }

    fn try_reload(&self) -> Result<Vec<String>, String> {
        let keep = "; keeping the previous configuration";
        let (new, _) = Config::load(self.file.as_deref(), &self.overrides)
            .map_err(|e| format!("{e}{keep}"))?;
        if !seedd_core::logging::valid_level(&new.log.level) {
            return Err(format!(
                "log.level {:?} is not a valid filter{keep}",
                new.log.level
            ));
        }
        let tokens = admin_tokens(&new, self.first_token)
            .map_err(|e| format!("{:#}{keep}", anyhow::Error::new(e)))?;
        let mut cur = self
            .current
            .lock()
            .map_err(|_| "reload lock poisoned".to_owned())?;
        let mut changes = Vec::new();
        if new.log.level != cur.log.level {
            seedd_core::logging::set_level(&new.log.level).map_err(|e| format!("{e}{keep}"))?;
            changes.push(format!("log.level: {} → {}", cur.log.level, new.log.level));
        }
        if new.policy != cur.policy {
            let (allow, scope) = default_policy(&new);
            self.policies.set_default(allow, scope);
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
                new.http.unknown_hosts == seedd_core::config::UnknownHosts::All,
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
        if new.web != cur.web {
            // Read per request from `current` (the web API's node profile).
            changes.push("web: explorer profile replaced".to_owned());
        }
        if let Some(cert) = &self.cert {
            changes.extend(reload_http_cert(cert, &self.metrics, true));
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
            (
                "http.pack_cache",
                new.http.pack_cache != cur.http.pack_cache,
            ),
            ("admin.listen", new.admin.listen != cur.admin.listen),
            ("identities", new.identities != cur.identities),
            ("keys", new.keys != cur.keys),
            ("data_dir", new.data_dir != cur.data_dir),
            ("maintenance", new.maintenance != cur.maintenance),
            ("index", new.index != cur.index),
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

/// Reload the git listener's certificate (if changed, or always with `force`) and publish its
/// expiry; on error the previous one stays. Returns a line for the reload report when
/// something happened.
pub(super) fn reload_http_cert(
    cert: &ReloadingCert,
    metrics: &Metrics,
    force: bool,
) -> Option<String> {
    let result = cert.reload(force);
    if let Some(t) = cert.not_after() {
        metrics
            .tls_cert_expiry
            .set(i64::try_from(t).unwrap_or(i64::MAX));
    }
    match result {
        Ok(true) => {
            metrics.tls_reloads.with_label_values(&["ok"]).inc();
            Some("http.tls: certificate reloaded".to_owned())
        }
        Ok(false) => None,
        Err(e) => {
            metrics.tls_reloads.with_label_values(&["error"]).inc();
            tracing::error!(error = %seedd_core::logging::chain(&e), "TLS reload failed; keeping the previous certificate");
            Some(format!(
                "http.tls: reload failed, previous certificate kept: {e}"
            ))
        }
    }
}

/// Reload the admin listener's certificate (if changed, or always with `force`); on error the
/// previous one stays. Returns a line for the reload report when something happened.
pub(super) fn reload_admin_cert(cert: &ReloadingCert, force: bool) -> Option<String> {
    match cert.reload(force) {
        Ok(true) => Some("admin.tls: certificate reloaded".to_owned()),
        Ok(false) => None,
        Err(e) => {
            tracing::error!(error = %seedd_core::logging::chain(&e), "admin TLS reload failed; keeping the previous certificate");
            Some(format!(
                "admin.tls: reload failed, previous certificate kept: {e}"
            ))
        }
    }
}
