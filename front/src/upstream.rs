//! The replicas behind the front: their health, and forwarding a request to the replica that
//! answers for its repository, failing over to the next one.
//!
//! A replica takes reads while its `/readyz` answers 200 (asked every `health_interval`); a
//! replica that refuses a connection is taken out at once, until its `/readyz` answers again.
//! A request whose body is small enough to keep (≤ [`MAX_RETRY_BODY`]) is sent again to the
//! next replica when the first cannot be reached, and a `git-upload-pack` answered with nothing
//! (git died before writing: the replica lacks an object the client wants, because it is behind
//! the sibling that answered the clone's `ls-refs`) is sent again to the next replica too.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, BodyStream, Empty, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use seedd_core::placement::{replica_order, Replica, Shard, Watched};

use crate::metrics::FrontMetrics;

/// The body of every response the front sends.
pub type Body = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

/// Request bodies up to this size are kept so the request can go to another replica.
pub const MAX_RETRY_BODY: usize = 1 << 20;
/// A replica that does not accept a connection within this long is skipped.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Node-wide parts: a shard's answer must start within this long.
const JSON_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest node-wide part the front reads from one shard.
const MAX_JSON_BYTES: usize = 32 << 20;

/// No replica of a shard could answer.
#[derive(Debug)]
pub struct ShardFailure {
    pub shard: String,
    pub reason: String,
}

impl ShardFailure {
    pub fn into_response(self) -> Response<Body> {
        crate::error(
            StatusCode::BAD_GATEWAY,
            &format!(
                "shard {} is unavailable ({}); retry shortly",
                self.shard, self.reason
            ),
        )
    }
}

#[derive(Clone, Copy)]
struct Health {
    /// `/readyz` answered 200 at the last poll (replicas without an admin URL: true).
    ready: bool,
    /// A refused connection takes the replica out until the next poll says ready, or for
    /// `PASSIVE_DOWN` without an admin URL.
    failed_at: Option<Instant>,
}

const PASSIVE_DOWN: Duration = Duration::from_secs(5);

/// The replicas' health and one pooled HTTP client.
pub struct Upstreams {
    client: Client<HttpConnector, Body>,
    health: Arc<RwLock<HashMap<String, Health>>>,
    metrics: Arc<FrontMetrics>,
}

enum Outbound {
    Kept(Bytes),
    /// Sent once (a second attempt would need the bytes already sent).
    Streamed(Option<Body>),
}

/// The request body: kept whole when it ends within [`MAX_RETRY_BODY`] (so that it can go to
/// another replica), else streamed on after what was read (the seeds have their own limit,
/// `http.max_request_bytes`). `length` is the request's `Content-Length`, if any.
async fn outbound(mut body: Incoming, length: Option<usize>) -> Result<Outbound, hyper::Error> {
    if length.is_some_and(|n| n > MAX_RETRY_BODY) {
        return Ok(Outbound::Streamed(Some(body.boxed())));
    }
    let mut kept = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        if let Some(d) = frame.data_ref() {
            kept.extend_from_slice(d);
        }
        if kept.len() > MAX_RETRY_BODY {
            let first = futures_util::stream::once({
                let b = kept.freeze();
                async move { Ok::<_, hyper::Error>(Frame::data(b)) }
            });
            let stream = first.chain(BodyStream::new(body));
            return Ok(Outbound::Streamed(Some(BodyExt::boxed(StreamBody::new(
                stream,
            )))));
        }
    }
    Ok(Outbound::Kept(kept.freeze()))
}

