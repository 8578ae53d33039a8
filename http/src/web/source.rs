//! Source browsing with gix on the blocking pool (http-api.md §1.4): trees, blobs, README,
//! history, one commit with its diff, commit counts, activity.
//!
//! `lastCommit` of a blob is the newest commit that changed the path, following the parent that
//! kept it unchanged through merges (`git rev-list -1 <sha> -- <path>`), within
//! [`MAX_LAST_COMMIT_WALK`] commits; of a tree, the commit it is read at (as httpd answers).

use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use gix::ObjectId;
use seedd_web_api::{
    Activity, Blob, BlobContent, CommitAnswer, CommitCount, CommitHeader, Committer, Comparison,
    Diff, Person, TreeStats,
};
use serde::Deserialize;

use super::diff::Render;
use super::objects::{check_tree_size, encode};
use super::{
    cached_bytes, cancelled, heavy_cancellable, Paging, Scope, WebError, IMMUTABLE, ONE_HOUR,
};
use crate::HttpState;
use seedd_core::blocking::Cancel;
use seedd_core::storage::Storage;

/// Blob JSON (`/blob`, `/readme`) above this is 413 (httpd's 4 MiB).
pub(super) const MAX_BLOB_JSON: u64 = 4 << 20;
/// Commits one history walk may visit (counts, activity, branch containment).
pub(super) const MAX_WALK: usize = 1_000_000;
/// `perPage` of `/commits` at most (httpd: unbounded with `since`/`until`).
pub(super) const MAX_COMMITS_PER_PAGE: usize = 1_000;
/// Commits the `lastCommit` search follows before settling for the oldest one it reached.
pub(super) const MAX_LAST_COMMIT_WALK: usize = 10_000;
/// Entries one tree listing answers at most (more: 413).
pub(super) const MAX_TREE_ENTRIES: usize = 50_000;
/// A commit object larger than this is not read (413): its message and parent list would
/// otherwise be copied into every answer and walk that meets it.
pub(super) const MAX_COMMIT_OBJECT: u64 = 1 << 20;
/// `summary` and `description` of a commit header are cut to this many bytes (on a character
/// boundary), so a page of headers stays small whatever the messages are.
pub(super) const MAX_MESSAGE: usize = 64 << 10;
/// Files the README lookup tries at the root, in order (httpd's list; then lower-cased).
const READMES: &[&str] = &[
    "README",
    "README.md",
    "README.markdown",
    "README.txt",
    "README.rst",
    "README.org",
    "Readme.md",
];

/// A 40-hex object id (short ids are rejected, as httpd's `Oid` parser does).
pub(super) fn oid(s: &str) -> Result<ObjectId, WebError> {
    if s.len() != 40 {
        return Err(WebError::BadRequest(format!(
            "invalid object id `{s}`: expected 40 hex digits"
        )));
    }
    ObjectId::from_hex(s.as_bytes()).map_err(|_| {
        WebError::BadRequest(format!("invalid object id `{s}`: expected 40 hex digits"))
    })
}

/// Opens a repository of storage (already checked visible).
pub(super) fn open(
    storage: &Storage,
    rid: seedd_proto::crypto::RepoId,
) -> Result<gix::Repository, WebError> {
    Ok(storage.repo(rid).map_err(WebError::git)?.git().clone())
}

/// A commit's id, tree, parents, header JSON and committer time; 404 if it is not a commit.
pub(super) struct CommitInfo {
    pub tree: ObjectId,
    pub parents: Vec<ObjectId>,
    pub time: i64,
    pub author_email: String,
    pub header: CommitHeader,
}

