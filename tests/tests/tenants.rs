//! Multi-tenancy (issue 5): tenants on shared storage with reference-counted purge, virtual
//! hosting and aliases, quotas at seed and fetch time, egress accounting against a real
//! `git clone`, a dedicated identity seen by a real radicle-node, HTTP rate limits and
//! per-repository admission, admin authentication, hot reload, backup and restore.
//!
//! Long by design: one scenario per operator-facing tenancy behaviour, sharing the harness.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use seedd_tests::*;
use serde_json::{json, Value};

/// `git clone` of `http://<host>:<port><path>` with the host resolved to the seed.
fn clone_via(seed: &Seed, host: &str, path: &str, into: &Path, env: &[(&str, &str)]) -> Output {
    let port = seed.http.port();
    let mut cmd = git(into.parent().unwrap());
    cmd.args([
        "-c",
        &format!("http.curloptResolve={host}:{port}:127.0.0.1"),
        "clone",
        "-q",
        &format!("http://{host}:{port}{path}"),
    ])
    .arg(into);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Whether a plain `git clone` through `host` succeeds.
fn clones(seed: &Seed, host: &str, path: &str, into: &Path) -> bool {
    clone_via(seed, host, path, into, &[]).status.success()
}

fn tenant(seed: &Seed, name: &str, hosts: &[&str]) {
    let (status, v) = seed.admin(
        "POST",
        "/api/v1/tenants",
        Some(json!({ "name": name, "hosts": hosts })),
    );
    assert_eq!(status, 201, "{v}");
}

fn seed_for(seed: &Seed, rid: &str, body: Value) -> (u16, Value) {
    seed.admin("POST", &format!("/api/v1/repos/{rid}/seed"), Some(body))
}

/// The response body bytes git received, from a GIT_TRACE_CURL file: curl dumps the raw
/// (chunked) data with non-printable bytes as `.` (same length), so each response's chunk
/// framing is walked to count only the payload.
fn received_body_bytes(trace: &Path) -> u64 {
    let text = std::fs::read_to_string(trace).unwrap();
    let mut responses: Vec<(bool, String)> = Vec::new();
    let mut in_data = false;
    for line in text.lines() {
        if let Some(h) = line.split("<= Recv header: ").nth(1) {
            if in_data || responses.is_empty() {
                responses.push((false, String::new()));
                in_data = false;
            }
            if h.to_ascii_lowercase()
                .starts_with("transfer-encoding: chunked")
            {
                if let Some(r) = responses.last_mut() {
                    r.0 = true;
                }
            }
        } else if let Some(d) = line.split("<= Recv data: ").nth(1) {
            in_data = true;
            if let Some(r) = responses.last_mut() {
                r.1.push_str(d);
            }
        }
    }
    let mut total = 0u64;
    for (chunked, raw) in responses {
        if !chunked {
            total += raw.len() as u64;
            continue;
        }
        let mut rest = raw.as_str();
        while let Some(end) = rest.find("..") {
            let size = u64::from_str_radix(&rest[..end], 16).unwrap();
            if size == 0 {
                break;
            }
            total += size;
            rest = &rest[end + 2 + size as usize + 2..];
        }
    }
    total
}

#[test]
fn tenants_share_storage_hosts_filter_aliases_and_last_unseed_purges() {
    let f = fixtures();
    let seed = Seed::start(SeedOptions {
        repos: vec!["heartwood-fixture".into(), "small-fixture".into()],
        ..SeedOptions::default()
    });
    let hw = f.rid("heartwood-fixture");
    let small = f.rid("small-fixture");
    tenant(&seed, "acme", &["acme.seed.test"]);
    tenant(&seed, "beta", &["beta.seed.test", "*.beta.test"]);
    let (s, v) = seed_for(&seed, &hw, json!({"tenant": "acme", "alias": "heartwood"}));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["owner"], true);
    assert_eq!(seed_for(&seed, &small, json!({"tenant": "acme"})).0, 200);
    let (s, v) = seed_for(&seed, &hw, json!({"tenant": "beta", "scope": "all"}));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["owner"], false, "the first claim owns the repository");

    // Stored once: one directory, charged in full to both tenants.
    let hw_dir = seed.repo_path(&hw);
    assert!(hw_dir.join("HEAD").exists());
    let usage = seed.admin_ok("GET", "/api/v1/usage", None);
    let bytes = |t: &str| {
        usage["usage"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["tenant"] == t)
            .unwrap()["stored_bytes"]
            .as_u64()
            .unwrap()
    };
    assert!(bytes("beta") > 0);
    assert!(bytes("acme") > bytes("beta"), "{usage}");
    let listed = seed.admin_ok("GET", "/api/v1/repos?tenant=beta", None);
    assert_eq!(listed["repos"].as_array().unwrap().len(), 1, "{listed}");

    // Each host shows only its tenant's repositories; aliases work on the tenant's host.
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let trace = t.join("curl.trace");
    let before = seed.metric(
        "seedd_tenant_egress_bytes_total",
        &["tenant=\"acme\"", "transport=\"http\""],
    );
    let out = clone_via(
        &seed,
        "acme.seed.test",
        "/heartwood.git",
        &t.join("a1"),
        &[("GIT_TRACE_CURL", trace.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", output_text(&out));
    // Egress: what the tenant is charged equals the body bytes the real git clone received.
    let got = received_body_bytes(&trace);
    assert!(got > 0);
    let mut charged = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        charged = (seed.metric(
            "seedd_tenant_egress_bytes_total",
            &["tenant=\"acme\"", "transport=\"http\""],
        ) - before) as u64;
        if charged >= got {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        charged, got,
        "egress accounting must match the bytes git received"
    );
    assert!(clones(
        &seed,
        "acme.seed.test",
        &format!("/{small}.git"),
        &t.join("a2")
    ));
    assert!(clones(
        &seed,
        "git.beta.test",
        &format!("/{hw}.git"),
        &t.join("b1")
    ));
    let out = clone_via(
        &seed,
        "beta.seed.test",
        &format!("/{small}.git"),
        &t.join("b2"),
        &[],
    );
    assert!(
        !out.status.success(),
        "beta's host must not show acme's repo"
    );
    assert!(
        output_text(&out).contains("404") || output_text(&out).contains("not found"),
        "{}",
        output_text(&out)
    );
    // Hosts no tenant claims get the operator's default (all public repositories).
    assert!(clones(
        &seed,
        "other.example",
        &format!("/{small}.git"),
        &t.join("o1")
    ));

    let usage = seed.admin_ok("GET", "/api/v1/usage?tenant=acme", None);
    assert!(usage["usage"][0]["egress_today_bytes"].as_u64().unwrap() >= got);
    assert!(
        seed.metric(
            "seedd_tenant_http_requests_total",
            &["tenant=\"acme\"", "code=\"2xx\""]
        ) >= 2.0
    );

    // Unseeding from one tenant keeps the repository; from the last one purges it.
    let v = seed.admin_ok(
        "POST",
        &format!("/api/v1/repos/{hw}/unseed"),
        Some(json!({"tenant": "acme"})),
    );
    assert_eq!(v["purged"], false, "{v}");
    assert!(hw_dir.join("HEAD").exists());
    let beta = seed.admin_ok("GET", "/api/v1/tenants/beta", None);
    assert_eq!(
        beta["repos"][0]["owner"], true,
        "ownership passes on: {beta}"
    );
    let v = seed.admin_ok(
        "POST",
        &format!("/api/v1/repos/{hw}/unseed"),
        Some(json!({"tenant": "beta"})),
    );
    assert_eq!(v["purged"], true, "{v}");
    assert!(!hw_dir.exists(), "purged from disk");
    assert_eq!(
        seed.admin("GET", &format!("/api/v1/repos/{hw}"), None).0,
        404
    );
    assert_eq!(
        http_get(
            &seed.url(&format!("/{hw}.git/info/refs?service=git-upload-pack")),
            &[]
        )
        .unwrap()
        .0,
        404
    );

    // A suspended tenant's host serves nothing.
    seed.admin_ok("POST", "/api/v1/tenants/acme/suspend", None);
    let out = clone_via(
        &seed,
        "acme.seed.test",
        &format!("/{small}.git"),
        &t.join("s1"),
        &[],
    );
    assert!(!out.status.success());
    assert!(output_text(&out).contains("403"), "{}", output_text(&out));
    seed.admin_ok("POST", "/api/v1/tenants/acme/resume", None);
    assert!(clones(
        &seed,
        "acme.seed.test",
        &format!("/{small}.git"),
        &t.join("s2")
    ));
    // Removing the last tenant of a repository purges it too.
    let v = seed.admin_ok("DELETE", "/api/v1/tenants/acme", None);
    assert_eq!(v["purged"].as_array().unwrap().len(), 1, "{v}");
    assert!(!seed
        .storage()
        .join(small.trim_start_matches("rad:"))
        .exists());
    assert_eq!(seed.metric("seedd_tenant_repos", &["tenant=\"acme\""]), 0.0);
}

#[test]
fn quotas_refuse_seeding_and_stop_a_fetch_with_nothing_written() {
    let f = fixtures();
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into()],
        ..SeedOptions::default()
    });
    let hw = f.rid("heartwood-fixture");
    let small = f.rid("small-fixture");
    tenant(&seed, "acme", &[]);
    seed.admin_ok(
        "PUT",
        "/api/v1/tenants/acme/quota",
        Some(json!({"repos": 1})),
    );
    assert_eq!(seed_for(&seed, &small, json!({"tenant": "acme"})).0, 200);
    let (s, v) = seed_for(&seed, &hw, json!({"tenant": "acme"}));
    assert_eq!(s, 409, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("repository quota"),
        "{v}"
    );
    assert_eq!(
        seed.metric(
            "seedd_tenant_quota_exceeded_total",
            &["tenant=\"acme\"", "quota=\"repos\""]
        ),
        1.0
    );
    let q = seed.metric(
        "seedd_tenant_quota_usage_ratio",
        &["tenant=\"acme\"", "quota=\"repos\""],
    );
    assert!((q - 1.0).abs() < 1e-9, "{q}");

    // Egress per day: once the owner's quota is used, its repository gets 429 until midnight.
    seed.admin_ok(
        "PUT",
        "/api/v1/tenants/acme/quota",
        Some(json!({"egress_bytes_per_day": 100})),
    );
    let refs = seed.url(&format!("/{small}.git/info/refs?service=git-upload-pack"));
    assert_eq!(http_get(&refs, &[]).unwrap().0, 200);
    wait_for("egress quota enforced", Duration::from_secs(10), || {
        let (status, body) = http_get(&refs, &[]).unwrap();
        (status == 429).then_some(body)
    });
    assert!(
        seed.metric(
            "seedd_tenant_quota_exceeded_total",
            &["tenant=\"acme\"", "quota=\"egress\""]
        ) >= 1.0
    );
    seed.admin_ok(
        "PUT",
        "/api/v1/tenants/acme/quota",
        Some(json!({"egress_bytes_per_day": null})),
    );
    assert_eq!(http_get(&refs, &[]).unwrap().0, 200);

    // A byte quota smaller than the repository: the fetch from a real node is stopped and
    // nothing reaches storage or the index.
    tenant(&seed, "beta", &[]);
    seed.admin_ok(
        "PUT",
        "/api/v1/tenants/beta/quota",
        Some(json!({"bytes": 2000})),
    );
    let alice = RadNode::start("alice", &[seed.p2p_peer()]);
    wait_for("alice connected", Duration::from_secs(30), || {
        seed.api("/api/v1/peers")["peers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["nid"] == alice.nid.as_str() && p["state"] == "connected")
            .then_some(())
    });
    let (s, v) = seed_for(&seed, &hw, json!({"tenant": "beta", "from": alice.nid}));
    assert_eq!(s, 200, "{v}");
    wait_for("fetch stopped by quota", Duration::from_secs(60), || {
        (seed.metric("seedd_fetches_total", &["result=\"quota\""]) >= 1.0).then_some(())
    });
    assert!(!seed.repo_path(&hw).exists());
    assert_eq!(
        seed.admin("GET", &format!("/api/v1/repos/{hw}"), None).0,
        404
    );
    let leftovers: Vec<_> = std::fs::read_dir(seed.data_dir().join("cache/fetch"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert!(
        seed.metric(
            "seedd_tenant_quota_exceeded_total",
            &["tenant=\"beta\"", "quota=\"bytes\""]
        ) >= 1.0
    );
    assert!(seed.logs().contains("storage quota"), "{}", seed.logs());
}

#[test]
fn a_dedicated_identity_announces_only_its_tenants_repositories_to_a_real_node() {
    let f = fixtures();
    let hw = f.rid("heartwood-fixture");
    let small = f.rid("small-fixture");
    let shard_port = free_port();
    let seed = Seed::start(SeedOptions {
        repos: vec!["heartwood-fixture".into(), "small-fixture".into()],
        extra_config: format!(
            "[[identities]]\nname = \"shard1\"\nlisten = [\"127.0.0.1:{shard_port}\"]\n\
             [[tenants]]\nname = \"acme\"\nidentity = \"shard1\"\nhosts = [\"acme.seed.test\"]\n\
             repos = [{{ rid = \"{small}\", scope = \"all\" }}]\n"
        ),
        ..SeedOptions::default()
    });
    // The operator seeds heartwood on the default identity.
    assert_eq!(seed_for(&seed, &hw, json!({})).0, 200);
    let ids = seed.admin_ok("GET", "/api/v1/identities", None);
    let shard = ids["identities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "shard1")
        .unwrap()
        .clone();
    let shard_nid = shard["nid"].as_str().unwrap().to_owned();
    assert_ne!(shard_nid, seed.nid());
    assert_eq!(shard["tenants"], json!(["acme"]));
    assert_eq!(shard["inventory"], 1, "{ids}");
    let carol = RadNode::start("carol", &[format!("{shard_nid}@127.0.0.1:{shard_port}")]);
    wait_for(
        "carol learns shard1's inventory",
        Duration::from_secs(60),
        || {
            carol
                .routing()
                .iter()
                .any(|(rid, nid)| rid == &small && nid == &shard_nid)
                .then_some(())
        },
    );
    let routes = carol.routing();
    assert!(
        !routes
            .iter()
            .any(|(rid, nid)| rid == &hw && nid == &shard_nid),
        "shard1 must not announce the operator's repositories: {routes:?}"
    );
    assert_eq!(
        seed.metric("seedd_identity_inventory_repos", &["identity=\"shard1\""]),
        1.0
    );
    // carol seeds everything: she fetches acme's repository from shard1 over a Radicle stream,
    // which is charged to acme as Radicle egress.
    wait_for(
        "radicle egress charged to acme",
        Duration::from_secs(60),
        || {
            (seed.metric(
                "seedd_tenant_egress_bytes_total",
                &["tenant=\"acme\"", "transport=\"radicle\""],
            ) > 0.0)
                .then_some(())
        },
    );
    // Placement over the identity's cap is refused with a clear error.
    let (s, v) = seed.admin(
        "POST",
        "/api/v1/identities",
        Some(json!({"name": "tiny", "listen": ["127.0.0.1:0"], "inventory_cap": 1})),
    );
    assert_eq!(s, 201, "{v}");
    let (s, v) = seed.admin(
        "POST",
        "/api/v1/tenants",
        Some(json!({"name": "beta", "identity": "tiny"})),
    );
    assert_eq!(s, 201, "{v}");
    assert_eq!(seed_for(&seed, &small, json!({"tenant": "beta"})).0, 200);
    let (s, v) = seed_for(&seed, &hw, json!({"tenant": "beta"}));
    assert_eq!(s, 409, "{v}");
    assert!(v["error"].as_str().unwrap().contains("cap 1"), "{v}");
}

/// Sends `GET info/refs` from a given local address with curl; returns (status, Retry-After).
fn curl_from(seed: &Seed, from: &str, rid: &str) -> (u16, Option<String>) {
    let out = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-D", "-", "--interface", from])
        .arg(seed.url(&format!("/{rid}.git/info/refs?service=git-upload-pack")))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stdout).to_string();
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let retry = head
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("retry-after:"))
        .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned());
    (status, retry)
}

