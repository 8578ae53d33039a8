//! Layered configuration: built-in defaults < TOML file < `SEEDD_*` environment < CLI flags.
//!
//! This is the only module that reads configuration files or `SEEDD_*` variables. Key names are a
//! contract with the Helm chart, scripts and tests (design.md §Config keys); every error names the
//! key and where its value came from.
//!
//! A leaf: it imports no other room of the daemon (only `seedd-proto` for node ids and addresses),
//! and the daemon's rooms take their typed values and specs from here.
//!
//! * [`sections`]: `[p2p]`, `[http]`, … with their defaults, each field in its final type;
//! * [`values`]: the keyword enums (`p2p.relay`, `policy.*`, `log.format`, `http.unknown_hosts`),
//!   token [`Bucket`]s, and the names/limits shared with the tenant and identity rooms;
//! * [`fields`]: checks of single values, run while deserialising;
//! * [`cidr`]: address blocks; [`specs`]: `[[identities]]` and `[[tenants]]`;
//! * [`load`]: the layering and the error's key + origin; [`validate`]: cross-field checks.

mod cidr;
mod fields;
mod load;
mod sections;
mod specs;
mod validate;
mod values;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use cidr::{client_key, mask, Cidr};
pub use load::{env_name, Overrides, Sources};
pub use sections::{
    AdminConfig, AdminTlsConfig, BanConfig, FleetConfig, HttpConfig, HttpRateConfig, IndexConfig,
    KeysConfig, LogConfig, MaintenanceConfig, P2pConfig, PackCacheConfig, PolicyConfig, RateConfig,
    TlsConfig, WebConfig, WebProfile, WebTenant,
};
pub use specs::{DenyList, IdentitySpec, Quotas, Rate, RepoSpec, State, TenantSpec};
pub use values::{
    valid_name, Bucket, DefaultPolicy, LogFormat, PackCacheAdmission, PeerAddr, Relay, Scope,
    UnknownHosts, DEFAULT_IDENTITY, INVENTORY_LIMIT,
};

/// Why the configuration cannot be used. The underlying errors are kept (not flattened into
/// strings) but shown in the message rather than chained as `source()`: their text already
/// names the key and file, and `seedd` prints the whole chain.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {0}: not found")]
    FileNotFound(PathBuf),
    #[error("config: {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("config: {}: {error}", path.display())]
    Parse {
        path: PathBuf,
        error: toml::de::Error,
    },
    /// Layering or a value of the wrong type (the message names the key).
    #[error("config: {0}")]
    Load(config::ConfigError),
    #[error("config: {0}")]
    Print(toml::ser::Error),
    #[error("config key `{key}` (from {origin}): {reason}")]
    Invalid {
        key: String,
        origin: String,
        reason: String,
    },
    #[error("config file {file}: unknown key `{key}`")]
    UnknownKey { file: PathBuf, key: String },
}

impl From<config::ConfigError> for ConfigError {
    fn from(e: config::ConfigError) -> Self {
        ConfigError::Load(e)
    }
}

impl From<toml::ser::Error> for ConfigError {
    fn from(e: toml::ser::Error) -> Self {
        ConfigError::Print(e)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Config {
    /// Data directory: keys, storage, index, cache.
    #[serde(deserialize_with = "fields::non_empty_path")]
    pub data_dir: PathBuf,
    /// Announced node alias (1–32 bytes, no whitespace).
    #[serde(deserialize_with = "fields::alias")]
    pub alias: String,
    pub p2p: P2pConfig,
    pub http: HttpConfig,
    pub admin: AdminConfig,
    pub policy: PolicyConfig,
    pub log: LogConfig,
    pub keys: KeysConfig,
    /// More seed identities (`[[identities]]`: name, listen, external_addresses, inventory_cap).
    pub identities: Vec<IdentitySpec>,
    /// Tenants declared in the file (`[[tenants]]`), applied at start and on reload like
    /// `seedctl apply` (tenants created at runtime are left alone).
    pub tenants: Vec<TenantSpec>,
    /// `[maintenance]`: background repacks, bitmaps, commit-graphs.
    pub maintenance: MaintenanceConfig,
    /// `[index]`: the RocksDB index's memory.
    pub index: IndexConfig,
    /// `[web]`: the explorer's node page and pinned repositories.
    pub web: WebConfig,
    /// `[fleet]`: shard membership and the placement file.
    pub fleet: FleetConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./seedd-data"),
            alias: "seedd".to_owned(),
            p2p: P2pConfig::default(),
            http: HttpConfig::default(),
            admin: AdminConfig::default(),
            policy: PolicyConfig::default(),
            log: LogConfig::default(),
            keys: KeysConfig::default(),
            identities: Vec::new(),
            tenants: Vec::new(),
            maintenance: MaintenanceConfig::default(),
            index: IndexConfig::default(),
            web: WebConfig::default(),
            fleet: FleetConfig::default(),
        }
    }
}

impl Config {
    pub fn storage_dir(&self) -> PathBuf {
        self.data_dir.join("storage")
    }

    pub fn index_dir(&self) -> PathBuf {
        self.data_dir.join("index")
    }

    pub fn cache_dir(&self) -> PathBuf {
        self.data_dir.join("cache")
    }

    /// Secret key path of the default identity.
    pub fn secret_key_path(&self) -> PathBuf {
        self.keys
            .secret
            .clone()
            .unwrap_or_else(|| self.data_dir.join("keys").join("default").join("radicle"))
    }

    pub fn admin_token_path(&self) -> PathBuf {
        self.admin
            .token_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("admin-token"))
    }

    /// The effective configuration as TOML.
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        Ok(toml::to_string_pretty(self)?)
    }
}

#[cfg(test)]
mod tests;
