//! `seedctl`: the operator's CLI for seedd. It talks to the daemon only over the admin API
//! (except `restore --data-dir`, which prepares a stopped node's data directory).
#![forbid(unsafe_code)]

mod apply;
mod restore;
mod size;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _};
use clap::{Parser, Subcommand, ValueEnum};
use serde_json::{Map, Value};

use size::{format_size, parse_count_limit, parse_size_limit, Limit};

#[derive(Parser)]
#[command(
    name = "seedctl",
    version,
    about = "Operate a seedd seed node over its admin API"
)]
struct Cli {
    /// Admin API base URL.
    #[arg(
        long,
        env = "SEEDCTL_ADMIN",
        default_value = "http://127.0.0.1:9776",
        global = true
    )]
    admin: String,
    /// File holding the admin bearer token (seedd writes <data_dir>/admin-token by default).
    #[arg(long, env = "SEEDCTL_TOKEN_FILE", global = true)]
    token_file: Option<PathBuf>,
    /// The admin token itself (prefer --token-file; visible in the process list).
    #[arg(long, env = "SEEDCTL_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// CA certificate(s) (PEM) to trust for an https:// --admin URL, instead of the public roots.
    #[arg(long, env = "SEEDCTL_CACERT", value_name = "FILE", global = true)]
    cacert: Option<PathBuf>,
    /// Client certificate (PEM, with any intermediates) for an admin API that requires one
    /// (admin.tls.client_ca); needs --key.
    #[arg(long, env = "SEEDCTL_CERT", value_name = "FILE", global = true)]
    cert: Option<PathBuf>,
    /// Private key (PEM) of the --cert client certificate.
    #[arg(long, env = "SEEDCTL_KEY", value_name = "FILE", global = true)]
    key: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text", global = true)]
    output: Output,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum Output {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Identity, version, uptime, repositories and listeners of the seed.
    Status,
    /// Re-read storage and update the index (picks up repositories added on disk).
    Rescan,
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
enum PeersCommand {
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
enum PolicyCommand {
    /// List explicit repository and node policies.
    Ls,
}

#[derive(Subcommand)]
enum RoutingCommand {
    /// List routing entries, optionally for one repository and/or node.
    Ls {
        #[arg(long)]
        rid: Option<String>,
        #[arg(long)]
        nid: Option<String>,
    },
}

#[derive(Subcommand)]
enum RepoCommand {
    /// List indexed repositories (with --tenant: only that tenant's).
    Ls {
        #[arg(long)]
        tenant: Option<String>,
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
}

#[derive(Subcommand)]
enum NodeCommand {
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
enum TenantCommand {
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
enum QuotaCommand {
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
enum HostCommand {
    /// Serve a host name for a tenant.
    Add { tenant: String, host: String },
    /// Stop serving a host name for a tenant.
    Rm { tenant: String, host: String },
}

#[derive(Subcommand)]
enum DenyCommand {
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
enum DenyAction {
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
enum QueueCommand {
    /// Fetches running and waiting.
    Ls,
}

#[derive(Subcommand)]
enum IdentityCommand {
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
enum ConfigCommand {
    /// Re-read the configuration file (as SIGHUP does).
    Reload,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the cause chain joined, newlines folded.
            let msg = format!("{e:#}").replace(['\r', '\n'], " ");
            eprintln!("seedctl: {}", msg.trim());
            ExitCode::FAILURE
        }
    }
}

fn token(cli: &Cli) -> anyhow::Result<String> {
    if let Some(t) = &cli.token {
        return Ok(t.trim().to_owned());
    }
    let path = cli
        .token_file
        .clone()
        .unwrap_or_else(|| PathBuf::from("./seedd-data/admin-token"));
    let t = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading the admin token {}: pass --token-file (seedd writes <data_dir>/admin-token)",
            path.display()
        )
    })?;
    Ok(t.trim().to_owned())
}

/// Every certificate in a PEM file (`what` names the flag in errors).
fn pem_certs(path: &Path, what: &str) -> anyhow::Result<Vec<ureq::tls::Certificate<'static>>> {
    let pem = std::fs::read(path).with_context(|| format!("reading {what} {}", path.display()))?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        let item = item.with_context(|| format!("{what} {}: not PEM", path.display()))?;
        if let ureq::tls::PemItem::Certificate(c) = item {
            certs.push(c);
        }
    }
    if certs.is_empty() {
        bail!("{what} {}: no certificate in the PEM file", path.display());
    }
    Ok(certs)
}

/// TLS settings for an https:// admin URL: trusted CA (`--cacert`) and client certificate
/// (`--cert`, `--key`). Without them: the public (Mozilla) roots, no client certificate.
fn tls_config(cli: &Cli) -> anyhow::Result<ureq::tls::TlsConfig> {
    let mut tls = ureq::tls::TlsConfig::builder();
    if let Some(ca) = &cli.cacert {
        let roots = pem_certs(ca, "--cacert")?;
        tls = tls.root_certs(ureq::tls::RootCerts::Specific(Arc::new(roots)));
    }
    match (&cli.cert, &cli.key) {
        (Some(cert), Some(key)) => {
            let chain = pem_certs(cert, "--cert")?;
            let pem =
                std::fs::read(key).with_context(|| format!("reading --key {}", key.display()))?;
            let key = ureq::tls::PrivateKey::from_pem(&pem)
                .with_context(|| format!("--key {}: no usable private key", key.display()))?;
            tls = tls.client_cert(Some(ureq::tls::ClientCert::new_with_certs(&chain, key)));
        }
        (None, None) => {}
        (Some(_), None) => bail!("--cert needs --key (the client certificate's private key)"),
        (None, Some(_)) => bail!("--key needs --cert (the client certificate)"),
    }
    Ok(tls.build())
}

fn call(cli: &Cli, method: &str, path: &str) -> anyhow::Result<Value> {
    call_with(cli, method, path, None)
}

fn call_with(cli: &Cli, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
    let url = format!("{}{}", cli.admin.trim_end_matches('/'), path);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(120)))
        .tls_config(tls_config(cli)?)
        .build()
        .into();
    let auth = format!("Bearer {}", token(cli)?);
    let json = "application/json";
    let resp = match (method, body) {
        ("POST", Some(b)) => agent
            .post(&url)
            .header("Authorization", &auth)
            .header("Content-Type", json)
            .send(b.to_string()),
        ("POST", None) => agent.post(&url).header("Authorization", &auth).send_empty(),
        ("PUT", b) => agent
            .put(&url)
            .header("Authorization", &auth)
            .header("Content-Type", json)
            .send(b.unwrap_or_else(|| Value::Object(Map::new())).to_string()),
        ("DELETE", _) => agent.delete(&url).header("Authorization", &auth).call(),
        _ => agent.get(&url).header("Authorization", &auth).call(),
    }
    .map_err(|e| {
        let hint = if url.starts_with("https://") {
            "is seedd running, --admin right, and --cacert / --cert / --key what its admin.tls needs?"
        } else {
            "is seedd running and --admin right?"
        };
        anyhow!("cannot reach the admin API at {url}: {e}; {hint}")
    })?;
    let status = resp.status();
    let text = resp
        .into_body()
        .read_to_string()
        .map_err(|e| anyhow!("{url}: reading the answer: {e}"))?;
    let body: Result<Value, _> = if text.trim().is_empty() {
        Ok(Value::Null)
    } else {
        serde_json::from_str(&text)
    };
    if !status.is_success() {
        let msg = match &body {
            Ok(b) => b
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("request failed")
                .to_owned(),
            // A plain-text answer (e.g. "not found" from a seedd without this route).
            Err(_) => text.trim().chars().take(200).collect(),
        };
        return Err(anyhow!("{url}: {status}: {msg}"));
    }
    body.map_err(|e| anyhow!("{url}: answer is not JSON ({e})"))
}

