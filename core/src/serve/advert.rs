//! Ref advertisement without git (issue 13 §2): the v0/v1 `info/refs` advertisement and the
//! protocol-v2 `ls-refs` answer, written from an immutable [`Snapshot`] of a repository's refs
//! instead of by a `git upload-pack` process.
//!
//! Byte-for-byte what `git upload-pack` (2.47) writes for the same refs and configuration
//! (`upload-pack.c` `write_v0_ref`, `ls-refs.c` `send_ref`/`send_possibly_unborn_head`, `refs.c`
//! `ref_is_hidden`); the tests compare with the real thing for every [`View`]. The parts git
//! derives from its version and configuration — the v0 capability list and the whole v2
//! capability advertisement — are not re-implemented: [`Caps::probe`] asks the installed git
//! once, through the same [`GitServer`] that serves packs, so they match by construction.
//!
//! Git's ordering: `HEAD` first (when it resolves), then refs by full name, bytewise; a
//! namespace view lists `refs/namespaces/<nid>/refs/*` with that prefix stripped.

use std::path::Path;

use bytes::Bytes;
use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;

use super::{GitServer, Service, View};

#[derive(Debug, thiserror::Error)]
pub enum AdvertError {
    #[error("reading refs: {0}")]
    Refs(Box<dyn std::error::Error + Send + Sync>),
    #[error("peeling {oid}: {cause}")]
    Peel {
        oid: ObjectId,
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("probing git's capabilities: {0}")]
    Probe(String),
}

fn refs_err(e: impl std::error::Error + Send + Sync + 'static) -> AdvertError {
    AdvertError::Refs(Box::new(e))
}

/// One ref under `refs/`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    name: BString,
    target: Target,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A direct ref; `peeled` when it names an annotated tag (the first non-tag object).
    Direct {
        oid: ObjectId,
        peeled: Option<ObjectId>,
    },
    /// A symbolic ref (resolved through the snapshot when written).
    Symbolic(BString),
}

/// Every ref of a repository at one moment, sorted by name; `HEAD` and namespaced `HEAD`s
/// included. Immutable: a change builds a new one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Refs under `refs/`, sorted bytewise by full name.
    refs: Vec<Entry>,
    /// The top-level `HEAD`.
    head: Option<Target>,
}

/// Longest symbolic-ref chain followed (git's `SYMREF_MAXDEPTH` is 5).
const SYMREF_MAX_DEPTH: usize = 5;

/// A resolved ref as git's iteration sees it.
struct Resolved<'a> {
    oid: Option<ObjectId>,
    peeled: Option<ObjectId>,
    /// The final target name when the ref is symbolic.
    symref_target: Option<&'a BStr>,
}

impl Snapshot {
    /// Reads every ref of `repo` (loose and packed) and peels annotated tags.
    pub fn read(repo: &gix::Repository) -> Result<Self, AdvertError> {
        let platform = repo.references().map_err(refs_err)?;
        let mut refs = Vec::new();
        for r in platform.all().map_err(refs_err)? {
            let r = r.map_err(|e| AdvertError::Refs(e.into()))?;
            let name = r.name().as_bstr().to_owned();
            refs.push(Entry {
                name,
                target: target_of(repo, &r)?,
            });
        }
        refs.sort_by(|a, b| a.name.cmp(&b.name));
        let head = match repo.try_find_reference("HEAD") {
            Ok(Some(h)) => Some(target_of(repo, &h)?),
            Ok(None) => None,
            Err(e) => return Err(refs_err(e)),
        };
        Ok(Self { refs, head })
    }

    /// A snapshot of refs read elsewhere (the index keeps every ref with its peeled target):
    /// `refs` are full names under `refs/`, in any order; `head` the top-level `HEAD`.
    pub(crate) fn from_parts(head: Option<Target>, refs: Vec<(BString, Target)>) -> Self {
        let mut refs: Vec<Entry> = refs
            .into_iter()
            .map(|(name, target)| Entry { name, target })
            .collect();
        // Sorted already when read in key order: then this is one pass.
        refs.sort_by(|a, b| a.name.cmp(&b.name));
        Self { refs, head }
    }