#[test]
fn per_ip_rate_limit_answers_429_while_another_ip_is_served() {
    let rid = fixtures().rid("small-fixture");
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into()],
        extra_config: "[http.rate]\nper_ip_requests_per_second = 0.2\nper_ip_burst = 3\n".into(),
        ..SeedOptions::default()
    });
    let mut statuses = Vec::new();
    let mut retry = None;
    for _ in 0..6 {
        let (s, r) = curl_from(&seed, "127.0.0.1", &rid);
        if s == 429 {
            retry = r;
        }
        statuses.push(s);
    }
    assert_eq!(&statuses[..3], &[200, 200, 200], "{statuses:?}");
    assert!(statuses[3..].iter().all(|s| *s == 429), "{statuses:?}");
    let secs: u64 = retry.expect("Retry-After on 429").parse().unwrap();
    assert!((1..=10).contains(&secs), "{secs}");
    // Another client address is not affected.
    assert_eq!(curl_from(&seed, "127.0.0.2", &rid).0, 200);
    assert!(seed.metric("seedd_http_rate_limited_total", &["scope=\"ip\""]) >= 3.0);

    // A tenant's own limit applies on its host.
    tenant(&seed, "acme", &["acme.seed.test"]);
    seed.admin_ok(
        "PUT",
        "/api/v1/tenants/acme/rate",
        Some(json!({"requests_per_second": 1, "burst": 1})),
    );
    assert_eq!(seed_for(&seed, &rid, json!({"tenant": "acme"})).0, 200);
    let port = seed.http.port();
    let mut codes = Vec::new();
    for i in 0..3 {
        let out = std::process::Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--interface",
                &format!("127.0.0.{}", 10 + i),
            ])
            .args(["--resolve", &format!("acme.seed.test:{port}:127.0.0.1")])
            .arg(format!(
                "http://acme.seed.test:{port}/{rid}.git/info/refs?service=git-upload-pack"
            ))
            .output()
            .unwrap();
        codes.push(String::from_utf8_lossy(&out.stdout).to_string());
    }
    assert_eq!(codes[0], "200", "{codes:?}");
    assert!(codes[1..].iter().any(|c| c == "429"), "{codes:?}");
    assert!(seed.metric("seedd_tenant_rate_limited_total", &["tenant=\"acme\""]) >= 1.0);
}

