//! Pack-cache hits over plain HTTP/1.1 sent with `sendfile(2)` (issue 13 §3: "sendfile where
//! the body is a plain file over plain TCP"): the file's pages go from the page cache to the
//! socket without being copied into seedd.
//!
//! hyper owns the connection and writes every byte of a response itself, so the file cannot
//! be handed to it. Instead the connection's IO ([`SpliceIo`]) and the response body
//! ([`SpliceBody`]) agree on a byte count:
//!
//! 1. The handler answers with `Content-Length: len` and a [`SpliceBody`], which first
//!    registers the file in the connection's [`Splicer`] slot and waits.
//! 2. A waiting body makes hyper flush what it buffered (the response head) and then flush
//!    the IO; [`SpliceIo::poll_flush`] is only reached with hyper's buffer empty, so at that
//!    point every byte before the body is on the socket. It takes the registered file as the
//!    *active* splice and wakes the body.
//! 3. The body yields `len` placeholder bytes (a static zero buffer: nothing is allocated or
//!    read). With `Content-Length` framing hyper writes body bytes as they are, in order, so
//!    the next `len` bytes hyper writes are the placeholders: [`SpliceIo`] sends that many
//!    bytes of the file with `sendfile` instead, reporting each call's count as written, and
//!    writes everything after them (the next response) normally.
//!
//! A file still being written (a generation in progress) goes out the same way over HTTP/1.1,
//! chunked ([`Splicer::growing_body`]): the body yields placeholders as the file grows, hyper
//! frames each frame as a chunk (`{size:X}\r\n`, data, `\r\n`; `0\r\n\r\n` at the end), and
//! the IO follows that framing ([`Chunks`]): the size lines and line ends are written as they
//! are (with `MSG_MORE` when data follow), each chunk's data is sent from the file. Framing it
//! does not expect is an error, not a guess.
//!
//! Only byte counts cross from hyper to the IO: however hyper buffers, copies or splits the
//! placeholders, the file's bytes go out exactly where they belong. A body dropped before it
//! yielded everything (the client left) poisons the slot: hyper closes such a connection
//! anyway, and the IO refuses to write anything more on it.
//!
//! `sendfile` reads the file on the calling thread, which is a runtime worker: a range the
//! page cache does not hold (probed at both ends with `preadv2(RWF_NOWAIT)`, like the copying
//! reader in `packcache::tail`) is first read on the blocking pool. Cache files were just
//! written or are hot, so that is the exception.
//!
//! TLS connections, HTTP/2 and Radicle streams get the reading follower (positional reads of
//! the file, finished or growing): their bytes are encrypted or framed in user
//! space anyway. So does an HTTP/1.0 request for a file still being written (no chunks).

mod body;
mod chunks;
mod io;

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

use tokio::net::TcpStream;

use seedd_core::metrics::Metrics;

use body::{BodyState, Framing};
pub(crate) use body::{Lengths, SpliceBody};
pub(crate) use io::SpliceIo;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A connection's splice slot: a response body registers its file here, the connection's IO
/// takes it once hyper flushed everything before the body.
#[derive(Clone, Default)]
pub(crate) struct Splicer {
    slot: Arc<Mutex<Slot>>,
}

#[derive(Default)]
struct Slot {
    /// A body waiting for the head before it to be flushed.
    pending: Option<Pending>,
    /// The body whose file became the IO's active splice.
    armed: Option<u64>,
    /// A splice was abandoned part-way: nothing more may be written on this connection.
    broken: bool,
    /// A second descriptor of the connection's socket, to see the client leave while a
    /// response waits for its first byte ([`Splicer::client_gone`]).
    peer: Option<std::os::fd::OwnedFd>,
}

struct Pending {
    id: u64,
    file: Arc<File>,
    /// `None`: chunked, as long as the body yields.
    len: Option<u64>,
    waker: Waker,
    metrics: Option<Arc<Metrics>>,
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

impl Splicer {
    /// A body that sends `len` bytes of `file` from its start (the file must hold them).
    pub(crate) fn body(
        &self,
        file: Arc<File>,
        len: u64,
        metrics: Option<Arc<Metrics>>,
    ) -> SpliceBody {
        self.new_body(file, Framing::Length { len, left: len }, metrics)
    }

    /// A body that sends `file` as it is written, chunked (HTTP/1.1 only): `lengths` says how
    /// much of it is written, each time that grows, and when it is whole
    /// ([`Tail::into_lengths`](seedd_core::serve::packcache::Tail::into_lengths)). No
    /// `Content-Length`: hyper frames it, and [`SpliceIo`] sends each chunk's bytes from the
    /// file.
    pub(crate) fn growing_body(
        &self,
        file: Arc<File>,
        lengths: Lengths,
        metrics: Option<Arc<Metrics>>,
    ) -> SpliceBody {
        let framing = Framing::Growing {
            lengths,
            sent: 0,
            written: 0,
            whole: false,
        };
        self.new_body(file, framing, metrics)
    }

    fn new_body(
        &self,
        file: Arc<File>,
        framing: Framing,
        metrics: Option<Arc<Metrics>>,
    ) -> SpliceBody {
        SpliceBody {
            slot: self.slot.clone(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            state: BodyState::Start { file, metrics },
            framing,
        }
    }

    /// Resolves once the client closed (or reset) its connection, seen without reading from it:
    /// hyper does not read while a response is pending, so a client that sent its request and
    /// left would otherwise be noticed only at the first write (issue 25 §4: a pack-cache
    /// generation waiting for git's first byte is abandoned when its reader goes). Never
    /// resolves when the client sent more (a pipelined request) or the socket cannot be watched.
    pub(crate) async fn client_gone(&self) {
        let fd = lock(&self.slot)
            .peer
            .as_ref()
            .and_then(|f| f.try_clone().ok());
        let watched = fd.and_then(|fd| {
            let s = std::net::TcpStream::from(fd);
            s.set_nonblocking(true).ok()?;
            TcpStream::from_std(s).ok()
        });
        if let Some(s) = watched {
            let mut byte = [0u8; 1];
            match s.peek(&mut byte).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
        std::future::pending::<()>().await;
    }

    /// The connection's IO over `stream`, sharing this slot.
    pub(crate) fn io(&self, stream: TcpStream) -> SpliceIo {
        lock(&self.slot).peer = std::os::fd::AsFd::as_fd(&stream).try_clone_to_owned().ok();
        SpliceIo {
            stream,
            slot: self.slot.clone(),
            active: None,
            warming: None,
        }
    }
}

#[cfg(test)]
mod tests;