    /// Approximate heap bytes held (for the cache's budget).
    pub fn heap_bytes(&self) -> usize {
        self.refs
            .iter()
            .map(|e| {
                std::mem::size_of::<Entry>()
                    + e.name.len()
                    + match &e.target {
                        Target::Symbolic(t) => t.len(),
                        Target::Direct { .. } => 0,
                    }
            })
            .sum()
    }

    /// A digest of every ref and its target (`HEAD` included): equal for equal refs, different
    /// after any change. The pack cache keys responses with it.
    pub fn fingerprint(&self) -> [u8; 32] {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        let target = |h: &mut sha2::Sha256, t: &Target| match t {
            Target::Direct { oid, .. } => h.update(oid.as_bytes()),
            Target::Symbolic(name) => {
                h.update(b"ref: ");
                h.update(name.as_slice());
            }
        };
        if let Some(head) = &self.head {
            h.update(b"HEAD\0");
            target(&mut h, head);
        }
        h.update(b"\n");
        for e in &self.refs {
            h.update(e.name.as_slice());
            h.update(b"\0");
            target(&mut h, &e.target);
            h.update(b"\n");
        }
        h.finalize().into()
    }

    /// Number of refs under `refs/`.
    pub fn len(&self) -> usize {
        self.refs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    fn find(&self, name: &BStr) -> Option<&Target> {
        if name == "HEAD" {
            return self.head.as_ref();
        }
        self.refs
            .binary_search_by(|e| e.name.as_bstr().cmp(name))
            .ok()
            .and_then(|i| self.refs.get(i))
            .map(|e| &e.target)
    }

    /// Follows symbolic refs. `None` for a chain that is too deep; an unborn target gives
    /// `oid: None` with its name.
    fn resolve<'a>(&'a self, target: &'a Target) -> Option<Resolved<'a>> {
        let mut current = target;
        let mut symref_target = None;
        for _ in 0..=SYMREF_MAX_DEPTH {
            match current {
                Target::Direct { oid, peeled } => {
                    return Some(Resolved {
                        oid: Some(*oid),
                        peeled: *peeled,
                        symref_target,
                    })
                }
                Target::Symbolic(next) => {
                    symref_target = Some(next.as_bstr());
                    match self.find(next.as_bstr()) {
                        Some(t) => current = t,
                        None => {
                            return Some(Resolved {
                                oid: None,
                                peeled: None,
                                symref_target,
                            })
                        }
                    }
                }
            }
        }
        None
    }
}

fn target_of(repo: &gix::Repository, r: &gix::Reference<'_>) -> Result<Target, AdvertError> {
    Ok(match r.target() {
        gix::refs::TargetRef::Symbolic(name) => Target::Symbolic(name.as_bstr().to_owned()),
        gix::refs::TargetRef::Object(oid) => {
            let oid = oid.to_owned();
            Target::Direct {
                oid,
                peeled: peel(repo, oid)?,
            }
        }
    })
}

/// The first non-tag object `oid` leads to, when `oid` is an annotated tag. A missing object
/// is not an error (git advertises the ref without a peeled line).
pub(crate) fn peel(repo: &gix::Repository, oid: ObjectId) -> Result<Option<ObjectId>, AdvertError> {
    Ok(peel_kind(repo, oid)?.and_then(|p| p.tag_target))
}

/// What a ref's object leads to ([`peel_kind`]).
pub(crate) struct Peeled {
    /// The first non-tag object, when the object is an annotated tag.
    pub(crate) tag_target: Option<ObjectId>,
    /// The kind of object the ref ends at (after its tags).
    pub(crate) kind: gix::object::Kind,
}

/// [`peel`], with the kind of object `oid` ends at (from the object headers: only tags are
/// decoded); `Ok(None)` for a missing object.
pub(crate) fn peel_kind(
    repo: &gix::Repository,
    oid: ObjectId,
) -> Result<Option<Peeled>, AdvertError> {
    let header = match repo.find_header(oid) {
        Ok(h) => h,
        Err(_) => return Ok(None),
    };
    if header.kind() != gix::object::Kind::Tag {
        return Ok(Some(Peeled {
            tag_target: None,
            kind: header.kind(),
        }));
    }
    let object = repo.find_object(oid).map_err(|e| AdvertError::Peel {
        oid,
        cause: Box::new(e),
    })?;
    let peeled = object.peel_tags_to_end().map_err(|e| AdvertError::Peel {
        oid,
        cause: Box::new(e),
    })?;
    Ok(Some(Peeled {
        tag_target: Some(peeled.id),
        kind: peeled.kind,
    }))
}

/// What a view shows: its namespace prefix (stripped from names) and `uploadpack.hideRefs`.
struct Scope {
    namespace: Option<String>,
    hidden: &'static [&'static str],
}

