//! Operations on tenants and policies with side effects: seeding (quota, deny and cap checks,
//! then a fetch), reference-counted unseeding with **purge** when the last tenant lets go,
//! tenant removal, and declarative `apply` (idempotent, returns the diff). Used by the admin
//! API, config reload and restore. Its own room above `tenant` and `policy`, so that neither
//! of those imports the other's operations.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use seedd_core::index::policy::{RepoPolicy, Scope};
use seedd_core::index::Index;
use seedd_core::policy::Policies;
use seedd_core::storage::Storage;
use seedd_core::tenant::{Quotas, Rate, State, Tenant, TenantError, Tenants};
use seedd_p2p::fetch::Fetcher;
use seedd_p2p::identity::Identities;
use seedd_proto::crypto::{NodeId, RepoId};

#[derive(Debug, thiserror::Error)]
pub(crate) enum ControlError {
    #[error(transparent)]
    Tenant(#[from] TenantError),
    #[error("{rid} is on the operator's deny list: lift it with `seedctl deny repo rm {rid}`")]
    Denied { rid: RepoId },
    #[error("purging {rid} failed: {cause}")]
    Purge { rid: RepoId, cause: std::io::Error },
    #[error("index: {0}")]
    Index(seedd_core::index::IndexError),
    #[error("{0}")]
    Invalid(String),
}

/// Everything a tenant change may touch. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Control {
    pub tenants: Tenants,
    pub policies: Policies,
    pub storage: Storage,
    pub index: Index,
    /// Purged repositories are renamed here first (atomic), then deleted.
    pub trash: PathBuf,
    /// Fetches newly seeded repositories.
    pub fetcher: Fetcher,
    /// Announce inventories and subscriptions when they changed.
    pub identities: Identities,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct SeedOutcome {
    pub rid: RepoId,
    pub seeded: bool,
    pub tenant: Option<String>,
    pub owner: bool,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct UnseedOutcome {
    pub rid: RepoId,
    pub unseeded: bool,
    pub purged: bool,
}

pub(crate) use seedd_core::config::TenantSpec;

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ApplyRequest {
    #[serde(default)]
    pub tenants: Vec<TenantSpec>,
    /// Remove tenants the spec does not name.
    #[serde(default)]
    pub prune: bool,
    #[serde(default)]
    pub dry_run: bool,
}

enum Action {
    Create(Tenant),
    Remove(String),
    State(String, State),
    Identity(String, String),
    Quotas(String, Quotas),
    Rate(String, Rate),
    AddHost(String, String),
    RmHost(String, String),
    Follow(String, NodeId, bool),
    DenyRepo(String, RepoId, bool),
    DenyNode(String, NodeId, bool),
    Seed(String, RepoId, Scope, Option<String>),
    Unseed(String, RepoId),
}

impl Control {
    /// Inventories and subscriptions changed: every identity announces them again, once per
    /// burst of changes (debounced).
    pub(crate) fn changed(&self) {
        self.identities.refresh_soon();
    }

    /// Start fetching a repository: from `from` once it is connected (up to 10 s), else from a
    /// connected node the routing table names; otherwise the sync loop picks it up later.
    fn start_fetch(&self, rid: RepoId, from: Option<NodeId>) {
        let fetcher = &self.fetcher;
        let source = from.or_else(|| {
            let connected = fetcher.connected();
            fetcher
                .routing(Some(rid))
                .into_iter()
                .map(|r| r.nid)
                .find(|n| connected.contains(n))
        });
        let Some(nid) = source else {
            tracing::info!(%rid, "no connected seed of this repository yet; the sync loop fetches it later");
            return;
        };
        let fetcher = fetcher.clone();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        handle.spawn(async move {
            for _ in 0..100 {
                if fetcher.connected().contains(&nid) {
                    fetcher.request(rid, nid);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tracing::warn!(%rid, peer = %nid, "seed: peer did not connect; fetch later by sync");
        });
    }
    /// Repositories the default identity announces for the operator itself.
    fn operator_seeded(&self) -> BTreeSet<RepoId> {
        match self.index.policies() {
            Ok((repos, _)) => repos
                .into_iter()
                .filter(|(_, p)| matches!(p, RepoPolicy::Allow { .. }))
                .map(|(rid, _)| rid)
                .collect(),
            Err(_) => BTreeSet::new(),
        }
    }

    /// Seed for a tenant (checks and claim) or, without one, as the operator (explicit policy).
    pub(crate) fn seed(
        &self,
        tenant: Option<&str>,
        rid: RepoId,
        scope: Scope,
        alias: Option<String>,
        from: Option<NodeId>,
    ) -> Result<SeedOutcome, ControlError> {
        let owner = match tenant {
            Some(name) => {
                if self.policies.denied(&rid) {
                    return Err(ControlError::Denied { rid });
                }
                let owner = self
                    .tenants
                    .seed(name, rid, scope, alias, &self.operator_seeded())?;
                let path = self.storage.path_of(&rid);
                if path.join("HEAD").exists() {
                    self.tenants
                        .set_size(rid, Some(seedd_core::tenant::dir_size(&path)));
                    self.tenants.refresh_metrics();
                }
                tracing::info!(tenant = %name, %rid, ?scope, owner, "tenant seeds repository");
                owner
            }
            None => {
                self.policies
                    .set_repo(&rid, Some(RepoPolicy::Allow { scope }))?;
                tracing::info!(%rid, ?scope, "operator seeds repository");
                false
            }
        };
        self.changed();
        self.start_fetch(rid, from);
        Ok(SeedOutcome {
            rid,
            seeded: true,
            tenant: tenant.map(str::to_owned),
            owner,
        })
    }

    /// Let go of a repository. A tenant's unseed purges it when nobody seeds it any more;
    /// the operator's unseed (no tenant) only drops the explicit policy, as before.
    pub(crate) fn unseed(
        &self,
        tenant: Option<&str>,
        rid: RepoId,
    ) -> Result<UnseedOutcome, ControlError> {
        match tenant {
            Some(name) => {
                let held = self
                    .tenants
                    .holds(name, &rid)
                    .ok_or_else(|| TenantError::Unknown(name.to_owned()))?;
                let last = self.tenants.unseed(name, &rid)?;
                let purged = held && last && self.policies.seeding(&rid).is_none();
                if purged {
                    self.purge_data(&rid)?;
                }
                tracing::info!(tenant = %name, %rid, purged, "tenant unseeds repository");
                self.changed();
                Ok(UnseedOutcome {
                    rid,
                    unseeded: held,
                    purged,
                })
            }
            None => {
                let had = self.policies.operator_seeds(&rid);
                if had {
                    self.policies.set_repo(&rid, None)?;
                }
                self.changed();
                Ok(UnseedOutcome {
                    rid,
                    unseeded: had,
                    purged: false,
                })
            }
        }
    }

    /// Remove a repository from every tenant, the operator's seeds, disk and index.
    pub(crate) fn purge(&self, rid: RepoId) -> Result<Vec<String>, ControlError> {
        let holders = self.tenants.release_all(&rid)?;
        if self.policies.operator_seeds(&rid) {
            self.policies.set_repo(&rid, None)?;
        }
        self.purge_data(&rid)?;
        self.changed();
        tracing::info!(%rid, tenants = ?holders, "repository purged");
        Ok(holders)
    }

    /// Delete a repository from disk and index. The directory is renamed into the trash first
    /// (atomic), so a crash leaves either the whole repository or none of it in storage; the
    /// startup rescan drops index entries of repositories that are gone.
    fn purge_data(&self, rid: &RepoId) -> Result<(), ControlError> {
        // Never under a running fetch or maintenance run of the repository: wait for it
        // (callers are on the blocking pool).
        let _repo = self.fetcher.locks().lock_blocking(*rid);
        let fail = |source| ControlError::Purge {
            rid: *rid,
            cause: source,
        };
        let src = self.storage.path_of(rid);
        if src.exists() {
            // Journaled first: a crash between the rename and the index's removal leaves the
            // mark, and the next start (which lists no storage) drops the record.
            self.index.mark_dirty(rid)?;
            seedd_core::fsutil::create_private_dir(&self.trash).map_err(fail)?;
            let dst = self.trash.join(format!(
                "{}-{}",
                rid.canonical(),
                seedd_core::tenant::now_ms()
            ));
            std::fs::rename(&src, &dst).map_err(fail)?;
            self.index.remove_repo(rid)?;
            self.index.clear_dirty(rid)?;
            if let Err(e) = std::fs::remove_dir_all(&dst) {
                tracing::warn!(%rid, path = %dst.display(), error = %seedd_core::logging::chain(&e), "removing purged repository failed; it is removed on the next start");
            }
        } else {
            self.index.remove_repo(rid)?;
        }
        self.tenants.set_size(*rid, None);
        self.tenants.note_purged(*rid);
        self.tenants.refresh_metrics();
        Ok(())
    }

    /// Empty the trash (at startup).
    pub(crate) fn empty_trash(&self) {
        if self.trash.exists() {
            if let Err(e) = std::fs::remove_dir_all(&self.trash) {
                tracing::warn!(path = %self.trash.display(), error = %seedd_core::logging::chain(&e), "emptying the purge trash failed");
            }
        }
    }

    /// Remove a tenant; repositories nobody seeds any more are purged.
    pub(crate) fn remove_tenant(&self, name: &str) -> Result<Vec<RepoId>, ControlError> {
        let released = self.tenants.remove(name)?;
        let mut purged = Vec::new();
        for rid in released {
            if self.policies.seeding(&rid).is_none() {
                self.purge_data(&rid)?;
                purged.push(rid);
            }
        }
        self.changed();
        Ok(purged)
    }

    /// Make tenants match `req` (idempotent). Returns the changes (`+` added, `-` removed,
    /// `~` changed); with `dry_run` nothing is changed.
    pub(crate) fn apply(&self, req: &ApplyRequest) -> Result<Vec<String>, ControlError> {
        let mut diff = Vec::new();
        let mut actions = Vec::new();
        let mut names = BTreeSet::new();
        for spec in &req.tenants {
            if !names.insert(spec.name.clone()) {
                return Err(ControlError::Invalid(format!(
                    "tenant `{}` is declared twice",
                    spec.name
                )));
            }
            plan(
                self.tenants.get(&spec.name).map(|(t, _)| t),
                spec,
                &mut diff,
                &mut actions,
            )?;
        }
        if req.prune {
            for (t, _) in self.tenants.list() {
                if !names.contains(&t.name) {
                    diff.push(format!("- tenant {}", t.name));
                    actions.push(Action::Remove(t.name));
                }
            }
        }
        if req.dry_run {
            return Ok(diff);
        }
        let total = actions.len();
        for (i, a) in actions.into_iter().enumerate() {
            self.run(a).map_err(|e| {
                ControlError::Invalid(format!("applied {i} of {total} changes, then: {e}"))
            })?;
        }
        Ok(diff)
    }

    fn run(&self, a: Action) -> Result<(), ControlError> {
        let t = &self.tenants;
        match a {
            Action::Create(tenant) => {
                t.create(tenant)?;
            }
            Action::Remove(name) => {
                self.remove_tenant(&name)?;
            }
            Action::State(n, s) => {
                t.set_state(&n, s)?;
                self.changed();
            }
            Action::Identity(n, i) => {
                t.set_identity_of(&n, &i)?;
                self.changed();
            }
            Action::Quotas(n, q) => {
                t.set_quotas(&n, q)?;
            }
            Action::Rate(n, r) => {
                t.set_rate(&n, r)?;
            }
            Action::AddHost(n, h) => {
                t.add_host(&n, &h)?;
            }
            Action::RmHost(n, h) => {
                t.remove_host(&n, &h)?;
            }
            Action::Follow(n, nid, f) => {
                t.set_follow(&n, nid, f)?;
            }
            Action::DenyRepo(n, rid, d) => {
                t.deny_repo(&n, rid, d)?;
            }
            Action::DenyNode(n, nid, d) => {
                t.deny_node(&n, nid, d)?;
            }
            Action::Seed(n, rid, scope, alias) => {
                self.seed(Some(&n), rid, scope, alias, None)?;
            }
            Action::Unseed(n, rid) => {
                self.unseed(Some(&n), rid)?;
            }
        }
        Ok(())
    }
}

fn opt<T: std::fmt::Debug>(v: Option<T>) -> String {
    match v {
        Some(v) => format!("{v:?}"),
        None => "unlimited".to_owned(),
    }
}

/// The actions that turn `current` into `spec`, with their human-readable diff lines.
fn plan(
    current: Option<Tenant>,
    spec: &TenantSpec,
    diff: &mut Vec<String>,
    actions: &mut Vec<Action>,
) -> Result<(), ControlError> {
    let n = spec.name.clone();
    let mut hosts: Vec<String> = Vec::new();
    for h in &spec.hosts {
        let h =
            seedd_core::tenant::normalise_host(h).ok_or_else(|| TenantError::BadHost(h.clone()))?;
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    let cur = match current {
        Some(t) => t,
        None => {
            let mut t = Tenant::new(&n);
            if !seedd_core::config::valid_name(&n) {
                return Err(TenantError::BadName(n).into());
            }
            t.hosts = hosts.clone();
            if let Some(i) = &spec.identity {
                t.identity = i.clone();
            }
            diff.push(format!("+ tenant {n}"));
            actions.push(Action::Create(t.clone()));
            for h in &hosts {
                diff.push(format!("+ {n} host {h}"));
            }
            t
        }
    };
    if let Some(i) = &spec.identity {
        if &cur.identity != i {
            diff.push(format!("~ {n} identity: {} → {i}", cur.identity));
            actions.push(Action::Identity(n.clone(), i.clone()));
        }
    }
    if let Some(q) = spec.quotas {
        if cur.quotas != q {
            for (k, a, b) in [
                ("repos", cur.quotas.repos, q.repos),
                ("bytes", cur.quotas.bytes, q.bytes),
                (
                    "egress_bytes_per_day",
                    cur.quotas.egress_bytes_per_day,
                    q.egress_bytes_per_day,
                ),
            ] {
                if a != b {
                    diff.push(format!("~ {n} quotas.{k}: {} → {}", opt(a), opt(b)));
                }
            }
            actions.push(Action::Quotas(n.clone(), q));
        }
    }
    if let Some(r) = spec.rate {
        if cur.rate != r {
            diff.push(format!(
                "~ {n} rate: {}/s burst {} → {}/s burst {}",
                opt(cur.rate.requests_per_second),
                opt(cur.rate.burst),
                opt(r.requests_per_second),
                opt(r.burst)
            ));
            actions.push(Action::Rate(n.clone(), r));
        }
    }
    for h in &cur.hosts {
        if !hosts.contains(h) {
            diff.push(format!("- {n} host {h}"));
            actions.push(Action::RmHost(n.clone(), h.clone()));
        }
    }
    for h in &hosts {
        if !cur.hosts.contains(h) {
            diff.push(format!("+ {n} host {h}"));
            actions.push(Action::AddHost(n.clone(), h.clone()));
        }
    }
    for f in &cur.follows {
        if !spec.follows.contains(f) {
            diff.push(format!("- {n} follow {f}"));
            actions.push(Action::Follow(n.clone(), *f, false));
        }
    }
    for f in &spec.follows {
        if !cur.follows.contains(f) {
            diff.push(format!("+ {n} follow {f}"));
            actions.push(Action::Follow(n.clone(), *f, true));
        }
    }
    let deny = spec.deny.clone().unwrap_or_default();
    for r in &cur.deny.repos {
        if !deny.repos.contains(r) {
            diff.push(format!("- {n} deny repo {r}"));
            actions.push(Action::DenyRepo(n.clone(), *r, false));
        }
    }
    for r in &deny.repos {
        if !cur.deny.repos.contains(r) {
            diff.push(format!("+ {n} deny repo {r}"));
            actions.push(Action::DenyRepo(n.clone(), *r, true));
        }
    }
    for x in &cur.deny.nodes {
        if !deny.nodes.contains(x) {
            diff.push(format!("- {n} deny node {x}"));
            actions.push(Action::DenyNode(n.clone(), *x, false));
        }
    }
    for x in &deny.nodes {
        if !cur.deny.nodes.contains(x) {
            diff.push(format!("+ {n} deny node {x}"));
            actions.push(Action::DenyNode(n.clone(), *x, true));
        }
    }
    // Removals before additions, so freed quota is available.
    for r in &cur.repos {
        if !spec.repos.iter().any(|s| s.rid == r.rid) {
            diff.push(format!("- {n} repo {}", r.rid));
            actions.push(Action::Unseed(n.clone(), r.rid));
        }
    }
    for s in &spec.repos {
        let scope = s.scope.unwrap_or(Scope::Followed);
        match cur.repos.iter().find(|r| r.rid == s.rid) {
            None => {
                diff.push(format!("+ {n} repo {} ({})", s.rid, scope_str(scope)));
                actions.push(Action::Seed(n.clone(), s.rid, scope, s.alias.clone()));
            }
            Some(r) if r.scope != scope || (s.alias.is_some() && r.alias != s.alias) => {
                diff.push(format!(
                    "~ {n} repo {} scope {} → {}, alias {} → {}",
                    s.rid,
                    scope_str(r.scope),
                    scope_str(scope),
                    r.alias.as_deref().unwrap_or("-"),
                    s.alias.as_deref().unwrap_or("-")
                ));
                actions.push(Action::Seed(n.clone(), s.rid, scope, s.alias.clone()));
            }
            Some(_) => {}
        }
    }
    // State last: a tenant declared suspended gets its repositories first.
    let state = spec.state.unwrap_or(State::Active);
    if cur.state != state {
        diff.push(format!(
            "~ {n} state: {} → {}",
            cur.state.as_str(),
            state.as_str()
        ));
        actions.push(Action::State(n.clone(), state));
    }
    Ok(())
}

fn scope_str(s: Scope) -> &'static str {
    match s {
        Scope::All => "all",
        Scope::Followed => "followed",
    }
}

impl From<seedd_core::index::IndexError> for ControlError {
    fn from(e: seedd_core::index::IndexError) -> Self {
        ControlError::Index(e)
    }
}
