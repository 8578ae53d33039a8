//! One `git fetch` over a Radicle stream, in named steps: the tenants' byte budget, the
//! bridge socket, the stream and its header pkt-line, `git fetch` through the `ext::`
//! transport, the relay between them (counting pkt-lines to know when to send `Eof`), and
//! git's exit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use seedd_proto::crypto::{NodeId, RepoId};
use seedd_proto::wire::Control;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

use super::{FetchConfig, FetchError, Fetcher, QUARANTINE};
use crate::net::OutgoingStream;
use seedd_core::policy::NamespaceFilter;

impl Fetcher {
    /// Runs `git fetch` with the `ext::` transport through `seedd bridge` and the stream.
    /// Returns the bytes received.
    pub(super) async fn transfer(
        &self,
        rid: RepoId,
        from: NodeId,
        repo: &Path,
        work: &Path,
        stage: Stage,
        spent: u64,
    ) -> Result<u64, FetchError> {
        let budget = self.budget(&rid, spent)?;
        let (listener, socket) = bridge_socket(work, &stage, spent)?;
        let mut stream = self.open_git_stream(rid, from).await?;
        let mut child = spawn_git_fetch(&self.inner.cfg, repo, &socket, &stage).await?;
        let timeout = self.inner.cfg.timeout;
        let (conn, _) = tokio::time::timeout(timeout, listener.accept())
            .await
            .map_err(|_| FetchError::Timeout(timeout))??;
        let result = self.relay(rid, conn, &mut stream, budget).await;
        let _ = stream.control(Control::Close { stream: stream.id }).await;
        let received = match result {
            Ok(n) => n,
            Err(e) => {
                kill_group(&child);
                let _ = child.kill().await;
                return Err(e);
            }
        };
        wait_for_git(child, timeout).await?;
        Ok(received)
    }

    /// What the tenants' byte quotas leave this fetch, having `spent` already (checked as
    /// bytes arrive); none left is a refusal.
    fn budget(&self, rid: &RepoId, spent: u64) -> Result<Option<u64>, FetchError> {
        let policies = &self.inner.policies;
        let budget = policies.fetch_budget(rid).map(|b| b.saturating_sub(spent));
        if budget == Some(0) {
            if let Some(t) = policies.tenants() {
                t.note_byte_quota(rid);
            }
            return Err(FetchError::Quota(0));
        }
        Ok(budget)
    }

    /// A stream to `from` on the identity connected to it, started with the header pkt-line
    /// (protocol.md §6.2); git's `ext::` transport passes the protocol version in
    /// `GIT_PROTOCOL`, not in a header, so we send it ourselves.
    async fn open_git_stream(
        &self,
        rid: RepoId,
        from: NodeId,
    ) -> Result<OutgoingStream, FetchError> {
        let stream = self
            .net_for(&from)
            .open_stream(from)
            .await
            .map_err(|e| FetchError::Stream(from, e))?;
        let canonical = rid.to_string();
        let canonical = canonical.trim_start_matches("rad:");
        let header = format!("git-upload-pack /{canonical}\0\0version=2\0");
        let header = format!("{:04x}{header}", header.len() + 4);
        if !stream.send(header.as_bytes()).await {
            return Err(FetchError::SessionClosed);
        }
        Ok(stream)
    }

    /// Relay: git → stream, stream → git, counting what we receive, until the responder
    /// closes the stream. git half-closes its side once it has sent its last request,
    /// possibly before the answer arrived; the responder kills upload-pack on Eof (§6.3), so
    /// Eof is sent only when every request (each ends with a flush-pkt) has its answer (the
    /// capability advertisement is one more flush-terminated message).
    async fn relay(
        &self,
        rid: RepoId,
        mut conn: UnixStream,
        stream: &mut OutgoingStream,
        budget: Option<u64>,
    ) -> Result<u64, FetchError> {
        let max = self.inner.cfg.max_pack_bytes;
        let timeout = self.inner.cfg.timeout;
        let mut received: u64 = 0;
        let mut buf = vec![0u8; 64 * 1024];
        let mut git_done = false;
        let mut eof_sent = false;
        let mut requests = PktCounter::default();
        let mut answers = PktCounter::default();
        loop {
            if git_done
                && !eof_sent
                && (answers.flushes > requests.messages || answers.broken || requests.broken)
            {
                eof_sent = true;
                let _ = stream.control(Control::Eof { stream: stream.id }).await;
            }
            tokio::select! {
                n = conn.read(&mut buf), if !git_done => match n {
                    Ok(0) | Err(_) => git_done = true,
                    Ok(n) => {
                        let Some(data) = buf.get(..n) else { return Err(FetchError::GitClosed) };
                        requests.feed(data);
                        if !stream.send(data).await {
                            return Err(FetchError::SessionClosed);
                        }
                    }
                },
                data = stream.input.recv() => match data {
                    Some(data) => {
                        received += data.len() as u64;
                        if received > max {
                            return Err(FetchError::TooLarge(max));
                        }
                        if let Some(b) = budget.filter(|b| received > *b) {
                            if let Some(t) = self.inner.policies.tenants() {
                                t.note_byte_quota(&rid);
                            }
                            return Err(FetchError::Quota(b));
                        }
                        answers.feed(&data);
                        if conn.write_all(&data).await.is_err() {
                            return Err(FetchError::GitClosed);
                        }
                    }
                    // The responder closed the stream.
                    None => return Ok(received),
                },
                _ = tokio::time::sleep(timeout) => return Err(FetchError::Timeout(timeout)),
            }
        }
    }
}

