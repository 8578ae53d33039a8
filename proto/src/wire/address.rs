//! Addresses in node announcements (protocol.md §4.4): `u8 type ‖ host ‖ u16 port`.
//!
//! | type | host |
//! |---|---|
//! | 1 | IPv4, 4 bytes |
//! | 2 | IPv6, 16 bytes |
//! | 3 | DNS name, `u8 length ‖ UTF-8` (not otherwise checked) |
//! | 4 | Tor v3 onion: `pubkey(32) ‖ checksum(2, LE) ‖ version 3` |
//! | 5 | I2P name as a string (`<52 base32>.b32.i2p`, `<name>.i2p`, `….i2p.alt`) |
//!
//! Onion and I2P validation follows `cypheraddr` 0.4.1, including its base32 decoder's
//! leniency (lower case, stray `=`), and encodes them the way it prints them, so a
//! decode–encode round trip gives the bytes an official node would relay.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use sha3::{Digest as _, Sha3_256};

use super::codec::{self, Reader};
use super::{DecodeError, EncodeError};

const TYPE_IPV4: u8 = 1;
const TYPE_IPV6: u8 = 2;
const TYPE_DNS: u8 = 3;
const TYPE_ONION: u8 = 4;
const TYPE_I2P: u8 = 5;

/// Length of a raw onion v3 address.
pub const ONION_V3_RAW_LEN: usize = 35;

/// A host and port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    pub host: Host,
    pub port: u16,
}

/// The host part of an [`Address`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    /// A DNS name (at most 255 bytes on the wire).
    Dns(String),
    Onion(OnionAddrV3),
    I2p(I2pAddr),
}

impl Address {
    /// An address from a host and port.
    pub fn new(host: Host, port: u16) -> Self {
        Self { host, port }
    }

    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match &self.host {
            Host::Ipv4(ip) => {
                codec::put_u8(out, TYPE_IPV4);
                out.extend_from_slice(&ip.octets());
            }
            Host::Ipv6(ip) => {
                codec::put_u8(out, TYPE_IPV6);
                out.extend_from_slice(&ip.octets());
            }
            Host::Dns(name) => {
                codec::put_u8(out, TYPE_DNS);
                codec::put_string(out, name)?;
            }
            Host::Onion(onion) => {
                codec::put_u8(out, TYPE_ONION);
                out.extend_from_slice(&onion.to_raw_bytes());
            }
            Host::I2p(i2p) => {
                codec::put_u8(out, TYPE_I2P);
                codec::put_string(out, &i2p.to_string())?;
            }
        }
        codec::put_u16(out, self.port);
        Ok(())
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let host = match r.u8()? {
            TYPE_IPV4 => Host::Ipv4(Ipv4Addr::from(r.array::<4>()?)),
            TYPE_IPV6 => Host::Ipv6(Ipv6Addr::from(r.array::<16>()?)),
            TYPE_DNS => Host::Dns(r.string()?),
            TYPE_ONION => Host::Onion(OnionAddrV3::from_raw_bytes(r.array()?)?),
            TYPE_I2P => Host::I2p(I2pAddr::from_str(&r.string()?)?),
            other => return Err(DecodeError::InvalidAddressType(other)),
        };
        let port = r.u16()?;
        Ok(Self { host, port })
    }

    /// Encodes the address alone (`type ‖ host ‖ port`).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Decodes an address at the start of `buf`; returns it and the bytes it took.
    pub fn decode_prefix(buf: &[u8]) -> Result<(Self, usize), DecodeError> {
        let mut r = Reader::new(buf);
        let address = Self::read(&mut r)?;
        Ok((address, r.position()))
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ipv4(ip) => ip.fmt(f),
            Host::Ipv6(ip) => write!(f, "[{ip}]"),
            Host::Dns(name) => f.write_str(name),
            Host::Onion(onion) => onion.fmt(f),
            Host::I2p(i2p) => i2p.fmt(f),
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Why a string is not a valid `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressParseError {
    #[error("{0:?}: expected host:port")]
    MissingPort(String),
    #[error("{0:?}: invalid port")]
    InvalidPort(String),
    #[error("{0:?}: invalid host")]
    InvalidHost(String),
    #[error("invalid onion address: {0}")]
    Onion(OnionError),
    #[error("invalid i2p address: {0}")]
    I2p(I2pError),
}

impl FromStr for Address {
    type Err = AddressParseError;

    /// `1.2.3.4:8776`, `[::1]:8776`, `<56 base32>.onion:8776`, `<name>.i2p:8776`, or any
    /// other non-empty name (≤ 255 bytes, no whitespace) as DNS.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| AddressParseError::MissingPort(s.to_owned()))?;
        let port = port
            .parse()
            .map_err(|_| AddressParseError::InvalidPort(s.to_owned()))?;
        let host = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Host::Ipv6(
                v6.parse()
                    .map_err(|_| AddressParseError::InvalidHost(s.to_owned()))?,
            )
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            match ip {
                IpAddr::V4(ip) => Host::Ipv4(ip),
                // A bare IPv6 with a port is ambiguous (`::1:8776`).
                IpAddr::V6(_) => return Err(AddressParseError::InvalidHost(s.to_owned())),
            }
        } else if host.ends_with(".onion") {
            Host::Onion(host.parse()?)
        } else if host.ends_with(".i2p") || host.ends_with(".i2p.alt") {
            Host::I2p(host.parse()?)
        } else if host.is_empty()
            || host.len() > usize::from(u8::MAX)
            || host.contains(|c: char| c.is_whitespace() || c.is_control() || c == '/')
        {
            return Err(AddressParseError::InvalidHost(s.to_owned()));
        } else {
            Host::Dns(host.to_owned())
        };
        Ok(Self { host, port })
    }
}

/// Why bytes or a string are not a valid Tor v3 onion address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OnionError {
    #[error("unsupported onion address version {0}")]
    UnsupportedVersion(u8),
    #[error("invalid onion checksum {found:#06x} (expected {expected:#06x})")]
    InvalidChecksum { expected: u16, found: u16 },
    #[error("not a base32 `<56 characters>.onion` address")]
    InvalidFormat,
}

/// A Tor v3 onion service address (its Ed25519 public key; the key is not checked to be a
/// curve point, like `cypheraddr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OnionAddrV3 {
    pubkey: [u8; 32],
}

impl OnionAddrV3 {
    /// The address of the onion service with this public key.
    pub fn from_public_key(pubkey: [u8; 32]) -> Self {
        Self { pubkey }
    }

    /// The service's public key.
    pub fn public_key(&self) -> &[u8; 32] {
        &self.pubkey
    }

    /// `LE-u16(SHA3-256(".onion checksum" ‖ pubkey ‖ 0x03)[0..2])`.
    pub fn checksum(&self) -> u16 {
        let mut hasher = Sha3_256::new();
        hasher.update(b".onion checksum");
        hasher.update(self.pubkey);
        hasher.update([3u8]);
        let hash = hasher.finalize();
        u16::from_le_bytes([hash[0], hash[1]])
    }

    /// Parses `pubkey(32) ‖ checksum(2, LE) ‖ version`; the version must be 3 and the
    /// checksum must match.
    pub fn from_raw_bytes(bytes: [u8; ONION_V3_RAW_LEN]) -> Result<Self, OnionError> {
        let [pubkey @ .., c0, c1, version] = bytes;
        if version != 3 {
            return Err(OnionError::UnsupportedVersion(version));
        }
        let addr = Self { pubkey };
        let found = u16::from_le_bytes([c0, c1]);
        let expected = addr.checksum();
        if found != expected {
            return Err(OnionError::InvalidChecksum { expected, found });
        }
        Ok(addr)
    }

    /// The 35-byte wire form.
    pub fn to_raw_bytes(&self) -> [u8; ONION_V3_RAW_LEN] {
        let mut out = [0u8; ONION_V3_RAW_LEN];
        let [c0, c1] = self.checksum().to_le_bytes();
        for (dst, src) in out
            .iter_mut()
            .zip(self.pubkey.iter().chain([c0, c1, 3].iter()))
        {
            *dst = *src;
        }
        out
    }
}

impl fmt::Display for OnionAddrV3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.onion", base32::encode_lower(&self.to_raw_bytes()))
    }
}

