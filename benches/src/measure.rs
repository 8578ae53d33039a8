//! The measurement rules every bench follows (issue 29 §1):
//!
//! - [`Provenance`]: commit, dirty flag, kernel, CPU model, load average and the configuration
//!   that differs from defaults, in every JSON result. A dirty tree refuses to run unless
//!   `SEEDD_BENCH_ALLOW_DIRTY=<reason>` says why; a failed build refuses unless
//!   `SEEDD_BENCH_ALLOW_STALE=<reason>` does ([`crate::ensure_seedd`]). Both reasons are recorded.
//! - [`Scope`]: a cgroup per server. CPU is cgroup v2 `cpu.stat usage_usec` (every descendant,
//!   in µs; cgroup v1 `cpuacct.usage` where v2 has no cgroup for us), memory the cgroup's peak
//!   (v2 `memory.peak`, else v1 `memory.max_usage_in_bytes`: page cache the server touched
//!   included) and PSS from `smaps_rollup`, sampled; Σ VmRSS is a secondary column.
//! - Pinning: the server's scope runs on [`Pinning::server`], the bench and its load generators
//!   on [`Pinning::load`] (`taskset`), so a ratio is not bounded by the client.
//! - [`evict`]: `posix_fadvise(DONTNEED)` over storage, index and cache, for every server before
//!   a cold round; [`abba`] alternates the order of servers between rounds.
//! - [`Summary`]: median [min–max] of ≥ 5 rounds.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};

// ------------------------------------------------------------------------------------------
// Provenance
// ------------------------------------------------------------------------------------------

/// Overrides of the refusal rules, recorded in every result written afterwards.
static OVERRIDES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Record that a refusal rule was overridden (and why).
pub fn record_override(what: &str) {
    if let Ok(mut o) = OVERRIDES.lock() {
        o.push(what.to_owned());
    }
}

/// Settings that differ from defaults, recorded by benches that hold the process-wide
/// [`provenance`] (which is not mutable).
static CONFIG_DIFF: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Record a setting that differs from seedd's (or the anchor's) defaults.
pub fn record_config_diff(setting: &str) {
    if let Ok(mut d) = CONFIG_DIFF.lock() {
        if !d.iter().any(|s| s == setting) {
            d.push(setting.to_owned());
        }
    }
}

fn overrides() -> Vec<String> {
    OVERRIDES.lock().map(|o| o.clone()).unwrap_or_default()
}

/// Where and on what a result was measured.
#[derive(Debug, Clone)]
pub struct Provenance {
    pub bench: String,
    pub commit: String,
    pub dirty: bool,
    /// `git status --porcelain` lines when dirty (at most 20).
    pub dirty_files: Vec<String>,
    pub kernel: String,
    pub cpu_model: String,
    pub cores: usize,
    pub loadavg_start: String,
    /// Settings that differ from seedd's (or the anchor's) defaults, `key = value`.
    pub config_diff: Vec<String>,
    pub pinning: String,
    pub cgroup: String,
    pub started_unix: u64,
}

