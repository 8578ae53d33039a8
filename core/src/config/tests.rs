use super::*;
use std::io::Write;
use std::path::Path;

fn write(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("seedd.toml");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    path
}

#[test]
fn defaults_are_valid_and_safe() {
    let cfg = Config::default();
    cfg.validate(&Sources::default()).unwrap();
    assert_eq!(cfg.policy.default, DefaultPolicy::Block);
    assert!(!cfg.p2p.bootstrap);
    assert_eq!(cfg.admin.listen.to_string(), "127.0.0.1:9776");
    assert_eq!(cfg.data_dir, PathBuf::from("./seedd-data"));
}

#[test]
fn file_overrides_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "alias = \"seed.test\"\n[http]\nlisten = \"127.0.0.1:18080\"\n[policy]\ndefault = \"allow\"\n",
    );
    let (cfg, sources) = Config::load(Some(&path), &Overrides::default()).unwrap();
    assert_eq!(cfg.alias, "seed.test");
    assert_eq!(cfg.http.listen.to_string(), "127.0.0.1:18080");
    assert_eq!(cfg.policy.default, DefaultPolicy::Allow);
    assert_eq!(cfg.admin.listen.to_string(), "127.0.0.1:9776");
    assert!(sources.origin("alias").contains("seedd.toml"));
    assert_eq!(sources.origin("admin.listen"), "built-in default");
}

#[test]
fn invalid_value_names_key_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "[policy]\ndefault = \"maybe\"\n");
    let err = Config::load(Some(&path), &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("policy.default"), "{err}");
    assert!(err.contains("seedd.toml"), "{err}");
}

#[test]
fn p2p_exempt_cidrs_are_parsed_and_bad_entries_named() {
    assert!(Config::default().p2p.rate.exempt_cidrs.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "[p2p.rate]\nexempt_cidrs = [\"10.0.0.0/8\", \"fd00::/8\"]\n",
    );
    let (cfg, _) = Config::load(Some(&path), &Overrides::default()).unwrap();
    assert_eq!(cfg.p2p.rate.exempt_cidrs, ["10.0.0.0/8", "fd00::/8"]);
    let path = write(
        dir.path(),
        "[p2p.rate]\nexempt_cidrs = [\"10.0.0.0/8\", \"10.0.0.0/40\"]\n",
    );
    let err = Config::load(Some(&path), &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("p2p.rate.exempt_cidrs"), "{err}");
    assert!(err.contains("entry 1"), "{err}");
    assert!(err.contains("seedd.toml"), "{err}");
}

#[test]
fn unknown_key_is_rejected_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "[http]\nlisen = \"127.0.0.1:1\"\n");
    let err = Config::load(Some(&path), &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("http.lisen"), "{err}");
}

#[test]
fn type_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "[http]\nmax_concurrent_packs = \"lots\"\n");
    let err = Config::load(Some(&path), &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("max_concurrent_packs"), "{err}");
}

#[test]
fn missing_file_is_an_error() {
    let err = Config::load(
        Some(Path::new("/nonexistent/seedd.toml")),
        &Overrides::default(),
    )
    .unwrap_err();
    assert!(matches!(err, ConfigError::FileNotFound(_)));
}

#[test]
fn bad_alias_and_connect_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "alias = \"has space\"\n");
    assert!(Config::load(Some(&path), &Overrides::default())
        .unwrap_err()
        .to_string()
        .contains("alias"));
    let path = write(
        dir.path(),
        "alias = \"ok\"\n[p2p]\nconnect = [\"nonsense\"]\n",
    );
    assert!(Config::load(Some(&path), &Overrides::default())
        .unwrap_err()
        .to_string()
        .contains("p2p.connect"));
}

#[test]
fn admin_tls_files_must_exist_and_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("admin.crt");
    let key = dir.path().join("admin.key");
    std::fs::write(&cert, "x").unwrap();
    std::fs::write(&key, "x").unwrap();
    let path = write(
        dir.path(),
        &format!(
            "[admin.tls]\ncert = \"{}\"\nkey = \"{}\"\n",
            cert.display(),
            key.display()
        ),
    );
    let (cfg, _) = Config::load(Some(&path), &Overrides::default()).unwrap();
    let tls = cfg.admin.tls.clone().unwrap();
    assert_eq!(tls.cert, cert);
    assert_eq!(tls.client_ca, None);
    let back: Config = toml::from_str(&cfg.to_toml().unwrap()).unwrap();
    assert_eq!(back, cfg);

    let path = write(
        dir.path(),
        &format!(
            "[admin.tls]\ncert = \"{}\"\nkey = \"{}\"\nclient_ca = \"/nonexistent/ca.pem\"\n",
            cert.display(),
            key.display()
        ),
    );
    let err = Config::load(Some(&path), &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("admin.tls.client_ca"), "{err}");
    assert!(err.contains("seedd.toml"), "{err}");

    let path = write(
        dir.path(),
        &format!("[admin.tls]\ncert = \"{}\"\nky = \"x\"\n", cert.display()),
    );
    let err = Config::load(Some(&path), &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("admin.tls.ky"), "{err}");
}