pub(super) fn commit(repo: &gix::Repository, id: ObjectId) -> Result<CommitInfo, WebError> {
    let header = repo
        .find_header(id)
        .map_err(|_| WebError::NotFound("commit not found"))?;
    if header.kind() != gix::objs::Kind::Commit {
        return Err(WebError::NotFound("commit not found"));
    }
    if header.size() > MAX_COMMIT_OBJECT {
        return Err(WebError::TooLarge {
            what: "commit object",
            limit: MAX_COMMIT_OBJECT,
        });
    }
    let c = repo
        .find_commit(id)
        .map_err(|_| WebError::NotFound("commit not found"))?;
    let d = c.decode().map_err(WebError::git)?;
    let author = d.author().map_err(WebError::git)?;
    let committer = d.committer().map_err(WebError::git)?;
    let time = committer.time().map(|t| t.seconds).unwrap_or(0);
    let summary = d.message().summary().to_string();
    // As radicle-surf (httpd): the message after the summary, trimmed, trailers included; the
    // whole message when the summary was folded from several lines.
    let message = String::from_utf8_lossy(d.message);
    let description = message
        .strip_prefix(summary.as_str())
        .unwrap_or(&message)
        .trim()
        .to_owned();
    let parents: Vec<ObjectId> = d.parents().collect();
    let header = CommitHeader {
        id: id.to_string(),
        author: Person {
            name: author.name.to_string(),
            email: author.email.to_string(),
        },
        summary: cut(&summary, MAX_MESSAGE).to_owned(),
        description: cut(&description, MAX_MESSAGE).to_owned(),
        parents: parents.iter().map(ToString::to_string).collect(),
        committer: Committer {
            name: committer.name.to_string(),
            email: committer.email.to_string(),
            time,
        },
    };
    Ok(CommitInfo {
        tree: d.tree(),
        parents,
        time,
        author_email: author.email.to_string(),
        header,
    })
}

/// A value serialised (on the blocking pool, where callers run it).
fn to_json<T: serde::Serialize>(v: &T) -> Result<bytes::Bytes, WebError> {
    serde_json::to_vec(v)
        .map(bytes::Bytes::from)
        .map_err(WebError::git)
}

/// Serialised JSON as an answer without a `Cache-Control` header.
fn json_bytes(body: bytes::Bytes) -> Response {
    let mut r = body.into_response();
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    r
}

/// `s` cut to at most `max` bytes, on a character boundary.
pub(super) fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The entry at `path` under `tree` (`""`: the tree itself).
pub(super) fn lookup(
    repo: &gix::Repository,
    tree: ObjectId,
    path: &str,
) -> Result<(ObjectId, gix::objs::tree::EntryMode), WebError> {
    let mut current = (tree, gix::objs::tree::EntryKind::Tree.into());
    for part in path.split('/').filter(|p| !p.is_empty()) {
        let (id, mode): (ObjectId, gix::objs::tree::EntryMode) = current;
        if !mode.is_tree() {
            return Err(WebError::NotFound("path not found"));
        }
        check_tree_size(repo, id)?;
        let t = repo.find_tree(id).map_err(WebError::git)?;
        let decoded = t.decode().map_err(WebError::git)?;
        let e = decoded
            .entries
            .iter()
            .find(|e| e.filename == part.as_bytes())
            .ok_or(WebError::NotFound("path not found"))?;
        current = (e.oid.to_owned(), e.mode);
    }
    Ok(current)
}

fn kind(m: gix::objs::tree::EntryMode) -> &'static str {
    if m.is_tree() {
        "tree"
    } else if m.is_commit() {
        "submodule"
    } else {
        "blob"
    }
}

/// What [`with_repo`] runs: the repository, its record and the request's cancel flag.
type RepoWork<T> = dyn FnOnce(&gix::Repository, &seedd_core::index::RepoRecord, &Cancel) -> Result<T, WebError>
    + Send;

/// Run `f` on the repository `rid` names, on the blocking pool.
async fn with_repo<T: Send + 'static>(
    state: &Arc<HttpState>,
    scope: &Scope,
    rid: &str,
    f: impl FnOnce(&gix::Repository, &seedd_core::index::RepoRecord, &Cancel) -> Result<T, WebError>
        + Send
        + 'static,
) -> Result<T, WebError> {
    with_record(state, super::repo(state, scope, rid)?, Box::new(f)).await
}

