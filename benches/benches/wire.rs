//! Throughput of the sans-IO wire core (`seedd-proto`) on one thread: announcement
//! decode+verify, full Noise handshakes and announcement encode+sign. Prints a table and
//! writes the same figures as JSON to `<target>/seedd-bench-wire.json`. See
//! `benches/runs/wire.md`.
//!
//! In process: the bench process *is* the server here (no seedd binary, no sockets), so it
//! pins itself (every thread) to the server cores of [`Pinning`] (`taskset`; one core on the
//! 2-core machine) rather than to the load cores. Rates are per core: operations divided by the
//! measuring thread's own CPU time (`/proc/thread-self/schedstat`, ns; else `utime+stime` of
//! `/proc/thread-self/stat`): the bench process itself, no children, so other load on the
//! machine does not lower them; the wall time is reported as well. Each row is
//! `SEEDD_BENCH_WIRE_ROUNDS` (5) rounds of `SEEDD_BENCH_WIRE_SECS` (0.3 s) after a warm-up:
//! median [min–max] of the rounds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use seedd_benches::measure::{self, Pinning, Summary};
use seedd_proto::crypto::{mock_seed, Keypair, NodeId, RepoId};
use seedd_proto::wire::handshake::{Initiator, Responder};
use seedd_proto::wire::message::{InventoryAnnouncement, NodeAnnouncement, RefsAnnouncement};
use seedd_proto::wire::{
    Address, AnnouncementMessage, Frame, FrameDecoder, Host, Link, Message, Oid, RefsAt,
};

/// Announcing nodes in the mix.
const NODES: u64 = 64;
/// Per node: one node announcement, one inventory announcement and this many refs
/// announcements (refs announcements are the most frequent: one per push).
const REFS_PER_NODE: usize = 4;
/// Repositories in each inventory announcement.
const INVENTORY_RIDS: usize = 50;
/// `RefsAt` entries in each refs announcement.
const REFS_AT: usize = 3;
/// Bytes handed to the frame decoder per push (one socket read).
const READ_CHUNK: usize = 16 * 1024;
/// Floor from the issue: announcement decode+verify per second per core.
const FLOOR_ANN_PER_SEC: f64 = 40_000.0;
/// Default measuring time per round (`SEEDD_BENCH_WIRE_SECS` overrides).
const DEFAULT_SECS: f64 = 0.3;
/// Rounds per row (`SEEDD_BENCH_WIRE_ROUNDS` overrides).
const ROUNDS: usize = 5;
/// Timestamp of every announcement (ms).
const T: u64 = 1_700_000_000_000;

