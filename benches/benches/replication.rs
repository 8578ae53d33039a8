//! Side-by-side replication benchmark: `seedd` against the official `radicle-node` 0.21.1, in
//! one run, on loopback, with the same ~50 MB repository held by a real `radicle-node` (the
//! "source"). Prints a table of absolute figures and ratios (seedd / radicle-node) and writes
//! the same figures as JSON to `<target>/seedd-bench-replication.json`. See
//! `benches/README.md`.
//!
//! 1. **Fetch** (rounds, alternating which target goes first): a fresh fetcher — seedd with
//!    `[policy] default = "allow"`, or a fresh radicle-node with seeding policy allow — is
//!    started; then the source dials it (`rad node connect`), sends its inventory, and the
//!    fetcher fetches the repository on its own. Measured from the `rad node connect` to the
//!    moment the source's signed refs (`rad/sigrefs`, `heads/main` of its namespace) are in
//!    the fetcher's storage: wall time, the fetcher's CPU (utime+stime+cutime+cstime, after
//!    its children — `git fetch`, `index-pack`, `upload-pack` — have been reaped), its peak RSS,
//!    and the source's CPU.
//! 2. **Serving**: a server holding the repository (seedd with a copy of the source's storage,
//!    or the source radicle-node itself) and N client radicle-nodes (default 8, seeding policy
//!    block so that they do not fetch on their own) connected to it; then all N run
//!    `rad clone <rid> --seed <server>` at once. Measured: wall time for all N, per-clone wall
//!    time, the server's CPU (incl. children) and the clients' node CPU.
//!
//! Long by design: fetch and serve against radicle-node measured in one run, with the
//! dataset generation and the process accounting they share (see benches/README.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use seedd_benches::procfs::{alive, clk_tck, cpu_ticks, loadavg, reset_hwm, settle, status_kib};
use seedd_benches::{
    cmd_out, ensure_seedd, env_usize, fmt, profile_dir, radicle_version, write_table, TableLine,
};
use seedd_tests::{copy_tree, run, workspace, RadNode, RadNodeOptions, Seed, SeedOptions};
use serde_json::{json, Value};

