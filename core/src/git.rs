//! The one way seedd runs `git`: a clean environment, so nothing of the daemon's environment,
//! the system or the user's git configuration changes what git does with storage.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// `git` (the configured binary) with an empty environment but `PATH`, `HOME` = `home` (an
/// empty directory under `cache/`), `LANG=C`, no system or global config and no terminal
/// prompts. Callers add their own `-C`, `-c` and environment on top.
///
/// A bare name (`git`) is resolved on `PATH` first: the standard library starts a child with
/// `posix_spawn` (no copy of the daemon's page tables) only when the program is a path or the
/// child's `PATH` is left alone; otherwise it forks, and a fork costs in proportion to the
/// daemon's memory — per fetch, per served request, growing with the number of repositories.
pub fn command(git: impl AsRef<OsStr>, home: &Path) -> std::process::Command {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut cmd = std::process::Command::new(resolve(git.as_ref(), &path));
    cmd.env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("LANG", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0");
    cmd
}

/// `program` as found on `path` (the first executable file of that name), or as given when it
/// already names a path or is not found (then spawning reports the error as before).
fn resolve(program: &OsStr, path: &OsStr) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if Path::new(program).components().count() != 1 || program.is_empty() {
        return PathBuf::from(program);
    }
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| PathBuf::from(program))
}

/// `cmd` (a [`command`]) run by `/bin/sh` under `ulimit -d`: its data segment (heap and
/// private writable mappings; not the read-only mappings of pack files) limited to `bytes`,
/// so that a malloc past it fails and git dies instead of taking the machine's memory. The
/// shell sets the limit and `exec`s the program: no `unsafe` `pre_exec` in the daemon.
pub fn with_data_limit(cmd: &std::process::Command, bytes: u64) -> std::process::Command {
    let mut limited = std::process::Command::new("/bin/sh");
    limited.env_clear();
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => limited.env(k, v),
            None => limited.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        limited.current_dir(dir);
    }
    limited
        .arg("-c")
        .arg("ulimit -d \"$0\" && exec \"$@\"")
        .arg((bytes / 1024).max(1).to_string())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    limited
}

/// [`command`] for async callers.
pub fn async_command(git: impl AsRef<OsStr>, home: &Path) -> tokio::process::Command {
    tokio::process::Command::from(command(git, home))
}

/// For tests that build repositories with real git: `git -C dir args…` through [`command`],
/// with a fixed author and committer. Also for the other crates' tests (feature `testing`).
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub mod testing {
    use std::path::Path;

    /// Runs git with `stdin` as its input; the whole output, whatever the status.
    pub fn run(dir: &Path, args: &[&str], stdin: &[u8]) -> std::process::Output {
        use std::io::Write as _;
        let mut child = super::command("git", dir)
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        child.wait_with_output().unwrap()
    }

    /// Runs git, which must succeed; its stdout, trimmed.
    pub fn ok(dir: &Path, args: &[&str]) -> String {
        let out = run(dir, args, b"");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_limit_stops_a_program_that_allocates_past_it() {
        let home = tempfile::tempdir().unwrap();
        // git's own allocation of a 64 MiB buffer fails under a 32 MiB limit…
        let mut cmd = command("git", home.path());
        cmd.args(["-c", "core.bigFileThreshold=1g", "hash-object", "--stdin"]);
        let big = vec![b'x'; 64 << 20];
        let run = |cmd: &mut std::process::Command| {
            use std::io::Write as _;
            let mut child = cmd
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let _ = stdin.write_all(&big);
            drop(stdin);
            child.wait_with_output().unwrap()
        };
        let out = run(&mut with_data_limit(&cmd, 32 << 20));
        assert!(!out.status.success(), "{out:?}");
        // …and succeeds under 512 MiB, with the same environment and arguments.
        let out = run(&mut with_data_limit(&cmd, 512 << 20));
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim().len(), 40);
    }

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

    /// A bare name becomes the first executable on `PATH` (so the child is started with
    /// `posix_spawn`, not a fork); paths and unknown names stay as given.
    #[test]
    fn bare_names_resolve_on_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("git"), "not executable").unwrap();
        std::fs::write(b.join("git"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(b.join("git"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths([&a, &b]).unwrap();
        assert_eq!(resolve(OsStr::new("git"), &path), b.join("git"));
        assert_eq!(
            resolve(OsStr::new("/usr/bin/git"), &path),
            PathBuf::from("/usr/bin/git")
        );
        assert_eq!(resolve(OsStr::new("./git"), &path), PathBuf::from("./git"));
        assert_eq!(resolve(OsStr::new("nogit"), &path), PathBuf::from("nogit"));
        let cmd = command("git", Path::new("/nonexistent-home"));
        assert!(Path::new(cmd.get_program()).is_absolute(), "{cmd:?}");
    }
}
