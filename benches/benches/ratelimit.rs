//! Per-request cost of seedd's HTTP rate limiting (`http/src/ratelimit/`), in process,
//! no sockets: `HttpLimiter::check_ip` (one hot client, 100k distinct clients, rejected
//! requests, two threads), `client_ip` with and without a trusted proxy's `X-Forwarded-For`,
//! and the whole `IpRateLimit` tower layer around a trivial service and around the axum router
//! shape seedd uses, each against the same service without the layer. Target from the issue:
//! < 2 µs per request. Prints a table and writes JSON to `<target>/seedd-bench-ratelimit.json`.
//!
//! Each row is timed as the best of 5 runs of `SEEDD_BENCH_RATELIMIT_SECS` (default 0.2 s)
//! on the wall clock, after a warm-up: the best run is the one least disturbed by other load
//! on the machine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt as _;
use seedd_benches::{fmt, write_table, TableLine};
use seedd_core::config::HttpRateConfig;
use seedd_core::metrics::Metrics;
use seedd_http::ratelimit::{HttpLimiter, IpRateLimitLayer};
use tower::{Layer, Service};

/// Target from the issue: rate-limiter overhead per request.
const TARGET_NS: f64 = 2_000.0;
/// Distinct clients in the "many keys" rows.
const DISTINCT: u32 = 100_000;
const RUNS: usize = 5;

struct Row {
    key: &'static str,
    label: String,
    ns: f64,
    /// ns/request of the same work without the limiter, for the layer rows.
    base_ns: Option<f64>,
}

fn secs() -> f64 {
    std::env::var("SEEDD_BENCH_RATELIMIT_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(0.2)
}

/// Best-of-`RUNS` ns per operation; `batch` performs some operations and returns how many.
fn measure(mut batch: impl FnMut() -> u64) -> f64 {
    let secs = secs();
    let warm = Instant::now();
    while warm.elapsed().as_secs_f64() < secs / 4.0 {
        batch();
    }
    let mut best = f64::INFINITY;
    for _ in 0..RUNS {
        let t0 = Instant::now();
        let mut ops = 0u64;
        while t0.elapsed().as_secs_f64() < secs {
            ops += batch();
        }
        best = best.min(t0.elapsed().as_secs_f64() * 1e9 / ops as f64);
    }
    best
}

fn cfg(rps: f64, burst: u32) -> HttpRateConfig {
    HttpRateConfig {
        per_ip_requests_per_second: rps,
        per_ip_burst: burst,
        ..HttpRateConfig::default()
    }
}

fn v4(i: u32) -> IpAddr {
    // 10.0.0.0/8 and up: distinct, never loopback.
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000u32.wrapping_add(i)))
}

fn request(peer: SocketAddr, headers: &HeaderMap) -> Request<()> {
    let mut r = Request::new(());
    *r.headers_mut() = headers.clone();
    r.extensions_mut().insert(ConnectInfo(peer));
    r
}

/// Requests per batch in the service rows.
const BATCH: u64 = 256;

