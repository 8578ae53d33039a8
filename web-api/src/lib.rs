//! The bodies of the radicle-httpd JSON API (API 6.1.0, http-api.md) that seedd answers, as
//! serde types: `seedd-http` serialises them, the explorer contract tests (`tests/tests/web.rs`)
//! deserialise what a running seed answers into them, so a field renamed or added on one side
//! fails there. Field names follow httpd's JSON (camelCase where httpd uses it); every type
//! refuses unknown fields. No RocksDB, gix or tokio: ids are strings.
//!
//! Typed: the API roots, node documents (`/node`, `/info`, `/stats`, `/nodes/{nid}`),
//! seeding policies, repositories (`RepoInfo`, listings, search), remotes, commit headers,
//! blobs, counts, activity, diffs (files, hunks, lines, stats), a commit with its diff, a
//! comparison, issues, patches (comments, reactions, code locations, revisions, reviews,
//! merges), CI jobs, and the error body: every body the API answers. (`seedd-http` keeps the
//! COB bodies in its cache as `serde_json::Value`, made from these types.)
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One entry of an API root's `links`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    pub href: String,
    pub rel: String,
    /// Always `GET`.
    #[serde(rename = "type")]
    pub method: String,
}

impl Link {
    /// A `GET` link.
    pub fn get(href: &str, rel: &str) -> Self {
        Link {
            href: href.to_owned(),
            rel: rel.to_owned(),
            method: "GET".to_owned(),
        }
    }
}

/// `GET /api`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiRoot {
    pub path: String,
    pub links: Vec<Link>,
}

/// `GET /api/v1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct V1Root {
    pub message: String,
    pub service: String,
    pub version: String,
    pub api_version: String,
    pub nid: String,
    pub path: String,
    pub links: Vec<Link>,
}

/// `GET /api/v1/node` (and `node` of `/info`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Node {
    pub id: String,
    /// `/seedd:<version>/`, as nodes announce their agent.
    pub agent: String,
    /// The node's configuration as radicle-node's `Config` serialises (the explorer's
    /// `nodeConfigSchema`): addresses, policy, limits.
    pub config: Option<NodeConfig>,
    /// `running`.
    pub state: String,
    /// `[web]` of seedd's configuration (httpd: the profile's `web` settings); left out when
    /// not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub banner_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `config` of `/node`: radicle-node's `Config` fields the explorer reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeConfig {
    pub alias: String,
    pub peers: PeersConfig,
    pub listen: Vec<String>,
    /// `nid@host:port` of the persistent peers.
    pub connect: Vec<String>,
    pub external_addresses: Vec<String>,
    /// `ERROR`…`TRACE`.
    pub log: String,
    /// `main` or `test`.
    pub network: String,
    /// `always`, `never` or `auto`.
    pub relay: String,
    pub limits: NodeLimits,
    pub workers: usize,
    pub seeding_policy: DefaultSeedingPolicy,
}

/// `peers` of a node's config: `{type: "static" | "dynamic"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum PeersConfig {
    Static,
    Dynamic,
}

/// `limits` of a node's config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeLimits {
    pub routing_max_size: usize,
    /// Seconds.
    pub routing_max_age: u64,
    pub fetch_concurrency: usize,
    /// Seconds.
    pub gossip_max_age: u64,
    pub max_open_files: usize,
    pub rate: RateLimits,
    pub connection: ConnectionLimits,
}

/// `limits.rate`: token buckets for inbound and outbound gossip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimits {
    pub inbound: RateLimit,
    pub outbound: RateLimit,
}

/// One token bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RateLimit {
    pub fill_rate: f64,
    pub capacity: f64,
}

/// `limits.connection`: most sessions each way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionLimits {
    pub inbound: usize,
    pub outbound: usize,
}

/// `seedingPolicy` of a node's config: `{default: "allow", scope}` or `{default: "block"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "default", rename_all = "lowercase", deny_unknown_fields)]
pub enum DefaultSeedingPolicy {
    Allow { scope: String },
    Block,
}

