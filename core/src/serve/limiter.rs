//! Admission control for pack generation: a global cap on concurrent packs with a bounded
//! queue. Over the queue, or after waiting too long, the caller is refused at once (503 +
//! `Retry-After`) before any work is done. The limiter keeps a moving average of how long a
//! slot is held, so [`PackLimiter::backlogged`] can tell a burst the queue will absorb from a
//! backlog it will not.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a request was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    QueueFull,
    QueueTimeout,
}

impl Admission {
    /// Every refusal (metrics start each at 0; a test in `metrics` keeps it complete).
    pub const ALL: [Admission; 2] = [Admission::QueueFull, Admission::QueueTimeout];

    pub fn reason(self) -> &'static str {
        match self {
            Admission::QueueFull => "queue_full",
            Admission::QueueTimeout => "queue_timeout",
        }
    }
}

/// Held while a pack is generated; releases the slot on drop.
pub struct Permit {
    _permit: OwnedSemaphorePermit,
    in_flight: Arc<AtomicUsize>,
    hold: Arc<AtomicU64>,
    since: Instant,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        let held = u64::try_from(self.since.elapsed().as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        // Exponential moving average, weight 1/8 (a lost update under a race only drops one
        // sample).
        let old = self.hold.load(Ordering::Relaxed);
        let new = if old == 0 {
            held
        } else {
            old - old / 8 + held / 8
        };
        self.hold.store(new.max(1), Ordering::Relaxed);
    }
}

#[derive(Clone)]
pub struct PackLimiter {
    slots: Arc<Semaphore>,
    concurrent: usize,
    waiting: Arc<AtomicUsize>,
    in_flight: Arc<AtomicUsize>,
    /// Moving average of how long a slot is held, µs (0: no slot released yet).
    hold: Arc<AtomicU64>,
    queue: usize,
    wait: Duration,
}

