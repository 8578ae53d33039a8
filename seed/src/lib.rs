//! seedd: a Radicle seed node for operators. See ARCHITECTURE.md for the map of this crate.
//!
//! The public surface is what the `seedd` binary, the benchmarks and the fuzz targets use:
//! configuration, the daemon, logging, the `bridge` helper process, the HTTP rate limiter and
//! metrics (benchmarked on their own), and the protocol crates' `crypto` and `wire`. Every
//! other room is private to the crate; [`bench_index`] lends the index to its benchmark.
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

mod admin;
mod backup;
mod blocking;
pub mod config;
mod control;
pub use seedd_proto::crypto;
pub mod daemon;
mod fetch;
mod fsutil;
mod git;
pub mod http;
mod identity;
mod index;
pub mod logging;
mod maintain;
pub mod metrics;
mod net;
mod policy;
mod serve;
mod storage;
mod tenant;
pub use seedd_proto::wire;

pub use fetch::bridge;

/// The RocksDB index for `benches/benches/index.rs` only: not an API.
#[doc(hidden)]
pub mod bench_index {
    pub use crate::index::values::{repo_from_value, repo_value};
    pub use crate::index::{Index, IndexError, RepoRecord, SigrefsRecord, Tuning, ValueEncoding};
    pub use crate::storage::identity::Visibility;
    pub use crate::storage::RefTarget;

    /// A ref pointing at the object `oid`.
    pub fn oid_target(oid: [u8; 20]) -> RefTarget {
        RefTarget::Oid(gix::ObjectId::Sha1(oid))
    }
}
