//! The response body of a splice: placeholder bytes hyper writes in place of the file's,
//! `len` of them under `Content-Length` or as many as a growing file grows, chunked; it waits
//! in the connection's slot until the IO has flushed the head before it.

use std::fs::File;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use futures_util::Stream;

use seedd_core::metrics::Metrics;

use super::{lock, Pending, Slot};

/// What the body hands hyper in place of the file's bytes (never sent).
pub(super) static PLACEHOLDER: [u8; 1024 * 1024] = [0; 1024 * 1024];

pub(super) enum BodyState {
    Start {
        file: Arc<File>,
        metrics: Option<Arc<Metrics>>,
    },
    Waiting,
    Sending,
}

/// How much of a growing file is written: `(bytes, whole)` each time that grows.
pub(crate) type Lengths = Pin<Box<dyn Stream<Item = Result<(u64, bool), io::Error>> + Send>>;

/// How a body's placeholders are counted.
pub(super) enum Framing {
    /// `Content-Length: len` framing: `left` placeholders still to yield.
    Length { len: u64, left: u64 },
    /// Chunked, following the file as it is written.
    Growing {
        lengths: Lengths,
        /// Placeholders yielded.
        sent: u64,
        /// Bytes known to be in the file.
        written: u64,
        /// `written` is the whole file.
        whole: bool,
    },
}

impl Framing {
    /// Every placeholder was yielded.
    fn finished(&self) -> bool {
        match self {
            Framing::Length { left, .. } => *left == 0,
            Framing::Growing {
                sent,
                written,
                whole,
                ..
            } => *whole && sent == written,
        }
    }
}

/// A response body of placeholder bytes that the connection's [`SpliceIo`] replaces with the
/// file's (module docs): `len` of them with `Content-Length: len` ([`Splicer::body`]), or as
/// many as the file grows, chunked ([`Splicer::growing_body`]).
pub(crate) struct SpliceBody {
    pub(super) slot: Arc<Mutex<Slot>>,
    pub(super) id: u64,
    pub(super) state: BodyState,
    pub(super) framing: Framing,
}

impl SpliceBody {
    /// The body's length (its `Content-Length`); `None` for a growing file.
    pub(crate) fn content_length(&self) -> Option<u64> {
        match self.framing {
            Framing::Length { len, .. } => Some(len),
            Framing::Growing { .. } => None,
        }
    }
}

/// The next `n` (at most the placeholder buffer's length) placeholder bytes.
fn placeholders(n: u64) -> Bytes {
    let n = n.min(PLACEHOLDER.len() as u64) as usize; // ≤ PLACEHOLDER.len()
    Bytes::from_static(&PLACEHOLDER[..n])
}

impl Stream for SpliceBody {
    type Item = Result<Bytes, io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            match &this.state {
                BodyState::Start { file, metrics } => {
                    if matches!(this.framing, Framing::Length { left: 0, .. }) {
                        this.state = BodyState::Sending;
                        continue;
                    }
                    let mut slot = lock(&this.slot);
                    if slot.pending.is_some() || slot.broken {
                        return Poll::Ready(Some(Err(io::Error::other(
                            "another response is being spliced on this connection",
                        ))));
                    }
                    slot.pending = Some(Pending {
                        id: this.id,
                        file: file.clone(),
                        len: this.content_length(),
                        waker: cx.waker().clone(),
                        metrics: metrics.clone(),
                    });
                    drop(slot);
                    this.state = BodyState::Waiting;
                    // hyper now flushes the head; the IO wakes us once it is out.
                    return Poll::Pending;
                }
                BodyState::Waiting => {
                    let mut slot = lock(&this.slot);
                    if slot.armed == Some(this.id) {
                        slot.armed = None;
                        drop(slot);
                        this.state = BodyState::Sending;
                        continue;
                    }
                    match &mut slot.pending {
                        Some(p) if p.id == this.id => {
                            p.waker.clone_from(cx.waker());
                            return Poll::Pending;
                        }
                        _ => {
                            return Poll::Ready(Some(Err(io::Error::other(
                                "the connection dropped the spliced response",
                            ))))
                        }
                    }
                }
                BodyState::Sending => {
                    return match &mut this.framing {
                        Framing::Length { left: 0, .. } => Poll::Ready(None),
                        Framing::Length { left, .. } => {
                            let chunk = placeholders(*left);
                            *left -= chunk.len() as u64;
                            Poll::Ready(Some(Ok(chunk)))
                        }
                        Framing::Growing {
                            lengths,
                            sent,
                            written,
                            whole,
                        } => loop {
                            if sent < written {
                                let chunk = placeholders(*written - *sent);
                                *sent += chunk.len() as u64;
                                break Poll::Ready(Some(Ok(chunk)));
                            }
                            if *whole {
                                break Poll::Ready(None);
                            }
                            match ready!(lengths.as_mut().poll_next(cx)) {
                                Some(Ok((n, w))) => {
                                    *written = n.max(*written);
                                    *whole = w;
                                }
                                Some(Err(e)) => break Poll::Ready(Some(Err(e))),
                                None => {
                                    break Poll::Ready(Some(Err(io::Error::other(
                                        "the cache file's writer went away",
                                    ))))
                                }
                            }
                        },
                    };
                }
            }
        }
    }
}

impl Drop for SpliceBody {
    fn drop(&mut self) {
        let mut slot = lock(&self.slot);
        match self.state {
            BodyState::Start { .. } => {}
            BodyState::Waiting => {
                if slot.pending.as_ref().is_some_and(|p| p.id == self.id) {
                    slot.pending = None;
                }
                if slot.armed == Some(self.id) {
                    // The IO took the file but hyper will write no placeholder for it.
                    slot.armed = None;
                    slot.broken = true;
                }
            }
            BodyState::Sending => {
                if !self.framing.finished() {
                    slot.broken = true;
                }
            }
        }
    }
}
