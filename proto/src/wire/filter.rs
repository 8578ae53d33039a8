//! The subscription bloom filter (protocol.md §4.5), bit-compatible with radicle's `Filter`
//! (`bloomy` 1.2 over `RepoId`'s Rust `Hash`).
//!
//! * `m = 8 · size` bits, size 1024, 4096 or 16384 bytes; bit `i` is `byte[i / 8] & (1 << i % 8)`.
//! * For a RID with oid `o`: `x = u64-LE(20) ‖ o` (Rust's slice hashing writes the length
//!   first), `h1 = SipHash-1-3(K0, x)`, `h2 = SipHash-1-3(K1, x)`.
//! * Bits `(h1 + j·h2 + j³) mod 2^64 mod m` for `j = 0..7`.

use std::hash::Hasher as _;

use siphasher::sip::SipHasher13;

use super::codec::{self, Reader};
use super::DecodeError;
use crate::crypto::RepoId;

/// Small filter: 1 KiB, about 855 repositories at 1 % false positives.
pub const FILTER_SIZE_S: usize = 1024;
/// Medium filter: 4 KiB, about 3 419 repositories.
pub const FILTER_SIZE_M: usize = 4 * 1024;
/// Large filter: 16 KiB, about 13 675 repositories.
pub const FILTER_SIZE_L: usize = 16 * 1024;
/// The only sizes allowed on the wire.
pub const FILTER_SIZES: [usize; 3] = [FILTER_SIZE_S, FILTER_SIZE_M, FILTER_SIZE_L];
/// Number of hash functions, for every size.
pub const FILTER_HASHES: u64 = 7;
/// Target false-positive rate used to size filters.
pub const FILTER_FP_RATE: f64 = 0.01;

/// SipHash keys of `bloomy`.
const SIP_KEYS: [[u8; 16]; 2] = [
    [
        0x88, 0xa8, 0x1c, 0xfb, 0x8d, 0xef, 0x45, 0x26, 0xa6, 0xd1, 0x62, 0xc9, 0x02, 0xa9, 0x92,
        0xaa,
    ],
    [
        0x67, 0xec, 0xb1, 0xd4, 0x36, 0x0b, 0x42, 0x05, 0xc2, 0x56, 0x06, 0xfe, 0x52, 0x5d, 0xcb,
        0x25,
    ],
];

/// A bloom filter of repository ids. Its size is always one of [`FILTER_SIZES`].
///
/// The [`Default`] filter is 1 KiB of `0xFF`: it matches every repository.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Filter {
    bytes: Vec<u8>,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ones: u32 = self.bytes.iter().map(|b| b.count_ones()).sum();
        write!(f, "Filter({} bytes, {ones} bits set)", self.bytes.len())
    }
}

impl Default for Filter {
    fn default() -> Self {
        Self {
            bytes: vec![0xFF; FILTER_SIZE_S],
        }
    }
}

/// The two SipHash-1-3 values of a repository id.
pub fn sip_hashes(rid: &RepoId) -> (u64, u64) {
    let mut input = [0u8; 28];
    let (len, oid) = input.split_at_mut(8);
    len.copy_from_slice(&20u64.to_le_bytes());
    oid.copy_from_slice(rid.as_bytes());
    let hash = |key: &[u8; 16]| {
        let mut hasher = SipHasher13::new_with_key(key);
        hasher.write(&input);
        hasher.finish()
    };
    (hash(&SIP_KEYS[0]), hash(&SIP_KEYS[1]))
}

/// The bit indices `rid` sets in a filter of `nbits` bits (`nbits > 0`).
pub fn bit_indices(rid: &RepoId, nbits: u64) -> [u64; FILTER_HASHES as usize] {
    indices_of(sip_hashes(rid), nbits)
}

/// A repository id hashed once, to test against many filters ([`Filter::contains_probe`]): a
/// relay checks one repository against every session's subscription. Holds the bit indices
/// for each of the [`FILTER_SIZES`], so a test is at most [`FILTER_HASHES`] byte reads and
/// usually one (no hashing or division per filter).
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    hashes: (u64, u64),
    indices: [[u64; FILTER_HASHES as usize]; FILTER_SIZES.len()],
}