fn main() {
    // Figures belong to a commit: refuse a dirty tree (issue 29 §1).
    let prov = measure::provenance("wire");
    let pinned = Pinning::pin_self_to_server();
    let secs = std::env::var("SEEDD_BENCH_WIRE_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(DEFAULT_SECS);
    let rounds = seedd_benches::env_usize("SEEDD_BENCH_WIRE_ROUNDS", ROUNDS).max(1);
    if rounds < ROUNDS {
        measure::record_override(&format!(
            "SEEDD_BENCH_WIRE_ROUNDS={rounds} (fewer than {ROUNDS} rounds)"
        ));
    }
    let m = Measure { secs, rounds };
    let tck = clk_tck_cached();
    let started = Instant::now();
    let corpus = Corpus::new();
    let mut rows = Vec::new();

    // (a) Decode + verify.
    let mix = Stream::new(&corpus.mix());
    let row = Row::new(
        "ann_decode_verify_mix",
        &format!(
            "announcement decode+verify, mix 1 node : 1 inventory : {REFS_PER_NODE} refs ({} B/ann)",
            mix.bytes.len() / mix.count
        ),
        m.run(|| mix.decode(true)),
    );
    let mix_rate = row.summary().map_or(0.0, |s| s.median);
    rows.push(row);
    for (key, name, anns) in [
        (
            "ann_decode_verify_node",
            "  node announcement",
            corpus.node.clone(),
        ),
        (
            "ann_decode_verify_inventory",
            "  inventory announcement",
            corpus.inventory.clone(),
        ),
        (
            "ann_decode_verify_refs",
            "  refs announcement",
            corpus.refs.clone(),
        ),
    ] {
        let stream = Stream::new(&anns);
        let label = format!("{name} ({} B)", stream.bytes.len() / stream.count.max(1));
        rows.push(Row::new(key, &label, m.run(|| stream.decode(true))));
    }
    rows.push(Row::new(
        "ann_decode_only_mix",
        "announcement decode only (no verify), mix",
        m.run(|| mix.decode(false)),
    ));

    // (b) Noise handshakes.
    let (pair, initiator, responder) = handshakes(&m);
    rows.push(pair);
    rows.push(initiator);
    rows.push(responder);

    // (c) Encode + sign.
    let keys = corpus.keys.clone();
    let messages = corpus.unsigned.clone();
    rows.push(Row::new(
        "ann_encode_sign_mix",
        "announcement encode+sign (frame bytes), mix",
        m.run(|| {
            let mut n = 0;
            for (i, message) in &messages {
                let ann = message.clone().sign(&keys[*i]).unwrap();
                let frame = Frame::gossip(Link::Outbound, Message::Announcement(ann));
                std::hint::black_box(frame.encode().unwrap());
                n += 1;
            }
            n
        }),
    ));

    let floor_met = mix_rate >= FLOOR_ANN_PER_SEC;
    let elapsed = started.elapsed().as_secs_f64();
    let t = table(&rows, mix_rate, floor_met, &m, elapsed, prov, &pinned);
    print!("{t}");

    let json = serde_json::json!({
        "schema": 2,
        "cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "pinning": pinned,
        "cpu_source": cpu_source(),
        "clk_tck": tck,
        "duration_s": elapsed,
        "settings": {
            "seconds_per_round": secs,
            "rounds": rounds,
            "nodes": NODES,
            "refs_per_node": REFS_PER_NODE,
            "inventory_rids": INVENTORY_RIDS,
            "refs_at": REFS_AT,
            "read_chunk": READ_CHUNK,
        },
        "results": rows.iter().map(Row::json).collect::<Vec<_>>(),
        "floors": {
            "ann_decode_verify_per_core": mix_rate,
            "ann_decode_verify_min": FLOOR_ANN_PER_SEC,
            "ann_decode_verify_met": floor_met,
        },
        "targets": [{
            "target": "announcement decode+verify per core (median)",
            "value": mix_rate,
            "goal": format!("≥ {FLOOR_ANN_PER_SEC:.0}/s"),
            "met": floor_met,
        }],
        "table": t,
    });
    let path = measure::write_result("wire", prov, json);
    println!("JSON: {}", path.display());
}

// ------------------------------------------------------------------------------------------
// Data
// ------------------------------------------------------------------------------------------

/// xorshift64*: deterministic filler for ids and oids.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for chunk in out.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        out
    }
}

/// The announcements of the mix, signed and unsigned, by kind.
struct Corpus {
    keys: Vec<Keypair>,
    /// (key index, unsigned body), in mix order.
    unsigned: Vec<(usize, AnnouncementMessage)>,
    node: Vec<Message>,
    inventory: Vec<Message>,
    refs: Vec<Message>,
}

