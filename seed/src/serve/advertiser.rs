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
use crate::crypto::RepoId;
use crate::metrics::Metrics;

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
    pub(crate) async fn caps(&self, git: &GitServer) -> Option<&Caps> {
        self.caps
            .get_or_init(|| async {
                match Caps::probe(git, &self.probe_dir).await {
                    Ok(caps) => Some(caps),
                    Err(e) => {
                        tracing::warn!(error = %e, "ref advertisements fall back to git upload-pack");
                        None
                    }
                }
            })
            .await
            .as_ref()
    }

    /// The answer `key` of `rid`'s ref snapshot (rendered with `render` once per snapshot),
    /// counted in `seedd_git_ref_snapshot_lookups_total`.
    pub(crate) async fn answer(
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
    pub(crate) async fn render(
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
                tracing::warn!(%rid, error = %e, "reading refs failed; asking git");
                None
            }
            Err(e) => {
                tracing::warn!(%rid, error = %e, "reading refs is slow; asking git");
                None
            }
        }
    }

    /// The fingerprint of `rid`'s ref snapshot (the pack cache's key), or `None` if the refs
    /// cannot be read now.
    pub(crate) async fn fingerprint(&self, rid: RepoId, repo: &Path) -> Option<Bytes> {
        self.answer(rid, repo, Answer::Fingerprint, |snap| {
            snap.fingerprint().to_vec()
        })
        .await
    }
}
