//! Serving git over a Radicle stream (protocol.md §3.7, §6.2, §6.3): the peer opens a stream,
//! sends the header pkt-line `git-upload-pack /<rid>\0[host=…]\0version=2\0`, then talks
//! protocol v2. Refusal is silent: the stream is just closed, as radicle-node does.
//!
//! Protocol v2 is stateless per command (git's `upload_pack_v2` keeps nothing between
//! requests; clients resend their common `have`s every round), so a stream is served as a
//! command loop (issue 13 §2, §3): the probed capability advertisement (the bytes a stateful
//! `git upload-pack` sends first), then one request at a time (pkt-lines up to a flush):
//! `ls-refs` from the ref snapshot without a process, a fetch without `have`s through the pack
//! cache, anything else by one `git upload-pack --stateless-rpc`; until the fetcher's Eof.
//! If the capability probe failed: one stateful `git upload-pack` per stream, piped both ways.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use seedd_proto::crypto::{NodeId, RepoId};
use seedd_proto::wire::{Control, Frame, Link, StreamId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use super::input::Input;
use super::{Outgoing, Shared};
use seedd_core::serve::advert::{self, LsRefs};
use seedd_core::serve::packcache::generate::Job;
use seedd_core::serve::packcache::{self, Key, Normalised};
use seedd_core::serve::refcache::Answer;
use seedd_core::serve::{Service, View};

/// Largest header pkt-line accepted (the real one is ~60 bytes).
const MAX_HEADER: usize = 1024;
/// Bytes of git output queued per session before the stream waits (back-pressure).
pub(crate) const GIT_OUTBOX_BYTES: usize = 1024 * 1024;
/// Read size from upload-pack's stdout = largest Git frame payload (as radicle-node).
const CHUNK: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HeaderError {
    #[error("invalid pkt-line length")]
    PktLine,
    #[error("header pkt-line too long")]
    TooLong,
    #[error("not a git-upload-pack request")]
    Service,
    #[error("invalid repository id in the request path")]
    Rid,
    #[error("only git protocol version 2 is supported")]
    Version,
}

/// Splits the first pkt-line off `buf`: `Ok(None)` if incomplete, else (payload, bytes used).
pub(crate) fn split_pkt_line(buf: &[u8]) -> Result<Option<(&[u8], usize)>, HeaderError> {
    let Some(len) = buf.get(..4) else {
        return Ok(None);
    };
    let len = std::str::from_utf8(len)
        .ok()
        .and_then(|s| usize::from_str_radix(s, 16).ok())
        .ok_or(HeaderError::PktLine)?;
    if len < 4 {
        return Err(HeaderError::PktLine);
    }
    if len > MAX_HEADER {
        return Err(HeaderError::TooLong);
    }
    Ok(buf.get(4..len).map(|payload| (payload, len)))
}

/// Parses the header payload (`git-upload-pack /<rid>\0[host=…]\0version=2\0`).
pub(crate) fn parse_header(payload: &[u8]) -> Result<RepoId, HeaderError> {
    let payload = payload.strip_suffix(b"\n").unwrap_or(payload);
    let rest = payload
        .strip_prefix(b"git-upload-pack ")
        .ok_or(HeaderError::Service)?;
    let mut fields = rest.split(|b| *b == 0);
    let path = fields.next().ok_or(HeaderError::Rid)?;
    let path = std::str::from_utf8(path).map_err(|_| HeaderError::Rid)?;
    let rid = path
        .strip_prefix('/')
        .ok_or(HeaderError::Rid)?
        .parse::<RepoId>()
        .map_err(|_| HeaderError::Rid)?;
    // Optional `host=…`, then extra parameters; `version=2` is required.
    let mut version2 = false;
    for field in fields {
        if field == b"version=2" {
            version2 = true;
        } else if field.starts_with(b"version=") {
            return Err(HeaderError::Version);
        }
    }
    if !version2 {
        return Err(HeaderError::Version);
    }
    Ok(rid)
}

/// What a session needs to run a stream.
#[derive(Clone)]
pub(crate) struct StreamCtx {
    pub shared: Arc<Shared>,
    pub remote: NodeId,
    pub link: Link,
    pub outbox: mpsc::Sender<Outgoing>,
    /// Byte budget for git output queued on this session.
    pub budget: Arc<Semaphore>,
    /// The peer's address as a per-client key (`config::client_key`, IPv6 by /64): its
    /// pack-cache generations count against `http.pack_cache.max_generations_per_client`
    /// like an HTTP client's.
    pub client: u128,
}

impl StreamCtx {
    pub(crate) async fn send_close(&self, stream: StreamId) {
        if let Ok(bytes) = Frame::control(self.link, Control::Close { stream }).encode() {
            let _ = self
                .outbox
                .send(Outgoing::Frame {
                    bytes: Bytes::from(bytes),
                    permit: None,
                })
                .await;
        }
    }
}

/// Counts a serve in flight; on drop (finished or aborted) records its result.
struct InFlight {
    metrics: Arc<seedd_core::metrics::Metrics>,
    result: &'static str,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.metrics.p2p.git_serves_in_flight.dec();
        self.metrics
            .p2p
            .git_serves
            .with_label_values(&[self.result])
            .inc();
    }
}

