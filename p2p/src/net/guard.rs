//! Admission control for peers: per-IP connection-attempt and per-node and per-host message
//! rate limits, misbehaviour penalties and IP bans (persisted in the index).

use std::collections::HashMap;
use std::net::IpAddr;

use seedd_proto::crypto::NodeId;
use seedd_proto::gossip::limiter::{Limiter, RateLimit};

use seedd_core::config::Cidr;
use seedd_core::config::{BanConfig, Bucket, RateConfig};
use seedd_core::index::gossip::BanRecord;

/// What a misbehaviour costs, in penalty points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offence {
    /// A frame or message that does not decode (bad magic, oversized, invalid field).
    DecodeError,
    /// An announcement whose signature does not verify.
    InvalidSignature,
    /// An announcement far in the future.
    InvalidTimestamp,
    /// A handshake that failed after the peer sent bytes (not a timeout).
    Handshake,
}

impl Offence {
    pub(crate) fn points(self) -> u32 {
        match self {
            Offence::DecodeError => 16,
            Offence::InvalidSignature | Offence::InvalidTimestamp => 32,
            Offence::Handshake => 8,
        }
    }

    /// Every offence (metrics start each at 0; a test in `metrics` keeps it complete).
    #[cfg(test)]
    pub(crate) const ALL: [Offence; 4] = [
        Offence::DecodeError,
        Offence::InvalidSignature,
        Offence::InvalidTimestamp,
        Offence::Handshake,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Offence::DecodeError => "decode_error",
            Offence::InvalidSignature => "invalid_signature",
            Offence::InvalidTimestamp => "invalid_timestamp",
            Offence::Handshake => "handshake",
        }
    }
}

fn limit(b: &Bucket) -> RateLimit {
    RateLimit {
        fill_rate: b.fill_rate,
        capacity: b.capacity,
    }
}

/// Whether an address is loopback (`127.0.0.0/8`, `::1`, IPv4-mapped loopback): exempt from
/// rate limits when `p2p.rate.exempt_local` is set. Private ranges (RFC 1918, ULA, link-local)
/// are not: behind SNAT or in a cluster they are ordinary peers, and trusting them is the
/// operator's choice (`p2p.rate.exempt_cidrs`).
pub(crate) fn is_loopback(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// The host-bucket key of `ip`: IPv4 (or IPv4-mapped) as is, IPv6 masked to `v6_prefix` bits.
pub(crate) fn host_key(ip: &IpAddr, v6_prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(_) => *ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mask = match v6_prefix {
                    0 => 0,
                    l if l >= 128 => u128::MAX,
                    l => u128::MAX << (128 - u32::from(l)),
                };
                IpAddr::V6((u128::from(*v6) & mask).into())
            }
        },
    }
}

/// The result of a penalty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Penalised {
    pub record: BanRecord,
    /// The penalty just crossed the threshold.
    pub newly_banned: bool,
}

pub(crate) struct Guard {
    rate: RateConfig,
    /// `rate.exempt_cidrs`.
    exempt: Vec<Cidr>,
    ban: BanConfig,
    ips: Limiter<IpAddr>,
    nodes: Limiter<NodeId>,
    /// Per remote host (IPv6: per `ipv6_prefix`), shared by all its sessions and node ids.
    hosts: Limiter<IpAddr>,
    records: HashMap<IpAddr, BanRecord>,
}

impl Guard {
    /// New limits (config reload); buckets and ban records are kept.
    pub(crate) fn reconfigure(&mut self, rate: RateConfig, ban: BanConfig) {
        self.exempt = rate.exempt_cidrs.clone();
        self.rate = rate;
        self.ban = ban;
    }

    pub(crate) fn new(rate: RateConfig, ban: BanConfig, records: Vec<BanRecord>) -> Self {
        Self {
            exempt: rate.exempt_cidrs.clone(),
            rate,
            ban,
            ips: Limiter::default(),
            nodes: Limiter::default(),
            hosts: Limiter::default(),
            records: records.into_iter().map(|r| (r.ip, r)).collect(),
        }
    }

    fn exempt(&self, ip: &IpAddr) -> bool {
        (self.rate.exempt_local && is_loopback(ip)) || self.exempt.iter().any(|c| c.contains(*ip))
    }

    /// A connection attempt from `ip`: `false` if over its rate.
    pub(crate) fn admit_connection(&mut self, ip: &IpAddr, now: u64) -> bool {
        self.exempt(ip) || self.ips.take(ip, &limit(&self.rate.connect), now)
    }

    /// A gossip message from `nid` (connected from `ip`): `false` if over its rate.
    /// `trusted` peers (configured `connect` peers) are never limited.
    pub(crate) fn admit_message(
        &mut self,
        nid: &NodeId,
        ip: &IpAddr,
        inbound: bool,
        trusted: bool,
        now: u64,
    ) -> bool {
        if trusted || self.exempt(ip) {
            return true;
        }
        let bucket = if inbound {
            &self.rate.inbound
        } else {
            &self.rate.outbound
        };
        self.nodes.take(nid, &limit(bucket), now)
    }

