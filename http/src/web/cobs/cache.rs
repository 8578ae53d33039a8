//! The in-memory cache of materialised COBs: one entry per repository, type and COB id,
//! valid for the tips (and salt) it was built from; the least recently used tenth goes when
//! it is full.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{Built, Kind};
use seedd_proto::crypto::RepoId;

/// Materialised COBs kept at most (the least recently used go first).
pub(crate) const CACHE_ENTRIES: usize = 20_000;

/// Which COB an entry holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) rid: RepoId,
    pub(super) kind: Kind,
    pub(super) id: gix::ObjectId,
}

struct Cached {
    tips: Vec<gix::ObjectId>,
    salt: String,
    /// The view, or why there is none (invalid, over its budget): refusals are remembered
    /// by tips too, so that a repeated request is answered at once.
    view: Built,
    used: u64,
}

/// Materialised COBs by repository, type and id. Cloning shares the one cache (the blocking
/// work that builds entries puts each in as soon as it is built).
#[derive(Clone)]
pub(crate) struct CobCache {
    inner: Arc<Inner>,
}

struct Inner {
    entries: Mutex<HashMap<Key, Cached>>,
    tick: AtomicU64,
    capacity: usize,
}

impl Default for CobCache {
    fn default() -> Self {
        CobCache::new(CACHE_ENTRIES)
    }
}

impl CobCache {
    pub(crate) fn new(capacity: usize) -> Self {
        CobCache {
            inner: Arc::new(Inner {
                entries: Mutex::new(HashMap::new()),
                tick: AtomicU64::new(0),
                capacity: capacity.max(1),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Cached>> {
        self.inner
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cached view of `key` if it was built from these tips (and salt).
    pub(super) fn get(&self, key: &Key, tips: &[gix::ObjectId], salt: &str) -> Option<Built> {
        let tick = self.inner.tick.fetch_add(1, Ordering::Relaxed);
        let mut entries = self.lock();
        let e = entries.get_mut(key)?;
        if e.tips != tips || e.salt != salt {
            return None;
        }
        e.used = tick;
        Some(e.view.clone())
    }

    pub(super) fn put(&self, key: Key, tips: Vec<gix::ObjectId>, salt: String, view: Built) {
        let used = self.inner.tick.fetch_add(1, Ordering::Relaxed);
        let capacity = self.inner.capacity;
        let mut entries = self.lock();
        if entries.len() >= capacity && !entries.contains_key(&key) {
            // Drop the least recently used tenth (at least one) in one pass.
            let mut ticks: Vec<u64> = entries.values().map(|e| e.used).collect();
            ticks.sort_unstable();
            let cut = ticks.get((capacity / 10).max(1) - 1).copied().unwrap_or(0);
            entries.retain(|_, e| e.used > cut);
        }
        entries.insert(
            key,
            Cached {
                tips,
                salt,
                view,
                used,
            },
        );
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }
}