/// Serves one stream until it ends; always sends `Close` at the end and reports the result.
/// If the task is aborted (the peer closed the stream, the session ended) the result is
/// `cancelled` and upload-pack is killed with its process group.
pub(crate) async fn serve(ctx: StreamCtx, stream: StreamId, mut input: Input) {
    ctx.shared.metrics.p2p.git_serves_in_flight.inc();
    let mut guard = InFlight {
        metrics: ctx.shared.metrics.clone(),
        result: "cancelled",
    };
    let result = serve_inner(&ctx, stream, &mut input).await;
    guard.result = result;
    tracing::debug!(peer = %ctx.remote, %stream, result, "git stream finished");
    drop(guard);
    ctx.send_close(stream).await;
}

async fn serve_inner(ctx: &StreamCtx, stream: StreamId, input: &mut Input) -> &'static str {
    let shared = &ctx.shared;
    let idle = shared.cfg.stream_idle_timeout;

    // 1. The header pkt-line (may arrive split over several frames).
    let mut buf = Vec::new();
    let (rid, used) = loop {
        match split_pkt_line(&buf) {
            Ok(Some((payload, used))) => match parse_header(payload) {
                Ok(rid) => break (rid, used),
                Err(e) => {
                    tracing::info!(peer = %ctx.remote, %stream, error = %seedd_core::logging::chain(&e), "refusing git stream: bad header");
                    return "bad_header";
                }
            },
            Ok(None) => {}
            Err(e) => {
                tracing::info!(peer = %ctx.remote, %stream, error = %seedd_core::logging::chain(&e), "refusing git stream: bad header");
                return "bad_header";
            }
        }
        match tokio::time::timeout(idle, input.recv()).await {
            Ok(Some(data)) => buf.extend_from_slice(&data),
            Ok(None) => return "cancelled",
            Err(_) => return "timeout",
        }
    };
    buf.drain(..used);

    // 2. Authorisation (again before every request: see [`authorise`]).
    let payer = match authorise(ctx, rid).await {
        Ok(payer) => payer,
        Err(result) => return result,
    };
    let out = Out {
        ctx,
        stream,
        charge: Box::new(move |n| {
            if let Some((t, p)) = &payer {
                t.add_egress(p, "radicle", n);
            }
        }),
    };

    // 3. A serve slot (separate from the fetch budget), waiting briefly.
    let Some(slot) = serve_slot(shared).await else {
        tracing::warn!(peer = %ctx.remote, %rid, "refusing git stream: all serve slots busy");
        return "refused_busy";
    };

    // 4. The probed capabilities: the stream is a loop of stateless v2 commands. Without
    //    them (the probe failed), one stateful upload-pack.
    let Some(caps) = shared.advertiser.caps(&shared.git).await else {
        return serve_stateful(&out, rid, input, buf, slot).await;
    };
    tracing::info!(peer = %ctx.remote, %rid, %stream, "serving git stream");
    // Wanted over Radicle (what an identity over its inventory cap announces first).
    shared.metrics.demand.record(rid);
    if let Err(result) = out.send(&caps.v2_stream()).await {
        return result;
    }
    let mut answerer = Answerer {
        out: &out,
        slot: Some(slot),
        rid,
        path: shared.storage.path_of(&rid),
    };
    let limits = Limits {
        idle,
        max_request: shared.cfg.max_stream_request_bytes,
    };
    command_loop(input, buf, limits, &mut answerer).await
}

/// Who pays for what a stream serves: the tenant registry and the owner tenant's name.
type Payer = Option<(seedd_core::tenant::Tenants, String)>;