/// The Unix socket `seedd bridge` connects to, private to the seed user.
fn bridge_socket(
    work: &Path,
    stage: &Stage,
    spent: u64,
) -> Result<(UnixListener, PathBuf), FetchError> {
    let path = work.join(match stage {
        Stage::Special(_) => format!("special-{spent}.sock"),
        Stage::Data(_) => "data.sock".to_owned(),
    });
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    seedd_core::fsutil::restrict_file(&path)?;
    Ok((listener, path))
}

/// The `ext::` command relaying git's bytes: `seedd-bridge` next to this executable when it
/// is installed there (a small binary that starts in well under a millisecond), else this
/// executable's own `bridge` subcommand (about 5 ms of CPU per start: it links RocksDB).
fn bridge_command() -> std::io::Result<String> {
    let exe = std::env::current_exe()?;
    let small = exe.with_file_name("seedd-bridge");
    Ok(if small.is_file() {
        small.display().to_string()
    } else {
        format!("{} bridge", exe.display())
    })
}

/// Starts `git fetch` in `repo` from `ext::seedd-bridge <socket>`, with the stage's refspecs
/// (or object ids) on stdin so thousands of them do not hit the argument limit.
async fn spawn_git_fetch(
    cfg: &FetchConfig,
    repo: &Path,
    socket: &Path,
    stage: &Stage,
) -> Result<tokio::process::Child, FetchError> {
    let url = format!("ext::{} {}", bridge_command()?, socket.display());
    let mut cmd = seedd_core::git::async_command(&cfg.git, &cfg.git_home);
    cmd.env("GIT_PROTOCOL", "version=2")
        .arg("-C")
        .arg(repo)
        .args([
            "-c",
            "protocol.version=2",
            "-c",
            "protocol.ext.allow=always",
            "-c",
            "fetch.fsckObjects=false",
            // Keep every received pack as a pack: unpacking a few large objects into loose
            // ones recompresses them (the default limit is 100 objects), which made fetches
            // of big-file repositories 2–3× slower than radicle-node.
            "-c",
            "fetch.unpackLimit=1",
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-auto-maintenance",
            "--no-auto-gc",
            &url,
            "--stdin",
        ]);
    let input = match stage {
        Stage::Special(filter) => special_refspecs(filter).join("\n") + "\n",
        // Objects by id (responders allow any SHA-1 in want).
        Stage::Data(oids) => oids.join("\n") + "\n",
    };
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        // Its own process group: `git fetch` runs `index-pack` and `seedd bridge`, which must
        // die with it (they write into the quarantine that is deleted next).
        .process_group(0);
    let mut child = cmd.spawn().map_err(FetchError::Spawn)?;
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(input.as_bytes()).await?;
        drop(pipe);
    }
    Ok(child)
}

/// Waits (at most `timeout`) for git to exit after the relay ended; its stderr is the error.
async fn wait_for_git(child: tokio::process::Child, timeout: Duration) -> Result<(), FetchError> {
    let out = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .map_err(|_| FetchError::Timeout(timeout))??;
    if !out.status.success() {
        return Err(FetchError::git_stderr(&out.stderr));
    }
    Ok(())
}

/// What one `git fetch` over a stream gets.
pub(super) enum Stage {
    /// `refs/rad/id` and the `rad/id` and `rad/sigrefs` of the namespaces the filter lets in.
    Special(NamespaceFilter),
    /// These objects, by id.
    Data(Vec<String>),
}

