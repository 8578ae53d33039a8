//! Side-by-side benchmark: `seedd` against `git http-backend` (run as CGI behind a minimal
//! HTTP/1.1 bridge, `seedd_benches::http1::cgi`) on the same bare repositories, in one run.
//! Prints a table of absolute figures and ratios (seedd / git) and writes the same figures as
//! JSON, with provenance, to `<target>/seedd-bench.json`. See `benches/README.md` and
//! `benches/runs/clone.md`.
//!
//! Measured by the rules of issue 29 §1 (`seedd_benches::measure`):
//!
//! - Every server runs in its own cgroup ([`Scope`](seedd_benches::measure::Scope)) pinned to
//!   the server cores: each seedd start (the release binary through a scope wrapper, so seedd
//!   and every `git upload-pack` it starts are in it), and each CGI bridge (this binary
//!   re-executed with `--cgi-server <root> 0` through `Scope::command`, so `git http-backend`
//!   and every git it starts are in the bridge's scope). The bench and its clients (`git
//!   clone`, the raw HTTP clients) run on the load cores.
//! - Server CPU is the scope's cgroup CPU (µs) across a workload, after the scope has only the
//!   server process left (the last request's git processes have exited). Memory is the scope's
//!   peak (`memory.peak` / v1 `max_usage_in_bytes`, page cache the server touched included) and
//!   PSS sampled every 20 ms; Σ VmRSS is a secondary column. The "self + rest" split of the
//!   layouts table is a diagnostic: the server process's own /proc ticks, the rest of the
//!   scope's CPU being its git children.
//! - Full clones (big16, big64, medium) have a **cold** row (both servers restarted, so seedd's
//!   in-process caches are empty and each scope's memory peak starts afresh; the repositories
//!   and data dirs of every server evicted from the page cache) and a **warm** row (the next
//!   clone from the same server). Every row is `ROUNDS` (5) rounds, servers in ABBA order,
//!   median [min–max].
//!
//! The row "seedd before maintenance" is `git http-backend` serving the layout seedd's fetches
//! leave before its maintenance runs (50 packs, loose refs, no bitmap or commit-graph; it was
//! called "git naive"): what seedd's storage looks like to git before maintenance. The anchor
//! "git with its defaults" (a repository that lived through pushes with git's default gc) is
//! the `anchors` bench's, not this one's.
//!
//! Long by design: one bench binary runs every clone workload side by side against
//! `git http-backend` in one process, so the ratios come from one run (see benches/README.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use seedd_benches::http1::{cgi, client};
use seedd_benches::measure::Pinning;
use seedd_benches::{
    cmd_out, ensure_seedd, fmt_figure, procfs, profile_dir, write_table, TableLine,
};
use seedd_tests::{git, pkt, run, stdout, synthetic_repo, Seed, SeedOptions};

/// Bump when the generated datasets change, so cached ones are regenerated.
const DATA_VERSION: &str = "v5";
/// The copy of "medium" as seedd's fetches leave it before maintenance (the row "seedd before
/// maintenance", once "git naive"): its history arrives in this many fetches, one pack each,
/// refs loose.
const NAIVE_FETCHES: usize = 50;
/// "pushes100": the medium history received in this many fetches.
const PUSHES: usize = 100;
/// The git.git-sized dataset (`SEEDD_BENCH_BIG=1`): commits, and incompressible bytes each
/// commit writes into one of `BIG_FILES` files (≈ 50k × 6.3 kB ≈ 315 MB of pack).
const BIG_COMMITS: usize = 50_000;
const BIG_FILES: usize = 2_000;
const BIG_BYTES_PER_COMMIT: usize = 8_400;
/// Its cache directory under `seedd-bench-data` (not a `v…` name: kept across DATA_VERSIONs).
const BIG_VERSION: &str = "big-v1";
/// "medium": commits, files, files rewritten and edited per commit.
const MEDIUM_COMMITS: usize = 200;
const MEDIUM_FILES: usize = 300;
const MEDIUM_REWRITES: usize = 7;
const MEDIUM_EDITS: usize = 10;
/// "refs10k": number of tags.
const TAGS: usize = 10_000;
/// "refs100k": number of tags.
const TAGS_100K: usize = 100_000;
/// Timed rounds of every row (servers in ABBA order); `SEEDD_BENCH_ROUNDS` lowers it (the
/// override is recorded in the result).
const ROUNDS: usize = 5;
/// Concurrent identical clones.
const CONCURRENT: usize = 16;
/// Request-rate runs: duration and keep-alive connections.
const RPS_SECS: f64 = 3.0;
const RPS_CONNS: usize = 4;

fn main() {
    // The CGI bridge (this binary re-executed in a server's scope) stays on the server cores.
    if cgi::serve_if_asked() {
        return;
    }
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    seedd_benches::measure::provenance("clone");
    // The bench and its clients on the load cores, before any thread starts.
    Pinning::pin_self_to_load();
    bench::all();
}

// ------------------------------------------------------------------------------------------
// Datasets
// ------------------------------------------------------------------------------------------

mod data {
    use super::*;
    pub use seedd_benches::textgen::Rng;

    pub struct Repo {
        pub name: String,
        pub canonical: String,
        pub head: String,
        pub path: PathBuf,
    }

    impl Repo {
        /// Bytes in the repository's pack files.
        pub fn pack_bytes(&self) -> u64 {
            pack_bytes(&self.path)
        }
    }

