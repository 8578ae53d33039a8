//! Side-by-side replication benchmark: `seedd` against the official `radicle-node` 0.21.1, in
//! one run, on loopback, with the same ~50 MB repository held by a real `radicle-node` (the
//! "source"). Prints a table of absolute figures and ratios (seedd / radicle-node) and writes
//! the same figures as JSON to `<target>/seedd-bench-replication.json`. See
//! `benches/README.md` and `benches/runs/replication.md`.
//!
//! Measured by the rules of issue 29 §1 (`seedd_benches::measure`): the measured server (the
//! fetcher, then the serving node) runs in its own cgroup ([`Scope`], a new one per start,
//! pinned to the server cores); its CPU is the cgroup's (every process it starts included),
//! its memory the cgroup's peak and the PSS of its processes (Σ VmRSS as a secondary column).
//! The bench, the source node and the client nodes run on the load cores; the source and the
//! clients have scopes of their own (moved to the load cores) for their informational CPU.
//! Rounds alternate the targets in ABBA order; figures are median [min–max].
//!
//! 1. **Fetch** (`SEEDD_BENCH_ROUNDS` rounds, default 3 — below the rules' 5 because each
//!    round replicates 50 MB twice; recorded): a fresh fetcher — seedd with
//!    `[policy] default = "allow"`, or a fresh radicle-node with seeding policy allow — is
//!    started; then the source dials it (`rad node connect`), sends its inventory, and the
//!    fetcher fetches the repository on its own. Wall time from the `rad node connect` to the
//!    moment the source's signed refs (`rad/sigrefs`, `heads/main` of its namespace) are in the
//!    fetcher's storage; the fetcher's CPU and memory over a window that goes on until the
//!    fetch is done and the fetcher is idle again (seedd: the fetch counted, re-index and
//!    after-fetch steps done), so what the fetch triggered is counted; the source's CPU.
//! 2. **Serving** (the same rounds): a server holding the repository (seedd with a copy of the
//!    source's storage, or the source radicle-node itself) and N client radicle-nodes (default
//!    8, seeding policy block so that they do not fetch on their own) connected to it; then
//!    all N run `rad clone <rid> --seed <server>` at once. Measured: wall time for all N,
//!    per-clone wall time, the server's CPU and memory (until idle after the last clone) and
//!    the clients' CPU. Warm: the server's storage was just copied (in the page cache).
//!
//! Long by design: fetch and serve against radicle-node measured in one run, with the
//! dataset generation they share (see benches/runs/replication.md).
//! 3. **Bulk** (`replication/bulk.rs`): a new seed following 2,000 repositories fetches them
//!    from one source radicle-node, against a radicle-node following the same set.
//!
//! 4. **Held** (`replication/bulk.rs`): the same 2,000 into seedd already holding 1k and 100k
//!    generated repositories (`SEEDD_BENCH_BULK_HELD`); CPU per new repository at 100k against
//!    1k. The 100k data dir is generated and indexed once (cached in the bench data directory).
//!
//! `SEEDD_BENCH_REPL_ONLY=fetch,serve,bulk,held` (any of them) runs only those phases
//! (recorded).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "replication/bulk.rs"]
mod bulk;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use seedd_benches::measure::{self, Interval, Pinning, Scope, Summary};
use seedd_benches::procfs::{alive, loadavg};
use seedd_benches::{
    cmd_out, ensure_seedd, env_usize, fmt, profile_dir, radicle_version, stop_child, write_table,
    TableLine,
};
use seedd_tests::{copy_tree, radicle_bin, run, RadNode, RadNodeOptions, Seed, SeedOptions};
use serde_json::{json, Value};

