//! The command line: every command and flag of `seedctl` (clap). `main` dispatches each
//! command to its noun's module under `cmd/`.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::size::{parse_count_limit, parse_size_limit, Limit};

#[derive(Parser)]
#[command(
    name = "seedctl",
    version,
    about = "Operate a seedd seed node over its admin API"
)]
pub(crate) struct Cli {
    /// Admin API base URL.
    #[arg(
        long,
        env = "SEEDCTL_ADMIN",
        default_value = "http://127.0.0.1:9776",
        global = true
    )]
    pub(crate) admin: String,
    /// File holding the admin bearer token (seedd writes <data_dir>/admin-token by default).
    #[arg(long, env = "SEEDCTL_TOKEN_FILE", global = true)]
    pub(crate) token_file: Option<PathBuf>,
    /// The admin token itself (prefer --token-file; visible in the process list).
    #[arg(long, env = "SEEDCTL_TOKEN", hide_env_values = true, global = true)]
    pub(crate) token: Option<String>,
    /// CA certificate(s) (PEM) to trust for an https:// --admin URL, instead of the public roots.
    #[arg(long, env = "SEEDCTL_CACERT", value_name = "FILE", global = true)]
    pub(crate) cacert: Option<PathBuf>,
    /// Client certificate (PEM, with any intermediates) for an admin API that requires one
    /// (admin.tls.client_ca); needs --key.
    #[arg(long, env = "SEEDCTL_CERT", value_name = "FILE", global = true)]
    pub(crate) cert: Option<PathBuf>,
    /// Private key (PEM) of the --cert client certificate.
    #[arg(long, env = "SEEDCTL_KEY", value_name = "FILE", global = true)]
    pub(crate) key: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text", global = true)]
    pub(crate) output: Output,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
