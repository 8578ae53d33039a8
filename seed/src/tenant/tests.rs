use super::*;

fn rid(n: u8) -> RepoId {
    RepoId::from_oid_bytes([n; 20])
}

fn registry() -> (tempfile::TempDir, Tenants) {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(dir.path()).unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    (dir, Tenants::load(index, metrics).unwrap())
}

fn none() -> BTreeSet<RepoId> {
    BTreeSet::new()
}

#[test]
fn owner_is_the_oldest_claim_and_passes_on() {
    let (_d, t) = registry();
    t.create(Tenant::new("acme")).unwrap();
    t.create(Tenant::new("beta")).unwrap();
    assert!(t
        .seed("acme", rid(1), Scope::Followed, None, &none())
        .unwrap());
    std::thread::sleep(std::time::Duration::from_millis(2));
    assert!(!t.seed("beta", rid(1), Scope::All, None, &none()).unwrap());
    assert_eq!(t.owner(&rid(1)), Some(("acme".into(), Scope::Followed)));
    assert_eq!(t.seeded_scope(&rid(1)), Some(Scope::Followed));
    assert!(!t.unseed("acme", &rid(1)).unwrap(), "beta still holds it");
    assert_eq!(t.owner(&rid(1)), Some(("beta".into(), Scope::All)));
    assert!(t.unseed("beta", &rid(1)).unwrap(), "last claim gone");
    assert_eq!(t.seeded_scope(&rid(1)), None);
}

#[test]
fn quotas_refuse_seeding() {
    let (_d, t) = registry();
    t.create(Tenant::new("acme")).unwrap();
    t.set_quotas(
        "acme",
        Quotas {
            repos: Some(1),
            bytes: Some(100),
            egress_bytes_per_day: None,
        },
    )
    .unwrap();
    t.seed("acme", rid(1), Scope::All, None, &none()).unwrap();
    let e = t
        .seed("acme", rid(2), Scope::All, None, &none())
        .unwrap_err();
    assert!(matches!(e, TenantError::RepoQuota { limit: 1, .. }), "{e}");
    // Re-seeding a held repository is not a new claim.
    t.seed("acme", rid(1), Scope::Followed, None, &none())
        .unwrap();
    t.set_quotas(
        "acme",
        Quotas {
            repos: None,
            bytes: Some(100),
            egress_bytes_per_day: None,
        },
    )
    .unwrap();
    t.set_size(rid(1), Some(100));
    let e = t
        .seed("acme", rid(2), Scope::All, None, &none())
        .unwrap_err();
    assert!(matches!(e, TenantError::ByteQuota { used: 100, .. }), "{e}");
    assert_eq!(t.fetch_budget(&rid(1)), Some(0));
    t.set_size(rid(1), Some(40));
    assert_eq!(t.fetch_budget(&rid(1)), Some(60));
}

#[test]
fn inventory_cap_refuses_placement() {
    let (_d, t) = registry();
    t.set_identity("shard", 1);
    let mut a = Tenant::new("acme");
    a.identity = "shard".into();
    t.create(a).unwrap();
    t.seed("acme", rid(1), Scope::All, None, &none()).unwrap();
    let e = t
        .seed("acme", rid(2), Scope::All, None, &none())
        .unwrap_err();
    assert!(matches!(e, TenantError::InventoryCap { cap: 1, .. }), "{e}");
    let mut b = Tenant::new("beta");
    b.identity = "nope".into();
    assert!(matches!(t.create(b), Err(TenantError::UnknownIdentity(_))));
}

