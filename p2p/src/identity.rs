//! Seed identities: one daemon serves several Radicle identities, each with its own key and its
//! own p2p listener (the Noise XK handshake cannot be virtual-hosted, operators.md §3.1). The
//! `default` identity is the node key; others are declared in the config (`[[identities]]`) or
//! created at runtime (`seedctl identity create`, persisted in the index). Each identity
//! announces the inventory of the tenants placed on it; the default one also announces the
//! operator's own repositories and those of tenants without a dedicated identity. Replication
//! follows every identity's hints and fetches through the identity the peer is connected to:
//! it reads [`Identities::nets`] and learns of identities started later from
//! [`Identities::started`], so identities know nothing of replication.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::net::{Net, NetConfig, NetDeps};
pub use seedd_core::config::IdentitySpec;
use seedd_core::config::{valid_name, DEFAULT_IDENTITY, INVENTORY_LIMIT};
use seedd_core::index::tenants::Kind;
use seedd_core::index::Index;
use seedd_core::policy::Policies;
use seedd_core::tenant::Tenants;
use seedd_proto::crypto::RepoId;

mod announce;

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("invalid identity name `{0}`: use 1-63 of a-z, 0-9 and `-`")]
    BadName(String),
    #[error("identity `{0}` already exists")]
    Exists(String),
    #[error("identity `{name}`: {reason}")]
    Start { name: String, reason: String },
}

struct Running {
    spec: IdentitySpec,
    net: Net,
}

/// What starting another identity's p2p layer needs.
#[derive(Clone)]
pub struct Launch {
    pub keys_dir: PathBuf,
    pub passphrase: Option<String>,
    pub base: NetConfig,
    pub deps: NetDeps,
    pub shutdown: CancellationToken,
}

/// The identities of this daemon. Cheap to clone.
#[derive(Clone)]
pub struct Identities {
    default: Net,
    default_cap: usize,
    others: Arc<Mutex<Vec<Running>>>,
    launch: Launch,
    tenants: Tenants,
    policies: Policies,
    index: Index,
    metrics: Arc<seedd_core::metrics::Metrics>,
    /// Bumped whenever an identity starts (replication follows the new identity's hints).
    started: Arc<watch::Sender<()>>,
    /// What each identity announces (before its cap), by name: what [`Identities::refresh`]
    /// computed, kept current repository by repository by [`Identities::repo_changed`]. The lock
    /// also orders the two, so an older full refresh never overwrites a newer change.
    inventories: Arc<Mutex<HashMap<String, BTreeSet<RepoId>>>>,
    /// A debounced [`Identities::refresh_soon`] is waiting.
    refresh_pending: Arc<AtomicBool>,
    /// Identities over their cap whose inventory changed, with what joined (`true`) or left:
    /// their most wanted are selected again once per [`PUBLISH_DEBOUNCE`], not once per change
    /// ([`Identities::publish_soon`]).
    publish_pending: Arc<Mutex<HashMap<String, HashMap<RepoId, bool>>>>,
    /// Over-cap identities' selections with the Unix second of their last full selection: a
    /// change updates one at the cost of the cap ([`announce::Selection::update`]).
    selections: Arc<Mutex<HashMap<String, (announce::Selection, u64)>>>,
    /// Counts [`Identities::refresh`]es (policy, tenant and storage changes): the sync task
    /// re-reads what is seeded when it moves.
    seeding_generation: Arc<std::sync::atomic::AtomicU64>,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How long [`Identities::refresh_soon`] gathers changes before one full refresh.
const REFRESH_DEBOUNCE: Duration = Duration::from_millis(250);
/// How long an over-cap inventory's changes gather before its most wanted are selected again
/// (a selection reads every held repository's demand and update time: at 100k repositories,
/// once per fetched repository would be the bulk of a new seed's CPU).
const PUBLISH_DEBOUNCE: Duration = Duration::from_secs(1);
/// An over-cap selection is made in full again at least this often (seconds): between two,
/// changes update it ([`announce::Selection`]), and a repository asked for again in the
/// meantime may wait this long to displace an announced one.
const FULL_SELECTION_EVERY: u64 = 600;

/// `seedctl identity ls` row.
#[derive(Debug, Clone, Serialize)]
pub struct IdentityInfo {
    pub name: String,
    pub nid: String,
    pub listen: Vec<String>,
    pub external_addresses: Vec<String>,
    pub tenants: Vec<String>,
    pub inventory: usize,
    pub cap: usize,
}

impl Identities {
    pub fn new(
        default: Net,
        default_cap: usize,
        launch: Launch,
        tenants: Tenants,
        policies: Policies,
        index: Index,
        metrics: Arc<seedd_core::metrics::Metrics>,
    ) -> Self {
        tenants.set_identity(DEFAULT_IDENTITY, default_cap);
        Self {
            default,
            default_cap: default_cap.min(INVENTORY_LIMIT),
            others: Arc::new(Mutex::new(Vec::new())),
            launch,
            tenants,
            policies,
            index,
            metrics,
            started: Arc::new(watch::channel(()).0),
            inventories: Arc::default(),
            refresh_pending: Arc::default(),
            publish_pending: Arc::default(),
            selections: Arc::default(),
            seeding_generation: Arc::default(),
        }
    }