/// Refusal to measure: the figures would not belong to a commit.
#[derive(Debug)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Provenance {
    /// Read the machine and the work tree; refuse a dirty tree unless
    /// `SEEDD_BENCH_ALLOW_DIRTY=<reason>` is set (the reason is recorded).
    pub fn collect(bench: &str) -> Result<Provenance, Refused> {
        let ws = seedd_tests::workspace();
        let git = |args: &[&str]| {
            Command::new("git")
                .args(args)
                .current_dir(&ws)
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim_end().to_owned())
        };
        let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "(no git)".into());
        let status =
            git(&["status", "--porcelain", "--untracked-files=normal"]).unwrap_or_default();
        let dirty_files: Vec<String> = status
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect();
        let dirty = !dirty_files.is_empty();
        if dirty {
            match std::env::var("SEEDD_BENCH_ALLOW_DIRTY") {
                Ok(reason) if !reason.trim().is_empty() => {
                    record_override(&format!("SEEDD_BENCH_ALLOW_DIRTY={reason}"));
                }
                _ => {
                    return Err(Refused(format!(
                        "the work tree is dirty ({} changed files, first: {}); figures must belong \
                         to a commit. Commit or stash, or set SEEDD_BENCH_ALLOW_DIRTY=<reason> \
                         (recorded in the result)",
                        dirty_files.len(),
                        dirty_files.first().map(String::as_str).unwrap_or("")
                    )))
                }
            }
        }
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "(unknown)".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "(unknown)".into());
        Ok(Provenance {
            bench: bench.to_owned(),
            commit,
            dirty,
            dirty_files: dirty_files.into_iter().take(20).collect(),
            kernel,
            cpu_model,
            // Every online core, not this process's affinity (the bench pins itself).
            cores: std::fs::read_to_string("/proc/cpuinfo")
                .map(|c| c.lines().filter(|l| l.starts_with("processor")).count())
                .unwrap_or(0)
                .max(1),
            loadavg_start: crate::procfs::loadavg(),
            config_diff: Vec::new(),
            pinning: Pinning::get().describe(),
            cgroup: cgroup_method().to_owned(),
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        })
    }

    /// [`Provenance::collect`], or exit with the refusal.
    pub fn require(bench: &str) -> Provenance {
        match Provenance::collect(bench) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{bench}: refusing to run: {e}");
                std::process::exit(2);
            }
        }
    }

    /// A setting that differs from defaults, for the record.
    pub fn differs(&mut self, setting: impl Into<String>) {
        let s = setting.into();
        if !self.config_diff.contains(&s) {
            self.config_diff.push(s);
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "bench": self.bench,
            "commit": self.commit,
            "dirty": self.dirty,
            "dirty_files": self.dirty_files,
            "overrides": overrides(),
            "kernel": self.kernel,
            "cpu_model": self.cpu_model,
            "cores": self.cores,
            "loadavg_start": self.loadavg_start,
            "loadavg_end": crate::procfs::loadavg(),
            "config_diff": self
                .config_diff
                .iter()
                .cloned()
                .chain(CONFIG_DIFF.lock().map(|d| d.clone()).unwrap_or_default())
                .collect::<Vec<_>>(),
            "pinning": self.pinning,
            "cgroup": self.cgroup,
            "started_unix": self.started_unix,
        })
    }

    /// One line for a table header.
    pub fn line(&self) -> String {
        format!(
            "commit {}{} · {} · {} cores ({}) · load {} · {} · {}",
            self.commit.get(..12).unwrap_or(&self.commit),
            if self.dirty { " (DIRTY)" } else { "" },
            self.kernel,
            self.cores,
            self.cpu_model,
            self.loadavg_start,
            self.pinning,
            self.cgroup
        )
    }
}

static PROVENANCE: OnceLock<Provenance> = OnceLock::new();

/// [`Provenance::require`] once per process (exits on a refusal); [`stamped`] adds it to the
/// JSON a bench writes. Call it first in `main`.
pub fn provenance(bench: &str) -> &'static Provenance {
    PROVENANCE.get_or_init(|| Provenance::require(bench))
}

/// `doc` with the process's provenance (see [`provenance`]) under `"provenance"`.
pub fn stamped(doc: &Value) -> Value {
    match PROVENANCE.get() {
        Some(p) => with_provenance(p, doc.clone()),
        None => doc.clone(),
    }
}

/// [`stamped`] for a JSON text written by hand (left as it is if it does not parse).
pub fn stamped_text(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => {
            serde_json::to_string_pretty(&stamped(&v)).unwrap_or_else(|_| text.to_owned()) + "\n"
        }
        Err(_) => text.to_owned(),
    }
}

/// Write `results` with `provenance` to `<target>/seedd-bench-<name>.json`; returns the path.
pub fn write_result(name: &str, provenance: &Provenance, results: Value) -> PathBuf {
    let target = crate::profile_dir()
        .parent()
        .map(Path::to_owned)
        .unwrap_or_else(std::env::temp_dir);
    let path = target.join(format!("seedd-bench-{name}.json"));
    let doc = json!({ "provenance": provenance.to_json(), "results": results });
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    if let Err(e) = std::fs::write(&path, text + "\n") {
        eprintln!("writing {}: {e}", path.display());
    }
    path
}

