//! Every Prometheus metric seedd exports, defined in one place. Names are `seedd_*` with units;
//! labels are bounded (route names, status classes, results — never RIDs or NIDs).

use prometheus::core::{MetricVec, MetricVecBuilder};
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::fetch::{FetchError, ValidationError};
use crate::http::git::Endpoint;
use crate::net::guard::Offence;
use crate::net::{link_label, type_label};
use crate::serve::Admission;
use seedd_proto::gossip::{DisconnectReason, Dropped};
use seedd_proto::wire::{Link, MessageType};

/// One row of the metrics catalogue (README/ARCHITECTURE list these; a test checks it).
pub struct MetricDoc {
    pub name: &'static str,
    pub kind: &'static str,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

/// The catalogue: the single source of truth for names, types, labels and meaning.
pub const CATALOGUE: &[MetricDoc] = &[
    MetricDoc {
        name: "seedd_tenants",
        kind: "gauge",
        labels: &["state"],
        help: "Tenants by state (active, suspended).",
    },
    MetricDoc {
        name: "seedd_tenant_repos",
        kind: "gauge",
        labels: &["tenant"],
        help: "Repositories seeded by the tenant.",
    },
    MetricDoc {
        name: "seedd_tenant_stored_bytes",
        kind: "gauge",
        labels: &["tenant"],
        help: "Bytes on disk of the tenant's repositories (a shared repository counts in full for each tenant).",
    },
    MetricDoc {
        name: "seedd_tenant_egress_bytes_total",
        kind: "counter",
        labels: &["tenant", "transport"],
        help: "Bytes served for the tenant (transport: http, radicle).",
    },
    MetricDoc {
        name: "seedd_tenant_http_requests_total",
        kind: "counter",
        labels: &["tenant", "code"],
        help: "HTTP requests on the tenant's hostnames, by status class (2xx, 3xx, 4xx, 5xx).",
    },
    MetricDoc {
        name: "seedd_tenant_quota_usage_ratio",
        kind: "gauge",
        labels: &["tenant", "quota"],
        help: "Usage over limit per quota (repos, bytes, egress); absent when unlimited.",
    },
    MetricDoc {
        name: "seedd_tenant_quota_exceeded_total",
        kind: "counter",
        labels: &["tenant", "quota"],
        help: "Seeds, fetches and requests refused because of a tenant quota (repos, bytes, egress).",
    },
    MetricDoc {
        name: "seedd_tenant_rate_limited_total",
        kind: "counter",
        labels: &["tenant"],
        help: "HTTP requests refused by the tenant's rate limit.",
    },
    MetricDoc {
        name: "seedd_http_rate_limited_total",
        kind: "counter",
        labels: &["scope"],
        help: "HTTP requests refused by rate limits and admission (ip, tenant: 429; repo: per-repository pack queue, 503).",
    },
    MetricDoc {
        name: "seedd_identity_inventory_repos",
        kind: "gauge",
        labels: &["identity"],
        help: "Repositories a seed identity announces.",
    },
    MetricDoc {
        name: "seedd_identity_inventory_cap_repos",
        kind: "gauge",
        labels: &["identity"],
        help: "The most repositories a seed identity may announce.",
    },
    MetricDoc {
        name: "seedd_config_reloads_total",
        kind: "counter",
        labels: &["result"],
        help: "Configuration reloads (SIGHUP, seedctl config reload) by result (ok, error).",
    },
    MetricDoc {
        name: "seedd_build_info",
        kind: "gauge",
        labels: &["version"],
        help: "Always 1; labels carry the build version.",
    },
    MetricDoc {
        name: "seedd_http_requests_total",
        kind: "counter",
        labels: &["route", "status"],
        help: "HTTP requests answered, by route and status code.",
    },
    MetricDoc {
        name: "seedd_http_response_bytes_total",
        kind: "counter",
        labels: &["route"],
        help: "Response body bytes sent over HTTP, by route.",
    },
    MetricDoc {
        name: "seedd_http_requests_in_flight",
        kind: "gauge",
        labels: &["route"],
        help: "HTTP requests currently being answered (including streaming bodies).",
    },
    MetricDoc {
        name: "seedd_git_clone_duration_seconds",
        kind: "histogram",
        labels: &["protocol"],
        help: "Duration of git upload-pack (pack) responses over HTTP, from request to last byte.",
    },
    MetricDoc {
        name: "seedd_git_packs_in_flight",
        kind: "gauge",
        labels: &[],
        help: "Pack generations running now.",
    },
    MetricDoc {
        name: "seedd_git_pack_queue_depth",
        kind: "gauge",
        labels: &[],
        help: "Requests waiting for a pack-generation slot.",
    },
    MetricDoc {
        name: "seedd_git_pack_rejected_total",
        kind: "counter",
        labels: &["reason"],
        help: "Git requests refused with 503: packs (queue_full, queue_timeout), ref advertisements (refs_queue_full, refs_queue_timeout, backlogged: new clones refused while packs are queued).",
    },
    MetricDoc {
        name: "seedd_git_aborted_total",
        kind: "counter",
        labels: &["reason"],
        help: "git responses aborted (client_gone, idle_timeout, request_timeout, body_too_large, read_error, internal).",
    },
    MetricDoc {
        name: "seedd_repos_indexed",
        kind: "gauge",
        labels: &["visibility"],
        help: "Repositories in the index, by visibility.",
    },
    MetricDoc {
        name: "seedd_index_scan_duration_seconds",
        kind: "histogram",
        labels: &[],
        help: "Duration of storage → index reconcile passes.",
    },
    MetricDoc {
        name: "seedd_tls_reloads_total",
        kind: "counter",
        labels: &["result"],
        help: "TLS certificate reloads (ok, error).",
    },
    MetricDoc {
        name: "seedd_tls_cert_expiry_timestamp_seconds",
        kind: "gauge",
        labels: &[],
        help: "notAfter of the served TLS certificate (Unix seconds); 0 without TLS.",
    },
    MetricDoc {
        name: "seedd_process_open_fds",
        kind: "gauge",
        labels: &[],
        help: "File descriptors open in the seedd process.",
    },
    MetricDoc {
        name: "seedd_process_max_fds",
        kind: "gauge",
        labels: &[],
        help: "The process's file-descriptor limit (RLIMIT_NOFILE soft limit).",
    },
    MetricDoc {
        name: "seedd_data_dir_free_bytes",
        kind: "gauge",
        labels: &[],
        help: "Bytes available to seedd on the filesystem holding data_dir.",
    },
    MetricDoc {
        name: "seedd_data_dir_capacity_bytes",
        kind: "gauge",
        labels: &[],
        help: "Size of the filesystem holding data_dir.",
    },
    MetricDoc {
        name: "seedd_p2p_sessions",
        kind: "gauge",
        labels: &["link", "state"],
        help: "Radicle peer sessions by link (inbound, outbound) and state (handshake, connected).",
    },
    MetricDoc {
        name: "seedd_p2p_handshakes_total",
        kind: "counter",
        labels: &["link", "result"],
        help: "Noise handshakes by link and result (ok, timeout, error, self, blocked, conflict).",
    },
    MetricDoc {
        name: "seedd_p2p_messages_total",
        kind: "counter",
        labels: &["direction", "type"],
        help: "Frames received (in) and sent (out), by gossip message type, or control/git.",
    },
    MetricDoc {
        name: "seedd_p2p_message_bytes_total",
        kind: "counter",
        labels: &["direction", "type"],
        help: "Frame bytes received and sent, by gossip message type, or control/git.",
    },
    MetricDoc {
        name: "seedd_p2p_dropped_messages_total",
        kind: "counter",
        labels: &["reason"],
        help: "Gossip messages not acted on (rate_limited, stale, unknown_author, own) or not sent (outbox_full).",
    },
    MetricDoc {
        name: "seedd_p2p_rate_limited_total",
        kind: "counter",
        labels: &["scope"],
        help: "Rate-limit hits: connection attempts per IP (ip), messages per node (nid) and per host (host).",
    },
    MetricDoc {
        name: "seedd_p2p_connections_rejected_total",
        kind: "counter",
        labels: &["reason"],
        help: "Inbound connections refused before the handshake (banned, rate_limited, inbound_limit).",
    },
    MetricDoc {
        name: "seedd_p2p_disconnects_total",
        kind: "counter",
        labels: &["reason"],
        help: "Sessions ended, by reason (peer_closed, io_error, decode_error, invalid_signature, invalid_timestamp, stale, command, conflict, outbox_full, banned, shutdown).",
    },
    MetricDoc {
        name: "seedd_p2p_penalties_total",
        kind: "counter",
        labels: &["reason"],
        help: "Misbehaviour penalties given to peer IPs, by reason.",
    },
    MetricDoc {
        name: "seedd_p2p_bans_total",
        kind: "counter",
        labels: &[],
        help: "IP addresses banned after passing the penalty threshold.",
    },
    MetricDoc {
        name: "seedd_p2p_banned_ips",
        kind: "gauge",
        labels: &[],
        help: "IP addresses currently banned.",
    },
    MetricDoc {
        name: "seedd_p2p_relayed_total",
        kind: "counter",
        labels: &["type"],
        help: "Announcements relayed (one per announcement and receiving peer), by type.",
    },
    MetricDoc {
        name: "seedd_p2p_git_serves_total",
        kind: "counter",
        labels: &["result"],
        help: "Git streams served to Radicle peers, by result (ok, refused_unknown, refused_private, refused_policy, refused_quota, refused_busy, bad_header, timeout, too_large, cancelled, error).",
    },
    MetricDoc {
        name: "seedd_p2p_git_serves_in_flight",
        kind: "gauge",
        labels: &[],
        help: "Git streams being served to Radicle peers now.",
    },
    MetricDoc {
        name: "seedd_p2p_git_served_bytes_total",
        kind: "counter",
        labels: &[],
        help: "Git bytes (upload-pack output) sent to Radicle peers.",
    },
    MetricDoc {
        name: "seedd_p2p_git_stream_overflows_total",
        kind: "counter",
        labels: &[],
        help: "Git streams opened by peers closed because their unread input passed 4 MiB per stream or 8 MiB per session.",
    },
    MetricDoc {
        name: "seedd_fetches_total",
        kind: "counter",
        labels: &["result"],
        help: "Fetches from peers by result (ok, stream, git, too_large, quota, timeout, deadline, invalid, io, index; queue_full = request dropped).",
    },
    MetricDoc {
        name: "seedd_fetch_duration_seconds",
        kind: "histogram",
        labels: &[],
        help: "Duration of fetches from peers (transfer, validation, apply).",
    },
    MetricDoc {
        name: "seedd_fetch_received_bytes_total",
        kind: "counter",
        labels: &[],
        help: "Git bytes received from peers by fetches.",
    },
    MetricDoc {
        name: "seedd_fetch_queue_depth",
        kind: "gauge",
        labels: &[],
        help: "Fetches waiting for a fetch slot (their peer's or a global one).",
    },
    MetricDoc {
        name: "seedd_fetches_active",
        kind: "gauge",
        labels: &[],
        help: "Fetches running now.",
    },
    MetricDoc {
        name: "seedd_fetch_validation_failures_total",
        kind: "counter",
        labels: &["reason"],
        help: "Validation failures: whole fetches rejected (missing_identity, identity, delegate_diverged, threshold) and namespaces pruned (invalid_sigrefs, unsigned_ref, mismatched_ref, missing_ref, diverged).",
    },
    MetricDoc {
        name: "seedd_fetch_last_success_timestamp_seconds",
        kind: "gauge",
        labels: &["kind"],
        help: "When the last successful fetch finished (Unix seconds), by kind (clone, update); absent until the first one; alert on time() minus it.",
    },
    MetricDoc {
        name: "seedd_fetch_refs_updated_total",
        kind: "counter",
        labels: &[],
        help: "Refs written or deleted by applied fetches.",
    },
    MetricDoc {
        name: "seedd_p2p_routing_entries",
        kind: "gauge",
        labels: &[],
        help: "Routing-table entries (repository, seeding node).",
    },
    MetricDoc {
        name: "seedd_p2p_address_book_nodes",
        kind: "gauge",
        labels: &[],
        help: "Nodes in the address book (announced with the SEED feature).",
    },
    MetricDoc {
        name: "seedd_p2p_stored_announcements",
        kind: "gauge",
        labels: &[],
        help: "Announcements kept for Subscribe answers and de-duplication.",
    },
    MetricDoc {
        name: "seedd_p2p_inventory_repos",
        kind: "gauge",
        labels: &["state"],
        help: "Public repositories in our inventory: announced, or unannounced beyond the 2,973-repo message cap.",
    },
];

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
    "timeout",
    "too_large",
    "cancelled",
    "error",
];
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
    pub repos_indexed: IntGaugeVec,
    pub scan_duration: Histogram,
    pub tls_reloads: IntCounterVec,
    pub p2p: P2pMetrics,
    pub tls_cert_expiry: IntGauge,
    pub open_fds: IntGauge,
    pub max_fds: IntGauge,
    pub data_dir_free: IntGauge,
    pub data_dir_capacity: IntGauge,
    build_info: IntGaugeVec,
    pub tenant: TenantMetrics,
    pub http_rate_limited: IntCounterVec,
    pub config_reloads: IntCounterVec,
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
    pub git_serves: IntCounterVec,
    pub git_serves_in_flight: IntGauge,
    pub git_served_bytes: IntCounter,
    pub git_stream_overflows: IntCounter,
    pub fetches: IntCounterVec,
    pub fetch_duration: Histogram,
    pub fetch_received_bytes: IntCounter,
    pub fetch_queue: IntGauge,
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
            git_serves: counter("seedd_p2p_git_serves_total", &["result"])?,
            git_serves_in_flight: gauge("seedd_p2p_git_serves_in_flight")?,
            git_served_bytes,
            git_stream_overflows,
            fetches: counter("seedd_fetches_total", &["result"])?,
            fetch_duration,
            fetch_received_bytes,
            fetch_queue: gauge("seedd_fetch_queue_depth")?,
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
        let repos_indexed = IntGaugeVec::new(opts("seedd_repos_indexed"), &["visibility"])?;
        let scan_duration = Histogram::with_opts(HistogramOpts::new(
            "seedd_index_scan_duration_seconds",
            doc("seedd_index_scan_duration_seconds").help,
        ))?;
        let tls_reloads = IntCounterVec::new(opts("seedd_tls_reloads_total"), &["result"])?;

        registry.register(Box::new(build_info.clone()))?;
        registry.register(Box::new(http_requests.clone()))?;
        registry.register(Box::new(http_response_bytes.clone()))?;
        registry.register(Box::new(http_in_flight.clone()))?;
        registry.register(Box::new(clone_duration.clone()))?;
        registry.register(Box::new(packs_in_flight.clone()))?;
        registry.register(Box::new(pack_queue_depth.clone()))?;
        registry.register(Box::new(pack_rejected.clone()))?;
        registry.register(Box::new(git_aborted.clone()))?;
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
        let gauge = |name: &str| -> Result<IntGauge, prometheus::Error> {
            let g = IntGauge::with_opts(opts(name))?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let tls_cert_expiry = gauge("seedd_tls_cert_expiry_timestamp_seconds")?;
        let open_fds = gauge("seedd_process_open_fds")?;
        let max_fds = gauge("seedd_process_max_fds")?;
        let data_dir_free = gauge("seedd_data_dir_free_bytes")?;
        let data_dir_capacity = gauge("seedd_data_dir_capacity_bytes")?;

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
            repos_indexed,
            scan_duration,
            tls_reloads,
            p2p,
            tls_cert_expiry,
            open_fds,
            max_fds,
            data_dir_free,
            data_dir_capacity,
            build_info,
            tenant,
            http_rate_limited,
            config_reloads,
        };
        metrics.zero_known()?;
        Ok(metrics)
    }

    /// Creates every series whose label values are known at build time, at 0 (see "Known label
    /// values" above).
    fn zero_known(&self) -> Result<(), prometheus::Error> {
        let routes = plus(&[Endpoint::OTHER_ROUTE], &Endpoint::ALL, Endpoint::route);
        let streamed = [Endpoint::InfoRefs.route(), Endpoint::UploadPack.route()];
        zero(&self.http_requests, &[&routes, HTTP_STATUSES])?;
        zero(&self.http_response_bytes, &[&streamed])?;
        zero(&self.http_in_flight, &[&streamed])?;
        zero(&self.clone_duration, &[GIT_PROTOCOLS])?;
        let rejected = plus(PACK_REJECTED, &Admission::ALL, Admission::reason);
        zero(&self.pack_rejected, &[&rejected])?;
        zero(&self.git_aborted, &[GIT_ABORTED])?;
        zero(&self.repos_indexed, &[VISIBILITIES])?;
        zero(&self.tls_reloads, &[RELOAD_RESULTS])?;
        zero(&self.config_reloads, &[RELOAD_RESULTS])?;
        zero(&self.http_rate_limited, &[HTTP_RATE_SCOPES])?;
        zero(&self.tenant.tenants, &[TENANT_STATES])?;

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
        zero(&p.penalties, &[&plus(&[], &Offence::ALL, Offence::label)])?;
        zero(&p.relayed, &[&plus(&[], &ANNOUNCEMENTS, type_label)])?;
        zero(&p.git_serves, &[GIT_SERVES])?;
        zero(&p.fetches, &[&plus(FETCHES, FetchError::LABELS, |l| l)])?;
        let failures = plus(PRUNED, ValidationError::LABELS, |l| l);
        zero(&p.validation_failures, &[&failures])?;
        zero(&p.inventory, &[INVENTORY_STATES])?;
        Ok(())
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        let families = self.registry.gather();
        if let Err(e) = TextEncoder::new().encode(&families, &mut buf) {
            tracing::error!(error = %e, "encoding metrics failed");
        }
        buf
    }

    pub fn count_request(&self, route: &str, status: u16) {
        self.http_requests
            .with_label_values(&[route, &status.to_string()])
            .inc();
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
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Families whose label values are only known at runtime (tenant and identity names) or that
    /// have no value before their first event; every other one has series in a new registry.
    fn runtime_only(name: &str) -> bool {
        name.starts_with("seedd_tenant_")
            || name.starts_with("seedd_identity_")
            || name == "seedd_fetch_last_success_timestamp_seconds"
    }

    #[test]
    fn a_new_registry_exports_every_known_series_at_0() {
        let m = Metrics::new().unwrap();
        let families = m.registry.gather();
        for d in CATALOGUE {
            let series = families
                .iter()
                .find(|f| f.name() == d.name)
                .map_or(0, |f| f.get_metric().len());
            if runtime_only(d.name) {
                assert_eq!(
                    series, 0,
                    "{} has series before any tenant or event",
                    d.name
                );
            } else {
                assert!(series > 0, "{} has no series in a new registry", d.name);
            }
        }
        let text = String::from_utf8(m.render()).unwrap();
        for line in text.lines() {
            if !line.starts_with('#') && !line.starts_with("seedd_build_info{") {
                assert!(line.ends_with(" 0"), "not 0 in a new registry: {line}");
            }
        }
        let count = |name: &str| {
            families
                .iter()
                .find(|f| f.name() == name)
                .map_or(0, |f| f.get_metric().len())
        };
        assert_eq!(count("seedd_http_requests_total"), 4 * HTTP_STATUSES.len());
        assert_eq!(
            count("seedd_p2p_handshakes_total"),
            2 * HANDSHAKE_RESULTS.len()
        );
        assert_eq!(count("seedd_p2p_messages_total"), 2 + 2 * 7);
        assert_eq!(count("seedd_p2p_disconnects_total"), DISCONNECTS.len() + 4);
        assert_eq!(count("seedd_fetches_total"), 2 + FetchError::LABELS.len());
        assert!(text.contains("seedd_git_pack_rejected_total{reason=\"queue_timeout\"} 0"));
        assert!(text.contains("seedd_p2p_penalties_total{reason=\"handshake\"} 0"));
        assert!(text.contains("seedd_p2p_dropped_messages_total{reason=\"unknown_author\"} 0"));
        assert!(text.contains("seedd_http_requests_total{route=\"other\",status=\"404\"} 0"));
        assert!(text.contains("seedd_git_clone_duration_seconds_count{protocol=\"v0\"} 0"));

        // A tenant's counters start at 0 when it is known, and go with it.
        m.tenant.init_tenant("acme");
        let text = String::from_utf8(m.render()).unwrap();
        for series in [
            "seedd_tenant_egress_bytes_total{tenant=\"acme\",transport=\"radicle\"} 0",
            "seedd_tenant_http_requests_total{code=\"5xx\",tenant=\"acme\"} 0",
            "seedd_tenant_quota_exceeded_total{quota=\"egress\",tenant=\"acme\"} 0",
            "seedd_tenant_rate_limited_total{tenant=\"acme\"} 0",
        ] {
            assert!(text.contains(series), "{series} missing:\n{text}");
        }
        m.tenant.forget("acme");
        let text = String::from_utf8(m.render()).unwrap();
        assert!(!text.contains("acme"), "{text}");
    }

    /// The labels of `samples` (one value of every variant) are exactly `listed`, without repeats.
    fn same_labels(samples: &[&'static str], listed: &[&'static str]) {
        let a: BTreeSet<_> = samples.iter().copied().collect();
        let b: BTreeSet<_> = listed.iter().copied().collect();
        assert_eq!(a, b);
        assert_eq!(b.len(), listed.len(), "repeated label in {listed:?}");
    }

    /// The enum lists that known label values come from name every variant. Each `match` below
    /// has no wildcard: a new variant does not compile until it is added to the samples next to
    /// it, and then the test fails until it is in the enum's `ALL`/`LABELS` too.
    #[test]
    fn label_lists_name_every_variant() {
        let samples = [
            Endpoint::InfoRefs,
            Endpoint::UploadPack,
            Endpoint::ReceivePack,
        ];
        for e in samples {
            match e {
                Endpoint::InfoRefs | Endpoint::UploadPack | Endpoint::ReceivePack => {}
            }
        }
        same_labels(
            &samples.map(Endpoint::route),
            &Endpoint::ALL.map(Endpoint::route),
        );
        assert!(!Endpoint::ALL
            .map(Endpoint::route)
            .contains(&Endpoint::OTHER_ROUTE));

        let samples = [Admission::QueueFull, Admission::QueueTimeout];
        for a in samples {
            match a {
                Admission::QueueFull | Admission::QueueTimeout => {}
            }
        }
        same_labels(
            &samples.map(Admission::reason),
            &Admission::ALL.map(Admission::reason),
        );

        let samples = [
            Offence::DecodeError,
            Offence::InvalidSignature,
            Offence::InvalidTimestamp,
            Offence::Handshake,
        ];
        for o in samples {
            match o {
                Offence::DecodeError
                | Offence::InvalidSignature
                | Offence::InvalidTimestamp
                | Offence::Handshake => {}
            }
        }
        same_labels(
            &samples.map(Offence::label),
            &Offence::ALL.map(Offence::label),
        );

        let samples = [Dropped::Stale, Dropped::UnknownAuthor, Dropped::Own];
        for d in samples {
            match d {
                Dropped::Stale | Dropped::UnknownAuthor | Dropped::Own => {}
            }
        }
        same_labels(
            &samples.map(|d| d.label()),
            &Dropped::ALL.map(|d| d.label()),
        );

        let samples = [
            DisconnectReason::InvalidSignature,
            DisconnectReason::InvalidTimestamp {
                timestamp: 0,
                now: 0,
            },
            DisconnectReason::Stale,
            DisconnectReason::Command,
        ];
        for r in &samples {
            match r {
                DisconnectReason::InvalidSignature
                | DisconnectReason::InvalidTimestamp { .. }
                | DisconnectReason::Stale
                | DisconnectReason::Command => {}
            }
        }
        same_labels(
            &samples.each_ref().map(|r| r.label()),
            DisconnectReason::LABELS,
        );

        let nid = crate::crypto::Keypair::mock(1).nid();
        let samples = [
            ValidationError::MissingIdentity,
            ValidationError::IdentityHistory(crate::storage::cob::CobError::NoHeads),
            ValidationError::IdentityDocument(crate::storage::IdentityError::Missing),
            ValidationError::DelegateDiverged(nid),
            ValidationError::Threshold {
                valid: 0,
                threshold: 1,
            },
        ];
        for v in &samples {
            match v {
                ValidationError::MissingIdentity
                | ValidationError::IdentityHistory(_)
                | ValidationError::IdentityDocument(_)
                | ValidationError::DelegateDiverged(_)
                | ValidationError::Threshold { .. } => {}
            }
        }
        same_labels(
            &samples.each_ref().map(|v| v.label()),
            ValidationError::LABELS,
        );

        let cancelled = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async {
                let task = tokio::spawn(std::future::pending::<()>());
                task.abort();
                task.await.unwrap_err()
            });
        let samples = [
            FetchError::Stream(nid, crate::net::OpenError::NotConnected(nid)),
            FetchError::SessionClosed,
            FetchError::Git(String::new()),
            FetchError::Spawn(std::io::Error::other("x")),
            FetchError::GitClosed,
            FetchError::repository(std::io::Error::other("x")),
            FetchError::TooLarge(0),
            FetchError::Quota(0),
            FetchError::Timeout(std::time::Duration::ZERO),
            FetchError::Deadline(std::time::Duration::ZERO),
            FetchError::Invalid(ValidationError::MissingIdentity),
            FetchError::Purged,
            FetchError::Io(std::io::Error::other("x")),
            FetchError::Index(crate::index::IndexError::MissingCf("x")),
            FetchError::Task(cancelled),
            FetchError::NoResult,
        ];
        for e in &samples {
            match e {
                FetchError::Stream(..)
                | FetchError::SessionClosed
                | FetchError::Git(_)
                | FetchError::Spawn(_)
                | FetchError::GitClosed
                | FetchError::Repository(_)
                | FetchError::TooLarge(_)
                | FetchError::Quota(_)
                | FetchError::Timeout(_)
                | FetchError::Deadline(_)
                | FetchError::Invalid(_)
                | FetchError::Purged
                | FetchError::Io(_)
                | FetchError::Index(_)
                | FetchError::Task(_)
                | FetchError::NoResult => {}
            }
        }
        same_labels(&samples.each_ref().map(|e| e.label()), FetchError::LABELS);

        // Every message type that decodes is in `MessageType::ALL`.
        let decodable: Vec<MessageType> = (0..=u16::MAX)
            .filter_map(|id| MessageType::try_from(id).ok())
            .collect();
        same_labels(
            &decodable.iter().map(|t| type_label(*t)).collect::<Vec<_>>(),
            &MessageType::ALL.map(type_label),
        );
        for l in [Link::Inbound, Link::Outbound] {
            match l {
                Link::Inbound | Link::Outbound => {}
            }
        }
    }

    #[test]
    fn every_registered_metric_is_in_the_catalogue_and_vice_versa() {
        let m = Metrics::new().unwrap();
        // Touch labelled metrics so they appear in the exposition.
        m.count_request("upload_pack", 200);
        m.http_response_bytes
            .with_label_values(&["upload_pack"])
            .inc();
        m.http_in_flight.with_label_values(&["upload_pack"]).set(0);
        m.clone_duration.with_label_values(&["v2"]).observe(0.1);
        m.pack_rejected.with_label_values(&["queue_full"]).inc();
        m.git_aborted.with_label_values(&["client_gone"]).inc();
        m.repos_indexed.with_label_values(&["public"]).set(1);
        m.tls_reloads.with_label_values(&["ok"]).inc();
        let p = &m.p2p;
        p.handshakes.with_label_values(&["inbound", "ok"]).inc();
        p.messages.with_label_values(&["in", "ping"]).inc();
        p.message_bytes.with_label_values(&["in", "ping"]).inc();
        p.dropped.with_label_values(&["stale"]).inc();
        p.rate_limited.with_label_values(&["ip"]).inc();
        p.rejected.with_label_values(&["banned"]).inc();
        p.disconnects.with_label_values(&["stale"]).inc();
        p.penalties.with_label_values(&["decode_error"]).inc();
        p.relayed.with_label_values(&["node"]).inc();
        p.git_serves.with_label_values(&["ok"]).inc();
        p.fetches.with_label_values(&["ok"]).inc();
        p.validation_failures
            .with_label_values(&["threshold"])
            .inc();
        p.fetch_duration.observe(0.1);
        p.fetch_last_success.with_label_values(&["clone"]).set(1);
        let t = &m.tenant;
        t.repos.with_label_values(&["acme"]).set(1);
        t.stored_bytes.with_label_values(&["acme"]).set(1);
        t.egress_bytes.with_label_values(&["acme", "http"]).inc();
        t.http_requests.with_label_values(&["acme", "2xx"]).inc();
        t.quota_usage.with_label_values(&["acme", "repos"]).set(0.5);
        t.quota_exceeded.with_label_values(&["acme", "repos"]).inc();
        t.rate_limited.with_label_values(&["acme"]).inc();
        t.identity_inventory.with_label_values(&["default"]).set(1);
        t.identity_cap.with_label_values(&["default"]).set(2973);
        m.http_rate_limited.with_label_values(&["ip"]).inc();
        m.config_reloads.with_label_values(&["ok"]).inc();
        let names: Vec<String> = m
            .registry
            .gather()
            .iter()
            .map(|f| f.name().to_owned())
            .collect();
        for d in CATALOGUE {
            assert!(
                names.contains(&d.name.to_owned()),
                "{} not registered",
                d.name
            );
            assert!(d.name.starts_with("seedd_"));
        }
        for n in &names {
            assert!(
                CATALOGUE.iter().any(|d| d.name == n),
                "{n} not in catalogue"
            );
        }
        let readme = include_str!("../../README.md");
        for d in CATALOGUE {
            assert!(
                readme.contains(&format!("`{}`", d.name)),
                "{} missing from README's metrics table",
                d.name
            );
        }
        m.sample_system(std::path::Path::new("/"));
        assert!(m.open_fds.get() > 0);
        assert!(m.max_fds.get() >= m.open_fds.get());
        assert!(m.data_dir_capacity.get() >= m.data_dir_free.get());
        assert!(m.data_dir_capacity.get() > 0);
        let text = String::from_utf8(m.render()).unwrap();
        assert!(text.contains("seedd_build_info{version="));
    }
}
