//! HTTP rate limiting and admission, decided before a request does any work.
//!
//! * **Per client IP**: GCRA (`governor`) keyed by the client address. IPv6 clients are keyed
//!   by their /64 (`http.rate.ipv6_prefix`), since one host usually holds a whole /64;
//!   IPv4-mapped IPv6 addresses count as the IPv4 address. The client is the TCP peer, unless
//!   the peer is a configured trusted proxy (`http.rate.trusted_proxies`): then the right-most
//!   address of `Forwarded` / `X-Forwarded-For` that is not itself a trusted proxy. Over the
//!   limit: 429 + `Retry-After` from [`IpRateLimit`], before the inner service runs.
//! * **Per tenant**: one GCRA limiter per tenant ([`HttpLimiter::check_tenant`]), replaced when
//!   the tenant's quota changes.
//! * **Per repository**: concurrent pack generations per repository with a short bounded queue
//!   ([`HttpLimiter::repo_permit`], one [`PackLimiter`] per busy repository; idle ones are
//!   dropped so the map only holds repositories with requests in flight). Over it: 503 +
//!   `Retry-After` ([`shed_response`]).
//!
//! Memory stays bounded under a flood of distinct addresses: every so many checks, keys whose
//! bucket is full again are dropped (`retain_recent`) and the map is shrunk; the interval grows
//! with the number of live keys, so the sweep costs O(1) amortized per request.

use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderMap, HeaderValue, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::future::{ready, Either, Ready};
use governor::clock::Clock as _;
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::HttpRateConfig;
use crate::metrics::Metrics;
use crate::serve::{Admission, PackLimiter, Permit};

/// Checks between two sweeps of idle IP keys, at least (more when many keys are live).
const SWEEP_EVERY: u64 = 8192;
/// Checks are counted per thread and added to the shared count in batches of this many, so
/// that threads do not contend on one counter.
const COUNT_BATCH: u32 = 256;

thread_local! {
    static LOCAL_CHECKS: Cell<u32> = const { Cell::new(0) };
}
/// `Retry-After` for a request shed by a repository's pack queue.
const REPO_RETRY_AFTER: Duration = Duration::from_secs(1);

type KeyedLimiter = DefaultKeyedRateLimiter<u128>;

/// An address block, e.g. `10.0.0.0/8`, `2001:db8::/32`, or a single address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// Network in IPv6 space (IPv4 as IPv4-mapped `::ffff:a.b.c.d`), host bits cleared.
    net: u128,
    /// Prefix length in IPv6 space (IPv4 /n is /96+n).
    len: u8,
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        (ip_bits(ip) & mask(self.len)) == self.net
    }
}

impl FromStr for Cidr {
    type Err = String;

    /// `addr/len` or a bare address (a single host). Host bits under the prefix are ignored.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| format!("{s:?}: expected an IP address or CIDR like 10.0.0.0/8"))?;
        let (max, offset) = match ip {
            IpAddr::V4(_) => (32u8, 96u8),
            IpAddr::V6(_) => (128u8, 0u8),
        };
        let len = match len {
            None => max,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(format!("{s:?}: prefix length must be 0–{max}")),
            },
        };
        let len = len + offset;
        Ok(Cidr {
            net: ip_bits(ip) & mask(len),
            len,
        })
    }
}

/// The address in IPv6 space; IPv4 as IPv4-mapped, so both forms of an IPv4 client agree.
fn ip_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn mask(len: u8) -> u128 {
    match len {
        0 => 0,
        l if l >= 128 => u128::MAX,
        l => u128::MAX << (128 - u32::from(l)),
    }
}

/// The rate-limiting key of a client: IPv4 (or IPv4-mapped) as is, IPv6 masked to `v6_prefix`.
fn bucket_key(ip: IpAddr, v6_prefix: u8) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => u128::from(v6),
        IpAddr::V6(v6) => u128::from(v6) & mask(v6_prefix),
    }
}

/// A GCRA quota of `rps` requests per second (fractional allowed) with `burst` at once.
/// `None` when `rps` is 0 (no limit) or not a usable number.
fn quota(rps: f64, burst: u32) -> Option<Quota> {
    if !(rps.is_finite() && rps > 0.0) {
        return None;
    }
    let period = Duration::try_from_secs_f64(1.0 / rps).ok()?;
    let burst = NonZeroU32::new(burst.max(1))?;
    Some(Quota::with_period(period)?.allow_burst(burst))
}

