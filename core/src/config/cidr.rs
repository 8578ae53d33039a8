//! Address blocks (`http.rate.trusted_proxies`, `p2p.rate.exempt_cidrs`), with the address
//! arithmetic the rate limiters key clients by.

use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An address block, e.g. `10.0.0.0/8`, `2001:db8::/32`, or a single address. Printed (and
/// compared, so a reload sees an edit) as it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cidr {
    /// Network in IPv6 space (IPv4 as IPv4-mapped `::ffff:a.b.c.d`), host bits cleared.
    net: u128,
    /// Prefix length in IPv6 space (IPv4 /n is /96+n).
    len: u8,
    /// As written.
    text: Box<str>,
}

impl TryFrom<String> for Cidr {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Cidr> for String {
    fn from(c: Cidr) -> String {
        c.text.into()
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq<&str> for Cidr {
    fn eq(&self, other: &&str) -> bool {
        &*self.text == *other
    }
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        (ip_bits(ip) & mask(self.len)) == self.net
    }
}

impl FromStr for Cidr {
    type Err = String;

    /// `addr/len` or a bare address (a single host). Host bits under the prefix are ignored.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| format!("{s:?}: expected an IP address or CIDR like 10.0.0.0/8"))?;
        let (max, offset) = match ip {
            IpAddr::V4(_) => (32u8, 96u8),
            IpAddr::V6(_) => (128u8, 0u8),
        };
        let len = match len {
            None => max,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(format!("{s:?}: prefix length must be 0–{max}")),
            },
        };
        let len = len + offset;
        Ok(Cidr {
            net: ip_bits(ip) & mask(len),
            len,
            text: s.into(),
        })
    }
}

/// The address in IPv6 space; IPv4 as IPv4-mapped, so both forms of an IPv4 client agree.
fn ip_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The key of one client for per-client limits (rates, connections, pack-cache generations):
/// IPv4 (or IPv4-mapped) as is, IPv6 masked to `v6_prefix` (one host usually holds a whole
/// prefix).
pub fn client_key(ip: IpAddr, v6_prefix: u8) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => u128::from(v6),
        IpAddr::V6(v6) => u128::from(v6) & mask(v6_prefix),
    }
}

/// The top `len` bits set (a prefix of that length in IPv6 space).
pub fn mask(len: u8) -> u128 {
    match len {
        0 => 0,
        l if l >= 128 => u128::MAX,
        l => u128::MAX << (128 - u32::from(l)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_parsing_and_matching() {
        let c: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(c.contains(ip("10.1.2.3")));
        assert!(c.contains(ip("::ffff:10.1.2.3")));
        assert!(!c.contains(ip("11.0.0.1")));
        let h: Cidr = "192.0.2.7".parse().unwrap();
        assert!(h.contains(ip("192.0.2.7")) && !h.contains(ip("192.0.2.8")));
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:1::5")) && !v6.contains(ip("2001:db9::1")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.1")) && !all.contains(ip("2001:db8::1")));
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("nonsense".parse::<Cidr>().is_err());
        assert!("::/129".parse::<Cidr>().is_err());
    }
}
