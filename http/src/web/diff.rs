//! Diffs in the explorer's shape (http-api.md §1.4 `Diff`): a recursive tree comparison,
//! renames and copies found as `git diff -M -C` finds them ([`renames`], issue 27 §1, bounded
//! by [`MAX_RENAME_BYTES`] and [`MAX_RENAME_WORK`]), and a Myers line diff with 3 lines of
//! context.
//!
//! One answer costs bounded memory whatever the change (issue 25 §1). Hard limits answer 413:
//! [`MAX_FILES`] files, [`MAX_DIFF_BYTES`] of blob content read, trees over
//! [`super::objects::MAX_TREE_OBJECT`]. Soft limits truncate, as GitHub and radicle-httpd do
//! for huge diffs: a [`Budget`] of rendered hunk lines ([`MAX_RENDERED_LINES`]), their bytes
//! ([`MAX_RENDERED_BYTES`]) and hunks ([`MAX_HUNKS`]) for the whole answer, checked before a
//! file's hunks are built; a file past it, or with more than [`MAX_LINES`] lines (counted
//! before any line is split out), is answered with its stats and no hunks, marked
//! `"truncated": true` (a key the explorer's schema ignores). Blob contents in `files` are
//! embedded up to [`MAX_EMBEDDED_BLOB`] each and [`MAX_EMBEDDED_BYTES`] in all; bigger ones are
//! left out of the map. Cuts are counted in `seedd_web_bounded_total`.

pub(super) mod renames;

use std::collections::BTreeMap;

use gix::ObjectId;
use seedd_web_api::{
    BlobContent, Diff, DiffContent, DiffFile, DiffStats, FileDiff, FileStats, Hunk, Line,
    LineRange, Relocation,
};

use super::WebError;
use seedd_core::blocking::Cancel;

/// Lines of context around changes (git's default).
const CONTEXT: usize = 3;
/// Files in one diff.
pub(super) const MAX_FILES: usize = 1_000;
/// Bytes of blob content read for one diff (both sides of every file).
pub(super) const MAX_DIFF_BYTES: u64 = 32 << 20;
/// Edit distance a line diff may reach; past it the file is shown as all lines replaced.
const MAX_EDITS: usize = 1_500;
/// Lines (both sides) past which a file is not diffed line by line: it is answered with its
/// stats and no hunks, `truncated`. Counted before the file is split into lines.
pub(super) const MAX_LINES: usize = 200_000;
/// Hunk lines one answer renders at most (all files together); later files are truncated.
pub(super) const MAX_RENDERED_LINES: usize = 20_000;
/// Bytes of line text one answer renders at most (all files together).
pub(super) const MAX_RENDERED_BYTES: usize = 4 << 20;
/// Hunks one answer renders at most (all files together).
pub(super) const MAX_HUNKS: usize = 2_000;
/// A blob larger than this is left out of an answer's `files` map.
pub(super) const MAX_EMBEDDED_BLOB: u64 = 1 << 20;
/// Bytes of blob content one answer's `files` map holds at most; later blobs are left out.
pub(super) const MAX_EMBEDDED_BYTES: u64 = 8 << 20;

/// What one diff answer may still render, and what it cut.
#[derive(Debug, Clone)]
pub(super) struct Budget {
    lines: usize,
    bytes: usize,
    hunks: usize,
    embedded: u64,
    read: u64,
    /// Files answered without hunks (`truncated`).
    pub truncated: u64,
    /// Blobs left out of `files`.
    pub omitted: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            lines: MAX_RENDERED_LINES,
            bytes: MAX_RENDERED_BYTES,
            hunks: MAX_HUNKS,
            embedded: MAX_EMBEDDED_BYTES,
            read: MAX_DIFF_BYTES,
            truncated: 0,
            omitted: 0,
        }
    }
}

impl Budget {
    /// Take `lines`, `bytes` and `hunks` if all fit.
    fn take(&mut self, lines: usize, bytes: usize, hunks: usize) -> bool {
        if lines > self.lines || bytes > self.bytes || hunks > self.hunks {
            return false;
        }
        self.lines -= lines;
        self.bytes -= bytes;
        self.hunks -= hunks;
        true
    }

