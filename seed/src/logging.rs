//! Logging setup: `tracing-subscriber`, text or JSON, `RUST_LOG`-style filter.

use tracing_subscriber::EnvFilter;

/// Install the global subscriber. `RUST_LOG`, when set, wins over `level`.
pub fn init(format: &str, level: &str) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .or_else(|| EnvFilter::try_new(level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let result = if format == "json" {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
    if let Err(e) = result {
        eprintln!("logging already initialised: {e}");
    }
}