#[test]
fn env_names_follow_the_contract() {
    assert_eq!(env_name("http.listen"), "SEEDD_HTTP__LISTEN");
    assert_eq!(env_name("data_dir"), "SEEDD_DATA_DIR");
}

#[test]
fn printed_config_round_trips() {
    let cfg = Config::default();
    let text = cfg.to_toml().unwrap();
    let back: Config = toml::from_str(&text).unwrap();
    assert_eq!(back, cfg);
}

#[test]
fn bad_value_message_names_key_origin_and_choices() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "[p2p]\nlisten = [\"0.0.0.0:1\", \"nope\"]\n");
    let err = Config::load(Some(&path), &Overrides::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "config key `p2p.listen` (from file {}): entry 1 \"nope\": invalid socket address syntax",
            path.display()
        )
    );
    let path = write(dir.path(), "[policy]\ndefault = \"maybe\"\n");
    let err = Config::load(Some(&path), &Overrides::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "config key `policy.default` (from file {}): \"maybe\": expected \"allow\" or \"block\"",
            path.display()
        )
    );
}

#[test]
fn config_keys_load_and_validate() {
    use crate::config::{Config, Overrides};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seedd.toml");
    std::fs::write(
        &path,
        "[http.rate]\nper_ip_requests_per_second = 2.5\nper_ip_burst = 7\nipv6_prefix = 56\n\
         trusted_proxies = [\"10.0.0.0/8\", \"::1\"]\nper_repo_concurrent_packs = 3\n\
         per_repo_queue = 9\nper_repo_queue_timeout_ms = 250\n",
    )
    .unwrap();
    let (c, _) = Config::load(Some(&path), &Overrides::default()).unwrap();
    let r = &c.http.rate;
    assert_eq!(r.per_ip_requests_per_second, 2.5);
    assert_eq!((r.per_ip_burst, r.ipv6_prefix), (7, 56));
    assert_eq!(r.trusted_proxies, vec!["10.0.0.0/8", "::1"]);
    assert_eq!(
        (
            r.per_repo_concurrent_packs,
            r.per_repo_queue,
            r.per_repo_queue_timeout.as_millis()
        ),
        (3, 9, 250)
    );
    for (text, key) in [
        (
            "trusted_proxies = [\"10.0.0.0/40\"]",
            "http.rate.trusted_proxies",
        ),
        (
            "per_ip_requests_per_second = -1.0",
            "http.rate.per_ip_requests_per_second",
        ),
        ("ipv6_prefix = 0", "http.rate.ipv6_prefix"),
        ("per_ip_burst = 0", "http.rate.per_ip_burst"),
        ("per_ip_bust = 1", "http.rate.per_ip_bust"),
    ] {
        std::fs::write(&path, format!("[http.rate]\n{text}\n")).unwrap();
        let err = Config::load(Some(&path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{err}");
    }
    let d = HttpRateConfig::default();
    assert_eq!(d.per_ip_requests_per_second, 50.0);
    assert_eq!((d.per_ip_burst, d.ipv6_prefix), (100, 64));
    assert!(d.trusted_proxies.is_empty());
    assert_eq!(
        (
            d.per_repo_concurrent_packs,
            d.per_repo_queue,
            d.per_repo_queue_timeout.as_millis()
        ),
        (2, 64, 5000)
    );
}

/// The gossip caps are settings (a seed of a million repositories needs more routes than the
/// default); 0 is refused with the key named.
#[test]
fn gossip_caps_load_and_zero_is_refused() {
    use crate::config::{Config, Overrides};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seedd.toml");
    std::fs::write(
        &path,
        "[p2p]\nmax_nodes = 20000\nmax_routes = 2000000\nmax_announcements = 5000\n",
    )
    .unwrap();
    let (c, _) = Config::load(Some(&path), &Overrides::default()).unwrap();
    assert_eq!(
        (c.p2p.max_nodes, c.p2p.max_routes, c.p2p.max_announcements),
        (20_000, 2_000_000, 5_000)
    );
    let d = P2pConfig::default();
    assert_eq!(
        (d.max_nodes, d.max_routes, d.max_announcements),
        (10_000, 250_000, 100_000)
    );
    for key in ["max_nodes", "max_routes", "max_announcements"] {
        std::fs::write(&path, format!("[p2p]\n{key} = 0\n")).unwrap();
        let err = Config::load(Some(&path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("p2p.{key}")), "{err}");
    }
}

#[test]
fn pack_cache_keys_load_and_validate() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "[http.pack_cache]\nenabled = false\nmax_bytes = 1000\nmax_age_secs = 5\n\
         admission = \"first\"\n",
    );
    let (c, _) = Config::load(Some(&path), &Overrides::default()).unwrap();
    let p = &c.http.pack_cache;
    assert!(!p.enabled);
    assert_eq!((p.max_bytes, p.max_age.as_secs()), (1000, 5));
    assert_eq!(p.admission, PackCacheAdmission::First);
    for (text, key) in [
        ("max_bytes = 0", "http.pack_cache.max_bytes"),
        ("max_age_secs = 0", "http.pack_cache.max_age_secs"),
        ("admission = \"third\"", "http.pack_cache.admission"),
        ("max_byte = 1", "http.pack_cache.max_byte"),
    ] {
        let path = write(dir.path(), &format!("[http.pack_cache]\n{text}\n"));
        let err = Config::load(Some(&path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{text}: {err}");
    }
    let d = PackCacheConfig::default();
    assert!(d.enabled);
    assert_eq!(d.admission, PackCacheAdmission::Second);
    assert_eq!((d.max_bytes, d.max_age.as_secs()), (1 << 30, 3600));
}

#[test]
fn maintenance_keys_load_and_bad_values_are_named() {
    use crate::config::{Config, MaintenanceConfig, Overrides};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seedd.toml");
    std::fs::write(
        &path,
        "[maintenance]\nenabled = false\nconcurrency = 2\nsweep_interval_secs = 600\n\
         scrub_repos_per_sec = 7\n\
         debounce_secs = 5\ntimeout_secs = 60\nmax_packs = 8\nmax_loose_objects = 10\n\
         max_loose_refs = 20\nbitmap_min_bytes = 0\nfull_repack_below_bytes = 1024\n",
    )
    .unwrap();
    let (c, _) = Config::load(Some(&path), &Overrides::default()).unwrap();
    let m = &c.maintenance;
    assert!(!m.enabled);
    assert_eq!((m.concurrency, m.max_packs), (2, 8));
    assert_eq!((m.sweep_interval.as_secs(), m.debounce.as_secs()), (600, 5));
    assert_eq!(m.timeout.as_secs(), 60);
    assert_eq!(m.scrub_repos_per_sec, 7);
    assert_eq!((m.max_loose_objects, m.max_loose_refs), (10, 20));
    assert_eq!((m.bitmap_min_bytes, m.full_repack_below_bytes), (0, 1024));
    for (text, key) in [
        ("concurrency = 0", "maintenance.concurrency"),
        ("max_packs = 1", "maintenance.max_packs"),
        ("sweep_interval_secs = 0", "maintenance.sweep_interval_secs"),
        ("scrub_repos_per_sec = 0", "maintenance.scrub_repos_per_sec"),
        ("debounce_secs = 0", "maintenance.debounce_secs"),
        ("max_loose_refs = 0", "maintenance.max_loose_refs"),
        ("enable = true", "maintenance.enable"),
    ] {
        std::fs::write(&path, format!("[maintenance]\n{text}\n")).unwrap();
        let err = Config::load(Some(&path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{text}: {err}");
    }
    let d = MaintenanceConfig::default();
    assert!(d.enabled);
    assert_eq!((d.concurrency, d.max_packs), (1, 4));
}

#[test]
fn index_cache_loads_and_bad_values_are_named() {
    use crate::config::{Config, IndexConfig, Overrides};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seedd.toml");
    std::fs::write(&path, "[index]\ncache_mib = 256\n").unwrap();
    let (c, _) = Config::load(Some(&path), &Overrides::default()).unwrap();
    assert_eq!(c.index.cache_bytes(), 256 << 20);
    for text in ["cache_mib = 4", "cache_mib = 100000", "cache = 64"] {
        std::fs::write(&path, format!("[index]\n{text}\n")).unwrap();
        let err = Config::load(Some(&path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("index.cache"), "{text}: {err}");
    }
    assert_eq!(IndexConfig::default().cache_bytes(), 64 << 20);
}

/// Issue 27 §3: `[web]` and `[[web.tenants]]` load; typos, bad RIDs and duplicate tenants are
/// named.
#[test]
fn web_profiles_load_and_bad_values_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let rid = "rad:z3gqcJUoA1n9HaHKufZs5FCSGazv5";
    let path = write(
        dir.path(),
        &format!(
            "[web]\ndescription = \"Ours\"\npinned = [\"{rid}\"]\n\
             [[web.tenants]]\nname = \"acme\"\ndescription = \"Acme\"\n"
        ),
    );
    let (c, _) = Config::load(Some(&path), &Overrides::default()).unwrap();
    let ours = c.web.profile(None);
    assert_eq!(ours.description, "Ours");
    assert_eq!(ours.pinned.len(), 1);
    assert_eq!(ours.pinned[0].to_string(), rid);
    assert_eq!(c.web.profile(Some("acme")).description, "Acme");
    assert!(c.web.profile(Some("acme")).pinned.is_empty());
    assert_eq!(c.web.profile(Some("other")), WebProfile::default());
    for (text, key) in [
        ("[web]\ndescripton = \"x\"\n", "web.descripton"),
        ("[web]\npinned = [\"rad:nope\"]\n", "pinned"),
        (
            "[[web.tenants]]\nname = \"a\"\n[[web.tenants]]\nname = \"a\"\n",
            "web.tenants",
        ),
        ("[[web.tenants]]\nname = \"a\"\npined = []\n", "pined"),
    ] {
        let path = write(dir.path(), text);
        let err = Config::load(Some(&path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{text}: {err}");
    }
}
