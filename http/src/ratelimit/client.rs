//! Who the client is: the TCP peer, or, behind a trusted proxy, the address that proxy
//! forwarded (`Forwarded`, else `X-Forwarded-For`).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::http::{header, HeaderMap};

use seedd_core::config::Cidr;

/// Client address as the rate limiters and handlers see it (set by
/// [`IpRateLimit`](super::IpRateLimit)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

/// The client behind `peer`, a trusted proxy: the right-most address in `Forwarded` (if
/// present, else `X-Forwarded-For`) that is not a trusted proxy. An unparseable entry stops the
/// walk at the last trusted hop.
pub(super) fn forwarded_client(peer: IpAddr, headers: &HeaderMap, trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |a: IpAddr| trusted.iter().any(|c| c.contains(a));
    let forwarded = headers.get_all(header::FORWARDED);
    let mut hops: Vec<Option<IpAddr>> = Vec::new();
    if forwarded.iter().next().is_some() {
        for v in forwarded {
            let Ok(v) = v.to_str() else {
                hops.push(None);
                continue;
            };
            for element in v.split(',') {
                let node = element.split(';').find_map(|pair| {
                    let (k, v) = pair.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("for").then_some(v)
                });
                if let Some(node) = node {
                    hops.push(parse_node(node));
                }
            }
        }
    } else {
        for v in headers.get_all("x-forwarded-for") {
            let Ok(v) = v.to_str() else {
                hops.push(None);
                continue;
            };
            hops.extend(v.split(',').map(parse_node));
        }
    }
    let mut client = peer;
    for hop in hops.into_iter().rev() {
        match hop {
            Some(ip) if is_trusted(ip) => client = ip,
            Some(ip) => return ip,
            None => break,
        }
    }
    client
}

/// An address from a `Forwarded` `for=` value or an `X-Forwarded-For` entry: quoted or not,
/// `[v6]:port`, `v4:port`, bare addresses. `None` for `unknown`, obfuscated names and garbage.
fn parse_node(s: &str) -> Option<IpAddr> {
    let s = s.trim().trim_matches('"');
    if let Some(rest) = s.strip_prefix('[') {
        let (addr, _) = rest.split_once(']')?;
        return addr
            .parse::<Ipv6Addr>()
            .ok()
            .map(|a| IpAddr::V6(a).to_canonical());
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    s.parse::<SocketAddr>().ok().map(|a| a.ip().to_canonical())
}
