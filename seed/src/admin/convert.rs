//! The daemon's records as admin API bodies (`seedd_api`), and API requests as the daemon's
//! types. Identifiers become strings on the way out; on the way in, deep specs (backups,
//! tenant specs) are checked by the daemon type's own `Deserialize`.

use seedd_api as api;
use serde::de::DeserializeOwned;
use serde::Serialize;

use seedd_core::index::policy::{NodePolicy, RepoPolicy, Scope};
use seedd_core::storage::identity::Visibility;
use seedd_core::storage::sigrefs::FeatureLevel;
use seedd_core::tenant::{DenyList, Quotas, Rate, State, Tenant, TenantRepo, Usage};

/// An API request body as the daemon's type, checked by that type's `Deserialize` (ids parsed,
/// names and limits validated) — one set of rules for the config file, backups and the API.
pub(super) fn checked<T: DeserializeOwned>(body: impl Serialize) -> Result<T, serde_json::Error> {
    serde_json::from_value(serde_json::to_value(body)?)
}

fn strings<T: ToString>(items: &[T]) -> Vec<String> {
    items.iter().map(ToString::to_string).collect()
}

pub(super) fn scope(s: Scope) -> api::Scope {
    match s {
        Scope::All => api::Scope::All,
        Scope::Followed => api::Scope::Followed,
    }
}

pub(super) fn repo_policy(p: RepoPolicy) -> api::RepoPolicy {
    match p {
        RepoPolicy::Allow { scope: s } => api::RepoPolicy::Allow { scope: scope(s) },
        RepoPolicy::Block => api::RepoPolicy::Block,
    }
}

pub(super) fn node_policy(p: NodePolicy) -> api::NodePolicy {
    match p {
        NodePolicy::Allow { alias } => api::NodePolicy::Allow { alias },
        NodePolicy::Block => api::NodePolicy::Block,
    }
}

pub(super) fn scan_report(r: seedd_core::index::scan::ScanReport) -> api::ScanReport {
    api::ScanReport {
        scanned: r.scanned,
        added: r.added,
        updated: r.updated,
        unchanged: r.unchanged,
        removed: r.removed,
        failed: r.failed,
        errors: r.errors,
        duration_ms: r.duration_ms,
    }
}

fn visibility(v: Visibility) -> api::Visibility {
    match v {
        Visibility::Public => api::Visibility::Public,
        Visibility::Private { allow } => api::Visibility::Private {
            allow: strings(&allow),
        },
    }
}

pub(super) fn repo_record(r: seedd_core::index::RepoRecord) -> api::RepoRecord {
    api::RepoRecord {
        rid: r.rid.to_string(),
        name: r.name,
        description: r.description,
        default_branch: r.default_branch,
        delegates: strings(&r.delegates),
        threshold: r.threshold,
        visibility: visibility(r.visibility),
        identity_head: r.identity_head,
        head: r.head,
        fingerprint: r.fingerprint,
        ref_count: r.ref_count,
        namespaces: strings(&r.namespaces),
        indexed_at: r.indexed_at,
        tenants: None,
    }
}

pub(super) fn sigrefs(s: seedd_core::index::SigrefsRecord) -> api::Sigrefs {
    api::Sigrefs {
        nid: s.nid.to_string(),
        commit: s.commit,
        level: s.level.map(|l| match l {
            FeatureLevel::None => api::FeatureLevel::None,
            FeatureLevel::Root => api::FeatureLevel::Root,
            FeatureLevel::Parent => api::FeatureLevel::Parent,
        }),
        error: s.error,
    }
}

pub(super) fn peer(p: seedd_p2p::net::PeerInfo) -> api::Peer {
    api::Peer {
        nid: p.nid.to_string(),
        link: p.link.to_owned(),
        addr: p.addr,
        state: p.state.to_owned(),
        since: p.since,
        latency_ms: p.latency_ms,
        subscribed: p.subscribed,
        alias: p.alias,
        agent: p.agent,
    }
}

pub(super) fn p2p_status(s: seedd_p2p::net::P2pStatus) -> api::P2pStatus {
    api::P2pStatus {
        listen: s.listen,
        relay: s.relay,
        sessions: s.sessions,
        inventory: s.inventory,
        routing_entries: s.routing_entries,
        known_nodes: s.known_nodes,
        node_announcement_timestamp: s.node_announcement_timestamp,
    }
}

pub(super) fn route(r: seedd_p2p::net::RouteInfo) -> api::Route {
    api::Route {
        rid: r.rid.to_string(),
        nid: r.nid.to_string(),
        timestamp: r.timestamp,
    }
}

pub(super) fn node(n: seedd_proto::gossip::NodeRecord) -> api::NodeRecord {
    api::NodeRecord {
        nid: n.nid.to_string(),
        version: n.version,
        features: n.features,
        alias: n.alias,
        agent: n.agent,
        addresses: n.addresses,
        timestamp: n.timestamp,
        last_seen: n.last_seen,
    }
}

