//! Single-flight pack cache (issue 13 §3; performance.md H1, H13): the response of `git
//! upload-pack` to a cacheable request (no `have` lines: full, shallow and partial clones),
//! already side-band framed, kept in a file under `<data_dir>/cache/packs` and served again
//! without spawning anything — over HTTP and Radicle streams alike ([`reader`]; a stream's
//! entries are keyed with View::All, which HTTP never serves).
//!
//! - **Key** ([`key`]): repository, view, the refs fingerprint of the snapshot the request is
//!   answered against, and the normalised request. A ref change is a new fingerprint, so a new
//!   key; old entries age out or are evicted.
//! - **Single flight**: the first request of a key *claims* it and starts one generation
//!   ([`generate`]); git writes into a temporary file at its own speed, independently of any
//!   client, holding its pack slot only while it runs. The claimant and every identical request
//!   that arrives meanwhile *follow* the file as it grows ([`tail`]); later ones read the
//!   finished file. A finished file is renamed to its final name and marked `Complete`
//!   atomically; a failed one (git error, write error such as a full disk, timeout) is marked
//!   `Failed` and removed, and readers that had not sent anything yet fall back to git.
//! - **Budget**: `max_bytes` of finished files *and files being written* (least recently used
//!   finished ones out as generations grow), none older than `max_age`; a response larger than
//!   the budget is served to its readers and not kept. While files being written alone fill the
//!   budget, a new key is not generated but answered directly (issue 25 §4). An evicted file is
//!   unlinked at once; readers still sending it keep its blocks until they end (a stalled one is
//!   cut by the HTTP write timeout, `http::conn`).
//! - **Fair admission** (issue 25 §4): one client address (IPv6 by /64) may have at most
//!   `max_generations_per_client` generations running; past that its new keys are answered
//!   directly (git killed when the client goes). Refusals counted in
//!   `seedd_pack_cache_generations_refused_total{reason}`.
//! - **Abandoned generations** (issue 25 §4): a generation whose readers all left is killed
//!   (process group) and its file removed, unless it was *popular* — a second reader followed
//!   it — so that one client's abandoned requests cost nothing after it leaves
//!   (`seedd_pack_cache_generations_abandoned_total`).
//! - **Admission**: cache on the first request, or on the second sighting within `max_age`
//!   (a one-off clone is then served directly and never written).
//! - **Restart**: the directory is emptied when the cache opens (nothing on disk is trusted).
//!
//! A key's fingerprint is read from the ref snapshot just before git runs; if refs change in
//! between, the entry may hold the newer refs' answer under the older key. Wants are object
//! ids, so the objects sent are the same; only ref-dependent extras (`include-tag`,
//! `deepen-not`) may differ, and the entry is unreachable once the snapshot is invalidated.

pub mod generate;
pub(crate) mod key;
pub mod tail;

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub use key::{Key, Normalised, MAX_CACHEABLE_REQUEST};
use tail::Progress;
pub(crate) use tail::Tail;

use crate::metrics::Metrics;

/// Requests remembered for the second-sighting admission.
const MAX_SIGHTINGS: usize = 16_384;
/// How often expired entries are looked for (on lookups).
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// How the cache is configured (`http.pack_cache`).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub max_bytes: u64,
    pub max_age: Duration,
    /// Cache on the first request (else on the second sighting).
    pub admit_first: bool,
    /// Generations one client address may have running at once
    /// (`http.pack_cache.max_generations_per_client`).
    pub max_generations_per_client: usize,
}

/// Who reads an entry while it is generated: when the last reader goes and no second reader
/// ever followed, the generation is abandoned (its git killed, its file removed).
#[derive(Default)]
pub(crate) struct Audience {
    readers: AtomicUsize,
    ever: AtomicUsize,
    gone: tokio::sync::Notify,
}

impl Audience {
    fn join(self: &Arc<Self>) -> Arc<Self> {
        self.readers.fetch_add(1, Ordering::SeqCst);
        self.ever.fetch_add(1, Ordering::SeqCst);
        self.clone()
    }

