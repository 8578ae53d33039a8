//! One lock per repository that fetches, purges and maintenance all take: a fetch (its
//! quarantine borrows the live objects through alternates and it migrates a pack before it
//! writes refs), a purge (renames the directory away) and a repack (deletes packs it rolled up)
//! must never overlap on the same repository. Serving takes no lock: git's repack never
//! removes an object a reader can still reach (new packs are in place before old ones go).
//!
//! Async callers (fetch, the admin's "maintain now") wait with [`RepoLocks::lock`], blocking
//! ones (purge, on the blocking pool) with [`RepoLocks::lock_blocking`]; the background worker
//! only tries ([`RepoLocks::try_lock`]) and comes back later.

use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex};

use seedd_proto::crypto::RepoId;
use tokio::sync::Notify;

/// The per-repository locks. Cheap to clone.
#[derive(Clone, Default)]
pub struct RepoLocks {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    held: Mutex<HashSet<RepoId>>,
    /// Wakes blocking waiters.
    cv: Condvar,
    /// Wakes async waiters.
    notify: Notify,
}

/// A held repository lock; released on drop.
pub struct RepoGuard {
    inner: Arc<Inner>,
    rid: RepoId,
}

impl Drop for RepoGuard {
    fn drop(&mut self) {
        self.inner
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.rid);
        self.inner.cv.notify_all();
        self.inner.notify.notify_waiters();
    }
}

impl RepoLocks {
    /// The lock of `rid` if nobody holds it.
    pub(crate) fn try_lock(&self, rid: RepoId) -> Option<RepoGuard> {
        let mut held = self.inner.held.lock().unwrap_or_else(|e| e.into_inner());
        held.insert(rid).then(|| RepoGuard {
            inner: self.inner.clone(),
            rid,
        })
    }

    /// Waits for the lock of `rid`.
    pub async fn lock(&self, rid: RepoId) -> RepoGuard {
        loop {
            // Registered before the check, so a release between the check and the wait is
            // not missed.
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(g) = self.try_lock(rid) {
                return g;
            }
            notified.await;
        }
    }

    /// Waits for the lock of `rid`, blocking the thread (callers on the blocking pool).
    pub fn lock_blocking(&self, rid: RepoId) -> RepoGuard {
        let mut held = self.inner.held.lock().unwrap_or_else(|e| e.into_inner());
        while held.contains(&rid) {
            held = self.inner.cv.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        held.insert(rid);
        RepoGuard {
            inner: self.inner.clone(),
            rid,
        }
    }

    /// Whether someone holds the lock of `rid` now.
    #[cfg(test)]
    pub(crate) fn is_held(&self, rid: &RepoId) -> bool {
        self.inner
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(rid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_holder_per_repository_async_and_blocking() {
        let locks = RepoLocks::default();
        let a = RepoId::from_oid_bytes([1; 20]);
        let b = RepoId::from_oid_bytes([2; 20]);
        let g = locks.lock(a).await;
        assert!(locks.try_lock(a).is_none());
        assert!(locks.try_lock(b).is_some(), "other repositories are free");
        // An async waiter gets it once the holder lets go.
        let l2 = locks.clone();
        let waiter = tokio::spawn(async move { l2.lock(a).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        drop(g);
        let g = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        // A blocking waiter too.
        let l3 = locks.clone();
        let blocked = tokio::task::spawn_blocking(move || {
            let _g = l3.lock_blocking(a);
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!blocked.is_finished());
        assert!(locks.is_held(&a));
        drop(g);
        tokio::time::timeout(Duration::from_secs(5), blocked)
            .await
            .unwrap()
            .unwrap();
        assert!(!locks.is_held(&a));
    }
}
