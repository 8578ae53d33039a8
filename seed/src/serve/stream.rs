//! The output of a git child as a bounded byte stream: fixed-size reads (never the whole pack in
//! memory), an idle timeout and a total deadline, and on drop (client gone, timeout, shutdown)
//! the child's whole process group is killed and the child reaped.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use tokio::process::{Child, ChildStdout};
use tokio::time::Sleep;

use super::Permit;

/// One sideband-64k packet's worth (performance.md H4): 64 KiB reads.
const CHUNK: usize = 64 * 1024;

#[derive(Debug, Clone, Copy)]
pub struct StreamLimits {
    /// Abort if the child produces nothing for this long.
    pub idle: Duration,
    /// Abort when the whole response takes longer than this.
    pub total: Duration,
}

/// How a stream ended, for metrics and logs.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub bytes: u64,
    pub elapsed: Duration,
    /// `None` when the child's output was read to the end.
    pub aborted: Option<&'static str>,
}

type OnFinish = Box<dyn FnOnce(Summary) + Send>;

pub struct GitOutput {
    prefix: Option<Bytes>,
    stdout: ChildStdout,
    child: Option<Child>,
    buf: BytesMut,
    limits: StreamLimits,
    started: Instant,
    deadline: Instant,
    timer: Pin<Box<Sleep>>,
    bytes: u64,
    finished: bool,
    aborted: Option<&'static str>,
    on_finish: Option<OnFinish>,
    _permit: Option<Permit>,
}

impl GitOutput {
    pub fn new(
        prefix: Option<Bytes>,
        stdout: ChildStdout,
        child: Child,
        limits: StreamLimits,
        permit: Option<Permit>,
        on_finish: OnFinish,
    ) -> Self {
        let started = Instant::now();
        let deadline = started + limits.total;
        let first = (started + limits.idle).min(deadline);
        Self {
            prefix,
            stdout,
            child: Some(child),
            buf: BytesMut::with_capacity(CHUNK),
            limits,
            started,
            deadline,
            timer: Box::pin(tokio::time::sleep_until(first.into())),
            bytes: 0,
            finished: false,
            aborted: None,
            on_finish: Some(on_finish),
            _permit: permit,
        }
    }

    fn rearm(&mut self) {
        let next = (Instant::now() + self.limits.idle).min(self.deadline);
        self.timer.as_mut().reset(next.into());
    }
}

impl Stream for GitOutput {
    type Item = Result<Bytes, io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.finished {
            return Poll::Ready(None);
        }
        if let Some(p) = this.prefix.take() {
            this.bytes += p.len() as u64;
            return Poll::Ready(Some(Ok(p)));
        }
        if this.buf.capacity() < CHUNK {
            this.buf.reserve(CHUNK);
        }
        match tokio_util::io::poll_read_buf(Pin::new(&mut this.stdout), cx, &mut this.buf) {
            Poll::Ready(Ok(0)) => {
                this.finished = true;
                Poll::Ready(None)
            }
            Poll::Ready(Ok(n)) => {
                this.bytes += n as u64;
                this.rearm();
                Poll::Ready(Some(Ok(this.buf.split().freeze())))
            }
            Poll::Ready(Err(e)) => {
                this.finished = true;
                this.aborted = Some("read_error");
                Poll::Ready(Some(Err(e)))
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.finished = true;
                    let reason = if Instant::now() >= this.deadline {
                        "request_timeout"
                    } else {
                        "idle_timeout"
                    };
                    this.aborted = Some(reason);
                    tracing::warn!(reason, bytes = this.bytes, "aborting git response");
                    Poll::Ready(Some(Err(io::Error::new(io::ErrorKind::TimedOut, reason))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// SIGKILL the process group led by `child` (upload-pack and its pack-objects). Only called while
/// the leader is not yet reaped, so its pgid cannot have been reused.
fn kill_group(child: &Child) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// How long a child that closed its stdout may take to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(10);

impl Drop for GitOutput {
    fn drop(&mut self) {
        let mut aborted = self.aborted;
        if let Some(mut child) = self.child.take() {
            let clean_eof = self.finished && aborted.is_none();
            match child.try_wait() {
                Ok(Some(status)) => {
                    if !status.success() && aborted.is_none() {
                        tracing::debug!(%status, "git upload-pack exited unsuccessfully");
                    }
                }
                Ok(None) if clean_eof => match tokio::runtime::Handle::try_current() {
                    // Output complete; let it exit on its own, and reap it.
                    Ok(handle) => {
                        handle.spawn(async move {
                            if tokio::time::timeout(EXIT_GRACE, child.wait())
                                .await
                                .is_err()
                            {
                                kill_group(&child);
                            }
                        });
                    }
                    Err(_) => kill_group(&child),
                },
                Ok(None) => {
                    // The client went away (or we timed out): stop the work now.
                    kill_group(&child);
                    aborted.get_or_insert("client_gone");
                    // kill_on_drop + tokio's orphan reaper collect the zombie.
                }
                Err(e) => tracing::debug!(error = %e, "could not poll git child"),
            }
        }
        if let Some(f) = self.on_finish.take() {
            f(Summary {
                bytes: self.bytes,
                elapsed: self.started.elapsed(),
                aborted,
            });
        }
    }
}
