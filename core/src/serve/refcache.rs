//! Ref snapshots per repository for [`advert`](super::advert): built on first use after a
//! change, shared (`Arc`) and swapped whole, bounded in bytes (least recently used out).
//!
//! Each snapshot also keeps the few answers rendered from it (the v0 advertisement of a view,
//! an `ls-refs` with given arguments): a clone wave asks the same ones, and rendering 10,000
//! refs costs milliseconds where handing out shared bytes costs nothing.
//!
//! A change is announced with [`RefCache::invalidate`] by whoever writes refs (replication's
//! after-fetch step, purge). A build that raced an invalidation is not kept (counted per
//! repository while reads of it are in flight, so nothing is kept per repository after), and
//! no snapshot is older than `max_age`, as a guard against writers that do not announce.
//!
//! A miss asks the [`RefSource`] first (the daemon's is the index, which keeps every ref with
//! its peeled target: a few keys of one column family, no repository opened, no object read)
//! and reads the repository with gix only when the source has no answer for it (not indexed
//! yet, re-indexing after a fetch, an index written before it kept peeled targets). With
//! thousands of repositories most requests miss, and opening a repository — config, loose refs,
//! pack indexes to peel tags, all of it from a disk cache that cannot hold every repository —
//! was most of a request's cost.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::advert::{AdvertError, LsRefs, Snapshot};
use super::View;
use seedd_proto::crypto::RepoId;

/// Default budget for all snapshots together.
pub const DEFAULT_BUDGET: usize = 128 << 20;
/// Default longest life of a snapshot.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(30);

struct Slot {
    snap: Arc<Snapshot>,
    /// Answers rendered from `snap`, at most [`RENDERED_PER_SNAPSHOT`].
    rendered: HashMap<Answer, Bytes>,
    /// The snapshot's and its rendered answers' bytes.
    bytes: usize,
    built: Instant,
    last_used: u64,
}

/// What an answer rendered from a snapshot is for (the same key, the same bytes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Answer {
    /// A smart-HTTP v0 `info/refs` body of a view.
    V0(View),
    /// A v2 `ls-refs` answer of a view to these arguments.
    LsRefs(View, LsRefs),
    /// The snapshot's [`Snapshot::fingerprint`] (the pack cache's key).
    Fingerprint,
    /// Another answer for clients that take gzip: a flag byte (1: gzip-compressed, 0: plain,
    /// for answers too small to be worth it), then the bytes to send.
    Gzip(Box<Answer>),
}

/// Rendered answers kept per snapshot (a view or two, a few `ls-refs` shapes).
const RENDERED_PER_SNAPSHOT: usize = 8;

#[derive(Default)]
struct Inner {
    slots: HashMap<RepoId, Slot>,
    /// Repositories being read for a miss: how many reads, and how many invalidations came
    /// since the first began (a read that saw one keeps nothing). Entries leave with their
    /// last read, so the map is as large as the reads in flight, not as storage.
    reading: HashMap<RepoId, (usize, u64)>,
    /// Bumped by [`RefCache::clear`].
    epoch: u64,
    bytes: usize,
    clock: u64,
}

/// Whether a lookup was answered from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Hit,
    Miss,
}

/// Where a missed snapshot comes from before the repository itself is read.
pub trait RefSource: Send + Sync {
    /// `rid`'s refs exactly as the repository holds them, or `None` when this source cannot
    /// say (then the repository is read).
    fn snapshot(&self, rid: &RepoId) -> Option<Snapshot>;
}

pub struct RefCache {
    inner: Mutex<Inner>,
    budget: usize,
    max_age: Duration,
    source: Option<Arc<dyn RefSource>>,
}