/// `uploadpack.hideRefs` of [`View::Canonical`] as `GitServer` configures it, with git's
/// parsing applied (trailing slashes stripped), in configuration order.
const CANONICAL_HIDDEN: &[&str] = &["refs", "!refs/heads", "!refs/tags", "!refs/rad/id"];

impl Scope {
    fn of(view: View) -> Self {
        match view {
            View::Canonical => Self {
                namespace: None,
                hidden: CANONICAL_HIDDEN,
            },
            View::Namespace(nid) => Self {
                namespace: Some(format!("refs/namespaces/{nid}/")),
                hidden: &[],
            },
            View::All => Self {
                namespace: None,
                // `GitServer` hides a fetch in progress from every `All` view.
                hidden: &["refs/seedd-fetch"],
            },
        }
    }

    fn prefix(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }

    /// git's `strip_namespace`: `None` outside the namespace.
    fn strip<'a>(&self, full: &'a BStr) -> Option<&'a BStr> {
        full.strip_prefix(self.prefix().as_bytes())
            .map(|b| b.as_bstr())
    }

    /// git's `ref_is_hidden`: the last matching pattern decides; `!` negates, `^` matches the
    /// full (namespaced) name.
    fn is_hidden(&self, name: &BStr, full: &BStr) -> bool {
        for pattern in self.hidden.iter().rev() {
            let (neg, pattern) = match pattern.strip_prefix('!') {
                Some(p) => (true, p),
                None => (false, *pattern),
            };
            let (subject, pattern) = match pattern.strip_prefix('^') {
                Some(p) => (full, p),
                None => (name, pattern),
            };
            if let Some(rest) = subject.strip_prefix(pattern.as_bytes()) {
                if rest.is_empty() || rest.first() == Some(&b'/') {
                    return !neg;
                }
            }
        }
        false
    }

    /// Refs git's `for_each_namespaced_ref` visits: under `<namespace>refs/`, in order.
    fn refs<'a>(&'a self, snap: &'a Snapshot) -> impl Iterator<Item = (&'a BStr, &'a Entry)> + 'a {
        let under = format!("{}refs/", self.prefix());
        let start = snap
            .refs
            .partition_point(|e| e.name.as_bstr() < under.as_bytes().as_bstr());
        snap.refs[start..]
            .iter()
            .take_while(move |e| e.name.starts_with(under.as_bytes()))
            .filter_map(move |e| self.strip(e.name.as_bstr()).map(|n| (n, e)))
    }

    /// Refs git's `refs_for_each_fullref_in_prefixes` visits for `ls-refs`: every ref whose
    /// full name starts with the namespace (for a namespace view that includes its own `HEAD`,
    /// which git 2.47 then lists a second time), in order.
    fn fullrefs<'a>(
        &'a self,
        snap: &'a Snapshot,
    ) -> impl Iterator<Item = (&'a BStr, &'a Entry)> + 'a {
        let prefix = self.prefix().as_bytes().as_bstr();
        let start = snap.refs.partition_point(|e| e.name.as_bstr() < prefix);
        snap.refs[start..]
            .iter()
            .take_while(move |e| e.name.starts_with(prefix))
            .filter_map(move |e| self.strip(e.name.as_bstr()).map(|n| (n, e)))
    }

    /// This view's `HEAD`: its full name and target.
    fn head<'a>(&self, snap: &'a Snapshot) -> (BString, Option<&'a Target>) {
        match &self.namespace {
            None => ("HEAD".into(), snap.head.as_ref()),
            Some(ns) => {
                let full: BString = format!("{ns}HEAD").into();
                let target = snap.find(full.as_bstr());
                (full, target)
            }
        }
    }
}

