//! The radicle-httpd JSON API (issue 15, phase A) against seedd as a process with fixtures
//! made by the real `rad`: every endpoint's JSON checked field by field against what the
//! explorer's zod schemas require (shared/docs/http-api.md §5), tenancy, privacy, CORS, raw
//! bytes, and `git clone` on the same listener. Long by nature: one seed serves many checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use seedd_tests::{fixtures, git, run, stdout, Seed, SeedOptions};
use seedd_web_api as web;
use serde_json::{json, Value};

struct Reply {
    status: u16,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {} {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

fn request(seed: &Seed, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let mut req = ureq::http::Request::builder()
        .method(method)
        .uri(seed.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = agent.run(req.body(Vec::new()).unwrap()).unwrap();
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let body = resp
        .into_body()
        .with_config()
        .limit(256 << 20)
        .read_to_vec()
        .unwrap();
    Reply {
        status,
        headers,
        body,
    }
}

fn get(seed: &Seed, path: &str) -> Reply {
    request(seed, "GET", path, &[])
}

/// GET that must answer 200 with JSON.
/// `v` as the shared body type `T` (every field known, none missing): the contract both sides
/// compile against.
fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone())
        .unwrap_or_else(|e| panic!("not a {} ({e}): {v}", std::any::type_name::<T>()))
}

fn ok(seed: &Seed, path: &str) -> Value {
    let r = get(seed, path);
    assert_eq!(
        r.status,
        200,
        "{path}: {}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(r.header("content-type"), Some("application/json"), "{path}");
    r.json()
}

fn is_oid(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// zod `commitHeaderSchema`.
fn assert_commit_header(c: &Value) {
    assert!(is_oid(&c["id"]), "{c}");
    assert!(
        c["author"]["name"].is_string() && c["author"]["email"].is_string(),
        "{c}"
    );
    assert!(
        c["summary"].is_string() && c["description"].is_string(),
        "{c}"
    );
    assert!(c["parents"].as_array().unwrap().iter().all(is_oid), "{c}");
    assert!(c["committer"]["name"].is_string(), "{c}");
    assert!(c["committer"]["email"].is_string(), "{c}");
    assert!(c["committer"]["time"].is_i64(), "{c}");
    let _: web::CommitHeader = typed(c);
}

/// zod `repoSchema` (with the project payload).
fn assert_repo_info(r: &Value, fixture: &Value) {
    assert_eq!(r["rid"], fixture["rid"], "{r}");
    let p = &r["payloads"]["xyz.radicle.project"];
    assert_eq!(p["data"]["name"], fixture["name"], "{r}");
    assert!(p["data"]["description"].is_string(), "{r}");
    assert_eq!(p["data"]["defaultBranch"], fixture["default_branch"], "{r}");
    assert_eq!(p["meta"]["head"], fixture["head"], "{r}");
    for k in ["open", "closed"] {
        assert!(p["meta"]["issues"][k].is_u64(), "{r}");
    }
    for k in ["open", "draft", "archived", "merged"] {
        assert!(p["meta"]["patches"][k].is_u64(), "{r}");
    }
    let delegates: Vec<Value> = fixture["delegates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| json!({ "id": d }))
        .collect();
    assert_eq!(
        r["delegates"],
        json!(delegates),
        "alias omitted, never null: {r}"
    );
    assert_eq!(r["threshold"], fixture["threshold"], "{r}");
    assert_eq!(r["visibility"], json!({ "type": "public" }), "{r}");
    assert!(r["seeding"].as_u64().unwrap() >= 1, "{r}");
    let info: web::RepoInfo = typed(r);
    assert_eq!(info.visibility, web::Visibility::Public);
}

fn git_out(dir: &PathBuf, args: &[&str]) -> Vec<u8> {
    let out = run(Command::new("git").arg("-C").arg(dir).args(args));
    out.stdout
}

#[test]
fn explorer_endpoints_answer_in_the_httpd_shapes_and_private_repositories_stay_hidden() {
    let f = fixtures();
    // Pinned: small first, then heartwood; the private one is named but never shown.
    let pinned = [
        f.rid("small-fixture"),
        f.rid("secret-fixture"),
        f.rid("heartwood-fixture"),
    ];
    let seed = Seed::start(SeedOptions {
        repos: vec![
            "heartwood-fixture".into(),
            "small-fixture".into(),
            "secret-fixture".into(),
        ],
        extra_config: format!(
            "[web]\ndescription = \"A seed for tests\"\navatar_url = \"https://seed.example.test/a.png\"\npinned = {pinned:?}\n"
        ),
        p2p_config: "external_addresses = [\"seed.example.test:8776\"]\n".into(),
        ..SeedOptions::default()
    });
    let hw = f.repo("heartwood-fixture");
    let rid = f.rid("heartwood-fixture");
    let bare = rid.trim_start_matches("rad:").to_owned();
    let secret = f.rid("secret-fixture");
    let head = hw["head"].as_str().unwrap().to_owned();
    let storage = f.storage().join(&bare);

    // #3 `/api/v1`, `/api`.
    let v1 = ok(&seed, "/api/v1");
    assert_eq!(v1["apiVersion"], "6.1.0");
    assert_eq!(v1["nid"], seed.nid());
    assert_eq!(v1["path"], "/api/v1");
    assert_eq!(v1["message"], "Welcome!");
    assert!(v1["service"].is_string() && v1["version"].is_string());
    assert!(v1["links"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["type"] == "GET" && l["href"].is_string() && l["rel"].is_string()));
    assert_eq!(ok(&seed, "/api")["path"], "/api");
    let v1: web::V1Root = typed(&v1);
    assert_eq!(v1.api_version, "6.1.0");
    let root: web::ApiRoot = typed(&ok(&seed, "/api"));
    assert_eq!(root.links, vec![web::Link::get("/v1", "v1")]);

    // #1, #4: node info names the serving identity; 10-minute cache; CORS for any origin.
    let r = request(
        &seed,
        "GET",
        "/api/v1/node",
        &[("Origin", "https://app.radicle.xyz")],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        r.header("cache-control"),
        Some("public, max-age=600, must-revalidate")
    );
    let node = r.json();
    assert_eq!(node["id"], seed.nid());
    assert!(node["agent"].as_str().unwrap().starts_with("/seedd:"));
    // Issue 27 §3: the config object the explorer's node page reads (its schema is
    // `nodeConfigSchema`): the live default policy, external addresses, alias; and `[web]`.
    let config = &node["config"];
    assert_eq!(config["alias"], "test-seed");
    assert_eq!(config["seedingPolicy"], json!({ "default": "block" }));
    assert_eq!(
        config["externalAddresses"],
        json!(["seed.example.test:8776"])
    );
    assert_eq!(config["listen"].as_array().unwrap().len(), 1, "{config}");
    assert_eq!(config["peers"], json!({ "type": "dynamic" }));
    assert_eq!(config["network"], "main");
    assert_eq!(config["relay"], "auto");
    assert_eq!(config["log"], "INFO");
    for key in [
        "routingMaxSize",
        "routingMaxAge",
        "fetchConcurrency",
        "gossipMaxAge",
    ] {
        assert!(
            config["limits"][key].as_u64().unwrap() > 0,
            "{key}: {config}"
        );
    }
    assert!(config["limits"]["rate"]["inbound"]["fillRate"].is_number());
    assert!(config["limits"]["connection"]["inbound"].as_u64().unwrap() > 0);
    assert_eq!(node["description"], "A seed for tests");
    assert_eq!(node["avatarUrl"], "https://seed.example.test/a.png");
    assert!(node.get("bannerUrl").is_none(), "unset keys are left out");
    assert_eq!(node["state"], "running");
    let info = ok(&seed, "/api/v1/info");
    assert_eq!(info["node"], node);
    assert_eq!(
        info["httpd"]["searchAvailable"], true,
        "search is served from the index"
    );
    let typed_node: web::Node = typed(&node);
    let typed_info: web::Info = typed(&info);
    assert_eq!(typed_info.node, typed_node);

    // #2: the private repository is not counted.
    assert_eq!(
        ok(&seed, "/api/v1/stats"),
        json!({ "repos": { "total": 2 } })
    );
    let stats: web::Stats = typed(&ok(&seed, "/api/v1/stats"));
    assert_eq!(stats.repos.total, 2);

    // #5: listing; pinned (the default) is `[web] pinned` in its order, as far as it is
    // listed (the private one is left out).
    let pins: Vec<web::RepoInfo> = typed(&ok(&seed, "/api/v1/repos"));
    let pins: Vec<&str> = pins.iter().map(|r| r.rid.as_str()).collect();
    assert_eq!(pins, vec![pinned[0].as_str(), pinned[2].as_str()]);
    assert_eq!(
        ok(&seed, "/api/v1/repos?show=pinned&sort=seeding"),
        ok(&seed, "/api/v1/repos")
    );
    let all = ok(&seed, "/api/v1/repos?show=all&perPage=1000&deployment_id=x");
    let rids: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rid"].as_str().unwrap())
        .collect();
    let small = f.rid("small-fixture");
    let mut expected = vec![rid.as_str(), small.as_str()];
    expected.sort();
    assert_eq!(rids, expected, "RID order, private one absent");
    let listed = all
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rid"] == rid.as_str())
        .unwrap();
    assert_repo_info(listed, hw);
    let page0 = ok(&seed, "/api/v1/repos?show=all&perPage=1&page=0");
    let page1 = ok(&seed, "/api/v1/repos?show=all&perPage=1&page=1");
    assert_eq!(page0.as_array().unwrap().len(), 1);
    assert_eq!(page1.as_array().unwrap().len(), 1);
    assert_ne!(page0[0]["rid"], page1[0]["rid"]);
    assert_eq!(
        ok(&seed, "/api/v1/repos?show=all&perPage=1&page=2"),
        json!([])
    );
    // Search: substring of the name, prefix matches first; the private one never.
    let found = ok(&seed, "/api/v1/repos/search?q=heartwood");
    let _: Vec<web::SearchResult> = typed(&found);
    assert_eq!(found.as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found[0]["rid"], rid.as_str());
    assert_eq!(
        found[0]["payloads"]["xyz.radicle.project"]["name"],
        "heartwood-fixture"
    );
    assert!(found[0]["seeds"].as_u64().unwrap() >= 1);
    assert_eq!(found[0]["delegates"][0]["id"], hw["delegates"][0]);
    let found = ok(&seed, "/api/v1/repos/search?q=fixture&perPage=10");
    assert_eq!(
        found.as_array().unwrap().len(),
        2,
        "secret-fixture stays hidden: {found}"
    );
    assert_eq!(
        ok(&seed, "/api/v1/repos/search?q=nothing-like-it"),
        json!([])
    );
    let delegate = hw["delegates"][0].as_str().unwrap();
    let mine = ok(
        &seed,
        &format!("/api/v1/delegates/{delegate}/repos?show=all&perPage=50"),
    );
    assert!(
        mine.as_array()
            .unwrap()
            .iter()
            .any(|r| r["rid"] == rid.as_str()),
        "{mine}"
    );
    assert!(mine
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["rid"] != secret.as_str()));

    // #6: every RID form; unknown and private ones are 404 with an error body.
    for form in [rid.clone(), bare.clone(), format!("rad%3A{bare}")] {
        assert_repo_info(&ok(&seed, &format!("/api/v1/repos/{form}")), hw);
    }
    // Canonical refs: only `main` is top-level in this fixture (tags live in namespaces).
    let one = ok(&seed, &format!("/api/v1/repos/{rid}"));
    assert_eq!(
        one["refs"],
        json!({ "refs": { "refs/heads/main": head }, "tags": {} })
    );
    for missing in [
        secret.clone(),
        "rad:z2gcq7kNUZUFrctQjpimzkyH75Xh6".into(),
        "nope".into(),
    ] {
        let r = get(&seed, &format!("/api/v1/repos/{missing}"));
        assert_eq!(r.status, 404, "{missing}");
        assert_eq!(r.json()["code"], 404);
        assert!(r.json()["error"].is_string());
        let r = get(&seed, &format!("/api/v1/repos/{missing}/tree/{head}/"));
        assert_eq!(r.status, 404, "{missing}");
    }
    let secret_head = f.repo("secret-fixture")["head"]
        .as_str()
        .unwrap()
        .to_owned();
    let secret_bare = secret.trim_start_matches("rad:");
    assert_eq!(
        get(
            &seed,
            &format!("/raw/{secret_bare}/{secret_head}/README.md")
        )
        .status,
        404
    );

    // #7: the effective seeding policy: the configured default (block here), then the
    // operator's explicit one.
    let policy = format!("/api/v1/node/policies/repos/{rid}");
    assert_eq!(ok(&seed, &policy), json!({ "policy": "block" }));
    assert_eq!(
        typed::<web::SeedingPolicy>(&ok(&seed, &policy)),
        web::SeedingPolicy::Block
    );
    seed.admin_ok(
        "POST",
        &format!("/api/v1/repos/{rid}/seed"),
        Some(json!({ "scope": "all" })),
    );
    assert_eq!(
        ok(&seed, &policy),
        json!({ "policy": "allow", "scope": "all" })
    );

    // #8: trees (root with the trailing slash, a directory), content-addressed cache.
    let r = get(&seed, &format!("/api/v1/repos/{rid}/tree/{head}/"));
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("cache-control"),
        Some("public, max-age=604800, immutable")
    );
    let tree = r.json();
    assert_eq!(tree["name"], "");
    assert_eq!(tree["path"], "");
    assert_eq!(
        tree["lastCommit"]["id"],
        head.as_str(),
        "the root changes every commit"
    );
    assert_commit_header(&tree["lastCommit"]);
    let names: Vec<(&str, &str)> = tree["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("docs", "tree"),
            ("src", "tree"),
            ("tests", "tree"),
            ("README.md", "blob")
        ]
    );
    for e in tree["entries"].as_array().unwrap() {
        assert!(is_oid(&e["oid"]) && e["path"] == e["name"], "{e}");
    }
    let src = ok(&seed, &format!("/api/v1/repos/{rid}/tree/{head}/src"));
    // The second answer comes from the tree cache: the same JSON and headers.
    let again = get(&seed, &format!("/api/v1/repos/{rid}/tree/{head}/src/"));
    assert_eq!(again.json(), src);
    assert_eq!(again.header("content-type"), Some("application/json"));
    assert_eq!(
        again.header("cache-control"),
        Some("public, max-age=604800, immutable")
    );
    assert_eq!(src["name"], "src");
    assert_eq!(src["path"], "src");
    // A tree's `lastCommit` is the commit it is read at (httpd's answer); a blob's is the newest
    // commit that changed the path, as `git log -1 -- <path>` (below).
    let last = |path: &str| {
        let out = git_out(&storage, &["log", "-1", "--format=%H", &head, "--", path]);
        String::from_utf8(out).unwrap().trim().to_owned()
    };
    assert_eq!(src["lastCommit"]["id"], head.as_str());
    assert_ne!(
        last("src/lib.rs"),
        head,
        "the fixture's last commit does not touch src/lib.rs"
    );
    let paths: Vec<&str> = src["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, vec!["src/bin", "src/lib.rs"]);
    assert_eq!(
        get(&seed, &format!("/api/v1/repos/{rid}/tree/{head}/nope")).status,
        404
    );

    // #9: blob and README, text exactly as git has it.
    let blob = ok(
        &seed,
        &format!("/api/v1/repos/{rid}/blob/{head}/src/lib.rs"),
    );
    let expected = git_out(&storage, &["show", &format!("{head}:src/lib.rs")]);
    assert_eq!(
        blob["content"].as_str().unwrap().as_bytes(),
        expected.as_slice()
    );
    assert_eq!(blob["binary"], false);
    assert_eq!(blob["name"], "lib.rs");
    assert_eq!(blob["path"], "src/lib.rs");
    assert_commit_header(&blob["lastCommit"]);
    assert_eq!(blob["lastCommit"]["id"], last("src/lib.rs").as_str());
    let typed_blob: web::Blob = typed(&blob);
    assert_eq!(typed_blob.content.as_bytes(), expected.as_slice());
    let readme = ok(&seed, &format!("/api/v1/repos/{rid}/readme/{head}"));
    let _: web::Blob = typed(&readme);
    assert_eq!(readme["path"], "README.md");
    assert_eq!(readme["lastCommit"]["id"], last("README.md").as_str());
    let expected = git_out(&storage, &["show", &format!("{head}:README.md")]);
    assert_eq!(
        readme["content"].as_str().unwrap().as_bytes(),
        expected.as_slice()
    );

    // #10: history, paged, newest first, the same commits as git.
    let log = String::from_utf8(git_out(&storage, &["rev-list", &head])).unwrap();
    let log: Vec<&str> = log.lines().collect();
    let mut walked = Vec::new();
    for page in 0..4 {
        let r = get(
            &seed,
            &format!("/api/v1/repos/{rid}/commits?parent={head}&page={page}&perPage=2"),
        );
        assert_eq!(
            r.header("cache-control"),
            Some("public, max-age=604800, immutable")
        );
        for c in r.json().as_array().unwrap() {
            assert_commit_header(c);
            walked.push(c["id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(walked, log, "git rev-list order");
    let default = ok(&seed, &format!("/api/v1/repos/{rid}/commits"));
    assert_eq!(
        default[0]["id"],
        head.as_str(),
        "default parent: the canonical head"
    );

    // #11: one commit with its diff against the first parent, the blobs and its branches.
    let c = ok(&seed, &format!("/api/v1/repos/{rid}/commits/{head}"));
    assert_commit_header(&c["commit"]);
    assert_eq!(c["commit"]["summary"], "Add test data");
    let typed_commit: web::CommitAnswer = typed(&c);
    assert_eq!(typed_commit.diff.files.len(), 1);
    let files = c["diff"]["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{c}");
    assert_eq!(files[0]["status"], "added");
    assert_eq!(files[0]["path"], "tests/data/sample.txt");
    assert_eq!(files[0]["new"]["mode"], "blob");
    let content = &files[0]["diff"];
    assert_eq!(content["type"], "plain");
    assert_eq!(content["eof"], "noneMissing");
    assert_eq!(content["stats"], json!({ "additions": 1, "deletions": 0 }));
    let hunk = &content["hunks"][0];
    assert_eq!(hunk["lines"][0]["type"], "addition");
    assert_eq!(hunk["lines"][0]["lineNo"], 1);
    assert!(hunk["header"]
        .as_str()
        .unwrap()
        .starts_with("@@ -0,0 +1 @@"));
    // git's numbers: an empty old side starts at 0 with no lines.
    assert_eq!(hunk["old"], json!({ "start": 0, "end": 0 }));
    assert_eq!(hunk["new"], json!({ "start": 1, "end": 2 }));
    assert_eq!(
        c["diff"]["stats"],
        json!({ "filesChanged": 1, "insertions": 1, "deletions": 0 })
    );
    let new_oid = files[0]["new"]["oid"].as_str().unwrap();
    assert_eq!(c["files"][new_oid]["binary"], false);
    assert_eq!(c["files"][new_oid]["id"], new_oid);
    assert_eq!(c["branches"], json!(["refs/heads/main"]));
    // A modification: "Add question" changed src/lib.rs.
    let question = log[1];
    let c = ok(&seed, &format!("/api/v1/repos/{rid}/commits/{question}"));
    let file = &c["diff"]["files"][0];
    assert_eq!(file["status"], "modified", "{c}");
    assert!(file["old"]["oid"].is_string() && file["new"]["oid"].is_string());
    let lines = file["diff"]["hunks"][0]["lines"].as_array().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "context" && l["lineNoOld"].is_u64() && l["lineNoNew"].is_u64()),
        "{c}"
    );
    assert!(lines.iter().any(|l| l["type"] == "addition"), "{c}");
    let short = &head[..7];
    assert_eq!(
        get(&seed, &format!("/api/v1/repos/{rid}/commits/{short}")).status,
        400
    );
    assert_eq!(
        get(
            &seed,
            &format!("/api/v1/repos/{rid}/commits/{}", "0".repeat(40))
        )
        .status,
        404
    );

    // Diff between two commits (`/diff/{base}/{oid}` and its `/stats`, what the explorer's
    // patch and compare views call): the tree changes git sees, and the commits in between.
    let base = log[log.len() - 1];
    let d = ok(&seed, &format!("/api/v1/repos/{rid}/diff/{base}/{head}"));
    let typed_diff: web::Comparison = typed(&d);
    let numstat =
        String::from_utf8(git_out(&storage, &["diff", "--numstat", base, &head])).unwrap();
    let (mut ins, mut del, mut paths) = (0u64, 0u64, Vec::new());
    for l in numstat.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        ins += f[0].parse::<u64>().unwrap_or(0);
        del += f[1].parse::<u64>().unwrap_or(0);
        paths.push(f[2].to_owned());
    }
    let mut got: Vec<String> = d["diff"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_owned())
        .collect();
    got.sort();
    paths.sort();
    assert_eq!(got, paths, "{d}");
    let expected_stats =
        json!({ "filesChanged": paths.len(), "insertions": ins, "deletions": del });
    assert_eq!(d["diff"]["stats"], expected_stats);
    let between: Vec<&str> = d["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_commit_header(c);
            c["id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        between,
        log[..log.len() - 1].to_vec(),
        "newest first, without the base"
    );
    for f in d["diff"]["files"].as_array().unwrap() {
        if let Some(oid) = f["new"]["oid"].as_str() {
            assert_eq!(d["files"][oid]["id"], oid, "{d}");
        }
    }
    let r = get(
        &seed,
        &format!("/api/v1/repos/{rid}/diff/{base}/{head}/stats"),
    );
    assert_eq!(
        r.header("cache-control"),
        Some("public, max-age=604800, immutable")
    );
    assert_eq!(r.json(), expected_stats);
    assert_eq!(typed::<web::DiffStats>(&r.json()), typed_diff.diff.stats);
    assert_eq!(
        get(
            &seed,
            &format!("/api/v1/repos/{rid}/diff/{}/{head}", "0".repeat(40))
        )
        .status,
        404
    );

    // #12: commit counts.
    let count = ok(&seed, &format!("/api/v1/repos/{rid}/stats/commits/{head}"));
    assert_eq!(count, json!({ "commits": log.len() }));
    assert_eq!(typed::<web::CommitCount>(&count).commits, log.len());
    let stats = ok(&seed, &format!("/api/v1/repos/{rid}/stats/tree/{head}"));
    assert_eq!(typed::<web::TreeStats>(&stats).commits, log.len());
    assert_eq!(stats["commits"], log.len());
    assert!(
        stats["branches"].as_u64().unwrap() >= 1 && stats["contributors"].as_u64().unwrap() >= 1
    );

    // #13: activity (the fixture's commits are from 2023: none in the last 52 weeks).
    let r = get(&seed, &format!("/api/v1/repos/{rid}/activity"));
    assert_eq!(
        r.header("cache-control"),
        Some("public, max-age=3600, must-revalidate")
    );
    assert_eq!(r.json(), json!({ "activity": [] }));
    assert!(typed::<web::Activity>(&r.json()).activity.is_empty());

    // #14: remotes from the verified namespaces.
    let remotes = ok(&seed, &format!("/api/v1/repos/{rid}/remotes"));
    let ids: Vec<&str> = remotes
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let mut want: Vec<&str> = hw["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    want.sort();
    assert_eq!(ids, want);
    for r in remotes.as_array().unwrap() {
        assert_eq!(r["delegate"], true, "both namespaces are delegates: {r}");
        assert!(r["heads"]["main"].is_string(), "{r}");
        assert!(r.get("alias").is_none(), "alias omitted, never null");
    }
    let one = ok(&seed, &format!("/api/v1/repos/{rid}/remotes/{}", want[0]));
    assert_eq!(one["id"], want[0]);
    let typed_remotes: Vec<web::Remote> = typed(&remotes);
    assert_eq!(typed_remotes.len(), want.len());
    assert_eq!(typed::<web::Remote>(&one), typed_remotes[0]);
    let missing = get(
        &seed,
        &format!("/api/v1/repos/{rid}/remotes/{}", seed.nid()),
    );
    let e: web::ErrorBody = typed(&missing.json());
    assert_eq!((e.code, e.error.as_str()), (404, "remote not found"));
    assert_eq!(
        get(
            &seed,
            &format!("/api/v1/repos/{rid}/remotes/{}", seed.nid())
        )
        .status,
        404
    );

    // #18: raw bytes with a Content-Type, by path and by blob id; HEAD answers headers.
    let r = get(&seed, &format!("/raw/{bare}/{head}/src/lib.rs"));
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body,
        git_out(&storage, &["show", &format!("{head}:src/lib.rs")])
    );
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.header("content-security-policy"), Some("sandbox"));
    let r = get(&seed, &format!("/raw/{rid}/head/README.md"));
    assert_eq!(
        r.header("content-type"),
        Some("text/markdown; charset=utf-8")
    );
    let r = request(&seed, "HEAD", &format!("/raw/{bare}/blobs/{new_oid}"), &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert!(r.body.is_empty());
    assert_eq!(
        get(
            &seed,
            &format!("/raw/{bare}/blobs/{new_oid}?mime=image/png")
        )
        .status,
        200
    );
    assert_eq!(
        get(&seed, &format!("/raw/{bare}/{head}/nope.txt")).status,
        404
    );

    // CORS preflight, and unknown API paths are JSON 404s.
    let r = request(
        &seed,
        "OPTIONS",
        "/api/v1/repos",
        &[
            ("Origin", "https://x.test"),
            ("Access-Control-Request-Method", "GET"),
        ],
    );
    assert_eq!(r.status, 204);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert!(r
        .header("access-control-allow-methods")
        .unwrap()
        .contains("GET"));
    let r = get(&seed, "/api/v1/nope");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["code"], 404);

    // #20: git clone on the same listener still works.
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("clone");
    let out = git(dir.path())
        .args(["clone", "-q", &seed.url(&format!("/{bare}.git"))])
        .arg(&into)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout(&run(git(dir.path())
            .arg("-C")
            .arg(&into)
            .args(["rev-parse", "HEAD"]))),
        head
    );

    // Metrics per endpoint group.
    assert!(
        seed.metric(
            "seedd_web_requests_total",
            &["group=\"tree\"", "status=\"200\""]
        ) >= 2.0
    );
    assert!(
        seed.metric(
            "seedd_web_requests_total",
            &["group=\"repos\"", "status=\"404\""]
        ) >= 1.0
    );
    assert!(
        seed.metric(
            "seedd_web_request_duration_seconds_count",
            &["group=\"commit\""]
        ) >= 2.0
    );
}

#[test]
fn a_tenant_host_lists_only_its_repositories_and_unknown_hosts_follow_the_policy() {
    let f = fixtures();
    let hw = f.rid("heartwood-fixture");
    let small = f.rid("small-fixture");
    // The operator pins both; the tenant's hostname shows its own profile (issue 27 §3).
    let seed = Seed::start(SeedOptions {
        repos: vec!["heartwood-fixture".into(), "small-fixture".into()],
        extra_config: format!(
            "[web]\ndescription = \"The operator's seed\"\npinned = [{small:?}, {hw:?}]\n\
             [[web.tenants]]\nname = \"acme\"\ndescription = \"Acme's code\"\npinned = [{small:?}, {hw:?}]\n"
        ),
        ..SeedOptions::default()
    });
    let head = f.repo("small-fixture")["head"].as_str().unwrap().to_owned();
    let (s, v) = seed.admin(
        "POST",
        "/api/v1/tenants",
        Some(json!({ "name": "acme", "hosts": ["acme.seed.test"] })),
    );
    assert_eq!(s, 201, "{v}");
    let (s, v) = seed.admin(
        "POST",
        &format!("/api/v1/repos/{hw}/seed"),
        Some(json!({ "tenant": "acme", "alias": "heartwood" })),
    );
    assert_eq!(s, 200, "{v}");

    let acme = [("Host", "acme.seed.test")];
    let at = |path: &str| request(&seed, "GET", path, &acme);
    let list = at("/api/v1/repos?show=all").json();
    let rids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rid"].as_str().unwrap())
        .collect();
    assert_eq!(rids, vec![hw.as_str()]);
    assert_eq!(
        at("/api/v1/stats").json(),
        json!({ "repos": { "total": 1 } })
    );
    assert_eq!(at(&format!("/api/v1/repos/{hw}")).status, 200);
    let by_alias = at("/api/v1/repos/heartwood").json();
    assert_eq!(by_alias["rid"], hw.as_str(), "tenant alias");
    assert_eq!(
        by_alias["alias"], "heartwood",
        "clone URL alias on the tenant host"
    );
    assert_eq!(list[0]["alias"], "heartwood");
    assert_eq!(at(&format!("/api/v1/repos/{small}")).status, 404);
    assert_eq!(
        at(&format!("/api/v1/repos/{small}/tree/{head}/")).status,
        404
    );
    assert_eq!(at(&format!("/api/v1/repos/{small}/remotes")).status, 404);
    let bare = small.trim_start_matches("rad:");
    assert_eq!(at(&format!("/raw/{bare}/{head}/README.md")).status, 404);
    assert_eq!(at("/api/v1/node").json()["id"], seed.nid());
    // The tenant's profile: its description, its pins as far as its host lists them.
    assert_eq!(at("/api/v1/node").json()["description"], "Acme's code");
    let pins = at("/api/v1/repos").json();
    assert_eq!(pins.as_array().unwrap().len(), 1, "{pins}");
    assert_eq!(pins[0]["rid"], hw.as_str());
    assert_eq!(
        get(&seed, "/api/v1/node").json()["description"],
        "The operator's seed"
    );
    assert_eq!(
        get(&seed, "/api/v1/repos").json().as_array().unwrap().len(),
        2
    );

    // Other hosts see everything by default (no tenant aliases there) …
    let list = get(&seed, "/api/v1/repos?show=all").json();
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .all(|r| r.get("alias").is_none()),
        "{list}"
    );

    // … and nothing with `http.unknown_hosts = "none"`, while the tenant host still works.
    let config = std::fs::read_to_string(seed.config_path()).unwrap();
    std::fs::write(
        seed.config_path(),
        config.replace("[http]\n", "[http]\nunknown_hosts = \"none\"\n"),
    )
    .unwrap();
    seed.admin_ok("POST", "/api/v1/config/reload", None);
    let r = get(&seed, "/api/v1/repos?show=all");
    assert_eq!(r.status, 404);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(at("/api/v1/repos?show=all").status, 200);

    // The tenant's daily egress quota counts API bodies too: once used up, 429.
    let egress = || {
        seed.metric(
            "seedd_tenant_egress_bytes_total",
            &["tenant=\"acme\"", "transport=\"http\""],
        )
    };
    let used = egress();
    assert!(
        used > 0.0,
        "earlier answers on the tenant host were counted"
    );
    seed.admin_ok(
        "PUT",
        "/api/v1/tenants/acme/quota",
        Some(json!({ "egress_bytes_per_day": used as u64 + 2000 })),
    );
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(at(&format!("/api/v1/repos/{hw}")).status);
    }
    assert_eq!(statuses[0], 200, "{statuses:?}");
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    let r = at("/api/v1/node");
    assert_eq!(r.status, 429);
    assert!(r.header("retry-after").is_some());
    assert!(egress() >= used + 2000.0);
    seed.admin_ok(
        "PUT",
        "/api/v1/tenants/acme/quota",
        Some(json!({ "egress_bytes_per_day": null })),
    );
    assert_eq!(at("/api/v1/node").status, 200);

