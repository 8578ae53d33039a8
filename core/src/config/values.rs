//! Typed values of single keys. Each parses (and so checks) itself when the configuration is
//! read; the rest of the daemon matches on these types, never on the strings.

use serde::{Deserialize, Serialize};

/// The most repositories one inventory message can carry (protocol.md §4.8).
pub use seedd_proto::wire::message::INVENTORY_LIMIT;

/// The identity a tenant is placed on unless it names another.
pub const DEFAULT_IDENTITY: &str = "default";

/// A tenant or identity name: 1–63 of `a-z`, `0-9`, `-`, not starting with `-`.
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// An enum spelled as one of a few lower-case words in the config file (and in JSON).
macro_rules! keyword {
    (
        $(#[$meta:meta])*
        $name:ident { $($(#[$vmeta:meta])* $variant:ident = $word:literal),+ $(,)? }
        expected $expected:literal
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($word => Ok($name::$variant),)+
                    other => Err(format!("{other:?}: expected {}", $expected)),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d)?
                    .parse()
                    .map_err(serde::de::Error::custom)
            }
        }
    };
}

keyword! {
    /// `p2p.relay`: relay other nodes' gossip.
    Relay {
        /// Iff `p2p.external_addresses` is set (we are reachable).
        Auto = "auto",
        Always = "always",
        Never = "never",
    }
    expected "\"auto\", \"always\" or \"never\""
}

keyword! {
    /// `policy.default`: what happens to a repository without an explicit policy.
    DefaultPolicy {
        /// Seed it.
        Allow = "allow",
        /// Leave it.
        Block = "block",
    }
    expected "\"allow\" or \"block\""
}

keyword! {
    /// Which namespaces of a seeded repository are fetched (`policy.scope`, a seed's scope).
    Scope {
        /// Every namespace.
        All = "all",
        /// Delegates and followed nodes only.
        Followed = "followed",
    }
    expected "\"all\" or \"followed\""
}

keyword! {
    /// `log.format`.
    LogFormat {
        Text = "text",
        Json = "json",
    }
    expected "\"text\" or \"json\""
}

keyword! {
    /// `http.unknown_hosts`: what hosts no tenant claims are shown.
    UnknownHosts {
        /// Every public repository.
        All = "all",
        /// Nothing (404).
        None = "none",
    }
    expected "\"all\" or \"none\""
}

keyword! {
    /// `http.pack_cache.admission`: when a response is written to the pack cache.
    PackCacheAdmission {
        /// Every cacheable request.
        First = "first",
        /// A request seen before (within `max_age`): one-off clones are not written to disk.
        Second = "second",
    }
    expected "\"first\" or \"second\""
}

/// Token buckets (fractional refill per second, burst capacity).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Bucket {
    pub fill_rate: f64,
    pub capacity: f64,
}

impl Relay {
    /// Whether we relay, given whether external addresses are configured.
    pub fn enabled(self, reachable: bool) -> bool {
        match self {
            Relay::Always => true,
            Relay::Never => false,
            Relay::Auto => reachable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_round_trip_and_name_the_choices() {
        assert_eq!("followed".parse::<Scope>(), Ok(Scope::Followed));
        assert_eq!(Scope::All.to_string(), "all");
        assert_eq!(
            "maybe".parse::<DefaultPolicy>().unwrap_err(),
            "\"maybe\": expected \"allow\" or \"block\""
        );
        let json = serde_json::to_string(&Relay::Never).unwrap();
        assert_eq!(json, "\"never\"");
        assert_eq!(serde_json::from_str::<Relay>(&json).unwrap(), Relay::Never);
    }
}

/// A peer to dial: `z6Mk…@host:port` (`p2p.connect`, `seedctl peer connect`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerAddr {
    pub nid: seedd_proto::crypto::NodeId,
    /// `host:port` (a name, an IPv4 address, or `[v6]`).
    pub addr: String,
}

impl std::str::FromStr for PeerAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (nid, addr) = s
            .split_once('@')
            .ok_or_else(|| "expected \"z6Mk…@host:port\"".to_owned())?;
        let nid = nid.parse().map_err(|e| format!("{e}"))?;
        if addr
            .rsplit_once(':')
            .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        {
            return Err(format!("address {addr:?} needs a host and a port"));
        }
        Ok(Self {
            nid,
            addr: addr.to_owned(),
        })
    }
}

impl std::fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.nid, self.addr)
    }
}

impl Serialize for PeerAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
