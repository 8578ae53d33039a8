//! Per-request cost of seedd's HTTP rate limiting (`http/src/ratelimit/`), in process,
//! no sockets: `HttpLimiter::check_ip` (one hot client, 100k distinct clients, rejected
//! requests, two threads), `client_ip` with and without a trusted proxy's `X-Forwarded-For`,
//! and the whole `IpRateLimit` tower layer around a trivial service and around the axum router
//! shape seedd uses, each against the same service without the layer. Target from the issue:
//! < 2 µs per request. Prints a table and writes JSON to `<target>/seedd-bench-ratelimit.json`.
//!
//! In process: the bench process *is* the server here (no seedd binary, no sockets), so it
//! pins itself (every thread) to the server cores of `measure::Pinning` (`taskset`; one core on
//! the 2-core machine), not to the load cores; the two-thread row then shares those cores. Each
//! row is `SEEDD_BENCH_RATELIMIT_ROUNDS` (5) rounds of `SEEDD_BENCH_RATELIMIT_SECS` (0.2 s)
//! after a warm-up, timed on the wall clock of the measuring thread (the bench process itself,
//! no children; no CPU counter is read): median [min–max] of the rounds. The layer rows measure
//! the service without and with the layer in the same round (alternating which goes first),
//! and "added" is the median [min–max] of the per-round differences.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt as _;
use seedd_benches::measure::{self, Pinning, Summary};
use seedd_benches::{fmt, write_table, TableLine};
use seedd_core::config::HttpRateConfig;
use seedd_core::metrics::Metrics;
use seedd_http::ratelimit::{HttpLimiter, IpRateLimitLayer};
use tower::{Layer, Service};

/// Target from the issue: rate-limiter overhead per request.
const TARGET_NS: f64 = 2_000.0;
/// Distinct clients in the "many keys" rows.
const DISTINCT: u32 = 100_000;
/// Rounds per row (`SEEDD_BENCH_RATELIMIT_ROUNDS`).
const ROUNDS: usize = 5;

struct Row {
    key: &'static str,
    label: String,
    /// ns/request per round.
    ns: Vec<f64>,
    /// ns/request of the same work without the limiter, same rounds, for the layer rows.
    base_ns: Option<Vec<f64>>,
}

impl Row {
    fn plain(key: &'static str, label: impl Into<String>, ns: Vec<f64>) -> Row {
        Row {
            key,
            label: label.into(),
            ns,
            base_ns: None,
        }
    }

    /// Per-round ns added by the limiter (the layer rows), else the row's own ns.
    fn added(&self) -> Vec<f64> {
        match &self.base_ns {
            Some(b) => self.ns.iter().zip(b).map(|(n, b)| n - b).collect(),
            None => self.ns.clone(),
        }
    }
}

fn secs() -> f64 {
    std::env::var("SEEDD_BENCH_RATELIMIT_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(0.2)
}

fn rounds() -> usize {
    seedd_benches::env_usize("SEEDD_BENCH_RATELIMIT_ROUNDS", ROUNDS).max(1)
}

/// ns per operation of one round of `secs`; `batch` performs some operations and returns how
/// many.
fn one_round(batch: &mut impl FnMut() -> u64) -> f64 {
    let secs = secs();
    let t0 = Instant::now();
    let mut ops = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        ops += batch();
    }
    t0.elapsed().as_secs_f64() * 1e9 / ops as f64
}

fn warm_up(batch: &mut impl FnMut() -> u64) {
    let warm = Instant::now();
    while warm.elapsed().as_secs_f64() < secs() / 4.0 {
        batch();
    }
}

/// ns per operation of each round, after a warm-up.
fn measure(mut batch: impl FnMut() -> u64) -> Vec<f64> {
    warm_up(&mut batch);
    (0..rounds()).map(|_| one_round(&mut batch)).collect()
}

