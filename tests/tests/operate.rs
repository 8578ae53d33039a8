//! The operator's surface: keys and `seedd id`, config check/print and env overrides, the admin
//! API and metrics, `seedctl`, HTTPS with certificate reload.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use seedd_tests::*;

#[test]
fn key_written_by_rad_auth_gives_the_same_nid_as_rad_self() {
    let f = fixtures();
    let alice_nid = f.json["alice"]["nid"].as_str().unwrap();
    let home = f.dir.join("homes/alice");
    let data = tempfile::tempdir().unwrap();
    let keys = data.path().join("keys/default");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::copy(home.join("keys/radicle"), keys.join("radicle")).unwrap();
    std::fs::copy(home.join("keys/radicle.pub"), keys.join("radicle.pub")).unwrap();
    let out = run(Command::new(bin("seedd"))
        .args(["id", "--data-dir"])
        .arg(data.path()));
    let text = stdout(&out);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(alice_nid));
    assert_eq!(lines.next(), Some(format!("did:key:{alice_nid}").as_str()));

    // The same key mounted as a Secret via keys.secret.
    let cfg = data.path().join("seedd.toml");
    std::fs::write(
        &cfg,
        format!(
            "[keys]\nsecret = \"{}\"\n",
            home.join("keys/radicle").display()
        ),
    )
    .unwrap();
    let other = tempfile::tempdir().unwrap();
    let out = run(Command::new(bin("seedd"))
        .args(["id", "-o", "json", "--config"])
        .arg(&cfg)
        .arg("--data-dir")
        .arg(other.path()));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["nid"], alice_nid);
}

#[test]
fn first_start_creates_a_key_that_real_rad_accepts() {
    let data = tempfile::tempdir().unwrap();
    let out = run(Command::new(bin("seedd"))
        .args(["id", "--data-dir"])
        .arg(data.path()));
    let nid = stdout(&out).lines().next().unwrap().to_owned();
    assert!(nid.starts_with("z6Mk"));
    // Stable across calls.
    let again = run(Command::new(bin("seedd"))
        .args(["id", "--data-dir"])
        .arg(data.path()));
    assert_eq!(stdout(&again).lines().next().unwrap(), nid);
    // The real `rad` reads the key file seedd wrote.
    let rad_home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(rad_home.path().join("keys")).unwrap();
    // A loopback-only profile config (the fixtures' own).
    std::fs::copy(
        fixtures().dir.join("homes/alice/config.json"),
        rad_home.path().join("config.json"),
    )
    .unwrap();
    for f in ["radicle", "radicle.pub"] {
        std::fs::copy(
            data.path().join("keys/default").join(f),
            rad_home.path().join("keys").join(f),
        )
        .unwrap();
    }
    let out = run(Command::new("rad")
        .args(["self", "--nid"])
        .env("RAD_HOME", rad_home.path())
        .env("RAD_PASSPHRASE", ""));
    assert_eq!(stdout(&out), nid);
}

#[test]
fn config_errors_name_the_key_and_the_file_and_env_overrides_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[http]\nlisten = \"not an address\"\n").unwrap();
    let out = Command::new(bin("seedd"))
        .args(["config", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("http.listen") && err.contains("bad.toml"),
        "{err}"
    );

    let typo = dir.path().join("typo.toml");
    std::fs::write(&typo, "[polcy]\ndefault = \"allow\"\n").unwrap();
    let out = Command::new(bin("seedd"))
        .args(["config", "check"])
        .arg(&typo)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("polcy"));

    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        "alias = \"from-file\"\n[http]\nlisten = \"127.0.0.1:1234\"\n",
    )
    .unwrap();
    run(Command::new(bin("seedd"))
        .args(["config", "check"])
        .arg(&good));
    let out = run(Command::new(bin("seedd"))
        .args(["config", "print", "--config"])
        .arg(&good)
        .env("SEEDD_HTTP__LISTEN", "127.0.0.1:4321")
        .env("SEEDD_P2P__CONNECT", "z6Mkon3Necd6NkkyfoGoHxid2znGc59LU3K7mubaRcFbLfLX@127.0.0.1:8776,z6Mko9hTggMwjSTEaJaPUfE6tqcy2xvU6BnNq3e3o8qVBiyH@127.0.0.1:8777"));
    let printed = stdout(&out);
    assert!(printed.contains("alias = \"from-file\""), "{printed}");
    assert!(printed.contains("listen = \"127.0.0.1:4321\""), "{printed}");
    assert!(
        printed.contains("z6Mko9hTggMwjSTEaJaPUfE6tqcy2xvU6BnNq3e3o8qVBiyH@127.0.0.1:8777"),
        "{printed}"
    );
    // A bad env value names the variable.
    let out = Command::new(bin("seedd"))
        .args(["config", "check"])
        .arg(&good)
        .env("SEEDD_POLICY__DEFAULT", "sometimes")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("SEEDD_POLICY__DEFAULT"));
}

