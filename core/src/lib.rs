//! seedd-core: the ground floor every other seedd crate stands on. Configuration (the only
//! reader of config files and `SEEDD_*`), metrics, the clean-environment `git` command, private
//! files, the blocking pool, logging, Radicle storage (refs, signed refs, identity and COB
//! verification), git serving shared by HTTP and Radicle streams (ref advertisements, admission,
//! the single-flight pack cache), the RocksDB index, tenants, policies and maintenance.
//!
//! It knows neither HTTP (`seedd-http`) nor the Radicle network (`seedd-p2p`); see
//! ARCHITECTURE.md for the rooms and their layers.
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod blocking;
pub mod config;
pub mod fsutil;
pub mod git;
pub mod index;
pub mod logging;
pub mod maintain;
pub mod metrics;
pub mod placement;
pub mod policy;
pub mod serve;
pub mod storage;
pub mod tenant;

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
