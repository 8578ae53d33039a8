use super::*;

fn record(rid: RepoId) -> RepoRecord {
    RepoRecord {
        rid,
        name: "x".into(),
        description: String::new(),
        default_branch: "main".into(),
        delegates: vec![],
        threshold: 1,
        visibility: Visibility::Public,
        identity_head: "00".into(),
        head: None,
        fingerprint: "f".into(),
        ref_count: 1,
        namespaces: vec![],
        indexed_at: 0,
    }
}

#[test]
fn refs_under_reads_one_prefix_of_one_repository() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(dir.path()).unwrap();
    let (a, b) = (
        RepoId::from_oid_bytes([1; 20]),
        RepoId::from_oid_bytes([2; 20]),
    );
    let oid = gix::ObjectId::from_bytes_or_panic(&[7; 20]);
    let names = [
        "HEAD",
        "refs/heads/main",
        "refs/heads/x",
        "refs/namespaces/z6Mk/refs/heads/main",
        "refs/tags/v1",
    ];
    let refs: Vec<_> = names
        .iter()
        .map(|n| (n.to_string(), RefTarget::Oid(oid)))
        .collect();
    index.put_repo(&record(a), &refs, &[]).unwrap();
    index.put_repo(&record(b), &refs, &[]).unwrap();
    let got = |p: &str| -> Vec<String> {
        index
            .refs_under(&a, p)
            .unwrap()
            .into_iter()
            .map(|r| r.0)
            .collect()
    };
    assert_eq!(got("refs/heads/"), ["refs/heads/main", "refs/heads/x"]);
    assert_eq!(got("refs/tags/"), ["refs/tags/v1"]);
    assert!(got("refs/remotes/").is_empty());
    assert_eq!(
        got("").len(),
        5,
        "the empty prefix is every ref of the repository"
    );
}

#[test]
fn put_replace_and_remove_are_atomic_per_repo() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(dir.path()).unwrap();
    let a = RepoId::from_oid_bytes([1; 20]);
    let b = RepoId::from_oid_bytes([2; 20]);
    let oid = gix::ObjectId::from_bytes_or_panic(&[7; 20]);
    let refs = vec![
        ("refs/heads/main".to_owned(), RefTarget::Oid(oid)),
        (
            "HEAD".to_owned(),
            RefTarget::Symbolic("refs/heads/main".into()),
        ),
    ];
    index.put_repo(&record(a), &refs, &[]).unwrap();
    index.put_repo(&record(b), &refs[..1], &[]).unwrap();
    assert_eq!(index.refs(&a).unwrap().len(), 2);
    assert_eq!(index.refs(&b).unwrap().len(), 1);
    // Replacing drops refs that disappeared.
    index.put_repo(&record(a), &refs[1..], &[]).unwrap();
    assert_eq!(index.refs(&a).unwrap(), refs[1..].to_vec());
    index.remove_repo(&a).unwrap();
    assert!(index.repo(&a).unwrap().is_none());
    assert!(index.refs(&a).unwrap().is_empty());
    assert_eq!(index.repo_count().unwrap(), 1);
}

/// Names follow every write (put, update, rename, removal) and are read back at open.
#[test]
fn names_follow_writes_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        RepoId::from_oid_bytes([1; 20]),
        RepoId::from_oid_bytes([2; 20]),
    );
    {
        let index = Index::open(dir.path()).unwrap();
        index.put_repo(&record(a), &[], &[]).unwrap();
        index.put_repo(&record(b), &[], &[]).unwrap();
        assert_eq!(index.repos_named("x"), BTreeSet::from([a, b]));
        // Written again unchanged: still once under its name, counted once.
        index.put_repo(&record(a), &[], &[]).unwrap();
        assert_eq!(index.repos_named("x"), BTreeSet::from([a, b]));
        assert_eq!(index.repo_counts().total, 2);
        let mut renamed = record(b);
        renamed.name = "y".into();
        renamed.indexed_at = 42;
        let delta = RepoDelta {
            record: &renamed,
            refs: &[],
            peels: &Default::default(),
            gone: &[],
            sigrefs: &[],
            gone_namespaces: &[],
        };
        index.update_repo(&delta).unwrap();
        assert_eq!(index.repos_named("x"), BTreeSet::from([a]));
        assert_eq!(index.repo_name(&b).as_deref(), Some("y"));
        assert_eq!(index.indexed_at(&b), Some(42));
        index.remove_repo(&a).unwrap();
        assert!(index.repos_named("x").is_empty());
        assert_eq!(index.repo_name(&a), None);
        assert_eq!(index.indexed_at(&a), None);
    }
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(index.repos_named("y"), BTreeSet::from([b]));
    assert_eq!(index.indexed_at(&b), Some(42), "read back at open");
    assert!(index.repos_named("x").is_empty());
}

