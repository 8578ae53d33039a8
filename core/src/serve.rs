//! Git serving shared by HTTP and Radicle streams: ref advertisement and pack generation by
//! `git upload-pack`, admission control, bounded streaming, ref snapshots and the pack cache.
//!
//! Why real `git upload-pack`: it has reachability bitmaps, verbatim pack reuse, delta search,
//! shallow/filter support and decades of hardening; gix has no server side yet
//! (performance.md X4). We spawn it directly (not `git http-backend`) with a clean environment so
//! that nothing from the daemon's environment or the host's git config changes what is served.

pub mod advert;
pub mod advertiser;
mod limiter;
pub mod packcache;
pub mod refcache;
mod stream;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

pub use limiter::{Admission, PackLimiter, Permit};
pub use stream::{GitOutput, StreamLimits, Summary};

use crate::metrics::Metrics;
use seedd_proto::crypto::NodeId;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("could not start `{git} upload-pack`: {cause}; is git installed and on PATH?")]
    Spawn { git: String, cause: std::io::Error },
    #[error("git child has no {0} pipe")]
    Pipe(&'static str),
}

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// `upload-pack --advertise-refs` (GET info/refs).
    AdvertiseRefs,
    /// `upload-pack --stateless-rpc` (POST git-upload-pack).
    UploadPack,
    /// Stateful protocol-v2 `upload-pack` for a Radicle git stream (several commands on one
    /// connection; protocol.md §6.3).
    Stream,
    /// One request of a Radicle git stream served as a command loop: `--stateless-rpc` with
    /// the settings of [`Service::Stream`] (v2 is stateless per command).
    StreamRequest,
}

impl Service {
    /// Whether it serves a Radicle stream (its settings: ref-in-want, no unborn `HEAD`).
    fn radicle(self) -> bool {
        matches!(self, Service::Stream | Service::StreamRequest)
    }
}

/// Which refs a request may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    /// The canonical top-level refs only: `HEAD`, `refs/heads/*`, `refs/tags/*`, `refs/rad/id`.
    Canonical,
    /// One peer's namespace, re-rooted (`refs/namespaces/<nid>/refs/x` → `refs/x`).
    Namespace(NodeId),
    /// Every ref, namespaces included (Radicle fetchers filter with `ref-prefix`).
    All,
}

/// The protocol version asked for with `Git-Protocol`, if any and if well-formed.
pub fn git_protocol(header: Option<&str>) -> Option<String> {
    let h = header?.trim();
    // Only pass through `key[=value]` items separated by ':' with a safe alphabet.
    let ok = !h.is_empty()
        && h.len() <= 256
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"=:._-".contains(&b));
    ok.then(|| h.to_owned())
}

/// Whether a validated `Git-Protocol` value asks for v2.
pub fn is_v2(protocol: Option<&str>) -> bool {
    protocol.is_some_and(|p| p.split(':').any(|kv| kv == "version=2"))
}

/// Spawns `git upload-pack` for a repository.
#[derive(Clone)]
pub struct GitServer {
    git: String,
    home: PathBuf,
    pub limits: StreamLimits,
    pub metrics: Arc<Metrics>,
}

impl GitServer {
    /// `home` is an empty directory used as `$HOME` for children (no user config is read).
    pub fn new(git: String, home: PathBuf, limits: StreamLimits, metrics: Arc<Metrics>) -> Self {
        Self {
            git,
            home,
            limits,
            metrics,
        }
    }

    /// A `git` command with the clean environment every child of the server gets.
    pub fn command(&self) -> tokio::process::Command {
        let mut cmd = crate::git::async_command(&self.git, &self.home);
        cmd.env("GIT_NO_REPLACE_OBJECTS", "1");
        cmd
    }

    /// Start `git upload-pack` in `repo` for `service`. The child runs in its own process group
    /// so that dropping the returned output kills it and any `pack-objects` it started.
    pub fn spawn(
        &self,
        repo: &std::path::Path,
        service: Service,
        view: View,
        protocol: Option<&str>,
    ) -> Result<GitProcess, ServeError> {
        let (child, stdin, stdout) = self.start(repo, service, view, protocol, Stdio::piped())?;
        let stdout = stdout.ok_or(ServeError::Pipe("stdout"))?;
        Ok(GitProcess {
            child,
            stdin,
            stdout,
        })
    }