/// Add `provenance` to a JSON document a bench wrote itself (`{"provenance": …, …}`).
pub fn with_provenance(provenance: &Provenance, mut doc: Value) -> Value {
    if let Value::Object(m) = &mut doc {
        m.insert("provenance".into(), provenance.to_json());
        doc
    } else {
        json!({ "provenance": provenance.to_json(), "results": doc })
    }
}

// ------------------------------------------------------------------------------------------
// Pinning
// ------------------------------------------------------------------------------------------

/// Which cores the servers and the load generators run on.
#[derive(Debug, Clone)]
pub struct Pinning {
    /// `taskset -c` list for servers, `None` when not pinned.
    pub server: Option<String>,
    pub load: Option<String>,
}

static PINNING: OnceLock<Pinning> = OnceLock::new();

impl Pinning {
    /// From `SEEDD_BENCH_SERVER_CPUS` / `SEEDD_BENCH_LOAD_CPUS`, else the first half of the
    /// cores for servers and the rest for load; `SEEDD_BENCH_PIN=0` turns pinning off (and is
    /// recorded). One core: nothing to split.
    pub fn get() -> &'static Pinning {
        PINNING.get_or_init(|| {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            let off = std::env::var("SEEDD_BENCH_PIN").as_deref() == Ok("0");
            if off {
                record_override("SEEDD_BENCH_PIN=0 (servers and load share every core)");
            }
            if off || n < 2 || Command::new("taskset").arg("-V").output().is_err() {
                return Pinning {
                    server: None,
                    load: None,
                };
            }
            let half = n / 2;
            let server = std::env::var("SEEDD_BENCH_SERVER_CPUS")
                .unwrap_or_else(|_| format!("0-{}", half.saturating_sub(1)));
            let load = std::env::var("SEEDD_BENCH_LOAD_CPUS")
                .unwrap_or_else(|_| format!("{half}-{}", n - 1));
            Pinning {
                server: Some(server),
                load: Some(load),
            }
        })
    }

    pub fn describe(&self) -> String {
        match (&self.server, &self.load) {
            (Some(s), Some(l)) => format!("servers on cpus {s}, load on cpus {l}"),
            _ => "not pinned".into(),
        }
    }

    /// Pin this process (every thread it has so far, and what it starts later) to the load
    /// cores. Call it first thing in `main`, before any runtime starts threads.
    pub fn pin_self_to_load() {
        if let Some(load) = &Pinning::get().load {
            let _ = Command::new("taskset")
                .args(["-a", "-p", "-c", load])
                .arg(std::process::id().to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Pinning {
    /// Pin this process to the server cores: for in-process benches, where the bench process
    /// is the server (index, ratelimit, wire). Says what was done, for the table.
    pub fn pin_self_to_server() -> String {
        match &Pinning::get().server {
            Some(cpus) => {
                let ok = Command::new("taskset")
                    .args(["-a", "-p", "-c", cpus])
                    .arg(std::process::id().to_string())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                if ok {
                    format!("bench process pinned to the server cores {cpus}")
                } else {
                    format!("pinning to the server cores {cpus} FAILED")
                }
            }
            None => "not pinned".to_owned(),
        }
    }
}

// ------------------------------------------------------------------------------------------
// cgroups
// ------------------------------------------------------------------------------------------

/// Mount point of the cgroup v2 hierarchy and of the v1 `memory` and `cpuacct` controllers.
#[derive(Debug, Default)]
struct Mounts {
    v2: Option<PathBuf>,
    memory: Option<PathBuf>,
    cpuacct: Option<PathBuf>,
}

fn mounts() -> &'static Mounts {
    static M: OnceLock<Mounts> = OnceLock::new();
    M.get_or_init(|| {
        let mut m = Mounts::default();
        let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return m;
        };
        for line in info.lines() {
            // id parent major:minor root mount-point options … - fstype source super-options
            let Some((pre, post)) = line.split_once(" - ") else {
                continue;
            };
            let mount = pre.split_whitespace().nth(4).map(PathBuf::from);
            let mut post = post.split_whitespace();
            let fstype = post.next().unwrap_or("");
            let supers = post.nth(1).unwrap_or("");
            match (fstype, mount) {
                ("cgroup2", Some(p)) => m.v2 = Some(p),
                ("cgroup", Some(p)) => {
                    let opts: Vec<&str> = supers.split(',').collect();
                    if opts.contains(&"memory") {
                        m.memory = Some(p.clone());
                    }
                    if opts.contains(&"cpuacct") {
                        m.cpuacct = Some(p);
                    }
                }
                _ => {}
            }
        }
        m
    })
}

/// This process's cgroup path in hierarchy `controller` ("" for v2).
fn own_cgroup(controller: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = if controller.is_empty() {
            ctrls.is_empty()
        } else {
            ctrls.split(',').any(|c| c == controller)
        };
        hit.then(|| path.to_owned())
    })
}