/// Both `base` and `with` in every round (order alternating ABBA): ns per operation of each,
/// per round.
fn paired(mut base: impl FnMut() -> u64, mut with: impl FnMut() -> u64) -> (Vec<f64>, Vec<f64>) {
    warm_up(&mut base);
    warm_up(&mut with);
    let (mut b, mut w) = (Vec::new(), Vec::new());
    for round in 0..rounds() {
        for k in measure::abba(round, 2) {
            if k == 0 {
                b.push(one_round(&mut base));
            } else {
                w.push(one_round(&mut with));
            }
        }
    }
    (b, w)
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

/// Requests through an axum Router, as [`drive`] does for a tower service.
fn drive_router(router: &mut axum::Router, peers: &[SocketAddr], next: &mut usize) -> u64 {
    for _ in 0..BATCH {
        let peer = peers[*next % peers.len()];
        *next += 1;
        let mut r = Request::new(axum::body::Body::empty());
        r.extensions_mut().insert(ConnectInfo(peer));
        let resp = router
            .call(r)
            .now_or_never()
            .expect("ready at once")
            .unwrap();
        black_box(resp.status());
    }
    BATCH
}

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    let prov = measure::provenance("ratelimit");
    let pinned = Pinning::pin_self_to_server();
    if rounds() < ROUNDS {
        measure::record_override(&format!(
            "SEEDD_BENCH_RATELIMIT_ROUNDS={} (fewer than {ROUNDS} rounds)",
            rounds()
        ));
    }
    let started = Instant::now();
    let metrics = Arc::new(Metrics::new().unwrap());
    let mut rows = Vec::new();
    let open = cfg(1e6, u32::MAX / 2); // never rejects: the admit path
    let default = HttpRateConfig::default(); // 50/s, burst 100

    // check_ip.
    let l = HttpLimiter::new(&open);
    let hot = v4(1);
    rows.push(Row::plain(
        "check_ip_hot",
        "check_ip, one client (admitted)",
        measure(|| {
            for _ in 0..1024 {
                black_box(l.check_ip(black_box(hot))).ok();
            }
            1024
        }),
    ));
    let l = HttpLimiter::new(&default);
    let mut i = 0u32;
    rows.push(Row::plain(
        "check_ip_100k",
        format!("check_ip, {DISTINCT} distinct clients (default 50/s, burst 100)"),
        measure(|| {
            for _ in 0..1024 {
                i = (i + 1) % DISTINCT;
                black_box(l.check_ip(v4(i))).ok();
            }
            1024
        }),
    ));
    let tracked = l.tracked_ips();
    let l6 = HttpLimiter::new(&default);
    let mut j = 0u128;
    rows.push(Row::plain(
        "check_ip_v6_100k",
        format!("check_ip, {DISTINCT} distinct IPv6 /64s"),
        measure(|| {
            for _ in 0..1024 {
                j = (j + 1) % u128::from(DISTINCT);
                let ip = IpAddr::V6(std::net::Ipv6Addr::from(
                    (0x2001_0db8u128 << 96) | (j << 64) | 7,
                ));
                black_box(l6.check_ip(ip)).ok();
            }
            1024
        }),
    ));
    let l = HttpLimiter::new(&cfg(1.0, 1));
    let _ = l.check_ip(hot);
    rows.push(Row::plain(
        "check_ip_rejected",
        "check_ip, one client over its limit (rejected)",
        measure(|| {
            for _ in 0..1024 {
                black_box(l.check_ip(black_box(hot))).err();
            }
            1024
        }),
    ));
    // Two threads on one limiter, distinct clients: contention on the shared state. Each
    // round: both threads for `secs`, the mean of their ns per request.
    let l = HttpLimiter::new(&default);
    let two: Vec<f64> = (0..rounds())
        .map(|_| {
            let secs = secs();
            let per_thread: Vec<f64> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..2u32)
                    .map(|t| {
                        let l = l.clone();
                        s.spawn(move || {
                            let mut k = 0u32;
                            let t0 = Instant::now();
                            let mut ops = 0u64;
                            while t0.elapsed().as_secs_f64() < secs {
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
        })
        .collect();
    let server_cores = Pinning::get().server.clone();
    rows.push(Row::plain(
        "check_ip_2_threads",
        format!(
            "check_ip, 2 threads × {} clients each{}",
            DISTINCT / 2,
            server_cores
                .as_deref()
                .map_or(String::new(), |c| format!(" (on cpus {c})"))
        ),
        two,
    ));

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
    rows.push(Row::plain(
        "client_ip_direct",
        "client_ip, no trusted proxies (X-Forwarded-For ignored)",
        measure(|| {
            for _ in 0..1024 {
                black_box(plain.client_ip(black_box(peer), &xff));
            }
            1024
        }),
    ));
    let proxied = HttpLimiter::new(&HttpRateConfig {
        trusted_proxies: vec![
            "10.0.0.0/8".parse().unwrap(),
            "192.168.0.0/16".parse().unwrap(),
        ],
        ..default.clone()
    });
    let proxy = SocketAddr::new(v4(1), 40000);
    rows.push(Row::plain(
        "client_ip_xff",
        "client_ip, trusted proxy, X-Forwarded-For with 3 hops",
        measure(|| {
            for _ in 0..1024 {
                black_box(proxied.client_ip(black_box(proxy), &xff));
            }
            1024
        }),
    ));

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
        let (mut n0, mut n1) = (0, 0);
        let mut bare = trivial;
        let mut layered =
            IpRateLimitLayer::new(HttpLimiter::new(layer_cfg), &metrics).layer(trivial);
        let (base, ns) = paired(
            || drive(&mut bare, peers, &no_headers, &mut n0),
            || drive(&mut layered, peers, &no_headers, &mut n1),
        );
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
    let (mut n0, mut n1) = (0usize, 0usize);
    let (base, ns) = paired(
        || drive_router(&mut bare_router, &peers, &mut n0),
        || drive_router(&mut layered_router, &peers, &mut n1),
    );
    rows.push(Row {
        key: "layer_router_100k",
        label: "IpRateLimit in an axum Router (fallback handler), 100k clients".into(),
        ns,
        base_ns: Some(base),
    });

    // Output.
    let med = |v: &[f64]| Summary::of(v).map_or(f64::NAN, |s| s.median);
    let worst = rows.iter().map(|r| med(&r.added())).fold(0.0f64, f64::max);
    let met = worst < TARGET_NS;
    let show = |v: &[f64]| Summary::of(v).map_or("-".to_owned(), |s| s.to_string());
    let mut t = String::new();
    t.push_str(&format!(
        "\nseedd HTTP rate limiter: per-request cost, {} rounds × {:.2} s per row, median [min–max] (wall clock of the measuring thread; one thread unless noted); {pinned}\n{}\n\n",
        rounds(),
        secs(),
        prov.line()
    ));
    let lines: Vec<TableLine> = rows
        .iter()
        .map(|r| TableLine {
            group: "",
            metric: &r.label,
            seedd: show(&r.ns),
            other: r
                .base_ns
                .as_ref()
                .map_or_else(String::new, |b| fmt(Some(med(b)))),
            ratio: r
                .base_ns
                .as_ref()
                .map_or_else(String::new, |_| format!("+{}", show(&r.added()))),
            unit: "ns/req",
            better: "lower",
        })
        .collect();
    write_table(
        &mut t,
        ["", "row", "with", "without", "added", "unit"],
        [0, 66, 24, 8, 24, 6],
        140,
        lines,
    );
    t.push_str(&format!(
        "\nper-IP keys tracked after the 100k-client check_ip row: {tracked} (idle keys are swept)\n\
         target: < {:.0} ns added per request (median) → worst {} ns: {}\n\
         ({:.1} s)\n",
        TARGET_NS,
        fmt(Some(worst)),
        if met { "MET" } else { "NOT MET" },
        started.elapsed().as_secs_f64()
    ));
    print!("{t}");

    let j = |v: &[f64]| Summary::of(v).map(|s| s.to_json());
    let json = serde_json::json!({
        "schema": 2,
        "seconds_per_round": secs(),
        "rounds": rounds(),
        "pinning": pinned,
        "timing": "wall clock of the measuring thread(s), the bench process itself",
        "results": rows.iter().map(|r| serde_json::json!({
            "key": r.key,
            "label": r.label,
            "ns_per_request": j(&r.ns),
            "without_ns_per_request": r.base_ns.as_deref().map(j),
            "added_ns": r.base_ns.as_ref().map(|_| j(&r.added())),
        })).collect::<Vec<_>>(),
        "target": {"added_ns_max": TARGET_NS, "worst_added_ns": worst, "met": met},
        "targets": [{
            "target": "rate limiter, worst ns added per request (median of rounds)",
            "value": worst,
            "goal": format!("< {TARGET_NS:.0} ns"),
            "met": met,
        }],
        "table": t,
    });
    let path = measure::write_result("ratelimit", prov, json);
    eprintln!("JSON: {}", path.display());
}
