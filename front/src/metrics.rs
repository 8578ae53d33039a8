//! The front's own metrics (`seedd_front_*`), served on its metrics listener.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// `route` label values.
pub const ROUTES: [&str; 5] = ["git", "api", "raw", "node_wide", "node"];
/// `result` label values.
pub const RESULTS: [&str; 4] = ["ok", "client_error", "server_error", "unavailable"];
/// `reason` label values of failovers.
pub const REASONS: [&str; 3] = ["down", "connect", "lacked_objects"];

/// Every metric of the front.
pub struct FrontMetrics {
    registry: Registry,
    /// Requests answered, by shard (`fleet` for merged ones), route and result.
    pub requests: IntCounterVec,
    /// Requests a replica other than the repository's first choice answered (its first choice
    /// was down or lacked what a clone asked for), by shard and reason.
    pub failovers: IntCounterVec,
    /// 1 while a replica takes reads (its `/readyz` answers 200), by shard and replica.
    pub replica_up: IntGaugeVec,
    /// Time to the response head, by route.
    pub duration: HistogramVec,
    /// 1 for the placement in force, labelled with its version.
    pub placement: IntGaugeVec,
}

impl FrontMetrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "seedd_front_requests_total",
                "Requests the front routed, by shard, route (git, api, raw, node_wide, node) and result (ok, client_error, server_error, unavailable).",
            ),
            &["shard", "route", "result"],
        )?;
        let failovers = IntCounterVec::new(
            Opts::new(
                "seedd_front_failovers_total",
                "Requests answered by a replica other than the repository's first choice, by shard and reason (down, connect, lacked_objects).",
            ),
            &["shard", "reason"],
        )?;
        let replica_up = IntGaugeVec::new(
            Opts::new(
                "seedd_front_replica_up",
                "1 while the replica takes reads (its /readyz answers 200), else 0.",
            ),
            &["shard", "replica"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "seedd_front_response_seconds",
                "Seconds from the request to the response head, by route.",
            )
            .buckets(vec![
                0.001, 0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
            ]),
            &["route"],
        )?;
        let placement = IntGaugeVec::new(
            Opts::new(
                "seedd_front_placement_info",
                "1, labelled with the version (SHA-256 prefix) of the placement in force.",
            ),
            &["version"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(failovers.clone()))?;
        registry.register(Box::new(replica_up.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(placement.clone()))?;
        // As every seedd process: dashboards list instances by it.
        let build_info = IntGaugeVec::new(
            Opts::new(
                "seedd_build_info",
                "Always 1, labelled with the seedd version.",
            ),
            &["version"],
        )?;
        registry.register(Box::new(build_info.clone()))?;
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        Ok(Self {
            registry,
            requests,
            failovers,
            replica_up,
            duration,
            placement,
        })
    }

    /// Every series of the known label values at 0 for `shards` (dashboards and alerts show 0,
    /// not "No data", before the first request).
    pub fn zero(&self, shards: &[&str]) {
        for shard in shards.iter().copied().chain(["fleet"]) {
            for route in ROUTES {
                for result in RESULTS {
                    self.requests.with_label_values(&[shard, route, result]);
                }
            }
            for reason in REASONS {
                self.failovers.with_label_values(&[shard, reason]);
            }
        }
        for route in ROUTES {
            self.duration.with_label_values(&[route]);
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "encoding the front's metrics failed");
        }
        out
    }
}

/// The `result` label of a status.
pub fn result_label(status: u16) -> &'static str {
    match status {
        0..=399 => "ok",
        502..=504 => "unavailable",
        400..=499 => "client_error",
        _ => "server_error",
    }
}
