//! `seedctl`: the operator's CLI for seedd. It talks to the daemon only over the admin API
//! (except `restore --data-dir`, which prepares a stopped node's data directory).
//!
//! `cli` holds the command line, `client` the admin API client; each command is dispatched to
//! its noun's module under `cmd/`, which reads the API's typed answer (`seedd_api`) and returns
//! a report that prints itself as text or JSON (`report`).
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

mod apply;
mod cli;
mod client;
mod cmd;
mod report;
mod restore;
mod size;

use std::process::ExitCode;

use clap::Parser;

use cli::{
    Cli, Command, ConfigCommand, MaintenanceCommand, PolicyCommand, QueueCommand, RoutingCommand,
};
use client::Client;
use report::Report;

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

fn run(cli: &Cli) -> anyhow::Result<()> {
    let report = match &cli.command {
        Command::Fleet { command } => cmd::fleet::run(cli, command)?,
        command => dispatch(&Client::new(cli), command)?,
    };
    report::emit(report.as_ref(), cli.output)
}

/// Each command to its noun's module.
fn dispatch(client: &Client, command: &Command) -> anyhow::Result<Box<dyn Report>> {
    match command {
        Command::Status => cmd::status::status(client),
        Command::Rescan { repos } => cmd::status::rescan(client, repos.clone()),
        Command::Repo { command } => cmd::repo::run(client, command),
        Command::Fetch { rid, from } => cmd::repo::fetch(client, rid, from.as_deref()),
        Command::Peers { command } => cmd::peer::run(client, command),
        Command::Routing {
            command: RoutingCommand::Ls { rid, nid, page },
        } => cmd::peer::routing(client, rid.as_deref(), nid.as_deref(), page),
        Command::Node { command } => cmd::node::run(client, command),
        Command::Policy {
            command: PolicyCommand::Ls { page },
        } => cmd::node::policies(client, page),
        Command::Tenant { command } => cmd::tenant::run(client, command),
        Command::Quota { command } => cmd::tenant::quota(client, command),
        Command::Host { command } => cmd::tenant::host(client, command),
        Command::Usage { tenant } => cmd::tenant::usage(client, tenant.as_deref()),
        Command::Deny { command } => cmd::deny::run(client, command),
        Command::Queue {
            command: QueueCommand::Ls,
        } => cmd::queue::ls(client),
        Command::Maintenance {
            command: MaintenanceCommand::Ls { page },
        } => cmd::maintenance::ls(client, page),
        Command::Identity { command } => cmd::identity::run(client, command),
        Command::Fleet { .. } => anyhow::bail!("fleet commands talk to several seeds"),
        Command::Config {
            command: ConfigCommand::Reload,
        } => cmd::config::reload(client),
        Command::Backup { file } => cmd::backup::backup(client, file.as_deref()),
        Command::Restore { file, data_dir } => {
            cmd::backup::restore(client, file, data_dir.as_deref())
        }
        Command::Apply {
            file,
            prune,
            dry_run,
        } => cmd::apply::run(client, file, *prune, *dry_run),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use clap::Parser as _;

    use crate::cli::Cli;
    use crate::client::{enc, tls_config, with_tenant};
    use crate::size::Limit;

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
        let patch = seedd_api::QuotasPatch {
            repos: Limit::patch(Some(Limit::Value(10))),
            bytes: Limit::patch(None),
            egress_bytes_per_day: Limit::patch(Some(Limit::Unlimited)),
        };
        assert_eq!(
            serde_json::to_value(patch).unwrap(),
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
}
