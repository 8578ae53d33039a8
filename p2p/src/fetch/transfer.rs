//! One exchange with the peer's `upload-pack` over a Radicle stream, in named steps: the
//! tenants' byte budget, the stream and its header pkt-line, the capability advertisement,
//! `ls-refs` (special refs), the `fetch` request with the pack piped into `git index-pack`
//! in the quarantine, `Eof` once every request has its answer, and the quarantine refs. The
//! protocol itself (requests, answers, which refs a stage takes) is [`super::client`].

use std::path::Path;
use std::process::Stdio;

use seedd_proto::crypto::{NodeId, RepoId};
use seedd_proto::wire::Control;
use tokio::io::AsyncWriteExt;

use super::client::{self, Advertisement, Answer, FetchAnswer, Pkt, ProtocolError, RefList};
use super::plumbing::{self, refs_under};
use super::{Attempt, FetchConfig, FetchError, Fetcher};
use crate::net::OutgoingStream;
use seedd_core::policy::NamespaceFilter;

impl Fetcher {
    /// One stage of the fetch from `a.from` into `a.quarantine`. Returns the bytes received.
    pub(super) async fn transfer(
        &self,
        a: &Attempt,
        stage: Stage,
        spent: u64,
    ) -> Result<u64, FetchError> {
        let budget = self.budget(&a.rid, spent)?;
        let stream = self.open_git_stream(a.rid, a.from).await?;
        let mut peer = Peer {
            fetcher: self,
            rid: a.rid,
            stream,
            reader: client::Reader::default(),
            received: 0,
            budget,
        };
        let result = self.exchange(&mut peer, a, stage).await;
        if result.is_ok() {
            peer.finish().await;
        }
        let _ = peer
            .stream
            .control(Control::Close {
                stream: peer.stream.id,
            })
            .await;
        result.map(|()| peer.received)
    }

    /// The advertisement, then `ls-refs` for the special refs; then the objects wanted that
    /// the quarantine (and through it the live repository) lacks, in one `fetch`; then the
    /// special refs into the quarantine.
    async fn exchange(
        &self,
        peer: &mut Peer<'_>,
        a: &Attempt,
        stage: Stage,
    ) -> Result<(), FetchError> {
        let mut ad = Advertisement::default();
        while !ad.take(peer.next().await?)? {}
        // The data stage's ids are already those the quarantine lacks (`apply::data_wants`).
        let (wants, refs) = match stage {
            Stage::Special(filter) => {
                peer.send(&client::ls_refs_request(&client::ref_prefixes(&filter)))
                    .await?;
                let mut list = RefList::default();
                while !list.take(peer.next().await?)? {}
                let refs = client::select(&filter, &list.refs)?;
                let wants = refs.iter().map(|(_, oid)| oid.clone()).collect();
                (wants, refs)
            }
            Stage::Data(oids) => (oids, Vec::new()),
        };
        let (q, live) = (a.quarantine.clone(), a.repo.clone());
        let check = !refs.is_empty();
        // Ref listings and object lookups: on the blocking pool, not an async worker; the
        // haves only when something is asked for.
        let (wants, haves) = tokio::task::spawn_blocking(move || -> Result<_, FetchError> {
            let wants = if check { missing(&q, wants)? } else { wants };
            let haves = if wants.is_empty() {
                Vec::new()
            } else {
                haves(&q, &live)?
            };
            Ok((wants, haves))
        })
        .await??;
        let cfg = &self.inner.cfg;
        if !wants.is_empty() {
            peer.send(&client::fetch_request(&wants, &haves)).await?;
            peer.receive_pack(cfg, &a.quarantine).await?;
        }
        if !refs.is_empty() {
            let q = a.quarantine.clone();
            tokio::task::spawn_blocking(move || write_refs(&q, &refs)).await??;
        }
        Ok(())
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
    /// (protocol.md §6.2) that asks for protocol version 2.
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
        let header = client::pkt(&format!("git-upload-pack /{canonical}\0\0version=2\0"));
        if !stream.send(&header).await {
            return Err(FetchError::SessionClosed);
        }
        Ok(stream)
    }
}

pub(super) enum Stage {
    /// `refs/rad/id` and the `rad/id` and `rad/sigrefs` of the namespaces the filter lets in.
    Special(NamespaceFilter),
    /// These objects, by id.
    Data(Vec<String>),
}

/// The talk with the peer's `upload-pack` on one stream: what arrived, counted against the
/// fetch's limits, cut into pkt-lines.
struct Peer<'a> {
    fetcher: &'a Fetcher,
    rid: RepoId,
    stream: OutgoingStream,
    reader: client::Reader,
    received: u64,
    /// What the tenants' quotas leave this stage.
    budget: Option<u64>,
}