impl Corpus {
    fn new() -> Self {
        let mut rng = Rng(0x5EED_D000_0000_0001);
        let keys: Vec<Keypair> = (1..=NODES)
            .map(|n| Keypair::from_seed(mock_seed(n)))
            .collect();
        let nids: Vec<NodeId> = keys.iter().map(Keypair::nid).collect();
        let mut corpus = Self {
            keys: keys.clone(),
            unsigned: Vec::new(),
            node: Vec::new(),
            inventory: Vec::new(),
            refs: Vec::new(),
        };
        for (i, key) in keys.iter().enumerate() {
            let node = AnnouncementMessage::Node(NodeAnnouncement {
                version: 1,
                features: 1,
                timestamp: T + i as u64,
                alias: format!("seed{i}.example").parse().unwrap(),
                addresses: vec![
                    Address::new(Host::Ipv4(Ipv4Addr::new(192, 0, 2, i as u8)), 8776),
                    Address::new(Host::Dns(format!("seed{i}.radicle.example")), 8776),
                ],
                nonce: 1,
                agent: "/radicle:1.6.0/".parse().unwrap(),
            });
            let inventory = AnnouncementMessage::Inventory(InventoryAnnouncement {
                inventory: (0..INVENTORY_RIDS)
                    .map(|_| RepoId::from_oid_bytes(rng.bytes()))
                    .collect(),
                timestamp: T + i as u64,
            });
            let mut bodies = vec![node, inventory];
            for r in 0..REFS_PER_NODE {
                bodies.push(AnnouncementMessage::Refs(RefsAnnouncement {
                    rid: RepoId::from_oid_bytes(rng.bytes()),
                    refs: (0..REFS_AT)
                        .map(|k| RefsAt {
                            remote: nids[(i + k) % nids.len()],
                            at: Oid(rng.bytes()),
                        })
                        .collect(),
                    timestamp: T + (i * REFS_PER_NODE + r) as u64,
                }));
            }
            for body in bodies {
                let signed = Message::Announcement(body.clone().sign(key).unwrap());
                match body {
                    AnnouncementMessage::Node(_) => corpus.node.push(signed),
                    AnnouncementMessage::Inventory(_) => corpus.inventory.push(signed),
                    AnnouncementMessage::Refs(_) => corpus.refs.push(signed),
                }
                corpus.unsigned.push((i, body));
            }
        }
        corpus
    }

    /// Every announcement, node by node (node, inventory, refs…), as they would arrive.
    fn mix(&self) -> Vec<Message> {
        let per = REFS_PER_NODE;
        (0..self.keys.len())
            .flat_map(|i| {
                [self.node[i].clone(), self.inventory[i].clone()]
                    .into_iter()
                    .chain(self.refs[i * per..(i + 1) * per].iter().cloned())
            })
            .collect()
    }
}

/// Gossip frames as received on one connection.
struct Stream {
    bytes: Vec<u8>,
    count: usize,
}

impl Stream {
    fn new(messages: &[Message]) -> Self {
        let mut bytes = Vec::new();
        for message in messages {
            Frame::gossip(Link::Inbound, message.clone())
                .encode_into(&mut bytes)
                .unwrap();
        }
        Self {
            bytes,
            count: messages.len(),
        }
    }

    /// Pushes the stream through a `FrameDecoder` in socket-sized chunks; with `verify`,
    /// checks every announcement's signature. Returns the number of announcements.
    fn decode(&self, verify: bool) -> u64 {
        let mut decoder = FrameDecoder::new();
        let mut n = 0;
        for chunk in self.bytes.chunks(READ_CHUNK) {
            decoder.push(chunk);
            while let Some(frame) = decoder.next_frame().unwrap() {
                let Frame::Gossip {
                    message: Message::Announcement(ann),
                    ..
                } = frame
                else {
                    panic!("not an announcement frame");
                };
                if verify {
                    assert!(ann.verify(), "bad signature");
                } else {
                    std::hint::black_box(&ann);
                }
                n += 1;
            }
        }
        assert_eq!(n as usize, self.count);
        n
    }
}

// ------------------------------------------------------------------------------------------
// Measuring
// ------------------------------------------------------------------------------------------

/// `getconf CLK_TCK`, else 100.
fn clk_tck() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .filter(|t: &f64| *t > 0.0)
        .unwrap_or(100.0)
}

/// This thread's CPU time on the clock (`/proc/thread-self/schedstat`, ns), if the kernel has it.
fn thread_schedstat() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

/// This thread's `utime + stime` in seconds (resolution 1/CLK_TCK).
fn thread_ticks(tck: f64) -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / tck)
}

/// Where the measuring thread's CPU time comes from.
fn cpu_source() -> &'static str {
    if thread_schedstat().is_some() {
        "/proc/thread-self/schedstat (the measuring thread's run time, ns)"
    } else {
        "/proc/thread-self/stat utime+stime (the measuring thread, clock ticks)"
    }
}

/// This thread's CPU seconds and whether the figure is precise (schedstat) or in ticks.
fn thread_cpu(tck: f64) -> Option<(f64, bool)> {
    thread_schedstat()
        .map(|s| (s, true))
        .or_else(|| thread_ticks(tck).map(|s| (s, false)))
}