/// Whether `ctx.remote` may be served `rid` now: we must hold it and the policy must seed it;
/// a private repository only for its delegates and allow list — decided before the owner's
/// egress quota, so that a node outside the allow list learns nothing of a private repository
/// from the answer; then the owner tenant's daily egress. Refusal = close, like
/// radicle-node. Asked when the stream opens and again before each request, so a repository
/// made private (or blocked, or out of quota) while a stream is open stops being served at the
/// next request. Returns who pays for the egress.
async fn authorise(ctx: &StreamCtx, rid: RepoId) -> Result<Payer, &'static str> {
    let shared = &ctx.shared;
    let index = shared.index.clone();
    let record = match tokio::task::spawn_blocking(move || index.repo(&rid)).await {
        Ok(Ok(r)) => r,
        _ => return Err("error"),
    };
    if shared.policies.seeding(&rid).is_none() {
        tracing::info!(peer = %ctx.remote, %rid, "refusing git stream: repository blocked by policy");
        return Err("refused_policy");
    }
    let Some(record) = record else {
        tracing::info!(peer = %ctx.remote, %rid, "refusing git stream: repository not held");
        return Err("refused_unknown");
    };
    if let seedd_core::storage::Visibility::Private { allow } = &record.visibility {
        if !record.delegates.contains(&ctx.remote) && !allow.contains(&ctx.remote) {
            tracing::info!(peer = %ctx.remote, %rid, "refusing git stream: private repository");
            return Err("refused_private");
        }
    }
    // Egress is charged to the repository's owner tenant; its daily quota stops serving.
    let payer = shared
        .policies
        .tenants()
        .and_then(|t| t.payer(None, &rid).map(|p| (t.clone(), p)));
    if let Some((t, p)) = &payer {
        if t.egress_exhausted(p).is_some() {
            tracing::info!(peer = %ctx.remote, %rid, tenant = %p, "refusing git stream: tenant egress quota used up for today");
            return Err("refused_quota");
        }
    }
    Ok(payer)
}

/// Git output on one stream: Git frames of at most [`CHUNK`] bytes, each taking its share of
/// the session's git budget, counted in `seedd_p2p_git_served_bytes_total` and charged to the
/// repository's owner tenant.
struct Out<'a> {
    ctx: &'a StreamCtx,
    stream: StreamId,
    charge: Box<dyn Fn(u64) + Send + Sync>,
}

impl Out<'_> {
    async fn send(&self, data: &[u8]) -> Result<(), &'static str> {
        for piece in data.chunks(CHUNK) {
            let n = piece.len();
            let permit = acquire(&self.ctx.budget, n).await;
            let Ok(bytes) = Frame::git(self.stream, piece.to_vec()).encode() else {
                return Err("error");
            };
            self.ctx
                .shared
                .metrics
                .p2p
                .git_served_bytes
                .inc_by(n as u64);
            (self.charge)(n as u64);
            let frame = Outgoing::Frame {
                bytes: Bytes::from(bytes),
                permit,
            };
            if self.ctx.outbox.send(frame).await.is_err() {
                return Err("cancelled");
            }
        }
        Ok(())
    }
}