    /// Whether a blob of `size` bytes may go in `files` (and take its room).
    fn embed(&mut self, size: u64) -> bool {
        if size > MAX_EMBEDDED_BLOB || size > self.embedded {
            self.omitted += 1;
            return false;
        }
        self.embedded -= size;
        true
    }
}

/// Whether `render` builds the whole answer or only its stats (`/diff/…/stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Render {
    Full,
    Stats,
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change {
    pub path: String,
    pub old: Option<(ObjectId, gix::objs::tree::EntryMode)>,
    pub new: Option<(ObjectId, gix::objs::tree::EntryMode)>,
    /// Moved or copied from this path (`old` is that path's blob) ([`find_renames`]).
    pub from: Option<(String, Relation)>,
}

/// How a changed path relates to the path it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Relation {
    Moved,
    Copied,
}

/// Blob bytes rename detection may read for one diff (each distinct blob once).
pub(super) const MAX_RENAME_BYTES: u64 = 32 << 20;
/// Similarity work rename detection may do for one diff (pairs compared plus the lengths of
/// both span tables of each pair compared: about 50 ms of CPU).
pub(super) const MAX_RENAME_WORK: u64 = 50_000_000;

/// `changes` with renames and copies found as `git diff -M -C` finds them ([`renames`]): an
/// added path that came from a deleted or modified one becomes one change from it; a deleted
/// path that was moved or copied is no longer listed as deleted. Past [`MAX_RENAME_BYTES`],
/// [`MAX_RENAME_WORK`] or git's rename limit only identical files are paired; the second
/// value then says so (counted in `seedd_web_bounded_total{bound="renames"}`).
pub(super) fn find_renames(
    repo: &gix::Repository,
    changes: Vec<Change>,
    cancel: &Cancel,
) -> Result<(Vec<Change>, bool), WebError> {
    use renames::{Cut, Dest, Kind, Limits, Mode, Source};
    let kind = |m: gix::objs::tree::EntryMode| {
        use gix::objs::tree::EntryKind;
        match m.kind() {
            EntryKind::Blob | EntryKind::BlobExecutable => Some(Mode::File),
            EntryKind::Link => Some(Mode::Symlink),
            EntryKind::Commit => Some(Mode::Submodule),
            EntryKind::Tree => None,
        }
    };
    let size = |id: ObjectId, m: Mode| -> Result<u64, WebError> {
        if m == Mode::Submodule {
            return Ok(0);
        }
        Ok(repo.find_header(id).map_err(WebError::git)?.size())
    };
    let (mut sources, mut dests) = (Vec::new(), Vec::new());
    let (mut source_of, mut dest_of) = (Vec::new(), Vec::new());
    for (i, c) in changes.iter().enumerate() {
        match (c.old, c.new) {
            (None, Some((id, m))) => {
                let Some(mode) = kind(m) else { continue };
                dests.push(Dest {
                    path: c.path.clone(),
                    id,
                    mode,
                    size: size(id, mode)?,
                });
                dest_of.push(i);
            }
            (Some((id, m)), new) => {
                let Some(mode) = kind(m) else { continue };
                sources.push(Source {
                    path: c.path.clone(),
                    id,
                    mode,
                    size: size(id, mode)?,
                    deleted: new.is_none(),
                });
                source_of.push(i);
            }
            (None, None) => {}
        }
    }
    if sources.is_empty() || dests.is_empty() {
        return Ok((changes, false));
    }
    let mut load = |id: &ObjectId| -> Result<Vec<u8>, WebError> {
        Ok(repo.find_object(*id).map_err(WebError::git)?.detach().data)
    };
    let limits = Limits {
        max_bytes: MAX_RENAME_BYTES,
        max_work: MAX_RENAME_WORK,
        ..Limits::default()
    };
    let (found, cut) = renames::detect(&sources, &dests, &mut load, limits, &|| {
        cancel.is_cancelled()
    })?;
    if cut == Cut::Cancelled {
        cancel.check().map_err(super::cancelled)?;
    }
    let mut out: Vec<Option<Change>> = changes.into_iter().map(Some).collect();
    for f in &found {
        let (s, d) = (&sources[f.source], source_of[f.source]);
        let old = out[d].as_ref().and_then(|c| c.old);
        let relation = match f.kind {
            Kind::Rename => Relation::Moved,
            Kind::Copy => Relation::Copied,
        };
        if let Some(c) = out[dest_of[f.dest]].as_mut() {
            c.old = old;
            c.from = Some((s.path.clone(), relation));
        }
    }
    // A deleted source that was moved or copied is not a deletion any more.
    for f in &found {
        if sources[f.source].deleted {
            out[source_of[f.source]] = None;
        }
    }
    let cut = !matches!(cut, Cut::None);
    Ok((out.into_iter().flatten().collect(), cut))
}

