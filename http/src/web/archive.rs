//! `/raw/{rid}/{sha}.tar.gz|.tar|.zip` and `/raw/{rid}/archive/{*refname}[.ext]`: a commit's
//! tree as a downloadable archive (http-api.md §1.7, as radicle-httpd 0.27 serves it).
//!
//! Why a `git archive` child and not gix: git writes exactly the tar/zip httpd's users get
//! (pax header with the commit id, `export-ignore`/`export-subst` attributes, zip with
//! deflate), streams as it goes, and gix's archive writer is neither enabled here nor
//! attribute-complete. The child runs with the clean environment of [`seedd_core::git`] (through
//! `GitServer::command`), in its own process group, and its output is a
//! [`seedd_core::serve::GitOutput`]: killed when the client goes away, after
//! `http.idle_timeout_secs` without progress, or past `http.request_timeout_secs`.
//!
//! Admission: archives have their own [`ARCHIVE_PERMITS`] slots (held until the body ends),
//! separate from [`super::heavy`] so long downloads cannot starve tree and blob reads; the
//! tree is first sized (blob sizes summed, on the heavy pool, remembered per tree) and over
//! [`MAX_ARCHIVE_BYTES`] answers 413 with a JSON error. `HEAD` does the same checks but spawns
//! nothing. The body is charged to the tenant's egress when it ends.
//!
//! The output is bounded too (issue 25 §4): `export-subst` expands placeholders such as
//! `$Format:%B$` when git writes the archive, so a small tree can make an endless one. Git
//! writes an uncompressed tar (seedd gzips `.tar.gz` itself), and the uncompressed bytes are
//! counted: past [`output_bound`] (a multiple of the tree's size plus room for headers) the
//! body fails, git is killed and `seedd_web_bounded_total{bound="archive_output"}` counts it.
//! The whole download ends at [`ARCHIVE_DEADLINE`] (or `http.request_timeout_secs` if
//! shorter), counted as `archive_deadline`. Zip output is deflated by git per file, so a tree
//! whose `.gitattributes` names `export-subst` is zipped stored (`-0`) for its bytes to count.
//! git expands a file in memory before writing it, so the git of such a tree also runs under a
//! data limit ([`subst_data_limit`]); past it git fails, the body fails (`archive_memory`).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use gix::ObjectId;
use seedd_proto::crypto::NodeId;
use serde::Deserialize;

use super::source::oid;
use super::{counted_permit, heavy, Scope, WebError};
use crate::HttpState;
use seedd_core::index::RepoRecord;
use seedd_core::serve::GitOutput;

/// Archives being streamed at once; more wait up to [`HEAVY_WAIT`], then get 503.
pub(crate) const ARCHIVE_PERMITS: usize = 4;
/// Largest tree (sum of its blob sizes, uncompressed) served as an archive.
pub(crate) const MAX_ARCHIVE_BYTES: u64 = 512 << 20;
/// Most entries (files, directories) a tree may have to be served as an archive.
pub(crate) const MAX_ARCHIVE_ENTRIES: u64 = 500_000;
/// Tree sizes remembered (cleared when full; a size is cheap to compute again).
const SIZE_CACHE: usize = 4096;
/// An archive's output may be this many times its tree's size (plus [`OUTPUT_PER_ENTRY`] per
/// entry and [`OUTPUT_SLACK`]) before it is cut: `export-subst` expansion past that is abuse.
pub(crate) const OUTPUT_FACTOR: u64 = 4;
/// Room per tree entry for tar headers, padding and long-name records.
pub(crate) const OUTPUT_PER_ENTRY: u64 = 4 << 10;
/// Room for the archive's own headers and trailers.
pub(crate) const OUTPUT_SLACK: u64 = 1 << 20;
/// Data (heap) a `git archive` of an `export-subst` tree may use besides three copies of its
/// largest blob (read, converted, expanded): see [`subst_data_limit`].
pub(crate) const SUBST_DATA_BASE: u64 = 64 << 20;

/// `RLIMIT_DATA` of a `git archive` whose tree names `export-subst`.
pub(crate) fn subst_data_limit(largest: u64) -> u64 {
    SUBST_DATA_BASE.saturating_add(largest.saturating_mul(3))
}