/// Bump when the generated repository changes, so the cached one is regenerated.
const DATA_VERSION: &str = "replication-v2";
/// The repository: this many files of incompressible bytes, each `BLOB_BYTES` long.
const BLOBS: u64 = 5;
const BLOB_BYTES: usize = 10 << 20;
/// Name of the source node (a fresh identity whose key derives from the name).
const SOURCE: &str = "repsrc";
/// Rounds per target, fetch and serving (`SEEDD_BENCH_ROUNDS` overrides). Below the rules'
/// 5: a round replicates 50 MB per target and serves it to `CLIENTS` nodes (recorded with
/// `measure::record_override`).
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
/// Longest wait for a scope to become idle (under 2 % of a core over 500 ms).
const IDLE_MAX: Duration = Duration::from_secs(60);
/// The targets, in the order of [`Target::index`].
const LABELS: [&str; 2] = ["seedd", "radicle-node"];

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    let prov = measure::provenance("replication");
    // The bench, its `rad`/`git` commands, the source and the clients on the load cores.
    Pinning::pin_self_to_load();
    let started = Instant::now();
    let log = move |msg: &str| eprintln!("[{:6.1}s] {msg}", started.elapsed().as_secs_f64());
    let profile = profile_dir();
    let target = profile.parent().unwrap().to_owned();
    let seedd_bin = ensure_seedd(&log, &profile);
    let rounds = env_usize("SEEDD_BENCH_ROUNDS", ROUNDS).max(1);
    let clients = env_usize("SEEDD_BENCH_REPL_CLIENTS", CLIENTS).max(1);
    let sequential = std::env::var_os("SEEDD_BENCH_REPL_SEQUENTIAL").is_some_and(|v| v != "0");
    if rounds < 5 {
        measure::record_override(&format!(
            "replication: {rounds} rounds per target (fewer than 5{}; a round replicates the \
             50 MB repository per target and serves it to {clients} clients)",
            if rounds == ROUNDS {
                ": the bench's default"
            } else {
                ": SEEDD_BENCH_ROUNDS"
            }
        ));
    }
    if clients != CLIENTS {
        measure::record_override(&format!(
            "replication: SEEDD_BENCH_REPL_CLIENTS = {clients} (default {CLIENTS})"
        ));
    }
    if sequential {
        measure::record_override(
            "replication: SEEDD_BENCH_REPL_SEQUENTIAL=1 (clones one at a time)",
        );
    }
    measure::record_config_diff(
        "seedd: [policy] default = \"allow\"; listeners on 127.0.0.1:<free port>; RUST_LOG=info \
         (the test harness's Seed::start settings)",
    );
    measure::record_config_diff(
        "radicle-node: network = test, peers static, preferredSeeds [], externalAddresses [], \
         listen 127.0.0.1:<free port>, seedingPolicy allow/all (source, fetcher) or block \
         (clients), --log-level info (the test harness's RadNode settings)",
    );
    let only = std::env::var("SEEDD_BENCH_REPL_ONLY").ok();
    if let Some(o) = &only {
        measure::record_override(&format!("replication: SEEDD_BENCH_REPL_ONLY={o}"));
    }
    let phase = |p: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|x| x.trim() == p))
    };
    let load_before = loadavg();

    let cache = bench_data_dir();
    let ds = dataset(&cache, &log);
    log(&format!(
        "dataset {} ({:.1} MB packed, source {})",
        ds.rid,
        ds.pack_bytes as f64 / 1e6,
        ds.nid
    ));
    log(measure::cgroup_method());
    let mut notes: Vec<String> = Vec::new();

    // 1. Fetch.
    let mut fetch: [Vec<FetchRun>; 2] = [Vec::new(), Vec::new()];
    for round in (0..rounds).filter(|_| phase("fetch")) {
        for ti in measure::abba(round, 2) {
            let t = Target::ALL[ti];
            log(&format!(
                "fetch round {}/{rounds}: {}",
                round + 1,
                t.label()
            ));
            match fetch_once(&ds, t, &seedd_bin) {
                Ok(r) => {
                    log(&format!(
                        "  {}: wall {:.2} s (window {:.2} s{}), CPU {:.2} s (source {:.2} s), \
                         memory.peak {} MiB, PSS {:.0} MiB, Σ RSS {:.0} MiB",
                        t.label(),
                        r.wall,
                        r.window,
                        if r.settled {
                            ""
                        } else {
                            ", NOT idle at its end"
                        },
                        r.cpu,
                        r.source_cpu,
                        fmt(r.memory_peak_mib),
                        r.pss_mib,
                        r.rss_mib
                    ));
                    if !r.settled {
                        notes.push(format!(
                            "fetch round {} {}: the fetcher was still busy {IDLE_MAX:?} after \
                             the fetch; its CPU is a lower bound",
                            round + 1,
                            t.label()
                        ));
                    }
                    fetch[ti].push(r);
                }
                Err(e) => {
                    log(&format!("  {} FAILED: {e}", t.label()));
                    notes.push(format!("fetch round {} {}: {e}", round + 1, t.label()));
                }
            }
        }
    }

    // 2. Serving.
    let mut serve: [Vec<ServeRun>; 2] = [Vec::new(), Vec::new()];
    for round in (0..rounds).filter(|_| phase("serve")) {
        for ti in measure::abba(round, 2) {
            let t = Target::ALL[ti];
            log(&format!(
                "serving round {}/{rounds}: {clients} {} rad clone from {}",
                round + 1,
                if sequential {
                    "sequential"
                } else {
                    "concurrent"
                },
                t.label()
            ));
            match serve_once(&ds, t, &seedd_bin, clients, sequential, &log) {
                Ok(r) => {
                    log(&format!(
                        "  {}: wall {:.2} s, server CPU {:.2} s, memory.peak {} MiB, PSS {:.0} MiB, \
                         clients CPU {:.2} s, {} ok / {} failed",
                        t.label(),
                        r.wall,
                        r.cpu,
                        fmt(r.memory_peak_mib),
                        r.pss_mib,
                        r.clients_cpu,
                        r.ok,
                        r.failed.len()
                    ));
                    for f in &r.failed {
                        notes.push(format!(
                            "serving round {} from {}: {f}",
                            round + 1,
                            t.label()
                        ));
                    }
                    if !r.settled {
                        notes.push(format!(
                            "serving round {} from {}: the server was still busy {IDLE_MAX:?} \
                             after the clones; its CPU is a lower bound",
                            round + 1,
                            t.label()
                        ));
                    }
                    serve[ti].push(r);
                }
                Err(e) => {
                    log(&format!("  {} FAILED: {e}", t.label()));
                    notes.push(format!(
                        "serving round {} from {}: {e}",
                        round + 1,
                        t.label()
                    ));
                }
            }
        }
    }

    // 3. Bulk.
    let (bulk_rows, bulk_targets, bulk_json) = if phase("bulk") {
        bulk::phase(&seedd_bin, rounds, &log, &mut notes)
    } else {
        (Vec::new(), Vec::new(), Value::Null)
    };

    // 4. Bulk into seeds already holding 1k and 100k repositories (seedd only).
    let (held_rows, held_targets, held_json) = if phase("held") {
        bulk::held_phase(&seedd_bin, rounds, &log, &mut notes)
    } else {
        (Vec::new(), Vec::new(), Value::Null)
    };

    // Rows: one value per round (per clone for the per-clone wall time).
    let mut rows: Vec<Row> = Vec::new();
    let w = format!("fetch {:.0} MB", ds.pack_bytes as f64 / 1e6);
    let fv =
        |t: usize, f: &dyn Fn(&FetchRun) -> f64| -> Vec<f64> { fetch[t].iter().map(f).collect() };
    let fr = |f: &dyn Fn(&FetchRun) -> f64| [fv(0, f), fv(1, f)];
    rows.push(Row::new(
        "fetch_wall_s",
        &w,
        "wall time",
        "s",
        fr(&|x| x.wall),
        "lower",
    ));
    let best = |t: usize| {
        fetch[t]
            .iter()
            .map(|x| x.wall)
            .min_by(f64::total_cmp)
            .into_iter()
            .collect::<Vec<f64>>()
    };
    rows.push(Row::new(
        "fetch_wall_best_s",
        &w,
        "wall time (best)",
        "s",
        [best(0), best(1)],
        "lower",
    ));
    rows.push(Row::new(
        "fetch_cpu_s",
        &w,
        "fetcher CPU (cgroup, until idle)",
        "s",
        fr(&|x| x.cpu),
        "lower",
    ));
    rows.push(Row::new(
        "fetch_source_cpu_s",
        &w,
        "source node CPU (cgroup)",
        "s",
        fr(&|x| x.source_cpu),
        "",
    ));
    rows.push(Row::new(
        "fetch_memory_peak_mib",
        &w,
        "fetcher memory.peak (cgroup)",
        "MiB",
        fr(&|x| x.memory_peak_mib.unwrap_or(f64::NAN)),
        "lower",
    ));
    rows.push(Row::new(
        "fetch_pss_peak_mib",
        &w,
        "fetcher PSS peak",
        "MiB",
        fr(&|x| x.pss_mib),
        "lower",
    ));
    rows.push(Row::new(
        "fetch_rss_peak_mib",
        &w,
        "fetcher Σ RSS peak (secondary)",
        "MiB",
        fr(&|x| x.rss_mib),
        "",
    ));
    rows.push(Row::new(
        "fetch_window_s",
        &w,
        "measured window (to idle)",
        "s",
        fr(&|x| x.window),
        "",
    ));
    rows.push(Row::new(
        "fetch_stored_pack_mb",
        &w,
        "packs in storage after",
        "MB",
        fr(&|x| x.pack_bytes as f64 / 1e6),
        "",
    ));
    rows.push(Row::new(
        "fetch_stored_loose_mb",
        &w,
        "loose objects in storage after",
        "MB",
        fr(&|x| x.loose_bytes as f64 / 1e6),
        "",
    ));
    rows.push(Row::new(
        "fetch_seedd_internal_s",
        &w,
        "seedd_fetch_duration_seconds",
        "s",
        [
            fv(0, &|x| x.seedd_fetch_seconds.unwrap_or(f64::NAN)),
            Vec::new(),
        ],
        "",
    ));

    let w = format!(
        "serve {clients}× rad clone{}, warm",
        if sequential {
            " (sequential)"
        } else {
            " (concurrent)"
        }
    );
    let sv =
        |t: usize, f: &dyn Fn(&ServeRun) -> f64| -> Vec<f64> { serve[t].iter().map(f).collect() };
    let sr = |f: &dyn Fn(&ServeRun) -> f64| [sv(0, f), sv(1, f)];
    rows.push(Row::new(
        "serve_wall_s",
        &w,
        "wall time, all clones",
        "s",
        sr(&|x| x.wall),
        "lower",
    ));
    let per_clone = |t: usize| -> Vec<f64> {
        serve[t]
            .iter()
            .flat_map(|x| x.clone_walls.iter().copied())
            .collect()
    };
    rows.push(Row::new(
        "serve_clone_wall_s",
        &w,
        "wall time per clone (all clones)",
        "s",
        [per_clone(0), per_clone(1)],
        "lower",
    ));
    rows.push(Row::new(
        "serve_cpu_s",
        &w,
        "server CPU (cgroup, until idle)",
        "s",
        sr(&|x| x.cpu),
        "lower",
    ));
    rows.push(Row::new(
        "serve_cpu_per_clone_s",
        &w,
        "server CPU per clone",
        "s",
        sr(&|x| x.cpu / x.ok.max(1) as f64),
        "lower",
    ));
    rows.push(Row::new(
        "serve_memory_peak_mib",
        &w,
        "server memory.peak (cgroup)",
        "MiB",
        sr(&|x| x.memory_peak_mib.unwrap_or(f64::NAN)),
        "lower",
    ));
    rows.push(Row::new(
        "serve_pss_peak_mib",
        &w,
        "server PSS peak",
        "MiB",
        sr(&|x| x.pss_mib),
        "lower",
    ));
    rows.push(Row::new(
        "serve_rss_peak_mib",
        &w,
        "server Σ RSS peak (secondary)",
        "MiB",
        sr(&|x| x.rss_mib),
        "",
    ));
    rows.push(Row::new(
        "serve_clients_cpu_s",
        &w,
        "client nodes' CPU (cgroup)",
        "s",
        sr(&|x| x.clients_cpu),
        "",
    ));
    rows.push(Row::new(
        "serve_failed",
        &w,
        "failed clones",
        "count",
        sr(&|x| x.failed.len() as f64),
        "lower",
    ));

    rows.extend(bulk_rows);

    // Targets (ratios of medians).
    let fetch_wall_ratio = rows[0].ratio();
    let fetch_cpu_ratio = rows[2].ratio();
    let met = |r: Option<f64>| match r {
        Some(r) if r <= 1.0 => "MET",
        Some(_) => "NOT MET",
        None => "n/a",
    };

    // Table.
    let git_version = cmd_out(Command::new("git").arg("--version"));
    let rn_version = radicle_version();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut t = String::new();
    let _ = writeln!(t);
    let _ = writeln!(t, "{}", prov.line());
    let _ = writeln!(
        t,
        "seedd vs radicle-node {rn_version}, replication of the same repository, same run — {git_version}, load average at start {load_before}"
    );
    let _ = writeln!(
        t,
        "repository {}: {BLOBS} files × {} MiB incompressible, {:.1} MB packed; source = radicle-node {SOURCE} ({})",
        ds.rid,
        BLOB_BYTES >> 20,
        ds.pack_bytes as f64 / 1e6,
        ds.nid
    );
    let _ = writeln!(
        t,
        "each measured server in its own cgroup ({}), pinned to the server cores; the bench, source and clients on the load cores. CPU and memory over a window that ends once the server is idle again (what the fetch or clone triggered included). {rounds} round(s) per target, ABBA order; median [min–max]; ratio = seedd / radicle-node (of medians). Both log at info.",
        measure::cgroup_method()
    );
    let _ = writeln!(t);
    write_table(
        &mut t,
        ["workload", "metric", "seedd", "radicle", "ratio", "unit"],
        [38, 33, 22, 22, 7, 5],
        143,
        rows.iter().map(Row::line),
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
    if !held_rows.is_empty() {
        let sizes = &held_json["sizes"];
        let size = |i: usize| sizes[i].as_u64().unwrap_or(0);
        let last = sizes.as_array().map_or(1, |a| a.len().max(1)) - 1;
        let (hi, lo) = (
            format!("seedd @ {}", size(last)),
            format!("seedd @ {}", size(0)),
        );
        let _ = writeln!(t);
        write_table(
            &mut t,
            ["workload", "metric", &hi, &lo, "ratio", "unit"],
            [38, 33, 22, 22, 7, 5],
            143,
            held_rows.iter().map(Row::line),
        );
        let _ = writeln!(t);
    }
    for tg in bulk_targets.iter().chain(&held_targets) {
        let value = tg["value"].as_f64();
        let _ = writeln!(
            t,
            "target: {} {}: {} → {}",
            tg["target"].as_str().unwrap_or(""),
            tg["goal"].as_str().unwrap_or(""),
            value.map_or("n/a".into(), |r| format!("{r:.2}×")),
            if value.is_none() {
                "n/a"
            } else if tg["met"].as_bool() == Some(true) {
                "MET"
            } else {
                "NOT MET"
            }
        );
    }
    for (i, runs) in fetch.iter().enumerate() {
        let _ = writeln!(
            t,
            "fetch rounds {}: wall {} s; CPU {} s",
            LABELS[i],
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
            "window_s": r.window,
            "idle_at_end": r.settled,
            "cpu_s": r.cpu,
            "source_cpu_s": r.source_cpu,
            "memory_peak_mib": r.memory_peak_mib,
            "pss_peak_mib": r.pss_mib,
            "rss_peak_mib": r.rss_mib,
            "stored_pack_bytes": r.pack_bytes,
            "stored_loose_object_bytes": r.loose_bytes,
            "seedd_fetch_duration_seconds": r.seedd_fetch_seconds,
            "seedd_fetch_received_bytes": r.seedd_received_bytes,
        })
    };
    let serve_json = |r: &ServeRun| {
        json!({
            "wall_s": r.wall,
            "clone_walls_s": r.clone_walls,
            "cpu_s": r.cpu,
            "idle_at_end": r.settled,
            "memory_peak_mib": r.memory_peak_mib,
            "pss_peak_mib": r.pss_mib,
            "rss_peak_mib": r.rss_mib,
            "clients_cpu_s": r.clients_cpu,
            "ok": r.ok,
            "failed": r.failed,
        })
    };
    let fetch_targets: Vec<Value> = if fetch[0].is_empty() && fetch[1].is_empty() {
        Vec::new()
    } else {
        vec![
            json!({
                "target": "fetch of the ~50 MB repository, wall time vs radicle-node",
                "goal": "≤ 1.0×",
                "value": fetch_wall_ratio,
                "met": fetch_wall_ratio.is_some_and(|r| r <= 1.0),
            }),
            json!({
                "target": "fetch, fetcher CPU (cgroup, until idle) vs radicle-node",
                "goal": "≤ 1.0×",
                "value": fetch_cpu_ratio,
                "met": fetch_cpu_ratio.is_some_and(|r| r <= 1.0),
            }),
        ]
    };
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let doc = json!({
        "schema": 2,
        "unix_time": unix,
        "git_version": git_version,
        "radicle_node_version": rn_version,
        "cpus": cpus,
        "loadavg_start": load_before,
        "duration_s": elapsed,
        "seedd_binary": seedd_bin.display().to_string(),
        "method": {
            "cgroup": measure::cgroup_method(),
            "pinning": Pinning::get().describe(),
            "summary": "median [min–max] over rounds; ratio of medians",
            "window": "CPU and memory from before the connect (fetch) or the first clone (serve) until the server is idle again (< 2 % of a core over 500 ms)",
        },
        "settings": {
            "rounds": rounds,
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
        "results": rows.iter().map(|r| r.to_json(["seedd", "radicle_node"])).collect::<Vec<_>>(),
        // The list `benches/tools/targets.py` reads.
        "targets": ([fetch_targets, bulk_targets, held_targets].concat()),
        "fetch_rounds": {
            "seedd": fetch[0].iter().map(run_json).collect::<Vec<_>>(),
            "radicle_node": fetch[1].iter().map(run_json).collect::<Vec<_>>(),
        },
        "bulk_rounds": bulk_json,
        "held": {
            "results": held_rows.iter().map(|r| r.to_json(["at_largest", "at_smallest"])).collect::<Vec<_>>(),
            "runs": held_json,
        },
        "serve_rounds": {
            "seedd": serve[0].iter().map(serve_json).collect::<Vec<_>>(),
            "radicle_node": serve[1].iter().map(serve_json).collect::<Vec<_>>(),
        },
        "notes": notes,
    });
    let path = target.join("seedd-bench-replication.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&measure::stamped(&doc)).unwrap() + "\n",
    )
    .unwrap();
    println!("JSON: {}", path.display());
}