/// `mode` of a `DiffFile`.
fn mode(m: gix::objs::tree::EntryMode) -> &'static str {
    use gix::objs::tree::EntryKind;
    match m.kind() {
        EntryKind::Tree => "tree",
        EntryKind::Blob => "blob",
        EntryKind::BlobExecutable => "blobExecutable",
        EntryKind::Link => "link",
        EntryKind::Commit => "commit",
    }
}

type Entries = BTreeMap<Vec<u8>, (ObjectId, gix::objs::tree::EntryMode)>;

fn entries(repo: &gix::Repository, tree: Option<ObjectId>) -> Result<Entries, WebError> {
    let mut out = BTreeMap::new();
    let Some(tree) = tree else { return Ok(out) };
    // Sized by its header before it is inflated.
    super::objects::check_tree_size(repo, tree)?;
    let t = repo.find_tree(tree).map_err(WebError::git)?;
    for e in t.decode().map_err(WebError::git)?.entries {
        out.insert(e.filename.to_vec(), (e.oid.to_owned(), e.mode));
    }
    Ok(out)
}

/// The paths that differ between two trees (`None`: the empty tree), sorted by path.
pub(super) fn tree_changes(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    cancel: &Cancel,
) -> Result<Vec<Change>, WebError> {
    let mut out = Vec::new();
    walk(repo, old, new, "", &mut out, cancel)?;
    Ok(out)
}

fn walk(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    prefix: &str,
    out: &mut Vec<Change>,
    cancel: &Cancel,
) -> Result<(), WebError> {
    if old == new {
        return Ok(());
    }
    cancel.check().map_err(super::cancelled)?;
    let (a, b) = (entries(repo, old)?, entries(repo, new)?);
    let names: std::collections::BTreeSet<&Vec<u8>> = a.keys().chain(b.keys()).collect();
    for name in names {
        let path = format!("{prefix}{}", String::from_utf8_lossy(name));
        let (o, n) = (a.get(name).copied(), b.get(name).copied());
        if o == n {
            continue;
        }
        let tree = |x: Option<(ObjectId, gix::objs::tree::EntryMode)>| {
            x.filter(|(_, m)| m.is_tree()).map(|(id, _)| id)
        };
        let blob =
            |x: Option<(ObjectId, gix::objs::tree::EntryMode)>| x.filter(|(_, m)| !m.is_tree());
        if tree(o).is_some() || tree(n).is_some() {
            walk(repo, tree(o), tree(n), &format!("{path}/"), out, cancel)?;
        }
        let (bo, bn) = (blob(o), blob(n));
        if bo.is_some() || bn.is_some() {
            if out.len() >= MAX_FILES {
                return Err(WebError::TooLarge {
                    what: "diff (files)",
                    limit: MAX_FILES as u64,
                });
            }
            out.push(Change {
                path,
                old: bo,
                new: bn,
                from: None,
            });
        }
    }
    Ok(())
}

/// A blob's bytes for diffing (`None`: no blob on that side; submodules have none).
fn blob(
    repo: &gix::Repository,
    side: Option<(ObjectId, gix::objs::tree::EntryMode)>,
    budget: &mut Budget,
) -> Result<Option<Vec<u8>>, WebError> {
    let Some((id, m)) = side else { return Ok(None) };
    if m.is_commit() {
        return Ok(Some(format!("Subproject commit {id}\n").into_bytes()));
    }
    let size = repo.find_header(id).map_err(WebError::git)?.size();
    budget.read = budget.read.checked_sub(size).ok_or(WebError::TooLarge {
        what: "diff",
        limit: MAX_DIFF_BYTES,
    })?;
    Ok(Some(
        repo.find_object(id).map_err(WebError::git)?.detach().data,
    ))
}