    /// The git.git-sized history, written with `git fast-import` (one process, seconds per
    /// thousand commits): `BIG_COMMITS` commits, each rewriting one of `BIG_FILES` files with
    /// `BIG_BYTES_PER_COMMIT` random base-64 text (6 bits of entropy per byte: zlib cannot
    /// shrink it much, and a rewrite does not delta against the file's previous version).
    fn populate_big(work: &Path, _g: &dyn Fn(&[&str]) -> String) {
        let mut child = git(work)
            .arg("-C")
            .arg(work)
            .args(["fast-import", "--quiet", "--done"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = io::BufWriter::with_capacity(1 << 20, child.stdin.take().unwrap());
        const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut rng = Rng::new(0xb16_da7a);
        let mut blob = vec![0u8; BIG_BYTES_PER_COMMIT];
        for c in 0..BIG_COMMITS {
            for (i, b) in blob.iter_mut().enumerate() {
                *b = if i % 77 == 76 {
                    b'\n'
                } else {
                    B64[(rng.next_u64() >> 58) as usize]
                };
            }
            let f = rng.below(BIG_FILES);
            let msg = format!("change {c}\n");
            write!(
                stdin,
                "commit refs/heads/main\ncommitter t <t@example.com> {} +0000\ndata {}\n{msg}M 100644 inline src/d{:02}/f{f:04}.txt\ndata {}\n",
                1_700_000_000 + c,
                msg.len(),
                f % 40,
                blob.len()
            )
            .unwrap();
            stdin.write_all(&blob).unwrap();
            stdin.write_all(b"\n").unwrap();
        }
        stdin.write_all(b"done\n").unwrap();
        drop(stdin);
        assert!(child.wait().unwrap().success(), "git fast-import failed");
    }

    /// The git.git-sized dataset (tuned layout), generated once into its own cache directory
    /// (under ten minutes on 2 cores): its storage directory and the repository.
    pub fn big(cache: &Path, log: &dyn Fn(&str)) -> (PathBuf, Repo) {
        let dir = cache.join(BIG_VERSION);
        let manifest = dir.join("manifest.txt");
        if !manifest.exists() {
            let tmp = cache.join(format!("{BIG_VERSION}.tmp"));
            let _ = std::fs::remove_dir_all(&tmp);
            let storage = tmp.join("storage");
            std::fs::create_dir_all(&storage).unwrap();
            let home = tmp.join("home");
            std::fs::create_dir_all(&home).unwrap();
            let t = Instant::now();
            log(&format!(
                "generating dataset big ({BIG_COMMITS} commits, git fast-import) ..."
            ));
            let (rid, path) = synthetic_repo(&storage, "big", populate_big);
            log(&format!(
                "  imported and pushed in {:.0} s; repacking",
                t.elapsed().as_secs_f64()
            ));
            let head = gd(&home, &path, &["rev-parse", "refs/heads/main"]);
            tune(&home, &path);
            log(&format!(
                "  big: {rid}, {:.1} MB packed, {:.0} s",
                pack_bytes(&path) as f64 / 1e6,
                t.elapsed().as_secs_f64()
            ));
            std::fs::write(
                tmp.join("manifest.txt"),
                format!("big {} {head}\n", rid.trim_start_matches("rad:")),
            )
            .unwrap();
            let _ = std::fs::remove_dir_all(&home);
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::rename(&tmp, &dir).unwrap();
        }
        let storage = dir.join("storage");
        let line = std::fs::read_to_string(&manifest).unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        let repo = Repo {
            name: f[0].to_owned(),
            canonical: f[1].to_owned(),
            head: f[2].to_owned(),
            path: storage.join(f[1]),
        };
        (storage, repo)
    }

    /// Where the copy of medium as seedd's fetches leave it before maintenance lives (a
    /// `GIT_PROJECT_ROOT` for git http-backend: the row "seedd before maintenance").
    pub fn naive_root(cache: &Path) -> PathBuf {
        cache.join(DATA_VERSION).join("naive")
    }

    /// Number of `objects/pack/*.pack` files under a (bare) git directory.
    pub fn pack_count(git_dir: &Path) -> usize {
        std::fs::read_dir(git_dir.join("objects/pack"))
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// Sum of `objects/pack/*.pack` sizes under a (bare) git directory.
    pub fn pack_bytes(git_dir: &Path) -> u64 {
        std::fs::read_dir(git_dir.join("objects/pack"))
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }

    fn populate_medium(work: &Path, g: &dyn Fn(&[&str]) -> String) {
        seedd_benches::textgen::populate_medium(
            work,
            g,
            &seedd_benches::textgen::Medium {
                commits: MEDIUM_COMMITS,
                files: MEDIUM_FILES,
                rewrites: MEDIUM_REWRITES,
                edits: MEDIUM_EDITS,
                tag_last: 0,
            },
        );
    }

    fn populate_blob(work: &Path, g: &dyn Fn(&[&str]) -> String, mib: usize, seed: u64) {
        let mut data = vec![0u8; mib * 1024 * 1024];
        let mut rng = Rng::new(seed);
        for chunk in data.chunks_mut(8) {
            let b = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
        std::fs::write(work.join("blob.bin"), &data).unwrap();
        std::fs::write(work.join("README"), format!("{mib} MiB of random bytes\n")).unwrap();
        g(&["add", "-A"]);
        g(&["commit", "-q", "-m", "big blob"]);
    }

    fn populate_small(work: &Path, g: &dyn Fn(&[&str]) -> String) {
        std::fs::write(work.join("README"), "a small repository with many tags\n").unwrap();
        g(&["add", "-A"]);
        g(&["commit", "-q", "-m", "small"]);
    }

    fn gd(home: &Path, repo: &Path, args: &[&str]) -> String {
        stdout(&run(git(home).arg("--git-dir").arg(repo).args(args)))
    }

    /// Tuned layout (G-tuned in performance.md §3): one pack with a bitmap, commit-graph,
    /// packed refs. Served as is by both servers.
    fn tune(home: &Path, repo: &Path) {
        gd(home, repo, &["repack", "-a", "-d", "-b", "-q"]);
        gd(
            home,
            repo,
            &["commit-graph", "write", "--reachable", "--no-progress"],
        );
        gd(home, repo, &["pack-refs", "--all"]);
    }

    fn add_tags(home: &Path, repo: &Path, n: usize) {
        // Each tag names its own commit (a root commit with the empty tree), so the
        // advertisement carries `n` different object ids, as a real repository's many refs do
        // (one shared id would make it compress far better than any real one).
        let mut child = git(home)
            .arg("--git-dir")
            .arg(repo)
            .args(["fast-import", "--quiet"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut input = String::new();
        for i in 0..n {
            let _ = write!(
                input,
                "commit refs/tags/v{i:05}\ncommitter t <t@example.com> {} +0000\ndata 0\n\n",
                1_700_000_000 + i
            );
        }
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "fast-import failed");
    }

    /// The layout seedd's fetches leave before maintenance (G-naive; served by git
    /// http-backend as the row "seedd before maintenance"): `dst` (a new bare
    /// repository) receives `src`'s first-parent history of `refs/heads/main` in `fetches`
    /// incremental fetches, each kept as its own pack (`fetch.unpackLimit=1`, as seedd keeps
    /// every fetched pack), then every other ref in one last fetch. Refs stay loose; no
    /// bitmap, no commit-graph, no multi-pack index, no auto gc.
    pub fn naive_copy(home: &Path, src: &Path, dst: &Path, fetches: usize) {
        run(git(home).args(["init", "--bare", "-q"]).arg(dst));
        let head = gd(home, src, &["symbolic-ref", "HEAD"]);
        gd(home, dst, &["symbolic-ref", "HEAD", &head]);
        let commits: Vec<String> = gd(
            home,
            src,
            &["rev-list", "--reverse", "--first-parent", "refs/heads/main"],
        )
        .lines()
        .map(str::to_owned)
        .collect();
        let fetch = |refspec: &str| {
            run(git(home)
                .args([
                    "-c",
                    "gc.auto=0",
                    "-c",
                    "maintenance.auto=false",
                    "-c",
                    "fetch.unpackLimit=1",
                    "-c",
                    "fetch.writeCommitGraph=false",
                    "-c",
                    "uploadpack.allowAnySHA1InWant=true",
                    "--git-dir",
                ])
                .arg(dst)
                .args(["fetch", "-q", "--no-tags", "--no-write-fetch-head"])
                .arg(src)
                .arg(refspec));
        };
        let n = commits.len();
        let steps = fetches.clamp(1, n.max(1));
        for k in 1..=steps {
            let oid = &commits[(k * n).div_ceil(steps) - 1];
            fetch(&format!("+{oid}:refs/heads/main"));
        }
        fetch("+refs/*:refs/*");
    }

    /// Generate (or load the cached) datasets; returns their storage directory and the repos
    /// in the order medium, big16, big64, refs10k, refs100k, pushes100. The unmaintained copy
    /// of medium is in [`naive_root`].
    pub fn datasets(cache: &Path, log: &dyn Fn(&str)) -> (PathBuf, Vec<Repo>) {
        let dir = cache.join(DATA_VERSION);
        // Datasets of other versions are obsolete.
        if let Ok(rd) = std::fs::read_dir(cache) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('v') && name != DATA_VERSION {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let manifest = dir.join("manifest.txt");
        if !manifest.exists() {
            let tmp = cache.join(format!("{DATA_VERSION}.tmp"));
            let _ = std::fs::remove_dir_all(&tmp);
            std::fs::create_dir_all(tmp.join("storage")).unwrap();
            let home = tmp.join("home");
            std::fs::create_dir_all(&home).unwrap();
            let storage = tmp.join("storage");
            let mut lines = String::new();
            type Populate = Box<dyn FnOnce(&Path, &dyn Fn(&[&str]) -> String)>;
            let specs: Vec<(&str, Populate)> = vec![
                ("medium", Box::new(populate_medium)),
                (
                    "big16",
                    Box::new(|w: &Path, g: &dyn Fn(&[&str]) -> String| populate_blob(w, g, 16, 16)),
                ),
                (
                    "big64",
                    Box::new(|w: &Path, g: &dyn Fn(&[&str]) -> String| populate_blob(w, g, 64, 64)),
                ),
                ("refs10k", Box::new(populate_small)),
                ("refs100k", Box::new(populate_small)),
                ("pushes100", Box::new(populate_medium)),
            ];
            for (name, populate) in specs {
                let t = Instant::now();
                log(&format!("generating dataset {name} ..."));
                let (rid, path) = synthetic_repo(&storage, name, populate);
                let head = gd(&home, &path, &["rev-parse", "refs/heads/main"]);
                match name {
                    "refs10k" => add_tags(&home, &path, TAGS),
                    "refs100k" => add_tags(&home, &path, TAGS_100K),
                    _ => {}
                }
                if name == "pushes100" {
                    // As 100 replicated pushes leave it in seedd's storage: 100 packs, loose
                    // refs (maintenance is what the bench measures on it).
                    let pushed = path.with_extension("pushed");
                    naive_copy(&home, &path, &pushed, PUSHES);
                    std::fs::remove_dir_all(&path).unwrap();
                    std::fs::rename(&pushed, &path).unwrap();
                } else {
                    tune(&home, &path);
                }
                if name == "medium" {
                    let naive = tmp.join("naive").join(rid.trim_start_matches("rad:"));
                    std::fs::create_dir_all(naive.parent().unwrap()).unwrap();
                    naive_copy(&home, &path, &naive, NAIVE_FETCHES);
                    log(&format!(
                        "  medium, naive copy: {} packs, {:.1} MB packed",
                        pack_count(&naive),
                        pack_bytes(&naive) as f64 / 1e6
                    ));
                }
                log(&format!(
                    "  {name}: {rid}, {:.1} MB packed, {:.1}s",
                    pack_bytes(&path) as f64 / 1e6,
                    t.elapsed().as_secs_f64()
                ));
                let _ = writeln!(lines, "{name} {} {head}", rid.trim_start_matches("rad:"));
            }
            std::fs::write(tmp.join("manifest.txt"), lines).unwrap();
            let _ = std::fs::remove_dir_all(&home);
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::rename(&tmp, &dir).unwrap();
        }
        let storage = dir.join("storage");
        let repos = std::fs::read_to_string(&manifest)
            .unwrap()
            .lines()
            .map(|l| {
                let mut f = l.split_whitespace();
                let (name, canonical, head) =
                    (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
                Repo {
                    name: name.to_owned(),
                    canonical: canonical.to_owned(),
                    head: head.to_owned(),
                    path: storage.join(canonical),
                }
            })
            .collect();
        (storage, repos)
    }
}

// ------------------------------------------------------------------------------------------
// The benchmark
// ------------------------------------------------------------------------------------------

mod bench {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use seedd_benches::measure::{self, abba, Interval, Scope, Summary};
    use serde_json::{json, Value};

    use super::data::Repo;
    use super::*;

    const MIB: f64 = 1024.0 * 1024.0;

    /// One server under test, running in its own scope (pinned to the server cores): a seedd,
    /// or a CGI bridge with its `git http-backend`s.
    struct Server {
        label: &'static str,
        scope: Arc<Scope>,
        pid: u32,
        addr: SocketAddr,
        /// URL path suffix after the canonical RID: seedd takes `<rid>.git`, git http-backend
        /// the directory name under GIT_PROJECT_ROOT.
        suffix: &'static str,
        seed: Option<Seed>,
        bridge: Option<Child>,
    }

    impl Server {
        fn path(&self, repo: &Repo) -> String {
            format!("/{}{}", repo.canonical, self.suffix)
        }
        fn url(&self, repo: &Repo) -> String {
            format!("http://{}{}", self.addr, self.path(repo))
        }
        fn seed(&self) -> &Seed {
            self.seed.as_ref().expect("a seedd")
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            if let Some(mut b) = self.bridge.take() {
                let _ = b.kill();
                let _ = b.wait();
            }
            if let Some(s) = self.seed.take() {
                let _ = s.stop();
            }
            self.scope.kill_all();
        }
    }

    /// What one measured batch of requests gave.
    struct Batch {
        ok: usize,
        errors: Vec<String>,
        bytes: u64,
        iv: Interval,
    }

    impl Batch {
        fn wall(&self) -> f64 {
            self.iv.wall.as_secs_f64()
        }
        fn cpu(&self) -> f64 {
            self.iv.cpu_secs()
        }
        /// Aggregate MB/s of body received.
        fn throughput(&self) -> f64 {
            self.bytes as f64 / 1e6 / self.wall().max(1e-9)
        }
        /// Server CPU seconds per GB served (NaN when nothing was served).
        fn cpu_per_gb(&self) -> f64 {
            if self.bytes == 0 {
                f64::NAN
            } else {
                self.cpu() / (self.bytes as f64 / 1e9)
            }
        }
        fn memory_peak_mib(&self) -> f64 {
            self.iv.memory_peak.map_or(f64::NAN, |b| b as f64 / MIB)
        }
        fn pss_mib(&self) -> f64 {
            self.iv.pss_peak_kib as f64 / 1024.0
        }
        fn rss_mib(&self) -> f64 {
            self.iv.rss_peak_kib as f64 / 1024.0
        }
    }

    /// One full `git clone --bare` measured.
    #[derive(Clone, Copy)]
    struct FullClone {
        iv: Interval,
        bytes: u64,
        /// PSS of the server process alone (not its children), KiB: at the start, and peak.
        proc_pss_before: u64,
        proc_pss_peak: u64,
    }

    /// One fetch at a time on one server, over the rounds.
    #[derive(Default)]
    struct Singles {
        cpu: Vec<f64>,
        wall: Vec<f64>,
        bytes: Vec<u64>,
        errors: Vec<String>,
        /// Mean (server process itself, rest of the scope) CPU, seconds.
        split: (f64, f64),
    }

    /// Samples one process's PSS every 20 ms: (first sample, peak), KiB. The library's sampler
    /// covers a whole scope; the "seedd RSS flat" floor is about the seedd process alone (its
    /// `git upload-pack` children map the pack, and grow with it by design).
    struct ProcPss {
        stop: Arc<AtomicBool>,
        handle: std::thread::JoinHandle<(u64, u64)>,
    }

    impl ProcPss {
        fn start(pid: u32) -> ProcPss {
            let stop = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&stop);
            let handle = std::thread::spawn(move || {
                let first = measure::pss_kib(pid);
                let mut peak = first;
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                    peak = peak.max(measure::pss_kib(pid));
                }
                (first, peak)
            });
            ProcPss { stop, handle }
        }

        fn finish(self) -> (u64, u64) {
            self.stop.store(true, Ordering::Relaxed);
            self.handle.join().unwrap_or_default()
        }
    }

    /// Wait (at most 5 s) until `scope` holds the server process alone: the git processes of
    /// the last request have exited, so their CPU is not counted in the next interval.
    fn settle(scope: &Scope) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while scope.pids().len() > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A figure for both servers: median [min–max] over the rounds.
    struct Row {
        key: String,
        workload: String,
        metric: String,
        unit: &'static str,
        seedd: Option<Summary>,
        git: Option<Summary>,
        /// "lower" or "higher" is better; "" for informational rows.
        better: &'static str,
    }

    fn row(
        key: impl Into<String>,
        workload: impl Into<String>,
        metric: &str,
        unit: &'static str,
        seedd: Option<Summary>,
        git: Option<Summary>,
        better: &'static str,
    ) -> Row {
        Row {
            key: key.into(),
            workload: workload.into(),
            metric: metric.into(),
            unit,
            seedd,
            git,
            better,
        }
    }

    impl Row {
        /// Ratio of the medians.
        fn ratio(&self) -> Option<f64> {
            match (self.seedd, self.git) {
                (Some(s), Some(g)) if g.median > 0.0 => Some(s.median / g.median),
                _ => None,
            }
        }
    }

    /// Summary of `f` over `items`.
    fn summary<T>(items: &[T], f: impl Fn(&T) -> f64) -> Option<Summary> {
        Summary::of(&items.iter().map(f).collect::<Vec<_>>())
    }

    /// A single derived figure (a ratio of medians) as a summary of one value.
    fn one(v: f64) -> Option<Summary> {
        Summary::of(&[v])
    }

    /// The median, NaN without one.
    fn med(s: &Option<Summary>) -> f64 {
        s.map_or(f64::NAN, |s| s.median)
    }

    /// "median [min–max]", or the one value.
    fn show(s: &Option<Summary>) -> String {
        match s {
            None => "n/a".into(),
            Some(s) if s.n == 1 || s.min == s.max => fmt(Some(s.median)),
            Some(s) => s.to_string(),
        }
    }

    fn sjson(s: &Option<Summary>) -> Value {
        s.map_or(Value::Null, |s| s.to_json())
    }

    fn opt(v: f64) -> Value {
        if v.is_finite() {
            json!(v)
        } else {
            Value::Null
        }
    }

    /// One server's figures on medium for the layouts comparison.
    struct Layout {
        label: &'static str,
        layout: String,
        cpu1: Option<Summary>,
        wall1: Option<Summary>,
        bytes1: u64,
        thr16: Option<Summary>,
        wall16: Option<Summary>,
        cpu16: Option<Summary>,
        bytes16: u64,
        fails16: usize,
        /// Server CPU split (the server process, the rest of its scope), mean seconds: one
        /// fetch, 16.
        split1: (f64, f64),
        split16: (f64, f64),
    }

    struct Ctx {
        /// The last [`Ctx::measured`] server CPU split: (the server process itself by its
        /// /proc ticks, the rest of its scope), seconds.
        last_split: Cell<(f64, f64)>,
        started: Instant,
        tck: f64,
        home: PathBuf,
        scratch: PathBuf,
        seedd_bin: PathBuf,
        starts: Cell<usize>,
        /// The repositories, data dirs and caches of every server: evicted before a cold row.
        evict_paths: Vec<PathBuf>,
    }

    impl Ctx {
        fn log(&self, msg: &str) {
            eprintln!("[{:6.1}s] {msg}", self.started.elapsed().as_secs_f64());
        }

        fn new_scope(&self, label: &str) -> (Arc<Scope>, usize) {
            let n = self.starts.get();
            self.starts.set(n + 1);
            let name: String = label
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            (Arc::new(Scope::new(&format!("clone-{name}-{n}"))), n)
        }

        /// The release seedd on `data_dir` with `env`, in a new scope; `rescan` on the first
        /// start of a data dir (later starts keep their index, and their caches start empty).
        fn start_seedd(
            &self,
            label: &'static str,
            data_dir: &Path,
            env: &[(String, String)],
            rescan: bool,
        ) -> Server {
            let (scope, n) = self.new_scope(label);
            let bin_dir = scope.wrapper_dir(
                &self.seedd_bin,
                &self.scratch.join(format!("bin-{n}")),
                &["seedctl"],
            );
            let seed = measure::with_test_bin_dir(&bin_dir, || {
                Seed::start(SeedOptions {
                    data_dir: Some(data_dir.to_owned()),
                    env: env.to_vec(),
                    ..SeedOptions::default()
                })
            });
            scope.started(seed.child.id());
            if rescan {
                seed.rescan();
            }
            Server {
                label,
                scope,
                pid: seed.child.id(),
                addr: seed.http,
                suffix: ".git",
                seed: Some(seed),
                bridge: None,
            }
        }

        /// The CGI bridge (this binary, `--cgi-server <root> 0`) in a new scope: it and every
        /// `git http-backend` and git it starts.
        fn start_bridge(&self, label: &'static str, root: &Path) -> Server {
            let (scope, _) = self.new_scope(label);
            let mut cmd = scope.command(std::env::current_exe().unwrap());
            cmd.arg("--cgi-server").arg(root).arg("0");
            let (child, addr) = cgi::spawn(cmd, &scope);
            Server {
                label,
                scope,
                pid: child.id(),
                addr,
                suffix: "",
                seed: None,
                bridge: Some(child),
            }
        }

        /// Evict every server's repositories, data dir and caches from the page cache.
        fn evict_all(&self) -> measure::Evicted {
            let paths: Vec<&Path> = self.evict_paths.iter().map(PathBuf::as_path).collect();
            measure::evict(&paths)
        }

        /// Run `f` and measure `s`'s scope around it (CPU from the cgroup, memory peak, PSS and
        /// Σ RSS sampled), from and to a scope with the server process alone; the wall time is
        /// `f`'s.
        fn measured<T>(&self, s: &Server, f: impl FnOnce() -> T) -> (T, Interval) {
            settle(&s.scope);
            let own0 = procfs::own_ticks(s.pid);
            let ((r, wall), mut iv) = measure::measure(&s.scope, || {
                let t0 = Instant::now();
                let r = f();
                let wall = t0.elapsed();
                settle(&s.scope);
                (r, wall)
            });
            iv.wall = wall;
            let own = procfs::own_ticks(s.pid).saturating_sub(own0) as f64 / self.tck;
            let total = iv.cpu_secs();
            self.last_split
                .set((own.min(total), (total - own).max(0.0)));
            (r, iv)
        }

        /// `git clone --bare` over protocol v2; returns the bytes of pack received.
        fn clone(&self, url: &str, dest: &Path) -> Result<u64, String> {
            let out = git(&self.home)
                .args(["-c", "protocol.version=2", "clone", "--bare", "-q", url])
                .arg(dest)
                .output()
                .map_err(|e| e.to_string())?;
            let bytes = data::pack_bytes(dest);
            let _ = std::fs::remove_dir_all(dest);
            if out.status.success() {
                Ok(bytes)
            } else {
                Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
            }
        }

        /// One measured full clone of `repo` from `s`, with the server process's PSS.
        fn full_clone(&self, s: &Server, repo: &Repo) -> Result<FullClone, String> {
            let dest = self
                .scratch
                .join(format!("clone-{}-{}", s.label, repo.name));
            let pss = ProcPss::start(s.pid);
            let (res, iv) = self.measured(s, || self.clone(&s.url(repo), &dest));
            let (proc_pss_before, proc_pss_peak) = pss.finish();
            res.map(|bytes| FullClone {
                iv,
                bytes,
                proc_pss_before,
                proc_pss_peak,
            })
        }

        /// `n` identical `git clone`s at once.
        fn concurrent(&self, server: &Server, repo: &Repo, n: usize) -> Batch {
            let url = server.url(repo);
            let ((ok, errors, bytes), iv) = self.measured(server, || {
                let children: Vec<(PathBuf, Child)> = (0..n)
                    .map(|i| {
                        let dest = self.scratch.join(format!("cc-{}-{i}", server.label));
                        let child = git(&self.home)
                            .args(["-c", "protocol.version=2", "clone", "--bare", "-q", &url])
                            .arg(&dest)
                            .stdout(Stdio::null())
                            .stderr(Stdio::piped())
                            .spawn()
                            .unwrap();
                        (dest, child)
                    })
                    .collect();
                let mut ok = 0;
                let mut errors = Vec::new();
                let mut bytes = 0;
                for (dest, child) in children {
                    let out = child.wait_with_output().unwrap();
                    if out.status.success() {
                        ok += 1;
                        bytes += data::pack_bytes(&dest);
                    } else {
                        errors.push(String::from_utf8_lossy(&out.stderr).trim().to_owned());
                    }
                }
                (ok, errors, bytes)
            });
            for i in 0..n {
                let _ =
                    std::fs::remove_dir_all(self.scratch.join(format!("cc-{}-{i}", server.label)));
            }
            Batch {
                ok,
                errors,
                bytes,
                iv,
            }
        }

        /// `n` identical raw requests at once, each on its own connection, the response only
        /// counted.
        fn concurrent_raw(&self, server: &Server, request: &[u8], n: usize) -> Batch {
            let (results, iv) = self.measured(server, || {
                std::thread::scope(|s| {
                    let handles: Vec<_> = (0..n)
                        .map(|_| s.spawn(|| client::Client::new(server.addr).exchange(request)))
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().unwrap())
                        .collect::<Vec<_>>()
                })
            });
            let mut ok = 0;
            let mut errors = Vec::new();
            let mut bytes = 0;
            for r in results {
                match r {
                    Ok((200, b)) => {
                        ok += 1;
                        bytes += b;
                    }
                    Ok((status, _)) => errors.push(format!("HTTP {status}")),
                    Err(e) => errors.push(e.to_string()),
                }
            }
            Batch {
                ok,
                errors,
                bytes,
                iv,
            }
        }

        /// One request at a time on each of `servers`: an untimed warm-up each, then `rounds`
        /// timed requests per server, the servers in ABBA order.
        fn singles(
            &self,
            servers: &[&Server],
            request: &dyn Fn(&Server) -> Vec<u8>,
            rounds: usize,
        ) -> Vec<Singles> {
            let mut out: Vec<Singles> = servers.iter().map(|_| Singles::default()).collect();
            for s in servers {
                let _ = self.concurrent_raw(s, &request(s), 1);
            }
            for round in 0..rounds {
                for i in abba(round, servers.len()) {
                    let s = servers[i];
                    let b = self.concurrent_raw(s, &request(s), 1);
                    let (own, rest) = self.last_split.get();
                    let o = &mut out[i];
                    o.cpu.push(b.cpu());
                    o.wall.push(b.wall());
                    o.bytes.push(b.bytes);
                    o.errors.extend(b.errors);
                    o.split = (o.split.0 + own, o.split.1 + rest);
                }
            }
            for o in &mut out {
                let n = o.cpu.len().max(1) as f64;
                o.split = (o.split.0 / n, o.split.1 / n);
            }
            out
        }

        /// Hammer one request over `conns` keep-alive connections for `secs`:
        /// (requests answered 200, errors, body bytes of the last answer, interval).
        fn rate(
            &self,
            server: &Server,
            request: &[u8],
            conns: usize,
            secs: f64,
        ) -> (u64, u64, u64, Interval) {
            let deadline = Duration::from_secs_f64(secs);
            let ((ok, errors, body), iv) = self.measured(server, || {
                let start = Instant::now();
                let results: Vec<(u64, u64, u64)> = std::thread::scope(|s| {
                    let handles: Vec<_> = (0..conns)
                        .map(|_| {
                            s.spawn(|| {
                                let mut c = client::Client::new(server.addr);
                                let (mut ok, mut errors, mut body) = (0u64, 0u64, 0u64);
                                while start.elapsed() < deadline && errors < 1000 {
                                    match c.exchange(request) {
                                        Ok((200, n)) => {
                                            ok += 1;
                                            body = n;
                                        }
                                        _ => errors += 1,
                                    }
                                }
                                (ok, errors, body)
                            })
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap()).collect()
                });
                let ok = results.iter().map(|r| r.0).sum();
                let errors = results.iter().map(|r| r.1).sum();
                let body = results.iter().map(|r| r.2).max().unwrap_or(0);
                (ok, errors, body)
            });
            (ok, errors, body, iv)
        }
    }

    /// A v2 `fetch` of `wants` (no haves) as a complete HTTP/1.1 request.
    fn fetch_request(server: &Server, repo: &Repo, wants: &[&str]) -> Vec<u8> {
        fetch_request_with(server, repo, wants, true)
    }

    /// [`fetch_request`], with or without `thin-pack`. Without haves the pack is the same
    /// either way, but the pack cache keys them apart: a second, still cold, request.
    fn fetch_request_with(server: &Server, repo: &Repo, wants: &[&str], thin: bool) -> Vec<u8> {
        let mut body = String::new();
        body.push_str(&pkt("command=fetch\n"));
        body.push_str(&pkt("agent=seedd-bench\n"));
        body.push_str(&pkt("object-format=sha1\n"));
        body.push_str("0001");
        if thin {
            body.push_str(&pkt("thin-pack\n"));
        }
        body.push_str(&pkt("ofs-delta\n"));
        body.push_str(&pkt("no-progress\n"));
        for w in wants {
            body.push_str(&pkt(&format!("want {w}\n")));
        }
        body.push_str(&pkt("done\n"));
        body.push_str("0000");
        format!(
            "POST {}/git-upload-pack HTTP/1.1\r\nHost: {}\r\nUser-Agent: git/2.47\r\nGit-Protocol: version=2\r\nContent-Type: application/x-git-upload-pack-request\r\nAccept: application/x-git-upload-pack-result\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            server.path(repo),
            server.addr,
            body.len()
        )
        .into_bytes()
    }

    /// What a perf recording watches.
    enum PerfOf {
        /// One process (its threads, and the children it starts meanwhile).
        Pid(u32),
        /// The server cores, system-wide (every process on them, the kernel work charged
        /// there included; all cores when not pinned).
        ServerCpus,
    }

    /// SEEDD_BENCH_PERF=1: a `perf record -g` of `what` into `out` until [`perf_stop`].
    fn perf_record(
        what: PerfOf,
        out: &Path,
        notes: &mut Vec<String>,
    ) -> Option<std::process::Child> {
        if std::env::var("SEEDD_BENCH_PERF").as_deref() != Ok("1") {
            return None;
        }
        let mut cmd = Command::new("perf");
        cmd.args(["record", "-q", "-F", "999", "-g"]);
        match what {
            PerfOf::Pid(pid) => {
                cmd.arg("-p").arg(pid.to_string());
            }
            PerfOf::ServerCpus => {
                cmd.arg("-a");
                if let Some(cpus) = &Pinning::get().server {
                    cmd.arg("-C").arg(cpus);
                }
            }
        }
        let child = cmd
            .arg("-o")
            .arg(out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| notes.push(format!("perf record: {e}")))
            .ok()?;
        std::thread::sleep(Duration::from_millis(500));
        Some(child)
    }

    fn perf_stop(perf: Option<std::process::Child>) {
        if let Some(mut p) = perf {
            let _ = Command::new("kill")
                .arg("-INT")
                .arg(p.id().to_string())
                .status();
            let _ = p.wait();
        }
    }

    /// A figure for the table (whole numbers below 1000 with decimals too).
    fn fmt(v: Option<f64>) -> String {
        fmt_figure(v, false)
    }

    /// Every repository is served by every one of `servers`, else exit.
    fn check_served(servers: &[&Server], repos: &[&Repo]) {
        for s in servers {
            for r in repos {
                let req = format!(
                    "GET {}/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                    s.path(r),
                    s.addr
                );
                let got = client::Client::new(s.addr).exchange(req.as_bytes());
                if !matches!(got, Ok((200, _))) {
                    eprintln!(
                        "{} does not serve {} ({}): {got:?}",
                        s.label,
                        r.name,
                        s.url(r)
                    );
                    if let Some(seed) = &s.seed {
                        eprintln!("seedd log:\n{}", seed.logs());
                    }
                    std::process::exit(1);
                }
            }
        }
    }

    pub fn all() {
        let started = Instant::now();
        let log = |m: &str| eprintln!("[{:6.1}s] {m}", started.elapsed().as_secs_f64());
        let prov = measure::provenance("clone");
        let profile = profile_dir();
        let target = profile.parent().unwrap().to_owned();
        let cache = target.join("seedd-bench-data");
        std::fs::create_dir_all(&cache).unwrap();
        // Stale scratch dirs from interrupted runs.
        if let Ok(rd) = std::fs::read_dir(&cache) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with("run-") {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let rounds = seedd_benches::env_usize("SEEDD_BENCH_ROUNDS", ROUNDS).max(1);
        if rounds < ROUNDS {
            measure::record_override(&format!(
                "SEEDD_BENCH_ROUNDS={rounds} (default {ROUNDS}; the rules ask for ≥ 5 rounds)"
            ));
        }
        let scratch = cache.join(format!("run-{}", std::process::id()));
        let home = scratch.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let (data_storage, repos) = data::datasets(&cache, &log);
        assert_eq!(repos.len(), 6, "unexpected dataset manifest");
        let seedd_bin = ensure_seedd(&log, &profile);

        // One data dir, the same bare repositories served by both.
        let data_dir = scratch.join("data");
        std::fs::create_dir_all(&data_dir).unwrap();
        seedd_tests::run(
            Command::new("cp")
                .arg("-a")
                .arg(&data_storage)
                .arg(data_dir.join("storage")),
        );
        let storage = data_dir.join("storage");
        // The git.git-sized dataset, hard-linked into both seeds' storage (served only, never
        // rewritten there: maintenance is off for the main seed, and a repack writes new files).
        let big = (std::env::var("SEEDD_BENCH_BIG").as_deref() == Ok("1")).then(|| {
            let (_, big) = data::big(&cache, &log);
            seedd_tests::run(
                Command::new("cp")
                    .arg("-al")
                    .arg(&big.path)
                    .arg(storage.join(&big.canonical)),
            );
            Repo {
                path: storage.join(&big.canonical),
                ..big
            }
        });
        let repos: Vec<Repo> = repos
            .iter()
            .map(|r| Repo {
                name: r.name.clone(),
                canonical: r.canonical.clone(),
                head: r.head.clone(),
                path: storage.join(&r.canonical),
            })
            .collect();
        let [medium, big16, big64, refs10k, refs100k, pushes100] = &repos[..] else {
            unreachable!()
        };
        // The pack-caching seedd's own copy.
        let cached_dir = scratch.join("data-cached");
        std::fs::create_dir_all(&cached_dir).unwrap();
        seedd_tests::run(
            Command::new("cp")
                .arg("-a")
                .arg(&data_storage)
                .arg(cached_dir.join("storage")),
        );
        if let Some(big) = &big {
            seedd_tests::run(
                Command::new("cp")
                    .arg("-al")
                    .arg(&big.path)
                    .arg(cached_dir.join("storage").join(&big.canonical)),
            );
        }
        let naive_root = data::naive_root(&cache);
        let fresh_root = scratch.join("fresh");
        let ctx = Ctx {
            last_split: Cell::new((0.0, 0.0)),
            started,
            tck: procfs::clk_tck(),
            home,
            scratch: scratch.clone(),
            seedd_bin: seedd_bin.clone(),
            starts: Cell::new(0),
            evict_paths: vec![
                data_dir.clone(),
                cached_dir.clone(),
                naive_root.clone(),
                fresh_root.clone(),
            ],
        };

        let seed_env: Vec<(String, String)> = vec![
            // The production default level; the harness default is debug.
            ("RUST_LOG".into(), "info".into()),
            // 16 clones queue for the (default, = CPUs) pack slots: let them wait.
            ("SEEDD_HTTP__PACK_QUEUE_TIMEOUT_MS".into(), "600000".into()),
            ("SEEDD_HTTP__PACK_QUEUE".into(), "64".into()),
            // The side-by-side compares serving, not admission: no per-IP or per-repository
            // limits (git http-backend has none).
            (
                "SEEDD_HTTP__RATE__PER_IP_REQUESTS_PER_SECOND".into(),
                "0".into(),
            ),
            (
                "SEEDD_HTTP__RATE__PER_REPO_CONCURRENT_PACKS".into(),
                "0".into(),
            ),
            ("SEEDD_HTTP__RATE__SHED_NEW_CLONES".into(), "false".into()),
        ];
        // The side-by-side rows measure serving by git: no pack cache (repeated identical
        // clones would be answered from it); pushes100 stays as pushed until the bench asks
        // for its maintenance (the admin API runs it either way). The cached rows have their
        // own seed.
        let main_env: Vec<(String, String)> = seed_env
            .iter()
            .cloned()
            .chain([
                ("SEEDD_HTTP__PACK_CACHE__ENABLED".into(), "false".into()),
                ("SEEDD_MAINTENANCE__ENABLED".into(), "false".into()),
            ])
            .collect();
        let cache_env: Vec<(String, String)> = seed_env
            .iter()
            .cloned()
            .chain([("SEEDD_HTTP__PACK_CACHE__ADMISSION".into(), "first".into())])
            .collect();
        for d in [
            "seedd (all): http.pack_queue_timeout_ms = 600000, http.pack_queue = 64 (16 clones wait for a pack slot instead of a 503)",
            "seedd (all): http.rate.per_ip_requests_per_second = 0, per_repo_concurrent_packs = 0, shed_new_clones = false (serving, not admission; git http-backend has none)",
            "seedd (all): RUST_LOG=info (the production level; the test harness's default is debug)",
            "seedd (side by side, layouts 'seedd', memory 'seedd'): http.pack_cache.enabled = false, maintenance.enabled = false",
            "seedd+cache: http.pack_cache.admission = first",
            "git: git http-backend behind the bench's HTTP/1.1 CGI bridge (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null)",
        ] {
            measure::record_config_diff(d);
        }

        // First start of each seedd data dir: rescan, and check both servers serve everything.
        let all_repos: Vec<&Repo> = repos.iter().chain(big.iter()).collect();
        {
            log(&format!(
                "first start of seedd ({}) and the git bridge: rescan, check",
                seedd_bin.display()
            ));
            let s0 = ctx.start_seedd("seedd", &data_dir, &main_env, true);
            let s1 = ctx.start_bridge("git", &storage);
            log(&format!(
                "seedd pid {} at {}, git http-backend bridge pid {} at {}",
                s0.pid, s0.addr, s1.pid, s1.addr
            ));
            check_served(&[&s0, &s1], &all_repos);
            drop(s1);
            drop(s0);
            let c = ctx.start_seedd("seedd+cache", &cached_dir, &cache_env, true);
            check_served(&[&c], &[medium]);
            drop(c);
        }

        let mut rows: Vec<Row> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        let mut evicted = measure::Evicted::default();

        // Full clones, cold (fresh servers, every server's files evicted) then warm (the next
        // clone from the same server), servers in ABBA order.
        let full_repos: [&Repo; 3] = [big16, big64, medium];
        // full[repo][server: seedd, git][cold, warm]
        let mut full: Vec<[[Vec<FullClone>; 2]; 2]> = (0..3).map(|_| Default::default()).collect();
        for round in 0..rounds {
            for (ri, repo) in full_repos.iter().enumerate() {
                for si in abba(round, 2) {
                    let s = if si == 0 {
                        ctx.start_seedd("seedd", &data_dir, &main_env, false)
                    } else {
                        ctx.start_bridge("git", &storage)
                    };
                    evicted = ctx.evict_all();
                    for (vi, variant) in ["cold", "warm"].into_iter().enumerate() {
                        ctx.log(&format!(
                            "round {}/{rounds}: full clone {} from {}, {variant}",
                            round + 1,
                            repo.name,
                            s.label
                        ));
                        match ctx.full_clone(&s, repo) {
                            Ok(c) => full[ri][si][vi].push(c),
                            Err(e) => notes.push(format!(
                                "{variant} clone of {} from {} failed: {e}",
                                repo.name, s.label
                            )),
                        }
                    }
                    drop(s);
                }
            }
        }
        for (ri, repo) in full_repos.iter().enumerate() {
            for (vi, variant) in ["cold", "warm"].into_iter().enumerate() {
                let w = if vi == 0 {
                    format!("full clone {} (v2), cold", repo.name)
                } else {
                    format!("full clone {} (v2), warm", repo.name)
                };
                let s = |si: usize, f: &dyn Fn(&FullClone) -> f64| summary(&full[ri][si][vi], f);
                let k = |m: &str| format!("clone_{}_{variant}_{m}", repo.name);
                rows.push(row(
                    k("cpu_s"),
                    w.clone(),
                    "server CPU",
                    "s",
                    s(0, &|c| c.iv.cpu_secs()),
                    s(1, &|c| c.iv.cpu_secs()),
                    "lower",
                ));
                rows.push(row(
                    k("wall_s"),
                    w.clone(),
                    "wall time",
                    "s",
                    s(0, &|c| c.iv.wall.as_secs_f64()),
                    s(1, &|c| c.iv.wall.as_secs_f64()),
                    "lower",
                ));
                rows.push(row(
                    k("pack_mb"),
                    w.clone(),
                    "pack received",
                    "MB",
                    s(0, &|c| c.bytes as f64 / 1e6),
                    s(1, &|c| c.bytes as f64 / 1e6),
                    "",
                ));
                if vi == 0 {
                    let peak =
                        |c: &FullClone| c.iv.memory_peak.map_or(f64::NAN, |b| b as f64 / MIB);
                    rows.push(row(
                        k("memory_peak_mib"),
                        w.clone(),
                        "memory.peak (cgroup)",
                        "MiB",
                        s(0, &peak),
                        s(1, &peak),
                        "lower",
                    ));
                    rows.push(row(
                        k("pss_peak_mib"),
                        w.clone(),
                        "PSS peak (scope)",
                        "MiB",
                        s(0, &|c| c.iv.pss_peak_kib as f64 / 1024.0),
                        s(1, &|c| c.iv.pss_peak_kib as f64 / 1024.0),
                        "lower",
                    ));
                    rows.push(row(
                        k("rss_sum_peak_mib"),
                        w,
                        "Σ VmRSS peak (secondary)",
                        "MiB",
                        s(0, &|c| c.iv.rss_peak_kib as f64 / 1024.0),
                        s(1, &|c| c.iv.rss_peak_kib as f64 / 1024.0),
                        "",
                    ));
                }
            }
        }
        // seedd's own process (not its git children) through the cold big-blob clones.
        let proc_pss = |ri: usize| {
            (
                summary(&full[ri][0][0], |c| c.proc_pss_before as f64 / 1024.0),
                summary(&full[ri][0][0], |c| c.proc_pss_peak as f64 / 1024.0),
                summary(&full[ri][0][0], |c| {
                    c.proc_pss_peak.saturating_sub(c.proc_pss_before) as f64 / 1024.0
                }),
            )
        };
        for (ri, repo) in full_repos.iter().enumerate().take(2) {
            let (_, peak, growth) = proc_pss(ri);
            let w = format!("seedd process PSS, cold clone of {}", repo.name);
            rows.push(row(
                format!("seedd_process_pss_{}_mib", repo.name),
                w.clone(),
                "PSS peak, seedd alone",
                "MiB",
                peak,
                None,
                "",
            ));
            rows.push(row(
                format!("seedd_process_pss_{}_growth_mib", repo.name),
                w,
                "peak − before",
                "MiB",
                growth,
                None,
                "",
            ));
        }

        // The long-running servers of the warm rows, each in its own scope.
        let s0 = ctx.start_seedd("seedd", &data_dir, &main_env, false);
        let s1 = ctx.start_bridge("git", &storage);
        let pss_at_start = measure::pss_kib(s0.pid);
        ctx.log(&format!(
            "seedd pid {} at {}, git http-backend bridge pid {} at {}",
            s0.pid, s0.addr, s1.pid, s1.addr
        ));

        // Idle CPU (background work of the server itself).
        let mut idle = [Vec::new(), Vec::new()];
        for round in 0..rounds {
            for si in abba(round, 2) {
                let s = [&s0, &s1][si];
                let ((), iv) = ctx.measured(s, || std::thread::sleep(Duration::from_secs(1)));
                idle[si].push(iv.cpu_secs() * 1000.0 / iv.wall.as_secs_f64().max(1e-9));
            }
        }
        rows.insert(
            0,
            row(
                "idle_cpu_ms_per_s",
                "idle, 1 s",
                "server CPU",
                "ms",
                Summary::of(&idle[0]),
                Summary::of(&idle[1]),
                "lower",
            ),
        );

        // 16 concurrent identical clones: real `git clone`s (client-bound on a small box: 16
        // index-packs share the load cores), then raw v2 fetches whose client only counts the
        // bytes (server-bound).
        let rad_id = stdout(&run(git(&ctx.home)
            .arg("--git-dir")
            .arg(&medium.path)
            .args(["rev-parse", "refs/rad/id"])));
        // git's raw fetches, for the cached rows below.
        let mut git_raw: Vec<Batch> = Vec::new();
        for variant in ["clone", "raw"] {
            let mut b: [Vec<Batch>; 2] = Default::default();
            for round in 0..rounds {
                for si in abba(round, 2) {
                    let s = [&s0, &s1][si];
                    let batch = if variant == "clone" {
                        ctx.log(&format!(
                            "round {}/{rounds}: {CONCURRENT} concurrent git clones of medium from {}",
                            round + 1,
                            s.label
                        ));
                        ctx.concurrent(s, medium, CONCURRENT)
                    } else {
                        ctx.log(&format!(
                            "round {}/{rounds}: {CONCURRENT} concurrent raw v2 fetches of medium from {}",
                            round + 1,
                            s.label
                        ));
                        let req = fetch_request(s, medium, &[&medium.head, &rad_id]);
                        ctx.concurrent_raw(s, &req, CONCURRENT)
                    };
                    if let Some(e) = batch.errors.first() {
                        notes.push(format!(
                            "{} of {CONCURRENT} concurrent {variant} requests to {} failed (ok {}), first error: {e}",
                            batch.errors.len(),
                            s.label,
                            batch.ok
                        ));
                    }
                    b[si].push(batch);
                }
            }
            let w = if variant == "clone" {
                format!("{CONCURRENT} concurrent git clones, medium, warm")
            } else {
                format!("{CONCURRENT} concurrent raw v2 fetches, medium, warm")
            };
            let k = |m: &str| format!("concurrent_{variant}_{m}");
            let s = |si: usize, f: &dyn Fn(&Batch) -> f64| summary(&b[si], f);
            rows.push(row(
                k("throughput_mb_s"),
                w.clone(),
                "aggregate pack bytes/s",
                "MB/s",
                s(0, &Batch::throughput),
                s(1, &Batch::throughput),
                "higher",
            ));
            rows.push(row(
                k("wall_s"),
                w.clone(),
                "wall time",
                "s",
                s(0, &Batch::wall),
                s(1, &Batch::wall),
                "lower",
            ));
            rows.push(row(
                k("cpu_s"),
                w.clone(),
                "server CPU",
                "s",
                s(0, &Batch::cpu),
                s(1, &Batch::cpu),
                "lower",
            ));
            rows.push(row(
                k("cpu_s_per_gb"),
                w.clone(),
                "server CPU per GB served",
                "s/GB",
                s(0, &Batch::cpu_per_gb),
                s(1, &Batch::cpu_per_gb),
                "lower",
            ));
            rows.push(row(
                k("failed"),
                w,
                "failed",
                "",
                s(0, &|b| b.errors.len() as f64),
                s(1, &|b| b.errors.len() as f64),
                "",
            ));
            if variant == "raw" {
                git_raw = std::mem::take(&mut b[1]);
            }
        }
        let git_raw_thr = summary(&git_raw, Batch::throughput);
        let git_raw_wall = summary(&git_raw, Batch::wall);
        let git_raw_cpu = summary(&git_raw, Batch::cpu);
        let git_raw_fails = summary(&git_raw, |b| b.errors.len() as f64);

        // The same 16 raw fetches from a seedd with the pack cache (issue 13 §3; admission on
        // the first request), cold: restarted with its cache dir emptied each round (one git
        // run, 15 readers of its file); then the same 16 again, warm (every one a hit).
        let mut cached_cold: Vec<Batch> = Vec::new();
        let mut cached_warm: Vec<Batch> = Vec::new();
        let mut cached_split16 = (0.0, 0.0);
        let mut cache_server: Option<Server> = None;
        for round in 0..rounds {
            drop(cache_server.take());
            let _ = std::fs::remove_dir_all(cached_dir.join("cache"));
            let s = ctx.start_seedd("seedd+cache", &cached_dir, &cache_env, false);
            ctx.log(&format!(
                "round {}/{rounds}: {CONCURRENT} concurrent raw v2 fetches of medium from seedd with the pack cache, cold then warm",
                round + 1
            ));
            let req = fetch_request(&s, medium, &[&medium.head, &rad_id]);
            // SEEDD_BENCH_PERF=1: a `perf record -g` of the seedd process (its own threads, not
            // its git children) over the first round's cold and warm 16, into
            // <target>/seedd-bench-cache.perf.
            let perf = if round == 0 {
                perf_record(
                    PerfOf::Pid(s.pid),
                    &target.join("seedd-bench-cache.perf"),
                    &mut notes,
                )
            } else {
                None
            };
            let b = ctx.concurrent_raw(&s, &req, CONCURRENT);
            let (own, rest) = ctx.last_split.get();
            cached_split16 = (cached_split16.0 + own, cached_split16.1 + rest);
            if let Some(e) = b.errors.first() {
                notes.push(format!(
                    "{} of {CONCURRENT} concurrent raw fetches from seedd with the pack cache failed (ok {}), first error: {e}",
                    b.errors.len(),
                    b.ok
                ));
            }
            cached_cold.push(b);
            let b = ctx.concurrent_raw(&s, &req, CONCURRENT);
            if let Some(e) = b.errors.first() {
                notes.push(format!(
                    "{} of {CONCURRENT} warm cached raw fetches failed (ok {}), first error: {e}",
                    b.errors.len(),
                    b.ok
                ));
            }
            cached_warm.push(b);
            perf_stop(perf);
            cache_server = Some(s);
        }
        cached_split16 = (
            cached_split16.0 / rounds as f64,
            cached_split16.1 / rounds as f64,
        );
        {
            let w_label =
                format!("{CONCURRENT} concurrent raw v2 fetches, medium, pack cache cold");
            let k = |m: &str| format!("concurrent_raw_cached_{m}");
            rows.push(row(
                k("throughput_mb_s"),
                w_label.clone(),
                "aggregate pack bytes/s",
                "MB/s",
                summary(&cached_cold, Batch::throughput),
                git_raw_thr,
                "higher",
            ));
            rows.push(row(
                k("wall_s"),
                w_label.clone(),
                "wall time",
                "s",
                summary(&cached_cold, Batch::wall),
                git_raw_wall,
                "lower",
            ));
            rows.push(row(
                k("cpu_s"),
                w_label.clone(),
                "server CPU",
                "s",
                summary(&cached_cold, Batch::cpu),
                git_raw_cpu,
                "lower",
            ));
            rows.push(row(
                k("failed"),
                w_label,
                "failed",
                "",
                summary(&cached_cold, |b| b.errors.len() as f64),
                git_raw_fails,
                "",
            ));
            let w_label =
                format!("{CONCURRENT} concurrent raw v2 fetches, medium, pack cache warm");
            let k = |m: &str| format!("concurrent_raw_cached_warm_{m}");
            rows.push(row(
                k("throughput_mb_s"),
                w_label.clone(),
                "aggregate pack bytes/s",
                "MB/s",
                summary(&cached_warm, Batch::throughput),
                git_raw_thr,
                "higher",
            ));
            rows.push(row(
                k("cpu_s"),
                w_label,
                "server CPU",
                "s",
                summary(&cached_warm, Batch::cpu),
                git_raw_cpu,
                "lower",
            ));
        }
        let cache_s = cache_server.take().expect("at least one round");

        // Issue 13 §4, layouts: git http-backend on the layout seedd's fetches leave before
        // maintenance and on the tuned medium, seedd with the pack cache off and on.
        let naive = ctx.start_bridge("seedd before maintenance", &naive_root);
        let naive_packs = data::pack_count(&naive_root.join(&medium.canonical));
        let layout_servers: [(&Server, String); 4] = [
            (
                &naive,
                format!("unmaintained: {naive_packs} packs, loose refs, no bitmap/commit-graph; git http-backend"),
            ),
            (
                &s1,
                "G-tuned (repack -adb, commit-graph, packed refs)".into(),
            ),
            (&s0, "G-tuned, same files as git tuned".into()),
            (&cache_s, "G-tuned, same files, cache cold".into()),
        ];
        let cache_li = 3;
        // For the cache each round is a request it has not seen: no thin-pack, and one more
        // `want` of an ancestor of the head (`head~k`), so the same objects and the same pack
        // under another key.
        let ancestors: Vec<String> = (1..=rounds)
            .map(|k| {
                stdout(&run(git(&ctx.home)
                    .arg("--git-dir")
                    .arg(&medium.path)
                    .args(["rev-parse", &format!("{}~{k}", medium.head)])))
            })
            .collect();
        let mut singles1: Vec<Singles> =
            layout_servers.iter().map(|_| Singles::default()).collect();
        let mut sixteen: Vec<Vec<Batch>> = layout_servers.iter().map(|_| Vec::new()).collect();
        let mut split16_sum = [(0.0, 0.0); 4];
        // An untimed warm-up of the servers without a cache (the unmaintained one is fresh).
        for (s, _) in &layout_servers[..cache_li] {
            let _ = ctx.concurrent_raw(
                s,
                &fetch_request_with(s, medium, &[&medium.head, &rad_id], false),
                1,
            );
        }
        // SEEDD_BENCH_PERF=1: the cache's cold fetches too, into seedd-bench-cold.perf.
        let perf = perf_record(
            PerfOf::Pid(cache_s.pid),
            &target.join("seedd-bench-cold.perf"),
            &mut notes,
        );
        for (round, ancestor) in ancestors.iter().enumerate() {
            for li in abba(round, layout_servers.len()) {
                let s = layout_servers[li].0;
                ctx.log(&format!(
                    "round {}/{rounds}: layouts: one full raw v2 fetch of medium from {}{}",
                    round + 1,
                    s.label,
                    if li == cache_li {
                        String::new()
                    } else {
                        format!(", then {CONCURRENT} concurrent")
                    }
                ));
                let req = if li == cache_li {
                    let wants = [medium.head.as_str(), rad_id.as_str(), ancestor.as_str()];
                    fetch_request_with(s, medium, &wants, false)
                } else {
                    fetch_request_with(s, medium, &[&medium.head, &rad_id], false)
                };
                let b = ctx.concurrent_raw(s, &req, 1);
                let (own, rest) = ctx.last_split.get();
                let o = &mut singles1[li];
                o.cpu.push(b.cpu());
                o.wall.push(b.wall());
                o.bytes.push(b.bytes);
                o.errors.extend(b.errors);
                o.split = (o.split.0 + own, o.split.1 + rest);
                if li != cache_li {
                    let req = fetch_request(s, medium, &[&medium.head, &rad_id]);
                    let b = ctx.concurrent_raw(s, &req, CONCURRENT);
                    if let Some(e) = b.errors.first() {
                        notes.push(format!("layouts: raw fetches from {}: {e}", s.label));
                    }
                    let (own, rest) = ctx.last_split.get();
                    split16_sum[li] = (split16_sum[li].0 + own, split16_sum[li].1 + rest);
                    sixteen[li].push(b);
                }
            }
        }
        perf_stop(perf);
        // SEEDD_BENCH_PERF=1 (issue 29, "one clone CPU, cache off vs git tuned"): untimed,
        // after the rounds, PROFILED_FETCHES single full fetches each from git http-backend
        // and from seedd with the cache off, on the same tuned files, one after another, with
        // the server cores recorded (the server, its `git upload-pack` children and the kernel
        // work charged there) into seedd-bench-one-{git,seedd}.perf;
        // `perf report -i <file> --sort comm,dso` compares them.
        const PROFILED_FETCHES: usize = 40;
        for (li, name) in [(1, "git"), (2, "seedd")] {
            let s = layout_servers[li].0;
            let req = fetch_request_with(s, medium, &[&medium.head, &rad_id], false);
            let perf = perf_record(
                PerfOf::ServerCpus,
                &target.join(format!("seedd-bench-one-{name}.perf")),
                &mut notes,
            );
            if perf.is_none() {
                break;
            }
            ctx.log(&format!(
                "profile: {PROFILED_FETCHES} single full raw v2 fetches of medium from {} under perf",
                s.label
            ));
            for _ in 0..PROFILED_FETCHES {
                let b = ctx.concurrent_raw(s, &req, 1);
                if let Some(e) = b.errors.first() {
                    notes.push(format!("profile: one fetch from {}: {e}", s.label));
                }
            }
            perf_stop(perf);
        }
        // The pack is the same; its side-band framing follows git's pipe reads, so the
        // responses differ by a few hundred bytes of packet headers.
        {
            let bytes = &singles1[cache_li].bytes;
            let (lo, hi) = (
                bytes.iter().min().copied().unwrap_or(0),
                bytes.iter().max().copied().unwrap_or(0),
            );
            if hi - lo > hi / 1000 {
                notes.push(format!(
                    "layouts: cold cache fetches differ in bytes: {bytes:?}"
                ));
            }
        }
        let n = rounds as f64;
        let layouts: Vec<Layout> = layout_servers
            .iter()
            .enumerate()
            .map(|(li, (s, layout))| {
                let o = &singles1[li];
                if let Some(e) = o.errors.first() {
                    notes.push(format!("layouts: one fetch from {}: {e}", s.label));
                }
                let (batches, split16) = if li == cache_li {
                    (&cached_cold, cached_split16)
                } else {
                    (&sixteen[li], (split16_sum[li].0 / n, split16_sum[li].1 / n))
                };
                Layout {
                    label: s.label,
                    layout: layout.clone(),
                    cpu1: Summary::of(&o.cpu),
                    wall1: Summary::of(&o.wall),
                    bytes1: o.bytes.first().copied().unwrap_or(0),
                    thr16: summary(batches, Batch::throughput),
                    wall16: summary(batches, Batch::wall),
                    cpu16: summary(batches, Batch::cpu),
                    bytes16: batches.first().map_or(0, |b| b.bytes),
                    fails16: batches.iter().map(|b| b.errors.len()).sum(),
                    split1: (o.split.0 / n, o.split.1 / n),
                    split16,
                }
            })
            .collect();
        drop(layout_servers);
        drop(naive);
        drop(cache_s);
        {
            let [naive, tuned, off, on] = &layouts[..] else {
                unreachable!()
            };
            let w16 = format!("{CONCURRENT} raw v2 fetches, medium, by layout, warm");
            for (x, base, k) in [
                (on, tuned, "on_vs_tuned"),
                (on, naive, "on_vs_unmaintained"),
                (off, tuned, "off_vs_tuned"),
                (off, naive, "off_vs_unmaintained"),
            ] {
                rows.push(row(
                    format!("layout_raw16_throughput_{k}"),
                    w16.clone(),
                    &format!("MB/s {} / {}", x.label, base.label),
                    "MB/s",
                    x.thr16,
                    base.thr16,
                    "higher",
                ));
            }
            let w1 = "one full raw v2 fetch, medium (cache: one it has not seen)".to_owned();
            for (x, base, k) in [
                (on, tuned, "on_vs_tuned"),
                (off, tuned, "off_vs_tuned"),
                (on, naive, "on_vs_unmaintained"),
            ] {
                rows.push(row(
                    format!("layout_cold1_cpu_{k}"),
                    w1.clone(),
                    &format!("CPU {} / {}", x.label, base.label),
                    "s",
                    x.cpu1,
                    base.cpu1,
                    "lower",
                ));
            }
            rows.push(row(
                "layout_cold1_bytes_on_vs_tuned",
                w1,
                "bytes seedd+cache / git tuned",
                "MB",
                one(on.bytes1 as f64 / 1e6),
                one(tuned.bytes1 as f64 / 1e6),
                "lower",
            ));
            let wr = format!("server CPU for {CONCURRENT} / CPU for 1 (medians)");
            for (x, base, k) in [
                (on, tuned, "on_vs_tuned"),
                (off, naive, "off_vs_unmaintained"),
            ] {
                rows.push(row(
                    format!("layout_cpu16_over_cpu1_{k}"),
                    wr.clone(),
                    &format!("{} vs {}", x.label, base.label),
                    "×",
                    one(med(&x.cpu16) / med(&x.cpu1)),
                    one(med(&base.cpu16) / med(&base.cpu1)),
                    "lower",
                ));
            }
        }

        // Memory: 16 concurrent full fetches of the biggest dataset, each server started fresh
        // in a new scope (the pack cache empty) with every server's files evicted, ABBA order:
        // the scope's memory.peak (page cache it brought in included), PSS and Σ VmRSS peaks.
        // The main seedd's data dir is the fresh seedd's: stop it meanwhile.
        drop(s0);
        let mem_repo = big.as_ref().unwrap_or(big64);
        let big_rad_id = stdout(&run(git(&ctx.home)
            .arg("--git-dir")
            .arg(&mem_repo.path)
            .args(["rev-parse", "refs/rad/id"])));
        let mem_labels = ["seedd", "seedd+cache", "git"];
        let mut memory: [Vec<Batch>; 3] = Default::default();
        for round in 0..rounds {
            for mi in abba(round, 3) {
                let s = match mi {
                    0 => ctx.start_seedd("seedd", &data_dir, &main_env, false),
                    1 => {
                        let _ = std::fs::remove_dir_all(cached_dir.join("cache"));
                        ctx.start_seedd("seedd+cache", &cached_dir, &cache_env, false)
                    }
                    _ => ctx.start_bridge("git", &storage),
                };
                evicted = ctx.evict_all();
                ctx.log(&format!(
                    "round {}/{rounds}: memory: {CONCURRENT} concurrent raw v2 fetches of {} from {}, cold",
                    round + 1,
                    mem_repo.name,
                    s.label
                ));
                let req = fetch_request(&s, mem_repo, &[&mem_repo.head, &big_rad_id]);
                let b = ctx.concurrent_raw(&s, &req, CONCURRENT);
                if let Some(e) = b.errors.first() {
                    notes.push(format!("memory: fetches from {}: {e}", s.label));
                }
                memory[mi].push(b);
                drop(s);
            }
        }
        let mem_peak: Vec<Option<Summary>> = memory
            .iter()
            .map(|m| summary(m, Batch::memory_peak_mib))
            .collect();
        let mem_pss: Vec<Option<Summary>> =
            memory.iter().map(|m| summary(m, Batch::pss_mib)).collect();
        let mem_rss: Vec<Option<Summary>> =
            memory.iter().map(|m| summary(m, Batch::rss_mib)).collect();
        {
            let w = format!(
                "{CONCURRENT} raw v2 fetches {}, cold: server's scope",
                mem_repo.name
            );
            for (mi, key) in [(0, "off"), (1, "cache")] {
                let label = mem_labels[mi];
                rows.push(row(
                    format!("memory_peak_{key}_mib"),
                    w.clone(),
                    &format!("memory.peak, {label}"),
                    "MiB",
                    mem_peak[mi],
                    mem_peak[2],
                    "lower",
                ));
                rows.push(row(
                    format!("memory_pss_peak_{key}_mib"),
                    w.clone(),
                    &format!("PSS peak, {label}"),
                    "MiB",
                    mem_pss[mi],
                    mem_pss[2],
                    "lower",
                ));
                rows.push(row(
                    format!("memory_rss_sum_peak_{key}_mib"),
                    w.clone(),
                    &format!("Σ VmRSS peak (2nd), {label}"),
                    "MiB",
                    mem_rss[mi],
                    mem_rss[2],
                    "",
                ));
            }
        }

        // A repository after 100 replicated pushes (100 packs, loose refs): served as pushed,
        // after seedd's own maintenance, and after a fresh `git repack -adb` of a copy.
        let s0 = ctx.start_seedd("seedd", &data_dir, &main_env, false);
        let pushes_rad_id = stdout(&run(git(&ctx.home)
            .arg("--git-dir")
            .arg(&pushes100.path)
            .args(["rev-parse", "refs/rad/id"])));
        std::fs::create_dir_all(&fresh_root).unwrap();
        seedd_tests::run(
            Command::new("cp")
                .arg("-a")
                .arg(&pushes100.path)
                .arg(fresh_root.join(&pushes100.canonical)),
        );
        let t = Instant::now();
        run(git(&ctx.home)
            .arg("--git-dir")
            .arg(fresh_root.join(&pushes100.canonical))
            .args(["repack", "-a", "-d", "-b", "-q"]));
        let fresh_repack_s = t.elapsed().as_secs_f64();
        let fresh = ctx.start_bridge("git fresh repack", &fresh_root);
        let packs_pushed = data::pack_count(&pushes100.path);
        let mut pushes: Vec<(String, Option<Summary>, u64)> = Vec::new();
        let pushes_req =
            |s: &Server| fetch_request(s, pushes100, &[&pushes100.head, &pushes_rad_id]);
        let mut measure_pushes = |servers: &[&Server], what: &str, notes: &mut Vec<String>| {
            ctx.log(&format!(
                "clone CPU of pushes100 {what} from {}",
                servers
                    .iter()
                    .map(|s| s.label)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            for (s, r) in servers
                .iter()
                .zip(ctx.singles(servers, &pushes_req, rounds))
            {
                if let Some(e) = r.errors.first() {
                    notes.push(format!("pushes100 {what} from {}: {e}", s.label));
                }
                pushes.push((
                    format!("{} {what}", s.label),
                    Summary::of(&r.cpu),
                    r.bytes.first().copied().unwrap_or(0),
                ));
            }
        };
        measure_pushes(&[&s1, &s0], "as pushed", &mut notes);
        ctx.log("maintaining pushes100 with seedd (admin API)");
        let t = Instant::now();
        let maintained = seedd_tests::http_post(
            &s0.seed().admin_url(&format!(
                "/api/v1/repos/rad:{}/maintain",
                pushes100.canonical
            )),
            &[("Authorization", &format!("Bearer {}", s0.seed().token()))],
            b"",
        );
        let maintain_s = t.elapsed().as_secs_f64();
        let maintain_note = match &maintained {
            Ok((200, body)) => {
                let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
                format!(
                    "seedd maintenance of pushes100: {} → {} packs, repack {}, {} ms (bench wall {maintain_s:.2} s); fresh git repack -adb of a copy: {fresh_repack_s:.2} s wall",
                    v["run"]["packs_before"], v["run"]["packs_after"], v["run"]["repack"], v["run"]["duration_ms"]
                )
            }
            other => {
                notes.push(format!("maintenance of pushes100 failed: {other:?}"));
                "maintenance failed".into()
            }
        };
        let packs_maintained = data::pack_count(&pushes100.path);
        measure_pushes(&[&s1, &s0], "maintained", &mut notes);
        measure_pushes(&[&fresh], "", &mut notes);
        drop(fresh);
        {
            let [git_pushed, seedd_pushed, git_maint, seedd_maint, fresh] = &pushes[..] else {
                unreachable!()
            };
            let w = format!("clone pushes100 ({packs_pushed} packs → {packs_maintained})");
            for (x, k) in [
                (git_maint, "git_maintained"),
                (seedd_maint, "seedd_maintained"),
                (git_pushed, "git_pushed"),
                (seedd_pushed, "seedd_pushed"),
            ] {
                rows.push(row(
                    format!("pushes100_cpu_{k}_vs_fresh"),
                    w.clone(),
                    &format!("CPU {} / {}", x.0.trim(), fresh.0.trim()),
                    "s",
                    x.1,
                    fresh.1,
                    "lower",
                ));
            }
            rows.push(row(
                "pushes100_bytes_seedd_maintained_vs_fresh",
                w,
                "bytes seedd maintained / fresh",
                "MB",
                one(seedd_maint.2 as f64 / 1e6),
                one(fresh.2 as f64 / 1e6),
                "",
            ));
        }

        // Ref advertisement rates on refs10k and refs100k.
        let v2_body = {
            let mut b = String::new();
            b.push_str(&pkt("command=ls-refs\n"));
            b.push_str(&pkt("agent=seedd-bench\n"));
            b.push_str(&pkt("object-format=sha1\n"));
            b.push_str("0001");
            b.push_str(&pkt("peel\n"));
            b.push_str(&pkt("symrefs\n"));
            b.push_str("0000");
            b
        };
        let advertised = [
            (refs10k, "refs10k", "refs"),
            (refs100k, "refs100k", "refs100k"),
        ];
        for ((variant, label), (repo, set, key)) in
            [("v0", "info/refs v0 GET"), ("v2", "ls-refs v2 POST")]
                .into_iter()
                .flat_map(|v| advertised.into_iter().map(move |r| (v, r)))
        {
            let mut rps = [Vec::new(), Vec::new()];
            let mut cpu_ms = [Vec::new(), Vec::new()];
            let mut body = [Vec::new(), Vec::new()];
            for round in 0..rounds {
                for si in abba(round, 2) {
                    let s = [&s0, &s1][si];
                    // With the `Accept-Encoding` git 2.47 (libcurl) sends: a server may answer
                    // gzip-compressed (seedd does for large advertisements; http-backend does
                    // not).
                    let req = if variant == "v0" {
                        format!(
                            "GET {}/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: {}\r\nUser-Agent: git/2.47\r\nAccept-Encoding: deflate, gzip, br, zstd\r\n\r\n",
                            s.path(repo),
                            s.addr
                        )
                    } else {
                        format!(
                            "POST {}/git-upload-pack HTTP/1.1\r\nHost: {}\r\nUser-Agent: git/2.47\r\nAccept-Encoding: deflate, gzip, br, zstd\r\nGit-Protocol: version=2\r\nContent-Type: application/x-git-upload-pack-request\r\nAccept: application/x-git-upload-pack-result\r\nContent-Length: {}\r\n\r\n{v2_body}",
                            s.path(repo),
                            s.addr,
                            v2_body.len()
                        )
                    };
                    ctx.log(&format!(
                        "round {}/{rounds}: {label} on {set} at {}, {RPS_CONNS} keep-alive connections, {RPS_SECS} s",
                        round + 1,
                        s.label
                    ));
                    let (ok, errors, b, iv) = ctx.rate(s, req.as_bytes(), RPS_CONNS, RPS_SECS);
                    rps[si].push(ok as f64 / iv.wall.as_secs_f64().max(1e-9));
                    cpu_ms[si].push(if ok > 0 {
                        iv.cpu_secs() * 1000.0 / ok as f64
                    } else {
                        f64::NAN
                    });
                    body[si].push(b as f64 / 1e3);
                    if errors > 0 {
                        notes.push(format!("{label} at {}: {errors} failed requests", s.label));
                    }
                }
            }
            let w = format!("{label} {set} ({RPS_CONNS} conns), warm");
            rows.push(row(
                format!("{key}_{variant}_req_per_s"),
                w.clone(),
                "requests/s",
                "req/s",
                Summary::of(&rps[0]),
                Summary::of(&rps[1]),
                "higher",
            ));
            rows.push(row(
                format!("{key}_{variant}_cpu_ms_per_req"),
                w.clone(),
                "server CPU per request",
                "ms",
                Summary::of(&cpu_ms[0]),
                Summary::of(&cpu_ms[1]),
                "lower",
            ));
            rows.push(row(
                format!("{key}_{variant}_response_kb"),
                w,
                "response body",
                "kB",
                Summary::of(&body[0]),
                Summary::of(&body[1]),
                "",
            ));
        }
        drop(s1);
        drop(s0);

        // Floors from the issue.
        let medium_cold_cpu = |si: usize| summary(&full[2][si][0], |c| c.iv.cpu_secs());
        let clone_ratio = med(&medium_cold_cpu(0)) / med(&medium_cold_cpu(1));
        let clone_ok = clone_ratio.is_finite() && clone_ratio <= 1.2;
        let medium_warm_cpu = |si: usize| summary(&full[2][si][1], |c| c.iv.cpu_secs());
        let clone_warm_ratio = med(&medium_warm_cpu(0)) / med(&medium_warm_cpu(1));
        let peaks: Vec<f64> = (0..2).map(|ri| med(&proc_pss(ri).1)).collect();
        let growth: Vec<f64> = (0..2).map(|ri| med(&proc_pss(ri).2)).collect();
        // Flat: the 64 MiB clone raises seedd's peak by less than 8 MiB over the 16 MiB one
        // (buffering the pack would add ≥ 48 MiB).
        let rss_delta = peaks[1] - peaks[0];
        let rss_flat = rss_delta.is_finite() && rss_delta < 8.0;

        // Output: table.
        let git_version = cmd_out(Command::new("git").arg("--version"));
        // Every online core (the bench itself is pinned to the load cores).
        let cpus = prov.cores;
        let mut t = String::new();
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "seedd vs git http-backend (CGI), same repositories, same run — {git_version}, {cpus} cores"
        );
        let _ = writeln!(t, "{}", prov.line());
        let _ = writeln!(
            t,
            "datasets (repack -adb, commit-graph, packed refs): medium {:.1} MB packed ({MEDIUM_COMMITS} commits, {MEDIUM_FILES} files); big16 {:.1} MB; big64 {:.1} MB; refs10k {TAGS} tags; refs100k {TAGS_100K} tags",
            medium.pack_bytes() as f64 / 1e6,
            big16.pack_bytes() as f64 / 1e6,
            big64.pack_bytes() as f64 / 1e6
        );
        let _ = writeln!(
            t,
            "each server in its own cgroup pinned to the server cores (seedd with its git children; each CGI bridge with git http-backend and its gits); bench and clients on the load cores. {}",
            measure::cgroup_method()
        );
        let _ = writeln!(
            t,
            "server CPU = the scope's cgroup CPU; memory.peak = the scope's (page cache it brought in included), PSS and Σ VmRSS (secondary) sampled every 20 ms. {rounds} rounds, servers in ABBA order, median [min–max]; ratio = seedd / git of the medians; 'better' says which direction is good."
        );
        let _ = writeln!(
            t,
            "cold = servers restarted (seedd's caches empty), repositories, data dirs and caches of every server evicted from the page cache (last: {} files, {:.1} MB); warm = served before by the same process.",
            evicted.files,
            evicted.bytes as f64 / 1e6
        );
        let _ = writeln!(t);
        write_table(
            &mut t,
            ["workload", "metric", "seedd", "git", "ratio", "unit"],
            [58, 44, 26, 26, 8, 6],
            184,
            rows.iter().map(|r| TableLine {
                group: &r.workload,
                metric: &r.metric,
                seedd: show(&r.seedd),
                other: show(&r.git),
                ratio: r.ratio().map_or("".into(), |x| format!("{x:.2}×")),
                unit: r.unit,
                better: r.better,
            }),
        );
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "floor: cold full clone CPU ≤ 1.2× git (medium, medians): {clone_ratio:.2}× → {} (warm: {clone_warm_ratio:.2}×)",
            if clone_ok { "MET" } else { "NOT MET" }
        );
        let _ = writeln!(
            t,
            "floor: seedd flat as repo size grows (PSS peak of the seedd process alone, cold clones, medians): {} MiB in the 16 MiB clone, {} MiB in the 64 MiB clone (Δ {:.1} MiB; growth during each clone {}) → {}",
            fmt(Some(peaks[0])),
            fmt(Some(peaks[1])),
            rss_delta,
            growth
                .iter()
                .map(|g| format!("{g:.1}"))
                .collect::<Vec<_>>()
                .join(" / "),
            if rss_flat { "FLAT" } else { "GROWS" }
        );
        // Issue 13 §4 targets.
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "layouts, medium ({CONCURRENT} raw v2 fetches; one fetch = median of {rounds}, warm, after an untimed one; for the cache {rounds} requests it had not seen; medians; self = the server process's own /proc ticks, rest = the scope's other processes):"
        );
        let _ = writeln!(
            t,
            "  {:<26} {:<74} {:>9} {:>8} {:>9} {:>9} {:>8} {:>9} {:>15} {:>15}",
            "server",
            "layout served",
            "MB/s 16",
            "wall 16",
            "CPU 16 s",
            "CPU 1 s",
            "16 / 1",
            "MB 1",
            "1: self+rest s",
            "16: self+rest s"
        );
        for l in &layouts {
            let _ = writeln!(
                t,
                "  {:<26} {:<74} {:>9.1} {:>8.2} {:>9.2} {:>9.3} {:>7.2}× {:>9.2} {:>7.3}+{:<7.3} {:>7.2}+{:<7.2}",
                l.label,
                l.layout,
                med(&l.thr16),
                med(&l.wall16),
                med(&l.cpu16),
                med(&l.cpu1),
                med(&l.cpu16) / med(&l.cpu1),
                l.bytes1 as f64 / 1e6,
                l.split1.0,
                l.split1.1,
                l.split16.0,
                l.split16.1
            );
        }
        let mut targets: Vec<(String, f64, bool)> = Vec::new();
        {
            let [naive, tuned, off, on] = &layouts[..] else {
                unreachable!()
            };
            let mut target = |what: String, v: f64, met: bool| targets.push((what, v, met));
            let x = med(&on.thr16) / med(&tuned.thr16);
            target(
                format!("{CONCURRENT} concurrent throughput, seedd+cache ≥ 5× git tuned"),
                x,
                x >= 5.0,
            );
            let x = med(&summary(&cached_warm, Batch::throughput)) / med(&tuned.thr16);
            target(
                format!("{CONCURRENT} concurrent throughput, seedd+cache warm ≥ 5× git tuned"),
                x,
                x >= 5.0,
            );
            let x = med(&on.thr16) / med(&naive.thr16);
            target(
                format!(
                    "{CONCURRENT} concurrent throughput, seedd+cache ≥ 20× seedd before maintenance (git http-backend on the unmaintained layout)"
                ),
                x,
                x >= 20.0,
            );
            let x = med(&off.thr16) / med(&naive.thr16);
            target(
                format!(
                    "{CONCURRENT} concurrent throughput, seedd (cache off) ≥ 20× seedd before maintenance (git http-backend on the unmaintained layout)"
                ),
                x,
                x >= 20.0,
            );
            let x = med(&on.cpu16) / med(&on.cpu1);
            target(
                format!("seedd+cache CPU for {CONCURRENT} ≤ 1.2× CPU for 1"),
                x,
                x <= 1.2,
            );
            let x = med(&on.cpu1) / med(&tuned.cpu1);
            target(
                "one cache-cold clone CPU, seedd+cache ≤ 1.1× git tuned".into(),
                x,
                x <= 1.1,
            );
            let x = med(&off.cpu1) / med(&tuned.cpu1);
            target(
                "one clone CPU, seedd (cache off) ≤ 1.1× git tuned".into(),
                x,
                x <= 1.1,
            );
            let x = on.bytes1 as f64 / tuned.bytes1 as f64;
            target(
                "one cache-cold clone bytes, seedd+cache ≤ 1.05× git tuned".into(),
                x,
                x <= 1.05,
            );
            for mi in 0..2 {
                let x = med(&mem_peak[mi]) / med(&mem_peak[2]);
                target(
                    format!(
                        "memory (memory.peak of the server's scope, {CONCURRENT} × {}, cold), {} ≤ 0.1× git",
                        mem_repo.name, mem_labels[mi]
                    ),
                    x,
                    x <= 0.1,
                );
            }
            let fresh = med(&pushes[4].1);
            for (i, who) in [(2, "git http-backend"), (3, "seedd")] {
                let x = med(&pushes[i].1) / fresh;
                target(format!("pushes100 maintained by seedd, served by {who}: clone CPU ≤ 1.2× a fresh repack -adb (git)"), x, x <= 1.2);
            }
        }
        let _ = writeln!(
            t,
            "memory, {CONCURRENT} raw v2 fetches of {} ({:.1} MB packed), cold (fresh server, evicted), the server's scope, MiB, median [min–max]:",
            mem_repo.name,
            mem_repo.pack_bytes() as f64 / 1e6
        );
        let _ = writeln!(
            t,
            "  {:<12} {:>26} {:>26} {:>26} {:>7}  PSS / git",
            "server", "memory.peak", "PSS peak", "Σ VmRSS peak (2nd)", "failed"
        );
        for mi in 0..3 {
            let _ = writeln!(
                t,
                "  {:<12} {:>26} {:>26} {:>26} {:>7}  {:.2}×",
                mem_labels[mi],
                show(&mem_peak[mi]),
                show(&mem_pss[mi]),
                show(&mem_rss[mi]),
                memory[mi].iter().map(|b| b.errors.len()).sum::<usize>(),
                med(&mem_pss[mi]) / med(&mem_pss[2])
            );
        }
        let _ = writeln!(
            t,
            "pushes100 clone (one full raw v2 fetch, {rounds} rounds, warm; server CPU s median [min–max] / MB):"
        );
        for (label, cpu, bytes) in &pushes {
            let _ = writeln!(
                t,
                "  {:<32} {:>26} {:>8.2}",
                label.trim(),
                show(cpu),
                *bytes as f64 / 1e6
            );
        }
        let _ = writeln!(t, "  {maintain_note}");
        for (what, v, met) in &targets {
            let _ = writeln!(
                t,
                "target: {what}: {v:.2}× → {}",
                if *met { "MET" } else { "NOT MET" }
            );
        }
        for n in &notes {
            let _ = writeln!(t, "note: {n}");
        }
        let elapsed = started.elapsed().as_secs_f64();
        let _ = writeln!(
            t,
            "total bench time {elapsed:.0} s (PSS of the seedd process after its start {:.1} MiB)",
            pss_at_start as f64 / 1024.0
        );
        print!("{t}");

        // Output: JSON.
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let doc = json!({
            "schema": 2,
            "unix_time": unix,
            "git_version": git_version,
            "cpus": cpus,
            "cpu_memory_method": measure::cgroup_method(),
            "clk_tck_of_split": ctx.tck,
            "duration_s": elapsed,
            "seedd_binary": seedd_bin.display().to_string(),
            "settings": {
                "rounds": rounds,
                "concurrent_clones": CONCURRENT,
                "rps_seconds": RPS_SECS,
                "rps_connections": RPS_CONNS,
                "big": big.is_some(),
                "seedd_env": seed_env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "),
            },
            "datasets": repos.iter().map(|r| json!({
                "name": r.name,
                "rid": format!("rad:{}", r.canonical),
                "head": r.head,
                "pack_bytes": r.pack_bytes(),
            })).collect::<Vec<_>>(),
            "results": rows.iter().map(|r| json!({
                "key": r.key,
                "workload": r.workload,
                "metric": r.metric,
                "unit": r.unit,
                "seedd": sjson(&r.seedd),
                "git": sjson(&r.git),
                "ratio": r.ratio().map_or(Value::Null, opt),
                "better": r.better,
            })).collect::<Vec<_>>(),
            "seedd_process_pss": full_repos.iter().enumerate().take(2).map(|(ri, repo)| {
                let (before, peak, growth) = proc_pss(ri);
                json!({
                    "dataset": repo.name,
                    "before_mib": sjson(&before),
                    "peak_mib": sjson(&peak),
                    "growth_mib": sjson(&growth),
                })
            }).collect::<Vec<_>>(),
            "seedd_process_pss_after_start_kib": pss_at_start,
            "floors": {
                "cold_clone_cpu_ratio": opt(clone_ratio),
                "warm_clone_cpu_ratio": opt(clone_warm_ratio),
                "cold_clone_cpu_max_ratio": 1.2,
                "cold_clone_cpu_met": clone_ok,
                "seedd_pss_16mib_mib": opt(peaks[0]),
                "seedd_pss_64mib_mib": opt(peaks[1]),
                "seedd_pss_delta_mib": opt(rss_delta),
                "seedd_flat": rss_flat,
            },
            "layouts": layouts.iter().map(|l| json!({
                "server": l.label,
                "layout": l.layout,
                "cpu1_s": sjson(&l.cpu1),
                "wall1_s": sjson(&l.wall1),
                "bytes1": l.bytes1,
                "throughput16_mb_s": sjson(&l.thr16),
                "wall16_s": sjson(&l.wall16),
                "cpu16_s": sjson(&l.cpu16),
                "bytes16": l.bytes16,
                "failed16": l.fails16,
                "cpu1_self_s": l.split1.0,
                "cpu1_rest_s": l.split1.1,
                "cpu16_self_s": l.split16.0,
                "cpu16_rest_s": l.split16.1,
            })).collect::<Vec<_>>(),
            "memory": (0..3).map(|mi| json!({
                "server": mem_labels[mi],
                "dataset": mem_repo.name,
                "memory_peak_mib": sjson(&mem_peak[mi]),
                "pss_peak_mib": sjson(&mem_pss[mi]),
                "rss_sum_peak_mib": sjson(&mem_rss[mi]),
                "failed": memory[mi].iter().map(|b| b.errors.len()).sum::<usize>(),
            })).collect::<Vec<_>>(),
            "pushes100": {
                "packs_pushed": packs_pushed,
                "packs_maintained": packs_maintained,
                "maintenance": maintain_note,
                "clone_cpu_s": pushes.iter().map(|(l, c, _)| (l.trim().to_owned(), sjson(c))).collect::<serde_json::Map<String, Value>>(),
            },
            "targets": targets.iter().map(|(w, v, m)| json!({
                "target": w,
                "ratio": opt(*v),
                "value": opt(*v),
                "met": m,
            })).collect::<Vec<_>>(),
            "notes": notes,
            "table": t,
        });
        let json_path = target.join("seedd-bench.json");
        let text = serde_json::to_string_pretty(&measure::stamped(&doc)).unwrap_or_default();
        std::fs::write(&json_path, text + "\n").unwrap();
        println!("JSON: {}", json_path.display());

        let _ = std::fs::remove_dir_all(&scratch);
    }
}
