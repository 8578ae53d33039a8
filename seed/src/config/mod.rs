//! Layered configuration: built-in defaults < TOML file < `SEEDD_*` environment.
//!
//! This is the only module that reads configuration files or `SEEDD_*` variables. Key names are a
//! contract with the Helm chart, scripts and tests (design.md §Config keys); every error names the
//! key and where its value came from.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Environment prefix: `SEEDD_<SECTION>__<KEY>`.
const ENV_PREFIX: &str = "SEEDD";
/// Separator between levels in environment keys.
const ENV_SEPARATOR: &str = "__";
/// Keys whose environment value is a comma-separated list.
const ENV_LIST_KEYS: &[&str] = &[
    "p2p.listen",
    "p2p.external_addresses",
    "p2p.connect",
    "http.rate.trusted_proxies",
    "p2p.rate.exempt_cidrs",
];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {0}: not found")]
    FileNotFound(PathBuf),
    #[error("config: {0}")]
    Load(String),
    #[error("config key `{key}` (from {origin}): {reason}")]
    Invalid {
        key: String,
        origin: String,
        reason: String,
    },
    #[error("config file {file}: unknown key `{key}`")]
    UnknownKey { file: PathBuf, key: String },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Config {
    /// Data directory: keys, storage, index, cache.
    pub data_dir: PathBuf,
    /// Announced node alias (1–32 bytes, no whitespace).
    pub alias: String,
    pub p2p: P2pConfig,
    pub http: HttpConfig,
    pub admin: AdminConfig,
    pub policy: PolicyConfig,
    pub log: LogConfig,
    pub keys: KeysConfig,
    /// More seed identities (`[[identities]]`: name, listen, external_addresses, inventory_cap).
    pub identities: Vec<crate::identity::IdentitySpec>,
    /// Tenants declared in the file (`[[tenants]]`), applied at start and on reload like
    /// `seedctl apply` (tenants created at runtime are left alone).
    pub tenants: Vec<crate::tenant::ops::TenantSpec>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct P2pConfig {
    pub listen: Vec<String>,
    pub external_addresses: Vec<String>,
    pub connect: Vec<String>,
    pub bootstrap: bool,
    /// Relay other nodes' gossip: "auto" (iff external_addresses is set), "always", "never".
    pub relay: String,
    /// Most inbound sessions (loopback peers are not counted against it).
    pub max_inbound: usize,
    /// Most outbound sessions.
    pub max_outbound: usize,
    /// A dialer or listener that has not finished the handshake by then is dropped.
    pub handshake_timeout_secs: u64,
    /// Git streams served to peers at once (fetching has its own budget).
    pub max_concurrent_serves: usize,
    /// How long a peer's fetch waits for a serve slot before its stream is closed.
    pub serve_queue_timeout_secs: u64,
    /// A git stream silent in both directions for this long is closed (upload-pack killed).
    pub stream_idle_timeout_secs: u64,
    /// Largest request a peer may send on one git stream.
    pub max_stream_request_bytes: u64,
    /// Fetches from peers at once (a budget separate from serving).
    pub max_concurrent_fetches: usize,
    /// Of those, at most this many from one peer (the others wait without taking a slot).
    pub max_fetches_per_peer: usize,
    /// Largest amount of git data one fetch may receive.
    pub max_fetch_bytes: u64,
    /// A fetch that receives nothing for this long is aborted.
    pub fetch_timeout_secs: u64,
    /// A fetch not finished after this long is aborted, however active.
    pub fetch_deadline_secs: u64,
    /// Most repositories the default identity announces (≤ 2,973, the inventory limit).
    pub inventory_cap: usize,
    pub rate: RateConfig,
    pub ban: BanConfig,
}

/// Token buckets (fractional refill per second, burst capacity).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Bucket {
    pub fill_rate: f64,
    pub capacity: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RateConfig {
    /// Per remote IP, before the handshake: one token per connection attempt.
    pub connect: Bucket,
    /// Per node id after the handshake, inbound sessions: one token per gossip message.
    pub inbound: Bucket,
    /// Per node id, outbound sessions.
    pub outbound: Bucket,
    /// Per remote host, shared by all its sessions and node ids (on top of the per-node
    /// buckets, so fresh keys from one host share one budget): one token per gossip message.
    pub host: Bucket,
    /// IPv6 peers share a host bucket per prefix of this length (one host usually holds a /64).
    pub ipv6_prefix: u8,
    /// Loopback addresses (127.0.0.0/8, ::1) are not limited (configured `connect` peers
    /// never are). Private ranges are ordinary peers unless listed in `exempt_cidrs`.
    pub exempt_local: bool,
    /// Trusted address blocks (e.g. `10.0.0.0/8`, a cluster's pod CIDR) not limited either.
    pub exempt_cidrs: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct BanConfig {
    /// Penalty points at which an IP is banned (a malformed frame costs 16, an invalid
    /// signature or a far-future timestamp 32).
    pub threshold: u32,
    /// How long a ban lasts.
    pub duration_secs: u64,
}

impl Default for RateConfig {
    fn default() -> Self {
        Self {
            connect: Bucket {
                fill_rate: 1.0,
                capacity: 32.0,
            },
            inbound: Bucket {
                fill_rate: 5.0,
                capacity: 1024.0,
            },
            outbound: Bucket {
                fill_rate: 10.0,
                capacity: 2048.0,
            },
            // Room for a few honest nodes behind one address (each at most `outbound`).
            host: Bucket {
                fill_rate: 20.0,
                capacity: 4096.0,
            },
            ipv6_prefix: 64,
            exempt_local: true,
            exempt_cidrs: Vec::new(),
        }
    }
}

impl Default for BanConfig {
    fn default() -> Self {
        Self {
            threshold: 64,
            duration_secs: 3600,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct HttpConfig {
    pub listen: String,
    pub tls: Option<TlsConfig>,
    /// Concurrent pack generations (git upload-pack POSTs) across all repos.
    pub max_concurrent_packs: usize,
    /// Requests that may wait for a pack slot; beyond that: 503 + Retry-After.
    pub pack_queue: usize,
    /// How long a queued request waits for a slot before 503.
    pub pack_queue_timeout_ms: u64,
    /// A git response that produces no bytes for this long is aborted.
    pub idle_timeout_secs: u64,
    /// Hard cap on one git request's total duration.
    pub request_timeout_secs: u64,
    /// Largest accepted (decompressed) upload-pack request body.
    pub max_request_bytes: u64,
    /// Path to the `git` executable used for pack generation.
    pub git_binary: String,
    /// Per-client-IP rate limit and per-repository admission (`http.rate.*`).
    #[serde(default)]
    pub rate: HttpRateConfig,
    /// Hosts no tenant claims: `all` (every public repository) or `none` (404).
    pub unknown_hosts: String,
}

/// HTTP rate limits and per-repository pack admission (seed/src/http/ratelimit.rs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct HttpRateConfig {
    /// Requests per second per client IP (IPv6: per prefix); fractional allowed; 0 = off.
    pub per_ip_requests_per_second: f64,
    /// Requests a client may make at once above the rate.
    pub per_ip_burst: u32,
    /// IPv6 clients are limited per prefix of this length.
    pub ipv6_prefix: u8,
    /// Proxies (CIDRs or addresses) whose `Forwarded` / `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<String>,
    /// Concurrent pack generations per repository; 0 = no per-repository limit.
    pub per_repo_concurrent_packs: usize,
    /// Requests that may wait for a repository's pack slot; beyond that: 503 + Retry-After.
    pub per_repo_queue: usize,
    /// How long a request waits in a repository's queue before 503.
    pub per_repo_queue_timeout_ms: u64,
    /// While every pack slot is busy and a clone waits (globally or for the repository), refuse
    /// new clones at their ref advertisement (503 + Retry-After) instead of queueing them.
    pub shed_new_clones: bool,
}

impl Default for HttpRateConfig {
    fn default() -> Self {
        Self {
            per_ip_requests_per_second: 50.0,
            per_ip_burst: 100,
            ipv6_prefix: 64,
            trusted_proxies: Vec::new(),
            per_repo_concurrent_packs: 2,
            per_repo_queue: 4,
            per_repo_queue_timeout_ms: 2_000,
            shed_new_clones: true,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AdminConfig {
    pub listen: String,
    /// Bearer token file. Unset: a token is generated once at `<data_dir>/admin-token`.
    pub token_file: Option<PathBuf>,
    /// More token files, each accepted too (rotation: add the new file, reload, drop the old).
    pub token_files: Vec<PathBuf>,
    /// Serve the admin API over HTTPS; with `client_ca`, also require a client certificate
    /// (mutual TLS, in addition to the bearer token).
    pub tls: Option<AdminTlsConfig>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AdminTlsConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// PEM file of the CA(s) that sign accepted client certificates. Unset: no client
    /// certificate is asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct PolicyConfig {
    pub default: String,
    pub scope: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct LogConfig {
    pub format: String,
    pub level: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct KeysConfig {
    /// Secret key file of the default identity (OpenSSH, as `rad auth` writes), e.g. a mounted
    /// Secret. Unset: `<data_dir>/keys/default/radicle`, generated on first start.
    pub secret: Option<PathBuf>,
    /// File holding the key's passphrase, for an encrypted key (`rad auth` with a passphrase).
    pub passphrase_file: Option<PathBuf>,
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
        }
    }
}

impl Default for P2pConfig {
    fn default() -> Self {
        Self {
            listen: vec!["0.0.0.0:8776".to_owned()],
            external_addresses: Vec::new(),
            connect: Vec::new(),
            bootstrap: false,
            relay: "auto".to_owned(),
            max_inbound: 128,
            max_outbound: 16,
            handshake_timeout_secs: 10,
            max_concurrent_serves: std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .max(2)
                * 2,
            serve_queue_timeout_secs: 10,
            stream_idle_timeout_secs: 30,
            max_stream_request_bytes: 64 * 1024 * 1024,
            max_concurrent_fetches: 4,
            max_fetches_per_peer: 2,
            max_fetch_bytes: 500 * 1024 * 1024,
            fetch_timeout_secs: 30,
            fetch_deadline_secs: 600,
            inventory_cap: 2_973,
            rate: RateConfig::default(),
            ban: BanConfig::default(),
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self {
            listen: "0.0.0.0:8080".to_owned(),
            tls: None,
            max_concurrent_packs: cpus.max(2),
            pack_queue: 32,
            pack_queue_timeout_ms: 5_000,
            idle_timeout_secs: 120,
            request_timeout_secs: 3_600,
            max_request_bytes: 64 * 1024 * 1024,
            git_binary: "git".to_owned(),
            rate: HttpRateConfig::default(),
            unknown_hosts: "all".to_owned(),
        }
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9776".to_owned(),
            token_file: None,
            token_files: Vec::new(),
            tls: None,
        }
    }
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            default: "block".to_owned(),
            scope: "all".to_owned(),
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: "text".to_owned(),
            level: "info".to_owned(),
        }
    }
}

/// Where the configuration came from, to name the origin of a bad value.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub file: Option<PathBuf>,
    file_keys: Vec<String>,
}

impl Sources {
    /// Name the source that set `key`: environment, file, or built-in default.
    pub fn origin(&self, key: &str) -> String {
        let env = env_name(key);
        if std::env::var_os(&env).is_some() {
            return format!("environment variable {env}");
        }
        if let Some(file) = &self.file {
            if self.file_keys.iter().any(|k| k == key) {
                return format!("file {}", file.display());
            }
        }
        "built-in default".to_owned()
    }
}

/// `http.listen` → `SEEDD_HTTP__LISTEN`.
pub fn env_name(key: &str) -> String {
    format!(
        "{ENV_PREFIX}_{}",
        key.replace('.', ENV_SEPARATOR).to_ascii_uppercase()
    )
}

/// Overrides given on the command line (highest precedence).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub data_dir: Option<PathBuf>,
    pub log_format: Option<String>,
    pub log_level: Option<String>,
}

impl Config {
    /// Load defaults < `file` (if given; must exist) < `SEEDD_*` env < command-line overrides,
    /// then validate.
    pub fn load(
        file: Option<&Path>,
        overrides: &Overrides,
    ) -> Result<(Self, Sources), ConfigError> {
        let defaults = config::Config::try_from(&Config::default())
            .map_err(|e| ConfigError::Load(e.to_string()))?;
        let mut builder = config::Config::builder().add_source(defaults);
        let mut sources = Sources::default();
        if let Some(path) = file {
            if !path.is_file() {
                return Err(ConfigError::FileNotFound(path.to_owned()));
            }
            let text = std::fs::read_to_string(path)
                .map_err(|e| ConfigError::Load(format!("{}: {e}", path.display())))?;
            let table: toml::Table = text
                .parse()
                .map_err(|e| ConfigError::Load(format!("{}: {e}", path.display())))?;
            sources.file_keys = flatten_keys(&table, "");
            check_known_keys(path, &sources.file_keys)?;
            sources.file = Some(path.to_owned());
            builder = builder.add_source(
                config::File::from(path)
                    .format(config::FileFormat::Toml)
                    .required(true),
            );
        }
        let mut env = config::Environment::with_prefix(ENV_PREFIX)
            .prefix_separator("_")
            .separator(ENV_SEPARATOR)
            .list_separator(",")
            .try_parsing(true);
        for key in ENV_LIST_KEYS {
            env = env.with_list_parse_key(key);
        }
        builder = builder.add_source(env);
        if let Some(dir) = &overrides.data_dir {
            builder = builder
                .set_override("data_dir", dir.to_string_lossy().to_string())
                .map_err(|e| ConfigError::Load(e.to_string()))?;
        }
        if let Some(f) = &overrides.log_format {
            builder = builder
                .set_override("log.format", f.as_str())
                .map_err(|e| ConfigError::Load(e.to_string()))?;
        }
        if let Some(l) = &overrides.log_level {
            builder = builder
                .set_override("log.level", l.as_str())
                .map_err(|e| ConfigError::Load(e.to_string()))?;
        }
        let cfg: Config = builder
            .build()
            .and_then(|c| c.try_deserialize())
            .map_err(|e| ConfigError::Load(e.to_string()))?;
        cfg.validate(&sources)?;
        Ok((cfg, sources))
    }

    /// Semantic checks; each error names the key and its origin.
    pub fn validate(&self, sources: &Sources) -> Result<(), ConfigError> {
        let bad = |key: &str, reason: String| ConfigError::Invalid {
            key: key.to_owned(),
            origin: sources.origin(key),
            reason,
        };
        if self.alias.is_empty()
            || self.alias.len() > 32
            || self.alias.chars().any(char::is_whitespace)
        {
            return Err(bad(
                "alias",
                format!(
                    "{:?} must be 1–32 bytes without whitespace (protocol.md §4.8)",
                    self.alias
                ),
            ));
        }
        if self.data_dir.as_os_str().is_empty() {
            return Err(bad("data_dir", "must not be empty".into()));
        }
        for (i, l) in self.p2p.listen.iter().enumerate() {
            l.parse::<SocketAddr>()
                .map_err(|e| bad("p2p.listen", format!("entry {i} {l:?}: {e}")))?;
        }
        for (i, c) in self.p2p.connect.iter().enumerate() {
            let Some((nid, addr)) = c.split_once('@') else {
                return Err(bad(
                    "p2p.connect",
                    format!("entry {i} {c:?}: expected \"z6Mk…@host:port\""),
                ));
            };
            nid.parse::<crate::crypto::NodeId>()
                .map_err(|e| bad("p2p.connect", format!("entry {i} {c:?}: {e}")))?;
            if addr.rsplit_once(':').is_none() {
                return Err(bad(
                    "p2p.connect",
                    format!("entry {i} {c:?}: address needs a port"),
                ));
            }
        }
        for (i, a) in self.p2p.external_addresses.iter().enumerate() {
            if a.rsplit_once(':')
                .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
                || a.parse::<crate::wire::Address>().is_err()
            {
                return Err(bad(
                    "p2p.external_addresses",
                    format!("entry {i} {a:?}: expected \"host:port\""),
                ));
            }
        }
        match self.p2p.relay.as_str() {
            "auto" | "always" | "never" => {}
            other => {
                return Err(bad(
                    "p2p.relay",
                    format!("{other:?}: expected \"auto\", \"always\" or \"never\""),
                ))
            }
        }
        for (key, v) in [
            (
                "p2p.max_concurrent_serves",
                self.p2p.max_concurrent_serves as u64,
            ),
            (
                "p2p.stream_idle_timeout_secs",
                self.p2p.stream_idle_timeout_secs,
            ),
            (
                "p2p.max_stream_request_bytes",
                self.p2p.max_stream_request_bytes,
            ),
            (
                "p2p.max_concurrent_fetches",
                self.p2p.max_concurrent_fetches as u64,
            ),
            (
                "p2p.max_fetches_per_peer",
                self.p2p.max_fetches_per_peer as u64,
            ),
            ("p2p.max_fetch_bytes", self.p2p.max_fetch_bytes),
            ("p2p.fetch_timeout_secs", self.p2p.fetch_timeout_secs),
            ("p2p.fetch_deadline_secs", self.p2p.fetch_deadline_secs),
        ] {
            if v == 0 {
                return Err(bad(key, "must be at least 1".into()));
            }
        }
        if self.p2p.handshake_timeout_secs == 0 {
            return Err(bad(
                "p2p.handshake_timeout_secs",
                "must be at least 1".into(),
            ));
        }
        for (key, b) in [
            ("p2p.rate.connect", &self.p2p.rate.connect),
            ("p2p.rate.inbound", &self.p2p.rate.inbound),
            ("p2p.rate.outbound", &self.p2p.rate.outbound),
            ("p2p.rate.host", &self.p2p.rate.host),
        ] {
            if !(b.fill_rate.is_finite()
                && b.fill_rate >= 0.0
                && b.capacity.is_finite()
                && b.capacity >= 1.0)
            {
                return Err(bad(
                    key,
                    format!(
                        "fill_rate {} / capacity {}: need fill_rate ≥ 0 and capacity ≥ 1",
                        b.fill_rate, b.capacity
                    ),
                ));
            }
        }
        for (i, c) in self.p2p.rate.exempt_cidrs.iter().enumerate() {
            c.parse::<crate::http::ratelimit::Cidr>()
                .map_err(|e| bad("p2p.rate.exempt_cidrs", format!("entry {i} {e}")))?;
        }
        if !(1..=128).contains(&self.p2p.rate.ipv6_prefix) {
            return Err(bad(
                "p2p.rate.ipv6_prefix",
                format!(
                    "{}: expected 1–128 (64 is one host)",
                    self.p2p.rate.ipv6_prefix
                ),
            ));
        }
        if self.p2p.ban.threshold == 0 {
            return Err(bad("p2p.ban.threshold", "must be at least 1".into()));
        }
        self.http_listen()
            .map_err(|e| bad("http.listen", format!("{:?}: {e}", self.http.listen)))?;
        self.admin_listen()
            .map_err(|e| bad("admin.listen", format!("{:?}: {e}", self.admin.listen)))?;
        if self.http.max_concurrent_packs == 0 {
            return Err(bad(
                "http.max_concurrent_packs",
                "must be at least 1".into(),
            ));
        }
        if self.http.idle_timeout_secs == 0 {
            return Err(bad("http.idle_timeout_secs", "must be at least 1".into()));
        }
        if self.http.request_timeout_secs == 0 {
            return Err(bad(
                "http.request_timeout_secs",
                "must be at least 1".into(),
            ));
        }
        if self.http.max_request_bytes < 1024 {
            return Err(bad(
                "http.max_request_bytes",
                "must be at least 1024".into(),
            ));
        }
        self.http.rate.validate(&bad)?;
        if !matches!(self.http.unknown_hosts.as_str(), "all" | "none") {
            return Err(bad(
                "http.unknown_hosts",
                format!(
                    "{:?}: expected \"all\" or \"none\"",
                    self.http.unknown_hosts
                ),
            ));
        }
        if !(1..=crate::tenant::INVENTORY_LIMIT).contains(&self.p2p.inventory_cap) {
            return Err(bad(
                "p2p.inventory_cap",
                format!("{}: expected 1–2973", self.p2p.inventory_cap),
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, id) in self.identities.iter().enumerate() {
            if !crate::tenant::valid_name(&id.name)
                || id.name == crate::tenant::DEFAULT_IDENTITY
                || !names.insert(id.name.clone())
            {
                return Err(bad(
                    "identities",
                    format!(
                        "entry {i}: name {:?} must be unique, not \"default\", 1-63 of a-z, 0-9, -",
                        id.name
                    ),
                ));
            }
            if id.listen.is_empty() || id.listen.iter().any(|l| l.parse::<SocketAddr>().is_err()) {
                return Err(bad(
                    "identities",
                    format!(
                        "entry {i} ({}): listen must be one or more ip:port",
                        id.name
                    ),
                ));
            }
        }
        let mut tenants = std::collections::BTreeSet::new();
        for (i, t) in self.tenants.iter().enumerate() {
            if !crate::tenant::valid_name(&t.name) || !tenants.insert(t.name.clone()) {
                return Err(bad(
                    "tenants",
                    format!(
                        "entry {i}: name {:?} must be unique, 1-63 of a-z, 0-9, -",
                        t.name
                    ),
                ));
            }
            if let Some(id) = &t.identity {
                if id != crate::tenant::DEFAULT_IDENTITY && !names.contains(id) {
                    return Err(bad(
                        "tenants",
                        format!(
                            "tenant {}: identity {id:?} is not declared in [[identities]]",
                            t.name
                        ),
                    ));
                }
            }
        }
        if let Some(tls) = &self.http.tls {
            for (key, path) in [("http.tls.cert", &tls.cert), ("http.tls.key", &tls.key)] {
                if !path.is_file() {
                    return Err(bad(
                        key,
                        format!("{} is not a readable file", path.display()),
                    ));
                }
            }
        }
        if let Some(tls) = &self.admin.tls {
            let files = [
                ("admin.tls.cert", Some(&tls.cert)),
                ("admin.tls.key", Some(&tls.key)),
                ("admin.tls.client_ca", tls.client_ca.as_ref()),
            ];
            for (key, path) in files {
                if let Some(path) = path.filter(|p| !p.is_file()) {
                    return Err(bad(
                        key,
                        format!("{} is not a readable file", path.display()),
                    ));
                }
            }
        }
        match self.policy.default.as_str() {
            "allow" | "block" => {}
            other => {
                return Err(bad(
                    "policy.default",
                    format!("{other:?}: expected \"allow\" or \"block\""),
                ))
            }
        }
        match self.policy.scope.as_str() {
            "all" | "followed" => {}
            other => {
                return Err(bad(
                    "policy.scope",
                    format!("{other:?}: expected \"all\" or \"followed\""),
                ))
            }
        }
        match self.log.format.as_str() {
            "text" | "json" => {}
            other => {
                return Err(bad(
                    "log.format",
                    format!("{other:?}: expected \"text\" or \"json\""),
                ))
            }
        }
        if tracing_subscriber::EnvFilter::try_new(&self.log.level).is_err() {
            return Err(bad(
                "log.level",
                format!(
                    "{:?}: expected a level or filter such as \"info\" or \"seedd=debug,info\"",
                    self.log.level
                ),
            ));
        }
        Ok(())
    }

    pub fn http_listen(&self) -> Result<SocketAddr, std::net::AddrParseError> {
        self.http.listen.parse()
    }

    pub fn admin_listen(&self) -> Result<SocketAddr, std::net::AddrParseError> {
        self.admin.listen.parse()
    }

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
        toml::to_string_pretty(self).map_err(|e| ConfigError::Load(e.to_string()))
    }
}

impl HttpRateConfig {
    fn validate(&self, bad: &dyn Fn(&str, String) -> ConfigError) -> Result<(), ConfigError> {
        let rps = self.per_ip_requests_per_second;
        if !(rps.is_finite() && (0.0..=1_000_000.0).contains(&rps)) {
            return Err(bad(
                "http.rate.per_ip_requests_per_second",
                format!("{rps}: expected 0 (off) to 1000000"),
            ));
        }
        if self.per_ip_burst == 0 {
            return Err(bad("http.rate.per_ip_burst", "must be at least 1".into()));
        }
        if !(1..=128).contains(&self.ipv6_prefix) {
            return Err(bad(
                "http.rate.ipv6_prefix",
                format!("{}: expected 1–128 (64 is one host)", self.ipv6_prefix),
            ));
        }
        for (i, p) in self.trusted_proxies.iter().enumerate() {
            p.parse::<crate::http::ratelimit::Cidr>()
                .map_err(|e| bad("http.rate.trusted_proxies", format!("entry {i} {e}")))?;
        }
        if self.per_repo_queue_timeout_ms == 0 {
            return Err(bad(
                "http.rate.per_repo_queue_timeout_ms",
                "must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// Dotted keys of every leaf in a TOML table (`http.tls.cert`, …).
fn flatten_keys(table: &toml::Table, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => {
                out.push(key.clone());
                out.extend(flatten_keys(t, &key));
            }
            _ => out.push(key),
        }
    }
    out
}

/// Reject keys the daemon does not know, so a typo is an error and not a silent default.
fn check_known_keys(file: &Path, keys: &[String]) -> Result<(), ConfigError> {
    let mut known = match toml::Table::try_from(Config::default()) {
        Ok(t) => flatten_keys(&t, ""),
        Err(e) => return Err(ConfigError::Load(e.to_string())),
    };
    // Optional keys absent from the serialized defaults.
    known.extend(
        [
            "http.tls",
            "http.tls.cert",
            "http.tls.key",
            "admin.token_file",
            "admin.tls",
            "admin.tls.cert",
            "admin.tls.key",
            "admin.tls.client_ca",
            "keys.secret",
            "keys.passphrase_file",
        ]
        .map(str::to_owned),
    );
    match keys.iter().find(|k| !known.contains(k)) {
        Some(k) => Err(ConfigError::UnknownKey {
            file: file.to_owned(),
            key: k.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("seedd.toml");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(text.as_bytes()).unwrap();
        path
    }

    #[test]
    fn defaults_are_valid_and_safe() {
        let cfg = Config::default();
        cfg.validate(&Sources::default()).unwrap();
        assert_eq!(cfg.policy.default, "block");
        assert!(!cfg.p2p.bootstrap);
        assert_eq!(cfg.admin.listen, "127.0.0.1:9776");
        assert_eq!(cfg.data_dir, PathBuf::from("./seedd-data"));
    }

    #[test]
    fn file_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "alias = \"seed.test\"\n[http]\nlisten = \"127.0.0.1:18080\"\n[policy]\ndefault = \"allow\"\n",
        );
        let (cfg, sources) = Config::load(Some(&path), &Overrides::default()).unwrap();
        assert_eq!(cfg.alias, "seed.test");
        assert_eq!(cfg.http.listen, "127.0.0.1:18080");
        assert_eq!(cfg.policy.default, "allow");
        assert_eq!(cfg.admin.listen, "127.0.0.1:9776");
        assert!(sources.origin("alias").contains("seedd.toml"));
        assert_eq!(sources.origin("admin.listen"), "built-in default");
    }

    #[test]
    fn invalid_value_names_key_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "[policy]\ndefault = \"maybe\"\n");
        let err = Config::load(Some(&path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("policy.default"), "{err}");
        assert!(err.contains("seedd.toml"), "{err}");
    }

    #[test]
    fn p2p_exempt_cidrs_are_parsed_and_bad_entries_named() {
        assert!(Config::default().p2p.rate.exempt_cidrs.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "[p2p.rate]\nexempt_cidrs = [\"10.0.0.0/8\", \"fd00::/8\"]\n",
        );
        let (cfg, _) = Config::load(Some(&path), &Overrides::default()).unwrap();
        assert_eq!(cfg.p2p.rate.exempt_cidrs, ["10.0.0.0/8", "fd00::/8"]);
        let path = write(
            dir.path(),
            "[p2p.rate]\nexempt_cidrs = [\"10.0.0.0/8\", \"10.0.0.0/40\"]\n",
        );
        let err = Config::load(Some(&path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("p2p.rate.exempt_cidrs"), "{err}");
        assert!(err.contains("entry 1"), "{err}");
        assert!(err.contains("seedd.toml"), "{err}");
    }

    #[test]
    fn unknown_key_is_rejected_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "[http]\nlisen = \"127.0.0.1:1\"\n");
        let err = Config::load(Some(&path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("http.lisen"), "{err}");
    }

    #[test]
    fn type_errors_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "[http]\nmax_concurrent_packs = \"lots\"\n");
        let err = Config::load(Some(&path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_concurrent_packs"), "{err}");
    }

    #[test]
    fn missing_file_is_an_error() {
        let err = Config::load(
            Some(Path::new("/nonexistent/seedd.toml")),
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(matches!(err, ConfigError::FileNotFound(_)));
    }

    #[test]
    fn bad_alias_and_connect_are_rejected() {
        let mut cfg = Config {
            alias: "has space".into(),
            ..Config::default()
        };
        assert!(cfg
            .validate(&Sources::default())
            .unwrap_err()
            .to_string()
            .contains("alias"));
        cfg.alias = "ok".into();
        cfg.p2p.connect = vec!["nonsense".into()];
        assert!(cfg
            .validate(&Sources::default())
            .unwrap_err()
            .to_string()
            .contains("p2p.connect"));
    }

    #[test]
    fn admin_tls_files_must_exist_and_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("admin.crt");
        let key = dir.path().join("admin.key");
        std::fs::write(&cert, "x").unwrap();
        std::fs::write(&key, "x").unwrap();
        let path = write(
            dir.path(),
            &format!(
                "[admin.tls]\ncert = \"{}\"\nkey = \"{}\"\n",
                cert.display(),
                key.display()
            ),
        );
        let (cfg, _) = Config::load(Some(&path), &Overrides::default()).unwrap();
        let tls = cfg.admin.tls.clone().unwrap();
        assert_eq!(tls.cert, cert);
        assert_eq!(tls.client_ca, None);
        let back: Config = toml::from_str(&cfg.to_toml().unwrap()).unwrap();
        assert_eq!(back, cfg);

        let path = write(
            dir.path(),
            &format!(
                "[admin.tls]\ncert = \"{}\"\nkey = \"{}\"\nclient_ca = \"/nonexistent/ca.pem\"\n",
                cert.display(),
                key.display()
            ),
        );
        let err = Config::load(Some(&path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("admin.tls.client_ca"), "{err}");
        assert!(err.contains("seedd.toml"), "{err}");

        let path = write(
            dir.path(),
            &format!("[admin.tls]\ncert = \"{}\"\nky = \"x\"\n", cert.display()),
        );
        let err = Config::load(Some(&path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("admin.tls.ky"), "{err}");
    }

    #[test]
    fn env_names_follow_the_contract() {
        assert_eq!(env_name("http.listen"), "SEEDD_HTTP__LISTEN");
        assert_eq!(env_name("data_dir"), "SEEDD_DATA_DIR");
    }

    #[test]
    fn printed_config_round_trips() {
        let cfg = Config::default();
        let text = cfg.to_toml().unwrap();
        let back: Config = toml::from_str(&text).unwrap();
        assert_eq!(back, cfg);
    }
}