/// `{diff: {files, stats}, files: {oid: {id, binary, content}}}` of a list of changes, within
/// `budget` (with [`Render::Stats`], only `diff.stats` is filled).
pub(super) fn render(
    repo: &gix::Repository,
    changes: &[Change],
    how: Render,
    budget: &mut Budget,
    cancel: &Cancel,
) -> Result<(Diff, BTreeMap<String, BlobContent>), WebError> {
    let mut files = Vec::new();
    let mut blobs = BTreeMap::new();
    let (mut insertions, mut deletions) = (0usize, 0usize);
    let mut changed = 0usize;
    for c in changes {
        cancel.check().map_err(super::cancelled)?;
        let old = blob(repo, c.old, budget)?;
        let new = blob(repo, c.new, budget)?;
        if how == Render::Full {
            for (side, bytes) in [(c.old, &old), (c.new, &new)] {
                // A submodule's "Subproject commit" text is diffed but is no blob (httpd lists
                // none).
                if let (Some((id, m)), Some(b)) = (side, bytes) {
                    if !m.is_commit()
                        && !blobs.contains_key(&id.to_string())
                        && budget.embed(b.len() as u64)
                    {
                        blobs.insert(id.to_string(), super::objects::blob_content(id, b));
                    }
                }
            }
        }
        if c.old.is_none() && c.new.is_none() {
            continue;
        }
        changed += 1;
        let content = content(old.as_deref(), new.as_deref(), how, budget);
        if let Some((a, d)) = content.1 {
            insertions += a;
            deletions += d;
        }
        if how == Render::Stats {
            continue;
        }
        let file = |s: Option<(ObjectId, gix::objs::tree::EntryMode)>| {
            s.map(|(id, m)| DiffFile {
                oid: id.to_string(),
                mode: mode(m).to_owned(),
            })
        };
        if let (Some((from, relation)), Some(old), Some(new)) = (&c.from, file(c.old), file(c.new))
        {
            // httpd's two shapes: the same blob and mode → `current` only; else both sides and
            // their diff.
            let (current, old, new, diff) = if old == new {
                (Some(new), None, None, None)
            } else {
                let Some(diff) = content.0 else { continue };
                (None, Some(old), Some(new), Some(diff))
            };
            let moved = Relocation {
                old_path: from.clone(),
                new_path: c.path.clone(),
                current,
                old,
                new,
                diff,
            };
            files.push(match relation {
                Relation::Moved => FileDiff::Moved(moved),
                Relation::Copied => FileDiff::Copied(moved),
            });
            continue;
        }
        let Some(diff) = content.0 else { continue };
        let path = c.path.clone();
        let entry = match (file(c.old), file(c.new)) {
            (None, Some(new)) => FileDiff::Added { path, diff, new },
            (Some(old), None) => FileDiff::Deleted { path, diff, old },
            (Some(old), Some(new)) => FileDiff::Modified {
                path,
                diff,
                old,
                new,
            },
            (None, None) => continue,
        };
        files.push(entry);
    }
    let stats = DiffStats {
        files_changed: changed,
        insertions,
        deletions,
    };
    Ok((Diff { files, stats }, blobs))
}

fn is_binary(b: &[u8]) -> bool {
    b.iter().take(8000).any(|&c| c == 0) || std::str::from_utf8(b).is_err()
}

/// Lines of `b` as [`lines`] would split them, counted without splitting.
pub(super) fn count_lines(b: &[u8]) -> usize {
    let newlines = b.iter().filter(|&&c| c == b'\n').count();
    newlines + usize::from(!b.is_empty() && !b.ends_with(b"\n"))
}

/// `(additions, deletions)` of a file too big to diff line by line: the lines between the
/// common first and last lines count as replaced (found without splitting into a `Vec`).
fn coarse_stats(a: &[u8], b: &[u8], na: usize, nb: usize) -> (usize, usize) {
    let la = a.split_inclusive(|&c| c == b'\n');
    let lb = b.split_inclusive(|&c| c == b'\n');
    let prefix = la
        .clone()
        .zip(lb.clone())
        .take_while(|(x, y)| x == y)
        .count();
    let rest = na.min(nb) - prefix;
    let suffix = la
        .rev()
        .zip(lb.rev())
        .take(rest)
        .take_while(|(x, y)| x == y)
        .count();
    (nb - prefix - suffix, na - prefix - suffix)
}

