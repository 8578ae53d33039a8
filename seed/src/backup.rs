//! Backup and restore of the state that cannot be re-fetched: keys (every identity), tenants,
//! policies (the operator's seeds and deny lists, follows), identity definitions and index
//! metadata (our announcement timestamps). Git data is not included: it is re-fetched from the
//! network (or snapshotted with the volume).
//!
//! Restore into a fresh data directory is offline: `seedctl restore -f backup.json --data-dir
//! DIR` writes the key files and `DIR/restore.json`; [`import_pending`] loads that file into
//! the index on the next start and renames it `restore.json.done`. Online restore
//! ([`restore_state`]) brings tenants and policies into a running daemon (keys cannot change
//! while it runs).

use std::path::Path;

use serde::{Deserialize, Serialize};

use seedd_core::index::policy::{NodePolicy, RepoPolicy};
use seedd_core::index::tenants::Kind;
use seedd_core::index::Index;
use seedd_core::policy::Policies;
use seedd_core::tenant::{Tenant, Tenants};
use seedd_proto::crypto::{NodeId, RepoId};

pub(crate) const VERSION: u32 = 1;

/// Where `seedctl restore --data-dir` leaves state for the next start.
pub(crate) const RESTORE_FILE: &str = "restore.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RepoPolicyEntry {
    pub rid: RepoId,
    #[serde(flatten)]
    pub policy: RepoPolicy,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct NodePolicyEntry {
    pub nid: NodeId,
    #[serde(flatten)]
    pub policy: NodePolicy,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct PolicySet {
    #[serde(default)]
    pub repos: Vec<RepoPolicyEntry>,
    #[serde(default)]
    pub nodes: Vec<NodePolicyEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Backup {
    pub version: u32,
    pub created_at: u64,
    pub nid: String,
    /// Identity name → OpenSSH private key file contents.
    #[serde(default)]
    pub keys: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub identities: Vec<seedd_p2p::identity::IdentitySpec>,
    #[serde(default)]
    pub tenants: Vec<Tenant>,
    #[serde(default)]
    pub policies: PolicySet,
    /// `meta` entries (hex key → hex value), schema version excluded.
    #[serde(default)]
    pub meta: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Restored {
    pub tenants: usize,
    pub policies: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("reading {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("backup version {0} is not supported (expected {VERSION})")]
    Version(u32),
    #[error("backup is not valid JSON: {0}")]
    Json(serde_json::Error),
    #[error(transparent)]
    Index(#[from] seedd_core::index::IndexError),
    #[error(transparent)]
    Tenant(#[from] seedd_core::tenant::TenantError),
}

/// Gather a backup. `keys` are (identity name, key file path).
pub(crate) fn export(
    nid: &NodeId,
    keys: &[(String, std::path::PathBuf)],
    identities: Vec<seedd_p2p::identity::IdentitySpec>,
    index: &Index,
    tenants: &Tenants,
) -> Result<Backup, BackupError> {
    let mut key_texts = std::collections::BTreeMap::new();
    for (name, path) in keys {
        let text = std::fs::read_to_string(path).map_err(|source| BackupError::Read {
            path: path.display().to_string(),
            cause: source,
        })?;
        key_texts.insert(name.clone(), text);
    }
    let (repos, nodes) = index.policies()?;
    let meta = index
        .meta_entries()?
        .into_iter()
        .filter(|(k, _)| k.as_slice() != b"schema_version")
        .map(|(k, v)| (hex::encode(k), hex::encode(v)))
        .collect();
    Ok(Backup {
        version: VERSION,
        created_at: seedd_core::tenant::now_ms() / 1000,
        nid: nid.to_string(),
        keys: key_texts,
        identities,
        tenants: tenants.list().into_iter().map(|(t, _)| t).collect(),
        policies: PolicySet {
            repos: repos
                .into_iter()
                .map(|(rid, policy)| RepoPolicyEntry { rid, policy })
                .collect(),
            nodes: nodes
                .into_iter()
                .map(|(nid, policy)| NodePolicyEntry { nid, policy })
                .collect(),
        },
        meta,
    })
}

/// Bring tenants, policies, identity definitions and metadata into the index. Tenants that
/// exist are replaced. Returns counts.
pub(crate) fn restore_state(
    b: &Backup,
    index: &Index,
    tenants: &Tenants,
    policies: &Policies,
    with_meta: bool,
) -> Result<Restored, BackupError> {
    if b.version != VERSION {
        return Err(BackupError::Version(b.version));
    }
    for p in &b.policies.repos {
        policies.set_repo(&p.rid, Some(p.policy))?;
    }
    for p in &b.policies.nodes {
        policies.set_node(&p.nid, Some(p.policy.clone()))?;
    }
    for spec in &b.identities {
        if let Ok(bytes) = serde_json::to_vec(spec) {
            index.put_tenant_record(Kind::Identity, &spec.name, &bytes)?;
        }
        tenants.set_identity(
            &spec.name,
            spec.inventory_cap
                .unwrap_or(seedd_core::config::INVENTORY_LIMIT),
        );
    }
    for t in &b.tenants {
        tenants.replace(t.clone())?;
    }
    if with_meta {
        for (k, v) in &b.meta {
            if let (Ok(k), Ok(v)) = (hex::decode(k), hex::decode(v)) {
                index.put_meta(&k, &v)?;
            }
        }
    }
    Ok(Restored {
        tenants: b.tenants.len(),
        policies: b.policies.repos.len() + b.policies.nodes.len(),
    })
}

/// Import `<data_dir>/restore.json` if present (left by `seedctl restore --data-dir`).
pub(crate) fn import_pending(
    data_dir: &Path,
    index: &Index,
    tenants: &Tenants,
    policies: &Policies,
) -> Result<Option<Restored>, BackupError> {
    let path = data_dir.join(RESTORE_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(BackupError::Read {
                path: path.display().to_string(),
                cause: source,
            })
        }
    };
    let b: Backup = serde_json::from_str(&text)?;
    let r = restore_state(&b, index, tenants, policies, true)?;
    let done = path.with_extension("json.done");
    if let Err(e) = std::fs::rename(&path, &done) {
        tracing::warn!(path = %path.display(), error = %seedd_core::logging::chain(&e), "renaming restore.json failed; it will be imported again (idempotent)");
    }
    Ok(Some(r))
}

impl From<serde_json::Error> for BackupError {
    fn from(e: serde_json::Error) -> Self {
        BackupError::Json(e)
    }
}
