//! Serving git over a Radicle stream (protocol.md §3.7, §6.2, §6.3): the peer opens a stream,
//! sends the header pkt-line `git-upload-pack /<rid>\0[host=…]\0version=2\0`, then talks
//! protocol v2 to a stateful `git upload-pack` whose output goes back as Git frames. Refusal
//! is silent: the stream is just closed, as radicle-node does.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use seedd_proto::crypto::{NodeId, RepoId};
use seedd_proto::wire::{Control, Frame, Link, StreamId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use super::input::Input;
use super::{Outgoing, Shared};
use crate::serve::{Service, View};

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
    metrics: Arc<crate::metrics::Metrics>,
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
                    tracing::info!(peer = %ctx.remote, %stream, error = %e, "refusing git stream: bad header");
                    return "bad_header";
                }
            },
            Ok(None) => {}
            Err(e) => {
                tracing::info!(peer = %ctx.remote, %stream, error = %e, "refusing git stream: bad header");
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

    // 2. Authorisation: we must hold it; private repositories only for their delegates and
    //    allow list. Refusal = close, like radicle-node.
    let index = shared.index.clone();
    let record = match tokio::task::spawn_blocking(move || index.repo(&rid)).await {
        Ok(Ok(r)) => r,
        _ => return "error",
    };
    if shared.policies.seeding(&rid).is_none() {
        tracing::info!(peer = %ctx.remote, %rid, "refusing git stream: repository blocked by policy");
        return "refused_policy";
    }
    let Some(record) = record else {
        tracing::info!(peer = %ctx.remote, %rid, "refusing git stream: repository not held");
        return "refused_unknown";
    };
    // Egress is charged to the repository's owner tenant; its daily quota stops serving.
    let payer = shared
        .policies
        .tenants()
        .and_then(|t| t.payer(None, &rid).map(|p| (t.clone(), p)));
    if let Some((t, p)) = &payer {
        if t.egress_exhausted(p).is_some() {
            tracing::info!(peer = %ctx.remote, %rid, tenant = %p, "refusing git stream: tenant egress quota used up for today");
            return "refused_quota";
        }
    }
    if let crate::storage::Visibility::Private { allow } = &record.visibility {
        if !record.delegates.contains(&ctx.remote) && !allow.contains(&ctx.remote) {
            tracing::info!(peer = %ctx.remote, %rid, "refusing git stream: private repository");
            return "refused_private";
        }
    }

    // 3. A serve slot (separate from the fetch budget), waiting briefly.
    let Ok(Ok(_slot)) = tokio::time::timeout(
        shared.cfg.serve_queue_timeout,
        shared.serve_slots.clone().acquire_owned(),
    )
    .await
    else {
        tracing::warn!(peer = %ctx.remote, %rid, "refusing git stream: all serve slots busy");
        return "refused_busy";
    };

    // 4. Stateful upload-pack on every ref of the repository.
    let path = shared.storage.path_of(&rid);
    let mut process = match shared
        .git
        .spawn(&path, Service::Stream, View::All, Some("version=2"))
    {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %e, %rid, "cannot start git upload-pack");
            return "error";
        }
    };
    let Some(mut stdin) = process.stdin.take() else {
        return "error";
    };
    tracing::info!(peer = %ctx.remote, %rid, %stream, "serving git stream");
    // Wanted over Radicle (what an identity over its inventory cap announces first).
    shared.metrics.demand.record(rid);
    if !buf.is_empty() && stdin.write_all(&buf).await.is_err() {
        return "error";
    }
    let mut received = buf.len() as u64;
    let max_request = shared.cfg.max_stream_request_bytes;
    let mut stdin = Some(stdin);
    let mut chunk = vec![0u8; CHUNK];
    let sent_metric = shared.metrics.p2p.git_served_bytes.clone();
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
                    let permit = acquire(&ctx.budget, n).await;
                    let frame = Frame::git(stream, data.to_vec());
                    let Ok(bytes) = frame.encode() else { return "error" };
                    sent_metric.inc_by(n as u64);
                    if let Some((t, p)) = &payer {
                        t.add_egress(p, "radicle", n as u64);
                    }
                    if ctx.outbox.send(Outgoing::Frame { bytes: Bytes::from(bytes), permit }).await.is_err() {
                        return "cancelled";
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

/// Takes `n` bytes of the session's git budget (at most the whole budget).
async fn acquire(budget: &Arc<Semaphore>, n: usize) -> Option<OwnedSemaphorePermit> {
    let n = u32::try_from(n.min(GIT_OUTBOX_BYTES)).unwrap_or(u32::MAX);
    budget.clone().acquire_many_owned(n).await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_as_the_official_fetcher_sends_it() {
        let pkt = b"003dgit-upload-pack /zgqhS3obJHVRoCRkKLuZYt5MD7Af\0\0version=2\0";
        let (payload, used) = split_pkt_line(pkt).unwrap().unwrap();
        assert_eq!(used, pkt.len());
        let rid = parse_header(payload).unwrap();
        assert_eq!(rid.to_string(), "rad:zgqhS3obJHVRoCRkKLuZYt5MD7Af");
        // With rad: and a host field.
        let rid2 = parse_header(
            b"git-upload-pack /rad:zgqhS3obJHVRoCRkKLuZYt5MD7Af\0host=seed.example:8776\0version=2\0",
        )
        .unwrap();
        assert_eq!(rid, rid2);
    }

    #[test]
    fn header_split_and_rejections() {
        let pkt = b"003dgit-upload-pack /zgqhS3obJHVRoCRkKLuZYt5MD7Af\0\0version=2\0";
        for cut in 0..pkt.len() {
            assert_eq!(split_pkt_line(&pkt[..cut]).unwrap(), None, "cut {cut}");
        }
        assert_eq!(split_pkt_line(b"zzzz"), Err(HeaderError::PktLine));
        assert_eq!(split_pkt_line(b"0003"), Err(HeaderError::PktLine));
        assert_eq!(split_pkt_line(b"ffff"), Err(HeaderError::TooLong));
        let ok = "zgqhS3obJHVRoCRkKLuZYt5MD7Af";
        for (bad, err) in [
            (
                format!("git-receive-pack /{ok}\0\0version=2\0"),
                HeaderError::Service,
            ),
            (
                format!("git-upload-pack {ok}\0\0version=2\0"),
                HeaderError::Rid,
            ),
            (
                "git-upload-pack /nope\0\0version=2\0".to_owned(),
                HeaderError::Rid,
            ),
            (format!("git-upload-pack /{ok}\0\0"), HeaderError::Version),
            (
                format!("git-upload-pack /{ok}\0\0version=1\0"),
                HeaderError::Version,
            ),
        ] {
            assert_eq!(parse_header(bad.as_bytes()), Err(err), "{bad:?}");
        }
    }
}