/// The longest one archive download may take (the slot is free again after it).
pub(crate) const ARCHIVE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(600);

/// Most bytes an archive of a tree with `size` bytes of blobs and `entries` entries may
/// have (uncompressed tar; zip as git deflates it).
pub(crate) fn output_bound(size: u64, entries: u64) -> u64 {
    size.saturating_mul(OUTPUT_FACTOR)
        .saturating_add(entries.saturating_mul(OUTPUT_PER_ENTRY))
        .saturating_add(OUTPUT_SLACK)
}

/// An archive format (`git archive --format`), by the path's suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Format {
    /// The default: compressed, as httpd answers a bare ref name.
    #[default]
    TarGz,
    Tar,
    Zip,
}

impl Format {
    /// Split a supported suffix off `s`: `("x", Some(TarGz))` for `x.tar.gz`, `(s, None)` for
    /// anything else.
    pub(crate) fn detect(s: &str) -> (&str, Option<Format>) {
        for f in [Format::TarGz, Format::Tar, Format::Zip] {
            if let Some(stem) = s.strip_suffix(f.extension()) {
                return (stem, Some(f));
            }
        }
        (s, None)
    }

    /// What git writes: tar for both tar formats (seedd compresses `.tar.gz`, so the
    /// uncompressed output is what [`output_bound`] counts).
    fn git_output(self) -> &'static str {
        match self {
            Format::TarGz | Format::Tar => "tar",
            Format::Zip => "zip",
        }
    }

    pub(crate) fn extension(self) -> &'static str {
        match self {
            Format::TarGz => ".tar.gz",
            Format::Tar => ".tar",
            Format::Zip => ".zip",
        }
    }

    pub(crate) fn mime(self) -> &'static str {
        match self {
            Format::TarGz => "application/gzip",
            Format::Tar => "application/x-tar",
            Format::Zip => "application/zip",
        }
    }
}

/// `?prefix=false` drops the top-level directory (httpd accepts it, deprecated on arrival).
#[derive(Debug, Deserialize)]
#[serde(default)]
pub(super) struct PrefixQuery {
    prefix: bool,
}

impl Default for PrefixQuery {
    fn default() -> Self {
        Self { prefix: true }
    }
}

/// What the archive is of.
#[derive(Debug, Clone)]
enum Target {
    Oid(ObjectId),
    /// A short (`main`, `v1.0`) or full (`refs/tags/v1.0`) name among the canonical refs.
    Ref(String),
}

/// What archives share: their slots and the sizes of trees already walked.
pub(crate) struct Archives {
    slots: Arc<tokio::sync::Semaphore>,
    /// Blob bytes and entries of trees already walked.
    sizes: Mutex<HashMap<ObjectId, TreeSize>>,
}

impl Default for Archives {
    fn default() -> Self {
        Self {
            slots: Arc::new(tokio::sync::Semaphore::new(ARCHIVE_PERMITS)),
            sizes: Mutex::new(HashMap::new()),
        }
    }
}

impl Archives {
    fn size(&self, tree: &ObjectId) -> Option<TreeSize> {
        self.sizes.lock().ok()?.get(tree).copied()
    }

    fn remember(&self, tree: ObjectId, size: TreeSize) {
        if let Ok(mut m) = self.sizes.lock() {
            if m.len() >= SIZE_CACHE {
                m.clear();
            }
            m.insert(tree, size);
        }
    }
}

/// A name safe in a file name and as the archive's top-level directory: the project name
/// with anything but `[A-Za-z0-9._+-]` replaced by `-` and no leading dots (a name such as
/// `../x` must not become a `../x-<oid>/` prefix that unpacks outside the target directory).
pub(crate) fn safe_name(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = mapped.trim_start_matches('.');
    if trimmed.is_empty() {
        "archive".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// `GET|HEAD /raw/{rid}/{sha}.tar.gz|.tar|.zip` (other suffixes 404, a bad id 400).
pub(super) async fn by_commit(
    method: Method,
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, file)): Path<(String, String)>,
    Query(q): Query<PrefixQuery>,
) -> Result<Response, WebError> {
    let record = super::repo(&state, &scope, &rid)?;
    let (sha, Some(format)) = Format::detect(&file) else {
        return Err(WebError::NotFound("not found"));
    };
    let id = oid(sha)?;
    serve(
        &state,
        &scope,
        method,
        record,
        Target::Oid(id),
        format,
        q.prefix,
    )
    .await
}

