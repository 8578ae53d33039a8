//! The RocksDB index in process (`core/src/index.rs`, options in `core/src/index/tuning.rs`,
//! value encoding in `core/src/index/values.rs`): the tuned options with binary values and the
//! index from before tuning (RocksDB's defaults plus the prefix extractors, JSON values) side by
//! side, in one run, on the same generated data; then the record values alone, binary vs JSON. Targets from issue 14:
//! ≥ 200k point lookups/s and a 1k-ref batch commit p99 ≤ 5 ms. Prints a table and writes
//! JSON to `<target>/seedd-bench-index.json`. See `benches/README.md`.
//!
//! For each tuning, in a fresh directory under `<target>/seedd-bench-index/`:
//!
//! 1. load `SEEDD_BENCH_INDEX_REPOS` (100,000) repositories through `Index::put_repo`, one
//!    batch each, as the rescan writes them: a record (binary, or JSON untuned), its refs (canonical `HEAD`,
//!    `refs/heads/main`, `refs/rad/id`, and per delegate namespace `refs/namespaces/<z6Mk…>/`
//!    `refs/heads/main`, `refs/rad/id`, `refs/rad/sigrefs`, an identity COB) and signed refs;
//! 2. flush and compact, close, reopen (cold cache), one warm-up pass over every record;
//! 3. point lookups of random present RIDs for `SEEDD_BENCH_INDEX_SECS` (0.5 s) each: the
//!    decoded record (`Index::repo`, what a request does) on 1 and 2 threads, the value
//!    alone (`repo_value_len`, no JSON) on 1 and 2 threads, absent RIDs, and the per-RID prefix
//!    scan of refs (`Index::refs`);
//! 4. `SEEDD_BENCH_INDEX_BATCHES` (250) commits of one repository with 1,000 refs
//!    (`put_repo`: range delete of its old refs, record, refs, signed refs; not synced, as in
//!    the daemon), random repositories, p50/p99/max of each commit's wall time;
//! 5. values in memory, no RocksDB (10,000 of the generated records at most): mean bytes of a
//!    `repos` value, and decodes and encodes per second on 1 thread, binary vs JSON.
//!
//! Steps 1–4 are one round of a tuning; `SEEDD_BENCH_INDEX_ROUNDS` (5) rounds, the two tunings
//! in ABBA order, each round in a fresh directory; step 5 is run once per round too. Every
//! figure is the median [min–max] of its rounds.
//!
//! In process: the bench process *is* the server here (no seedd binary, no sockets), so it
//! pins itself, every thread (RocksDB's flush and compaction threads included), to the server
//! cores of `measure::Pinning` (`taskset`; one core on the 2-core machine) rather than to the
//! load cores: the index gets the cores seedd would have. The 2-thread rows then share those
//! cores (on one core they show contention, not scaling; the table says which cores). Figures
//! are wall-clock rates and latencies of the bench process itself (no children); no CPU
//! counter is read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use seedd_benches::measure::{self, Pinning, Summary};
use seedd_benches::{env_usize, fmt, write_table, TableLine};
use seedd_core::bench_index::{
    oid_target, repo_from_value, repo_value, Index, RefTarget, RepoRecord, SigrefsRecord, Tuning,
    ValueEncoding, Visibility,
};
use seedd_proto::crypto::{NodeId, RepoId};
use serde_json::json;

const TARGET_LOOKUPS: f64 = 200_000.0;
const TARGET_COMMIT_P99_MS: f64 = 5.0;
const ROUNDS: usize = 5;
const BATCH_REFS: usize = 1_000;

/// splitmix64: deterministic keys without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        for chunk in out.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        out
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One generated repository: its record, refs and signed refs.
struct Repo {
    record: RepoRecord,
    refs: Vec<(String, RefTarget)>,
    sigrefs: Vec<SigrefsRecord>,
}