/// What git derives from its version and configuration, asked once of the installed git.
#[derive(Debug, Clone)]
pub struct Caps {
    /// The v0 capability list before and after the `symref=` item (which depends on HEAD).
    v0_before: String,
    v0_after: String,
    /// The whole v2 capability advertisement (ends with a flush).
    v2: Bytes,
    /// What a stateful `git upload-pack` of a Radicle stream ([`Service::Stream`]) sends first.
    v2_stream: Bytes,
}

/// The branch `HEAD` names in the probe repository (its `symref=` item is cut out).
const PROBE_BRANCH: &str = "refs/heads/seedd-capability-probe";

impl Caps {
    /// Runs `git upload-pack --advertise-refs` (v0 and v2) through `server` on a repository
    /// made in `scratch` (created, then removed) whose `HEAD` names one commit.
    pub(crate) async fn probe(server: &GitServer, scratch: &Path) -> Result<Self, AdvertError> {
        let probe = |e: String| AdvertError::Probe(e);
        let _ = std::fs::remove_dir_all(scratch);
        make_probe_repo(server, scratch).await.map_err(probe)?;
        let result = async {
            let v0 = advertise_with_git(server, scratch, View::All, None)
                .await
                .map_err(probe)?;
            let v2 = advertise_with_git(server, scratch, View::All, Some("version=2"))
                .await
                .map_err(probe)?;
            let stream = stream_advertisement_with_git(server, scratch)
                .await
                .map_err(probe)?;
            Self::from_probe(&v0, Bytes::from(v2), Bytes::from(stream))
        }
        .await;
        let _ = std::fs::remove_dir_all(scratch);
        result
    }

    fn from_probe(v0: &[u8], v2: Bytes, v2_stream: Bytes) -> Result<Self, AdvertError> {
        let bad = |what: &str| AdvertError::Probe(format!("unexpected v0 advertisement: {what}"));
        let first = first_pkt_payload(v0).ok_or_else(|| bad("no pkt-line"))?;
        let nul = first
            .iter()
            .position(|b| *b == 0)
            .ok_or_else(|| bad("no capabilities"))?;
        let caps = first
            .get(nul + 1..)
            .and_then(|c| c.strip_suffix(b"\n"))
            .ok_or_else(|| bad("no newline"))?;
        let caps = std::str::from_utf8(caps).map_err(|_| bad("not UTF-8"))?;
        let item = format!(" symref=HEAD:{PROBE_BRANCH}");
        let (before, after) = caps
            .split_once(&item)
            .ok_or_else(|| bad("no symref item"))?;
        Ok(Self {
            v0_before: before.to_owned(),
            v0_after: after.to_owned(),
            v2,
            v2_stream,
        })
    }

    /// The v2 capability advertisement (`GET info/refs` with `Git-Protocol: version=2`).
    pub fn v2(&self) -> Bytes {
        self.v2.clone()
    }

    /// The v2 capability advertisement a Radicle stream starts with (`ref-in-want`, no
    /// `unborn`: [`Service::Stream`]'s settings).
    pub fn v2_stream(&self) -> Bytes {
        self.v2_stream.clone()
    }
}

fn first_pkt_payload(data: &[u8]) -> Option<&[u8]> {
    let len = usize::from_str_radix(std::str::from_utf8(data.get(..4)?).ok()?, 16).ok()?;
    data.get(4..len)
}

