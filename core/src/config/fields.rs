//! Checks of single values, run while the configuration is deserialised (`deserialize_with` /
//! `with` on the fields of [`super::sections`]). The message says what is wrong with the value;
//! [`super::load`] adds the key and where the value came from.

use std::fmt::Display;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serializer};

use super::cidr::Cidr;
use super::values::{Bucket, PeerAddr, INVENTORY_LIMIT};

/// Announced node alias: 1–32 bytes without whitespace.
pub(super) fn alias<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let alias = String::deserialize(d)?;
    if alias.is_empty() || alias.len() > 32 || alias.chars().any(char::is_whitespace) {
        return Err(D::Error::custom(format!(
            "{alias:?} must be 1–32 bytes without whitespace (protocol.md §4.8)"
        )));
    }
    Ok(alias)
}

pub(super) fn non_empty_path<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    let path = PathBuf::deserialize(d)?;
    if path.as_os_str().is_empty() {
        return Err(D::Error::custom("must not be empty"));
    }
    Ok(path)
}

/// A count, size or threshold that must not be 0.
pub(super) fn at_least_one<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + PartialEq + From<u8>,
{
    let v = T::deserialize(d)?;
    if v == T::from(0) {
        return Err(D::Error::custom("must be at least 1"));
    }
    Ok(v)
}

/// A count that must be at least 2 (a threshold of 1 pack would repack a repository forever).
pub(super) fn at_least_two<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = u64::deserialize(d)?;
    if v < 2 {
        return Err(D::Error::custom("must be at least 2"));
    }
    Ok(v)
}

/// `index.cache_mib`: the index's block cache, memtables included: 8 MiB – 64 GiB.
pub(super) fn cache_mib<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = u64::deserialize(d)?;
    if !(8..=65_536).contains(&v) {
        return Err(D::Error::custom("must be 8 to 65536 (MiB)"));
    }
    Ok(v)
}

pub(super) fn max_request_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = u64::deserialize(d)?;
    if v < 1024 {
        return Err(D::Error::custom("must be at least 1024"));
    }
    Ok(v)
}

pub(super) fn inventory_cap<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let v = usize::deserialize(d)?;
    if !(1..=INVENTORY_LIMIT).contains(&v) {
        return Err(D::Error::custom(format!(
            "{v}: expected 1–{INVENTORY_LIMIT}"
        )));
    }
    Ok(v)
}

pub(super) fn ipv6_prefix<'de, D: Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    let v = u8::deserialize(d)?;
    if !(1..=128).contains(&v) {
        return Err(D::Error::custom(format!(
            "{v}: expected 1–128 (64 is one host)"
        )));
    }
    Ok(v)
}

pub(super) fn requests_per_second<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let rps = f64::deserialize(d)?;
    if !(rps.is_finite() && (0.0..=1_000_000.0).contains(&rps)) {
        return Err(D::Error::custom(format!(
            "{rps}: expected 0 (off) to 1000000"
        )));
    }
    Ok(rps)
}

/// A token bucket: `fill_rate` ≥ 0 and `capacity` ≥ 1, both finite.
pub(super) fn bucket<'de, D: Deserializer<'de>>(d: D) -> Result<Bucket, D::Error> {
    let b = Bucket::deserialize(d)?;
    if !(b.fill_rate.is_finite()
        && b.fill_rate >= 0.0
        && b.capacity.is_finite()
        && b.capacity >= 1.0)
    {
        return Err(D::Error::custom(format!(
            "fill_rate {} / capacity {}: need fill_rate ≥ 0 and capacity ≥ 1",
            b.fill_rate, b.capacity
        )));
    }
    Ok(b)
}

/// A `tracing` filter (`info`, `seedd=debug,info`).
pub(super) fn log_filter<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let level = String::deserialize(d)?;
    if tracing_subscriber::EnvFilter::try_new(&level).is_err() {
        return Err(D::Error::custom(format!(
            "{level:?}: expected a level or filter such as \"info\" or \"seedd=debug,info\""
        )));
    }
    Ok(level)
}

pub(super) fn socket_addr<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    s.parse()
        .map_err(|e| D::Error::custom(format!("{s:?}: {e}")))
}

/// Each entry parsed with `parse`; an error names the entry (`entry 1 "…": …`).
fn entries<'de, D, T, E>(d: D, parse: impl Fn(&str) -> Result<T, E>) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    E: Display,
{
    Vec::<String>::deserialize(d)?
        .iter()
        .enumerate()
        .map(|(i, s)| parse(s).map_err(|e| D::Error::custom(format!("entry {i} {e}"))))
        .collect()
}

/// `FromStr`, with the value quoted in the error.
fn quoted<T: FromStr>(s: &str) -> Result<T, String>
where
    T::Err: Display,
{
    s.parse().map_err(|e| format!("{s:?}: {e}"))
}

pub(super) fn socket_addrs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SocketAddr>, D::Error> {
    entries(d, quoted::<SocketAddr>)
}

pub(super) fn cidrs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Cidr>, D::Error> {
    entries(d, str::parse::<Cidr>)
}

/// Persistent peers, `z6Mk…@host:port`.
pub(super) fn peers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PeerAddr>, D::Error> {
    entries(d, quoted::<PeerAddr>)
}

/// Announced addresses, `host:port`.
pub(super) fn external_addresses<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    entries(d, |a| {
        if a.rsplit_once(':')
            .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
            || a.parse::<seedd_proto::wire::Address>().is_err()
        {
            return Err(format!("{a:?}: expected \"host:port\""));
        }
        Ok(a.to_owned())
    })
}

/// A `Duration` written as whole seconds (`*_secs` keys).
pub(super) mod secs {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_secs())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_secs)
    }
}

/// Whole seconds, at least 1.
pub(super) mod secs_nonzero {
    pub(crate) use super::secs::serialize;
    use super::*;

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        at_least_one::<D, u64>(d).map(Duration::from_secs)
    }
}

/// A `Duration` written as milliseconds (`*_ms` keys).
pub(super) mod millis {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// Milliseconds, at least 1.
pub(super) mod millis_nonzero {
    pub(crate) use super::millis::serialize;
    use super::*;

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        at_least_one::<D, u64>(d).map(Duration::from_millis)
    }
}
