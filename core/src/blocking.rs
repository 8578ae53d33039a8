//! CPU- and disk-heavy work (signed refs verification, re-indexing, directory sizes, index
//! scans) runs on tokio's blocking pool, never on an async worker, so a peer that makes it
//! expensive cannot stall the sessions, the admin API or HTTP serving.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum BlockingError {
    /// Nobody waits any longer; the work itself finishes in the background (threads cannot
    /// be cancelled).
    #[error("still running after {0:?}; it finishes in the background")]
    Deadline(Duration),
    #[error("panicked: {0}")]
    Panicked(String),
}

/// A flag blocking work checks between its steps, so that it stops when nobody waits for it
/// any longer (the caller went away or its deadline passed). Threads cannot be cancelled from
/// outside; work that checks this flag between units (changes of a COB, commits of a walk,
/// files of a diff) ends within one unit of the cancellation.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

/// The work saw its [`Cancel`] flag set and stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cancelled: nobody waits for this work any longer")]
pub struct Cancelled;

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Set the flag (idempotent).
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Err(Cancelled)` once the flag is set: `cancel.check()?` between units of work.
    pub fn check(&self) -> Result<(), Cancelled> {
        if self.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }
}

/// Sets its [`Cancel`] when dropped: held by the future that waits for the work, so the work
/// is told to stop when that future is dropped (client gone) or gives up (deadline).
#[derive(Debug)]
pub(crate) struct CancelOnDrop(pub(crate) Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Like [`run`], but `f` gets a [`Cancel`] that is set when the caller stops waiting: at
/// `deadline`, or when this future is dropped. `f` must check it between its units of work.
pub async fn run_cancellable<T: Send + 'static>(
    deadline: Duration,
    f: impl FnOnce(&Cancel) -> T + Send + 'static,
) -> Result<T, BlockingError> {
    let cancel = Cancel::new();
    let _guard = CancelOnDrop(cancel.clone());
    run(deadline, move || f(&cancel)).await
}

/// Runs `f` on the blocking pool and waits for it at most `deadline`.
pub async fn run<T: Send + 'static>(
    deadline: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, BlockingError> {
    match tokio::time::timeout(deadline, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(BlockingError::Panicked(e.to_string())),
        Err(_) => Err(BlockingError::Deadline(deadline)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    /// Work that checks its flag stops soon after the caller gives up at the deadline, and
    /// when the waiting future is dropped.
    #[tokio::test]
    async fn cancellable_work_stops_when_nobody_waits() {
        let steps = Arc::new(AtomicU32::new(0));
        let s = steps.clone();
        let started = Instant::now();
        let r = run_cancellable(Duration::from_millis(100), move |cancel| {
            while !cancel.is_cancelled() && started.elapsed() < Duration::from_secs(10) {
                s.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
            cancel.check()
        })
        .await;
        assert!(matches!(r, Err(BlockingError::Deadline(_))));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let after = steps.load(Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(steps.load(Ordering::Relaxed), after, "the work went on");

        let (tx, rx) = std::sync::mpsc::channel();
        let fut = run_cancellable(Duration::from_secs(10), move |cancel| {
            while !cancel.is_cancelled() {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = tx.send(());
        });
        let _ = tokio::time::timeout(Duration::from_millis(50), fut).await;
        assert!(
            rx.recv_timeout(Duration::from_secs(2)).is_ok(),
            "dropping did not cancel"
        );
    }

    /// On a single-threaded runtime other tasks keep running while the work blocks.
    #[tokio::test(flavor = "current_thread")]
    async fn blocking_work_does_not_stall_the_runtime() {
        let ticks = Arc::new(AtomicU32::new(0));
        let t = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                t.fetch_add(1, Ordering::Relaxed);
            }
        });
        let v = run(Duration::from_secs(5), || {
            std::thread::sleep(Duration::from_millis(300));
            7
        })
        .await
        .unwrap();
        assert_eq!(v, 7);
        assert!(
            ticks.load(Ordering::Relaxed) >= 5,
            "the runtime was stalled"
        );
        ticker.abort();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_wait_ends_at_the_deadline_and_panics_are_errors() {
        let started = Instant::now();
        let r = run(Duration::from_millis(50), || {
            std::thread::sleep(Duration::from_millis(500))
        })
        .await;
        assert!(matches!(r, Err(BlockingError::Deadline(_))), "{r:?}");
        assert!(started.elapsed() < Duration::from_millis(400));
        let r = run(Duration::from_secs(5), || -> u8 { panic!("boom") }).await;
        assert!(matches!(r, Err(BlockingError::Panicked(_))), "{r:?}");
    }
}