/// Bump when the generated repository changes, so the cached one is regenerated.
const DATA_VERSION: &str = "replication-v2";
/// The repository: this many files of incompressible bytes, each `BLOB_BYTES` long.
const BLOBS: u64 = 5;
const BLOB_BYTES: usize = 10 << 20;
/// Name of the source node (a fresh identity whose key derives from the name).
const SOURCE: &str = "repsrc";
/// Fetch rounds per target (`SEEDD_BENCH_ROUNDS` overrides).
const ROUNDS: usize = 3;
/// Concurrent `rad clone`s in the serving phase (`SEEDD_BENCH_REPL_CLIENTS` overrides;
/// `SEEDD_BENCH_REPL_SEQUENTIAL=1` runs them one after the other).
const CLIENTS: usize = 8;
/// Storage polling interval while a fetch runs.
const POLL: Duration = Duration::from_millis(50);
/// Longest wait for one fetch.
const FETCH_MAX: Duration = Duration::from_secs(300);
/// Idle time after the processes of a measurement have started, before counters are read.
const QUIET: Duration = Duration::from_secs(1);
/// Idle time after a fetcher has started, before the source dials it: longer than seedd's
/// first sync-task tick (5 s after start), which would otherwise queue a second fetch of the
/// repository while the first one runs.
const FETCH_QUIET: Duration = Duration::from_secs(6);

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    seedd_benches::measure::provenance("replication");
    let started = Instant::now();
    let log = move |msg: &str| eprintln!("[{:6.1}s] {msg}", started.elapsed().as_secs_f64());
    let profile = profile_dir();
    let target = profile.parent().unwrap().to_owned();
    let seedd_bin = ensure_seedd(&log, &profile);
    let tck = clk_tck();
    let rounds = env_usize("SEEDD_BENCH_ROUNDS", ROUNDS).max(1);
    let clients = env_usize("SEEDD_BENCH_REPL_CLIENTS", CLIENTS).max(1);
    let sequential = std::env::var_os("SEEDD_BENCH_REPL_SEQUENTIAL").is_some_and(|v| v != "0");
    let load_before = loadavg();

    let cache = bench_data_dir();
    let ds = dataset(&cache, &log);
    log(&format!(
        "dataset {} ({:.1} MB packed, source {})",
        ds.rid,
        ds.pack_bytes as f64 / 1e6,
        ds.nid
    ));
    let mut notes: Vec<String> = Vec::new();

    // 1. Fetch.
    let mut fetch: [Vec<FetchRun>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [Target::Seedd, Target::Radicle]
        } else {
            [Target::Radicle, Target::Seedd]
        };
        for t in order {
            log(&format!(
                "fetch round {}/{rounds}: {}",
                round + 1,
                t.label()
            ));
            match fetch_once(&ds, t, tck) {
                Ok(r) => {
                    log(&format!(
                        "  {}: wall {:.2} s, CPU {:.2} s (source {:.2} s), VmHWM {:.0} MiB",
                        t.label(),
                        r.wall,
                        r.cpu,
                        r.source_cpu,
                        r.hwm_kib as f64 / 1024.0
                    ));
                    fetch[t.index()].push(r);
                }
                Err(e) => {
                    log(&format!("  {} FAILED: {e}", t.label()));
                    notes.push(format!("fetch round {} {}: {e}", round + 1, t.label()));
                }
            }
        }
    }

    // 2. Serving.
    let mut serve: [Option<ServeRun>; 2] = [None, None];
    for t in [Target::Seedd, Target::Radicle] {
        log(&format!(
            "serving: {clients} {} rad clone from {}",
            if sequential {
                "sequential"
            } else {
                "concurrent"
            },
            t.label()
        ));
        match serve_once(&ds, t, tck, clients, sequential, &log) {
            Ok(r) => {
                log(&format!(
                    "  {}: wall {:.2} s, server CPU {:.2} s, {} ok / {} failed",
                    t.label(),
                    r.wall,
                    r.cpu,
                    r.ok,
                    r.failed.len()
                ));
                for f in &r.failed {
                    notes.push(format!("serving from {}: {f}", t.label()));
                }
                serve[t.index()] = Some(r);
            }
            Err(e) => {
                log(&format!("  {} FAILED: {e}", t.label()));
                notes.push(format!("serving from {}: {e}", t.label()));
            }
        }
    }

    // Rows.
    let mut rows: Vec<Row> = Vec::new();
    let med = |t: usize, f: &dyn Fn(&FetchRun) -> f64| -> Option<f64> {
        let mut v: Vec<f64> = fetch[t].iter().map(f).collect();
        median(&mut v)
    };
    let min = |t: usize, f: &dyn Fn(&FetchRun) -> f64| -> Option<f64> {
        fetch[t].iter().map(f).min_by(f64::total_cmp)
    };
    let w = format!(
        "fetch {:.0} MB (median of {rounds})",
        ds.pack_bytes as f64 / 1e6
    );
    let both = |f: &dyn Fn(usize) -> Option<f64>| (f(0), f(1));
    let (s, r) = both(&|t| med(t, &|x| x.wall));
    rows.push(Row::new(
        "fetch_wall_s",
        &w,
        "wall time",
        "s",
        s,
        r,
        "lower",
    ));
    let (s, r) = both(&|t| min(t, &|x| x.wall));
    rows.push(Row::new(
        "fetch_wall_best_s",
        &w,
        "wall time (best)",
        "s",
        s,
        r,
        "lower",
    ));
    let (s, r) = both(&|t| med(t, &|x| x.cpu));
    rows.push(Row::new(
        "fetch_cpu_s",
        &w,
        "fetcher CPU incl. children",
        "s",
        s,
        r,
        "lower",
    ));
    let (s, r) = both(&|t| med(t, &|x| x.source_cpu));
    rows.push(Row::new(
        "fetch_source_cpu_s",
        &w,
        "source node CPU",
        "s",
        s,
        r,
        "",
    ));
    let (s, r) = both(&|t| med(t, &|x| x.hwm_kib as f64 / 1024.0));
    rows.push(Row::new(
        "fetch_vmhwm_mib",
        &w,
        "fetcher peak RSS (VmHWM)",
        "MiB",
        s,
        r,
        "lower",
    ));
    let (s, r) = both(&|t| med(t, &|x| x.pack_bytes as f64 / 1e6));
    rows.push(Row::new(
        "fetch_stored_pack_mb",
        &w,
        "packs in storage after",
        "MB",
        s,
        r,
        "",
    ));
    let (s, r) = both(&|t| med(t, &|x| x.loose_bytes as f64 / 1e6));
    rows.push(Row::new(
        "fetch_stored_loose_mb",
        &w,
        "loose objects in storage after",
        "MB",
        s,
        r,
        "",
    ));
    let seedd_internal = med(0, &|x| x.seedd_fetch_seconds.unwrap_or(f64::NAN));
    rows.push(Row::new(
        "fetch_seedd_internal_s",
        &w,
        "seedd_fetch_duration_seconds",
        "s",
        seedd_internal,
        None,
        "",
    ));

    let w = format!(
        "serve {clients}× rad clone{}",
        if sequential {
            " (sequential)"
        } else {
            " (concurrent)"
        }
    );
    let sv = |f: &dyn Fn(&ServeRun) -> Option<f64>| {
        (serve[0].as_ref().and_then(f), serve[1].as_ref().and_then(f))
    };
    let (s, r) = sv(&|x| Some(x.wall));
    rows.push(Row::new(
        "serve_wall_s",
        &w,
        "wall time, all clones",
        "s",
        s,
        r,
        "lower",
    ));
    let (s, r) = sv(&|x| median(&mut x.clone_walls.clone()));
    rows.push(Row::new(
        "serve_clone_wall_median_s",
        &w,
        "wall time per clone (median)",
        "s",
        s,
        r,
        "lower",
    ));
    let (s, r) = sv(&|x| Some(x.cpu));
    rows.push(Row::new(
        "serve_cpu_s",
        &w,
        "server CPU incl. children",
        "s",
        s,
        r,
        "lower",
    ));
    let (s, r) = sv(&|x| Some(x.cpu / x.ok.max(1) as f64));
    rows.push(Row::new(
        "serve_cpu_per_clone_s",
        &w,
        "server CPU per clone",
        "s",
        s,
        r,
        "lower",
    ));
    let (s, r) = sv(&|x| Some(x.hwm_kib as f64 / 1024.0));
    rows.push(Row::new(
        "serve_vmhwm_mib",
        &w,
        "server peak RSS (VmHWM)",
        "MiB",
        s,
        r,
        "lower",
    ));
    let (s, r) = sv(&|x| Some(x.clients_cpu));
    rows.push(Row::new(
        "serve_clients_cpu_s",
        &w,
        "client nodes' CPU (sum)",
        "s",
        s,
        r,
        "",
    ));
    let (s, r) = sv(&|x| Some(x.failed.len() as f64));
    rows.push(Row::new(
        "serve_failed",
        &w,
        "failed clones",
        "count",
        s,
        r,
        "lower",
    ));

    // Targets.
    let fetch_wall_ratio = ratio(rows[0].seedd, rows[0].radicle);
    let fetch_cpu_ratio = ratio(rows[2].seedd, rows[2].radicle);
    let met = |r: Option<f64>| match r {
        Some(r) if r <= 1.0 => "MET",
        Some(_) => "NOT MET",
        None => "n/a",
    };

    // Table.
    let git_version = cmd_out(Command::new("git").arg("--version"));
    let rn_version = radicle_version();
    let commit = cmd_out(Command::new("git").arg("-C").arg(workspace()).args([
        "describe",
        "--always",
        "--dirty",
        "--exclude=*",
    ]));
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut t = String::new();
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "seedd ({commit}) vs radicle-node {rn_version}, replication of the same repository, same run — {git_version}, {cpus} CPUs, CLK_TCK {tck}, load average at start {load_before}"
    );
    let _ = writeln!(
        t,
        "repository {}: {BLOBS} files × {} MiB incompressible, {:.1} MB packed; source = radicle-node {SOURCE} ({})",
        ds.rid,
        BLOB_BYTES >> 20,
        ds.pack_bytes as f64 / 1e6,
        ds.nid
    );
    let _ = writeln!(t, "ratio = seedd / radicle-node. CPU = Δ(utime+stime+cutime+cstime) of the process, children reaped. Both log at info.");
    let _ = writeln!(t);
    write_table(
        &mut t,
        ["workload", "metric", "seedd", "radicle", "ratio", "unit"],
        [34, 30, 9, 9, 8, 5],
        110,
        rows.iter().map(|r| TableLine {
            group: &r.workload,
            metric: &r.metric,
            seedd: fmt(r.seedd),
            other: fmt(r.radicle),
            ratio: r.ratio().map_or(String::new(), |x| format!("{x:.2}×")),
            unit: r.unit,
            better: r.better,
        }),
    );
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "target: fetch wall time ≤ 1.0× radicle-node: {} → {}",
        fetch_wall_ratio.map_or("n/a".into(), |r| format!("{r:.2}×")),
        met(fetch_wall_ratio)
    );
    let _ = writeln!(
        t,
        "target: fetch CPU ≤ 1.0× radicle-node: {} → {}",
        fetch_cpu_ratio.map_or("n/a".into(), |r| format!("{r:.2}×")),
        met(fetch_cpu_ratio)
    );
    for (i, runs) in fetch.iter().enumerate() {
        let label = if i == 0 { "seedd" } else { "radicle-node" };
        let _ = writeln!(
            t,
            "fetch rounds {label}: wall {} s; CPU {} s",
            runs.iter()
                .map(|r| format!("{:.2}", r.wall))
                .collect::<Vec<_>>()
                .join(" / "),
            runs.iter()
                .map(|r| format!("{:.2}", r.cpu))
                .collect::<Vec<_>>()
                .join(" / ")
        );
    }
    for n in &notes {
        let _ = writeln!(t, "note: {n}");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let _ = writeln!(
        t,
        "total bench time {elapsed:.0} s; load average at end {}",
        loadavg()
    );
    print!("{t}");

    // JSON.
    let run_json = |r: &FetchRun| {
        json!({
            "wall_s": r.wall,
            "cpu_s": r.cpu,
            "source_cpu_s": r.source_cpu,
            "vmhwm_kib": r.hwm_kib,
            "stored_pack_bytes": r.pack_bytes,
            "stored_loose_object_bytes": r.loose_bytes,
            "seedd_fetch_duration_seconds": r.seedd_fetch_seconds,
            "seedd_fetch_received_bytes": r.seedd_received_bytes,
        })
    };
    let serve_json = |r: &Option<ServeRun>| {
        r.as_ref().map_or(Value::Null, |r| {
            json!({
                "wall_s": r.wall,
                "clone_walls_s": r.clone_walls,
                "cpu_s": r.cpu,
                "vmhwm_kib": r.hwm_kib,
                "clients_cpu_s": r.clients_cpu,
                "ok": r.ok,
                "failed": r.failed,
            })
        })
    };
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let doc = json!({
        "schema": 1,
        "unix_time": unix,
        "git_version": git_version,
        "radicle_node_version": rn_version,
        "cpus": cpus,
        "clk_tck": tck,
        "loadavg_start": load_before,
        "duration_s": elapsed,
        "seedd_binary": seedd_bin.display().to_string(),
        "workspace_commit": commit,
        "settings": {
            "fetch_rounds": rounds,
            "serve_clients": clients,
            "serve_sequential": sequential,
            "poll_ms": POLL.as_millis() as u64,
            "seedd_env": "RUST_LOG=info",
            "seedd_config": "[policy] default = \"allow\"",
            "radicle_node_log_level": "info",
        },
        "dataset": {
            "rid": ds.rid,
            "source_nid": ds.nid,
            "head": ds.head,
            "blobs": BLOBS,
            "blob_bytes": BLOB_BYTES,
            "pack_bytes": ds.pack_bytes,
            "cache": ds.dir.display().to_string(),
        },
        "results": rows.iter().map(|r| json!({
            "key": r.key,
            "workload": r.workload,
            "metric": r.metric,
            "unit": r.unit,
            "seedd": r.seedd,
            "radicle_node": r.radicle,
            "ratio": r.ratio(),
            "better": r.better,
        })).collect::<Vec<_>>(),
        "targets": {
            "fetch_wall_ratio": fetch_wall_ratio,
            "fetch_wall_max_ratio": 1.0,
            "fetch_wall_met": fetch_wall_ratio.is_some_and(|r| r <= 1.0),
            "fetch_cpu_ratio": fetch_cpu_ratio,
            "fetch_cpu_met": fetch_cpu_ratio.is_some_and(|r| r <= 1.0),
        },
        "fetch_rounds": {
            "seedd": fetch[0].iter().map(run_json).collect::<Vec<_>>(),
            "radicle_node": fetch[1].iter().map(run_json).collect::<Vec<_>>(),
        },
        "serve": {
            "seedd": serve_json(&serve[0]),
            "radicle_node": serve_json(&serve[1]),
        },
        "notes": notes,
    });
    let path = target.join("seedd-bench-replication.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&seedd_benches::measure::stamped(&doc)).unwrap() + "\n",
    )
    .unwrap();
    println!("JSON: {}", path.display());
}