// ------------------------------------------------------------------------------------------
// The two targets, each in its own scope
// ------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Target {
    Seedd,
    Radicle,
}

impl Target {
    const ALL: [Target; 2] = [Target::Seedd, Target::Radicle];

    fn label(self) -> &'static str {
        LABELS[self.index()]
    }

    fn index(self) -> usize {
        match self {
            Target::Seedd => 0,
            Target::Radicle => 1,
        }
    }
}

/// A scope with a wrapper directory: `dir` holds the script that starts the server in it.
struct Scoped {
    scope: Arc<Scope>,
    dir: tempfile::TempDir,
}

impl Scoped {
    fn new(name: &str) -> Scoped {
        Scoped {
            scope: Arc::new(Scope::new(name)),
            dir: tempfile::Builder::new()
                .prefix("rw")
                .tempdir_in("/tmp")
                .unwrap(),
        }
    }

    /// seedd (`Seed::start` with the release `seedd`) started in this scope.
    fn seedd(&self, bin: &Path, data_dir: Option<PathBuf>) -> Seed {
        let dir = self.scope.wrapper_dir(bin, self.dir.path(), &["seedctl"]);
        let seed = measure::with_test_bin_dir(&dir, || start_seedd(data_dir));
        self.scope.started(seed.child.id());
        seed
    }

