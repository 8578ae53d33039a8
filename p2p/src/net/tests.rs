use super::*;

#[test]
fn net_config_from_config() {
    let mut cfg = Config::default();
    cfg.p2p.listen = vec!["127.0.0.1:0".parse().unwrap()];
    cfg.p2p.connect = vec![
        "z6MkiCRcNkMLR1HFy2j6ih12FuEtDbWTLJJKzMRpoUj4yjgf@127.0.0.1:9"
            .parse()
            .unwrap(),
    ];
    let n = NetConfig::from_config(&cfg).unwrap();
    assert_eq!(n.connect.len(), 1);
    assert!(!n.gossip.relay, "auto without external addresses: no relay");
    assert!(!n.gossip.seed_all, "default policy block");
    cfg.p2p.bootstrap = true;
    cfg.p2p.external_addresses = vec!["seed.example.org:8776".into()];
    cfg.policy.default = seedd_core::config::DefaultPolicy::Allow;
    let n = NetConfig::from_config(&cfg).unwrap();
    assert_eq!(n.connect.len(), 3);
    assert!(n
        .connect
        .iter()
        .any(|(_, a)| a == "iris.radicle.network:8776"));
    assert!(n.gossip.relay, "auto with external addresses relays");
    assert!(n.gossip.seed_all);
    assert_eq!(n.gossip.external_addresses.len(), 1);
    cfg.p2p.relay = seedd_core::config::Relay::Never;
    assert!(!NetConfig::from_config(&cfg).unwrap().gossip.relay);
}

#[test]
fn visibility_map_lets_delegates_and_the_allow_list_see_private_repos() {
    let nid = |n: u64| Keypair::mock(n).nid();
    let record = |b: u8, visibility| seedd_core::index::RepoRecord {
        rid: RepoId::from_oid_bytes([b; 20]),
        name: "x".into(),
        description: String::new(),
        default_branch: "main".into(),
        delegates: vec![nid(1)],
        threshold: 1,
        visibility,
        identity_head: "00".into(),
        head: None,
        fingerprint: "f".into(),
        ref_count: 1,
        namespaces: vec![],
        indexed_at: 0,
    };
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(dir.path()).unwrap();
    for r in [
        record(1, seedd_core::storage::Visibility::Public),
        record(
            2,
            seedd_core::storage::Visibility::Private {
                allow: vec![nid(2)],
            },
        ),
    ] {
        index.put_repo(&r, &[], &[]).unwrap();
    }
    let map = visibility_map(&index).unwrap();
    assert_eq!(map.len(), 2);
    let public = map.get(&RepoId::from_oid_bytes([1; 20])).unwrap();
    assert_eq!(*public, gossip::Visibility::Public);
    let private = map.get(&RepoId::from_oid_bytes([2; 20])).unwrap();
    assert!(private.is_visible_to(&nid(1)), "delegate");
    assert!(private.is_visible_to(&nid(2)), "allow list");
    assert!(!private.is_visible_to(&nid(3)));
    // From the census: it follows each write and is rebuilt at open from the records.
    index
        .put_repo(
            &record(2, seedd_core::storage::Visibility::Public),
            &[],
            &[],
        )
        .unwrap();
    let map = visibility_map(&index).unwrap();
    assert_eq!(
        map.get(&RepoId::from_oid_bytes([2; 20])).unwrap().clone(),
        gossip::Visibility::Public
    );
    index
        .put_repo(
            &record(
                3,
                seedd_core::storage::Visibility::Private {
                    allow: vec![nid(4)],
                },
            ),
            &[],
            &[],
        )
        .unwrap();
    drop(index);
    let index = Index::open(dir.path()).unwrap();
    let map = visibility_map(&index).unwrap();
    assert_eq!(map.len(), 3);
    let private = map.get(&RepoId::from_oid_bytes([3; 20])).unwrap();
    assert!(private.is_visible_to(&nid(4)) && private.is_visible_to(&nid(1)));
    assert!(!private.is_visible_to(&nid(2)));
}

#[test]
fn peer_addresses_parse() {
    assert!(parse_peer("z6MkiCRcNkMLR1HFy2j6ih12FuEtDbWTLJJKzMRpoUj4yjgf@[::1]:8776").is_ok());
    for bad in [
        "z6MkiCRcNkMLR1HFy2j6ih12FuEtDbWTLJJKzMRpoUj4yjgf",
        "z6MkiCRcNkMLR1HFy2j6ih12FuEtDbWTLJJKzMRpoUj4yjgf@host",
        "z6MkiCRcNkMLR1HFy2j6ih12FuEtDbWTLJJKzMRpoUj4yjgf@:80",
        "nope@127.0.0.1:80",
    ] {
        assert!(parse_peer(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_key_cache_keeps_verifying_keys_up_to_its_cap() {
    let mut keys = super::KeyCache::default();
    let key = |n: u64| {
        seedd_proto::crypto::Keypair::mock(n)
            .nid()
            .verifying_key()
            .expect("a valid key")
    };
    let first = key(1);
    assert!(keys.get(&first.node()).is_none());
    keys.keep(first.clone());
    assert_eq!(
        keys.get(&first.node()).map(|k| k.node()),
        Some(first.node())
    );
    // Filling it past the cap empties it once: never more than the cap.
    let one = key(2);
    for _ in 0..super::KeyCache::CAP {
        keys.keep(one.clone());
    }
    assert!(keys.0.len() <= super::KeyCache::CAP);
    for i in 0..super::KeyCache::CAP as u32 {
        let mut b = [0u8; 32];
        b[..4].copy_from_slice(&i.to_be_bytes());
        // Not every 32 bytes are a point; those that are stand for other authors.
        if let Ok(k) = seedd_proto::crypto::NodeId::from_bytes(b).verifying_key() {
            keys.keep(k);
        }
        assert!(keys.0.len() <= super::KeyCache::CAP);
    }
}
