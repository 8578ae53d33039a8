//! Writes the seed corpus of every fuzz target: `seed_corpus <dir>` creates
//! `<dir>/<target>/seed-*` files (valid encodings; existing files are overwritten).

use std::path::Path;
use std::{env, fs, io};

use seedd_fuzz::{responder_keys, sample_frames, sample_messages};
use seedd_proto::crypto::Keypair;
use seedd_proto::wire::handshake::{Initiator, FIXED_EPHEMERAL_SEED};

fn write(dir: &Path, target: &str, name: &str, bytes: &[u8]) -> io::Result<()> {
    let dir = dir.join(target);
    fs::create_dir_all(&dir)?;
    fs::write(dir.join(format!("seed-{name}")), bytes)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = env::args().nth(1).ok_or("usage: seed_corpus <dir>")?;
    let dir = Path::new(&dir);

    for (i, message) in sample_messages().iter().enumerate() {
        write(dir, "messages", &format!("msg{i}"), &message.encode()?)?;
    }

    let frames = sample_frames();
    let mut all = Vec::new();
    for (i, frame) in frames.iter().enumerate() {
        let bytes = frame.encode()?;
        // Chunk byte 0: whole-ish (1..=7 cycling); 64: 64-byte chunks.
        write(
            dir,
            "frames",
            &format!("frame{i}"),
            &[&[0], &bytes[..]].concat(),
        )?;
        all.extend_from_slice(&bytes);
    }
    write(dir, "frames", "all-chunk64", &[&[64], &all[..]].concat())?;
    write(dir, "frames", "all-chunk3", &[&[3], &all[..]].concat())?;

    // Mode 0: a real act 1 and act 3 against the responder's fixed keys (completes).
    let (responder, _) = responder_keys();
    let (initiator, act1) = Initiator::new(
        Keypair::from_seed([1; 32]),
        Keypair::from_seed(FIXED_EPHEMERAL_SEED),
        responder.nid(),
    )
    .act1()?;
    // The responder's ephemeral is the fixed one, so act 2 is its public key.
    let act2 = *Keypair::from_seed(FIXED_EPHEMERAL_SEED).nid().as_bytes();
    let (act3, _) = initiator.act3(&act2)?;
    write(
        dir,
        "handshake_responder",
        "raw-valid",
        &[&[0], &act1[..], &act3[..]].concat(),
    )?;
    // Mode 1: an honest initiator with seed 32×01 and a zero mask.
    write(
        dir,
        "handshake_responder",
        "honest",
        &[&[1], &[1; 32][..], &[0; 48][..]].concat(),
    )?;
    Ok(())
}