async fn make_probe_repo(server: &GitServer, dir: &Path) -> Result<(), String> {
    let run = |args: Vec<String>, input: Option<&'static [u8]>| {
        let server = server.clone();
        async move {
            let mut cmd = server.command();
            cmd.args(&args)
                .env("GIT_AUTHOR_NAME", "seedd")
                .env("GIT_AUTHOR_EMAIL", "seedd@localhost")
                .env("GIT_COMMITTER_NAME", "seedd")
                .env("GIT_COMMITTER_EMAIL", "seedd@localhost")
                .stdin(if input.is_some() {
                    std::process::Stdio::piped()
                } else {
                    std::process::Stdio::null()
                })
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = cmd.spawn().map_err(|e| format!("git {args:?}: {e}"))?;
            if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
                use tokio::io::AsyncWriteExt;
                stdin
                    .write_all(input)
                    .await
                    .map_err(|e| format!("git {args:?}: {e}"))?;
            }
            let out = child
                .wait_with_output()
                .await
                .map_err(|e| format!("git {args:?}: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "git {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        }
    };
    let d = dir.display().to_string();
    run(
        vec!["init".into(), "-q".into(), "--bare".into(), d.clone()],
        None,
    )
    .await?;
    let tree = run(vec!["-C".into(), d.clone(), "mktree".into()], Some(b"")).await?;
    let commit = run(
        vec![
            "-C".into(),
            d.clone(),
            "commit-tree".into(),
            tree,
            "-m".into(),
            "probe".into(),
        ],
        None,
    )
    .await?;
    run(
        vec![
            "-C".into(),
            d.clone(),
            "update-ref".into(),
            PROBE_BRANCH.into(),
            commit,
        ],
        None,
    )
    .await?;
    run(
        vec![
            "-C".into(),
            d,
            "symbolic-ref".into(),
            "HEAD".into(),
            PROBE_BRANCH.into(),
        ],
        None,
    )
    .await?;
    Ok(())
}

/// `git upload-pack --advertise-refs --stateless-rpc` output for `repo` (the probe and tests).
pub(crate) async fn advertise_with_git(
    server: &GitServer,
    repo: &Path,
    view: View,
    protocol: Option<&str>,
) -> Result<Vec<u8>, String> {
    let what = "git upload-pack --advertise-refs";
    git_output(server, repo, Service::AdvertiseRefs, view, protocol, what).await
}

/// What a stateful protocol-v2 `git upload-pack` of a Radicle stream writes before reading
/// anything: its capability advertisement (it exits at the end of its input, closed at once).
pub(crate) async fn stream_advertisement_with_git(
    server: &GitServer,
    repo: &Path,
) -> Result<Vec<u8>, String> {
    let what = "git upload-pack (stream)";
    git_output(
        server,
        repo,
        Service::Stream,
        View::All,
        Some("version=2"),
        what,
    )
    .await
}

/// Everything `git upload-pack` as `service` writes with its input closed at once, if it
/// succeeds (`what` names it in the error).
async fn git_output(
    server: &GitServer,
    repo: &Path,
    service: Service,
    view: View,
    protocol: Option<&str>,
    what: &str,
) -> Result<Vec<u8>, String> {
    use tokio::io::AsyncReadExt;
    let mut process = server
        .spawn(repo, service, view, protocol)
        .map_err(|e| e.to_string())?;
    drop(process.stdin.take());
    let mut out = Vec::new();
    process
        .stdout
        .read_to_end(&mut out)
        .await
        .map_err(|e| e.to_string())?;
    let status = process.child.wait().await.map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("{what}: {status}"));
    }
    Ok(out)
}

fn pkt(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(format!("{:04x}", payload.len() + 4).as_bytes());
    out.extend_from_slice(payload);
}

const FLUSH: &[u8] = b"0000";
const NULL_OID: &str = "0000000000000000000000000000000000000000";

