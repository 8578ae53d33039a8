//! Rename and copy detection for a tree-to-tree diff, giving the same answer
//! as `git diff -M -C` with git's defaults (read from git v2.47.3 sources and
//! tested against git 2.47.3; git >= 2.43.2 behaves the same, older git
//! ignored a file's last span when it did not end in LF).
//!
//! # What is reproduced from git
//!
//! From `diffcore-rename.c` (`diffcore_rename_extended` with
//! `detect_rename == DIFF_DETECT_COPY`, no `--find-copies-harder`, no `-B`):
//!
//! * Sources are the deleted paths and the modified paths (including type
//!   changes); destinations are the added paths. Both are taken in path order
//!   (byte-wise, which is git's tree-walk order for full paths). A modified
//!   source starts with `rename_used = 1`, so it is only ever copied from.
//!   Empty blobs take part (`diff.renameEmpty` / `rename_empty` defaults on).
//! * `find_exact_renames` / `find_identical_files`: for each destination in
//!   path order, the sources with the same object id are visited in path order
//!   (git's hashmap is filled in reverse and read LIFO); a non-regular file
//!   only matches the same mode (symlink-symlink, submodule-submodule), two
//!   regular files match whatever their executable bits; the score is
//!   `!rename_used + basename_same`, the first best wins, 2 stops the search,
//!   and only the first 100 candidates are considered. Used sources stay
//!   eligible (copy mode). Exact matches score `MAX_SCORE`.
//! * The basename-matching step of git >= 2.33 (`find_basename_matches`) is
//!   skipped by git when copies are wanted, and so it is here; sources used by
//!   exact renames are not culled in copy mode
//!   (`remove_unneeded_paths_from_src`).
//! * `too_many_rename_candidates`: if `remaining_dests * sources >
//!   rename_limit^2` (limit 1000 by default, 0 = unlimited) inexact detection
//!   is skipped altogether. (The "fall back to -C" outcome only exists for
//!   `--find-copies-harder`, which is not what `-M -C` means.)
//! * `estimate_similarity`: both sides regular files, the size pre-check
//!   `max_size * (MAX_SCORE - min_score) < delta_size * MAX_SCORE` (computed in
//!   `f64`, as git's `MAX_SCORE` is `60000.0`), then
//!   `score = src_copied * MAX_SCORE / max_size`, truncated.
//! * `diffcore-delta.c`: `hash_chars` (spans ending at LF or after 64 bytes,
//!   a CR right before an LF skipped unless the blob is binary, i.e. has a NUL
//!   in its first 8000 bytes as in `buffer_is_binary`; 32-bit wrapping
//!   accumulators; `HASHBASE` 107927; the trailing partial span is counted) and
//!   `diffcore_count_changes` (`src_copied = sum of min(src_cnt, dst_cnt)`).
//! * `record_if_better` keeping `NUM_CANDIDATE_PER_DST` (4) per destination,
//!   `score_compare` (score, then `basename_same`), the stable sort of the
//!   whole matrix, `find_renames(copies = 0)` then `find_renames(copies = 1)`,
//!   minimum score 30000 (50%).
//! * From `diff.c`, `diff_resolve_rename_copy`: walking destinations in path
//!   order, each use decrements the source's `rename_used`; a use that leaves
//!   it above zero is a copy, otherwise a rename. So for a deleted source the
//!   last use (in path order) is the rename and earlier ones are copies; every
//!   use of a modified source is a copy. A deleted source that was used at all
//!   is not reported as a deletion by git.
//!
//! The caller reports a deleted source used by any [`Found`] as no deletion
//! (its last use is the rename), and a modified source as modified.
//!
//! Not reproduced: `.gitattributes` (a `diff`/`binary` attribute changes
//! git's binary test; a tree-to-tree API has no work tree to read it from),
//! blobs of 4 GiB or more (git truncates their size to 32 bits in
//! `hash_chars`; far above any sane byte budget), `-B` break pairs, and git's
//! "duplicate destination" warning (impossible in a tree diff).
//!
//! # Bounds
//!
//! Exact detection costs O(destinations * 100) after one hash map build and
//! reads no blob. Inexact detection is all-or-nothing and decided before the
//! expensive parts:
//!
//! 1. the rename limit (as git) -> [`Cut::RenameLimit`];
//! 2. `pairs = remaining destinations * sources` must not exceed
//!    `max_work` -> [`Cut::Work`];
//! 3. from sizes alone the blobs git would read are known (a pair is read only
//!    if both sides are regular and pass the size pre-check); their total size
//!    (each distinct blob id once) must not exceed `max_bytes`, checked before
//!    anything is read -> [`Cut::Bytes`];
//! 4. after hashing, `pairs + sum over compared pairs of the two span-table
//!    lengths` (the exact cost of the merge loop) must not exceed `max_work`
//!    -> [`Cut::Work`].
//!
//! `cancelled()` is polled between blob loads and every few thousand steps
//! -> [`Cut::Cancelled`]. Whenever inexact detection is cut, its partial
//! results are dropped (they could differ from git's), exact matches are kept.
//! Memory: one sorted span table (8 bytes per distinct span hash, at most
//! 107927 entries) per distinct blob read, plus 4 candidates per destination.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::Hash;