/// `DiffContent` and `(additions, deletions)` for text, within `budget`.
fn content(
    old: Option<&[u8]>,
    new: Option<&[u8]>,
    how: Render,
    budget: &mut Budget,
) -> (Option<DiffContent>, Option<(usize, usize)>) {
    let (a, b) = (old.unwrap_or_default(), new.unwrap_or_default());
    if is_binary(a) || is_binary(b) {
        return (Some(DiffContent::Binary), None);
    }
    let missing = |x: &[u8]| !x.is_empty() && !x.ends_with(b"\n");
    let eof = match (missing(a), missing(b)) {
        (false, false) => "noneMissing",
        (true, false) => "oldMissing",
        (false, true) => "newMissing",
        (true, true) => "bothMissing",
    };
    let truncated = |budget: &mut Budget, additions: usize, deletions: usize| {
        budget.truncated += 1;
        Some(DiffContent::Plain {
            hunks: Vec::new(),
            stats: FileStats {
                additions,
                deletions,
            },
            eof: eof.to_owned(),
            truncated: Some(true),
        })
    };
    // Counted first: a file of millions of lines is never split into them.
    let (na, nb) = (count_lines(a), count_lines(b));
    if na.saturating_add(nb) > MAX_LINES {
        let (additions, deletions) = coarse_stats(a, b, na, nb);
        let v = match how {
            Render::Full => truncated(budget, additions, deletions),
            Render::Stats => None,
        };
        return (v, Some((additions, deletions)));
    }
    let (a_lines, b_lines) = (lines(a), lines(b));
    let ops = match edit_script(&a_lines, &b_lines) {
        Some(ops) => ops,
        None => {
            // Too different to diff line by line within the budget: everything replaced.
            let mut ops: Vec<Op> = (0..a_lines.len()).map(Op::Del).collect();
            ops.extend((0..b_lines.len()).map(Op::Ins));
            ops
        }
    };
    let additions = ops.iter().filter(|o| matches!(o, Op::Ins(_))).count();
    let deletions = ops.iter().filter(|o| matches!(o, Op::Del(_))).count();
    if how == Render::Stats {
        return (None, Some((additions, deletions)));
    }
    // What the hunks would hold, checked against the budget before any is built.
    let ranges = hunk_ranges(&ops);
    let rendered: usize = ranges.iter().map(|(s, e)| e - s).sum();
    let bytes: usize = ranges
        .iter()
        .flat_map(|&(s, e)| &ops[s..e])
        .map(|o| match *o {
            Op::Eq(i, _) | Op::Del(i) => a_lines[i].len(),
            Op::Ins(j) => b_lines[j].len(),
        })
        .sum();
    if !budget.take(rendered, bytes, ranges.len()) {
        return (
            truncated(budget, additions, deletions),
            Some((additions, deletions)),
        );
    }
    let hunks = hunks(&ops, &ranges, &a_lines, &b_lines);
    (
        Some(DiffContent::Plain {
            hunks,
            stats: FileStats {
                additions,
                deletions,
            },
            eof: eof.to_owned(),
            truncated: None,
        }),
        Some((additions, deletions)),
    )
}

/// Lines with their terminators (the explorer shows them as given).
pub(super) fn lines(b: &[u8]) -> Vec<&[u8]> {
    b.split_inclusive(|&c| c == b'\n').collect()
}

/// One step of an edit script: indexes into the old / new lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Eq(usize, usize),
    Del(usize),
    Ins(usize),
}