/// `GET|HEAD /raw/{rid}/archive/{*refname}[.tar.gz|.tar|.zip]` (tar.gz without a suffix).
pub(super) async fn by_ref(
    method: Method,
    State(state): State<Arc<HttpState>>,
    Extension(scope): Extension<Scope>,
    Path((rid, refname)): Path<(String, String)>,
    Query(q): Query<PrefixQuery>,
) -> Result<Response, WebError> {
    let record = super::repo(&state, &scope, &rid)?;
    let (name, format) = Format::detect(&refname);
    let target = Target::Ref(name.to_owned());
    let format = format.unwrap_or_default();
    serve(&state, &scope, method, record, target, format, q.prefix).await
}

/// The commit (or tree) `target` names among the canonical refs and the branches and tags of
/// `peers` (the namespaces the explorer shows), and its tree.
fn resolve(
    repo: &gix::Repository,
    target: &Target,
    peers: &[NodeId],
) -> Result<(ObjectId, ObjectId), WebError> {
    let id = match target {
        Target::Oid(id) => *id,
        Target::Ref(name) => match peer_ref(name, peers) {
            Some(full) => direct_ref(repo, &full)?,
            None => canonical_ref(repo, name)?,
        },
    };
    let object = repo
        .find_object(id)
        .map_err(|_| WebError::NotFound("object not found"))?
        .peel_tags_to_end()
        .map_err(|_| WebError::NotFound("object not found"))?;
    match object.kind {
        gix::objs::Kind::Commit => {
            let tree = object
                .into_commit()
                .tree_id()
                .map_err(WebError::git)?
                .detach();
            Ok((id, tree))
        }
        gix::objs::Kind::Tree => Ok((id, object.id)),
        _ => Err(WebError::NotFound("not a commit")),
    }
}

/// `refs/namespaces/<nid>/refs/heads|tags/<name>` of a peer in `peers` (the explorer's download
/// button on a peer's branch asks for that full name, which httpd resolves as git does), as
/// given; `None` for any other name (a namespace not listed, or not a branch or tag).
fn peer_ref(name: &str, peers: &[NodeId]) -> Option<String> {
    let rest = name.strip_prefix("refs/namespaces/")?;
    let (nid, rest) = rest.split_once('/')?;
    let nid: NodeId = nid.parse().ok()?;
    let listed = peers.contains(&nid);
    let branch_or_tag = rest.starts_with("refs/heads/") || rest.starts_with("refs/tags/");
    (listed && branch_or_tag).then(|| name.to_owned())
}

/// The target of the ref `name` exactly (no shorthand).
fn direct_ref(repo: &gix::Repository, name: &str) -> Result<ObjectId, WebError> {
    // An invalid name (`..`, control characters) is simply not found.
    match repo.try_find_reference(name) {
        Ok(Some(r)) => r
            .target()
            .try_id()
            .map(|id| id.to_owned())
            .ok_or(WebError::NotFound("reference not found")),
        _ => Err(WebError::NotFound("reference not found")),
    }
}

/// A ref name → its target, looked up only among the top-level branches and tags (git's order:
/// a full `refs/heads/…`/`refs/tags/…` name, then `refs/tags/<name>`, then `refs/heads/<name>`);
/// peer namespaces and other refs are never reached.
fn canonical_ref(repo: &gix::Repository, name: &str) -> Result<ObjectId, WebError> {
    let mut candidates = Vec::with_capacity(3);
    if name.starts_with("refs/heads/") || name.starts_with("refs/tags/") {
        candidates.push(name.to_owned());
    }
    candidates.push(format!("refs/tags/{name}"));
    candidates.push(format!("refs/heads/{name}"));
    candidates
        .iter()
        .find_map(|c| direct_ref(repo, c).ok())
        .ok_or(WebError::NotFound("reference not found"))
}

/// What an archive of a tree holds, as far as its bounds go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TreeSize {
    /// Blob bytes (each occurrence counts: the archive holds each).
    pub bytes: u64,
    /// Entries (files, directories, submodules).
    pub entries: u64,
    /// Some `.gitattributes` names `export-subst` (or is too big to tell): git may write
    /// more than the blobs hold.
    pub subst: bool,
    /// The largest blob.
    pub largest: u64,
}

