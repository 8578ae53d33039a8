//! Helpers shared by the side-by-side benches (`benches/benches/*.rs`): /proc readers for the
//! measured processes, the results table, and building the seedd binary under test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use seedd_tests::{radicle_bin, workspace};

pub mod generate;
pub mod http1;
pub mod measure;
pub mod peers;
pub mod textgen;

// ------------------------------------------------------------------------------------------
// /proc helpers
// ------------------------------------------------------------------------------------------

pub mod procfs {
    use std::time::{Duration, Instant};

    /// Clock ticks per second (`getconf CLK_TCK`, else 100).
    pub fn clk_tck() -> f64 {
        super::cmd_out(std::process::Command::new("getconf").arg("CLK_TCK"))
            .parse::<f64>()
            .ok()
            .filter(|t| *t > 0.0)
            .unwrap_or(100.0)
    }

    /// Fields after `comm` in /proc/<pid>/stat (index 0 = state, 1 = ppid, 11 = utime …).
    pub fn stat_fields(pid: u32) -> Option<Vec<String>> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (_, rest) = stat.rsplit_once(") ")?;
        Some(rest.split_whitespace().map(str::to_owned).collect())
    }

    /// utime + stime + cutime + cstime of `pid`, in clock ticks (`None` once it is gone).
    pub fn try_cpu_ticks(pid: u32) -> Option<u64> {
        stat_fields(pid).map(|f| {
            f.iter()
                .skip(11)
                .take(4)
                .map(|v| v.parse::<u64>().unwrap_or(0))
                .sum()
        })
    }

    /// utime + stime of `pid` itself (not its reaped children), in clock ticks (0 once gone).
    pub fn own_ticks(pid: u32) -> u64 {
        stat_fields(pid)
            .map(|f| {
                f.iter()
                    .skip(11)
                    .take(2)
                    .map(|v| v.parse::<u64>().unwrap_or(0))
                    .sum()
            })
            .unwrap_or(0)
    }

    /// utime + stime + cutime + cstime of `pid`, in clock ticks (0 once the process is gone).
    pub fn cpu_ticks(pid: u32) -> u64 {
        try_cpu_ticks(pid).unwrap_or(0)
    }

    /// Whether `pid` exists and is not a zombie.
    pub fn alive(pid: u32) -> bool {
        stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| s != "Z"))
    }

    /// A `kB` field of /proc/<pid>/status (`VmHWM`, `VmRSS`), in KiB (0 when absent).
    pub fn status_kib(pid: u32, key: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                let rest = l.strip_prefix(key)?.strip_prefix(':')?;
                rest.split_whitespace().next()?.parse().ok()
            })
            .unwrap_or(0)
    }

    /// `root` and every process below it (by `ppid`), read from /proc once.
    pub fn tree(root: u32) -> Vec<u32> {
        let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()))
                    .filter_map(|p| {
                        let ppid = stat_fields(p)?.get(1)?.parse::<u32>().ok()?;
                        Some((p, ppid))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut out = vec![root];
        let mut i = 0;
        while i < out.len() {
            let parent = out[i];
            out.extend(
                parents
                    .iter()
                    .filter(|(_, pp)| *pp == parent)
                    .map(|(p, _)| *p),
            );
            i += 1;
        }
        out
    }

    /// Sum of `VmRSS` (KiB) of `root` and all its descendants (what the tree holds in RAM now;
    /// shared file pages mapped by several processes count once per process, as `ps` shows).
    pub fn tree_rss_kib(root: u32) -> u64 {
        tree(root).into_iter().map(|p| status_kib(p, "VmRSS")).sum()
    }

    /// Sum of `RssAnon` (KiB) over the tree: private memory only, without the file pages
    /// (mapped packs) that the page cache holds anyway.
    pub fn tree_anon_kib(root: u32) -> u64 {
        tree(root)
            .into_iter()
            .map(|p| status_kib(p, "RssAnon"))
            .sum()
    }

    /// Peaks seen by a [`TreeRssSampler`], KiB.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct TreePeak {
        /// Σ VmRSS.
        pub rss: u64,
        /// Σ RssAnon.
        pub anon: u64,
        pub samples: usize,
    }

    /// Samples [`tree_rss_kib`] and [`tree_anon_kib`] of `root` every `every` on a thread
    /// until stopped; the peaks.
    pub struct TreeRssSampler {
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
        handle: std::thread::JoinHandle<TreePeak>,
    }

    impl TreeRssSampler {
        pub fn start(root: u32, every: Duration) -> Self {
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = stop.clone();
            let handle = std::thread::spawn(move || {
                let mut peak = TreePeak::default();
                loop {
                    let pids = tree(root);
                    let rss = pids.iter().map(|p| status_kib(*p, "VmRSS")).sum();
                    let anon = pids.iter().map(|p| status_kib(*p, "RssAnon")).sum();
                    peak.rss = peak.rss.max(rss);
                    peak.anon = peak.anon.max(anon);
                    peak.samples += 1;
                    if flag.load(std::sync::atomic::Ordering::Relaxed) {
                        return peak;
                    }
                    std::thread::sleep(every);
                }
            });
            TreeRssSampler { stop, handle }
        }

        /// The peaks and the number of samples taken.
        pub fn finish(self) -> TreePeak {
            self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            self.handle.join().unwrap_or_default()
        }
    }

    /// Reset VmHWM to the current RSS (`echo 5 > clear_refs`, Linux ≥ 4.0).
    pub fn reset_hwm(pid: u32) -> bool {
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
    }

    /// Number of child processes of `pid` (zombies not yet reaped included).
    pub fn children(pid: u32) -> usize {
        let ppid = pid.to_string();
        std::fs::read_dir("/proc")
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()))
                    .filter(|p| stat_fields(*p).is_some_and(|f| f.get(1) == Some(&ppid)))
                    .count()
            })
            .unwrap_or(0)
    }

    /// Wait (bounded) until `pid` has reaped all its children, so that their CPU is in
    /// cutime/cstime.
    pub fn settle(pid: u32) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while children(pid) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(30));
    }

    /// The 1, 5 and 15 minute load averages ("" when unreadable).
    pub fn loadavg() -> String {
        std::fs::read_to_string("/proc/loadavg")
            .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    }
}

