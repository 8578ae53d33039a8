//! The one way seedd runs `git`: a clean environment, so nothing of the daemon's environment,
//! the system or the user's git configuration changes what git does with storage.

use std::ffi::OsStr;
use std::path::Path;

/// `git` (the configured binary) with an empty environment but `PATH`, `HOME` = `home` (an
/// empty directory under `cache/`), `LANG=C`, no system or global config and no terminal
/// prompts. Callers add their own `-C`, `-c` and environment on top.
pub(crate) fn command(git: impl AsRef<OsStr>, home: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(git);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LANG", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0");
    cmd
}

/// [`command`] for async callers.
pub(crate) fn async_command(git: impl AsRef<OsStr>, home: &Path) -> tokio::process::Command {
    tokio::process::Command::from(command(git, home))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_runs_with_a_clean_environment() {
        let cmd = command("git", Path::new("/nonexistent-home"));
        let envs: Vec<_> = cmd.get_envs().collect();
        assert!(envs.contains(&(OsStr::new("HOME"), Some(OsStr::new("/nonexistent-home")))));
        assert!(envs.contains(&(
            OsStr::new("GIT_CONFIG_GLOBAL"),
            Some(OsStr::new("/dev/null"))
        )));
        assert!(envs.contains(&(OsStr::new("GIT_CONFIG_NOSYSTEM"), Some(OsStr::new("1")))));
        assert!(!envs.iter().any(|(k, _)| *k == OsStr::new("GIT_DIR")));
    }
}
