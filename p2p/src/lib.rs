//! seedd-p2p: the Radicle side of the seed. `net` is the tokio shell around `seedd-proto`'s
//! sans-IO gossip service (sessions, dialers, bans, git served over Radicle streams),
//! `identity` the seed's identities (one `Net` each) and what each announces, `fetch`
//! replication (we are the fetcher: quarantine, validation, apply).
//!
//! It knows the ground floor (`seedd-core`) and never HTTP (`seedd-http`) or the admin API's
//! types (`seedd-api`): the daemon maps what it returns.
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod fetch;
pub mod identity;
pub mod net;

#[cfg(test)]
mod label_tests;
