//! seedd: a Radicle seed node for operators. See ARCHITECTURE.md for the map of this crate.
#![forbid(unsafe_code)]

pub mod admin;
pub mod backup;
pub mod blocking;
pub mod config;
pub mod control;
pub use seedd_proto::crypto;
pub mod daemon;
pub mod fetch;
pub mod fsutil;
pub mod http;
pub mod identity;
pub mod index;
pub mod logging;
pub mod metrics;
pub mod net;
pub mod policy;
pub mod serve;
pub mod storage;
pub mod tenant;
pub mod web;
pub use seedd_proto::wire;
