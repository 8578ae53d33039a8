//! Per repository: concurrent pack generations with a short bounded queue, one
//! [`PackLimiter`] per busy repository; idle ones are dropped so the map only holds
//! repositories with requests in flight.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use seedd_core::config::HttpRateConfig;
use seedd_core::serve::{Admission, PackLimiter, Permit};

/// `Retry-After` for a request shed by a repository's pack queue.
const REPO_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Why a request was shed by a repository's pack queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shed {
    pub reason: Admission,
    pub retry_after: Duration,
}

/// Held while a pack is generated for a repository; frees the slot (and, when it was the
/// last user, the repository's entry) on drop.
pub struct PackPermit {
    // Field order matters: the slot is released before the entry is (maybe) removed.
    _permit: Option<Permit>,
    _slot: Option<RepoSlot>,
}

impl PackPermit {
    const UNLIMITED: PackPermit = PackPermit {
        _permit: None,
        _slot: None,
    };
}

impl std::fmt::Debug for PackPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackPermit")
            .field("limited", &self._permit.is_some())
            .finish()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct RepoSettings {
    /// 0: no per-repository limit.
    concurrent: usize,
    queue: usize,
    wait: Duration,
}

impl RepoSettings {
    fn new(cfg: &HttpRateConfig) -> Self {
        RepoSettings {
            concurrent: cfg.per_repo_concurrent_packs,
            queue: cfg.per_repo_queue,
            wait: cfg.per_repo_queue_timeout,
        }
    }
}

struct Repos {
    settings: RepoSettings,
    map: HashMap<Box<str>, Arc<PackLimiter>>,
}

/// Pack permits per repository, and whether new clones are refused while they are backlogged.
pub(super) struct RepoPermits {
    repos: Arc<Mutex<Repos>>,
    shed_new_clones: AtomicBool,
}

impl RepoPermits {
    pub(super) fn new(cfg: &HttpRateConfig) -> Self {
        RepoPermits {
            repos: Arc::new(Mutex::new(Repos {
                settings: RepoSettings::new(cfg),
                map: HashMap::new(),
            })),
            shed_new_clones: AtomicBool::new(cfg.shed_new_clones),
        }
    }

    /// Busy repositories keep their current limits until they are idle.
    pub(super) fn reconfigure(&self, cfg: &HttpRateConfig) {
        self.shed_new_clones
            .store(cfg.shed_new_clones, Ordering::Relaxed);
        self.lock().settings = RepoSettings::new(cfg);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Repos> {
        self.repos.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A pack-generation slot for the repository `rid_key`: at once, after a short wait in its
    /// bounded queue, or `Err(Shed)` (queue full or waited too long) without doing any work.
    pub(super) fn permit(
        &self,
        rid_key: &str,
    ) -> impl Future<Output = Result<PackPermit, Shed>> + Send + 'static {
        let slot = self.slot(rid_key);
        async move {
            let Some(slot) = slot else {
                return Ok(PackPermit::UNLIMITED);
            };
            let Some(limiter) = slot.limiter.clone() else {
                return Ok(PackPermit::UNLIMITED);
            };
            match limiter.acquire().await {
                Ok(p) => Ok(PackPermit {
                    _permit: Some(p),
                    _slot: Some(slot),
                }),
                Err(reason) => Err(Shed {
                    reason,
                    retry_after: REPO_RETRY_AFTER,
                }),
            }
        }
    }

    /// Whether `rid_key`'s pack slots are all busy with a request already waiting.
    pub(super) fn backlogged(&self, rid_key: &str) -> bool {
        self.lock().map.get(rid_key).is_some_and(|l| l.backlogged())
    }

    pub(super) fn sheds_new_clones(&self) -> bool {
        self.shed_new_clones.load(Ordering::Relaxed)
    }

    /// Repositories with a pack in flight or queued (entries in the map).
    pub(super) fn busy(&self) -> usize {
        self.lock().map.len()
    }

    fn slot(&self, key: &str) -> Option<RepoSlot> {
        let mut repos = self.lock();
        let s = repos.settings;
        if s.concurrent == 0 {
            return None;
        }
        let limiter = match repos.map.get(key) {
            Some(l) => l.clone(),
            None => {
                let l = Arc::new(PackLimiter::new(s.concurrent, s.queue, s.wait));
                repos.map.insert(key.into(), l.clone());
                l
            }
        };
        Some(RepoSlot {
            repos: self.repos.clone(),
            key: key.into(),
            limiter: Some(limiter),
        })
    }
}

/// A claim on a repository's entry in the map (while queued or holding a slot). The entry is
/// removed when the last claim goes. All clones and drops of the `Arc`s happen under the map's
/// lock, so the strong count is exact there.
struct RepoSlot {
    repos: Arc<Mutex<Repos>>,
    key: Box<str>,
    limiter: Option<Arc<PackLimiter>>,
}

impl Drop for RepoSlot {
    fn drop(&mut self) {
        let mut repos = self.repos.lock().unwrap_or_else(PoisonError::into_inner);
        drop(self.limiter.take());
        if repos
            .map
            .get(&self.key)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            repos.map.remove(&self.key);
        }
    }
}