// ------------------------------------------------------------------------------------------
// The two targets
// ------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Target {
    Seedd,
    Radicle,
}

impl Target {
    fn label(self) -> &'static str {
        match self {
            Target::Seedd => "seedd",
            Target::Radicle => "radicle-node",
        }
    }

    fn index(self) -> usize {
        match self {
            Target::Seedd => 0,
            Target::Radicle => 1,
        }
    }
}

fn start_seedd(data_dir: Option<PathBuf>) -> Seed {
    Seed::start(SeedOptions {
        extra_config: "[policy]\ndefault = \"allow\"\n".into(),
        // The production default level; the harness default is debug.
        env: vec![("RUST_LOG".into(), "info".into())],
        data_dir,
        ..SeedOptions::default()
    })
}

struct FetchRun {
    wall: f64,
    cpu: f64,
    source_cpu: f64,
    hwm_kib: u64,
    pack_bytes: u64,
    loose_bytes: u64,
    seedd_fetch_seconds: Option<f64>,
    seedd_received_bytes: Option<f64>,
}

/// One fetch of the dataset from a fresh source node by a fresh `target`.
fn fetch_once(ds: &Dataset, target: Target, tck: f64) -> Result<FetchRun, String> {
    let source = start_source(ds);
    let scratch = tempfile::tempdir().unwrap();
    match target {
        Target::Seedd => {
            let seed = start_seedd(None);
            let repo = seed.storage().join(&ds.canonical);
            let r = measure_fetch(
                ds,
                &source,
                &seed.p2p_peer(),
                seed.child.id(),
                &repo,
                tck,
                scratch.path(),
            );
            let mut r =
                r.map_err(|e| format!("{e}\nseedd log (tail):\n{}", tail(&seed.logs(), 30)))?;
            // The fetch is counted once seedd has finished it.
            let counted = wait_until(Duration::from_secs(30), || {
                seed.metric("seedd_fetches_total", &["result=\"ok\""]) >= 1.0
            });
            if !counted {
                return Err(format!(
                    "refs present but seedd_fetches_total{{result=\"ok\"}} stays 0; log:\n{}",
                    tail(&seed.logs(), 30)
                ));
            }
            r.seedd_fetch_seconds = Some(seed.metric("seedd_fetch_duration_seconds_sum", &[]));
            r.seedd_received_bytes = Some(seed.metric("seedd_fetch_received_bytes_total", &[]));
            drop(seed);
            Ok(r)
        }
        Target::Radicle => {
            let fetcher = start_node(node_dir(), "repfetch", &[], &allow_all());
            let repo = fetcher.home.join("storage").join(&ds.canonical);
            let r = measure_fetch(
                ds,
                &source,
                &fetcher.peer(),
                fetcher.child.id(),
                &repo,
                tck,
                scratch.path(),
            );
            r.map_err(|e| {
                format!(
                    "{e}\nradicle-node log (tail):\n{}",
                    tail(&fetcher.logs(), 30)
                )
            })
        }
    }
}