#[derive(Clone, Copy)]
struct Sample {
    ops: u64,
    wall: f64,
    /// This thread's CPU seconds, if `/proc` has them, and whether they are precise.
    cpu: Option<(f64, bool)>,
}

impl Sample {
    /// Seconds the rate is based on: CPU time when it is precise, or in ticks and long enough
    /// to be (≥ 20 ticks); else wall time.
    fn secs(&self, tck: f64) -> f64 {
        match self.cpu {
            Some((cpu, true)) if cpu > 0.0 => cpu,
            Some((cpu, false)) if cpu >= 20.0 / tck => cpu,
            _ => self.wall,
        }
    }

    fn rate(&self) -> f64 {
        self.ops as f64 / self.secs(clk_tck_cached())
    }
}

/// Rounds and seconds per round.
struct Measure {
    secs: f64,
    rounds: usize,
}

impl Measure {
    /// Runs `batch` (which returns how many operations it did) for a tenth of `secs` to warm
    /// up, then `rounds` rounds of `secs` each.
    fn run(&self, mut batch: impl FnMut() -> u64) -> Vec<Sample> {
        let warm = Instant::now();
        while warm.elapsed().as_secs_f64() < self.secs / 10.0 {
            batch();
        }
        (0..self.rounds)
            .map(|_| round(self.secs, &mut batch))
            .collect()
    }
}

