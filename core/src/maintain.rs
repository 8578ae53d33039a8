//! Background repository maintenance: keeps every held repository in the shape serving
//! wants — few packs under a multi-pack index with a reachability bitmap, packed refs, a
//! split commit-graph — so that `upload-pack` reuses pack data and walks bitmaps instead of
//! objects.
//!
//! * `debt.rs`: a repository's debt from directory listings (packs, loose objects and refs,
//!   bitmap, commit-graph, age) and the thresholds that make it due;
//! * `steps.rs`: the git commands of a run (niced, clean environment, killed on timeout) and
//!   the settings written into each repository's config;
//! * `lock.rs`: the per-repository lock fetches, purges and maintenance share;
//! * `debounce.rs`: after-fetch triggers, debounced per repository.
//!
//! Runs are triggered after fetches (debounced; the fetched repository's debt is measured
//! then) and by a slow scrub over every held repository — at most
//! `maintenance.scrub_repos_per_sec` measured per second, a pass started at most every
//! `maintenance.sweep_interval_secs` — that finds what changed outside seedd; only
//! repositories whose debt passes a threshold are maintained; `seedctl repo maintain` runs one
//! now. The worker has its own budget (`maintenance.concurrency` runs at
//! once, separate from serve and fetch slots) and never waits for a repository's lock: a
//! repository being fetched or purged is skipped and looked at again later. Safe against
//! `kill -9` at any point: every step is one of git's own atomic operations (see `steps.rs`),
//! and what a killed git leaves is cleaned before the next run.

mod debounce;
mod debt;
mod lock;
mod steps;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::config::MaintenanceConfig;
use crate::index::Index;
use crate::metrics::Metrics;
use crate::storage::Storage;
use seedd_proto::crypto::RepoId;

pub(crate) use debt::{Debt, Thresholds};
pub use lock::{RepoGuard, RepoLocks};

/// Lock and temporary files of an earlier process younger than this are left alone (a git
/// orphaned by a crash may still be finishing).
const STALE_AFTER: Duration = Duration::from_secs(3_600);
/// The first scrub pass starts this long after the start at the latest (sooner with a shorter
/// `maintenance.sweep_interval_secs`).
const FIRST_SWEEP: Duration = Duration::from_secs(300);
/// A scrub pass logs its progress this often.
const SCRUB_PROGRESS: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum MaintainError {
    #[error("{0} is not held in storage")]
    NotHeld(RepoId),
    #[error("measuring {rid}: {cause}")]
    Measure { rid: RepoId, cause: std::io::Error },
    #[error("index: {0}")]
    Index(crate::index::IndexError),
    #[error("storage: {0}")]
    Storage(crate::storage::StorageError),
    #[error("a maintenance step did not finish: {0}")]
    Task(tokio::task::JoinError),
}

/// Settings of the maintenance worker (`[maintenance]` plus the git binary).
#[derive(Debug, Clone)]
pub struct Settings {
    pub enabled: bool,
    pub concurrency: usize,
    pub sweep_interval: Duration,
    pub scrub_per_sec: u32,
    pub debounce: Duration,
    pub timeout: Duration,
    pub thresholds: Thresholds,
    pub full_repack_below: u64,
    pub git: String,
    pub git_home: PathBuf,
}

impl Settings {
    pub fn from_config(c: &MaintenanceConfig, git: String, git_home: PathBuf) -> Self {
        Self {
            enabled: c.enabled,
            concurrency: c.concurrency,
            sweep_interval: c.sweep_interval,
            scrub_per_sec: c.scrub_repos_per_sec.max(1),
            debounce: c.debounce,
            timeout: c.timeout,
            thresholds: Thresholds {
                packs: c.max_packs,
                loose_objects: c.max_loose_objects,
                loose_refs: c.max_loose_refs,
                bitmap_bytes: c.bitmap_min_bytes,
            },
            full_repack_below: c.full_repack_below_bytes,
            git,
            git_home,
        }
    }
}

/// One finished run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// Unix seconds when it ended.
    pub at: u64,
    /// `ok`, `error` or `timeout` (the label of `seedd_maintenance_runs_total`).
    pub result: String,
    pub error: Option<String>,
    pub duration_ms: u64,
    /// `full` or `geometric`.
    pub repack: String,
    pub packs_before: u64,
    pub packs_after: u64,
}

