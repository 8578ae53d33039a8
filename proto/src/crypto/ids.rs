//! Node ids, repository ids and git blob ids (protocol.md §1.1, §1.2).

use std::fmt;
use std::str::FromStr;

use ed25519_dalek::Verifier as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha1::{Digest as _, Sha1};

use super::{snippet, CryptoError};

/// Multicodec prefix of an Ed25519 public key (varint `0xed`).
const MULTICODEC_ED25519_PUB: [u8; 2] = [0xED, 0x01];
/// Prefix of the `did:key:` form of a node id.
const DID_KEY_PREFIX: &str = "did:key:";
/// Prefix of the URN form of a repository id.
const RAD_PREFIX: &str = "rad:";
/// Multibase prefix character of base58btc.
const BASE58BTC: char = 'z';

/// A node id: the raw 32-byte Ed25519 public key of a node.
///
/// Ordered by its bytes, like radicle's `PublicKey`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId([u8; 32]);

impl NodeId {
    /// Wraps 32 raw public-key bytes (no validation that they are a curve point).
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The raw 32 bytes, as sent on the wire.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Parses the `did:key:z6Mk…` form.
    pub fn from_did(s: &str) -> Result<Self, CryptoError> {
        let rest = s
            .strip_prefix(DID_KEY_PREFIX)
            .ok_or_else(|| CryptoError::InvalidDid {
                input: snippet(s),
                reason: "missing `did:key:` prefix",
            })?;
        rest.parse().map_err(|_| CryptoError::InvalidDid {
            input: snippet(s),
            reason: "not a base58btc Ed25519 multikey",
        })
    }

    /// The `did:key:z6Mk…` form.
    pub fn to_did(&self) -> String {
        format!("{DID_KEY_PREFIX}{self}")
    }

    /// Verifies an Ed25519 signature over `msg` made by this key, with the semantics of
    /// `ed25519_dalek::VerifyingKey::verify` (what radicle uses; not `verify_strict`).
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        self.verifying_key()?.verify(msg, sig)
    }

    /// The key as a curve point (its decompression is ~10 % of a verification): kept by
    /// whoever verifies many signatures of one node.
    pub fn verifying_key(&self) -> Result<VerifyingKey, CryptoError> {
        ed25519_dalek::VerifyingKey::from_bytes(&self.0)
            .map(|key| VerifyingKey(*self, key))
            .map_err(|_| CryptoError::InvalidPublicKey(*self))
    }
}

/// A node's public key, decompressed ([`NodeId::verifying_key`]).
#[derive(Clone, Debug)]
pub struct VerifyingKey(NodeId, ed25519_dalek::VerifyingKey);

impl VerifyingKey {
    /// Whose key it is.
    pub fn node(&self) -> NodeId {
        self.0
    }

    /// [`NodeId::verify`] without decompressing the key again.
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        let sig = ed25519_dalek::Signature::from_slice(sig)
            .map_err(|_| CryptoError::InvalidSignatureLength(sig.len()))?;
        self.1
            .verify(msg, &sig)
            .map_err(|_| CryptoError::BadSignature(self.0))
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 34];
        buf[..2].copy_from_slice(&MULTICODEC_ED25519_PUB);
        buf[2..].copy_from_slice(&self.0);
        write!(f, "{BASE58BTC}{}", bs58::encode(buf).into_string())
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeId({self})")
    }
}

impl FromStr for NodeId {
    type Err = CryptoError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| CryptoError::InvalidNodeId {
            input: snippet(s),
            reason,
        };
        let encoded = s
            .strip_prefix(BASE58BTC)
            .ok_or_else(|| err("expected multibase base58btc (`z…`)"))?;
        let bytes = bs58::decode(encoded)
            .into_vec()
            .map_err(|_| err("invalid base58"))?;
        let key = bytes
            .strip_prefix(&MULTICODEC_ED25519_PUB)
            .ok_or_else(|| err("not an Ed25519 public key (multicodec prefix ED 01)"))?;
        let key: [u8; 32] = key
            .try_into()
            .map_err(|_| err("Ed25519 public key must be 32 bytes"))?;
        Ok(Self(key))
    }
}

impl From<[u8; 32]> for NodeId {
    fn from(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }
}

impl Serialize for NodeId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for NodeId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A repository id: the 20-byte git blob id of the initial identity document.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoId([u8; 20]);

impl RepoId {
    /// Wraps the 20 bytes of a git object id.
    pub const fn from_oid_bytes(bytes: [u8; 20]) -> Self {
        Self(bytes)
    }

    /// The raw 20 bytes.
    pub const fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }

    /// The 40-character lower-case hex form of the object id.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The canonical form `z…` (without `rad:`), used in storage paths and git headers.
    pub fn canonical(&self) -> String {
        format!("{BASE58BTC}{}", bs58::encode(self.0).into_string())
    }
}

impl fmt::Display for RepoId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{RAD_PREFIX}{}", self.canonical())
    }
}

impl fmt::Debug for RepoId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RepoId({self})")
    }
}

impl FromStr for RepoId {
    type Err = CryptoError;

    /// Accepts `rad:z…` and `z…`; only base58btc, exactly 20 bytes.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| CryptoError::InvalidRepoId {
            input: snippet(s),
            reason,
        };
        let body = s.strip_prefix(RAD_PREFIX).unwrap_or(s);
        let encoded = body
            .strip_prefix(BASE58BTC)
            .ok_or_else(|| err("expected multibase base58btc (`z…`)"))?;
        let bytes = bs58::decode(encoded)
            .into_vec()
            .map_err(|_| err("invalid base58"))?;
        let oid: [u8; 20] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| err("repository id must be 20 bytes"))?;
        Ok(Self(oid))
    }
}

impl From<[u8; 20]> for RepoId {
    fn from(bytes: [u8; 20]) -> Self {
        Self(bytes)
    }
}

impl Serialize for RepoId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RepoId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The git object id of a blob with contents `bytes`:
/// SHA-1(`"blob " ‖ decimal(len) ‖ 0x00 ‖ bytes`).
pub fn git_blob_oid(bytes: &[u8]) -> [u8; 20] {
    let mut hasher = Sha1::new();
    hasher.update(b"blob ");
    hasher.update(bytes.len().to_string().as_bytes());
    hasher.update([0u8]);
    hasher.update(bytes);
    hasher.finalize().into()
}