fn repo(rng: &mut Rng, rid: RepoId, i: usize, delegates: usize) -> Repo {
    let nids: Vec<NodeId> = (0..delegates)
        .map(|_| NodeId::from_bytes(rng.bytes()))
        .collect();
    let mut refs = vec![
        (
            "HEAD".to_owned(),
            RefTarget::Symbolic("refs/heads/main".into()),
        ),
        ("refs/heads/main".to_owned(), oid_target(rng.bytes())),
        ("refs/rad/id".to_owned(), oid_target(rng.bytes())),
    ];
    let cob = hex(&rng.bytes::<20>());
    for nid in &nids {
        for name in ["refs/heads/main", "refs/rad/id", "refs/rad/sigrefs"] {
            refs.push((
                format!("refs/namespaces/{nid}/{name}"),
                oid_target(rng.bytes()),
            ));
        }
        refs.push((
            format!("refs/namespaces/{nid}/refs/cobs/xyz.radicle.id/{cob}"),
            oid_target(rng.bytes()),
        ));
    }
    refs.sort_by(|a, b| a.0.cmp(&b.0));
    let sigrefs = nids
        .iter()
        .map(|nid| SigrefsRecord {
            nid: *nid,
            commit: Some(hex(&rng.bytes::<20>())),
            level: None,
            error: None,
        })
        .collect();
    let record = RepoRecord {
        rid,
        name: format!("project-{i}"),
        description: "A repository generated for the index bench".into(),
        default_branch: "main".into(),
        delegates: nids.clone(),
        threshold: 1,
        visibility: Visibility::Public,
        identity_head: hex(&rng.bytes::<20>()),
        head: Some(hex(&rng.bytes::<20>())),
        fingerprint: hex(&rng.bytes::<20>()),
        ref_count: refs.len(),
        namespaces: nids,
        indexed_at: 1_764_806_400 + i as u64,
    };
    Repo {
        record,
        refs,
        sigrefs,
    }
}