/// What the index keeps per repository (CF `maintenance`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub debt: Debt,
    pub score: u64,
    /// Unix seconds of the measurement.
    pub measured_at: u64,
    pub last_run: Option<Run>,
}

/// A repository's state for `seedctl maintenance ls`.
#[derive(Debug, Clone)]
pub struct Status {
    pub rid: RepoId,
    pub record: Record,
    /// The threshold it passes, if due.
    pub due: Option<&'static str>,
}

/// The outcome of `seedctl repo maintain`.
#[derive(Debug, Clone)]
pub struct Report {
    pub rid: RepoId,
    pub run: Run,
    pub before: Record,
    pub after: Record,
}

/// The maintenance worker. Cheap to clone.
#[derive(Clone)]
pub struct Maintainer {
    inner: Arc<Inner>,
}

struct Inner {
    s: Settings,
    git: steps::Git,
    storage: Storage,
    index: Index,
    metrics: Arc<Metrics>,
    locks: RepoLocks,
    /// The worker's own budget: runs at once.
    slots: Arc<Semaphore>,
    debounce: Mutex<debounce::Debouncer>,
    wake: Notify,
    /// Repositories with a background run queued or running (no duplicates).
    queued: Mutex<HashSet<RepoId>>,
    /// Latest score per repository (the debt gauge is their sum).
    scores: Mutex<Scores>,
    /// The stored records' scores were loaded into `scores` (the first scrub pass does it).
    scores_loaded: std::sync::atomic::AtomicBool,
    /// When this process started (older lock files may be stale).
    started: SystemTime,
}

/// The latest debt score of each repository and their sum, kept as they change: a sweep
/// stores one record per held repository, and summing every score at each store made a sweep
/// quadratic in the number of repositories (at 100,000, most of the daemon's CPU for minutes).
#[derive(Debug, Default)]
struct Scores {
    by_repo: HashMap<RepoId, u64>,
    total: u64,
}

impl Scores {
    fn insert(&mut self, rid: RepoId, score: u64) {
        let old = self.by_repo.insert(rid, score).unwrap_or(0);
        self.total = self.total.saturating_sub(old).saturating_add(score);
    }

    fn retain(&mut self, keep: impl Fn(&RepoId) -> bool) {
        let total = &mut self.total;
        self.by_repo.retain(|rid, score| {
            let kept = keep(rid);
            if !kept {
                *total = total.saturating_sub(*score);
            }
            kept
        });
    }

    fn total(&self) -> u64 {
        self.total
    }
}

/// At most `per_sec` items a second, in windows of one second (the scrub's budget).
#[derive(Debug)]
struct Pace {
    per_sec: u32,
    window: Instant,
    used: u32,
}

impl Pace {
    fn new(per_sec: u32, now: Instant) -> Self {
        Self {
            per_sec: per_sec.max(1),
            window: now,
            used: 0,
        }
    }

    /// How many of `want` may go at `now` (0: wait for [`Pace::next_window`]).
    fn take(&mut self, now: Instant, want: u32) -> u32 {
        if now >= self.next_window() {
            self.window = now;
            self.used = 0;
        }
        let n = want.min(self.per_sec - self.used);
        self.used += n;
        n
    }

    fn next_window(&self) -> Instant {
        self.window + Duration::from_secs(1)
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Maintainer {
    /// The worker (not started: see [`Maintainer::spawn`]). Probes the git version once.
    pub fn new(s: Settings, storage: Storage, index: Index, metrics: Arc<Metrics>) -> Self {
        let version = crate::git::command(&s.git, &s.git_home)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| steps::parse_version(&String::from_utf8_lossy(&o.stdout)));
        let nice = steps::which("nice");
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get() / 2)
            .max(1);
        tracing::info!(
            enabled = s.enabled,
            concurrency = s.concurrency,
            git_version = ?version,
            niced = nice.is_some(),
            pack_threads = threads,
            "repository maintenance configured"
        );
        let git = steps::Git {
            git: s.git.clone(),
            home: s.git_home.clone(),
            nice,
            version,
            threads,
            timeout: s.timeout,
        };
        Self {
            inner: Arc::new(Inner {
                slots: Arc::new(Semaphore::new(s.concurrency.max(1))),
                debounce: Mutex::new(debounce::Debouncer::new(s.debounce)),
                s,
                git,
                storage,
                index,
                metrics,
                locks: RepoLocks::default(),
                wake: Notify::new(),
                queued: Mutex::new(HashSet::new()),
                scores: Mutex::new(Scores::default()),
                scores_loaded: std::sync::atomic::AtomicBool::new(false),
                started: SystemTime::now(),
            }),
        }
    }

