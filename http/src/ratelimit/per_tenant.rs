//! Per tenant: one GCRA limiter per tenant, replaced when the tenant's quota changes.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use governor::clock::Clock as _;
use governor::{DefaultDirectRateLimiter, RateLimiter};

use super::quota::quota;

struct TenantBucket {
    rps: u32,
    burst: u32,
    limiter: Arc<DefaultDirectRateLimiter>,
}

#[derive(Default)]
pub(super) struct TenantLimiter {
    buckets: RwLock<HashMap<String, TenantBucket>>,
}

impl TenantLimiter {
    /// One request for `tenant`, whose limit is `rps` requests per second with bursts of
    /// `burst` (0 = no limit; a burst of 0 means `rps`). `Err(wait)` when over it.
    pub(super) fn check(&self, tenant: &str, rps: u32, burst: u32) -> Result<(), Duration> {
        if rps == 0 {
            return Ok(());
        }
        let burst = if burst == 0 { rps } else { burst };
        let check = |l: &DefaultDirectRateLimiter| {
            l.check()
                .map_err(|not_until| not_until.wait_time_from(l.clock().now()))
        };
        {
            let map = self.buckets.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(b) = map.get(tenant) {
                if b.rps == rps && b.burst == burst {
                    return check(&b.limiter);
                }
            }
        }
        let Some(q) = quota(f64::from(rps), burst) else {
            return Ok(());
        };
        let fresh = || TenantBucket {
            rps,
            burst,
            limiter: Arc::new(RateLimiter::direct(q)),
        };
        let mut map = self.buckets.write().unwrap_or_else(PoisonError::into_inner);
        let bucket = map.entry(tenant.to_owned()).or_insert_with(fresh);
        if bucket.rps != rps || bucket.burst != burst {
            *bucket = fresh();
        }
        check(&bucket.limiter)
    }

    /// Forget a tenant's bucket (tenant deleted or its limit removed).
    pub(super) fn forget(&self, tenant: &str) {
        self.buckets
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(tenant);
    }
}