fn drive<S>(svc: &mut S, peers: &[SocketAddr], headers: &HeaderMap, next: &mut usize) -> u64
where
    S: Service<Request<()>, Response = Response, Error = Infallible>,
{
    for _ in 0..BATCH {
        let peer = peers[*next % peers.len()];
        *next += 1;
        let resp = svc
            .call(request(peer, headers))
            .now_or_never()
            .expect("ready at once")
            .unwrap();
        black_box(resp.status());
    }
    BATCH
}

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    seedd_benches::measure::provenance("ratelimit");
    let started = Instant::now();
    let metrics = Arc::new(Metrics::new().unwrap());
    let mut rows = Vec::new();
    let open = cfg(1e6, u32::MAX / 2); // never rejects: the admit path
    let default = HttpRateConfig::default(); // 50/s, burst 100

    // check_ip.
    let l = HttpLimiter::new(&open);
    let hot = v4(1);
    rows.push(Row {
        key: "check_ip_hot",
        label: "check_ip, one client (admitted)".into(),
        ns: measure(|| {
            for _ in 0..1024 {
                black_box(l.check_ip(black_box(hot))).ok();
            }
            1024
        }),
        base_ns: None,
    });
    let l = HttpLimiter::new(&default);
    let mut i = 0u32;
    rows.push(Row {
        key: "check_ip_100k",
        label: format!("check_ip, {DISTINCT} distinct clients (default 50/s, burst 100)"),
        ns: measure(|| {
            for _ in 0..1024 {
                i = (i + 1) % DISTINCT;
                black_box(l.check_ip(v4(i))).ok();
            }
            1024
        }),
        base_ns: None,
    });
    let tracked = l.tracked_ips();
    let l6 = HttpLimiter::new(&default);
    let mut j = 0u128;
    rows.push(Row {
        key: "check_ip_v6_100k",
        label: format!("check_ip, {DISTINCT} distinct IPv6 /64s"),
        ns: measure(|| {
            for _ in 0..1024 {
                j = (j + 1) % u128::from(DISTINCT);
                let ip = IpAddr::V6(std::net::Ipv6Addr::from(
                    (0x2001_0db8u128 << 96) | (j << 64) | 7,
                ));
                black_box(l6.check_ip(ip)).ok();
            }
            1024
        }),
        base_ns: None,
    });
    let l = HttpLimiter::new(&cfg(1.0, 1));
    let _ = l.check_ip(hot);
    rows.push(Row {
        key: "check_ip_rejected",
        label: "check_ip, one client over its limit (rejected)".into(),
        ns: measure(|| {
            for _ in 0..1024 {
                black_box(l.check_ip(black_box(hot))).err();
            }
            1024
        }),
        base_ns: None,
    });
    // Two threads on one limiter, distinct clients: contention on the shared state.
    let l = HttpLimiter::new(&default);
    let two = {
        let secs = secs();
        let per_thread: Vec<f64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2u32)
                .map(|t| {
                    let l = l.clone();
                    s.spawn(move || {
                        let mut k = 0u32;
                        let t0 = Instant::now();
                        let mut ops = 0u64;
                        while t0.elapsed().as_secs_f64() < secs * RUNS as f64 {
                            for _ in 0..1024 {
                                k = (k + 1) % (DISTINCT / 2);
                                black_box(l.check_ip(v4(t * DISTINCT + k))).ok();
                            }
                            ops += 1024;
                        }
                        t0.elapsed().as_secs_f64() * 1e9 / ops as f64
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        per_thread.iter().sum::<f64>() / per_thread.len() as f64
    };
    rows.push(Row {
        key: "check_ip_2_threads",
        label: format!("check_ip, 2 threads × {} clients each", DISTINCT / 2),
        ns: two,
        base_ns: None,
    });

    // client_ip.
    let xff = {
        let mut h = HeaderMap::new();
        h.insert(
            "x-forwarded-for",
            HeaderValue::from_static("203.0.113.9, 198.51.100.7, 10.0.0.2"),
        );
        h
    };
    let plain = HttpLimiter::new(&default);
    let peer = SocketAddr::new(v4(5), 40000);
    rows.push(Row {
        key: "client_ip_direct",
        label: "client_ip, no trusted proxies (X-Forwarded-For ignored)".into(),
        ns: measure(|| {
            for _ in 0..1024 {
                black_box(plain.client_ip(black_box(peer), &xff));
            }
            1024
        }),
        base_ns: None,
    });
    let proxied = HttpLimiter::new(&HttpRateConfig {
        trusted_proxies: vec![
            "10.0.0.0/8".parse().unwrap(),
            "192.168.0.0/16".parse().unwrap(),
        ],
        ..default.clone()
    });
    let proxy = SocketAddr::new(v4(1), 40000);
    rows.push(Row {
        key: "client_ip_xff",
        label: "client_ip, trusted proxy, X-Forwarded-For with 3 hops".into(),
        ns: measure(|| {
            for _ in 0..1024 {
                black_box(proxied.client_ip(black_box(proxy), &xff));
            }
            1024
        }),
        base_ns: None,
    });

    // The layer around a trivial service, and around an axum Router like seedd's.
    let trivial = tower::service_fn(|_req: Request<()>| async {
        Ok::<_, Infallible>(StatusCode::OK.into_response())
    });
    let peers: Vec<SocketAddr> = (0..DISTINCT)
        .map(|i| SocketAddr::new(v4(i), 40000))
        .collect();
    let one_peer = [peer];
    let no_headers = HeaderMap::new();
    for (key, label, peers, layer_cfg) in [
        (
            "layer_trivial_hot",
            "IpRateLimit around a trivial service, one client",
            &one_peer[..],
            &open,
        ),
        (
            "layer_trivial_100k",
            "IpRateLimit around a trivial service, 100k clients",
            &peers[..],
            &default,
        ),
    ] {
        let mut n = 0;
        let mut bare = trivial;
        let base = measure(|| drive(&mut bare, peers, &no_headers, &mut n));
        let mut layered =
            IpRateLimitLayer::new(HttpLimiter::new(layer_cfg), &metrics).layer(trivial);
        let ns = measure(|| drive(&mut layered, peers, &no_headers, &mut n));
        rows.push(Row {
            key,
            label: label.into(),
            ns,
            base_ns: Some(base),
        });
    }
    let handler = || async { StatusCode::OK };
    let mut bare_router = axum::Router::new().fallback(handler);
    let mut layered_router = axum::Router::new()
        .fallback(handler)
        .layer(IpRateLimitLayer::new(HttpLimiter::new(&default), &metrics));
    let body_req = |peer: SocketAddr| {
        let mut r = Request::new(axum::body::Body::empty());
        r.extensions_mut().insert(ConnectInfo(peer));
        r
    };
    let mut n = 0usize;
    let mut run_router = |router: &mut axum::Router| {
        for _ in 0..BATCH {
            let peer = peers[n % peers.len()];
            n += 1;
            let resp = router
                .call(body_req(peer))
                .now_or_never()
                .expect("ready at once")
                .unwrap();
            black_box(resp.status());
        }
        BATCH
    };
    let base = measure(|| run_router(&mut bare_router));
    let ns = measure(|| run_router(&mut layered_router));
    rows.push(Row {
        key: "layer_router_100k",
        label: "IpRateLimit in an axum Router (fallback handler), 100k clients".into(),
        ns,
        base_ns: Some(base),
    });

    // Output.
    let worst = rows
        .iter()
        .map(|r| r.base_ns.map_or(r.ns, |b| r.ns - b))
        .fold(0.0f64, f64::max);
    let met = worst < TARGET_NS;
    let mut t = String::new();
    t.push_str(&format!(
        "\nseedd HTTP rate limiter: per-request cost (best of {RUNS} × {:.1} s, one thread unless noted)\n\n",
        secs()
    ));
    let lines: Vec<TableLine> = rows
        .iter()
        .map(|r| TableLine {
            group: "",
            metric: &r.label,
            seedd: fmt(Some(r.ns)),
            other: r.base_ns.map_or_else(String::new, |b| fmt(Some(b))),
            ratio: r
                .base_ns
                .map_or_else(String::new, |b| format!("+{}", fmt(Some(r.ns - b)))),
            unit: "ns/req",
            better: "lower",
        })
        .collect();
    write_table(
        &mut t,
        ["", "row", "with", "without", "added", "unit"],
        [0, 66, 8, 8, 8, 6],
        112,
        lines,
    );
    t.push_str(&format!(
        "\nper-IP keys tracked after the 100k-client check_ip row: {tracked} (idle keys are swept)\n\
         target: < {:.0} ns added per request → worst {} ns: {}\n\
         ({:.1} s)\n",
        TARGET_NS,
        fmt(Some(worst)),
        if met { "MET" } else { "NOT MET" },
        started.elapsed().as_secs_f64()
    ));
    print!("{t}");

    let json = serde_json::json!({
        "schema": 1,
        "unix_time": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        "seconds_per_run": secs(),
        "runs": RUNS,
        "results": rows.iter().map(|r| serde_json::json!({
            "key": r.key,
            "label": r.label,
            "ns_per_request": r.ns,
            "without_ns_per_request": r.base_ns,
            "added_ns": r.base_ns.map(|b| r.ns - b),
        })).collect::<Vec<_>>(),
        "target": {"added_ns_max": TARGET_NS, "worst_added_ns": worst, "met": met},
    });
    let path = target_dir().join("seedd-bench-ratelimit.json");
    if let Err(e) = std::fs::write(
        &path,
        serde_json::to_string_pretty(&seedd_benches::measure::stamped(&json)).unwrap(),
    ) {
        eprintln!("could not write {}: {e}", path.display());
    }
}

fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_owned()))
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("target"))
}
