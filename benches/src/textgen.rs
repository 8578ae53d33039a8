//! Deterministic text for generated repositories: a seeded generator, a vocabulary, lines of
//! words, whole files and delta-friendly edits (the clone and anchors benches' datasets).

use std::path::Path;

/// Deterministic xorshift64* generator.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// `n` random lowercase words of 2–9 letters.
pub fn vocabulary(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let len = 2 + rng.below(8);
            (0..len).map(|_| b'a' + rng.below(26) as u8).collect()
        })
        .collect()
}

fn line(rng: &mut Rng, vocab: &[Vec<u8>], out: &mut Vec<u8>) {
    let words = 6 + rng.below(9);
    for i in 0..words {
        if i > 0 {
            out.push(b' ');
        }
        out.extend_from_slice(&vocab[rng.below(vocab.len())]);
    }
    out.push(b'\n');
}

pub fn text(rng: &mut Rng, vocab: &[Vec<u8>], bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 128);
    while out.len() < bytes {
        line(rng, vocab, &mut out);
    }
    out
}

/// Replace a few lines and insert a few more (a delta-friendly change).
pub fn edit(rng: &mut Rng, vocab: &[Vec<u8>], file: &Path) {
    let old = std::fs::read(file).unwrap();
    let mut lines: Vec<Vec<u8>> = old
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    for _ in 0..3 {
        let mut l = Vec::new();
        line(rng, vocab, &mut l);
        let i = rng.below(lines.len().max(1));
        if i < lines.len() {
            lines[i] = l;
        }
    }
    for _ in 0..2 {
        let mut l = Vec::new();
        line(rng, vocab, &mut l);
        let i = rng.below(lines.len() + 1);
        lines.insert(i, l);
    }
    std::fs::write(file, lines.concat()).unwrap();
}
