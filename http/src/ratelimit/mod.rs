//! HTTP rate limiting and admission, decided before a request does any work.
//!
//! * **Per client IP** (`per_ip.rs`): GCRA (`governor`) keyed by the client address. IPv6
//!   clients are keyed by their /64 (`http.rate.ipv6_prefix`), since one host usually holds a
//!   whole /64; IPv4-mapped IPv6 addresses count as the IPv4 address. The client
//!   (`client.rs`) is the TCP peer, unless the peer is a configured trusted proxy
//!   (`http.rate.trusted_proxies`): then the right-most address of `Forwarded` /
//!   `X-Forwarded-For` that is not itself a trusted proxy. Over the limit: 429 + `Retry-After`
//!   from [`IpRateLimit`] (`layer.rs`, a `Refusal::IpRateLimited`), before the inner service
//!   runs.
//! * **Per tenant** (`per_tenant.rs`): one GCRA limiter per tenant
//!   ([`HttpLimiter::check_tenant`]), replaced when the tenant's quota changes.
//! * **Per repository** (`per_repo.rs`): concurrent pack generations per repository with a
//!   short bounded queue ([`HttpLimiter::repo_permit`], one
//!   [`PackLimiter`](seedd_core::serve::PackLimiter) per busy repository; idle ones are dropped so
//!   the map only holds repositories with requests in flight). Over it: the git route's
//!   `Refusal::RepoBusy` (503 + `Retry-After`).
//!
//! Memory stays bounded under a flood of distinct addresses: every so many checks, keys whose
//! bucket is full again are dropped (`retain_recent`) and the map is shrunk; the interval grows
//! with the number of live keys, so the sweep costs O(1) amortized per request.

mod client;
mod layer;
mod per_ip;
mod per_repo;
mod per_tenant;
mod quota;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;

pub use client::ClientIp;
pub use layer::{IpRateLimit, IpRateLimitLayer};
pub(crate) use per_ip::bucket_key;
pub use per_repo::{PackPermit, Shed};

use per_ip::IpLimiter;

/// Whole seconds for `Retry-After`, rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}
use per_repo::RepoPermits;
use per_tenant::TenantLimiter;
use seedd_core::config::HttpRateConfig;

struct Inner {
    ip: IpLimiter,
    tenants: TenantLimiter,
    repos: RepoPermits,
}

/// Rate limits and per-repository admission for the HTTP front. Cheap to clone (shared
/// state); [`reconfigure`](Self::reconfigure) applies a new configuration in place.
#[derive(Clone)]
pub struct HttpLimiter {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for HttpLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpLimiter")
            .field("tracked_ips", &self.tracked_ips())
            .field("busy_repos", &self.busy_repos())
            .finish()
    }
}

impl HttpLimiter {
    /// The prefix IPv6 clients are keyed by (`http.rate.ipv6_prefix`).
    pub(crate) fn ipv6_prefix(&self) -> u8 {
        self.inner.ip.v6_prefix()
    }

    pub fn new(cfg: &HttpRateConfig) -> Self {
        HttpLimiter {
            inner: Arc::new(Inner {
                ip: IpLimiter::new(cfg),
                tenants: TenantLimiter::default(),
                repos: RepoPermits::new(cfg),
            }),
        }
    }

    /// Apply a new configuration (hot reload). The per-IP buckets are kept unless the rate or
    /// burst changed; busy repositories keep their current limits until they are idle.
    pub fn reconfigure(&self, cfg: &HttpRateConfig) {
        self.inner.ip.reconfigure(cfg);
        self.inner.repos.reconfigure(cfg);
    }

    /// The client's address: the TCP peer, or, when the peer is a trusted proxy, the
    /// right-most address in `Forwarded` (if present, else `X-Forwarded-For`) that is not a
    /// trusted proxy. An unparseable entry stops the walk at the last trusted hop.
    pub fn client_ip(&self, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.ip().to_canonical();
        match self.inner.ip.trusted_for(peer) {
            Some(trusted) => client::forwarded_client(peer, headers, &trusted),
            None => peer,
        }
    }

    /// One request from `ip`: `Err(wait)` when over the per-IP rate.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Duration> {
        self.inner.ip.check(ip)
    }

    /// Drop idle per-IP keys now (also done automatically every so many checks).
    pub fn housekeeping(&self) {
        self.inner.ip.housekeeping();
    }

    /// Client keys (addresses or IPv6 prefixes) currently tracked by the per-IP limiter.
    pub fn tracked_ips(&self) -> usize {
        self.inner.ip.tracked()
    }

    /// One request for `tenant`, whose limit is `rps` requests per second with bursts of
    /// `burst` (0 = no limit; a burst of 0 means `rps`). `Err(wait)` when over it.
    pub fn check_tenant(&self, tenant: &str, rps: u32, burst: u32) -> Result<(), Duration> {
        self.inner.tenants.check(tenant, rps, burst)
    }

    /// Forget a tenant's bucket (tenant deleted or its limit removed).
    pub fn forget_tenant(&self, tenant: &str) {
        self.inner.tenants.forget(tenant);
    }

    /// A pack-generation slot for the repository `rid_key`: at once, after a short wait in its
    /// bounded queue, or `Err(Shed)` (queue full or waited too long) without doing any work.
    pub fn repo_permit(
        &self,
        rid_key: &str,
    ) -> impl Future<Output = Result<PackPermit, Shed>> + Send + 'static {
        self.inner.repos.permit(rid_key)
    }

    /// Whether `rid_key`'s pack slots are all busy with a request already waiting (see
    /// [`PackLimiter::backlogged`](seedd_core::serve::PackLimiter::backlogged)): a new clone's ref
    /// advertisement may be refused then.
    pub fn repo_backlogged(&self, rid_key: &str) -> bool {
        self.inner.repos.backlogged(rid_key)
    }

    /// Whether new clones are refused while packs are backlogged (`http.rate.shed_new_clones`).
    pub fn sheds_new_clones(&self) -> bool {
        self.inner.repos.sheds_new_clones()
    }

    /// Repositories with a pack in flight or queued (entries in the per-repository map).
    pub fn busy_repos(&self) -> usize {
        self.inner.repos.busy()
    }
}