/// Starts an upload-pack POST that sends only the first pkt-line length, so the request holds
/// its admission slot (git waits for the rest of the body).
fn held_upload_pack(seed: &Seed, rid: &str) -> std::net::TcpStream {
    let req = format!(
        "POST /{rid}.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: 1000\r\n\r\n0032"
    );
    raw_request(seed.http, req.as_bytes())
}

fn status_of(stream: &mut std::net::TcpStream, within: Duration) -> Option<(u16, String)> {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 1024];
    let n = stream.read(&mut buf).ok()?;
    let head = String::from_utf8_lossy(&buf[..n]).to_string();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, head))
}

#[test]
fn per_repo_pack_admission_queues_then_sheds_with_503() {
    let rid = fixtures().rid("small-fixture");
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into()],
        extra_config: "[http.rate]\nper_repo_concurrent_packs = 1\nper_repo_queue = 1\nper_repo_queue_timeout_ms = 20000\n".into(),
        ..SeedOptions::default()
    });
    let first = held_upload_pack(&seed, &rid);
    std::thread::sleep(Duration::from_millis(300));
    let mut second = held_upload_pack(&seed, &rid);
    std::thread::sleep(Duration::from_millis(300));
    let mut third = held_upload_pack(&seed, &rid);
    let started = Instant::now();
    let (status, head) = status_of(&mut third, Duration::from_secs(5)).expect("third answered");
    assert_eq!(status, 503, "{head}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "shed at once, not after waiting"
    );
    assert!(
        head.to_ascii_lowercase().contains("retry-after: "),
        "{head}"
    );
    // The queued one is still waiting…
    assert!(status_of(&mut second, Duration::from_millis(500)).is_none());
    // …and gets the slot when the first ends.
    drop(first);
    let (status, head) = status_of(&mut second, Duration::from_secs(10)).expect("second answered");
    assert_eq!(status, 200, "{head}");
    assert!(seed.metric("seedd_http_rate_limited_total", &["scope=\"repo\""]) >= 1.0);
}

