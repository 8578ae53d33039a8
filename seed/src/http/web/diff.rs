//! Diffs in the explorer's shape (http-api.md §1.4 `Diff`): a recursive tree comparison
//! (no rename detection) and a Myers line diff with 3 lines of context, bounded so a huge
//! change gives a clear 413 instead of unbounded work.

use std::collections::BTreeMap;

use gix::ObjectId;
use serde_json::{json, Value};

use super::WebError;

/// Lines of context around changes (git's default).
const CONTEXT: usize = 3;
/// Files in one diff.
pub(super) const MAX_FILES: usize = 1_000;
/// Bytes of blob content read for one diff (both sides of every file).
pub(super) const MAX_DIFF_BYTES: u64 = 32 << 20;
/// Edit distance a line diff may reach; past it the file is shown as changed without hunks.
const MAX_EDITS: usize = 1_500;
/// Lines (both sides) past which a file is not diffed line by line.
const MAX_LINES: usize = 200_000;

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change {
    pub path: String,
    pub old: Option<(ObjectId, gix::objs::tree::EntryMode)>,
    pub new: Option<(ObjectId, gix::objs::tree::EntryMode)>,
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
) -> Result<Vec<Change>, WebError> {
    let mut out = Vec::new();
    walk(repo, old, new, "", &mut out)?;
    Ok(out)
}

fn walk(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    prefix: &str,
    out: &mut Vec<Change>,
) -> Result<(), WebError> {
    if old == new {
        return Ok(());
    }
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
            walk(repo, tree(o), tree(n), &format!("{path}/"), out)?;
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
            });
        }
    }
    Ok(())
}

/// A blob's bytes for diffing (`None`: no blob on that side; submodules have none).
fn blob(
    repo: &gix::Repository,
    side: Option<(ObjectId, gix::objs::tree::EntryMode)>,
    budget: &mut u64,
) -> Result<Option<Vec<u8>>, WebError> {
    let Some((id, m)) = side else { return Ok(None) };
    if m.is_commit() {
        return Ok(Some(format!("Subproject commit {id}\n").into_bytes()));
    }
    let size = repo.find_header(id).map_err(WebError::git)?.size();
    *budget = budget.checked_sub(size).ok_or(WebError::TooLarge {
        what: "diff",
        limit: MAX_DIFF_BYTES,
    })?;
    Ok(Some(
        repo.find_object(id).map_err(WebError::git)?.data.clone(),
    ))
}

/// `{diff: {files, stats}, files: {oid: {id, binary, content}}}` of a list of changes.
pub(super) fn render(
    repo: &gix::Repository,
    changes: &[Change],
) -> Result<(Value, Value), WebError> {
    let mut budget = MAX_DIFF_BYTES;
    let mut files = Vec::new();
    let mut blobs = serde_json::Map::new();
    let (mut insertions, mut deletions) = (0usize, 0usize);
    for c in changes {
        let old = blob(repo, c.old, &mut budget)?;
        let new = blob(repo, c.new, &mut budget)?;
        for (side, bytes) in [(c.old, &old), (c.new, &new)] {
            // A submodule's "Subproject commit" text is diffed but is no blob (httpd lists none).
            if let (Some((id, m)), Some(b)) = (side, bytes) {
                if !m.is_commit() {
                    blobs.insert(id.to_string(), super::source::blob_content(id, b));
                }
            }
        }
        let content = content(old.as_deref(), new.as_deref());
        if let Some((a, d)) = content.1 {
            insertions += a;
            deletions += d;
        }
        let file = |s: Option<(ObjectId, gix::objs::tree::EntryMode)>| {
            s.map(|(id, m)| json!({ "oid": id.to_string(), "mode": mode(m) }))
        };
        let entry = match (file(c.old), file(c.new)) {
            (None, Some(n)) => {
                json!({ "status": "added", "path": c.path, "diff": content.0, "new": n })
            }
            (Some(o), None) => {
                json!({ "status": "deleted", "path": c.path, "diff": content.0, "old": o })
            }
            (Some(o), Some(n)) => json!({
                "status": "modified", "path": c.path, "diff": content.0, "old": o, "new": n,
            }),
            (None, None) => continue,
        };
        files.push(entry);
    }
    let stats = json!({
        "filesChanged": files.len(),
        "insertions": insertions,
        "deletions": deletions,
    });
    Ok((
        json!({ "files": files, "stats": stats }),
        Value::Object(blobs),
    ))
}