/// Make a child cgroup `name` of this process's cgroup in a hierarchy mounted at `mount`.
fn make_child(mount: &Path, own: Option<String>, name: &str) -> Option<PathBuf> {
    let base = mount.join(own?.trim_start_matches('/'));
    let dir = base.join(name);
    let _ = std::fs::remove_dir(&dir);
    std::fs::create_dir(&dir).ok()?;
    // Writable? (Read-only cgroupfs in some containers.)
    std::fs::metadata(dir.join("cgroup.procs")).ok()?;
    Some(dir)
}

/// How CPU and memory are read on this machine (the same for every scope).
pub fn cgroup_method() -> &'static str {
    static M: OnceLock<String> = OnceLock::new();
    M.get_or_init(|| {
        let probe = Scope::new("probe");
        let s = format!(
            "cpu: {} · memory: {}",
            probe.cpu_source(),
            probe.memory_source()
        );
        drop(probe);
        s
    })
}

/// A cgroup (v2 for CPU, v2 or v1 for memory) that a server and all it starts run in.
#[derive(Debug)]
pub struct Scope {
    pub name: String,
    v2: Option<PathBuf>,
    cpuacct: Option<PathBuf>,
    memory_v1: Option<PathBuf>,
    /// Processes started through [`Scope::command`], for the /proc fallback.
    roots: Mutex<Vec<u32>>,
}

impl Scope {
    /// A new scope named `seedd-bench-<pid>-<n>-<name>`. Without writable cgroups it still works:
    /// CPU and Σ RSS then come from /proc of the processes it started (and their children
    /// still running), and [`Scope::cpu_source`] says so.
    pub fn new(name: &str) -> Scope {
        let m = mounts();
        // Unique per scope: two servers with one name each get their own cgroup.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let full = format!("seedd-bench-{}-{n}-{name}", std::process::id());
        let v2 =
            m.v2.as_deref()
                .and_then(|mnt| make_child(mnt, own_cgroup(""), &full));
        let cpuacct = if v2.is_none() {
            m.cpuacct
                .as_deref()
                .and_then(|mnt| make_child(mnt, own_cgroup("cpuacct"), &full))
        } else {
            None
        };
        let memory_v1 = if v2.as_ref().is_some_and(|d| d.join("memory.peak").exists()) {
            None
        } else {
            m.memory
                .as_deref()
                .and_then(|mnt| make_child(mnt, own_cgroup("memory"), &full))
        };
        Scope {
            name: name.to_owned(),
            v2,
            cpuacct,
            memory_v1,
            roots: Mutex::new(Vec::new()),
        }
    }

    fn procs_files(&self) -> Vec<PathBuf> {
        [&self.v2, &self.cpuacct, &self.memory_v1]
            .into_iter()
            .flatten()
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }

