//! Arbitrary bytes into `FrameDecoder`, whole and in chunks.
//!
//! Input: `chunk ‖ bytes`. `bytes` is pushed once whole and once in chunks of `chunk` bytes
//! (`chunk = 0`: one byte at a time is too slow to be useful, so it means 1..=7 cycling);
//! both decoders are drained after every push until `Ok(None)` or an error. Checks:
//! * both see the same frames and fail (or not) with the same error kind;
//! * an error is sticky; what stays buffered is bounded;
//! * every decoded frame re-encodes and decodes to an equal frame.

#![no_main]

use libfuzzer_sys::fuzz_target;
use seedd_fuzz::check_frame_round_trip;
use seedd_proto::wire::frame::MAX_INBOX_SIZE;
use seedd_proto::wire::{Frame, FrameDecoder, FrameError};

/// Drains `decoder` into `frames`; returns the error that stopped it, if any.
fn drain(decoder: &mut FrameDecoder, frames: &mut Vec<Frame>) -> Option<FrameError> {
    loop {
        match decoder.next_frame() {
            Ok(Some(frame)) => frames.push(frame),
            Ok(None) => {
                assert!(decoder.buffered() < MAX_INBOX_SIZE, "unbounded buffer");
                return None;
            }
            Err(err) => {
                assert_eq!(decoder.next_frame(), Err(err.clone()), "error not sticky");
                return Some(err);
            }
        }
    }
}

fn chunk_sizes(chunk: u8) -> impl Iterator<Item = usize> {
    let mut i = 0usize;
    std::iter::from_fn(move || {
        i += 1;
        Some(if chunk == 0 {
            i % 7 + 1
        } else {
            usize::from(chunk)
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, bytes)) = data.split_first() else {
        return;
    };

    let mut whole = FrameDecoder::new();
    let mut whole_frames = Vec::new();
    whole.push(bytes);
    let whole_err = drain(&mut whole, &mut whole_frames);

    let mut chunked = FrameDecoder::new();
    let mut chunked_frames = Vec::new();
    let mut chunked_err = None;
    let mut rest = bytes;
    let mut sizes = chunk_sizes(chunk);
    while !rest.is_empty() {
        let size = sizes.next().unwrap_or(1).min(rest.len());
        let (head, tail) = rest.split_at(size);
        rest = tail;
        chunked.push(head);
        chunked_err = drain(&mut chunked, &mut chunked_frames);
        if chunked_err.is_some() {
            break;
        }
    }

    assert_eq!(whole_frames, chunked_frames, "chunking changed the frames");
    assert_eq!(
        whole_err.as_ref().map(std::mem::discriminant),
        chunked_err.as_ref().map(std::mem::discriminant),
        "chunking changed the outcome: {whole_err:?} vs {chunked_err:?}"
    );
    if whole_err.is_none() {
        assert_eq!(whole.buffered(), chunked.buffered());
    }

    for frame in &whole_frames {
        check_frame_round_trip(frame);
    }
});
