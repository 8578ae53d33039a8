//! COB changes made by hand, signed as `rad` signs them: for histories no honest `rad` would
//! write (forks, one tree reused by thousands of changes).

use seedd_proto::crypto::Keypair;

fn oid_bytes(oid: &str) -> Vec<u8> {
    (0..oid.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&oid[i..i + 2], 16).unwrap())
        .collect()
}

/// The `gpgsig` rad puts on a COB change: an SSHSIG PEM whose signature is plain Ed25519 by
/// `key` over the 20 raw bytes of the tree id.
pub fn change_signature(key: &Keypair, tree: &str) -> String {
    let sig = key.sign(&oid_bytes(tree));
    ssh_key::SshSig::new(
        ssh_key::public::KeyData::Ed25519(ssh_key::public::Ed25519PublicKey(*key.nid().as_bytes())),
        "radicle",
        ssh_key::HashAlg::Sha256,
        ssh_key::Signature::new(ssh_key::Algorithm::Ed25519, sig.to_vec()).unwrap(),
    )
    .unwrap()
    .to_pem(ssh_key::LineEnding::LF)
    .unwrap()
}

/// An identity action signature: Ed25519 over the blob id bytes, multibase base58btc.
pub fn blob_signature(key: &Keypair, blob: &str) -> String {
    format!("z{}", crate::bs58_encode(&key.sign(&oid_bytes(blob))))
}

/// A commit object's text on `tree` and `parents` with the `gpgsig` header `pem`, committed at
/// `time`, with `message`.
pub fn signed_commit(
    tree: &str,
    parents: &[String],
    pem: &str,
    time: u64,
    message: &str,
) -> String {
    let mut c = format!("tree {tree}\n");
    for p in parents {
        c.push_str(&format!("parent {p}\n"));
    }
    c.push_str(&format!(
        "author alice <alice@example.invalid> {time} +0000\ncommitter alice <alice@example.invalid> {time} +0000\n"
    ));
    let mut lines = pem.trim_end().lines();
    c.push_str(&format!("gpgsig {}\n", lines.next().unwrap()));
    for l in lines {
        c.push_str(&format!(" {l}\n"));
    }
    c.push_str(&format!("\n{message}\n"));
    c
}
