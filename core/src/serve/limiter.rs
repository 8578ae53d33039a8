//! Admission control for pack generation: a global cap on concurrent packs with a short bounded
//! queue. Over the queue, or after waiting too long, the caller is refused at once (503 +
//! `Retry-After`) before any work is done.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Clone)]
pub struct PackLimiter {
    slots: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
    in_flight: Arc<AtomicUsize>,
    queue: usize,
    wait: Duration,
}

impl PackLimiter {
    pub fn new(concurrent: usize, queue: usize, wait: Duration) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(concurrent.max(1))),
            waiting: Arc::new(AtomicUsize::new(0)),
            in_flight: Arc::new(AtomicUsize::new(0)),
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

    /// Every slot busy and at least one request already waiting. The ref advertisement of a
    /// new clone can be refused then (503 at once), so that the slots and queue serve the
    /// clones already under way instead of a clone being refused after its advertisement
    /// (`http.rate.shed_new_clones`; benches/README.md, overload bench).
    pub fn backlogged(&self) -> bool {
        self.slots.available_permits() == 0 && self.waiting() > 0
    }

    fn permit(&self, p: OwnedSemaphorePermit) -> Permit {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        Permit {
            _permit: p,
            in_flight: self.in_flight.clone(),
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
