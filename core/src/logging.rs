//! Logging setup: `tracing-subscriber`, text or JSON, `RUST_LOG`-style filter; the level can be
//! changed at runtime (config reload) unless `RUST_LOG` is set.
//!
//! Errors in logs: `error = %chain(&e)`, the one style: the error and every source after it,
//! `: `-separated. Our own errors print a source in their message *or* return it from
//! `source()`, never both (`scripts/check-errors.py`); a foreign error that does both is not
//! printed twice ([`chain`]).

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

/// `e` and its sources for a log line: `outer: inner: innermost`. A source whose message the
/// previous one already ends with (an error that prints its source and also returns it) is
/// not repeated.
pub fn chain<E: std::error::Error + ?Sized>(e: &E) -> Chain<'_> {
    Chain(e.to_string(), e.source())
}

/// What [`chain`] prints.
pub struct Chain<'a>(String, Option<&'a (dyn std::error::Error + 'static)>);

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut last = self.0.clone();
        f.write_str(&last)?;
        let mut next = self.1;
        while let Some(e) = next {
            let text = e.to_string();
            if !text.is_empty() && !last.ends_with(&text) {
                write!(f, ": {text}")?;
            }
            last = text;
            next = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("middle: {0}")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn a_chain_prints_every_source_once() {
        let e = Outer(Middle(std::io::Error::other("disk on fire")));
        // `Middle` prints its source and returns it too: the source is not repeated.
        assert_eq!(chain(&e).to_string(), "outer: middle: disk on fire");
        let plain = std::io::Error::other("plain");
        assert_eq!(chain(&plain).to_string(), "plain");
        let by_ref: &dyn std::error::Error = &e;
        assert_eq!(chain(by_ref).to_string(), "outer: middle: disk on fire");
    }
}
