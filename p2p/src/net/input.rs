//! Git stream input: bytes a peer sent on a stream that its reader (a serve waiting for a
//! slot or writing to upload-pack, or our fetch) has not taken yet. Bounded in bytes per stream
//! and, for streams the peer opened, per session, so a peer cannot make the seed buffer
//! without limit while a serve waits.

use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// Unread bytes one stream may hold.
pub(crate) const STREAM_INPUT_BYTES: usize = 4 * 1024 * 1024;
/// Unread bytes all the streams a peer opened on one session may hold together.
pub(crate) const SESSION_INPUT_BYTES: usize = 8 * 1024 * 1024;

/// Room taken by one chunk; released when the reader takes it.
struct Room {
    _stream: Option<OwnedSemaphorePermit>,
    _session: Option<OwnedSemaphorePermit>,
}

/// The receiving end: what the serve task or the fetch reads.
pub(crate) struct Input {
    rx: mpsc::UnboundedReceiver<(Vec<u8>, Room)>,
}

impl Input {
    /// The next chunk; `None` once the stream ended (Eof, Close, session gone).
    pub(crate) async fn recv(&mut self) -> Option<Vec<u8>> {
        self.rx.recv().await.map(|(data, _room)| data)
    }
}

/// The session reader's end.
pub(crate) struct InputTx {
    tx: mpsc::UnboundedSender<(Vec<u8>, Room)>,
    stream: Arc<Semaphore>,
    /// The session's budget (streams the peer opened); `None` for our own fetches.
    session: Option<Arc<Semaphore>>,
}

/// The stream's or the session's unread bytes would exceed their bound.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Overflow;

/// A stream's input; `session` is shared by the streams the peer opened on one session.
pub(crate) fn channel(session: Option<Arc<Semaphore>>) -> (InputTx, Input) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        InputTx {
            tx,
            stream: Arc::new(Semaphore::new(STREAM_INPUT_BYTES)),
            session,
        },
        Input { rx },
    )
}

/// A session's budget for [`channel`].
pub(crate) fn session_budget() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(SESSION_INPUT_BYTES))
}

fn permits(n: usize, max: usize) -> u32 {
    u32::try_from(n.min(max)).unwrap_or(u32::MAX)
}

impl InputTx {
    /// Queues `data` if the stream and the session have room, without waiting.
    pub(crate) fn try_send(&self, data: Vec<u8>) -> Result<(), Overflow> {
        if data.is_empty() {
            return Ok(());
        }
        let n = data.len();
        let stream = self
            .stream
            .clone()
            .try_acquire_many_owned(permits(n, STREAM_INPUT_BYTES))
            .map_err(|_| Overflow)?;
        let session = match &self.session {
            Some(s) => Some(
                s.clone()
                    .try_acquire_many_owned(permits(n, SESSION_INPUT_BYTES))
                    .map_err(|_| Overflow)?,
            ),
            None => None,
        };
        let room = Room {
            _stream: Some(stream),
            _session: session,
        };
        // The reader went away: nothing to keep.
        let _ = self.tx.send((data, room));
        Ok(())
    }

    /// Queues `data`, waiting for room in the stream (the session reader stops reading
    /// meanwhile: back-pressure for our own fetches). `false` once the reader is gone.
    pub(crate) async fn send(&self, data: Vec<u8>) -> bool {
        if data.is_empty() {
            return !self.tx.is_closed();
        }
        let n = permits(data.len(), STREAM_INPUT_BYTES);
        let stream = tokio::select! {
            p = self.stream.clone().acquire_many_owned(n) => p.ok(),
            _ = self.tx.closed() => return false,
        };
        let room = Room {
            _stream: stream,
            _session: None,
        };
        self.tx.send((data, room)).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stream_holds_at_most_its_bound_until_read() {
        let (tx, mut rx) = channel(Some(session_budget()));
        let chunk = vec![1u8; 1024 * 1024];
        for _ in 0..4 {
            assert_eq!(tx.try_send(chunk.clone()), Ok(()));
        }
        assert_eq!(tx.try_send(vec![1]), Err(Overflow));
        // Reading makes room again.
        assert_eq!(rx.recv().await.map(|d| d.len()), Some(1024 * 1024));
        assert_eq!(tx.try_send(chunk.clone()), Ok(()));
        // Empty chunks take no room and are not queued.
        assert_eq!(tx.try_send(Vec::new()), Ok(()));
    }

    #[tokio::test]
    async fn the_streams_of_a_session_share_its_bound() {
        let session = session_budget();
        let (a, _ra) = channel(Some(session.clone()));
        let (b, _rb) = channel(Some(session.clone()));
        let (c, _rc) = channel(Some(session));
        let chunk = vec![1u8; 1024 * 1024];
        for _ in 0..4 {
            assert_eq!(a.try_send(chunk.clone()), Ok(()));
            assert_eq!(b.try_send(chunk.clone()), Ok(()));
        }
        assert_eq!(c.try_send(vec![1]), Err(Overflow));
    }

    #[tokio::test]
    async fn our_fetches_wait_for_room_instead() {
        let (tx, mut rx) = channel(None);
        let chunk = vec![1u8; 2 * 1024 * 1024];
        assert!(tx.send(chunk.clone()).await);
        assert!(tx.send(chunk.clone()).await);
        let third =
            tokio::time::timeout(std::time::Duration::from_millis(50), tx.send(chunk.clone()))
                .await;
        assert!(third.is_err(), "more than the stream's bound queued");
        assert!(rx.recv().await.is_some());
        assert!(tx.send(chunk).await);
        drop(rx);
        assert!(!tx.send(vec![1]).await);
    }
}
