//! Test harness: start `seedd` as a real process on loopback, fixtures made by the real Radicle
//! binaries, synthetic Radicle-layout repositories, and helpers to drive real `git`.
//!
//! One harness shared by every integration test file and the benches, split by concern; every
//! item is re-exported here, so tests `use seedd_tests::*` and read as the behaviour they check.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod cob;
mod fixture;
mod git_client;
pub mod hostile;
mod http_client;
pub mod proc;
mod processes;
mod radicle;
pub mod raw;
mod seed_process;

pub use fixture::*;
pub use git_client::*;
pub use http_client::*;
pub use processes::*;
pub use radicle::*;
pub use seed_process::*;
