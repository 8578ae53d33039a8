//! One representative value of every admin API body (`seedd_api`), with every optional field
//! set and every list non-empty, so that the whole shape of each type is compared with the
//! schema docs/admin-api.yaml gives its route.

use std::collections::BTreeMap;

use seedd_api as api;
use serde_json::{to_value, Value};

const NID: &str = "z6MkrLMMsiPWUcNPHcRajuMi9mDfYckSoJyPwwnknocNYPm7";
const RID: &str = "rad:z3gqcJUoA1n9HaHKufZs5FCSGazv5";

/// Where a body goes: (method, path as in the document, `request` or a response status).
pub struct Sample {
    pub method: &'static str,
    pub path: &'static str,
    /// `None`: the request body; `Some(status)`: that response.
    pub status: Option<&'static str>,
    pub value: Value,
}

fn s(x: &str) -> String {
    x.to_owned()
}

fn json(v: impl serde::Serialize) -> Value {
    to_value(v).expect("every API type serialises")
}

fn repo_record() -> api::RepoRecord {
    api::RepoRecord {
        rid: s(RID),
        name: s("heartwood"),
        description: s("Radicle"),
        default_branch: s("master"),
        delegates: vec![s(NID)],
        threshold: 1,
        visibility: api::Visibility::Private {
            allow: vec![s(NID)],
        },
        identity_head: s("0123456789abcdef0123456789abcdef01234567"),
        head: Some(s("0123456789abcdef0123456789abcdef01234567")),
        fingerprint: s("ff"),
        ref_count: 3,
        namespaces: vec![s(NID)],
        indexed_at: 1,
        tenants: Some(vec![s("acme")]),
    }
}

fn repo_debt() -> api::RepoDebt {
    api::RepoDebt {
        score: 30,
        packs: 4,
        pack_bytes: 4096,
        loose_objects: 1,
        loose_refs: 12,
        bitmap: true,
        midx: true,
        commit_graph: true,
        measured_at: 1,
    }
}

fn maintenance_run() -> api::MaintenanceRun {
    api::MaintenanceRun {
        at: 1,
        result: s("ok"),
        error: Some(s("pack-refs: git failed")),
        duration_ms: 120,
        repack: s("full"),
        packs_before: 4,
        packs_after: 1,
    }
}

fn quotas() -> api::Quotas {
    api::Quotas {
        repos: Some(10),
        bytes: None,
        egress_bytes_per_day: Some(1),
    }
}

fn rate() -> api::Rate {
    api::Rate {
        requests_per_second: Some(20),
        burst: None,
    }
}

fn deny_list() -> api::DenyList {
    api::DenyList {
        repos: vec![s(RID)],
        nodes: vec![s(NID)],
    }
}

fn tenant() -> api::Tenant {
    api::Tenant {
        name: s("acme"),
        state: api::TenantState::Active,
        identity: s("default"),
        hosts: vec![s("acme.example")],
        repos: vec![api::TenantRepo {
            rid: s(RID),
            scope: api::Scope::Followed,
            alias: Some(s("heartwood")),
            owner: true,
        }],
        follows: vec![s(NID)],
        deny: deny_list(),
        quotas: quotas(),
        rate: rate(),
        created_at: 1,
        usage: api::Usage {
            repos: 1,
            stored_bytes: 2,
            egress_today_bytes: 3,
        },
    }
}

fn identity() -> api::IdentityInfo {
    api::IdentityInfo {
        name: s("eu"),
        nid: s(NID),
        listen: vec![s("0.0.0.0:8777")],
        external_addresses: vec![s("eu.example:8777")],
        tenants: vec![s("acme")],
        inventory: 1,
        cap: 2973,
    }
}

fn identity_create() -> api::IdentityCreate {
    api::IdentityCreate {
        name: s("eu"),
        listen: vec![s("0.0.0.0:8777")],
        external_addresses: vec![s("eu.example:8777")],
        inventory_cap: Some(10),
    }
}