// ------------------------------------------------------------------------------------------
// Output
// ------------------------------------------------------------------------------------------

/// A figure for the table: "n/a" when missing or not finite, fewer decimals the larger it is;
/// whole numbers below 1e9 without decimals.
pub fn fmt(v: Option<f64>) -> String {
    fmt_figure(v, true)
}

/// Like [`fmt`]; `whole_bare: false` gives whole numbers below 1000 decimals too ("5.00").
pub fn fmt_figure(v: Option<f64>, whole_bare: bool) -> String {
    match v {
        None => "n/a".into(),
        Some(v) if !v.is_finite() => "n/a".into(),
        Some(v) if v.abs() >= 1000.0 => format!("{v:.0}"),
        Some(v) if whole_bare && v.fract() == 0.0 && v.abs() < 1e9 => format!("{v:.0}"),
        Some(v) if v.abs() >= 100.0 => format!("{v:.1}"),
        Some(v) if v.abs() >= 1.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// One line of a results table (cells already formatted).
pub struct TableLine<'a> {
    /// Workload or phase; printed only where it changes.
    pub group: &'a str,
    pub metric: &'a str,
    pub seedd: String,
    pub other: String,
    pub ratio: String,
    pub unit: &'a str,
    pub better: &'a str,
}

/// Appends the header (`heads`: group, metric, seedd, other, ratio, unit; then "better"), a
/// rule of `rule` dashes and the lines, in columns of `widths` (the first two and the unit
/// left-aligned, the figures right-aligned).
pub fn write_table<'a>(
    t: &mut String,
    heads: [&str; 6],
    widths: [usize; 6],
    rule: usize,
    lines: impl IntoIterator<Item = TableLine<'a>>,
) {
    let [w0, w1, w2, w3, w4, w5] = widths;
    let [h0, h1, h2, h3, h4, h5] = heads;
    let _ = writeln!(
        t,
        "{h0:<w0$} {h1:<w1$} {h2:>w2$} {h3:>w3$} {h4:>w4$}  {h5:<w5$} better"
    );
    let _ = writeln!(t, "{}", "-".repeat(rule));
    let mut last = "";
    for l in lines {
        let group = if l.group == last { "" } else { l.group };
        last = l.group;
        let _ = writeln!(
            t,
            "{group:<w0$} {:<w1$} {:>w2$} {:>w3$} {:>w4$}  {:<w5$} {}",
            l.metric, l.seedd, l.other, l.ratio, l.unit, l.better
        );
    }
}