    /// A reader left.
    pub(crate) fn leave(&self) {
        if self.readers.fetch_sub(1, Ordering::SeqCst) == 1 && !self.popular() {
            self.gone.notify_one();
        }
    }

    /// More than one reader came: the generation runs on for later ones.
    fn popular(&self) -> bool {
        self.ever.load(Ordering::SeqCst) >= 2
    }

    /// Resolves once every reader left an unpopular generation.
    pub(crate) async fn abandoned(&self) {
        loop {
            self.gone.notified().await;
            if self.readers.load(Ordering::SeqCst) == 0 && !self.popular() {
                return;
            }
        }
    }
}

struct Entry {
    /// Tells this entry from a later one of the same key.
    id: u64,
    /// The file's current name (temporary while written).
    path: PathBuf,
    progress: watch::Receiver<Progress>,
    /// When it was claimed, then when it completed.
    since: Instant,
    last_used: u64,
    /// Bytes of a complete entry (0 while written).
    bytes: u64,
    /// Its readers while it is generated.
    audience: Arc<Audience>,
}

impl Entry {
    fn complete(&self) -> bool {
        matches!(*self.progress.borrow(), Progress::Complete(_))
    }
}

struct Inner {
    entries: HashMap<Key, Entry>,
    sightings: HashMap<Key, Instant>,
    /// Bytes of complete entries.
    bytes: u64,
    /// Bytes in files still being written.
    inflight: u64,
    /// Generations running per client key (`http::ratelimit::bucket_key`).
    generating: HashMap<u128, usize>,
    clock: u64,
    next_id: u64,
    last_sweep: Instant,
}

pub struct PackCache {
    dir: PathBuf,
    settings: Settings,
    inner: Mutex<Inner>,
    metrics: Option<Arc<Metrics>>,
}

/// What a lookup found.
pub(crate) enum Lookup {
    /// A finished response.
    Hit(Tail),
    /// A response being generated for an identical request.
    Follow(Tail),
    /// Nothing: the caller generates it (once admitted) and reads it like any follower.
    Claim(Claim, Tail),
    /// Not admitted (yet): answer directly.
    Bypass,
}

