//! The limiters through [`HttpLimiter`], and the layer in front of a service.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::{header, HeaderMap, HeaderValue, Request, StatusCode};
use axum::response::IntoResponse;
use tower::{Layer, Service, ServiceExt};

use super::per_ip::{COUNT_BATCH, SWEEP_EVERY};
use super::*;
use seedd_core::metrics::Metrics;
use seedd_core::serve::Admission;

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
        trusted_proxies: vec![
            "10.0.0.0/8".parse().unwrap(),
            "2001:db8:ffff::/48".parse().unwrap(),
        ],
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
    // The git route answers a shed request with `Refusal::RepoBusy`.
    let resp = crate::refusal::Refusal::RepoBusy.into_response();
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
        trusted_proxies: vec!["10.0.0.0/8".parse().unwrap()],
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