#[test]
fn admin_api_needs_the_token_and_metrics_count_clones() {
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into()],
        ..SeedOptions::default()
    });
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(
            http_get(&seed.admin_url(path), &[]).unwrap().0,
            200,
            "{path}"
        );
    }
    let (status, _) = http_get(&seed.admin_url("/api/v1/status"), &[]).unwrap();
    assert_eq!(status, 401);
    let (status, _) = http_get(
        &seed.admin_url("/api/v1/status"),
        &[("Authorization", "Bearer wrong")],
    )
    .unwrap();
    assert_eq!(status, 401);
    let out = run(Command::new(bin("seedctl"))
        .args(["--admin", &seed.admin_url(""), "--token-file"])
        .arg(seed.token_file())
        .args(["status", "-o", "json"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["nid"].as_str().unwrap().starts_with("z6Mk"));
    assert_eq!(v["repos"]["total"], 1);
    let text = run(Command::new(bin("seedctl"))
        .args(["--admin", &seed.admin_url("")])
        .env("SEEDCTL_TOKEN_FILE", seed.token_file())
        .arg("status"));
    assert!(stdout(&text).contains("NID"));
    // Wrong token: one clear line and a non-zero exit.
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(bad.path(), "nope").unwrap();
    let out = Command::new(bin("seedctl"))
        .args(["--admin", &seed.admin_url(""), "--token-file"])
        .arg(bad.path())
        .arg("status")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim().lines().count(),
        1
    );

    let rid = fixtures().rid("small-fixture");
    let tmp = tempfile::tempdir().unwrap();
    run(git(tmp.path())
        .args(["clone", "-q", &seed.url(&format!("{rid}.git"))])
        .arg(tmp.path().join("c")));
    let (_, m) = http_get(&seed.admin_url("/metrics"), &[]).unwrap();
    assert!(
        m.contains("seedd_http_requests_total{route=\"upload_pack\",status=\"200\"}"),
        "{m}"
    );
    // ls-refs and fetch are both upload-pack POSTs in v2.
    assert!(
        m.contains("seedd_git_clone_duration_seconds_count{protocol=\"v2\"} 2"),
        "{m}"
    );
    assert!(
        m.contains("seedd_repos_indexed{visibility=\"public\"} 1"),
        "{m}"
    );
    assert!(m.contains("seedd_build_info{version="), "{m}");
    assert!(m.contains("seedd_git_packs_in_flight 0"), "{m}");
}

#[test]
fn https_clone_over_http1_and_http2_and_certificate_reload_on_change_and_sighup() {
    let certs = tempfile::tempdir().unwrap();
    let (ca1, cert, key) = write_certs(certs.path(), "one");
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into()],
        tls: Some((cert.clone(), key.clone())),
        ..SeedOptions::default()
    });
    let rid = fixtures().rid("small-fixture");
    let url = format!("https://localhost:{}/{rid}.git", seed.http.port());
    let tmp = tempfile::tempdir().unwrap();
    for (i, version) in ["HTTP/1.1", "HTTP/2"].iter().enumerate() {
        run(git(tmp.path())
            .env("GIT_SSL_CAINFO", &ca1)
            .args([
                "-c",
                &format!("http.version={version}"),
                "clone",
                "-q",
                &url,
            ])
            .arg(tmp.path().join(format!("c{i}"))));
    }
    // Without the CA, the clone fails (it really is TLS).
    let out = git(tmp.path())
        .args(["clone", "-q", &url])
        .arg(tmp.path().join("untrusted"))
        .output()
        .unwrap();
    assert!(!out.status.success());

    // Replace the certificate files: the change is noticed without a signal (polled).
    let (ca2, _, _) = write_certs(certs.path(), "two");
    wait_for_ca(&seed, &url, &ca2, tmp.path(), Duration::from_secs(40));
    // Replace them again and send SIGHUP: reloaded at once.
    let (ca3, _, _) = write_certs(certs.path(), "three");
    seed.signal(1);
    wait_for_ca(&seed, &url, &ca3, tmp.path(), Duration::from_secs(5));
    let (_, m) = http_get(&seed.admin_url("/metrics"), &[]).unwrap();
    assert!(m.contains("seedd_tls_reloads_total{result=\"ok\"}"), "{m}");
    assert!(
        m.contains("seedd_tls_cert_expiry_timestamp_seconds 1893456000"),
        "{m}"
    );
}

