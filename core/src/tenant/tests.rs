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

/// Index `rid` under `name` (as a fetch's re-index would), or rename it.
fn name(t: &Tenants, rid: RepoId, name: &str) {
    let record = crate::index::RepoRecord {
        rid,
        name: name.into(),
        description: String::new(),
        default_branch: "main".into(),
        delegates: vec![],
        threshold: 1,
        visibility: crate::storage::Visibility::Public,
        identity_head: "00".into(),
        head: None,
        fingerprint: "f".into(),
        ref_count: 1,
        namespaces: vec![],
        indexed_at: 0,
    };
    let delta = crate::index::RepoDelta {
        record: &record,
        refs: &[],
        peels: &Default::default(),
        gone: &[],
        sigrefs: &[],
        gone_namespaces: &[],
    };
    t.index.update_repo(&delta).unwrap();
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
    name(&t, rid(1), "heartwood");
    assert_eq!(t.alias("acme", "web"), Some(rid(1)));
    assert_eq!(
        t.alias("acme", "heartwood"),
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

#[test]
fn aliases_follow_renames_ambiguity_and_removal() {
    let (_d, t) = registry();
    t.create(Tenant::new("acme")).unwrap();
    t.create(Tenant::new("beta")).unwrap();
    for (r, alias) in [(1, None), (2, None), (3, Some("site"))] {
        t.seed(
            "acme",
            rid(r),
            Scope::All,
            alias.map(str::to_owned),
            &none(),
        )
        .unwrap();
    }
    for (r, n) in [(1, "alpha"), (2, "beta"), (3, "alpha"), (4, "alpha")] {
        name(&t, rid(r), n);
    }
    // rid 3 has an explicit alias, rid 4 is not acme's: the name is unique among the rest.
    assert_eq!(t.alias("acme", "alpha"), Some(rid(1)));
    assert_eq!(t.alias("acme", "site"), Some(rid(3)));
    assert_eq!(t.alias("acme", "beta"), Some(rid(2)));
    assert_eq!(t.alias("acme", "nope"), None);
    assert_eq!(t.alias("nobody", "alpha"), None);
    // A rename that makes two of its repositories share a name: ambiguous, found by neither.
    name(&t, rid(2), "alpha");
    assert_eq!(t.alias("acme", "alpha"), None);
    assert_eq!(t.alias("acme", "beta"), None);
    name(&t, rid(2), "gamma");
    assert_eq!(t.alias("acme", "alpha"), Some(rid(1)));
    assert_eq!(t.alias("acme", "gamma"), Some(rid(2)));
    // An explicit alias wins over another repository's name.
    t.seed("acme", rid(5), Scope::All, Some("gamma".into()), &none())
        .unwrap();
    assert_eq!(t.alias("acme", "gamma"), Some(rid(5)));
    // Giving a repository an explicit alias takes it out of the name lookup.
    t.seed("acme", rid(1), Scope::All, Some("one".into()), &none())
        .unwrap();
    assert_eq!(t.alias("acme", "alpha"), None);
    assert_eq!(t.alias("acme", "one"), Some(rid(1)));
    // Another tenant resolves the same name among its own repositories.
    t.seed("beta", rid(4), Scope::All, None, &none()).unwrap();
    assert_eq!(t.alias("beta", "alpha"), Some(rid(4)));
    // Removal: unseeding drops the alias and the claim; a record leaving the index its name.
    t.unseed("acme", &rid(5)).unwrap();
    assert_eq!(t.alias("acme", "gamma"), Some(rid(2)));
    assert!(!t.shows("acme", &rid(5)));
    assert_eq!(t.holds("acme", &rid(5)), Some(false));
    t.index.remove_repo(&rid(2)).unwrap();
    assert_eq!(t.alias("acme", "gamma"), None);
    // Denied repositories are held but not shown.
    t.deny_repo("acme", rid(3), true).unwrap();
    assert_eq!(t.holds("acme", &rid(3)), Some(true));
    assert!(!t.shows("acme", &rid(3)));
    assert!(t.shows("acme", &rid(1)));
    assert_eq!(t.holds("nobody", &rid(1)), None);
    assert_eq!(
        t.aliases("acme"),
        HashMap::from([(rid(1), "one".to_owned()), (rid(3), "site".to_owned())])
    );
    // The maps are rebuilt from the records after a reload.
    let again = Tenants::load(t.index.clone(), Arc::new(Metrics::new().unwrap())).unwrap();
    assert_eq!(again.alias("acme", "site"), Some(rid(3)));
    assert_eq!(again.alias("beta", "alpha"), Some(rid(4)));
    assert!(!again.shows("acme", &rid(3)));
}

#[test]
fn stored_bytes_follow_sizes_claims_and_owners() {
    let (_d, t) = registry();
    t.create(Tenant::new("acme")).unwrap();
    t.create(Tenant::new("beta")).unwrap();
    t.set_size(rid(1), Some(100));
    t.seed("acme", rid(1), Scope::All, None, &none()).unwrap();
    t.seed("acme", rid(2), Scope::Followed, None, &none())
        .unwrap();
    t.seed("beta", rid(1), Scope::Followed, None, &none())
        .unwrap();
    let stored = |n: &str| t.get(n).unwrap().1.stored_bytes;
    assert_eq!((stored("acme"), stored("beta")), (100, 100));
    t.set_size(rid(2), Some(7));
    t.set_size(rid(1), Some(50));
    assert_eq!((stored("acme"), stored("beta")), (57, 50));
    t.unseed("beta", &rid(1)).unwrap();
    assert_eq!((stored("acme"), stored("beta")), (57, 0));
    t.set_size(rid(1), None);
    assert_eq!(stored("acme"), 7);
    assert_eq!(t.owner(&rid(2)), Some(("acme".to_owned(), Scope::Followed)));
    assert_eq!(t.seeded_scope(&rid(2)), Some(Scope::Followed));
    let mut seeded = t.seeded();
    seeded.sort_by_key(|(r, _)| *r);
    assert_eq!(
        seeded,
        vec![(rid(1), Scope::All), (rid(2), Scope::Followed)]
    );
}