#[test]
fn hosts_exact_wildcard_and_ports() {
    let (_d, t) = registry();
    let mut a = Tenant::new("acme");
    a.hosts = vec!["Acme.Seed.Example".into(), "*.acme.example".into()];
    t.create(a).unwrap();
    assert_eq!(t.by_host("acme.seed.example:8443").unwrap().name, "acme");
    assert_eq!(t.by_host("git.acme.example").unwrap().name, "acme");
    assert!(t.by_host("acme.example").is_none());
    assert!(t.by_host("other.example").is_none());
    let mut b = Tenant::new("beta");
    b.hosts = vec!["acme.seed.example".into()];
    assert!(matches!(t.create(b), Err(TenantError::HostTaken { .. })));
    assert!(matches!(
        t.add_host("acme", "bad host"),
        Err(TenantError::BadHost(_))
    ));
}

#[test]
fn suspended_tenants_do_not_seed_or_serve() {
    let (_d, t) = registry();
    t.create(Tenant::new("acme")).unwrap();
    t.seed("acme", rid(1), Scope::All, Some("web".into()), &none())
        .unwrap();
    assert_eq!(t.alias("acme", "web", |_| None), Some(rid(1)));
    assert_eq!(
        t.alias("acme", "heartwood", |_| Some("heartwood".into())),
        None,
        "explicitly aliased repositories are not also found by name"
    );
    t.set_state("acme", State::Suspended).unwrap();
    assert_eq!(t.seeded_scope(&rid(1)), None);
    assert!(t.only_suspended(&rid(1)));
    assert!(matches!(
        t.seed("acme", rid(2), Scope::All, None, &none()),
        Err(TenantError::Suspended(_))
    ));
}

#[test]
fn survives_reload_and_egress_counts() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    {
        let index = Index::open(dir.path()).unwrap();
        let t = Tenants::load(index, metrics.clone()).unwrap();
        let mut a = Tenant::new("acme");
        a.quotas.egress_bytes_per_day = Some(10);
        t.create(a).unwrap();
        t.seed("acme", rid(1), Scope::All, None, &none()).unwrap();
        t.add_egress("acme", "http", 5);
        assert!(t.egress_exhausted("acme").is_none());
        t.add_egress("acme", "http", 5);
        assert!(t.egress_exhausted("acme").is_some());
        t.flush_egress();
    }
    let index = Index::open(dir.path()).unwrap();
    let t = Tenants::load(index, metrics).unwrap();
    let (a, u) = t.get("acme").unwrap();
    assert_eq!(a.repos.len(), 1);
    assert_eq!(u.egress_today_bytes, 10);
    assert_eq!(t.remove("acme").unwrap(), vec![rid(1)]);
    assert!(t.get("acme").is_none());
}

#[test]
fn names_and_hosts_are_checked() {
    assert!(valid_name("acme-1"));
    assert!(!valid_name("Acme"));
    assert!(!valid_name("-x"));
    assert!(!valid_name(""));
    assert_eq!(normalise_host("A.example."), Some("a.example".into()));
    assert_eq!(normalise_host("*.x.example"), Some("*.x.example".into()));
    assert_eq!(normalise_host("a..b"), None);
    assert_eq!(strip_port("[::1]:80"), "::1");
    assert_eq!(strip_port("a.b:80"), "a.b");
}

#[test]
fn moving_a_tenant_checks_the_target_identity_cap_and_purges_are_remembered() {
    let (_d, t) = registry();
    t.set_identity("small", 1);
    t.create(Tenant::new("acme")).unwrap();
    t.seed("acme", rid(1), Scope::All, None, &none()).unwrap();
    t.seed("acme", rid(2), Scope::All, None, &none()).unwrap();
    assert!(matches!(
        t.set_identity_of("acme", "small"),
        Err(TenantError::InventoryCap { cap: 1, .. })
    ));
    t.unseed("acme", &rid(2)).unwrap();
    assert_eq!(
        t.set_identity_of("acme", "small").unwrap().identity,
        "small"
    );
    let before = now_ms();
    assert!(!t.purged_since(&rid(2), before));
    t.note_purged(rid(2));
    assert!(t.purged_since(&rid(2), before));
    assert!(!t.purged_since(&rid(2), now_ms() + 1));
}