/// Client address as the rate limiters and handlers see it (set by [`IpRateLimit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

/// Why a request was shed by a repository's pack queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shed {
    pub reason: Admission,
    pub retry_after: Duration,
}

/// Held while a pack is generated for a repository; frees the slot (and, when it was the
/// last user, the repository's entry) on drop.
pub struct PackPermit {
    // Field order matters: the slot is released before the entry is (maybe) removed.
    _permit: Option<Permit>,
    _slot: Option<RepoSlot>,
}

impl std::fmt::Debug for PackPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackPermit")
            .field("limited", &self._permit.is_some())
            .finish()
    }
}

struct IpState {
    /// `None`: per-IP limiting is off.
    limiter: Option<Arc<KeyedLimiter>>,
    rps: f64,
    burst: u32,
    v6_prefix: u8,
    trusted: Arc<[Cidr]>,
}

struct TenantBucket {
    rps: u32,
    burst: u32,
    limiter: Arc<DefaultDirectRateLimiter>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct RepoSettings {
    /// 0: no per-repository limit.
    concurrent: usize,
    queue: usize,
    wait: Duration,
}

struct Repos {
    settings: RepoSettings,
    map: HashMap<Box<str>, Arc<PackLimiter>>,
}

struct Inner {
    /// Read lock-free on every request; replaced whole by `reconfigure` (under `reconfiguring`).
    ip: ArcSwap<IpState>,
    reconfiguring: Mutex<()>,
    shed_new_clones: std::sync::atomic::AtomicBool,
    checks: AtomicU64,
    next_sweep: AtomicU64,
    tenants: RwLock<HashMap<String, TenantBucket>>,
    repos: Arc<Mutex<Repos>>,
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

fn trusted_list(cfg: &HttpRateConfig) -> Arc<[Cidr]> {
    // `Config::validate` rejects bad entries; skip any that slip through rather than fail.
    cfg.trusted_proxies
        .iter()
        .filter_map(|s| match s.parse::<Cidr>() {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(error = %e, "ignoring http.rate.trusted_proxies entry");
                None
            }
        })
        .collect()
}

fn repo_settings(cfg: &HttpRateConfig) -> RepoSettings {
    RepoSettings {
        concurrent: cfg.per_repo_concurrent_packs,
        queue: cfg.per_repo_queue,
        wait: cfg.per_repo_queue_timeout,
    }
}

impl HttpLimiter {
    pub fn new(cfg: &HttpRateConfig) -> Self {
        let ip = IpState {
            limiter: quota(cfg.per_ip_requests_per_second, cfg.per_ip_burst)
                .map(|q| Arc::new(RateLimiter::dashmap(q))),
            rps: cfg.per_ip_requests_per_second,
            burst: cfg.per_ip_burst,
            v6_prefix: cfg.ipv6_prefix.min(128),
            trusted: trusted_list(cfg),
        };
        HttpLimiter {
            inner: Arc::new(Inner {
                ip: ArcSwap::from_pointee(ip),
                reconfiguring: Mutex::new(()),
                shed_new_clones: std::sync::atomic::AtomicBool::new(cfg.shed_new_clones),
                checks: AtomicU64::new(0),
                next_sweep: AtomicU64::new(SWEEP_EVERY),
                tenants: RwLock::new(HashMap::new()),
                repos: Arc::new(Mutex::new(Repos {
                    settings: repo_settings(cfg),
                    map: HashMap::new(),
                })),
            }),
        }
    }

    /// Apply a new configuration (hot reload). The per-IP buckets are kept unless the rate or
    /// burst changed; busy repositories keep their current limits until they are idle.
    pub fn reconfigure(&self, cfg: &HttpRateConfig) {
        self.inner
            .shed_new_clones
            .store(cfg.shed_new_clones, Ordering::Relaxed);
        {
            let _one_at_a_time = self
                .inner
                .reconfiguring
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let old = self.inner.ip.load_full();
            let same_rate = old.rps.to_bits() == cfg.per_ip_requests_per_second.to_bits()
                && old.burst == cfg.per_ip_burst;
            let limiter = if same_rate {
                old.limiter.clone()
            } else {
                quota(cfg.per_ip_requests_per_second, cfg.per_ip_burst)
                    .map(|q| Arc::new(RateLimiter::dashmap(q)))
            };
            self.inner.ip.store(Arc::new(IpState {
                limiter,
                rps: cfg.per_ip_requests_per_second,
                burst: cfg.per_ip_burst,
                v6_prefix: cfg.ipv6_prefix.min(128),
                trusted: trusted_list(cfg),
            }));
        }
        let mut repos = self
            .inner
            .repos
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        repos.settings = repo_settings(cfg);
    }

