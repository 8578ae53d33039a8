//! Per client IP: GCRA (`governor`) keyed by the client address, IPv6 per prefix, hot
//! reconfigurable; idle keys swept so memory stays bounded under a flood of addresses.

use std::cell::Cell;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use governor::clock::Clock as _;
use governor::{DefaultKeyedRateLimiter, RateLimiter};

use super::quota::quota;
use seedd_core::config::{Cidr, HttpRateConfig};

/// Checks between two sweeps of idle IP keys, at least (more when many keys are live).
pub(super) const SWEEP_EVERY: u64 = 8192;
/// Checks are counted per thread and added to the shared count in batches of this many, so
/// that threads do not contend on one counter.
pub(super) const COUNT_BATCH: u32 = 256;

thread_local! {
    static LOCAL_CHECKS: Cell<u32> = const { Cell::new(0) };
}

type KeyedLimiter = DefaultKeyedRateLimiter<u128>;

struct IpState {
    /// `None`: per-IP limiting is off.
    limiter: Option<Arc<KeyedLimiter>>,
    rps: f64,
    burst: u32,
    v6_prefix: u8,
    trusted: Arc<[Cidr]>,
}

impl IpState {
    fn new(cfg: &HttpRateConfig, limiter: Option<Arc<KeyedLimiter>>) -> Self {
        IpState {
            limiter,
            rps: cfg.per_ip_requests_per_second,
            burst: cfg.per_ip_burst,
            v6_prefix: cfg.ipv6_prefix.min(128),
            trusted: cfg.trusted_proxies.as_slice().into(),
        }
    }
}

fn keyed(cfg: &HttpRateConfig) -> Option<Arc<KeyedLimiter>> {
    quota(cfg.per_ip_requests_per_second, cfg.per_ip_burst)
        .map(|q| Arc::new(RateLimiter::dashmap(q)))
}

/// The rate-limiting key of a client (also its pack-cache admission key).
pub(crate) use seedd_core::config::client_key as bucket_key;

/// The per-IP limiter and the trusted proxy list.
pub(super) struct IpLimiter {
    /// Read lock-free on every request; replaced whole by `reconfigure` (under `reconfiguring`).
    state: ArcSwap<IpState>,
    reconfiguring: Mutex<()>,
    checks: AtomicU64,
    next_sweep: AtomicU64,
}

impl IpLimiter {
    /// The prefix IPv6 clients are keyed by.
    pub(super) fn v6_prefix(&self) -> u8 {
        self.state.load().v6_prefix
    }

    pub(super) fn new(cfg: &HttpRateConfig) -> Self {
        IpLimiter {
            state: ArcSwap::from_pointee(IpState::new(cfg, keyed(cfg))),
            reconfiguring: Mutex::new(()),
            checks: AtomicU64::new(0),
            next_sweep: AtomicU64::new(SWEEP_EVERY),
        }
    }

    /// The buckets are kept unless the rate or burst changed.
    pub(super) fn reconfigure(&self, cfg: &HttpRateConfig) {
        let _one_at_a_time = self
            .reconfiguring
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let old = self.state.load_full();
        let same_rate = old.rps.to_bits() == cfg.per_ip_requests_per_second.to_bits()
            && old.burst == cfg.per_ip_burst;
        let limiter = if same_rate {
            old.limiter.clone()
        } else {
            keyed(cfg)
        };
        self.state.store(Arc::new(IpState::new(cfg, limiter)));
    }

    /// The trusted proxies, when `peer` is one of them.
    pub(super) fn trusted_for(&self, peer: IpAddr) -> Option<Arc<[Cidr]>> {
        let state = self.state.load();
        state
            .trusted
            .iter()
            .any(|c| c.contains(peer))
            .then(|| state.trusted.clone())
    }

    /// One request from `ip`: `Err(wait)` when over the per-IP rate.
    pub(super) fn check(&self, ip: IpAddr) -> Result<(), Duration> {
        let state = self.state.load();
        let Some(limiter) = &state.limiter else {
            return Ok(());
        };
        let result = limiter.check_key(&bucket_key(ip, state.v6_prefix));
        let batch_done = LOCAL_CHECKS.with(|c| {
            let n = c.get() + 1;
            c.set(if n >= COUNT_BATCH { 0 } else { n });
            n >= COUNT_BATCH
        });
        if batch_done {
            let add = u64::from(COUNT_BATCH);
            let n = self.checks.fetch_add(add, Ordering::Relaxed) + add;
            if n >= self.next_sweep.load(Ordering::Relaxed) {
                self.sweep(limiter, n);
            }
        }
        result.map_err(|not_until| not_until.wait_time_from(limiter.clock().now()))
    }

    /// Drop idle keys now (also done automatically every so many checks).
    pub(super) fn housekeeping(&self) {
        let state = self.state.load();
        if let Some(limiter) = &state.limiter {
            let n = self.checks.load(Ordering::Relaxed);
            let next = self.next_sweep.load(Ordering::Relaxed);
            if self
                .next_sweep
                .compare_exchange(next, u64::MAX, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.sweep_now(limiter, n);
            }
        }
    }

    fn sweep(&self, limiter: &KeyedLimiter, n: u64) {
        let next = self.next_sweep.load(Ordering::Relaxed);
        // One sweeper at a time: the winner parks `next_sweep` at MAX until it is done.
        if n < next
            || self
                .next_sweep
                .compare_exchange(next, u64::MAX, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        self.sweep_now(limiter, n);
    }

    fn sweep_now(&self, limiter: &KeyedLimiter, n: u64) {
        limiter.retain_recent();
        limiter.shrink_to_fit();
        let live = u64::try_from(limiter.len()).unwrap_or(u64::MAX);
        self.next_sweep
            .store(n.saturating_add(SWEEP_EVERY.max(live)), Ordering::Release);
    }

    /// Client keys (addresses or IPv6 prefixes) currently tracked.
    pub(super) fn tracked(&self) -> usize {
        self.state.load().limiter.as_ref().map_or(0, |l| l.len())
    }
}
