//! The node's Ed25519 key pair and its OpenSSH key files (protocol.md §1.1).

use std::fmt;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signer as _, SigningKey};
use rand::rngs::OsRng;
use rand::RngCore as _;
use sha2::{Digest as _, Sha256};
use ssh_key::private::{Ed25519Keypair, KeypairData};
use ssh_key::public::KeyData;
use ssh_key::{LineEnding, PrivateKey, PublicKey};

use super::{CryptoError, NodeId};

/// File name of the secret key inside the keys directory (as `rad auth` writes it).
pub const PRIVATE_KEY_FILE: &str = "radicle";
/// File name of the public key inside the keys directory.
pub const PUBLIC_KEY_FILE: &str = "radicle.pub";

/// An Ed25519 signing key; its public half is the [`NodeId`].
#[derive(Clone)]
pub struct Keypair {
    signing: SigningKey,
}

impl fmt::Debug for Keypair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keypair")
            .field("nid", &self.nid())
            .finish_non_exhaustive()
    }
}

impl Keypair {
    /// A fresh random key from the operating system's RNG.
    pub fn generate() -> Self {
        Self {
            signing: SigningKey::generate(&mut OsRng),
        }
    }

    /// The key derived from a 32-byte secret seed (RFC 8032).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self {
            signing: SigningKey::from_bytes(&seed),
        }
    }

    /// radicle's `SigningKey::mock(n)`: the seed is `n` as 8 big-endian bytes, repeated 4×.
    pub fn mock(n: u64) -> Self {
        Self::from_seed(mock_seed(n))
    }

    /// The node id (public key).
    pub fn nid(&self) -> NodeId {
        NodeId::from_bytes(self.signing.verifying_key().to_bytes())
    }

    /// Signs `msg` (deterministic Ed25519).
    pub fn sign(&self, msg: &[u8]) -> [u8; 64] {
        self.signing.sign(msg).to_bytes()
    }

    /// The underlying dalek signing key (e.g. for the Noise handshake's Diffie-Hellman).
    pub fn signing_key(&self) -> &SigningKey {
        &self.signing
    }

    /// Loads an OpenSSH private key file (as written by `rad auth` or
    /// `ssh-keygen -t ed25519`). An encrypted file needs `passphrase`; a passphrase given
    /// for an unencrypted file is ignored. An empty passphrase counts as none.
    pub fn load(path: &Path, passphrase: Option<&str>) -> Result<Self, CryptoError> {
        let passphrase = passphrase.filter(|p| !p.is_empty());
        let text = fs::read_to_string(path).map_err(|source| CryptoError::Io {
            path: path.to_owned(),
            cause: source,
        })?;
        let key = PrivateKey::from_openssh(text.trim()).map_err(|source| CryptoError::KeyFile {
            path: path.to_owned(),
            cause: source,
        })?;
        let key = if key.is_encrypted() {
            let Some(passphrase) = passphrase else {
                return Err(CryptoError::PassphraseRequired {
                    path: path.to_owned(),
                });
            };
            key.decrypt(passphrase)
                .map_err(|source| CryptoError::Decrypt {
                    path: path.to_owned(),
                    cause: source,
                })?
        } else {
            key
        };
        match key.key_data() {
            KeypairData::Ed25519(pair) => {
                let signing = SigningKey::from_keypair_bytes(&pair.to_bytes()).map_err(|_| {
                    CryptoError::KeyMismatch {
                        path: path.to_owned(),
                    }
                })?;
                Ok(Self { signing })
            }
            _ => Err(CryptoError::UnsupportedKeyType {
                path: path.to_owned(),
                algorithm: key.algorithm().to_string(),
            }),
        }
    }

    /// Writes `dir/radicle` (unencrypted OpenSSH private key, mode 0600) and
    /// `dir/radicle.pub` (`ssh-ed25519 AAAA… <nid>`), each atomically (temp file + rename).
    /// Creates `dir` (mode 0700) if needed; replaces existing files.
    pub fn write(&self, dir: &Path) -> Result<(), CryptoError> {
        self.write_with_passphrase(dir, None)
    }

    /// Like [`Keypair::write`], encrypting the private key (bcrypt-pbkdf + AES-256-CTR, as
    /// `ssh-keygen` does) when a non-empty `passphrase` is given.
    pub fn write_with_passphrase(
        &self,
        dir: &Path,
        passphrase: Option<&str>,
    ) -> Result<(), CryptoError> {
        let passphrase = passphrase.filter(|p| !p.is_empty());
        let private_path = dir.join(PRIVATE_KEY_FILE);
        let encode_err = |source| CryptoError::Encode {
            path: private_path.clone(),
            cause: source,
        };
        let key = PrivateKey::new(
            KeypairData::Ed25519(Ed25519Keypair::from(&self.signing)),
            self.nid().to_string(),
        )
        .map_err(encode_err)?;
        let key = match passphrase {
            Some(p) => key.encrypt(&mut OsRng, p).map_err(encode_err)?,
            None => key,
        };
        let pem = key.to_openssh(LineEnding::LF).map_err(encode_err)?;

        create_private_dir(dir)?;
        atomic_write(&private_path, pem.as_bytes(), 0o600)?;
        self.write_public(dir)
    }

    /// Writes `dir/radicle.pub` atomically.
    fn write_public(&self, dir: &Path) -> Result<(), CryptoError> {
        let nid = self.nid();
        let line = format!("{} {nid}\n", ssh_public_key_string(&nid));
        // 0600 like every file seedd writes into its data directory (and `seedctl restore`).
        atomic_write(&dir.join(PUBLIC_KEY_FILE), line.as_bytes(), 0o600)
    }
}

