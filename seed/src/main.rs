//! `seedd`: run a seed, print its identity, check or print its configuration.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::{PossibleValuesParser, TypedValueParser as _};
use clap::{Parser, Subcommand, ValueEnum};
use seedd_core::config::{Config, LogFormat, Overrides};

#[derive(Parser)]
#[command(name = "seedd", version, about = "A Radicle seed node for operators")]
struct Cli {
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
    /// Start the seed (creates the data directory and key on first start).
    Run {
        /// TOML config file (defaults < file < SEEDD_* env < flags).
        #[arg(long, env = "SEEDD_CONFIG")]
        config: Option<PathBuf>,
        /// Data directory (overrides `data_dir`).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Log format (overrides `log.format`).
        #[arg(
            long,
            value_parser = PossibleValuesParser::new(["text", "json"]).try_map(|s| s.parse::<LogFormat>())
        )]
        log_format: Option<LogFormat>,
        /// Log filter, e.g. `info` or `seedd=debug,info` (overrides `log.level`; RUST_LOG wins).
        #[arg(long)]
        log_level: Option<String>,
    },
    /// Print the node id (z6Mk…) and did:key of the seed's identity.
    Id {
        #[arg(long, env = "SEEDD_CONFIG")]
        config: Option<PathBuf>,
        #[arg(long)]
        data_dir: Option<PathBuf>,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Run the fleet's front: the stateless router in front of shards and replicas (issue 28;
    /// docs/scaling.md). Routes every repository's requests to its shard, merges node-wide
    /// answers, fails over between replicas.
    Front {
        /// Public listener.
        #[arg(long, env = "SEEDD_FRONT_LISTEN", default_value = "0.0.0.0:8080")]
        listen: std::net::SocketAddr,
        /// `/metrics`, `/healthz`, `/readyz`, `/fleet`.
        #[arg(long, env = "SEEDD_FRONT_ADMIN_LISTEN", default_value = "0.0.0.0:9776")]
        admin_listen: std::net::SocketAddr,
        /// The placement file (shards, replicas, explicit placements), re-read when it changes.
        #[arg(long, env = "SEEDD_FRONT_PLACEMENT")]
        placement: PathBuf,
        /// Seconds between reads of the placement file.
        #[arg(long, env = "SEEDD_FRONT_PLACEMENT_POLL_SECS", default_value_t = 2)]
        placement_poll_secs: u64,
        /// The shard answering for the node itself (`/api/v1/node`); default: the first.
        #[arg(long, env = "SEEDD_FRONT_NODE_SHARD")]
        node_shard: Option<String>,
        /// The seeds' `[web] pinned`, comma-separated, in order.
        #[arg(long, env = "SEEDD_FRONT_PINNED", value_delimiter = ',')]
        pinned: Vec<seedd_proto::crypto::RepoId>,
        /// Milliseconds between health checks of every replica (`/readyz`).
        #[arg(long, env = "SEEDD_FRONT_HEALTH_MS", default_value_t = 1000)]
        health_ms: u64,
        /// Log format.
        #[arg(
            long,
            default_value = "text",
            value_parser = PossibleValuesParser::new(["text", "json"]).try_map(|s| s.parse::<LogFormat>())
        )]
        log_format: LogFormat,
        /// Log filter (RUST_LOG wins).
        #[arg(long, default_value = "info")]
        log_level: String,
        /// Only check the placement file (exit 1 naming the key at fault).
        #[arg(long)]
        check: bool,
    },
    /// Configuration tools.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a config file (with SEEDD_* env applied); exit 1 with the key at fault.
    Check { file: PathBuf },
    /// Print the effective configuration as TOML.
    Print {
        #[arg(long, env = "SEEDD_CONFIG")]
        config: Option<PathBuf>,
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match real_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seedd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn real_main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            config,
            data_dir,
            log_format,
            log_level,
        } => {
            let overrides = Overrides {
                data_dir,
                log_format,
                log_level,
            };
            let (cfg, _) = Config::load(config.as_deref(), &overrides)?;
            seedd_core::logging::init(cfg.log.format, &cfg.log.level);
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("seedd")
                .build()?;
            runtime.block_on(async {
                let daemon = seedd::daemon::Daemon::build(cfg, config, overrides).await?;
                daemon.run().await?;
                Ok(())
            })
        }
        Command::Front {
            listen,
            admin_listen,
            placement,
            placement_poll_secs,
            node_shard,
            pinned,
            health_ms,
            log_format,
            log_level,
            check,
        } => {
            if check {
                let p = seedd_core::placement::Placement::load(&placement)?;
                return out(&format!(
                    "{}: ok (version {}, {} shards)\n",
                    placement.display(),
                    p.version(),
                    p.shards().len()
                ));
            }
            seedd_core::logging::init(log_format, &log_level);
            let opts = seedd_front::FrontOptions {
                listen,
                admin_listen,
                placement,
                placement_poll: std::time::Duration::from_secs(placement_poll_secs.max(1)),
                node_shard,
                pinned,
                health_interval: std::time::Duration::from_millis(health_ms.max(100)),
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("seedd-front")
                .build()?;
            runtime.block_on(async {
                let stop = async {
                    use tokio::signal::unix::{signal, SignalKind};
                    match signal(SignalKind::terminate()) {
                        Ok(mut term) => {
                            tokio::select! {
                                _ = term.recv() => {},
                                _ = tokio::signal::ctrl_c() => {},
                            }
                        }
                        Err(_) => {
                            let _ = tokio::signal::ctrl_c().await;
                        }
                    }
                };
                seedd_front::run(opts, stop).await?;
                Ok(())
            })
        }
        Command::Id {
            config,
            data_dir,
            output,
        } => {
            let overrides = Overrides {
                data_dir,
                ..Overrides::default()
            };
            let (cfg, _) = Config::load(config.as_deref(), &overrides)?;
            seedd_core::logging::init(LogFormat::Text, "warn");
            let key = seedd::daemon::load_identity(&cfg)?;
            let nid = key.nid();
            let text = if output == Output::Json {
                format!(
                    "{}\n",
                    serde_json::json!({ "nid": nid.to_string(), "did": nid.to_did() })
                )
            } else {
                format!("{nid}\n{}\n", nid.to_did())
            };
            out(&text)
        }
        Command::Config { command } => match command {
            ConfigCommand::Check { file } => {
                Config::load(Some(&file), &Overrides::default())?;
                out(&format!("{}: ok\n", file.display()))
            }
            ConfigCommand::Print { config, data_dir } => {
                let overrides = Overrides {
                    data_dir,
                    ..Overrides::default()
                };
                let (cfg, _) = Config::load(config.as_deref(), &overrides)?;
                out(&cfg.to_toml()?)
            }
        },
    }
}

/// Writes to stdout; a reader that went away (`seedd id | head -1`) is not an error.
fn out(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
