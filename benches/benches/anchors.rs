//! The anchors a user would pick instead of seedd for serving git over HTTPS (issue 29 §2),
//! measured by the rules of §1 (`seedd_benches::measure`), side by side in one run:
//!
//! - **seedd**: defaults (native TLS, default admission, pack cache on). The one setting that
//!   is not a default: `http.rate.trusted_proxies = ["127.0.0.1/32"]`, so that each client's
//!   `X-Forwarded-For` (10.x.y.z) makes the 64 clients 64 addresses, as on the internet.
//! - **git tuned**: `git http-backend` behind an HTTPS CGI bridge (`http1::cgi`, rustls like
//!   seedd) on the same tuned layout (one pack with a bitmap, commit-graph, packed refs).
//! - **git + hook cache** (Gitaly-like): git tuned plus an `uploadpack.packObjectsHook` that
//!   caches `pack-objects` output per request, single-flight (flock + tee into a file keyed by
//!   the repository, the arguments and the request), as Gitaly's pack-objects cache does.
//! - **git defaults**: git with its defaults on a repository that received its history in 50
//!   pushes (`receive.unpackLimit`, `receive.autogc`/`gc.auto`, bitmaps as `gc` writes them for
//!   a bare repository): what an operator gets without tuning.
//!
//! Every server runs in its own cgroup ([`Scope`], restarted for each cold row, so its memory
//! peak and caches start empty) pinned to the server cores; the clients run on the load cores.
//! A clone is what `git clone` asks over HTTPS with protocol v2 (one keep-alive connection:
//! `info/refs`, `ls-refs`, `fetch` of every advertised ref), read by a raw client that checks
//! the pack arrived but does not index it, so 64 clients do not make the row client-bound.
//! One real `git clone` per server checks the answers are valid.
//!
//! Rows, each ≥ 5 rounds with the servers in ABBA order, median [min–max]:
//! 1. one clone, cold (page cache of every server's storage, index and caches evicted; caches
//!    empty), then one warm;
//! 2. 64 concurrent clones, cold (restarted, caches empty, evicted), then 64 warm;
//! 3. an incremental wave: 64 fetches, each client at one of the last 8 tags (`have` sent).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use seedd_benches::http1::{cgi, client};
use seedd_benches::measure::{self, abba, evict, Interval, Pinning, Provenance, Scope, Summary};
use seedd_benches::textgen;
use seedd_benches::{ensure_seedd, profile_dir};
use seedd_tests::{git, pkt, run, stdout, synthetic_repo, write_certs, Seed, SeedOptions};

/// Bump when the dataset changes.
const DATA_VERSION: &str = "anchors-v2";
const COMMITS: usize = 200;
const FILES: usize = 300;
const REWRITES: usize = 7;
const EDITS: usize = 10;
/// Tags on the last commits (the incremental clients start at one of them).
const TAGS: usize = 8;
/// "git defaults" receives the history in this many pushes: more than `gc.autoPackLimit`
/// (50), so `receive.autogc` has run `gc --auto` once (one pack with a bitmap) and the last
/// pushes are packs beside it, as in a repository that lives with git's defaults.
const PUSHES: usize = 60;
/// git defaults takes seconds of CPU per clone: its concurrent rows use at most this many
/// clients (per-clone figures stay comparable; the row says how many).
const DEFAULTS_CLIENTS: usize = 8;

fn main() {
    if cgi::serve_if_asked() {
        return;
    }
    Pinning::pin_self_to_load();
    bench();
}

// ------------------------------------------------------------------------------------------
// Dataset
// ------------------------------------------------------------------------------------------

struct Dataset {
    rid: String,
    /// Storage with the tuned layout (seedd, git tuned, git + hook cache).
    tuned: PathBuf,
    /// GIT_PROJECT_ROOT of git defaults.
    defaults: PathBuf,
    /// The tags' commits, oldest first.
    tags: Vec<String>,
}

fn gd(home: &Path, repo: &Path, args: &[&str]) -> String {
    stdout(&run(git(home).arg("--git-dir").arg(repo).args(args)))
}

fn populate(work: &Path, g: &dyn Fn(&[&str]) -> String) {
    textgen::populate_medium(
        work,
        g,
        &textgen::Medium {
            commits: COMMITS,
            files: FILES,
            rewrites: REWRITES,
            edits: EDITS,
            tag_last: TAGS,
        },
    );
}

