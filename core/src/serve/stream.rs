//! The output of a git child as a bounded byte stream: fixed-size reads (never the whole pack in
//! memory); a watchdog enforces an idle timeout (git silent *or* client not reading) and a total
//! deadline; on drop (client gone, timeout, shutdown) the child's whole process group is killed
//! and the child reaped.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use tokio::process::{Child, ChildStdout};

use super::Permit;

/// Room for one read of git's output: at least one sideband-64k packet (performance.md H4),
/// and as much as the pipe holds when git is ahead of the client (fewer reads and wake-ups
/// per pack than one per 64 KiB).
const CHUNK: usize = 256 * 1024;
/// The size asked for git's stdout pipe (Linux's default, 64 KiB, caps every read at 64 KiB).
const PIPE: usize = 1024 * 1024;

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

/// What the stream and its watchdog share.
struct Shared {
    /// Last time bytes moved (read from git, which only happens when the client consumes).
    progress: Mutex<Instant>,
    state: Mutex<Owned>,
    done: AtomicBool,
    bytes: AtomicU64,
    started: Instant,
    /// Called exactly once: by the watchdog on abort (the body may never be dropped while a
    /// stalled client keeps the connection open) or by `Drop`.
    on_finish: Mutex<Option<OnFinish>>,
}

impl Shared {
    fn finish(&self, aborted: Option<&'static str>) {
        let f = self.on_finish.lock().ok().and_then(|mut f| f.take());
        if let Some(f) = f {
            f(Summary {
                bytes: self.bytes.load(Ordering::Relaxed),
                elapsed: self.started.elapsed(),
                aborted,
            });
        }
    }
}

/// Resources that must be released on abort even if the body is never polled again.
struct Owned {
    child: Option<Child>,
    permit: Option<Permit>,
    aborted: Option<&'static str>,
}

pub struct GitOutput {
    prefix: Option<Bytes>,
    stdout: ChildStdout,
    buf: BytesMut,
    finished: bool,
    read_error: bool,
    shared: Arc<Shared>,
    /// [`GitOutput::failing_on_exit`]: the end of the output waits for git's exit status.
    check_exit: bool,
    /// That wait, once git closed its output.
    exit: Option<tokio::task::JoinHandle<Option<std::process::ExitStatus>>>,
}

impl GitOutput {
    /// Must be called within a tokio runtime: it spawns the watchdog that enforces `limits`
    /// even when the client stops reading (the body is then not polled at all).
    pub fn new(
        prefix: Option<Bytes>,
        stdout: ChildStdout,
        child: Child,
        limits: StreamLimits,
        permit: Option<Permit>,
        on_finish: OnFinish,
    ) -> Self {
        // Best effort: the system's `pipe-max-size` may refuse it.
        if let Err(e) = rustix::pipe::fcntl_setpipe_size(&stdout, PIPE) {
            tracing::debug!(error = %crate::logging::chain(&e), "keeping git's default pipe size");
        }
        let started = Instant::now();
        let shared = Arc::new(Shared {
            progress: Mutex::new(started),
            state: Mutex::new(Owned {
                child: Some(child),
                permit,
                aborted: None,
            }),
            done: AtomicBool::new(false),
            bytes: AtomicU64::new(0),
            started,
            on_finish: Mutex::new(Some(on_finish)),
        });
        tokio::spawn(watchdog(shared.clone(), limits, started));
        Self {
            prefix,
            stdout,
            buf: BytesMut::with_capacity(CHUNK),
            finished: false,
            read_error: false,
            shared,
            check_exit: false,
            exit: None,
        }
    }

    /// The output ends only once git has exited, and fails (`git_failed`) when git did not
    /// exit 0: a `git archive` that dies midway (out of memory, a corrupt object) is a failed
    /// download, not a short file that looks complete. (Upload-pack responses carry their own
    /// framing and keep the plain end.)
    pub fn failing_on_exit(mut self) -> Self {
        self.check_exit = true;
        self
    }