    /// Moves whenever what is seeded may have changed (each [`Identities::refresh`]).
    pub(crate) fn seeding_generation(&self) -> u64 {
        self.seeding_generation
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Every identity's p2p layer, the default first.
    pub(crate) fn nets(&self) -> Vec<Net> {
        let mut nets = vec![self.default.clone()];
        nets.extend(self.lock().iter().map(|r| r.net.clone()));
        nets
    }

    /// Changes each time an identity starts: read [`nets`](Self::nets) again then.
    pub(crate) fn started(&self) -> watch::Receiver<()> {
        self.started.subscribe()
    }

    pub fn default_net(&self) -> &Net {
        &self.default
    }

    /// Identities created at runtime (persisted in the index).
    pub fn persisted(&self) -> Vec<IdentitySpec> {
        self.index
            .tenant_records(Kind::Identity)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(_, v)| serde_json::from_slice(&v).ok())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Running>> {
        self.others.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start an identity: load or generate its key under `keys/<name>/`, listen, announce.
    /// `persist` records it in the index (runtime creation).
    pub async fn start(
        &self,
        spec: IdentitySpec,
        persist: bool,
    ) -> Result<IdentityInfo, IdentityError> {
        if !valid_name(&spec.name) || spec.name == DEFAULT_IDENTITY {
            return Err(IdentityError::BadName(spec.name));
        }
        if self.lock().iter().any(|r| r.spec.name == spec.name) {
            return Err(IdentityError::Exists(spec.name));
        }
        let fail = |reason: String| IdentityError::Start {
            name: spec.name.clone(),
            reason,
        };
        let dir = self.launch.keys_dir.join(&spec.name);
        let (key, created) =
            seedd_proto::crypto::load_or_generate(&dir, self.launch.passphrase.as_deref())
                .map_err(|e| fail(format!("key in {}: {e}", dir.display())))?;
        if created {
            tracing::info!(identity = %spec.name, nid = %key.nid(), "generated a new identity key");
        }
        let mut cfg = self.launch.base.clone();
        cfg.listen = spec
            .listen
            .iter()
            .map(|l| {
                l.parse()
                    .map_err(|e| fail(format!("listen address {l:?}: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let mut ext = Vec::new();
        for a in &spec.external_addresses {
            ext.push(
                a.parse()
                    .map_err(|e| fail(format!("external address {a:?}: {e}")))?,
            );
        }
        cfg.gossip.external_addresses = ext;
        let net = Net::start(
            key,
            cfg,
            self.launch.deps.clone(),
            self.launch.shutdown.clone(),
        )
        .await
        .map_err(|e| fail(format!("{e:#}")))?;
        if persist {
            let bytes = serde_json::to_vec(&spec).map_err(|e| fail(e.to_string()))?;
            self.index
                .put_tenant_record(Kind::Identity, &spec.name, &bytes)
                .map_err(|e| fail(e.to_string()))?;
        }
        let cap = spec
            .inventory_cap
            .unwrap_or(INVENTORY_LIMIT)
            .min(INVENTORY_LIMIT);
        self.tenants.set_identity(&spec.name, cap);
        tracing::info!(identity = %spec.name, nid = %net.nid(), listen = ?net.local_addrs(), "seed identity started");
        self.lock().push(Running {
            spec: spec.clone(),
            net,
        });
        self.started.send_replace(());
        // Reads every index record: on the blocking pool, not an async worker.
        let this = self.clone();
        if let Err(e) =
            seedd_core::blocking::run(Duration::from_secs(60), move || this.refresh()).await
        {
            tracing::warn!(identity = %spec.name, error = %seedd_core::logging::chain(&e), "announcing the inventories after starting an identity");
        }
        self.list()
            .into_iter()
            .find(|i| i.name == spec.name)
            .ok_or_else(|| fail("vanished".into()))
    }

    /// Announce each identity's inventory and subscription filter, from every index record:
    /// at start, after rescans and when policies or tenants change. A fetch changes one
    /// repository and goes through [`Identities::repo_changed`] instead.
    pub fn refresh(&self) {
        self.seeding_generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        // Records one at a time: only their visibility is kept, not 100,000 decoded records.
        let visibility = match crate::net::visibility_map(&self.index) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(error = %seedd_core::logging::chain(&e), "reading the index for the inventory failed");
                return;
            }
        };
        let mut inventories = self.inventories();
        // Every identity first learns who may see which repository (private ones: delegates
        // and allow list only), then its inventory.
        let visibility = Arc::new(visibility);
        self.default.set_visibility(visibility.clone());
        for r in self.lock().iter() {
            r.net.set_visibility(visibility.clone());
        }
        let p = &self.policies;
        let seeded: Vec<_> = p.explicitly_seeded().into_iter().map(|(r, _)| r).collect();
        let dedicated = self.tenants.dedicated_only();
        // Default: public, seeded, not held only by tenants on dedicated identities.
        let public = visibility.public();
        let default_list: Vec<RepoId> = public
            .iter()
            .filter(|rid| p.seeding(rid).is_some() && !dedicated.contains(rid))
            .copied()
            .collect();
        // In RID order already: the set is built in one pass.
        let default_inv: BTreeSet<RepoId> = default_list.iter().copied().collect();
        self.publish(
            DEFAULT_IDENTITY,
            &self.default,
            default_list,
            self.default_cap,
        );
        inventories.clear();
        inventories.insert(DEFAULT_IDENTITY.to_owned(), default_inv);
        self.default.set_seeding(p.seeds_by_default(), seeded);
        for r in self.lock().iter() {
            let mine = self.tenants.identity_repos(&r.spec.name);
            let inv: BTreeSet<_> = mine
                .iter()
                .filter(|rid| public.binary_search(rid).is_ok() && p.seeding(rid).is_some())
                .copied()
                .collect();
            let cap = r.spec.inventory_cap.unwrap_or(INVENTORY_LIMIT);
            self.publish(&r.spec.name, &r.net, inv.iter().copied().collect(), cap);
            inventories.insert(r.spec.name.clone(), inv);
            r.net.set_seeding(false, mine.into_iter().collect());
        }
    }

    /// [`Identities::refresh`] within [`REFRESH_DEBOUNCE`], once for all the calls made
    /// meanwhile, on the blocking pool (tenant and policy changes come in bursts: `apply`).
    /// Without a runtime (tests, shutdown) it refreshes at once.
    pub fn refresh_soon(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.refresh();
            return;
        };
        if self.refresh_pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        rt.spawn(async move {
            tokio::time::sleep(REFRESH_DEBOUNCE).await;
            this.refresh_pending.store(false, Ordering::Release);
            let run = this.clone();
            if let Err(e) =
                seedd_core::blocking::run(Duration::from_secs(120), move || run.refresh()).await
            {
                tracing::warn!(error = %seedd_core::logging::chain(&e), "announcing the inventories after a change");
            }
        });
    }

    /// One repository changed (fetched, re-indexed): its visibility goes to every identity and
    /// it joins or leaves their inventories, at the cost of this repository only (an inventory
    /// is announced again only when its membership changed; one over its cap within
    /// [`PUBLISH_DEBOUNCE`], as its most wanted are selected from all it holds). Blocking
    /// (one index read).
    pub(crate) fn repo_changed(&self, rid: RepoId) {
        let record = match self.index.repo(&rid) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(%rid, error = %seedd_core::logging::chain(&e), "reading the index after a change; refreshing every inventory");
                self.refresh_soon();
                return;
            }
        };
        let visibility = record.as_ref().map(crate::net::visibility_of);
        let mut inventories = self.inventories();
        self.default.set_repo_visibility(rid, visibility.clone());
        for r in self.lock().iter() {
            r.net.set_repo_visibility(rid, visibility.clone());
        }
        let wanted =
            record.as_ref().is_some_and(|r| r.is_public()) && self.policies.seeding(&rid).is_some();
        let holders = self.tenants.identities_of(&rid);
        let dedicated_only = !holders.is_empty() && !holders.contains(DEFAULT_IDENTITY);
        let mut over_cap: Vec<(String, bool)> = Vec::new();
        let mut update = |name: &str, member: bool, net: &Net, cap: usize| {
            let inv = inventories.entry(name.to_owned()).or_default();
            let changed = if member {
                inv.insert(rid)
            } else {
                inv.remove(&rid)
            };
            if changed {
                if inv.len() > cap.min(INVENTORY_LIMIT) {
                    over_cap.push((name.to_owned(), member));
                } else {
                    self.publish(name, net, inv.iter().copied().collect(), cap);
                }
            }
        };
        update(
            DEFAULT_IDENTITY,
            wanted && !dedicated_only,
            &self.default,
            self.default_cap,
        );
        for r in self.lock().iter() {
            let member = wanted && holders.contains(&r.spec.name);
            let cap = r.spec.inventory_cap.unwrap_or(INVENTORY_LIMIT);
            update(&r.spec.name, member, &r.net, cap);
        }
        drop(inventories);
        for (name, member) in over_cap {
            self.publish_soon(name, rid, member);
        }
    }

    /// Publishes identity `name`'s inventory within [`PUBLISH_DEBOUNCE`], once for all the
    /// changes made meanwhile (`rid` joined it when `member`, else left), on the blocking
    /// pool. Without a runtime (tests, shutdown) at once.
    fn publish_soon(&self, name: String, rid: RepoId, member: bool) {
        let first = {
            let mut pending = self
                .publish_pending
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let first = pending.is_empty();
            pending.entry(name).or_default().insert(rid, member);
            first
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.publish_pending_now();
            return;
        };
        if !first {
            return;
        }
        let this = self.clone();
        rt.spawn(async move {
            tokio::time::sleep(PUBLISH_DEBOUNCE).await;
            let run = this.clone();
            if let Err(e) = seedd_core::blocking::run(Duration::from_secs(120), move || {
                run.publish_pending_now()
            })
            .await
            {
                tracing::warn!(error = %seedd_core::logging::chain(&e), "announcing an inventory after changes");
            }
        });
    }

    /// Publishes every identity [`Identities::publish_soon`] was asked for, from what
    /// [`Identities::repo_changed`] keeps: an over-cap selection is updated from the changes
    /// (the cost of the cap), or made in full when that cannot be done or the last full one
    /// is [`FULL_SELECTION_EVERY`] old (the cost of the inventory).
    fn publish_pending_now(&self) {
        let pending = std::mem::take(
            &mut *self
                .publish_pending
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        let inventories = self.inventories();
        for (name, changes) in pending {
            let Some(inv) = inventories.get(&name) else {
                continue;
            };
            let (net, cap) = if name == DEFAULT_IDENTITY {
                (self.default.clone(), self.default_cap)
            } else if let Some(r) = self.lock().iter().find(|r| r.spec.name == name) {
                (
                    r.net.clone(),
                    r.spec.inventory_cap.unwrap_or(INVENTORY_LIMIT),
                )
            } else {
                continue;
            };
            let cap = cap.min(INVENTORY_LIMIT);
            if inv.len() > cap {
                if let Some(chosen) = self.update_selection(&name, inv, &changes, cap) {
                    self.announce(&name, &net, inv.len(), chosen, cap);
                    continue;
                }
            }
            self.publish(&name, &net, inv.iter().copied().collect(), cap);
        }
    }

    /// Identity `name`'s selection updated from `changes` to its inventory `inv` (over `cap`):
    /// the chosen, the spares and what joined ranked again. `None` when there is no recent
    /// full selection to update or the update declines.
    fn update_selection(
        &self,
        name: &str,
        inv: &BTreeSet<RepoId>,
        changes: &HashMap<RepoId, bool>,
        cap: usize,
    ) -> Option<Vec<RepoId>> {
        let now = unix_now();
        let mut selections = self.selections.lock().unwrap_or_else(|p| p.into_inner());
        let (sel, full_at) = selections.get(name)?;
        if now.saturating_sub(*full_at) >= FULL_SELECTION_EVERY {
            return None;
        }
        let mut pool: Vec<RepoId> = sel.pool().filter(|r| inv.contains(r)).collect();
        let pooled: HashSet<RepoId> = pool.iter().copied().collect();
        pool.extend(
            changes
                .iter()
                .filter(|(rid, member)| **member && inv.contains(rid) && !pooled.contains(rid))
                .map(|(rid, _)| *rid),
        );
        let next = sel.update(self.candidates(pool, now), cap, now)?;
        let chosen = next.chosen.clone();
        let full_at = *full_at;
        selections.insert(name.to_owned(), (next, full_at));
        Some(chosen)
    }

    fn inventories(&self) -> std::sync::MutexGuard<'_, HashMap<String, BTreeSet<RepoId>>> {
        self.inventories.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Announces `inv` on `net`, or, when it holds more than `cap` (at most one message's
    /// 2,973), the `cap` most wanted of them (`announce::select`), counting the rest in
    /// `seedd_identity_inventory_unannounced_repos` and warning when that starts.
    fn publish(&self, name: &str, net: &Net, inv: Vec<seedd_proto::crypto::RepoId>, cap: usize) {
        let cap = cap.min(INVENTORY_LIMIT);
        let held = inv.len();
        let mut selections = self.selections.lock().unwrap_or_else(|p| p.into_inner());
        let inv = if held > cap {
            let sel = self.most_wanted(net, inv, cap);
            let chosen = sel.chosen.clone();
            selections.insert(name.to_owned(), (sel, unix_now()));
            chosen
        } else {
            selections.remove(name);
            inv
        };
        drop(selections);
        self.announce(name, net, held, inv, cap);
    }

    /// Announces `inv`, the selection out of `held` repositories, on `net`, counting the
    /// unannounced in `seedd_identity_inventory_unannounced_repos`.
    fn announce(&self, name: &str, net: &Net, held: usize, inv: Vec<RepoId>, cap: usize) {
        let unannounced = held.saturating_sub(inv.len());
        let m = &self.metrics.tenant;
        let gauge = m.identity_unannounced.with_label_values(&[name]);
        if unannounced > 0 && gauge.get() == 0 {
            let remedy = if name == DEFAULT_IDENTITY {
                "raise p2p.inventory_cap (at most 2973), or place tenants on identities of their own ([[identities]], `seedctl identity create`, tenant `identity`)"
            } else {
                "raise this identity's inventory_cap (at most 2973), or move some of its tenants to another identity"
            };
            tracing::warn!(
                identity = %name,
                held,
                announced = inv.len(),
                cap,
                "identity holds more repositories than its inventory cap: announcing the most wanted; {remedy}"
            );
        } else if unannounced == 0 && gauge.get() > 0 {
            tracing::info!(identity = %name, held, "identity announces its whole inventory again");
        }
        gauge.set(unannounced as i64);
        m.identity_inventory
            .with_label_values(&[name])
            .set(inv.len() as i64);
        m.identity_cap.with_label_values(&[name]).set(cap as i64);
        net.set_inventory(inv);
    }

    /// The `cap` repositories of `inv` to announce: most requested, then most recently updated,
    /// keeping what `net` announces now where that ties (see `announce`), with the runners-up
    /// later changes update it from.
    fn most_wanted(
        &self,
        net: &Net,
        inv: Vec<seedd_proto::crypto::RepoId>,
        cap: usize,
    ) -> announce::Selection {
        let now = unix_now();
        let candidates = self.candidates(inv, now);
        let previous = net.inventory().into_iter().collect();
        announce::Selection::full(candidates, cap, &previous, now)
    }

    /// Each of `rids` with its demand and update time (both from memory).
    fn candidates(&self, rids: Vec<RepoId>, now: u64) -> Vec<announce::Candidate> {
        let demand = self.metrics.demand.scores_at(&rids, now);
        let updated = self.index.indexed_at_each(&rids);
        rids.into_iter()
            .zip(demand)
            .zip(updated)
            .map(|((rid, demand), updated)| announce::Candidate {
                rid,
                demand,
                updated: updated.unwrap_or(0),
            })
            .collect()
    }

    pub fn list(&self) -> Vec<IdentityInfo> {
        let tenants = self.tenants.list();
        let on = |name: &str| -> Vec<String> {
            tenants
                .iter()
                .filter(|(t, _)| t.identity == name)
                .map(|(t, _)| t.name.clone())
                .collect()
        };
        let mut out = vec![IdentityInfo {
            name: DEFAULT_IDENTITY.to_owned(),
            nid: self.default.nid().to_string(),
            listen: self
                .default
                .local_addrs()
                .iter()
                .map(ToString::to_string)
                .collect(),
            external_addresses: Vec::new(),
            tenants: on(DEFAULT_IDENTITY),
            inventory: self
                .metrics
                .tenant
                .identity_inventory
                .with_label_values(&[DEFAULT_IDENTITY])
                .get() as usize,
            cap: self.default_cap,
        }];
        for r in self.lock().iter() {
            out.push(IdentityInfo {
                name: r.spec.name.clone(),
                nid: r.net.nid().to_string(),
                listen: r
                    .net
                    .local_addrs()
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
                external_addresses: r.spec.external_addresses.clone(),
                tenants: on(&r.spec.name),
                inventory: self
                    .metrics
                    .tenant
                    .identity_inventory
                    .with_label_values(&[&r.spec.name])
                    .get() as usize,
                cap: r.spec.inventory_cap.unwrap_or(INVENTORY_LIMIT),
            });
        }
        out
    }

    /// New p2p rate limits and ban settings for every identity (config reload).
    pub fn set_p2p_limits(
        &self,
        rate: &seedd_core::config::RateConfig,
        ban: &seedd_core::config::BanConfig,
    ) {
        self.default.set_limits(rate.clone(), ban.clone());
        for r in self.lock().iter() {
            r.net.set_limits(rate.clone(), ban.clone());
        }
    }

    /// Every running identity's spec (backup).
    pub fn specs(&self) -> Vec<IdentitySpec> {
        self.lock().iter().map(|r| r.spec.clone()).collect()
    }

    pub async fn shutdown(&self) {
        let nets: Vec<Net> = self.lock().iter().map(|r| r.net.clone()).collect();
        for n in nets {
            n.shutdown().await;
        }
        self.default.shutdown().await;
    }
}
