//! One generation: `git upload-pack --stateless-rpc` answers the request into the claimed
//! cache file (its stdout is the file) at git's speed, whoever reads it and however slowly. The caller's slot permits
//! are held until git is done, then released: a slow reader never pins a slot, and a client
//! that goes away does not stop the generation (followers and later requests still get it).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::AsyncWriteExt;

use super::Claim;
use crate::serve::stream::kill_group;
use crate::serve::{GitServer, Service, View};

/// How often the file's length is looked at while it grows.
const PAUSE_MIN: Duration = Duration::from_millis(2);
/// ... and at most this long apart while it does not.
const PAUSE_MAX: Duration = Duration::from_millis(64);
/// Growth published to the readers at once, at least ...
const PUBLISH_BYTES: u64 = 1024 * 1024;
/// ... unless this long passed since the last time.
const PUBLISH_EVERY: Duration = Duration::from_millis(20);

/// What to run.
pub struct Job {
    pub git: GitServer,
    pub repo: PathBuf,
    /// [`Service::UploadPack`] (HTTP) or [`Service::StreamRequest`] (Radicle streams).
    pub service: Service,
    pub view: View,
    pub protocol: Option<String>,
    /// The whole request body.
    pub request: Bytes,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum GenError {
    #[error(transparent)]
    Spawn(#[from] crate::serve::ServeError),
    #[error("git produced nothing for {0:?}")]
    Idle(Duration),
    #[error("generation took longer than {0:?}")]
    Deadline(Duration),
    #[error("writing the cache file: {0}")]
    Write(std::io::Error),
    #[error("git upload-pack failed: {0}")]
    Git(String),
    #[error("every reader left")]
    Abandoned,
}

/// Runs `job` into `claim`'s file in the background; `permits` are dropped when git is done.
pub(crate) fn spawn<P: Send + 'static>(claim: Claim, job: Job, permits: P) {
    tokio::spawn(async move {
        let started = Instant::now();
        let key = claim.key().hex();
        let metrics = job.git.metrics.clone();
        metrics.packs_in_flight.inc();
        tracing::debug!(key = %key, "pack cache: generating");
        let mut claim = claim;
        let result = run(&mut claim, job).await;
        drop(permits);
        metrics.packs_in_flight.dec();
        match result {
            Ok(bytes) => {
                tracing::info!(key = %key, bytes, elapsed_ms = started.elapsed().as_millis() as u64, "pack cache: response generated");
                claim.complete(started.elapsed());
            }
            Err(GenError::Abandoned) => {
                tracing::debug!(key = %key, "pack cache: every reader left; generation cancelled");
                metrics.pack_cache.generations_abandoned.inc();
                claim.fail();
            }
            Err(e) => {
                tracing::warn!(key = %key, error = %crate::logging::chain(&e), "pack cache: generation failed; the response is not kept");
                claim.fail();
            }
        }
    });
}

/// Runs git with its stdout on the claim's file and follows the file's growth: the bytes
/// written (the caller completes or fails the claim).
async fn run(claim: &mut Claim, job: Job) -> Result<u64, GenError> {
    let limits = job.git.limits;
    let out = claim.file().try_clone().map_err(GenError::Write)?;
    let (mut child, stdin) = job.git.spawn_into(
        &job.repo,
        job.service,
        job.view,
        job.protocol.as_deref(),
        out,
    )?;
    if let Some(mut stdin) = stdin {
        let request = job.request;
        tokio::spawn(async move {
            if let Err(e) = stdin.write_all(&request).await {
                tracing::debug!(error = %crate::logging::chain(&e), "upload-pack request not fully written");
            }
            // Dropping stdin closes it: upload-pack sees the end of the request.
        });
    }
    let result = follow(&mut child, claim, limits.idle, limits.total).await;
    if result.is_err() {
        if let Ok(None) = child.try_wait() {
            kill_group(&child);
        }
    }
    result
}

/// Publishes the growth of the claim's file, which `child` writes (its stdout), until the
/// child exits: the bytes written if it succeeded. git writes the file itself, so a generation
/// costs seedd no pipe read, no copy and no write; readers take the bytes from the page cache
/// (`sendfile`, or positional reads). The file's length
/// is looked at every [`PAUSE_MIN`] while it grows, less often while it does not (up to
/// [`PAUSE_MAX`]), and published to the readers by [`PUBLISH_BYTES`] or after
/// [`PUBLISH_EVERY`] (each publication wakes every follower: a few large steps cost them less
/// than many small ones). A write error (a full disk) makes git fail, so the generation fails.
pub(super) async fn follow(
    child: &mut tokio::process::Child,
    claim: &mut Claim,
    idle: Duration,
    total: Duration,
) -> Result<u64, GenError> {
    let file = claim.file();
    let audience = claim.audience();
    let abandoned = audience.abandoned();
    tokio::pin!(abandoned);
    let started = Instant::now();
    let (mut grew, mut published_at) = (started, started);
    let mut pause = PAUSE_MIN;
    let (mut seen, mut published) = (0u64, 0u64);
    loop {
        let exited = tokio::select! {
            status = child.wait() => Some(status),
            () = tokio::time::sleep(pause) => None,
            () = &mut abandoned => return Err(GenError::Abandoned),
        };
        let len = file.metadata().map_err(GenError::Write)?.len();
        if len > seen {
            seen = len;
            grew = Instant::now();
            pause = PAUSE_MIN;
        } else {
            pause = (pause * 2).min(PAUSE_MAX);
        }
        let due = seen - published >= PUBLISH_BYTES || published_at.elapsed() >= PUBLISH_EVERY;
        if seen > published && (due || exited.is_some()) {
            claim.wrote(seen - published);
            published = seen;
            published_at = Instant::now();
        }
        match exited {
            Some(Ok(status)) if status.success() => return Ok(published),
            Some(Ok(status)) => return Err(GenError::Git(status.to_string())),
            Some(Err(e)) => return Err(GenError::Git(crate::logging::chain(&e).to_string())),
            None => {}
        }
        if grew.elapsed() >= idle {
            return Err(GenError::Idle(idle));
        }
        if started.elapsed() >= total {
            return Err(GenError::Deadline(total));
        }
    }
}
