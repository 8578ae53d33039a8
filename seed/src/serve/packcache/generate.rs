//! One generation: `git upload-pack --stateless-rpc` answers the request into the claimed
//! cache file at git's speed, whoever reads it and however slowly. The caller's slot permits
//! are held until git is done, then released: a slow reader never pins a slot, and a client
//! that goes away does not stop the generation (followers and later requests still get it).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::AsyncWriteExt;

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
pub(super) enum GenError {
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
        let (claim, result) = run(claim, job).await;
        drop(permits);
        metrics.packs_in_flight.dec();
        match (claim, result) {
            (Some(claim), Ok(bytes)) => {
                tracing::info!(key = %key, bytes, elapsed_ms = started.elapsed().as_millis() as u64, "pack cache: response generated");
                claim.complete(started.elapsed());
            }
            (claim, Err(e)) => {
                tracing::warn!(key = %key, error = %e, "pack cache: generation failed; the response is not kept");
                if let Some(claim) = claim {
                    claim.fail();
                }
            }
            // The copying thread panicked: the claim was dropped, which fails the entry.
            (None, Ok(_)) => {}
        }
    });
}

/// Runs git and copies its answer into the claim's file: the claim back (`None` if the copying
/// thread was lost) and the bytes written.
async fn run(claim: Claim, job: Job) -> (Option<Claim>, Result<u64, GenError>) {
    let limits = job.git.limits;
    let proc = match job
        .git
        .spawn(&job.repo, job.service, job.view, job.protocol.as_deref())
    {
        Ok(p) => p,
        Err(e) => return (Some(claim), Err(e.into())),
    };
    let crate::serve::GitProcess {
        mut child,
        stdin,
        stdout,
    } = proc;
    if let Some(mut stdin) = stdin {
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
    if let Err(e) = rustix::pipe::fcntl_setpipe_size(&stdout, PIPE) {
        tracing::debug!(error = %e, "pack cache: keeping the default pipe size");
    }
    // git's stdout leaves the reactor: one blocking thread reads it and writes the file.
    let copied = match stdout.into_owned_fd() {
        Ok(fd) => {
            let (idle, total) = (limits.idle, limits.total);
            tokio::task::spawn_blocking(move || {
                let mut claim = claim;
                let r = copy(&fd, &mut claim, idle, total);
                (claim, r)
            })
            .await
            .map(|(c, r)| (Some(c), r))
            .unwrap_or_else(|e| (None, Err(GenError::Read(std::io::Error::other(e)))))
        }
        Err(e) => (Some(claim), Err(GenError::Read(e))),
    };
    let (claim, outcome) = copied;
    let written = match outcome {
        Ok(n) => n,
        Err(e) => {
            if let Ok(None) = child.try_wait() {
                kill_group(&child);
            }
            return (claim, Err(e));
        }
    };
    let status = match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
        Ok(Ok(status)) if status.success() => Ok(written),
        Ok(Ok(status)) => Err(GenError::Git(status.to_string())),
        Ok(Err(e)) => Err(GenError::Git(e.to_string())),
        Err(_) => {
            kill_group(&child);
            Err(GenError::Git("did not exit after its output ended".into()))
        }
    };
    (claim, status)
}

/// Copies git's stdout (`fd`) into the claim's file until its end, on a blocking thread: what
/// git has ready is gathered (up to [`BATCH`]), written at the file's end and published to
/// the readers, with the recent chunks they take from memory. No hand-off per batch: handing
/// every write to the blocking pool and every pipe read to the reactor was a quarter of a
/// cold generation's CPU in seedd (futex and wake-ups, in `perf`).
pub(super) fn copy(
    fd: &std::os::fd::OwnedFd,
    claim: &mut Claim,
    idle: Duration,
    total: Duration,
) -> Result<u64, GenError> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    use rustix::io::Errno;
    use std::os::unix::fs::FileExt;
    // A total beyond what `Instant` can hold is no deadline.
    let deadline = Instant::now().checked_add(total);
    // Reads must not block: the idle and total limits are kept by `poll`.
    rustix::io::ioctl_fionbio(fd, true).map_err(|e| GenError::Read(e.into()))?;
    let file = claim.file();
    let mut written = 0u64;
    loop {
        let mut buf: Vec<u8> = Vec::with_capacity(BATCH);
        let mut ended = false;
        while buf.len() < BATCH {
            buf.reserve(READ.min(BATCH - buf.len()));
            match rustix::io::read(fd, rustix::buffer::spare_capacity(&mut buf)) {
                Ok(0) => {
                    ended = true;
                    break;
                }
                Ok(_) => {}
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) if !buf.is_empty() => break,
                Err(Errno::AGAIN) => {
                    // Nothing ready: wait for git, within its idle and total limits.
                    let left = deadline.map_or(Duration::MAX, |d| {
                        d.saturating_duration_since(Instant::now())
                    });
                    if left.is_zero() {
                        return Err(GenError::Deadline(total));
                    }
                    let wait = idle.min(left);
                    let timeout = Timespec::try_from(wait).unwrap_or(Timespec {
                        tv_sec: i64::MAX,
                        tv_nsec: 0,
                    });
                    let mut fds = [PollFd::new(fd, PollFlags::IN)];
                    match poll(&mut fds, Some(&timeout)) {
                        Ok(0) if wait < idle => return Err(GenError::Deadline(total)),
                        Ok(0) => return Err(GenError::Idle(idle)),
                        Ok(_) | Err(Errno::INTR) => {}
                        Err(e) => return Err(GenError::Read(e.into())),
                    }
                }
                Err(e) => return Err(GenError::Read(e.into())),
            }
        }
        if !buf.is_empty() {
            file.write_all_at(&buf, written).map_err(GenError::Write)?;
            written += buf.len() as u64;
            claim.wrote_chunk(Bytes::from(buf));
        }
        if ended {
            return Ok(written);
        }
    }
}