/// git's `MAX_SCORE`: the score of an identical pair.
pub(crate) const MAX_SCORE: u32 = 60000;
/// git's `DEFAULT_RENAME_SCORE` (50%).
pub(crate) const MIN_SCORE: u32 = 30000;
/// git's `diff.renameLimit` default.
pub(crate) const DEFAULT_RENAME_LIMIT: u64 = 1000;

const MAX_SCORE_F: f64 = 60000.0;
const NUM_CANDIDATE_PER_DST: usize = 4;
const EXACT_CANDIDATES: usize = 100;
const HASHBASE: u32 = 107_927;
const FIRST_FEW_BYTES: usize = 8000;
const POLL_EVERY: u64 = 4096;

/// The kind of a tree entry, as far as rename detection cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Mode {
    /// A regular file, executable or not (`100644`, `100755`).
    File,
    /// A symbolic link (`120000`).
    Symlink,
    /// A submodule commit (`160000`).
    Submodule,
}

/// A rename/copy source: a deleted path, or a modified path (copy source only).
#[derive(Clone, Debug)]
pub(crate) struct Source<I> {
    pub(crate) path: String,
    /// Object id of the old side.
    pub(crate) id: I,
    /// Mode of the old side.
    pub(crate) mode: Mode,
    /// Blob size in bytes (ignored unless `mode` is `File`). Must be the
    /// length the loader returns; a mismatch makes the blob incomparable.
    pub(crate) size: u64,
    /// `true`: deleted. `false`: modified (it stays, so it can only be copied).
    pub(crate) deleted: bool,
}

/// A rename/copy destination: an added path.
#[derive(Clone, Debug)]
pub(crate) struct Dest<I> {
    pub(crate) path: String,
    pub(crate) id: I,
    pub(crate) mode: Mode,
    /// Blob size in bytes (ignored unless `mode` is `File`).
    pub(crate) size: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Rename,
    Copy,
}

/// `dests[dest]` is a rename or copy of `sources[source]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) dest: usize,
    pub(crate) source: usize,
    pub(crate) kind: Kind,
    /// `0..=MAX_SCORE`; `MAX_SCORE` for exact matches.
    pub(crate) score: u32,
}

#[cfg(test)]
impl Found {
    /// The percentage git prints (`R087`): `score * 100 / MAX_SCORE`, rounded down.
    #[must_use]
    pub(crate) fn similarity(&self) -> u32 {
        self.score * 100 / MAX_SCORE
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Total size of the distinct blobs inexact detection may read.
    pub(crate) max_bytes: u64,
    /// Pairwise steps: one per (destination, source) pair plus, for each pair
    /// passing the size pre-check, the lengths of both span tables.
    pub(crate) max_work: u64,
    /// git's `diff.renameLimit`; 0 means unlimited.
    pub(crate) rename_limit: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 64 << 20,
            max_work: 200_000_000,
            rename_limit: DEFAULT_RENAME_LIMIT,
        }
    }
}

/// Why inexact detection did not run to completion (exact matches are always found).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cut {
    None,
    /// Skipped as git does when `dests * sources > rename_limit^2`.
    RenameLimit,
    Bytes,
    Work,
    Cancelled,
}

