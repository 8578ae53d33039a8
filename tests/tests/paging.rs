//! Issue 14, at scale: the admin listings are paged (`limit`, `after`, `next`, `total`) and
//! `seedctl` follows the pages; an identity holding more repositories than its inventory cap
//! announces the most wanted ones and says how many it leaves out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use seedd_tests::*;
use serde_json::Value;

/// `n` small public repositories in `storage` (made with git, one commit each).
fn many_repos(storage: &Path, n: usize) -> Vec<String> {
    std::fs::create_dir_all(storage).unwrap();
    (0..n)
        .map(|i| {
            let (rid, _) = synthetic_repo(storage, &format!("paged-{i:02}"), |work, g| {
                std::fs::write(work.join("README"), format!("repository {i}\n")).unwrap();
                g(&["add", "README"]);
                g(&["commit", "-q", "-m", "first"]);
            });
            rid
        })
        .collect()
}

/// A seed whose storage holds `n` repositories, every one seeded (policy allow).
fn seed_with(n: usize, p2p_config: &str) -> (Seed, Vec<String>, tempfile::TempDir) {
    let keep = tempfile::tempdir().unwrap();
    let data = keep.path().join("data");
    let rids = many_repos(&data.join("storage"), n);
    let seed = Seed::start(SeedOptions {
        data_dir: Some(data),
        p2p_config: p2p_config.into(),
        ..SeedOptions::allowing()
    });
    (seed, rids, keep)
}

/// Follows `next` from the first page of `path` (which has a query already), `limit` rows a
/// page; returns the pages' row arrays under `key` and each page's `total`.
fn walk(seed: &Seed, path: &str, key: &str, limit: usize) -> (Vec<Vec<Value>>, BTreeSet<u64>) {
    let mut pages = Vec::new();
    let mut totals = BTreeSet::new();
    let mut after: Option<String> = None;
    loop {
        let mut url = format!("{path}&limit={limit}");
        if let Some(a) = &after {
            url.push_str(&format!(
                "&after={}",
                a.replace(':', "%3A").replace('/', "%2F")
            ));
        }
        let page = seed.api(&url);
        pages.push(page[key].as_array().unwrap().clone());
        totals.insert(page["total"].as_u64().unwrap());
        match page["next"].as_str() {
            Some(n) => after = Some(n.to_owned()),
            None => {
                assert!(page["next"].is_null(), "{page}");
                return (pages, totals);
            }
        }
        assert!(pages.len() < 100, "paging does not end");
    }
}