fn dataset(cache: &Path, log: &dyn Fn(&str)) -> Dataset {
    let dir = cache.join(DATA_VERSION);
    let manifest = dir.join("manifest.txt");
    if !manifest.exists() {
        let tmp = cache.join(format!("{DATA_VERSION}.tmp"));
        let _ = std::fs::remove_dir_all(&tmp);
        let home = tmp.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let tuned = tmp.join("tuned");
        std::fs::create_dir_all(&tuned).unwrap();
        log("generating the medium repository (200 commits, 300 files, 8 tags) ...");
        let (rid, path) = synthetic_repo(&tuned, "anchors-medium", populate);
        // The tuned layout (performance.md's G-tuned).
        gd(&home, &path, &["repack", "-a", "-d", "-b", "-q"]);
        gd(
            &home,
            &path,
            &["commit-graph", "write", "--reachable", "--no-progress"],
        );
        gd(&home, &path, &["pack-refs", "--all"]);
        // git with its defaults: a bare repository with git's default configuration that
        // receives the first-parent history in PUSHES pushes, then every ref.
        let canonical = rid.trim_start_matches("rad:").to_owned();
        let defaults = tmp.join("defaults").join(&canonical);
        run(git(&home).args(["init", "--bare", "-q"]).arg(&defaults));
        gd(
            &home,
            &defaults,
            &["symbolic-ref", "HEAD", "refs/heads/main"],
        );
        let commits: Vec<String> = gd(
            &home,
            &path,
            &["rev-list", "--reverse", "--first-parent", "refs/heads/main"],
        )
        .lines()
        .map(str::to_owned)
        .collect();
        // `gc.autoDetach=false` only makes receive.autogc's `gc --auto` run before the push
        // returns (the layout it leaves is the same as in the background).
        let push = |refspec: &str| {
            run(git(&home)
                .args(["-c", "gc.autoDetach=false", "--git-dir"])
                .arg(&path)
                .args(["push", "-q"])
                .arg(&defaults)
                .arg(refspec));
        };
        let n = commits.len();
        for k in 1..=PUSHES {
            let oid = &commits[(k * n).div_ceil(PUSHES) - 1];
            push(&format!("+{oid}:refs/heads/main"));
        }
        push("+refs/*:refs/*");
        let objects = gd(&home, &defaults, &["count-objects", "-v"]);
        log(&format!(
            "  git defaults after {PUSHES} pushes: {}",
            objects.replace('\n', ", ")
        ));
        let tags: Vec<String> = (1..=TAGS)
            .map(|t| {
                gd(
                    &home,
                    &path,
                    &["rev-parse", &format!("refs/tags/v{t}^{{commit}}")],
                )
            })
            .collect();
        std::fs::write(
            tmp.join("manifest.txt"),
            format!("{rid}\n{}\n", tags.join(" ")),
        )
        .unwrap();
        let _ = std::fs::remove_dir_all(&home);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&tmp, &dir).unwrap();
    }
    let m = std::fs::read_to_string(&manifest).unwrap();
    let mut lines = m.lines();
    let rid = lines.next().unwrap().to_owned();
    let tags = lines
        .next()
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    Dataset {
        rid,
        tuned: dir.join("tuned"),
        defaults: dir.join("defaults"),
        tags,
    }
}

// ------------------------------------------------------------------------------------------
// Servers
// ------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Seedd,
    GitTuned,
    GitHook,
    GitDefaults,
}

impl Kind {
    const ALL: [Kind; 4] = [
        Kind::Seedd,
        Kind::GitTuned,
        Kind::GitHook,
        Kind::GitDefaults,
    ];
    fn label(self) -> &'static str {
        match self {
            Kind::Seedd => "seedd",
            Kind::GitTuned => "git tuned",
            Kind::GitHook => "git + hook cache",
            Kind::GitDefaults => "git defaults",
        }
    }
    fn key(self) -> &'static str {
        match self {
            Kind::Seedd => "seedd",
            Kind::GitTuned => "git_tuned",
            Kind::GitHook => "git_hook_cache",
            Kind::GitDefaults => "git_defaults",
        }
    }
}

/// Files every server reads: evicted before every cold row (for every server).
struct Paths {
    seedd_data: PathBuf,
    git_tuned: PathBuf,
    git_defaults: PathBuf,
    hook_cache: PathBuf,
}

impl Paths {
    fn all(&self) -> Vec<&Path> {
        vec![
            &self.seedd_data,
            &self.git_tuned,
            &self.git_defaults,
            &self.hook_cache,
        ]
    }
}