/// [`with_repo`] for a repository already resolved (and its visibility checked): under an
/// expensive-request permit, with a [`Cancel`] set when the client goes away or at the
/// deadline.
async fn with_record<T: Send + 'static>(
    state: &Arc<HttpState>,
    record: seedd_core::index::RepoRecord,
    f: Box<RepoWork<T>>,
) -> Result<T, WebError> {
    let storage = state.storage.clone();
    heavy_cancellable(state, move |cancel| {
        let repo = open(&storage, record.rid)?;
        f(&repo, &record, cancel)
    })
    .await
}

/// The newest commit from `start` back that changed the entry at `path` (now `entry`): while a
/// parent has the same entry, the change is further back along that parent.
fn last_commit(
    repo: &gix::Repository,
    start: CommitInfo,
    path: &str,
    entry: ObjectId,
    cancel: &Cancel,
) -> Result<CommitHeader, WebError> {
    let mut current = start;
    for _ in 0..MAX_LAST_COMMIT_WALK {
        cancel.check().map_err(cancelled)?;
        let mut same = None;
        for p in &current.parents {
            let Ok(parent) = commit(repo, *p) else {
                continue;
            };
            if lookup(repo, parent.tree, path).is_ok_and(|(id, _)| id == entry) {
                same = Some(parent);
                break;
            }
        }
        match same {
            Some(parent) => current = parent,
            None => break,
        }
    }
    Ok(current.header)
}

/// One entry of a tree listing (keys in the order `json!` gives them).
#[derive(serde::Serialize)]
struct TreeEntry<'a> {
    kind: &'static str,
    name: &'a str,
    oid: String,
    path: String,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct TreeAnswer<'a> {
    entries: Vec<TreeEntry<'a>>,
    last_commit: &'a CommitHeader,
    name: &'a str,
    path: &'a str,
}

/// The serialised listing of the tree at `path` in commit `sha`: the tree object is sized by
/// its header first ([`super::objects::MAX_TREE_OBJECT`]) and its entries counted ([`MAX_TREE_ENTRIES`])
/// before anything is built; entries are serialised straight from the decoded tree.
fn tree_json(repo: &gix::Repository, sha: ObjectId, path: &str) -> Result<bytes::Bytes, WebError> {
    let c = commit(repo, sha)?;
    let path = path.trim_matches('/');
    let (id, mode) = lookup(repo, c.tree, path)?;
    if !mode.is_tree() {
        return Err(WebError::NotFound("not a directory"));
    }
    check_tree_size(repo, id)?;
    let t = repo.find_tree(id).map_err(WebError::git)?;
    let decoded = t.decode().map_err(WebError::git)?;
    if decoded.entries.len() > MAX_TREE_ENTRIES {
        return Err(WebError::TooLarge {
            what: "tree (entries)",
            limit: MAX_TREE_ENTRIES as u64,
        });
    }
    let names: Vec<std::borrow::Cow<'_, str>> = decoded
        .entries
        .iter()
        .map(|e| String::from_utf8_lossy(e.filename))
        .collect();
    let mut order: Vec<usize> = (0..names.len()).collect();
    // radicle-surf's order: trees and submodules, then blobs; each by name.
    let blob = |i: usize| {
        let m = decoded.entries[i].mode;
        !(m.is_tree() || m.is_commit())
    };
    order.sort_by(|&x, &y| (blob(x), &names[x]).cmp(&(blob(y), &names[y])));
    let entries = order
        .into_iter()
        .map(|i| {
            let (e, name) = (&decoded.entries[i], names[i].as_ref());
            TreeEntry {
                kind: kind(e.mode),
                name,
                oid: e.oid.to_string(),
                path: if path.is_empty() {
                    name.to_owned()
                } else {
                    format!("{path}/{name}")
                },
            }
        })
        .collect();
    // httpd's tree `lastCommit` is the commit the tree is read at (blobs name the last change).
    let answer = TreeAnswer {
        entries,
        last_commit: &c.header,
        name: path.rsplit('/').next().unwrap_or_default(),
        path,
    };
    serde_json::to_vec(&answer)
        .map(bytes::Bytes::from)
        .map_err(WebError::git)
}

