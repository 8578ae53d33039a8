//! TLS for the HTTP and admin listeners: certificate + key from PEM files, reloaded without
//! dropping connections when the files change (polled) or on SIGHUP; optionally requiring a
//! client certificate signed by a CA (mutual TLS, `admin.tls.client_ca`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLS file {path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("TLS certificate {0}: no certificate found in the PEM file")]
    NoCertificate(PathBuf),
    #[error("TLS key {0}: no private key found in the PEM file")]
    NoKey(PathBuf),
    #[error("TLS key {path}: {reason}")]
    BadKey { path: PathBuf, reason: String },
    #[error("TLS client CA {path}: {reason}")]
    ClientCa { path: PathBuf, reason: String },
    #[error("TLS: {0}")]
    Rustls(rustls::Error),
}

/// Serves the current certificate; swapped atomically on reload.
#[derive(Debug)]
pub struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
    /// notAfter of the current leaf certificate (Unix seconds), if it could be read.
    not_after: Mutex<Option<u64>>,
    stamp: Mutex<Option<(SystemTime, SystemTime)>>,
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn load(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| TlsError::Io {
            path,
            cause: source,
        }
    };
    let cert_pem = std::fs::read(cert).map_err(io(cert))?;
    let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(io(cert))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(cert.to_owned()));
    }
    let key_pem = std::fs::read(key).map_err(io(key))?;
    let private = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(io(key))?
        .ok_or_else(|| TlsError::NoKey(key.to_owned()))?;
    let signing =
        rustls::crypto::ring::sign::any_supported_type(&private).map_err(|e| TlsError::BadKey {
            path: key.to_owned(),
            reason: e.to_string(),
        })?;
    Ok(CertifiedKey::new(certs, signing))
}

/// The trust anchors in the PEM file `ca` (one or more CA certificates).
fn client_roots(ca: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let io = |source| TlsError::Io {
        path: ca.to_owned(),
        cause: source,
    };
    let pem = std::fs::read(ca).map_err(io)?;
    let certs = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(ca.to_owned()));
    }
    let mut roots = rustls::RootCertStore::empty();
    for (i, cert) in certs.into_iter().enumerate() {
        roots.add(cert).map_err(|e| TlsError::ClientCa {
            path: ca.to_owned(),
            reason: format!("certificate {i}: {e}"),
        })?;
    }
    Ok(roots)
}

/// The leaf certificate's notAfter, in Unix seconds.
fn leaf_not_after(key: &CertifiedKey) -> Option<u64> {
    use x509_cert::der::Decode as _;
    let leaf = key.cert.first()?;
    let cert = x509_cert::Certificate::from_der(leaf.as_ref()).ok()?;
    Some(
        cert.tbs_certificate
            .validity
            .not_after
            .to_unix_duration()
            .as_secs(),
    )
}

impl ReloadingCert {
    /// notAfter of the certificate being served (Unix seconds).
    pub fn not_after(&self) -> Option<u64> {
        self.not_after.lock().ok().and_then(|n| *n)
    }

    pub fn new(cert: PathBuf, key: PathBuf) -> Result<Self, TlsError> {
        let loaded = load(&cert, &key)?;
        let stamp = mtime(&cert).zip(mtime(&key));
        let not_after = leaf_not_after(&loaded);
        Ok(Self {
            cert,
            key,
            not_after: Mutex::new(not_after),
            current: RwLock::new(Arc::new(loaded)),
            stamp: Mutex::new(stamp),
        })
    }

    /// Reload if the files changed (or always, with `force`). On error the old certificate stays.
    pub fn reload(&self, force: bool) -> Result<bool, TlsError> {
        let stamp = mtime(&self.cert).zip(mtime(&self.key));
        let changed = match self.stamp.lock() {
            Ok(s) => *s != stamp,
            Err(_) => true,
        };
        if !force && !changed {
            return Ok(false);
        }
        let loaded = load(&self.cert, &self.key)?;
        if let Ok(mut n) = self.not_after.lock() {
            *n = leaf_not_after(&loaded);
        }
        if let Ok(mut cur) = self.current.write() {
            *cur = Arc::new(loaded);
        }
        if let Ok(mut s) = self.stamp.lock() {
            *s = stamp;
        }
        tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded");
        Ok(true)
    }

    /// A rustls server config (HTTP/2 and HTTP/1.1 by ALPN) resolving through `self`.
    pub fn server_config(self: &Arc<Self>) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions();
        let mut cfg = match builder {
            Ok(b) => b.with_no_client_auth().with_cert_resolver(self.clone()),
            // The ring provider always supports the default versions.
            Err(e) => {
                tracing::error!(error = %seedd_core::logging::chain(&e), "TLS provider rejected default protocol versions");
                rustls::ServerConfig::builder()
                    .with_no_client_auth()
                    .with_cert_resolver(self.clone())
            }
        };
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Arc::new(cfg)
    }

    /// Like [`server_config`](Self::server_config), but every client must present a
    /// certificate that chains to one in the PEM file `ca` (mutual TLS). The CA file is read
    /// once; the server certificate still reloads.
    pub fn server_config_with_client_ca(
        self: &Arc<Self>,
        ca: &Path,
    ) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = client_roots(ca)?;
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .map_err(|e| TlsError::ClientCa {
            path: ca.to_owned(),
            reason: format!("{e:?}"),
        })?;
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(self.clone());
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.clone())
    }
}

impl From<rustls::Error> for TlsError {
    fn from(e: rustls::Error) -> Self {
        TlsError::Rustls(e)
    }
}