impl RefCache {
    pub fn new(budget: usize, max_age: Duration) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            budget,
            max_age,
            source: None,
        }
    }

    /// Misses ask `source` before reading the repository.
    pub fn with_source(mut self, source: Arc<dyn RefSource>) -> Self {
        self.source = Some(source);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The snapshot of `rid` (stored at `path`), reading the refs when there is none or it is
    /// stale. Reads the disk on a miss: call it off the async workers.
    pub fn get(&self, rid: RepoId, path: &Path) -> Result<(Arc<Snapshot>, Lookup), AdvertError> {
        let generation = {
            let mut inner = self.lock();
            inner.clock += 1;
            let now = inner.clock;
            if let Some(slot) = inner.slots.get_mut(&rid) {
                if slot.built.elapsed() <= self.max_age {
                    slot.last_used = now;
                    return Ok((slot.snap.clone(), Lookup::Hit));
                }
            }
            let epoch = inner.epoch;
            let reading = inner.reading.entry(rid).or_insert((0, 0));
            reading.0 += 1;
            (epoch, reading.1)
        };
        let read = match self.source.as_ref().and_then(|s| s.snapshot(&rid)) {
            Some(snap) => Ok(snap),
            None => crate::storage::open_stored(path)
                .map_err(|e| AdvertError::Refs(Box::new(e)))
                .and_then(|repo| Snapshot::read(&repo)),
        };
        let mut inner = self.lock();
        let epoch = inner.epoch;
        let now_generation = match inner.reading.get_mut(&rid) {
            Some(reading) => {
                reading.0 -= 1;
                let current = (epoch, reading.1);
                if reading.0 == 0 {
                    inner.reading.remove(&rid);
                }
                current
            }
            None => (epoch, u64::MAX),
        };
        let snap = Arc::new(read?);
        let bytes = snap.heap_bytes();
        // Invalidated while we read: serve what we read once, keep nothing.
        if now_generation != generation {
            return Ok((snap, Lookup::Miss));
        }
        if bytes <= self.budget {
            let now = inner.clock;
            if let Some(old) = inner.slots.insert(
                rid,
                Slot {
                    snap: snap.clone(),
                    rendered: HashMap::new(),
                    bytes,
                    built: Instant::now(),
                    last_used: now,
                },
            ) {
                inner.bytes -= old.bytes;
            }
            inner.bytes += bytes;
            evict(&mut inner, rid, self.budget);
        }
        Ok((snap, Lookup::Miss))
    }

    /// The answer `key` for `rid`: rendered once per snapshot with `render`, then shared.
    /// Reads the disk and renders on a miss: call it off the async workers.
    pub(crate) fn answer(
        &self,
        rid: RepoId,
        path: &Path,
        key: Answer,
        render: impl FnOnce(&Snapshot) -> Vec<u8>,
    ) -> Result<(Bytes, Lookup), AdvertError> {
        {
            let mut inner = self.lock();
            inner.clock += 1;
            let now = inner.clock;
            if let Some(slot) = inner.slots.get_mut(&rid) {
                if slot.built.elapsed() <= self.max_age {
                    if let Some(bytes) = slot.rendered.get(&key) {
                        slot.last_used = now;
                        return Ok((bytes.clone(), Lookup::Hit));
                    }
                }
            }
        }
        let (snap, lookup) = self.get(rid, path)?;
        let rendered = Bytes::from(render(&snap));
        let mut inner = self.lock();
        let mut added = false;
        {
            let Inner { slots, bytes, .. } = &mut *inner;
            if let Some(slot) = slots.get_mut(&rid) {
                // Only onto the snapshot it was rendered from (not one read since).
                if Arc::ptr_eq(&slot.snap, &snap)
                    && slot.rendered.len() < RENDERED_PER_SNAPSHOT
                    && rendered.len() <= self.budget
                {
                    let len = rendered.len();
                    if slot.rendered.insert(key, rendered.clone()).is_none() {
                        slot.bytes += len;
                        *bytes += len;
                        added = true;
                    }
                }
            }
        }
        if added {
            evict(&mut inner, rid, self.budget);
        }
        Ok((rendered, lookup))
    }

    /// `rid`'s refs changed (or it is gone): the next lookup reads them again.
    pub fn invalidate(&self, rid: &RepoId) {
        let mut inner = self.lock();
        if let Some(reading) = inner.reading.get_mut(rid) {
            reading.1 += 1;
        }
        if let Some(old) = inner.slots.remove(rid) {
            inner.bytes -= old.bytes;
        }
    }

    /// Every repository may have changed (a storage rescan found changes made outside seedd).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.epoch += 1;
        inner.slots.clear();
        inner.bytes = 0;
    }

    /// Bytes held by snapshots.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

