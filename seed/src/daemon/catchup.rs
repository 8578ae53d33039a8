//! A fleet replica catches up with its siblings before it takes reads (issue 28).
//!
//! After the first index, a replica of shard `s` asks every other replica of `s` (their admin
//! URLs in the placement file, the fleet's shared admin token) for the fingerprint of each
//! repository's refs (`GET /api/v1/repos`, paged). Every repository placed on `s` whose
//! fingerprint differs from a sibling's is fetched from that sibling over Radicle (validated
//! here like any fetch). `/readyz` answers 200 only when each of them changed or the
//! `fleet.catch_up_timeout_secs` passed, so the front sends it reads once it holds what its
//! siblings served while it was away. Siblings that cannot be reached are skipped (a shard whose
//! other replicas are all down has nobody to catch up with).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seedd_core::index::Index;
use seedd_core::placement::Watched;
use seedd_p2p::fetch::Fetcher;
use seedd_p2p::net::Net;
use seedd_proto::crypto::{NodeId, RepoId};

/// Everything the catch-up needs.
pub(super) struct CatchUp {
    pub(super) placement: Watched,
    pub(super) shard: String,
    pub(super) nid: NodeId,
    pub(super) token: String,
    pub(super) index: Index,
    pub(super) net: Net,
    pub(super) fetcher: Fetcher,
    pub(super) timeout: Duration,
    /// `fleet.compare_interval_secs` (0: no comparisons after the start).
    pub(super) interval: Duration,
    pub(super) metrics: Arc<seedd_core::metrics::Metrics>,
}

/// A sibling that answered: its node id and p2p address.
struct Sibling {
    nid: NodeId,
    addr: String,
    admin: String,
}