/// The source dials the fetcher; the fetcher fetches on the source's inventory announcement.
/// Timed until the source's signed refs are in `repo`.
fn measure_fetch(
    ds: &Dataset,
    source: &RadNode,
    fetcher_peer: &str,
    pid: u32,
    repo: &Path,
    tck: f64,
    scratch: &Path,
) -> Result<FetchRun, String> {
    let spid = source.child.id();
    // The source's signed refs as it serves them (it may migrate `rad/sigrefs` at start).
    let src_repo = source.home.join("storage").join(&ds.canonical);
    let expected: Vec<(String, String)> = ds
        .expected
        .iter()
        .map(|(name, _)| {
            read_ref(&src_repo, name)
                .map(|oid| (name.clone(), oid))
                .ok_or_else(|| format!("{name} missing in the source's storage"))
        })
        .collect::<Result<_, _>>()?;
    std::thread::sleep(FETCH_QUIET);
    settle(pid);
    settle(spid);
    reset_hwm(pid);
    let c0 = cpu_ticks(pid);
    let s0 = cpu_ticks(spid);
    let t0 = Instant::now();
    let out = source.rad_in(
        scratch,
        &["node", "connect", fetcher_peer, "--timeout", "30s"],
    );
    if !out.status.success() {
        return Err(format!("rad node connect failed: {}", text(&out)));
    }
    loop {
        if expected
            .iter()
            .all(|(name, oid)| read_ref(repo, name).as_deref() == Some(oid.as_str()))
        {
            break;
        }
        if t0.elapsed() > FETCH_MAX {
            return Err(format!("not fetched after {FETCH_MAX:?}"));
        }
        if !alive(pid) {
            return Err("the fetcher exited".into());
        }
        std::thread::sleep(POLL);
    }
    let wall = t0.elapsed().as_secs_f64();
    settle(pid);
    settle(spid);
    let c1 = cpu_ticks(pid);
    let s1 = cpu_ticks(spid);
    Ok(FetchRun {
        wall,
        cpu: c1.saturating_sub(c0) as f64 / tck,
        source_cpu: s1.saturating_sub(s0) as f64 / tck,
        hwm_kib: status_kib(pid, "VmHWM"),
        pack_bytes: pack_bytes(repo),
        loose_bytes: loose_bytes(repo),
        seedd_fetch_seconds: None,
        seedd_received_bytes: None,
    })
}