    /// A gossip message (already admitted per node) from a session with `ip`: `false` if its
    /// host is over `p2p.rate.host`, the budget all node ids connecting from it share. Same
    /// exemptions as [`admit_message`](Self::admit_message).
    pub(crate) fn admit_host_message(&mut self, ip: &IpAddr, trusted: bool, now: u64) -> bool {
        if trusted || self.exempt(ip) {
            return true;
        }
        let key = host_key(ip, self.rate.ipv6_prefix);
        self.hosts.take(&key, &limit(&self.rate.host), now)
    }

    /// Whether `ip` is banned at `now`. Expired bans are lifted (returned for removal).
    pub(crate) fn banned(&mut self, ip: &IpAddr, now: u64) -> (bool, Option<IpAddr>) {
        match self.records.get(ip) {
            Some(r) => match r.banned_until {
                Some(until) if until > now => (true, None),
                Some(_) => {
                    self.records.remove(ip);
                    (false, Some(*ip))
                }
                None => (false, None),
            },
            None => (false, None),
        }
    }

    /// Adds an offence to `ip`'s record; bans it at the threshold.
    pub(crate) fn penalise(
        &mut self,
        ip: IpAddr,
        offence: Offence,
        reason: &str,
        now: u64,
    ) -> Penalised {
        let threshold = self.ban.threshold;
        let duration_ms = u64::try_from(self.ban.duration.as_millis()).unwrap_or(u64::MAX);
        let record = self.records.entry(ip).or_insert_with(|| BanRecord {
            ip,
            penalty: 0,
            banned_until: None,
            reason: String::new(),
            updated_at: now,
        });
        let was_banned = record.banned_until.is_some_and(|u| u > now);
        record.penalty = record.penalty.saturating_add(offence.points());
        record.reason = reason.to_owned();
        record.updated_at = now;
        let newly_banned = !was_banned && record.penalty >= threshold;
        if newly_banned {
            record.banned_until = Some(now.saturating_add(duration_ms));
        }
        Penalised {
            record: record.clone(),
            newly_banned,
        }
    }

    /// Records (penalties and bans) for operators.
    pub(crate) fn records(&self) -> impl Iterator<Item = &BanRecord> {
        self.records.values()
    }

    pub(crate) fn banned_count(&self, now: u64) -> usize {
        self.records
            .values()
            .filter(|r| r.banned_until.is_some_and(|u| u > now))
            .count()
    }