/// Content-addressed answers: `{sha}` (40 hex) parsed, `f` run on the repository on the
/// blocking pool under an expensive-request permit, the JSON serialised there too (not on an
/// async worker) and cached as immutable. The serialised answer is also kept in
/// [`super::Web::answers`] under `(rid, sha, key)`: `key` names the endpoint and everything
/// else the answer depends on.
async fn at_commit<T: serde::Serialize>(
    state: &Arc<HttpState>,
    scope: &Scope,
    rid: &str,
    sha: &str,
    key: String,
    f: impl FnOnce(&gix::Repository, ObjectId, &Cancel) -> Result<T, WebError> + Send + 'static,
) -> Result<Response, WebError> {
    let sha = oid(sha)?;
    // Visibility first (a cached answer is served only where the repository is seen).
    let record = super::repo(state, scope, rid)?;
    let rid = record.rid;
    if let Some(body) = state.web.answers.get(rid, sha, &key) {
        return Ok(cached_bytes(IMMUTABLE, body));
    }
    let body = with_record(
        state,
        record,
        Box::new(move |repo, _, cancel| to_json(&f(repo, sha, cancel)?)),
    )
    .await?;
    state.web.answers.put(rid, sha, &key, body.clone());
    Ok(cached_bytes(IMMUTABLE, body))
}

/// `GET /repos/{rid}/tree/{sha}/`.
pub(super) async fn tree_root(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, sha)): Path<(String, String)>,
) -> Result<Response, WebError> {
    tree_at(state, scope, rid, sha, String::new()).await
}

/// `GET /repos/{rid}/tree/{sha}/{*path}`.
pub(super) async fn tree(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, sha, path)): Path<(String, String, String)>,
) -> Result<Response, WebError> {
    tree_at(state, scope, rid, sha, path).await
}

async fn tree_at(
    state: Arc<HttpState>,
    scope: Scope,
    rid: String,
    sha: String,
    path: String,
) -> Result<Response, WebError> {
    let id = oid(&sha)?;
    // Visibility first (a cached answer is served only where the repository is seen).
    let record = super::repo(&state, &scope, &rid)?;
    let path = path.trim_matches('/').to_owned();
    if let Some(body) = state.web.trees.get(record.rid, id, &path) {
        return Ok(cached_bytes(IMMUTABLE, body));
    }
    let (rid, key) = (record.rid, path.clone());
    let body = with_record(
        &state,
        record,
        Box::new(move |repo, _, _| tree_json(repo, id, &path)),
    )
    .await?;
    state.web.trees.put(rid, id, &key, body.clone());
    Ok(cached_bytes(IMMUTABLE, body))
}

fn blob_json(
    repo: &gix::Repository,
    sha: ObjectId,
    path: &str,
    cancel: &Cancel,
) -> Result<Blob, WebError> {
    let c = commit(repo, sha)?;
    let path = path.trim_matches('/');
    let (id, mode) = lookup(repo, c.tree, path)?;
    if mode.is_tree() || mode.is_commit() {
        return Err(WebError::NotFound("not a file"));
    }
    let size = repo.find_header(id).map_err(WebError::git)?.size();
    if size > MAX_BLOB_JSON {
        return Err(WebError::TooLarge {
            what: "file",
            limit: MAX_BLOB_JSON,
        });
    }
    let bytes = repo.find_object(id).map_err(WebError::git)?.detach().data;
    let (binary, content) = encode(&bytes);
    drop(bytes);
    let last = last_commit(repo, c, path, id, cancel)?;
    Ok(Blob {
        binary,
        name: path.rsplit('/').next().unwrap_or_default().to_owned(),
        path: path.to_owned(),
        content,
        last_commit: last,
    })
}