/// Finds renames and copies of `sources` into `dests`, as `git diff -M -C`.
///
/// The inputs may be in any order (no path may appear twice among the
/// destinations, nor among the sources); the result is ordered as git prints
/// it, by destination path, and holds indices into `sources` and `dests`.
/// `load` returns a blob's bytes; it is called at most once per distinct id,
/// only for regular files, and only when inexact detection is not cut.
///
/// # Errors
///
/// The first error returned by `load`.
pub(crate) fn detect<I, E>(
    sources: &[Source<I>],
    dests: &[Dest<I>],
    load: &mut dyn FnMut(&I) -> Result<Vec<u8>, E>,
    limits: Limits,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Vec<Found>, Cut), E>
where
    I: Eq + Hash + Clone,
{
    if sources.is_empty() || dests.is_empty() {
        return Ok((Vec::new(), Cut::None));
    }
    // git's rename_src / rename_dst tables are in diff queue (path) order.
    let mut src_order: Vec<usize> = (0..sources.len()).collect();
    src_order.sort_by(|&a, &b| sources[a].path.as_bytes().cmp(sources[b].path.as_bytes()));
    let mut dst_order: Vec<usize> = (0..dests.len()).collect();
    dst_order.sort_by(|&a, &b| dests[a].path.as_bytes().cmp(dests[b].path.as_bytes()));
    let srcs: Vec<&Source<I>> = src_order.iter().map(|&i| &sources[i]).collect();
    let dsts: Vec<&Dest<I>> = dst_order.iter().map(|&i| &dests[i]).collect();

    let mut state = State {
        rename_used: srcs.iter().map(|s| u32::from(!s.deleted)).collect(),
        matched: vec![None; dsts.len()],
    };

    find_exact_renames(&srcs, &dsts, &mut state);

    let cut = inexact(&srcs, &dsts, &mut state, load, limits, cancelled)?;

    // diff_resolve_rename_copy, in destination path order.
    let mut found = Vec::new();
    for (d, m) in state.matched.iter().enumerate() {
        if let Some((s, score)) = *m {
            let used = &mut state.rename_used[s];
            *used = used.saturating_sub(1);
            let kind = if *used > 0 { Kind::Copy } else { Kind::Rename };
            found.push(Found {
                dest: dst_order[d],
                source: src_order[s],
                kind,
                score,
            });
        }
    }
    Ok((found, cut))
}

struct State {
    /// git's `diff_filespec.rename_used`, per source in path order.
    rename_used: Vec<u32>,
    /// Per destination in path order: (source, score).
    matched: Vec<Option<(usize, u32)>>,
}

impl State {
    fn record(&mut self, dst: usize, src: usize, score: u32) {
        self.rename_used[src] = self.rename_used[src].saturating_add(1);
        self.matched[dst] = Some((src, score));
    }
}

/// git's `basename_same`.
fn basename_same(src: &str, dst: &str) -> bool {
    let (a, b) = (src.as_bytes(), dst.as_bytes());
    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 && j > 0 {
        i -= 1;
        j -= 1;
        if a[i] != b[j] {
            return false;
        }
        if a[i] == b'/' {
            return true;
        }
    }
    (i == 0 || a[i - 1] == b'/') && (j == 0 || b[j - 1] == b'/')
}

/// git's `find_exact_renames` + `find_identical_files` in copy mode.
fn find_exact_renames<I: Eq + Hash>(srcs: &[&Source<I>], dsts: &[&Dest<I>], state: &mut State) {
    // Same id and same mode class is exactly git's eligibility test: two
    // regular files always match, otherwise the modes must be equal.
    let mut table: HashMap<(&I, Mode), Vec<usize>> = HashMap::new();
    for (i, s) in srcs.iter().enumerate() {
        table.entry((&s.id, s.mode)).or_default().push(i);
    }
    for (d, dst) in dsts.iter().enumerate() {
        let Some(candidates) = table.get(&(&dst.id, dst.mode)) else {
            continue;
        };
        let mut best: Option<usize> = None;
        let mut best_score = -1i32;
        for &s in candidates.iter().take(EXACT_CANDIDATES) {
            let score = i32::from(state.rename_used[s] == 0)
                + i32::from(basename_same(&srcs[s].path, &dst.path));
            if score > best_score {
                best = Some(s);
                best_score = score;
                if score == 2 {
                    break;
                }
            }
        }
        if let Some(s) = best {
            state.record(d, s, MAX_SCORE);
        }
    }
}

