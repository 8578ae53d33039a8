//! One generation: `git upload-pack --stateless-rpc` answers the request into the claimed
//! cache file at git's speed, whoever reads it and however slowly. The caller's slot permits
//! are held until git is done, then released: a slow reader never pins a slot, and a client
//! that goes away does not stop the generation (followers and later requests still get it).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Claim;
use crate::serve::stream::{kill_group, EXIT_GRACE};
use crate::serve::{GitServer, Service, View};

/// Bytes asked of git's stdout at once.
const READ: usize = 256 * 1024;
/// Bytes gathered from git's stdout, as long as it has more ready, before they are written
/// to the file (one hand-off to the blocking pool, one wake-up of the readers).
const BATCH: usize = 1024 * 1024;
/// The size asked for git's stdout pipe (Linux's default is 64 KiB: a read per 64 KiB).
const PIPE: usize = 1024 * 1024;

/// What to run.
pub(crate) struct Job {
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
enum GenError {
    #[error(transparent)]
    Spawn(#[from] crate::serve::ServeError),
    #[error("git produced nothing for {0:?}")]
    Idle(Duration),
    #[error("generation took longer than {0:?}")]
    Deadline(Duration),
    #[error("reading git's output: {0}")]
    Read(std::io::Error),
    #[error("writing the cache file: {0}")]
    Write(std::io::Error),
    #[error("git upload-pack failed: {0}")]
    Git(String),
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
            Err(e) => {
                tracing::warn!(key = %key, error = %e, "pack cache: generation failed; the response is not kept");
                claim.fail();
            }
        }
    });
}

async fn run(claim: &mut Claim, job: Job) -> Result<u64, GenError> {
    let limits = job.git.limits;
    let deadline = tokio::time::Instant::now() + limits.total;
    let mut proc = job
        .git
        .spawn(&job.repo, job.service, job.view, job.protocol.as_deref())?;
    if let Some(mut stdin) = proc.stdin.take() {
        let request = job.request;
        tokio::spawn(async move {
            if let Err(e) = stdin.write_all(&request).await {
                tracing::debug!(error = %e, "upload-pack request not fully written");
            }
            // Dropping stdin closes it: upload-pack sees the end of the request.
        });
    }
    // A larger pipe: git writes ahead in bigger pieces, and each read takes more. Best effort
    // (the system's `pipe-max-size` may refuse it).
    if let Err(e) = rustix::pipe::fcntl_setpipe_size(&proc.stdout, PIPE) {
        tracing::debug!(error = %e, "pack cache: keeping the default pipe size");
    }
    let file = claim.file();
    let mut written = 0u64;
    let mut buf = BytesMut::with_capacity(BATCH);
    let mut ended = false;
    let outcome = loop {
        if ended {
            break Ok(());
        }
        buf.reserve(READ);
        let until = (tokio::time::Instant::now() + limits.idle).min(deadline);
        let n = match tokio::time::timeout_at(until, proc.stdout.read_buf(&mut buf)).await {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => break Err(GenError::Read(e)),
            Err(_) if until >= deadline => break Err(GenError::Deadline(limits.total)),
            Err(_) => break Err(GenError::Idle(limits.idle)),
        };
        if n == 0 {
            break Ok(());
        }
        // More that is ready now joins this write (git writes faster than one pipe's worth).
        let mut failed = None;
        while buf.len() < BATCH {
            buf.reserve(READ);
            match proc.stdout.read_buf(&mut buf).now_or_never() {
                Some(Ok(0)) => {
                    ended = true;
                    break;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    failed = Some(e);
                    break;
                }
                None => break,
            }
        }
        if let Some(e) = failed {
            break Err(GenError::Read(e));
        }
        let chunk = buf.split().freeze();
        let f = file.clone();
        let len = chunk.len() as u64;
        let data = chunk.clone();
        let wrote = tokio::task::spawn_blocking(move || write_all(&f, &data)).await;
        match wrote {
            Ok(Ok(())) => {}
            Ok(Err(e)) => break Err(GenError::Write(e)),
            Err(e) => break Err(GenError::Write(std::io::Error::other(e))),
        }
        written += len;
        claim.wrote_chunk(chunk);
    };
    if let Err(e) = outcome {
        if let Ok(None) = proc.child.try_wait() {
            kill_group(&proc.child);
        }
        return Err(e);
    }
    match tokio::time::timeout(EXIT_GRACE, proc.child.wait()).await {
        Ok(Ok(status)) if status.success() => Ok(written),
        Ok(Ok(status)) => Err(GenError::Git(status.to_string())),
        Ok(Err(e)) => Err(GenError::Git(e.to_string())),
        Err(_) => {
            kill_group(&proc.child);
            Err(GenError::Git("did not exit after its output ended".into()))
        }
    }
}

fn write_all(file: &Arc<std::fs::File>, data: &[u8]) -> std::io::Result<()> {
    (&**file).write_all(data)
}