    /// The client's address: the TCP peer, or, when the peer is a trusted proxy, the
    /// right-most address in `Forwarded` (if present, else `X-Forwarded-For`) that is not a
    /// trusted proxy. An unparseable entry stops the walk at the last trusted hop.
    pub fn client_ip(&self, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.ip().to_canonical();
        let trusted = {
            let ip = self.inner.ip.load();
            if ip.trusted.is_empty() || !ip.trusted.iter().any(|c| c.contains(peer)) {
                return peer;
            }
            ip.trusted.clone()
        };
        let is_trusted = |a: IpAddr| trusted.iter().any(|c| c.contains(a));
        let forwarded = headers.get_all(header::FORWARDED);
        let mut hops: Vec<Option<IpAddr>> = Vec::new();
        if forwarded.iter().next().is_some() {
            for v in forwarded {
                let Ok(v) = v.to_str() else {
                    hops.push(None);
                    continue;
                };
                for element in v.split(',') {
                    let node = element.split(';').find_map(|pair| {
                        let (k, v) = pair.split_once('=')?;
                        k.trim().eq_ignore_ascii_case("for").then_some(v)
                    });
                    if let Some(node) = node {
                        hops.push(parse_node(node));
                    }
                }
            }
        } else {
            for v in headers.get_all("x-forwarded-for") {
                let Ok(v) = v.to_str() else {
                    hops.push(None);
                    continue;
                };
                hops.extend(v.split(',').map(parse_node));
            }
        }
        let mut client = peer;
        for hop in hops.into_iter().rev() {
            match hop {
                Some(ip) if is_trusted(ip) => client = ip,
                Some(ip) => return ip,
                None => break,
            }
        }
        client
    }