/// Sizes are read back after a reopen; deleting one forgets it; not synced.
#[test]
fn repo_sizes_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        RepoId::from_oid_bytes([1; 20]),
        RepoId::from_oid_bytes([2; 20]),
    );
    {
        let index = Index::open(dir.path()).unwrap();
        index.put_repo_size(&a, 1234).unwrap();
        index.put_repo_size(&b, 5).unwrap();
        index.put_repo_size(&b, 6).unwrap();
        index.mark_dirty(&a).unwrap();
        assert!(!durable(CF_FETCH_STATE));
    }
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(
        index.repo_sizes().unwrap(),
        HashMap::from([(a, 1234), (b, 6)])
    );
    index.delete_repo_size(&a).unwrap();
    assert_eq!(index.repo_sizes().unwrap(), HashMap::from([(b, 6)]));
}

/// Counts follow every write (a repository turning private, one leaving) and are read
/// back from the records when the index is opened again.
#[test]
fn repo_counts_follow_writes_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let rids: Vec<RepoId> = (1..=5u8).map(|n| RepoId::from_oid_bytes([n; 20])).collect();
    {
        let index = Index::open(dir.path()).unwrap();
        for rid in &rids {
            index.put_repo(&record(*rid), &[], &[]).unwrap();
        }
        let mut private = record(rids[0]);
        private.visibility = Visibility::Private { allow: vec![] };
        index.put_repo(&private, &[], &[]).unwrap();
        index.put_repo(&private, &[], &[]).unwrap();
        index.remove_repo(&rids[1]).unwrap();
        index.remove_repo(&rids[1]).unwrap();
        let counts = index.repo_counts();
        assert_eq!(
            counts,
            RepoCounts {
                total: 4,
                public: 3
            }
        );
        assert_eq!(index.repos().unwrap().len(), counts.total);
    }
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(
        index.repo_counts(),
        RepoCounts {
            total: 4,
            public: 3
        }
    );
}

#[test]
fn survives_reopen_and_checks_schema() {
    let dir = tempfile::tempdir().unwrap();
    let rid = RepoId::from_oid_bytes([9; 20]);
    {
        let index = Index::open(dir.path()).unwrap();
        index.put_repo(&record(rid), &[], &[]).unwrap();
    }
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(index.repo(&rid).unwrap().unwrap().name, "x");
}

#[test]
fn only_state_that_cannot_be_rebuilt_is_synced() {
    let synced: Vec<&str> = COLUMN_FAMILIES
        .iter()
        .copied()
        .filter(|cf| durable(cf))
        .collect();
    assert_eq!(synced, ["meta", "policies", "tenants", "bans"]);
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(dir.path()).unwrap();
    let mut b = index.batch();
    b.put(CF_REPOS, b"k", b"v").unwrap();
    b.delete(CF_REFS, b"a").unwrap();
    assert!(!b.is_synced(), "rebuildable data is not synced");
    b.delete(gossip::CF_BANS, b"k").unwrap();
    assert!(b.is_synced(), "one durable CF syncs the whole batch");
}

type Write<'a> = Box<dyn Fn() -> Result<(), IndexError> + 'a>;

