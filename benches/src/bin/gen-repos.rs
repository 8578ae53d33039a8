//! `gen-repos --count N --out STORAGE`: write N valid Radicle repositories into a storage
//! directory (see `seedd_benches::generate`) and print how fast.

use std::path::PathBuf;

use clap::Parser;
use seedd_benches::generate::{generate, Spec};

#[derive(Parser)]
#[command(about = "Write N valid Radicle repositories into a storage directory")]
struct Args {
    /// Number of repositories.
    #[arg(long)]
    count: usize,
    /// Storage directory (created if missing; repositories go directly in it).
    #[arg(long)]
    out: PathBuf,
    /// Project names are `<prefix>-<index>`; another prefix gives other RIDs.
    #[arg(long, default_value = "gen")]
    prefix: String,
    /// Delegate keys, used round-robin (`Keypair::mock(key_base + k)`).
    #[arg(long, default_value_t = 4)]
    keys: usize,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let mut spec = Spec::new(args.count);
    spec.prefix = args.prefix;
    spec.keys = args.keys;
    spec.threads = args.threads;
    match generate(&args.out, &spec, &|done| eprintln!("{done} repositories")) {
        Ok(report) => {
            println!(
                "{} repositories in {:.2} s ({:.0}/s, {:.1} MB) under {}",
                report.repos.len(),
                report.elapsed.as_secs_f64(),
                report.per_second(),
                report.bytes as f64 / 1e6,
                args.out.display()
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen-repos: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