fn is_binary(b: &[u8]) -> bool {
    b.iter().take(8000).any(|&c| c == 0) || std::str::from_utf8(b).is_err()
}

/// `DiffContent` and `(additions, deletions)` for text.
fn content(old: Option<&[u8]>, new: Option<&[u8]>) -> (Value, Option<(usize, usize)>) {
    let (a, b) = (old.unwrap_or_default(), new.unwrap_or_default());
    if is_binary(a) || is_binary(b) {
        return (json!({ "type": "binary" }), None);
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
    let missing = |x: &[u8]| !x.is_empty() && !x.ends_with(b"\n");
    let eof = match (missing(a), missing(b)) {
        (false, false) => "noneMissing",
        (true, false) => "oldMissing",
        (false, true) => "newMissing",
        (true, true) => "bothMissing",
    };
    let hunks = hunks(&ops, &a_lines, &b_lines);
    (
        json!({
            "type": "plain",
            "hunks": hunks,
            "stats": { "additions": additions, "deletions": deletions },
            "eof": eof,
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

/// Group an edit script into hunks with [`CONTEXT`] lines around changes.
fn hunks(ops: &[Op], a: &[&[u8]], b: &[&[u8]]) -> Vec<Value> {
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
        let end = (end + CONTEXT).min(ops.len());
        out.push(hunk(&ops[start..end], ops, start, a, b));
    }
    out
}

/// Position (0-based) in the old/new file where `ops[at]` starts.
fn position(ops: &[Op], at: usize) -> (usize, usize) {
    ops[..at].iter().fold((0, 0), |(x, y), o| match o {
        Op::Eq(..) => (x + 1, y + 1),
        Op::Del(_) => (x + 1, y),
        Op::Ins(_) => (x, y + 1),
    })
}

fn text(l: &[u8]) -> String {
    String::from_utf8_lossy(l).into_owned()
}

fn hunk(slice: &[Op], all: &[Op], at: usize, a: &[&[u8]], b: &[&[u8]]) -> Value {
    let (os, ns) = position(all, at);
    let old_len = slice.iter().filter(|o| !matches!(o, Op::Ins(_))).count();
    let new_len = slice.iter().filter(|o| !matches!(o, Op::Del(_))).count();
    let lines: Vec<Value> = slice
        .iter()
        .map(|o| match *o {
            Op::Eq(i, j) => json!({
                "type": "context", "line": text(a[i]), "lineNoOld": i + 1, "lineNoNew": j + 1,
            }),
            Op::Del(i) => json!({ "type": "deletion", "line": text(a[i]), "lineNo": i + 1 }),
            Op::Ins(j) => json!({ "type": "addition", "line": text(b[j]), "lineNo": j + 1 }),
        })
        .collect();
    // Unified-diff numbers as git and libgit2 give them: 1-based start (the line before, 0 at
    // the top, for an empty side), the length left out when it is 1; the ranges are start..start+len.
    let start = |s: usize, len: usize| if len == 0 { s } else { s + 1 };
    let side = |s: usize, len: usize| match len {
        1 => format!("{}", start(s, len)),
        _ => format!("{},{len}", start(s, len)),
    };
    let range =
        |s: usize, len: usize| json!({ "start": start(s, len), "end": start(s, len) + len });
    json!({
        "header": format!("@@ -{} +{} @@\n", side(os, old_len), side(ns, new_len)),
        "lines": lines,
        "old": range(os, old_len),
        "new": range(ns, new_len),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::content;

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
}
