//! Running processes, reading their output, and waiting for conditions.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The workspace root (parent of the running package's directory). Cargo sets
/// `CARGO_MANIFEST_DIR` when it runs a test or bench; that wins over the compile-time value,
/// which is stale when a shared target dir reuses this crate built from another checkout.
pub fn workspace() -> PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    dir.parent().unwrap().to_owned()
}

/// Path of a workspace binary (`seedd`, `seedctl`) built next to the running test, or in
/// `SEEDD_TEST_BIN_DIR` when set (binaries copied out of a target dir that several checkouts
/// share, so that a build from another checkout cannot replace them under a running test).
pub fn bin(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("SEEDD_TEST_BIN_DIR") {
        return PathBuf::from(dir).join(name);
    }
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let dir = exe.parent().unwrap();
    let dir = if dir.ends_with("deps") {
        dir.parent().unwrap()
    } else {
        dir
    };
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not built: run the tests with `cargo test --workspace` so binaries are built",
        path.display()
    );
    path
}

/// A free loopback port (bound then released; fine for tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Run a command, failing the test with its output if it fails.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A command's stdout and stderr, as text.
pub fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts that a command succeeded (`what` failed: its output) and returns its output.
pub fn succeeded(out: Output, what: &str) -> String {
    let t = output_text(&out);
    assert!(out.status.success(), "{what} failed:\n{t}");
    t
}

/// Processes whose command line mentions `needle` (from /proc), excluding zombies' absence.
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let p = e.path();
            if let Ok(cmd) = std::fs::read(p.join("cmdline")) {
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                if cmd.contains(needle) {
                    let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
                    out.push(format!("{}: {cmd} [{stat}]", p.display()));
                }
            }
        }
    }
    out
}

/// Polls `cond` every 200 ms until it returns `Some`, or panics with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, cond: impl FnMut() -> Option<T>) -> T {
    wait_for_or(what, timeout, cond, String::new)
}

/// Like [`wait_for`]; on timeout the panic message also carries `diagnostics()` (logs of the
/// processes involved), so a failure in CI says why.
pub fn wait_for_or<T>(
    what: &str,
    timeout: Duration,
    mut cond: impl FnMut() -> Option<T>,
    diagnostics: impl FnOnce() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = cond() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!(
                "timed out after {timeout:?} waiting for {what}\n{}",
                diagnostics()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
