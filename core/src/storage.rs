//! Radicle storage layout on disk (protocol.md §2), read with gix.
//!
//! `storage/<rid without rad:>/` is a bare git repository. Top-level `refs/heads/*`, `refs/tags/*`,
//! `refs/rad/id` and `HEAD` are the canonical refs; each peer's data lives under
//! `refs/namespaces/<nid>/refs/…` and is covered by that peer's signed refs (`rad/sigrefs`).
//! This module reads and verifies; it decides no policy.

pub mod cob;
pub mod identity;
pub mod sigrefs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use identity::{Identity, IdentityError, Visibility};
pub(crate) use sigrefs::{FeatureLevel, SignedRefs, SigrefsError};

use seedd_proto::crypto::{NodeId, RepoId};

/// A gix error kept as the source of a storage error (gix has one error type per call, some
/// boxed already), so its chain survives up to where it is logged or answered.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct GitError(Box<dyn std::error::Error + Send + Sync>);

impl GitError {
    pub fn new(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(e.into())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("storage {path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("repository {rid} not found in storage")]
    NotFound { rid: RepoId },
    #[error("repository {rid}: {cause}")]
    Git { rid: RepoId, cause: GitError },
    #[error("repository {rid}: identity: {cause}")]
    Identity { rid: RepoId, cause: IdentityError },
}

/// A ref as stored: direct to an object, or symbolic to another ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefTarget {
    Oid(gix::ObjectId),
    Symbolic(String),
}

/// The storage root: one bare repository per RID.
#[derive(Debug, Clone)]
pub struct Storage {
    root: PathBuf,
}

impl Storage {
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StorageError> {
        let root = root.into();
        crate::fsutil::create_private_dir(&root).map_err(|source| StorageError::Io {
            path: root.clone(),
            cause: source,
        })?;
        Ok(Self { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn path_of(&self, rid: &RepoId) -> PathBuf {
        self.root.join(rid.canonical())
    }

    /// RIDs of every repository directory. Entries that are not RIDs are skipped (and logged).
    pub fn list(&self) -> Result<Vec<RepoId>, StorageError> {
        self.list_with(&|_| false)
    }

    /// [`Storage::list`], taking the entries whose RID `known` accepts without looking inside
    /// them (the start: seedd is the only writer of its storage, and the index knows what it
    /// holds; at 1M repositories the two `stat`s per entry were most of the listing).
    pub fn list_with(&self, known: &dyn Fn(&RepoId) -> bool) -> Result<Vec<RepoId>, StorageError> {
        let io = |source| StorageError::Io {
            path: self.root.clone(),
            cause: source,
        };
        let mut out = Vec::new();
        let mut seen = 0usize;
        for entry in std::fs::read_dir(&self.root).map_err(io)? {
            let entry = entry.map_err(io)?;
            seen += 1;
            if seen % 100_000 == 0 {
                tracing::info!(entries = seen, repos = out.len(), root = %self.root.display(), "listing storage");
            }
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') {
                continue;
            }
            match name.parse::<RepoId>() {
                Ok(rid)
                    if known(&rid)
                        || entry.path().join("HEAD").exists()
                        || entry.path().join("refs").is_dir() =>
                {
                    out.push(rid)
                }
                Ok(_) => {
                    tracing::warn!(path = %entry.path().display(), "skipping storage entry: not a git repository")
                }
                Err(_) => {
                    tracing::warn!(path = %entry.path().display(), "skipping storage entry: name is not a repository id")
                }
            }
        }
        out.sort();
        Ok(out)
    }

    pub fn repo(&self, rid: RepoId) -> Result<Repo, StorageError> {
        let path = self.path_of(&rid);
        if !path.is_dir() {
            return Err(StorageError::NotFound { rid });
        }
        let git = open_stored(&path).map_err(|e| StorageError::Git {
            rid,
            cause: GitError::new(e),
        })?;
        Ok(Repo { rid, path, git })
    }
}

/// Opens the bare repository of storage at `path`. Isolated: no global or system config and no
/// environment leaks into how storage is read. Opened as is (no `.git` probe: storage holds
/// bare repositories) and trusted as seedd's own files (seedd writes every repository's
/// config; no ownership walk and `realpath` of the path's components): a web listing page
/// opens ten repositories, and those checks were most of its CPU (perf, issue 30 §1).
pub fn open_stored(path: &Path) -> gix::Result<gix::Repository> {
    gix::open_opts(
        path,
        gix::open::Options::isolated()
            .open_path_as_is(true)
            .with_enforced_trust(gix::sec::Trust::Full),
    )
}

/// One repository in storage.
pub struct Repo {
    rid: RepoId,
    path: PathBuf,
    git: gix::Repository,
}

impl Repo {
    pub fn rid(&self) -> RepoId {
        self.rid
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StorageError {
        StorageError::Git {
            rid: self.rid,
            cause: GitError::new(e),
        }
    }

    /// Every ref (name → target), plus `HEAD`. Reads ref files and packed-refs only, no objects.
    pub fn refs(&self) -> Result<BTreeMap<String, RefTarget>, StorageError> {
        let mut out = BTreeMap::new();
        let platform = self.git.references().map_err(|e| self.err(e))?;
        for r in platform.all().map_err(|e| self.err(e))? {
            let r = r.map_err(|e| self.err(e))?;
            out.insert(r.name().as_bstr().to_string(), target_of(&r));
        }
        if let Ok(Some(head)) = self.git.try_find_reference("HEAD") {
            out.insert("HEAD".to_owned(), target_of(&head));
        }
        Ok(out)
    }

    /// Resolve a ref (following symbolic refs) to an object id.
    pub fn resolve(&self, name: &str) -> Result<Option<gix::ObjectId>, StorageError> {
        match self.git.try_find_reference(name).map_err(|e| self.err(e))? {
            None => Ok(None),
            Some(r) => match r.into_fully_peeled_id() {
                Ok(id) => Ok(Some(id.detach())),
                Err(_) => Ok(None),
            },
        }
    }

    /// The canonical identity (top-level `refs/rad/id`), or a delegate's if no canonical head
    /// exists yet.
    pub fn identity(&self) -> Result<Identity, StorageError> {
        let head = match self.resolve("refs/rad/id")? {
            Some(h) => h,
            None => {
                return Err(StorageError::Identity {
                    rid: self.rid,
                    cause: IdentityError::Missing,
                })
            }
        };
        identity::read(&self.git, head).map_err(|source| StorageError::Identity {
            rid: self.rid,
            cause: source,
        })
    }

    /// Node ids having signed refs in this repository.
    pub fn namespaces(refs: &BTreeMap<String, RefTarget>) -> Vec<NodeId> {
        refs.keys()
            .filter_map(|name| {
                let rest = name.strip_prefix("refs/namespaces/")?;
                let (nid, tail) = rest.split_once('/')?;
                (tail == "refs/rad/sigrefs").then(|| nid.parse().ok())?
            })
            .collect()
    }

    /// Read and verify `refs/namespaces/<nid>/refs/rad/sigrefs` (protocol.md §2.3).
    pub fn verify_sigrefs(&self, nid: &NodeId) -> Result<SignedRefs, SigrefsError> {
        let name = format!("refs/namespaces/{nid}/refs/rad/sigrefs");
        let tip = self
            .resolve(&name)
            .map_err(|e| SigrefsError::Storage(Box::new(e)))?
            .ok_or(SigrefsError::Missing)?;
        sigrefs::verify(&self.git, self.rid, nid, tip)
    }

    pub fn git(&self) -> &gix::Repository {
        &self.git
    }
}

/// `(name, oid)` of every ref of the repository at `path` that `git for-each-ref <pattern>`
/// lists, sorted by name, read in process (loose refs and `packed-refs`, no objects): a name
/// equal to `pattern`, or below it (`pattern` ending in `/`, or followed by `/`). A symbolic
/// ref gives the object it finally points at, an annotated tag its tag object (not peeled),
/// as git's `%(objectname)` does. The fetch path lists refs a dozen times per fetch; each
/// `git for-each-ref` process cost more than a millisecond of CPU to start.
pub fn refs_matching(path: &Path, pattern: &str) -> Result<Vec<(String, String)>, GitError> {
    // Isolated, as `Storage::repo`: nothing of the environment changes what we read.
    let repo = gix::open_opts(path, gix::open::Options::isolated()).map_err(GitError::new)?;
    let platform = repo.references().map_err(GitError::new)?;
    let iter = match pattern.rfind('/') {
        Some(i) => platform.prefixed(&pattern[..=i]),
        None => platform.all(),
    }
    .map_err(GitError::new)?;
    let mut out = Vec::new();
    for r in iter {
        let mut r = r.map_err(GitError::new)?;
        let name = r.name().as_bstr().to_string();
        let below = if pattern.ends_with('/') {
            name.starts_with(pattern)
        } else {
            name.strip_prefix(pattern)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        if !below {
            continue;
        }
        let oid = match r.target() {
            gix::refs::TargetRef::Object(oid) => oid.to_owned(),
            // A dangling symbolic ref has no object: git leaves it out too.
            gix::refs::TargetRef::Symbolic(_) => match r.follow_to_object() {
                Ok(id) => id.detach(),
                Err(_) => continue,
            },
        };
        out.push((name, oid.to_string()));
    }
    out.sort();
    Ok(out)
}

fn target_of(r: &gix::Reference<'_>) -> RefTarget {
    match r.target() {
        gix::refs::TargetRef::Object(oid) => RefTarget::Oid(oid.to_owned()),
        gix::refs::TargetRef::Symbolic(name) => RefTarget::Symbolic(name.as_bstr().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use crate::git::testing::ok as git;

    /// `list` looks inside each entry (a `HEAD` or `refs/`); `list_with` takes the entries it is
    /// told it knows as they are, and still looks inside the others.
    #[test]
    fn listing_looks_inside_only_the_unknown_entries() {
        use seedd_proto::crypto::RepoId;
        let dir = tempfile::tempdir().unwrap();
        let storage = super::Storage::open(dir.path()).unwrap();
        let [repo, emptied, stray] = [1u8, 2, 3].map(|n| RepoId::from_oid_bytes([n; 20]));
        std::fs::create_dir_all(storage.path_of(&repo).join("refs")).unwrap();
        // A held repository whose files were removed outside seedd, and an empty directory.
        std::fs::create_dir_all(storage.path_of(&emptied)).unwrap();
        std::fs::create_dir_all(storage.path_of(&stray)).unwrap();
        std::fs::create_dir_all(dir.path().join("not-a-rid")).unwrap();
        assert_eq!(storage.list().unwrap(), vec![repo]);
        let mut known = storage.list_with(&|rid| *rid == emptied).unwrap();
        known.sort();
        let mut want = vec![repo, emptied];
        want.sort();
        assert_eq!(
            known, want,
            "the known one taken as is, the stray one still looked at"
        );
    }

    /// `refs_matching` lists what `git for-each-ref <pattern>` lists, name and
    /// `%(objectname)`, for loose and packed refs, symbolic refs and annotated tags, and
    /// patterns that are whole names, directories with and without a trailing slash, and
    /// prefixes of longer names (which must not match).
    #[test]
    fn refs_matching_lists_what_git_for_each_ref_lists() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        git(repo, &["init", "-q", "--bare", "."]);
        let tree = git(repo, &["mktree"]);
        let tree = tree.as_str();
        let c1 = git(repo, &["commit-tree", tree, "-m", "one"]);
        let c1 = c1.as_str();
        let c2 = git(repo, &["commit-tree", tree, "-p", c1, "-m", "two"]);
        let c2 = c2.as_str();
        let nid = "z6MkfirstNamespace";
        for (name, oid) in [
            ("refs/rad/id", c1),
            ("refs/rad/identity", c2),
            ("refs/heads/main", c1),
            (
                &format!("refs/namespaces/{nid}/refs/heads/main") as &str,
                c2,
            ),
            (&format!("refs/namespaces/{nid}/refs/rad/sigrefs"), c1),
            ("refs/namespaces/z6Mkfirst/refs/heads/main", c1),
            ("refs/seedd-fetch/a", c2),
        ] {
            git(repo, &["update-ref", name, oid]);
        }
        git(repo, &["tag", "-a", "-m", "v1", "v1", c1]);
        git(repo, &["pack-refs", "--all"]);
        // Loose ones on top of the packed ones: one moved, one new, a symbolic one.
        git(repo, &["update-ref", "refs/heads/main", c2]);
        git(repo, &["update-ref", "refs/heads/dev", c1]);
        git(
            repo,
            &["symbolic-ref", "refs/heads/alias", "refs/heads/dev"],
        );
        for pattern in [
            "refs/",
            "refs/rad/id",
            "refs/rad/i",
            "refs/rad",
            "refs/seedd-fetch",
            "refs/heads/main",
            "refs/heads/",
            "refs/tags/",
            &format!("refs/namespaces/{nid}/"),
            &format!("refs/namespaces/{nid}/refs/rad/sigrefs"),
            "refs/namespaces/z6Mkfirst",
            "refs/nothing",
        ] {
            let expected: Vec<(String, String)> = git(
                repo,
                &["for-each-ref", "--format=%(refname) %(objectname)", pattern],
            )
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(n, o)| (n.to_owned(), o.to_owned()))
            .collect();
            let ours = super::refs_matching(repo, pattern).unwrap();
            assert_eq!(ours, expected, "pattern {pattern}");
        }
        assert_eq!(super::refs_matching(repo, "refs/").unwrap().len(), 10);
    }
}
