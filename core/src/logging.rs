//! Logging setup: `tracing-subscriber`, text or JSON, `RUST_LOG`-style filter; the level can be
//! changed at runtime (config reload) unless `RUST_LOG` is set.

use std::sync::OnceLock;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

type Reload = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

static RELOAD: OnceLock<Reload> = OnceLock::new();

fn env_filter(level: &str) -> EnvFilter {
    std::env::var("RUST_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .or_else(|| EnvFilter::try_new(level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"))
}

/// Install the global subscriber. `RUST_LOG`, when set, wins over `level`.
pub fn init(format: LogFormat, level: &str) {
    let filter = env_filter(level);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let result = if format == LogFormat::Json {
        let builder = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_filter_reloading();
        let handle = builder.reload_handle();
        let _ = RELOAD.set(Box::new(move |f| {
            handle.reload(f).map_err(|e| e.to_string())
        }));
        builder.try_init()
    } else {
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .with_filter_reloading();
        let handle = builder.reload_handle();
        let _ = RELOAD.set(Box::new(move |f| {
            handle.reload(f).map_err(|e| e.to_string())
        }));
        builder.try_init()
    };
    if let Err(e) = result {
        eprintln!("logging already initialised: {e}");
    }
}

/// Check a level / filter string.
pub fn valid_level(level: &str) -> bool {
    EnvFilter::try_new(level).is_ok()
}

/// Apply a new level / filter (config reload). `RUST_LOG`, when set, still wins.
pub fn set_level(level: &str) -> Result<(), String> {
    if std::env::var_os("RUST_LOG").is_some() {
        return Ok(());
    }
    let filter = EnvFilter::try_new(level).map_err(|e| format!("log.level {level:?}: {e}"))?;
    match RELOAD.get() {
        Some(reload) => reload(filter),
        None => Ok(()),
    }
}