struct Env {
    seedd_bin: PathBuf,
    scratch: PathBuf,
    paths: Paths,
    cert: PathBuf,
    key: PathBuf,
    hook_config: PathBuf,
    tls: Arc<rustls::ClientConfig>,
    canonical: String,
}

/// A running server in its scope.
struct Running {
    kind: Kind,
    scope: Arc<Scope>,
    addr: SocketAddr,
    /// `/<rid>.git` (seedd) or `/<rid>` (git).
    path: String,
    seed: Option<Seed>,
    bridge: Option<Child>,
}

impl Drop for Running {
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

/// seedd's refusal counters that are not 0 (`seedd_git_pack_rejected_total{reason}`,
/// `seedd_http_rate_limited_total{scope}`), as `name{label} value`.
fn refusal_counters(seed: &Seed) -> Vec<String> {
    let Ok((_, text)) = seedd_tests::http_get(&seed.admin_url("/metrics"), &[]) else {
        return vec!["(metrics unreadable)".into()];
    };
    text.lines()
        .filter(|l| {
            l.starts_with("seedd_git_pack_rejected_total{")
                || l.starts_with("seedd_http_rate_limited_total{")
        })
        .filter(|l| {
            l.rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(|v| v > 0.0)
        })
        .map(str::to_owned)
        .collect()
}

/// Start `kind` fresh: a new scope, its pack cache (seedd's or the hook's) empty.
fn start(kind: Kind, env: &Env, round: usize) -> Running {
    let scope = Arc::new(Scope::new(&format!("{}-{round}", kind.key())));
    match kind {
        Kind::Seedd => {
            let _ = std::fs::remove_dir_all(env.paths.seedd_data.join("cache"));
            let bin_dir = scope.wrapper_dir(
                &env.seedd_bin,
                &env.scratch.join(format!("bin-{round}")),
                &["seedctl"],
            );
            // Read by the harness when it starts seedd (this thread only starts processes).
            std::env::set_var("SEEDD_TEST_BIN_DIR", &bin_dir);
            let seed = Seed::start(SeedOptions {
                data_dir: Some(env.paths.seedd_data.clone()),
                tls: Some((env.cert.clone(), env.key.clone())),
                extra_config: "[http.rate]\ntrusted_proxies = [\"127.0.0.1/32\"]\n".into(),
                env: vec![("RUST_LOG".into(), "info".into())],
                ..SeedOptions::default()
            });
            std::env::remove_var("SEEDD_TEST_BIN_DIR");
            seed.rescan();
            Running {
                kind,
                scope,
                addr: seed.http,
                path: format!("/{}.git", env.canonical),
                seed: Some(seed),
                bridge: None,
            }
        }
        _ => {
            let root = if kind == Kind::GitDefaults {
                &env.paths.git_defaults
            } else {
                &env.paths.git_tuned
            };
            if kind == Kind::GitHook {
                let _ = std::fs::remove_dir_all(&env.paths.hook_cache);
                std::fs::create_dir_all(&env.paths.hook_cache).unwrap();
            }
            let mut cmd = scope.command(std::env::current_exe().unwrap());
            cmd.arg("--cgi-server")
                .arg(root)
                .arg("0")
                .arg("--tls")
                .arg(&env.cert)
                .arg(&env.key);
            if kind == Kind::GitHook {
                cmd.arg("--git-config").arg(&env.hook_config);
            }
            let (child, addr) = cgi::spawn(cmd, &scope);
            Running {
                kind,
                scope,
                addr,
                path: format!("/{}", env.canonical),
                seed: None,
                bridge: Some(child),
            }
        }
    }
}

/// The hook (`uploadpack.packObjectsHook`): `"$@"` is `git pack-objects …`, stdin the
/// request. Concurrent identical requests wait on the key's lock; the first writes the file.
fn write_hook(dir: &Path, cache: &Path) -> PathBuf {
    let hook = dir.join("pack-objects-cache.sh");
    let script = format!(
        r#"#!/bin/sh
# A single-flight pack-objects cache, as Gitaly's: key = repository, arguments, request.
set -e
dir='{cache}'
req=$(mktemp "$dir/req.XXXXXX")
trap 'rm -f "$req"' EXIT
cat > "$req"
key=$( {{ printf '%s\n' "$GIT_DIR" "$PWD" "$@"; cat "$req"; }} | sha256sum | cut -d' ' -f1)
exec 9>"$dir/$key.lock"
flock 9
if [ ! -s "$dir/$key.pack" ]; then
  "$@" < "$req" > "$dir/$key.tmp"
  mv "$dir/$key.tmp" "$dir/$key.pack"
fi
exec 9>&-
cat "$dir/$key.pack"
"#,
        cache = cache.display()
    );
    std::fs::write(&hook, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.join("hook.gitconfig");
    std::fs::write(
        &config,
        format!("[uploadpack]\n\tpackObjectsHook = {}\n", hook.display()),
    )
    .unwrap();
    config
}

// ------------------------------------------------------------------------------------------
// Clients
// ------------------------------------------------------------------------------------------

/// What one client got.
#[derive(Default, Clone, Copy)]
struct Got {
    ok: bool,
    pack_bytes: u64,
    /// The failing step's HTTP status (0: no answer or not a pack).
    status: u16,
}

fn request(method: &str, addr: SocketAddr, path: &str, client: usize, body: &str) -> Vec<u8> {
    let xff = format!(
        "10.{}.{}.{}",
        (client >> 16) & 255,
        (client >> 8) & 255,
        client & 255
    );
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost:{}\r\nUser-Agent: git/2.47.3\r\nGit-Protocol: version=2\r\nX-Forwarded-For: {xff}\r\n",
        addr.port()
    );
    if method == "POST" {
        let _ = write!(
            r,
            "Content-Type: application/x-git-upload-pack-request\r\nAccept: application/x-git-upload-pack-result\r\nContent-Length: {}\r\n",
            body.len()
        );
    }
    r.push_str("\r\n");
    r.push_str(body);
    r.into_bytes()
}

/// Object ids in an `ls-refs` answer (pkt-lines `<oid> <ref> …`).
fn ls_refs_oids(body: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = body;
    while rest.len() >= 4 {
        let Ok(len) = usize::from_str_radix(std::str::from_utf8(&rest[..4]).unwrap_or("x"), 16)
        else {
            break;
        };
        if len < 4 {
            rest = &rest[4..];
            continue;
        }
        let line = String::from_utf8_lossy(&rest[4..len.min(rest.len())]).into_owned();
        if let Some(oid) = line.split_whitespace().next() {
            if oid.len() == 40 && !out.iter().any(|o| o == oid) {
                out.push(oid.to_owned());
            }
        }
        rest = &rest[len.min(rest.len())..];
    }
    out
}

/// A protocol v2 request body: `command=<command>`, the agent and object format, then one
/// pkt-line per argument.
fn v2_command<S: AsRef<str>>(command: &str, args: &[S]) -> String {
    let mut body = String::new();
    for l in [
        format!("command={command}\n"),
        "agent=git/2.47.3\n".to_owned(),
        "object-format=sha1\n".to_owned(),
    ] {
        body.push_str(&pkt(&l));
    }
    body.push_str("0001");
    for a in args {
        body.push_str(&pkt(&format!("{}\n", a.as_ref())));
    }
    body.push_str("0000");
    body
}

/// A step of a clone: 200 goes on; another status, or no answer, ends it as a failure.
fn answered(r: std::io::Result<(u16, u64)>) -> Result<u64, Got> {
    match r {
        Ok((200, n)) => Ok(n),
        Ok((status, _)) => Err(Got {
            status,
            ..Got::default()
        }),
        Err(_) => Err(Got::default()),
    }
}

/// One clone as git asks it over HTTPS with protocol v2, or with `haves` an incremental fetch
/// of `refs/heads/main`; the pack is read and checked (the answer's `packfile` section and
/// its final flush), not indexed.
fn clone_raw(
    server: &Running,
    tls: &Arc<rustls::ClientConfig>,
    client: usize,
    haves: &[&str],
) -> Got {
    let mut c = client::TlsClient::new(server.addr, Arc::clone(tls));
    let mut body = Vec::new();
    let info = request(
        "GET",
        server.addr,
        &format!("{}/info/refs?service=git-upload-pack", server.path),
        client,
        "",
    );
    if let Err(got) = answered(c.exchange_to(&info, &mut std::io::sink())) {
        return got;
    }
    let ls = v2_command(
        "ls-refs",
        &[
            "peel",
            "symrefs",
            "ref-prefix HEAD",
            "ref-prefix refs/heads/",
            "ref-prefix refs/tags/",
        ],
    );
    let post = |c: &mut client::TlsClient, body: &str, out: &mut Vec<u8>| {
        c.exchange_to(
            &request(
                "POST",
                server.addr,
                &format!("{}/git-upload-pack", server.path),
                client,
                body,
            ),
            out,
        )
    };
    if let Err(got) = answered(post(&mut c, &ls, &mut body)) {
        return got;
    }
    let wants = if haves.is_empty() {
        ls_refs_oids(&body)
    } else {
        // The incremental client wants main's tip only.
        let text = String::from_utf8_lossy(&body).into_owned();
        text.lines()
            .find(|l| l.contains(" refs/heads/main"))
            .and_then(|l| l.get(4..44))
            .map(|o| vec![o.to_owned()])
            .unwrap_or_default()
    };
    if wants.is_empty() {
        return Got::default();
    }
    let mut args: Vec<String> = ["thin-pack", "no-progress", "ofs-delta"]
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
    args.extend(wants.iter().map(|w| format!("want {w}")));
    args.extend(haves.iter().map(|h| format!("have {h}")));
    args.push("done".into());
    let fetch = v2_command("fetch", &args);
    body.clear();
    match answered(post(&mut c, &fetch, &mut body)) {
        Ok(n) => Got {
            ok: body.windows(9).any(|w| w == b"packfile\n") && body.ends_with(b"0000"),
            pack_bytes: n,
            status: 200,
        },
        Err(got) => got,
    }
}

/// `n` clients at once (client i with `haves[i % haves.len()]` when given).
fn wave(server: &Running, tls: &Arc<rustls::ClientConfig>, n: usize, haves: &[String]) -> Vec<Got> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                s.spawn(move || {
                    let h: Vec<&str> = if haves.is_empty() {
                        Vec::new()
                    } else {
                        vec![haves[i % haves.len()].as_str()]
                    };
                    clone_raw(server, tls, i + 1, &h)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

// ------------------------------------------------------------------------------------------
// The bench
// ------------------------------------------------------------------------------------------

/// One measured row of one server in one round.
#[derive(Clone, Copy)]
struct Sample {
    interval: Interval,
    clients: usize,
    ok: usize,
    bytes: u64,
    /// CPU of the bench process (the clients) during the wave, µs.
    load_cpu_usec: u64,
}

impl Sample {
    /// Per answered request: a refused one costs little, and must not dilute the figure.
    fn cpu_ms_per_op(&self) -> f64 {
        if self.ok == 0 {
            return f64::NAN;
        }
        self.interval.cpu_secs() * 1000.0 / self.ok as f64
    }
    fn throughput(&self) -> f64 {
        self.ok as f64 / self.interval.wall.as_secs_f64().max(1e-9)
    }
}

const ROWS: [&str; 5] = [
    "clone1_cold",
    "clone1_warm",
    "clone64_cold",
    "clone64_warm",
    "incremental64",
];

fn row_label(row: &str, n: usize) -> String {
    match row {
        "clone1_cold" => "1 clone, cold".into(),
        "clone1_warm" => "1 clone, warm".into(),
        "clone64_cold" => format!("{n} concurrent clones, cold"),
        "clone64_warm" => format!("{n} concurrent clones, warm"),
        _ => format!("{n} incremental fetches (haves at one of the last {TAGS} tags), warm"),
    }
}

fn bench() {
    let started = Instant::now();
    let log = |m: &str| eprintln!("[{:6.1}s] {m}", started.elapsed().as_secs_f64());
    let mut prov = Provenance::require("anchors");
    let rounds = seedd_benches::env_usize("SEEDD_ANCHORS_ROUNDS", 5);
    let clients = seedd_benches::env_usize("SEEDD_ANCHORS_CLIENTS", 64);
    let profile = profile_dir();
    let target = profile.parent().unwrap().to_owned();
    let cache = target.join("seedd-bench-data");
    std::fs::create_dir_all(&cache).unwrap();
    let seedd_bin = ensure_seedd(&log, &profile);
    let data = dataset(&cache, &log);
    let canonical = data.rid.trim_start_matches("rad:").to_owned();

    let scratch = cache.join(format!("anchors-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    // Each server its own copy (hard links: nobody rewrites a pack in place).
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        run(Command::new("cp").arg("-al").arg(from).arg(to));
    };
    let paths = Paths {
        seedd_data: scratch.join("seedd"),
        git_tuned: scratch.join("git-tuned"),
        git_defaults: scratch.join("git-defaults"),
        hook_cache: scratch.join("hook-cache"),
    };
    copy(&data.tuned, &paths.seedd_data.join("storage"));
    copy(&data.tuned, &paths.git_tuned);
    copy(&data.defaults, &paths.git_defaults);
    std::fs::create_dir_all(&paths.hook_cache).unwrap();
    let (ca, cert, key) = write_certs(&scratch, "anchors");
    let hook_config = write_hook(&scratch, &paths.hook_cache);
    prov.differs("seedd: http.rate.trusted_proxies = [\"127.0.0.1/32\"] (each client's X-Forwarded-For is its address: 64 clients = 64 addresses)");
    prov.differs("seedd: http.tls = a localhost certificate; RUST_LOG=info");
    prov.differs("git tuned / hook / defaults: git http-backend behind the bench's HTTPS CGI bridge (rustls)");
    prov.differs("git + hook cache: uploadpack.packObjectsHook = flock + tee single-flight cache");
    let env = Env {
        seedd_bin,
        scratch: scratch.clone(),
        paths,
        cert,
        key,
        hook_config,
        tls: client::tls_client_config(&ca),
        canonical,
    };

    // Every server answers a real git clone over HTTPS with the same head.
    let home = scratch.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut heads = Vec::new();
    for kind in Kind::ALL {
        let s = start(kind, &env, 0);
        let dest = scratch.join(format!("check-{}", kind.key()));
        let url = format!("https://localhost:{}{}", s.addr.port(), s.path);
        let out = git(&home)
            .env("GIT_SSL_CAINFO", &ca)
            .args(["-c", "protocol.version=2", "clone", "--bare", "-q", &url])
            .arg(&dest)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: git clone {url} failed: {}",
            kind.label(),
            String::from_utf8_lossy(&out.stderr)
        );
        let head = gd(&home, &dest, &["rev-parse", "refs/heads/main"]);
        log(&format!("{}: git clone ok, main at {head}", kind.label()));
        heads.push(head);
        let _ = std::fs::remove_dir_all(&dest);
        drop(s);
    }
    assert!(
        heads.windows(2).all(|w| w[0] == w[1]),
        "heads differ: {heads:?}"
    );

    // samples[row][kind] over rounds.
    let mut samples: Vec<Vec<Vec<Sample>>> = vec![vec![Vec::new(); Kind::ALL.len()]; ROWS.len()];
    let mut errors: Vec<String> = Vec::new();
    for round in 0..rounds {
        for k in abba(round, Kind::ALL.len()) {
            let kind = Kind::ALL[k];
            log(&format!("round {}/{rounds}: {}", round + 1, kind.label()));
            let mut record =
                |row: usize, (got, interval, load_cpu_usec): (Vec<Got>, Interval, u64)| {
                    let ok = got.iter().filter(|g| g.ok).count();
                    if ok < got.len() {
                        let mut by_status = std::collections::BTreeMap::new();
                        for g in got.iter().filter(|g| !g.ok) {
                            *by_status.entry(g.status).or_insert(0usize) += 1;
                        }
                        errors.push(format!(
                        "round {round} {} {}: {} of {} failed (by HTTP status, 0 = no answer or no pack: {by_status:?})",
                        kind.label(),
                        ROWS[row],
                        got.len() - ok,
                        got.len()
                    ));
                    }
                    samples[row][k].push(Sample {
                        interval,
                        clients: got.len(),
                        ok,
                        bytes: got.iter().map(|g| g.pack_bytes).max().unwrap_or(0),
                        load_cpu_usec,
                    });
                };
            // A wave measured on the server's scope, and the clients' own CPU around it.
            let timed = |s: &Running, n: usize, haves: &[String]| {
                let l0 = measure::self_cpu_usec();
                let (got, i) = measure::measure(&s.scope, || wave(s, &env.tls, n, haves));
                (got, i, measure::self_cpu_usec().saturating_sub(l0))
            };
            // 1 clone cold, then warm.
            let s = start(kind, &env, round * 2 + 1);
            evict(&env.paths.all());
            record(0, timed(&s, 1, &[]));
            record(1, timed(&s, 1, &[]));
            drop(s);
            // n clones cold, then warm, then the incremental wave.
            let s = start(kind, &env, round * 2 + 2);
            evict(&env.paths.all());
            let n = if kind == Kind::GitDefaults {
                clients.min(DEFAULTS_CLIENTS)
            } else {
                clients
            };
            record(2, timed(&s, n, &[]));
            record(3, timed(&s, n, &[]));
            record(4, timed(&s, n, &data.tags));
            debug_assert_eq!(s.kind, kind);
            // Which of seedd's limiters refused, if any (a failure names its limiter).
            if let Some(seed) = &s.seed {
                let refusals = refusal_counters(seed);
                if !refusals.is_empty() {
                    errors.push(format!(
                        "round {round} seedd refusals: {}",
                        refusals.join(", ")
                    ));
                }
            }
            drop(s);
        }
    }

    // ---- report
    let sum = |row: usize, k: usize, f: &dyn Fn(&Sample) -> f64| -> Option<Summary> {
        Summary::of(&samples[row][k].iter().map(f).collect::<Vec<_>>())
    };
    let mut t = String::new();
    let _ = writeln!(
        t,
        "anchors: seedd vs the anchors a user would pick, HTTPS, protocol v2"
    );
    let _ = writeln!(t, "{}", prov.line());
    let _ = writeln!(
        t,
        "dataset: {} ({COMMITS} commits, {FILES} files, {TAGS} tags), {rounds} rounds, ABBA order, median [min–max]; CPU = cgroup of the server and all it started; memory.peak = the cgroup's (page cache included); PSS and Σ RSS sampled every 20 ms; busy srv/ld = cores the server's cgroup and the clients (this process, ticks) kept busy during the wave: near 1.00 on one pinned core, that side limits the row",
        data.rid
    );
    let mut json_rows = Vec::new();
    for (r, row) in ROWS.iter().enumerate() {
        let n = if r < 2 { 1 } else { clients };
        let _ = writeln!(t, "\n## {}", row_label(row, n));
        let _ = writeln!(
            t,
            "{:<18} {:>26} {:>26} {:>24} {:>22} {:>22} {:>8} {:>12}",
            "server",
            "CPU ms per op",
            "ops/s",
            "memory.peak MB",
            "PSS peak MB",
            "Σ RSS peak MB",
            "failed",
            "busy srv/ld"
        );
        let mut per_kind = serde_json::Map::new();
        for (k, kind) in Kind::ALL.iter().enumerate() {
            let cpu = sum(r, k, &|s| s.cpu_ms_per_op());
            let thr = sum(r, k, &|s| s.throughput());
            let peak = sum(r, k, &|s| {
                s.interval.memory_peak.map_or(f64::NAN, |b| b as f64 / 1e6)
            });
            let pss = sum(r, k, &|s| s.interval.pss_peak_kib as f64 / 1024.0);
            let rss = sum(r, k, &|s| s.interval.rss_peak_kib as f64 / 1024.0);
            let failed: usize = samples[r][k].iter().map(|s| s.clients - s.ok).sum();
            // Cores busy during the wave: the server's scope, and the clients (the bench).
            let srv_busy = sum(r, k, &|s| {
                s.interval.cpu_secs() / s.interval.wall.as_secs_f64()
            });
            let load_busy = sum(r, k, &|s| {
                s.load_cpu_usec as f64 / 1e6 / s.interval.wall.as_secs_f64()
            });
            let f = |s: &Option<Summary>| s.map_or("-".into(), |s| s.to_string());
            let clients_here = samples[r][k].first().map_or(0, |s| s.clients);
            let label = if clients_here != n {
                format!("{} ({clients_here})", kind.label())
            } else {
                kind.label().to_owned()
            };
            let busy = match (srv_busy, load_busy) {
                (Some(a), Some(b)) => format!("{:.2}/{:.2}", a.median, b.median),
                _ => "-".into(),
            };
            let _ = writeln!(
                t,
                "{:<18} {:>26} {:>26} {:>24} {:>22} {:>22} {:>8} {:>12}",
                label,
                f(&cpu),
                f(&thr),
                f(&peak),
                f(&pss),
                f(&rss),
                failed,
                busy
            );
            let j = |s: &Option<Summary>| s.map_or(Value::Null, |s| s.to_json());
            per_kind.insert(
                kind.key().into(),
                json!({
                    "cpu_ms_per_op": j(&cpu), "ops_per_s": j(&thr), "memory_peak_mb": j(&peak),
                    "pss_peak_mb": j(&pss), "rss_sum_peak_mb": j(&rss), "failed": failed,
                    "server_cores_busy": j(&srv_busy), "load_cores_busy": j(&load_busy),
                    "response_bytes": samples[r][k].first().map_or(0, |s| s.bytes),
                    "clients": clients_here,
                }),
            );
        }
        json_rows.push(json!({ "row": row, "label": row_label(row, n), "servers": per_kind }));
    }

    // Ratios and targets.
    let med = |row: usize, k: usize, f: &dyn Fn(&Sample) -> f64| sum(row, k, f).map(|s| s.median);
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
        _ => None,
    };
    let (seedd, tuned, hook, defaults) = (0, 1, 2, 3);
    // A target is met only if no request of the rows it compares failed.
    let clean = |rows: &[usize]| {
        rows.iter()
            .all(|r| samples[*r][seedd].iter().all(|s| s.ok == s.clients))
    };
    let cpu = |s: &Sample| s.cpu_ms_per_op();
    let thr = |s: &Sample| s.throughput();
    let peak = |s: &Sample| s.interval.memory_peak.map_or(f64::NAN, |b| b as f64);
    let mut targets = Vec::new();
    let mut tlines = String::new();
    let mut target = |name: &str, value: Option<f64>, goal: &str, met: Option<bool>| {
        let verdict = match met {
            Some(true) => "MET",
            Some(false) => "NOT MET",
            None => "n/a",
        };
        let _ = writeln!(
            tlines,
            "target: {name}: {} (target {goal}; met only without failed requests) → {verdict}",
            value.map_or("-".into(), |v| format!("{v:.2}"))
        );
        targets.push(json!({ "target": name, "value": value, "goal": goal, "met": met }));
    };
    let thr_hook = ratio(med(2, seedd, &thr), med(2, hook, &thr));
    target(
        &format!("{clients} cold clones, throughput vs git + hook cache"),
        thr_hook,
        "≥ 2.0×",
        thr_hook.map(|r| r >= 2.0 && clean(&[2])),
    );
    let scaling = ratio(med(2, seedd, &cpu), med(0, seedd, &cpu));
    target(
        &format!("seedd CPU per clone at {clients} / at 1 (cold)"),
        scaling,
        "≤ 1.3",
        scaling.map(|r| r <= 1.3 && clean(&[0, 2])),
    );
    let mem = ratio(med(2, seedd, &peak), med(2, tuned, &peak));
    target(
        &format!("{clients} cold clones, memory.peak vs git tuned"),
        mem,
        "≤ 0.5×",
        mem.map(|r| r <= 0.5 && clean(&[2])),
    );
    let inc = ratio(med(4, seedd, &cpu), med(4, tuned, &cpu));
    target(
        "incremental fetch CPU vs git tuned",
        inc,
        "≤ 0.9×",
        inc.map(|r| r <= 0.9 && clean(&[4])),
    );
    let _ = writeln!(
        t,
        "\nratios (seedd / anchor, medians) and targets (issue 29 §2):"
    );
    t.push_str(&tlines);
    for (name, k) in [
        ("git tuned", tuned),
        ("git + hook cache", hook),
        ("git defaults", defaults),
    ] {
        let _ = writeln!(
            t,
            "vs {name}: CPU/clone 1 cold {}, 1 warm {}, {clients} cold {}, {clients} warm {}; throughput {clients} cold {}, warm {}; memory.peak {clients} cold {}; incremental CPU {}",
            fmt_ratio(ratio(med(0, seedd, &cpu), med(0, k, &cpu))),
            fmt_ratio(ratio(med(1, seedd, &cpu), med(1, k, &cpu))),
            fmt_ratio(ratio(med(2, seedd, &cpu), med(2, k, &cpu))),
            fmt_ratio(ratio(med(3, seedd, &cpu), med(3, k, &cpu))),
            fmt_ratio(ratio(med(2, seedd, &thr), med(2, k, &thr))),
            fmt_ratio(ratio(med(3, seedd, &thr), med(3, k, &thr))),
            fmt_ratio(ratio(med(2, seedd, &peak), med(2, k, &peak))),
            fmt_ratio(ratio(med(4, seedd, &cpu), med(4, k, &cpu))),
        );
    }
    for e in errors.iter().take(20) {
        let _ = writeln!(t, "failure: {e}");
    }
    println!("{t}");
    let out = measure::write_result(
        "anchors",
        &prov,
        json!({ "rounds": rounds, "clients": clients, "rows": json_rows, "targets": targets, "failures": errors, "table": t }),
    );
    log(&format!("wrote {}", out.display()));
    let _ = std::io::stdout().flush();
    let _ = std::fs::remove_dir_all(&scratch);
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.2}×"))
}