/// The v0/v1 advertisement `git upload-pack --stateless-rpc --advertise-refs` writes (without
/// the `# service=` preamble smart HTTP puts before it).
pub fn advertise_v0(snap: &Snapshot, view: View, caps: &Caps) -> Vec<u8> {
    let scope = Scope::of(view);
    let mut out = Vec::with_capacity(64 * (snap.len() + 1));
    let (head_full, head) = scope.head(snap);
    let head = head.and_then(|t| snap.resolve(t));
    // `symref=` items: HEAD's, when it resolves and is symbolic (only HEAD, like git 2.47).
    let mut symref = String::new();
    if let Some(Resolved {
        oid: Some(_),
        symref_target: Some(target),
        ..
    }) = &head
    {
        if let Some(target) = scope.strip(target) {
            symref = format!(" symref=HEAD:{target}");
        }
    }
    let mut capabilities = Some(format!("{}{symref}{}", caps.v0_before, caps.v0_after));
    let mut line = |out: &mut Vec<u8>, name: &BStr, oid: ObjectId, peeled: Option<ObjectId>| {
        let mut payload = Vec::with_capacity(64 + name.len());
        payload.extend_from_slice(oid.to_hex().to_string().as_bytes());
        payload.push(b' ');
        payload.extend_from_slice(name);
        if let Some(caps) = capabilities.take() {
            payload.push(0);
            payload.extend_from_slice(caps.as_bytes());
        }
        payload.push(b'\n');
        pkt(out, &payload);
        if let Some(peeled) = peeled {
            let mut payload = Vec::with_capacity(64 + name.len());
            payload.extend_from_slice(peeled.to_hex().to_string().as_bytes());
            payload.push(b' ');
            payload.extend_from_slice(name);
            payload.extend_from_slice(b"^{}\n");
            pkt(out, &payload);
        }
    };
    if let Some(Resolved {
        oid: Some(oid),
        peeled,
        ..
    }) = head
    {
        if !scope.is_hidden("HEAD".into(), head_full.as_bstr()) {
            line(&mut out, "HEAD".into(), oid, peeled);
        }
    }
    for (name, entry) in scope.refs(snap) {
        if scope.is_hidden(name, entry.name.as_bstr()) {
            continue;
        }
        // Dangling symbolic refs are skipped, like git's iteration does.
        if let Some(Resolved {
            oid: Some(oid),
            peeled,
            ..
        }) = snap.resolve(&entry.target)
        {
            line(&mut out, name, oid, peeled);
        }
    }
    if let Some(caps) = capabilities.take() {
        let mut payload = format!("{NULL_OID} capabilities^{{}}").into_bytes();
        payload.push(0);
        payload.extend_from_slice(caps.as_bytes());
        payload.push(b'\n');
        pkt(&mut out, &payload);
    }
    out.extend_from_slice(FLUSH);
    out
}

/// The arguments of a protocol-v2 `ls-refs` request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LsRefs {
    pub peel: bool,
    pub symrefs: bool,
    pub unborn: bool,
    pub prefixes: Vec<BString>,
}

/// git's `TOO_MANY_PREFIXES`: at this many, prefixes are ignored (everything is listed).
const TOO_MANY_PREFIXES: usize = 65536;

/// Largest request body parsed here (anything bigger goes to git).
pub const MAX_LS_REFS_REQUEST: usize = 1 << 20;