impl FromStr for OnionAddrV3 {
    type Err = OnionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let stripped = s.strip_suffix(".onion").ok_or(OnionError::InvalidFormat)?;
        let bytes = base32::decode(stripped).ok_or(OnionError::InvalidFormat)?;
        let raw: [u8; ONION_V3_RAW_LEN] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| OnionError::InvalidFormat)?;
        Self::from_raw_bytes(raw)
    }
}

/// Why a string is not a valid I2P address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum I2pError {
    #[error("{0:?} does not end with .i2p or .i2p.alt")]
    NoSuffix(String),
    #[error("{0:?} is not valid base32")]
    InvalidBase32(String),
    #[error("{0:?} has an invalid length")]
    InvalidLength(String),
}

const SUFFIX_B32_I2P: &str = ".b32.i2p";
const SUFFIX_B32_I2P_ALT: &str = ".b32.i2p.alt";
const SUFFIX_I2P: &str = ".i2p";
const SUFFIX_I2P_ALT: &str = ".i2p.alt";
/// Characters of a base32 name (a 32-byte digest).
const B32_LEN_CHARS: usize = 52;
/// Fewest characters of an extended base32 name.
const EXT_B32_MIN_LEN_CHARS: usize = 56;

/// An I2P address, parsed like `cypheraddr`'s `I2pAddr` (`alt` = the `.i2p.alt` suffix).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum I2pAddr {
    /// `<52 base32 chars>.b32.i2p`: a 32-byte destination digest.
    Base32 { digest: [u8; 32], alt: bool },
    /// `<≥ 56 base32 chars>.b32.i2p`: checksum (3 bytes) ‖ payload, not verified.
    ExtendedBase32 { bytes: Vec<u8>, alt: bool },
    /// `<name>.i2p`: not validated.
    Name { name: String, alt: bool },
}