/// git's size pre-check in `estimate_similarity`: may this pair reach the
/// minimum score at all?
fn sizes_compatible(a: u64, b: u64) -> bool {
    let max_size = a.max(b);
    let delta = max_size - a.min(b);
    #[allow(clippy::cast_precision_loss)]
    let reject =
        (max_size as f64) * (MAX_SCORE_F - f64::from(MIN_SCORE)) < (delta as f64) * MAX_SCORE_F;
    !reject
}

/// git's `buffer_is_binary`.
fn is_binary(data: &[u8]) -> bool {
    data[..data.len().min(FIRST_FEW_BYTES)].contains(&0)
}

/// git's `hash_chars`: span hash -> total bytes in spans with that hash,
/// sorted by hash. Memory stays bounded by the number of distinct hashes
/// (at most `HASHBASE`), like git's table.
fn hash_chars(data: &[u8]) -> Vec<(u32, u32)> {
    const COMPACT_AT: usize = 1 << 18;
    let is_text = !is_binary(data);
    let mut spans: Vec<(u32, u32)> = Vec::new();
    let (mut accum1, mut accum2, mut n) = (0u32, 0u32, 0u32);
    let mut i = 0;
    while i < data.len() {
        let c = data[i];
        i += 1;
        if is_text && c == b'\r' && data.get(i) == Some(&b'\n') {
            continue;
        }
        let old_1 = accum1;
        accum1 = (accum1 << 7) ^ (accum2 >> 25);
        accum2 = (accum2 << 7) ^ (old_1 >> 25);
        accum1 = accum1.wrapping_add(u32::from(c));
        n += 1;
        if n < 64 && c != b'\n' {
            continue;
        }
        spans.push((accum1.wrapping_add(accum2.wrapping_mul(0x61)) % HASHBASE, n));
        if spans.len() >= COMPACT_AT {
            compact(&mut spans);
        }
        n = 0;
        accum1 = 0;
        accum2 = 0;
    }
    if n > 0 {
        spans.push((accum1.wrapping_add(accum2.wrapping_mul(0x61)) % HASHBASE, n));
    }
    compact(&mut spans);
    spans.shrink_to_fit();
    spans
}

/// Sorts by hash and merges equal hashes, adding their byte counts.
fn compact(spans: &mut Vec<(u32, u32)>) {
    spans.sort_unstable_by_key(|&(h, _)| h);
    let mut out = 0;
    for i in 0..spans.len() {
        let (h, cnt) = spans[i];
        if out > 0 && spans[out - 1].0 == h {
            spans[out - 1].1 = spans[out - 1].1.wrapping_add(cnt);
        } else {
            spans[out] = (h, cnt);
            out += 1;
        }
    }
    spans.truncate(out);
}

/// `src_copied` of git's `diffcore_count_changes`.
fn count_copied(src: &[(u32, u32)], dst: &[(u32, u32)]) -> u64 {
    let mut copied = 0u64;
    let mut d = 0;
    for &(hash, src_cnt) in src {
        while d < dst.len() && dst[d].0 < hash {
            d += 1;
        }
        if d < dst.len() && dst[d].0 == hash {
            copied += u64::from(src_cnt.min(dst[d].1));
            d += 1;
        }
    }
    copied
}

/// The score `estimate_similarity` gives two regular files whose sizes
/// passed the pre-check.
fn similarity(src: &Table, dst: &Table) -> u32 {
    if !src.usable || !dst.usable || dst.size == 0 {
        return 0;
    }
    let max_size = src.size.max(dst.size);
    let copied = count_copied(&src.spans, &dst.spans);
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let score = ((copied as f64) * MAX_SCORE_F / (max_size as f64)) as u32;
    score.min(MAX_SCORE)
}

struct Table {
    size: u64,
    usable: bool,
    spans: Vec<(u32, u32)>,
}

/// One entry of git's `struct diff_score` matrix.
#[derive(Clone, Copy)]
struct Candidate {
    src: usize,
    dst: usize,
    score: u32,
    name_score: bool,
}

/// git's `score_compare`: `Greater` means `a` sorts after `b`; unused
/// entries (`None`) sink to the bottom.
fn score_compare(a: &Option<Candidate>, b: &Option<Candidate>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(a), Some(b)) => {
            if a.score == b.score {
                b.name_score.cmp(&a.name_score)
            } else {
                b.score.cmp(&a.score)
            }
        }
    }
}