/// `GET /api/v1/info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Info {
    pub node: Node,
    pub httpd: Httpd,
}

/// `httpd` of `/info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Httpd {
    pub search_available: bool,
}

/// `GET /api/v1/stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stats {
    pub repos: Total,
}

/// A count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Total {
    pub total: usize,
}

/// `GET /api/v1/nodes/{nid}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeIdentity {
    /// The node's alias where the seed knows it, else `null`.
    pub alias: Option<String>,
    pub did: String,
    pub ssh: Ssh,
}

/// A node's key in OpenSSH form and its SHA-256 fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ssh {
    pub full: String,
    pub hash: String,
}

/// One of `GET /api/v1/repos/{rid}/remotes`, or `…/remotes/{nid}`: a namespace with verified
/// signed refs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Remote {
    pub id: String,
    /// Omitted, never `null`, when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    pub delegate: bool,
    /// Branch name → commit.
    pub heads: BTreeMap<String, String>,
    /// `refs/heads/…` and `refs/tags/…` → object.
    pub refs: BTreeMap<String, String>,
}

/// Every error answer: `{error, code}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    pub error: String,
    pub code: u16,
}

/// A repository's seeding policy: `{"policy": "allow", "scope": "all"|"followed"}` or
/// `{"policy": "block"}` (`/repos/{rid}/policy`, entries of `/policies`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "lowercase", deny_unknown_fields)]
pub enum SeedingPolicy {
    Allow { scope: String },
    Block,
}

/// One entry of `GET /api/v1/node/policies/repos`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyEntry {
    pub rid: String,
    pub policy: SeedingPolicy,
}

/// A commit's author.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Person {
    pub name: String,
    pub email: String,
}

/// A commit's committer, with the commit time (seconds since the epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Committer {
    pub name: String,
    pub email: String,
    pub time: i64,
}

/// The explorer's `commitHeaderSchema`: history entries, `lastCommit`, `commit` of a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitHeader {
    pub id: String,
    pub author: Person,
    pub summary: String,
    pub description: String,
    pub parents: Vec<String>,
    pub committer: Committer,
}

/// `GET /api/v1/repos/{rid}/blob/{sha}/{path}` (and `/readme/{sha}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Blob {
    /// The content is base64 (not UTF-8, or holds a NUL byte).
    pub binary: bool,
    pub name: String,
    pub path: String,
    pub content: String,
    pub last_commit: CommitHeader,
}

/// `GET /api/v1/repos/{rid}/commits/{sha}/count`... and other commit counts: `{commits}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitCount {
    pub commits: usize,
}

/// `GET /api/v1/repos/{rid}/stats/tree/{sha}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeStats {
    pub commits: usize,
    pub branches: usize,
    pub contributors: usize,
}

/// `GET /api/v1/repos/{rid}/activity`: committer times (seconds) of the last 52 weeks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Activity {
    pub activity: Vec<i64>,
}

/// A person by their DID (delegates, COB authors); `alias` where the seed knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Author {
    /// `did:key:z6Mk…`.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
}

/// Who may see a repository: `{"type": "public"}` or `{"type": "private", "allow": [nid…]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Visibility {
    Public,
    Private {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        allow: Vec<String>,
    },
}

/// The project of a repository (`xyz.radicle.project`'s data).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Project {
    pub name: String,
    pub description: String,
    pub default_branch: String,
}

/// Issue counts of a repository.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssueCounts {
    pub open: usize,
    pub closed: usize,
}

/// Patch counts of a repository.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchCounts {
    pub open: usize,
    pub draft: usize,
    pub archived: usize,
    pub merged: usize,
}

/// `meta` of the project payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectMeta {
    /// The canonical head of the default branch.
    pub head: String,
    pub issues: IssueCounts,
    pub patches: PatchCounts,
}

