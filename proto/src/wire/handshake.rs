//! The Noise handshake radicle uses (protocol.md §3.2), as a sans-IO state machine.
//!
//! This is deliberately **not** standard Noise, and must not be "fixed":
//!
//! * protocol name `Noise_XL_Edwards25519_ChaChaPoly_SHA256` (the XK pattern, printed as "XL");
//! * Ed25519 keys are used directly: `DH(sk, PK) = compress(a · decompress(PK))` with `a` the
//!   Ed25519 secret scalar, output the 32-byte compressed Edwards Y encoding;
//! * encrypting an empty payload yields no bytes (no tag), but still bumps the nonce and mixes
//!   the empty ciphertext into `h` — so the acts are 32, 32 and 48 bytes;
//! * the split keys are never used: after the handshake, frames travel in plaintext.
//!
//! ```text
//! init   h = SHA-256(name); ck = h; MixHash(""); MixHash(S_r)
//! act 1  I → R: E_i                   (e, es)
//! act 2  R → I: E_r                   (e, ee)
//! act 3  I → R: AEAD(k, 1, h, S_i)    (s, se)
//! ```
//!
//! The dialer (initiator) must know the listener's node id. The responder learns the
//! dialer's node id from act 3; nothing proves either side holds its secret key.
//!
//! Ephemeral keys are passed in by the caller; official nodes use the fixed
//! [`FIXED_EPHEMERAL_SEED`], a fresh random key works as well.

use chacha20poly1305::aead::{Aead as _, KeyInit as _, Payload};
use chacha20poly1305::ChaCha20Poly1305;
use hmac::{Hmac, Mac as _};
use sha2::{Digest as _, Sha256};

use crate::crypto::{Keypair, NodeId};

/// The Noise protocol name radicle's noise library derives for its XK handshake.
pub const PROTOCOL_NAME: &str = "Noise_XL_Edwards25519_ChaChaPoly_SHA256";
/// Length of act 1 (the initiator's ephemeral key).
pub const ACT1_LEN: usize = 32;
/// Length of act 2 (the responder's ephemeral key).
pub const ACT2_LEN: usize = 32;
/// Length of act 3 (the initiator's encrypted static key and its tag).
pub const ACT3_LEN: usize = 48;
/// Seed of the ephemeral key every official node uses (`radicle-crypto`'s
/// `generate_keypair`): 32 × `0x9A`.
pub const FIXED_EPHEMERAL_SEED: [u8; 32] = [0x9A; 32];

/// Handshake failures; each one ends the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// A received key is not a valid compressed Edwards point.
    #[error("invalid public key {0}")]
    InvalidPublicKey(String),
    /// Act 3 does not decrypt (wrong responder key or corrupted bytes).
    #[error("act 3 failed to decrypt")]
    Decrypt,
}

/// The result of a completed handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    /// The peer's node id (for the initiator, the one it dialed).
    pub remote: NodeId,
    /// The final handshake hash `h`.
    pub handshake_hash: [u8; 32],
}

/// `compress(a · decompress(pk))` with `a` the Ed25519 secret scalar of `sk`.
pub fn diffie_hellman(sk: &Keypair, pk: &[u8; 32]) -> Result<[u8; 32], HandshakeError> {
    let point = ed25519_dalek::VerifyingKey::from_bytes(pk)
        .map_err(|_| HandshakeError::InvalidPublicKey(hex::encode(pk)))?
        .to_edwards();
    Ok((sk.signing_key().to_scalar() * point).compress().to_bytes())
}

fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // HMAC accepts keys of any length.
    let mut mac = match <Hmac<Sha256> as hmac::Mac>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC takes keys of any length"),
    };
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// Noise HKDF with two outputs: `temp = HMAC(ck, ikm)`, `o1 = HMAC(temp, 0x01)`,
/// `o2 = HMAC(temp, o1 ‖ 0x02)`.
pub fn hkdf2(ck: &[u8; 32], ikm: &[u8]) -> ([u8; 32], [u8; 32]) {
    let temp = hmac_sha256(ck, &[ikm]);
    let o1 = hmac_sha256(&temp, &[&[1]]);
    let o2 = hmac_sha256(&temp, &[&o1, &[2]]);
    (o1, o2)
}

fn nonce(n: u64) -> [u8; 12] {
    let mut out = [0u8; 12];
    for (dst, src) in out.iter_mut().skip(4).zip(n.to_le_bytes()) {
        *dst = src;
    }
    out
}