/// Percent-encodes one path segment or query value (RFC 3986 unreserved characters, `:`, `*`
/// and `@` stay as they are, so `rad:z…` and `*.example.org` read naturally in logs).
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':' | b'*' | b'@')
        {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `path?tenant=T` when a tenant is given.
fn with_tenant(path: &str, tenant: Option<&str>) -> String {
    match tenant {
        Some(t) => format!("{path}?tenant={}", enc(t)),
        None => path.to_owned(),
    }
}

/// A JSON object of the fields that are set.
fn object<const N: usize>(fields: [(&str, Option<Value>); N]) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
            .collect(),
    )
}

fn run(cli: &Cli) -> anyhow::Result<()> {
    let (value, text) = match cli.command {
        Command::Status => {
            let v = call(cli, "GET", "/api/v1/status")?;
            let mut t = format!(
                "NID      {}\nalias    {}\nversion  {}\nuptime   {}s\nready    {}\nrepos    {} ({} public, {} private)\nhttp     {}{}\nadmin    {}",
                s(&v["nid"]),
                s(&v["alias"]),
                s(&v["version"]),
                v["uptime_seconds"],
                v["ready"],
                v["repos"]["total"],
                v["repos"]["public"],
                v["repos"]["private"],
                s(&v["http"]["listen"]),
                if v["http"]["tls"].as_bool() == Some(true) { " (TLS)" } else { "" },
                s(&v["admin"]["listen"]),
            );
            let p = &v["p2p"];
            if !p.is_null() {
                t.push_str(&format!(
                    "\np2p      {} (relay {}; {} sessions; {} routes; {} known nodes)",
                    p["listen"]
                        .as_array()
                        .map(|l| l.iter().map(s).collect::<Vec<_>>().join(", "))
                        .unwrap_or_default(),
                    if p["relay"].as_bool() == Some(true) {
                        "on"
                    } else {
                        "off"
                    },
                    p["sessions"],
                    p["routing_entries"],
                    p["known_nodes"],
                ));
            }
            (v, t)
        }
        Command::Rescan => {
            let v = call(cli, "POST", "/api/v1/rescan")?;
            let mut t = format!(
                "scanned {}  added {}  updated {}  unchanged {}  removed {}  failed {}  ({} ms)",
                v["scanned"],
                v["added"],
                v["updated"],
                v["unchanged"],
                v["removed"],
                v["failed"],
                v["duration_ms"]
            );
            if let Some(errors) = v["errors"].as_array() {
                for e in errors {
                    t.push_str(&format!("\n  {}", s(e)));
                }
            }
            (v, t)
        }
        Command::Repo {
            command: RepoCommand::Ls { ref tenant },
        } => {
            let v = call(cli, "GET", &with_tenant("/api/v1/repos", tenant.as_deref()))?;
            let list: Vec<&Value> = items(&v, "repos").collect();
            let with_tenants = list.iter().any(|r| r["tenants"].is_array());
            let mut t = format!(
                "{:<40} {:<24} {:<8} {:>4} {:>5}",
                "RID", "NAME", "VISIBLE", "DELS", "PEERS"
            );
            if with_tenants {
                t.push_str(" TENANTS");
            }
            for r in list {
                t.push_str(&format!(
                    "\n{:<40} {:<24} {:<8} {:>4} {:>5}",
                    s(&r["rid"]),
                    s(&r["name"]),
                    s(&r["visibility"]["type"]),
                    r["delegates"].as_array().map_or(0, Vec::len),
                    r["namespaces"].as_array().map_or(0, Vec::len),
                ));
                if with_tenants {
                    t.push_str(&format!(" {}", join(&r["tenants"])));
                }
            }
            (v, t)
        }
        Command::Repo {
            command: RepoCommand::Show { ref rid },
        } => {
            let v = call(cli, "GET", &format!("/api/v1/repos/{rid}"))?;
            let r = &v["repo"];
            let mut t = format!(
                "RID         {}\nname        {}\ndescription {}\nbranch      {}\nhead        {}\nvisibility  {}\nthreshold   {}\ndelegates   {}",
                s(&r["rid"]), s(&r["name"]), s(&r["description"]), s(&r["default_branch"]), s(&r["head"]),
                s(&r["visibility"]["type"]), r["threshold"],
                r["delegates"].as_array().map(|d| d.iter().map(s).collect::<Vec<_>>().join(", ")).unwrap_or_default(),
            );
            for (key, label) in [("tenants", "tenants"), ("owner", "owner")] {
                if let Some(x) = v.get(key).or_else(|| r.get(key)) {
                    t.push_str(&format!("\n{label:<11} {}", join(x)));
                }
            }
            for sr in v["sigrefs"].as_array().into_iter().flatten() {
                let state = if sr["error"].is_null() {
                    format!("ok ({})", s(&sr["level"]))
                } else {
                    format!("INVALID: {}", s(&sr["error"]))
                };
                t.push_str(&format!("\npeer        {} {}", s(&sr["nid"]), state));
            }
            (v, t)
        }
        Command::Repo {
            command:
                RepoCommand::Seed {
                    ref rid,
                    ref tenant,
                    ref scope,
                    ref alias,
                    ref from,
                },
        } => {
            let body = object([
                ("scope", scope.clone().map(Value::from)),
                ("from", from.clone().map(Value::from)),
                ("tenant", tenant.clone().map(Value::from)),
                ("alias", alias.clone().map(Value::from)),
            ]);
            let v = call_with(
                cli,
                "POST",
                &format!("/api/v1/repos/{}/seed", enc(rid)),
                Some(body),
            )?;
            let mut t = format!("seeding {}", s(&v["rid"]));
            let mut notes = Vec::new();
            if let Some(name) = v["tenant"].as_str() {
                t.push_str(&format!(" for tenant {name}"));
                match v["owner"].as_bool() {
                    Some(true) => notes.push("owner".to_owned()),
                    Some(false) => notes.push("shared: another tenant owns it".to_owned()),
                    None => {}
                }
            }
            if let Some(scope) = v["scope"].as_str() {
                notes.push(format!("scope {scope}"));
            }
            if !notes.is_empty() {
                t.push_str(&format!(" ({})", notes.join("; ")));
            }
            if let Some(n) = v["fetching_from"].as_str() {
                t.push_str(&format!("; fetching from {n}"));
            }
            (v, t)
        }
        Command::Repo {
            command:
                RepoCommand::Unseed {
                    ref rid,
                    ref tenant,
                },
        } => {
            let body = object([("tenant", tenant.clone().map(Value::from))]);
            let v = call_with(
                cli,
                "POST",
                &format!("/api/v1/repos/{}/unseed", enc(rid)),
                Some(body),
            )?;
            let whom = tenant
                .as_deref()
                .map(|n| format!(" for tenant {n}"))
                .unwrap_or_default();
            let mut t = match v["unseeded"].as_bool() {
                Some(false) => format!("{} was not seeded{whom}", s(&v["rid"])),
                _ => format!("no longer seeding {}{whom}", s(&v["rid"])),
            };
            if v["purged"].as_bool() == Some(true) {
                t.push_str(" (nobody seeds it any more: purged from storage)");
            }
            (v, t)
        }
        Command::Repo {
            command: RepoCommand::Purge { ref rid },
        } => {
            let v = call(cli, "POST", &format!("/api/v1/repos/{}/purge", enc(rid)))?;
            let mut t = format!("purged {}", s(&v["rid"]));
            let held: Vec<String> = items(&v, "tenants").map(s).collect();
            if !held.is_empty() {
                t.push_str(&format!(" (removed from tenants {})", held.join(", ")));
            }
            (v, t)
        }
        Command::Node { ref command } => {
            let (nid, action, alias) = match command {
                NodeCommand::Follow { nid, alias } => (nid, "follow", alias.clone()),
                NodeCommand::Unfollow { nid } => (nid, "unfollow", None),
                NodeCommand::Block { nid } => (nid, "block", None),
                NodeCommand::Unblock { nid } => (nid, "unblock", None),
            };
            let v = call_with(
                cli,
                "POST",
                &format!("/api/v1/nodes/{nid}/{action}"),
                Some(serde_json::json!({ "alias": alias })),
            )?;
            let t = format!("{} {}", action, s(&v["nid"]));
            (v, t)
        }
        Command::Fetch { ref rid, ref from } => {
            let v = call_with(
                cli,
                "POST",
                "/api/v1/fetch",
                Some(serde_json::json!({ "rid": rid, "from": from })),
            )?;
            let mut t = format!(
                "fetched {} from {}: {} namespace(s) updated, {} ref update(s){}",
                s(&v["rid"]),
                s(&v["from"]),
                v["updated"].as_array().map_or(0, Vec::len),
                v["refs_written"],
                if v["cloned"].as_bool() == Some(true) {
                    " (new)"
                } else {
                    ""
                }
            );
            for p in v["pruned"].as_array().into_iter().flatten() {
                t.push_str(&format!("\n  pruned {}: {}", s(&p["nid"]), s(&p["detail"])));
            }
            (v, t)
        }
        Command::Policy {
            command: PolicyCommand::Ls,
        } => {
            let v = call(cli, "GET", "/api/v1/policies")?;
            let mut t = format!(
                "{:<6} {:<50} {:<8} {}",
                "KIND", "ID", "POLICY", "SCOPE/ALIAS"
            );
            for r in v["repos"].as_array().into_iter().flatten() {
                t.push_str(&format!(
                    "\n{:<6} {:<50} {:<8} {}",
                    "repo",
                    s(&r["rid"]),
                    s(&r["policy"]["policy"]),
                    r["policy"]["scope"].as_str().unwrap_or("-")
                ));
            }
            for n in v["nodes"].as_array().into_iter().flatten() {
                t.push_str(&format!(
                    "\n{:<6} {:<50} {:<8} {}",
                    "node",
                    s(&n["nid"]),
                    s(&n["policy"]["policy"]),
                    n["policy"]["alias"].as_str().unwrap_or("-")
                ));
            }
            (v, t)
        }
        Command::Peers {
            command: PeersCommand::Ls,
        } => {
            let v = call(cli, "GET", "/api/v1/peers")?;
            let mut t = format!(
                "{:<50} {:<9} {:<11} {:<22} {:<16} {:>8}",
                "NID", "LINK", "STATE", "ADDRESS", "ALIAS", "RTT"
            );
            for p in v["peers"].as_array().into_iter().flatten() {
                t.push_str(&format!(
                    "\n{:<50} {:<9} {:<11} {:<22} {:<16} {:>8}",
                    s(&p["nid"]),
                    s(&p["link"]),
                    s(&p["state"]),
                    s(&p["addr"]),
                    p["alias"].as_str().unwrap_or("-"),
                    p["latency_ms"]
                        .as_u64()
                        .map_or_else(|| "-".to_owned(), |ms| format!("{ms}ms")),
                ));
            }
            (v, t)
        }
        Command::Peers {
            command: PeersCommand::Connect { ref addr },
        } => {
            let v = call_with(
                cli,
                "POST",
                "/api/v1/peers/connect",
                Some(serde_json::json!({ "addr": addr })),
            )?;
            let t = format!(
                "dialing {} at {}{}",
                s(&v["nid"]),
                s(&v["addr"]),
                if v["new"].as_bool() == Some(false) {
                    " (already dialing)"
                } else {
                    ""
                }
            );
            (v, t)
        }
        Command::Peers {
            command: PeersCommand::Disconnect { ref nid },
        } => {
            let v = call_with(
                cli,
                "POST",
                "/api/v1/peers/disconnect",
                Some(serde_json::json!({ "nid": nid })),
            )?;
            let t = format!(
                "disconnected {} ({} session(s) closed)",
                s(&v["nid"]),
                v["sessions_closed"]
            );
            (v, t)
        }
        Command::Routing {
            command: RoutingCommand::Ls { ref rid, ref nid },
        } => {
            let mut q = Vec::new();
            if let Some(r) = rid {
                q.push(format!("rid={r}"));
            }
            if let Some(n) = nid {
                q.push(format!("nid={n}"));
            }
            let path = if q.is_empty() {
                "/api/v1/routing".to_owned()
            } else {
                format!("/api/v1/routing?{}", q.join("&"))
            };
            let v = call(cli, "GET", &path)?;
            let mut t = format!("{:<40} {:<50} {:>14}", "RID", "NID", "TIMESTAMP");
            for r in v["routes"].as_array().into_iter().flatten() {
                t.push_str(&format!(
                    "\n{:<40} {:<50} {:>14}",
                    s(&r["rid"]),
                    s(&r["nid"]),
                    r["timestamp"]
                ));
            }
            (v, t)
        }
        Command::Tenant { ref command } => tenant(cli, command)?,
        Command::Quota {
            command:
                QuotaCommand::Set {
                    ref tenant,
                    repos,
                    bytes,
                    egress_per_day,
                },
        } => {
            if repos.is_none() && bytes.is_none() && egress_per_day.is_none() {
                bail!("quota set: give at least one of --repos, --bytes, --egress-per-day");
            }
            let body = object([
                ("repos", repos.map(Limit::to_json)),
                ("bytes", bytes.map(Limit::to_json)),
                ("egress_bytes_per_day", egress_per_day.map(Limit::to_json)),
            ]);
            let v = call_with(
                cli,
                "PUT",
                &format!("/api/v1/tenants/{}/quota", enc(tenant)),
                Some(body),
            )?;
            let t = tenant_of(&v);
            let q = &t["quotas"];
            let text = format!(
                "{} quotas: repos {}, bytes {}, egress per day {}",
                s(&t["name"]),
                limit_count(&q["repos"]),
                limit_size(&q["bytes"]),
                limit_size(&q["egress_bytes_per_day"]),
            );
            (v, text)
        }
        Command::Host { ref command } => {
            let (v, verb) = match command {
                HostCommand::Add { tenant, host } => (
                    call_with(
                        cli,
                        "POST",
                        &format!("/api/v1/tenants/{}/hosts", enc(tenant)),
                        Some(serde_json::json!({ "host": host })),
                    )?,
                    format!("added host {host}"),
                ),
                HostCommand::Rm { tenant, host } => (
                    call(
                        cli,
                        "DELETE",
                        &format!("/api/v1/tenants/{}/hosts/{}", enc(tenant), enc(host)),
                    )?,
                    format!("removed host {host}"),
                ),
            };
            let t = tenant_of(&v);
            let text = format!("{verb}; {} hosts: {}", s(&t["name"]), join(&t["hosts"]));
            (v, text)
        }
        Command::Deny { ref command } => deny(cli, command)?,
        Command::Queue {
            command: QueueCommand::Ls,
        } => {
            let v = call(cli, "GET", "/api/v1/queue")?;
            let mut t = format!(
                "{:<7} {:<40} {:<50} {:>8}",
                "STATE", "RID", "FROM", "SECONDS"
            );
            let mut n = 0;
            for (state, key) in [("active", "active"), ("queued", "queued")] {
                for e in v[key].as_array().into_iter().flatten() {
                    n += 1;
                    t.push_str(&format!(
                        "\n{:<7} {:<40} {:<50} {:>8}",
                        state,
                        s(&e["rid"]),
                        e["from"].as_str().unwrap_or("-"),
                        e["seconds"]
                            .as_u64()
                            .map_or("-".to_owned(), |x| x.to_string()),
                    ));
                }
            }
            if n == 0 {
                t = "no fetches running or waiting".to_owned();
            }
            (v, t)
        }
        Command::Usage { ref tenant } => {
            let v = call(cli, "GET", &with_tenant("/api/v1/usage", tenant.as_deref()))?;
            let mut t = format!(
                "{:<24} {:<10} {:<16} {:<24} {}",
                "TENANT", "STATE", "REPOS", "STORED", "EGRESS TODAY"
            );
            for u in items(&v, "usage") {
                t.push_str(&format!(
                    "\n{:<24} {:<10} {:<16} {:<24} {}",
                    s(&u["tenant"]),
                    s(&u["state"]),
                    used_of(&u["repos"], &u["quota_repos"], false),
                    used_of(&u["stored_bytes"], &u["quota_bytes"], true),
                    used_of(
                        &u["egress_today_bytes"],
                        &u["quota_egress_bytes_per_day"],
                        true
                    ),
                ));
            }
            (v, t)
        }
        Command::Identity {
            command: IdentityCommand::Ls,
        } => {
            let v = call(cli, "GET", "/api/v1/identities")?;
            let mut t = format!(
                "{:<16} {:<50} {:<24} {:<24} {:>11} TENANTS",
                "NAME", "NID", "LISTEN", "EXTERNAL", "INVENTORY"
            );
            for i in items(&v, "identities") {
                t.push_str(&format!(
                    "\n{:<16} {:<50} {:<24} {:<24} {:>11} {}",
                    s(&i["name"]),
                    s(&i["nid"]),
                    join(&i["listen"]),
                    join(&i["external_addresses"]),
                    format!("{}/{}", i["inventory"], i["cap"]),
                    join(&i["tenants"]),
                ));
            }
            (v, t)
        }
        Command::Identity {
            command:
                IdentityCommand::Create {
                    ref name,
                    ref listen,
                    ref external_addresses,
                },
        } => {
            let mut body = serde_json::json!({ "name": name, "listen": listen });
            if !external_addresses.is_empty() {
                body["external_addresses"] = serde_json::json!(external_addresses);
            }
            let v = call_with(cli, "POST", "/api/v1/identities", Some(body))?;
            let i = v.get("identity").filter(|i| i.is_object()).unwrap_or(&v);
            let t = format!(
                "created identity {} (node id {}), listening on {}",
                s(&i["name"]),
                s(&i["nid"]),
                join(&i["listen"])
            );
            (v, t)
        }
        Command::Config {
            command: ConfigCommand::Reload,
        } => {
            let v = call(cli, "POST", "/api/v1/config/reload")?;
            let changes: Vec<String> = items(&v, "changes").map(s).collect();
            let t = if changes.is_empty() {
                "configuration reloaded: no changes".to_owned()
            } else {
                format!(
                    "configuration reloaded:\n{}",
                    changes
                        .iter()
                        .map(|c| format!("  {c}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                )
            };
            (v, t)
        }
        Command::Backup { ref file } => {
            let v = call(cli, "GET", "/api/v1/backup")?;
            let text = format!("{}\n", serde_json::to_string_pretty(&v)?);
            let Some(path) = file else {
                // The backup itself is the output, whatever -o says.
                print!("{text}");
                return Ok(());
            };
            restore::write_private(path, text.as_bytes())?;
            let summary = serde_json::json!({
                "file": path.display().to_string(),
                "bytes": text.len(),
                "tenants": v["tenants"].as_array().map_or(0, Vec::len),
                "keys": v["keys"].as_object().map_or(0, Map::len),
            });
            let t = format!(
                "backup written to {} ({} tenant(s), {} key(s)); it holds private keys: keep it secret",
                path.display(),
                summary["tenants"],
                summary["keys"]
            );
            (summary, t)
        }
        Command::Restore {
            ref file,
            ref data_dir,
        } => {
            let backup = restore::read(file)?;
            match data_dir {
                Some(dir) => {
                    let r = restore::offline(&backup, dir)?;
                    let v = serde_json::json!({
                        "data_dir": dir.display().to_string(),
                        "restore_json": r.restore_json.display().to_string(),
                        "keys": r.keys.iter().map(|k| serde_json::json!({"identity": k.identity, "nid": k.nid})).collect::<Vec<_>>(),
                    });
                    let mut t = String::new();
                    for k in &r.keys {
                        t.push_str(&format!(
                            "wrote {}/keys/{}/radicle{{,.pub}} ({})\n",
                            dir.display(),
                            k.identity,
                            k.nid
                        ));
                    }
                    t.push_str(&format!(
                        "wrote {}: start seedd with this data directory to import it",
                        r.restore_json.display()
                    ));
                    (v, t)
                }
                None => {
                    if !backup.is_object() {
                        bail!(
                            "{}: not a seedd backup (expected a JSON object)",
                            file.display()
                        );
                    }
                    let v = call_with(cli, "POST", "/api/v1/restore", Some(backup))?;
                    let r = &v["restored"];
                    let mut t = format!(
                        "restored {} tenant(s), {} policy(ies)",
                        r["tenants"], r["policies"]
                    );
                    for w in items(&v, "warnings") {
                        t.push_str(&format!("\nwarning: {}", s(w)));
                    }
                    (v, t)
                }
            }
        }
        Command::Apply {
            ref file,
            prune,
            dry_run,
        } => {
            let yaml = apply::read(file)?;
            let body = apply::request(&yaml, prune, dry_run)
                .with_context(|| file.display().to_string())?;
            let v = call_with(cli, "POST", "/api/v1/apply", Some(body))?;
            let changes: Vec<String> = items(&v, "changes").map(s).collect();
            let mut t = if changes.is_empty() {
                "no changes".to_owned()
            } else {
                changes.join("\n")
            };
            if !changes.is_empty() && v["applied"].as_bool() == Some(false) {
                t.push_str(if dry_run {
                    "\n(dry run: nothing changed)"
                } else {
                    "\n(not applied)"
                });
            }
            (v, t)
        }
    };
    emit(cli, &value, &text)
}

fn tenant(cli: &Cli, command: &TenantCommand) -> anyhow::Result<(Value, String)> {
    Ok(match command {
        TenantCommand::Create {
            name,
            hosts,
            identity,
            repos,
            bytes,
            egress_per_day,
            rps,
            burst,
        } => {
            let quotas = object([
                ("repos", repos.map(Limit::to_json)),
                ("bytes", bytes.map(Limit::to_json)),
                ("egress_bytes_per_day", egress_per_day.map(Limit::to_json)),
            ]);
            let rate = object([
                ("requests_per_second", rps.map(Limit::to_json)),
                ("burst", burst.map(Limit::to_json)),
            ]);
            let non_empty = |v: Value| v.as_object().is_some_and(|o| !o.is_empty()).then_some(v);
            let body = object([
                ("name", Some(Value::from(name.as_str()))),
                (
                    "hosts",
                    (!hosts.is_empty()).then(|| serde_json::json!(hosts)),
                ),
                ("identity", identity.clone().map(Value::from)),
                ("quotas", non_empty(quotas)),
                ("rate", non_empty(rate)),
            ]);
            let v = call_with(cli, "POST", "/api/v1/tenants", Some(body))?;
            let t = format!(
                "created tenant {}\n{}",
                s(&tenant_of(&v)["name"]),
                tenant_detail(tenant_of(&v))
            );
            (v, t)
        }
        TenantCommand::Ls => {
            let v = call(cli, "GET", "/api/v1/tenants")?;
            let mut t = format!(
                "{:<24} {:<10} {:<12} {:<16} {:<24} {:<24} HOSTS",
                "NAME", "STATE", "IDENTITY", "REPOS", "STORED", "EGRESS TODAY"
            );
            for x in items(&v, "tenants") {
                let u = &x["usage"];
                let q = &x["quotas"];
                let repos = if u["repos"].is_null() {
                    x["repos"].as_array().map_or(0, Vec::len).into()
                } else {
                    u["repos"].clone()
                };
                t.push_str(&format!(
                    "\n{:<24} {:<10} {:<12} {:<16} {:<24} {:<24} {}",
                    s(&x["name"]),
                    s(&x["state"]),
                    s(&x["identity"]),
                    used_of(&repos, &q["repos"], false),
                    used_of(&u["stored_bytes"], &q["bytes"], true),
                    used_of(&u["egress_today_bytes"], &q["egress_bytes_per_day"], true),
                    join(&x["hosts"]),
                ));
            }
            (v, t)
        }
        TenantCommand::Show { name } => {
            let v = call(cli, "GET", &format!("/api/v1/tenants/{}", enc(name)))?;
            let t = tenant_detail(tenant_of(&v));
            (v, t)
        }
        TenantCommand::Suspend { name } | TenantCommand::Resume { name } => {
            let action = if matches!(command, TenantCommand::Suspend { .. }) {
                "suspend"
            } else {
                "resume"
            };
            let v = call(
                cli,
                "POST",
                &format!("/api/v1/tenants/{}/{action}", enc(name)),
            )?;
            let t = format!(
                "tenant {} is {}",
                s(&tenant_of(&v)["name"]),
                s(&tenant_of(&v)["state"])
            );
            (v, t)
        }
        TenantCommand::Rm { name } => {
            let v = call(cli, "DELETE", &format!("/api/v1/tenants/{}", enc(name)))?;
            let purged: Vec<String> = items(&v, "purged").map(s).collect();
            let mut t = format!("removed tenant {}", s(&v["name"]));
            if !purged.is_empty() {
                t.push_str(&format!(
                    "; purged {} repository(ies) no other tenant held:",
                    purged.len()
                ));
                for rid in purged {
                    t.push_str(&format!("\n  {rid}"));
                }
            }
            (v, t)
        }
        TenantCommand::Rate { name, rps, burst } => {
            if rps.is_none() && burst.is_none() {
                bail!("tenant rate: give --rps and/or --burst");
            }
            let body = object([
                ("requests_per_second", rps.map(Limit::to_json)),
                ("burst", burst.map(Limit::to_json)),
            ]);
            let v = call_with(
                cli,
                "PUT",
                &format!("/api/v1/tenants/{}/rate", enc(name)),
                Some(body),
            )?;
            let t = tenant_of(&v);
            let text = format!("{} rate: {}", s(&t["name"]), rate_text(&t["rate"]));
            (v, text)
        }
    })
}

fn deny(cli: &Cli, command: &DenyCommand) -> anyhow::Result<(Value, String)> {
    let (kind, field, id_key, action) = match command {
        DenyCommand::Repo { command } => ("repo", "repos", "rid", command),
        DenyCommand::Node { command } => ("node", "nodes", "nid", command),
    };
    Ok(match action {
        DenyAction::Add { id, tenant } => {
            let body = object([
                (id_key, Some(Value::from(id.as_str()))),
                ("tenant", tenant.clone().map(Value::from)),
            ]);
            let v = call_with(cli, "POST", &format!("/api/v1/deny/{field}"), Some(body))?;
            let t = format!(
                "denied {kind} {id} (added to {})",
                list_name(tenant.as_deref())
            );
            (v, t)
        }
        DenyAction::Rm { id, tenant } => {
            let path = with_tenant(
                &format!("/api/v1/deny/{field}/{}", enc(id)),
                tenant.as_deref(),
            );
            let v = call(cli, "DELETE", &path)?;
            let t = format!("{kind} {id} removed from {}", list_name(tenant.as_deref()));
            (v, t)
        }
        DenyAction::Ls { tenant } => {
            let v = call(cli, "GET", "/api/v1/deny")?;
            let entries: Vec<Value> = v[field]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| match tenant {
                    Some(t) => e["tenant"].as_str() == Some(t.as_str()),
                    None => true,
                })
                .cloned()
                .collect();
            let mut t = format!("{:<56} TENANT", id_key.to_uppercase());
            for e in &entries {
                t.push_str(&format!(
                    "\n{:<56} {}",
                    s(&e[id_key]),
                    e["tenant"].as_str().unwrap_or("(global)")
                ));
            }
            let mut out = Map::new();
            out.insert(field.to_owned(), Value::Array(entries));
            (Value::Object(out), t)
        }
    })
}

fn list_name(tenant: Option<&str>) -> String {
    match tenant {
        Some(t) => format!("tenant {t}'s deny list"),
        None => "the global deny list".to_owned(),
    }
}

/// Mutations answer with the Tenant itself; tolerate `{"tenant": {...}}` too.
fn tenant_of(v: &Value) -> &Value {
    v.get("tenant").filter(|t| t.is_object()).unwrap_or(v)
}

fn tenant_detail(t: &Value) -> String {
    let q = &t["quotas"];
    let u = &t["usage"];
    let repos_used = if u["repos"].is_null() {
        t["repos"].as_array().map_or(0, Vec::len).into()
    } else {
        u["repos"].clone()
    };
    let deny = &t["deny"];
    let mut out = format!(
        "name      {}\nstate     {}\nidentity  {}\nhosts     {}\ncreated   {}\nrepos     {}\nstored    {}\negress    {} today\nrate      {}\nfollows   {}\ndeny      repos: {}; nodes: {}",
        s(&t["name"]),
        s(&t["state"]),
        s(&t["identity"]),
        join(&t["hosts"]),
        t["created_at"],
        used_of(&repos_used, &q["repos"], false),
        used_of(&u["stored_bytes"], &q["bytes"], true),
        used_of(&u["egress_today_bytes"], &q["egress_bytes_per_day"], true),
        rate_text(&t["rate"]),
        join(&t["follows"]),
        join(&deny["repos"]),
        join(&deny["nodes"]),
    );
    let repos: Vec<&Value> = t["repos"].as_array().into_iter().flatten().collect();
    if !repos.is_empty() {
        out.push_str(&format!(
            "\n\n{:<40} {:<9} {:<24} OWNER",
            "RID", "SCOPE", "ALIAS"
        ));
        for r in repos {
            out.push_str(&format!(
                "\n{:<40} {:<9} {:<24} {}",
                s(&r["rid"]),
                r["scope"].as_str().unwrap_or("-"),
                r["alias"].as_str().unwrap_or("-"),
                match r["owner"].as_bool() {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                }
            ));
        }
    }
    out
}

fn rate_text(r: &Value) -> String {
    let (rps, burst) = (&r["requests_per_second"], &r["burst"]);
    if rps.is_null() && burst.is_null() {
        return "unlimited".to_owned();
    }
    format!("{} req/s, burst {}", limit_count(rps), limit_count(burst))
}

/// `used/limit`, with sizes in human units.
fn used_of(used: &Value, limit: &Value, size: bool) -> String {
    let used = match used.as_u64() {
        Some(n) if size => format_size(n),
        Some(n) => n.to_string(),
        None => "-".to_owned(),
    };
    let limit = if size {
        limit_size(limit)
    } else {
        limit_count(limit)
    };
    format!("{used}/{limit}")
}

fn limit_count(v: &Value) -> String {
    match v {
        Value::Null => "unlimited".to_owned(),
        v => s(v),
    }
}

fn limit_size(v: &Value) -> String {
    match (v, v.as_u64()) {
        (Value::Null, _) => "unlimited".to_owned(),
        (_, Some(n)) => format_size(n),
        (v, None) => s(v),
    }
}

/// The list in an answer that is either the list itself or `{"<key>": [...]}`.
fn items<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.as_array()
        .or_else(|| v[key].as_array())
        .into_iter()
        .flatten()
}

/// A list of strings as `a, b`; `-` when empty or absent.
fn join(v: &Value) -> String {
    match v {
        Value::Array(a) if !a.is_empty() => a.iter().map(s).collect::<Vec<_>>().join(", "),
        Value::Array(_) | Value::Null => "-".to_owned(),
        v => s(v),
    }
}

fn emit(cli: &Cli, value: &Value, text: &str) -> anyhow::Result<()> {
    match cli.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(value)?),
        Output::Text => println!("{text}"),
    }
    Ok(())
}