impl Peer<'_> {
    async fn send(&self, bytes: &[u8]) -> Result<(), FetchError> {
        if self.stream.send(bytes).await {
            Ok(())
        } else {
            Err(FetchError::SessionClosed)
        }
    }

    /// The next pkt-line, waiting at most the inactivity limit for each chunk; every byte
    /// counts against `p2p.max_pack_bytes` and the tenants' budget as it arrives.
    async fn next(&mut self) -> Result<Pkt, FetchError> {
        let timeout = self.fetcher.inner.cfg.timeout;
        loop {
            if let Some(pkt) = self.reader.next()? {
                return Ok(pkt);
            }
            let data = tokio::time::timeout(timeout, self.stream.input.recv())
                .await
                .map_err(|_| FetchError::Timeout(timeout))?
                .ok_or(ProtocolError::Closed)?;
            self.count(data.len() as u64)?;
            self.reader.feed(&data);
        }
    }

    fn count(&mut self, n: u64) -> Result<(), FetchError> {
        self.received += n;
        let max = self.fetcher.inner.cfg.max_pack_bytes;
        if self.received > max {
            return Err(FetchError::TooLarge(max));
        }
        if let Some(b) = self.budget.filter(|b| self.received > *b) {
            if let Some(t) = self.fetcher.inner.policies.tenants() {
                t.note_byte_quota(&self.rid);
            }
            return Err(FetchError::Quota(b));
        }
        Ok(())
    }

    /// The `fetch` answer's pack, piped into `git index-pack --stdin --fix-thin` in the
    /// quarantine as it arrives: git completes a thin pack with the bases the quarantine
    /// borrows from the live repository, checks the pack's checksum and writes its index (the
    /// tool for it; a fetch's pack is one process either way). A stopped fetch kills it.
    async fn receive_pack(&mut self, cfg: &FetchConfig, q: &Path) -> Result<(), FetchError> {
        let mut child = seedd_core::git::async_command(&cfg.git, &cfg.git_home)
            .arg("-C")
            .arg(q)
            .args(["index-pack", "--stdin", "--fix-thin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(FetchError::Spawn)?;
        let mut stdin = child.stdin.take().ok_or_else(plumbing::no_stdin)?;
        let mut answer = FetchAnswer::default();
        let mut complete = false;
        loop {
            match answer.take(self.next().await?)? {
                Answer::More => {}
                Answer::Pack(data) => {
                    // index-pack stopped reading: it says why on stderr.
                    if stdin.write_all(&data).await.is_err() {
                        break;
                    }
                }
                Answer::Done => {
                    complete = true;
                    break;
                }
            }
        }
        drop(stdin);
        let timeout = cfg.timeout;
        let out = tokio::time::timeout(timeout, child.wait_with_output())
            .await
            .map_err(|_| FetchError::Timeout(timeout))??;
        if !out.status.success() {
            return Err(FetchError::Git(format!(
                "index-pack: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        if !complete {
            return Err(FetchError::Git(
                "index-pack stopped reading the pack".into(),
            ));
        }
        Ok(())
    }

    /// Every request has its answer: `Eof` (the responder ends its `upload-pack`, §6.3), then
    /// what is left of the stream until the responder closes it (at most the inactivity limit).
    async fn finish(&mut self) {
        let _ = self
            .stream
            .control(Control::Eof {
                stream: self.stream.id,
            })
            .await;
        let timeout = self.fetcher.inner.cfg.timeout;
        while let Ok(Some(data)) = tokio::time::timeout(timeout, self.stream.input.recv()).await {
            if self.count(data.len() as u64).is_err() {
                break;
            }
        }
    }
}

/// The special refs into the quarantine, as loose refs written in process: the quarantine is
/// this fetch's alone (no other writer, no lock needed), and [`client::select`] takes only
/// names git accepts. Forced, as `git fetch` with `+` refspecs updated them.
fn write_refs(q: &Path, refs: &[(String, String)]) -> Result<(), FetchError> {
    for (name, oid) in refs {
        let path = q.join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, format!("{oid}\n"))?;
    }
    Ok(())
}

/// Of `wants`, the objects the quarantine cannot read (itself or through the live repository).
fn missing(q: &Path, wants: Vec<String>) -> Result<Vec<String>, FetchError> {
    if wants.is_empty() {
        return Ok(wants);
    }
    let repo = gix::open(q).map_err(FetchError::repository)?;
    let mut out: Vec<String> = wants
        .into_iter()
        .filter(|w| gix::ObjectId::from_hex(w.as_bytes()).map_or(true, |id| !repo.has_object(id)))
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// The tips we hold (the live repository's refs, then the quarantine's), branches and `rad`
/// refs first, at most [`client::MAX_HAVES`]: the peer leaves out what they reach.
fn haves(q: &Path, live: &Path) -> Result<Vec<String>, FetchError> {
    let mut refs = refs_under(live, "refs/")?;
    refs.extend(refs_under(q, "refs/")?);
    let minor = |name: &str| !(name.contains("refs/heads/") || name.contains("refs/rad/"));
    refs.sort_by_key(|(name, _)| minor(name));
    let mut seen = std::collections::HashSet::new();
    Ok(refs
        .into_iter()
        .map(|(_, oid)| oid)
        .filter(|oid| seen.insert(oid.clone()))
        .take(client::MAX_HAVES)
        .collect())
}
