//! Deterministic text for generated repositories: a seeded generator, a vocabulary, lines of
//! words, whole files and delta-friendly edits (the clone and anchors benches' datasets).

use std::path::{Path, PathBuf};

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
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Zipf(1) over `n` ranks (rank `k` drawn with weight `1/(k+1)`): the cumulative weights.
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize) -> Self {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=n.max(1))
            .map(|k| {
                acc += 1.0 / k as f64;
                acc
            })
            .collect();
        let total = acc;
        for c in &mut cdf {
            *c /= total;
        }
        Zipf { cdf }
    }

    /// A rank in `0..n`, the first most often.
    pub fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
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

/// The "medium" history: `commits` commits over `files` text files (8–24 KiB at first), each
/// commit rewriting `rewrites` files whole (24–40 KiB) and editing `edits`; the last
/// `tag_last` commits are tagged `v1`…`v<tag_last>`. Deterministic.
pub struct Medium {
    pub commits: usize,
    pub files: usize,
    pub rewrites: usize,
    pub edits: usize,
    pub tag_last: usize,
}

/// Write and commit [`Medium`] in the work tree `work` (`g` runs git there).
pub fn populate_medium(work: &Path, g: &dyn Fn(&[&str]) -> String, m: &Medium) {
    let mut rng = Rng::new(0x5eed_d0d0_cafe_f00d);
    let vocab = vocabulary(&mut rng, 4096);
    let files: Vec<PathBuf> = (0..m.files)
        .map(|i| work.join(format!("src/m{:02}/f{i:03}.txt", i % 24)))
        .collect();
    for f in &files {
        std::fs::create_dir_all(f.parent().unwrap_or(work)).unwrap();
        let size = 8 * 1024 + rng.below(16 * 1024);
        std::fs::write(f, text(&mut rng, &vocab, size)).unwrap();
    }
    g(&["add", "-A"]);
    g(&["commit", "-q", "-m", "initial import"]);
    for c in 1..m.commits {
        for _ in 0..m.rewrites {
            let f = &files[rng.below(files.len())];
            let size = 24 * 1024 + rng.below(16 * 1024);
            std::fs::write(f, text(&mut rng, &vocab, size)).unwrap();
        }
        for _ in 0..m.edits {
            let f = &files[rng.below(files.len())];
            edit(&mut rng, &vocab, f);
        }
        g(&["add", "-A"]);
        g(&["commit", "-q", "-m", &format!("change {c}")]);
        if c + m.tag_last >= m.commits {
            g(&["tag", &format!("v{}", c + m.tag_last + 1 - m.commits)]);
        }
    }
}
