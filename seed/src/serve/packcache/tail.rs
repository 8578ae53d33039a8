//! Reading a cache file while it may still be written: the writer publishes how many bytes are
//! in the file and whether it finished or failed (a `watch`); readers read up to that mark and
//! wait for more. A reader never ends cleanly unless the writer said `Complete`: a failed or
//! vanished writer is an error, so a truncated response is never served as a whole one.
//!
//! No mmap (`#![forbid(unsafe_code)]`): the file is read with positional reads in large chunks
//! into owned buffers handed to the body as `Bytes` (one copy out of the page cache), on the
//! blocking pool.

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::Stream;
use tokio::sync::watch;

use crate::metrics::Metrics;

/// Bytes read from the file at once (and handed to the body as one chunk).
const CHUNK: u64 = 512 * 1024;

/// What the writer of a cache file has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// This many bytes are in the file; more may come.
    Writing(u64),
    /// The file is whole: this many bytes.
    Complete(u64),
    /// The writer gave up; the file must not be served.
    Failed,
}

/// Why a reader stopped early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TailError {
    #[error("the response's generation failed")]
    Failed,
    #[error("the cache file is shorter than its writer said")]
    Short,
    #[error("reading the cache file: {0}")]
    Read(#[from] io::Error),
}

/// A reader of one cache file from its start.
pub(crate) struct Tail {
    file: Arc<std::fs::File>,
    progress: watch::Receiver<Progress>,
    offset: u64,
    ended: bool,
    metrics: Option<Arc<Metrics>>,
}

impl Tail {
    pub(crate) fn new(
        file: std::fs::File,
        progress: watch::Receiver<Progress>,
        metrics: Option<Arc<Metrics>>,
    ) -> Self {
        Self {
            file: Arc::new(file),
            progress,
            offset: 0,
            ended: false,
            metrics,
        }
    }

    /// Waits until there is something to send (or the writer finished): `Err` when the writer
    /// failed before writing anything, so that the caller can still answer another way.
    pub(crate) async fn ready(&mut self) -> Result<(), TailError> {
        loop {
            match *self.progress.borrow_and_update() {
                Progress::Writing(0) => {}
                Progress::Writing(_) | Progress::Complete(_) => return Ok(()),
                Progress::Failed => return Err(TailError::Failed),
            }
            if self.progress.changed().await.is_err() {
                return match *self.progress.borrow() {
                    Progress::Complete(_) => Ok(()),
                    _ => Err(TailError::Failed),
                };
            }
        }
    }

    /// The next chunk; `None` only after the writer completed and everything was read.
    pub(crate) async fn next_chunk(&mut self) -> Option<Result<Bytes, TailError>> {
        if self.ended {
            return None;
        }
        let result = self.next_inner().await;
        if !matches!(result, Some(Ok(_))) {
            self.ended = true;
        }
        result
    }

    async fn next_inner(&mut self) -> Option<Result<Bytes, TailError>> {
        loop {
            let (available, complete) = match *self.progress.borrow_and_update() {
                Progress::Writing(n) => (n, false),
                Progress::Complete(n) => (n, true),
                Progress::Failed => return Some(Err(TailError::Failed)),
            };
            if self.offset < available {
                let len = (available - self.offset).min(CHUNK);
                let (file, offset) = (self.file.clone(), self.offset);
                let read = tokio::task::spawn_blocking(move || read_at(&file, offset, len)).await;
                let chunk = match read {
                    Ok(Ok(c)) => c,
                    Ok(Err(e)) => return Some(Err(e)),
                    Err(e) => return Some(Err(TailError::Read(io::Error::other(e)))),
                };
                self.offset += chunk.len() as u64;
                if let Some(m) = &self.metrics {
                    m.pack_cache.served_bytes.inc_by(chunk.len() as u64);
                }
                return Some(Ok(chunk));
            }
            if complete {
                return None;
            }
            if self.progress.changed().await.is_err() {
                // The writer is gone: only a completed file may still be read to its end.
                if !matches!(*self.progress.borrow(), Progress::Complete(_)) {
                    return Some(Err(TailError::Failed));
                }
            }
        }
    }

