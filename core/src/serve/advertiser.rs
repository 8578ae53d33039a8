//! The in-process advertiser shared by HTTP and Radicle streams (issue 13 §2): a repository's
//! ref snapshot ([`RefCache`]) read on the blocking pool, the answers rendered from it, and
//! git's capability advertisements (probed once, on first use). `None` from any of these means
//! "ask git": the probe failed, or the refs cannot be read now.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::OnceCell;

use super::advert::{AdvertError, Caps, Snapshot};
use super::refcache::{Answer, Lookup, RefCache};
use super::GitServer;
use crate::blocking;
use crate::metrics::Metrics;
use seedd_proto::crypto::RepoId;

/// How long a snapshot read may take before the request falls back to git.
const READ_WAIT: Duration = Duration::from_secs(10);

/// The in-process advertiser: snapshots and git's capabilities (probed on first use).
pub struct Advertiser {
    pub refs: Arc<RefCache>,
    caps: OnceCell<Option<Caps>>,
    probe_dir: PathBuf,
    metrics: Arc<Metrics>,
}

impl Advertiser {
    /// `probe_dir`: a scratch path for the one-time capability probe (created and removed).
    pub fn new(refs: Arc<RefCache>, probe_dir: PathBuf, metrics: Arc<Metrics>) -> Self {
        Self {
            refs,
            caps: OnceCell::new(),
            probe_dir,
            metrics,
        }
    }

    /// git's capabilities, probed with `git` the first time; `None` if the probe failed.
    pub async fn caps(&self, git: &GitServer) -> Option<&Caps> {
        self.caps
            .get_or_init(|| async {
                match Caps::probe(git, &self.probe_dir).await {
                    Ok(caps) => Some(caps),
                    Err(e) => {
                        tracing::warn!(error = %crate::logging::chain(&e), "ref advertisements fall back to git upload-pack");
                        None
                    }
                }
            })
            .await
            .as_ref()
    }

    /// The answer `key` of `rid`'s ref snapshot (rendered with `render` once per snapshot),
    /// counted in `seedd_git_ref_snapshot_lookups_total`.
    pub async fn answer(
        &self,
        rid: RepoId,
        repo: &Path,
        key: Answer,
        render: impl FnOnce(&Snapshot) -> Vec<u8> + Send + 'static,
    ) -> Option<Bytes> {
        let refs = self.refs.clone();
        let path = repo.to_owned();
        let result = blocking::run(READ_WAIT, move || refs.answer(rid, &path, key, render)).await;
        self.counted(rid, result)
    }

    /// `render` of `rid`'s ref snapshot, not kept (for answers few requests share: a
    /// snapshot keeps only a few rendered answers), counted like [`answer`](Self::answer).
    pub async fn render(
        &self,
        rid: RepoId,
        repo: &Path,
        render: impl FnOnce(&Snapshot) -> Vec<u8> + Send + 'static,
    ) -> Option<Bytes> {
        let refs = self.refs.clone();
        let path = repo.to_owned();
        let read = move || {
            refs.get(rid, &path)
                .map(|(snap, lookup)| (Bytes::from(render(&snap)), lookup))
        };
        self.counted(rid, blocking::run(READ_WAIT, read).await)
    }

    fn counted(
        &self,
        rid: RepoId,
        result: Result<Result<(Bytes, Lookup), AdvertError>, blocking::BlockingError>,
    ) -> Option<Bytes> {
        match result {
            Ok(Ok((bytes, lookup))) => {
                let label = match lookup {
                    Lookup::Hit => "hit",
                    Lookup::Miss => "miss",
                };
                self.metrics.ref_snapshots.with_label_values(&[label]).inc();
                Some(bytes)
            }
            Ok(Err(e)) => {
                tracing::warn!(%rid, error = %crate::logging::chain(&e), "reading refs failed; asking git");
                None
            }
            Err(e) => {
                tracing::warn!(%rid, error = %crate::logging::chain(&e), "reading refs is slow; asking git");
                None
            }
        }
    }

    /// The fingerprint of `rid`'s ref snapshot (the pack cache's key), or `None` if the refs
    /// cannot be read now.
    pub async fn fingerprint(&self, rid: RepoId, repo: &Path) -> Option<Bytes> {
        self.answer(rid, repo, Answer::Fingerprint, |snap| {
            snap.fingerprint().to_vec()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::serve::View;

    fn git(repo: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    #[tokio::test]
    async fn rendered_answers_are_kept_or_not_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("r.git");
        Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(&repo)
            .status()
            .unwrap();
        let blob = git(&repo, &["hash-object", "-w", "--stdin"]);
        git(&repo, &["update-ref", "refs/tags/t", &blob]);
        let metrics = Arc::new(Metrics::new().unwrap());
        let refs = Arc::new(RefCache::new(1 << 20, Duration::from_secs(60)));
        let adv = Advertiser::new(refs.clone(), dir.path().join("probe"), metrics.clone());
        let rid = RepoId::from_oid_bytes([1; 20]);
        let count = |label: &str| metrics.ref_snapshots.with_label_values(&[label]).get();

        let big = b"x".repeat(1000);
        let kept = big.clone();
        let got = adv.render(rid, &repo, move |_| kept).await.unwrap();
        assert_eq!(&got[..], &big[..]);
        assert_eq!((count("miss"), count("hit")), (1, 0));
        let snapshot_only = refs.bytes();
        // Not kept: the snapshot's bytes did not grow; rendered again next time.
        let again = adv.render(rid, &repo, |_| b"y".to_vec()).await.unwrap();
        assert_eq!(&again[..], b"y");
        assert_eq!(refs.bytes(), snapshot_only);
        assert_eq!((count("miss"), count("hit")), (1, 1));
        // Kept: the second answer of the key is the first one's bytes.
        let key = || Answer::LsRefs(View::All, Default::default());
        let kept = big.clone();
        let first = adv.answer(rid, &repo, key(), move |_| kept).await.unwrap();
        assert_eq!(refs.bytes(), snapshot_only + big.len());
        let second = adv
            .answer(rid, &repo, key(), |_| b"z".to_vec())
            .await
            .unwrap();
        assert_eq!(first, second);
        // Unreadable refs: `None` (the caller asks git), nothing counted.
        let before = (count("miss"), count("hit"));
        let gone = RepoId::from_oid_bytes([2; 20]);
        let missing = dir.path().join("missing.git");
        assert!(adv.render(gone, &missing, |_| Vec::new()).await.is_none());
        assert_eq!((count("miss"), count("hit")), before);
    }
}