impl PackCache {
    /// Opens the cache in `dir`, discarding whatever an earlier run left there.
    pub fn open(
        dir: PathBuf,
        settings: Settings,
        metrics: Option<Arc<Metrics>>,
    ) -> std::io::Result<Self> {
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => tracing::info!(dir = %dir.display(), "pack cache: previous files discarded"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        std::fs::create_dir_all(&dir)?;
        if let Some(m) = &metrics {
            m.pack_cache.bytes.set(0);
        }
        Ok(Self {
            dir,
            settings,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                sightings: HashMap::new(),
                bytes: 0,
                inflight: 0,
                generating: HashMap::new(),
                clock: 0,
                next_id: 0,
                last_sweep: Instant::now(),
            }),
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    #[cfg(test)]
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Bytes of complete entries.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// The entry of `key`: a reader of it, a claim to generate it, or `Bypass`.
    #[cfg(test)]
    pub(crate) fn lookup(self: &Arc<Self>, key: Key) -> Lookup {
        self.lookup_for(key, None)
    }

    /// [`lookup`](Self::lookup) for `client` (a `bucket_key`; `None`: not counted per client).
    pub(crate) fn lookup_for(self: &Arc<Self>, key: Key, client: Option<u128>) -> Lookup {
        let mut dead = Vec::new();
        let found = self.lookup_locked(key, client, &mut dead);
        remove_files(dead);
        match &found {
            Lookup::Hit(_) | Lookup::Follow(_) => self.count(|m| m.pack_cache.hits.inc()),
            Lookup::Claim(..) | Lookup::Bypass => self.count(|m| m.pack_cache.misses.inc()),
        }
        found
    }

    fn lookup_locked(
        self: &Arc<Self>,
        key: Key,
        client: Option<u128>,
        dead: &mut Vec<PathBuf>,
    ) -> Lookup {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        if inner.last_sweep.elapsed() >= SWEEP_EVERY {
            inner.last_sweep = Instant::now();
            self.sweep(&mut inner, dead);
        }
        let mut stale = false;
        if let Some(e) = inner.entries.get_mut(&key) {
            let complete = e.complete();
            if complete && e.since.elapsed() > self.settings.max_age {
                stale = true;
            } else {
                // Opened under the lock: the name cannot change meanwhile.
                match std::fs::File::open(&e.path) {
                    Ok(file) => {
                        e.last_used = now;
                        let tail = Tail::new(file, e.progress.clone(), self.metrics.clone())
                            .with_audience(e.audience.join());
                        return if complete {
                            Lookup::Hit(tail)
                        } else {
                            Lookup::Follow(tail)
                        };
                    }
                    Err(err) => {
                        tracing::warn!(path = %e.path.display(), error = %crate::logging::chain(&err), "pack cache file vanished");
                        stale = true;
                    }
                }
            }
        }
        if stale {
            self.evict(&mut inner, &key, dead);
        }
        if !self.settings.admit_first {
            let seen = inner
                .sightings
                .remove(&key)
                .is_some_and(|t| t.elapsed() <= self.settings.max_age);
            if !seen {
                if inner.sightings.len() >= MAX_SIGHTINGS {
                    let max_age = self.settings.max_age;
                    inner.sightings.retain(|_, t| t.elapsed() <= max_age);
                    if inner.sightings.len() >= MAX_SIGHTINGS {
                        inner.sightings.clear();
                    }
                }
                inner.sightings.insert(key, Instant::now());
                return Lookup::Bypass;
            }
        }
        // Files being written fill the budget: answer directly.
        if inner.inflight >= self.settings.max_bytes {
            self.count(|m| {
                m.pack_cache
                    .generations_refused
                    .with_label_values(&["budget"])
                    .inc()
            });
            return Lookup::Bypass;
        }
        if let Some(c) = client {
            let running = inner.generating.get(&c).copied().unwrap_or(0);
            if running >= self.settings.max_generations_per_client {
                self.count(|m| {
                    m.pack_cache
                        .generations_refused
                        .with_label_values(&["per_client"])
                        .inc()
                });
                return Lookup::Bypass;
            }
        }
        inner.next_id += 1;
        let id = inner.next_id;
        let path = self.dir.join(format!("{}.tmp-{id}", key.hex()));
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|w| Ok((w, std::fs::File::open(&path)?)));
        let (writer, reader) = match opened {
            Ok(files) => files,
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %crate::logging::chain(&err), "pack cache: cannot create a file; serving directly");
                dead.push(path);
                return Lookup::Bypass;
            }
        };
        let (tx, rx) = watch::channel(Progress::Writing(0));
        if let Some(c) = client {
            *inner.generating.entry(c).or_insert(0) += 1;
        }
        let audience = Arc::new(Audience::default());
        inner.entries.insert(
            key,
            Entry {
                id,
                path,
                progress: rx.clone(),
                since: Instant::now(),
                last_used: now,
                bytes: 0,
                audience: audience.clone(),
            },
        );
        let claim = Claim {
            cache: self.clone(),
            key,
            id,
            file: Arc::new(writer),
            progress: tx,
            written: 0,
            counted: 0,
            client,
            audience: audience.clone(),
            settled: false,
        };
        let tail = Tail::new(reader, rx, self.metrics.clone()).with_audience(audience.join());
        Lookup::Claim(claim, tail)
    }

    fn count(&self, f: impl FnOnce(&Metrics)) {
        if let Some(m) = &self.metrics {
            f(m);
        }
    }

    /// Drops `key`'s entry (its file is removed by the caller, after the lock).
    fn evict(&self, inner: &mut Inner, key: &Key, dead: &mut Vec<PathBuf>) {
        if let Some(e) = inner.entries.remove(key) {
            inner.bytes -= e.bytes;
            dead.push(e.path);
            self.count(|m| m.pack_cache.evictions.inc());
        }
        self.publish(inner);
    }

    /// Drops complete entries older than `max_age`.
    fn sweep(&self, inner: &mut Inner, dead: &mut Vec<PathBuf>) {
        let max_age = self.settings.max_age;
        let old: Vec<Key> = inner
            .entries
            .iter()
            .filter(|(_, e)| e.complete() && e.since.elapsed() > max_age)
            .map(|(k, _)| *k)
            .collect();
        for k in old {
            self.evict(inner, &k, dead);
        }
    }

    /// Drops least recently used complete entries until they and the files being written are
    /// within the budget.
    fn fit(&self, inner: &mut Inner, dead: &mut Vec<PathBuf>) {
        while inner.bytes + inner.inflight > self.settings.max_bytes {
            let Some(victim) = inner
                .entries
                .iter()
                .filter(|(_, e)| e.complete())
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            self.evict(inner, &victim, dead);
        }
    }

    fn publish(&self, inner: &Inner) {
        self.count(|m| {
            m.pack_cache
                .bytes
                .set(i64::try_from(inner.bytes).unwrap_or(i64::MAX))
        });
    }

    /// A generation wrote `n` more bytes: finished entries make room for them.
    fn grew(&self, n: u64) {
        let mut dead = Vec::new();
        {
            let mut inner = self.lock();
            inner.inflight += n;
            self.fit(&mut inner, &mut dead);
        }
        remove_files(dead);
    }

    /// A generation ended: its `counted` bytes are no longer being written, its client runs one
    /// generation less.
    fn ended(&self, counted: u64, client: Option<u128>) {
        let mut inner = self.lock();
        inner.inflight = inner.inflight.saturating_sub(counted);
        if let Some(c) = client {
            if let Some(n) = inner.generating.get_mut(&c) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    inner.generating.remove(&c);
                }
            }
        }
    }

    /// Bytes in files being written.
    #[cfg(test)]
    pub(crate) fn inflight(&self) -> u64 {
        self.lock().inflight
    }

    /// The generation of `claim` finished with `len` bytes: name the file, keep it within the
    /// budget, and only then tell the readers it is complete.
    fn complete(&self, key: Key, id: u64, len: u64) -> bool {
        let mut dead = Vec::new();
        let ok = {
            let mut inner = self.lock();
            // No longer being written: counted as finished below, or not at all.
            inner.inflight = inner.inflight.saturating_sub(len);
            match inner.entries.get_mut(&key) {
                Some(e) if e.id == id => {
                    let done = self.dir.join(format!("{}.pack", key.hex()));
                    match std::fs::rename(&e.path, &done) {
                        Ok(()) => {
                            e.path = done;
                            e.bytes = len;
                            e.since = Instant::now();
                            inner.bytes += len;
                            true
                        }
                        Err(err) => {
                            tracing::warn!(error = %crate::logging::chain(&err), "pack cache: naming a finished file failed");
                            false
                        }
                    }
                }
                // Dropped while written (its file vanished): readers still finish from their
                // handles; the file goes.
                _ => {
                    dead.push(self.dir.join(format!("{}.tmp-{id}", key.hex())));
                    true
                }
            }
        };
        remove_files(dead);
        ok
    }

    /// After `Complete` was published: a response over the budget is not kept; then the
    /// least recently used ones go.
    fn settle(&self, key: Key, id: u64) {
        let mut dead = Vec::new();
        {
            let mut inner = self.lock();
            let over = inner
                .entries
                .get(&key)
                .is_some_and(|e| e.id == id && e.bytes > self.settings.max_bytes);
            if over {
                tracing::info!(key = %key.hex(), "pack cache: response larger than max_bytes, not kept");
                self.evict(&mut inner, &key, &mut dead);
            }
            self.fit(&mut inner, &mut dead);
            self.publish(&inner);
        }
        remove_files(dead);
    }

    /// The generation of `claim` failed: nobody may read its file as a whole response.
    fn fail(&self, key: Key, id: u64) {
        let path = {
            let mut inner = self.lock();
            match inner.entries.get(&key) {
                Some(e) if e.id == id => inner.entries.remove(&key).map(|e| e.path),
                _ => None,
            }
        };
        let mut dead = Vec::new();
        dead.extend(path);
        // A temporary file of an entry evicted while written has this name.
        dead.push(self.dir.join(format!("{}.tmp-{id}", key.hex())));
        remove_files(dead);
    }
}