/// The path kept for when git's capabilities could not be probed: one `git upload-pack` (v2,
/// stateful) piped both ways, holding the stream's serve slot.
async fn serve_stateful(
    out: &Out<'_>,
    rid: RepoId,
    input: &mut Input,
    buf: Vec<u8>,
    _slot: OwnedSemaphorePermit,
) -> &'static str {
    let ctx = out.ctx;
    let shared = &ctx.shared;
    let idle = shared.cfg.stream_idle_timeout;
    let path = shared.storage.path_of(&rid);
    let mut process = match shared
        .git
        .spawn(&path, Service::Stream, View::All, Some("version=2"))
    {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %seedd_core::logging::chain(&e), %rid, "cannot start git upload-pack");
            return "error";
        }
    };
    let Some(mut stdin) = process.stdin.take() else {
        return "error";
    };
    tracing::info!(peer = %ctx.remote, %rid, stream = %out.stream, "serving git stream (stateful)");
    shared.metrics.demand.record(rid);
    if !buf.is_empty() && stdin.write_all(&buf).await.is_err() {
        return "error";
    }
    let mut received = buf.len() as u64;
    let max_request = shared.cfg.max_stream_request_bytes;
    let mut stdin = Some(stdin);
    let mut chunk = vec![0u8; CHUNK];
    loop {
        tokio::select! {
            data = input.recv(), if stdin.is_some() => match data {
                Some(data) => {
                    received += data.len() as u64;
                    if received > max_request {
                        tracing::warn!(peer = %ctx.remote, %rid, received, "git stream request too large; closing");
                        return "too_large";
                    }
                    if let Some(w) = stdin.as_mut() {
                        if w.write_all(&data).await.is_err() {
                            stdin = None;
                        }
                    }
                }
                // Eof from the fetcher: end of input; upload-pack finishes and exits.
                None => stdin = None,
            },
            read = process.stdout.read(&mut chunk) => match read {
                Ok(0) => break,
                Ok(n) => {
                    let Some(data) = chunk.get(..n) else { return "error" };
                    if let Err(result) = out.send(data).await {
                        return result;
                    }
                }
                Err(_) => return "error",
            },
            _ = tokio::time::sleep(idle) => {
                tracing::info!(peer = %ctx.remote, %rid, "git stream idle; closing");
                return "timeout";
            }
        }
    }
    // upload-pack closed its output: done (the fetcher's Eof usually came first).
    match tokio::time::timeout(Duration::from_secs(5), process.child.wait()).await {
        Ok(Ok(status)) if status.success() => "ok",
        // Killed because the fetcher sent Eof before upload-pack noticed: still served.
        Ok(Ok(_)) if stdin.is_none() => "ok",
        _ => "error",
    }
}

/// One of the identity's serve slots (separate from the fetch budget), waiting briefly.
async fn serve_slot(shared: &Shared) -> Option<OwnedSemaphorePermit> {
    match tokio::time::timeout(
        shared.cfg.serve_queue_timeout,
        shared.serve_slots.clone().acquire_owned(),
    )
    .await
    {
        Ok(Ok(permit)) => Some(permit),
        _ => None,
    }
}

/// Why the bytes of a stream are not a sequence of v2 requests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RequestError {
    #[error("invalid pkt-line length {0:?}")]
    PktLine([u8; 4]),
    #[error("the stream ended inside a request")]
    Truncated,
}

/// The largest pkt-line git writes or reads (`LARGE_PACKET_MAX`).
const MAX_PKT: usize = 65520;

/// Splits protocol-v2 requests off the bytes of a stream: a request is its pkt-lines up to and
/// including the first flush (`0000`); delimiters (`0001`) stay inside it.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    buf: Vec<u8>,
    /// How far `buf` was checked: whole pkt-lines, none of them a flush.
    scanned: usize,
}

impl Requests {
    pub(crate) fn new(buf: Vec<u8>) -> Self {
        Self { buf, scanned: 0 }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Whether part of a request is waiting for the rest.
    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The next whole request, if it is all there.
    pub(crate) fn next_request(&mut self) -> Result<Option<Vec<u8>>, RequestError> {
        loop {
            let Some(head) = self.buf.get(self.scanned..self.scanned + 4) else {
                return Ok(None);
            };
            let raw: [u8; 4] = [head[0], head[1], head[2], head[3]];
            let len = std::str::from_utf8(&raw)
                .ok()
                .filter(|s| s.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|s| usize::from_str_radix(s, 16).ok())
                .ok_or(RequestError::PktLine(raw))?;
            match len {
                0 => {
                    let end = self.scanned + 4;
                    let rest = self.buf.split_off(end);
                    let request = std::mem::replace(&mut self.buf, rest);
                    self.scanned = 0;
                    return Ok(Some(request));
                }
                1 => self.scanned += 4,
                n if (4..=MAX_PKT).contains(&n) => {
                    if self.buf.len() < self.scanned + n {
                        return Ok(None);
                    }
                    self.scanned += n;
                }
                _ => return Err(RequestError::PktLine(raw)),
            }
        }
    }
}

/// What bounds the requests of one stream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Longest wait for the fetcher's next bytes.
    pub idle: Duration,
    /// Bytes the fetcher may send on the stream in all (after the header).
    pub max_request: u64,
}

/// Answers one whole request; `Err` ends the stream with that result.
pub(crate) trait Respond {
    async fn respond(&mut self, request: Vec<u8>) -> Result<(), &'static str>;
}