impl PackLimiter {
    pub fn new(concurrent: usize, queue: usize, wait: Duration) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(concurrent.max(1))),
            concurrent: concurrent.max(1),
            waiting: Arc::new(AtomicUsize::new(0)),
            in_flight: Arc::new(AtomicUsize::new(0)),
            hold: Arc::new(AtomicU64::new(0)),
            queue,
            wait,
        }
    }

    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// How long a slot is held on average (`None` before the first is released).
    pub fn mean_hold(&self) -> Option<Duration> {
        match self.hold.load(Ordering::Relaxed) {
            0 => None,
            us => Some(Duration::from_micros(us)),
        }
    }

    /// Every slot busy, requests waiting, and the queue past what it can absorb: full, or (from
    /// the average hold time) a new request would wait at least half the queue timeout.
    /// The ref advertisement of a new clone can be refused then (503 at once), so that the
    /// slots and queue serve the clones already under way instead of a clone being refused
    /// after its advertisement (`http.rate.shed_new_clones`; benches/README.md, overload
    /// bench). A burst the queue drains in time is not refused (anchors bench: 64 fetches of
    /// one repository at once).
    pub fn backlogged(&self) -> bool {
        let waiting = self.waiting();
        if self.slots.available_permits() > 0 || waiting == 0 {
            return false;
        }
        if waiting >= self.queue {
            return true;
        }
        // No pack finished yet (a per-repository limiter is new after every idle spell): no
        // estimate, so only a full queue sheds. A clone let through costs an advertisement
        // from the ref snapshot (no process) if its pack request then finds the queue full.
        self.mean_hold().is_some_and(|hold| {
            let turns = u32::try_from((waiting + 1).div_ceil(self.concurrent)).unwrap_or(u32::MAX);
            hold.saturating_mul(turns).saturating_mul(2) >= self.wait
        })
    }

    fn permit(&self, p: OwnedSemaphorePermit) -> Permit {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        Permit {
            _permit: p,
            in_flight: self.in_flight.clone(),
            hold: self.hold.clone(),
            since: Instant::now(),
        }
    }

    /// Take a slot now, or queue for at most the configured wait.
    pub async fn acquire(&self) -> Result<Permit, Admission> {
        if let Ok(p) = self.slots.clone().try_acquire_owned() {
            return Ok(self.permit(p));
        }
        // Reserve a queue place atomically.
        let mut cur = self.waiting.load(Ordering::Relaxed);
        loop {
            if cur >= self.queue {
                return Err(Admission::QueueFull);
            }
            match self.waiting.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        let result = tokio::time::timeout(self.wait, self.slots.clone().acquire_owned()).await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        match result {
            Ok(Ok(p)) => Ok(self.permit(p)),
            // The semaphore is never closed; treat it like a timeout if it were.
            Ok(Err(_)) | Err(_) => Err(Admission::QueueTimeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn admits_up_to_the_cap_then_queues_then_refuses() {
        let l = PackLimiter::new(1, 1, Duration::from_millis(50));
        let first = l.acquire().await.unwrap();
        assert_eq!(l.in_flight(), 1);
        // Second waits in the queue and times out.
        let l2 = l.clone();
        let queued = tokio::spawn(async move { l2.acquire().await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(l.waiting(), 1);
        assert!(l.backlogged());
        // Third finds the queue full immediately.
        assert_eq!(l.acquire().await.err(), Some(Admission::QueueFull));
        assert_eq!(queued.await.unwrap().err(), Some(Admission::QueueTimeout));
        assert!(!l.backlogged(), "nobody waits any more");
        drop(first);
        assert_eq!(l.in_flight(), 0);
        assert!(l.acquire().await.is_ok());
    }

    /// A short queue behind fast packs is a burst, not a backlog; it becomes one when the
    /// queue is half full or the average hold time says the wait would reach half the timeout.
    #[tokio::test]
    async fn backlogged_only_when_the_queue_cannot_absorb_it() {
        let l = PackLimiter::new(1, 8, Duration::from_millis(1000));
        // No hold time known yet (a fresh per-repository limiter after an idle spell): only a
        // full queue is a backlog, so a burst that starts together is not shed.
        let first = l.acquire().await.unwrap();
        let mut queued = Vec::new();
        for n in 1..=8 {
            let l2 = l.clone();
            queued.push(tokio::spawn(async move { l2.acquire().await.map(drop) }));
            tokio::time::sleep(Duration::from_millis(5)).await;
            assert_eq!(l.waiting(), n);
            assert_eq!(l.backlogged(), n == 8, "{n} waiting, no hold time known");
        }
        drop(first);
        for q in queued {
            assert!(q.await.unwrap().is_ok());
        }
        assert!(!l.backlogged());
        // Packs held ~10 ms: 3 waiting is ~40 ms of wait, far under half of 1 s.
        let held = l.acquire().await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(held);
        let hold = l.mean_hold().unwrap();
        assert!(
            hold >= Duration::from_millis(10) && hold < Duration::from_millis(500),
            "{hold:?}"
        );
        let first = l.acquire().await.unwrap();
        let mut queued = Vec::new();
        for _ in 0..3 {
            let l2 = l.clone();
            queued.push(tokio::spawn(async move { l2.acquire().await.map(drop) }));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(l.waiting(), 3);
        assert!(!l.backlogged(), "3 × {hold:?} is a burst the queue absorbs");
        // With fast packs, more than half the queue is still a burst; a full queue is not.
        for n in 4..=8 {
            let l2 = l.clone();
            queued.push(tokio::spawn(async move { l2.acquire().await.map(drop) }));
            tokio::time::sleep(Duration::from_millis(5)).await;
            assert_eq!(l.waiting(), n);
            assert_eq!(l.backlogged(), n == 8, "{n} of 8 waiting, hold {hold:?}");
        }
        drop(first);
        for q in queued {
            assert!(q.await.unwrap().is_ok());
        }
        // Packs held ~300 ms: one waiting already means ≥ 500 ms of wait.
        let slow = PackLimiter::new(1, 8, Duration::from_millis(1000));
        let held = slow.acquire().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(held);
        let first = slow.acquire().await.unwrap();
        let s2 = slow.clone();
        let waiter = tokio::spawn(async move { s2.acquire().await.map(drop) });
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(slow.backlogged(), "hold {:?}", slow.mean_hold());
        drop(first);
        assert!(waiter.await.unwrap().is_ok());
    }

    #[tokio::test]
    async fn a_queued_request_gets_the_released_slot() {
        let l = PackLimiter::new(1, 4, Duration::from_secs(5));
        let first = l.acquire().await.unwrap();
        let l2 = l.clone();
        let queued = tokio::spawn(async move { l2.acquire().await.is_ok() });
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(first);
        assert!(queued.await.unwrap());
    }
}