/// Every accessor of a durable CF syncs the WAL (RocksDB's own `rocksdb.wal.synced`
/// ticker); the accessors of rebuildable data do not.
#[test]
fn durable_accessors_sync_the_wal() {
    use crate::index::policy::{NodePolicy, RepoPolicy, Scope};
    use crate::index::tenants::Kind;
    use rocksdb::statistics::Ticker;
    use seedd_proto::gossip::Change;
    use seedd_proto::wire::MessageType;

    let dir = tempfile::tempdir().unwrap();
    let mut opts = Options::default();
    opts.enable_statistics();
    let index = Index::open_with(dir.path(), opts.clone(), Tuning::default()).unwrap();
    let syncs = || opts.get_ticker_count(Ticker::WalFileSynced);
    let rid = RepoId::from_oid_bytes([4; 20]);
    let nid = NodeId::from_bytes([5; 32]);
    let ban = gossip::BanRecord {
        ip: "192.0.2.1".parse().unwrap(),
        penalty: 64,
        banned_until: Some(1),
        reason: "x".into(),
        updated_at: 0,
    };

    let synced: Vec<(&str, Write<'_>)> = vec![
        (
            "set_repo_policy",
            Box::new(|| index.set_repo_policy(&rid, Some(RepoPolicy::Allow { scope: Scope::All }))),
        ),
        (
            "clear repo policy",
            Box::new(|| index.set_repo_policy(&rid, None)),
        ),
        (
            "set_node_policy",
            Box::new(|| index.set_node_policy(&nid, Some(NodePolicy::Block))),
        ),
        (
            "put_tenant_record",
            Box::new(|| index.put_tenant_record(Kind::Tenant, "acme", b"{}")),
        ),
        (
            "put_tenant_records",
            Box::new(|| index.put_tenant_records(Kind::Egress, &[("acme".into(), b"1".to_vec())])),
        ),
        (
            "delete_tenant_record",
            Box::new(|| index.delete_tenant_record(Kind::Identity, "shard")),
        ),
        (
            "delete_tenant_records",
            Box::new(|| index.delete_tenant_records("acme")),
        ),
        ("put_meta", Box::new(|| index.put_meta(b"k", b"v"))),
        (
            "own announcement timestamp",
            Box::new(|| {
                index.apply_gossip(&[
                    Change::Routing {
                        rid,
                        nid,
                        timestamp: 1,
                    },
                    Change::OwnTimestamp {
                        kind: MessageType::InventoryAnnouncement,
                        timestamp: 2,
                    },
                ])
            }),
        ),
        ("put_ban", Box::new(|| index.put_ban(&ban))),
        ("remove_ban", Box::new(|| index.remove_ban(&ban.ip))),
    ];
    for (name, write) in synced {
        let before = syncs();
        write().unwrap();
        assert!(syncs() > before, "{name} must sync the WAL");
    }

    let unsynced: Vec<(&str, Write<'_>)> = vec![
        (
            "put_repo",
            Box::new(|| index.put_repo(&record(rid), &[], &[])),
        ),
        ("remove_repo", Box::new(|| index.remove_repo(&rid))),
        (
            "routing",
            Box::new(|| index.apply_gossip(&[Change::RoutingRemoved { rid, nid }])),
        ),
    ];
    for (name, write) in unsynced {
        let before = syncs();
        write().unwrap();
        assert_eq!(syncs(), before, "{name} is rebuildable and not synced");
    }
}

fn listable(rid: RepoId, delegates: Vec<NodeId>) -> RepoRecord {
    RepoRecord {
        head: Some("aa".into()),
        delegates,
        ..record(rid)
    }
}

fn route(rid: RepoId, n: u8, add: bool) -> seedd_proto::gossip::Change {
    let nid = NodeId::from_bytes([n; 32]);
    if add {
        seedd_proto::gossip::Change::Routing {
            rid,
            nid,
            timestamp: 1,
        }
    } else {
        seedd_proto::gossip::Change::RoutingRemoved { rid, nid }
    }
}

fn page(index: &Index, order: ListOrder, skip: usize, take: usize) -> Vec<(RepoId, usize)> {
    index.listing_page(order, skip, take, &HashSet::new()).0
}