#[test]
fn admin_api_refuses_missing_or_wrong_tokens_and_changes_nothing() {
    let seed = Seed::start(SeedOptions::default());
    let body = json!({"name": "acme"}).to_string();
    for headers in [
        vec![("Content-Type", "application/json")],
        vec![
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer not-the-token"),
        ],
    ] {
        let (status, _) = http_call(
            "POST",
            &seed.admin_url("/api/v1/tenants"),
            &headers,
            Some(body.as_bytes()),
        )
        .unwrap();
        assert_eq!(status, 401);
        let (status, _) = http_call(
            "DELETE",
            &seed.admin_url("/api/v1/tenants/acme"),
            &headers,
            None,
        )
        .unwrap();
        assert_eq!(status, 401);
    }
    let v = seed.admin_ok("GET", "/api/v1/tenants", None);
    assert_eq!(v["tenants"], json!([]), "nothing was created");
    // A second token from admin.token_files is accepted too (rotation).
    let extra = seed.dir.path().join("second-token");
    std::fs::write(&extra, "second-secret\n").unwrap();
    let cfg = std::fs::read_to_string(seed.config_path()).unwrap();
    std::fs::write(
        seed.config_path(),
        cfg.replace(
            "[admin]\n",
            &format!("[admin]\ntoken_files = [\"{}\"]\n", extra.display()),
        ),
    )
    .unwrap();
    // A keep-alive HTTP connection opened before the reload keeps working after it.
    let mut conn = std::net::TcpStream::connect(seed.http).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let ask = |conn: &mut std::net::TcpStream| {
        use std::io::Write;
        conn.write_all(b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        while !String::from_utf8_lossy(&got).contains("not found") {
            let n = conn.read(&mut buf).unwrap();
            assert!(n > 0, "connection closed");
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).to_string()
    };
    assert!(ask(&mut conn).starts_with("HTTP/1.1 404"));
    seed.admin_ok("POST", "/api/v1/config/reload", None);
    assert!(
        ask(&mut conn).starts_with("HTTP/1.1 404"),
        "same connection after reload"
    );
    let (status, _) = http_call(
        "GET",
        &seed.admin_url("/api/v1/tenants"),
        &[("Authorization", "Bearer second-secret")],
        None,
    )
    .unwrap();
    assert_eq!(status, 200);
}

#[test]
fn reload_applies_valid_changes_keeps_the_old_config_when_broken_and_picks_up_a_new_cert() {
    let certs = tempfile::tempdir().unwrap();
    let (_ca1, cert, key) = write_certs(certs.path(), "one");
    let rid = fixtures().rid("small-fixture");
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into()],
        tls: Some((cert, key)),
        ..SeedOptions::default()
    });
    let original = std::fs::read_to_string(seed.config_path()).unwrap();
    // Broken: an unknown key. Rejected with the key named; the old configuration stays.
    std::fs::write(
        seed.config_path(),
        format!("{original}\n[policy]\ndefualt = \"allow\"\n"),
    )
    .unwrap();
    let (status, v) = seed.admin("POST", "/api/v1/config/reload", None);
    assert_eq!(status, 400, "{v}");
    let err = v["error"].as_str().unwrap();
    assert!(
        err.contains("defualt") && err.contains("keeping the previous configuration"),
        "{err}"
    );
    assert_eq!(
        seed.metric("seedd_config_reloads_total", &["result=\"error\""]),
        1.0
    );
    // SIGHUP with the broken file: logged, still serving.
    seed.signal(1);
    wait_for("reload error logged", Duration::from_secs(10), || {
        seed.logs()
            .contains("configuration reload failed")
            .then_some(())
    });
    let url = format!("https://localhost:{}/{rid}.git", seed.http.port());
    let tmp = tempfile::tempdir().unwrap();

    // Valid: unknown hosts now get 404, a tenant declared in the file appears, and a new
    // certificate is served by the next handshake.
    std::fs::write(
        seed.config_path(),
        original.replace("[http]\n", "[http]\nunknown_hosts = \"none\"\n")
            + &format!(
                "[[tenants]]\nname = \"acme\"\nhosts = [\"localhost\"]\nrepos = [{{ rid = \"{rid}\" }}]\n\
                 [p2p.rate]\nconnect = {{ fill_rate = 2.0, capacity = 10.0 }}\n"
            ),
    )
    .unwrap();
    let (ca2, _, _) = write_certs(certs.path(), "two");
    let v = seed.admin_ok("POST", "/api/v1/config/reload", None);
    let changes = v["changes"].to_string();
    assert!(changes.contains("p2p.rate"), "{v}");
    assert!(
        changes.contains("unknown_hosts")
            && changes.contains("+ tenant acme")
            && changes.contains("certificate reloaded"),
        "{v}"
    );
    wait_for_ca(&seed, &url, &ca2, tmp.path(), Duration::from_secs(1));
    assert!(seed.admin_ok("GET", "/api/v1/tenants/acme", None)["name"] == "acme");
    // 127.0.0.1 is no tenant's host: 404 now.
    let out = git(tmp.path())
        .env("GIT_SSL_CAINFO", &ca2)
        .args(["ls-remote", &url.replace("localhost", "127.0.0.1")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        output_text(&out).contains("not found"),
        "{}",
        output_text(&out)
    );
    assert_eq!(
        seed.metric("seedd_config_reloads_total", &["result=\"ok\""]),
        1.0
    );
}