    /// Whether background maintenance runs (`maintenance.enabled`).
    pub fn enabled(&self) -> bool {
        self.inner.s.enabled
    }

    /// The per-repository lock fetches and purges take too.
    pub fn locks(&self) -> &RepoLocks {
        &self.inner.locks
    }

    /// A fetch changed `rid`: look at it once it has been quiet for `maintenance.debounce_secs`.
    pub fn after_fetch(&self, rid: RepoId) {
        if !self.inner.s.enabled {
            return;
        }
        self.inner
            .debounce
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .touch(rid, Instant::now());
        self.inner.wake.notify_one();
    }

    /// Starts the debounce loop and the scrub (when enabled) until `stop` is cancelled.
    pub fn spawn(&self, stop: CancellationToken) {
        if !self.inner.s.enabled {
            tracing::info!("background repository maintenance disabled (maintenance.enabled = false); `seedctl repo maintain` still works");
            return;
        }
        let this = self.clone();
        let token = stop.clone();
        tokio::spawn(async move {
            loop {
                let next = this
                    .inner
                    .debounce
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .next_deadline();
                let sleep = next.map_or(Duration::from_secs(3_600), |t| {
                    t.saturating_duration_since(Instant::now())
                });
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = this.inner.wake.notified() => {}
                    _ = tokio::time::sleep(sleep) => {}
                }
                let due = this
                    .inner
                    .debounce
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take_due(Instant::now());
                for rid in due {
                    this.queue(rid, "fetch");
                }
            }
        });
        let this = self.clone();
        tokio::spawn(async move {
            let first = this.inner.s.sweep_interval.min(FIRST_SWEEP);
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(first) => {}
            }
            loop {
                let started = tokio::time::Instant::now();
                this.scrub(&stop).await;
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep_until(started + this.inner.s.sweep_interval) => {}
                }
            }
        });
    }

    /// One scrub pass: every held repository measured (record, gauge, packs histogram) at
    /// most `scrub_per_sec` a second, the due ones queued as they are found. Records of
    /// repositories no longer held are dropped at its start. Stops when `stop` is cancelled.
    async fn scrub(&self, stop: &CancellationToken) {
        let started = Instant::now();
        let this = self.clone();
        let held = match tokio::task::spawn_blocking(move || this.held_and_pruned()).await {
            Ok(Ok(held)) => held,
            Ok(Err(e)) => {
                tracing::error!(error = %crate::logging::chain(&e), "maintenance scrub failed to list storage; next pass in maintenance.sweep_interval_secs");
                return;
            }
            Err(e) => {
                tracing::error!(error = %crate::logging::chain(&e), "maintenance scrub did not start");
                return;
            }
        };
        let total = held.len();
        let mut pace = Pace::new(self.inner.s.scrub_per_sec, Instant::now());
        let (mut measured, mut due) = (0usize, 0usize);
        let mut logged = Instant::now();
        let mut rest = held.as_slice();
        while !rest.is_empty() {
            let want = u32::try_from(rest.len()).unwrap_or(u32::MAX);
            let n = pace.take(Instant::now(), want) as usize;
            if n == 0 {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep_until(pace.next_window().into()) => {}
                }
                continue;
            }
            let (chunk, tail) = rest.split_at(n.min(rest.len()));
            rest = tail;
            let chunk = chunk.to_vec();
            let this = self.clone();
            let Ok(statuses) = tokio::task::spawn_blocking(move || this.measure_each(chunk)).await
            else {
                return;
            };
            self.inner.metrics.maintenance.scrubbed.inc_by(n as u64);
            measured += statuses.len();
            for s in statuses {
                if let Some(why) = s.due {
                    due += 1;
                    self.queue(s.rid, why);
                }
            }
            if logged.elapsed() >= SCRUB_PROGRESS {
                logged = Instant::now();
                tracing::info!(measured, of = total, due, "maintenance scrub in progress");
            }
        }
        tracing::info!(
            repos = total,
            measured,
            due,
            secs = started.elapsed().as_secs(),
            "maintenance scrub pass done"
        );
    }

    /// The held repositories (sorted), with the records of those no longer held deleted and,
    /// the first time, the debt gauge loaded from the records (blocking; records streamed).
    fn held_and_pruned(&self) -> Result<Vec<RepoId>, MaintainError> {
        let inner = &self.inner;
        let mut held = inner.storage.list()?;
        held.sort_unstable();
        let is_held = |rid: &RepoId| held.binary_search(rid).is_ok();
        // Once, even if a fetch measured its repository before the first pass.
        let load = !inner
            .scores_loaded
            .load(std::sync::atomic::Ordering::Acquire);
        let mut stale = Vec::new();
        let mut loaded = Vec::new();
        inner.index.for_each_maintenance_record(|rid, bytes| {
            if !is_held(&rid) {
                stale.push(rid);
            } else if load {
                if let Ok(r) = serde_json::from_slice::<Record>(bytes) {
                    loaded.push((rid, r.score));
                }
            }
        })?;
        for rid in &stale {
            inner.index.delete_maintenance_record(rid)?;
        }
        let total = {
            let mut scores = inner.scores.lock().unwrap_or_else(|e| e.into_inner());
            scores.retain(|rid| is_held(rid));
            for (rid, score) in loaded {
                // A measurement made meanwhile is newer than the record read.
                if !scores.by_repo.contains_key(&rid) {
                    scores.insert(rid, score);
                }
            }
            if load {
                inner
                    .scores_loaded
                    .store(true, std::sync::atomic::Ordering::Release);
            }
            scores.total()
        };
        inner
            .metrics
            .maintenance
            .debt
            .set(i64::try_from(total).unwrap_or(i64::MAX));
        Ok(held)
    }

    /// Each of `rids` measured now and written to the index (blocking); those that cannot be
    /// (purged meanwhile, unreadable) are logged and left out.
    fn measure_each(&self, rids: Vec<RepoId>) -> Vec<Status> {
        let mut out = Vec::with_capacity(rids.len());
        for rid in rids {
            match self.measure(rid) {
                Ok(record) => {
                    let due = self.inner.s.thresholds.due(&record.debt).map(|d| d.label());
                    out.push(Status { rid, record, due });
                }
                Err(MaintainError::NotHeld(_)) => {}
                Err(e) => {
                    tracing::warn!(%rid, error = %crate::logging::chain(&e), "measuring maintenance debt failed")
                }
            }
        }
        out
    }

    /// Every held repository measured now and written to the index (blocking).
    fn measure_all(&self) -> Result<Vec<Status>, MaintainError> {
        let held = self.held_and_pruned()?;
        Ok(self.measure_each(held))
    }

    /// Measures `rid`, keeps its last run, writes the record (blocking).
    fn measure(&self, rid: RepoId) -> Result<Record, MaintainError> {
        let inner = &self.inner;
        let path = inner.storage.path_of(&rid);
        if !path.join("HEAD").exists() && !path.join("refs").is_dir() {
            return Err(MaintainError::NotHeld(rid));
        }
        let debt =
            Debt::measure(&path).map_err(|source| MaintainError::Measure { rid, cause: source })?;
        let last_run = self.record(&rid)?.and_then(|r| r.last_run);
        let now = unix_now();
        let since = last_run
            .as_ref()
            .map(|r| Duration::from_secs(now.saturating_sub(r.at)));
        let record = Record {
            score: debt.score(since),
            debt,
            measured_at: now,
            last_run,
        };
        self.store(&rid, &record)?;
        Ok(record)
    }

    fn record(&self, rid: &RepoId) -> Result<Option<Record>, MaintainError> {
        let Some(bytes) = self.inner.index.maintenance_record(rid)? else {
            return Ok(None);
        };
        // A record from an older layout is measured again rather than failing.
        Ok(serde_json::from_slice(&bytes).ok())
    }

    /// Writes the record, updates the debt gauge and the packs histogram.
    fn store(&self, rid: &RepoId, record: &Record) -> Result<(), MaintainError> {
        let inner = &self.inner;
        let bytes = serde_json::to_vec(record).map_err(|e| crate::index::IndexError::Corrupt {
            cf: crate::index::maintenance::CF_MAINTENANCE,
            key: None,
            reason: crate::logging::chain(&e).to_string(),
        })?;
        inner.index.put_maintenance_record(rid, &bytes)?;
        let m = &inner.metrics.maintenance;
        m.packs.observe(record.debt.packs as f64);
        let total = {
            let mut scores = inner.scores.lock().unwrap_or_else(|e| e.into_inner());
            scores.insert(*rid, record.score);
            scores.total()
        };
        m.debt.set(i64::try_from(total).unwrap_or(i64::MAX));
        Ok(())
    }

    /// Queues a background run of `rid` (at most one queued or running per repository). It
    /// waits for one of the worker's slots, then for nothing else: a repository locked by a
    /// fetch or purge is skipped (the next trigger or sweep comes back to it).
    fn queue(&self, rid: RepoId, why: &'static str) {
        if !self
            .inner
            .queued
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(rid)
        {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            this.background(rid, why).await;
            this.inner
                .queued
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&rid);
        });
    }

    async fn background(&self, rid: RepoId, why: &'static str) {
        let Ok(_slot) = self.inner.slots.clone().acquire_owned().await else {
            return;
        };
        let Some(guard) = self.inner.locks.try_lock(rid) else {
            tracing::debug!(%rid, "maintenance skipped: the repository is being fetched or purged");
            return;
        };
        let this = self.clone();
        let before = match tokio::task::spawn_blocking(move || this.measure(rid)).await {
            Ok(Ok(r)) => r,
            Ok(Err(MaintainError::NotHeld(_))) => return,
            Ok(Err(e)) => {
                tracing::warn!(%rid, error = %crate::logging::chain(&e), "measuring maintenance debt failed");
                return;
            }
            Err(e) => {
                tracing::warn!(%rid, error = %crate::logging::chain(&e), "measuring maintenance debt did not finish");
                return;
            }
        };
        let Some(due) = self.inner.s.thresholds.due(&before.debt) else {
            tracing::debug!(%rid, score = before.score, "maintenance not due");
            return;
        };
        tracing::info!(%rid, trigger = why, due = due.label(), score = before.score, packs = before.debt.packs, "maintaining repository");
        if let Err(e) = self.run_locked(rid, &guard, before).await {
            tracing::warn!(%rid, error = %crate::logging::chain(&e), "maintenance failed");
        }
    }

    /// `seedctl repo maintain`: waits for a slot of the worker's budget and the repository's
    /// lock (a running fetch finishes first), then runs whatever the debt.
    pub async fn run_now(&self, rid: RepoId) -> Result<Report, MaintainError> {
        if !self.inner.storage.path_of(&rid).join("HEAD").exists() {
            return Err(MaintainError::NotHeld(rid));
        }
        let _slot = self
            .inner
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| MaintainError::NotHeld(rid))?;
        let guard = self.inner.locks.lock(rid).await;
        let this = self.clone();
        let before = tokio::task::spawn_blocking(move || this.measure(rid)).await??;
        tracing::info!(%rid, trigger = "admin", score = before.score, packs = before.debt.packs, "maintaining repository");
        self.run_locked(rid, &guard, before).await
    }

    /// One run under the repository's lock: stale leftovers cleaned, config, pack-refs,
    /// repack, commit-graph; then measured again, recorded and counted.
    async fn run_locked(
        &self,
        rid: RepoId,
        _guard: &RepoGuard,
        before: Record,
    ) -> Result<Report, MaintainError> {
        let inner = &self.inner;
        let path = inner.storage.path_of(&rid);
        let m = &inner.metrics.maintenance;
        m.running.inc();
        let started = Instant::now();
        let full = before.debt.pack_bytes < inner.s.full_repack_below;
        let outcome = self.steps(&path, full).await;
        let duration = started.elapsed();
        m.running.dec();
        let this = self.clone();
        let mut after = tokio::task::spawn_blocking(move || this.measure(rid)).await??;
        let (result, error) = match &outcome {
            Ok(()) => ("ok", None),
            Err(e @ steps::StepError::Timeout { .. }) => {
                ("timeout", Some(crate::logging::chain(&e).to_string()))
            }
            Err(e) => ("error", Some(crate::logging::chain(&e).to_string())),
        };
        m.runs.with_label_values(&[result]).inc();
        m.duration.observe(duration.as_secs_f64());
        let run = Run {
            at: unix_now(),
            result: result.to_owned(),
            error,
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            repack: if full { "full" } else { "geometric" }.to_owned(),
            packs_before: before.debt.packs,
            packs_after: after.debt.packs,
        };
        after.last_run = Some(run.clone());
        after.score = after.debt.score(Some(Duration::ZERO));
        let this = self.clone();
        let stored = after.clone();
        tokio::task::spawn_blocking(move || this.store(&rid, &stored)).await??;
        match &run.error {
            None => {
                tracing::info!(%rid, ms = run.duration_ms, repack = %run.repack, packs_before = run.packs_before, packs_after = run.packs_after, loose_refs_before = before.debt.loose_refs, loose_refs_after = after.debt.loose_refs, score = after.score, "repository maintained")
            }
            Some(e) => {
                tracing::warn!(%rid, ms = run.duration_ms, result = %run.result, error = %e, "repository maintenance failed")
            }
        }
        Ok(Report {
            rid,
            run,
            before,
            after,
        })
    }

    /// The git steps, in order; the first failure stops the run (each step is atomic, so the
    /// repository is in a valid state whichever step failed).
    async fn steps(&self, path: &std::path::Path, full: bool) -> Result<(), steps::StepError> {
        let inner = &self.inner;
        let git = &inner.git;
        let p = path.to_owned();
        let started = inner.started;
        let _ =
            tokio::task::spawn_blocking(move || steps::clean_stale(&p, started, STALE_AFTER)).await;
        git.configure(path).await?;
        git.run("pack-refs", path, &[], steps::PACK_REFS).await?;
        let threads = [format!("pack.threads={}", git.threads)];
        git.run("repack", path, &threads, &steps::repack_args(full))
            .await?;
        git.run("commit-graph", path, &[], steps::COMMIT_GRAPH)
            .await?;
        Ok(())
    }

    /// Every held repository measured now, with its last run (`seedctl maintenance ls`).
    pub async fn list(&self) -> Result<Vec<Status>, MaintainError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.measure_all()).await?
    }

    /// Runs queued or running in the background, and after-fetch triggers waiting.
    pub fn pending(&self) -> (usize, usize) {
        let queued = self
            .inner
            .queued
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len();
        let waiting = self
            .inner
            .debounce
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len();
        (queued, waiting)
    }
}