impl LsRefs {
    /// Parses a whole stateless-rpc request body. `None` unless it is exactly one well-formed
    /// `command=ls-refs` request with arguments this module answers like git; anything else
    /// (a `fetch`, an unknown argument, trailing bytes) is for `git upload-pack`.
    pub fn parse(body: &[u8]) -> Option<Self> {
        if body.len() > MAX_LS_REFS_REQUEST {
            return None;
        }
        let mut rest = body;
        let mut next = || -> Option<Option<&[u8]>> {
            let len = usize::from_str_radix(std::str::from_utf8(rest.get(..4)?).ok()?, 16).ok()?;
            match len {
                0 => {
                    rest = rest.get(4..)?;
                    Some(None)
                }
                1 => {
                    rest = rest.get(4..)?;
                    Some(Some(b"\x01"))
                }
                2 | 3 => None,
                n => {
                    let payload = rest.get(4..n)?;
                    rest = rest.get(n..)?;
                    Some(Some(payload.strip_suffix(b"\n").unwrap_or(payload)))
                }
            }
        };
        if next()?? != b"command=ls-refs" {
            return None;
        }
        // Capabilities until the delimiter; only these leave the answer unchanged.
        loop {
            let line = next()??;
            if line == b"\x01" {
                break;
            }
            let ok = line.starts_with(b"agent=")
                || line == b"object-format=sha1"
                || line.starts_with(b"session-id=");
            if !ok {
                return None;
            }
        }
        let mut args = Self::default();
        loop {
            match next()? {
                None => break,
                Some(b"peel") => args.peel = true,
                Some(b"symrefs") => args.symrefs = true,
                Some(b"unborn") => args.unborn = true,
                Some(line) => {
                    let prefix = line.strip_prefix(b"ref-prefix ")?;
                    if args.prefixes.len() < TOO_MANY_PREFIXES {
                        args.prefixes.push(prefix.into());
                    }
                }
            }
        }
        if !rest.is_empty() {
            return None;
        }
        if args.prefixes.len() >= TOO_MANY_PREFIXES {
            args.prefixes.clear();
        }
        Some(args)
    }

    /// The arguments as a Radicle stream's `git upload-pack` reads them: it runs with
    /// `lsrefs.unborn=ignore`, so `unborn` is ignored.
    pub fn for_stream(mut self) -> Self {
        self.unborn = false;
        self
    }

    fn matches(&self, name: &BStr) -> bool {
        self.prefixes.is_empty() || self.prefixes.iter().any(|p| name.starts_with(p))
    }
}

/// The `ls-refs` answer `git upload-pack` (v2, `lsrefs.unborn` = advertise, the default)
/// writes for `args`.
pub fn ls_refs(snap: &Snapshot, view: View, args: &LsRefs) -> Vec<u8> {
    let scope = Scope::of(view);
    let mut out = Vec::with_capacity(64 * (snap.len() + 1));
    let mut line = |name: &BStr, full: &BStr, resolved: &Resolved<'_>| {
        if scope.is_hidden(name, full) || !args.matches(name) {
            return;
        }
        let mut payload = Vec::with_capacity(128 + name.len());
        match resolved.oid {
            Some(oid) => payload.extend_from_slice(oid.to_hex().to_string().as_bytes()),
            None => payload.extend_from_slice(b"unborn"),
        }
        payload.push(b' ');
        payload.extend_from_slice(name);
        if args.symrefs {
            if let Some(target) = resolved.symref_target {
                payload.extend_from_slice(b" symref-target:");
                // git prints the target whole when it is outside the namespace.
                payload.extend_from_slice(scope.strip(target).unwrap_or(target));
            }
        }
        if args.peel {
            if let (Some(_), Some(peeled)) = (resolved.oid, resolved.peeled) {
                payload.extend_from_slice(b" peeled:");
                payload.extend_from_slice(peeled.to_hex().to_string().as_bytes());
            }
        }
        payload.push(b'\n');
        pkt(&mut out, &payload);
    };
    let (head_full, head) = scope.head(snap);
    if let Some(resolved) = head.and_then(|t| snap.resolve(t)) {
        let unborn_ok = args.unborn && args.symrefs && resolved.symref_target.is_some();
        if resolved.oid.is_some() || unborn_ok {
            line("HEAD".into(), head_full.as_bstr(), &resolved);
        }
    }
    for (name, entry) in scope.fullrefs(snap) {
        if let Some(resolved @ Resolved { oid: Some(_), .. }) = snap.resolve(&entry.target) {
            line(name, entry.name.as_bstr(), &resolved);
        }
    }
    out.extend_from_slice(FLUSH);
    out
}

#[cfg(test)]
mod tests;