#[test]
fn repos_and_routing_are_paged_and_seedctl_follows_the_pages() {
    let (seed, rids, _keep) = seed_with(25, "");
    // RID order is the order of their bytes (not of their base58 text).
    let everything: Vec<String> = seed.api("/api/v1/repos")["repos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rid"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        everything.iter().collect::<BTreeSet<_>>(),
        rids.iter().collect::<BTreeSet<_>>()
    );
    let rids = everything;

    // 25 repositories by 10: 10, 10, 5, in RID order, each once; total on every page.
    let (pages, totals) = walk(&seed, "/api/v1/repos?", "repos", 10);
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![10, 10, 5]);
    assert_eq!(totals, BTreeSet::from([25]));
    let listed: Vec<String> = pages
        .iter()
        .flatten()
        .map(|r| r["rid"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, rids);

    // Without `limit`: the default page holds them all. A bad limit or cursor is a 400.
    let all = seed.api("/api/v1/repos");
    assert_eq!(all["repos"].as_array().unwrap().len(), 25);
    assert!(all["next"].is_null());
    let token = seed.token();
    let auth = format!("Bearer {token}");
    for bad in [
        "/api/v1/repos?limit=0",
        "/api/v1/repos?after=nonsense",
        "/api/v1/routing?after=x",
    ] {
        let (status, body) = http_get(&seed.admin_url(bad), &[("Authorization", &auth)]).unwrap();
        assert_eq!(status, 400, "{bad}: {body}");
    }
    // Over the maximum is lowered to it, not refused.
    assert_eq!(
        seed.api("/api/v1/repos?limit=1000000")["repos"]
            .as_array()
            .unwrap()
            .len(),
        25
    );

    // The routing table holds our own inventory: 25 entries, paged the same way.
    let nid = seed.nid();
    wait_for(
        "our inventory in the routing table",
        Duration::from_secs(30),
        || (seed.api("/api/v1/routing")["total"].as_u64() == Some(25)).then_some(()),
    );
    let (pages, totals) = walk(&seed, "/api/v1/routing?", "routes", 10);
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![10, 10, 5]
    );
    assert_eq!(totals, BTreeSet::from([25]));
    let routed: Vec<String> = pages
        .iter()
        .flatten()
        .map(|r| {
            assert_eq!(r["nid"], nid.as_str());
            r["rid"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(routed, rids);
    // One node's entries, and one repository's.
    let (pages, totals) = walk(&seed, &format!("/api/v1/routing?nid={nid}"), "routes", 7);
    assert_eq!(pages.iter().map(Vec::len).sum::<usize>(), 25);
    assert_eq!(totals, BTreeSet::from([25]));
    let one = seed.api(&format!("/api/v1/routing?rid={}", rids[3]));
    assert_eq!(one["total"], 1);
    assert_eq!(one["routes"][0]["rid"], rids[3].as_str());

    // seedctl: every page by default (one answer, `next` null), or one page on request.
    let out = seed.seedctl(&["-o", "json", "repo", "ls"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["repos"].as_array().unwrap().len(), 25);
    assert!(json["next"].is_null());
    assert_eq!(json["total"], 25);
    let out = seed.seedctl(&["-o", "json", "repo", "ls", "--limit", "10"]);
    let first: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(first["repos"].as_array().unwrap().len(), 10);
    let next = first["next"].as_str().unwrap().to_owned();
    assert_eq!(next, rids[9]);
    let out = seed.seedctl(&[
        "-o", "json", "repo", "ls", "--limit", "10", "--after", &next,
    ]);
    let second: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(second["repos"][0]["rid"], rids[10].as_str());
    let text = stdout(&seed.seedctl(&["repo", "ls", "--limit", "10"]));
    assert!(
        text.contains(&format!("(10 of 25 shown; more with --after {next})")),
        "{text}"
    );
    let text = stdout(&seed.seedctl(&["repo", "ls"]));
    assert_eq!(text.lines().count(), 26, "{text}");
    let out = seed.seedctl(&["-o", "json", "routing", "ls", "--limit", "4"]);
    let page: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(page["routes"].as_array().unwrap().len(), 4);
    assert!(page["next"].is_string());
    let out = seed.seedctl(&["-o", "json", "routing", "ls"]);
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(all["routes"].as_array().unwrap().len(), 25);
    seed.stop();
}

/// RIDs our own node announces: its entries in the routing table.
fn announced(seed: &Seed) -> BTreeSet<String> {
    let nid = seed.nid();
    seed.api(&format!("/api/v1/routing?nid={nid}&limit=10000"))["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rid"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_identity_over_its_cap_announces_the_most_wanted() {
    let (seed, rids, _keep) = seed_with(25, "inventory_cap = 20\n");
    let unannounced = || {
        seed.metric(
            "seedd_identity_inventory_unannounced_repos",
            &["identity=\"default\""],
        )
    };
    wait_for("the capped inventory", Duration::from_secs(30), || {
        (unannounced() == 5.0).then_some(())
    });
    assert_eq!(
        seed.metric("seedd_identity_inventory_repos", &["identity=\"default\""]),
        20.0
    );
    let logs = seed.logs();
    assert!(
        logs.contains("more repositories than its inventory cap")
            && logs.contains("p2p.inventory_cap"),
        "{logs}"
    );
    let before = announced(&seed);
    assert_eq!(before.len(), 20);
    // Stable: a refresh with nothing new announces the same.
    seed.rescan();
    assert_eq!(announced(&seed), before);

    // Clone two of the left-out repositories over HTTP: they are wanted now, and the next
    // refresh announces them (in place of two that nobody asked for).
    let left_out: Vec<&String> = rids.iter().filter(|r| !before.contains(*r)).collect();
    assert_eq!(left_out.len(), 5);
    let home = tempfile::tempdir().unwrap();
    for (i, rid) in left_out.iter().take(2).enumerate() {
        let url = seed.url(&format!("{}.git", rid.trim_start_matches("rad:")));
        run(git(home.path())
            .args(["clone", "-q", &url])
            .arg(home.path().join(format!("c{i}"))));
    }
    seed.rescan();
    let after = announced(&seed);
    assert_eq!(after.len(), 20);
    assert!(after.contains(left_out[0].as_str()) && after.contains(left_out[1].as_str()));
    assert_eq!(
        after.difference(&before).count(),
        2,
        "only the wanted ones came in"
    );
    assert_eq!(unannounced(), 5.0);
    seed.stop();
}

#[test]
fn policies_and_maintenance_are_paged_and_seedctl_follows_the_pages() {
    let (seed, rids, _keep) = seed_with(12, "");
    // Explicit policies: 12 repositories seeded, 3 nodes blocked.
    for rid in &rids {
        let out = seed.seedctl(&["repo", "seed", rid]);
        assert!(out.status.success(), "{}", stdout(&out));
    }
    let nodes: Vec<String> = (1..=3u8)
        .map(|b| {
            let mut key = vec![0xed, 0x01];
            key.extend([b; 32]);
            format!("z{}", seedd_tests::bs58_encode(&key))
        })
        .collect();
    for nid in &nodes {
        let out = seed.seedctl(&["node", "block", nid]);
        assert!(out.status.success(), "{}", stdout(&out));
    }
    // Pages of 4 policies of both kinds: node policies first, each entry once.
    let mut after: Option<String> = None;
    let (mut seen_repos, mut seen_nodes, mut pages) = (Vec::new(), Vec::new(), 0);
    loop {
        let mut url = "/api/v1/policies?limit=4".to_owned();
        if let Some(a) = &after {
            url.push_str(&format!(
                "&after={}",
                a.replace(':', "%3A").replace('/', "%2F")
            ));
        }
        let page = seed.api(&url);
        let (r, n) = (
            page["repos"].as_array().unwrap(),
            page["nodes"].as_array().unwrap(),
        );
        assert!(r.len() + n.len() <= 4, "{page}");
        assert!(
            n.is_empty() || seen_repos.is_empty(),
            "node policies come first: {page}"
        );
        seen_repos.extend(r.iter().map(|e| e["rid"].as_str().unwrap().to_owned()));
        seen_nodes.extend(n.iter().map(|e| e["nid"].as_str().unwrap().to_owned()));
        pages += 1;
        match page["next"].as_str() {
            Some(c) => after = Some(c.to_owned()),
            None => break,
        }
        assert!(pages < 20, "paging does not end");
    }
    assert_eq!(pages, 4, "15 policies, 4 a page");
    let mut want_repos = rids.clone();
    want_repos.sort();
    seen_repos.sort();
    assert_eq!(seen_repos, want_repos);
    let mut want_nodes = nodes.clone();
    want_nodes.sort();
    seen_nodes.sort();
    assert_eq!(seen_nodes, want_nodes);
    let (status, body) = seedd_tests::http_get(
        &seed.admin_url("/api/v1/policies?after=nope"),
        &[("Authorization", &format!("Bearer {}", seed.token()))],
    )
    .unwrap();
    assert_eq!(status, 400, "a bad cursor is a clear 400: {body}");
    assert!(body.contains("node/<nid>"), "{body}");
    let out = seed.seedctl(&["-o", "json", "policy", "ls"]);
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(all["repos"].as_array().unwrap().len(), 12);
    assert_eq!(all["nodes"].as_array().unwrap().len(), 3);
    assert!(all["next"].is_null());
    let out = seed.seedctl(&["-o", "json", "policy", "ls", "--limit", "2"]);
    let one: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(one["nodes"].as_array().unwrap().len(), 2);
    assert!(one["next"].is_string());

    // Maintenance: every held repository once, highest debt first across pages.
    let (pages, totals) = walk(&seed, "/api/v1/maintenance?", "repos", 5);
    assert_eq!(pages.len(), 3);
    assert_eq!(totals, BTreeSet::from([12]));
    let all: Vec<&Value> = pages.iter().flatten().collect();
    let mut listed: Vec<String> = all
        .iter()
        .map(|e| e["rid"].as_str().unwrap().to_owned())
        .collect();
    let scores: Vec<u64> = all
        .iter()
        .map(|e| e["debt"]["score"].as_u64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    listed.sort();
    assert_eq!(listed, want_repos);
    let out = seed.seedctl(&["-o", "json", "maintenance", "ls"]);
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(all["repos"].as_array().unwrap().len(), 12);
    assert_eq!(all["total"], 12);
    seed.stop();
}