/// The refspecs of a special-refs fetch: the canonical identity, then each wanted namespace's
/// `rad/id` and `rad/sigrefs` — by pattern with the blocked namespaces excluded (negative
/// refspecs), or one pattern per namespace (a pattern, so a namespace the peer lacks is no
/// error). Passed on stdin: a deny or follow list may be long.
fn special_refspecs(filter: &NamespaceFilter) -> Vec<String> {
    let mut out = vec![format!("+refs/rad/id:{QUARANTINE}/rad/id")];
    match filter {
        NamespaceFilter::All { except } => {
            for r in ["sigrefs", "id"] {
                out.push(format!(
                    "+refs/namespaces/*/refs/rad/{r}:{QUARANTINE}/namespaces/*/refs/rad/{r}"
                ));
            }
            out.extend(except.iter().map(|n| format!("^refs/namespaces/{n}/*")));
        }
        NamespaceFilter::Only(nids) => {
            out.extend(nids.iter().map(|n| {
                format!("+refs/namespaces/{n}/refs/rad/*:{QUARANTINE}/namespaces/{n}/refs/rad/*")
            }));
        }
    }
    out
}

/// Counts top-level flush-pkts (`0000`) in a pkt-line byte stream fed in arbitrary chunks, and
/// the messages they end (a flush after at least one other packet; git ends a v2 session with
/// a bare flush, which is not a request).
#[derive(Debug, Default)]
pub(super) struct PktCounter {
    header: Vec<u8>,
    skip: usize,
    pending: bool,
    pub(super) flushes: u64,
    pub(super) messages: u64,
    /// The stream stopped looking like pkt-lines (counting is abandoned).
    pub(super) broken: bool,
}

impl PktCounter {
    pub(super) fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() && !self.broken {
            if self.skip > 0 {
                let n = self.skip.min(data.len());
                self.skip -= n;
                data = data.get(n..).unwrap_or_default();
                continue;
            }
            let need = 4 - self.header.len();
            let n = need.min(data.len());
            self.header
                .extend_from_slice(data.get(..n).unwrap_or_default());
            data = data.get(n..).unwrap_or_default();
            if self.header.len() < 4 {
                continue;
            }
            let len = std::str::from_utf8(&self.header)
                .ok()
                .and_then(|s| usize::from_str_radix(s, 16).ok());
            self.header.clear();
            match len {
                Some(0) => {
                    self.flushes += 1;
                    if std::mem::take(&mut self.pending) {
                        self.messages += 1;
                    }
                }
                Some(1..=3) => self.pending = true,
                Some(l) => {
                    self.pending = true;
                    self.skip = l - 4;
                }
                None => self.broken = true,
            }
        }
    }
}

/// SIGKILL to `child`'s process group (it was started as a group leader).
fn kill_group(child: &tokio::process::Child) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_refspecs_exclude_blocked_or_list_wanted_namespaces() {
        let a = NodeId::from_bytes([1; 32]);
        let b = NodeId::from_bytes([2; 32]);
        let all = special_refspecs(&NamespaceFilter::All { except: vec![a] });
        assert_eq!(all[0], format!("+refs/rad/id:{QUARANTINE}/rad/id"));
        assert!(all.contains(&format!("^refs/namespaces/{a}/*")));
        assert!(all
            .iter()
            .any(|r| r.starts_with("+refs/namespaces/*/refs/rad/sigrefs:")));
        let only = special_refspecs(&NamespaceFilter::Only(vec![b]));
        assert_eq!(
            only,
            vec![
                format!("+refs/rad/id:{QUARANTINE}/rad/id"),
                format!("+refs/namespaces/{b}/refs/rad/*:{QUARANTINE}/namespaces/{b}/refs/rad/*"),
            ]
        );
        assert!(!only.iter().any(|r| r.contains("namespaces/*")));
    }

    #[test]
    fn pkt_counter_counts_flushes_across_chunks() {
        let stream = b"000eversion 2\n0000000cls-refs\n00010008abcd0000";
        for chunk in 1..stream.len() {
            let mut c = PktCounter::default();
            for part in stream.chunks(chunk) {
                c.feed(part);
            }
            assert_eq!(c.flushes, 2, "chunk {chunk}");
            assert_eq!(c.messages, 2, "chunk {chunk}");
            assert!(!c.broken);
        }
        // A bare flush (git ending a v2 session) is not a message.
        let mut c = PktCounter::default();
        c.feed(b"000cls-refs\n00000000");
        assert_eq!((c.flushes, c.messages), (2, 1));
        let mut c = PktCounter::default();
        c.feed(b"zzzz");
        assert!(c.broken);
    }
}
