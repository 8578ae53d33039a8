//! Repository maintenance: `POST /api/v1/repos/{rid}/maintain` (`seedctl repo maintain`) and
//! `GET /api/v1/maintenance` (`seedctl maintenance ls`).

use serde::{Deserialize, Serialize};

/// A repository's layout as maintenance measures it (directory counts, no git process).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoDebt {
    /// Debt score: 0 is serving shape (one pack, bitmap, commit-graph, packed refs).
    pub score: u64,
    pub packs: u64,
    pub pack_bytes: u64,
    pub loose_objects: u64,
    pub loose_refs: u64,
    /// A reachability bitmap exists.
    pub bitmap: bool,
    /// A multi-pack index exists.
    pub midx: bool,
    pub commit_graph: bool,
    /// Unix seconds of the measurement.
    pub measured_at: u64,
}

/// One maintenance run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaintenanceRun {
    /// Unix seconds when it ended.
    pub at: u64,
    /// `ok`, `error` or `timeout`.
    pub result: String,
    #[serde(default)]
    pub error: Option<String>,
    pub duration_ms: u64,
    /// `full` or `geometric`.
    pub repack: String,
    pub packs_before: u64,
    pub packs_after: u64,
}

/// `POST /api/v1/repos/{rid}/maintain`: the run and the layout before and after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaintainResponse {
    pub rid: String,
    pub run: MaintenanceRun,
    pub before: RepoDebt,
    pub after: RepoDebt,
}

/// One held repository in `GET /api/v1/maintenance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaintenanceEntry {
    pub rid: String,
    pub debt: RepoDebt,
    /// The threshold it passes (`packs`, `loose_objects`, `loose_refs`, `no_bitmap`), if due.
    #[serde(default)]
    pub due: Option<String>,
    #[serde(default)]
    pub last_run: Option<MaintenanceRun>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaintenanceResponse {
    /// Background maintenance is on (`maintenance.enabled`).
    pub enabled: bool,
    /// Background runs queued or running.
    pub queued: usize,
    /// Fetched repositories waiting out the debounce.
    pub waiting: usize,
    /// Most indebted first (then by RID).
    pub repos: Vec<MaintenanceEntry>,
    /// Cursor of the next page (`<score>/<rid>` of this page's last entry, pass it as
    /// `after`); `null` on the last page.
    #[serde(default)]
    pub next: Option<String>,
    /// Repositories with a maintenance record, not only this page.
    #[serde(default)]
    pub total: usize,
}
