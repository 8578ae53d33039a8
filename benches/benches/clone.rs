//! Side-by-side benchmark: `seedd` against `git http-backend` (run as CGI behind a minimal
//! HTTP/1.1 bridge) on the same bare repositories, in one run. Prints a table of absolute
//! figures and ratios (seedd / git) and writes the same figures as JSON to
//! `<target>/seedd-bench.json`. See `benches/README.md`.
//!
//! The bridge runs as a separate process (this binary re-executed with `--cgi-server <root>
//! <port>`) so that its CPU (utime+stime+cutime+cstime, children reaped) is measured exactly
//! like seedd's.
//!
//! Long by design: one bench binary runs every clone workload side by side against
//! `git http-backend` in one process, so the ratios come from one run (see benches/README.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use seedd_benches::http1::{cgi, client};
use seedd_benches::{
    cmd_out, ensure_seedd, fmt_figure, procfs, profile_dir, write_table, TableLine,
};
use seedd_tests::{git, pkt, run, stdout, synthetic_repo, Seed, SeedOptions};

/// Bump when the generated datasets change, so cached ones are regenerated.
const DATA_VERSION: &str = "v5";
/// The naive copy of "medium" (git naive): its history arrives in this many fetches, one pack
/// each, refs loose.
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
/// Full clone: timed rounds per server (after one untimed warm-up); `SEEDD_BENCH_ROUNDS`
/// overrides.
const ROUNDS: usize = 3;
/// Concurrent identical clones.
const CONCURRENT: usize = 16;
/// Request-rate runs: duration and keep-alive connections.
const RPS_SECS: f64 = 3.0;
const RPS_CONNS: usize = 4;

fn main() {
    if cgi::serve_if_asked() {
        return;
    }
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    seedd_benches::measure::provenance("clone");
    bench::all();
}

// ------------------------------------------------------------------------------------------
// JSON output without a JSON crate (the bench keeps its dependency list unchanged).
// ------------------------------------------------------------------------------------------

enum Json {
    Num(f64),
    Str(String),
    Bool(bool),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
    Null,
}