/// Myers' shortest edit script, or `None` past [`MAX_EDITS`].
pub(super) fn edit_script(a: &[&[u8]], b: &[&[u8]]) -> Option<Vec<Op>> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (am, bm) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let (n, m) = (am.len() as isize, bm.len() as isize);
    let max = (n + m) as usize;
    if max > MAX_LINES {
        return None;
    }
    if am.is_empty() || bm.is_empty() {
        // Pure insertion or deletion: no search needed.
        let mut ops: Vec<Op> = (0..prefix).map(|i| Op::Eq(i, i)).collect();
        ops.extend((prefix..a.len() - suffix).map(Op::Del));
        ops.extend((prefix..b.len() - suffix).map(Op::Ins));
        ops.extend((0..suffix).map(|s| Op::Eq(a.len() - suffix + s, b.len() - suffix + s)));
        return Some(ops);
    }
    let offset = max as isize + 1;
    let mut v = vec![0isize; 2 * max + 3];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let mut found = None;
    for d in 0..=max.min(MAX_EDITS) as isize {
        // Only the diagonals -d..=d can be read when backtracking from step d.
        trace.push(v[(offset - d) as usize..=(offset + d) as usize].to_vec());
        let mut k = -d;
        while k <= d {
            let i = (k + offset) as usize;
            let mut x = if k == -d || (k != d && v[i - 1] < v[i + 1]) {
                v[i + 1]
            } else {
                v[i - 1] + 1
            };
            let mut y = x - k;
            while x < n && y < m && am[x as usize] == bm[y as usize] {
                x += 1;
                y += 1;
            }
            v[i] = x;
            if x >= n && y >= m {
                found = Some(d);
                break;
            }
            k += 2;
        }
        if found.is_some() {
            break;
        }
    }
    let d_end = found?;
    // Backtrack through the saved frontiers.
    let mut middle = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (1..=d_end).rev() {
        let frontier = &trace[d as usize];
        let at = |k: isize| frontier[(k + d) as usize];
        let k = x - y;
        let prev_k = if k == -d || (k != d && at(k - 1) < at(k + 1)) {
            k + 1
        } else {
            k - 1
        };
        let prev_x = at(prev_k);
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            x -= 1;
            y -= 1;
            middle.push(Op::Eq(x as usize, y as usize));
        }
        if x == prev_x {
            y -= 1;
            middle.push(Op::Ins(y as usize));
        } else {
            x -= 1;
            middle.push(Op::Del(x as usize));
        }
    }
    while x > 0 && y > 0 {
        x -= 1;
        y -= 1;
        middle.push(Op::Eq(x as usize, y as usize));
    }
    middle.reverse();
    let mut ops: Vec<Op> = (0..prefix).map(|i| Op::Eq(i, i)).collect();
    ops.extend(middle.into_iter().map(|o| match o {
        Op::Eq(i, j) => Op::Eq(i + prefix, j + prefix),
        Op::Del(i) => Op::Del(i + prefix),
        Op::Ins(j) => Op::Ins(j + prefix),
    }));
    ops.extend((0..suffix).map(|s| Op::Eq(a.len() - suffix + s, b.len() - suffix + s)));
    Some(ops)
}

/// The op ranges of the hunks of an edit script, with [`CONTEXT`] lines around changes.
fn hunk_ranges(ops: &[Op]) -> Vec<(usize, usize)> {
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| !matches!(o, Op::Eq(..)))
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    let mut idx = 0;
    while idx < changed.len() {
        let start = changed[idx].saturating_sub(CONTEXT);
        let mut end = changed[idx] + 1;
        while idx + 1 < changed.len() && changed[idx + 1] <= end + 2 * CONTEXT {
            idx += 1;
            end = changed[idx] + 1;
        }
        idx += 1;
        out.push((start, (end + CONTEXT).min(ops.len())));
    }
    out
}

/// The hunks of `ranges` (ascending), positions found in one pass over the ops.
fn hunks(ops: &[Op], ranges: &[(usize, usize)], a: &[&[u8]], b: &[&[u8]]) -> Vec<Hunk> {
    let (mut at, mut pos) = (0usize, (0usize, 0usize));
    let mut out = Vec::with_capacity(ranges.len());
    for &(start, end) in ranges {
        for o in &ops[at..start] {
            pos = step(pos, o);
        }
        at = start;
        out.push(hunk(&ops[start..end], pos, a, b));
    }
    out
}

/// The old/new position after `o`.
fn step((x, y): (usize, usize), o: &Op) -> (usize, usize) {
    match o {
        Op::Eq(..) => (x + 1, y + 1),
        Op::Del(_) => (x + 1, y),
        Op::Ins(_) => (x, y + 1),
    }
}

fn text(l: &[u8]) -> String {
    String::from_utf8_lossy(l).into_owned()
}