    /// Forgets idle rate-limit buckets.
    pub(crate) fn prune(&mut self, now: u64) {
        self.ips.prune(&limit(&self.rate.connect), now);
        self.nodes.prune(&limit(&self.rate.outbound), now);
        self.hosts.prune(&limit(&self.rate.host), now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(exempt_local: bool) -> Guard {
        guard_with(exempt_local, &[])
    }

    fn guard_with(exempt_local: bool, cidrs: &[&str]) -> Guard {
        let rate = RateConfig {
            connect: Bucket {
                fill_rate: 1.0,
                capacity: 2.0,
            },
            inbound: Bucket {
                fill_rate: 1.0,
                capacity: 3.0,
            },
            outbound: Bucket {
                fill_rate: 1.0,
                capacity: 3.0,
            },
            host: Bucket {
                fill_rate: 1.0,
                capacity: 5.0,
            },
            ipv6_prefix: 64,
            exempt_local,
            exempt_cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
        };
        Guard::new(
            rate,
            BanConfig {
                threshold: 64,
                duration: std::time::Duration::from_secs(10),
            },
            Vec::new(),
        )
    }

    #[test]
    fn connection_attempts_are_limited_per_ip_unless_local() {
        let mut g = guard(true);
        let public: IpAddr = "203.0.113.9".parse().unwrap();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(g.admit_connection(&public, 0));
        assert!(g.admit_connection(&public, 0));
        assert!(!g.admit_connection(&public, 0));
        assert!(g.admit_connection(&public, 1000));
        for _ in 0..100 {
            assert!(g.admit_connection(&lo, 0));
        }
        let mut strict = guard(false);
        assert!(strict.admit_connection(&lo, 0));
        assert!(strict.admit_connection(&lo, 0));
        assert!(!strict.admit_connection(&lo, 0));
    }

    #[test]
    fn messages_are_limited_per_node_and_trusted_peers_are_exempt() {
        let mut g = guard(false);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let a = NodeId::from_bytes([1; 32]);
        let b = NodeId::from_bytes([2; 32]);
        for _ in 0..3 {
            assert!(g.admit_message(&a, &ip, true, false, 0));
        }
        assert!(!g.admit_message(&a, &ip, true, false, 0));
        assert!(
            g.admit_message(&b, &ip, true, false, 0),
            "other node has its own bucket"
        );
        assert!(g.admit_message(&a, &ip, true, true, 0), "trusted");
        assert!(g.admit_message(&a, &ip, true, false, 1000), "refilled");
    }

    #[test]
    fn fresh_node_ids_from_one_host_share_its_budget() {
        let mut g = guard(false);
        let ip: IpAddr = "203.0.113.9".parse().unwrap();
        // Every message from a fresh key passes its own node bucket…
        let admitted = (0..20u8)
            .filter(|i| {
                let nid = NodeId::from_bytes([*i; 32]);
                g.admit_message(&nid, &ip, true, false, 0) && g.admit_host_message(&ip, false, 0)
            })
            .count();
        // …but the host's bucket (capacity 5) is shared by all of them.
        assert_eq!(admitted, 5);
        let other: IpAddr = "203.0.113.10".parse().unwrap();
        assert!(g.admit_host_message(&other, false, 0), "other host");
        assert!(g.admit_host_message(&ip, false, 1000), "refilled");
        assert!(g.admit_host_message(&ip, true, 1000), "trusted");
        // IPv6: one /64 is one host.
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        for _ in 0..5 {
            assert!(g.admit_host_message(&a, false, 0));
        }
        assert!(!g.admit_host_message(&b, false, 0), "same /64");
        assert!(g.admit_host_message(&c, false, 0), "other /64");
        // Local addresses are exempt when configured, like the per-node limit.
        let mut lenient = guard(true);
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..100 {
            assert!(lenient.admit_host_message(&lo, false, 0));
        }
    }

    #[test]
    fn penalties_accumulate_to_a_ban_that_expires() {
        let mut g = guard(true);
        let ip: IpAddr = "127.0.0.2".parse().unwrap();
        let p = g.penalise(ip, Offence::InvalidSignature, "bad sig", 0);
        assert!(!p.newly_banned);
        assert_eq!(p.record.penalty, 32);
        assert_eq!(g.banned(&ip, 1), (false, None));
        let p = g.penalise(ip, Offence::InvalidTimestamp, "future", 5);
        assert!(p.newly_banned);
        assert_eq!(p.record.banned_until, Some(10_005));
        assert_eq!(g.banned(&ip, 6), (true, None));
        assert_eq!(g.banned_count(6), 1);
        assert_eq!(g.banned(&ip, 10_005), (false, Some(ip)));
        assert_eq!(g.banned_count(10_005), 0);
    }

    /// Burns through `ip`'s connect bucket: `true` if it was ever refused.
    fn limited(g: &mut Guard, ip: &str) -> bool {
        let ip: IpAddr = ip.parse().unwrap();
        (0..10).any(|_| !g.admit_connection(&ip, 0))
    }

    #[test]
    fn only_loopback_is_exempt_by_default() {
        let mut g = guard(true);
        for ip in [
            "10.1.2.3",
            "192.168.1.1",
            "172.16.0.5",
            "169.254.1.1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.1.2.3",
            "203.0.113.9",
        ] {
            assert!(limited(&mut g, ip), "{ip} is an ordinary peer");
        }
        for ip in ["127.0.0.1", "127.0.0.53", "::1", "::ffff:127.0.0.1"] {
            assert!(!limited(&mut g, ip), "{ip} is loopback");
        }
        for ip in ["127.0.0.1", "::1", "::ffff:127.0.0.2"] {
            assert!(is_loopback(&ip.parse().unwrap()), "{ip}");
        }
        for ip in ["10.0.0.1", "192.168.1.1", "fd00::1", "0.0.0.0"] {
            assert!(!is_loopback(&ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn listed_cidrs_are_exempt_and_reload_replaces_them() {
        let mut g = guard_with(false, &["10.0.0.0/8", "2001:db8::/32"]);
        assert!(!limited(&mut g, "10.1.2.3"));
        assert!(!limited(&mut g, "::ffff:10.9.9.9"), "IPv4-mapped form too");
        assert!(!limited(&mut g, "2001:db8::7"));
        assert!(limited(&mut g, "192.168.1.1"), "not listed");
        assert!(limited(&mut g, "127.0.0.1"), "exempt_local = false");
        let nid = NodeId::from_bytes([3; 32]);
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        for _ in 0..10 {
            assert!(g.admit_message(&nid, &ip, true, false, 0));
        }
        // A reload without the entry limits the range again.
        let rate = RateConfig {
            exempt_cidrs: vec![],
            ..g.rate.clone()
        };
        let ban = g.ban.clone();
        g.reconfigure(rate, ban);
        assert!(limited(&mut g, "10.7.7.7"));
    }
}
