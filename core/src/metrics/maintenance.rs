//! Repository maintenance metrics (the `maintain` room sets them; see the catalogue).

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Registry};

use super::{doc, opts, zero};

/// `result` of `seedd_maintenance_runs_total`.
pub const MAINTENANCE_RESULTS: &[&str] = &["ok", "error", "timeout"];

pub struct MaintenanceMetrics {
    pub runs: IntCounterVec,
    pub duration: Histogram,
    pub running: IntGauge,
    pub debt: IntGauge,
    pub packs: Histogram,
    pub scrubbed: IntCounter,
}

impl MaintenanceMetrics {
    pub(super) fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let runs = IntCounterVec::new(opts("seedd_maintenance_runs_total"), &["result"])?;
        zero(&runs, &[MAINTENANCE_RESULTS])?;
        let histogram = |name: &str, buckets: Vec<f64>| {
            Histogram::with_opts(HistogramOpts::new(name, doc(name).help).buckets(buckets))
        };
        let duration = histogram(
            "seedd_maintenance_duration_seconds",
            vec![0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0],
        )?;
        let packs = histogram(
            "seedd_repo_packs",
            vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0],
        )?;
        let running = IntGauge::with_opts(opts("seedd_maintenance_running"))?;
        let debt = IntGauge::with_opts(opts("seedd_maintenance_debt_score"))?;
        let scrubbed = IntCounter::with_opts(opts("seedd_maintenance_scrubbed_repos_total"))?;
        registry.register(Box::new(runs.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(running.clone()))?;
        registry.register(Box::new(debt.clone()))?;
        registry.register(Box::new(packs.clone()))?;
        registry.register(Box::new(scrubbed.clone()))?;
        Ok(Self {
            runs,
            duration,
            running,
            debt,
            packs,
            scrubbed,
        })
    }
}