    /// One request from `ip`: `Err(wait)` when over the per-IP rate.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Duration> {
        let state = self.inner.ip.load();
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
            let n = self.inner.checks.fetch_add(add, Ordering::Relaxed) + add;
            if n >= self.inner.next_sweep.load(Ordering::Relaxed) {
                self.sweep(limiter, n);
            }
        }
        result.map_err(|not_until| not_until.wait_time_from(limiter.clock().now()))
    }

    /// Drop idle per-IP keys now (also done automatically every so many checks).
    pub fn housekeeping(&self) {
        let state = self.inner.ip.load();
        if let Some(limiter) = &state.limiter {
            let n = self.inner.checks.load(Ordering::Relaxed);
            let next = self.inner.next_sweep.load(Ordering::Relaxed);
            if self
                .inner
                .next_sweep
                .compare_exchange(next, u64::MAX, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.sweep_now(limiter, n);
            }
        }
    }

    fn sweep(&self, limiter: &KeyedLimiter, n: u64) {
        let next = self.inner.next_sweep.load(Ordering::Relaxed);
        // One sweeper at a time: the winner parks `next_sweep` at MAX until it is done.
        if n < next
            || self
                .inner
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
        self.inner
            .next_sweep
            .store(n.saturating_add(SWEEP_EVERY.max(live)), Ordering::Release);
    }

    /// Client keys (addresses or IPv6 prefixes) currently tracked by the per-IP limiter.
    pub fn tracked_ips(&self) -> usize {
        self.inner.ip.load().limiter.as_ref().map_or(0, |l| l.len())
    }

    /// One request for `tenant`, whose limit is `rps` requests per second with bursts of
    /// `burst` (0 = no limit; a burst of 0 means `rps`). `Err(wait)` when over it.
    pub fn check_tenant(&self, tenant: &str, rps: u32, burst: u32) -> Result<(), Duration> {
        if rps == 0 {
            return Ok(());
        }
        let burst = if burst == 0 { rps } else { burst };
        let check = |l: &DefaultDirectRateLimiter| {
            l.check()
                .map_err(|not_until| not_until.wait_time_from(l.clock().now()))
        };
        {
            let map = self
                .inner
                .tenants
                .read()
                .unwrap_or_else(PoisonError::into_inner);
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
        let mut map = self
            .inner
            .tenants
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let bucket = map.entry(tenant.to_owned()).or_insert_with(fresh);
        if bucket.rps != rps || bucket.burst != burst {
            *bucket = fresh();
        }
        check(&bucket.limiter)
    }

    /// Forget a tenant's bucket (tenant deleted or its limit removed).
    pub fn forget_tenant(&self, tenant: &str) {
        self.inner
            .tenants
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(tenant);
    }

    /// A pack-generation slot for the repository `rid_key`: at once, after a short wait in its
    /// bounded queue, or `Err(Shed)` (queue full or waited too long) without doing any work.
    pub fn repo_permit(
        &self,
        rid_key: &str,
    ) -> impl Future<Output = Result<PackPermit, Shed>> + Send + 'static {
        let slot = self.repo_slot(rid_key);
        async move {
            let Some(slot) = slot else {
                return Ok(PackPermit {
                    _permit: None,
                    _slot: None,
                });
            };
            let Some(limiter) = slot.limiter.clone() else {
                return Ok(PackPermit {
                    _permit: None,
                    _slot: None,
                });
            };
            match limiter.acquire().await {
                Ok(p) => Ok(PackPermit {
                    _permit: Some(p),
                    _slot: Some(slot),
                }),
                Err(reason) => Err(Shed {
                    reason,
                    retry_after: REPO_RETRY_AFTER,
                }),
            }
        }
    }

    /// Whether `rid_key`'s pack slots are all busy with a request already waiting (see
    /// [`PackLimiter::backlogged`]): a new clone's ref advertisement may be refused then.
    pub fn repo_backlogged(&self, rid_key: &str) -> bool {
        self.inner
            .repos
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .get(rid_key)
            .is_some_and(|l| l.backlogged())
    }

    /// Whether new clones are refused while packs are backlogged (`http.rate.shed_new_clones`).
    pub fn sheds_new_clones(&self) -> bool {
        self.inner.shed_new_clones.load(Ordering::Relaxed)
    }

    /// Repositories with a pack in flight or queued (entries in the per-repository map).
    pub fn busy_repos(&self) -> usize {
        self.inner
            .repos
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .len()
    }

    fn repo_slot(&self, key: &str) -> Option<RepoSlot> {
        let mut repos = self
            .inner
            .repos
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let s = repos.settings;
        if s.concurrent == 0 {
            return None;
        }
        let limiter = match repos.map.get(key) {
            Some(l) => l.clone(),
            None => {
                let l = Arc::new(PackLimiter::new(s.concurrent, s.queue, s.wait));
                repos.map.insert(key.into(), l.clone());
                l
            }
        };
        Some(RepoSlot {
            repos: self.inner.repos.clone(),
            key: key.into(),
            limiter: Some(limiter),
        })
    }
}

/// A claim on a repository's entry in the map (while queued or holding a slot). The entry is
/// removed when the last claim goes. All clones and drops of the `Arc`s happen under the map's
/// lock, so the strong count is exact there.
struct RepoSlot {
    repos: Arc<Mutex<Repos>>,
    key: Box<str>,
    limiter: Option<Arc<PackLimiter>>,
}

impl Drop for RepoSlot {
    fn drop(&mut self) {
        let mut repos = self.repos.lock().unwrap_or_else(PoisonError::into_inner);
        drop(self.limiter.take());
        if repos
            .map
            .get(&self.key)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            repos.map.remove(&self.key);
        }
    }
}