    /// `start_node` with radicle-node started in this scope (`rad`, `git-remote-rad` beside
    /// it unwrapped: only the node joins the scope).
    fn radicle(
        &self,
        dir: tempfile::TempDir,
        name: &str,
        connect: &[String],
        seeding: &Value,
    ) -> RadNode {
        let wrappers = self.scope.wrapper_dir(
            &radicle_bin("radicle-node"),
            self.dir.path(),
            &["rad", "git-remote-rad"],
        );
        let node = measure::with_path_first(&wrappers, || start_node(dir, name, connect, seeding));
        self.scope.started(node.child.id());
        node
    }
}

/// Move `pid` (every thread; what it starts later inherits it) to the load cores: for the
/// source and client nodes, which have a scope for their CPU figure but are not the measured
/// server ([`Scope`]'s wrapper pins to the server cores).
fn repin_to_load(pid: u32) {
    if let Some(load) = &Pinning::get().load {
        let _ = Command::new("taskset")
            .args(["-a", "-p", "-c", load, &pid.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
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
    /// From `rad node connect` until the refs are in storage.
    wall: f64,
    /// The measured window: until the fetch was counted (seedd) and the fetcher idle.
    window: f64,
    /// Whether the fetcher was idle at the end of the window.
    settled: bool,
    cpu: f64,
    source_cpu: f64,
    memory_peak_mib: Option<f64>,
    pss_mib: f64,
    rss_mib: f64,
    pack_bytes: u64,
    loose_bytes: u64,
    seedd_fetch_seconds: Option<f64>,
    seedd_received_bytes: Option<f64>,
}

/// One fetch of the dataset from a fresh source node by a fresh `target`, each in a new scope.
fn fetch_once(ds: &Dataset, target: Target, seedd_bin: &Path) -> Result<FetchRun, String> {
    let source_scope = Scoped::new("repl-source");
    let source = start_source(ds, &source_scope);
    // Not the measured server: to the load cores.
    repin_to_load(source.child.id());
    let scratch = tempfile::tempdir().unwrap();
    let scoped = Scoped::new(&format!("repl-fetch-{}", target.label()));
    match target {
        Target::Seedd => {
            let seed = scoped.seedd(seedd_bin, None);
            let repo = seed.storage().join(&ds.canonical);
            // Counted once seedd has finished the fetch (after-fetch steps done).
            let counted = || seed.metric("seedd_fetches_total", &["result=\"ok\""]) >= 1.0;
            let r = measure_fetch(
                ds,
                &source,
                &source_scope.scope,
                &seed.p2p_peer(),
                &scoped.scope,
                seed.child.id(),
                &repo,
                scratch.path(),
                &counted,
            );
            let mut r =
                r.map_err(|e| format!("{e}\nseedd log (tail):\n{}", tail(&seed.logs(), 30)))?;
            r.seedd_fetch_seconds = Some(seed.metric("seedd_fetch_duration_seconds_sum", &[]));
            r.seedd_received_bytes = Some(seed.metric("seedd_fetch_received_bytes_total", &[]));
            drop(seed);
            Ok(r)
        }
        Target::Radicle => {
            let fetcher = scoped.radicle(node_dir(), "repfetch", &[], &allow_all());
            let repo = fetcher.home.join("storage").join(&ds.canonical);
            let r = measure_fetch(
                ds,
                &source,
                &source_scope.scope,
                &fetcher.peer(),
                &scoped.scope,
                fetcher.child.id(),
                &repo,
                scratch.path(),
                &|| true,
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
/// Wall time until the source's signed refs are in `repo`; CPU and memory of the fetcher's
/// scope until `counted()` and the scope is idle again.
#[allow(clippy::too_many_arguments)]
fn measure_fetch(
    ds: &Dataset,
    source: &RadNode,
    source_scope: &Scope,
    fetcher_peer: &str,
    scope: &Arc<Scope>,
    pid: u32,
    repo: &Path,
    scratch: &Path,
    counted: &dyn Fn() -> bool,
) -> Result<FetchRun, String> {
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
    measure::wait_idle(scope, IDLE_MAX);
    measure::wait_idle(source_scope, IDLE_MAX);
    let s0 = source_scope.cpu_usec();
    let (r, iv): (Result<(f64, f64, bool), String>, Interval) = measure::measure(scope, || {
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
        if !wait_until(Duration::from_secs(30), counted) {
            return Err(
                "refs present but seedd_fetches_total{result=\"ok\"} stays 0 after 30 s".into(),
            );
        }
        let settled = measure::wait_idle(scope, IDLE_MAX);
        Ok((wall, t0.elapsed().as_secs_f64(), settled))
    });
    let (wall, window, settled) = r?;
    let s1 = source_scope.cpu_usec();
    Ok(FetchRun {
        wall,
        window,
        settled,
        cpu: iv.cpu_secs(),
        source_cpu: s1.saturating_sub(s0) as f64 / 1e6,
        memory_peak_mib: iv.memory_peak.map(|b| b as f64 / 1048576.0),
        pss_mib: iv.pss_peak_kib as f64 / 1024.0,
        rss_mib: iv.rss_peak_kib as f64 / 1024.0,
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
    settled: bool,
    memory_peak_mib: Option<f64>,
    pss_mib: f64,
    rss_mib: f64,
    clients_cpu: f64,
    ok: usize,
    failed: Vec<String>,
}

/// `clients` radicle-nodes clone the dataset from a server holding it, started in a new scope.
fn serve_once(
    ds: &Dataset,
    target: Target,
    seedd_bin: &Path,
    clients: usize,
    sequential: bool,
    log: &dyn Fn(&str),
) -> Result<ServeRun, String> {
    let scoped = Scoped::new(&format!("repl-serve-{}", target.label()));
    match target {
        Target::Seedd => {
            let data = tempfile::tempdir().unwrap();
            copy_tree(
                &ds.home.join("storage").join(&ds.canonical),
                &data.path().join("storage").join(&ds.canonical),
            );
            let seed = scoped.seedd(seedd_bin, Some(data.path().to_owned()));
            seed.rescan();
            let (nid, peer) = (seed.nid(), seed.p2p_peer());
            let r = clone_from(ds, &nid, &peer, &scoped.scope, clients, sequential, log);
            r.map_err(|e| format!("{e}\nseedd log (tail):\n{}", tail(&seed.logs(), 30)))
        }
        Target::Radicle => {
            // The source node is the measured server here (on the server cores).
            let server = start_source(ds, &scoped);
            let r = clone_from(
                ds,
                &server.nid,
                &server.peer(),
                &scoped.scope,
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

fn clone_from(
    ds: &Dataset,
    server_nid: &str,
    server_peer: &str,
    scope: &Arc<Scope>,
    clients: usize,
    sequential: bool,
    log: &dyn Fn(&str),
) -> Result<ServeRun, String> {
    let clients_scope = Scoped::new("repl-clients");
    let nodes: Vec<RadNode> = (0..clients)
        .map(|i| {
            let n = clients_scope.radicle(
                node_dir(),
                &format!("repc{i}"),
                &[server_peer.to_owned()],
                &json!({ "default": "block" }),
            );
            repin_to_load(n.child.id());
            n
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
    measure::wait_idle(scope, IDLE_MAX);
    measure::wait_idle(&clients_scope.scope, IDLE_MAX);
    let k0 = clients_scope.scope.cpu_usec();
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
    let ((wall, results, settled), iv) = measure::measure(scope, || {
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
        let settled = measure::wait_idle(scope, IDLE_MAX);
        (wall, results, settled)
    });
    measure::wait_idle(&clients_scope.scope, IDLE_MAX);
    let k1 = clients_scope.scope.cpu_usec();
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
    drop(nodes);
    Ok(ServeRun {
        wall,
        ok: clone_walls.len(),
        clone_walls,
        cpu: iv.cpu_secs(),
        settled,
        memory_peak_mib: iv.memory_peak.map(|b| b as f64 / 1048576.0),
        pss_mib: iv.pss_peak_kib as f64 / 1024.0,
        rss_mib: iv.rss_peak_kib as f64 / 1024.0,
        clients_cpu: k1.saturating_sub(k0) as f64 / 1e6,
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

/// The source node, from a fresh copy of the cached home, in `scoped`.
fn start_source(ds: &Dataset, scoped: &Scoped) -> RadNode {
    let dir = node_dir();
    copy_tree(&ds.home, &dir.path().join(SOURCE));
    scoped.radicle(dir, SOURCE, &[], &allow_all())
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
    stop_child(&mut node.child, Duration::from_secs(20));
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

/// One line of the table: a value per round for each target.
struct Row {
    key: String,
    workload: String,
    metric: String,
    unit: &'static str,
    /// [seedd, radicle-node]
    values: [Vec<f64>; 2],
    /// "lower" or "higher" is better; "" for informational rows.
    better: &'static str,
}

impl Row {
    fn new(
        key: &str,
        workload: &str,
        metric: &str,
        unit: &'static str,
        values: [Vec<f64>; 2],
        better: &'static str,
    ) -> Row {
        Row {
            key: key.into(),
            workload: workload.into(),
            metric: metric.into(),
            unit,
            values: values.map(|v| v.into_iter().filter(|x| x.is_finite()).collect()),
            better,
        }
    }

    fn summaries(&self) -> (Option<Summary>, Option<Summary>) {
        (Summary::of(&self.values[0]), Summary::of(&self.values[1]))
    }

    /// The row in the printed table (median [min–max] per column, ratio of the medians).
    fn line(&self) -> TableLine<'_> {
        let show = |s: Option<Summary>| match s {
            None => "n/a".to_owned(),
            Some(s) if s.n == 1 => fmt(Some(s.median)),
            Some(s) => s.to_string(),
        };
        let (a, b) = self.summaries();
        TableLine {
            group: &self.workload,
            metric: &self.metric,
            seedd: show(a),
            other: show(b),
            ratio: self.ratio().map_or(String::new(), |x| format!("{x:.2}×")),
            unit: self.unit,
            better: self.better,
        }
    }

    /// The row in the JSON result, its two columns named `names` (their rounds under
    /// `rounds_<name>`).
    fn to_json(&self, names: [&str; 2]) -> Value {
        let (a, b) = self.summaries();
        let mut v = json!({
            "key": self.key,
            "workload": self.workload,
            "metric": self.metric,
            "unit": self.unit,
            "ratio": self.ratio(),
            "better": self.better,
        });
        for (name, (summary, rounds)) in names
            .iter()
            .zip([(a, &self.values[0]), (b, &self.values[1])])
        {
            v[*name] = json!(summary.map(|s| s.to_json()));
            v[format!("rounds_{name}")] = json!(rounds);
        }
        v
    }

    /// seedd / radicle-node, of the medians.
    fn ratio(&self) -> Option<f64> {
        match self.summaries() {
            (Some(s), Some(r)) if r.median > 0.0 => Some(s.median / r.median),
            _ => None,
        }
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