impl Upstreams {
    pub fn new(metrics: Arc<FrontMetrics>) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(64)
            .build(connector);
        Self {
            client,
            health: Arc::new(RwLock::new(HashMap::new())),
            metrics,
        }
    }

    /// Whether `http` (a replica's public URL) takes reads.
    pub fn is_up(&self, http: &str) -> bool {
        let h = self.health.read().unwrap_or_else(|e| e.into_inner());
        match h.get(http) {
            None => true,
            Some(h) => h.ready && h.failed_at.is_none_or(|t| t.elapsed() >= PASSIVE_DOWN),
        }
    }

    fn mark_failed(&self, r: &Replica) {
        let mut h = self.health.write().unwrap_or_else(|e| e.into_inner());
        let e = h.entry(r.http.clone()).or_insert(Health {
            ready: true,
            failed_at: None,
        });
        e.failed_at = Some(Instant::now());
        if r.admin.is_some() {
            // Out until its /readyz says otherwise.
            e.ready = false;
        }
    }

    /// Ask every replica's `/readyz` every `interval`.
    pub fn spawn_health(&self, placement: Watched, interval: Duration) {
        let client = self.client.clone();
        let health = self.health.clone();
        let metrics = self.metrics.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let p = placement.get();
                let checks = p.shards().iter().flat_map(|s| {
                    s.replicas.iter().map(|r| {
                        let client = client.clone();
                        let shard = s.name.clone();
                        let r = r.clone();
                        async move {
                            let ready = match &r.admin {
                                None => true,
                                Some(admin) => {
                                    probe(&client, admin, interval.max(Duration::from_millis(500)))
                                        .await
                                }
                            };
                            (shard, r, ready)
                        }
                    })
                });
                let results = futures_util::future::join_all(checks).await;
                let mut h = health.write().unwrap_or_else(|e| e.into_inner());
                for (shard, r, ready) in results {
                    let was = h.get(&r.http).map(|h| h.ready);
                    if was != Some(ready) {
                        if ready {
                            tracing::info!(%shard, replica = %r.http, "replica takes reads");
                        } else {
                            tracing::warn!(%shard, replica = %r.http, "replica is not ready; its repositories go to the next replica");
                        }
                    }
                    let e = h.entry(r.http.clone()).or_insert(Health {
                        ready,
                        failed_at: None,
                    });
                    e.ready = ready;
                    if ready && r.admin.is_some() {
                        e.failed_at = None;
                    }
                    metrics
                        .replica_up
                        .with_label_values(&[&shard, &r.http])
                        .set(i64::from(ready));
                }
            }
        });
    }

    /// The replicas of `shard` in the order requests for `key` try them: the ones that take
    /// reads in rendezvous order, then the others (the health may be stale).
    fn order<'a>(&self, shard: &'a Shard, key: &[u8]) -> Vec<&'a Replica> {
        let all = replica_order(shard, key);
        let (mut up, down): (Vec<_>, Vec<_>) = all.into_iter().partition(|r| self.is_up(&r.http));
        up.extend(down);
        up
    }

    /// Forward `req` to the replica of `shard` that answers for `key`, failing over.
    pub async fn forward(
        &self,
        shard: &Shard,
        key: &[u8],
        req: Request<Incoming>,
        peer: SocketAddr,
    ) -> Response<Body> {
        let order = self.order(shard, key);
        let first_choice = replica_order(shard, key).first().map(|r| r.http.clone());
        if order.is_empty() {
            return ShardFailure {
                shard: shard.name.clone(),
                reason: "it has no replicas in the placement".into(),
            }
            .into_response();
        }
        let upload_pack = crate::route::is_upload_pack(req.method(), req.uri().path());
        let (parts, body) = req.into_parts();
        // Keep small bodies for a second attempt; stream big ones (one attempt).
        let length = parts
            .headers
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        let bodyless = parts.method == hyper::Method::GET || parts.method == hyper::Method::HEAD;
        let mut outbound = if bodyless {
            Outbound::Kept(Bytes::new())
        } else {
            match outbound(body, length).await {
                Ok(o) => o,
                // The client went away or sent a broken body: nobody waits for an answer.
                Err(_) => {
                    return crate::error(StatusCode::BAD_REQUEST, "could not read the request body")
                }
            }
        };
        let mut last = String::new();
        // Why the answering replica is not the repository's first choice.
        let mut reason = "down";
        for (i, replica) in order.iter().enumerate() {
            let more = i + 1 < order.len();
            let body: Body = match &mut outbound {
                Outbound::Kept(b) => Full::new(b.clone()).map_err(|never| match never {}).boxed(),
                Outbound::Streamed(b) => match b.take() {
                    Some(b) => b,
                    None => break,
                },
            };
            let Some(out) = build(&parts, &replica.http, body, peer) else {
                return crate::error(
                    StatusCode::BAD_REQUEST,
                    "request URI the front cannot forward",
                );
            };
            let resp = match self.client.request(out).await {
                Err(e) => {
                    tracing::warn!(shard = %shard.name, replica = %replica.http, error = %chain(&e), "replica unreachable; trying the next one");
                    self.mark_failed(replica);
                    last = format!("{}: {}", replica.http, chain(&e));
                    reason = "connect";
                    continue;
                }
                Ok(resp) if upload_pack && resp.status() == StatusCode::OK && more => {
                    match peek(resp).await {
                        Peeked::Answer(r) => r,
                        Peeked::Nothing => {
                            tracing::info!(shard = %shard.name, replica = %replica.http, "upload-pack answered nothing (the replica lacks a wanted object); trying the next replica");
                            last = format!("{}: lacked a wanted object", replica.http);
                            reason = "lacked_objects";
                            continue;
                        }
                    }
                }
                Ok(resp) => resp.map(|b| b.boxed()),
            };
            if first_choice.as_deref() != Some(replica.http.as_str()) {
                self.metrics
                    .failovers
                    .with_label_values(&[&shard.name, reason])
                    .inc();
            }
            return resp;
        }
        ShardFailure {
            shard: shard.name.clone(),
            reason: if last.is_empty() {
                "no replica answered".into()
            } else {
                last
            },
        }
        .into_response()
    }

    /// GET `path_and_query` from the replica of `shard` that answers node-wide parts, as
    /// JSON; the head's headers come back too (CORS and caching of the seeds' answers).
    pub async fn json(
        &self,
        shard: &Shard,
        path_and_query: &str,
        headers: &HeaderMap,
        peer: SocketAddr,
        placement: &str,
    ) -> Result<(HeaderMap, Value), ShardFailure> {
        let fail = |reason: String| ShardFailure {
            shard: shard.name.clone(),
            reason,
        };
        let mut last = String::from("no replica answered");
        for replica in self.order(shard, b"node-wide") {
            let Ok(uri) = format!("{}{path_and_query}", replica.http).parse::<Uri>() else {
                return Err(fail(format!("bad path {path_and_query:?}")));
            };
            let mut req = Request::get(uri);
            for (k, v) in headers.iter() {
                if k == hyper::header::HOST
                    || k == hyper::header::ORIGIN
                    || k == hyper::header::ACCEPT
                {
                    req = req.header(k, v);
                }
            }
            let Ok(mut req) = req.body(Empty::new().map_err(|never| match never {}).boxed()) else {
                return Err(fail("request".into()));
            };
            forwarded_for(req.headers_mut(), peer);
            // The seeds count and list under the placement the front merges by.
            if let Ok(v) = HeaderValue::from_str(placement) {
                req.headers_mut()
                    .insert(HeaderName::from_static("x-seedd-placement"), v);
            }
            let resp = match tokio::time::timeout(JSON_TIMEOUT, self.client.request(req)).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    self.mark_failed(replica);
                    last = format!("{}: {}", replica.http, chain(&e));
                    continue;
                }
                Err(_) => {
                    last = format!("{}: no answer within {JSON_TIMEOUT:?}", replica.http);
                    continue;
                }
            };
            let status = resp.status();
            let (parts, body) = resp.into_parts();
            let bytes = match Limited::new(body, MAX_JSON_BYTES).collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) => {
                    last = format!("{}: reading the answer: {e}", replica.http);
                    continue;
                }
            };
            if !status.is_success() {
                // The seed's own refusal (429, 503 with Retry-After) is the fleet's answer.
                return Err(fail(format!("{} answered {status}", replica.http)));
            }
            return serde_json::from_slice(&bytes)
                .map(|v| (parts.headers, v))
                .map_err(|e| fail(format!("{}: not JSON: {e}", replica.http)));
        }
        Err(fail(last))
    }
}

