//! Tree listings by repository, commit and path (`/tree/{sha}/{path}`), kept as the serialised
//! answer: a tree at a commit never changes, and the explorer asks for the same few (a
//! repository's root and its directories at the head) on every visit. httpd 0.27 keeps the same
//! cache. Bounded in entries and bytes; the least recently used tenth goes when either is full.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

use seedd_proto::crypto::RepoId;

/// Tree answers kept at most.
pub(crate) const TREE_ENTRIES: usize = 4_096;
/// Bytes of tree answers kept at most.
pub(crate) const TREE_BYTES: usize = 32 << 20;

type Key = (RepoId, gix::ObjectId, String);

struct Entry {
    body: Bytes,
    used: u64,
}

struct Inner {
    map: HashMap<Key, Entry>,
    bytes: usize,
}

/// Serialised tree answers.
pub(crate) struct TreeCache {
    inner: Mutex<Inner>,
    tick: AtomicU64,
    entries: usize,
    bytes: usize,
}

impl Default for TreeCache {
    fn default() -> Self {
        TreeCache::new(TREE_ENTRIES, TREE_BYTES)
    }
}

impl TreeCache {
    pub(crate) fn new(entries: usize, bytes: usize) -> Self {
        TreeCache {
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                bytes: 0,
            }),
            tick: AtomicU64::new(0),
            entries: entries.max(1),
            bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn get(&self, rid: RepoId, sha: gix::ObjectId, path: &str) -> Option<Bytes> {
        let used = self.tick.fetch_add(1, Ordering::Relaxed);
        let mut inner = self.lock();
        let e = inner.map.get_mut(&(rid, sha, path.to_owned()))?;
        e.used = used;
        Some(e.body.clone())
    }

    /// Keep `body`; an answer larger than a tenth of the byte budget is not kept.
    pub(crate) fn put(&self, rid: RepoId, sha: gix::ObjectId, path: &str, body: Bytes) {
        if body.len() > self.bytes / 10 {
            return;
        }
        let used = self.tick.fetch_add(1, Ordering::Relaxed);
        let mut inner = self.lock();
        if inner.map.len() >= self.entries || inner.bytes + body.len() > self.bytes {
            let mut ages: Vec<(u64, Key)> =
                inner.map.iter().map(|(k, e)| (e.used, k.clone())).collect();
            ages.sort_unstable_by_key(|a| a.0);
            // At least a tenth of the entries, then on until the new answer fits.
            let tenth = (self.entries / 10).max(1);
            for (n, (_, k)) in ages.into_iter().enumerate() {
                if n >= tenth && inner.bytes + body.len() <= self.bytes {
                    break;
                }
                if let Some(e) = inner.map.remove(&k) {
                    inner.bytes -= e.body.len();
                }
            }
        }
        inner.bytes += body.len();
        if let Some(old) = inner
            .map
            .insert((rid, sha, path.to_owned()), Entry { body, used })
        {
            inner.bytes -= old.body.len();
        }
    }

    #[cfg(test)]
    fn len(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.map.len(), inner.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rid(n: u8) -> RepoId {
        RepoId::from_oid_bytes([n; 20])
    }

    #[test]
    fn least_recently_used_go_first_within_both_budgets() {
        let sha = gix::ObjectId::null(gix::hash::Kind::Sha1);
        let c = TreeCache::new(10, 1_000);
        for i in 0..10 {
            c.put(rid(i), sha, "", Bytes::from(vec![b'x'; 10]));
        }
        assert!(c.get(rid(0), sha, "").is_some(), "0 is now the most recent");
        c.put(rid(10), sha, "", Bytes::from(vec![b'x'; 10]));
        assert!(c.get(rid(1), sha, "").is_none(), "the oldest went");
        assert!(c.get(rid(0), sha, "").is_some());
        assert_eq!(c.len(), (10, 100));
        // Over the byte budget: older ones go until it fits; too big is not kept at all.
        c.put(rid(20), sha, "a", Bytes::from(vec![b'y'; 100]));
        assert!(c.len().1 <= 1_000);
        c.put(rid(21), sha, "a", Bytes::from(vec![b'y'; 101]));
        assert!(c.get(rid(21), sha, "a").is_none());
        assert_eq!(c.get(rid(20), sha, "a").map(|b| b.len()), Some(100));
    }
}