/// The web listing (issue 30 §1) follows each write — records, routing entries, `block`
/// policies — without a scan, and is the same after a reopen (built from the tables then).
#[test]
fn the_listing_follows_records_routes_and_policies() {
    let dir = tempfile::tempdir().unwrap();
    let rid = |n: u8| RepoId::from_oid_bytes([n; 20]);
    let alice = NodeId::from_bytes([0xa1; 32]);
    {
        let index = Index::open(dir.path()).unwrap();
        // A route learnt before the repository is held counts once it is.
        index.apply_gossip(&[route(rid(3), 1, true)]).unwrap();
        for n in 1..=4 {
            index
                .put_repo(&listable(rid(n), vec![alice]), &[], &[])
                .unwrap();
        }
        // Not listable: no head; private.
        index.put_repo(&record(rid(5)), &[], &[]).unwrap();
        let mut private = listable(rid(6), vec![]);
        private.visibility = Visibility::Private { allow: vec![] };
        index.put_repo(&private, &[], &[]).unwrap();
        let all: Vec<_> = (1..=4).map(|n| (rid(n), 1)).collect();
        assert_eq!(page(&index, ListOrder::Rid, 0, 10), all);
        // Seed counts: 2 routes for 2, 3 for 4 (one of them written twice), one removed
        // that never existed.
        index
            .apply_gossip(&[
                route(rid(2), 1, true),
                route(rid(2), 2, true),
                route(rid(4), 1, true),
                route(rid(4), 2, true),
                route(rid(4), 2, true),
                route(rid(4), 3, true),
                route(rid(1), 9, false),
            ])
            .unwrap();
        index.apply_gossip(&[route(rid(4), 3, true)]).unwrap();
        assert_eq!(
            page(&index, ListOrder::Seeding, 0, 10),
            vec![(rid(4), 3), (rid(2), 2), (rid(1), 1), (rid(3), 1)]
        );
        // A route goes; a repository is blocked; one loses its head.
        index.apply_gossip(&[route(rid(4), 1, false)]).unwrap();
        index
            .set_repo_policy(&rid(2), Some(policy::RepoPolicy::Block))
            .unwrap();
        index.put_repo(&record(rid(1)), &[], &[]).unwrap();
        assert_eq!(
            page(&index, ListOrder::Seeding, 0, 10),
            vec![(rid(4), 2), (rid(3), 1)]
        );
        // rid 1's new record names no delegate.
        assert_eq!(index.delegated_by(&alice), vec![rid(2), rid(3), rid(4)]);
        index.put_repo(&listable(rid(4), vec![]), &[], &[]).unwrap();
        assert_eq!(index.delegated_by(&alice), vec![rid(2), rid(3)]);
    }
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(
        page(&index, ListOrder::Seeding, 0, 10),
        vec![(rid(4), 2), (rid(3), 1)]
    );
    index.set_repo_policy(&rid(2), None).unwrap();
    assert_eq!(
        page(&index, ListOrder::Rid, 0, 10),
        vec![(rid(2), 2), (rid(3), 1), (rid(4), 2)]
    );
    index.remove_repo(&rid(4)).unwrap();
    assert_eq!(page(&index, ListOrder::Rid, 0, 10).len(), 2);
    assert_eq!(index.delegated_by(&alice), vec![rid(2), rid(3)]);
}

/// Pages with an excluded set (suspended tenants' repositories) are pages of what remains:
/// every position agrees with filtering the whole listing, in both orders.
#[test]
fn listing_pages_skip_the_excluded_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(dir.path()).unwrap();
    let rids: Vec<RepoId> = (0..300u16)
        .map(|n| {
            let mut b = [0u8; 20];
            b[..2].copy_from_slice(&n.to_be_bytes());
            RepoId::from_oid_bytes(b)
        })
        .collect();
    for (i, rid) in rids.iter().enumerate() {
        index.put_repo(&listable(*rid, vec![]), &[], &[]).unwrap();
        let routes: Vec<_> = (0..(i % 7) as u8).map(|n| route(*rid, n, true)).collect();
        index.apply_gossip(&routes).unwrap();
    }
    let excluded: HashSet<RepoId> = rids.iter().step_by(11).copied().collect();
    for order in [ListOrder::Rid, ListOrder::Seeding] {
        let (whole, total) = index.listing_page(order, 0, 1000, &HashSet::new());
        assert_eq!(total, 300);
        let kept: Vec<_> = whole
            .into_iter()
            .filter(|(r, _)| !excluded.contains(r))
            .collect();
        for skip in [0, 1, 10, 27, 100, 250, 272, 273, 400] {
            let (got, total) = index.listing_page(order, skip, 10, &excluded);
            assert_eq!(total, kept.len());
            let want: Vec<_> = kept.iter().skip(skip).take(10).copied().collect();
            assert_eq!(got, want, "{order:?} skip {skip}");
        }
    }
}

/// The census's change count moves with every write that can change the listing (a record, a
/// route, a policy, a removal) and not with reads: what the web API's fleet cache compares.
#[test]
fn the_listing_change_count_moves_with_writes_only() {
    let dir = tempfile::tempdir().unwrap();
    let rid = |n: u8| RepoId::from_oid_bytes([n; 20]);
    let index = Index::open(dir.path()).unwrap();
    let mut last = index.listing_changes();
    let mut moved = |index: &Index, what: &str| {
        let now = index.listing_changes();
        assert_ne!(now, last, "{what}");
        last = now;
    };
    index.put_repo(&listable(rid(1), vec![]), &[], &[]).unwrap();
    moved(&index, "a record");
    index.apply_gossip(&[route(rid(1), 1, true)]).unwrap();
    moved(&index, "a route");
    index
        .set_repo_policy(&rid(1), Some(policy::RepoPolicy::Block))
        .unwrap();
    moved(&index, "a policy");
    index.remove_repo(&rid(1)).unwrap();
    moved(&index, "a removal");
    let (listing, at) = index.listing_at();
    assert!(listing.is_empty());
    let _ = (index.listing(), page(&index, ListOrder::Rid, 0, 10));
    assert_eq!(index.listing_changes(), at, "reads change nothing");
}