/// Noise's SymmetricState with radicle's quirks.
#[derive(Clone)]
struct Symmetric {
    h: [u8; 32],
    ck: [u8; 32],
    k: [u8; 32],
    n: u64,
}

impl Symmetric {
    /// InitializeSymmetric(name), MixHash(empty prologue), MixHash(responder static).
    fn new(responder_static: &[u8; 32]) -> Self {
        let h: [u8; 32] = Sha256::digest(PROTOCOL_NAME.as_bytes()).into();
        let mut state = Self {
            h,
            ck: h,
            k: [0; 32],
            n: 0,
        };
        state.mix_hash(&[]);
        state.mix_hash(responder_static);
        state
    }

    fn mix_hash(&mut self, data: &[u8]) {
        let mut hasher = Sha256::new();
        hasher.update(self.h);
        hasher.update(data);
        self.h = hasher.finalize().into();
    }

    fn mix_key(&mut self, ikm: &[u8; 32]) {
        let (ck, k) = hkdf2(&self.ck, ikm);
        self.ck = ck;
        self.k = k;
        self.n = 0;
    }

    fn cipher(&self) -> ChaCha20Poly1305 {
        ChaCha20Poly1305::new(&self.k.into())
    }

    /// Empty plaintexts give empty ciphertexts (no tag), but still use up a nonce.
    fn encrypt_and_hash(&mut self, plaintext: &[u8]) -> Vec<u8> {
        let ciphertext = if plaintext.is_empty() {
            Vec::new()
        } else {
            let payload = Payload {
                msg: plaintext,
                aad: &self.h,
            };
            match self.cipher().encrypt(&nonce(self.n).into(), payload) {
                Ok(ciphertext) => ciphertext,
                // ChaCha20-Poly1305 encryption only fails for plaintexts over 256 GiB.
                Err(_) => unreachable!("short plaintext"),
            }
        };
        self.n = self.n.wrapping_add(1);
        self.mix_hash(&ciphertext);
        ciphertext
    }

    fn decrypt_and_hash(&mut self, ciphertext: &[u8]) -> Result<Vec<u8>, HandshakeError> {
        let plaintext = if ciphertext.is_empty() {
            Vec::new()
        } else {
            let payload = Payload {
                msg: ciphertext,
                aad: &self.h,
            };
            self.cipher()
                .decrypt(&nonce(self.n).into(), payload)
                .map_err(|_| HandshakeError::Decrypt)?
        };
        self.n = self.n.wrapping_add(1);
        self.mix_hash(ciphertext);
        Ok(plaintext)
    }
}

/// The dialer's side, before act 1.
pub struct Initiator {
    state: Symmetric,
    local: Keypair,
    ephemeral: Keypair,
    remote: NodeId,
}

/// The dialer after sending act 1, waiting for act 2.
pub struct InitiatorAwaitingAct2 {
    state: Symmetric,
    local: Keypair,
    ephemeral: Keypair,
    remote: NodeId,
}

impl Initiator {
    /// Dial `remote` as `local`, with the given ephemeral key.
    pub fn new(local: Keypair, ephemeral: Keypair, remote: NodeId) -> Self {
        Self {
            state: Symmetric::new(remote.as_bytes()),
            local,
            ephemeral,
            remote,
        }
    }

    /// Act 1 (`e, es`): the 32 bytes to send.
    pub fn act1(mut self) -> Result<(InitiatorAwaitingAct2, [u8; ACT1_LEN]), HandshakeError> {
        let e = *self.ephemeral.nid().as_bytes();
        self.state.mix_hash(&e);
        let es = diffie_hellman(&self.ephemeral, self.remote.as_bytes())?;
        self.state.mix_key(&es);
        self.state.encrypt_and_hash(&[]);
        Ok((
            InitiatorAwaitingAct2 {
                state: self.state,
                local: self.local,
                ephemeral: self.ephemeral,
                remote: self.remote,
            },
            e,
        ))
    }
}

impl InitiatorAwaitingAct2 {
    /// Reads act 2 (`e, ee`) and produces act 3 (`s, se`), the last message; the handshake is
    /// then complete for the initiator.
    pub fn act3(
        mut self,
        act2: &[u8; ACT2_LEN],
    ) -> Result<([u8; ACT3_LEN], Completed), HandshakeError> {
        self.state.mix_hash(act2);
        let ee = diffie_hellman(&self.ephemeral, act2)?;
        self.state.mix_key(&ee);
        self.state.decrypt_and_hash(&[])?;

        let ciphertext = self.state.encrypt_and_hash(self.local.nid().as_bytes());
        let se = diffie_hellman(&self.local, act2)?;
        self.state.mix_key(&se);
        self.state.encrypt_and_hash(&[]);

        let mut act3 = [0u8; ACT3_LEN];
        if ciphertext.len() != ACT3_LEN {
            unreachable!("32-byte key plus 16-byte tag");
        }
        act3.copy_from_slice(&ciphertext);
        Ok((
            act3,
            Completed {
                remote: self.remote,
                handshake_hash: self.state.h,
            },
        ))
    }
}