/// git's `record_if_better`.
fn record_if_better(m: &mut [Option<Candidate>], o: Candidate) {
    let mut worst = 0;
    for i in 1..m.len() {
        if score_compare(&m[i], &m[worst]) == Ordering::Greater {
            worst = i;
        }
    }
    if score_compare(&m[worst], &Some(o)) == Ordering::Greater {
        m[worst] = Some(o);
    }
}

/// The distinct blobs inexact detection will read.
struct Needs<'a, I> {
    blob_of: HashMap<&'a I, usize>,
    blobs: Vec<(&'a I, u64)>,
    bytes: u64,
}

impl<'a, I: Eq + Hash> Needs<'a, I> {
    fn add(&mut self, id: &'a I, size: u64, slot: &mut Option<usize>) {
        if slot.is_some() {
            return;
        }
        let next = self.blobs.len();
        let b = *self.blob_of.entry(id).or_insert(next);
        if b == next {
            self.blobs.push((id, size));
            self.bytes = self.bytes.saturating_add(size);
        }
        *slot = Some(b);
    }
}

/// Polls `cancelled` every `POLL_EVERY` ticks.
struct Poll<'a> {
    cancelled: &'a dyn Fn() -> bool,
    ticks: u64,
}

impl Poll<'_> {
    fn tick(&mut self, n: u64) -> bool {
        self.ticks += n;
        if self.ticks >= POLL_EVERY {
            self.ticks = 0;
            (self.cancelled)()
        } else {
            false
        }
    }
}

