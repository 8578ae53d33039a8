//! `seedctl`: the operator's CLI for seedd. It talks to the daemon only over the admin API.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context as _};
use clap::{Parser, Subcommand, ValueEnum};
use serde_json::Value;

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
    /// Repositories in the index.
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
    /// List indexed repositories.
    Ls,
    /// One repository: identity, canonical head, namespaces and their signed-refs status.
    Show { rid: String },
    /// Seed a repository (policy allow) and fetch it from a connected seed or `--from`.
    Seed {
        rid: String,
        /// Namespaces to fetch: all, or delegates and followed nodes only.
        #[arg(long, value_parser = ["all", "followed"])]
        scope: Option<String>,
        /// Peer to connect to and fetch from, `z6Mk…@host:port`.
        #[arg(long)]
        from: Option<String>,
    },
    /// Stop seeding a repository (policy block; data is kept until purged).
    Unseed { rid: String },
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seedctl: {e:#}");
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

fn call(cli: &Cli, method: &str, path: &str) -> anyhow::Result<Value> {
    call_with(cli, method, path, None)
}

fn call_with(cli: &Cli, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
    let url = format!("{}{}", cli.admin.trim_end_matches('/'), path);
    let auth = format!("Bearer {}", token(cli)?);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(120)))
        .build()
        .into();
    let resp = match method {
        "POST" => match body {
            Some(b) => agent
                .post(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/json")
                .send(b.to_string()),
            None => agent.post(&url).header("Authorization", &auth).send_empty(),
        },
        _ => agent.get(&url).header("Authorization", &auth).call(),
    }
    .map_err(|e| {
        anyhow!("cannot reach the admin API at {url}: {e}; is seedd running and --admin right?")
    })?;
    let status = resp.status();
    let body: Value = resp
        .into_body()
        .read_json()
        .map_err(|e| anyhow!("{url}: answer is not JSON ({e})"))?;
    if !status.is_success() {
        let msg = body
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("request failed");
        return Err(anyhow!("{url}: {status}: {msg}"));
    }
    Ok(body)
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
            command: RepoCommand::Ls,
        } => {
            let v = call(cli, "GET", "/api/v1/repos")?;
            let mut t = format!(
                "{:<40} {:<24} {:<8} {:>4} {:>5}",
                "RID", "NAME", "VISIBLE", "DELS", "PEERS"
            );
            for r in v["repos"].as_array().into_iter().flatten() {
                t.push_str(&format!(
                    "\n{:<40} {:<24} {:<8} {:>4} {:>5}",
                    s(&r["rid"]),
                    s(&r["name"]),
                    s(&r["visibility"]["type"]),
                    r["delegates"].as_array().map_or(0, Vec::len),
                    r["namespaces"].as_array().map_or(0, Vec::len),
                ));
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
                    ref scope,
                    ref from,
                },
        } => {
            let v = call_with(
                cli,
                "POST",
                &format!("/api/v1/repos/{rid}/seed"),
                Some(serde_json::json!({ "scope": scope, "from": from })),
            )?;
            let t = format!(
                "seeding {} (scope {}){}",
                s(&v["rid"]),
                s(&v["scope"]),
                v["fetching_from"]
                    .as_str()
                    .map(|n| format!("; fetching from {n}"))
                    .unwrap_or_default()
            );
            (v, t)
        }
        Command::Repo {
            command: RepoCommand::Unseed { ref rid },
        } => {
            let v = call(cli, "POST", &format!("/api/v1/repos/{rid}/unseed"))?;
            let t = format!("no longer seeding {}", s(&v["rid"]));
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
    };
    emit(cli, &value, &text)
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