    /// Like [`spawn`](Self::spawn), with git's stdout going straight to `out` (a pack cache
    /// file): git writes its answer there itself, and nothing passes through seedd.
    pub(crate) fn spawn_into(
        &self,
        repo: &std::path::Path,
        service: Service,
        view: View,
        protocol: Option<&str>,
        out: std::fs::File,
    ) -> Result<(tokio::process::Child, Option<tokio::process::ChildStdin>), ServeError> {
        let (child, stdin, _) = self.start(repo, service, view, protocol, Stdio::from(out))?;
        Ok((child, stdin))
    }

    fn start(
        &self,
        repo: &std::path::Path,
        service: Service,
        view: View,
        protocol: Option<&str>,
        stdout: Stdio,
    ) -> Result<
        (
            tokio::process::Child,
            Option<tokio::process::ChildStdin>,
            Option<tokio::process::ChildStdout>,
        ),
        ServeError,
    > {
        let mut cmd = self.command();
        if let Some(p) = protocol {
            cmd.env("GIT_PROTOCOL", p);
        }
        // Any object may be wanted by id (patch heads live in peer namespaces only).
        // Not `allowRefInWant` over HTTP: git (2.47) then sends `wanted-refs` before
        // `shallow-info`, which breaks `clone --depth` for every v2 client. Radicle streams set
        // it like radicle-node does (its fetcher never asks for shallow).
        cmd.args([
            "-c",
            "uploadpack.allowAnySHA1InWant=true",
            "-c",
            "uploadpack.allowFilter=true",
        ]);
        if service.radicle() {
            cmd.args([
                "-c",
                "uploadpack.allowRefInWant=true",
                "-c",
                "lsrefs.unborn=ignore",
            ]);
        }
        match view {
            View::Canonical => {
                // Advertise the canonical refs only; peers are reachable via /<rid>/<nid>.
                cmd.args([
                    "-c",
                    "uploadpack.hideRefs=refs/",
                    "-c",
                    "uploadpack.hideRefs=!refs/heads/",
                    "-c",
                    "uploadpack.hideRefs=!refs/tags/",
                    "-c",
                    "uploadpack.hideRefs=!refs/rad/id",
                ]);
            }
            View::Namespace(nid) => {
                cmd.env("GIT_NAMESPACE", nid.to_string());
            }
            View::All => {
                // Refs of a fetch in progress, not yet validated (`advert`'s scope of `All`).
                cmd.args(["-c", "uploadpack.hideRefs=refs/seedd-fetch"]);
            }
        }
        cmd.arg("upload-pack");
        if service == Service::Stream {
            // Stateful; upload-pack gives up on a fetcher silent for this long.
            cmd.arg(format!(
                "--timeout={}",
                self.limits.idle.as_secs().clamp(1, 3600)
            ));
        } else {
            cmd.arg("--stateless-rpc");
        }
        cmd.arg("--strict");
        if service == Service::AdvertiseRefs {
            cmd.arg("--advertise-refs");
        }
        cmd.arg(repo)
            .stdin(if service != Service::AdvertiseRefs {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(stdout)
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        let mut child = cmd.spawn().map_err(|source| ServeError::Spawn {
            git: self.git.clone(),
            cause: source,
        })?;
        let stdout = child.stdout.take();
        let stdin = child.stdin.take();
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(log_stderr(stderr));
        }
        Ok((child, stdin, stdout))
    }
}

pub async fn log_stderr(stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "seedd::git", "{line}");
    }
}

/// A running `git upload-pack`.
pub struct GitProcess {
    pub child: tokio::process::Child,
    pub stdin: Option<tokio::process::ChildStdin>,
    pub stdout: tokio::process::ChildStdout,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_protocol_header_is_filtered() {
        assert_eq!(
            git_protocol(Some("version=2")).as_deref(),
            Some("version=2")
        );
        assert_eq!(
            git_protocol(Some("version=2:object-format=sha1")).as_deref(),
            Some("version=2:object-format=sha1")
        );
        assert_eq!(git_protocol(Some("version=2\nX=1")), None);
        assert_eq!(git_protocol(Some("")), None);
        assert_eq!(git_protocol(None), None);
        assert!(is_v2(Some("version=2")));
        assert!(is_v2(Some("object-format=sha1:version=2")));
        assert!(!is_v2(Some("version=1")));
        assert!(!is_v2(None));
    }
}