/// `seedctl -o json <args>` → parsed JSON (panics unless it succeeds).
fn ctl(seed: &Seed, args: &[&str]) -> Value {
    let mut all = vec!["-o", "json"];
    all.extend_from_slice(args);
    let out = run_unchecked(seed, &all);
    assert!(
        out.status.success(),
        "seedctl {args:?}: {}",
        output_text(&out)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("seedctl {args:?}: not JSON ({e}): {}", output_text(&out)))
}

#[test]
fn seedctl_drives_every_tenant_command_with_json_output() {
    let f = fixtures();
    let hw = f.rid("heartwood-fixture");
    let small = f.rid("small-fixture");
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into()],
        ..SeedOptions::default()
    });
    assert_eq!(ctl(&seed, &["status"])["nid"], seed.nid().as_str());
    let t = ctl(
        &seed,
        &[
            "tenant",
            "create",
            "acme",
            "--host",
            "acme.seed.test",
            "--repos",
            "5",
            "--bytes",
            "10MiB",
        ],
    );
    assert_eq!(t["name"], "acme");
    assert_eq!(t["quotas"]["bytes"], 10 * 1024 * 1024);
    assert!(ctl(&seed, &["tenant", "ls"])
        .to_string()
        .contains("\"acme\""));
    let t = ctl(
        &seed,
        &[
            "quota",
            "set",
            "acme",
            "--egress-per-day",
            "1GiB",
            "--repos",
            "unlimited",
        ],
    );
    assert_eq!(t["quotas"]["egress_bytes_per_day"], 1u64 << 30);
    assert_eq!(t["quotas"]["repos"], Value::Null);
    let t = ctl(&seed, &["host", "add", "acme", "git.acme.test"]);
    assert_eq!(t["hosts"], json!(["acme.seed.test", "git.acme.test"]));
    let t = ctl(&seed, &["host", "rm", "acme", "git.acme.test"]);
    assert_eq!(t["hosts"], json!(["acme.seed.test"]));
    let v = ctl(
        &seed,
        &[
            "repo", "seed", &small, "--tenant", "acme", "--alias", "small", "--scope", "all",
        ],
    );
    assert_eq!(v["owner"], true);
    let v = ctl(&seed, &["repo", "ls", "--tenant", "acme"]);
    assert!(
        v.to_string().contains(&small) && !v.to_string().contains(&hw),
        "{v}"
    );
    assert!(ctl(&seed, &["repo", "show", &small])
        .to_string()
        .contains(&small));
    let t = ctl(&seed, &["tenant", "show", "acme"]);
    assert_eq!(t["repos"][0]["alias"], "small");
    let u = ctl(&seed, &["usage", "--tenant", "acme"]);
    assert!(u.to_string().contains("\"repos\":1"), "{u}");
    // Deny lists, tenant and global.
    ctl(&seed, &["deny", "repo", "add", &hw, "--tenant", "acme"]);
    ctl(&seed, &["deny", "repo", "add", &hw]);
    let nid = f.json["bob"]["nid"].as_str().unwrap();
    ctl(&seed, &["deny", "node", "add", nid]);
    let d = ctl(&seed, &["deny", "repo", "ls"]).to_string();
    assert!(d.contains(&hw), "{d}");
    assert!(ctl(&seed, &["deny", "node", "ls"])
        .to_string()
        .contains(nid));
    let (s, v) = seed_for(&seed, &hw, json!({"tenant": "acme"}));
    assert_eq!(s, 409, "denied repositories cannot be seeded: {v}");
    ctl(&seed, &["deny", "repo", "rm", &hw, "--tenant", "acme"]);
    ctl(&seed, &["deny", "repo", "rm", &hw]);
    ctl(&seed, &["deny", "node", "rm", nid]);
    assert!(!ctl(&seed, &["deny", "repo", "ls"])
        .to_string()
        .contains(&hw));
    // Suspend and resume.
    assert_eq!(
        ctl(&seed, &["tenant", "suspend", "acme"])["state"],
        "suspended"
    );
    assert_eq!(ctl(&seed, &["tenant", "resume", "acme"])["state"], "active");
    let t = ctl(
        &seed,
        &["tenant", "rate", "acme", "--rps", "50", "--burst", "100"],
    );
    assert_eq!(t["rate"]["requests_per_second"], 50);
    // Identities.
    let i = ctl(
        &seed,
        &["identity", "create", "shard", "--listen", "127.0.0.1:0"],
    );
    assert!(i["nid"].as_str().unwrap().starts_with("z6Mk"));
    assert!(ctl(&seed, &["identity", "ls"])
        .to_string()
        .contains("\"shard\""));
    // Peers, fetch, queue, routing with a real node.
    let alice = RadNode::start("alice", &[]);
    ctl(&seed, &["peers", "connect", &alice.peer()]);
    wait_for("alice connected", Duration::from_secs(30), || {
        ctl(&seed, &["peers", "ls"])
            .to_string()
            .contains(alice.nid.as_str())
            .then_some(())
    });
    let v = ctl(&seed, &["fetch", &hw, "--from", &alice.nid]);
    assert_eq!(v["cloned"], true, "{v}");
    assert!(ctl(&seed, &["queue", "ls"]).get("active").is_some());
    wait_for("alice's routes", Duration::from_secs(30), || {
        ctl(&seed, &["routing", "ls", "--nid", &alice.nid])
            .to_string()
            .contains(&small)
            .then_some(())
    });
    ctl(&seed, &["peers", "disconnect", &alice.nid]);
    // Config reload, apply (idempotent), backup.
    assert_eq!(ctl(&seed, &["config", "reload"])["reloaded"], true);
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("tenants.yaml");
    std::fs::write(
        &yaml,
        format!(
            "tenants:\n  - name: beta\n    hosts: [beta.seed.test]\n    quotas: {{repos: 3, bytes: 1GiB}}\n    repos:\n      - {{rid: \"{small}\", scope: all, alias: tiny}}\n"
        ),
    )
    .unwrap();
    let dry = ctl(&seed, &["apply", "-f", yaml.to_str().unwrap(), "--dry-run"]);
    assert!(dry.to_string().contains("+ tenant beta"), "{dry}");
    assert!(
        !ctl(&seed, &["tenant", "ls"])
            .to_string()
            .contains("\"beta\""),
        "dry run changed nothing"
    );
    let v = ctl(&seed, &["apply", "-f", yaml.to_str().unwrap()]);
    assert!(v.to_string().contains("+ beta repo"), "{v}");
    let again = ctl(&seed, &["apply", "-f", yaml.to_str().unwrap()]);
    assert_eq!(again["changes"], json!([]), "apply is idempotent: {again}");
    let out = run_unchecked(&seed, &["apply", "-f", yaml.to_str().unwrap()]);
    assert!(
        output_text(&out).contains("no changes"),
        "{}",
        output_text(&out)
    );
    let backup = dir.path().join("backup.json");
    let out = run_unchecked(&seed, &["backup", "-f", backup.to_str().unwrap()]);
    assert!(out.status.success(), "{}", output_text(&out));
    let b: Value = serde_json::from_str(&std::fs::read_to_string(&backup).unwrap()).unwrap();
    assert!(b["keys"]["default"]
        .as_str()
        .unwrap()
        .contains("OPENSSH PRIVATE KEY"));
    assert!(b["keys"]["shard"].is_string());
    // Online restore: tenants and policies back into the running daemon.
    ctl(&seed, &["tenant", "rm", "beta"]);
    let v = ctl(&seed, &["restore", "-f", backup.to_str().unwrap()]);
    assert!(v["restored"]["tenants"].as_u64().unwrap() >= 2, "{v}");
    assert!(ctl(&seed, &["tenant", "ls"])
        .to_string()
        .contains("\"beta\""));
    // Unseed (shared: kept), purge, remove.
    let v = ctl(&seed, &["repo", "unseed", &small, "--tenant", "acme"]);
    assert_eq!(v["purged"], false, "beta still holds it: {v}");
    let v = ctl(&seed, &["repo", "purge", &hw]);
    assert_eq!(v["purged"], true);
    assert!(!seed.repo_path(&hw).exists());
    assert_eq!(ctl(&seed, &["tenant", "rm", "acme"])["removed"], true);
    // Errors: one line, non-zero exit.
    let out = run_unchecked(&seed, &["tenant", "show", "nope"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no tenant named `nope`"), "{err}");
}

#[test]
fn backup_then_restore_into_a_fresh_data_dir_keeps_nids_tenants_and_policies() {
    let f = fixtures();
    let small = f.rid("small-fixture");
    let hw = f.rid("heartwood-fixture");
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into()],
        ..SeedOptions::default()
    });
    tenant(&seed, "acme", &["acme.seed.test"]);
    seed.admin_ok(
        "PUT",
        "/api/v1/tenants/acme/quota",
        Some(json!({"repos": 7})),
    );
    assert_eq!(
        seed_for(&seed, &small, json!({"tenant": "acme", "alias": "s"})).0,
        200
    );
    seed.admin_ok("POST", "/api/v1/deny/repos", Some(json!({"rid": hw})));
    let shard = seed.admin_ok(
        "POST",
        "/api/v1/identities",
        Some(json!({"name": "shard", "listen": ["127.0.0.1:0"]})),
    );
    let nid = seed.nid();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("backup.json");
    let out = run_unchecked(&seed, &["backup", "-f", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", output_text(&out));
    let policies_before = seed.api("/api/v1/policies");
    let tenant_before = seed.admin_ok("GET", "/api/v1/tenants/acme", None);
    drop(seed);

    let fresh = dir.path().join("fresh");
    let restore_offline = || {
        std::process::Command::new(bin("seedctl"))
            .args(["restore", "-f", file.to_str().unwrap(), "--data-dir"])
            .arg(&fresh)
            .output()
            .unwrap()
    };
    let out = restore_offline();
    assert!(out.status.success(), "{}", output_text(&out));
    let restored = Seed::start(SeedOptions {
        data_dir: Some(fresh.clone()),
        ..SeedOptions::default()
    });
    assert_eq!(restored.nid(), nid, "same node id");
    let ids = restored.admin_ok("GET", "/api/v1/identities", None);
    assert!(
        ids.to_string().contains(shard["nid"].as_str().unwrap()),
        "{ids}"
    );
    assert_eq!(restored.api("/api/v1/policies"), policies_before);
    let t = restored.admin_ok("GET", "/api/v1/tenants/acme", None);
    for k in [
        "hosts", "quotas", "identity", "state", "rate", "deny", "follows",
    ] {
        assert_eq!(t[k], tenant_before[k], "{k}");
    }
    assert_eq!(t["repos"][0]["rid"], tenant_before["repos"][0]["rid"]);
    assert_eq!(t["repos"][0]["alias"], "s");
    assert!(fresh.join("restore.json.done").exists());
    // A second restore into a used directory is refused.
    let out = restore_offline();
    assert!(!out.status.success());
}

#[test]
fn reload_changes_the_log_level_without_a_restart() {
    let seed = Seed::start(SeedOptions {
        env: vec![("RUST_LOG".into(), String::new())],
        extra_config: "[log]\nlevel = \"warn\"\n".into(),
        ..SeedOptions::default()
    });
    seed.rescan();
    assert!(
        !seed.logs().contains("index reconciled"),
        "info lines are filtered at warn: {}",
        seed.logs()
    );
    let cfg = std::fs::read_to_string(seed.config_path()).unwrap();
    std::fs::write(
        seed.config_path(),
        cfg.replace("level = \"warn\"", "level = \"info\""),
    )
    .unwrap();
    let v = seed.admin_ok("POST", "/api/v1/config/reload", None);
    assert!(
        v["changes"].to_string().contains("log.level: warn → info"),
        "{v}"
    );
    seed.rescan();
    wait_for(
        "info lines after the reload",
        Duration::from_secs(5),
        || seed.logs().contains("index reconciled").then_some(()),
    );
}

#[test]
fn a_dedicated_identity_replicates_from_a_node_connected_only_to_it() {
    let f = fixtures();
    let hw = f.rid("heartwood-fixture");
    let shard_port = free_port();
    let seed = Seed::start(SeedOptions {
        extra_config: format!(
            "[[identities]]\nname = \"shard1\"\nlisten = [\"127.0.0.1:{shard_port}\"]\n\
             [[tenants]]\nname = \"acme\"\nidentity = \"shard1\"\nhosts = [\"acme.seed.test\"]\n"
        ),
        ..SeedOptions::default()
    });
    let shard_nid = seed.admin_ok("GET", "/api/v1/identities", None)["identities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "shard1")
        .unwrap()["nid"]
        .as_str()
        .unwrap()
        .to_owned();
    // alice holds heartwood and knows only the tenant's identity.
    let alice = RadNode::start("alice", &[format!("{shard_nid}@127.0.0.1:{shard_port}")]);
    assert!(
        !seed.api("/api/v1/peers")["peers"]
            .to_string()
            .contains(alice.nid.as_str()),
        "alice is not connected to the default identity"
    );
    let (s, v) = seed_for(&seed, &hw, json!({"tenant": "acme"}));
    assert_eq!(s, 200, "{v}");
    wait_for(
        "heartwood fetched through shard1",
        Duration::from_secs(60),
        || (seed.admin("GET", &format!("/api/v1/repos/{hw}"), None).0 == 200).then_some(()),
    );
    assert!(seed
        .storage()
        .join(hw.trim_start_matches("rad:"))
        .join("HEAD")
        .exists());
    let tmp = tempfile::tempdir().unwrap();
    assert!(clones(
        &seed,
        "acme.seed.test",
        &format!("/{hw}.git"),
        &tmp.path().join("c")
    ));
}

/// A tenant's stored bytes (`GET /api/v1/usage`).
fn stored_bytes(seed: &Seed, tenant: &str) -> u64 {
    let usage = seed.admin_ok("GET", "/api/v1/usage", None);
    usage["usage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["tenant"] == tenant)
        .unwrap()["stored_bytes"]
        .as_u64()
        .unwrap()
}

#[test]
fn repository_sizes_survive_a_restart_without_a_walk_and_quotas_still_apply() {
    let f = fixtures();
    let keep = tempfile::tempdir().unwrap();
    let data = keep.path().join("data");
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into()],
        data_dir: Some(data.clone()),
        ..SeedOptions::default()
    });
    let small = f.rid("small-fixture");
    let hw = f.rid("heartwood-fixture");
    tenant(&seed, "acme", &[]);
    assert_eq!(seed_for(&seed, &small, json!({"tenant": "acme"})).0, 200);
    let measured = stored_bytes(&seed, "acme");
    assert!(measured > 0);
    assert!(seed.stop().success());

    // Grow the directory while seedd is down: a start that walked it would count this file.
    let extra = 300_000u64;
    let dir = data.join("storage").join(small.trim_start_matches("rad:"));
    std::fs::write(dir.join("size-probe"), vec![0u8; extra as usize]).unwrap();
    let seed = Seed::start(SeedOptions {
        data_dir: Some(data.clone()),
        ..SeedOptions::default()
    });
    wait_for("sizes at start", Duration::from_secs(10), || {
        seed.logs()
            .contains("tenant repository sizes")
            .then_some(())
    });
    let logs = seed.logs();
    assert!(
        logs.contains("known=1") && logs.contains("measured=0"),
        "{logs}"
    );
    assert_eq!(stored_bytes(&seed, "acme"), measured, "the remembered size");

    // Quotas apply to the remembered size: at the limit, seeding another repository is refused.
    seed.admin_ok(
        "PUT",
        "/api/v1/tenants/acme/quota",
        Some(json!({"bytes": measured})),
    );
    let (s, v) = seed_for(&seed, &hw, json!({"tenant": "acme"}));
    assert_eq!(s, 409, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("storage quota"),
        "{v}"
    );

    // A rescan measures again (storage may change outside seedd).
    seed.rescan();
    assert_eq!(stored_bytes(&seed, "acme"), measured + extra);
}