#[test]
fn sigterm_stops_cleanly_and_restart_reuses_the_index() {
    let keep = tempfile::tempdir().unwrap();
    let data = keep.path().join("data");
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into(), "heartwood-fixture".into()],
        data_dir: Some(data.clone()),
        ..SeedOptions::default()
    });
    assert!(seed.logs().contains("added=2"), "{}", seed.logs());
    let status = seed.stop();
    assert!(status.success(), "seedd exited with {status}");
    // Restart on the same data directory: the index is reused, no repository is re-read.
    let seed = Seed::start(SeedOptions {
        data_dir: Some(data.clone()),
        ..SeedOptions::default()
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seed.logs().contains("index reconciled") {
        assert!(Instant::now() < deadline, "{}", seed.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    let logs = seed.logs();
    assert!(
        logs.contains("unchanged=2") && logs.contains("added=0"),
        "{logs}"
    );
    let rid = fixtures().rid("small-fixture");
    assert_eq!(
        http_get(
            &seed.url(&format!("{rid}.git/info/refs?service=git-upload-pack")),
            &[]
        )
        .unwrap()
        .0,
        200
    );
}

#[test]
fn json_logs_are_one_object_per_line_with_fields() {
    let seed = Seed::start(SeedOptions {
        env: vec![("SEEDD_LOG__FORMAT".into(), "json".into())],
        repos: vec!["small-fixture".into()],
        ..SeedOptions::default()
    });
    let logs = seed.logs();
    let mut saw_nid = false;
    for line in logs.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(
            v["level"].is_string() && v["timestamp"].is_string(),
            "{line}"
        );
        saw_nid |= v["nid"].as_str().is_some_and(|n| n.starts_with("z6Mk"));
    }
    assert!(saw_nid, "{logs}");
}

/// Permission bits of `path`.
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// Every entry under `dir` (recursively), `dir` included.
fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    out.push(dir.to_owned());
    if dir.is_dir() {
        for e in std::fs::read_dir(dir).unwrap() {
            walk(&e.unwrap().path(), out);
        }
    }
}

/// The data directory is the seed user's alone: it and its top-level directories are 0700 —
/// tightened when they already existed with the usual `mkdir` mode — and the keys and the admin
/// token are 0600.
#[test]
fn data_dir_and_secrets_are_private_to_the_seed_user() {
    use std::os::unix::fs::PermissionsExt as _;
    let keep = tempfile::tempdir().unwrap();
    let data = keep.path().join("data");
    std::fs::create_dir_all(data.join("storage")).unwrap();
    for d in [data.clone(), data.join("storage")] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let seed = Seed::start(SeedOptions {
        data_dir: Some(data.clone()),
        ..SeedOptions::default()
    });
    let logs = seed.logs();
    assert!(logs.contains("restricted it to 0700"), "{logs}");

    for dir in ["", "keys", "storage", "index", "cache", "cache/git-home"] {
        let p = data.join(dir);
        assert_eq!(mode(&p), 0o700, "{}", p.display());
    }
    // The data directory's own entries, and everything under keys/.
    let mut entries: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    walk(&data.join("keys"), &mut entries);
    for p in [
        data.join("admin-token"),
        data.join("keys/default/radicle"),
        data.join("keys/default/radicle.pub"),
    ] {
        assert!(entries.contains(&p), "{} missing", p.display());
    }
    for p in &entries {
        assert_eq!(
            mode(p) & 0o077,
            0,
            "{} is accessible to other users (mode {:o})",
            p.display(),
            mode(p)
        );
    }
    // A restart finds nothing to tighten.
    seed.stop();
    let seed = Seed::start(SeedOptions {
        data_dir: Some(data.clone()),
        ..SeedOptions::default()
    });
    assert!(!seed.logs().contains("restricted it to 0700"));
}

/// What the admin API acknowledged survives `kill -9` right after the answer: a tenant, a
/// repository policy and a node policy (the index syncs its WAL for these column families;
/// `kill -9` alone keeps the page cache, so this guards the path, the unit test
/// `index::tests::durable_accessors_sync_the_wal` the fsync).
#[test]
fn acknowledged_tenants_and_policies_survive_kill_9() {
    let keep = tempfile::tempdir().unwrap();
    let data = keep.path().join("data");
    let mut seed = Seed::start(SeedOptions {
        data_dir: Some(data.clone()),
        ..SeedOptions::default()
    });
    let rid = fixtures().rid("small-fixture");
    let nid = "z6Mkon3Necd6NkkyfoGoHxid2znGc59LU3K7mubaRcFbLfLX";
    seed.admin_ok(
        "POST",
        "/api/v1/tenants",
        Some(serde_json::json!({"name": "acme", "hosts": ["acme.seed.test"]})),
    );
    seed.admin_ok(
        "POST",
        &format!("/api/v1/repos/{rid}/seed"),
        Some(serde_json::json!({})),
    );
    seed.admin_ok("POST", &format!("/api/v1/nodes/{nid}/block"), None);
    seed.child.kill().unwrap(); // SIGKILL, no shutdown path
    seed.child.wait().unwrap();
    drop(seed);

    let seed = Seed::start(SeedOptions {
        data_dir: Some(data),
        ..SeedOptions::default()
    });
    let tenants = seed.api("/api/v1/tenants").to_string();
    assert!(tenants.contains("\"acme\""), "{tenants}");
    let policies = seed.api("/api/v1/policies");
    assert!(
        policies
            .to_string()
            .contains(rid.trim_start_matches("rad:")),
        "{policies}"
    );
    assert!(policies.to_string().contains(nid), "{policies}");
}