/// `GET /repos/{rid}/blob/{sha}/{*path}`.
pub(super) async fn blob(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, sha, path)): Path<(String, String, String)>,
) -> Result<Response, WebError> {
    let key = format!("blob:{path}");
    at_commit(&state, &scope, &rid, &sha, key, move |repo, sha, cancel| {
        blob_json(repo, sha, &path, cancel)
    })
    .await
}

/// `GET /repos/{rid}/readme/{sha}`.
pub(super) async fn readme(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, sha)): Path<(String, String)>,
) -> Result<Response, WebError> {
    at_commit(
        &state,
        &scope,
        &rid,
        &sha,
        "readme".into(),
        move |repo, sha, cancel| {
            let lower = READMES.iter().map(|r| r.to_lowercase());
            for name in READMES.iter().map(|s| s.to_string()).chain(lower) {
                cancel.check().map_err(cancelled)?;
                match blob_json(repo, sha, &name, cancel) {
                    Err(WebError::NotFound(_)) => continue,
                    other => return other,
                }
            }
            Err(WebError::NotFound("no README"))
        },
    )
    .await
}

/// Commits reachable from `tips`, newest committer time first (git's date order); stops after
/// `limit` commits or when `keep_going` says so.
pub(super) fn walk(
    repo: &gix::Repository,
    tips: &[ObjectId],
    limit: usize,
    cancel: &Cancel,
    mut visit: impl FnMut(&CommitInfo) -> bool,
) -> Result<(), WebError> {
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut pending: HashMap<ObjectId, CommitInfo> = HashMap::new();
    let mut queue: BinaryHeap<(i64, ObjectId)> = BinaryHeap::new();
    for t in tips {
        if seen.insert(*t) {
            let c = commit(repo, *t)?;
            queue.push((c.time, *t));
            pending.insert(*t, c);
        }
    }
    let mut n = 0;
    while let Some((_, id)) = queue.pop() {
        cancel.check().map_err(cancelled)?;
        n += 1;
        if n > limit {
            return Err(WebError::TooLarge {
                what: "history walk (commits)",
                limit: limit as u64,
            });
        }
        let Some(c) = pending.remove(&id) else {
            continue;
        };
        if !visit(&c) {
            break;
        }
        for p in &c.parents {
            if seen.insert(*p) {
                // A missing parent (shallow history) ends that line.
                if let Ok(pc) = commit(repo, *p) {
                    queue.push((pc.time, *p));
                    pending.insert(*p, pc);
                }
            }
        }
    }
    Ok(())
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CommitsQuery {
    parent: Option<String>,
    since: Option<i64>,
    until: Option<i64>,
    // Not `#[serde(flatten)]`: flattened numbers fail to parse from query strings.
    page: Option<usize>,
    per_page: Option<usize>,
}

/// `GET /repos/{rid}/commits?parent&since&until&page&perPage`.
pub(super) async fn commits(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path(rid): Path<String>,
    Query(q): Query<CommitsQuery>,
) -> Result<Response, WebError> {
    let parent = q.parent.as_deref().map(oid).transpose()?;
    let windowed = q.since.is_some() || q.until.is_some();
    let default = if windowed { MAX_COMMITS_PER_PAGE } else { 30 };
    let paging = Paging::new(q.page, q.per_page);
    let (skip, take) = paging.window(default, MAX_COMMITS_PER_PAGE);
    let (since, until) = (q.since, q.until);
    let out = with_repo(&state, &scope, &rid, move |repo, record, cancel| {
        let tip = match parent {
            Some(p) => p,
            None => oid(record
                .head
                .as_deref()
                .ok_or(WebError::NotFound("no default branch"))?)?,
        };
        let mut out = Vec::new();
        let mut matched = 0usize;
        walk(repo, &[tip], MAX_WALK, cancel, |c| {
            let inside = since.is_none_or(|s| c.time >= s) && until.is_none_or(|u| c.time < u);
            if inside {
                if matched >= skip {
                    out.push(c.header.clone());
                }
                matched += 1;
            }
            out.len() < take
        })?;
        to_json(&out)
    })
    .await?;
    Ok(if parent.is_some() {
        cached_bytes(IMMUTABLE, out)
    } else {
        json_bytes(out)
    })
}

/// Top-level (canonical) `refs/heads/*` of a repository, from the index.
fn branches(
    state: &HttpState,
    rid: &seedd_proto::crypto::RepoId,
) -> Result<Vec<(String, ObjectId)>, WebError> {
    Ok(state
        .index
        .refs(rid)
        .map_err(WebError::index)?
        .into_iter()
        .filter(|(name, _)| name.starts_with("refs/heads/"))
        .filter_map(|(name, t)| match t {
            seedd_core::storage::RefTarget::Oid(id) => Some((name, id)),
            seedd_core::storage::RefTarget::Symbolic(_) => None,
        })
        .collect())
}

/// `GET /repos/{rid}/commits/{sha}`: the commit, its diff against the first parent, the blobs
/// and the canonical branches containing it.
pub(super) async fn commit_one(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, sha)): Path<(String, String)>,
) -> Result<Response, WebError> {
    let record = super::repo(&state, &scope, &rid)?;
    let heads = branches(&state, &record.rid)?;
    // The answer depends on the branches' tips too.
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        heads.hash(&mut h);
        format!("commit:{:016x}", h.finish())
    };
    let st = state.clone();
    at_commit(&state, &scope, &rid, &sha, key, move |repo, sha, cancel| {
        let c = commit(repo, sha)?;
        let base = match c.parents.first() {
            Some(p) => Some(commit(repo, *p)?.tree),
            None => None,
        };
        let changes = super::diff::tree_changes(repo, base, Some(c.tree), cancel)?;
        let (diff, files) = render(&st, repo, &changes, Render::Full, cancel)?;
        let mut containing = Vec::new();
        let sha_id = sha.to_string();
        for (name, tip) in heads {
            let mut found = tip == sha;
            if !found {
                // A branch whose history cannot be read is left out, not an error.
                let walked = walk(repo, &[tip], MAX_WALK, cancel, |x| {
                    found = x.header.id == sha_id;
                    !found && x.time >= c.time
                });
                if walked.is_err() {
                    cancel.check().map_err(cancelled)?;
                }
            }
            if found {
                containing.push(name);
            }
        }
        Ok(CommitAnswer {
            commit: c.header,
            diff,
            files,
            branches: containing,
        })
    })
    .await
}