fn s(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(enc("acme"), "acme");
        assert_eq!(enc("rad:z3gq"), "rad:z3gq");
        assert_eq!(enc("*.acme.example"), "*.acme.example");
        assert_eq!(enc("a/b?c#d e"), "a%2Fb%3Fc%23d%20e");
        assert_eq!(
            with_tenant("/api/v1/repos", Some("acme")),
            "/api/v1/repos?tenant=acme"
        );
        assert_eq!(with_tenant("/api/v1/repos", None), "/api/v1/repos");
    }

    #[test]
    fn bodies_leave_out_unset_fields() {
        assert_eq!(
            object([
                ("repos", Some(Limit::Value(10).to_json())),
                ("bytes", None),
                ("egress_bytes_per_day", Some(Limit::Unlimited.to_json())),
            ]),
            serde_json::json!({"repos": 10, "egress_bytes_per_day": null})
        );
    }

    #[test]
    fn cli_parses_the_new_commands() {
        for args in [
            &[
                "seedctl",
                "tenant",
                "create",
                "acme",
                "--host",
                "a.example",
                "--host",
                "*.b.example",
                "--repos",
                "10",
                "--bytes",
                "1GiB",
                "--egress-per-day",
                "unlimited",
            ][..],
            &[
                "seedctl", "tenant", "rate", "acme", "--rps", "20", "--burst", "40",
            ],
            &["seedctl", "quota", "set", "acme", "--bytes", "5MiB"],
            &["seedctl", "host", "add", "acme", "acme.example"],
            &[
                "seedctl", "repo", "seed", "rad:z3", "--tenant", "acme", "--scope", "followed",
                "--alias", "hw", "--from", "z6Mk@h:1",
            ],
            &["seedctl", "repo", "unseed", "rad:z3", "--tenant", "acme"],
            &["seedctl", "repo", "ls", "--tenant", "acme"],
            &["seedctl", "repo", "purge", "rad:z3"],
            &[
                "seedctl", "deny", "repo", "add", "rad:z3", "--tenant", "acme",
            ],
            &["seedctl", "deny", "node", "rm", "z6Mk"],
            &["seedctl", "deny", "node", "ls"],
            &["seedctl", "queue", "ls"],
            &["seedctl", "usage", "--tenant", "acme"],
            &[
                "seedctl",
                "identity",
                "create",
                "eu",
                "--listen",
                "0.0.0.0:8777",
                "--external-address",
                "eu.example:8777",
            ],
            &["seedctl", "config", "reload"],
            &["seedctl", "backup", "-f", "b.json"],
            &["seedctl", "restore", "-f", "b.json", "--data-dir", "/tmp/x"],
            &[
                "seedctl",
                "apply",
                "-f",
                "t.yaml",
                "--prune",
                "--dry-run",
                "-o",
                "json",
            ],
        ] {
            if let Err(e) = Cli::try_parse_from(args) {
                panic!("{args:?}: {e}");
            }
        }
        assert!(
            Cli::try_parse_from(["seedctl", "quota", "set", "acme", "--bytes", "lots"]).is_err()
        );
        assert!(Cli::try_parse_from(["seedctl", "identity", "create", "eu"]).is_err());
        assert!(Cli::try_parse_from(["seedctl", "restore"]).is_err());
    }

    #[test]
    fn tls_flags_parse_and_are_checked() {
        use clap::CommandFactory as _;
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "seedctl",
            "--admin",
            "https://127.0.0.1:9776",
            "status",
            "--cacert",
            "ca.pem",
            "--cert",
            "client.crt",
            "--key",
            "client.key",
        ])
        .unwrap();
        assert_eq!(cli.cacert, Some(PathBuf::from("ca.pem")));
        assert_eq!(cli.cert, Some(PathBuf::from("client.crt")));
        assert_eq!(cli.key, Some(PathBuf::from("client.key")));
        let err = tls_config(&cli).unwrap_err().to_string();
        assert!(err.contains("--cacert ca.pem"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let cli = Cli::try_parse_from(["seedctl", "--cacert", empty.to_str().unwrap(), "status"])
            .unwrap();
        let err = tls_config(&cli).unwrap_err().to_string();
        assert!(err.contains("no certificate"), "{err}");

        let cli = Cli::try_parse_from(["seedctl", "--cert", "c.pem", "status"]).unwrap();
        let err = tls_config(&cli).unwrap_err().to_string();
        assert!(err.contains("--cert needs --key"), "{err}");
        let cli = Cli::try_parse_from(["seedctl", "status"]).unwrap();
        assert!(tls_config(&cli).is_ok());
    }

    #[test]
    fn usage_cells() {
        assert_eq!(used_of(&1.into(), &10.into(), false), "1/10");
        assert_eq!(
            used_of(&1234.into(), &Value::Null, true),
            "1.2 KiB/unlimited"
        );
        assert_eq!(
            used_of(&Value::Null, &(1u64 << 30).into(), true),
            "-/1.0 GiB"
        );
    }
}