struct ServeRun {
    wall: f64,
    clone_walls: Vec<f64>,
    cpu: f64,
    hwm_kib: u64,
    clients_cpu: f64,
    ok: usize,
    failed: Vec<String>,
}

/// `clients` radicle-nodes clone the dataset from a server holding it.
fn serve_once(
    ds: &Dataset,
    target: Target,
    tck: f64,
    clients: usize,
    sequential: bool,
    log: &dyn Fn(&str),
) -> Result<ServeRun, String> {
    match target {
        Target::Seedd => {
            let data = tempfile::tempdir().unwrap();
            copy_tree(
                &ds.home.join("storage").join(&ds.canonical),
                &data.path().join("storage").join(&ds.canonical),
            );
            let seed = start_seedd(Some(data.path().to_owned()));
            seed.rescan();
            let (nid, peer) = (seed.nid(), seed.p2p_peer());
            let r = clone_from(
                ds,
                &nid,
                &peer,
                seed.child.id(),
                tck,
                clients,
                sequential,
                log,
            );
            r.map_err(|e| format!("{e}\nseedd log (tail):\n{}", tail(&seed.logs(), 30)))
        }
        Target::Radicle => {
            let server = start_source(ds);
            let r = clone_from(
                ds,
                &server.nid,
                &server.peer(),
                server.child.id(),
                tck,
                clients,
                sequential,
                log,
            );
            r.map_err(|e| {
                format!(
                    "{e}\nradicle-node log (tail):\n{}",
                    tail(&server.logs(), 30)
                )
            })
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn clone_from(
    ds: &Dataset,
    server_nid: &str,
    server_peer: &str,
    pid: u32,
    tck: f64,
    clients: usize,
    sequential: bool,
    log: &dyn Fn(&str),
) -> Result<ServeRun, String> {
    let nodes: Vec<RadNode> = (0..clients)
        .map(|i| {
            start_node(
                node_dir(),
                &format!("repc{i}"),
                &[server_peer.to_owned()],
                &json!({ "default": "block" }),
            )
        })
        .collect();
    let route = (ds.rid.clone(), server_nid.to_owned());
    for n in &nodes {
        if !wait_until(Duration::from_secs(60), || n.routing().contains(&route)) {
            log(&format!(
                "  WARNING: {} does not list the server as a seed of the repository",
                n.name
            ));
        }
    }
    let work = tempfile::tempdir().unwrap();
    std::thread::sleep(QUIET);
    settle(pid);
    for n in &nodes {
        settle(n.child.id());
    }
    reset_hwm(pid);
    let c0 = cpu_ticks(pid);
    let k0: u64 = nodes.iter().map(|n| cpu_ticks(n.child.id())).sum();
    let clone = |n: &RadNode, i: usize| -> (f64, Output) {
        let t = Instant::now();
        let out = n.rad_in(
            work.path(),
            &[
                "clone",
                &ds.rid,
                &format!("c{i}"),
                "--seed",
                server_nid,
                "--timeout",
                "300s",
            ],
        );
        (t.elapsed().as_secs_f64(), out)
    };
    let t0 = Instant::now();
    let results: Vec<(f64, Output)> = if sequential {
        nodes.iter().enumerate().map(|(i, n)| clone(n, i)).collect()
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = nodes
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let clone = &clone;
                    s.spawn(move || clone(n, i))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    };
    let wall = t0.elapsed().as_secs_f64();
    settle(pid);
    for n in &nodes {
        settle(n.child.id());
    }
    let c1 = cpu_ticks(pid);
    let k1: u64 = nodes.iter().map(|n| cpu_ticks(n.child.id())).sum();
    let hwm_kib = status_kib(pid, "VmHWM");
    let mut failed = Vec::new();
    let mut clone_walls = Vec::new();
    for (i, (secs, out)) in results.iter().enumerate() {
        let head = nodes[i].git_in(&work.path().join(format!("c{i}")), &["rev-parse", "HEAD"]);
        let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
        if out.status.success() && head == ds.head {
            clone_walls.push(*secs);
        } else {
            failed.push(format!(
                "client {i}: status {}, HEAD {head:?}: {}",
                out.status,
                tail(&text(out), 8)
            ));
        }
    }
    Ok(ServeRun {
        wall,
        ok: clone_walls.len(),
        clone_walls,
        cpu: c1.saturating_sub(c0) as f64 / tck,
        hwm_kib,
        clients_cpu: k1.saturating_sub(k0) as f64 / tck,
        failed,
    })
}

// ------------------------------------------------------------------------------------------
// radicle-node processes
// ------------------------------------------------------------------------------------------

fn allow_all() -> Value {
    json!({ "default": "allow", "scope": "all" })
}

/// A short directory under /tmp (the control socket path must stay under 108 bytes).
fn node_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("rb")
        .tempdir_in("/tmp")
        .unwrap()
}

/// The source node, from a fresh copy of the cached home.
fn start_source(ds: &Dataset) -> RadNode {
    let dir = node_dir();
    copy_tree(&ds.home, &dir.path().join(SOURCE));
    start_node(dir, SOURCE, &[], &allow_all())
}

/// Starts `radicle-node` for `dir/<name>` (a fresh identity when that home does not exist,
/// with the key derived from the name as in the test harness): network test, static peers,
/// loopback listener, `connect` peers, the given seeding policy, log level info.
fn start_node(dir: tempfile::TempDir, name: &str, connect: &[String], seeding: &Value) -> RadNode {
    let _ = std::fs::remove_file(dir.path().join(name).join("node").join("control.sock"));
    RadNode::start_with(
        name,
        connect,
        RadNodeOptions {
            dir: Some(dir),
            log_level: "info".into(),
            seeding_policy: seeding.clone(),
            wait_listening: true,
            ..RadNodeOptions::default()
        },
    )
}

/// SIGTERM, then wait (SIGKILL after 20 s).
fn stop_node(node: &mut RadNode) {
    let _ = Command::new("kill")
        .args(["-TERM", &node.child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.child.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = node.child.kill();
            let _ = node.child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ------------------------------------------------------------------------------------------
// Dataset
// ------------------------------------------------------------------------------------------

struct Dataset {
    /// Cache directory of this data version.
    dir: PathBuf,
    /// The source's RAD_HOME (node stopped), copied for every run.
    home: PathBuf,
    rid: String,
    canonical: String,
    nid: String,
    head: String,
    pack_bytes: u64,
    /// Refs (name, oid) whose presence in a fetcher's storage means "fetched".
    expected: Vec<(String, String)>,
}

/// `$SEEDD_BENCH_DATA` or `~/.cache/seedd/bench-data`.
fn bench_data_dir() -> PathBuf {
    std::env::var_os("SEEDD_BENCH_DATA").map_or_else(
        || {
            std::env::var_os("HOME")
                .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
                .join(".cache/seedd/bench-data")
        },
        PathBuf::from,
    )
}

fn dataset(cache: &Path, log: &dyn Fn(&str)) -> Dataset {
    let dir = cache.join(DATA_VERSION);
    let manifest = dir.join("manifest.json");
    if let Some(v) = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
    {
        if dir.join("home").join(SOURCE).is_dir() {
            return Dataset::load(&dir, &v);
        }
    }
    log(&format!(
        "generating the repository ({BLOBS} × {} MiB) with rad init in {}",
        BLOB_BYTES >> 20,
        dir.display()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut node = start_node(node_dir(), SOURCE, &[], &allow_all());
    let proj = node.dir.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let ok = |out: Output, what: &str| {
        assert!(out.status.success(), "{what} failed: {}", text(&out));
    };
    ok(
        node.git_in(&proj, &["init", "-q", "-b", "main"]),
        "git init",
    );
    for i in 0..BLOBS {
        std::fs::write(
            proj.join(format!("blob{i}")),
            noise(BLOB_BYTES, 0x9e37_79b9_7f4a_7c15 ^ (i + 1)),
        )
        .unwrap();
    }
    std::fs::write(proj.join("README"), "replication bench\n").unwrap();
    ok(node.git_in(&proj, &["add", "."]), "git add");
    ok(
        node.git_in(&proj, &["commit", "-q", "-m", "data"]),
        "git commit",
    );
    ok(
        node.rad_in(
            &proj,
            &[
                "init",
                "--name",
                "replbench",
                "--description",
                "replication bench",
                "--default-branch",
                "main",
                "--public",
                "--no-confirm",
            ],
        ),
        "rad init",
    );
    let rid = String::from_utf8_lossy(&node.rad_in(&proj, &["."]).stdout)
        .trim()
        .to_owned();
    assert!(rid.starts_with("rad:z"), "rad . → {rid:?}");
    let head = String::from_utf8_lossy(&node.git_in(&proj, &["rev-parse", "HEAD"]).stdout)
        .trim()
        .to_owned();
    let nid = node.nid.clone();
    stop_node(&mut node);
    // Start it once more: radicle-node migrates the `rad/sigrefs` that `rad init` wrote ("force
    // feature level parent") at its first start; the cached home keeps the migrated refs.
    let again = node_dir();
    copy_tree(&node.home, &again.path().join(SOURCE));
    drop(node);
    let mut node = start_node(again, SOURCE, &[], &allow_all());
    stop_node(&mut node);
    let home = dir.join("home").join(SOURCE);
    copy_tree(&node.home, &home);
    drop(node);
    let _ = std::fs::remove_file(home.join("node").join("control.sock"));
    // One pack, as a seed that has held the repository for a while would have (`rad init` leaves
    // these few large objects loose, and every upload-pack would then deflate 50 MB afresh).
    run(seedd_tests::git(&dir)
        .arg("-C")
        .arg(home.join("storage").join(rid.trim_start_matches("rad:")))
        .args(["repack", "-a", "-d", "-q"]));
    let v = json!({ "rid": rid, "nid": nid, "head": head });
    std::fs::write(&manifest, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    Dataset::load(&dir, &v)
}

impl Dataset {
    fn load(dir: &Path, v: &Value) -> Dataset {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        let (rid, nid, head) = (s("rid"), s("nid"), s("head"));
        let canonical = rid.trim_start_matches("rad:").to_owned();
        let home = dir.join("home").join(SOURCE);
        let repo = home.join("storage").join(&canonical);
        let expected: Vec<(String, String)> = ["refs/rad/sigrefs", "refs/heads/main"]
            .iter()
            .map(|r| {
                let name = format!("refs/namespaces/{nid}/{r}");
                let oid = read_ref(&repo, &name)
                    .unwrap_or_else(|| panic!("{name} missing in {}", repo.display()));
                (name, oid)
            })
            .collect();
        assert_eq!(expected[1].1, head, "cached dataset inconsistent");
        Dataset {
            dir: dir.to_owned(),
            pack_bytes: pack_bytes(&repo) + loose_bytes(&repo),
            home,
            rid,
            canonical,
            nid,
            head,
            expected,
        }
    }
}

/// Deterministic incompressible bytes (xorshift), so the pack is as large as the data.
fn noise(len: usize, mut state: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A ref's oid in a bare repository: loose file, else `packed-refs`.
fn read_ref(repo: &Path, name: &str) -> Option<String> {
    if let Ok(s) = std::fs::read_to_string(repo.join(name)) {
        let s = s.trim();
        if s.len() >= 40 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Some(s.to_owned());
        }
    }
    let packed = std::fs::read_to_string(repo.join("packed-refs")).ok()?;
    packed.lines().find_map(|l| {
        let (oid, r) = l.split_once(' ')?;
        (r == name && !oid.starts_with('#') && !oid.starts_with('^')).then(|| oid.to_owned())
    })
}

/// Total size of `objects/pack/*.pack`.
fn pack_bytes(repo: &Path) -> u64 {
    std::fs::read_dir(repo.join("objects/pack"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Total size of loose objects (`objects/xx/*`).
fn loose_bytes(repo: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(repo.join("objects")) else {
        return 0;
    };
    rd.flatten()
        .filter(|e| e.file_name().len() == 2)
        .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

// ------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------

struct Row {
    key: String,
    workload: String,
    metric: String,
    unit: &'static str,
    seedd: Option<f64>,
    radicle: Option<f64>,
    /// "lower" or "higher" is better; "" for informational rows.
    better: &'static str,
}

impl Row {
    fn new(
        key: &str,
        workload: &str,
        metric: &str,
        unit: &'static str,
        seedd: Option<f64>,
        radicle: Option<f64>,
        better: &'static str,
    ) -> Row {
        Row {
            key: key.into(),
            workload: workload.into(),
            metric: metric.into(),
            unit,
            seedd: seedd.filter(|v| v.is_finite()),
            radicle: radicle.filter(|v| v.is_finite()),
            better,
        }
    }

    fn ratio(&self) -> Option<f64> {
        ratio(self.seedd, self.radicle)
    }
}

fn ratio(s: Option<f64>, r: Option<f64>) -> Option<f64> {
    match (s, r) {
        (Some(s), Some(r)) if r > 0.0 && s.is_finite() => Some(s / r),
        _ => None,
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Polls `cond` every 100 ms; whether it became true within `timeout`.
fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
