//! The sections of the configuration (`[p2p]`, `[http]`, …) with their defaults. Each field has
//! its final type; values that need a check carry it in their `deserialize_with` (see
//! [`super::fields`]), so a section that deserialised is valid on its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::cidr::Cidr;
use super::fields;
use super::values::{
    Bucket, DefaultPolicy, LogFormat, PackCacheAdmission, PeerAddr, Relay, Scope, UnknownHosts,
};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct P2pConfig {
    #[serde(deserialize_with = "fields::socket_addrs")]
    pub listen: Vec<SocketAddr>,
    /// `host:port` we are reachable at (announced).
    #[serde(deserialize_with = "fields::external_addresses")]
    pub external_addresses: Vec<String>,
    /// Persistent peers, `z6Mk…@host:port`.
    #[serde(deserialize_with = "fields::peers")]
    pub connect: Vec<PeerAddr>,
    pub bootstrap: bool,
    /// Relay other nodes' gossip: "auto" (iff external_addresses is set), "always", "never".
    pub relay: Relay,
    /// Most inbound sessions (loopback peers are not counted against it).
    pub max_inbound: usize,
    /// Most outbound sessions.
    pub max_outbound: usize,
    /// A dialer or listener that has not finished the handshake by then is dropped.
    #[serde(rename = "handshake_timeout_secs", with = "fields::secs_nonzero")]
    pub handshake_timeout: Duration,
    /// Git streams served to peers at once (fetching has its own budget).
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_concurrent_serves: usize,
    /// How long a peer's fetch waits for a serve slot before its stream is closed.
    #[serde(rename = "serve_queue_timeout_secs", with = "fields::secs")]
    pub serve_queue_timeout: Duration,
    /// A git stream silent in both directions for this long is closed (upload-pack killed).
    #[serde(rename = "stream_idle_timeout_secs", with = "fields::secs_nonzero")]
    pub stream_idle_timeout: Duration,
    /// Largest request a peer may send on one git stream.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_stream_request_bytes: u64,
    /// Fetches from peers at once (a budget separate from serving).
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_concurrent_fetches: usize,
    /// Of those, at most this many from one peer (the others wait without taking a slot).
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_fetches_per_peer: usize,
    /// Repositories that may wait for a fetch slot (hints beyond it are dropped and the sync
    /// task fetches them later, as slots free up).
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_queued_fetches: usize,
    /// Of those, at most this many from one peer.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_queued_fetches_per_peer: usize,
    /// Largest amount of git data one fetch may receive.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_fetch_bytes: u64,
    /// A fetch that receives nothing for this long is aborted.
    #[serde(rename = "fetch_timeout_secs", with = "fields::secs_nonzero")]
    pub fetch_timeout: Duration,
    /// A fetch not finished after this long is aborted, however active.
    #[serde(rename = "fetch_deadline_secs", with = "fields::secs_nonzero")]
    pub fetch_deadline: Duration,
    /// Most repositories the default identity announces (≤ 2,973, the inventory limit).
    #[serde(deserialize_with = "fields::inventory_cap")]
    pub inventory_cap: usize,
    /// Most address-book entries (seed nodes that announced themselves; ~300 B each). Past
    /// it the oldest are evicted. Raise it for a network of more nodes.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_nodes: usize,
    /// Most routing-table entries (repository, node; ~130 B each). A seed of n repositories
    /// holds at least n of its own; past the cap the oldest routes are evicted.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_routes: usize,
    /// Most stored announcements (node, inventory and refs).
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_announcements: usize,
    pub rate: RateConfig,
    pub ban: BanConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RateConfig {
    /// Per remote IP, before the handshake: one token per connection attempt.
    #[serde(deserialize_with = "fields::bucket")]
    pub connect: Bucket,
    /// Per node id after the handshake, inbound sessions: one token per gossip message.
    #[serde(deserialize_with = "fields::bucket")]
    pub inbound: Bucket,
    /// Per node id, outbound sessions.
    #[serde(deserialize_with = "fields::bucket")]
    pub outbound: Bucket,
    /// Per remote host, shared by all its sessions and node ids (on top of the per-node
    /// buckets, so fresh keys from one host share one budget): one token per gossip message.
    #[serde(deserialize_with = "fields::bucket")]
    pub host: Bucket,
    /// IPv6 peers share a host bucket per prefix of this length (one host usually holds a /64).
    #[serde(deserialize_with = "fields::ipv6_prefix")]
    pub ipv6_prefix: u8,
    /// Loopback addresses (127.0.0.0/8, ::1) are not limited (configured `connect` peers
    /// never are). Private ranges are ordinary peers unless listed in `exempt_cidrs`.
    pub exempt_local: bool,
    /// Trusted address blocks (e.g. `10.0.0.0/8`, a cluster's pod CIDR) not limited either.
    #[serde(deserialize_with = "fields::cidrs")]
    pub exempt_cidrs: Vec<Cidr>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct BanConfig {
    /// Penalty points at which an IP is banned (a malformed frame costs 16, an invalid
    /// signature or a far-future timestamp 32).
    #[serde(deserialize_with = "fields::at_least_one")]
    pub threshold: u32,
    /// How long a ban lasts.
    #[serde(rename = "duration_secs", with = "fields::secs")]
    pub duration: Duration,
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
            duration: Duration::from_secs(3600),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct HttpConfig {
    #[serde(deserialize_with = "fields::socket_addr")]
    pub listen: SocketAddr,
    pub tls: Option<TlsConfig>,
    /// Concurrent pack generations (git upload-pack POSTs) across all repos.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_concurrent_packs: usize,
    /// Requests that may wait for a pack slot; beyond that: 503 + Retry-After.
    pub pack_queue: usize,
    /// How long a queued request waits for a slot before 503.
    #[serde(rename = "pack_queue_timeout_ms", with = "fields::millis")]
    pub pack_queue_timeout: Duration,
    /// A git response that produces no bytes for this long is aborted.
    #[serde(rename = "idle_timeout_secs", with = "fields::secs_nonzero")]
    pub idle_timeout: Duration,
    /// Hard cap on one git request's total duration.
    #[serde(rename = "request_timeout_secs", with = "fields::secs_nonzero")]
    pub request_timeout: Duration,
    /// Largest accepted (decompressed) upload-pack request body.
    #[serde(deserialize_with = "fields::max_request_bytes")]
    pub max_request_bytes: u64,
    /// Path to the `git` executable used for pack generation.
    pub git_binary: String,
    /// Per-client-IP rate limit and per-repository admission (`http.rate.*`).
    #[serde(default)]
    pub rate: HttpRateConfig,
    /// Hosts no tenant claims: `all` (every public repository) or `none` (404).
    pub unknown_hosts: UnknownHosts,
    /// Single-flight cache of upload-pack responses (`http.pack_cache.*`).
    #[serde(default)]
    pub pack_cache: PackCacheConfig,
    /// A connection whose client takes no byte of a response for this long is closed
    /// (`http::conn`; sendfile and pack-cache responses included).
    #[serde(rename = "write_timeout_secs", with = "fields::secs_nonzero")]
    pub write_timeout: Duration,
    /// Open connections one client address may hold (IPv6: per `rate.ipv6_prefix`; trusted
    /// proxies exempt); beyond: 429 and closed.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_connections_per_ip: usize,
}

/// The pack cache (`core/src/serve/packcache.rs`): responses to cacheable upload-pack requests
/// (no `have` lines) kept on disk under `<data_dir>/cache/packs`, discarded at start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct PackCacheConfig {
    pub enabled: bool,
    /// Bytes of cached responses kept on disk; older (least recently used) ones go first.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_bytes: u64,
    /// A cached response older than this is not served again.
    #[serde(rename = "max_age_secs", with = "fields::secs_nonzero")]
    pub max_age: Duration,
    /// When a response is cached: on the `first` request, or on the `second` sighting of the
    /// same request within `max_age`.
    pub admission: PackCacheAdmission,
    /// Generations one client address (IPv6: per `http.rate.ipv6_prefix`) may have running at
    /// once; its further new keys are answered directly.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_generations_per_client: usize,
}

impl Default for PackCacheConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_bytes: 1 << 30,
            max_age: Duration::from_secs(3_600),
            admission: PackCacheAdmission::Second,
            max_generations_per_client: 2,
        }
    }
}

