//! Radicle serving (issue 29 §2 anchor): seedd against the official `radicle-node` 0.21.1
//! serving the **same repository** (byte-identical storage copied from one `rad init` by a real
//! radicle-node) to a raw fetch client, on loopback. See `benches/runs/radicle_serve.md`.
//!
//! **One fetch** = one TCP connection, the Noise XK handshake as a fresh random NodeId
//! (exactly as [`seedd_benches::establish`]: act 1, act 2, act 3, then the server's three
//! initial gossip messages; here read by the client's own in-place frame parser, so that the
//! client copies the pack once and stays off the critical path), `Open(12)` on the dialer's control stream (protocol.md §3.7), the header
//! pkt-line `git-upload-pack /<rid>\0\0version=2\0` (§6.2), the v2 capability advertisement,
//! `ls-refs` (`peel`, `symrefs`, no `ref-prefix`: every ref of the repository), one `fetch`
//! (`thin-pack`, `ofs-delta`, `no-progress`, a `want` for every distinct oid listed, no `have`,
//! `done`), the whole side-band packfile section up to its flush, then `Eof(12)`, and the
//! server's `Close(12)`; the socket is then reset (`SO_LINGER` 0), because radicle-node ignores
//! a FIN and would keep a dead session for minutes (§3.9). The client sends no gossip.
//!
//! What radicle-node requires of such a client (read in `radicle-node-0.21.1`): nothing beyond
//! the handshake. `src/wire.rs` (`SessionEvent::Data`, the `Control::Open` arm) registers the
//! stream for any `Peer::Connected` session and hands a `FetchRequest::Responder` to the
//! worker pool; `src/worker.rs` (`FetchRequest::Responder`, `is_authorized`) parses the header
//! and checks only the seeding policy of the RID (not `block`) and the identity document's
//! visibility (public here); no node announcement, subscription or "known peer" is needed.
//! `src/worker/upload_pack.rs` then runs `git upload-pack --strict` (stateful) and kills it
//! when the fetcher's Eof ends its input — so the client reads the whole pack *before* it
//! sends Eof. radicle-node serves at most `workers` (default 8) streams at once; the rest
//! wait in its task queue (1024).
//!
//! Rows: 1 fetch alone and 32 concurrent fetches (`SEEDD_RSERVE_CONCURRENCY`), each cold
//! (`measure::evict` on both servers' data before the measurement; nothing is restarted, so
//! in-process state stays) and warm (after an untimed fetch). `SEEDD_RSERVE_ROUNDS` rounds
//! (default 5), servers in [`measure::abba`] order. Each server runs in its own
//! [`measure::Scope`]. Then a correctness check: 8 client radicle-nodes `rad clone` from each
//! server (concurrently) and must check out the dataset's head.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seedd_benches::measure::{self, Interval, Pinning, Provenance, Scope, Summary};
use seedd_benches::{
    cmd_out, ensure_seedd, env_usize, profile_dir, radicle_version, write_table, TableLine,
};
use seedd_proto::crypto::{Keypair, NodeId};
use seedd_proto::wire::handshake::{Initiator, ACT2_LEN};
use seedd_proto::wire::{Control, Frame, Link, StreamId};
use seedd_tests::{
    copy_tree, free_port, http_get, http_post, radicle_bin, run, RadNode, RadNodeOptions,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bump when the generated repository changes, so the cached one is regenerated.
const DATA_VERSION: &str = "radicle-serve-v1";
/// Name of the node that creates the repository and then serves it (key derived from it).
const SOURCE: &str = "rssrc";
/// History: this many commits, each rewriting a few lines of one of `FILES` text files …
const COMMITS: u64 = 600;
const FILES: u64 = 64;
/// … and every `BLOB_EVERY`-th commit also adds a `BLOB_BYTES` incompressible file.
const BLOB_EVERY: u64 = 75;
const BLOB_BYTES: usize = 1 << 20;
/// Fixed commit times (2025-01-01T00:00:00Z + i minutes): the dataset is reproducible.
const TIME_BASE: u64 = 1_735_689_600;
const ROUNDS: usize = 5;
const CONCURRENCY: usize = 32;
const CLONES: usize = 8;
/// Longest time one fetch may take (connect to Close).
const FETCH_MAX: Duration = Duration::from_secs(120);
const AGENT: &str = "agent=seedd-bench/radicle-serve\n";

fn main() {
    Pinning::pin_self_to_load();
    let mut prov = Provenance::require("radicle_serve");
    let started = Instant::now();
    let log = move |msg: &str| eprintln!("[{:6.1}s] {msg}", started.elapsed().as_secs_f64());
    // The official binaries first on PATH (radicle-node's upload-pack finds git on PATH too).
    let rad_bin = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join(".cache/seedd/radicle/bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![rad_bin];
    dirs.extend(std::env::split_paths(&path));
    std::env::set_var("PATH", std::env::join_paths(dirs).unwrap());

    let profile = profile_dir();
    let target = profile.parent().unwrap().to_owned();
    let seedd_bin = ensure_seedd(&log, &profile);
    let rounds = env_usize("SEEDD_RSERVE_ROUNDS", ROUNDS).max(1);
    let tck = seedd_benches::procfs::clk_tck();
    let conc = env_usize("SEEDD_RSERVE_CONCURRENCY", CONCURRENCY).max(2);
    let clones = env_usize("SEEDD_RSERVE_CLONES", CLONES);
    if rounds != ROUNDS {
        prov.differs(format!("SEEDD_RSERVE_ROUNDS = {rounds} (default {ROUNDS})"));
    }
    if conc != CONCURRENCY {
        prov.differs(format!(
            "SEEDD_RSERVE_CONCURRENCY = {conc} (default {CONCURRENCY})"
        ));
    }
    if clones != CLONES {
        prov.differs(format!("SEEDD_RSERVE_CLONES = {clones} (default {CLONES})"));
    }
    prov.differs("seedd: [p2p] listen, [http] listen, [admin] listen = 127.0.0.1:<free port>");
    prov.differs(
        "seedd: [policy] default = \"allow\", scope = \"all\" (as radicle-node's seedingPolicy)",
    );
    prov.differs("seedd: RUST_LOG=info");
    prov.differs(
        "radicle-node: network = test, peers static, connect [], preferredSeeds [], \
         externalAddresses [], listen 127.0.0.1:<free port>, seedingPolicy allow/all, \
         --log-level info (the test harness's RadNode settings)",
    );

    let data_root = target.join("seedd-bench-data");
    let ds = dataset(&data_root, &log);
    log(&format!(
        "dataset {} ({:.1} MB packed, {} refs, head {})",
        ds.rid,
        ds.pack_bytes as f64 / 1e6,
        ds.refs,
        ds.head
    ));

    // The two servers, each in its own scope, running for the whole bench.
    let work = tempfile::Builder::new()
        .prefix("rs")
        .tempdir_in("/tmp")
        .unwrap();
    let scopes = [
        Arc::new(Scope::new("rserve-seedd")),
        Arc::new(Scope::new("rserve-radicle")),
    ];
    let mut seedd = start_seedd(&scopes[0], &seedd_bin, &ds, &work.path().join("seedd"));
    log(&format!("seedd {} on {}", seedd.nid, seedd.addr));
    let mut radicle = start_radicle(&scopes[1], &ds, &work.path().join("rn"));
    log(&format!("radicle-node {} on {}", radicle.nid, radicle.addr));
    let servers: [&Server; 2] = [&seedd, &radicle];
    // Past seedd's first sync tick (5 s after start) and radicle-node's start-up work.
    std::thread::sleep(Duration::from_secs(6));
    for sc in &scopes {
        quiet(sc);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    // Untimed validation fetch from each server: the pack is checked by git.
    let mut notes: Vec<String> = Vec::new();
    let mut reference: [Option<Fetched>; 2] = [None, None];
    for (i, s) in servers.iter().enumerate() {
        let f = rt
            .block_on(fetch(s.addr, s.nid, ds.canonical.clone(), true))
            .unwrap_or_else(|e| {
                panic!(
                    "validation fetch from {} failed: {e}\nlog tail:\n{}",
                    LABELS[i],
                    tail(&s.logs(), 30)
                )
            });
        let checked = check_pack(&f, &ds);
        log(&format!(
            "validation fetch from {}: {} refs, {} wants, {} objects, {:.2} MB pack: {}",
            LABELS[i],
            f.refs,
            f.wants,
            f.objects,
            f.pack_bytes as f64 / 1e6,
            match &checked {
                Ok(()) => "git accepts it, every want present, SHA-1 trailer ok".to_owned(),
                Err(e) => format!("INVALID: {e}"),
            }
        ));
        if let Err(e) = checked {
            notes.push(format!("validation fetch from {}: {e}", LABELS[i]));
        }
        reference[i] = Some(f);
    }
    let (r0, r1) = (
        reference[0].as_ref().unwrap(),
        reference[1].as_ref().unwrap(),
    );
    if r0.objects != r1.objects || r0.wants != r1.wants {
        notes.push(format!(
            "the servers' packs differ: seedd {} objects / {} wants, radicle-node {} / {}",
            r0.objects, r0.wants, r1.objects, r1.wants
        ));
    }
    let expect = Expect {
        objects: r1.objects,
        wants: r1.wants,
    };

    // Rounds.
    let sizes = [1usize, conc];
    // cells[server][size][mode] (mode 0 cold, 1 warm)
    let mut cells: Vec<Vec<Vec<Cell>>> = (0..2)
        .map(|_| {
            (0..2)
                .map(|_| vec![Cell::default(), Cell::default()])
                .collect()
        })
        .collect();
    let evict_paths: Vec<PathBuf> = servers.iter().map(|s| s.data.clone()).collect();
    let evict_all = || {
        let paths: Vec<&Path> = evict_paths.iter().map(PathBuf::as_path).collect();
        measure::evict(&paths)
    };
    let mut evicted = measure::Evicted::default();
    for round in 0..rounds {
        for si in measure::abba(round, 2) {
            let s = servers[si];
            for (zi, &n) in sizes.iter().enumerate() {
                for mode in 0..2 {
                    if mode == 0 {
                        evicted = evict_all();
                    } else if let Err(e) =
                        rt.block_on(fetch(s.addr, s.nid, ds.canonical.clone(), false))
                    {
                        notes.push(format!("warm-up fetch from {}: {e}", LABELS[si]));
                    }
                    quiet(&scopes[si]);
                    let me = std::process::id();
                    let k0 = seedd_benches::procfs::own_ticks(me);
                    let (res, iv) = measure::measure(&scopes[si], || {
                        rt.block_on(fetch_many(s.addr, s.nid, &ds.canonical, n))
                    });
                    let client_cpu =
                        seedd_benches::procfs::own_ticks(me).saturating_sub(k0) as f64 / tck;
                    let cell = &mut cells[si][zi][mode];
                    let failed = cell.add(&res, &iv, &expect);
                    cell.client_busy
                        .push(100.0 * client_cpu / res.wall.as_secs_f64());
                    for f in failed.iter().take(3) {
                        notes.push(format!(
                            "round {} {} {n}× {}: {f}",
                            round + 1,
                            LABELS[si],
                            MODES[mode]
                        ));
                    }
                    log(&format!(
                        "round {}/{rounds} {:12} {n:>2}× {}: {:.2} fetches/s, CPU {:.1} ms/fetch, \
                         memory.peak {:.0} MiB, PSS {:.0} MiB, {} failed",
                        round + 1,
                        LABELS[si],
                        MODES[mode],
                        cell.throughput.last().copied().unwrap_or(f64::NAN),
                        cell.cpu_ms.last().copied().unwrap_or(f64::NAN),
                        iv.memory_peak.unwrap_or(0) as f64 / 1048576.0,
                        iv.pss_peak_kib as f64 / 1024.0,
                        failed.len()
                    ));
                }
            }
        }
    }
    log(&format!(
        "last eviction: {} files, {:.1} MB",
        evicted.files,
        evicted.bytes as f64 / 1e6
    ));

    // Correctness: real `rad clone`s from each server.
    let mut clone_checks: [Option<CloneCheck>; 2] = [None, None];
    if clones > 0 {
        for (si, s) in servers.iter().enumerate() {
            log(&format!(
                "correctness: {clones} concurrent rad clone from {}",
                LABELS[si]
            ));
            let c = clone_check(&ds, s, clones, &log);
            log(&format!(
                "  {}: {} ok / {} failed in {:.1} s",
                LABELS[si],
                c.ok,
                c.failed.len(),
                c.wall
            ));
            for f in &c.failed {
                notes.push(format!("rad clone from {}: {f}", LABELS[si]));
            }
            if !c.failed.is_empty() {
                // What the server said about its streams (refusals, closes), to name the cause.
                for l in s
                    .logs()
                    .lines()
                    .filter(|l| {
                        l.contains("refusing git stream")
                            || l.contains("closing git stream")
                            || l.contains("ERROR")
                    })
                    .take(20)
                {
                    notes.push(format!("{} log: {}", LABELS[si], l.trim()));
                }
            }
            clone_checks[si] = Some(c);
        }
    }
    // seedd's own account of the pack cache and p2p serving over the whole bench.
    let seedd_metrics: Vec<String> = seedd
        .metrics
        .as_deref()
        .and_then(|u| http_get(u, &[]).ok())
        .map(|(_, body)| {
            body.lines()
                .filter(|l| {
                    !l.starts_with('#')
                        && (l.starts_with("seedd_pack_cache_hits")
                            || l.starts_with("seedd_pack_cache_misses")
                            || l.starts_with("seedd_pack_cache_sendfile")
                            || l.starts_with("seedd_pack_cache_served")
                            || l.starts_with("seedd_pack_cache_read")
                            || l.starts_with("seedd_p2p_git_serves_total")
                            || l.starts_with("seedd_p2p_git_requests_total"))
                })
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for m in &seedd_metrics {
        log(&format!("seedd metric: {m}"));
    }
    seedd.stop();
    radicle.stop();

    // Summaries.
    let sum = |si: usize, zi: usize, mode: usize, f: &dyn Fn(&Cell) -> &Vec<f64>| {
        Summary::of(f(&cells[si][zi][mode]))
    };
    // CPU(n)/CPU(1) per fetch, paired within a round.
    let scaling = |si: usize, mode: usize| -> Option<Summary> {
        let one = &cells[si][0][mode].cpu_ms;
        let many = &cells[si][1][mode].cpu_ms;
        let v: Vec<f64> = one.iter().zip(many).map(|(a, b)| b / a).collect();
        Summary::of(&v)
    };
    let ratio_of = |a: Option<Summary>, b: Option<Summary>| match (a, b) {
        (Some(a), Some(b)) => a.ratio(&b),
        _ => None,
    };
    let show = |s: Option<Summary>| s.map_or("n/a".to_owned(), |s| s.to_string());
    let show_ratio = |r: Option<f64>| r.map_or(String::new(), |r| format!("{r:.2}×"));

    let mut lines: Vec<(String, &str, String, String, String, &str, &str)> = Vec::new();
    let mut json_rows = Vec::new();
    for (zi, &n) in sizes.iter().enumerate() {
        for (mode, mode_name) in MODES.iter().enumerate() {
            let group = format!("{n}× fetch, {mode_name}");
            let metrics: [(&str, &str, &str, &str, Metric); 8] = [
                ("throughput", "fetches/s", "higher", "throughput", |c| {
                    &c.throughput
                }),
                (
                    "server CPU per fetch",
                    "ms",
                    "lower",
                    "cpu_ms_per_fetch",
                    |c| &c.cpu_ms,
                ),
                ("memory.peak", "MiB", "lower", "memory_peak_mib", |c| {
                    &c.memory_peak_mib
                }),
                ("PSS peak", "MiB", "lower", "pss_peak_mib", |c| &c.pss_mib),
                ("Σ RSS peak", "MiB", "lower", "rss_peak_mib", |c| {
                    &c.rss_mib
                }),
                ("pack bytes per fetch", "MB", "", "pack_mb", |c| &c.pack_mb),
                ("failed fetches", "count", "lower", "failed", |c| &c.failed),
                ("client CPU / wall", "%", "", "client_busy_pct", |c| {
                    &c.client_busy
                }),
            ];
            let mut row = serde_json::Map::new();
            for (label, unit, better, key, f) in metrics {
                let (a, b) = (sum(0, zi, mode, &f), sum(1, zi, mode, &f));
                let r = ratio_of(a, b);
                lines.push((
                    group.clone(),
                    label,
                    show(a),
                    show(b),
                    show_ratio(r),
                    unit,
                    better,
                ));
                row.insert(
                    key.to_owned(),
                    json!({
                        "unit": unit,
                        "seedd": a.map(|s| s.to_json()),
                        "radicle_node": b.map(|s| s.to_json()),
                        "ratio": r,
                        "rounds_seedd": f(&cells[0][zi][mode]),
                        "rounds_radicle_node": f(&cells[1][zi][mode]),
                    }),
                );
            }
            if zi == 1 {
                let (a, b) = (scaling(0, mode), scaling(1, mode));
                lines.push((
                    group.clone(),
                    "CPU per fetch, n× / 1×",
                    show(a),
                    show(b),
                    show_ratio(ratio_of(a, b)),
                    "×",
                    "lower",
                ));
                row.insert(
                    "cpu_scaling".into(),
                    json!({
                        "seedd": a.map(|s| s.to_json()),
                        "radicle_node": b.map(|s| s.to_json()),
                    }),
                );
            }
            json_rows.push(json!({ "concurrency": n, "mode": mode_name, "figures": row }));
        }
    }

    // Targets.
    let thr = |zi: usize, mode: usize| {
        ratio_of(
            sum(0, zi, mode, &|c: &Cell| &c.throughput),
            sum(1, zi, mode, &|c: &Cell| &c.throughput),
        )
    };
    let mem = |zi: usize, mode: usize| {
        ratio_of(
            sum(0, zi, mode, &|c: &Cell| &c.memory_peak_mib),
            sum(1, zi, mode, &|c: &Cell| &c.memory_peak_mib),
        )
    };
    let mut targets: Vec<(String, Option<f64>, bool)> = Vec::new();
    for (zi, &n) in sizes.iter().enumerate() {
        let c = thr(zi, 0);
        targets.push((
            format!("cold throughput {n}× ≥ 5× radicle-node"),
            c,
            c.is_some_and(|r| r >= 5.0),
        ));
        let w = thr(zi, 1);
        targets.push((
            format!("warm throughput {n}× ≥ 10× radicle-node"),
            w,
            w.is_some_and(|r| r >= 10.0),
        ));
    }
    for (mode, m) in MODES.iter().enumerate() {
        let s = scaling(0, mode).map(|s| s.median);
        targets.push((
            format!("seedd CPU per fetch {conc}× / 1× ≤ 1.3 ({m})"),
            s,
            s.is_some_and(|r| r <= 1.3),
        ));
    }
    for (mode, m) in MODES.iter().enumerate() {
        let r = mem(1, mode);
        targets.push((
            format!("seedd memory.peak ≤ 0.5× radicle-node's ({conc}×, {m})"),
            r,
            r.is_some_and(|r| r <= 0.5),
        ));
    }

    // Table.
    let git_version = cmd_out(Command::new("git").arg("--version"));
    let mut t = String::new();
    let _ = writeln!(t);
    let _ = writeln!(t, "{}", prov.line());
    let _ = writeln!(
        t,
        "Radicle serving: seedd vs radicle-node {} — same repository, raw fetch client (fresh NodeId, Open, upload-pack header, ls-refs, fetch all wants, no haves, done), {git_version}",
        radicle_version()
    );
    let _ = writeln!(
        t,
        "repository {}: {COMMITS} commits over {FILES} text files + {} × {} MiB incompressible, {:.1} MB packed, {} refs; each fetch {} wants → {} objects, {:.2} MB pack",
        ds.rid,
        COMMITS.div_ceil(BLOB_EVERY),
        BLOB_BYTES >> 20,
        ds.pack_bytes as f64 / 1e6,
        ds.refs,
        expect.wants,
        expect.objects,
        r1.pack_bytes as f64 / 1e6
    );
    let _ = writeln!(
        t,
        "{rounds} rounds (ABBA order); cold = measure::evict on both servers' data first (processes keep running); warm = after an untimed fetch. median [min–max]; ratio = seedd / radicle-node (of medians)"
    );
    let _ = writeln!(t);
    write_table(
        &mut t,
        ["row", "metric", "seedd", "radicle-node", "ratio", "unit"],
        [18, 24, 26, 26, 8, 9],
        128,
        lines.iter().map(|l| TableLine {
            group: &l.0,
            metric: l.1,
            seedd: l.2.clone(),
            other: l.3.clone(),
            ratio: l.4.clone(),
            unit: l.5,
            better: l.6,
        }),
    );
    let _ = writeln!(t);
    for (name, v, met) in &targets {
        let _ = writeln!(
            t,
            "target: {name}: {} → {}",
            v.map_or("n/a".into(), |v| format!("{v:.2}")),
            match (v, met) {
                (None, _) => "n/a",
                (_, true) => "MET",
                (_, false) => "NOT MET",
            }
        );
    }
    for (si, c) in clone_checks.iter().enumerate() {
        if let Some(c) = c {
            let _ = writeln!(
                t,
                "correctness: {} concurrent rad clone from {}: {} ok, {} failed, same head {} → {} ({:.1} s)",
                c.ok + c.failed.len(),
                LABELS[si],
                c.ok,
                c.failed.len(),
                &ds.head[..12],
                if c.failed.is_empty() { "PASS" } else { "FAIL" },
                c.wall
            );
        }
    }
    for n in &notes {
        let _ = writeln!(t, "note: {n}");
    }
    let _ = writeln!(
        t,
        "total bench time {:.0} s; load average at end {}",
        started.elapsed().as_secs_f64(),
        seedd_benches::procfs::loadavg()
    );
    print!("{t}");

    let doc = json!({
        "rounds": rounds,
        "concurrency": conc,
        "radicle_node_version": radicle_version(),
        "git_version": git_version,
        "seedd_binary": seedd_bin.display().to_string(),
        "dataset": {
            "rid": ds.rid,
            "head": ds.head,
            "commits": COMMITS,
            "text_files": FILES,
            "blobs": COMMITS.div_ceil(BLOB_EVERY),
            "blob_bytes": BLOB_BYTES,
            "pack_bytes": ds.pack_bytes,
            "refs": ds.refs,
            "cache": ds.dir.display().to_string(),
        },
        "fetch": {
            "wants": expect.wants,
            "objects": expect.objects,
            "pack_bytes_seedd": r0.pack_bytes,
            "pack_bytes_radicle_node": r1.pack_bytes,
        },
        "rows": json_rows,
        "targets": targets.iter().map(|(n, v, m)| json!({"target": n, "value": v, "met": m})).collect::<Vec<_>>(),
        "correctness": clone_checks.iter().enumerate().map(|(si, c)| json!({
            "server": LABELS[si],
            "ok": c.as_ref().map(|c| c.ok),
            "failed": c.as_ref().map(|c| c.failed.clone()),
            "wall_s": c.as_ref().map(|c| c.wall),
        })).collect::<Vec<_>>(),
        "notes": notes,
        "seedd_pack_cache_metrics": seedd_metrics,
        "scopes": { "cpu": scopes[0].cpu_source(), "memory": scopes[0].memory_source() },
    });
    let path = measure::write_result("radicle-serve", &prov, doc);
    println!("JSON: {}", path.display());
}

const LABELS: [&str; 2] = ["seedd", "radicle-node"];
const MODES: [&str; 2] = ["cold", "warm"];

type Metric = fn(&Cell) -> &Vec<f64>;

// ------------------------------------------------------------------------------------------
// Measurements
// ------------------------------------------------------------------------------------------

/// What every fetch must return (from radicle-node's validation fetch).
struct Expect {
    objects: u32,
    wants: usize,
}

/// One (server, concurrency, mode): a value per round.
#[derive(Default)]
struct Cell {
    throughput: Vec<f64>,
    cpu_ms: Vec<f64>,
    memory_peak_mib: Vec<f64>,
    pss_mib: Vec<f64>,
    rss_mib: Vec<f64>,
    pack_mb: Vec<f64>,
    failed: Vec<f64>,
    /// The bench process's CPU over the interval / wall, % of one core (the client is
    /// pinned to one load core: near 100 % the client, not the server, sets the pace).
    client_busy: Vec<f64>,
}

impl Cell {
    /// Adds one round; returns its failures.
    fn add(&mut self, res: &Batch, iv: &Interval, expect: &Expect) -> Vec<String> {
        let mut failed: Vec<String> = res.errors.clone();
        let mut ok = 0usize;
        let mut bytes = 0u64;
        for f in &res.ok {
            if f.objects != expect.objects || f.wants != expect.wants {
                failed.push(format!(
                    "{} objects / {} wants, expected {} / {}",
                    f.objects, f.wants, expect.objects, expect.wants
                ));
            } else {
                ok += 1;
                bytes += f.pack_bytes;
            }
        }
        let secs = res.wall.as_secs_f64();
        self.throughput.push(ok as f64 / secs);
        self.cpu_ms
            .push(iv.cpu_usec as f64 / 1000.0 / ok.max(1) as f64);
        self.memory_peak_mib
            .push(iv.memory_peak.map_or(f64::NAN, |b| b as f64 / 1048576.0));
        self.pss_mib.push(iv.pss_peak_kib as f64 / 1024.0);
        self.rss_mib.push(iv.rss_peak_kib as f64 / 1024.0);
        self.pack_mb.push(bytes as f64 / 1e6 / ok.max(1) as f64);
        self.failed.push(failed.len() as f64);
        failed
    }
}

/// Waits (at most 5 s) until `scope` is idle ([`measure::wait_idle`]).
fn quiet(scope: &Scope) {
    measure::wait_idle(scope, Duration::from_secs(5));
}

/// `n` concurrent fetches.
struct Batch {
    ok: Vec<Fetched>,
    errors: Vec<String>,
    wall: Duration,
}

async fn fetch_many(addr: SocketAddr, nid: NodeId, rid: &str, n: usize) -> Batch {
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|_| tokio::spawn(fetch(addr, nid, rid.to_owned(), false)))
        .collect();
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    for t in tasks {
        match t.await {
            Ok(Ok(f)) => ok.push(f),
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(format!("task: {e}")),
        }
    }
    Batch {
        ok,
        errors,
        wall: t0.elapsed(),
    }
}

// ------------------------------------------------------------------------------------------
// The raw fetch client
// ------------------------------------------------------------------------------------------

/// One fetch's result.
struct Fetched {
    refs: usize,
    wants: usize,
    /// Bytes of side-band channel 1 (the pack).
    pack_bytes: u64,
    /// Object count from the pack header.
    objects: u32,
    /// The whole pack and the wants (validation fetch only).
    pack: Option<Vec<u8>>,
    want_oids: Vec<String>,
}

fn pkt(payload: &[u8]) -> Vec<u8> {
    let mut v = format!("{:04x}", payload.len() + 4).into_bytes();
    v.extend_from_slice(payload);
    v
}

enum Pkt {
    Flush,
    Delim,
    End,
    /// Payload range in [`Conn::pending`].
    Data(usize, usize),
}

/// A connection after the handshake, with the pkt-line reader of git stream `stream`.
/// Frames are parsed in place (protocol.md §3.4): the bytes of our git stream are copied once,
/// into `pending`; gossip is skipped, a Close of our stream noted.
struct Conn {
    tcp: TcpStream,
    stream: StreamId,
    /// Bytes received and not yet parsed as frames (from `raw_pos`).
    raw: Vec<u8>,
    raw_pos: usize,
    /// Gossip frames seen.
    gossip: usize,
    /// Git bytes received on `stream` and not yet consumed (from `pos`).
    pending: Vec<u8>,
    pos: usize,
    closed: bool,
}

/// A QUIC varint (§3.5) at the start of `b`: (value, length), `None` if incomplete.
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    let bytes = b.get(..len)?;
    let mut v = u64::from(first & 0x3f);
    for x in &bytes[1..] {
        v = (v << 8) | u64::from(*x);
    }
    Some((v, len))
}

impl Conn {
    /// Parses the complete frames in `raw`; whether one was of our stream.
    fn parse(&mut self) -> Result<bool, String> {
        let mut got = false;
        loop {
            let b = &self.raw[self.raw_pos..];
            if b.len() < 5 {
                break;
            }
            if &b[..4] != b"rad\x01" {
                return Err(format!("bad frame magic {:?}", &b[..4]));
            }
            let Some((sid, n1)) = varint(&b[4..]) else {
                break;
            };
            let rest = &b[4 + n1..];
            let used = match (sid >> 1) & 3 {
                0 => {
                    let Some(&ty) = rest.first() else { break };
                    let Some((target, n2)) = varint(&rest[1..]) else {
                        break;
                    };
                    if ty == 1 && target == self.stream.as_u64() {
                        self.closed = true;
                        got = true;
                    }
                    4 + n1 + 1 + n2
                }
                kind @ (1 | 2) => {
                    let Some((len, n2)) = varint(rest) else {
                        break;
                    };
                    let total = 4 + n1 + n2 + len as usize;
                    if b.len() < total {
                        break;
                    }
                    if kind == 1 {
                        self.gossip += 1;
                    } else if sid == self.stream.as_u64() {
                        self.pending.extend_from_slice(&b[4 + n1 + n2..total]);
                        got = true;
                    }
                    total
                }
                k => return Err(format!("stream kind {k}")),
            };
            self.raw_pos += used;
        }
        if self.raw_pos == self.raw.len() {
            self.raw.clear();
            self.raw_pos = 0;
        } else if self.raw_pos > 1 << 20 {
            self.raw.drain(..self.raw_pos);
            self.raw_pos = 0;
        }
        Ok(got)
    }

    /// Reads from the socket once (into `raw`'s spare capacity, no zeroing).
    async fn read_some(&mut self) -> Result<(), String> {
        self.raw.reserve(256 * 1024);
        let n = self
            .tcp
            .read_buf(&mut self.raw)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("connection closed by the server".into());
        }
        Ok(())
    }

    /// Takes one complete pkt-line from `pending`.
    fn take(&mut self) -> Result<Option<Pkt>, String> {
        let avail = &self.pending[self.pos..];
        if avail.len() < 4 {
            return Ok(None);
        }
        let len = std::str::from_utf8(&avail[..4])
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or_else(|| format!("bad pkt-line length {:?}", &avail[..4]))?;
        let p = match len {
            0 => Pkt::Flush,
            1 => Pkt::Delim,
            2 => Pkt::End,
            3 => return Err("pkt-line length 3".into()),
            n if avail.len() < n => return Ok(None),
            n => Pkt::Data(self.pos + 4, self.pos + n),
        };
        self.pos += len.max(4);
        Ok(Some(p))
    }

    /// The next pkt-line, reading frames as needed.
    async fn next(&mut self) -> Result<Pkt, String> {
        loop {
            if let Some(p) = self.take()? {
                return Ok(p);
            }
            if self.closed {
                return Err("the server closed the stream".into());
            }
            if self.pos > 0 {
                self.pending.drain(..self.pos);
                self.pos = 0;
            }
            self.read_frames().await?;
        }
    }

    /// Reads until a frame of our stream arrived: git data into `pending`, Close into
    /// `closed`; gossip and other streams are skipped.
    async fn read_frames(&mut self) -> Result<(), String> {
        while !self.parse()? {
            self.read_some().await?;
        }
        Ok(())
    }

    async fn send_git(&mut self, payload: Vec<u8>) -> Result<(), String> {
        let bytes = Frame::git(self.stream, payload).encode().unwrap();
        self.tcp
            .write_all(&bytes)
            .await
            .map_err(|e| format!("write: {e}"))
    }

    /// Data pkt-lines up to the next flush.
    async fn until_flush(&mut self) -> Result<Vec<Vec<u8>>, String> {
        let mut lines = Vec::new();
        loop {
            match self.next().await? {
                Pkt::Flush => return Ok(lines),
                Pkt::Data(a, b) => lines.push(self.pending[a..b].to_vec()),
                Pkt::Delim | Pkt::End => {}
            }
        }
    }
}

/// One fetch of every ref of `rid` (canonical, without `rad:`) from the server at `addr`.
async fn fetch(addr: SocketAddr, nid: NodeId, rid: String, keep: bool) -> Result<Fetched, String> {
    match tokio::time::timeout(FETCH_MAX, fetch_inner(addr, nid, &rid, keep)).await {
        Ok(r) => r,
        Err(_) => Err(format!("timed out after {FETCH_MAX:?}")),
    }
}

async fn fetch_inner(
    addr: SocketAddr,
    nid: NodeId,
    rid: &str,
    keep: bool,
) -> Result<Fetched, String> {
    let mut tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    // The handshake as `seedd_benches::establish` does it (a fresh random NodeId), then the
    // server's three initial gossip messages, read by the in-place frame parser.
    let (awaiting, act1) = Initiator::new(Keypair::generate(), Keypair::generate(), nid)
        .act1()
        .map_err(|e| format!("act1: {e}"))?;
    tcp.write_all(&act1)
        .await
        .map_err(|e| format!("sending act1: {e}"))?;
    let mut act2 = [0u8; ACT2_LEN];
    tcp.read_exact(&mut act2)
        .await
        .map_err(|e| format!("reading act2: {e}"))?;
    let (act3, _) = awaiting.act3(&act2).map_err(|e| format!("act3: {e}"))?;
    tcp.write_all(&act3)
        .await
        .map_err(|e| format!("sending act3: {e}"))?;
    let stream = StreamId::git(Link::Outbound, 1).unwrap();
    let mut conn = Conn {
        tcp,
        stream,
        raw: Vec::with_capacity(512 * 1024),
        raw_pos: 0,
        gossip: 0,
        pending: Vec::with_capacity(256 * 1024),
        pos: 0,
        closed: false,
    };
    while conn.gossip < 3 {
        conn.read_some()
            .await
            .map_err(|e| format!("initial messages: {e}"))?;
        conn.parse()?;
    }
    // Open + header.
    let mut out = Frame::control(Link::Outbound, Control::Open { stream })
        .encode()
        .unwrap();
    Frame::git(
        stream,
        pkt(format!("git-upload-pack /{rid}\0\0version=2\0").as_bytes()),
    )
    .encode_into(&mut out)
    .unwrap();
    conn.tcp
        .write_all(&out)
        .await
        .map_err(|e| format!("write: {e}"))?;
    let caps = conn.until_flush().await?;
    if caps.first().map(Vec::as_slice) != Some(b"version 2\n".as_slice()) {
        return Err(format!(
            "no v2 advertisement: {:?}",
            caps.first()
                .map(|l| String::from_utf8_lossy(l).into_owned())
        ));
    }
    // ls-refs: every ref.
    let mut req = pkt(b"command=ls-refs\n");
    req.extend(pkt(AGENT.as_bytes()));
    req.extend_from_slice(b"0001");
    req.extend(pkt(b"peel\n"));
    req.extend(pkt(b"symrefs\n"));
    req.extend_from_slice(b"0000");
    conn.send_git(req).await?;
    let refs = conn.until_flush().await?;
    let mut wants = BTreeSet::new();
    for l in &refs {
        let l = String::from_utf8_lossy(l);
        let oid = l.split(' ').next().unwrap_or_default();
        if oid.len() == 40 && oid.bytes().all(|b| b.is_ascii_hexdigit()) {
            wants.insert(oid.to_owned());
        } else {
            return Err(format!("ls-refs line {l:?}"));
        }
    }
    if wants.is_empty() {
        return Err("ls-refs listed no refs".into());
    }
    // fetch: every oid, no haves, done.
    let mut req = pkt(b"command=fetch\n");
    req.extend(pkt(AGENT.as_bytes()));
    req.extend_from_slice(b"0001");
    req.extend(pkt(b"thin-pack\n"));
    req.extend(pkt(b"ofs-delta\n"));
    req.extend(pkt(b"no-progress\n"));
    for w in &wants {
        req.extend(pkt(format!("want {w}\n").as_bytes()));
    }
    req.extend(pkt(b"done\n"));
    req.extend_from_slice(b"0000");
    conn.send_git(req).await?;
    // Sections up to "packfile", then side-band lines up to the flush.
    loop {
        match conn.next().await? {
            Pkt::Data(a, b) if &conn.pending[a..b] == b"packfile\n" => break,
            Pkt::Data(..) | Pkt::Delim => {}
            Pkt::Flush | Pkt::End => return Err("response ended before the packfile".into()),
        }
    }
    let mut pack_bytes = 0u64;
    let mut head = Vec::with_capacity(12);
    let mut pack = keep.then(Vec::new);
    loop {
        match conn.next().await? {
            Pkt::Flush => break,
            Pkt::Data(a, b) if b > a => {
                let data = &conn.pending[a + 1..b];
                match conn.pending[a] {
                    1 => {
                        pack_bytes += data.len() as u64;
                        if head.len() < 12 {
                            let need = (12 - head.len()).min(data.len());
                            head.extend_from_slice(&data[..need]);
                        }
                        if let Some(p) = pack.as_mut() {
                            p.extend_from_slice(data);
                        }
                    }
                    2 => {}
                    3 => {
                        return Err(format!(
                            "server error: {}",
                            String::from_utf8_lossy(data).trim()
                        ))
                    }
                    b => return Err(format!("side-band channel {b}")),
                }
            }
            Pkt::Data(..) | Pkt::Delim | Pkt::End => {}
        }
    }
    if head.len() < 12 || &head[..4] != b"PACK" {
        return Err(format!("no pack ({pack_bytes} bytes)"));
    }
    let objects = u32::from_be_bytes([head[8], head[9], head[10], head[11]]);
    // Done writing: Eof, then the server's Close.
    let eof = Frame::control(Link::Outbound, Control::Eof { stream })
        .encode()
        .unwrap();
    conn.tcp
        .write_all(&eof)
        .await
        .map_err(|e| format!("write: {e}"))?;
    while !conn.closed {
        conn.pending.clear();
        conn.pos = 0;
        conn.read_frames().await?;
    }
    let close = Frame::control(Link::Outbound, Control::Close { stream })
        .encode()
        .unwrap();
    let _ = conn.tcp.write_all(&close).await;
    // A reset, not a FIN: radicle-node ignores a FIN and keeps the session (§3.9).
    let _ = rustix::net::sockopt::set_socket_linger(&conn.tcp, Some(Duration::ZERO));
    drop(conn);
    Ok(Fetched {
        refs: refs.len(),
        wants: wants.len(),
        pack_bytes,
        objects,
        pack,
        want_oids: if keep {
            wants.into_iter().collect()
        } else {
            Vec::new()
        },
    })
}

/// The validation fetch's pack: SHA-1 trailer, `git index-pack`, and every want present.
fn check_pack(f: &Fetched, ds: &Dataset) -> Result<(), String> {
    use sha1::{Digest as _, Sha1};
    let pack = f.pack.as_ref().ok_or("pack not kept")?;
    if pack.len() < 32 {
        return Err("pack too short".into());
    }
    let (body, trailer) = pack.split_at(pack.len() - 20);
    if Sha1::digest(body).as_slice() != trailer {
        return Err("SHA-1 trailer mismatch".into());
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let git = |args: &[&str]| {
        seedd_tests::git(dir.path())
            .arg("-C")
            .arg(dir.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())
    };
    let o = git(&["init", "-q", "--bare", "r"])?;
    if !o.status.success() {
        return Err("git init failed".into());
    }
    let pf = dir.path().join("r/objects/pack/pack-check.pack");
    std::fs::write(&pf, pack).map_err(|e| e.to_string())?;
    let o = git(&["-C", "r", "index-pack", "objects/pack/pack-check.pack"])?;
    if !o.status.success() {
        return Err(format!("index-pack: {}", text(&o)));
    }
    let mut args = vec!["-C", "r", "rev-list", "--objects", "--quiet"];
    args.extend(f.want_oids.iter().map(String::as_str));
    let o = git(&args)?;
    if !o.status.success() {
        return Err(format!("rev-list --objects of the wants: {}", text(&o)));
    }
    let o = git(&[
        "-C",
        "r",
        "cat-file",
        "-e",
        &format!("{}^{{commit}}", ds.head),
    ])?;
    if !o.status.success() {
        return Err("the head commit is missing".into());
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Servers
// ------------------------------------------------------------------------------------------

struct Server {
    child: Child,
    addr: SocketAddr,
    nid: NodeId,
    nid_str: String,
    /// What [`measure::evict`] drops: seedd's data dir, radicle-node's RAD_HOME.
    data: PathBuf,
    log: PathBuf,
    /// seedd's Prometheus endpoint.
    metrics: Option<String>,
}

impl Server {
    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn peer(&self) -> String {
        format!("{}@{}", self.nid_str, self.addr)
    }

    /// SIGTERM, then SIGKILL after 20 s.
    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// seedd with a copy of the dataset's repository in its storage, as `spawn_seedd` configures
/// it (loopback listeners, policy allow/all, `RUST_LOG=info`), started in `scope`.
fn start_seedd(scope: &Scope, bin: &Path, ds: &Dataset, dir: &Path) -> Server {
    let data = dir.join("data");
    copy_tree(
        &ds.home.join("storage").join(&ds.canonical),
        &data.join("storage").join(&ds.canonical),
    );
    let (http, admin, p2p) = (free_port(), free_port(), free_port());
    let config = format!(
        "data_dir = \"{}\"\nalias = \"rserve\"\n[p2p]\nlisten = [\"127.0.0.1:{p2p}\"]\n[http]\nlisten = \"127.0.0.1:{http}\"\n[admin]\nlisten = \"127.0.0.1:{admin}\"\n[policy]\ndefault = \"allow\"\nscope = \"all\"\n",
        data.display()
    );
    let config_path = dir.join("seedd.toml");
    std::fs::write(&config_path, config).unwrap();
    let log = dir.join("seedd.log");
    let log_file = std::fs::File::create(&log).unwrap();
    let child = scope
        .command(bin)
        .arg("run")
        .arg("--config")
        .arg(&config_path)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .spawn()
        .unwrap();
    scope.started(child.id());
    let admin_url = |p: &str| format!("http://127.0.0.1:{admin}{p}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !matches!(http_get(&admin_url("/readyz"), &[]), Ok((200, _))) {
        assert!(
            Instant::now() < deadline,
            "seedd did not become ready; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let token = std::fs::read_to_string(data.join("admin-token")).unwrap();
    let auth = format!("Bearer {}", token.trim());
    let (status, body) = http_post(
        &admin_url("/api/v1/rescan"),
        &[("Authorization", &auth)],
        b"",
    )
    .unwrap();
    assert_eq!(status, 200, "rescan: {body}");
    let (status, body) =
        http_get(&admin_url("/api/v1/status"), &[("Authorization", &auth)]).unwrap();
    assert_eq!(status, 200, "status: {body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let nid_str = v["nid"].as_str().unwrap().to_owned();
    Server {
        child,
        addr: format!("127.0.0.1:{p2p}").parse().unwrap(),
        nid: nid_str.parse().unwrap(),
        nid_str,
        data,
        log,
        metrics: Some(admin_url("/metrics")),
    }
}

/// radicle-node on a copy of the dataset's home (the node that created the repository), with
/// the settings of the harness's `RadNode::start_with`, started in `scope`.
fn start_radicle(scope: &Scope, ds: &Dataset, dir: &Path) -> Server {
    let home = dir.join(SOURCE);
    copy_tree(&ds.home, &home);
    let _ = std::fs::remove_file(home.join("node").join("control.sock"));
    let port = free_port();
    configure_node(
        &home,
        port,
        &[],
        &json!({ "default": "allow", "scope": "all" }),
    );
    let log = dir.join(format!("{SOURCE}.log"));
    let log_file = std::fs::File::create(&log).unwrap();
    let child = scope
        .command(radicle_bin("radicle-node"))
        .arg("--log-level")
        .arg("info")
        .env("RAD_HOME", &home)
        .env("RAD_PASSPHRASE", "")
        .env_remove("RAD_SOCKET")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .spawn()
        .unwrap();
    scope.started(child.id());
    let deadline = Instant::now() + Duration::from_secs(60);
    let nid_str = loop {
        let out = Command::new(radicle_bin("rad"))
            .args(["node", "status", "--only", "nid"])
            .env("RAD_HOME", &home)
            .env("RAD_PASSPHRASE", "")
            .env_remove("RAD_SOCKET")
            .output()
            .unwrap();
        let nid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.status.success()
            && nid.starts_with("z6Mk")
            && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        {
            break nid;
        }
        assert!(
            Instant::now() < deadline,
            "radicle-node did not start; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    Server {
        child,
        addr: format!("127.0.0.1:{port}").parse().unwrap(),
        nid: nid_str.parse().unwrap(),
        nid_str,
        data: home,
        log,
        metrics: None,
    }
}

/// `config.json` as `RadNode::start_with` writes it.
fn configure_node(home: &Path, port: u16, connect: &[String], seeding: &Value) {
    let cfg_path = home.join("config.json");
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    let node = &mut cfg["node"];
    node["listen"] = json!([format!("127.0.0.1:{port}")]);
    node["connect"] = json!(connect);
    node["network"] = Value::from("test");
    node["peers"] = json!({ "type": "static" });
    node["externalAddresses"] = json!([]);
    node["seedingPolicy"] = seeding.clone();
    node["alias"] = Value::from(SOURCE);
    cfg["preferredSeeds"] = json!([]);
    std::fs::write(&cfg_path, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
}

// ------------------------------------------------------------------------------------------
// Correctness: rad clone
// ------------------------------------------------------------------------------------------

struct CloneCheck {
    ok: usize,
    failed: Vec<String>,
    wall: f64,
}

/// `clients` fresh radicle-nodes (seeding policy block, connected to the server) each run
/// `rad clone <rid> --seed <server>` at once; each clone must check out the dataset's head.
fn clone_check(ds: &Dataset, s: &Server, clients: usize, log: &dyn Fn(&str)) -> CloneCheck {
    let nodes: Vec<RadNode> = (0..clients)
        .map(|i| {
            RadNode::start_with(
                &format!("rsc{i}"),
                &[s.peer()],
                RadNodeOptions {
                    dir: Some(node_dir()),
                    log_level: "info".into(),
                    seeding_policy: json!({ "default": "block" }),
                    wait_listening: true,
                    ..RadNodeOptions::default()
                },
            )
        })
        .collect();
    let route = (ds.rid.clone(), s.nid_str.clone());
    for n in &nodes {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !n.routing().contains(&route) {
            if Instant::now() > deadline {
                log(&format!(
                    "  WARNING: {} does not list the server as a seed of the repository",
                    n.name
                ));
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let work = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let results: Vec<Output> = std::thread::scope(|sc| {
        let handles: Vec<_> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let dir = work.path();
                let rid = &ds.rid;
                let seed = &s.nid_str;
                sc.spawn(move || {
                    n.rad_in(
                        dir,
                        &[
                            "clone",
                            rid,
                            &format!("c{i}"),
                            "--seed",
                            seed,
                            "--timeout",
                            "300s",
                        ],
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let wall = t0.elapsed().as_secs_f64();
    let mut ok = 0;
    let mut failed = Vec::new();
    for (i, out) in results.iter().enumerate() {
        let dir = work.path().join(format!("c{i}"));
        let head = if dir.is_dir() {
            let out = nodes[i].git_in(&dir, &["rev-parse", "HEAD"]);
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        } else {
            String::new()
        };
        if out.status.success() && head == ds.head {
            ok += 1;
        } else {
            failed.push(format!(
                "client {i}: status {}, HEAD {head:?}: {}",
                out.status,
                tail(&text(out), 6)
            ));
        }
    }
    CloneCheck { ok, failed, wall }
}

/// A short directory under /tmp (the control socket path must stay under 108 bytes).
fn node_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("rs")
        .tempdir_in("/tmp")
        .unwrap()
}

// ------------------------------------------------------------------------------------------
// Dataset
// ------------------------------------------------------------------------------------------

struct Dataset {
    dir: PathBuf,
    /// The source's RAD_HOME (node stopped), copied for every server start.
    home: PathBuf,
    rid: String,
    canonical: String,
    head: String,
    pack_bytes: u64,
    refs: usize,
}

/// The cached dataset in `root/<DATA_VERSION>`, made first if missing: a history written
/// with `git fast-import`, published by a real `rad init` on a fresh radicle-node, the node
/// started once more (it migrates `rad/sigrefs` on its first start), its storage repacked into
/// one pack (as a seed that has held the repository for a while).
fn dataset(root: &Path, log: &dyn Fn(&str)) -> Dataset {
    let dir = root.join(DATA_VERSION);
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
        "generating the repository ({COMMITS} commits) with git fast-import and rad init in {}",
        dir.display()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let opts = || RadNodeOptions {
        dir: Some(node_dir()),
        log_level: "info".into(),
        wait_listening: true,
        ..RadNodeOptions::default()
    };
    let mut node = RadNode::start_with(SOURCE, &[], opts());
    let proj = node.dir.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let ok = |out: Output, what: &str| {
        assert!(out.status.success(), "{what} failed: {}", text(&out));
    };
    ok(
        node.git_in(&proj, &["init", "-q", "-b", "main"]),
        "git init",
    );
    let stream = history();
    let mut fi = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(&proj)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        fi.stdin.take().unwrap().write_all(&stream).unwrap();
    }
    assert!(fi.wait().unwrap().success(), "git fast-import failed");
    ok(
        node.git_in(&proj, &["reset", "-q", "--hard", "main"]),
        "git reset",
    );
    ok(
        node.rad_in(
            &proj,
            &[
                "init",
                "--name",
                "rservebench",
                "--description",
                "radicle serving bench",
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
    stop_node(&mut node);
    let again = node_dir();
    copy_tree(&node.home, &again.path().join(SOURCE));
    drop(node);
    let mut node = RadNode::start_with(
        SOURCE,
        &[],
        RadNodeOptions {
            dir: Some(again),
            ..opts()
        },
    );
    stop_node(&mut node);
    let home = dir.join("home").join(SOURCE);
    copy_tree(&node.home, &home);
    drop(node);
    let _ = std::fs::remove_file(home.join("node").join("control.sock"));
    run(seedd_tests::git(&dir)
        .arg("-C")
        .arg(home.join("storage").join(rid.trim_start_matches("rad:")))
        .args(["repack", "-a", "-d", "-q"]));
    let v = json!({ "rid": rid, "head": head });
    std::fs::write(&manifest, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    Dataset::load(&dir, &v)
}

impl Dataset {
    fn load(dir: &Path, v: &Value) -> Dataset {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        let (rid, head) = (s("rid"), s("head"));
        let canonical = rid.trim_start_matches("rad:").to_owned();
        let home = dir.join("home").join(SOURCE);
        let repo = home.join("storage").join(&canonical);
        let refs = cmd_out(
            seedd_tests::git(dir)
                .arg("-C")
                .arg(&repo)
                .args(["for-each-ref", "--format=%(refname)"]),
        )
        .lines()
        .count();
        let pack_bytes = std::fs::read_dir(repo.join("objects/pack"))
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0);
        Dataset {
            dir: dir.to_owned(),
            home,
            rid,
            canonical,
            head,
            pack_bytes,
            refs,
        }
    }
}

/// The `git fast-import` stream of the history: `COMMITS` commits on `main`, commit `i`
/// rewriting 8 lines and appending 4 of text file `i % FILES` (starting from 200 lines), and
/// every `BLOB_EVERY`-th commit adding an incompressible `BLOB_BYTES` file.
fn history() -> Vec<u8> {
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    const WORDS: [&str; 16] = [
        "seed", "node", "fetch", "pack", "refs", "gossip", "stream", "noise", "frame", "commit",
        "tree", "blob", "delegate", "identity", "policy", "storage",
    ];
    let line = |next: &mut dyn FnMut() -> u64| {
        let n = 6 + next() % 8;
        let mut l = String::new();
        for _ in 0..n {
            let w = next();
            l.push_str(WORDS[(w % 16) as usize]);
            let _ = write!(l, "{} ", (w >> 8) % 1000);
        }
        l.push('\n');
        l
    };
    let mut files: Vec<Vec<String>> = (0..FILES)
        .map(|_| (0..200).map(|_| line(&mut next)).collect())
        .collect();
    let mut out = Vec::new();
    for i in 0..COMMITS {
        let f = (i % FILES) as usize;
        if i >= FILES {
            for _ in 0..8 {
                let k = (next() % files[f].len() as u64) as usize;
                files[f][k] = line(&mut next);
            }
            for _ in 0..4 {
                files[f].push(line(&mut next));
            }
        }
        let msg = format!("change {i}: file {f}\n");
        out.extend_from_slice(
            format!(
                "commit refs/heads/main\nmark :{}\ncommitter Bench <bench@example.org> {} +0000\ndata {}\n{msg}",
                i + 1,
                TIME_BASE + i * 60,
                msg.len()
            )
            .as_bytes(),
        );
        if i > 0 {
            out.extend_from_slice(format!("from :{i}\n").as_bytes());
        }
        let content = files[f].concat();
        out.extend_from_slice(
            format!(
                "M 100644 inline src/file{f:02}.txt\ndata {}\n",
                content.len()
            )
            .as_bytes(),
        );
        out.extend_from_slice(content.as_bytes());
        out.push(b'\n');
        if i % BLOB_EVERY == 0 {
            let blob = seedd_tests::incompressible(0x9e37_79b9 ^ (i + 1), BLOB_BYTES);
            out.extend_from_slice(
                format!(
                    "M 100644 inline assets/blob{:02}.bin\ndata {}\n",
                    i / BLOB_EVERY,
                    blob.len()
                )
                .as_bytes(),
            );
            out.extend_from_slice(&blob);
            out.push(b'\n');
        }
        out.push(b'\n');
    }
    out
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
