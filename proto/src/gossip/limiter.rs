//! Token buckets for rate limiting (protocol.md §4.10), sans-IO: time is an input.
//!
//! Unlike radicle's limiter (whole-second refill, clock reset on every call, so a peer that
//! sends faster than once a second never refills) these refill continuously with millisecond
//! precision: a peer sending at exactly the fill rate is never limited.

use std::collections::HashMap;
use std::hash::Hash;

/// Capacity and refill rate of a bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Tokens added per second (may be fractional).
    pub fill_rate: f64,
    /// Largest number of tokens (the burst).
    pub capacity: f64,
}

impl RateLimit {
    /// radicle's defaults for inbound peers: 5/s, burst 1024.
    pub const INBOUND: RateLimit = RateLimit {
        fill_rate: 5.0,
        capacity: 1024.0,
    };
    /// radicle's defaults for outbound peers: 10/s, burst 2048.
    pub const OUTBOUND: RateLimit = RateLimit {
        fill_rate: 10.0,
        capacity: 2048.0,
    };
}

/// One token bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    refilled_at_ms: u64,
}

impl TokenBucket {
    /// A full bucket at time `now_ms`.
    pub fn new(limit: &RateLimit, now_ms: u64) -> Self {
        Self {
            tokens: limit.capacity,
            refilled_at_ms: now_ms,
        }
    }

    /// Takes one token if available (after refilling for the time elapsed since the last call).
    /// A clock that goes backwards refills nothing.
    pub fn take(&mut self, limit: &RateLimit, now_ms: u64) -> bool {
        let elapsed_ms = now_ms.saturating_sub(self.refilled_at_ms);
        if elapsed_ms > 0 {
            self.tokens =
                (self.tokens + limit.fill_rate * elapsed_ms as f64 / 1000.0).min(limit.capacity);
            self.refilled_at_ms = now_ms;
        }
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Tokens currently available (without refilling).
    pub fn tokens(&self) -> f64 {
        self.tokens
    }
}

/// Buckets keyed by host or node id. Idle, full buckets are forgotten by [`prune`](Self::prune)
/// so the map does not grow with every address ever seen.
#[derive(Debug, Clone)]
pub struct Limiter<K> {
    buckets: HashMap<K, TokenBucket>,
}

impl<K: Hash + Eq + Clone> Default for Limiter<K> {
    fn default() -> Self {
        Self {
            buckets: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq + Clone> Limiter<K> {
    /// Takes a token from `key`'s bucket; `false` means rate limited.
    pub fn take(&mut self, key: &K, limit: &RateLimit, now_ms: u64) -> bool {
        self.buckets
            .entry(key.clone())
            .or_insert_with(|| TokenBucket::new(limit, now_ms))
            .take(limit, now_ms)
    }

    /// Drops buckets that would be full again by `now_ms` (they carry no state).
    pub fn prune(&mut self, limit: &RateLimit, now_ms: u64) {
        self.buckets.retain(|_, b| {
            let elapsed = now_ms.saturating_sub(b.refilled_at_ms) as f64 / 1000.0;
            b.tokens + limit.fill_rate * elapsed < limit.capacity
        });
    }

    /// Number of buckets held.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether no bucket is held.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: RateLimit = RateLimit {
        fill_rate: 2.0,
        capacity: 3.0,
    };

    #[test]
    fn burst_then_limited() {
        let mut b = TokenBucket::new(&LIMIT, 1000);
        assert!(b.take(&LIMIT, 1000));
        assert!(b.take(&LIMIT, 1000));
        assert!(b.take(&LIMIT, 1000));
        assert!(!b.take(&LIMIT, 1000));
    }

    #[test]
    fn sub_second_refill() {
        let mut b = TokenBucket::new(&LIMIT, 0);
        for _ in 0..3 {
            assert!(b.take(&LIMIT, 0));
        }
        // 2 tokens/s: one token after 500 ms, none after 499 ms.
        assert!(!b.take(&LIMIT, 499));
        assert!(b.take(&LIMIT, 500));
        assert!(!b.take(&LIMIT, 500));
        // A steady sender at the fill rate is never limited (radicle's quirk would starve it).
        let mut t = 500;
        for _ in 0..100 {
            t += 500;
            assert!(b.take(&LIMIT, t), "at {t} ms");
        }
    }

    #[test]
    fn capacity_caps_refill_and_clock_going_back_is_harmless() {
        let mut b = TokenBucket::new(&LIMIT, 10_000);
        assert!(b.take(&LIMIT, 10_000));
        assert!(b.take(&LIMIT, 1_000_000));
        assert!((b.tokens() - 2.0).abs() < 1e-9);
        assert!(b.take(&LIMIT, 5));
        assert!(b.take(&LIMIT, 5));
        assert!(!b.take(&LIMIT, 5));
    }

    #[test]
    fn limiter_keys_are_independent_and_pruned() {
        let mut l = Limiter::default();
        for _ in 0..3 {
            assert!(l.take(&"a", &LIMIT, 0));
        }
        assert!(!l.take(&"a", &LIMIT, 0));
        assert!(l.take(&"b", &LIMIT, 0));
        assert_eq!(l.len(), 2);
        l.prune(&LIMIT, 1);
        assert_eq!(l.len(), 2);
        l.prune(&LIMIT, 10_000);
        assert!(l.is_empty());
    }
}