impl I2pAddr {
    fn from_b32(stripped: &str, alt: bool) -> Result<Self, I2pError> {
        if stripped.len() == B32_LEN_CHARS {
            let bytes = base32::decode(stripped)
                .ok_or_else(|| I2pError::InvalidBase32(stripped.to_owned()))?;
            let digest = bytes
                .as_slice()
                .try_into()
                .map_err(|_| I2pError::InvalidLength(stripped.to_owned()))?;
            Ok(Self::Base32 { digest, alt })
        } else if stripped.len() >= EXT_B32_MIN_LEN_CHARS {
            let bytes = base32::decode(stripped)
                .ok_or_else(|| I2pError::InvalidBase32(stripped.to_owned()))?;
            Ok(Self::ExtendedBase32 { bytes, alt })
        } else {
            Err(I2pError::InvalidLength(stripped.to_owned()))
        }
    }
}

impl FromStr for I2pAddr {
    type Err = I2pError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(stripped) = s.strip_suffix(SUFFIX_B32_I2P) {
            Self::from_b32(stripped, false)
        } else if let Some(stripped) = s.strip_suffix(SUFFIX_B32_I2P_ALT) {
            Self::from_b32(stripped, true)
        } else if let Some(name) = s.strip_suffix(SUFFIX_I2P) {
            Ok(Self::Name {
                name: name.to_owned(),
                alt: false,
            })
        } else if let Some(name) = s.strip_suffix(SUFFIX_I2P_ALT) {
            Ok(Self::Name {
                name: name.to_owned(),
                alt: true,
            })
        } else {
            Err(I2pError::NoSuffix(s.to_owned()))
        }
    }
}

impl fmt::Display for I2pAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b32_suffix = |alt: bool| {
            if alt {
                SUFFIX_B32_I2P_ALT
            } else {
                SUFFIX_B32_I2P
            }
        };
        match self {
            Self::Base32 { digest, alt } => {
                write!(f, "{}{}", base32::encode_lower(digest), b32_suffix(*alt))
            }
            Self::ExtendedBase32 { bytes, alt } => {
                write!(f, "{}{}", base32::encode_lower(bytes), b32_suffix(*alt))
            }
            Self::Name { name, alt } => {
                let suffix = if *alt { SUFFIX_I2P_ALT } else { SUFFIX_I2P };
                write!(f, "{name}{suffix}")
            }
        }
    }
}

/// RFC 4648 base32 without padding, with the quirks of the `base32` 0.4 crate's decoder
/// (which `cypheraddr` uses): case-insensitive, trailing `=` (up to 6) shorten the output,
/// other `=` count as zero bits, leftover bits are dropped.
mod base32 {
    const ALPHABET_LOWER: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

    fn value(c: u8) -> Option<u8> {
        match c.to_ascii_uppercase() {
            c @ b'A'..=b'Z' => Some(c - b'A'),
            c @ b'2'..=b'7' => Some(c - b'2' + 26),
            b'=' => Some(0),
            _ => None,
        }
    }

    pub(super) fn decode(s: &str) -> Option<Vec<u8>> {
        if !s.is_ascii() {
            return None;
        }
        let data = s.as_bytes();
        let padding = data
            .iter()
            .rev()
            .take(6)
            .take_while(|&&c| c == b'=')
            .count();
        let out_len = (data.len() - padding) * 5 / 8;
        let mut out = Vec::with_capacity(data.len().div_ceil(8) * 5);
        for chunk in data.chunks(8) {
            let mut v = [0u8; 8];
            for (dst, &c) in v.iter_mut().zip(chunk) {
                *dst = value(c)?;
            }
            let [a, b, c, d, e, f, g, h] = v;
            out.extend_from_slice(&[
                (a << 3) | (b >> 2),
                (b << 6) | (c << 1) | (d >> 4),
                (d << 4) | (e >> 1),
                (e << 7) | (f << 2) | (g >> 3),
                (g << 5) | h,
            ]);
        }
        out.truncate(out_len);
        Some(out)
    }

    pub(super) fn encode_lower(data: &[u8]) -> String {
        let mut out = String::with_capacity(data.len().div_ceil(5) * 8);
        let mut acc: u16 = 0;
        let mut bits = 0u32;
        let mut emit = |index: u16| out.push(char::from(ALPHABET_LOWER[usize::from(index & 31)]));
        for &byte in data {
            acc = (acc << 8) | u16::from(byte);
            bits += 8;
            while bits >= 5 {
                bits -= 5;
                emit(acc >> bits);
            }
            acc &= (1 << bits) - 1;
        }
        if bits > 0 {
            emit(acc << (5 - bits));
        }
        out
    }
}

impl From<OnionError> for AddressParseError {
    fn from(e: OnionError) -> Self {
        AddressParseError::Onion(e)
    }
}

impl From<I2pError> for AddressParseError {
    fn from(e: I2pError) -> Self {
        AddressParseError::I2p(e)
    }
}