pub(super) fn ban(b: seedd_core::index::gossip::BanRecord) -> api::Ban {
    api::Ban {
        ip: b.ip.to_string(),
        penalty: b.penalty,
        banned_until: b.banned_until,
        reason: b.reason,
        updated_at: b.updated_at,
    }
}

pub(super) fn identity(i: seedd_p2p::identity::IdentityInfo) -> api::IdentityInfo {
    api::IdentityInfo {
        name: i.name,
        nid: i.nid,
        listen: i.listen,
        external_addresses: i.external_addresses,
        tenants: i.tenants,
        inventory: i.inventory,
        cap: i.cap,
    }
}

pub(super) fn identity_spec(s: api::IdentityCreate) -> seedd_p2p::identity::IdentitySpec {
    seedd_p2p::identity::IdentitySpec {
        name: s.name,
        listen: s.listen,
        external_addresses: s.external_addresses,
        inventory_cap: s.inventory_cap,
    }
}

fn backup_identity(s: seedd_p2p::identity::IdentitySpec) -> api::BackupIdentity {
    api::BackupIdentity {
        name: s.name,
        listen: s.listen,
        external_addresses: s.external_addresses,
        inventory_cap: s.inventory_cap,
    }
}

pub(super) fn state(s: State) -> api::TenantState {
    match s {
        State::Active => api::TenantState::Active,
        State::Suspended => api::TenantState::Suspended,
    }
}

pub(super) fn quotas(q: Quotas) -> api::Quotas {
    api::Quotas {
        repos: q.repos,
        bytes: q.bytes,
        egress_bytes_per_day: q.egress_bytes_per_day,
    }
}

pub(super) fn quotas_in(q: api::Quotas) -> Quotas {
    Quotas {
        repos: q.repos,
        bytes: q.bytes,
        egress_bytes_per_day: q.egress_bytes_per_day,
    }
}

pub(super) fn rate(r: Rate) -> api::Rate {
    api::Rate {
        requests_per_second: r.requests_per_second,
        burst: r.burst,
    }
}

pub(super) fn rate_in(r: api::Rate) -> Rate {
    Rate {
        requests_per_second: r.requests_per_second,
        burst: r.burst,
    }
}

fn deny_list(d: DenyList) -> api::DenyList {
    api::DenyList {
        repos: strings(&d.repos),
        nodes: strings(&d.nodes),
    }
}

fn usage(u: Usage) -> api::Usage {
    api::Usage {
        repos: u.repos,
        stored_bytes: u.stored_bytes,
        egress_today_bytes: u.egress_today_bytes,
    }
}

/// A tenant as the API shows it; `owns` tells whether it owns a repository.
pub(super) fn tenant(t: Tenant, u: Usage, owns: impl Fn(&TenantRepo) -> bool) -> api::Tenant {
    let repos = t
        .repos
        .iter()
        .map(|r| api::TenantRepo {
            rid: r.rid.to_string(),
            scope: scope(r.scope),
            alias: r.alias.clone(),
            owner: owns(r),
        })
        .collect();
    api::Tenant {
        name: t.name,
        state: state(t.state),
        identity: t.identity,
        hosts: t.hosts,
        repos,
        follows: strings(&t.follows),
        deny: deny_list(t.deny),
        quotas: quotas(t.quotas),
        rate: rate(t.rate),
        created_at: t.created_at,
        usage: usage(u),
    }
}

fn tenant_record(t: Tenant) -> api::TenantRecord {
    api::TenantRecord {
        name: t.name,
        state: state(t.state),
        identity: t.identity,
        hosts: t.hosts,
        repos: t
            .repos
            .into_iter()
            .map(|r| api::TenantRepoRecord {
                rid: r.rid.to_string(),
                scope: scope(r.scope),
                alias: r.alias,
                since: r.since,
            })
            .collect(),
        follows: strings(&t.follows),
        deny: deny_list(t.deny),
        quotas: quotas(t.quotas),
        rate: rate(t.rate),
        created_at: t.created_at,
    }
}

pub(super) fn backup(b: crate::backup::Backup) -> api::Backup {
    api::Backup {
        version: b.version,
        created_at: b.created_at,
        nid: b.nid,
        keys: b.keys,
        identities: b.identities.into_iter().map(backup_identity).collect(),
        tenants: b.tenants.into_iter().map(tenant_record).collect(),
        policies: api::PolicySet {
            repos: b
                .policies
                .repos
                .into_iter()
                .map(|e| api::BackupRepoPolicy {
                    rid: e.rid.to_string(),
                    policy: repo_policy(e.policy),
                })
                .collect(),
            nodes: b
                .policies
                .nodes
                .into_iter()
                .map(|e| api::BackupNodePolicy {
                    nid: e.nid.to_string(),
                    policy: node_policy(e.policy),
                })
                .collect(),
        },
        meta: b.meta,
    }
}

pub(super) fn restored(r: crate::backup::Restored) -> api::Restored {
    api::Restored {
        tenants: r.tenants,
        policies: r.policies,
    }
}