/// The project payload of `RepoInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectPayload {
    pub data: Project,
    pub meta: ProjectMeta,
}

/// `payloads` of `RepoInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payloads {
    #[serde(rename = "xyz.radicle.project")]
    pub project: ProjectPayload,
}

/// An annotated or lightweight tag, peeled to its commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TagRef {
    pub commit: String,
}

/// The canonical branches (`refs/heads/…` → commit) and tags of a repository.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CanonicalRefs {
    pub refs: BTreeMap<String, String>,
    pub tags: BTreeMap<String, TagRef>,
}

/// The explorer's `repoSchema`: `GET /api/v1/repos/{rid}` and the entries of `/repos`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoInfo {
    pub rid: String,
    pub payloads: Payloads,
    pub delegates: Vec<Author>,
    pub threshold: usize,
    pub visibility: Visibility,
    /// Seeds the routing table knows (at least this one).
    pub seeding: usize,
    /// The tenant's short alias on its own hostname (`git clone https://<host>/<alias>.git`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refs: Option<CanonicalRefs>,
}

/// `payloads` of a search result: the project's data only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchPayloads {
    #[serde(rename = "xyz.radicle.project")]
    pub project: Project,
}

/// One result of `GET /api/v1/repos/search?q=`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchResult {
    pub rid: String,
    pub payloads: SearchPayloads,
    pub delegates: Vec<Author>,
    pub seeds: usize,
}

/// A blob embedded in a diff answer (`files` of a commit or comparison), by object id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlobContent {
    pub id: String,
    pub binary: bool,
    pub content: String,
}

/// One side of a changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffFile {
    pub oid: String,
    /// `tree`, `blob`, `blobExecutable`, `link` or `commit`.
    pub mode: String,
}

/// A line range of a hunk: `start..end`, 1-based (0 for an empty side at the top).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineRange {
    pub start: usize,
    pub end: usize,
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Line {
    #[serde(rename_all = "camelCase")]
    Context {
        line: String,
        line_no_old: usize,
        line_no_new: usize,
    },
    #[serde(rename_all = "camelCase")]
    Deletion { line: String, line_no: usize },
    #[serde(rename_all = "camelCase")]
    Addition { line: String, line_no: usize },
}

/// A hunk: its `@@` header, lines and ranges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hunk {
    pub header: String,
    pub lines: Vec<Line>,
    pub old: LineRange,
    pub new: LineRange,
}

/// Lines added and deleted in one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileStats {
    pub additions: usize,
    pub deletions: usize,
}

/// A file's diff: binary, or plain text in hunks (`truncated` when over the answer's budget:
/// stats only, no hunks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum DiffContent {
    Binary,
    Plain {
        hunks: Vec<Hunk>,
        stats: FileStats,
        /// `noneMissing`, `oldMissing`, `newMissing` or `bothMissing` (the final newline).
        eof: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        truncated: Option<bool>,
    },
}

/// One changed file of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase", deny_unknown_fields)]
pub enum FileDiff {
    Added {
        path: String,
        diff: DiffContent,
        new: DiffFile,
    },
    Deleted {
        path: String,
        diff: DiffContent,
        old: DiffFile,
    },
    Modified {
        path: String,
        diff: DiffContent,
        old: DiffFile,
        new: DiffFile,
    },
    /// A rename (git's `R`).
    Moved(Relocation),
    /// A copy (git's `C`).
    Copied(Relocation),
}

/// A moved or copied file: unchanged (same blob and mode), only `current`; changed, `old`,
/// `new` and `diff` (httpd's two shapes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Relocation {
    pub old_path: String,
    pub new_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<DiffFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<DiffFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<DiffFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<DiffContent>,
}

/// What a diff changed in all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DiffStats {
    pub files_changed: usize,
    pub insertions: usize,
    pub deletions: usize,
}

/// A diff: its files and stats.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Diff {
    pub files: Vec<FileDiff>,
    pub stats: DiffStats,
}