    /// The rest of the file as a body stream (ends with an error if the writer fails).
    pub(crate) fn into_stream(self) -> impl Stream<Item = Result<Bytes, io::Error>> + Send {
        futures_util::stream::unfold(self, |mut tail| async move {
            let next = tail.next_chunk().await?;
            Some((next.map_err(io::Error::other), tail))
        })
    }
}

/// `len` bytes at `offset` (fewer only at the end of the file, which is then an error: the
/// writer said they were there).
fn read_at(file: &std::fs::File, offset: u64, len: u64) -> Result<Bytes, TailError> {
    let len = usize::try_from(len).map_err(|_| TailError::Short)?;
    let mut buf = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => return Err(TailError::Short),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(TailError::Read(e)),
        }
    }
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn pair(dir: &std::path::Path) -> (std::fs::File, Tail, watch::Sender<Progress>) {
        let path = dir.join("f");
        let writer = std::fs::File::create(&path).unwrap();
        let (tx, rx) = watch::channel(Progress::Writing(0));
        let tail = Tail::new(std::fs::File::open(&path).unwrap(), rx, None);
        (writer, tail, tx)
    }

    async fn drain(tail: &mut Tail) -> (Vec<u8>, Option<TailError>) {
        let mut got = Vec::new();
        while let Some(chunk) = tail.next_chunk().await {
            match chunk {
                Ok(c) => got.extend_from_slice(&c),
                Err(e) => return (got, Some(e)),
            }
        }
        (got, None)
    }

    #[tokio::test]
    async fn a_tailing_reader_sees_everything_the_writer_completed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, mut tail, tx) = pair(dir.path());
        let data: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i % 251) as u8).collect();
        let expected = data.clone();
        let reader = tokio::spawn(async move {
            tail.ready().await.unwrap();
            drain(&mut tail).await
        });
        let mut written = 0u64;
        for piece in data.chunks(100_000) {
            writer.write_all(piece).unwrap();
            written += piece.len() as u64;
            tx.send_replace(Progress::Writing(written));
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        tx.send_replace(Progress::Complete(written));
        drop(tx);
        let (got, err) = reader.await.unwrap();
        assert!(err.is_none(), "{err:?}");
        assert_eq!(got, expected);
    }

    #[tokio::test]
    async fn a_failed_writer_is_an_error_not_a_clean_end() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, mut tail, tx) = pair(dir.path());
        writer.write_all(b"partial").unwrap();
        tx.send_replace(Progress::Writing(7));
        let reader = tokio::spawn(async move { drain(&mut tail).await });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        tx.send_replace(Progress::Failed);
        let (got, err) = reader.await.unwrap();
        assert_eq!(got, b"partial");
        assert!(matches!(err, Some(TailError::Failed)), "{err:?}");
    }

    #[tokio::test]
    async fn a_writer_that_vanishes_without_completing_is_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, mut tail, tx) = pair(dir.path());
        writer.write_all(b"abc").unwrap();
        tx.send_replace(Progress::Writing(3));
        drop(tx);
        let (got, err) = drain(&mut tail).await;
        assert_eq!(got, b"abc");
        assert!(matches!(err, Some(TailError::Failed)), "{err:?}");
        // And before anything was written, `ready` says so (the caller answers directly).
        let other = tempfile::tempdir().unwrap();
        let (_w, mut tail, tx) = pair(other.path());
        drop(tx);
        assert!(matches!(tail.ready().await, Err(TailError::Failed)));
    }

    #[tokio::test]
    async fn a_file_shorter_than_announced_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, mut tail, tx) = pair(dir.path());
        writer.write_all(b"abc").unwrap();
        tx.send_replace(Progress::Complete(10));
        let (got, err) = drain(&mut tail).await;
        assert!(got.is_empty());
        assert!(matches!(err, Some(TailError::Short)), "{err:?}");
    }
}