enum Peeked {
    Answer(Response<Body>),
    Nothing,
}

/// Wait for the first bytes of an upload-pack answer: none (git died before writing) or an
/// `ERR` packet means "try the next replica"; anything else is the answer, streamed on.
async fn peek(resp: Response<Incoming>) -> Peeked {
    let (parts, mut body) = resp.into_parts();
    loop {
        match body.frame().await {
            None => return Peeked::Nothing,
            Some(Err(_)) => return Peeked::Nothing,
            Some(Ok(frame)) => {
                let data = match frame.data_ref() {
                    Some(d) if d.is_empty() => continue,
                    Some(d) => d.clone(),
                    None => continue,
                };
                if data.len() >= 8 && &data[4..8] == b"ERR " {
                    return Peeked::Nothing;
                }
                let first =
                    futures_util::stream::once(
                        async move { Ok::<_, hyper::Error>(Frame::data(data)) },
                    );
                let rest = BodyStream::new(body);
                let stream = first.chain(rest);
                return Peeked::Answer(Response::from_parts(
                    parts,
                    BodyExt::boxed(StreamBody::new(stream)),
                ));
            }
        }
    }
}

/// Hop-by-hop headers are not forwarded (RFC 9110 §7.6.1).
const HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
];

fn build(
    parts: &hyper::http::request::Parts,
    base: &str,
    body: Body,
    peer: SocketAddr,
) -> Option<Request<Body>> {
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let uri: Uri = format!("{base}{pq}").parse().ok()?;
    let mut req = Request::builder()
        .method(parts.method.clone())
        .uri(uri)
        .version(hyper::Version::HTTP_11)
        .body(body)
        .ok()?;
    for (k, v) in parts.headers.iter() {
        if !HOP.contains(&k.as_str()) {
            req.headers_mut().append(k.clone(), v.clone());
        }
    }
    if !req.headers().contains_key(hyper::header::HOST) {
        // HTTP/2 clients send :authority instead.
        if let Some(a) = parts.uri.authority() {
            if let Ok(v) = HeaderValue::from_str(a.as_str()) {
                req.headers_mut().insert(hyper::header::HOST, v);
            }
        }
    }
    forwarded_for(req.headers_mut(), peer);
    Some(req)
}

/// Append the client's address to `X-Forwarded-For` (the seeds trust it from the front's
/// addresses, `http.rate.trusted_proxies`, for their per-IP limits).
fn forwarded_for(h: &mut HeaderMap, peer: SocketAddr) {
    let name = HeaderName::from_static("x-forwarded-for");
    let ip = peer.ip().to_string();
    let value = match h.get(&name).and_then(|v| v.to_str().ok()) {
        Some(prev) => format!("{prev}, {ip}"),
        None => ip,
    };
    if let Ok(v) = HeaderValue::from_str(&value) {
        h.insert(name, v);
    }
}

async fn probe(client: &Client<HttpConnector, Body>, admin: &str, timeout: Duration) -> bool {
    let Ok(uri) = format!("{admin}/readyz").parse::<Uri>() else {
        return false;
    };
    let Ok(req) = Request::get(uri).body(Empty::new().map_err(|never| match never {}).boxed())
    else {
        return false;
    };
    matches!(
        tokio::time::timeout(timeout, client.request(req)).await,
        Ok(Ok(r)) if r.status() == StatusCode::OK
    )
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
