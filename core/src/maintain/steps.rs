//! The git side of one maintenance run, each step one real `git` command run at low priority
//! (`nice -n 19` when `nice` is installed) through [`crate::git`]'s clean environment. Real git
//! because these are exactly git's own maintenance primitives, each atomic on its own: new
//! packs, the multi-pack index, its bitmap, `packed-refs` and the commit-graph chain are all
//! written to temporary files and renamed into place, and old packs are deleted only once the
//! new ones and the index naming them are in place. A kill at any point leaves either the old
//! or the new layout (plus garbage that [`clean_stale`] removes), never a missing object.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

/// Why a git step failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
    #[error("{step}: spawning git: {cause}")]
    Spawn {
        step: &'static str,
        cause: std::io::Error,
    },
    #[error("{step}: git failed: {stderr}")]
    Git { step: &'static str, stderr: String },
    #[error("{step}: not finished within {timeout:?} (maintenance.timeout_secs); killed")]
    Timeout {
        step: &'static str,
        timeout: Duration,
    },
}

/// A git version as (major, minor).
pub(crate) type Version = (u32, u32);

/// How maintenance runs git.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    pub git: String,
    pub home: PathBuf,
    /// `nice`, when found on `PATH`.
    pub nice: Option<PathBuf>,
    /// The installed git's version (`None`: unknown, only settings every git knows are set).
    pub version: Option<Version>,
    /// `pack.threads` for repacks.
    pub threads: usize,
    pub timeout: Duration,
}

/// `git version 2.47.3` → (2, 47).
pub(crate) fn parse_version(out: &str) -> Option<Version> {
    let v = out.trim().strip_prefix("git version ")?;
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// `name` on `PATH`, if there.
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The repository settings serving wants from what maintenance writes, for this git version:
/// multi-pack reuse of the bitmapped packs (2.44+; earlier versions read the key as a boolean
/// and would refuse `multi`), bitmap boundary traversal (2.42+), the bitmap lookup table
/// (2.38+), the commit-graph; and no automatic gc (maintenance owns the layout).
pub(crate) fn serving_config(version: Option<Version>) -> Vec<(&'static str, &'static str)> {
    let mut c = vec![
        ("core.commitGraph", "true"),
        ("core.multiPackIndex", "true"),
        ("gc.auto", "0"),
    ];
    let at_least = |v: Version| version.is_some_and(|have| have >= v);
    if at_least((2, 38)) {
        c.push(("pack.writeBitmapLookupTable", "true"));
    }
    if at_least((2, 42)) {
        c.push(("pack.useBitmapBoundaryTraversal", "true"));
    }
    if at_least((2, 44)) {
        c.push(("pack.allowPackReuse", "multi"));
    } else {
        c.push(("pack.allowPackReuse", "true"));
    }
    c
}

/// How to repack. Full when the packs are small: rewriting everything is cheap then and gives
/// one pack with the best deltas. Geometric otherwise: only packs that break a factor-2
/// progression (the many small ones fetches leave) are rolled up, so the cost follows what
/// arrived, not the repository's size. Both write a multi-pack index with a reachability
/// bitmap (what upload-pack's pack reuse and bitmap traversal read), and neither ever drops
/// an object: a full repack keeps unreachable objects (`--keep-unreachable`), a geometric one
/// copies whole packs; so nothing a client was shown can go missing.
pub(crate) fn repack_args(full: bool) -> Vec<&'static str> {
    let mut a = vec![
        "repack",
        "-d",
        "-q",
        "-n",
        "--write-midx",
        "--write-bitmap-index",
    ];
    if full {
        a.extend(["-a", "--keep-unreachable"]);
    } else {
        a.push("--geometric=2");
    }
    a
}

/// Split commit-graph over every ref (merged when layers grow past a factor of 2).
pub(crate) const COMMIT_GRAPH: &[&str] = &[
    "commit-graph",
    "write",
    "--reachable",
    "--split",
    "--size-multiple=2",
    "--no-progress",
];

/// Every ref into `packed-refs`, loose copies removed.
pub(crate) const PACK_REFS: &[&str] = &["pack-refs", "--all"];

