//! seedd: a Radicle seed node for operators. See ARCHITECTURE.md for the map of the crates.
//!
//! This crate is the top floor: operations with side effects (`control`), backups, the admin
//! API (the only user of `seedd-api`) and the daemon that assembles `seedd-core`, `seedd-http`
//! and `seedd-p2p`. Its public surface is what the `seedd` binary uses: the daemon.
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

mod admin;
mod backup;
mod control;
pub mod daemon;