/// `.gitattributes` files larger than this are not read: taken as naming `export-subst`.
const MAX_ATTRIBUTES_READ: u64 = 1 << 20;

/// Sum of the blob sizes under `tree` and the number of entries, with [`WebError::TooLarge`]
/// as soon as the sum passes `limit`, the entries pass `max_entries` or a tree object is over
/// [`super::source::MAX_TREE_OBJECT`]; and whether any `.gitattributes` asks for
/// `export-subst`.
pub(crate) fn tree_size(
    repo: &gix::Repository,
    tree: ObjectId,
    limit: u64,
    max_entries: u64,
) -> Result<TreeSize, WebError> {
    let mut total = 0u64;
    let mut entries = 0u64;
    let mut subst = false;
    let mut largest = 0u64;
    let mut stack = vec![tree];
    while let Some(id) = stack.pop() {
        super::objects::check_tree_size(repo, id)?;
        let t = repo.find_tree(id).map_err(WebError::git)?;
        let decoded = t.decode().map_err(WebError::git)?;
        for e in &decoded.entries {
            entries += 1;
            if entries > max_entries {
                return Err(WebError::TooLarge {
                    what: "archive (entries)",
                    limit: max_entries,
                });
            }
            if e.mode.is_tree() {
                stack.push(e.oid.to_owned());
            } else if !e.mode.is_commit() {
                let h = repo.find_header(e.oid).map_err(WebError::git)?;
                total = total.saturating_add(h.size());
                largest = largest.max(h.size());
                if !subst && e.filename == ".gitattributes" {
                    subst = h.size() > MAX_ATTRIBUTES_READ
                        || repo
                            .find_object(e.oid)
                            .map_err(WebError::git)?
                            .data
                            .windows(b"export-subst".len())
                            .any(|w| w == b"export-subst");
                }
                if total > limit {
                    return Err(WebError::TooLarge {
                        what: "archive",
                        limit,
                    });
                }
            }
        }
    }
    Ok(TreeSize {
        bytes: total,
        entries,
        subst,
        largest,
    })
}