/// Reads requests off `input` (after `buf`, what came with the header) and hands each to
/// `answerer`, until the fetcher's Eof (or a request that is only a flush, where git's
/// stateful server stops too). Malformed bytes, too many of them or silence close the stream.
pub(crate) async fn command_loop(
    input: &mut Input,
    buf: Vec<u8>,
    limits: Limits,
    answerer: &mut impl Respond,
) -> &'static str {
    let mut received = buf.len() as u64;
    if received > limits.max_request {
        return "too_large";
    }
    let mut requests = Requests::new(buf);
    loop {
        let request = match requests.next_request() {
            Ok(Some(request)) => request,
            Ok(None) => match tokio::time::timeout(limits.idle, input.recv()).await {
                Ok(Some(data)) => {
                    received += data.len() as u64;
                    if received > limits.max_request {
                        tracing::warn!(received, "git stream request too large; closing");
                        return "too_large";
                    }
                    requests.push(&data);
                    continue;
                }
                // The fetcher's Eof: done, unless it came inside a request.
                Ok(None) if requests.is_empty() => return "ok",
                Ok(None) => {
                    tracing::info!(error = %RequestError::Truncated, "bad git stream request; closing");
                    return "bad_request";
                }
                Err(_) => return "timeout",
            },
            Err(e) => {
                tracing::info!(error = %seedd_core::logging::chain(&e), "bad git stream request; closing");
                return "bad_request";
            }
        };
        if request == b"0000" {
            return "ok";
        }
        if let Err(result) = answerer.respond(request).await {
            return result;
        }
    }
}

/// Answers the requests of one stream of `rid`: `ls-refs` from the ref snapshot, a fetch
/// without `have`s through the pack cache, anything else by one `git upload-pack
/// --stateless-rpc` (View::All, the stream's settings).
///
/// The stream takes a serve slot when it opens (so a peer that opens streams and stalls before
/// its first request holds slots, and its unread input is bounded while it waits) and gives it
/// up once its first request is answered. From then on a slot is held only while git works
/// for the stream: a generation it claims in the pack cache, or one `git upload-pack`, takes
/// a slot (waiting briefly) and frees it when git is done. A fetcher's own work between
/// requests (a Radicle fetch validates signed refs and identities between its rounds, seconds
/// on a busy client) holds none, so a few slow clients cannot starve every other fetcher of
/// slots (8 concurrent `rad clone`s against the 4 slots of a one-core seed were refused
/// after the 10 s queue timeout: radicle_serve bench).
struct Answerer<'a> {
    out: &'a Out<'a>,
    slot: Option<OwnedSemaphorePermit>,
    rid: RepoId,
    path: std::path::PathBuf,
}

impl Respond for Answerer<'_> {
    async fn respond(&mut self, request: Vec<u8>) -> Result<(), &'static str> {
        // What was allowed when the stream opened may not be now (made private, blocked,
        // quota used up): asked again for every request.
        authorise(self.out.ctx, self.rid).await?;
        let answered = self.answer(request).await;
        // The slot the stream opened with is not kept past its first answer.
        self.slot = None;
        answered
    }
}

