//! Reading a cache file while it may still be written: the writer publishes how many bytes are
//! in the file and whether it finished or failed (a `watch`); readers read up to that mark and
//! wait for more. A reader never ends cleanly unless the writer said `Complete`: a failed or
//! vanished writer is an error, so a truncated response is never served as a whole one.
//!
//! While the file is written (by git itself, [`super::generate`]), a reader reads it with
//! positional reads in large chunks into owned buffers handed to the body as `Bytes` (one copy
//! out of the page cache). A chunk is read on the reader's own task when the page cache holds
//! it (`preadv2` with `RWF_NOWAIT`, which never waits for the disk: the file was just written,
//! or is hot), and only the part that is not cached is read on the blocking pool. A finished
//! file is read the same way: it is never mapped (issue 25 §5), since a disk error on a mapped
//! page is a `SIGBUS` that takes the daemon down, where a positional read returns an error
//! that ends this one response (and a file cut short is [`TailError::Short`]). A wave of identical clones reads the same
//! hot file sixteen times over; handing every 512 KiB chunk to the blocking pool and back was
//! a third of what each follower cost (scheduler switches and wake-ups, in `perf`).

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
pub enum TailError {
    #[error("the response's generation failed")]
    Failed,
    #[error("the cache file is shorter than its writer said")]
    Short,
    #[error("reading the cache file: {0}")]
    Read(io::Error),
}

/// A reader of one cache file from its start.
pub struct Tail {
    file: Arc<std::fs::File>,
    progress: watch::Receiver<Progress>,
    offset: u64,
    ended: bool,
    metrics: Option<Arc<Metrics>>,
    /// The entry's readers, which this one leaves when dropped.
    audience: Option<Arc<super::Audience>>,
}