async fn serve(
    state: &Arc<HttpState>,
    scope: &Scope,
    method: Method,
    record: RepoRecord,
    target: Target,
    format: Format,
    use_prefix: bool,
) -> Result<Response, WebError> {
    let name = safe_name(&record.name);
    let label = match &target {
        Target::Oid(id) => id.to_string(),
        // httpd names a ref's archive after the ref (`/` → `-`).
        Target::Ref(r) => safe_name(&r.replace('/', "-")),
    };
    let stem = format!("{name}-{label}");
    // A GET takes its slot first: when all are busy the answer is a cheap 503.
    let slot = if method == Method::HEAD {
        None
    } else {
        Some(counted_permit(state, &state.web.archives.slots).await?)
    };
    let storage = state.storage.clone();
    let rid = record.rid;
    let peers = record.namespaces.clone();
    let st = state.clone();
    let (id, size) = heavy(state, move || {
        let repo = super::source::open(&storage, rid)?;
        let (id, tree) = resolve(&repo, &target, &peers)?;
        let size = match st.web.archives.size(&tree) {
            Some(size) => size,
            None => {
                let size = tree_size(&repo, tree, MAX_ARCHIVE_BYTES, MAX_ARCHIVE_ENTRIES)?;
                st.web.archives.remember(tree, size);
                size
            }
        };
        Ok((id, size))
    })
    .await?;
    let bound = output_bound(size.bytes, size.entries);

    let mut headers = axum::http::HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.mime()),
    );
    let disposition = format!("attachment; filename=\"{stem}{}\"", format.extension());
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_str(&disposition).map_err(WebError::git)?,
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    let Some(slot) = slot else {
        // HEAD: the headers a GET would send; no child, no body.
        return Ok(headers.into_response());
    };

    let mut cmd = state.git.command();
    cmd.env("GIT_DIR", state.storage.path_of(&rid))
        .arg("archive")
        .arg(format!("--format={}", format.git_output()));
    if format == Format::Zip && size.subst {
        // Stored, not deflated: the bytes counted against the bound are the expanded ones.
        cmd.arg("-0");
    }
    if use_prefix {
        cmd.arg(format!("--prefix={stem}/"));
    }
    cmd.arg(id.to_string()).arg("--");
    let mut cmd = if size.subst {
        // git expands a file's placeholders in memory before it writes a byte of it (4,096
        // `$Format:%B$` of a 64 KiB message: 256 MiB from a 48 KiB tree), so the output bound
        // comes too late: such a tree's git runs under a data limit (and a small delta-base
        // cache), and a malloc past it ends git, counted as `archive_memory`.
        cmd.as_std_mut()
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "core.deltaBaseCacheLimit")
            .env("GIT_CONFIG_VALUE_0", "16m");
        tokio::process::Command::from(seedd_core::git::with_data_limit(
            cmd.as_std(),
            subst_data_limit(size.largest),
        ))
    } else {
        cmd
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| WebError::Git(format!("git archive: {e}")))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| WebError::Git("git archive: no stdout".into()))?;
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(seedd_core::serve::log_stderr(stderr));
    }
    let tenant = match scope {
        Scope::Tenant(t) => Some((state.clone(), t.clone())),
        Scope::All => None,
    };
    let limited = size.subst;
    let mut limits = state.git.limits;
    limits.total = limits.total.min(ARCHIVE_DEADLINE);
    let metrics = state.metrics.clone();
    let out = GitOutput::new(
        None,
        stdout,
        child,
        limits,
        None,
        Box::new(move |s| {
            // The slot is held until the body ends (or is aborted).
            drop(slot);
            if let Some((state, t)) = tenant {
                state.tenancy.tenants.add_egress(&t, "http", s.bytes);
            }
            if let Some(reason) = s.aborted {
                let bound = match reason {
                    "request_timeout" => Some("archive_deadline"),
                    "git_failed" if limited => Some("archive_memory"),
                    _ => None,
                };
                if let Some(bound) = bound {
                    metrics.web_bounded.with_label_values(&[bound]).inc();
                }
                tracing::info!(%rid, reason, bytes = s.bytes, "archive aborted");
            }
        }),
    )
    .failing_on_exit();
    let metrics = state.metrics.clone();
    let bounded = Bounded::new(out, bound, move || {
        metrics
            .web_bounded
            .with_label_values(&["archive_output"])
            .inc();
        tracing::warn!(%rid, bound, "archive cut: output over its bound (export-subst?)");
    });
    let body = match format {
        Format::TarGz => {
            let reader = tokio_util::io::StreamReader::new(bounded);
            let gz = async_compression::tokio::bufread::GzipEncoder::new(reader);
            Body::from_stream(tokio_util::io::ReaderStream::with_capacity(gz, 64 << 10))
        }
        Format::Tar | Format::Zip => Body::from_stream(bounded),
    };
    let mut resp = Response::new(body);
    *resp.headers_mut() = headers;
    Ok(resp)
}

/// A byte stream cut after `limit` bytes: the stream past it fails (the client sees a
/// truncated body) and the inner stream is dropped at once (for [`GitOutput`]: git killed).
pub(crate) struct Bounded<S> {
    inner: Option<S>,
    sent: u64,
    limit: u64,
    on_cut: Option<Box<dyn FnOnce() + Send>>,
}

impl<S> Bounded<S> {
    pub(crate) fn new(inner: S, limit: u64, on_cut: impl FnOnce() + Send + 'static) -> Self {
        Self {
            inner: Some(inner),
            sent: 0,
            limit,
            on_cut: Some(Box::new(on_cut)),
        }
    }
}

