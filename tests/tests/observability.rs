//! Observability: every metric the Grafana dashboards (`grafana/*.json`) and the alert rules
//! (`ops/alerts/*.yml`) use is exported by a running seedd once it has done the work the metric
//! counts — and, but for per-tenant and a few runtime-only ones, by a fresh seed before any
//! event (at 0) — and a real Prometheus loading `ops/alerts/seedd-rules.yml` scrapes seedd and fires
//! `SeeddDown` when seedd stops.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use seedd_proto::crypto::Keypair;
use seedd_proto::wire::{Control, Frame, Link, Message, Ping, StreamId};
use seedd_tests::raw;
use seedd_tests::{
    fixtures, free_port, git, http_get, raw_request, run, run_unchecked, stdout, wait_for,
    workspace, RadNode, Seed, SeedOptions,
};
use serde_json::Value;

const SMALL: &str = "small-fixture";

// ---------------------------------------------------------------------------------------------
// Metric names used by the dashboards and the rules.

/// Every `seedd_*` identifier in `text` (word-bounded).
fn seedd_names(text: &str, out: &mut BTreeSet<String>) {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_';
    let mut i = 0;
    while let Some(pos) = text[i..].find("seedd_") {
        let start = i + pos;
        let mut end = start + "seedd_".len();
        while end < bytes.len() && word(bytes[end]) {
            end += 1;
        }
        let bounded = start == 0 || !(word(bytes[start - 1]) || bytes[start - 1] == b':');
        if bounded && end > start + "seedd_".len() {
            out.insert(text[start..end].to_owned());
        }
        i = end;
    }
}

fn files_in(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    files
}

/// Metric names referenced by grafana/*.json and ops/alerts/*.yml.
fn referenced_metrics() -> BTreeSet<String> {
    let root = workspace();
    let mut files = files_in(&root.join("grafana"), "json");
    files.extend(files_in(&root.join("ops/alerts"), "yml"));
    assert!(
        files.len() >= 5,
        "dashboards and rules not found: {files:?}"
    );
    let mut names = BTreeSet::new();
    for f in &files {
        seedd_names(&std::fs::read_to_string(f).unwrap(), &mut names);
    }
    names
}

/// (sample names, family names from `# TYPE`) of an exposition.
fn exported(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut samples = BTreeSet::new();
    let mut families = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some(name) = rest.split_whitespace().next() {
                families.insert(name.to_owned());
            }
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            if let Some(name) = line.split(['{', ' ']).next() {
                samples.insert(name.to_owned());
            }
        }
    }
    (samples, families)
}

/// Referenced names not in the exposition (histogram series as `_bucket`/`_sum`/`_count`).
fn missing(wanted: &BTreeSet<String>, scrapes: &[String]) -> Vec<String> {
    let mut samples = BTreeSet::new();
    let mut families = BTreeSet::new();
    for s in scrapes {
        let (a, b) = exported(s);
        samples.extend(a);
        families.extend(b);
    }
    wanted
        .iter()
        .filter(|name| {
            let base = family(name);
            !(samples.contains(name.as_str())
                || (families.contains(base) && samples.contains(&format!("{base}_count"))))
        })
        .cloned()
        .collect()
}

fn scrape(seed: &Seed) -> String {
    let (status, text) = http_get(&seed.admin_url("/metrics"), &[]).unwrap();
    assert_eq!(status, 200);
    text
}

