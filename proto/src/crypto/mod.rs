//! Identities and cryptographic primitives (protocol.md §1.1–§1.3).
//!
//! * [`NodeId`] — an Ed25519 public key, shown as `z6Mk…` (multibase base58btc of
//!   `0xED 0x01 ‖ key`) or `did:key:z6Mk…`.
//! * [`RepoId`] — a 20-byte git blob id, shown as `rad:z…`.
//! * [`git_blob_oid`] — SHA-1 of a git blob object.
//! * [`canonical_json`] — the canonical JSON encoding hashed into RIDs.
//! * [`Keypair`] — the node's signing key, stored as an OpenSSH private key file.

mod canonical;
mod ids;
mod keys;

use std::path::PathBuf;

pub use canonical::{canonical_json, to_canonical_json};
pub use ids::{git_blob_oid, NodeId, RepoId, VerifyingKey};
pub use keys::{
    load_or_generate, mock_seed, ssh_fingerprint, ssh_public_key_string, Keypair, PRIVATE_KEY_FILE,
    PUBLIC_KEY_FILE,
};

/// Errors of the crypto module.
#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    /// A string is not a valid node id (`z6Mk…`).
    #[error("invalid node id {input:?}: {reason}")]
    InvalidNodeId { input: String, reason: &'static str },
    /// A string is not a valid `did:key:` node id.
    #[error("invalid DID {input:?}: {reason}")]
    InvalidDid { input: String, reason: &'static str },
    /// A string is not a valid repository id (`rad:z…`).
    #[error("invalid repository id {input:?}: {reason}")]
    InvalidRepoId { input: String, reason: &'static str },
    /// The 32 bytes of a node id are not a valid Ed25519 point.
    #[error("node id {0} is not a valid Ed25519 public key")]
    InvalidPublicKey(NodeId),
    /// A signature does not have 64 bytes.
    #[error("invalid signature length {0} (expected 64)")]
    InvalidSignatureLength(usize),
    /// A signature does not verify.
    #[error("signature verification failed for {0}")]
    BadSignature(NodeId),
    /// Canonical JSON forbids floating-point numbers.
    #[error("floating point numbers are not allowed in canonical JSON (found {0})")]
    FloatInCanonicalJson(String),
    /// A JSON value is nested too deeply to be encoded.
    #[error("JSON value nested deeper than {0} levels")]
    JsonTooDeep(usize),
    /// A value could not be converted to JSON.
    #[error("cannot convert value to JSON: {0}")]
    Json(serde_json::Error),
    /// An I/O error on a key file.
    #[error("{path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// A key file could not be parsed or encoded.
    #[error("{path}: invalid OpenSSH key file: {cause}")]
    KeyFile {
        path: PathBuf,
        cause: ssh_key::Error,
    },
    /// The private key file is encrypted, but no passphrase was given.
    #[error("{path}: private key is encrypted; a passphrase is required (RAD_PASSPHRASE)")]
    PassphraseRequired { path: PathBuf },
    /// The private key could not be decrypted.
    #[error("{path}: cannot decrypt private key (wrong passphrase?): {cause}")]
    Decrypt {
        path: PathBuf,
        cause: ssh_key::Error,
    },
    /// The key file holds a key that is not Ed25519.
    #[error("{path}: unsupported key type {algorithm} (expected ssh-ed25519)")]
    UnsupportedKeyType { path: PathBuf, algorithm: String },
    /// The public half stored in a key file does not match its secret key.
    #[error("{path}: public key does not match the secret key")]
    KeyMismatch { path: PathBuf },
    /// The `.pub` file next to the private key holds another key.
    #[error("{path}: public key file holds {found}, but the private key is {expected}")]
    PublicKeyMismatch {
        path: PathBuf,
        expected: NodeId,
        found: String,
    },
    /// Key generation or encryption failed.
    #[error("{path}: cannot encode private key: {cause}")]
    Encode {
        path: PathBuf,
        cause: ssh_key::Error,
    },
}

/// Shortens untrusted input quoted in error messages.
pub(crate) fn snippet(input: &str) -> String {
    const MAX: usize = 120;
    if input.len() <= MAX {
        return input.to_owned();
    }
    let mut end = MAX;
    while !input.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &input[..end])
}

impl From<serde_json::Error> for CryptoError {
    fn from(e: serde_json::Error) -> Self {
        CryptoError::Json(e)
    }
}

#[cfg(test)]
mod tests;