/// HTTP rate limits and per-repository pack admission (`http/src/ratelimit/`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct HttpRateConfig {
    /// Requests per second per client IP (IPv6: per prefix); fractional allowed; 0 = off.
    #[serde(deserialize_with = "fields::requests_per_second")]
    pub per_ip_requests_per_second: f64,
    /// Requests a client may make at once above the rate.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub per_ip_burst: u32,
    /// IPv6 clients are limited per prefix of this length.
    #[serde(deserialize_with = "fields::ipv6_prefix")]
    pub ipv6_prefix: u8,
    /// Proxies (CIDRs or addresses) whose `Forwarded` / `X-Forwarded-For` is believed.
    #[serde(deserialize_with = "fields::cidrs")]
    pub trusted_proxies: Vec<Cidr>,
    /// Concurrent pack generations per repository; 0 = no per-repository limit.
    pub per_repo_concurrent_packs: usize,
    /// Requests that may wait for a repository's pack slot; beyond that: 503 + Retry-After.
    pub per_repo_queue: usize,
    /// How long a request waits in a repository's queue before 503.
    #[serde(rename = "per_repo_queue_timeout_ms", with = "fields::millis_nonzero")]
    pub per_repo_queue_timeout: Duration,
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
            // A burst of fetches of one repository (CI after a push) waits rather than being
            // refused: the queue timeout, not its length, bounds the wait (anchors bench: 64
            // incremental fetches at once lost 5–23 of 64 to a 2 s timeout on one core). A
            // waiting request holds no pack slot, so other repositories do not pay for it.
            per_repo_queue: 64,
            per_repo_queue_timeout: Duration::from_millis(5_000),
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
    #[serde(deserialize_with = "fields::socket_addr")]
    pub listen: SocketAddr,
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
    pub default: DefaultPolicy,
    pub scope: Scope,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A level or filter such as `info` or `seedd=debug,info`.
    #[serde(deserialize_with = "fields::log_filter")]
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