// ------------------------------------------------------------------------------------------
// Environment
// ------------------------------------------------------------------------------------------

/// The soft open-files limit of this process (`ulimit -n`), from `/proc/self/limits`.
pub fn fd_soft_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `$name` as a number, else `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Trimmed stdout of `cmd` (empty when it cannot run).
pub fn cmd_out(cmd: &mut Command) -> String {
    cmd.output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// "v0.21.1" from cargo's install record of radicle-node (the binary prints "unknown").
pub fn radicle_version() -> String {
    let bin = radicle_bin("radicle-node");
    bin.parent()
        .and_then(Path::parent)
        .map(|root| root.join(".crates.toml"))
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| {
            text.lines().find_map(|l| {
                let rest = l.trim_start_matches('"').strip_prefix("radicle-node ")?;
                Some(rest.split_whitespace().next()?.to_owned())
            })
        })
        .unwrap_or_else(|| "(version unknown)".into())
}

/// `<target>/<profile>` of this executable (`…/release/deps/p2p-<hash>` → `…/release`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap();
    if dir.ends_with("deps") {
        dir.parent().unwrap().to_owned()
    } else {
        dir.to_owned()
    }
}

/// Build the seedd binary next to this bench (`cargo build --profile <profile> -p seedd`),
/// unless `SEEDD_BENCH_NO_BUILD` is set (then the binary must be newer than the last commit's
/// sources, see below). A failed build refuses to run: figures from an older binary would be
/// reported against the current commit. `SEEDD_BENCH_ALLOW_STALE=<reason>` overrides that and
/// is recorded in the result ([`measure::record_override`]).
pub fn ensure_seedd(log: &dyn Fn(&str), profile: &Path) -> PathBuf {
    let path = profile.join("seedd");
    if std::env::var_os("SEEDD_BENCH_NO_BUILD").is_none() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let target = profile.parent().unwrap();
        let name = profile.file_name().unwrap().to_string_lossy().into_owned();
        let cargo_profile = if name == "debug" {
            "dev".to_owned()
        } else {
            name
        };
        log(&format!(
            "cargo build --profile {cargo_profile} -p seedd (target {})",
            target.display()
        ));
        let mut cmd = Command::new(cargo);
        // `cargo bench` runs this with its own environment added (the package's CARGO_PKG_*,
        // and LD_LIBRARY_PATH pointing into the target dir); clang-sys, under RocksDB's
        // bindgen, reruns on a changed LD_LIBRARY_PATH, which rebuilt seedd (7 minutes) on
        // every bench run. Build with the environment a shell has.
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("CARGO_PKG_")
                || k.starts_with("CARGO_BIN_EXE_")
                || k == "CARGO_MANIFEST_DIR"
                || k == "CARGO_MANIFEST_PATH"
                || k == "CARGO_PRIMARY_PACKAGE"
                || k == "CARGO_CRATE_NAME"
            {
                cmd.env_remove(&key);
            }
        }
        if let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") {
            let rustup = std::env::var_os("RUSTUP_HOME").map(PathBuf::from);
            let kept: Vec<PathBuf> = std::env::split_paths(&paths)
                .filter(|p| {
                    !p.starts_with(target) && !rustup.as_ref().is_some_and(|r| p.starts_with(r))
                })
                .collect();
            if kept.is_empty() {
                cmd.env_remove("LD_LIBRARY_PATH");
            } else if let Ok(joined) = std::env::join_paths(kept) {
                cmd.env("LD_LIBRARY_PATH", joined);
            }
        }
        let status = cmd
            .args([
                "build",
                "--profile",
                &cargo_profile,
                "-p",
                "seedd",
                "--bin",
                "seedd",
            ])
            .current_dir(workspace())
            .env("CARGO_TARGET_DIR", target)
            .stdin(Stdio::null())
            .status();
        match status {
            Ok(s) if s.success() => {}
            other => match std::env::var("SEEDD_BENCH_ALLOW_STALE") {
                Ok(reason) if !reason.trim().is_empty() && path.exists() => {
                    log(&format!(
                        "WARNING: building seedd failed ({other:?}); using the existing {} \
                         because SEEDD_BENCH_ALLOW_STALE={reason}",
                        path.display()
                    ));
                    measure::record_override(&format!(
                        "SEEDD_BENCH_ALLOW_STALE={reason} (build failed: {other:?})"
                    ));
                }
                _ => {
                    eprintln!(
                        "refusing to run: seedd could not be built ({other:?}); an older {} \
                         would be measured as this commit. Fix the build, or set \
                         SEEDD_BENCH_ALLOW_STALE=<reason> (recorded in the result)",
                        path.display()
                    );
                    std::process::exit(2);
                }
            },
        }
        // A file edited after the provenance check but before this build would be measured
        // as the recorded commit: check again now that the binary is what it will be.
        if let Err(e) = measure::Provenance::collect("ensure_seedd") {
            eprintln!("refusing to run after building seedd: {e}");
            std::process::exit(2);
        }
    } else {
        measure::record_override("SEEDD_BENCH_NO_BUILD=1 (the binary was built beforehand)");
    }
    assert!(path.exists(), "{} missing", path.display());
    path
}

/// Noise handshake as initiator on `stream`, then the target's first three gossip messages
/// (§5.1). Returns the decoder (it may hold further bytes) and the frames read so far.
pub async fn establish<S>(
    stream: &mut S,
    key: &seedd_proto::crypto::Keypair,
    remote: seedd_proto::crypto::NodeId,
) -> Result<(seedd_proto::wire::FrameDecoder, u64), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use seedd_proto::crypto::Keypair;
    use seedd_proto::wire::handshake::{Initiator, ACT2_LEN};
    use seedd_proto::wire::{Frame, FrameDecoder};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (awaiting, act1) = Initiator::new(key.clone(), Keypair::generate(), remote)
        .act1()
        .map_err(|e| format!("act1: {e}"))?;
    stream
        .write_all(&act1)
        .await
        .map_err(|e| format!("sending act1: {e}"))?;
    let mut act2 = [0u8; ACT2_LEN];
    stream
        .read_exact(&mut act2)
        .await
        .map_err(|e| format!("reading act2: {e}"))?;
    let (act3, _) = awaiting.act3(&act2).map_err(|e| format!("act3: {e}"))?;
    stream
        .write_all(&act3)
        .await
        .map_err(|e| format!("sending act3: {e}"))?;
    let mut decoder = FrameDecoder::new();
    let mut gossip = 0;
    let mut frames = 0;
    let mut buf = [0u8; 4096];
    while gossip < 3 {
        let n = stream
            .read(&mut buf)
            .await
            .map_err(|e| format!("reading the initial messages: {e}"))?;
        if n == 0 {
            return Err(format!(
                "closed by the target after the handshake ({gossip} initial messages)"
            ));
        }
        decoder.push(buf.get(..n).unwrap_or_default());
        while let Some(frame) = decoder
            .next_frame()
            .map_err(|e| format!("initial messages: {e}"))?
        {
            frames += 1;
            if matches!(frame, Frame::Gossip { .. }) {
                gossip += 1;
            }
        }
    }
    Ok((decoder, frames))
}

/// A seedd started by a bench: the process, its loopback ports and the cgroup it runs in
/// (pinned to the server cores; CPU and memory of seedd and every git it starts).
pub struct SpawnedSeedd {
    pub child: std::process::Child,
    pub scope: std::sync::Arc<measure::Scope>,
    pub http: u16,
    pub admin: u16,
    pub p2p: u16,
}

/// `bin run` on three free loopback ports with `data` as its data dir (config written to
/// `data/seedd.toml`; `extra_p2p` lines go in `[p2p]`), policy allow/all, `RUST_LOG=info`,
/// no per-IP request limit (benches measure cost, not admission); log to `log`. It runs in a
/// new [`measure::Scope`] named after `alias`, pinned to the server cores.
pub fn spawn_seedd(
    bin: &Path,
    data: &Path,
    alias: &str,
    extra_p2p: &str,
    log: &Path,
) -> SpawnedSeedd {
    let (http, admin, p2p) = (
        seedd_tests::free_port(),
        seedd_tests::free_port(),
        seedd_tests::free_port(),
    );
    let config = format!(
        "data_dir = \"{}\"\nalias = \"{alias}\"\n[p2p]\nlisten = [\"127.0.0.1:{p2p}\"]\n{extra_p2p}[http]\nlisten = \"127.0.0.1:{http}\"\n[admin]\nlisten = \"127.0.0.1:{admin}\"\n[policy]\ndefault = \"allow\"\nscope = \"all\"\n",
        data.display()
    );
    let config_path = data.join("seedd.toml");
    std::fs::write(&config_path, config).unwrap();
    let log = std::fs::File::create(log).unwrap();
    let scope = std::sync::Arc::new(measure::Scope::new(alias));
    let child = scope
        .command(bin)
        .arg("run")
        .arg("--config")
        .arg(&config_path)
        .env("RUST_LOG", "info")
        .env("SEEDD_HTTP__RATE__PER_IP_REQUESTS_PER_SECOND", "0")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    scope.started(child.id());
    SpawnedSeedd {
        child,
        scope,
        http,
        admin,
        p2p,
    }
}

/// SIGTERM `child` (a server closes its index cleanly then), wait for it, SIGKILL after `grace`.
pub fn stop_child(child: &mut std::process::Child, grace: std::time::Duration) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use super::procfs;

    /// A shell with a `sleep` below it: the tree holds both, their RSS adds up, and the sampler
    /// sees at least that.
    #[test]
    fn process_tree_and_its_rss() {
        let mut sh = Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let root = sh.id();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while procfs::tree(root).len() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let tree = procfs::tree(root);
        assert_eq!(tree.len(), 2, "{tree:?}");
        assert_eq!(tree[0], root);
        let rss = procfs::tree_rss_kib(root);
        assert!(rss >= procfs::status_kib(root, "VmRSS"), "{rss}");
        let sampler = procfs::TreeRssSampler::start(root, Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(30));
        let peak = sampler.finish();
        assert!(peak.samples >= 2 && peak.rss > 0, "{peak:?}");
        assert!(peak.anon <= peak.rss, "{peak:?}");
        assert!(procfs::tree_anon_kib(root) > 0);
        let child = tree[1];
        let _ = Command::new("kill").arg(child.to_string()).status();
        let _ = sh.kill();
        let _ = sh.wait();
        assert_eq!(procfs::tree_rss_kib(u32::MAX), 0);
    }
}
