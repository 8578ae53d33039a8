//! CPU- and disk-heavy work (signed refs verification, re-indexing, directory sizes, index
//! scans) runs on tokio's blocking pool, never on an async worker, so a peer that makes it
//! expensive cannot stall the sessions, the admin API or HTTP serving.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub(crate) enum BlockingError {
    /// Nobody waits any longer; the work itself finishes in the background (threads cannot
    /// be cancelled).
    #[error("still running after {0:?}; it finishes in the background")]
    Deadline(Duration),
    #[error("panicked: {0}")]
    Panicked(String),
}

/// Runs `f` on the blocking pool and waits for it at most `deadline`.
pub(crate) async fn run<T: Send + 'static>(
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