/// One round: `batch` repeatedly for `secs`.
fn round(secs: f64, batch: &mut impl FnMut() -> u64) -> Sample {
    let tck = clk_tck_cached();
    let cpu0 = thread_cpu(tck);
    let t0 = Instant::now();
    let mut ops = 0;
    while t0.elapsed().as_secs_f64() < secs {
        ops += batch();
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu0.zip(thread_cpu(tck)).map(|((a, p), (b, _))| (b - a, p));
    Sample { ops, wall, cpu }
}

/// Full handshakes in memory: a fresh ephemeral key per side and handshake (as seedd does),
/// then act 1 → act 2 → act 3 → finish. Returns the pair's row and the two per-side
/// estimates (each round: each side's share of the time, measured with `Instant` around its
/// steps, applied to the pair's CPU-based rate).
fn handshakes(m: &Measure) -> (Row, Row, Row) {
    let a = Keypair::from_seed(mock_seed(1));
    let b = Keypair::from_seed(mock_seed(2));
    let b_nid = b.nid();
    let a_nid = a.nid();
    let one = || {
        let t = Instant::now();
        let (initiator, act1) = Initiator::new(a.clone(), Keypair::generate(), b_nid)
            .act1()
            .unwrap();
        let t1 = Instant::now();
        let (responder, act2) = Responder::new(b.clone(), Keypair::generate())
            .act2(&act1)
            .unwrap();
        let t2 = Instant::now();
        let (act3, done_i) = initiator.act3(&act2).unwrap();
        let t3 = Instant::now();
        let done_r = responder.finish(&act3).unwrap();
        let t4 = Instant::now();
        assert_eq!(done_r.remote, a_nid);
        assert_eq!(done_r.handshake_hash, done_i.handshake_hash);
        ((t1 - t) + (t3 - t2), (t2 - t1) + (t4 - t3))
    };
    // Warm-up, then rounds, each with its own split of the time between the sides.
    let warm = Instant::now();
    while warm.elapsed().as_secs_f64() < m.secs / 10.0 {
        one();
    }
    let mut pair = Vec::new();
    let mut shares = Vec::new();
    for _ in 0..m.rounds {
        let mut side = [Duration::ZERO; 2];
        pair.push(round(m.secs, &mut || {
            let (i, r) = one();
            side[0] += i;
            side[1] += r;
            1
        }));
        let total = (side[0] + side[1]).as_secs_f64().max(f64::MIN_POSITIVE);
        shares.push([side[0].as_secs_f64() / total, side[1].as_secs_f64() / total]);
    }
    let pair_row = Row::new(
        "handshake_pair",
        "noise handshake, initiator+responder (both sides' CPU)",
        pair.clone(),
    );
    let per_side = |key: &str, label: &str, k: usize| {
        let mut row = Row::new(key, label, pair.clone());
        row.rates = pair
            .iter()
            .zip(&shares)
            .map(|(s, share)| s.rate() / share[k])
            .collect();
        row.estimated = true;
        row
    };
    (
        pair_row,
        per_side(
            "handshake_initiator",
            "  initiator side alone (estimated)",
            0,
        ),
        per_side(
            "handshake_responder",
            "  responder side alone (estimated)",
            1,
        ),
    )
}

// ------------------------------------------------------------------------------------------
// Output
// ------------------------------------------------------------------------------------------

#[derive(Clone)]
struct Row {
    key: String,
    label: String,
    samples: Vec<Sample>,
    /// Operations per CPU second (per core), per round.
    rates: Vec<f64>,
    /// Derived from a share of another row's time, not measured on its own.
    estimated: bool,
}

impl Row {
    fn new(key: &str, label: &str, samples: Vec<Sample>) -> Self {
        Self {
            key: key.to_owned(),
            label: label.to_owned(),
            rates: samples.iter().map(Sample::rate).collect(),
            samples,
            estimated: false,
        }
    }

    fn summary(&self) -> Option<Summary> {
        Summary::of(&self.rates)
    }

    fn json(&self) -> serde_json::Value {
        let tck = clk_tck_cached();
        let s = self.summary();
        serde_json::json!({
            "key": self.key,
            "label": self.label.trim(),
            "per_sec_per_core": s.map(|s| s.to_json()),
            "us_per_op_median": s.map(|s| 1e6 / s.median),
            "rounds": self.samples.iter().map(|x| serde_json::json!({
                "ops": x.ops,
                "wall_s": x.wall,
                "cpu_s": x.cpu.map(|c| c.0),
                "per_sec_wall": x.ops as f64 / x.wall,
                "basis": if x.secs(tck) == x.wall { "wall" } else { "cpu" },
            })).collect::<Vec<_>>(),
            "estimated": self.estimated,
        })
    }
}

fn clk_tck_cached() -> f64 {
    static TCK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TCK.get_or_init(clk_tck)
}

fn table(
    rows: &[Row],
    mix_rate: f64,
    floor_met: bool,
    m: &Measure,
    elapsed: f64,
    prov: &measure::Provenance,
    pinned: &str,
) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "seedd wire bench: seedd-proto on one thread, {} rounds × {} s per row, median [min–max]; rate = ops / the measuring thread's CPU time (per core; {}); {pinned}",
        m.rounds,
        m.secs,
        cpu_source()
    );
    let _ = writeln!(t, "{}", prov.line());
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "{:<70} {:>10} {:>8} {:>32} {:>9}",
        "workload", "ops/round", "cpu s", "ops/s/core", "µs/op"
    );
    let _ = writeln!(t, "{}", "-".repeat(133));
    for r in rows {
        let (ops, cpu) = if r.estimated {
            (String::new(), String::new())
        } else {
            let ops: Vec<f64> = r.samples.iter().map(|s| s.ops as f64).collect();
            let cpu: Vec<f64> = r
                .samples
                .iter()
                .map(|s| s.cpu.map_or(f64::NAN, |c| c.0))
                .collect();
            (
                Summary::of(&ops).map_or("-".into(), |s| format!("{:.0}", s.median)),
                Summary::of(&cpu).map_or("-".into(), |s| format!("{:.3}", s.median)),
            )
        };
        let s = r.summary();
        let _ = writeln!(
            t,
            "{:<70} {:>10} {:>8} {:>32} {:>9}",
            r.label,
            ops,
            cpu,
            s.map_or("-".into(), |s| s.to_string()),
            s.map_or("-".into(), |s| format!("{:.1}", 1e6 / s.median)),
        );
    }
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "floor: announcement decode+verify ≥ {FLOOR_ANN_PER_SEC:.0}/s per core (median): {mix_rate:.0}/s → {}",
        if floor_met { "MET" } else { "NOT MET" }
    );
    let _ = writeln!(t, "total bench time {elapsed:.1} s");
    t
}