/// An address from a `Forwarded` `for=` value or an `X-Forwarded-For` entry: quoted or not,
/// `[v6]:port`, `v4:port`, bare addresses. `None` for `unknown`, obfuscated names and garbage.
fn parse_node(s: &str) -> Option<IpAddr> {
    let s = s.trim().trim_matches('"');
    if let Some(rest) = s.strip_prefix('[') {
        let (addr, _) = rest.split_once(']')?;
        return addr
            .parse::<Ipv6Addr>()
            .ok()
            .map(|a| IpAddr::V6(a).to_canonical());
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    s.parse::<SocketAddr>().ok().map(|a| a.ip().to_canonical())
}

/// Whole seconds for `Retry-After`, rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

fn rejection(status: StatusCode, wait: Duration, msg: &str) -> Response {
    let secs = retry_after_secs(wait);
    let mut r = (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{msg}; retry after {secs} s\n"),
    )
        .into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    r
}

/// 429 + `Retry-After` for a request over a rate limit.
pub fn too_many_requests(wait: Duration) -> Response {
    rejection(
        StatusCode::TOO_MANY_REQUESTS,
        wait,
        "too many requests: slow down",
    )
}

/// 503 + `Retry-After` for a request shed by a repository's pack queue.
pub fn shed_response(shed: &Shed) -> Response {
    rejection(
        StatusCode::SERVICE_UNAVAILABLE,
        shed.retry_after,
        "too many clones of this repository in progress",
    )
}

/// Tower layer: per-client-IP rate limit in front of a service (see [`IpRateLimit`]).
#[derive(Clone)]
pub struct IpRateLimitLayer {
    limiter: HttpLimiter,
    rejected: prometheus::IntCounter,
}

impl IpRateLimitLayer {
    pub fn new(limiter: HttpLimiter, metrics: &Metrics) -> Self {
        IpRateLimitLayer {
            limiter,
            rejected: metrics.http_rate_limited.with_label_values(&["ip"]),
        }
    }
}

impl<S> tower::Layer<S> for IpRateLimitLayer {
    type Service = IpRateLimit<S>;

    fn layer(&self, inner: S) -> IpRateLimit<S> {
        IpRateLimit {
            inner,
            limiter: self.limiter.clone(),
            rejected: self.rejected.clone(),
        }
    }
}

/// Answers 429 + `Retry-After` for a client over its per-IP rate, without calling the inner
/// service. The TCP peer comes from the `ConnectInfo<SocketAddr>` extension that
/// [`super::serve`] sets; requests without it pass unchecked. Inserts [`ClientIp`].
#[derive(Clone)]
pub struct IpRateLimit<S> {
    inner: S,
    limiter: HttpLimiter,
    rejected: prometheus::IntCounter,
}

impl<S, B> tower::Service<Request<B>> for IpRateLimit<S>
where
    S: tower::Service<Request<B>, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        if let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<SocketAddr>>() {
            let ip = self.limiter.client_ip(*peer, req.headers());
            if let Err(wait) = self.limiter.check_ip(ip) {
                self.rejected.inc();
                return Either::Right(ready(Ok(too_many_requests(wait))));
            }
            req.extensions_mut().insert(ClientIp(ip));
        }
        Either::Left(self.inner.call(req))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use tower::{Layer, Service, ServiceExt};

    fn cfg(rps: f64, burst: u32) -> HttpRateConfig {
        HttpRateConfig {
            per_ip_requests_per_second: rps,
            per_ip_burst: burst,
            ..HttpRateConfig::default()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn peer(s: &str) -> SocketAddr {
        SocketAddr::new(ip(s), 40000)
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn cidr_parsing_and_matching() {
        let c: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(c.contains(ip("10.1.2.3")));
        assert!(c.contains(ip("::ffff:10.1.2.3")));
        assert!(!c.contains(ip("11.0.0.1")));
        let h: Cidr = "192.0.2.7".parse().unwrap();
        assert!(h.contains(ip("192.0.2.7")) && !h.contains(ip("192.0.2.8")));
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:1::5")) && !v6.contains(ip("2001:db9::1")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.1")) && !all.contains(ip("2001:db8::1")));
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("nonsense".parse::<Cidr>().is_err());
        assert!("::/129".parse::<Cidr>().is_err());
    }

    #[test]
    fn burst_then_429_for_one_ip_while_another_passes() {
        let l = HttpLimiter::new(&cfg(1.0, 3));
        for _ in 0..3 {
            l.check_ip(ip("192.0.2.1")).unwrap();
        }
        let wait = l.check_ip(ip("192.0.2.1")).unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert_eq!(retry_after_secs(wait), 1);
        l.check_ip(ip("192.0.2.2")).unwrap();
        // IPv4-mapped IPv6 is the same client.
        assert!(l.check_ip(ip("::ffff:192.0.2.1")).is_err());
    }

    #[test]
    fn ipv6_shares_a_bucket_per_prefix() {
        let l = HttpLimiter::new(&cfg(1.0, 2));
        l.check_ip(ip("2001:db8:0:1::1")).unwrap();
        l.check_ip(ip("2001:db8:0:1:ffff::2")).unwrap();
        assert!(l.check_ip(ip("2001:db8:0:1::3")).is_err(), "same /64");
        l.check_ip(ip("2001:db8:0:2::1")).unwrap();
        // A /128 prefix keys every address on its own.
        let l = HttpLimiter::new(&HttpRateConfig {
            ipv6_prefix: 128,
            ..cfg(1.0, 1)
        });
        l.check_ip(ip("2001:db8::1")).unwrap();
        l.check_ip(ip("2001:db8::2")).unwrap();
        assert!(l.check_ip(ip("2001:db8::1")).is_err());
    }

    #[test]
    fn zero_rate_is_off() {
        let l = HttpLimiter::new(&cfg(0.0, 1));
        for _ in 0..1000 {
            l.check_ip(ip("192.0.2.1")).unwrap();
        }
        assert_eq!(l.tracked_ips(), 0);
    }

    #[test]
    fn forwarded_headers_only_from_trusted_proxies() {
        let l = HttpLimiter::new(&HttpRateConfig {
            trusted_proxies: vec!["10.0.0.0/8".into(), "2001:db8:ffff::/48".into()],
            ..HttpRateConfig::default()
        });
        let xff = headers(&[("x-forwarded-for", "203.0.113.9, 198.51.100.7, 10.0.0.2")]);
        // Untrusted peer: headers ignored.
        assert_eq!(l.client_ip(peer("192.0.2.1"), &xff), ip("192.0.2.1"));
        // Trusted peer: right-most address that is not a trusted proxy.
        assert_eq!(l.client_ip(peer("10.0.0.1"), &xff), ip("198.51.100.7"));
        // Several headers are one list, in order.
        let split = headers(&[
            ("x-forwarded-for", "203.0.113.9"),
            ("x-forwarded-for", "198.51.100.8:4711"),
        ]);
        assert_eq!(l.client_ip(peer("10.0.0.1"), &split), ip("198.51.100.8"));
        // Forwarded (RFC 7239) wins over X-Forwarded-For; quoted IPv6 with port.
        let fwd = headers(&[
            (
                "forwarded",
                "for=192.0.2.60;proto=http, For=\"[2001:db8:cafe::17]:4711\"",
            ),
            ("x-forwarded-for", "198.51.100.7"),
        ]);
        assert_eq!(l.client_ip(peer("10.0.0.1"), &fwd), ip("2001:db8:cafe::17"));
        // Only trusted hops and then garbage: the left-most trusted hop.
        let garbage = headers(&[("x-forwarded-for", "unknown, 10.9.9.9")]);
        assert_eq!(l.client_ip(peer("10.0.0.1"), &garbage), ip("10.9.9.9"));
        // No header from a trusted proxy: the proxy itself.
        assert_eq!(
            l.client_ip(peer("10.0.0.1"), &HeaderMap::new()),
            ip("10.0.0.1")
        );
        // An IPv4-mapped IPv6 peer matches an IPv4 block.
        assert_eq!(
            l.client_ip(peer("::ffff:10.0.0.1"), &xff),
            ip("198.51.100.7")
        );
        // No trusted proxies configured: headers are ignored even from loopback.
        let plain = HttpLimiter::new(&HttpRateConfig::default());
        assert_eq!(plain.client_ip(peer("127.0.0.1"), &xff), ip("127.0.0.1"));
    }

    #[test]
    fn tenant_limiter_and_quota_change() {
        let l = HttpLimiter::new(&HttpRateConfig::default());
        for _ in 0..2 {
            l.check_tenant("acme", 1, 2).unwrap();
        }
        assert!(l.check_tenant("acme", 1, 2).is_err());
        l.check_tenant("other", 1, 2).unwrap();
        // A new quota replaces the bucket (fresh burst).
        for _ in 0..5 {
            l.check_tenant("acme", 1, 5).unwrap();
        }
        assert!(l.check_tenant("acme", 1, 5).is_err());
        // Unlimited.
        for _ in 0..100 {
            l.check_tenant("acme", 0, 0).unwrap();
        }
        l.forget_tenant("acme");
        l.check_tenant("acme", 1, 1).unwrap();
    }

    #[tokio::test]
    async fn repo_permits_queue_then_shed_and_entries_go_when_idle() {
        let l = HttpLimiter::new(&HttpRateConfig {
            per_repo_concurrent_packs: 1,
            per_repo_queue: 1,
            per_repo_queue_timeout: Duration::from_millis(5_000),
            ..HttpRateConfig::default()
        });
        let first = l.repo_permit("rad:a").await.unwrap();
        // Another repository is not affected.
        let other = l.repo_permit("rad:b").await.unwrap();
        assert_eq!(l.busy_repos(), 2);
        assert!(!l.repo_backlogged("rad:a"));
        let queued = tokio::spawn(l.repo_permit("rad:a"));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(l.repo_backlogged("rad:a"));
        assert!(!l.repo_backlogged("rad:b") && !l.repo_backlogged("rad:c"));
        // Queue full: shed at once.
        let shed = l.repo_permit("rad:a").await.unwrap_err();
        assert_eq!(shed.reason, Admission::QueueFull);
        let resp = shed_response(&shed);
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        drop(first);
        let second = queued.await.unwrap().unwrap();
        drop(other);
        assert_eq!(l.busy_repos(), 1);
        drop(second);
        assert_eq!(l.busy_repos(), 0);
    }

    #[tokio::test]
    async fn repo_queue_times_out() {
        let l = HttpLimiter::new(&HttpRateConfig {
            per_repo_concurrent_packs: 1,
            per_repo_queue: 4,
            per_repo_queue_timeout: Duration::from_millis(30),
            ..HttpRateConfig::default()
        });
        let held = l.repo_permit("rad:a").await.unwrap();
        let shed = l.repo_permit("rad:a").await.unwrap_err();
        assert_eq!(shed.reason, Admission::QueueTimeout);
        drop(held);
        assert_eq!(l.busy_repos(), 0);
        // Off: always admitted, nothing tracked.
        l.reconfigure(&HttpRateConfig {
            per_repo_concurrent_packs: 0,
            ..HttpRateConfig::default()
        });
        let a = l.repo_permit("rad:a").await.unwrap();
        let b = l.repo_permit("rad:a").await.unwrap();
        assert_eq!(l.busy_repos(), 0);
        drop((a, b));
    }

    #[test]
    fn reconfigure_takes_effect_and_keeps_state_when_unchanged() {
        let l = HttpLimiter::new(&cfg(1.0, 1));
        l.check_ip(ip("192.0.2.1")).unwrap();
        assert!(l.check_ip(ip("192.0.2.1")).is_err());
        // Same rate, new trusted list: buckets kept.
        l.reconfigure(&HttpRateConfig {
            trusted_proxies: vec!["10.0.0.0/8".into()],
            ..cfg(1.0, 1)
        });
        assert!(l.check_ip(ip("192.0.2.1")).is_err());
        let xff = headers(&[("x-forwarded-for", "198.51.100.7")]);
        assert_eq!(l.client_ip(peer("10.0.0.1"), &xff), ip("198.51.100.7"));
        // A larger burst applies at once.
        l.reconfigure(&cfg(1.0, 10));
        for _ in 0..10 {
            l.check_ip(ip("192.0.2.1")).unwrap();
        }
        assert!(l.check_ip(ip("192.0.2.1")).is_err());
        // Off.
        l.reconfigure(&cfg(0.0, 10));
        l.check_ip(ip("192.0.2.1")).unwrap();
    }

    #[test]
    fn idle_keys_are_swept() {
        // 1000/s with a burst of 1: a key is indistinguishable from fresh after 1 ms.
        let l = HttpLimiter::new(&cfg(1000.0, 1));
        for i in 0..(SWEEP_EVERY as u32 / 2) {
            l.check_ip(IpAddr::from(i.to_be_bytes())).unwrap();
        }
        assert!(l.tracked_ips() >= SWEEP_EVERY as usize / 2);
        std::thread::sleep(Duration::from_millis(5));
        l.housekeeping();
        assert_eq!(l.tracked_ips(), 0);
        // Automatic sweeps keep the map bounded under a flood of distinct addresses.
        for i in 0..(SWEEP_EVERY as u32 * 4) {
            let _ = l.check_ip(IpAddr::from((i + 1_000_000).to_be_bytes()));
        }
        let bound = (SWEEP_EVERY * 2 + u64::from(COUNT_BATCH)) as usize;
        assert!(l.tracked_ips() <= bound, "{}", l.tracked_ips());
    }

    #[test]
    fn config_keys_load_and_validate() {
        use crate::config::{Config, Overrides};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seedd.toml");
        std::fs::write(
            &path,
            "[http.rate]\nper_ip_requests_per_second = 2.5\nper_ip_burst = 7\nipv6_prefix = 56\n\
             trusted_proxies = [\"10.0.0.0/8\", \"::1\"]\nper_repo_concurrent_packs = 3\n\
             per_repo_queue = 9\nper_repo_queue_timeout_ms = 250\n",
        )
        .unwrap();
        let (c, _) = Config::load(Some(&path), &Overrides::default()).unwrap();
        let r = &c.http.rate;
        assert_eq!(r.per_ip_requests_per_second, 2.5);
        assert_eq!((r.per_ip_burst, r.ipv6_prefix), (7, 56));
        assert_eq!(r.trusted_proxies, vec!["10.0.0.0/8", "::1"]);
        assert_eq!(
            (
                r.per_repo_concurrent_packs,
                r.per_repo_queue,
                r.per_repo_queue_timeout.as_millis()
            ),
            (3, 9, 250)
        );
        for (text, key) in [
            (
                "trusted_proxies = [\"10.0.0.0/40\"]",
                "http.rate.trusted_proxies",
            ),
            (
                "per_ip_requests_per_second = -1.0",
                "http.rate.per_ip_requests_per_second",
            ),
            ("ipv6_prefix = 0", "http.rate.ipv6_prefix"),
            ("per_ip_burst = 0", "http.rate.per_ip_burst"),
            ("per_ip_bust = 1", "http.rate.per_ip_bust"),
        ] {
            std::fs::write(&path, format!("[http.rate]\n{text}\n")).unwrap();
            let err = Config::load(Some(&path), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{err}");
        }
        let d = HttpRateConfig::default();
        assert_eq!(d.per_ip_requests_per_second, 50.0);
        assert_eq!((d.per_ip_burst, d.ipv6_prefix), (100, 64));
        assert!(d.trusted_proxies.is_empty());
        assert_eq!(
            (
                d.per_repo_concurrent_packs,
                d.per_repo_queue,
                d.per_repo_queue_timeout.as_millis()
            ),
            (2, 4, 2000)
        );
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(3)), 3);
    }

    #[tokio::test]
    async fn middleware_rejects_before_the_inner_service_runs() {
        let metrics = Metrics::new().unwrap();
        let calls = Arc::new(AtomicU64::new(0));
        let counted = calls.clone();
        let inner = tower::service_fn(move |_req: Request<()>| {
            counted.fetch_add(1, Ordering::Relaxed);
            async { Ok::<_, Infallible>(StatusCode::OK.into_response()) }
        });
        let mut svc = IpRateLimitLayer::new(HttpLimiter::new(&cfg(1.0, 2)), &metrics).layer(inner);
        let req = |addr: &str| {
            let mut r = Request::new(());
            r.extensions_mut().insert(ConnectInfo(peer(addr)));
            r
        };
        for _ in 0..2 {
            let r = svc
                .ready()
                .await
                .unwrap()
                .call(req("192.0.2.1"))
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK);
        }
        let r = svc
            .ready()
            .await
            .unwrap()
            .call(req("192.0.2.1"))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let body = axum::body::to_bytes(r.into_body(), 1024).await.unwrap();
        assert!(String::from_utf8_lossy(&body).contains("slow down"));
        assert_eq!(
            calls.load(Ordering::Relaxed),
            2,
            "inner not called when limited"
        );
        assert_eq!(
            metrics.http_rate_limited.with_label_values(&["ip"]).get(),
            1
        );
        // Another client passes; a request without ConnectInfo passes unchecked.
        let r = svc
            .ready()
            .await
            .unwrap()
            .call(req("192.0.2.2"))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let r = svc
            .ready()
            .await
            .unwrap()
            .call(Request::new(()))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
}