/// A cacheable request of `key` answered through `cache` (HTTP and Radicle streams alike): a
/// reader of a finished response, of one being generated for an identical request, or of the
/// generation this call starts — after `permits` (the slots git holds while it runs; an `Err`
/// refuses, and the claimed entry fails so that its followers answer directly) — running
/// `job`. `Ok(None)`: answer directly (not admitted yet, or a generation that failed before
/// writing anything).
pub async fn reader<P, E, F, Fut>(
    cache: &Arc<PackCache>,
    key: Key,
    client: Option<u128>,
    job: impl FnOnce() -> generate::Job,
    permits: F,
) -> Result<Option<Tail>, E>
where
    P: Send + 'static,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<P, E>>,
{
    let mut tail = match cache.lookup_for(key, client) {
        Lookup::Bypass => return Ok(None),
        Lookup::Hit(tail) | Lookup::Follow(tail) => tail,
        Lookup::Claim(claim, tail) => {
            let permits = permits().await?;
            generate::spawn(claim, job(), permits);
            tail
        }
    };
    match tail.ready().await {
        Ok(()) => Ok(Some(tail)),
        Err(e) => {
            tracing::debug!(key = %key.hex(), error = %crate::logging::chain(&e), "cached response unavailable; answering directly");
            Ok(None)
        }
    }
}

