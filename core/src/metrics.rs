//! Every Prometheus metric seedd exports, defined in one place. Names are `seedd_*` with units;
//! labels are bounded (route names, status classes, results — never RIDs or NIDs).

use prometheus::core::{MetricVec, MetricVecBuilder};
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use seedd_proto::gossip::{DisconnectReason, Dropped};
use seedd_proto::wire::{Link, MessageType};

mod catalogue;
pub mod demand;
pub mod labels;
mod maintenance;

use labels::{link_label, type_label};

pub use catalogue::{MetricDoc, CATALOGUE};
pub use maintenance::{MaintenanceMetrics, MAINTENANCE_RESULTS};

// ---------------------------------------------------------------------------------------------
// Known label values.
//
// Every labelled family is exported from the start with each of its known label values at 0, so
// a fresh seed's dashboards and alerts see 0 rather than "No data" (Prometheus instrumentation
// practice: avoid missing metrics). Values the code builds from an enum (`label()`, `route()`,
// `reason()`) come from that enum's `ALL`/`LABELS`, which the tests below keep complete; the
// lists here are the literals the code passes. Exceptions: per-tenant series start when the
// tenant is known (`TenantMetrics::init_tenant`), per-identity ones when the identity publishes
// its inventory, and `seedd_fetch_last_success_timestamp_seconds` has no value before the first
// success (0 would read as "56 years ago").

/// `status` of `seedd_http_requests_total`: what the git routes answer.
const HTTP_STATUSES: &[&str] = &[
    "200", "400", "403", "404", "405", "413", "415", "429", "500", "503",
];
/// `protocol` of `seedd_git_clone_duration_seconds`.
const GIT_PROTOCOLS: &[&str] = &["v0", "v2"];
/// `reason` of `seedd_git_pack_rejected_total`, besides [`Admission`]'s (packs): ref
/// advertisements, and new clones shed while packs are queued.
const PACK_REJECTED: &[&str] = &["refs_queue_full", "refs_queue_timeout", "backlogged"];
/// `reason` of `seedd_git_aborted_total` (`internal`: a poisoned lock).
const GIT_ABORTED: &[&str] = &[
    "client_gone",
    "idle_timeout",
    "request_timeout",
    "body_too_large",
    "read_error",
    "internal",
];
/// `visibility` of `seedd_repos_indexed`.
const VISIBILITIES: &[&str] = &["public", "private"];
/// `result` of `seedd_tls_reloads_total` and `seedd_config_reloads_total`.
const RELOAD_RESULTS: &[&str] = &["ok", "error"];
/// `state` of `seedd_tenants`.
const TENANT_STATES: &[&str] = &["active", "suspended"];
/// `transport` of `seedd_tenant_egress_bytes_total`.
const TENANT_TRANSPORTS: &[&str] = &["http", "radicle"];
/// `code` of `seedd_tenant_http_requests_total`.
const TENANT_STATUS_CLASSES: &[&str] = &["2xx", "3xx", "4xx", "5xx"];
/// `quota` of `seedd_tenant_quota_exceeded_total` and `seedd_tenant_quota_usage_ratio`.
const TENANT_QUOTAS: &[&str] = &["repos", "bytes", "egress"];
/// `scope` of `seedd_http_rate_limited_total`.
const HTTP_RATE_SCOPES: &[&str] = &["ip", "tenant", "repo"];
/// `reason` of `seedd_web_rejected_total` (`busy`: no expensive-request permit in time).
const WEB_REJECTED: &[&str] = &["busy"];
/// `bound` of `seedd_web_bounded_total` (issue 25 §1, §4).
pub(crate) const WEB_BOUNDS: &[&str] = &[
    "diff_truncated",
    "blob_omitted",
    "too_large",
    "cancelled",
    "archive_output",
    "archive_deadline",
    "archive_memory",
    "renames",
];
/// `reason` of `seedd_http_connections_refused_total` (`per_ip`: over `http.max_connections_per_ip`).
const HTTP_CONNECTIONS_REFUSED: &[&str] = &["per_ip"];
/// `reason` of `seedd_http_connections_cut_total` (`write_timeout`: the client took no byte of a
/// response for `http.write_timeout_secs`).
const HTTP_CONNECTIONS_CUT: &[&str] = &["write_timeout"];
/// `reason` of `seedd_pack_cache_generations_refused_total` (`per_client`: the client address
/// runs `http.pack_cache.max_generations_per_client` already; `budget`: files being written fill
/// `max_bytes`).
const PACK_CACHE_REFUSED: &[&str] = &["per_client", "budget"];
/// `state` of `seedd_p2p_sessions`.
const SESSION_STATES: &[&str] = &["handshake", "connected"];
/// `result` of `seedd_p2p_handshakes_total`.
const HANDSHAKE_RESULTS: &[&str] = &["ok", "timeout", "error", "self", "blocked", "conflict"];
/// `type` of received frames that are not gossip (`seedd_p2p_messages_total` and bytes).
const NON_GOSSIP_FRAMES: &[&str] = &["control", "git"];
/// `reason` of `seedd_p2p_dropped_messages_total`, besides [`Dropped`]'s.
const DROPPED: &[&str] = &["rate_limited", "outbox_full"];
/// `scope` of `seedd_p2p_rate_limited_total`.
const P2P_RATE_SCOPES: &[&str] = &["ip", "nid", "host"];
/// `reason` of `seedd_p2p_connections_rejected_total`.
const CONNECTIONS_REJECTED: &[&str] = &["banned", "rate_limited", "inbound_limit"];
/// `reason` of `seedd_p2p_disconnects_total`, besides [`DisconnectReason`]'s.
const DISCONNECTS: &[&str] = &[
    "peer_closed",
    "io_error",
    "decode_error",
    "conflict",
    "outbox_full",
    "banned",
    "shutdown",
];
/// `result` of `seedd_p2p_git_serves_total`.
const GIT_SERVES: &[&str] = &[
    "ok",
    "refused_unknown",
    "refused_private",
    "refused_policy",
    "refused_quota",
    "refused_busy",
    "bad_header",
    "bad_request",
    "timeout",
    "too_large",
    "cancelled",
    "error",
];
/// `answer` of `seedd_p2p_git_requests_total`.
const GIT_REQUESTS: &[&str] = &["snapshot", "pack_cache", "git"];
/// `result` of `seedd_fetches_total`, besides [`FetchError`]'s.
const FETCHES: &[&str] = &["ok", "queue_full"];
/// `reason` of `seedd_fetch_validation_failures_total`, besides [`ValidationError`]'s: why a
/// namespace was pruned.
const PRUNED: &[&str] = &[
    "invalid_sigrefs",
    "diverged",
    "mismatched_ref",
    "missing_ref",
];
/// `state` of `seedd_p2p_inventory_repos`.
const INVENTORY_STATES: &[&str] = &["announced", "unannounced"];
/// Announcement types (the only relayed messages: `seedd_p2p_relayed_total`).
const ANNOUNCEMENTS: [MessageType; 3] = [
    MessageType::NodeAnnouncement,
    MessageType::InventoryAnnouncement,
    MessageType::RefsAnnouncement,
];