/// Operations per second of `op` (called in batches of 1,000) on `threads` threads for `secs`,
/// one run. `op` gets the thread's RNG, seeded by `round` and the thread.
fn rate(threads: usize, secs: f64, round: usize, op: &(dyn Fn(&mut Rng) + Sync)) -> f64 {
    let start = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut rng = Rng(0x5eed ^ ((round * 16 + t) as u64) << 32);
                    let deadline = Duration::from_secs_f64(secs);
                    let mut n = 0u64;
                    while start.elapsed() < deadline {
                        for _ in 0..1_000 {
                            op(&mut rng);
                        }
                        n += 1_000;
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    total as f64 / start.elapsed().as_secs_f64()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Seconds per lookup run (`SEEDD_BENCH_INDEX_SECS`, default 0.5).
fn secs() -> f64 {
    std::env::var("SEEDD_BENCH_INDEX_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|s: &f64| *s > 0.0)
        .unwrap_or(0.5)
}

/// Rounds (`SEEDD_BENCH_INDEX_ROUNDS`, default 5).
fn rounds() -> usize {
    env_usize("SEEDD_BENCH_INDEX_ROUNDS", ROUNDS).max(1)
}

/// 1k-ref commits timed (`SEEDD_BENCH_INDEX_BATCHES`, default 250).
fn batches() -> usize {
    env_usize("SEEDD_BENCH_INDEX_BATCHES", 250).max(1)
}

/// The figures of one tuning, by row key.
type Figures = Vec<(&'static str, f64)>;

#[allow(clippy::too_many_arguments)]
fn measure(
    round: usize,
    tuning: Tuning,
    encoding: ValueEncoding,
    dir: &Path,
    rids: &[RepoId],
    absent: &[RepoId],
    refs_per_repo: &mut usize,
    log: &dyn Fn(&str),
) -> Figures {
    let (secs, batches) = (secs(), batches());
    let _ = std::fs::remove_dir_all(dir);
    let mut out = Figures::new();
    let n = rids.len();

    // 1. Load.
    let index = Index::open_tuned(dir, tuning)
        .unwrap()
        .with_value_encoding(encoding);
    let mut rng = Rng(42);
    let mut refs = 0;
    let started = Instant::now();
    for (i, rid) in rids.iter().enumerate() {
        let r = repo(&mut rng, *rid, i, 1 + i % 3);
        refs += r.refs.len();
        index.put_repo(&r.record, &r.refs, &r.sigrefs).unwrap();
    }
    let load = started.elapsed().as_secs_f64();
    *refs_per_repo = refs / n.max(1);
    out.push(("load_repos_per_s", n as f64 / load));
    log(&format!(
        "{tuning:?}: loaded {n} repositories, {refs} refs in {load:.1} s"
    ));
    let started = Instant::now();
    index.compact_all().unwrap();
    out.push(("compact_s", started.elapsed().as_secs_f64()));
    out.push((
        "sst_mib",
        index.sst_bytes().unwrap() as f64 / (1 << 20) as f64,
    ));
    drop(index);

    // 2. Reopen cold, warm up.
    let started = Instant::now();
    let index = Index::open_tuned(dir, tuning)
        .unwrap()
        .with_value_encoding(encoding);
    out.push(("open_s", started.elapsed().as_secs_f64()));
    for rid in rids {
        black_box(index.repo(rid).unwrap());
    }

    // 3. Lookups.
    let pick = |rng: &mut Rng| rids[rng.below(n)];
    let decoded = |rng: &mut Rng| {
        black_box(index.repo(&pick(rng)).unwrap().unwrap());
    };
    let raw = |rng: &mut Rng| {
        black_box(index.repo_value_len(&pick(rng)).unwrap().unwrap());
    };
    let miss = |rng: &mut Rng| {
        let rid = absent[rng.below(absent.len())];
        assert!(index.repo_value_len(&rid).unwrap().is_none());
    };
    let scan = |rng: &mut Rng| {
        black_box(index.refs(&pick(rng)).unwrap());
    };
    out.push(("lookup_decoded_1t", rate(1, secs, round, &decoded)));
    out.push(("lookup_decoded_2t", rate(2, secs, round, &decoded)));
    out.push(("lookup_raw_1t", rate(1, secs, round, &raw)));
    out.push(("lookup_raw_2t", rate(2, secs, round, &raw)));
    out.push(("lookup_absent_1t", rate(1, secs, round, &miss)));
    out.push(("refs_scan_1t", rate(1, secs, round, &scan)));
    log(&format!("{tuning:?}: lookups done"));

    // 4. 1k-ref batch commits.
    let mut rng = Rng(7 + ((round as u64) << 8));
    let mut times = Vec::with_capacity(batches);
    for b in 0..batches {
        let i = rng.below(n);
        let mut r = repo(&mut rng, rids[i], i, 1);
        let nid = r.record.delegates[0];
        r.refs = (0..BATCH_REFS)
            .map(|k| {
                (
                    format!("refs/namespaces/{nid}/refs/heads/branch-{b}-{k:04}"),
                    oid_target(rng.bytes()),
                )
            })
            .collect();
        r.record.ref_count = r.refs.len();
        let started = Instant::now();
        index.put_repo(&r.record, &r.refs, &r.sigrefs).unwrap();
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    out.push(("commit_1k_p50_ms", percentile(&times, 0.50)));
    out.push(("commit_1k_p99_ms", percentile(&times, 0.99)));
    out.push(("commit_1k_max_ms", times.last().copied().unwrap_or(0.0)));
    log(&format!("{tuning:?}: {batches} commits done"));
    drop(index);
    let _ = std::fs::remove_dir_all(dir);
    out
}

/// Values of CF `repos` in memory, binary vs JSON, by row key: mean bytes, decodes and encodes
/// per second (1 thread, one run of `secs`) of the first `records`.
fn values(records: &[RepoRecord], secs: f64, round: usize) -> Vec<(&'static str, f64, f64)> {
    let n = records.len();
    let encoded =
        |e| -> Vec<Vec<u8>> { records.iter().map(|r| repo_value(r, e).unwrap()).collect() };
    let (bin, json) = (encoded(ValueEncoding::Binary), encoded(ValueEncoding::Json));
    let mean = |v: &[Vec<u8>]| v.iter().map(Vec::len).sum::<usize>() as f64 / n as f64;
    let decode = |values: &[Vec<u8>]| {
        rate(1, secs, round, &|rng: &mut Rng| {
            let i = rng.below(n);
            black_box(repo_from_value(&records[i].rid, &values[i]).unwrap());
        })
    };
    let encode = |e| {
        rate(1, secs, round, &|rng: &mut Rng| {
            black_box(repo_value(&records[rng.below(n)], e).unwrap());
        })
    };
    vec![
        ("value_bytes", mean(&bin), mean(&json)),
        ("decode_1t", decode(&bin), decode(&json)),
        (
            "encode_1t",
            encode(ValueEncoding::Binary),
            encode(ValueEncoding::Json),
        ),
    ]
}

/// Label, unit and which way is better, by row key.
fn describe(key: &str) -> (&'static str, &'static str, &'static str) {
    match key {
        "load_repos_per_s" => (
            "load: put_repo, one batch per repository",
            "repos/s",
            "higher",
        ),
        "compact_s" => ("flush + full compaction", "s", "lower"),
        "sst_mib" => ("SST files after compaction", "MiB", "lower"),
        "open_s" => ("open (census of every record)", "s", "lower"),
        "lookup_decoded_1t" => (
            "lookup: record by RID, decoded, 1 thread",
            "ops/s",
            "higher",
        ),
        "lookup_decoded_2t" => (
            "lookup: record by RID, decoded, 2 threads",
            "ops/s",
            "higher",
        ),
        "lookup_raw_1t" => (
            "lookup: value by RID, not decoded, 1 thread",
            "ops/s",
            "higher",
        ),
        "lookup_raw_2t" => (
            "lookup: value by RID, not decoded, 2 threads",
            "ops/s",
            "higher",
        ),
        "lookup_absent_1t" => ("lookup: absent RID, 1 thread", "ops/s", "higher"),
        "refs_scan_1t" => (
            "refs of one RID (prefix scan), 1 thread",
            "scans/s",
            "higher",
        ),
        "commit_1k_p50_ms" => ("commit of 1,000 refs, p50", "ms", "lower"),
        "commit_1k_p99_ms" => ("commit of 1,000 refs, p99", "ms", "lower"),
        "commit_1k_max_ms" => ("commit of 1,000 refs, max", "ms", "lower"),
        "value_bytes" => ("repos value, mean size", "bytes", "lower"),
        "decode_1t" => ("decode a repos value, 1 thread", "ops/s", "higher"),
        "encode_1t" => ("encode a repos value, 1 thread", "ops/s", "higher"),
        _ => ("?", "", ""),
    }
}

fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_owned()))
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// Label, unit and which way is better of a row key, with the 2-thread rows naming the cores
/// they ran on.
fn describe_on(key: &str, cores: &Option<String>) -> (String, &'static str, &'static str) {
    let (label, unit, better) = describe(key);
    let label = match (key.ends_with("_2t"), cores) {
        (true, Some(c)) => format!("{label} (cpus {c})"),
        _ => label.to_owned(),
    };
    (label, unit, better)
}

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    let prov = measure::provenance("index");
    // Before RocksDB starts its threads.
    let pinned = Pinning::pin_self_to_server();
    let cores = Pinning::get().server.clone();
    let repos = env_usize("SEEDD_BENCH_INDEX_REPOS", 100_000).max(1);
    let rounds = rounds();
    if rounds < ROUNDS {
        measure::record_override(&format!(
            "SEEDD_BENCH_INDEX_ROUNDS={rounds} (fewer than {ROUNDS} rounds)"
        ));
    }
    if repos != 100_000 {
        measure::record_config_diff(&format!(
            "SEEDD_BENCH_INDEX_REPOS = {repos} (default 100000)"
        ));
    }
    let log = |m: &str| eprintln!("[index bench] {m}");
    let target = target_dir();
    let base = target.join("seedd-bench-index");
    let mut rng = Rng(1);
    let rids: Vec<RepoId> = (0..repos)
        .map(|_| RepoId::from_oid_bytes(rng.bytes()))
        .collect();
    let absent: Vec<RepoId> = (0..10_000)
        .map(|_| RepoId::from_oid_bytes(rng.bytes()))
        .collect();
    let mut rng = Rng(42);
    let records: Vec<RepoRecord> = rids
        .iter()
        .take(10_000)
        .enumerate()
        .map(|(i, rid)| repo(&mut rng, *rid, i, 1 + i % 3).record)
        .collect();
    let started = Instant::now();
    let mut refs_per_repo = 0;
    // figures[0] untuned, [1] tuned; one Figures per round.
    let mut figures: [Vec<Figures>; 2] = [Vec::new(), Vec::new()];
    let mut value_rounds: Vec<Vec<(&'static str, f64, f64)>> = Vec::new();
    for round in 0..rounds {
        for k in measure::abba(round, 2) {
            let (tuning, encoding, dir) = if k == 0 {
                (Tuning::Untuned, ValueEncoding::Json, base.join("untuned"))
            } else {
                (Tuning::default(), ValueEncoding::Binary, base.join("tuned"))
            };
            log(&format!("round {}/{rounds}: {tuning:?}", round + 1));
            figures[k].push(measure(
                round,
                tuning,
                encoding,
                &dir,
                &rids,
                &absent,
                &mut refs_per_repo,
                &log,
            ));
        }
        value_rounds.push(values(&records, secs(), round));
    }
    let _ = std::fs::remove_dir_all(&base);
    log("values done");

    // Per row key: (tuned, untuned) rounds.
    let per_key = |f: &[Figures], key: &str| -> Vec<f64> {
        f.iter()
            .filter_map(|fig| fig.iter().find(|(k, _)| *k == key).map(|(_, v)| *v))
            .collect()
    };
    let keys: Vec<&'static str> = figures[1]
        .first()
        .map(|f| f.iter().map(|(k, _)| *k).collect())
        .unwrap_or_default();
    let rows: Vec<(&str, Option<Summary>, Option<Summary>)> = keys
        .iter()
        .map(|k| {
            (
                *k,
                Summary::of(&per_key(&figures[1], k)),
                Summary::of(&per_key(&figures[0], k)),
            )
        })
        .collect();
    let value_keys: Vec<&'static str> = value_rounds
        .first()
        .map(|v| v.iter().map(|r| r.0).collect())
        .unwrap_or_default();
    let value_rows: Vec<(&str, Option<Summary>, Option<Summary>)> = value_keys
        .iter()
        .map(|k| {
            let pick = |json: bool| -> Vec<f64> {
                value_rounds
                    .iter()
                    .filter_map(|v| {
                        v.iter()
                            .find(|r| r.0 == *k)
                            .map(|r| if json { r.2 } else { r.1 })
                    })
                    .collect()
            };
            (*k, Summary::of(&pick(false)), Summary::of(&pick(true)))
        })
        .collect();
    let med = |s: &Option<Summary>| s.map_or(f64::NAN, |s| s.median);
    let get = |key: &str| rows.iter().find(|r| r.0 == key).map_or(0.0, |r| med(&r.1));
    let lookups_1t = get("lookup_decoded_1t");
    let lookups_2t = get("lookup_decoded_2t");
    let p99 = get("commit_1k_p99_ms");
    let lookups_met = lookups_2t >= TARGET_LOOKUPS;
    let commit_met = p99 <= TARGET_COMMIT_P99_MS;
    let show = |s: &Option<Summary>| s.map_or("-".to_owned(), |s| s.to_string());
    let ratio = |a: &Option<Summary>, b: &Option<Summary>| match (a, b) {
        (Some(a), Some(b)) => a.ratio(b),
        _ => None,
    };

    let mut t = format!(
        "\nseedd RocksDB index: {repos} repositories, ~{refs_per_repo} refs each; tuned (64 MiB \
         shared cache, blooms, LZ4, binary values) vs untuned (RocksDB defaults + prefix \
         extractors, JSON values)\n{rounds} rounds (ABBA order), median [min–max], ratio of medians; \
         {} s per lookup run; {pinned}\n{}\n\n",
        secs(),
        prov.line()
    );
    let labels: Vec<(String, &str, &str)> = rows
        .iter()
        .map(|(k, _, _)| describe_on(k, &cores))
        .collect();
    let lines: Vec<TableLine> = rows
        .iter()
        .zip(&labels)
        .map(|((_, tuned, untuned), (label, unit, better))| TableLine {
            group: "",
            metric: label,
            seedd: show(tuned),
            other: show(untuned),
            ratio: fmt(ratio(tuned, untuned)),
            unit,
            better,
        })
        .collect();
    write_table(
        &mut t,
        ["", "row", "tuned", "untuned", "ratio", "unit"],
        [0, 56, 28, 28, 6, 8],
        134,
        lines,
    );
    t.push_str(&format!(
        "\nrecord values alone (no RocksDB), {} records: binary (format byte + postcard) vs JSON\n\n",
        records.len()
    ));
    let lines: Vec<TableLine> = value_rows
        .iter()
        .map(|(key, bin, json)| {
            let (label, unit, better) = describe(key);
            TableLine {
                group: "",
                metric: label,
                seedd: show(bin),
                other: show(json),
                ratio: fmt(ratio(bin, json)),
                unit,
                better,
            }
        })
        .collect();
    write_table(
        &mut t,
        ["", "row", "binary", "JSON", "ratio", "unit"],
        [0, 56, 28, 28, 6, 8],
        134,
        lines,
    );
    let verdict = |met| if met { "MET" } else { "NOT MET" };
    t.push_str(&format!(
        "\ntargets (issue 14), tuned, medians:\n  point lookups ≥ {TARGET_LOOKUPS:.0}/s (decoded record, 2 threads{}): {} — {} (1 thread: {})\n  \
         1k-ref batch commit p99 ≤ {TARGET_COMMIT_P99_MS} ms: {} ms — {}\n({:.1} s)\n",
        cores.as_deref().map_or(String::new(), |c| format!(" on cpus {c}")),
        fmt(Some(lookups_2t)),
        verdict(lookups_met),
        fmt(Some(lookups_1t)),
        fmt(Some(p99)),
        verdict(commit_met),
        started.elapsed().as_secs_f64(),
    ));
    print!("{t}");

    let j = |s: &Option<Summary>| s.map(|s| s.to_json());
    let json = json!({
        "schema": 2,
        "repos": repos,
        "refs_per_repo": refs_per_repo,
        "batch_refs": BATCH_REFS,
        "seconds_per_run": secs(),
        "rounds": rounds,
        "batches": batches(),
        "pinning": pinned,
        "timing": "wall clock of the bench process itself (no children)",
        "results": rows.iter().zip(&labels).map(|((key, tuned, untuned), (label, unit, better))| {
            json!({"key": key, "label": label, "tuned": j(tuned), "untuned": j(untuned),
                   "ratio_of_medians": ratio(tuned, untuned), "unit": unit, "better": better})
        }).collect::<Vec<_>>(),
        "values": value_rows.iter().map(|(key, bin, json)| {
            let (label, unit, better) = describe(key);
            json!({"key": key, "label": label, "binary": j(bin), "json": j(json),
                   "ratio_of_medians": ratio(bin, json), "unit": unit, "better": better})
        }).collect::<Vec<_>>(),
        "targets": [
            {
                "target": "point lookups/s, decoded record, 2 threads (tuned, median)",
                "value": lookups_2t,
                "goal": format!("≥ {TARGET_LOOKUPS:.0}"),
                "met": lookups_met,
            },
            {
                "target": "1k-ref batch commit p99 ms (tuned, median)",
                "value": p99,
                "goal": format!("≤ {TARGET_COMMIT_P99_MS}"),
                "met": commit_met,
            },
        ],
        "table": t,
    });
    let path = measure::write_result("index", prov, json);
    eprintln!("[index bench] JSON: {}", path.display());
}