fn backup() -> api::Backup {
    api::Backup {
        version: 1,
        created_at: 1,
        nid: s(NID),
        keys: BTreeMap::from([(s("default"), s("-----BEGIN OPENSSH PRIVATE KEY-----"))]),
        identities: vec![identity_create()],
        tenants: vec![api::TenantRecord {
            name: s("acme"),
            state: api::TenantState::Suspended,
            identity: s("default"),
            hosts: vec![s("acme.example")],
            repos: vec![api::TenantRepoRecord {
                rid: s(RID),
                scope: api::Scope::All,
                alias: Some(s("heartwood")),
                since: 1,
            }],
            follows: vec![s(NID)],
            deny: deny_list(),
            quotas: quotas(),
            rate: rate(),
            created_at: 1,
        }],
        policies: api::PolicySet {
            repos: vec![api::BackupRepoPolicy {
                rid: s(RID),
                policy: api::RepoPolicy::Allow {
                    scope: api::Scope::All,
                },
            }],
            nodes: vec![api::BackupNodePolicy {
                nid: s(NID),
                policy: api::NodePolicy::Allow {
                    alias: Some(s("alice")),
                },
            }],
        },
        meta: BTreeMap::from([(s("6f776e"), s("01"))]),
    }
}

fn tenant_spec() -> api::TenantSpec {
    api::TenantSpec {
        name: s("acme"),
        state: Some(api::TenantState::Active),
        identity: Some(s("default")),
        hosts: vec![s("acme.example")],
        quotas: Some(quotas()),
        rate: Some(rate()),
        repos: vec![api::RepoSpec {
            rid: s(RID),
            scope: Some(api::Scope::Followed),
            alias: Some(s("heartwood")),
        }],
        follows: vec![s(NID)],
        deny: Some(deny_list()),
    }
}

fn response(method: &'static str, path: &'static str, status: &'static str, v: Value) -> Sample {
    Sample {
        method,
        path,
        status: Some(status),
        value: v,
    }
}

fn request(method: &'static str, path: &'static str, v: Value) -> Sample {
    Sample {
        method,
        path,
        status: None,
        value: v,
    }
}