impl Default for P2pConfig {
    fn default() -> Self {
        Self {
            listen: vec![SocketAddr::from(([0, 0, 0, 0], 8776))],
            external_addresses: Vec::new(),
            connect: Vec::new(),
            bootstrap: false,
            relay: Relay::Auto,
            max_inbound: 128,
            max_outbound: 16,
            handshake_timeout: Duration::from_secs(10),
            max_concurrent_serves: std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .max(2)
                * 2,
            serve_queue_timeout: Duration::from_secs(10),
            stream_idle_timeout: Duration::from_secs(30),
            max_stream_request_bytes: 64 * 1024 * 1024,
            max_concurrent_fetches: fetch_slots(),
            max_fetches_per_peer: (fetch_slots() / 4).max(2),
            max_queued_fetches: 64 * fetch_slots(),
            max_queued_fetches_per_peer: 16 * (fetch_slots() / 4).max(2),
            max_fetch_bytes: 500 * 1024 * 1024,
            fetch_timeout: Duration::from_secs(30),
            fetch_deadline: Duration::from_secs(600),
            inventory_cap: super::INVENTORY_LIMIT,
            max_nodes: 10_000,
            max_routes: 250_000,
            max_announcements: 100_000,
            rate: RateConfig::default(),
            ban: BanConfig::default(),
        }
    }
}

/// Fetches at once by default: two per core, at least 4 (a fetch waits on the peer and on
/// its `index-pack` as much as it computes).
fn fetch_slots() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .saturating_mul(2)
        .max(4)
}

impl Default for HttpConfig {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 8080)),
            tls: None,
            max_concurrent_packs: cpus.max(2),
            pack_queue: 64,
            pack_queue_timeout: Duration::from_millis(5_000),
            idle_timeout: Duration::from_secs(120),
            request_timeout: Duration::from_secs(3_600),
            max_request_bytes: 64 * 1024 * 1024,
            git_binary: "git".to_owned(),
            rate: HttpRateConfig::default(),
            unknown_hosts: UnknownHosts::All,
            pack_cache: PackCacheConfig::default(),
            write_timeout: Duration::from_secs(60),
            max_connections_per_ip: 512,
        }
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9776)),
            token_file: None,
            token_files: Vec::new(),
            tls: None,
        }
    }
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            default: DefaultPolicy::Block,
            scope: Scope::All,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            level: "info".to_owned(),
        }
    }
}

/// `[maintenance]`: background repository maintenance (repacks with a multi-pack index and
/// bitmaps, packed refs, commit-graphs), with its own budget separate from serving and fetching.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct MaintenanceConfig {
    /// Background maintenance after fetches and by the scrub (`seedctl repo maintain` works
    /// either way).
    pub enabled: bool,
    /// Repositories maintained at once.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub concurrency: usize,
    /// A scrub pass over every held repository (its debt measured, the due ones maintained)
    /// starts at most this often. Fetches and runs measure their repository themselves; the
    /// scrub finds what changed outside seedd.
    #[serde(rename = "sweep_interval_secs", with = "fields::secs_nonzero")]
    pub sweep_interval: Duration,
    /// The scrub measures at most this many repositories per second (~0.3 ms of a core each:
    /// the default keeps it under 1 % of a core; a pass over 100,000 takes ~1.4 h).
    #[serde(deserialize_with = "fields::at_least_one")]
    pub scrub_repos_per_sec: u32,
    /// A fetched repository is looked at once no fetch changed it for this long.
    #[serde(rename = "debounce_secs", with = "fields::secs_nonzero")]
    pub debounce: Duration,
    /// One git step not done after this long is killed (the repository stays as it was).
    #[serde(rename = "timeout_secs", with = "fields::secs_nonzero")]
    pub timeout: Duration,
    /// Due at this many packs.
    #[serde(deserialize_with = "fields::at_least_two")]
    pub max_packs: u64,
    /// Due at this many loose objects.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_loose_objects: u64,
    /// Due at this many loose refs.
    #[serde(deserialize_with = "fields::at_least_one")]
    pub max_loose_refs: u64,
    /// Due without a bitmap once its packs hold this many bytes.
    pub bitmap_min_bytes: u64,
    /// Below this many bytes of packs everything is rewritten into one pack (best deltas,
    /// cheap); at or above it, a geometric repack rolls up only the small packs.
    pub full_repack_below_bytes: u64,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            concurrency: 1,
            sweep_interval: Duration::from_secs(3_600),
            scrub_repos_per_sec: 20,
            debounce: Duration::from_secs(60),
            timeout: Duration::from_secs(3_600),
            max_packs: 4,
            max_loose_objects: 1_000,
            max_loose_refs: 200,
            bitmap_min_bytes: 1 << 20,
            full_repack_below_bytes: 256 << 20,
        }
    }
}