    // A suspended tenant's host is refused.
    seed.admin_ok("POST", "/api/v1/tenants/acme/suspend", None);
    assert_eq!(at("/api/v1/repos?show=all").status, 403);
}

#[test]
fn size_limits_binary_files_deletions_and_annotated_tags() {
    let seed = Seed::start(SeedOptions::default());
    let (rid, path) = seedd_tests::synthetic_repo(&seed.storage(), "limits", |work, g| {
        // 5 MiB of text (over the 4 MiB JSON limit, under the 10 MiB raw one), 11 MiB over both.
        let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
        std::fs::write(work.join("five.txt"), line.repeat(5 * 1024 * 1024 / 64)).unwrap();
        std::fs::write(work.join("eleven.txt"), line.repeat(11 * 1024 * 1024 / 64)).unwrap();
        let png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01";
        std::fs::write(work.join("pixel.png"), png).unwrap();
        std::fs::write(work.join("gone.txt"), "bye\n").unwrap();
        g(&["add", "."]);
        g(&["commit", "-q", "-m", "Files"]);
        g(&["tag", "-a", "v1", "-m", "release one"]);
        g(&["rm", "-q", "gone.txt"]);
        g(&["commit", "-q", "-m", "Remove gone.txt"]);
    });
    seed.rescan();
    let head = String::from_utf8(git_out(&path, &["rev-parse", "HEAD"])).unwrap();
    let head = head.trim();
    let first = String::from_utf8(git_out(&path, &["rev-parse", "HEAD~1"])).unwrap();
    let first = first.trim();

    // Annotated tags are peeled to their commit.
    let info = ok(&seed, &format!("/api/v1/repos/{rid}"));
    assert_eq!(
        info["refs"]["tags"]["refs/tags/v1"]["commit"], first,
        "{info}"
    );
    assert_eq!(info["refs"]["refs"]["refs/heads/main"], head);

    let r = get(&seed, &format!("/api/v1/repos/{rid}/blob/{head}/five.txt"));
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["code"], 413);
    let r = get(&seed, &format!("/raw/{rid}/{head}/five.txt"));
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 5 * 1024 * 1024);
    assert_eq!(
        get(&seed, &format!("/raw/{rid}/{head}/eleven.txt")).status,
        413
    );

    // Binary content is base64 in JSON, image/png as raw bytes.
    let blob = ok(&seed, &format!("/api/v1/repos/{rid}/blob/{head}/pixel.png"));
    assert_eq!(blob["binary"], true);
    assert_eq!(blob["content"], "iVBORw0KGgoAAAANSUhEUgAAAAE=");
    let r = get(&seed, &format!("/raw/{rid}/{head}/pixel.png"));
    assert_eq!(r.header("content-type"), Some("image/png"));

    // A deletion; a root commit diffs against the empty tree (binary files have no hunks).
    let c = ok(&seed, &format!("/api/v1/repos/{rid}/commits/{head}"));
    let _: web::CommitAnswer = typed(&c);
    let file = &c["diff"]["files"][0];
    assert_eq!(file["status"], "deleted", "{c}");
    assert_eq!(file["path"], "gone.txt");
    assert_eq!(file["diff"]["hunks"][0]["lines"][0]["type"], "deletion");
    assert_eq!(c["diff"]["stats"]["deletions"], 1);
    let c = ok(&seed, &format!("/api/v1/repos/{rid}/commits/{first}"));
    let statuses: Vec<(&str, &str)> = c["diff"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap(),
                f["diff"]["type"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            ("eleven.txt", "plain"),
            ("five.txt", "plain"),
            ("gone.txt", "plain"),
            ("pixel.png", "binary"),
        ]
    );
    assert!(c["diff"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["status"] == "added"));
}