fn inexact<I, E>(
    srcs: &[&Source<I>],
    dsts: &[&Dest<I>],
    state: &mut State,
    load: &mut dyn FnMut(&I) -> Result<Vec<u8>, E>,
    limits: Limits,
    cancelled: &dyn Fn() -> bool,
) -> Result<Cut, E>
where
    I: Eq + Hash + Clone,
{
    let remaining: Vec<usize> = (0..dsts.len())
        .filter(|&d| state.matched[d].is_none())
        .collect();
    if remaining.is_empty() {
        return Ok(Cut::None);
    }
    // too_many_rename_candidates (copy mode culls no source).
    let pairs = (remaining.len() as u64).saturating_mul(srcs.len() as u64);
    let limit = limits.rename_limit;
    if limit > 0 && pairs > limit.saturating_mul(limit) {
        return Ok(Cut::RenameLimit);
    }
    if pairs > limits.max_work {
        return Ok(Cut::Work);
    }
    let mut poll = Poll {
        cancelled,
        ticks: 0,
    };
    if cancelled() {
        return Ok(Cut::Cancelled);
    }
    let comparable = |s: &Source<I>, d: &Dest<I>| {
        s.mode == Mode::File && d.mode == Mode::File && sizes_compatible(s.size, d.size)
    };

    // Which blobs would git read? Decided from sizes only.
    let mut src_blob: Vec<Option<usize>> = vec![None; srcs.len()];
    let mut dst_blob: Vec<Option<usize>> = vec![None; dsts.len()];
    let mut need = Needs {
        blob_of: HashMap::new(),
        blobs: Vec::new(),
        bytes: 0,
    };
    for &d in &remaining {
        for (s, src) in srcs.iter().enumerate() {
            if comparable(src, dsts[d]) {
                need.add(&src.id, src.size, &mut src_blob[s]);
                need.add(&dsts[d].id, dsts[d].size, &mut dst_blob[d]);
            }
            if poll.tick(1) {
                return Ok(Cut::Cancelled);
            }
        }
    }
    if need.bytes > limits.max_bytes {
        return Ok(Cut::Bytes);
    }
    let blobs = need.blobs;

    let mut tables: Vec<Table> = Vec::with_capacity(blobs.len());
    for &(id, size) in &blobs {
        if cancelled() {
            return Ok(Cut::Cancelled);
        }
        let data = load(id)?;
        let usable = data.len() as u64 == size;
        let spans = if usable {
            hash_chars(&data)
        } else {
            Vec::new()
        };
        tables.push(Table {
            size,
            usable,
            spans,
        });
    }

    // The exact cost of the merge loop, known before running it.
    let mut work = pairs;
    for &d in &remaining {
        for (s, src) in srcs.iter().enumerate() {
            if let (Some(a), Some(b)) = (src_blob[s], dst_blob[d]) {
                if comparable(src, dsts[d]) {
                    let cost = (tables[a].spans.len() + tables[b].spans.len()) as u64;
                    work = work.saturating_add(cost);
                }
            }
            if poll.tick(1) {
                return Ok(Cut::Cancelled);
            }
        }
    }
    if work > limits.max_work {
        return Ok(Cut::Work);
    }

    let mut mx: Vec<Option<Candidate>> =
        Vec::with_capacity(remaining.len() * NUM_CANDIDATE_PER_DST);
    for &d in &remaining {
        let mut m = [None; NUM_CANDIDATE_PER_DST];
        for (s, src) in srcs.iter().enumerate() {
            let mut score = 0;
            if let (Some(a), Some(b)) = (src_blob[s], dst_blob[d]) {
                if comparable(src, dsts[d]) {
                    score = similarity(&tables[a], &tables[b]);
                    let cost = (tables[a].spans.len() + tables[b].spans.len()) as u64;
                    if poll.tick(cost + 1) {
                        return Ok(Cut::Cancelled);
                    }
                }
            }
            let o = Candidate {
                src: s,
                dst: d,
                score,
                name_score: basename_same(&src.path, &dsts[d].path),
            };
            record_if_better(&mut m, o);
        }
        mx.extend_from_slice(&m);
    }
    // STABLE_QSORT(mx, ..., score_compare)
    mx.sort_by(score_compare);

    for copies in [false, true] {
        for c in &mx {
            let Some(c) = c else { break };
            if c.score < MIN_SCORE {
                break;
            }
            if state.matched[c.dst].is_some() {
                continue;
            }
            if !copies && state.rename_used[c.src] > 0 {
                continue;
            }
            state.record(c.dst, c.src, c.score);
        }
    }
    Ok(Cut::None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hash of a span computed by hand, following git's recurrence.
    fn span_hash(bytes: &[u8]) -> u32 {
        let (mut a1, mut a2) = (0u32, 0u32);
        for &c in bytes {
            let old = a1;
            a1 = (a1 << 7) ^ (a2 >> 25);
            a2 = (a2 << 7) ^ (old >> 25);
            a1 = a1.wrapping_add(u32::from(c));
        }
        a1.wrapping_add(a2.wrapping_mul(0x61)) % HASHBASE
    }

    #[test]
    fn single_line() {
        // 'a' = 97, then (97 << 7) + '\n' = 12426.
        assert_eq!(hash_chars(b"a\n"), vec![(12426, 2)]);
        assert_eq!(span_hash(b"a\n"), 12426);
        assert_eq!(hash_chars(b""), vec![]);
    }

    #[test]
    fn trailing_partial_span_counts() {
        assert_eq!(hash_chars(b"abc"), vec![(span_hash(b"abc"), 3)]);
        let mut want = vec![(span_hash(b"a\n"), 2), (span_hash(b"bc"), 2)];
        want.sort();
        assert_eq!(hash_chars(b"a\nbc"), want);
    }

    #[test]
    fn repeated_spans_accumulate_bytes() {
        assert_eq!(hash_chars(b"ab\nab\nab\n"), vec![(span_hash(b"ab\n"), 9)]);
    }

    #[test]
    fn crlf_ignored_for_text_only() {
        assert_eq!(hash_chars(b"a\r\nb\r\n"), hash_chars(b"a\nb\n"));
        // A lone CR is kept.
        assert_ne!(hash_chars(b"a\rb\n"), hash_chars(b"ab\n"));
        // CR at the end is kept.
        assert_eq!(hash_chars(b"a\r"), vec![(span_hash(b"a\r"), 2)]);
        // Binary (NUL in the first 8000 bytes): CR counts.
        let bin = hash_chars(b"\0\r\n");
        assert_eq!(bin, vec![(span_hash(b"\0\r\n"), 3)]);
        // A NUL after 8000 bytes does not make it binary.
        let mut late = vec![b'x'; 8000];
        late.extend_from_slice(b"\0a\r\n");
        let total: u32 = hash_chars(&late).iter().map(|e| e.1).sum();
        assert_eq!(total, 8003);
        let mut early = vec![b'x'; 7999];
        early.extend_from_slice(b"\0xa\r\n");
        assert_eq!(early.len(), late.len());
        let total: u32 = hash_chars(&early).iter().map(|e| e.1).sum();
        assert_eq!(total, 8004);
    }

    #[test]
    fn spans_cut_at_64_bytes() {
        let x64 = [b'x'; 64];
        assert_eq!(hash_chars(&x64), vec![(span_hash(&x64), 64)]);
        let x65 = [b'x'; 65];
        let mut want = vec![(span_hash(&x64), 64), (span_hash(b"x"), 1)];
        want.sort();
        assert_eq!(hash_chars(&x65), want);
        // 128 identical bytes: two identical spans.
        assert_eq!(hash_chars(&[b'x'; 128]), vec![(span_hash(&x64), 128)]);
        // High bytes exercise the wrapping accumulators.
        let ff = [0xffu8; 200];
        let t = hash_chars(&ff);
        assert_eq!(t.iter().map(|e| e.1).sum::<u32>(), 200);
        assert!(t.iter().all(|e| e.0 < HASHBASE));
    }

    #[test]
    fn compaction_keeps_counts() {
        // More spans than the compaction threshold: 300000 one-byte lines
        // of 3 kinds plus distinct lines.
        let mut data = Vec::new();
        for i in 0..300_000u32 {
            data.push(b"abc"[(i % 3) as usize]);
            data.push(b'\n');
        }
        for i in 0..1000 {
            data.extend_from_slice(format!("distinct {i}\n").as_bytes());
        }
        let t = hash_chars(&data);
        assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(
            t.iter().map(|e| u64::from(e.1)).sum::<u64>(),
            data.len() as u64
        );
        assert_eq!(
            t.iter().find(|e| e.0 == span_hash(b"a\n")).map(|e| e.1),
            Some(200_000)
        );
    }

    #[test]
    fn copied_counts() {
        let a = hash_chars(b"a\nb\n");
        let b = hash_chars(b"a\nc\n");
        assert_eq!(count_copied(&a, &b), 2);
        assert_eq!(count_copied(&a, &a), 4);
        // min(src_cnt, dst_cnt) per hash.
        let three = hash_chars(b"a\na\na\n");
        let one = hash_chars(b"a\n");
        assert_eq!(count_copied(&three, &one), 2);
        assert_eq!(count_copied(&one, &three), 2);
        assert_eq!(count_copied(&a, &[]), 0);
        // Line order does not matter.
        assert_eq!(count_copied(&a, &hash_chars(b"b\na\n")), 4);
    }

    #[test]
    fn score_and_precheck() {
        let t = |d: &[u8]| Table {
            size: d.len() as u64,
            usable: true,
            spans: hash_chars(d),
        };
        assert_eq!(similarity(&t(b"a\nb\n"), &t(b"a\nc\n")), 30000);
        assert_eq!(similarity(&t(b"a\nb\n"), &t(b"b\na\n")), MAX_SCORE);
        assert!(sizes_compatible(10, 20));
        assert!(!sizes_compatible(10, 21));
        assert!(sizes_compatible(0, 0));
        assert!(!sizes_compatible(0, 1));
    }

    #[test]
    fn basenames() {
        assert!(basename_same("a/x.c", "b/x.c"));
        assert!(basename_same("x.c", "b/x.c"));
        assert!(basename_same("x.c", "x.c"));
        assert!(!basename_same("a/yx.c", "b/x.c"));
        assert!(!basename_same("x.c", "b/yx.c"));
        assert!(!basename_same("a/x.c", "a/x.h"));
    }

    #[test]
    fn record_if_better_keeps_best_four() {
        let mut m = [None; NUM_CANDIDATE_PER_DST];
        for (src, score) in [(0, 10), (1, 50), (2, 20), (3, 40), (4, 30), (5, 5)] {
            record_if_better(
                &mut m,
                Candidate {
                    src,
                    dst: 0,
                    score,
                    name_score: false,
                },
            );
        }
        let mut kept: Vec<usize> = m.iter().flatten().map(|c| c.src).collect();
        kept.sort();
        assert_eq!(kept, vec![1, 2, 3, 4]);
        // Equal score: the same basename wins the slot.
        record_if_better(
            &mut m,
            Candidate {
                src: 6,
                dst: 0,
                score: 20,
                name_score: true,
            },
        );
        let mut kept: Vec<usize> = m.iter().flatten().map(|c| c.src).collect();
        kept.sort();
        assert_eq!(kept, vec![1, 3, 4, 6]);
    }
}

#[cfg(test)]
mod bounds;
#[cfg(test)]
mod git_diff;
#[cfg(test)]
mod support;