impl<S> futures_util::Stream for Bounded<S>
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Unpin,
{
    type Item = Result<bytes::Bytes, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match std::pin::Pin::new(inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                this.sent = this.sent.saturating_add(chunk.len() as u64);
                if this.sent > this.limit {
                    this.inner = None;
                    if let Some(f) = this.on_cut.take() {
                        f();
                    }
                    return Poll::Ready(Some(Err(std::io::Error::other(
                        "archive output over its bound",
                    ))));
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            other => other,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn formats_come_from_the_suffix() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            Format::detect(&format!("{sha}.tar.gz")),
            (sha, Some(Format::TarGz))
        );
        assert_eq!(
            Format::detect(&format!("{sha}.tar")),
            (sha, Some(Format::Tar))
        );
        assert_eq!(
            Format::detect(&format!("{sha}.zip")),
            (sha, Some(Format::Zip))
        );
        assert_eq!(Format::detect("main.tar.zst"), ("main.tar.zst", None));
        assert_eq!(Format::detect("v1.0"), ("v1.0", None));
        assert_eq!(Format::default(), Format::TarGz);
        assert_eq!(Format::TarGz.mime(), "application/gzip");
        assert_eq!(Format::Tar.mime(), "application/x-tar");
        assert_eq!(Format::Zip.mime(), "application/zip");
    }

    #[test]
    fn names_cannot_escape_the_archive_directory() {
        assert_eq!(safe_name("heartwood"), "heartwood");
        assert_eq!(safe_name("../../etc"), "-..-etc");
        assert_eq!(safe_name("my project/\"x\""), "my-project--x-");
        assert_eq!(safe_name("..."), "archive");
        assert_eq!(safe_name("héllo"), "h-llo");
    }

    #[test]
    fn the_prefix_is_on_unless_turned_off() {
        let q: PrefixQuery = serde_urlencoded_like("");
        assert!(q.prefix);
        let q: PrefixQuery = serde_urlencoded_like("prefix=false&deployment_id=x");
        assert!(!q.prefix);
    }

    /// A repository with `a` (3 bytes), `d/b` (5 bytes), `d/e/c` (7 bytes); returns its
    /// commit's tree.
    fn repo_with_files() -> (tempfile::TempDir, ObjectId) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let git = |args: &[&str]| seedd_core::git::testing::ok(dir, args);
        git(&["init", "-q"]);
        std::fs::create_dir_all(dir.join("d/e")).unwrap();
        std::fs::write(dir.join("a"), "aaa").unwrap();
        std::fs::write(dir.join("d/b"), "bbbbb").unwrap();
        std::fs::write(dir.join("d/e/c"), "ccccccc").unwrap();
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "files"]);
        let tree = git(&["rev-parse", "HEAD^{tree}"]);
        (tmp, ObjectId::from_hex(tree.as_bytes()).unwrap())
    }

    #[test]
    fn trees_are_sized_and_refused_over_the_limits() {
        let (tmp, tree) = repo_with_files();
        let repo = gix::open(tmp.path()).unwrap();
        let size = TreeSize {
            bytes: 15,
            entries: 5,
            subst: false,
            largest: 7,
        };
        assert_eq!(tree_size(&repo, tree, 100, 100).unwrap(), size);
        assert_eq!(tree_size(&repo, tree, 15, 100).unwrap(), size);
        let e = tree_size(&repo, tree, 14, 100).unwrap_err();
        assert_eq!(e.status(), axum::http::StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(e.to_string(), "archive is over the 14-byte limit");
        // a, d, d/b, d/e, d/e/c: five entries.
        assert!(tree_size(&repo, tree, 100, 5).is_ok());
        assert!(tree_size(&repo, tree, 100, 4).is_err());
        // The tree resolves from the commit and from `refs/heads/<branch>`, not from elsewhere.
        let head = repo.head_id().unwrap().detach();
        let branch = repo.head_name().unwrap().unwrap().shorten().to_string();
        assert_eq!(
            resolve(&repo, &Target::Oid(head), &[]).unwrap(),
            (head, tree)
        );
        assert_eq!(
            resolve(&repo, &Target::Ref(branch.clone()), &[]).unwrap(),
            (head, tree)
        );
        assert_eq!(
            resolve(&repo, &Target::Ref(format!("refs/heads/{branch}")), &[]).unwrap(),
            (head, tree)
        );
        for bad in ["HEAD", "refs/remotes/x", "../heads/x", "nope"] {
            assert!(
                resolve(&repo, &Target::Ref(bad.into()), &[]).is_err(),
                "{bad}"
            );
        }
        // A listed peer's branches and tags resolve by their full names; an unlisted peer's,
        // and a peer's other refs, do not.
        let (peer, other) = (NodeId::from([7u8; 32]), NodeId::from([8u8; 32]));
        for r in ["refs/heads/dev", "refs/tags/v1", "refs/rad/sigrefs"] {
            let full = format!("refs/namespaces/{peer}/{r}");
            seedd_core::git::testing::ok(tmp.path(), &["update-ref", &full, &head.to_string()]);
        }
        let peers = [peer];
        for ok in ["refs/heads/dev", "refs/tags/v1"] {
            let full = Target::Ref(format!("refs/namespaces/{peer}/{ok}"));
            assert_eq!(resolve(&repo, &full, &peers).unwrap(), (head, tree), "{ok}");
            assert!(
                resolve(&repo, &full, &[]).is_err(),
                "{ok} of an unlisted peer"
            );
        }
        for bad in [
            format!("refs/namespaces/{peer}/refs/rad/sigrefs"),
            format!("refs/namespaces/{peer}/refs/heads/nope"),
            format!("refs/namespaces/{peer}/refs/heads/../../../refs/heads/dev"),
            format!("refs/namespaces/{other}/refs/heads/dev"),
            "refs/namespaces/nonsense/refs/heads/dev".to_owned(),
        ] {
            assert!(
                resolve(&repo, &Target::Ref(bad.clone()), &peers).is_err(),
                "{bad}"
            );
        }
        // A blob is not an archive.
        let blob = super::super::source::lookup(&repo, tree, "a").unwrap().0;
        assert!(resolve(&repo, &Target::Oid(blob), &[]).is_err());
    }

    fn serde_urlencoded_like(s: &str) -> PrefixQuery {
        let uri: axum::http::Uri = format!("/x?{s}").parse().unwrap();
        Query::<PrefixQuery>::try_from_uri(&uri).unwrap().0
    }

    /// A `.gitattributes` anywhere in the tree that names `export-subst` is noticed.
    #[test]
    fn export_subst_attributes_are_noticed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let git = |args: &[&str]| seedd_core::git::testing::ok(dir, args);
        git(&["init", "-q"]);
        std::fs::create_dir_all(dir.join("d")).unwrap();
        std::fs::write(dir.join(".gitattributes"), "*.txt text\n").unwrap();
        std::fs::write(dir.join("d/x"), "$Format:%H$\n").unwrap();
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "plain"]);
        let repo = gix::open(dir).unwrap();
        let tree = |git: &dyn Fn(&[&str]) -> String| {
            ObjectId::from_hex(git(&["rev-parse", "HEAD^{tree}"]).as_bytes()).unwrap()
        };
        assert!(!tree_size(&repo, tree(&git), 1 << 20, 100).unwrap().subst);
        std::fs::write(dir.join("d/.gitattributes"), "x export-subst\n").unwrap();
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "subst"]);
        let repo = gix::open(dir).unwrap();
        assert!(tree_size(&repo, tree(&git), 1 << 20, 100).unwrap().subst);
    }

    /// The output past its bound fails the body and drops the source at once.
    #[tokio::test]
    async fn output_is_cut_at_its_bound() {
        use futures_util::StreamExt;
        assert_eq!(
            output_bound(10, 2),
            40 + 2 * OUTPUT_PER_ENTRY + OUTPUT_SLACK
        );
        assert_eq!(output_bound(u64::MAX, 1), u64::MAX);
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        struct Source(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Source {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let source = Source(dropped.clone());
        let chunks = futures_util::stream::iter(
            (0..100).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b'x'; 1000]))),
        )
        .map(move |c| {
            let _ = &source;
            c
        });
        let cut = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let c = cut.clone();
        let mut b = Bounded::new(Box::pin(chunks), 2_500, move || {
            c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        let mut got = 0;
        let mut failed = false;
        while let Some(x) = b.next().await {
            match x {
                Ok(chunk) => got += chunk.len(),
                Err(_) => failed = true,
            }
        }
        assert_eq!(got, 2_000);
        assert!(failed);
        assert_eq!(cut.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
        // Under the bound nothing is cut.
        let chunks = futures_util::stream::iter(
            (0..3).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b'x'; 1000]))),
        );
        let mut b = Bounded::new(chunks, 3_000, || panic!("cut"));
        let mut got = 0;
        while let Some(x) = b.next().await {
            got += x.unwrap().len();
        }
        assert_eq!(got, 3_000);
    }
}