/// Drops the least recently used snapshots but `keep`'s until within `budget`.
fn evict(inner: &mut Inner, keep: RepoId, budget: usize) {
    while inner.bytes > budget {
        let Some(victim) = inner
            .slots
            .iter()
            .filter(|(r, _)| **r != keep)
            .min_by_key(|(_, s)| s.last_used)
            .map(|(r, _)| *r)
        else {
            break;
        };
        if let Some(old) = inner.slots.remove(&victim) {
            inner.bytes -= old.bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn repo(dir: &Path, name: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(&path)
            .status()
            .unwrap();
        path
    }

    fn set_ref(repo: &Path, name: &str) {
        let out = Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["hash-object", "-w", "--stdin"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let oid = String::from_utf8(out.stdout).unwrap();
        let status = Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["update-ref", name, oid.trim()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn rid(n: u8) -> RepoId {
        RepoId::from_oid_bytes([n; 20])
    }

    #[test]
    fn snapshots_are_shared_until_invalidated() {
        let dir = tempfile::tempdir().unwrap();
        let a = repo(dir.path(), "a");
        set_ref(&a, "refs/x/one");
        let cache = RefCache::new(DEFAULT_BUDGET, DEFAULT_MAX_AGE);
        let (first, l1) = cache.get(rid(1), &a).unwrap();
        let (second, l2) = cache.get(rid(1), &a).unwrap();
        assert_eq!((l1, l2), (Lookup::Miss, Lookup::Hit));
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(first.len(), 1);
        // A new ref is not seen until the writer says so.
        set_ref(&a, "refs/x/two");
        assert_eq!(cache.get(rid(1), &a).unwrap().0.len(), 1);
        cache.invalidate(&rid(1));
        let (third, l3) = cache.get(rid(1), &a).unwrap();
        assert_eq!((third.len(), l3), (2, Lookup::Miss));
        assert!(cache.bytes() > 0);
        set_ref(&a, "refs/x/three");
        cache.clear();
        assert_eq!(cache.bytes(), 0);
        assert_eq!(cache.get(rid(1), &a).unwrap().0.len(), 3);
    }

    #[test]
    fn rendered_answers_are_shared_until_the_snapshot_changes() {
        let dir = tempfile::tempdir().unwrap();
        let a = repo(dir.path(), "a");
        set_ref(&a, "refs/x/one");
        let cache = RefCache::new(DEFAULT_BUDGET, DEFAULT_MAX_AGE);
        let renders = std::cell::Cell::new(0);
        let render = |s: &Snapshot| {
            renders.set(renders.get() + 1);
            format!("{} refs", s.len()).into_bytes()
        };
        let key = Answer::V0(View::All);
        let (first, l1) = cache.answer(rid(1), &a, key.clone(), render).unwrap();
        let (second, l2) = cache.answer(rid(1), &a, key.clone(), render).unwrap();
        assert_eq!(
            (&first[..], l1, l2),
            (&b"1 refs"[..], Lookup::Miss, Lookup::Hit)
        );
        assert_eq!(second, first);
        assert_eq!(renders.get(), 1, "rendered once");
        // Another view is another answer of the same snapshot.
        let (_, l3) = cache
            .answer(rid(1), &a, Answer::V0(View::Canonical), render)
            .unwrap();
        assert_eq!((l3, renders.get()), (Lookup::Hit, 2));
        // A change: rendered again from the new refs.
        set_ref(&a, "refs/x/two");
        cache.invalidate(&rid(1));
        assert_eq!(cache.bytes(), 0);
        let (third, _) = cache.answer(rid(1), &a, key, render).unwrap();
        assert_eq!(&third[..], b"2 refs");
        assert_eq!(renders.get(), 3);
    }

    #[test]
    fn old_snapshots_are_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let a = repo(dir.path(), "a");
        let cache = RefCache::new(DEFAULT_BUDGET, Duration::ZERO);
        cache.get(rid(1), &a).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        set_ref(&a, "refs/x/one");
        let (snap, lookup) = cache.get(rid(1), &a).unwrap();
        assert_eq!((snap.len(), lookup), (1, Lookup::Miss));
    }

    #[test]
    fn the_budget_evicts_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let repos: Vec<_> = (0..3)
            .map(|i| {
                let r = repo(dir.path(), &format!("r{i}"));
                set_ref(&r, "refs/x/main");
                r
            })
            .collect();
        let one = {
            let cache = RefCache::new(DEFAULT_BUDGET, DEFAULT_MAX_AGE);
            cache.get(rid(0), &repos[0]).unwrap();
            cache.bytes()
        };
        // Room for two snapshots.
        let cache = RefCache::new(one * 2, DEFAULT_MAX_AGE);
        cache.get(rid(0), &repos[0]).unwrap();
        cache.get(rid(1), &repos[1]).unwrap();
        cache.get(rid(0), &repos[0]).unwrap(); // 0 is now more recent than 1
        cache.get(rid(2), &repos[2]).unwrap(); // evicts 1
        assert_eq!(cache.bytes(), one * 2);
        assert_eq!(cache.get(rid(0), &repos[0]).unwrap().1, Lookup::Hit);
        assert_eq!(cache.get(rid(2), &repos[2]).unwrap().1, Lookup::Hit);
        assert_eq!(cache.get(rid(1), &repos[1]).unwrap().1, Lookup::Miss);
    }

    /// A source that answers some repositories and counts the questions.
    struct Source {
        answers: std::collections::HashMap<RepoId, Snapshot>,
        asked: std::sync::atomic::AtomicUsize,
    }

    impl RefSource for Source {
        fn snapshot(&self, rid: &RepoId) -> Option<Snapshot> {
            self.asked
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.answers.get(rid).cloned()
        }
    }

    /// A miss takes the source's snapshot when it has one (the repository is not read: here
    /// it does not even exist), and reads the repository when it has none.
    #[test]
    fn misses_ask_the_source_first() {
        let dir = tempfile::tempdir().unwrap();
        let b = repo(dir.path(), "b");
        set_ref(&b, "refs/x/one");
        let from_source = {
            let r = repo(dir.path(), "elsewhere");
            set_ref(&r, "refs/x/one");
            set_ref(&r, "refs/x/two");
            let r = gix::open_opts(&r, gix::open::Options::isolated()).unwrap();
            Snapshot::read(&r).unwrap()
        };
        let source = Arc::new(Source {
            answers: [(rid(1), from_source.clone())].into_iter().collect(),
            asked: Default::default(),
        });
        let cache = RefCache::new(DEFAULT_BUDGET, DEFAULT_MAX_AGE).with_source(source.clone());
        let missing = dir.path().join("not-a-repository");
        let (snap, lookup) = cache.get(rid(1), &missing).unwrap();
        assert_eq!((&*snap, lookup), (&from_source, Lookup::Miss));
        assert_eq!(cache.get(rid(1), &missing).unwrap().1, Lookup::Hit);
        // No answer: the repository itself.
        let (snap, _) = cache.get(rid(2), &b).unwrap();
        assert_eq!(snap.len(), 1);
        assert!(cache.get(rid(3), &missing).is_err());
        let asked = source.asked.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(asked, 3, "once per miss");
    }

    /// A source that invalidates the repository while it is being read (a fetch landing).
    struct Racing {
        cache: std::sync::OnceLock<std::sync::Weak<RefCache>>,
        snap: Snapshot,
    }

    impl RefSource for Racing {
        fn snapshot(&self, rid: &RepoId) -> Option<Snapshot> {
            if let Some(cache) = self.cache.get().and_then(std::sync::Weak::upgrade) {
                cache.invalidate(rid);
            }
            Some(self.snap.clone())
        }
    }

    /// A read that raced an invalidation is served once and not kept; what the cache tracks
    /// for it leaves with the read (also a failed one): invalidations of repositories nobody
    /// reads leave nothing behind (issue 30 §3: per-repository maps are pruned).
    #[test]
    fn a_read_that_raced_an_invalidation_keeps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let a = repo(dir.path(), "a");
        set_ref(&a, "refs/x/one");
        let snap =
            Snapshot::read(&gix::open_opts(&a, gix::open::Options::isolated()).unwrap()).unwrap();
        let source = Arc::new(Racing {
            cache: std::sync::OnceLock::new(),
            snap,
        });
        let cache =
            Arc::new(RefCache::new(DEFAULT_BUDGET, DEFAULT_MAX_AGE).with_source(source.clone()));
        source.cache.set(Arc::downgrade(&cache)).unwrap();
        let (served, lookup) = cache.get(rid(1), &a).unwrap();
        assert_eq!((served.len(), lookup), (1, Lookup::Miss));
        assert_eq!(cache.bytes(), 0, "raced: not kept");
        assert_eq!(cache.get(rid(1), &a).unwrap().1, Lookup::Miss);
        for n in 0..100 {
            cache.invalidate(&rid(n));
        }
        assert!(cache.lock().reading.is_empty());
        // A failed read leaves nothing either.
        let plain = RefCache::new(DEFAULT_BUDGET, DEFAULT_MAX_AGE);
        assert!(plain.get(rid(2), &dir.path().join("missing")).is_err());
        assert!(plain.lock().reading.is_empty());
    }
}