/// [`super::diff::render`] within a fresh budget, its cuts counted in
/// `seedd_web_bounded_total`.
fn render(
    state: &HttpState,
    repo: &gix::Repository,
    changes: &[super::diff::Change],
    how: Render,
    cancel: &Cancel,
) -> Result<(Diff, BTreeMap<String, BlobContent>), WebError> {
    let (changes, cut) = super::diff::find_renames(repo, changes.to_vec(), cancel)?;
    super::count_bound(state, "renames", u64::from(cut));
    let mut budget = super::diff::Budget::default();
    let out = super::diff::render(repo, &changes, how, &mut budget, cancel);
    super::count_bound(state, "diff_truncated", budget.truncated);
    super::count_bound(state, "blob_omitted", budget.omitted);
    out
}

/// The tree changes from commit `base` to commit `head`, rendered (`{diff, files}`).
fn diff_commits(
    state: &HttpState,
    repo: &gix::Repository,
    base: ObjectId,
    head: ObjectId,
    how: Render,
    cancel: &Cancel,
) -> Result<(Diff, BTreeMap<String, BlobContent>), WebError> {
    let (from, to) = (commit(repo, base)?, commit(repo, head)?);
    let changes = super::diff::tree_changes(repo, Some(from.tree), Some(to.tree), cancel)?;
    render(state, repo, &changes, how, cancel)
}

