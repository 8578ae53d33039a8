//! seedd's sans-IO cores: no sockets, no tasks, no clocks, no RocksDB. They turn bytes and
//! timer ticks into typed values, state changes and bytes to send; the daemon (`seedd`) is the
//! thin async shell around them. Kept in their own crate so fuzzing and benchmarking them never
//! builds the storage stack.
//!
//! * [`crypto`] — node and repository ids, keys, canonical JSON.
//! * [`wire`] — frames, gossip messages, the Noise handshake.
//! * [`gossip`] — the gossip service: sessions, announcements, routing, relaying, timers.
#![forbid(unsafe_code)]

pub mod crypto;
pub mod gossip;
pub mod wire;