impl CatchUp {
    /// Catch up, then set `ready`.
    pub(super) async fn run(&self, ready: Arc<AtomicBool>) {
        let started = Instant::now();
        let deadline = started + self.timeout;
        let me = self.snapshot();
        let behind = tokio::task::spawn_blocking(move || me.compare())
            .await
            .unwrap_or_default();
        if behind.is_empty() {
            tracing::info!("fleet: in step with the shard's other replicas; taking reads");
            ready.store(true, Ordering::Release);
            return;
        }
        let total = behind.len();
        tracing::info!(
            behind = total,
            "fleet: catching up with the shard's other replicas before taking reads"
        );
        let asked = self.fetch_from_siblings(&behind).await;
        let mut last_log = Instant::now();
        loop {
            let left = asked
                .iter()
                .filter(|(rid, (before, theirs))| {
                    let now = self.fingerprint(rid);
                    now == *before && now.as_deref() != Some(theirs.as_str())
                })
                .count();
            if left == 0 {
                tracing::info!(
                    repos = total,
                    secs = started.elapsed().as_secs(),
                    "fleet: caught up; taking reads"
                );
                break;
            }
            if Instant::now() >= deadline {
                tracing::warn!(left, repos = total, "fleet: catch-up timed out (fleet.catch_up_timeout_secs); taking reads anyway, the rest is fetched in the background");
                break;
            }
            if last_log.elapsed() >= Duration::from_secs(10) {
                tracing::info!(left, repos = total, "fleet: catching up");
                last_log = Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        ready.store(true, Ordering::Release);
    }

    /// Ask each sibling for the repositories it holds newer (connecting first); returns each
    /// one's fingerprint before and the sibling's.
    async fn fetch_from_siblings(
        &self,
        behind: &BTreeMap<RepoId, (Arc<Sibling>, String)>,
    ) -> BTreeMap<RepoId, (Option<String>, String)> {
        let mut asked = BTreeMap::new();
        for (rid, (sibling, theirs)) in behind {
            if !self.fetcher.connected().contains(&sibling.nid) {
                self.net.connect(sibling.nid, sibling.addr.clone());
                let until = Instant::now() + Duration::from_secs(10);
                while !self.fetcher.connected().contains(&sibling.nid) && Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            self.fetcher.request(*rid, sibling.nid);
            asked.insert(*rid, (self.fingerprint(rid), theirs.clone()));
        }
        asked
    }

    /// After the start: every `interval`, compare with the siblings again (anti-entropy: a
    /// refs announcement this replica missed is repaired here), fetch what differs, and keep
    /// `seedd_fleet_repos_behind` and `seedd_fleet_lag_seconds` (the oldest difference seen at
    /// consecutive comparisons; a lower bound, 0 when in step).
    pub(super) async fn watch(self) {
        let (interval, metrics) = (self.interval, self.metrics.clone());
        let mut since: BTreeMap<RepoId, Instant> = BTreeMap::new();
        loop {
            tokio::time::sleep(interval).await;
            let me = self.snapshot();
            let behind = tokio::task::spawn_blocking(move || me.compare())
                .await
                .unwrap_or_default();
            let now = Instant::now();
            since.retain(|rid, _| behind.contains_key(rid));
            for rid in behind.keys() {
                since.entry(*rid).or_insert(now);
            }
            let lag = since.values().map(|t| now - *t).max().unwrap_or_default();
            metrics
                .fleet_repos_behind
                .set(i64::try_from(behind.len()).unwrap_or(i64::MAX));
            metrics
                .fleet_lag_seconds
                .set(i64::try_from(lag.as_secs()).unwrap_or(i64::MAX));
            if !behind.is_empty() {
                tracing::info!(
                    behind = behind.len(),
                    lag_secs = lag.as_secs(),
                    "fleet: repositories behind another replica; fetching them from it"
                );
                self.fetch_from_siblings(&behind).await;
            }
        }
    }

    fn fingerprint(&self, rid: &RepoId) -> Option<String> {
        self.index.repo(rid).ok().flatten().map(|r| r.fingerprint)
    }

    fn snapshot(&self) -> Compare {
        Compare {
            placement: self.placement.clone(),
            shard: self.shard.clone(),
            nid: self.nid,
            token: self.token.clone(),
            index: self.index.clone(),
        }
    }
}

/// The blocking half: ask the siblings (ureq) and compare with the index.
struct Compare {
    placement: Watched,
    shard: String,
    nid: NodeId,
    token: String,
    index: Index,
}

/// Most repositories asked per page.
const PAGE: usize = 1000;

impl Compare {
    /// Repositories placed here whose refs differ from a sibling's: the sibling to fetch each
    /// from, with its fingerprint.
    fn compare(&self) -> BTreeMap<RepoId, (Arc<Sibling>, String)> {
        let p = self.placement.get();
        let Some(shard) = p.shard(&self.shard) else {
            return BTreeMap::new();
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        let mut behind = BTreeMap::new();
        for admin in shard.replicas.iter().filter_map(|r| r.admin.clone()) {
            let sibling = match self.sibling(&agent, &admin) {
                Ok(Some(s)) => Arc::new(s),
                Ok(None) => continue, // ourselves
                Err(e) => {
                    tracing::info!(sibling = %admin, error = %e, "fleet: sibling not reachable; not catching up with it");
                    continue;
                }
            };
            let mut after: Option<String> = None;
            loop {
                let mut url = format!("{}/api/v1/repos?limit={PAGE}", sibling.admin);
                if let Some(a) = &after {
                    url.push_str(&format!("&after={a}"));
                }
                let page: seedd_api::ReposResponse = match self.get(&agent, &url) {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::warn!(sibling = %admin, error = %e, "fleet: listing the sibling's repositories failed");
                        break;
                    }
                };
                for r in &page.repos {
                    let Ok(rid) = r.rid.parse::<RepoId>() else {
                        continue;
                    };
                    if !p.seeds(&self.shard, &rid) || behind.contains_key(&rid) {
                        continue;
                    }
                    let ours = self.index.repo(&rid).ok().flatten().map(|x| x.fingerprint);
                    if ours.as_deref() != Some(r.fingerprint.as_str()) {
                        behind.insert(rid, (sibling.clone(), r.fingerprint.clone()));
                    }
                }
                match page.next {
                    Some(n) if !page.repos.is_empty() => after = Some(n),
                    _ => break,
                }
            }
        }
        behind
    }

    /// A sibling's identity and p2p address (`None`: the admin URL is our own).
    fn sibling(&self, agent: &ureq::Agent, admin: &str) -> Result<Option<Sibling>, String> {
        let status: seedd_api::Status = self.get(agent, &format!("{admin}/api/v1/status"))?;
        let nid: NodeId = status.nid.parse().map_err(|e| format!("node id: {e}"))?;
        if nid == self.nid {
            return Ok(None);
        }
        let port = status
            .p2p
            .as_ref()
            .and_then(|p| p.listen.first())
            .and_then(|l| l.rsplit_once(':').map(|(_, p)| p.to_owned()))
            .ok_or("no p2p listener")?;
        let host = admin
            .strip_prefix("http://")
            .and_then(|r| r.rsplit_once(':'))
            .map(|(h, _)| h.to_owned())
            .ok_or("admin URL is not http://host:port")?;
        Ok(Some(Sibling {
            nid,
            addr: format!("{host}:{port}"),
            admin: admin.to_owned(),
        }))
    }

    fn get<T: serde::de::DeserializeOwned>(
        &self,
        agent: &ureq::Agent,
        url: &str,
    ) -> Result<T, String> {
        let mut resp = agent
            .get(url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
            .map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!("{url}: {}", resp.status()));
        }
        resp.body_mut()
            .read_json::<T>()
            .map_err(|e| format!("{url}: {e}"))
    }
}
