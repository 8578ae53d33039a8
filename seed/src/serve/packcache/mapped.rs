//! Finished cache files mapped into memory (issue 13 §3: "mmap-backed chunks" where `sendfile`
//! cannot be used — TLS, HTTP/2, Radicle streams): a chunk handed to the body is a window of
//! the mapping, so the file's bytes are not copied out of the page cache into seedd's own
//! buffers first (TLS and Noise still read them once to encrypt).
//!
//! This is the crate's only `unsafe` code. Mapping a file is unsound if the file shrinks
//! while mapped (reading a page past its end raises `SIGBUS`). Only **finished** entries are
//! mapped: their writer completed and dropped its handle, nothing in seedd writes them again,
//! eviction only unlinks them (the mapping keeps the blocks), and the directory
//! (`<data_dir>/cache/packs`) is seedd's own, emptied at start. An operator must not truncate
//! files there while seedd runs.
//!
//! One mapping per entry is shared by its readers while any of them reads (a `Weak` in the
//! entry's [`MapSlot`]), so the page tables are filled once per wave, not once per client;
//! the last reader's end unmaps it.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

/// A read-only mapping of a finished cache file.
pub(crate) struct Mapped(memmap2::Mmap);

impl Mapped {
    fn map(file: &File, len: u64) -> io::Result<Self> {
        // Never map past the end of the file: reading there would be a `SIGBUS`.
        if file.metadata()?.len() < len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the cache file is shorter than its response",
            ));
        }
        let len = usize::try_from(len).map_err(io::Error::other)?;
        // SAFETY: `file` is a finished pack-cache entry of `len` bytes that nothing truncates
        // or rewrites while seedd runs (module docs); the mapping is read-only.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(file)? };
        Ok(Self(map))
    }

    /// Bytes `start..end` of the file, sharing the mapping (no copy).
    pub(crate) fn chunk(self: &Arc<Self>, start: usize, end: usize) -> Bytes {
        Bytes::from_owner(Window {
            map: self.clone(),
            start,
            end,
        })
    }

    /// Reads one byte of every page of `start..end` (blocking), so that the pages are resident
    /// and in this mapping's page tables.
    pub(crate) fn touch(&self, start: usize, end: usize) -> u8 {
        let end = end.min(self.0.len());
        let start = start.min(end);
        self.0[start..end]
            .iter()
            .step_by(4096)
            .fold(0u8, |acc, b| acc ^ *b)
    }
}

struct Window {
    map: Arc<Mapped>,
    start: usize,
    end: usize,
}

impl AsRef<[u8]> for Window {
    fn as_ref(&self) -> &[u8] {
        self.map.0.get(self.start..self.end).unwrap_or_default()
    }
}

/// An entry's mapping, shared by its readers while any of them holds it.
#[derive(Default)]
pub(crate) struct MapSlot(Mutex<Weak<Mapped>>);

impl MapSlot {
    /// The entry's mapping, made from `file` (the finished file, `len` bytes) if no reader
    /// holds one. Empty files are not mapped.
    pub(crate) fn get(&self, file: &File, len: u64) -> io::Result<Option<Arc<Mapped>>> {
        if len == 0 {
            return Ok(None);
        }
        let mut weak = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = weak.upgrade() {
            return Ok(Some(m));
        }
        let m = Arc::new(Mapped::map(file, len)?);
        *weak = Arc::downgrade(&m);
        Ok(Some(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn chunks_are_windows_of_the_file_and_readers_share_one_mapping() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
        File::create(&path).unwrap().write_all(&data).unwrap();
        let slot = MapSlot::default();
        let (f1, f2) = (File::open(&path).unwrap(), File::open(&path).unwrap());
        let a = slot.get(&f1, data.len() as u64).unwrap().unwrap();
        let b = slot.get(&f2, data.len() as u64).unwrap().unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one mapping while readers hold it");
        assert_eq!(&a.chunk(0, 10)[..], &data[..10]);
        assert_eq!(&b.chunk(4096, 70_001)[..], &data[4096..70_001]);
        // A chunk keeps the mapping alive after its reader let go; the file may be unlinked.
        let c = a.chunk(99_990, 100_000);
        drop((a, b));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(&c[..], &data[99_990..]);
        drop(c);
        let again = slot.get(&f1, data.len() as u64).unwrap().unwrap();
        assert_eq!(
            Arc::strong_count(&again),
            1,
            "a new mapping once the last one went"
        );
        assert!(
            slot.get(&f1, 0).unwrap().is_none(),
            "empty files are not mapped"
        );
    }
}