/// The listener's side, before act 1.
pub struct Responder {
    state: Symmetric,
    local: Keypair,
    ephemeral: Keypair,
}

/// The listener after sending act 2, waiting for act 3.
pub struct ResponderAwaitingAct3 {
    state: Symmetric,
    ephemeral: Keypair,
}

impl Responder {
    /// Accept a connection as `local`, with the given ephemeral key.
    pub fn new(local: Keypair, ephemeral: Keypair) -> Self {
        Self {
            state: Symmetric::new(local.nid().as_bytes()),
            local,
            ephemeral,
        }
    }

    /// Reads act 1 (`e, es`) and produces act 2 (`e, ee`).
    pub fn act2(
        mut self,
        act1: &[u8; ACT1_LEN],
    ) -> Result<(ResponderAwaitingAct3, [u8; ACT2_LEN]), HandshakeError> {
        self.state.mix_hash(act1);
        let es = diffie_hellman(&self.local, act1)?;
        self.state.mix_key(&es);
        self.state.decrypt_and_hash(&[])?;

        let e = *self.ephemeral.nid().as_bytes();
        self.state.mix_hash(&e);
        let ee = diffie_hellman(&self.ephemeral, act1)?;
        self.state.mix_key(&ee);
        self.state.encrypt_and_hash(&[]);
        Ok((
            ResponderAwaitingAct3 {
                state: self.state,
                ephemeral: self.ephemeral,
            },
            e,
        ))
    }
}