/// Every request and response body of the admin API.
pub fn all() -> Vec<Sample> {
    let status = api::Status {
        nid: s(NID),
        did: format!("did:key:{NID}"),
        alias: s("seed"),
        version: s("0.1.0"),
        uptime_seconds: 1,
        ready: true,
        repos: api::RepoCounts {
            total: 2,
            public: 1,
            private: 1,
        },
        http: api::HttpStatus {
            listen: s("0.0.0.0:443"),
            tls: true,
        },
        admin: api::AdminStatus {
            listen: s("127.0.0.1:9776"),
        },
        p2p: Some(api::P2pStatus {
            listen: vec![s("0.0.0.0:8776")],
            relay: true,
            sessions: 1,
            inventory: 2,
            routing_entries: 3,
            known_nodes: 4,
            node_announcement_timestamp: 5,
        }),
    };
    let scan = api::ScanReport {
        scanned: 1,
        added: 1,
        updated: 0,
        unchanged: 0,
        removed: 0,
        failed: 1,
        errors: vec![s("rad:z…: no identity")],
        duration_ms: 3,
    };
    let peer = api::Peer {
        nid: s(NID),
        link: s("outbound"),
        addr: s("seed.example:8776"),
        state: s("connected"),
        since: 1,
        latency_ms: Some(12),
        subscribed: true,
        alias: Some(s("alice")),
        agent: Some(s("radicle-node/1.0")),
    };
    let deny_repo = api::DenyRepoChange {
        rid: s(RID),
        tenant: Some(s("acme")),
        denied: true,
    };
    let deny_node = api::DenyNodeChange {
        nid: s(NID),
        tenant: None,
        denied: false,
    };
    let tenant_json = json(tenant());
    let error = json(api::ErrorBody {
        error: s("fetching failed"),
        reason: Some(s("timeout")),
    });
    vec![
        response("get", "/api/v1/status", "200", json(status)),
        request(
            "post",
            "/api/v1/rescan",
            json(api::RescanRequest {
                repos: vec![RID.to_owned()],
            }),
        ),
        response("post", "/api/v1/rescan", "200", json(scan)),
        response(
            "get",
            "/api/v1/peers",
            "200",
            json(api::PeersResponse { peers: vec![peer] }),
        ),
        request(
            "post",
            "/api/v1/peers/connect",
            json(api::ConnectRequest {
                addr: format!("{NID}@seed.example:8776"),
            }),
        ),
        response(
            "post",
            "/api/v1/peers/connect",
            "200",
            json(api::ConnectResponse {
                nid: s(NID),
                addr: s("seed.example:8776"),
                dialing: true,
                new: true,
            }),
        ),
        request(
            "post",
            "/api/v1/peers/disconnect",
            json(api::DisconnectRequest { nid: s(NID) }),
        ),
        response(
            "post",
            "/api/v1/peers/disconnect",
            "200",
            json(api::DisconnectResponse {
                nid: s(NID),
                sessions_closed: 1,
            }),
        ),
        response(
            "get",
            "/api/v1/routing",
            "200",
            json(api::RoutingResponse {
                routes: vec![api::Route {
                    rid: s(RID),
                    nid: s(NID),
                    timestamp: 1,
                }],
                next: Some(format!("{RID}/{NID}")),
                total: 2,
            }),
        ),
        response(
            "get",
            "/api/v1/nodes",
            "200",
            json(api::NodesResponse {
                nodes: vec![api::NodeRecord {
                    nid: s(NID),
                    version: 1,
                    features: 1,
                    alias: s("alice"),
                    agent: s("radicle-node/1.0"),
                    addresses: vec![s("seed.example:8776")],
                    timestamp: 1,
                    last_seen: 2,
                }],
                next: Some(s(NID)),
                total: 2,
            }),
        ),
        response(
            "get",
            "/api/v1/bans",
            "200",
            json(api::BansResponse {
                bans: vec![api::Ban {
                    ip: s("192.0.2.1"),
                    penalty: 10,
                    banned_until: Some(1),
                    reason: s("invalid message"),
                    updated_at: 1,
                }],
            }),
        ),
        response(
            "get",
            "/api/v1/policies",
            "200",
            json(api::PoliciesResponse {
                repos: vec![api::RepoPolicyEntry {
                    rid: s(RID),
                    policy: api::RepoPolicy::Allow {
                        scope: api::Scope::All,
                    },
                }],
                nodes: vec![api::NodePolicyEntry {
                    nid: s(NID),
                    policy: api::NodePolicy::Allow {
                        alias: Some(s("alice")),
                    },
                }],
                next: Some(format!("repo/{RID}")),
            }),
        ),
        request(
            "post",
            "/api/v1/nodes/{nid}/{action}",
            json(api::NodePolicyRequest {
                alias: Some(s("alice")),
            }),
        ),
        response(
            "post",
            "/api/v1/nodes/{nid}/{action}",
            "200",
            json(api::NodePolicyResponse {
                nid: s(NID),
                policy: Some(api::NodePolicy::Block),
                sessions_closed: 1,
            }),
        ),
        request(
            "post",
            "/api/v1/fetch",
            json(api::FetchRequest {
                rid: s(RID),
                from: Some(s(NID)),
            }),
        ),
        response(
            "post",
            "/api/v1/fetch",
            "200",
            json(api::FetchResponse {
                rid: s(RID),
                from: s(NID),
                cloned: true,
                updated: vec![s(NID)],
                pruned: vec![api::Pruned {
                    nid: s(NID),
                    reason: s("unsigned"),
                    detail: s("no signed refs"),
                }],
                refs_written: 2,
            }),
        ),
        response("post", "/api/v1/fetch", "502", error.clone()),
        response(
            "post",
            "/api/v1/repos/{rid}/maintain",
            "200",
            json(api::MaintainResponse {
                rid: s(RID),
                run: maintenance_run(),
                before: repo_debt(),
                after: repo_debt(),
            }),
        ),
        response(
            "get",
            "/api/v1/maintenance",
            "200",
            json(api::MaintenanceResponse {
                enabled: true,
                queued: 1,
                waiting: 2,
                repos: vec![api::MaintenanceEntry {
                    rid: s(RID),
                    debt: repo_debt(),
                    due: Some(s("packs")),
                    last_run: Some(maintenance_run()),
                }],
                next: Some(format!("12/{RID}")),
                total: 2,
            }),
        ),
        response(
            "get",
            "/api/v1/repos",
            "200",
            json(api::ReposResponse {
                repos: vec![repo_record()],
                next: Some(s(RID)),
                total: 2,
            }),
        ),
        response(
            "get",
            "/api/v1/repos/{rid}",
            "200",
            json(api::RepoResponse {
                repo: repo_record(),
                sigrefs: vec![api::Sigrefs {
                    nid: s(NID),
                    commit: Some(s("0123")),
                    level: Some(api::FeatureLevel::Parent),
                    error: Some(s("bad signature")),
                }],
            }),
        ),
        request(
            "post",
            "/api/v1/repos/{rid}/seed",
            json(api::SeedRequest {
                scope: Some(s("followed")),
                from: Some(s(NID)),
                tenant: Some(s("acme")),
                alias: Some(s("heartwood")),
            }),
        ),
        response(
            "post",
            "/api/v1/repos/{rid}/seed",
            "200",
            json(api::SeedResponse {
                rid: s(RID),
                seeded: true,
                tenant: Some(s("acme")),
                owner: true,
                policy: s("allow"),
                scope: api::Scope::Followed,
                fetching_from: Some(s(NID)),
            }),
        ),
        request(
            "post",
            "/api/v1/repos/{rid}/unseed",
            json(api::UnseedRequest {
                tenant: Some(s("acme")),
            }),
        ),
        response(
            "post",
            "/api/v1/repos/{rid}/unseed",
            "200",
            json(api::UnseedResponse {
                rid: s(RID),
                unseeded: true,
                purged: false,
            }),
        ),
        response(
            "post",
            "/api/v1/repos/{rid}/purge",
            "200",
            json(api::PurgeResponse {
                rid: s(RID),
                purged: true,
                tenants: vec![s("acme")],
            }),
        ),
        response(
            "get",
            "/api/v1/tenants",
            "200",
            json(api::TenantList {
                tenants: vec![tenant()],
            }),
        ),
        request(
            "post",
            "/api/v1/tenants",
            json(api::TenantCreate {
                name: s("acme"),
                hosts: vec![s("acme.example")],
                identity: Some(s("default")),
                quotas: Some(quotas()),
                rate: Some(rate()),
            }),
        ),
        response("post", "/api/v1/tenants", "201", tenant_json.clone()),
        response("get", "/api/v1/tenants/{name}", "200", tenant_json.clone()),
        response(
            "delete",
            "/api/v1/tenants/{name}",
            "200",
            json(api::TenantRemoved {
                name: s("acme"),
                removed: true,
                purged: vec![s(RID)],
            }),
        ),
        response(
            "post",
            "/api/v1/tenants/{name}/suspend",
            "200",
            tenant_json.clone(),
        ),
        response(
            "post",
            "/api/v1/tenants/{name}/resume",
            "200",
            tenant_json.clone(),
        ),
        request(
            "put",
            "/api/v1/tenants/{name}/quota",
            json(api::QuotasPatch {
                repos: Some(Some(10)),
                bytes: Some(None),
                egress_bytes_per_day: Some(Some(1)),
            }),
        ),
        response(
            "put",
            "/api/v1/tenants/{name}/quota",
            "200",
            tenant_json.clone(),
        ),
        request(
            "put",
            "/api/v1/tenants/{name}/rate",
            json(api::RatePatch {
                requests_per_second: Some(Some(20)),
                burst: Some(None),
            }),
        ),
        response(
            "put",
            "/api/v1/tenants/{name}/rate",
            "200",
            tenant_json.clone(),
        ),
        request(
            "post",
            "/api/v1/tenants/{name}/hosts",
            json(api::HostRequest {
                host: s("acme.example"),
            }),
        ),
        response(
            "post",
            "/api/v1/tenants/{name}/hosts",
            "200",
            tenant_json.clone(),
        ),
        response(
            "delete",
            "/api/v1/tenants/{name}/hosts/{host}",
            "200",
            tenant_json,
        ),
        response(
            "get",
            "/api/v1/deny",
            "200",
            json(api::DenyEntries {
                repos: vec![api::DenyRepoEntry {
                    rid: s(RID),
                    tenant: Some(s("acme")),
                }],
                nodes: vec![api::DenyNodeEntry {
                    nid: s(NID),
                    tenant: None,
                }],
            }),
        ),
        request(
            "post",
            "/api/v1/deny/repos",
            json(api::DenyRequest {
                rid: Some(s(RID)),
                nid: None,
                tenant: Some(s("acme")),
            }),
        ),
        response("post", "/api/v1/deny/repos", "200", json(&deny_repo)),
        response(
            "delete",
            "/api/v1/deny/repos/{rid}",
            "200",
            json(&deny_repo),
        ),
        request(
            "post",
            "/api/v1/deny/nodes",
            json(api::DenyRequest {
                rid: None,
                nid: Some(s(NID)),
                tenant: Some(s("acme")),
            }),
        ),
        response("post", "/api/v1/deny/nodes", "200", json(&deny_node)),
        response(
            "delete",
            "/api/v1/deny/nodes/{nid}",
            "200",
            json(&deny_node),
        ),
        response(
            "get",
            "/api/v1/queue",
            "200",
            json(api::QueueResponse {
                active: vec![api::QueueActive {
                    rid: s(RID),
                    from: s(NID),
                    seconds: 3,
                }],
                queued: vec![api::QueueQueued {
                    rid: s(RID),
                    from: s(NID),
                }],
            }),
        ),
        response(
            "get",
            "/api/v1/usage",
            "200",
            json(api::UsageResponse {
                usage: vec![api::TenantUsage {
                    tenant: s("acme"),
                    state: api::TenantState::Active,
                    identity: s("default"),
                    repos: 1,
                    quota_repos: Some(10),
                    stored_bytes: 2,
                    quota_bytes: None,
                    egress_today_bytes: 3,
                    quota_egress_bytes_per_day: Some(4),
                }],
            }),
        ),
        response(
            "get",
            "/api/v1/identities",
            "200",
            json(api::IdentitiesResponse {
                identities: vec![identity()],
            }),
        ),
        request("post", "/api/v1/identities", json(identity_create())),
        response("post", "/api/v1/identities", "201", json(identity())),
        response(
            "post",
            "/api/v1/config/reload",
            "200",
            json(api::ReloadResponse {
                reloaded: true,
                changes: vec![s("log level: info → debug")],
            }),
        ),
        response("get", "/api/v1/backup", "200", json(backup())),
        request("post", "/api/v1/restore", json(backup())),
        response(
            "post",
            "/api/v1/restore",
            "200",
            json(api::RestoreResponse {
                restored: api::Restored {
                    tenants: 1,
                    policies: 2,
                },
                warnings: vec![s("keys are restored only offline")],
            }),
        ),
        request(
            "post",
            "/api/v1/apply",
            json(api::ApplyRequest {
                tenants: vec![tenant_spec()],
                prune: true,
                dry_run: true,
            }),
        ),
        response(
            "post",
            "/api/v1/apply",
            "200",
            json(api::ApplyResponse {
                changes: vec![s("+ tenant acme")],
                applied: true,
            }),
        ),
        response("get", "/api/v1/status", "default", error),
    ]
}