fn remove_files(paths: Vec<PathBuf>) {
    for p in paths {
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %p.display(), error = %crate::logging::chain(&e), "pack cache: removing a file failed")
            }
        }
    }
}

/// The right to generate one entry; whoever holds it writes the file. Dropped without
/// [`complete`](Self::complete), the entry fails (its readers see an error, or answer
/// directly if nothing was sent yet) and its file is removed.
pub(crate) struct Claim {
    cache: Arc<PackCache>,
    key: Key,
    id: u64,
    file: Arc<std::fs::File>,
    progress: watch::Sender<Progress>,
    written: u64,
    /// Bytes counted as being written (`Inner::inflight`) until the generation ends.
    counted: u64,
    /// Who started it (counted in `Inner::generating` until it ends).
    client: Option<u128>,
    audience: Arc<Audience>,
    settled: bool,
}

impl Claim {
    pub(crate) fn key(&self) -> Key {
        self.key
    }

    /// The file to append the response to.
    pub(crate) fn file(&self) -> Arc<std::fs::File> {
        self.file.clone()
    }

    /// `n` more bytes are in the file.
    pub(crate) fn wrote(&mut self, n: u64) {
        self.written += n;
        self.counted += n;
        self.cache.grew(n);
        self.progress.send_replace(Progress::Writing(self.written));
    }

    /// Its readers, to see when they all left ([`Audience::abandoned`]).
    pub(crate) fn audience(&self) -> Arc<Audience> {
        self.audience.clone()
    }

    /// The response is whole.
    pub(crate) fn complete(mut self, elapsed: Duration) {
        self.settled = true;
        // `complete` moves them from being written to finished.
        self.counted = 0;
        if self.cache.complete(self.key, self.id, self.written) {
            self.progress.send_replace(Progress::Complete(self.written));
            self.cache
                .count(|m| m.pack_cache.generation.observe(elapsed.as_secs_f64()));
            self.cache.settle(self.key, self.id);
        } else {
            self.progress.send_replace(Progress::Failed);
            self.cache.fail(self.key, self.id);
        }
    }

    /// The response cannot be completed.
    pub(crate) fn fail(mut self) {
        self.settled = true;
        self.progress.send_replace(Progress::Failed);
        self.cache.fail(self.key, self.id);
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.cache.ended(self.counted, self.client.take());
        if !self.settled {
            self.progress.send_replace(Progress::Failed);
            self.cache.fail(self.key, self.id);
        }
    }
}

#[cfg(test)]
mod tests;