fn hunk(slice: &[Op], (os, ns): (usize, usize), a: &[&[u8]], b: &[&[u8]]) -> Hunk {
    let old_len = slice.iter().filter(|o| !matches!(o, Op::Ins(_))).count();
    let new_len = slice.iter().filter(|o| !matches!(o, Op::Del(_))).count();
    let lines: Vec<Line> = slice
        .iter()
        .map(|o| match *o {
            Op::Eq(i, j) => Line::Context {
                line: text(a[i]),
                line_no_old: i + 1,
                line_no_new: j + 1,
            },
            Op::Del(i) => Line::Deletion {
                line: text(a[i]),
                line_no: i + 1,
            },
            Op::Ins(j) => Line::Addition {
                line: text(b[j]),
                line_no: j + 1,
            },
        })
        .collect();
    // Unified-diff numbers as git and libgit2 give them: 1-based start (the line before, 0 at
    // the top, for an empty side), the length left out when it is 1; the ranges are start..start+len.
    let start = |s: usize, len: usize| if len == 0 { s } else { s + 1 };
    let side = |s: usize, len: usize| match len {
        1 => format!("{}", start(s, len)),
        _ => format!("{},{len}", start(s, len)),
    };
    let range = |s: usize, len: usize| LineRange {
        start: start(s, len),
        end: start(s, len) + len,
    };
    Hunk {
        header: format!("@@ -{} +{} @@\n", side(os, old_len), side(ns, new_len)),
        lines,
        old: range(os, old_len),
        new: range(ns, new_len),
    }
}

#[cfg(test)]
mod tests {
    /// The content as the JSON it is answered as.
    fn value<S>((c, s): (Option<seedd_web_api::DiffContent>, S)) -> (serde_json::Value, S) {
        (serde_json::to_value(c).unwrap(), s)
    }

    use serde_json::json;

    use super::{coarse_stats, count_lines, Budget, Render};

    fn content(a: Option<&[u8]>, b: Option<&[u8]>) -> (serde_json::Value, Option<(usize, usize)>) {
        value(super::content(a, b, Render::Full, &mut Budget::default()))
    }

    /// Headers and ranges as `git diff` and libgit2 (httpd) give them, checked against
    /// `git diff --no-index` output for the same files.
    #[test]
    fn hunk_numbers_are_gits() {
        // A new one-line file: `@@ -0,0 +1 @@`, the old side empty at 0.
        let (v, stats) = content(None, Some(b"one\n"));
        let h = &v["hunks"][0];
        assert_eq!(h["header"], "@@ -0,0 +1 @@\n");
        assert_eq!(h["old"], json!({ "start": 0, "end": 0 }));
        assert_eq!(h["new"], json!({ "start": 1, "end": 2 }));
        assert_eq!(stats, Some((1, 0)));
        // One line changed in the middle of five: 3 lines of context on each side.
        let (v, _) = content(Some(b"a\nb\nc\nd\ne\n"), Some(b"a\nb\nC\nd\ne\n"));
        let h = &v["hunks"][0];
        assert_eq!(h["header"], "@@ -1,5 +1,5 @@\n");
        assert_eq!(h["old"], json!({ "start": 1, "end": 6 }));
        // A deleted file of two lines.
        let (v, _) = content(Some(b"x\ny\n"), None);
        assert_eq!(v["hunks"][0]["header"], "@@ -1,2 +0,0 @@\n");
        assert_eq!(v["hunks"][0]["new"], json!({ "start": 0, "end": 0 }));
        // An empty file added: plain, no hunks (radicle-surf's answer).
        let (v, stats) = content(None, Some(b""));
        assert_eq!(
            v,
            json!({ "type": "plain", "hunks": [], "stats": { "additions": 0, "deletions": 0 }, "eof": "noneMissing" })
        );
        assert_eq!(stats, Some((0, 0)));
    }