impl From<crate::index::IndexError> for MaintainError {
    fn from(e: crate::index::IndexError) -> Self {
        MaintainError::Index(e)
    }
}

impl From<crate::storage::StorageError> for MaintainError {
    fn from(e: crate::storage::StorageError) -> Self {
        MaintainError::Storage(e)
    }
}

impl From<tokio::task::JoinError> for MaintainError {
    fn from(e: tokio::task::JoinError) -> Self {
        MaintainError::Task(e)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_debt_total_follows_inserts_replacements_and_removals() {
        let rid = |b: u8| seedd_proto::crypto::RepoId::from([b; 20]);
        let mut s = super::Scores::default();
        s.insert(rid(1), 10);
        s.insert(rid(2), 5);
        assert_eq!(s.total(), 15);
        s.insert(rid(1), 3);
        assert_eq!(s.total(), 8);
        s.retain(|r| *r != rid(2));
        assert_eq!(s.total(), 3);
        assert_eq!(s.by_repo.len(), 1);
        s.retain(|_| false);
        assert_eq!(s.total(), 0);
    }

    use super::*;

    #[test]
    fn the_pace_hands_out_at_most_its_rate_per_second() {
        let t0 = Instant::now();
        let mut p = Pace::new(5, t0);
        assert_eq!(p.take(t0, 3), 3);
        assert_eq!(p.take(t0 + Duration::from_millis(500), 10), 2);
        assert_eq!(p.take(t0 + Duration::from_millis(999), 10), 0);
        assert_eq!(p.next_window(), t0 + Duration::from_secs(1));
        // A new window: the budget is whole again, and never more than it.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(p.take(t1, 10), 5);
        assert_eq!(p.take(t1, 10), 0);
        assert_eq!(p.next_window(), t1 + Duration::from_secs(1));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_scrub_pass_measures_every_held_repository_at_its_rate_and_drops_stale_records() {
        let dir = tempfile::tempdir().unwrap();
        let held: Vec<RepoId> = (0..7u8)
            .map(|b| RepoId::from_oid_bytes([b + 10; 20]))
            .collect();
        for rid in &held {
            let bare = dir.path().join("storage").join(rid.canonical());
            std::fs::create_dir_all(&bare).unwrap();
            git(&bare, &["init", "-q", "--bare"]);
        }
        let storage = Storage::open(dir.path().join("storage")).unwrap();
        let index = Index::open(&dir.path().join("index")).unwrap();
        // A record left by a repository removed from storage, and one of a held repository
        // with a score from an earlier process (the gauge starts from it).
        let gone = RepoId::from_oid_bytes([99; 20]);
        let old = Record {
            debt: Debt::default(),
            score: 40,
            measured_at: 1,
            last_run: None,
        };
        index
            .put_maintenance_record(&gone, &serde_json::to_vec(&old).unwrap())
            .unwrap();
        index
            .put_maintenance_record(&held[0], &serde_json::to_vec(&old).unwrap())
            .unwrap();
        let metrics = Arc::new(Metrics::new().unwrap());
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let mut s = settings(dir.path());
        s.scrub_per_sec = 3;
        let m = Maintainer::new(s, storage, index.clone(), metrics.clone());
        let pruned = m.held_and_pruned().unwrap();
        assert_eq!(pruned.len(), 7);
        assert_eq!(
            metrics.maintenance.debt.get(),
            40,
            "loaded from the records"
        );
        assert!(index.maintenance_record(&gone).unwrap().is_none());
        let started = Instant::now();
        m.scrub(&CancellationToken::new()).await;
        // 7 repositories at 3 a second: three windows, so at least two seconds.
        assert!(started.elapsed() >= Duration::from_secs(2));
        assert_eq!(metrics.maintenance.scrubbed.get(), 7);
        for rid in &held {
            let r: Record =
                serde_json::from_slice(&index.maintenance_record(rid).unwrap().unwrap()).unwrap();
            assert!(r.measured_at > 1, "{rid} not measured");
        }
        assert_eq!(
            metrics.maintenance.debt.get(),
            0,
            "empty repositories owe nothing"
        );
        // A cancelled pass stops at its next wait.
        let stop = CancellationToken::new();
        stop.cancel();
        let before = metrics.maintenance.scrubbed.get();
        m.scrub(&stop).await;
        assert_eq!(
            metrics.maintenance.scrubbed.get() - before,
            3,
            "one window, then stopped"
        );
    }

    fn settings(dir: &std::path::Path) -> Settings {
        let c = MaintenanceConfig {
            max_packs: 3,
            ..MaintenanceConfig::default()
        };
        Settings::from_config(&c, "git".into(), dir.join("home"))
    }

    fn git(repo: &std::path::Path, args: &[&str]) {
        let st = std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(st.status.success(), "{args:?}: {st:?}");
    }

    /// A bare repository with `n` packs (one commit each, pushed from a work tree) under
    /// Radicle's namespaced refs.
    fn repo_with_packs(root: &std::path::Path, rid: &RepoId, n: usize) -> PathBuf {
        let bare = root.join("storage").join(rid.canonical());
        std::fs::create_dir_all(&bare).unwrap();
        git(&bare, &["init", "-q", "--bare"]);
        let work = root.join("work");
        std::fs::create_dir_all(&work).unwrap();
        git(&work, &["init", "-q"]);
        // unpackLimit=1: every push stays a pack, as a fetch's migration leaves it.
        git(&bare, &["config", "receive.unpackLimit", "1"]);
        for i in 0..n {
            std::fs::write(work.join(format!("f{i}")), format!("{i}\n").repeat(100)).unwrap();
            git(&work, &["add", "."]);
            git(
                &work,
                &[
                    "-c",
                    "user.name=a",
                    "-c",
                    "user.email=a@b",
                    "commit",
                    "-qm",
                    &format!("c{i}"),
                ],
            );
            git(
                &work,
                &[
                    "push",
                    "-q",
                    bare.to_str().unwrap(),
                    &format!("HEAD:refs/namespaces/z6Mk/refs/heads/b{i}"),
                ],
            );
        }
        bare
    }

    #[tokio::test]
    async fn a_run_leaves_one_pack_a_bitmap_packed_refs_and_a_commit_graph() {
        let dir = tempfile::tempdir().unwrap();
        let rid = RepoId::from_oid_bytes([3; 20]);
        let bare = repo_with_packs(dir.path(), &rid, 4);
        let storage = Storage::open(dir.path().join("storage")).unwrap();
        let index = Index::open(&dir.path().join("index")).unwrap();
        let metrics = Arc::new(Metrics::new().unwrap());
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let m = Maintainer::new(settings(dir.path()), storage, index, metrics.clone());
        let before = m.list().await.unwrap();
        assert_eq!(before.len(), 1);
        assert!(before[0].record.debt.packs >= 3, "{:?}", before[0].record);
        assert_eq!(before[0].due, Some("packs"));
        let report = m.run_now(rid).await.unwrap();
        assert_eq!(report.run.result, "ok", "{:?}", report.run);
        assert_eq!(report.run.repack, "full");
        let d = &report.after.debt;
        assert_eq!(d.packs, 1);
        assert!(d.bitmap && d.midx && d.commit_graph, "{d:?}");
        assert_eq!(d.loose_refs, 0);
        assert_eq!(report.after.score, 0);
        assert!(report.before.score > report.after.score);
        // Recorded, counted, and the repository is intact.
        let listed = m.list().await.unwrap();
        assert_eq!(listed[0].record.last_run.as_ref().unwrap().result, "ok");
        assert_eq!(listed[0].due, None);
        assert_eq!(metrics.maintenance.runs.with_label_values(&["ok"]).get(), 1);
        git(&bare, &["fsck", "--no-progress"]);
        let cfg = std::fs::read_to_string(bare.join("config")).unwrap();
        assert!(cfg.contains("allowPackReuse"), "{cfg}");
        // Unknown repository.
        let other = RepoId::from_oid_bytes([4; 20]);
        assert!(matches!(
            m.run_now(other).await,
            Err(MaintainError::NotHeld(_))
        ));
    }

    #[tokio::test]
    async fn a_fetch_triggers_a_run_once_the_debounce_passed() {
        let dir = tempfile::tempdir().unwrap();
        let rid = RepoId::from_oid_bytes([6; 20]);
        repo_with_packs(dir.path(), &rid, 3);
        let storage = Storage::open(dir.path().join("storage")).unwrap();
        let index = Index::open(&dir.path().join("index")).unwrap();
        let metrics = Arc::new(Metrics::new().unwrap());
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let mut s = settings(dir.path());
        s.debounce = Duration::from_millis(300);
        let m = Maintainer::new(s, storage, index, metrics.clone());
        let stop = CancellationToken::new();
        m.spawn(stop.clone());
        let ok = || metrics.maintenance.runs.with_label_values(&["ok"]).get();
        m.after_fetch(rid);
        m.after_fetch(rid);
        assert_eq!(m.pending(), (0, 1), "two fetches, one waiting repository");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(ok(), 0, "not before the debounce");
        let deadline = Instant::now() + Duration::from_secs(30);
        while ok() == 0 {
            assert!(Instant::now() < deadline, "no run after the debounce");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(m.pending().1, 0);
        stop.cancel();
    }

    #[tokio::test]
    async fn background_runs_skip_a_locked_repository() {
        let dir = tempfile::tempdir().unwrap();
        let rid = RepoId::from_oid_bytes([5; 20]);
        repo_with_packs(dir.path(), &rid, 3);
        let storage = Storage::open(dir.path().join("storage")).unwrap();
        let index = Index::open(&dir.path().join("index")).unwrap();
        let metrics = Arc::new(Metrics::new().unwrap());
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let m = Maintainer::new(settings(dir.path()), storage, index, metrics.clone());
        let guard = m.locks().lock(rid).await;
        m.background(rid, "test").await;
        assert_eq!(
            metrics.maintenance.runs.with_label_values(&["ok"]).get(),
            0,
            "a fetch holds the lock: no run"
        );
        drop(guard);
        m.background(rid, "test").await;
        assert_eq!(metrics.maintenance.runs.with_label_values(&["ok"]).get(), 1);
        // Now nothing is due: another trigger does not run.
        m.background(rid, "test").await;
        assert_eq!(metrics.maintenance.runs.with_label_values(&["ok"]).get(), 1);
    }
}