impl Drop for Tail {
    fn drop(&mut self) {
        if let Some(a) = self.audience.take() {
            a.leave();
        }
    }
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
            audience: None,
        }
    }

    /// This reader counts in `audience` (joined by the caller) until dropped.
    pub(crate) fn with_audience(mut self, audience: Arc<super::Audience>) -> Self {
        self.audience = Some(audience);
        self
    }

    /// Waits until there is something to send (or the writer finished): `Err` when the writer
    /// failed before writing anything, so that the caller can still answer another way.
    pub(crate) async fn ready(&mut self) -> Result<(), TailError> {
        match self.wait_until(|p| p != Progress::Writing(0)).await {
            Progress::Writing(0) | Progress::Failed => Err(TailError::Failed),
            Progress::Writing(_) | Progress::Complete(_) => Ok(()),
        }
    }

    /// Waits until the writer's progress satisfies `stop`, failed, or the writer is gone:
    /// the progress then.
    async fn wait_until(&mut self, stop: impl Fn(Progress) -> bool) -> Progress {
        loop {
            let p = *self.progress.borrow_and_update();
            if stop(p) || p == Progress::Failed {
                return p;
            }
            if self.progress.changed().await.is_err() {
                return *self.progress.borrow();
            }
        }
    }

    /// The next chunk; `None` only after the writer completed and everything was read.
    pub async fn next_chunk(&mut self) -> Option<Result<Bytes, TailError>> {
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
                let chunk = read_chunk(&self.file, self.offset, len, read_cached).await;
                let chunk = match chunk {
                    Ok(c) => c,
                    Err(e) => return Some(Err(e)),
                };
                self.offset += chunk.len() as u64;
                if let Some(m) = &self.metrics {
                    m.pack_cache.served_bytes.inc_by(chunk.len() as u64);
                    m.pack_cache.read_bytes.inc_by(chunk.len() as u64);
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

    /// The file read.
    pub fn file(&self) -> Arc<std::fs::File> {
        self.file.clone()
    }

    /// The whole finished file and its length, for a reader that has read nothing yet: what a
    /// hit sends without reading it (`http::splice`).
    pub fn whole(&self) -> Option<(Arc<std::fs::File>, u64)> {
        match *self.progress.borrow() {
            Progress::Complete(n) if self.offset == 0 => Some((self.file.clone(), n)),
            _ => None,
        }
    }

    /// How much of the file is written, each time that grows, with whether it is whole; an
    /// error when the writer fails or vanishes first. For a reader that sends the bytes
    /// without reading them (`http::splice`).
    pub fn into_lengths(self) -> impl Stream<Item = Result<(u64, bool), TailError>> + Send {
        // The state: the reader and the length last reported.
        futures_util::stream::unfold(Some((self, 0)), |state| async move {
            let (mut tail, seen) = state?;
            let grew = move |p| !matches!(p, Progress::Writing(n) if n <= seen);
            match tail.wait_until(grew).await {
                Progress::Writing(n) if n > seen => Some((Ok((n, false)), Some((tail, n)))),
                Progress::Complete(n) => Some((Ok((n, true)), None)),
                // Failed, or the writer is gone.
                _ => Some((Err(TailError::Failed), None)),
            }
        })
    }

    /// The rest of the file as a body stream (ends with an error if the writer fails).
    pub fn into_stream(self) -> impl Stream<Item = Result<Bytes, io::Error>> + Send {
        futures_util::stream::unfold(self, |mut tail| async move {
            let next = tail.next_chunk().await?;
            Some((next.map_err(io::Error::other), tail))
        })
    }
}

/// Reads what the page cache holds at `offset` into `buf` without waiting for the disk:
/// `Ok(0)` at the end of the file, `WouldBlock` when the next byte is not cached (or the
/// kernel cannot say).
pub(crate) fn read_cached(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    use rustix::io::{Errno, ReadWriteFlags};
    let mut slices = [io::IoSliceMut::new(buf)];
    match rustix::io::preadv2(file, &mut slices, offset, ReadWriteFlags::NOWAIT) {
        Ok(n) => Ok(n),
        Err(Errno::INTR) => Err(io::ErrorKind::Interrupted.into()),
        // Not cached; or a kernel or filesystem without `RWF_NOWAIT`.
        Err(Errno::AGAIN | Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL) => {
            Err(io::ErrorKind::WouldBlock.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether the page cache holds `count` bytes at `offset` of `file`, judged by their first
/// and last byte (pages are written and evicted in runs).
pub fn resident(file: &std::fs::File, offset: u64, count: u64) -> bool {
    let mut byte = [0u8; 1];
    [offset, offset + count.saturating_sub(1)]
        .iter()
        .all(|&at| matches!(read_cached(file, &mut byte, at), Ok(1)))
}

/// `len` bytes at `offset` (fewer only at the end of the file, which is then an error: the
/// writer said they were there): what `cached` reads without blocking, the rest on the
/// blocking pool.
async fn read_chunk(
    file: &Arc<std::fs::File>,
    offset: u64,
    len: u64,
    cached: fn(&std::fs::File, &mut [u8], u64) -> io::Result<usize>,
) -> Result<Bytes, TailError> {
    let len = usize::try_from(len).map_err(|_| TailError::Short)?;
    let mut buf = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        match cached(file, &mut buf[filled..], offset + filled as u64) {
            Ok(0) => return Err(TailError::Short),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(TailError::Read(e)),
        }
    }
    if filled == len {
        return Ok(Bytes::from(buf));
    }
    let file = file.clone();
    tokio::task::spawn_blocking(move || read_rest(&file, buf, filled, offset))
        .await
        .map_err(|e| TailError::Read(io::Error::other(e)))?
}

/// Fills `buf` from `filled` on with the file's bytes at `offset + filled` (blocking reads).
fn read_rest(
    file: &std::fs::File,
    mut buf: Vec<u8>,
    mut filled: usize,
    offset: u64,
) -> Result<Bytes, TailError> {
    let len = buf.len();
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

impl From<io::Error> for TailError {
    fn from(e: io::Error) -> Self {
        TailError::Read(e)
    }
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

    /// A chunk the page cache holds only in part: the cached bytes are read without blocking,
    /// the rest on the blocking pool, and the chunk is whole and in order either way.
    #[tokio::test]
    async fn chunks_are_whole_however_much_of_them_is_cached() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..CHUNK + 1000).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = Arc::new(std::fs::File::open(&path).unwrap());
        /// Caches the first 1,000 bytes of every read, at most 100 at a time.
        fn partly(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            if offset >= 1000 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(100).min(1000 - offset as usize);
            file.read_at(&mut buf[..n], offset)
        }
        fn never(_: &std::fs::File, _: &mut [u8], _: u64) -> io::Result<usize> {
            Err(io::ErrorKind::WouldBlock.into())
        }
        for cached in [partly, never, read_cached] {
            let chunk = read_chunk(&file, 17, CHUNK, cached).await.unwrap();
            assert_eq!(&chunk[..], &data[17..17 + CHUNK as usize]);
        }
        // Past the end: short, whichever way it is read.
        for cached in [partly, never, read_cached] {
            let result = read_chunk(&file, 1000, CHUNK + 1, cached).await;
            assert!(matches!(result, Err(TailError::Short)), "not short");
        }
    }

    /// `whole` only once the writer completed; `into_lengths` reports growth, the end, and a
    /// failure as an error.
    #[tokio::test]
    async fn lengths_follow_the_writer_and_whole_waits_for_its_end() {
        use futures_util::StreamExt as _;
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, tail, tx) = pair(dir.path());
        writer.write_all(b"abc").unwrap();
        tx.send_replace(Progress::Writing(3));
        assert!(tail.whole().is_none(), "still written");
        let mut lengths = Box::pin(tail.into_lengths());
        assert_eq!(lengths.next().await.unwrap().unwrap(), (3, false));
        let finish = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            tx.send_replace(Progress::Writing(5));
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            tx.send_replace(Progress::Complete(6));
        });
        let mut seen = Vec::new();
        while let Some(l) = lengths.next().await {
            seen.push(l.unwrap());
        }
        finish.await.unwrap();
        assert_eq!(seen.last(), Some(&(6, true)), "{seen:?}");
        assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");

        let other = tempfile::tempdir().unwrap();
        let (_w, tail, tx) = pair(other.path());
        tx.send_replace(Progress::Complete(0));
        assert_eq!(tail.whole().map(|(_, n)| n), Some(0));
        let (_w, tail, tx) = pair(other.path());
        tx.send_replace(Progress::Writing(2));
        let mut lengths = Box::pin(tail.into_lengths());
        assert_eq!(lengths.next().await.unwrap().unwrap(), (2, false));
        tx.send_replace(Progress::Failed);
        assert!(matches!(lengths.next().await, Some(Err(TailError::Failed))));
        assert!(lengths.next().await.is_none());
        // A writer that vanishes is a failure too.
        let (_w, tail, tx) = pair(other.path());
        drop(tx);
        let mut lengths = Box::pin(tail.into_lengths());
        assert!(matches!(lengths.next().await, Some(Err(TailError::Failed))));
    }

    #[tokio::test]
    async fn a_finished_file_the_page_cache_lost_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, mut tail, tx) = pair(dir.path());
        let data: Vec<u8> = (0..3 * CHUNK + 5).map(|i| (i % 249) as u8).collect();
        writer.write_all(&data).unwrap();
        writer.sync_all().unwrap();
        rustix::fs::fadvise(&*tail.file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        assert!(
            !resident(&tail.file, 0, CHUNK),
            "the test needs the file out of the page cache"
        );
        tx.send_replace(Progress::Complete(data.len() as u64));
        let (got, err) = drain(&mut tail).await;
        assert!(err.is_none(), "{err:?}");
        assert!(got == data);
    }

    /// Issue 25 §5: a finished file truncated under a reader (what a disk error or an operator
    /// does to it) ends that reader with an error. A mapping would have raised `SIGBUS` on the
    /// pages past the new end and killed the process, this test with it.
    #[tokio::test]
    async fn a_finished_file_truncated_under_a_reader_is_an_error_not_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, mut tail, tx) = pair(dir.path());
        let data: Vec<u8> = (0..4 * CHUNK).map(|i| (i % 247) as u8).collect();
        writer.write_all(&data).unwrap();
        tx.send_replace(Progress::Complete(data.len() as u64));
        let first = tail.next_chunk().await.unwrap().unwrap();
        assert_eq!(&first[..], &data[..CHUNK as usize]);
        writer.set_len(CHUNK + 100).unwrap();
        let (got, err) = drain(&mut tail).await;
        assert!(matches!(err, Some(TailError::Short)), "{err:?}");
        assert!(got.len() <= 100, "{} bytes past the new end", got.len());
        assert!(tail.next_chunk().await.is_none(), "ended");
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