impl Git {
    /// Runs `git -C repo <args>` (niced) and waits at most the timeout; on timeout the whole
    /// process group is killed.
    pub(crate) async fn run(
        &self,
        step: &'static str,
        repo: &Path,
        config: &[String],
        args: &[&str],
    ) -> Result<String, StepError> {
        let mut cmd = match &self.nice {
            Some(nice) => {
                let mut c = crate::git::command(nice, &self.home);
                c.args(["-n", "19"]).arg(&self.git);
                c
            }
            None => crate::git::command(&self.git, &self.home),
        };
        cmd.arg("-C").arg(repo);
        for c in config {
            cmd.arg("-c").arg(c);
        }
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group, so a timeout kills git's children (pack-objects) too.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        let started = std::time::Instant::now();
        let child = cmd.spawn().map_err(|source| StepError::Spawn {
            step,
            cause: source,
        })?;
        let pid = child.id();
        let out = match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(r) => r.map_err(|source| StepError::Spawn {
                step,
                cause: source,
            })?,
            Err(_) => {
                if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                return Err(StepError::Timeout {
                    step,
                    timeout: self.timeout,
                });
            }
        };
        tracing::debug!(repo = %repo.display(), step, ms = started.elapsed().as_millis() as u64, status = %out.status, "maintenance git step");
        if !out.status.success() {
            return Err(StepError::Git {
                step,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Sets the [`serving_config`] keys the repository's own config lacks (read with one
    /// `git config --list --local`; each write is git's own locked rename of `config`).
    pub(crate) async fn configure(&self, repo: &Path) -> Result<usize, StepError> {
        let have = self
            .run("config", repo, &[], &["config", "--list", "--local"])
            .await?;
        let have: Vec<&str> = have.lines().collect();
        let mut set = 0;
        for (key, value) in serving_config(self.version) {
            let line = format!("{}={value}", key.to_ascii_lowercase());
            if have.iter().any(|l| l.eq_ignore_ascii_case(&line)) {
                continue;
            }
            self.run("config", repo, &[], &["config", key, value])
                .await?;
            set += 1;
        }
        Ok(set)
    }
}

/// Lock and temporary files a killed git leaves behind and that would make the next step
/// fail ("File exists") or waste space: removed when they were last written before this
/// process started *and* longer ago than `stale_after` (a git orphaned by a `kill -9` of
/// seedd may still be running; it finishes in far less). Returns how many were removed.
pub(crate) fn clean_stale(repo: &Path, started: SystemTime, stale_after: Duration) -> usize {
    let now = SystemTime::now();
    let stale = |p: &Path| {
        std::fs::symlink_metadata(p)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t < started && now.duration_since(t).unwrap_or_default() > stale_after)
    };
    let mut candidates: Vec<PathBuf> = [
        "packed-refs.lock",
        "config.lock",
        "objects/pack/multi-pack-index.lock",
        "objects/info/commit-graph.lock",
        "objects/info/commit-graphs/commit-graph-chain.lock",
    ]
    .iter()
    .map(|p| repo.join(p))
    .collect();
    for dir in ["objects/pack", "objects/info/commit-graphs"] {
        if let Ok(entries) = std::fs::read_dir(repo.join(dir)) {
            for e in entries.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.starts_with("tmp_") || name.starts_with(".tmp-") {
                    candidates.push(e.path());
                }
            }
        }
    }
    let mut removed = 0;
    for p in candidates {
        if stale(&p) && std::fs::remove_file(&p).is_ok() {
            tracing::warn!(path = %p.display(), "removed a stale lock or temporary file of an interrupted git");
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_settings() {
        assert_eq!(parse_version("git version 2.47.3\n"), Some((2, 47)));
        assert_eq!(
            parse_version("git version 2.39.5 (Apple Git-154)"),
            Some((2, 39))
        );
        assert_eq!(parse_version("nonsense"), None);
        let keys = |v| {
            serving_config(v)
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
        };
        assert!(keys(Some((2, 47))).contains(&"pack.allowPackReuse=multi".to_owned()));
        assert!(keys(Some((2, 47))).contains(&"pack.useBitmapBoundaryTraversal=true".to_owned()));
        let old = keys(Some((2, 40)));
        assert!(old.contains(&"pack.allowPackReuse=true".to_owned()));
        assert!(!old.iter().any(|k| k.contains("Boundary")));
        assert!(keys(None).contains(&"pack.allowPackReuse=true".to_owned()));
    }

    #[test]
    fn repack_modes() {
        let full = repack_args(true);
        assert!(full.contains(&"-a") && full.contains(&"--keep-unreachable"));
        assert!(!full.iter().any(|a| a.starts_with("--geometric")));
        let geo = repack_args(false);
        assert!(geo.contains(&"--geometric=2") && !geo.contains(&"-a"));
        for a in [full, geo] {
            assert!(a.contains(&"--write-midx") && a.contains(&"--write-bitmap-index"));
        }
    }

    #[test]
    fn only_old_leftovers_of_an_earlier_process_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        std::fs::create_dir_all(r.join("objects/pack")).unwrap();
        std::fs::write(r.join("packed-refs.lock"), b"").unwrap();
        std::fs::write(r.join("objects/pack/tmp_pack_abc"), b"").unwrap();
        std::fs::write(r.join("objects/pack/pack-1.pack"), b"").unwrap();
        // Written after this "process" started: kept.
        let past = SystemTime::now() - Duration::from_secs(3600);
        assert_eq!(clean_stale(r, past, Duration::ZERO), 0);
        // Before it started but too recent: kept.
        let future = SystemTime::now() + Duration::from_secs(60);
        assert_eq!(clean_stale(r, future, Duration::from_secs(600)), 0);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(clean_stale(r, future, Duration::from_millis(1)), 2);
        assert!(!r.join("packed-refs.lock").exists());
        assert!(r.join("objects/pack/pack-1.pack").exists());
    }
}
