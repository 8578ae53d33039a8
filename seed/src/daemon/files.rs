//! What the daemon reads and writes under `data_dir` before anything runs: the private
//! directories, the default identity's key, the admin bearer tokens.

use std::path::{Path, PathBuf};

use crate::admin;
use seedd_core::config::Config;
use seedd_core::fsutil::{self, Tightened};
use seedd_proto::crypto::{CryptoError, Keypair};

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("creating data directory {path}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading keys.passphrase_file {path}")]
    Passphrase {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("loading keys.secret {path}")]
    Secret {
        path: PathBuf,
        #[source]
        source: CryptoError,
    },
    #[error("loading or creating the node key in {dir}")]
    NodeKey {
        dir: PathBuf,
        #[source]
        source: CryptoError,
    },
    #[error("admin token file {path} is empty")]
    EmptyToken { path: PathBuf },
    #[error("writing admin token {path}")]
    WriteToken {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading admin.token_file {path}: create it or unset admin.token_file")]
    ReadToken {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading admin.token_files entry {path}")]
    ReadExtraToken {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("admin.token_files entry {path} is empty")]
    EmptyExtraToken { path: PathBuf },
}

/// `data_dir` and its top-level directories are 0700, also when they already exist (see
/// `fsutil`: a private parent keeps everything below from other users, whatever git and
/// RocksDB create it with).
pub(super) fn private_data_dirs(cfg: &Config) -> Result<(), FileError> {
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
                error = %seedd_core::logging::chain(&e),
                "cannot restrict directory to 0700: give it to seedd's user with mode 0700, or keep its parent private"
            ),
            Err(source) => return Err(FileError::DataDir { path: dir, source }),
        }
    }
    let git_home = cfg.cache_dir().join("git-home");
    fsutil::create_private_dir(&git_home).map_err(|source| FileError::DataDir {
        path: git_home,
        source,
    })
}

/// The passphrase of the identity keys (`keys.passphrase_file`), if one is configured.
pub(super) fn passphrase(cfg: &Config) -> Result<Option<String>, FileError> {
    let Some(p) = &cfg.keys.passphrase_file else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(p).map_err(|source| FileError::Passphrase {
        path: p.clone(),
        source,
    })?;
    Ok(Some(text.trim_end_matches(['\n', '\r']).to_owned()))
}

/// Load the default identity's key: a configured file (must exist) or generated on first start.
pub fn load_identity(cfg: &Config) -> Result<Keypair, FileError> {
    let passphrase = passphrase(cfg)?;
    let path = cfg.secret_key_path();
    if cfg.keys.secret.is_some() {
        return Keypair::load(&path, passphrase.as_deref())
            .map_err(|source| FileError::Secret { path, source });
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let (key, created) = seedd_proto::crypto::load_or_generate(dir, passphrase.as_deref())
        .map_err(|source| FileError::NodeKey {
            dir: dir.to_owned(),
            source,
        })?;
    if created {
        tracing::info!(nid = %key.nid(), path = %path.display(), "generated a new node key");
    }
    Ok(key)
}

/// Read the admin token, generating one at the default path on first start.
pub(super) fn admin_token(cfg: &Config) -> Result<[u8; 32], FileError> {
    let path = cfg.admin_token_path();
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => Ok(admin::token_digest(&t)),
        Ok(_) => Err(FileError::EmptyToken { path }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && cfg.admin.token_file.is_none() => {
            use rand::RngCore;
            let mut raw = [0u8; 32];
            rand::rngs::OsRng.fill_bytes(&mut raw);
            let token = hex::encode(raw);
            if let Err(source) = fsutil::write_private(&path, token.as_bytes()) {
                return Err(FileError::WriteToken { path, source });
            }
            tracing::info!(path = %path.display(), "generated admin token (seedctl --token-file)");
            Ok(admin::token_digest(&token))
        }
        Err(source) => Err(FileError::ReadToken { path, source }),
    }
}

/// Every accepted admin token digest: the main one plus `admin.token_files`.
pub(super) fn admin_tokens(cfg: &Config, first: [u8; 32]) -> Result<Vec<[u8; 32]>, FileError> {
    let mut out = vec![first];
    for path in &cfg.admin.token_files {
        let t = std::fs::read_to_string(path).map_err(|source| FileError::ReadExtraToken {
            path: path.clone(),
            source,
        })?;
        if t.trim().is_empty() {
            return Err(FileError::EmptyExtraToken { path: path.clone() });
        }
        out.push(admin::token_digest(&t));
    }
    Ok(out)
}