impl ResponderAwaitingAct3 {
    /// Reads act 3 (`s, se`): learns the initiator's node id; the handshake is complete.
    pub fn finish(mut self, act3: &[u8; ACT3_LEN]) -> Result<Completed, HandshakeError> {
        let plaintext = self.state.decrypt_and_hash(act3)?;
        let remote: [u8; 32] = plaintext
            .as_slice()
            .try_into()
            .map_err(|_| HandshakeError::Decrypt)?;
        let se = diffie_hellman(&self.ephemeral, &remote)?;
        self.state.mix_key(&se);
        self.state.decrypt_and_hash(&[])?;
        Ok(Completed {
            remote: NodeId::from_bytes(remote),
            handshake_hash: self.state.h,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    fn fixed_ephemeral() -> Keypair {
        Keypair::from_seed(FIXED_EPHEMERAL_SEED)
    }

    #[test]
    fn protocol_name_hash() {
        assert_eq!(PROTOCOL_NAME.len(), 39);
        assert_eq!(
            Sha256::digest(PROTOCOL_NAME.as_bytes()).to_vec(),
            h("aa06a99d01a52be2cfdc6686065aab699cb431b297a44df4bba6c21c8d45b954")
        );
    }

    /// noise-framework `hkdf.rs` `rfc_5869_test_vector_3`.
    #[test]
    fn hkdf_rfc5869_vector_3() {
        let (o1, o2) = hkdf2(&[0; 32], &[0x0b; 22]);
        let okm: Vec<u8> = o1.iter().chain(o2.iter()).copied().take(42).collect();
        assert_eq!(
            okm,
            h("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
        );
    }

    /// radicle-crypto `diffie_hellman_fixture` and §9.2 DH(A, B).
    #[test]
    fn diffie_hellman_vectors() {
        let a = Keypair::from_seed(
            h("5c88125870cdc9446dc582d3b38ac5717837688bd0b8b29d780b3c0d5b1ed526")
                .try_into()
                .unwrap(),
        );
        let b = Keypair::from_seed(
            h("ca98e1c9a951d910eb685bfc347151be44fa5615cae47bc18cfc3f48058924f5")
                .try_into()
                .unwrap(),
        );
        let expected = h("9f83a91b84ca2ffa70f7b0ded5dc93d8350721e8e84dfe697ded3df3d1ac5d64");
        assert_eq!(
            diffie_hellman(&a, b.nid().as_bytes()).unwrap().to_vec(),
            expected
        );
        assert_eq!(
            diffie_hellman(&b, a.nid().as_bytes()).unwrap().to_vec(),
            expected
        );

        let a = Keypair::from_seed([1; 32]);
        let b = Keypair::from_seed([2; 32]);
        let expected = h("5612509e82825296cbaaae306ffe1088cbbe200de8ba23dad06f67e607f861df");
        assert_eq!(
            diffie_hellman(&a, b.nid().as_bytes()).unwrap().to_vec(),
            expected
        );
        assert_eq!(
            diffie_hellman(&b, a.nid().as_bytes()).unwrap().to_vec(),
            expected
        );
    }

    /// §9.2: I = A (seed 32×01), R = B (seed 32×02), both with the fixed ephemeral.
    #[test]
    fn handshake_vectors() {
        let a = Keypair::from_seed([1; 32]);
        let b = Keypair::from_seed([2; 32]);
        let initiator = Initiator::new(a.clone(), fixed_ephemeral(), b.nid());
        let responder = Responder::new(b, fixed_ephemeral());

        let (initiator, act1) = initiator.act1().unwrap();
        assert_eq!(
            act1.to_vec(),
            h("1bee74bb8f513f1b5357bc477c886ad96949d04740ccd13a22f912edf00dfe27")
        );
        let (responder, act2) = responder.act2(&act1).unwrap();
        assert_eq!(act2, act1);
        let (act3, done_i) = initiator.act3(&act2).unwrap();
        assert_eq!(
            act3.to_vec(),
            h("0e63827d812ab6f1ff8e3af1f9d3c2660130ec2f548806f2f5c0c793bc2f22ca4b5d22ce096a586641dc39093f7e8642")
        );
        let done_r = responder.finish(&act3).unwrap();
        let final_h = h("914b7ee8bb8eb4489c74704fcd29aeaba837b5cf3e425bd277e50860d1906258");
        assert_eq!(done_i.handshake_hash.to_vec(), final_h);
        assert_eq!(done_r.handshake_hash.to_vec(), final_h);
        assert_eq!(done_r.remote, a.nid());
        assert_eq!(done_i.remote, Keypair::from_seed([2; 32]).nid());
    }

    #[test]
    fn random_ephemerals_interoperate() {
        let a = Keypair::generate();
        let b = Keypair::generate();
        let (initiator, act1) = Initiator::new(a.clone(), Keypair::generate(), b.nid())
            .act1()
            .unwrap();
        let (responder, act2) = Responder::new(b, Keypair::generate()).act2(&act1).unwrap();
        let (act3, done_i) = initiator.act3(&act2).unwrap();
        let done_r = responder.finish(&act3).unwrap();
        assert_eq!(done_r.remote, a.nid());
        assert_eq!(done_i.handshake_hash, done_r.handshake_hash);
    }

    #[test]
    fn wrong_responder_key_fails_act3() {
        let a = Keypair::from_seed([1; 32]);
        let b = Keypair::from_seed([2; 32]);
        let c = Keypair::from_seed([3; 32]);
        // A dials thinking the listener is C, but B answers.
        let (initiator, act1) = Initiator::new(a, fixed_ephemeral(), c.nid())
            .act1()
            .unwrap();
        let (responder, act2) = Responder::new(b, fixed_ephemeral()).act2(&act1).unwrap();
        let (act3, _) = initiator.act3(&act2).unwrap();
        assert_eq!(responder.finish(&act3), Err(HandshakeError::Decrypt));
    }

    #[test]
    fn corrupted_act3_fails() {
        let a = Keypair::from_seed([1; 32]);
        let b = Keypair::from_seed([2; 32]);
        let (initiator, act1) = Initiator::new(a, fixed_ephemeral(), b.nid())
            .act1()
            .unwrap();
        let (responder, act2) = Responder::new(b, fixed_ephemeral()).act2(&act1).unwrap();
        let (mut act3, _) = initiator.act3(&act2).unwrap();
        act3[47] ^= 1;
        assert_eq!(responder.finish(&act3), Err(HandshakeError::Decrypt));
    }

    #[test]
    fn invalid_points_are_errors() {
        // y = 2 is not on the curve.
        let mut bad = [0u8; 32];
        bad[0] = 2;
        let b = Keypair::from_seed([2; 32]);
        assert!(matches!(
            Responder::new(b.clone(), fixed_ephemeral()).act2(&bad),
            Err(HandshakeError::InvalidPublicKey(_))
        ));
        assert!(matches!(
            Initiator::new(b, fixed_ephemeral(), NodeId::from_bytes(bad)).act1(),
            Err(HandshakeError::InvalidPublicKey(_))
        ));
    }
}