/// `list` followed by the labels of `extra`.
fn plus<T: Copy>(
    list: &[&'static str],
    extra: &[T],
    f: fn(T) -> &'static str,
) -> Vec<&'static str> {
    list.iter()
        .copied()
        .chain(extra.iter().map(|x| f(*x)))
        .collect()
}

/// Creates the series of every combination of `values` (one list per label), each at 0.
fn zero<T: MetricVecBuilder>(
    family: &MetricVec<T>,
    values: &[&[&str]],
) -> Result<(), prometheus::Error> {
    fn go<'a, T: MetricVecBuilder>(
        family: &MetricVec<T>,
        rest: &[&[&'a str]],
        labels: &mut Vec<&'a str>,
    ) -> Result<(), prometheus::Error> {
        let Some((first, rest)) = rest.split_first() else {
            return family
                .get_metric_with_label_values(labels.as_slice())
                .map(drop);
        };
        for v in *first {
            labels.push(*v);
            go(family, rest, labels)?;
            labels.pop();
        }
        Ok(())
    }
    go(family, values, &mut Vec::new())
}

/// The live metric handles.
pub struct Metrics {
    pub registry: Registry,
    pub http_requests: IntCounterVec,
    pub http_response_bytes: IntCounterVec,
    pub http_in_flight: IntGaugeVec,
    pub clone_duration: HistogramVec,
    pub packs_in_flight: IntGauge,
    pub pack_queue_depth: IntGauge,
    pub pack_rejected: IntCounterVec,
    pub git_aborted: IntCounterVec,
    pub ref_snapshots: IntCounterVec,
    pub repos_indexed: IntGaugeVec,
    pub scan_duration: Histogram,
    /// After-fetch re-indexing: repositories, namespaces (verified or reused), refs written.
    pub reindex_repos: IntCounter,
    pub reindex_namespaces: IntCounterVec,
    pub reindex_refs_written: IntCounter,
    pub tls_reloads: IntCounterVec,
    pub p2p: P2pMetrics,
    pub tls_cert_expiry: IntGauge,
    pub open_fds: IntGauge,
    pub max_fds: IntGauge,
    pub data_dir_free: IntGauge,
    /// Fleet replicas: repositories behind a sibling, and for how long (`daemon/catchup.rs`).
    pub fleet_repos_behind: IntGauge,
    pub fleet_lag_seconds: IntGauge,
    pub data_dir_capacity: IntGauge,
    build_info: IntGaugeVec,
    pub tenant: TenantMetrics,
    pub http_rate_limited: IntCounterVec,
    pub config_reloads: IntCounterVec,
    pub web_requests: IntCounterVec,
    pub web_duration: HistogramVec,
    pub web_rejected: IntCounterVec,
    pub web_bounded: IntCounterVec,
    pub maintenance: MaintenanceMetrics,
    pub pack_cache: PackCacheMetrics,
    /// HTTP connections refused at accept (`http::conn`).
    pub http_connections_refused: IntCounterVec,
    /// HTTP connections cut while a response was written (`http::conn`).
    pub http_connections_cut: IntCounterVec,
    /// Per-repository request counts (not exported): what an identity over its inventory cap
    /// announces first.
    pub demand: demand::Demand,
    /// COB evaluations and identity histories refused for their work budget, by kind.
    pub cob_budget_exceeded: IntCounterVec,
}

/// The pack cache's metrics (`serve::packcache`).
pub struct PackCacheMetrics {
    pub hits: IntCounter,
    pub misses: IntCounter,
    pub served_bytes: IntCounter,
    /// Part of `served_bytes` sent with `sendfile` (plain HTTP/1.1 hits).
    pub sendfile_bytes: IntCounter,
    /// Part of `served_bytes` read into seedd's buffers with positional reads (no mapping).
    pub read_bytes: IntCounter,
    pub evictions: IntCounter,
    /// New generations answered directly instead (`reason`: `per_client`, `budget`).
    pub generations_refused: IntCounterVec,
    /// Generations killed because every reader left (and none followed).
    pub generations_abandoned: IntCounter,
    pub generation: Histogram,
    pub bytes: IntGauge,
}

impl PackCacheMetrics {
    fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let counter = |name: &str| -> Result<IntCounter, prometheus::Error> {
            let c = IntCounter::with_opts(opts(name))?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let generation = Histogram::with_opts(
            HistogramOpts::new(
                "seedd_pack_cache_generation_seconds",
                doc("seedd_pack_cache_generation_seconds").help,
            )
            .buckets(vec![
                0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
            ]),
        )?;
        registry.register(Box::new(generation.clone()))?;
        let bytes = IntGauge::with_opts(opts("seedd_pack_cache_bytes"))?;
        registry.register(Box::new(bytes.clone()))?;
        let generations_refused = IntCounterVec::new(
            opts("seedd_pack_cache_generations_refused_total"),
            &["reason"],
        )?;
        registry.register(Box::new(generations_refused.clone()))?;
        for reason in PACK_CACHE_REFUSED {
            generations_refused.with_label_values(&[reason]);
        }
        Ok(Self {
            hits: counter("seedd_pack_cache_hits_total")?,
            misses: counter("seedd_pack_cache_misses_total")?,
            served_bytes: counter("seedd_pack_cache_served_bytes_total")?,
            sendfile_bytes: counter("seedd_pack_cache_sendfile_bytes_total")?,
            read_bytes: counter("seedd_pack_cache_read_bytes_total")?,
            evictions: counter("seedd_pack_cache_evictions_total")?,
            generations_refused,
            generations_abandoned: counter("seedd_pack_cache_generations_abandoned_total")?,
            generation,
            bytes,
        })
    }
}

/// Per-tenant and per-identity metrics. Label values are removed when a tenant goes.
pub struct TenantMetrics {
    pub tenants: IntGaugeVec,
    pub repos: IntGaugeVec,
    pub stored_bytes: IntGaugeVec,
    pub egress_bytes: IntCounterVec,
    pub http_requests: IntCounterVec,
    pub quota_usage: prometheus::GaugeVec,
    pub quota_exceeded: IntCounterVec,
    pub rate_limited: IntCounterVec,
    pub identity_inventory: IntGaugeVec,
    pub identity_cap: IntGaugeVec,
    /// Repositories an identity holds for its inventory but does not announce (over its cap).
    pub identity_unannounced: IntGaugeVec,
}

impl TenantMetrics {
    fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let counter = |name: &str, labels: &[&str]| -> Result<IntCounterVec, prometheus::Error> {
            let c = IntCounterVec::new(opts(name), labels)?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let gauge = |name: &str, labels: &[&str]| -> Result<IntGaugeVec, prometheus::Error> {
            let g = IntGaugeVec::new(opts(name), labels)?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let quota_usage = prometheus::GaugeVec::new(
            opts("seedd_tenant_quota_usage_ratio"),
            &["tenant", "quota"],
        )?;
        registry.register(Box::new(quota_usage.clone()))?;
        Ok(Self {
            tenants: gauge("seedd_tenants", &["state"])?,
            repos: gauge("seedd_tenant_repos", &["tenant"])?,
            stored_bytes: gauge("seedd_tenant_stored_bytes", &["tenant"])?,
            egress_bytes: counter("seedd_tenant_egress_bytes_total", &["tenant", "transport"])?,
            http_requests: counter("seedd_tenant_http_requests_total", &["tenant", "code"])?,
            quota_usage,
            quota_exceeded: counter("seedd_tenant_quota_exceeded_total", &["tenant", "quota"])?,
            rate_limited: counter("seedd_tenant_rate_limited_total", &["tenant"])?,
            identity_inventory: gauge("seedd_identity_inventory_repos", &["identity"])?,
            identity_cap: gauge("seedd_identity_inventory_cap_repos", &["identity"])?,
            identity_unannounced: gauge(
                "seedd_identity_inventory_unannounced_repos",
                &["identity"],
            )?,
        })
    }

    /// Creates a tenant's counters at 0 (its gauges are set by the tenant registry; quota usage
    /// is absent while unlimited), so its panels show 0 before its first request.
    pub fn init_tenant(&self, tenant: &str) {
        let tenant = &[tenant][..];
        for (family, values) in [
            (&self.egress_bytes, TENANT_TRANSPORTS),
            (&self.http_requests, TENANT_STATUS_CLASSES),
            (&self.quota_exceeded, TENANT_QUOTAS),
        ] {
            let _ = zero(family, &[tenant, values]);
        }
        let _ = zero(&self.rate_limited, &[tenant]);
    }

    /// Drop every series of a removed tenant.
    pub fn forget(&self, tenant: &str) {
        let _ = self.repos.remove_label_values(&[tenant]);
        let _ = self.stored_bytes.remove_label_values(&[tenant]);
        let _ = self.rate_limited.remove_label_values(&[tenant]);
        for t in TENANT_TRANSPORTS {
            let _ = self.egress_bytes.remove_label_values(&[tenant, t]);
        }
        for c in TENANT_STATUS_CLASSES {
            let _ = self.http_requests.remove_label_values(&[tenant, c]);
        }
        for q in TENANT_QUOTAS {
            let _ = self.quota_usage.remove_label_values(&[tenant, q]);
            let _ = self.quota_exceeded.remove_label_values(&[tenant, q]);
        }
    }
}

/// Peer-to-peer metrics (see the catalogue for meanings).
pub struct P2pMetrics {
    pub sessions: IntGaugeVec,
    pub handshakes: IntCounterVec,
    pub messages: IntCounterVec,
    pub message_bytes: IntCounterVec,
    pub dropped: IntCounterVec,
    pub rate_limited: IntCounterVec,
    pub rejected: IntCounterVec,
    pub disconnects: IntCounterVec,
    pub penalties: IntCounterVec,
    pub bans: IntCounter,
    pub banned_ips: IntGauge,
    pub relayed: IntCounterVec,
    pub signatures_verified: IntCounter,
    pub git_serves: IntCounterVec,
    pub git_serves_in_flight: IntGauge,
    pub git_requests: IntCounterVec,
    pub git_served_bytes: IntCounter,
    pub git_stream_overflows: IntCounter,
    pub fetches: IntCounterVec,
    pub fetch_duration: Histogram,
    pub fetch_received_bytes: IntCounter,
    pub fetch_queue: IntGauge,
    pub sync_missing: IntGauge,
    pub fetches_active: IntGauge,
    pub validation_failures: IntCounterVec,
    pub refs_updated: IntCounter,
    pub fetch_last_success: IntGaugeVec,
    pub routing_entries: IntGauge,
    pub address_book: IntGauge,
    pub stored_announcements: IntGauge,
    pub inventory: IntGaugeVec,
}

impl P2pMetrics {
    fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let counter = |name: &str, labels: &[&str]| -> Result<IntCounterVec, prometheus::Error> {
            let c = IntCounterVec::new(opts(name), labels)?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let gauge = |name: &str| -> Result<IntGauge, prometheus::Error> {
            let g = IntGauge::with_opts(opts(name))?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let sessions = IntGaugeVec::new(opts("seedd_p2p_sessions"), &["link", "state"])?;
        registry.register(Box::new(sessions.clone()))?;
        let inventory = IntGaugeVec::new(opts("seedd_p2p_inventory_repos"), &["state"])?;
        registry.register(Box::new(inventory.clone()))?;
        let signatures_verified =
            IntCounter::with_opts(opts("seedd_p2p_signatures_verified_total"))?;
        registry.register(Box::new(signatures_verified.clone()))?;
        let bans = IntCounter::with_opts(opts("seedd_p2p_bans_total"))?;
        registry.register(Box::new(bans.clone()))?;
        let git_served_bytes = IntCounter::with_opts(opts("seedd_p2p_git_served_bytes_total"))?;
        registry.register(Box::new(git_served_bytes.clone()))?;
        let git_stream_overflows =
            IntCounter::with_opts(opts("seedd_p2p_git_stream_overflows_total"))?;
        registry.register(Box::new(git_stream_overflows.clone()))?;
        let fetch_received_bytes = IntCounter::with_opts(opts("seedd_fetch_received_bytes_total"))?;
        registry.register(Box::new(fetch_received_bytes.clone()))?;
        let refs_updated = IntCounter::with_opts(opts("seedd_fetch_refs_updated_total"))?;
        registry.register(Box::new(refs_updated.clone()))?;
        let fetch_duration = Histogram::with_opts(
            HistogramOpts::new(
                "seedd_fetch_duration_seconds",
                doc("seedd_fetch_duration_seconds").help,
            )
            .buckets(vec![
                0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
            ]),
        )?;
        registry.register(Box::new(fetch_duration.clone()))?;
        Ok(Self {
            sessions,
            handshakes: counter("seedd_p2p_handshakes_total", &["link", "result"])?,
            messages: counter("seedd_p2p_messages_total", &["direction", "type"])?,
            message_bytes: counter("seedd_p2p_message_bytes_total", &["direction", "type"])?,
            dropped: counter("seedd_p2p_dropped_messages_total", &["reason"])?,
            rate_limited: counter("seedd_p2p_rate_limited_total", &["scope"])?,
            rejected: counter("seedd_p2p_connections_rejected_total", &["reason"])?,
            disconnects: counter("seedd_p2p_disconnects_total", &["reason"])?,
            penalties: counter("seedd_p2p_penalties_total", &["reason"])?,
            bans,
            banned_ips: gauge("seedd_p2p_banned_ips")?,
            relayed: counter("seedd_p2p_relayed_total", &["type"])?,
            signatures_verified,
            git_serves: counter("seedd_p2p_git_serves_total", &["result"])?,
            git_serves_in_flight: gauge("seedd_p2p_git_serves_in_flight")?,
            git_requests: counter("seedd_p2p_git_requests_total", &["answer"])?,
            git_served_bytes,
            git_stream_overflows,
            fetches: counter("seedd_fetches_total", &["result"])?,
            fetch_duration,
            fetch_received_bytes,
            fetch_queue: gauge("seedd_fetch_queue_depth")?,
            sync_missing: gauge("seedd_sync_missing_repos")?,
            fetches_active: gauge("seedd_fetches_active")?,
            validation_failures: counter("seedd_fetch_validation_failures_total", &["reason"])?,
            refs_updated,
            fetch_last_success: {
                let g = IntGaugeVec::new(
                    opts("seedd_fetch_last_success_timestamp_seconds"),
                    &["kind"],
                )?;
                registry.register(Box::new(g.clone()))?;
                g
            },
            routing_entries: gauge("seedd_p2p_routing_entries")?,
            address_book: gauge("seedd_p2p_address_book_nodes")?,
            stored_announcements: gauge("seedd_p2p_stored_announcements")?,
            inventory,
        })
    }
}

fn doc(name: &str) -> &'static MetricDoc {
    // Every metric below is in the catalogue; a unit test guarantees it.
    CATALOGUE
        .iter()
        .find(|d| d.name == name)
        .unwrap_or(&CATALOGUE[0])
}

fn opts(name: &str) -> Opts {
    Opts::new(name, doc(name).help)
}

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let build_info = IntGaugeVec::new(opts("seedd_build_info"), &["version"])?;
        let http_requests =
            IntCounterVec::new(opts("seedd_http_requests_total"), &["route", "status"])?;
        let http_response_bytes =
            IntCounterVec::new(opts("seedd_http_response_bytes_total"), &["route"])?;
        let http_in_flight = IntGaugeVec::new(opts("seedd_http_requests_in_flight"), &["route"])?;
        let clone_duration = HistogramVec::new(
            HistogramOpts::new(
                "seedd_git_clone_duration_seconds",
                doc("seedd_git_clone_duration_seconds").help,
            )
            .buckets(vec![
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
            ]),
            &["protocol"],
        )?;
        let packs_in_flight = IntGauge::with_opts(opts("seedd_git_packs_in_flight"))?;
        let pack_queue_depth = IntGauge::with_opts(opts("seedd_git_pack_queue_depth"))?;
        let pack_rejected = IntCounterVec::new(opts("seedd_git_pack_rejected_total"), &["reason"])?;
        let git_aborted = IntCounterVec::new(opts("seedd_git_aborted_total"), &["reason"])?;
        let ref_snapshots =
            IntCounterVec::new(opts("seedd_git_ref_snapshot_lookups_total"), &["result"])?;
        let repos_indexed = IntGaugeVec::new(opts("seedd_repos_indexed"), &["visibility"])?;
        let scan_duration = Histogram::with_opts(HistogramOpts::new(
            "seedd_index_scan_duration_seconds",
            doc("seedd_index_scan_duration_seconds").help,
        ))?;
        let tls_reloads = IntCounterVec::new(opts("seedd_tls_reloads_total"), &["result"])?;
        let reindex_repos = IntCounter::with_opts(opts("seedd_reindex_repos_total"))?;
        let reindex_namespaces =
            IntCounterVec::new(opts("seedd_reindex_namespaces_total"), &["outcome"])?;
        let reindex_refs_written = IntCounter::with_opts(opts("seedd_reindex_refs_written_total"))?;
        registry.register(Box::new(reindex_repos.clone()))?;
        registry.register(Box::new(reindex_namespaces.clone()))?;
        registry.register(Box::new(reindex_refs_written.clone()))?;

        registry.register(Box::new(build_info.clone()))?;
        registry.register(Box::new(http_requests.clone()))?;
        registry.register(Box::new(http_response_bytes.clone()))?;
        registry.register(Box::new(http_in_flight.clone()))?;
        registry.register(Box::new(clone_duration.clone()))?;
        registry.register(Box::new(packs_in_flight.clone()))?;
        registry.register(Box::new(pack_queue_depth.clone()))?;
        registry.register(Box::new(pack_rejected.clone()))?;
        registry.register(Box::new(git_aborted.clone()))?;
        registry.register(Box::new(ref_snapshots.clone()))?;
        registry.register(Box::new(repos_indexed.clone()))?;
        registry.register(Box::new(scan_duration.clone()))?;
        registry.register(Box::new(tls_reloads.clone()))?;
        let p2p = P2pMetrics::new(&registry)?;
        let tenant = TenantMetrics::new(&registry)?;
        let http_rate_limited =
            IntCounterVec::new(opts("seedd_http_rate_limited_total"), &["scope"])?;
        registry.register(Box::new(http_rate_limited.clone()))?;
        let config_reloads = IntCounterVec::new(opts("seedd_config_reloads_total"), &["result"])?;
        registry.register(Box::new(config_reloads.clone()))?;
        let web_requests =
            IntCounterVec::new(opts("seedd_web_requests_total"), &["group", "status"])?;
        registry.register(Box::new(web_requests.clone()))?;
        let web_duration = HistogramVec::new(
            HistogramOpts::new(
                "seedd_web_request_duration_seconds",
                doc("seedd_web_request_duration_seconds").help,
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                20.0,
            ]),
            &["group"],
        )?;
        registry.register(Box::new(web_duration.clone()))?;
        let web_rejected = IntCounterVec::new(opts("seedd_web_rejected_total"), &["reason"])?;
        registry.register(Box::new(web_rejected.clone()))?;
        let web_bounded = IntCounterVec::new(opts("seedd_web_bounded_total"), &["bound"])?;
        registry.register(Box::new(web_bounded.clone()))?;
        let pack_cache = PackCacheMetrics::new(&registry)?;
        let cob_budget_exceeded =
            IntCounterVec::new(opts("seedd_cob_budget_exceeded_total"), &["kind"])?;
        registry.register(Box::new(cob_budget_exceeded.clone()))?;
        let gauge = |name: &str| -> Result<IntGauge, prometheus::Error> {
            let g = IntGauge::with_opts(opts(name))?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let tls_cert_expiry = gauge("seedd_tls_cert_expiry_timestamp_seconds")?;
        let open_fds = gauge("seedd_process_open_fds")?;
        let max_fds = gauge("seedd_process_max_fds")?;
        let data_dir_free = gauge("seedd_data_dir_free_bytes")?;
        let fleet_repos_behind = gauge("seedd_fleet_repos_behind")?;
        let fleet_lag_seconds = gauge("seedd_fleet_lag_seconds")?;
        let data_dir_capacity = gauge("seedd_data_dir_capacity_bytes")?;
        let maintenance = MaintenanceMetrics::new(&registry)?;
        let http_connections_refused =
            IntCounterVec::new(opts("seedd_http_connections_refused_total"), &["reason"])?;
        registry.register(Box::new(http_connections_refused.clone()))?;
        let http_connections_cut =
            IntCounterVec::new(opts("seedd_http_connections_cut_total"), &["reason"])?;
        registry.register(Box::new(http_connections_cut.clone()))?;

        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        let metrics = Self {
            registry,
            http_requests,
            http_response_bytes,
            http_in_flight,
            clone_duration,
            packs_in_flight,
            pack_queue_depth,
            pack_rejected,
            git_aborted,
            ref_snapshots,
            repos_indexed,
            scan_duration,
            reindex_repos,
            reindex_namespaces,
            reindex_refs_written,
            tls_reloads,
            p2p,
            tls_cert_expiry,
            open_fds,
            max_fds,
            data_dir_free,
            fleet_repos_behind,
            fleet_lag_seconds,
            data_dir_capacity,
            build_info,
            tenant,
            http_rate_limited,
            config_reloads,
            web_requests,
            web_duration,
            web_rejected,
            web_bounded,
            pack_cache,
            maintenance,
            http_connections_refused,
            http_connections_cut,
            demand: demand::Demand::default(),
            cob_budget_exceeded,
        };
        metrics.zero_known()?;
        Ok(metrics)
    }

    /// Creates every series whose label values are known at build time, at 0 (see "Known label
    /// values" above).
    fn zero_known(&self) -> Result<(), prometheus::Error> {
        let routes = plus(labels::HTTP_ROUTES, &[labels::OTHER_ROUTE], |r| r);
        zero(&self.http_requests, &[&routes, HTTP_STATUSES])?;
        zero(&self.http_response_bytes, &[labels::STREAMED_ROUTES])?;
        zero(&self.http_in_flight, &[labels::STREAMED_ROUTES])?;
        zero(&self.clone_duration, &[GIT_PROTOCOLS])?;
        let rejected = plus(PACK_REJECTED, labels::ADMISSIONS, |r| r);
        zero(&self.pack_rejected, &[&rejected])?;
        zero(&self.git_aborted, &[GIT_ABORTED])?;
        zero(&self.ref_snapshots, &[&["hit", "miss"]])?;
        zero(&self.repos_indexed, &[VISIBILITIES])?;
        zero(&self.reindex_namespaces, &[&["verified", "reused"]])?;
        zero(&self.tls_reloads, &[RELOAD_RESULTS])?;
        zero(&self.config_reloads, &[RELOAD_RESULTS])?;
        zero(&self.http_rate_limited, &[HTTP_RATE_SCOPES])?;
        zero(&self.tenant.tenants, &[TENANT_STATES])?;
        zero(
            &self.web_requests,
            &[labels::WEB_GROUPS, labels::WEB_STATUSES],
        )?;
        zero(&self.web_duration, &[labels::WEB_GROUPS])?;
        zero(&self.web_rejected, &[WEB_REJECTED])?;
        zero(&self.web_bounded, &[WEB_BOUNDS])?;
        zero(
            &self.cob_budget_exceeded,
            &[crate::storage::cob::budget::BUDGET_KINDS],
        )?;
        zero(&self.http_connections_refused, &[HTTP_CONNECTIONS_REFUSED])?;
        zero(&self.http_connections_cut, &[HTTP_CONNECTIONS_CUT])?;

        let p = &self.p2p;
        let links = plus(&[], &[Link::Inbound, Link::Outbound], link_label);
        let gossip = plus(&[], &MessageType::ALL, type_label);
        let received = plus(NON_GOSSIP_FRAMES, &MessageType::ALL, type_label);
        zero(&p.sessions, &[&links, SESSION_STATES])?;
        zero(&p.handshakes, &[&links, HANDSHAKE_RESULTS])?;
        for family in [&p.messages, &p.message_bytes] {
            zero(family, &[&["in"], &received])?;
            zero(family, &[&["out"], &gossip])?;
        }
        zero(&p.dropped, &[&plus(DROPPED, &Dropped::ALL, |d| d.label())])?;
        zero(&p.rate_limited, &[P2P_RATE_SCOPES])?;
        zero(&p.rejected, &[CONNECTIONS_REJECTED])?;
        let disconnects = plus(DISCONNECTS, DisconnectReason::LABELS, |l| l);
        zero(&p.disconnects, &[&disconnects])?;
        zero(&p.penalties, &[labels::OFFENCES])?;
        zero(&p.relayed, &[&plus(&[], &ANNOUNCEMENTS, type_label)])?;
        zero(&p.git_serves, &[GIT_SERVES])?;
        zero(&p.git_requests, &[GIT_REQUESTS])?;
        zero(&p.fetches, &[&plus(FETCHES, labels::FETCH_ERRORS, |l| l)])?;
        let failures = plus(PRUNED, labels::VALIDATION_FAILURES, |l| l);
        zero(&p.validation_failures, &[&failures])?;
        zero(&p.inventory, &[INVENTORY_STATES])?;
        Ok(())
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        let families = self.registry.gather();
        if let Err(e) = TextEncoder::new().encode(&families, &mut buf) {
            tracing::error!(error = %crate::logging::chain(&e), "encoding metrics failed");
        }
        buf
    }

    pub fn count_request(&self, route: &str, status: u16) {
        self.http_requests
            .with_label_values(&[route, &status.to_string()])
            .inc();
    }

    /// One answered web API request (`group`: `web::Group::label`).
    pub fn count_web(&self, group: &str, status: u16, elapsed: std::time::Duration) {
        self.web_requests
            .with_label_values(&[group, &status.to_string()])
            .inc();
        self.web_duration
            .with_label_values(&[group])
            .observe(elapsed.as_secs_f64());
    }

    pub fn build_info(&self) -> &IntGaugeVec {
        &self.build_info
    }

    /// Samples process and filesystem gauges (open fds, fd limit, data_dir space).
    pub fn sample_system(&self, data_dir: &std::path::Path) {
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(dir.count() as i64);
        }
        if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
            let soft = limits
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|v| v.parse::<i64>().ok());
            if let Some(soft) = soft {
                self.max_fds.set(soft);
            }
        }
        if let Ok(st) = rustix::fs::statvfs(data_dir) {
            let frsize = st.f_frsize;
            let free = st.f_bavail.saturating_mul(frsize);
            let total = st.f_blocks.saturating_mul(frsize);
            self.data_dir_free
                .set(i64::try_from(free).unwrap_or(i64::MAX));
            self.data_dir_capacity
                .set(i64::try_from(total).unwrap_or(i64::MAX));
        }
    }
}

#[cfg(test)]
mod tests;
