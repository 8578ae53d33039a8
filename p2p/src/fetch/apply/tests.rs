use super::*;
use std::time::{Duration, Instant};

fn cfg(dir: &Path) -> FetchConfig {
    FetchConfig::for_tests(dir.to_owned(), dir.join("fetch"))
}

fn offering(head: gix::ObjectId) -> BTreeMap<String, String> {
    BTreeMap::from([(format!("{QUARANTINE}/rad/id"), head.to_string())])
}

/// Issue 25 §2 at the fetch: an offered identity history of 1,000 changes naming one signed
/// tree of 256 × 64 KiB actions is refused at once (within the fetch's identity budget),
/// then remembered by tips for the next fetch; a cancelled verification stops and is not
/// remembered; within one fetch the identity is resolved once.
#[test]
fn identity_histories_are_verified_once_per_fetch_within_a_budget() {
    let (tmp, rid, good, forged) = seedd_core::storage::cob::tests::identity_reusing_one_tree();
    let home = tempfile::tempdir().unwrap();
    let cfg = cfg(home.path());
    let live = tempfile::tempdir().unwrap(); // no refs/rad/id: a clone
    let status = std::process::Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(live.path())
        .status()
        .unwrap();
    assert!(status.success());
    let git = gix::open(tmp.path()).unwrap();
    let q = tmp.path();
    let resolve = |head, memo: &IdentityMemo, cancel: &Cancel| {
        resolve_identity(
            &cfg,
            &git,
            rid,
            q,
            live.path(),
            &offering(head),
            memo,
            cancel,
        )
    };

    let started = Instant::now();
    let err = resolve(forged, &IdentityMemo::default(), &Cancel::new()).unwrap_err();
    assert!(
        matches!(
            &err,
            FetchError::Invalid(ValidationError::IdentityHistory(
                cob::CobError::OverBudget { .. }
            ))
        ),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let err = resolve(forged, &IdentityMemo::default(), &Cancel::new()).unwrap_err();
    assert!(
        matches!(&err, FetchError::Invalid(ValidationError::Refused(_))),
        "{err}"
    );

    // Cancelled: stops, and is not remembered.
    let cancelled = Cancel::new();
    cancelled.cancel();
    let err = resolve(good, &IdentityMemo::default(), &cancelled).unwrap_err();
    assert!(
        matches!(
            &err,
            FetchError::Invalid(ValidationError::IdentityHistory(cob::CobError::Cancelled))
        ),
        "{err}"
    );
    let memo = IdentityMemo::default();
    let first = resolve(good, &memo, &Cancel::new()).unwrap();
    assert!(first.adopt);
    // The fetch's later steps get the same answer without verifying again (a cancelled
    // flag would stop a verification).
    let again = resolve(good, &memo, &cancelled).unwrap();
    assert_eq!(again.ident.head, first.ident.head);
}

/// Issue 25 §5 at the fetch: our `refs/rad/id` is R2 (alice alone, after bob and carol were
/// rotated out); a peer offers a back-dated fork of R1 accepted by bob and carol. Ours
/// stands. A successor of R2 by alice is adopted.
#[test]
fn a_back_dated_fork_by_retired_delegates_does_not_move_our_identity() {
    let f = seedd_core::storage::cob::tests::retired_fork();
    let home = tempfile::tempdir().unwrap();
    let cfg = cfg(home.path());
    let dir = f.tmp.path();
    let status = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .args(["update-ref", "refs/rad/id", &f.ours.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let git = gix::open(dir).unwrap();
    let resolve = |head| {
        resolve_identity(
            &cfg,
            &git,
            f.rid,
            dir,
            dir,
            &offering(head),
            &IdentityMemo::default(),
            &Cancel::new(),
        )
    };
    let r = resolve(f.fork_head).unwrap();
    assert!(!r.adopt);
    assert_eq!(r.ident.head, f.ours);
    let r = resolve(f.successor).unwrap();
    assert!(r.adopt);
    assert_eq!(r.ident.head, f.successor);
}

/// History c1 ← c2 ← c3 (c1 oldest); `x` diverges from c1.
fn anc(a: &str, b: &str) -> bool {
    let order = ["c1", "c2", "c3"];
    let pos = |s: &str| order.iter().position(|o| *o == s);
    match (a, b) {
        ("c1", "x") => true,
        (a, b) => matches!((pos(a), pos(b)), (Some(i), Some(j)) if i < j),
    }
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn crefs_rules_parse_match_and_order_by_specificity() {
    let a = NodeId::from_bytes([1; 32]);
    let b = NodeId::from_bytes([2; 32]);
    let payload = serde_json::json!({
        "xyz.radicle.crefs": { "rules": {
            "refs/tags/*": { "allow": "delegates", "threshold": 2 },
            "refs/tags/v1.0": { "allow": [b.to_did()], "threshold": 1 },
            "refs/rad/id": { "allow": "delegates", "threshold": 1 },
            "refs/heads/release/*/stable": { "threshold": 1 },
            "refs/heads/x": { "allow": "delegates", "threshold": 3 }
        }}
    });
    let rules = cref_rules(payload.as_object().unwrap(), &[a, b]);
    let patterns: Vec<&str> = rules.iter().map(|r| r.pattern.as_str()).collect();
    // Exact first; protected and unsatisfiable (threshold > voters) rules dropped.
    assert_eq!(
        patterns,
        [
            "refs/tags/v1.0",
            "refs/heads/release/*/stable",
            "refs/tags/*"
        ]
    );
    assert_eq!(rules[0].voters, vec![b]);
    assert!(pattern_matches("refs/tags/*", "refs/tags/v2/rc1"));
    assert!(pattern_matches(
        "refs/heads/release/*/stable",
        "refs/heads/release/1.2/stable"
    ));
    assert!(!pattern_matches(
        "refs/heads/release/*/stable",
        "refs/heads/release/1.2"
    ));
    assert!(!pattern_matches("refs/tags/v1.0", "refs/tags/v1.01"));
}

#[test]
fn transactions_are_guarded_by_the_values_validation_saw() {
    let before: BTreeMap<String, String> = [("refs/a".to_owned(), "1".repeat(40))].into();
    let lines = vec![
        format!("update refs/a {}", "2".repeat(40)),
        format!("update refs/b {}", "3".repeat(40)),
        "delete refs/a".to_owned(),
    ];
    assert_eq!(
        guarded(&lines, &before),
        vec![
            format!("update refs/a {} {}", "2".repeat(40), "1".repeat(40)),
            format!("update refs/b {} {}", "3".repeat(40), "0".repeat(40)),
            format!("delete refs/a {}", "1".repeat(40)),
        ]
    );
}

#[test]
fn canonical_branch_moves_only_when_threshold_delegates_agree() {
    // Two delegates, threshold 2: alice ahead, bob behind → bob's tip (both contain it).
    assert_eq!(quorum(&s(&["c2", "c1"]), 2, anc).as_deref(), Some("c1"));
    // Bob catches up → it moves.
    assert_eq!(quorum(&s(&["c2", "c2"]), 2, anc).as_deref(), Some("c2"));
    // Threshold 1: the newest tip wins.
    assert_eq!(quorum(&s(&["c3", "c1"]), 1, anc).as_deref(), Some("c3"));
    // Diverged delegates with threshold 2: only their common base qualifies if present.
    assert_eq!(quorum(&s(&["c2", "x"]), 2, anc), None);
    assert_eq!(
        quorum(&s(&["c1", "c2", "x"]), 3, anc).as_deref(),
        Some("c1")
    );
    // Not enough delegates with a tip.
    assert_eq!(quorum(&s(&["c2"]), 2, anc), None);
}