impl Answerer<'_> {
    async fn answer(&mut self, request: Vec<u8>) -> Result<(), &'static str> {
        if let Some(args) = LsRefs::parse(&request) {
            if self.ls_refs(args).await? {
                return Ok(());
            }
        } else if self.cached(&request).await? {
            return Ok(());
        }
        self.git(request).await
    }

    fn count(&self, answer: &str) {
        self.out
            .ctx
            .shared
            .metrics
            .p2p
            .git_requests
            .with_label_values(&[answer])
            .inc();
    }

    /// `ls-refs` from the snapshot: `false` if the refs cannot be read now (git answers).
    async fn ls_refs(&mut self, args: LsRefs) -> Result<bool, &'static str> {
        let args = args.for_stream();
        let advertiser = &self.out.ctx.shared.advertiser;
        // What every clone asks (`refs/rad/id`, all namespaces) is kept with the snapshot;
        // per-namespace lists vary by fetcher and are rendered without being kept, so that
        // they do not crowd out the few answers a snapshot keeps.
        let body = if args.prefixes.len() <= 1 {
            let key = Answer::LsRefs(View::All, args.clone());
            advertiser
                .answer(self.rid, &self.path, key, move |snap| {
                    advert::ls_refs(snap, View::All, &args)
                })
                .await
        } else {
            advertiser
                .render(self.rid, &self.path, move |snap| {
                    advert::ls_refs(snap, View::All, &args)
                })
                .await
        };
        let Some(body) = body else {
            return Ok(false);
        };
        self.count("snapshot");
        self.out.send(&body).await?;
        Ok(true)
    }

    /// A fetch without `have`s through the pack cache: `false` to ask git directly (not
    /// cacheable, cache disabled, not admitted, refs unreadable, nothing generated).
    async fn cached(&mut self, request: &[u8]) -> Result<bool, &'static str> {
        let shared = &self.out.ctx.shared;
        let Some(cache) = &shared.pack_cache else {
            return Ok(false);
        };
        let normalised = match Normalised::parse(true, request) {
            Ok(n) => n,
            Err(why) => {
                tracing::debug!(rid = %self.rid, reason = %why, "not cacheable; asking git");
                return Ok(false);
            }
        };
        let Some(fingerprint) = shared.advertiser.fingerprint(self.rid, &self.path).await else {
            return Ok(false);
        };
        let key = Key::new(&self.rid, View::All, &fingerprint, &normalised);
        let job = || Job {
            git: shared.git.clone(),
            repo: self.path.clone(),
            service: Service::StreamRequest,
            view: View::All,
            protocol: Some("version=2".to_owned()),
            request: Bytes::copy_from_slice(request),
        };
        let client = self.out.ctx.client;
        // A generation holds the stream's serve slot (or a new one) while git runs.
        let held = &mut self.slot;
        let slot = || async move {
            match held.take() {
                Some(permit) => Ok(permit),
                None => serve_slot(shared).await.ok_or("refused_busy"),
            }
        };
        let Some(mut tail) = packcache::reader(cache, key, Some(client), job, slot).await? else {
            return Ok(false);
        };
        self.count("pack_cache");
        let idle = shared.cfg.stream_idle_timeout;
        loop {
            match tokio::time::timeout(idle, tail.next_chunk()).await {
                Ok(Some(Ok(chunk))) => self.out.send(&chunk).await?,
                Ok(None) => return Ok(true),
                Ok(Some(Err(e))) => {
                    tracing::warn!(rid = %self.rid, error = %seedd_core::logging::chain(&e), "cached response failed while sent; closing");
                    return Err("error");
                }
                Err(_) => return Err("timeout"),
            }
        }
    }

    /// One `git upload-pack --stateless-rpc` answers `request`, holding a serve slot (the
    /// stream's first, else a new one) until it is done.
    async fn git(&mut self, request: Vec<u8>) -> Result<(), &'static str> {
        let ctx = self.out.ctx;
        let shared = &ctx.shared;
        let _slot = match self.slot.take() {
            Some(slot) => slot,
            None => {
                let Some(slot) = serve_slot(shared).await else {
                    tracing::warn!(peer = %ctx.remote, rid = %self.rid, "closing git stream: all serve slots busy");
                    return Err("refused_busy");
                };
                slot
            }
        };
        let mut process = match shared.git.spawn(
            &self.path,
            Service::StreamRequest,
            View::All,
            Some("version=2"),
        ) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %seedd_core::logging::chain(&e), rid = %self.rid, "cannot start git upload-pack");
                return Err("error");
            }
        };
        self.count("git");
        if let Some(mut stdin) = process.stdin.take() {
            tokio::spawn(async move {
                if let Err(e) = stdin.write_all(&request).await {
                    tracing::debug!(error = %seedd_core::logging::chain(&e), "upload-pack request not fully written");
                }
            });
        }
        let idle = shared.cfg.stream_idle_timeout;
        let mut chunk = vec![0u8; CHUNK];
        loop {
            match tokio::time::timeout(idle, process.stdout.read(&mut chunk)).await {
                Ok(Ok(0)) => break,
                Ok(Ok(n)) => {
                    let data = chunk.get(..n).ok_or("error")?;
                    self.out.send(data).await?;
                }
                Ok(Err(_)) => return Err("error"),
                Err(_) => return Err("timeout"),
            }
        }
        match tokio::time::timeout(Duration::from_secs(5), process.child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => {
                tracing::info!(rid = %self.rid, %status, "git upload-pack failed on a stream request");
                Err("error")
            }
            _ => Err("error"),
        }
    }
}

/// Takes `n` bytes of the session's git budget (at most the whole budget).
async fn acquire(budget: &Arc<Semaphore>, n: usize) -> Option<OwnedSemaphorePermit> {
    let n = u32::try_from(n.min(GIT_OUTBOX_BYTES)).unwrap_or(u32::MAX);
    budget.clone().acquire_many_owned(n).await.ok()
}

#[cfg(test)]
mod tests;