/// `[index]`: the RocksDB index (`index/tuning.rs`). Needs a restart.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct IndexConfig {
    /// One block cache shared by every column family, with index and filter blocks and (up to
    /// half of it) the memtables charged to it: the index's memory beyond the OS page cache.
    #[serde(deserialize_with = "fields::cache_mib")]
    pub cache_mib: u64,
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self { cache_mib: 64 }
    }
}

impl IndexConfig {
    /// The cache size in bytes.
    pub fn cache_bytes(&self) -> usize {
        usize::try_from(self.cache_mib << 20).unwrap_or(usize::MAX)
    }
}

/// `[web]`: what the Radicle explorer shows about this seed: its node page (description,
/// avatar, banner) and the repositories pinned on it (`/repos?show=pinned`, the explorer's
/// front page when search is off). An empty string is "not set".
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct WebConfig {
    /// A line or two under the node on its explorer page.
    pub description: String,
    /// Image URLs the node page shows (httpd's `web.avatarUrl`, `web.bannerUrl`).
    pub avatar_url: String,
    pub banner_url: String,
    /// Repositories shown first, in this order (RIDs, `rad:z…`); ones the host does not list
    /// (private, blocked, another tenant's) are left out.
    pub pinned: Vec<seedd_proto::crypto::RepoId>,
    /// `[[web.tenants]]`: the same keys for a tenant's hostnames (`name` = the tenant); a
    /// tenant without an entry shows no description and pins nothing.
    pub tenants: Vec<WebTenant>,
}

/// `[[web.tenants]]`: what a tenant's hostnames show.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct WebTenant {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub avatar_url: String,
    #[serde(default)]
    pub banner_url: String,
    #[serde(default)]
    pub pinned: Vec<seedd_proto::crypto::RepoId>,
}

/// What one host's explorer pages show (`[web]`, or a tenant's `[[web.tenants]]` entry).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WebProfile {
    pub description: String,
    pub avatar_url: String,
    pub banner_url: String,
    pub pinned: Vec<seedd_proto::crypto::RepoId>,
}

impl WebConfig {
    /// The profile a host shows: its tenant's entry (none: an empty profile), or `[web]`
    /// itself for hosts no tenant claims.
    pub fn profile(&self, tenant: Option<&str>) -> WebProfile {
        match tenant {
            None => WebProfile {
                description: self.description.clone(),
                avatar_url: self.avatar_url.clone(),
                banner_url: self.banner_url.clone(),
                pinned: self.pinned.clone(),
            },
            Some(name) => self
                .tenants
                .iter()
                .find(|t| t.name == name)
                .map(|t| WebProfile {
                    description: t.description.clone(),
                    avatar_url: t.avatar_url.clone(),
                    banner_url: t.banner_url.clone(),
                    pinned: t.pinned.clone(),
                })
                .unwrap_or_default(),
        }
    }
}

/// `[fleet]` (issue 28): this seed is one replica of shard `shard` of a fleet whose placement
/// file (`core::placement`, a ConfigMap key on Kubernetes) says which repositories each shard
/// seeds. Both keys or neither; the file is re-read when it changes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct FleetConfig {
    /// The shard this seed belongs to (a `[[shards]]` name of the placement file).
    pub shard: String,
    /// The placement file.
    pub placement: Option<PathBuf>,
    /// After a (re)start, how long `/readyz` waits for the fetches that bring this replica up
    /// to its siblings (0: take reads once indexed).
    #[serde(rename = "catch_up_timeout_secs", with = "fields::secs")]
    pub catch_up_timeout: Duration,
    /// How often a replica compares its refs with the other replicas of its shard, fetches
    /// what differs and updates `seedd_fleet_lag_seconds` (0: never after the start).
    #[serde(rename = "compare_interval_secs", with = "fields::secs")]
    pub compare_interval: Duration,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            shard: String::new(),
            placement: None,
            catch_up_timeout: Duration::from_secs(300),
            compare_interval: Duration::from_secs(60),
        }
    }
}

impl FleetConfig {
    /// Whether this seed is part of a fleet.
    pub fn enabled(&self) -> bool {
        !self.shard.is_empty()
    }
}