#[test]
fn name_extraction_finds_identifiers_only() {
    let mut names = BTreeSet::new();
    seedd_names(
        r#"histogram_quantile(0.5, sum by (le) (rate(seedd_git_clone_duration_seconds_bucket{instance=~"$instance"}[5m]))) / seedd_x and my_seedd_y # seedd_* seedd-rules.yml"#,
        &mut names,
    );
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(
        names,
        ["seedd_git_clone_duration_seconds_bucket", "seedd_x"]
    );
    let text = "# TYPE seedd_h histogram\nseedd_h_bucket{le=\"1\"} 1\nseedd_h_sum 1\nseedd_h_count 1\nseedd_g 3\n";
    let wanted: BTreeSet<String> = ["seedd_h_bucket", "seedd_h_count", "seedd_g", "seedd_nope"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(missing(&wanted, &[text.to_owned()]), ["seedd_nope"]);
}

// ---------------------------------------------------------------------------------------------
// A minimal raw Radicle peer (as in p2p.rs).

fn raw_peer(seed: &Seed, _nid: &str, src: &str, key: &Keypair) -> TcpStream {
    raw::connect(seed, src, key)
}

fn raw_tcp(to: SocketAddr, src: &str) -> TcpStream {
    raw::tcp(to, src)
}

fn send(stream: &mut TcpStream, frame: Frame) {
    raw::send_frame(stream, frame);
}

fn gossip(stream: &mut TcpStream, message: Message) {
    raw::gossip(stream, message);
}

fn read_frames(
    stream: &mut TcpStream,
    timeout: Duration,
    enough: impl FnMut(&[Frame]) -> bool,
) -> (Vec<Frame>, bool) {
    raw::read_until(stream, timeout, enough)
}

fn node_announcement(key: &Keypair) -> Message {
    Message::Announcement(raw::node_announcement(key, raw::now_ms()))
}

// ---------------------------------------------------------------------------------------------
// Exercising a seed so that every metric family has series.

/// Send `head` (and nothing else) on a fresh connection; returns it.
fn http_raw(seed: &Seed, head: &str) -> TcpStream {
    raw_request(seed.http, head.as_bytes())
}

fn response_head(s: &mut TcpStream) -> String {
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// HTTP: a real clone, a 413, and a 503 from the single pack slot held by a stalled request.
fn exercise_http(seed: &Seed, rid: &str) {
    let tmp = tempfile::tempdir().unwrap();
    run(git(tmp.path())
        .args(["clone", "-q", &seed.url(&format!("{rid}.git"))])
        .arg(tmp.path().join("clone")));

    // Declared body over http.max_request_bytes: 413, counted as aborted (body_too_large).
    let mut s = http_raw(
        seed,
        &format!(
            "POST /{rid}.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: 999999999999\r\n\r\n"
        ),
    );
    let head = response_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");

    // A request that sends only its first pkt-line length holds the only pack slot (upload-pack
    // waits for the rest of the body); the next one gets 503 (queue_full, pack_queue = 0).
    let stalled_head = format!(
        "POST /{rid}.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: 1000\r\n\r\n0032"
    );
    let stalled = http_raw(seed, &stalled_head);
    wait_for(
        "the stalled request to hold the slot",
        Duration::from_secs(10),
        || (seed.metric("seedd_git_packs_in_flight", &[]) >= 1.0).then_some(()),
    );
    let mut second = http_raw(seed, &stalled_head);
    let head = response_head(&mut second);
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    drop(second);
    drop(stalled);
    wait_for("the slot to be released", Duration::from_secs(20), || {
        (seed.metric("seedd_git_packs_in_flight", &[]) == 0.0).then_some(())
    });
}

/// Tenants: one with a host, quotas and a rate limit; a clone on its host (egress), a seed over
/// its repository quota, requests over its rate, and a config reload.
fn exercise_tenants(seed: &Seed, rid: &str) {
    seed.admin_ok(
        "POST",
        "/api/v1/tenants",
        Some(serde_json::json!({"name": "acme", "hosts": ["acme.seed.test"],
            "quotas": {"repos": 1, "bytes": 1_000_000_000u64, "egress_bytes_per_day": 1_000_000_000u64},
            "rate": {"requests_per_second": 1, "burst": 1}})),
    );
    seed.admin_ok(
        "POST",
        &format!("/api/v1/repos/{rid}/seed"),
        Some(serde_json::json!({"tenant": "acme"})),
    );
    let other = fixtures().rid("heartwood-fixture");
    let (status, _) = seed.admin(
        "POST",
        &format!("/api/v1/repos/{other}/seed"),
        Some(serde_json::json!({"tenant": "acme"})),
    );
    assert_eq!(status, 409);
    let get = format!(
        "GET /{rid}.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: acme.seed.test\r\nConnection: close\r\n\r\n"
    );
    let mut heads = Vec::new();
    for _ in 0..3 {
        let mut s = http_raw(seed, &get);
        let mut all = String::new();
        let _ = s.read_to_string(&mut all);
        heads.push(all.lines().next().unwrap_or("").to_owned());
    }
    assert!(heads[0].contains("200"), "{heads:?}");
    assert!(heads.iter().any(|h| h.contains("429")), "{heads:?}");
    seed.admin_ok("POST", "/api/v1/config/reload", None);
}

/// P2P: two raw peers (one relays a node announcement to the other, repeats it (stale), floods
/// pings (rate limited per node), opens a git stream with a bad header), a peer sending bad
/// magic (penalty), and connection attempts over the per-IP budget (rejected).
fn exercise_p2p(seed: &Seed) -> Vec<TcpStream> {
    let nid = seed.nid();
    let k1 = Keypair::mock(301);
    let k2 = Keypair::mock(302);
    let mut a = raw_peer(seed, &nid, "127.0.0.2", &k1);
    let mut b = raw_peer(seed, &nid, "127.0.0.3", &k2);
    for s in [&mut a, &mut b] {
        let (frames, closed) = read_frames(s, Duration::from_secs(10), |f| f.len() >= 3);
        assert!(!closed && frames.len() >= 3, "session start: {frames:?}");
    }
    wait_for("two connected sessions", Duration::from_secs(10), || {
        (seed.metric("seedd_p2p_sessions", &["state=\"connected\""]) >= 2.0).then_some(())
    });
    let ann = node_announcement(&k1);
    gossip(&mut a, ann.clone());
    // Relayed to b.
    let (frames, _) = read_frames(&mut b, Duration::from_secs(10), |f| {
        f.iter().any(|f| {
            matches!(f, Frame::Gossip { message: Message::Announcement(x), .. } if x.node == k1.nid())
        })
    });
    assert!(
        frames.iter().any(|f| matches!(f, Frame::Gossip { message: Message::Announcement(x), .. } if x.node == k1.nid())),
        "announcement not relayed: {frames:?}"
    );
    // The same again: stale.
    gossip(&mut a, ann);
    // A git stream whose header is not a pkt-line: refused (bad_header).
    let stream = StreamId::git(Link::Outbound, 0).unwrap();
    send(
        &mut a,
        Frame::control(Link::Outbound, Control::Open { stream }),
    );
    send(&mut a, Frame::git(stream, b"zzzz not a pkt-line".to_vec()));
    // 20 pings against a 5-token bucket.
    for _ in 0..20 {
        gossip(
            &mut a,
            Message::Ping(Ping {
                ponglen: 1,
                zeroes: 0,
            }),
        );
    }
    // Bad magic: decode error, penalty, disconnect.
    let mut c = raw_peer(seed, &nid, "127.0.0.4", &Keypair::mock(303));
    c.write_all(b"rad\x02\x02\x01\x00").unwrap();
    let (_, closed) = read_frames(&mut c, Duration::from_secs(5), |_| false);
    assert!(closed, "bad magic: still connected");
    // Connection attempts per IP: capacity 3, the 4th is refused.
    let mut held: Vec<TcpStream> = (0..3).map(|_| raw_tcp(seed.p2p, "127.0.0.5")).collect();
    let mut refused = raw_tcp(seed.p2p, "127.0.0.5");
    let (_, closed) = read_frames(&mut refused, Duration::from_secs(5), |_| false);
    assert!(closed, "connection over the per-IP budget was served");
    held.push(a);
    held.push(b);
    held
}

/// Replication: a seed (policy allow) clones heartwood from a real Radicle node (`ok`, last
/// success `clone`, bytes, refs), then fetches it again from a diverged history of the
/// delegate's signed refs (`invalid`, validation failure `delegate_diverged`).
fn exercise_replication() -> (Seed, RadNode) {
    let heartwood = fixtures().rid("heartwood-fixture");
    let alice_nid = "z6MkeYAdpK8EPmUhABhVB2k6Bd6kSGzrh3e6QoUjxM4U48jz";
    let seed = Seed::start(SeedOptions::allowing());
    let alice = RadNode::start("alice", &[seed.p2p_peer()]);
    let held = seed.repo_path(&heartwood);
    wait_for("heartwood fetched", Duration::from_secs(40), || {
        (held.join("HEAD").exists()
            && seed.metric("seedd_fetches_total", &["result=\"ok\""]) >= 1.0)
            .then_some(())
    });
    let theirs = alice.repo_path(&heartwood);
    let at = |args: &[&str]| {
        stdout(&run(git(&theirs).arg("-C").arg(&theirs).args(args)))
            .trim()
            .to_owned()
    };
    let sigrefs = format!("refs/namespaces/{alice_nid}/refs/rad/sigrefs");
    let tip = at(&["rev-parse", &sigrefs]);
    let parent = at(&["rev-parse", &format!("{tip}^")]);
    let tree = at(&["rev-parse", &format!("{tip}^{{tree}}")]);
    let sibling = at(&["commit-tree", &tree, "-p", &parent, "-m", "diverged"]);
    at(&["update-ref", &sigrefs, &sibling]);
    let out = run_unchecked(&seed, &["fetch", &heartwood, "--from", &alice.nid]);
    assert!(!out.status.success(), "diverged delegate accepted");
    wait_for("a validation failure", Duration::from_secs(10), || {
        (seed.metric(
            "seedd_fetch_validation_failures_total",
            &["reason=\"delegate_diverged\""],
        ) >= 1.0)
            .then_some(())
    });
    (seed, alice)
}

/// The metric names referenced by dashboards and rules are all exported after the seed has done
/// the work each one counts (labelled families only appear once they have a series).
#[test]
fn every_metric_in_dashboards_and_alert_rules_is_exported() {
    // The front's own (`seedd_front_*`) are checked against a running `seedd front` in
    // `a_fresh_seed_exports_every_metric_in_dashboards_and_alert_rules`.
    let wanted: BTreeSet<String> = referenced_metrics()
        .into_iter()
        .filter(|n| !n.starts_with("seedd_front_"))
        .collect();
    assert!(
        wanted.len() >= 30,
        "suspiciously few metric names found: {wanted:?}"
    );
    let rid = fixtures().rid(SMALL);
    let seed = Seed::start(SeedOptions {
        repos: vec![SMALL.into()],
        env: vec![
            ("SEEDD_HTTP__MAX_CONCURRENT_PACKS".into(), "1".into()),
            ("SEEDD_HTTP__PACK_QUEUE".into(), "0".into()),
        ],
        p2p_config: "relay = \"always\"\n[p2p.rate]\nexempt_local = false\ninbound = { fill_rate = 0.5, capacity = 5.0 }\nconnect = { fill_rate = 0.1, capacity = 3.0 }\n".into(),
        ..SeedOptions::allowing()
    });
    exercise_http(&seed, &rid);
    exercise_tenants(&seed, &rid);
    let peers = exercise_p2p(&seed);

    // TLS metrics need a seed serving HTTPS: a certificate, then a reload (SIGHUP).
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = write_cert(certs.path());
    let tls_seed = Seed::start(SeedOptions {
        tls: Some((cert, key)),
        ..Default::default()
    });
    tls_seed.signal(1);
    wait_for(
        "a TLS reload to be counted",
        Duration::from_secs(10),
        || (tls_seed.metric("seedd_tls_reloads_total", &["result=\"ok\""]) >= 1.0).then_some(()),
    );
    assert_eq!(
        tls_seed.metric("seedd_tls_cert_expiry_timestamp_seconds", &[]),
        1_893_456_000.0
    );
    let tls_scrape = scrape(&tls_seed);
    let (repl_seed, alice) = exercise_replication();
    let repl_scrape = scrape(&repl_seed);

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let main_scrape = scrape(&seed);
        let gone = missing(
            &wanted,
            &[main_scrape.clone(), tls_scrape.clone(), repl_scrape.clone()],
        );
        if gone.is_empty() {
            // The scrape is valid, lint-clean exposition text (when promtool is installed).
            promtool_check_metrics(&main_scrape);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "metrics used by grafana/ or ops/alerts/ but not exported: {gone:?}\n--- scrape:\n{main_scrape}\n--- seedd log:\n{}",
            seed.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(peers);
    drop(alice);
    assert!(repl_seed.stop().success());
    assert!(tls_seed.stop().success());
    assert!(seed.stop().success());
}

/// Families named in grafana/ and ops/alerts/ that a fresh seed does not export, and why. Every
/// other one is there from the start (labelled families with every known label value at 0;
/// `core/src/metrics.rs`), so a new seed's dashboards show 0 rather than "No data". Per-tenant
/// families (`seedd_tenant_*`) are skipped as well: their labels are tenant names.
const RUNTIME_ONLY: &[(&str, &str)] = &[(
    "seedd_fetch_last_success_timestamp_seconds",
    "the time of a fetch that has not happened yet: 0 would read as \"56 years ago\"",
)];

/// The family of a sample name (histogram series without `_bucket`/`_sum`/`_count`).
fn family(name: &str) -> &str {
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

/// A seed that has done nothing yet (no request, peer, fetch, reload) exports every metric the
/// dashboards and alert rules use, labelled families with their known label values at 0.
#[test]
fn a_fresh_seed_exports_every_metric_in_dashboards_and_alert_rules() {
    let wanted: BTreeSet<String> = referenced_metrics()
        .into_iter()
        .filter(|n| !n.starts_with("seedd_tenant_"))
        // The fleet's front exports these (checked below against `seedd front`).
        .filter(|n| !n.starts_with("seedd_front_"))
        .filter(|n| !RUNTIME_ONLY.iter().any(|(r, _)| family(n) == *r))
        .collect();
    assert!(
        wanted.len() >= 30,
        "suspiciously few metric names found: {wanted:?}"
    );
    for (name, why) in RUNTIME_ONLY {
        assert!(!why.is_empty());
        assert!(
            referenced_metrics().iter().any(|n| family(n) == *name),
            "{name} is listed as runtime-only but no dashboard or rule uses it"
        );
    }
    let seed = Seed::start(SeedOptions::default());
    let text = scrape(&seed);
    let gone = missing(&wanted, std::slice::from_ref(&text));
    assert!(
        gone.is_empty(),
        "a fresh seed does not export {gone:?}, used by grafana/ or ops/alerts/\n--- scrape:\n{text}"
    );
    // A few series the issue named, at 0.
    for series in [
        "seedd_fetches_total{result=\"ok\"} 0",
        "seedd_fetches_total{result=\"timeout\"} 0",
        "seedd_p2p_handshakes_total{link=\"inbound\",result=\"ok\"} 0",
        "seedd_git_pack_rejected_total{reason=\"queue_full\"} 0",
        "seedd_tls_reloads_total{result=\"error\"} 0",
        "seedd_config_reloads_total{result=\"error\"} 0",
        "seedd_git_clone_duration_seconds_count{protocol=\"v2\"} 0",
    ] {
        assert!(
            text.lines().any(|l| l == series),
            "{series} not in a fresh scrape:\n{text}"
        );
    }
    // Zeroed series are valid, lint-clean exposition text (when promtool is installed).
    promtool_check_metrics(&text);

    // The front (`seedd front`) in front of this seed exports the `seedd_front_*` ones.
    let front_wanted: BTreeSet<String> = referenced_metrics()
        .into_iter()
        .filter(|n| n.starts_with("seedd_front_"))
        .collect();
    assert!(front_wanted.len() >= 4, "{front_wanted:?}");
    let dir = tempfile::tempdir().unwrap();
    let placement = dir.path().join("placement.toml");
    std::fs::write(
        &placement,
        format!(
            "[[shards]]\nname = \"s0\"\nreplicas = [\"http://{}\"]\nadmin = [\"http://{}\"]\n",
            seed.http, seed.admin
        ),
    )
    .unwrap();
    let admin = free_port();
    let mut front = Command::new(seedd_tests::bin("seedd"))
        .args(["front", "--listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .arg("--placement")
        .arg(&placement)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{admin}/metrics");
    let front_text = wait_for("the front's metrics", Duration::from_secs(30), || {
        http_get(&url, &[])
            .ok()
            .and_then(|(c, t)| (c == 200 && t.contains("seedd_front_replica_up")).then_some(t))
    });
    let _ = front.kill();
    let _ = front.wait();
    let gone = missing(&front_wanted, std::slice::from_ref(&front_text));
    assert!(
        gone.is_empty(),
        "a fresh front does not export {gone:?}, used by grafana/\n--- scrape:\n{front_text}"
    );
    promtool_check_metrics(&front_text);
    assert!(seed.stop().success());
}

fn promtool_check_metrics(text: &str) {
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("promtool not installed: skipping `promtool check metrics`");
        return;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    // Parse errors and lint findings (names, units, HELP) both fail.
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA and a leaf for 127.0.0.1/localhost, notAfter 2030-01-01 (1893456000).
fn write_cert(dir: &Path) -> (PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .unwrap();
    params.not_after = rcgen::date_time_ymd(2030, 1, 1);
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let cert_path = dir.join("tls.crt");
    let key_path = dir.join("tls.key");
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (cert_path, key_path)
}

// ---------------------------------------------------------------------------------------------
// A real Prometheus.

/// A `prometheus` server; killed on drop.
struct Prometheus {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
    log: PathBuf,
}

impl Prometheus {
    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn api(&self, path: &str) -> Option<Value> {
        let (status, body) = http_get(&format!("{}{path}", self.url), &[]).ok()?;
        if status != 200 {
            return None;
        }
        let v: Value = serde_json::from_str(&body).ok()?;
        (v["status"] == "success").then(|| v["data"].clone())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn prometheus_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("prometheus"))
        .find(|p| p.is_file())
}

/// The rules with every `for:` set to 0s, so alerts fire on the first failing evaluation.
fn rules_without_for(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("for:") {
            let indent = &line[..line.len() - trimmed.len()];
            out.push_str(indent);
            out.push_str("for: 0s");
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

fn start_prometheus(bin: &Path, target: SocketAddr) -> Prometheus {
    let dir = tempfile::tempdir().unwrap();
    let rules = std::fs::read_to_string(workspace().join("ops/alerts/seedd-rules.yml")).unwrap();
    let fast = rules_without_for(&rules);
    assert!(fast.contains("for: 0s") && !fast.contains("for: 5m"));
    let rules_path = dir.path().join("seedd-rules.yml");
    std::fs::write(&rules_path, fast).unwrap();
    // The job name contains "seedd", as the rules' job selector (job=~".*seedd.*") expects.
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: seedd\n    static_configs:\n      - targets: [\"{target}\"]\n",
        rules_path.display()
    );
    let config_path = dir.path().join("prometheus.yml");
    std::fs::write(&config_path, config).unwrap();
    let port = free_port();
    let log = dir.path().join("prometheus.log");
    let log_file = std::fs::File::create(&log).unwrap();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", config_path.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .spawn()
        .unwrap();
    Prometheus {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
        log,
    }
}

/// Prometheus scrapes seedd (`up == 1`), evaluates every rule without error, and fires
/// `SeeddDown` (for: rewritten to 0s) once seedd is stopped.
#[test]
fn prometheus_scrapes_seedd_and_fires_seedd_down_when_it_stops() {
    let Some(bin) = prometheus_binary() else {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false");
        assert!(
            !ci,
            "prometheus is not installed but CI is set: run scripts/install-observability-tools.sh"
        );
        eprintln!(
            "SKIPPED prometheus_scrapes_seedd_and_fires_seedd_down_when_it_stops: no `prometheus` \
             on PATH (scripts/install-observability-tools.sh installs it)"
        );
        return;
    };
    let started = Instant::now();
    let seed = Seed::start(SeedOptions {
        repos: vec![SMALL.into()],
        ..Default::default()
    });
    let prom = start_prometheus(&bin, seed.admin);
    let up_is = |want: &str| {
        prom.api("/api/v1/query?query=up").and_then(|d| {
            d["result"]
                .as_array()?
                .iter()
                .find(|r| r["metric"]["job"] == "seedd" && r["value"][1].as_str() == Some(want))?;
            Some(())
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while up_is("1").is_none() {
        assert!(
            Instant::now() < deadline,
            "prometheus never scraped seedd (up == 1); prometheus log:\n{}",
            prom.logs()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // Every rule has been evaluated at least once, without error.
    let rules = wait_for(
        "every rule to be evaluated",
        Duration::from_secs(30),
        || {
            let data = prom.api("/api/v1/rules")?;
            let rules: Vec<Value> = data["groups"]
                .as_array()?
                .iter()
                .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
                .collect();
            (!rules.is_empty() && rules.iter().all(|r| r["health"] != "unknown")).then_some(rules)
        },
    );
    let bad: Vec<&Value> = rules.iter().filter(|r| r["health"] != "ok").collect();
    assert!(bad.is_empty(), "rules failing in prometheus: {bad:?}");
    assert!(rules.iter().any(|r| r["name"] == "SeeddDown"));
    // seedd is up: SeeddDown is not active.
    let alerts = prom.api("/api/v1/alerts").unwrap();
    assert!(
        !alerts["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["labels"]["alertname"] == "SeeddDown"),
        "{alerts}"
    );

    assert!(seed.stop().success());
    let stopped = Instant::now();
    let alert = wait_for(
        "SeeddDown to fire in prometheus",
        Duration::from_secs(30),
        || {
            let data = prom.api("/api/v1/alerts")?;
            data["alerts"]
                .as_array()?
                .iter()
                .find(|a| a["labels"]["alertname"] == "SeeddDown" && a["state"] == "firing")
                .cloned()
        },
    );
    assert_eq!(alert["labels"]["job"], "seedd", "{alert}");
    assert_eq!(alert["labels"]["severity"], "critical", "{alert}");
    assert!(
        alert["annotations"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("is down")),
        "{alert}"
    );
    eprintln!(
        "SeeddDown fired {:.1} s after seedd stopped ({:.1} s in all)",
        stopped.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    drop(prom);
}