impl Probe {
    pub fn new(rid: &RepoId) -> Self {
        let hashes = sip_hashes(rid);
        let indices = FILTER_SIZES.map(|bytes| indices_of(hashes, bytes as u64 * 8));
        Self { hashes, indices }
    }
}

fn indices_of((h1, h2): (u64, u64), nbits: u64) -> [u64; FILTER_HASHES as usize] {
    let mut out = [0u64; FILTER_HASHES as usize];
    for (j, slot) in (0u64..).zip(out.iter_mut()) {
        let h = h1
            .wrapping_add(j.wrapping_mul(h2))
            .wrapping_add(j.wrapping_mul(j).wrapping_mul(j));
        *slot = h % nbits.max(1);
    }
    out
}

/// Optimal bloom filter size in bytes for `n` items at 1 % false positives:
/// `ceil(−n·ln(0.01)/ln(2)²) / 8` (`bloomy::optimal_bits / 8`).
pub fn optimal_bytes(n: usize) -> usize {
    let ln2_sq = std::f64::consts::LN_2 * std::f64::consts::LN_2;
    let bits = (-((FILTER_FP_RATE.ln() * n as f64) / ln2_sq)).ceil() as usize;
    bits / 8
}

/// Filter size for `n` repositories: [`optimal_bytes`] rounded up to an allowed size.
pub fn size_for(n: usize) -> usize {
    let bytes = optimal_bytes(n);
    if bytes > FILTER_SIZE_M {
        FILTER_SIZE_L
    } else if bytes > FILTER_SIZE_S {
        FILTER_SIZE_M
    } else {
        FILTER_SIZE_S
    }
}

impl Filter {
    /// A filter with nothing set (1 KiB).
    pub fn empty() -> Self {
        Self {
            bytes: vec![0; FILTER_SIZE_S],
        }
    }

    /// A filter holding `rids`, sized for their number like radicle's `Filter::new`.
    pub fn new<'a>(rids: impl IntoIterator<Item = &'a RepoId>) -> Self {
        let rids: Vec<&RepoId> = rids.into_iter().collect();
        let mut filter = Self {
            bytes: vec![0; size_for(rids.len())],
        };
        for rid in rids {
            filter.insert(rid);
        }
        filter
    }

    /// A filter from raw bytes; the length must be 1024, 4096 or 16384.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, DecodeError> {
        if !FILTER_SIZES.contains(&bytes.len()) {
            return Err(DecodeError::InvalidFilterSize(bytes.len()));
        }
        Ok(Self { bytes })
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    fn nbits(&self) -> u64 {
        self.bytes.len() as u64 * 8
    }

    /// Adds a repository.
    pub fn insert(&mut self, rid: &RepoId) {
        for bit in bit_indices(rid, self.nbits()) {
            if let Some(byte) = self.bytes.get_mut((bit / 8) as usize) {
                *byte |= 1 << (bit % 8);
            }
        }
    }

    /// Whether the repository is (probably) in the filter; never a false negative.
    pub fn contains(&self, rid: &RepoId) -> bool {
        bit_indices(rid, self.nbits()).iter().all(|bit| {
            self.bytes
                .get((bit / 8) as usize)
                .is_some_and(|byte| byte & (1 << (bit % 8)) != 0)
        })
    }

    /// [`Filter::contains`] with the repository hashed beforehand.
    pub fn contains_probe(&self, probe: &Probe) -> bool {
        let set = |bit: &u64| {
            self.bytes
                .get((bit / 8) as usize)
                .is_some_and(|byte| byte & (1 << (bit % 8)) != 0)
        };
        match FILTER_SIZES.iter().position(|&n| n == self.bytes.len()) {
            Some(i) => probe.indices[i].iter().all(set),
            // Not a wire size (never built: `from_bytes` refuses them): computed here.
            None => indices_of(probe.hashes, self.nbits()).iter().all(set),
        }
    }

    /// `u16 length ‖ bytes`.
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        // The size is one of FILTER_SIZES, all below u16::MAX.
        codec::put_u16(out, self.bytes.len() as u16);
        out.extend_from_slice(&self.bytes);
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let size = usize::from(r.u16()?);
        if !FILTER_SIZES.contains(&size) {
            return Err(DecodeError::InvalidFilterSize(size));
        }
        Ok(Self {
            bytes: r.take(size)?.to_vec(),
        })
    }
}