/// `GET /repos/{rid}/diff/{base}/{oid}`: `{diff, files, commits}` from `base` to `oid`, where
/// `commits` are `oid`'s history newest first up to (without) `base`, as httpd lists them.
pub(super) async fn diff_between(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, base, sha)): Path<(String, String, String)>,
) -> Result<Response, WebError> {
    let base = oid(&base)?;
    let st = state.clone();
    let key = format!("diff:{base}");
    at_commit(&state, &scope, &rid, &sha, key, move |repo, sha, cancel| {
        let (diff, files) = diff_commits(&st, repo, base, sha, Render::Full, cancel)?;
        let mut commits = Vec::new();
        let base_id = base.to_string();
        walk(repo, &[sha], MAX_WALK, cancel, |c| {
            let more = c.header.id != base_id;
            if more {
                commits.push(c.header.clone());
            }
            more
        })?;
        Ok(Comparison {
            diff,
            files,
            commits,
        })
    })
    .await
}

/// `GET /repos/{rid}/diff/{base}/{oid}/stats`: `{filesChanged, insertions, deletions}`.
pub(super) async fn diff_stats(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, base, sha)): Path<(String, String, String)>,
) -> Result<Response, WebError> {
    let base = oid(&base)?;
    let st = state.clone();
    let key = format!("diffstats:{base}");
    at_commit(&state, &scope, &rid, &sha, key, move |repo, sha, cancel| {
        let (diff, _) = diff_commits(&st, repo, base, sha, Render::Stats, cancel)?;
        Ok(diff.stats)
    })
    .await
}

/// `GET /repos/{rid}/stats/commits/{sha}`: `{commits}` reachable from `sha`.
pub(super) async fn commit_count(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, sha)): Path<(String, String)>,
) -> Result<Response, WebError> {
    at_commit(
        &state,
        &scope,
        &rid,
        &sha,
        "count".into(),
        move |repo, sha, cancel| {
            let mut n = 0usize;
            walk(repo, &[sha], MAX_WALK, cancel, |_| {
                n += 1;
                true
            })?;
            Ok(CommitCount { commits: n })
        },
    )
    .await
}

/// `GET /repos/{rid}/stats/tree/{sha}`: `{commits, branches, contributors}`.
pub(super) async fn tree_stats(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, sha)): Path<(String, String)>,
) -> Result<Response, WebError> {
    let record = super::repo(&state, &scope, &rid)?;
    let branch_count = branches(&state, &record.rid)?.len();
    let key = format!("treestats:{branch_count}");
    at_commit(&state, &scope, &rid, &sha, key, move |repo, sha, cancel| {
        let mut n = 0usize;
        let mut authors = BTreeSet::new();
        walk(repo, &[sha], MAX_WALK, cancel, |c| {
            n += 1;
            authors.insert(c.author_email.clone());
            true
        })?;
        Ok(TreeStats {
            commits: n,
            branches: branch_count,
            contributors: authors.len(),
        })
    })
    .await
}

/// Activity covers this many seconds back from now (52 weeks).
const ACTIVITY_WINDOW: i64 = 52 * 7 * 24 * 3600;

/// `GET /repos/{rid}/activity`: committer times of the default branch's commits in the last 52
/// weeks (the walk stops at the first older commit in date order).
pub(super) async fn activity(
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path(rid): Path<String>,
) -> Result<Response, WebError> {
    let now = i64::try_from(seedd_core::tenant::now_ms() / 1000).unwrap_or(i64::MAX);
    let cutoff = now.saturating_sub(ACTIVITY_WINDOW);
    let v = with_repo(&state, &scope, &rid, move |repo, record, cancel| {
        let mut times = Vec::new();
        if let Some(head) = record.head.as_deref() {
            walk(repo, &[oid(head)?], MAX_WALK, cancel, |c| {
                if c.time >= cutoff {
                    times.push(c.time);
                }
                c.time >= cutoff
            })?;
        }
        to_json(&Activity { activity: times })
    })
    .await?;
    Ok(cached_bytes(ONE_HOUR, v))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