/// Loads `dir/radicle` if it exists (returning `created = false`), otherwise generates a new
/// key and writes it with [`Keypair::write_with_passphrase`] (returning `created = true`).
///
/// When the key exists but `dir/radicle.pub` is missing, the public file is re-created; when
/// that file holds a different key, this fails with [`CryptoError::PublicKeyMismatch`].
pub fn load_or_generate(
    dir: &Path,
    passphrase: Option<&str>,
) -> Result<(Keypair, bool), CryptoError> {
    let private_path = dir.join(PRIVATE_KEY_FILE);
    let exists = private_path
        .try_exists()
        .map_err(|source| CryptoError::Io {
            path: private_path.clone(),
            cause: source,
        })?;
    if !exists {
        let keypair = Keypair::generate();
        keypair.write_with_passphrase(dir, passphrase)?;
        return Ok((keypair, true));
    }
    let keypair = Keypair::load(&private_path, passphrase)?;
    check_public_file(dir, &keypair)?;
    Ok((keypair, false))
}

fn check_public_file(dir: &Path, keypair: &Keypair) -> Result<(), CryptoError> {
    let path = dir.join(PUBLIC_KEY_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return keypair.write_public(dir),
        Err(source) => {
            return Err(CryptoError::Io {
                path,
                cause: source,
            })
        }
    };
    let public = PublicKey::from_openssh(text.trim()).map_err(|source| CryptoError::KeyFile {
        path: path.clone(),
        cause: source,
    })?;
    let expected = keypair.nid();
    match public.key_data() {
        KeyData::Ed25519(key) if key.0 == *expected.as_bytes() => Ok(()),
        KeyData::Ed25519(key) => Err(CryptoError::PublicKeyMismatch {
            path,
            expected,
            found: NodeId::from_bytes(key.0).to_string(),
        }),
        _ => Err(CryptoError::PublicKeyMismatch {
            path,
            expected,
            found: public.algorithm().to_string(),
        }),
    }
}

/// radicle's `Seed::mock(n)`: `n` as 8 big-endian bytes, repeated 4× (so `mock(u64::MAX)`
/// is 32×`0xFF`).
pub fn mock_seed(n: u64) -> [u8; 32] {
    let mut seed = [0u8; 32];
    for chunk in seed.chunks_exact_mut(8) {
        chunk.copy_from_slice(&n.to_be_bytes());
    }
    seed
}

/// The SSH wire blob of an Ed25519 public key: `string "ssh-ed25519" ‖ string key`.
fn ssh_wire_blob(nid: &NodeId) -> Vec<u8> {
    const ALG: &[u8] = b"ssh-ed25519";
    let mut blob = Vec::with_capacity(4 + ALG.len() + 4 + 32);
    blob.extend_from_slice(&(ALG.len() as u32).to_be_bytes());
    blob.extend_from_slice(ALG);
    blob.extend_from_slice(&32u32.to_be_bytes());
    blob.extend_from_slice(nid.as_bytes());
    blob
}

/// The OpenSSH public key line without comment: `ssh-ed25519 <base64>`.
pub fn ssh_public_key_string(nid: &NodeId) -> String {
    format!("ssh-ed25519 {}", base64_std(&ssh_wire_blob(nid), true))
}

/// The OpenSSH SHA-256 fingerprint: `SHA256:<unpadded base64>` (as `ssh-keygen -l` shows).
pub fn ssh_fingerprint(nid: &NodeId) -> String {
    let digest = Sha256::digest(ssh_wire_blob(nid));
    format!("SHA256:{}", base64_std(&digest, false))
}

/// Standard-alphabet base64 (RFC 4648 §4).
fn base64_std(bytes: &[u8], pad: bool) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..4 {
            if i < chars {
                let idx = ((n >> (18 - 6 * i)) & 0x3f) as usize;
                out.push(char::from(ALPHABET[idx]));
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// Creates `dir` (and parents) with mode 0700 if it does not exist.
fn create_private_dir(dir: &Path) -> Result<(), CryptoError> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|source| CryptoError::Io {
        path: dir.to_owned(),
        cause: source,
    })
}

/// Writes `bytes` to a new temporary file next to `path` (created with `mode`), syncs it and
/// renames it over `path`; then syncs the directory.
fn atomic_write(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CryptoError> {
    let io_err = |path: &Path| {
        let path = path.to_owned();
        move |source| CryptoError::Io {
            path,
            cause: source,
        }
    };
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = dir.join(format!(
        ".{name}.tmp-{}-{:016x}",
        std::process::id(),
        OsRng.next_u64()
    ));

    let result = (|| {
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(mode);
        }
        #[cfg(not(unix))]
        let _ = mode;
        let mut file = options.open(&tmp).map_err(io_err(&tmp))?;
        file.write_all(bytes).map_err(io_err(&tmp))?;
        file.sync_all().map_err(io_err(&tmp))?;
        drop(file);
        fs::rename(&tmp, path).map_err(io_err(path))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
        return result;
    }
    #[cfg(unix)]
    if let Ok(d) = fs::File::open(dir) {
        // Best effort: make the rename durable.
        let _ = d.sync_all();
    }
    Ok(())
}