    /// A file of 8 Mi empty lines is answered with its stats and no hunks, marked truncated,
    /// quickly: its lines are counted, never split out one by one (the old fallback built one
    /// op and one JSON line per line: gigabytes).
    #[test]
    fn millions_of_lines_are_counted_not_rendered() {
        let big = vec![b'\n'; 8 << 20];
        let started = std::time::Instant::now();
        let mut budget = Budget::default();
        let (v, stats) = value(super::content(None, Some(&big), Render::Full, &mut budget));
        assert_eq!(v["truncated"], true, "{v}");
        assert_eq!(v["type"], "plain");
        assert_eq!(v["hunks"], json!([]));
        assert_eq!(v["stats"], json!({ "additions": 8 << 20, "deletions": 0 }));
        assert_eq!(v["eof"], "noneMissing");
        assert_eq!(stats, Some((8 << 20, 0)));
        assert_eq!(budget.truncated, 1);
        // Stats only: the same counts, nothing built.
        let (v, stats) = value(super::content(
            None,
            Some(&big),
            Render::Stats,
            &mut Budget::default(),
        ));
        assert_eq!((v, stats), (serde_json::Value::Null, Some((8 << 20, 0))));
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    #[test]
    fn big_files_are_counted_between_their_common_ends() {
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"a"), 1);
        assert_eq!(count_lines(b"a\nb"), 2);
        assert_eq!(count_lines(b"a\nb\n"), 2);
        let mut a = "x\n".repeat(150_000);
        let b = format!("{a}changed\n{}", "y\n".repeat(60_000));
        a.push_str("old\n");
        a.push_str(&"y\n".repeat(60_000));
        let (na, nb) = (count_lines(a.as_bytes()), count_lines(b.as_bytes()));
        assert_eq!(coarse_stats(a.as_bytes(), b.as_bytes(), na, nb), (1, 1));
        let (v, stats) = content(Some(a.as_bytes()), Some(b.as_bytes()));
        assert_eq!(stats, Some((1, 1)));
        assert_eq!(v["truncated"], true);
    }

    /// The rendered lines of one answer are bounded: once the budget is spent, later files
    /// keep their stats but have no hunks.
    #[test]
    fn the_answer_budget_truncates_later_files() {
        let file = "line\n".repeat(super::MAX_RENDERED_LINES * 3 / 4);
        let mut budget = Budget::default();
        let (v, _) = value(super::content(
            None,
            Some(file.as_bytes()),
            Render::Full,
            &mut budget,
        ));
        assert!(v.get("truncated").is_none());
        assert_eq!(
            v["hunks"][0]["lines"].as_array().map(Vec::len),
            Some(15_000)
        );
        let (v, stats) = value(super::content(
            None,
            Some(file.as_bytes()),
            Render::Full,
            &mut budget,
        ));
        assert_eq!(v["truncated"], true, "the second file is over the budget");
        assert_eq!(stats, Some((15_000, 0)));
        // A small one still fits.
        let (v, _) = value(super::content(
            None,
            Some(b"x\n"),
            Render::Full,
            &mut budget,
        ));
        assert!(v.get("truncated").is_none());
        assert_eq!(budget.truncated, 1);
        // Hunks are bounded too: files of 700 one-line changes far apart.
        let old: String = (0..7_000).map(|i| format!("{i}\n")).collect();
        let new: String = (0..7_000)
            .map(|i| {
                if i % 10 == 0 {
                    format!("{i}!\n")
                } else {
                    format!("{i}\n")
                }
            })
            .collect();
        let mut budget = Budget::default();
        for n in 0..3 {
            let (v, stats) = value(super::content(
                Some(old.as_bytes()),
                Some(new.as_bytes()),
                Render::Full,
                &mut budget,
            ));
            assert_eq!(stats, Some((700, 700)));
            if n < 2 {
                assert_eq!(v["hunks"].as_array().map(Vec::len), Some(700));
            } else {
                assert_eq!(
                    v["truncated"],
                    true,
                    "2100 hunks are over {}",
                    super::MAX_HUNKS
                );
            }
        }
    }

    /// Blob contents in `files` are bounded per blob and per answer.
    #[test]
    fn embedded_blobs_are_bounded() {
        let mut b = Budget::default();
        assert!(!b.embed(super::MAX_EMBEDDED_BLOB + 1));
        let n = super::MAX_EMBEDDED_BYTES / super::MAX_EMBEDDED_BLOB;
        for _ in 0..n {
            assert!(b.embed(super::MAX_EMBEDDED_BLOB));
        }
        assert!(!b.embed(1));
        assert_eq!(b.omitted, 2);
    }
}
