//! The Noise XK responder with a fixed static key (seed 32×02) and the fixed ephemeral key,
//! fed act 1 and act 3. It must never panic.
//!
//! Input: `mode ‖ …`, missing bytes read as zero.
//! * even `mode`: `act1(32) ‖ act3(48)`, both raw.
//! * odd `mode`: `seed(32) ‖ mask(48)`: a real initiator with that static seed (and ephemeral
//!   `seed` reversed) dials the responder, and its act 3 is XORed with `mask`. With a zero
//!   mask the handshake must complete with equal hashes and the initiator's node id;
//!   otherwise act 3 must fail to decrypt.

#![no_main]

use libfuzzer_sys::fuzz_target;
use seedd_fuzz::responder_keys;
use seedd_proto::crypto::Keypair;
use seedd_proto::wire::handshake::{HandshakeError, Initiator, Responder, ACT1_LEN, ACT3_LEN};

fn take<const N: usize>(input: &mut &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let n = input.len().min(N);
    out[..n].copy_from_slice(&input[..n]);
    *input = &input[n..];
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let (local, ephemeral) = responder_keys();
    let responder_nid = local.nid();
    let responder = Responder::new(local, ephemeral);

    if mode % 2 == 0 {
        let act1: [u8; ACT1_LEN] = take(&mut rest);
        let act3: [u8; ACT3_LEN] = take(&mut rest);
        if let Ok((awaiting, _act2)) = responder.act2(&act1) {
            let _ = awaiting.finish(&act3);
        }
        return;
    }

    let seed: [u8; 32] = take(&mut rest);
    let mask: [u8; ACT3_LEN] = take(&mut rest);
    let mut eph_seed = seed;
    eph_seed.reverse();
    let initiator_key = Keypair::from_seed(seed);
    let initiator = Initiator::new(
        initiator_key.clone(),
        Keypair::from_seed(eph_seed),
        responder_nid,
    );
    let (initiator, act1) = initiator.act1().expect("act 1 to a valid key");
    let (awaiting, act2) = responder.act2(&act1).expect("act 2 of a real act 1");
    let (mut act3, done_i) = initiator.act3(&act2).expect("act 3 of a real act 2");
    for (byte, m) in act3.iter_mut().zip(mask) {
        *byte ^= m;
    }
    let result = awaiting.finish(&act3);
    if mask == [0; ACT3_LEN] {
        let done_r = result.expect("honest handshake completes");
        assert_eq!(done_r.remote, initiator_key.nid());
        assert_eq!(done_r.handshake_hash, done_i.handshake_hash);
    } else {
        assert_eq!(result, Err(HandshakeError::Decrypt));
    }
});