    /// After EOF: the exit status decides between a clean end and an error.
    fn poll_exit(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<Bytes>>> {
        if self.exit.is_none() {
            let child = self
                .shared
                .state
                .lock()
                .ok()
                .and_then(|mut st| st.child.take());
            let Some(mut child) = child else {
                // The watchdog took it (aborted) or the lock is poisoned: the plain end below.
                return self.end();
            };
            self.exit = Some(tokio::spawn(async move {
                match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
                    Ok(Ok(status)) => Some(status),
                    Ok(Err(_)) => None,
                    Err(_) => {
                        kill_group(&child);
                        None
                    }
                }
            }));
        }
        let Some(exit) = self.exit.as_mut() else {
            return self.end();
        };
        match Pin::new(exit).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(status) => {
                self.exit = None;
                let ok = matches!(status, Ok(Some(s)) if s.success());
                if !ok {
                    tracing::warn!(?status, "git exited unsuccessfully; failing the response");
                    if let Ok(mut st) = self.shared.state.lock() {
                        st.aborted.get_or_insert("git_failed");
                    }
                }
                self.end()
            }
        }
    }

    /// EOF: a clean end unless the response was aborted.
    fn end(&mut self) -> Poll<Option<io::Result<Bytes>>> {
        self.finished = true;
        // EOF after the watchdog killed git is a truncated response: fail the body so the
        // client sees an error rather than a clean end.
        let aborted = self.shared.state.lock().ok().and_then(|s| s.aborted);
        match aborted {
            Some(reason) => Poll::Ready(Some(Err(io::Error::new(io::ErrorKind::TimedOut, reason)))),
            None => Poll::Ready(None),
        }
    }
}

/// Abort a response that stalls (either side) for `limits.idle` or runs past `limits.total`:
/// kill git and free the pack slot.
async fn watchdog(shared: Arc<Shared>, limits: StreamLimits, started: Instant) {
    let tick = (limits.idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let deadline = started + limits.total;
    loop {
        tokio::time::sleep(tick).await;
        if shared.done.load(Ordering::Acquire) {
            return;
        }
        let now = Instant::now();
        let last = shared.progress.lock().map_or(now, |p| *p);
        let reason = if now >= deadline {
            "request_timeout"
        } else if now.duration_since(last) >= limits.idle {
            "idle_timeout"
        } else {
            continue;
        };
        if let Ok(mut st) = shared.state.lock() {
            if let Some(mut child) = st.child.take() {
                if let Ok(None) = child.try_wait() {
                    kill_group(&child);
                }
            }
            st.permit = None;
            st.aborted.get_or_insert(reason);
        }
        tracing::warn!(reason, "aborting git response");
        shared.finish(Some(reason));
        return;
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
            this.shared
                .bytes
                .fetch_add(p.len() as u64, Ordering::Relaxed);
            return Poll::Ready(Some(Ok(p)));
        }
        if this.buf.capacity() < CHUNK {
            this.buf.reserve(CHUNK);
        }
        match tokio_util::io::poll_read_buf(Pin::new(&mut this.stdout), cx, &mut this.buf) {
            Poll::Ready(Ok(0)) if this.check_exit => this.poll_exit(cx),
            Poll::Ready(Ok(0)) => this.end(),
            Poll::Ready(Ok(n)) => {
                this.shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
                if let Ok(mut p) = this.shared.progress.lock() {
                    *p = Instant::now();
                }
                Poll::Ready(Some(Ok(this.buf.split().freeze())))
            }
            Poll::Ready(Err(e)) => {
                this.finished = true;
                this.read_error = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// SIGKILL the process group led by `child` (upload-pack and its pack-objects). Only called while
/// the leader is not yet reaped, so its pgid cannot have been reused.
pub(super) fn kill_group(child: &Child) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// How long a child that closed its stdout may take to exit before it is killed.
pub(super) const EXIT_GRACE: Duration = Duration::from_secs(10);

impl Drop for GitOutput {
    fn drop(&mut self) {
        self.shared.done.store(true, Ordering::Release);
        let (child, permit, mut aborted) = match self.shared.state.lock() {
            Ok(mut st) => (st.child.take(), st.permit.take(), st.aborted),
            Err(_) => (None, None, Some("internal")),
        };
        if self.read_error {
            aborted.get_or_insert("read_error");
        }
        if let Some(mut child) = child {
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
                    // The client went away: stop the work now.
                    kill_group(&child);
                    aborted.get_or_insert("client_gone");
                    // kill_on_drop + tokio's orphan reaper collect the zombie.
                }
                Err(e) => {
                    tracing::debug!(error = %crate::logging::chain(&e), "could not poll git child")
                }
            }
        }
        drop(permit);
        self.shared.finish(aborted);
    }
}