impl Json {
    fn obj(fields: Vec<(&str, Json)>) -> Json {
        Json::Obj(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }

    fn opt(v: Option<f64>) -> Json {
        v.map_or(Json::Null, Json::Num)
    }

    fn write(&self, out: &mut String, indent: usize) {
        let pad = "  ".repeat(indent + 1);
        match self {
            Json::Num(n) if n.is_finite() => {
                if n.fract() == 0.0 && n.abs() < 1e15 {
                    let _ = write!(out, "{}", *n as i64);
                } else {
                    let _ = write!(out, "{n:.6}");
                }
            }
            Json::Num(_) | Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        c if (c as u32) < 0x20 => {
                            let _ = write!(out, "\\u{:04x}", c as u32);
                        }
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            Json::Arr(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&pad);
                    v.write(out, indent + 1);
                }
                if !items.is_empty() {
                    out.push('\n');
                    out.push_str(&"  ".repeat(indent));
                }
                out.push(']');
            }
            Json::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&pad);
                    Json::Str(k.clone()).write(out, indent + 1);
                    out.push_str(": ");
                    v.write(out, indent + 1);
                }
                if !fields.is_empty() {
                    out.push('\n');
                    out.push_str(&"  ".repeat(indent));
                }
                out.push('}');
            }
        }
    }
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

    /// Where the naive copy of medium lives (a `GIT_PROJECT_ROOT` for git http-backend).
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

    /// The layout seedd's fetches leave before maintenance (G-naive): `dst` (a new bare
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
    /// in the order medium, big16, big64, refs10k, refs100k, pushes100. The naive copy of
    /// medium is in [`naive_root`].
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
    use super::data::Repo;
    use super::*;

    /// One server under test.
    struct Server {
        label: &'static str,
        pid: u32,
        addr: SocketAddr,
        /// URL path suffix after the canonical RID: seedd takes `<rid>.git`, git http-backend
        /// the directory name under GIT_PROJECT_ROOT.
        suffix: &'static str,
    }

    impl Server {
        fn path(&self, repo: &Repo) -> String {
            format!("/{}{}", repo.canonical, self.suffix)
        }
        fn url(&self, repo: &Repo) -> String {
            format!("http://{}{}", self.addr, self.path(repo))
        }
    }

    /// The CGI bridge process (this binary, `--cgi-server`).
    struct CgiProcess {
        child: Child,
        addr: SocketAddr,
    }

    impl CgiProcess {
        fn start(root: &Path) -> CgiProcess {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .arg("--cgi-server")
                .arg(root)
                .arg("0")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = String::new();
            BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            let addr = line
                .trim()
                .strip_prefix("listening ")
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| panic!("CGI bridge did not start: {line:?}"));
            CgiProcess { child, addr }
        }
    }

    impl Drop for CgiProcess {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// A figure for both servers.
    struct Row {
        key: String,
        workload: String,
        metric: String,
        unit: &'static str,
        seedd: Option<f64>,
        git: Option<f64>,
        /// "lower" or "higher" is better; "" for informational rows.
        better: &'static str,
    }

    fn row(
        key: impl Into<String>,
        workload: impl Into<String>,
        metric: &str,
        unit: &'static str,
        seedd: Option<f64>,
        git: Option<f64>,
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
        fn ratio(&self) -> Option<f64> {
            match (self.seedd, self.git) {
                (Some(s), Some(g)) if g > 0.0 => Some(s / g),
                _ => None,
            }
        }
    }

    /// One server's figures on medium for the layouts comparison.
    struct Layout {
        label: &'static str,
        layout: String,
        cpu1: f64,
        wall1: f64,
        bytes1: u64,
        thr16: f64,
        wall16: f64,
        cpu16: f64,
        bytes16: u64,
        fails16: usize,
        /// Server CPU split (the server process, its git children), seconds: one fetch, 16.
        split1: (f64, f64),
        split16: (f64, f64),
    }

    struct Ctx {
        /// The last [`Ctx::measured`] server CPU split: (the server process itself, its reaped
        /// children), seconds.
        last_split: std::cell::Cell<(f64, f64)>,
        started: Instant,
        tck: f64,
        home: PathBuf,
        scratch: PathBuf,
    }

    impl Ctx {
        fn log(&self, msg: &str) {
            eprintln!("[{:6.1}s] {msg}", self.started.elapsed().as_secs_f64());
        }

        /// Run `f`, returning its result, the server's CPU seconds and the wall time.
        fn measured<T>(&self, pid: u32, f: impl FnOnce() -> T) -> (T, f64, f64) {
            procfs::settle(pid);
            let c0 = server_cpu_ticks(pid);
            let s0 = own_cpu_ticks(pid);
            let t0 = Instant::now();
            let r = f();
            let wall = t0.elapsed().as_secs_f64();
            procfs::settle(pid);
            let c1 = server_cpu_ticks(pid);
            let own = own_cpu_ticks(pid).saturating_sub(s0);
            let total = c1.saturating_sub(c0);
            self.last_split.set((
                own as f64 / self.tck,
                total.saturating_sub(own) as f64 / self.tck,
            ));
            (r, total as f64 / self.tck, wall)
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

        /// `n` identical clones at once: (successes, failures, bytes, wall, server CPU).
        fn concurrent(
            &self,
            server: &Server,
            repo: &Repo,
            n: usize,
        ) -> (usize, Vec<String>, u64, f64, f64) {
            let url = server.url(repo);
            let ((ok, errors, bytes), cpu, wall) = self.measured(server.pid, || {
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
            (ok, errors, bytes, wall, cpu)
        }

        /// `n` identical raw requests at once, each on its own connection, the response only
        /// counted: (successes, failures, body bytes, wall, server CPU).
        fn concurrent_raw(
            &self,
            server: &Server,
            request: &[u8],
            n: usize,
        ) -> (usize, Vec<String>, u64, f64, f64) {
            let (results, cpu, wall) = self.measured(server.pid, || {
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
            (ok, errors, bytes, wall, cpu)
        }

        /// One request at a time: an untimed warm-up, then `rounds` timed; (median server CPU,
        /// median wall, body bytes, failures).
        fn single(
            &self,
            server: &Server,
            request: &[u8],
            rounds: usize,
        ) -> (f64, f64, u64, Vec<String>) {
            let (mut cpu, mut wall, mut bytes, mut errors) =
                (Vec::new(), Vec::new(), 0, Vec::new());
            let mut split = (0.0, 0.0);
            for round in 0..=rounds {
                let (_, e, b, w, c) = self.concurrent_raw(server, request, 1);
                errors.extend(e);
                if round > 0 {
                    cpu.push(c);
                    wall.push(w);
                    bytes = b;
                    let (own, children) = self.last_split.get();
                    split = (split.0 + own, split.1 + children);
                }
            }
            // The split as a mean per request.
            let n = rounds.max(1) as f64;
            self.last_split.set((split.0 / n, split.1 / n));
            (median(&mut cpu), median(&mut wall), bytes, errors)
        }

        /// Hammer one request over `conns` keep-alive connections for `secs`:
        /// (requests answered 200, errors, body bytes of the last answer, wall, server CPU).
        fn rate(
            &self,
            server: &Server,
            request: &[u8],
            conns: usize,
            secs: f64,
        ) -> (u64, u64, u64, f64, f64) {
            let deadline = Duration::from_secs_f64(secs);
            let ((ok, errors, body), cpu, wall) = self.measured(server.pid, || {
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
            (ok, errors, body, wall, cpu)
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

    /// SEEDD_BENCH_PERF=1: a `perf record -g` of `pid` (its threads, and the children it
    /// starts meanwhile) into `out` until [`perf_stop`].
    fn perf_record(pid: u32, out: &Path, notes: &mut Vec<String>) -> Option<std::process::Child> {
        if std::env::var("SEEDD_BENCH_PERF").as_deref() != Ok("1") {
            return None;
        }
        let child = Command::new("perf")
            .args(["record", "-q", "-F", "999", "-g", "-p"])
            .arg(pid.to_string())
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

    /// utime + stime of the server process alone (its own threads, not its children).
    fn own_cpu_ticks(pid: u32) -> u64 {
        procfs::stat_fields(pid).map_or(0, |f| {
            f.iter()
                .skip(11)
                .take(2)
                .map(|v| v.parse::<u64>().unwrap_or(0))
                .sum()
        })
    }

    /// utime + stime + cutime + cstime of a server, in clock ticks; it must still run.
    fn server_cpu_ticks(pid: u32) -> u64 {
        procfs::try_cpu_ticks(pid).unwrap_or_else(|| panic!("process {pid} is gone"))
    }

    /// A figure for the table (whole numbers below 1000 with decimals too).
    fn fmt(v: Option<f64>) -> String {
        fmt_figure(v, false)
    }

    fn median(v: &mut [f64]) -> f64 {
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            f64::NAN
        } else if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        }
    }

    pub fn all() {
        let started = Instant::now();
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
        let scratch = cache.join(format!("run-{}", std::process::id()));
        let home = scratch.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let ctx = Ctx {
            last_split: std::cell::Cell::new((0.0, 0.0)),
            started,
            tck: procfs::clk_tck(),
            home,
            scratch: scratch.clone(),
        };
        let (data_storage, repos) = data::datasets(&cache, &|m| ctx.log(m));
        assert_eq!(repos.len(), 6, "unexpected dataset manifest");
        let seedd_bin = ensure_seedd(&|m| ctx.log(m), &profile);

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
            let (_, big) = data::big(&cache, &|m| ctx.log(m));
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

        ctx.log(&format!("starting seedd ({})", seedd_bin.display()));
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
        let seed = Seed::start(SeedOptions {
            data_dir: Some(data_dir.clone()),
            env: seed_env
                .iter()
                .cloned()
                // The side-by-side rows measure serving by git: no pack cache (repeated
                // identical clones would be answered from it). The cached rows have their own
                // seed below.
                .chain([
                    ("SEEDD_HTTP__PACK_CACHE__ENABLED".into(), "false".into()),
                    // pushes100 stays as pushed until the bench asks for its maintenance
                    // (the admin API runs it either way).
                    ("SEEDD_MAINTENANCE__ENABLED".into(), "false".into()),
                ])
                .collect(),
            ..SeedOptions::default()
        });
        seed.rescan();
        let cgi = CgiProcess::start(&storage);
        let servers = [
            Server {
                label: "seedd",
                pid: seed.child.id(),
                addr: seed.http,
                suffix: ".git",
            },
            Server {
                label: "git",
                pid: cgi.child.id(),
                addr: cgi.addr,
                suffix: "",
            },
        ];
        ctx.log(&format!(
            "seedd pid {} at {}, git http-backend bridge pid {} at {}",
            servers[0].pid, servers[0].addr, servers[1].pid, servers[1].addr
        ));

        // Sanity: every repository is served by both.
        for s in &servers {
            for r in &repos {
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
                    if s.label == "seedd" {
                        eprintln!("seedd log:\n{}", seed.logs());
                    }
                    std::process::exit(1);
                }
            }
        }

        let mut rows: Vec<Row> = Vec::new();
        let mut notes: Vec<String> = Vec::new();

        // Idle CPU (background work of the server itself).
        let mut idle = [0.0; 2];
        for (i, s) in servers.iter().enumerate() {
            let ((), cpu, _) = ctx.measured(s.pid, || std::thread::sleep(Duration::from_secs(1)));
            idle[i] = cpu;
        }
        rows.push(row(
            "idle_cpu_ms_per_s",
            "idle, 1 s",
            "server CPU",
            "ms",
            Some(idle[0] * 1000.0),
            Some(idle[1] * 1000.0),
            "lower",
        ));

        // RSS flatness (seedd first, on a fresh process) + big-blob clones on both.
        let seedd_pid = servers[0].pid;
        let hwm_at_start = procfs::status_kib(seedd_pid, "VmHWM");
        let mut reset_ok = true;
        let mut rss: Vec<(String, u64, u64, u64)> = Vec::new(); // (name, base, peak, rss after)
        for repo in [big16, big64] {
            let mut cpu = [None, None];
            let mut wall = [None, None];
            let mut bytes = [None, None];
            for (i, s) in servers.iter().enumerate() {
                let is_seedd = i == 0;
                if is_seedd {
                    procfs::settle(s.pid);
                    reset_ok &= procfs::reset_hwm(s.pid);
                }
                let base = procfs::status_kib(s.pid, "VmHWM");
                ctx.log(&format!("full clone {} from {}", repo.name, s.label));
                let dest = ctx.scratch.join(format!("clone-{}-{}", s.label, repo.name));
                let (res, c, w) = ctx.measured(s.pid, || ctx.clone(&s.url(repo), &dest));
                match res {
                    Ok(b) => {
                        cpu[i] = Some(c);
                        wall[i] = Some(w);
                        bytes[i] = Some(b as f64 / 1e6);
                    }
                    Err(e) => notes.push(format!(
                        "clone of {} from {} failed: {e}",
                        repo.name, s.label
                    )),
                }
                if is_seedd {
                    rss.push((
                        repo.name.clone(),
                        base,
                        procfs::status_kib(s.pid, "VmHWM"),
                        procfs::status_kib(s.pid, "VmRSS"),
                    ));
                }
            }
            let w = format!("full clone {} (v2, 1 run)", repo.name);
            rows.push(row(
                format!("clone_{}_cpu_s", repo.name),
                w.clone(),
                "server CPU",
                "s",
                cpu[0],
                cpu[1],
                "lower",
            ));
            rows.push(row(
                format!("clone_{}_wall_s", repo.name),
                w.clone(),
                "wall time",
                "s",
                wall[0],
                wall[1],
                "lower",
            ));
            rows.push(row(
                format!("clone_{}_pack_mb", repo.name),
                w,
                "pack received",
                "MB",
                bytes[0],
                bytes[1],
                "",
            ));
        }
        if !reset_ok {
            notes.push(
                "VmHWM could not be reset (clear_refs); peaks are cumulative since start".into(),
            );
        }
        for (name, base, peak, _) in &rss {
            rows.push(row(
                format!("seedd_vmhwm_{name}_mib"),
                format!("seedd RSS, clone of {name}"),
                "VmHWM peak",
                "MiB",
                Some(*peak as f64 / 1024.0),
                None,
                "",
            ));
            rows.push(row(
                format!("seedd_vmhwm_{name}_growth_mib"),
                format!("seedd RSS, clone of {name}"),
                "peak − before",
                "MiB",
                Some(peak.saturating_sub(*base) as f64 / 1024.0),
                None,
                "",
            ));
        }

        // Full clone of the medium repository, median of ROUNDS (after a warm-up each).
        let mut cpu = [Vec::new(), Vec::new()];
        let mut wall = [Vec::new(), Vec::new()];
        let mut bytes = [0u64; 2];
        let rounds: usize = std::env::var("SEEDD_BENCH_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|n| *n > 0)
            .unwrap_or(ROUNDS);
        for round in 0..=rounds {
            for (i, s) in servers.iter().enumerate() {
                ctx.log(&format!(
                    "full clone medium from {} ({})",
                    s.label,
                    if round == 0 {
                        "warm-up".to_owned()
                    } else {
                        format!("{round}/{rounds}")
                    }
                ));
                let dest = ctx.scratch.join(format!("clone-{}-medium", s.label));
                let (res, c, w) = ctx.measured(s.pid, || ctx.clone(&s.url(medium), &dest));
                match res {
                    Ok(b) => {
                        bytes[i] = b;
                        if round > 0 {
                            cpu[i].push(c);
                            wall[i].push(w);
                        }
                    }
                    Err(e) => notes.push(format!("clone of medium from {} failed: {e}", s.label)),
                }
            }
        }
        let cold_cpu = [median(&mut cpu[0]), median(&mut cpu[1])];
        let w = format!("full clone medium (v2, median of {rounds})");
        rows.push(row(
            "clone_medium_cpu_s",
            w.clone(),
            "server CPU",
            "s",
            Some(cold_cpu[0]),
            Some(cold_cpu[1]),
            "lower",
        ));
        rows.push(row(
            "clone_medium_wall_s",
            w.clone(),
            "wall time",
            "s",
            Some(median(&mut wall[0])),
            Some(median(&mut wall[1])),
            "lower",
        ));
        rows.push(row(
            "clone_medium_pack_mb",
            w,
            "pack received",
            "MB",
            Some(bytes[0] as f64 / 1e6),
            Some(bytes[1] as f64 / 1e6),
            "",
        ));

        // 16 concurrent identical clones: real `git clone`s (client-bound on a small box: 16
        // index-packs share the cores with the server), then raw v2 fetches whose client only
        // counts the bytes (server-bound).
        let rad_id = stdout(&run(git(&ctx.home)
            .arg("--git-dir")
            .arg(&medium.path)
            .args(["rev-parse", "refs/rad/id"])));
        // git's figures for the raw fetches, for the cached rows below.
        let mut git_raw = (None, None, None, None);
        for variant in ["clone", "raw"] {
            let mut thr = [None, None];
            let mut ccpu = [None, None];
            let mut cpu_per_gb = [None, None];
            let mut cwall = [None, None];
            let mut fails = [None, None];
            for (i, s) in servers.iter().enumerate() {
                let (ok, errors, b, w, c) = if variant == "clone" {
                    ctx.log(&format!(
                        "{CONCURRENT} concurrent git clones of medium from {}",
                        s.label
                    ));
                    ctx.concurrent(s, medium, CONCURRENT)
                } else {
                    ctx.log(&format!(
                        "{CONCURRENT} concurrent raw v2 fetches of medium from {}",
                        s.label
                    ));
                    let req = fetch_request(s, medium, &[&medium.head, &rad_id]);
                    ctx.concurrent_raw(s, &req, CONCURRENT)
                };
                thr[i] = Some(b as f64 / 1e6 / w);
                ccpu[i] = Some(c);
                cwall[i] = Some(w);
                cpu_per_gb[i] = (b > 0).then(|| c / (b as f64 / 1e9));
                fails[i] = Some(errors.len() as f64);
                if let Some(e) = errors.first() {
                    notes.push(format!(
                        "{} of {CONCURRENT} concurrent {variant} requests to {} failed (ok {ok}), first error: {e}",
                        errors.len(),
                        s.label
                    ));
                }
            }
            if variant == "raw" {
                git_raw = (thr[1], cwall[1], ccpu[1], fails[1]);
            }
            let w = if variant == "clone" {
                format!("{CONCURRENT} concurrent git clones, medium")
            } else {
                format!("{CONCURRENT} concurrent raw v2 fetches, medium")
            };
            let k = |m: &str| format!("concurrent_{variant}_{m}");
            rows.push(row(
                k("throughput_mb_s"),
                w.clone(),
                "aggregate pack bytes/s",
                "MB/s",
                thr[0],
                thr[1],
                "higher",
            ));
            rows.push(row(
                k("wall_s"),
                w.clone(),
                "wall time",
                "s",
                cwall[0],
                cwall[1],
                "lower",
            ));
            rows.push(row(
                k("cpu_s"),
                w.clone(),
                "server CPU",
                "s",
                ccpu[0],
                ccpu[1],
                "lower",
            ));
            rows.push(row(
                k("cpu_s_per_gb"),
                w.clone(),
                "server CPU per GB served",
                "s/GB",
                cpu_per_gb[0],
                cpu_per_gb[1],
                "lower",
            ));
            rows.push(row(k("failed"), w, "failed", "", fails[0], fails[1], ""));
        }

        // The same 16 raw fetches from a seedd with the pack cache (issue 13 §3; admission on
        // the first request, cold: one git run, 15 readers of its file).
        let cached_raw16: (f64, f64, f64, u64, usize);
        let cached_split16: (f64, f64);
        let cached_warm16: (f64, f64);
        let cached = {
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
            let cached = Seed::start(SeedOptions {
                data_dir: Some(cached_dir),
                env: seed_env
                    .iter()
                    .cloned()
                    .chain([("SEEDD_HTTP__PACK_CACHE__ADMISSION".into(), "first".into())])
                    .collect(),
                ..SeedOptions::default()
            });
            cached.rescan();
            let s = Server {
                label: "seedd+cache",
                pid: cached.child.id(),
                addr: cached.http,
                suffix: ".git",
            };
            ctx.log(&format!(
                "{CONCURRENT} concurrent raw v2 fetches of medium from seedd with the pack cache"
            ));
            let req = fetch_request(&s, medium, &[&medium.head, &rad_id]);
            // SEEDD_BENCH_PERF=1: a `perf record -g` of the seedd process (its own threads, not
            // its git children) over the cold and warm 16, into <target>/seedd-bench-cache.perf.
            let perf = perf_record(s.pid, &target.join("seedd-bench-cache.perf"), &mut notes);
            let (ok, errors, b, w, c) = ctx.concurrent_raw(&s, &req, CONCURRENT);
            cached_raw16 = (b as f64 / 1e6 / w, w, c, b, errors.len());
            cached_split16 = ctx.last_split.get();
            if let Some(e) = errors.first() {
                notes.push(format!(
                    "{} of {CONCURRENT} concurrent raw fetches from seedd with the pack cache failed (ok {ok}), first error: {e}",
                    errors.len()
                ));
            }
            let (git_thr, git_wall, git_cpu, git_fails) = git_raw;
            let w_label = format!("{CONCURRENT} concurrent raw v2 fetches, medium, pack cache");
            let k = |m: &str| format!("concurrent_raw_cached_{m}");
            rows.push(row(
                k("throughput_mb_s"),
                w_label.clone(),
                "aggregate pack bytes/s",
                "MB/s",
                Some(b as f64 / 1e6 / w),
                git_thr,
                "higher",
            ));
            rows.push(row(
                k("wall_s"),
                w_label.clone(),
                "wall time",
                "s",
                Some(w),
                git_wall,
                "lower",
            ));
            rows.push(row(
                k("cpu_s"),
                w_label.clone(),
                "server CPU",
                "s",
                Some(c),
                git_cpu,
                "lower",
            ));
            rows.push(row(
                k("failed"),
                w_label,
                "failed",
                "",
                Some(errors.len() as f64),
                git_fails,
                "",
            ));
            // The same 16 again: every one a hit (the next wave after a release).
            ctx.log(&format!(
                "{CONCURRENT} concurrent raw v2 fetches of medium from seedd with the pack cache, warm"
            ));
            let (ok, errors, b, w, c) = ctx.concurrent_raw(&s, &req, CONCURRENT);
            if let Some(e) = errors.first() {
                notes.push(format!(
                    "{} of {CONCURRENT} warm cached raw fetches failed (ok {ok}), first error: {e}",
                    errors.len()
                ));
            }
            cached_warm16 = (b as f64 / 1e6 / w, c);
            perf_stop(perf);
            let w_label =
                format!("{CONCURRENT} concurrent raw v2 fetches, medium, pack cache warm");
            let k = |m: &str| format!("concurrent_raw_cached_warm_{m}");
            rows.push(row(
                k("throughput_mb_s"),
                w_label.clone(),
                "aggregate pack bytes/s",
                "MB/s",
                Some(b as f64 / 1e6 / w),
                git_thr,
                "higher",
            ));
            rows.push(row(
                k("cpu_s"),
                w_label,
                "server CPU",
                "s",
                Some(c),
                git_cpu,
                "lower",
            ));
            cached
        };
        let cached_server = Server {
            label: "seedd+cache",
            pid: cached.child.id(),
            addr: cached.http,
            suffix: ".git",
        };
        // One fetch at a time costs 0.1–0.2 s of server CPU on the tuned layouts (10 ms ticks):
        // at least 5 rounds.
        let rounds_or_one = rounds.max(5);

        // Issue 13 §4, layouts: git http-backend on the naive and on the tuned medium, seedd
        // with the pack cache off and on.
        let naive_root = data::naive_root(&cache);
        let naive_cgi = CgiProcess::start(&naive_root);
        let naive_server = Server {
            label: "git naive",
            pid: naive_cgi.child.id(),
            addr: naive_cgi.addr,
            suffix: "",
        };
        let naive_packs = data::pack_count(&naive_root.join(&medium.canonical));
        let layout_servers: [(&Server, String); 4] = [
            (
                &naive_server,
                format!("G-naive ({naive_packs} packs, loose refs, no bitmap/commit-graph)"),
            ),
            (
                &servers[1],
                "G-tuned (repack -adb, commit-graph, packed refs)".into(),
            ),
            (&servers[0], "G-tuned, same files as git tuned".into()),
            (&cached_server, "G-tuned, same files, cache cold".into()),
        ];
        let mut layouts: Vec<Layout> = Vec::new();
        for (s, layout) in &layout_servers {
            let is_cache = s.label == "seedd+cache";
            let one = fetch_request_with(s, medium, &[&medium.head, &rad_id], false);
            // One cold full fetch, the median of the rounds. For the cache each round is a
            // request it has not seen: no thin-pack, and one more `want` of an ancestor of the
            // head (`head~k`), so the same objects and the same pack under another key.
            ctx.log(&format!("one full raw v2 fetch of medium from {}", s.label));
            let (cpu1, wall1, bytes1, err1) = if is_cache {
                let (mut cpu, mut wall, mut bytes, mut errors) =
                    (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                let mut split = (0.0, 0.0);
                // SEEDD_BENCH_PERF=1: these cold fetches too, into seedd-bench-cold.perf.
                let perf = perf_record(s.pid, &target.join("seedd-bench-cold.perf"), &mut notes);
                for k in 1..=rounds_or_one {
                    let ancestor = stdout(&run(git(&ctx.home)
                        .arg("--git-dir")
                        .arg(&medium.path)
                        .args(["rev-parse", &format!("{}~{k}", medium.head)])));
                    let wants = [medium.head.as_str(), rad_id.as_str(), ancestor.as_str()];
                    let req = fetch_request_with(s, medium, &wants, false);
                    let (_, e, b, w, c) = ctx.concurrent_raw(s, &req, 1);
                    errors.extend(e);
                    cpu.push(c);
                    wall.push(w);
                    bytes.push(b);
                    let (own, children) = ctx.last_split.get();
                    split = (split.0 + own, split.1 + children);
                }
                perf_stop(perf);
                // The pack is the same; its side-band framing follows git's pipe reads, so
                // the responses differ by a few hundred bytes of packet headers.
                let (lo, hi) = (
                    bytes.iter().min().copied().unwrap_or(0),
                    bytes.iter().max().copied().unwrap_or(0),
                );
                if hi - lo > hi / 1000 {
                    notes.push(format!(
                        "layouts: cold cache fetches differ in bytes: {bytes:?}"
                    ));
                }
                let n = rounds_or_one as f64;
                ctx.last_split.set((split.0 / n, split.1 / n));
                (median(&mut cpu), median(&mut wall), bytes[0], errors)
            } else {
                ctx.single(s, &one, rounds_or_one)
            };
            let split1 = ctx.last_split.get();
            let (thr, wall16, cpu16, bytes16, fails16, split16) = if is_cache {
                let (a, b, c, d, e) = cached_raw16;
                (a, b, c, d, e, cached_split16)
            } else {
                ctx.log(&format!(
                    "{CONCURRENT} concurrent raw v2 fetches of medium from {}",
                    s.label
                ));
                let req = fetch_request(s, medium, &[&medium.head, &rad_id]);
                let (_, errors, b, w, c) = ctx.concurrent_raw(s, &req, CONCURRENT);
                if let Some(e) = errors.first() {
                    notes.push(format!("layouts: raw fetches from {}: {e}", s.label));
                }
                (
                    b as f64 / 1e6 / w,
                    w,
                    c,
                    b,
                    errors.len(),
                    ctx.last_split.get(),
                )
            };
            if let Some(e) = err1.first() {
                notes.push(format!("layouts: one fetch from {}: {e}", s.label));
            }
            layouts.push(Layout {
                label: s.label,
                layout: layout.clone(),
                cpu1,
                wall1,
                bytes1,
                thr16: thr,
                wall16,
                cpu16,
                bytes16,
                fails16,
                split1,
                split16,
            });
        }
        drop(naive_cgi);
        {
            let [naive, tuned, off, on] = &layouts[..] else {
                unreachable!()
            };
            let w16 = format!("{CONCURRENT} raw v2 fetches, medium, by layout");
            for (x, base, k) in [
                (on, tuned, "on_vs_tuned"),
                (on, naive, "on_vs_naive"),
                (off, tuned, "off_vs_tuned"),
                (off, naive, "off_vs_naive"),
            ] {
                rows.push(row(
                    format!("layout_raw16_throughput_{k}"),
                    w16.clone(),
                    &format!("MB/s {} / {}", x.label, base.label),
                    "MB/s",
                    Some(x.thr16),
                    Some(base.thr16),
                    "higher",
                ));
            }
            let w1 = "one cold full raw v2 fetch, medium".to_owned();
            for (x, base, k) in [
                (on, tuned, "on_vs_tuned"),
                (off, tuned, "off_vs_tuned"),
                (on, naive, "on_vs_naive"),
            ] {
                rows.push(row(
                    format!("layout_cold1_cpu_{k}"),
                    w1.clone(),
                    &format!("CPU {} / {}", x.label, base.label),
                    "s",
                    Some(x.cpu1),
                    Some(base.cpu1),
                    "lower",
                ));
            }
            rows.push(row(
                "layout_cold1_bytes_on_vs_tuned",
                w1,
                "bytes seedd+cache / git tuned",
                "MB",
                Some(on.bytes1 as f64 / 1e6),
                Some(tuned.bytes1 as f64 / 1e6),
                "lower",
            ));
            let wr = format!("server CPU for {CONCURRENT} / CPU for 1");
            for (x, base, k) in [(on, tuned, "on_vs_tuned"), (off, naive, "off_vs_naive")] {
                rows.push(row(
                    format!("layout_cpu16_over_cpu1_{k}"),
                    wr.clone(),
                    &format!("{} vs {}", x.label, base.label),
                    "×",
                    (x.cpu1 > 0.0).then(|| x.cpu16 / x.cpu1),
                    (base.cpu1 > 0.0).then(|| base.cpu16 / base.cpu1),
                    "lower",
                ));
            }
        }

        // Memory: peak RSS of the server and all its children (sum of VmRSS over the process
        // tree, sampled every 20 ms) during 16 concurrent full fetches of the biggest dataset.
        let mem_repo = big.as_ref().unwrap_or(big64);
        let big_rad_id = stdout(&run(git(&ctx.home)
            .arg("--git-dir")
            .arg(&mem_repo.path)
            .args(["rev-parse", "refs/rad/id"])));
        let mut memory: Vec<(&'static str, f64, f64, usize, usize, f64)> = Vec::new();
        for s in [&servers[0], &cached_server, &servers[1]] {
            ctx.log(&format!(
                "{CONCURRENT} concurrent raw v2 fetches of {} from {}, sampling tree RSS",
                mem_repo.name, s.label
            ));
            procfs::settle(s.pid);
            let before = procfs::tree_rss_kib(s.pid);
            let sampler = procfs::TreeRssSampler::start(s.pid, Duration::from_millis(20));
            let req = fetch_request(s, mem_repo, &[&mem_repo.head, &big_rad_id]);
            let (_, errors, _, _, _) = ctx.concurrent_raw(s, &req, CONCURRENT);
            let peak = sampler.finish();
            if let Some(e) = errors.first() {
                notes.push(format!("memory: fetches from {}: {e}", s.label));
            }
            memory.push((
                s.label,
                before as f64 / 1024.0,
                peak.rss as f64 / 1024.0,
                peak.samples,
                errors.len(),
                peak.anon as f64 / 1024.0,
            ));
        }
        {
            let git_peak = memory[2].2;
            let w = format!(
                "{CONCURRENT} raw v2 fetches {}: server + children RSS",
                mem_repo.name
            );
            for (label, _, peak, _, _, _) in &memory[..2] {
                rows.push(row(
                    format!(
                        "memory_tree_peak_{}_mib",
                        if *label == "seedd" { "off" } else { "cache" }
                    ),
                    w.clone(),
                    &format!("peak Σ VmRSS, {label}"),
                    "MiB",
                    Some(*peak),
                    Some(git_peak),
                    "lower",
                ));
            }
            let git_anon = memory[2].5;
            for (label, _, _, _, _, anon) in &memory[..2] {
                rows.push(row(
                    format!(
                        "memory_tree_anon_{}_mib",
                        if *label == "seedd" { "off" } else { "cache" }
                    ),
                    w.clone(),
                    &format!("peak Σ RssAnon, {label}"),
                    "MiB",
                    Some(*anon),
                    Some(git_anon),
                    "lower",
                ));
            }
        }

        // A repository after 100 replicated pushes (100 packs, loose refs): served as pushed,
        // after seedd's own maintenance, and after a fresh `git repack -adb` of a copy.
        let pushes_rad_id = stdout(&run(git(&ctx.home)
            .arg("--git-dir")
            .arg(&pushes100.path)
            .args(["rev-parse", "refs/rad/id"])));
        let fresh_root = scratch.join("fresh");
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
        let fresh_cgi = CgiProcess::start(&fresh_root);
        let fresh_server = Server {
            label: "git fresh repack",
            pid: fresh_cgi.child.id(),
            addr: fresh_cgi.addr,
            suffix: "",
        };
        let packs_pushed = data::pack_count(&pushes100.path);
        let mut pushes: Vec<(String, f64, u64)> = Vec::new();
        let measure_pushes = |s: &Server,
                              what: &str,
                              pushes: &mut Vec<(String, f64, u64)>,
                              notes: &mut Vec<String>| {
            ctx.log(&format!("clone CPU of pushes100 {what} from {}", s.label));
            let req = fetch_request(s, pushes100, &[&pushes100.head, &pushes_rad_id]);
            let (cpu, _, bytes, errors) = ctx.single(s, &req, rounds_or_one);
            if let Some(e) = errors.first() {
                notes.push(format!("pushes100 {what} from {}: {e}", s.label));
            }
            pushes.push((format!("{} {what}", s.label), cpu, bytes));
        };
        measure_pushes(&servers[1], "as pushed", &mut pushes, &mut notes);
        measure_pushes(&servers[0], "as pushed", &mut pushes, &mut notes);
        ctx.log("maintaining pushes100 with seedd (admin API)");
        let t = Instant::now();
        let maintained = seedd_tests::http_post(
            &seed.admin_url(&format!(
                "/api/v1/repos/rad:{}/maintain",
                pushes100.canonical
            )),
            &[("Authorization", &format!("Bearer {}", seed.token()))],
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
        measure_pushes(&servers[1], "maintained", &mut pushes, &mut notes);
        measure_pushes(&servers[0], "maintained", &mut pushes, &mut notes);
        measure_pushes(&fresh_server, "", &mut pushes, &mut notes);
        drop(fresh_cgi);
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
                    Some(x.1),
                    Some(fresh.1),
                    "lower",
                ));
            }
            rows.push(row(
                "pushes100_bytes_seedd_maintained_vs_fresh",
                w,
                "bytes seedd maintained / fresh",
                "MB",
                Some(seedd_maint.2 as f64 / 1e6),
                Some(fresh.2 as f64 / 1e6),
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
            let mut rps = [None, None];
            let mut cpu_ms = [None, None];
            let mut body = [None, None];
            for (i, s) in servers.iter().enumerate() {
                // With the `Accept-Encoding` git 2.47 (libcurl) sends: a server may answer
                // gzip-compressed (seedd does for large advertisements; http-backend does not).
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
                    "{label} on {set} at {}, {RPS_CONNS} keep-alive connections, {RPS_SECS} s",
                    s.label
                ));
                let (ok, errors, b, w, c) = ctx.rate(s, req.as_bytes(), RPS_CONNS, RPS_SECS);
                rps[i] = Some(ok as f64 / w);
                cpu_ms[i] = (ok > 0).then(|| c * 1000.0 / ok as f64);
                body[i] = Some(b as f64 / 1e3);
                if errors > 0 {
                    notes.push(format!("{label} at {}: {errors} failed requests", s.label));
                }
            }
            let w = format!("{label} {set} ({RPS_CONNS} conns)");
            rows.push(row(
                format!("{key}_{variant}_req_per_s"),
                w.clone(),
                "requests/s",
                "req/s",
                rps[0],
                rps[1],
                "higher",
            ));
            rows.push(row(
                format!("{key}_{variant}_cpu_ms_per_req"),
                w.clone(),
                "server CPU per request",
                "ms",
                cpu_ms[0],
                cpu_ms[1],
                "lower",
            ));
            rows.push(row(
                format!("{key}_{variant}_response_kb"),
                w,
                "response body",
                "kB",
                body[0],
                body[1],
                "",
            ));
        }

        // Floors from the issue.
        let clone_ratio = cold_cpu[0] / cold_cpu[1];
        let clone_ok = clone_ratio.is_finite() && clone_ratio <= 1.2;
        let growth: Vec<f64> = rss
            .iter()
            .map(|(_, b, p, _)| p.saturating_sub(*b) as f64 / 1024.0)
            .collect();
        let peaks: Vec<f64> = rss.iter().map(|(_, _, p, _)| *p as f64 / 1024.0).collect();
        // Flat: the 64 MiB clone raises the peak by less than 8 MiB over the 16 MiB one
        // (buffering the pack would add ≥ 48 MiB).
        let rss_delta = if peaks.len() == 2 {
            peaks[1] - peaks[0]
        } else {
            f64::NAN
        };
        let rss_flat = rss_delta.is_finite() && rss_delta < 8.0;

        // Output: table.
        let git_version = cmd_out(Command::new("git").arg("--version"));
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let mut t = String::new();
        let _ = writeln!(t);
        let _ = writeln!(t, "seedd vs git http-backend (CGI), same repositories, same run — {git_version}, {cpus} CPUs, CLK_TCK {}", ctx.tck);
        let _ = writeln!(
            t,
            "datasets (repack -adb, commit-graph, packed refs): medium {:.1} MB packed ({MEDIUM_COMMITS} commits, {MEDIUM_FILES} files); big16 {:.1} MB; big64 {:.1} MB; refs10k {TAGS} tags; refs100k {TAGS_100K} tags",
            medium.pack_bytes() as f64 / 1e6,
            big16.pack_bytes() as f64 / 1e6,
            big64.pack_bytes() as f64 / 1e6
        );
        let _ = writeln!(t, "ratio = seedd / git; 'better' says which direction is good. Server CPU = Δ(utime+stime+cutime+cstime) of the server process.");
        let _ = writeln!(t);
        write_table(
            &mut t,
            ["workload", "metric", "seedd", "git", "ratio", "unit"],
            [40, 26, 10, 10, 8, 6],
            112,
            rows.iter().map(|r| TableLine {
                group: &r.workload,
                metric: &r.metric,
                seedd: fmt(r.seedd),
                other: fmt(r.git),
                ratio: r.ratio().map_or("".into(), |x| format!("{x:.2}×")),
                unit: r.unit,
                better: r.better,
            }),
        );
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "floor: cold full clone CPU ≤ 1.2× git: {:.2}× → {}",
            clone_ratio,
            if clone_ok { "MET" } else { "NOT MET" }
        );
        let _ = writeln!(
            t,
            "floor: seedd RSS flat as repo size grows: VmHWM {} MiB after the 16 MiB clone, {} MiB after the 64 MiB clone (Δ {:.1} MiB; growth during each clone {}) → {}",
            fmt(peaks.first().copied()),
            fmt(peaks.get(1).copied()),
            rss_delta,
            growth.iter().map(|g| format!("{g:.1}")).collect::<Vec<_>>().join(" / "),
            if rss_flat { "FLAT" } else { "GROWS" }
        );
        // Issue 13 §4 targets.
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "layouts, medium ({CONCURRENT} raw v2 fetches; one cold fetch = median of {rounds_or_one} after a warm-up, for the cache of {rounds_or_one} requests it had not seen):"
        );
        let _ = writeln!(
            t,
            "  {:<18} {:<58} {:>9} {:>8} {:>9} {:>9} {:>8} {:>9} {:>15} {:>15}",
            "server",
            "layout served",
            "MB/s 16",
            "wall 16",
            "CPU 16 s",
            "CPU 1 s",
            "16 / 1",
            "MB 1",
            "1: self+git s",
            "16: self+git s"
        );
        for l in &layouts {
            let _ = writeln!(
                t,
                "  {:<18} {:<58} {:>9.1} {:>8.2} {:>9.2} {:>9.3} {:>7.2}× {:>9.2} {:>7.3}+{:<7.3} {:>7.2}+{:<7.2}",
                l.label,
                l.layout,
                l.thr16,
                l.wall16,
                l.cpu16,
                l.cpu1,
                if l.cpu1 > 0.0 {
                    l.cpu16 / l.cpu1
                } else {
                    f64::NAN
                },
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
            let x = on.thr16 / tuned.thr16;
            target(
                format!("{CONCURRENT} concurrent throughput, seedd+cache ≥ 5× git tuned"),
                x,
                x >= 5.0,
            );
            let x = cached_warm16.0 / tuned.thr16;
            target(
                format!("{CONCURRENT} concurrent throughput, seedd+cache warm ≥ 5× git tuned"),
                x,
                x >= 5.0,
            );
            let x = on.thr16 / naive.thr16;
            target(
                format!("{CONCURRENT} concurrent throughput, seedd+cache ≥ 20× git naive"),
                x,
                x >= 20.0,
            );
            let x = off.thr16 / naive.thr16;
            target(
                format!("{CONCURRENT} concurrent throughput, seedd (cache off) ≥ 20× git naive"),
                x,
                x >= 20.0,
            );
            let x = on.cpu16 / on.cpu1;
            target(
                format!("seedd+cache CPU for {CONCURRENT} ≤ 1.2× CPU for 1"),
                x,
                x <= 1.2,
            );
            let x = on.cpu1 / tuned.cpu1;
            target(
                "one cold clone CPU, seedd+cache ≤ 1.1× git tuned".into(),
                x,
                x <= 1.1,
            );
            let x = off.cpu1 / tuned.cpu1;
            target(
                "one cold clone CPU, seedd (cache off) ≤ 1.1× git tuned".into(),
                x,
                x <= 1.1,
            );
            let x = on.bytes1 as f64 / tuned.bytes1 as f64;
            target(
                "one cold clone bytes, seedd+cache ≤ 1.05× git tuned".into(),
                x,
                x <= 1.05,
            );
            let git_peak = memory[2].2;
            for (label, _, peak, _, _, _) in &memory[..2] {
                let x = peak / git_peak;
                target(
                    format!(
                        "memory (tree RSS, {CONCURRENT} × {}), {label} ≤ 0.1× git",
                        mem_repo.name
                    ),
                    x,
                    x <= 0.1,
                );
            }
            let fresh = pushes[4].1;
            for (i, who) in [(2, "git http-backend"), (3, "seedd")] {
                let x = pushes[i].1 / fresh;
                target(format!("pushes100 maintained by seedd, served by {who}: clone CPU ≤ 1.2× a fresh repack -adb (git)"), x, x <= 1.2);
            }
        }
        let _ = writeln!(
            t,
            "memory, {CONCURRENT} raw v2 fetches of {} ({:.1} MB packed; Σ VmRSS of server + children every 20 ms; MiB before / peak / samples / failed):",
            mem_repo.name,
            mem_repo.pack_bytes() as f64 / 1e6
        );
        for (label, before, peak, samples, fails, anon) in &memory {
            let _ = writeln!(
                t,
                "  {label:<12} {before:>8.1} {peak:>9.1} {samples:>6} {fails:>3}   (peak Σ RssAnon {anon:.1})"
            );
        }
        let _ = writeln!(t, "pushes100 clone (one full raw v2 fetch, median of {rounds_or_one}; server CPU s / MB):");
        for (label, cpu, bytes) in &pushes {
            let _ = writeln!(
                t,
                "  {:<32} {cpu:>7.3} {:>8.2}",
                label.trim(),
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
            "total bench time {elapsed:.0} s (VmHWM at seedd start {:.1} MiB)",
            hwm_at_start as f64 / 1024.0
        );
        print!("{t}");

        // Output: JSON.
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64().floor());
        let json = Json::obj(vec![
            ("schema", Json::Num(1.0)),
            ("unix_time", Json::Num(unix)),
            ("git_version", Json::Str(git_version)),
            ("cpus", Json::Num(cpus as f64)),
            ("clk_tck", Json::Num(ctx.tck)),
            ("duration_s", Json::Num(elapsed)),
            ("seedd_binary", Json::Str(seedd_bin.display().to_string())),
            (
                "settings",
                Json::obj(vec![
                    ("rounds", Json::Num(rounds as f64)),
                    ("concurrent_clones", Json::Num(CONCURRENT as f64)),
                    ("rps_seconds", Json::Num(RPS_SECS)),
                    ("rps_connections", Json::Num(RPS_CONNS as f64)),
                    ("seedd_env", Json::Str("RUST_LOG=info SEEDD_HTTP__PACK_QUEUE_TIMEOUT_MS=600000 SEEDD_HTTP__PACK_QUEUE=64 SEEDD_HTTP__RATE__PER_IP_REQUESTS_PER_SECOND=0 SEEDD_HTTP__RATE__PER_REPO_CONCURRENT_PACKS=0 SEEDD_HTTP__RATE__SHED_NEW_CLONES=false".into())),
                ]),
            ),
            (
                "datasets",
                Json::Arr(
                    repos
                        .iter()
                        .map(|r| {
                            Json::obj(vec![
                                ("name", Json::Str(r.name.clone())),
                                ("rid", Json::Str(format!("rad:{}", r.canonical))),
                                ("head", Json::Str(r.head.clone())),
                                ("pack_bytes", Json::Num(r.pack_bytes() as f64)),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "results",
                Json::Arr(
                    rows.iter()
                        .map(|r| {
                            Json::obj(vec![
                                ("key", Json::Str(r.key.clone())),
                                ("workload", Json::Str(r.workload.clone())),
                                ("metric", Json::Str(r.metric.clone())),
                                ("unit", Json::Str(r.unit.into())),
                                ("seedd", Json::opt(r.seedd)),
                                ("git", Json::opt(r.git)),
                                ("ratio", Json::opt(r.ratio())),
                                ("better", Json::Str(r.better.into())),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "rss",
                Json::Arr(
                    rss.iter()
                        .map(|(name, base, peak, now)| {
                            Json::obj(vec![
                                ("dataset", Json::Str(name.clone())),
                                ("vmhwm_before_kib", Json::Num(*base as f64)),
                                ("vmhwm_after_kib", Json::Num(*peak as f64)),
                                ("vmrss_after_kib", Json::Num(*now as f64)),
                            ])
                        })
                        .chain(std::iter::once(Json::obj(vec![
                            ("hwm_reset_supported", Json::Bool(reset_ok)),
                            ("vmhwm_at_start_kib", Json::Num(hwm_at_start as f64)),
                        ])))
                        .collect(),
                ),
            ),
            (
                "floors",
                Json::obj(vec![
                    ("cold_clone_cpu_ratio", Json::Num(clone_ratio)),
                    ("cold_clone_cpu_max_ratio", Json::Num(1.2)),
                    ("cold_clone_cpu_met", Json::Bool(clone_ok)),
                    ("rss_vmhwm_16mib_mib", Json::opt(peaks.first().copied())),
                    ("rss_vmhwm_64mib_mib", Json::opt(peaks.get(1).copied())),
                    ("rss_delta_mib", Json::Num(rss_delta)),
                    ("rss_flat", Json::Bool(rss_flat)),
                ]),
            ),
            (
                "layouts",
                Json::Arr(
                    layouts
                        .iter()
                        .map(|l| {
                            Json::obj(vec![
                                ("server", Json::Str(l.label.into())),
                                ("layout", Json::Str(l.layout.clone())),
                                ("cpu1_s", Json::Num(l.cpu1)),
                                ("wall1_s", Json::Num(l.wall1)),
                                ("bytes1", Json::Num(l.bytes1 as f64)),
                                ("throughput16_mb_s", Json::Num(l.thr16)),
                                ("wall16_s", Json::Num(l.wall16)),
                                ("cpu16_s", Json::Num(l.cpu16)),
                                ("bytes16", Json::Num(l.bytes16 as f64)),
                                ("failed16", Json::Num(l.fails16 as f64)),
                                ("cpu1_self_s", Json::Num(l.split1.0)),
                                ("cpu1_children_s", Json::Num(l.split1.1)),
                                ("cpu16_self_s", Json::Num(l.split16.0)),
                                ("cpu16_children_s", Json::Num(l.split16.1)),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "memory_tree",
                Json::Arr(
                    memory
                        .iter()
                        .map(|(label, before, peak, samples, fails, anon)| {
                            Json::obj(vec![
                                ("server", Json::Str((*label).into())),
                                ("before_mib", Json::Num(*before)),
                                ("peak_mib", Json::Num(*peak)),
                                ("peak_anon_mib", Json::Num(*anon)),
                                ("samples", Json::Num(*samples as f64)),
                                ("failed", Json::Num(*fails as f64)),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "pushes100",
                Json::obj(vec![
                    ("packs_pushed", Json::Num(packs_pushed as f64)),
                    ("packs_maintained", Json::Num(packs_maintained as f64)),
                    ("maintenance", Json::Str(maintain_note.clone())),
                    (
                        "clone_cpu_s",
                        Json::obj(
                            pushes
                                .iter()
                                .map(|(l, c, _)| (l.trim(), Json::Num(*c)))
                                .collect(),
                        ),
                    ),
                ]),
            ),
            (
                "targets",
                Json::Arr(
                    targets
                        .iter()
                        .map(|(w, v, m)| {
                            Json::obj(vec![
                                ("target", Json::Str(w.clone())),
                                ("ratio", Json::Num(*v)),
                                ("met", Json::Bool(*m)),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("notes", Json::Arr(notes.iter().map(|n| Json::Str(n.clone())).collect())),
        ]);
        let mut out = String::new();
        json.write(&mut out, 0);
        out.push('\n');
        let json_path = target.join("seedd-bench.json");
        std::fs::write(&json_path, seedd_benches::measure::stamped_text(&out)).unwrap();
        println!("JSON: {}", json_path.display());

        drop(cgi);
        drop(seed);
        let _ = std::fs::remove_dir_all(&scratch);
    }
}