pub(crate) enum Output {
    Text,
    Json,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Identity, version, uptime, repositories and listeners of the seed.
    Status,
    /// Re-read storage and update the index: changes made on disk outside seedd (a start
    /// reads only what seedd journaled). With --repo, only those repositories (added,
    /// changed or removed), whatever storage holds; without, every repository.
    Rescan {
        /// A repository to re-read (`rad:z…`); repeat for more.
        #[arg(long = "repo", value_name = "RID")]
        repos: Vec<String>,
    },
    /// Repositories: list, show, seed, unseed, purge.
    Repo {
        #[command(subcommand)]
        command: RepoCommand,
    },
    /// Radicle peers: sessions, dialing, disconnecting.
    Peers {
        #[command(subcommand)]
        command: PeersCommand,
    },
    /// Follow and block policies of nodes.
    Node {
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// Fetch a repository now (from `--from` or a connected node known to seed it).
    Fetch {
        rid: String,
        #[arg(long)]
        from: Option<String>,
    },
    /// Explicit seeding and follow policies.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// The routing table: which nodes seed which repositories.
    Routing {
        #[command(subcommand)]
        command: RoutingCommand,
    },
    /// Tenants: create, list, show, suspend, resume, remove; their rate limits.
    Tenant {
        #[command(subcommand)]
        command: TenantCommand,
    },
    /// A tenant's quotas.
    Quota {
        #[command(subcommand)]
        command: QuotaCommand,
    },
    /// The HTTP host names that select a tenant.
    Host {
        #[command(subcommand)]
        command: HostCommand,
    },
    /// Deny lists of repositories and nodes (the operator's global list, or a tenant's).
    Deny {
        #[command(subcommand)]
        command: DenyCommand,
    },
    /// Background repository maintenance: debt and last run per repository.
    Maintenance {
        #[command(subcommand)]
        command: MaintenanceCommand,
    },
    /// The fetch queue.
    Queue {
        #[command(subcommand)]
        command: QueueCommand,
    },
    /// What tenants use against their quotas.
    Usage {
        /// Only this tenant.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// A fleet of shards and replicas behind `seedd front`: status, where a repository is,
    /// moving one between shards.
    Fleet {
        #[command(subcommand)]
        command: FleetCommand,
    },
    /// Node identities (one key, listener and inventory each).
    Identity {
        #[command(subcommand)]
        command: IdentityCommand,
    },
    /// The daemon's configuration file.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Download a backup (keys, identities, tenants, policies, deny lists) as JSON.
    ///
    /// The backup holds the node's private keys: keep it as secret as the keys themselves.
    Backup {
        /// Write it to this file (mode 0600) instead of standard output.
        #[arg(short = 'f', long = "file")]
        file: Option<PathBuf>,
    },
    /// Restore a backup: online (tenants, policies, deny lists) or, with --data-dir, offline.
    Restore {
        /// The backup file (`-` = standard input).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Offline restore into this (stopped, new) node's data directory: writes the keys and
        /// restore.json, which seedd imports on its next start. Refuses a directory that
        /// already has keys/ or index/.
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Make the tenants match a tenants file (YAML, top level `tenants:`).
    Apply {
        /// The tenants file (`-` = standard input).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Also remove tenants the file does not name (a named tenant always ends up exactly as
        /// declared: hosts, repositories, follows and deny entries not in the file are removed).
        #[arg(long)]
        prune: bool,
        /// Show the changes without making them.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand)]
pub(crate) enum PeersCommand {
    /// Connected sessions and peers being dialed.
    Ls,
    /// Dial a peer and keep the session up (until `peers disconnect` or a restart).
    Connect {
        /// `z6Mk…@host:port`
        addr: String,
    },
    /// Close every session with a node and stop dialing it.
    Disconnect { nid: String },
}

#[derive(Subcommand)]
pub(crate) enum PolicyCommand {
    /// List explicit repository and node policies (every page, unless --limit or --after asks
    /// for one).
    Ls {
        #[command(flatten)]
        page: PageArgs,
    },
}

#[derive(Subcommand)]
pub(crate) enum RoutingCommand {
    /// List routing entries, optionally for one repository and/or node (every page, unless
    /// --limit or --after asks for one).
    Ls {
        #[arg(long)]
        rid: Option<String>,
        #[arg(long)]
        nid: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
}

#[derive(Subcommand)]
pub(crate) enum RepoCommand {
    /// List indexed repositories (with --tenant: only that tenant's), every page unless
    /// --limit or --after asks for one.
    Ls {
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// One repository: identity, canonical head, namespaces and their signed-refs status.
    Show { rid: String },
    /// Seed a repository (policy allow) and fetch it from a connected seed or `--from`.
    Seed {
        rid: String,
        /// Seed it for this tenant (counts against its quotas; the first tenant owns it).
        #[arg(long)]
        tenant: Option<String>,
        /// Namespaces to fetch: all, or delegates and followed nodes only.
        #[arg(long, value_parser = ["all", "followed"])]
        scope: Option<String>,
        /// The tenant's name for the repository (clone URL `https://<host>/<alias>.git`).
        #[arg(long)]
        alias: Option<String>,
        /// Peer to fetch from: `z6Mk…@host:port` (connected to first) or `z6Mk…`.
        #[arg(long)]
        from: Option<String>,
    },
    /// Stop seeding a repository (for --tenant: that tenant lets go of it; data is kept while
    /// another tenant or the operator seeds it).
    Unseed {
        rid: String,
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Delete a repository from storage and from every tenant that holds it.
    Purge { rid: String },
    /// Maintain a repository now (pack refs, repack with multi-pack index and bitmap,
    /// commit-graph), wait, print the outcome and the packs before and after.
    Maintain { rid: String },
}

#[derive(Subcommand)]
pub(crate) enum NodeCommand {
    /// Follow a node (its namespaces are fetched with scope `followed`).
    Follow {
        nid: String,
        #[arg(long)]
        alias: Option<String>,
    },
    /// Stop following a node.
    Unfollow { nid: String },
    /// Block a node: disconnected, never fetched from, its namespaces never written.
    Block { nid: String },
    /// Remove a node's block.
    Unblock { nid: String },
}

#[derive(Subcommand)]
pub(crate) enum TenantCommand {
    /// Create a tenant.
    Create {
        /// Tenant name: lower-case letters, digits and `-` (at most 63).
        name: String,
        /// HTTP host name served for the tenant (repeatable; `*.example.org` for a wildcard).
        #[arg(long = "host")]
        hosts: Vec<String>,
        /// The node identity that seeds its repositories (default: `default`).
        #[arg(long)]
        identity: Option<String>,
        /// Most repositories it may seed (or `unlimited`).
        #[arg(long, value_parser = parse_count_limit)]
        repos: Option<Limit>,
        /// Most bytes its repositories may take on disk: bytes, 10KiB, 5MiB, 1GiB… or `unlimited`.
        #[arg(long, value_parser = parse_size_limit)]
        bytes: Option<Limit>,
        /// Most bytes served per day (UTC): a size or `unlimited`.
        #[arg(long, value_parser = parse_size_limit)]
        egress_per_day: Option<Limit>,
        /// HTTP requests per second (or `unlimited`).
        #[arg(long, value_parser = parse_count_limit)]
        rps: Option<Limit>,
        /// HTTP request burst (or `unlimited`).
        #[arg(long, value_parser = parse_count_limit)]
        burst: Option<Limit>,
    },
    /// List tenants.
    Ls,
    /// One tenant: hosts, repositories, quotas and usage.
    Show { name: String },
    /// Suspend a tenant: its hosts answer 403 and its repositories are no longer fetched for it.
    Suspend { name: String },
    /// Resume a suspended tenant.
    Resume { name: String },
    /// Remove a tenant (repositories no other tenant holds are purged).
    Rm { name: String },
    /// Set a tenant's HTTP rate limit (`unlimited` removes a limit; absent = unchanged).
    Rate {
        name: String,
        /// Requests per second.
        #[arg(long, value_parser = parse_count_limit)]
        rps: Option<Limit>,
        /// Burst size.
        #[arg(long, value_parser = parse_count_limit)]
        burst: Option<Limit>,
    },
}

#[derive(Subcommand)]
pub(crate) enum QuotaCommand {
    /// Set a tenant's quotas (`unlimited` removes a limit; absent = unchanged).
    Set {
        tenant: String,
        /// Most repositories.
        #[arg(long, value_parser = parse_count_limit)]
        repos: Option<Limit>,
        /// Most bytes on disk: bytes, 10KiB, 5MiB, 1GiB, 2TiB, 1GB…
        #[arg(long, value_parser = parse_size_limit)]
        bytes: Option<Limit>,
        /// Most bytes served per day (UTC).
        #[arg(long, value_parser = parse_size_limit)]
        egress_per_day: Option<Limit>,
    },
}

#[derive(Subcommand)]
pub(crate) enum HostCommand {
    /// Serve a host name for a tenant.
    Add { tenant: String, host: String },
    /// Stop serving a host name for a tenant.
    Rm { tenant: String, host: String },
}

#[derive(Subcommand)]
pub(crate) enum DenyCommand {
    /// Denied repositories (never seeded or served).
    Repo {
        #[command(subcommand)]
        command: DenyAction,
    },
    /// Denied nodes (never fetched from; their namespaces never written).
    Node {
        #[command(subcommand)]
        command: DenyAction,
    },
}

#[derive(Subcommand)]
pub(crate) enum DenyAction {
    /// Add an entry (without --tenant: to the operator's global list).
    Add {
        id: String,
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Remove an entry (without --tenant: from the operator's global list).
    Rm {
        id: String,
        #[arg(long)]
        tenant: Option<String>,
    },
    /// List entries (with --tenant: only that tenant's).
    Ls {
        #[arg(long)]
        tenant: Option<String>,
    },
}

#[derive(Subcommand)]
pub(crate) enum MaintenanceCommand {
    /// Held repositories, most indebted first: debt score, packs, loose objects and refs, due,
    /// last run (every page, unless --limit or --after asks for one).
    Ls {
        #[command(flatten)]
        page: PageArgs,
    },
}

#[derive(Subcommand)]
pub(crate) enum QueueCommand {
    /// Fetches running and waiting.
    Ls,
}

#[derive(Subcommand)]
pub(crate) enum IdentityCommand {
    /// List identities: node id, listeners, tenants, inventory.
    Ls,
    /// Create an identity: a new key and a p2p listener of its own.
    Create {
        name: String,
        /// Address to listen on, `host:port` (repeatable).
        #[arg(long, required = true)]
        listen: Vec<String>,
        /// Address announced to the network, `host:port` (repeatable).
        #[arg(long = "external-address")]
        external_addresses: Vec<String>,
    },
}

#[derive(Subcommand)]
pub(crate) enum ConfigCommand {
    /// Re-read the configuration file (as SIGHUP does).
    Reload,
}

/// Paging of a listing: without either flag every page is fetched (following `next`);
/// with one, only that page (its `next` is printed to continue).
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct PageArgs {
    /// Rows per page (the server caps it at 10,000; default 1,000).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Start after this cursor (the `next` of the previous page).
    #[arg(long)]
    pub after: Option<String>,
}

impl PageArgs {
    /// Whether one page was asked for.
    pub(crate) fn one_page(&self) -> bool {
        self.limit.is_some() || self.after.is_some()
    }
}

#[derive(Subcommand)]
pub(crate) enum FleetCommand {
    /// The placement in force, every shard's replicas and whether each takes reads.
    Status {
        /// The front's admin URL.
        #[arg(long, env = "SEEDCTL_FRONT")]
        front: String,
    },
    /// The shard of a repository and the order its replicas answer it in.
    Where {
        rid: String,
        #[arg(long, env = "SEEDCTL_FRONT")]
        front: String,
    },
    /// Move a repository to another shard: copy, verify, switch the placement, purge the
    /// source (no clone fails meanwhile). Uses --token/--token-file for the replicas' admin APIs.
    Move {
        rid: String,
        /// The destination shard.
        #[arg(long)]
        to: String,
        /// The placement file (the ConfigMap key's source).
        #[arg(long, env = "SEEDCTL_PLACEMENT")]
        placement: PathBuf,
        #[arg(long, env = "SEEDCTL_FRONT")]
        front: String,
        /// Shell command run after each edit of the file to publish it ($PLACEMENT is its
        /// path), e.g. `kubectl create configmap seedd-placement --from-file=placement.toml=$PLACEMENT --dry-run=client -o yaml | kubectl apply -f -`.
        #[arg(long)]
        apply: Option<String>,
        /// Seconds the source keeps serving after the switch (in-flight clones finish).
        #[arg(long, default_value_t = 10)]
        drain_secs: u64,
        /// Most seconds each step waits for the fleet.
        #[arg(long, default_value_t = 600)]
        timeout_secs: u64,
    },
}