/// `GET /api/v1/repos/{rid}/commits/{sha}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitAnswer {
    pub commit: CommitHeader,
    pub diff: Diff,
    /// Blobs of the changed files, by object id (bounded).
    pub files: BTreeMap<String, BlobContent>,
    /// The canonical branches that contain the commit.
    pub branches: Vec<String>,
}

/// `GET /api/v1/repos/{rid}/diff/{base}/{oid}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Comparison {
    pub diff: Diff,
    pub files: BTreeMap<String, BlobContent>,
    pub commits: Vec<CommitHeader>,
}

/// A file embedded in a comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Embed {
    pub name: String,
    pub content: String,
}

/// One edit of a comment or a revision's description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    pub author: Author,
    pub body: String,
    pub timestamp: u64,
    pub embeds: Vec<Embed>,
}

/// Lines or characters of a file a code comment is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum CodeRange {
    Lines { range: LineRange },
    Chars { line: usize, range: LineRange },
}

/// Where in the code a comment or reaction is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeLocation {
    pub commit: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<CodeRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<CodeRange>,
}

/// One emoji and who reacted with it (at a code location, on a revision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reaction {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<CodeLocation>,
    pub emoji: String,
    pub authors: Vec<Author>,
}

/// A comment of an issue's discussion, a revision's discussion or a review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Comment {
    pub id: String,
    pub author: Author,
    pub body: String,
    pub edits: Vec<Edit>,
    pub embeds: Vec<Embed>,
    pub reactions: Vec<Reaction>,
    pub timestamp: u64,
    pub reply_to: Option<String>,
    pub resolved: bool,
    /// Patch comments only: present, `null` when the comment is about no code; absent on
    /// issue comments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Option<CodeLocation>>,
}

/// An issue's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase", deny_unknown_fields)]
pub enum IssueState {
    Open,
    /// `reason`: `other` or `solved`.
    Closed {
        reason: String,
    },
}

/// The explorer's `issueSchema`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Issue {
    pub id: String,
    pub author: Option<Author>,
    pub title: String,
    pub state: IssueState,
    pub assignees: Vec<Author>,
    pub discussion: Vec<Comment>,
    pub labels: Vec<String>,
}

/// A patch's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase", deny_unknown_fields)]
pub enum PatchState {
    Draft,
    Archived,
    Open {
        /// `[revision, commit]` pairs that conflict; omitted when none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        conflicts: Vec<(String, String)>,
    },
    Merged {
        revision: String,
        commit: String,
    },
}

/// A review of a revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Review {
    pub id: String,
    pub author: Author,
    /// `accept`, `reject` or `null`.
    pub verdict: Option<String>,
    pub summary: String,
    pub comments: Vec<Comment>,
    pub timestamp: u64,
}

/// A revision of a patch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Revision {
    pub id: String,
    pub author: Author,
    pub description: String,
    pub edits: Vec<Edit>,
    pub reactions: Vec<Reaction>,
    pub base: String,
    pub oid: String,
    pub refs: Vec<String>,
    pub discussions: Vec<Comment>,
    pub timestamp: u64,
    pub reviews: Vec<Review>,
}

/// A merge of a patch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Merge {
    pub author: Author,
    pub commit: String,
    pub timestamp: u64,
    pub revision: String,
}

/// The explorer's `patchSchema`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    pub id: String,
    pub author: Author,
    pub title: String,
    pub state: PatchState,
    /// `delegates`.
    pub target: String,
    pub labels: Vec<String>,
    pub merges: Vec<Merge>,
    pub assignees: Vec<Author>,
    pub revisions: Vec<Revision>,
}

/// One run of a CI job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobRun {
    pub run_id: String,
    pub node: Author,
    pub status: String,
    pub log: String,
}

/// A CI job of a commit (`/repos/{rid}/jobs/{sha}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Job {
    pub job_id: String,
    pub commit: String,
    pub runs: Vec<JobRun>,
}