    /// A command that joins this scope, pins itself to the server cores and then `exec`s
    /// `program` (add its arguments to the returned command). Everything it starts stays in
    /// the scope.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut script =
            String::from("for f in $SEEDD_SCOPE_PROCS; do echo $$ > \"$f\" || exit 97; done; ");
        match &Pinning::get().server {
            Some(cpus) => script.push_str(&format!("exec taskset -c {cpus} \"$0\" \"$@\"")),
            None => script.push_str("exec \"$0\" \"$@\""),
        }
        let mut cmd = Command::new("sh");
        let files: Vec<String> = self
            .procs_files()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        cmd.arg("-c")
            .arg(script)
            .arg(program)
            .env("SEEDD_SCOPE_PROCS", files.join(" "));
        cmd
    }

    /// Write `dir/<name of real>`: a script that joins this scope, pins itself to the server
    /// cores and `exec`s `real`, for harnesses that start a binary by directory (e.g.
    /// `SEEDD_TEST_BIN_DIR`); each name in `beside` (a sibling of `real`) is symlinked next to
    /// it unwrapped. Returns `dir`.
    pub fn wrapper_dir(&self, real: &Path, dir: &Path, beside: &[&str]) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::create_dir_all(dir);
        let name = real.file_name().unwrap_or_default();
        let mut script = String::from("#!/bin/sh\n");
        for f in self.procs_files() {
            script.push_str(&format!("echo $$ > '{}' || exit 97\n", f.display()));
        }
        match &Pinning::get().server {
            Some(cpus) => script.push_str(&format!(
                "exec taskset -c {cpus} '{}' \"$@\"\n",
                real.display()
            )),
            None => script.push_str(&format!("exec '{}' \"$@\"\n", real.display())),
        }
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        if std::fs::write(&path, script).is_ok() {
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755));
        }
        for other in beside {
            let link = dir.join(other);
            let _ = std::fs::remove_file(&link);
            if let Some(parent) = real.parent() {
                let _ = std::os::unix::fs::symlink(parent.join(other), &link);
            }
        }
        dir.to_owned()
    }

    /// Remember a process started through [`Scope::command`] (for the /proc fallback).
    pub fn started(&self, pid: u32) {
        if let Ok(mut r) = self.roots.lock() {
            r.push(pid);
        }
    }

    pub fn cpu_source(&self) -> &'static str {
        if self.v2.is_some() {
            "cgroup v2 cpu.stat usage_usec"
        } else if self.cpuacct.is_some() {
            "cgroup v1 cpuacct.usage"
        } else {
            "/proc ticks of the scope's processes (no writable cgroup)"
        }
    }

    pub fn memory_source(&self) -> &'static str {
        if self
            .v2
            .as_ref()
            .is_some_and(|d| d.join("memory.peak").exists())
        {
            "cgroup v2 memory.peak"
        } else if self.memory_v1.is_some() {
            "cgroup v1 memory.max_usage_in_bytes"
        } else {
            "none (no memory cgroup): PSS samples only"
        }
    }

    /// CPU used by every process that ever ran in the scope, in µs.
    pub fn cpu_usec(&self) -> u64 {
        if let Some(d) = &self.v2 {
            if let Ok(s) = std::fs::read_to_string(d.join("cpu.stat")) {
                if let Some(v) = s
                    .lines()
                    .find_map(|l| l.strip_prefix("usage_usec "))
                    .and_then(|v| v.trim().parse().ok())
                {
                    return v;
                }
            }
        }
        if let Some(d) = &self.cpuacct {
            if let Some(ns) = read_u64(&d.join("cpuacct.usage")) {
                return ns / 1000;
            }
        }
        let tck = crate::procfs::clk_tck();
        let roots = self.roots.lock().map(|r| r.clone()).unwrap_or_default();
        let ticks: u64 = roots
            .iter()
            .flat_map(|r| crate::procfs::tree(*r))
            .map(crate::procfs::own_ticks)
            .sum();
        (ticks as f64 / tck * 1e6) as u64
    }

    /// The scope's memory high-water mark since the last [`Scope::reset_peak`], bytes.
    pub fn memory_peak(&self) -> Option<u64> {
        if let Some(d) = &self.v2 {
            if let Some(v) = read_u64(&d.join("memory.peak")) {
                return Some(v);
            }
        }
        self.memory_v1
            .as_ref()
            .and_then(|d| read_u64(&d.join("memory.max_usage_in_bytes")))
    }

    /// The scope's memory use now (page cache included), bytes.
    pub fn memory_current(&self) -> Option<u64> {
        if let Some(d) = &self.v2 {
            if let Some(v) = read_u64(&d.join("memory.current")) {
                return Some(v);
            }
        }
        self.memory_v1
            .as_ref()
            .and_then(|d| read_u64(&d.join("memory.usage_in_bytes")))
    }

    /// Start a new high-water mark (v1: write 0). Returns whether the reset took. On cgroup v2
    /// a reset only holds for the file descriptor that wrote it (kernel ≥ 6.12), so there the
    /// peak is since the scope was made: give each server start its own scope.
    pub fn reset_peak(&self) -> bool {
        if let Some(d) = &self.v2 {
            if std::fs::write(d.join("memory.peak"), "reset\n").is_ok() {
                return true;
            }
        }
        self.memory_v1
            .as_ref()
            .is_some_and(|d| std::fs::write(d.join("memory.max_usage_in_bytes"), "0\n").is_ok())
    }

    /// The scope's processes now.
    pub fn pids(&self) -> Vec<u32> {
        let from_cgroup: Vec<u32> = self
            .procs_files()
            .first()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default();
        if !from_cgroup.is_empty() || !self.procs_files().is_empty() {
            return from_cgroup;
        }
        let roots = self.roots.lock().map(|r| r.clone()).unwrap_or_default();
        roots.iter().flat_map(|r| crate::procfs::tree(*r)).collect()
    }

    /// Σ PSS of the scope's processes now, KiB.
    pub fn pss_kib(&self) -> u64 {
        self.pids().into_iter().map(pss_kib).sum()
    }

    /// Σ VmRSS of the scope's processes now, KiB (shared pages counted once per process).
    pub fn rss_kib(&self) -> u64 {
        self.pids()
            .into_iter()
            .map(|p| crate::procfs::status_kib(p, "VmRSS"))
            .sum()
    }

    /// Sample PSS and Σ RSS every `every` until [`Sampler::finish`].
    pub fn sampler(self: &Arc<Self>, every: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let scope = Arc::clone(self);
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut peak = MemoryPeak::default();
            loop {
                let pss = scope.pss_kib();
                let rss = scope.rss_kib();
                peak.pss_kib = peak.pss_kib.max(pss);
                peak.rss_kib = peak.rss_kib.max(rss);
                peak.samples += 1;
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(every);
            }
            peak
        });
        Sampler { stop, handle }
    }

    /// Kill everything left in the scope.
    pub fn kill_all(&self) {
        if let Some(d) = &self.v2 {
            if std::fs::write(d.join("cgroup.kill"), "1\n").is_ok() {
                return;
            }
        }
        for pid in self.pids() {
            let _ = Command::new("kill")
                .args(["-9", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let dirs: Vec<PathBuf> = [&self.v2, &self.cpuacct, &self.memory_v1]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        for _ in 0..50 {
            if dirs
                .iter()
                .all(|d| std::fs::remove_dir(d).is_ok() || !d.exists())
            {
                return;
            }
            self.kill_all();
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Run `start` with `dir` (a [`Scope::wrapper_dir`]) first on `PATH`, then restore `PATH`:
/// for harnesses that find a server on `PATH` (`seedd_tests::radicle_bin` for
/// `RadNode::start_with`), so that only the server started inside `start` joins the scope.
/// Not for use while other threads start processes.
pub fn with_path_first<T>(dir: &Path, start: impl FnOnce() -> T) -> T {
    let old = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::env::split_paths(&old));
    if let Ok(joined) = std::env::join_paths(paths) {
        std::env::set_var("PATH", joined);
    }
    let r = start();
    std::env::set_var("PATH", old);
    r
}

/// Run `start` with `SEEDD_TEST_BIN_DIR=dir` (a [`Scope::wrapper_dir`] of the release seedd
/// with `seedctl` beside it), then unset it: `seedd_tests::Seed::start` inside `start` runs
/// seedd in the scope.
pub fn with_test_bin_dir<T>(dir: &Path, start: impl FnOnce() -> T) -> T {
    let old = std::env::var_os("SEEDD_TEST_BIN_DIR");
    std::env::set_var("SEEDD_TEST_BIN_DIR", dir);
    let r = start();
    match old {
        Some(v) => std::env::set_var("SEEDD_TEST_BIN_DIR", v),
        None => std::env::remove_var("SEEDD_TEST_BIN_DIR"),
    }
    r
}

/// CPU of this process (the bench: its load generators and clients; not its children), µs,
/// in clock ticks (10 ms): for telling a client-bound row from a server-bound one over
/// intervals of seconds.
pub fn self_cpu_usec() -> u64 {
    let ticks = crate::procfs::own_ticks(std::process::id());
    (ticks as f64 / crate::procfs::clk_tck() * 1e6) as u64
}

/// Waits until `scope` used under 2 % of a core over 500 ms, at most `max`; whether it did
/// (e.g. a server done with what a push or a request started: maintenance, logging).
pub fn wait_idle(scope: &Scope, max: Duration) -> bool {
    let deadline = std::time::Instant::now() + max;
    loop {
        let c0 = scope.cpu_usec();
        std::thread::sleep(Duration::from_millis(500));
        if scope.cpu_usec().saturating_sub(c0) < 10_000 {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
    }
}

/// PSS of one process, KiB (0 once it is gone).
pub fn pss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Pss:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Peaks seen by a [`Sampler`].
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryPeak {
    pub pss_kib: u64,
    pub rss_kib: u64,
    pub samples: u64,
}

pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<MemoryPeak>,
}

impl Sampler {
    pub fn finish(self) -> MemoryPeak {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// One measured interval of a scope: CPU µs, wall, memory peak and sampled PSS/RSS peaks.
#[derive(Debug, Clone, Copy)]
pub struct Interval {
    pub cpu_usec: u64,
    pub wall: Duration,
    /// Bytes; `None` without a memory cgroup.
    pub memory_peak: Option<u64>,
    pub pss_peak_kib: u64,
    pub rss_peak_kib: u64,
}

impl Interval {
    pub fn cpu_secs(&self) -> f64 {
        self.cpu_usec as f64 / 1e6
    }
}

/// [`measure`] without the memory sampler: CPU and wall only (`memory_peak` still from the
/// cgroup, which costs the server nothing; no PSS/RSS samples). For latency passes: reading a
/// process's `smaps_rollup` walks its page tables under its `mmap_lock`, so a server that
/// allocates waits for every sample — ~4 ms every 20 ms at 100k repositories (a 165 MiB RSS),
/// which is the p99 of a listing, and more for a larger server: the observer would make the
/// tail grow with the server's memory (`benches/runs/web_scale.md`).
pub fn measure_cpu<T>(scope: &Arc<Scope>, f: impl FnOnce() -> T) -> (T, Interval) {
    scope.reset_peak();
    let c0 = scope.cpu_usec();
    let t0 = std::time::Instant::now();
    let r = f();
    let wall = t0.elapsed();
    // Let the server finish what the last response started (logging, cache rename).
    std::thread::sleep(Duration::from_millis(50));
    let c1 = scope.cpu_usec();
    (
        r,
        Interval {
            cpu_usec: c1.saturating_sub(c0),
            wall,
            memory_peak: scope.memory_peak(),
            pss_peak_kib: 0,
            rss_peak_kib: 0,
        },
    )
}

/// Run `f` and measure `scope` around it (the peak is reset first), sampling PSS and RSS.
pub fn measure<T>(scope: &Arc<Scope>, f: impl FnOnce() -> T) -> (T, Interval) {
    scope.reset_peak();
    let sampler = scope.sampler(Duration::from_millis(20));
    let (r, mut interval) = measure_cpu(scope, f);
    let peak = sampler.finish();
    interval.pss_peak_kib = peak.pss_kib;
    interval.rss_peak_kib = peak.rss_kib;
    (r, interval)
}

// ------------------------------------------------------------------------------------------
// Cold runs
// ------------------------------------------------------------------------------------------

/// What [`evict`] dropped.
#[derive(Debug, Default, Clone, Copy)]
pub struct Evicted {
    pub files: u64,
    pub bytes: u64,
}

/// `sync`, then drop the kernel's page, inode and dentry caches (`/proc/sys/vm/drop_caches`
/// = 3; root only): everything a start reads comes from disk, binaries included. Whether it
/// was done (else use [`evict`]).
pub fn drop_caches() -> bool {
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok()
}

/// `sync`, then `posix_fadvise(DONTNEED)` on every regular file under `paths` (symlinks not
/// followed), so the next read of storage, index or cache comes from disk.
pub fn evict(paths: &[&Path]) -> Evicted {
    let _ = Command::new("sync").status();
    let mut out = Evicted::default();
    let mut stack: Vec<PathBuf> = paths.iter().map(|p| p.to_path_buf()).collect();
    while let Some(p) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else if meta.is_file() {
            if let Ok(f) = std::fs::File::open(&p) {
                if rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).is_ok() {
                    out.files += 1;
                    out.bytes += meta.len();
                }
            }
        }
    }
    out
}

/// Pages of `path` in the page cache, as `fincore` reports them (`None` without fincore).
pub fn resident_bytes(path: &Path) -> Option<u64> {
    let out = Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .arg(path)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The order servers `0..n` run in round `round`: ABBA — forward in rounds 0, 3, 4, 7, …,
/// backward in 1, 2, 5, 6, …, so neither side always goes first or runs after the same one.
pub fn abba(round: usize, n: usize) -> Vec<usize> {
    let forward = matches!(round % 4, 0 | 3);
    if forward {
        (0..n).collect()
    } else {
        (0..n).rev().collect()
    }
}

// ------------------------------------------------------------------------------------------
// Summaries
// ------------------------------------------------------------------------------------------

/// Median [min–max] of a figure's rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Summary {
    /// `None` for no values; NaNs are left out.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Summary {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    pub fn to_json(&self) -> Value {
        json!({ "median": self.median, "min": self.min, "max": self.max, "n": self.n })
    }

    /// `a / b` of two summaries' medians, with the range of the per-round ratio not
    /// attempted (rounds are not paired across servers).
    pub fn ratio(&self, other: &Summary) -> Option<f64> {
        (other.median != 0.0).then(|| self.median / other.median)
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = |v: f64| crate::fmt_figure(Some(v), false);
        write!(f, "{} [{}–{}]", p(self.median), p(self.min), p(self.max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_median_min_max() {
        let s = Summary::of(&[5.0, 1.0, 3.0, f64::NAN, 4.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (3.0, 1.0, 5.0, 5));
        let even = Summary::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(even.median, 2.5);
        assert!(Summary::of(&[]).is_none());
        assert_eq!(s.to_string(), "3.00 [1.00–5.00]");
    }

    #[test]
    fn abba_alternates_who_goes_first() {
        let orders: Vec<Vec<usize>> = (0..4).map(|r| abba(r, 2)).collect();
        assert_eq!(orders, vec![vec![0, 1], vec![1, 0], vec![1, 0], vec![0, 1]]);
        // Over any 4 rounds each server goes first twice.
        let firsts = (0..8).filter(|r| abba(*r, 2)[0] == 0).count();
        assert_eq!(firsts, 4);
    }

    /// A scope's CPU counts a child's busy loop (a grandchild included), and the memory peak
    /// sees a 64 MiB allocation, where the machine has cgroups we may write.
    #[test]
    fn scope_counts_descendants_cpu_and_memory() {
        let scope = Arc::new(Scope::new("selftest"));
        let c0 = scope.cpu_usec();
        let script = "sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'; \
                      x=$(head -c 33554432 /dev/zero | tr '\\0' a); echo ${#x}";
        let mut cmd = scope.command("sh");
        cmd.args(["-c", script]).stdout(Stdio::null());
        let (status, interval) = measure(&scope, || cmd.status().unwrap());
        assert!(status.success());
        eprintln!(
            "{} · {} · {interval:?}",
            scope.cpu_source(),
            scope.memory_source()
        );
        assert!(
            interval.cpu_usec > 50_000,
            "{} µs of CPU via {}",
            interval.cpu_usec,
            scope.cpu_source()
        );
        assert!(scope.cpu_usec() >= c0 + interval.cpu_usec);
        if let Some(peak) = interval.memory_peak {
            assert!(peak >= 32 << 20, "{peak} via {}", scope.memory_source());
        }
        assert!(scope.pids().is_empty(), "{:?}", scope.pids());
    }

    #[test]
    fn evict_drops_a_files_pages() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("data");
        std::fs::write(&f, vec![7u8; 8 << 20]).unwrap();
        let _ = std::fs::read(&f).unwrap();
        let Some(before) = resident_bytes(&f) else {
            return; // no fincore
        };
        let e = evict(&[dir.path()]);
        assert_eq!((e.files, e.bytes), (1, 8 << 20));
        let after = resident_bytes(&f).unwrap();
        assert!(after < before.max(1), "{before} → {after}");
    }
}
