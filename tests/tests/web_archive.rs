//! Archives and CI jobs of the radicle-httpd JSON API (issue 15, the optional endpoints of
//! shared/docs/http-api.md §1.5 and §1.7) against seedd as a process: tar.gz, tar and zip
//! downloads of a fixture made by the real `rad` unpack (with `tar` and Python's `zipfile`) to
//! exactly the commit's tree; `HEAD` answers the headers with no body; private repositories
//! answer 404; job COBs made with `rad cob create` are listed per commit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use seedd_tests::{copy_tree, fixtures, radicle_bin, run, stdout, wait_for, Seed, SeedOptions};
use serde_json::{json, Value};

struct Reply {
    status: u16,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

fn request(seed: &Seed, method: &str, path: &str) -> Reply {
    request_with(seed, method, path, &[])
}

fn request_with(seed: &Seed, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let mut req = ureq::http::Request::builder()
        .method(method)
        .uri(seed.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Vec::new()).unwrap();
    let resp = agent.run(req).unwrap();
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
    request(seed, "GET", path)
}

/// Every file of `commit`'s tree: path → bytes (symlinks: their target).
fn tree_files(repo: &Path, commit: &str) -> BTreeMap<String, Vec<u8>> {
    let out = run(Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(["ls-tree", "-r", "-z", commit]));
    let mut files = BTreeMap::new();
    for entry in out.stdout.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let entry = String::from_utf8(entry.to_vec()).unwrap();
        let (meta, path) = entry.split_once('\t').unwrap();
        let parts: Vec<&str> = meta.split(' ').collect();
        assert_eq!(parts[1], "blob", "fixture has no submodules: {entry}");
        let blob = run(Command::new("git")
            .arg("--git-dir")
            .arg(repo)
            .args(["cat-file", "blob", parts[2]]));
        files.insert(path.to_owned(), blob.stdout);
    }
    files
}

/// Every file under `dir`: relative path → bytes (symlinks: their target).
fn dir_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                walk(root, &p, out);
            } else if t.is_symlink() {
                let target = std::fs::read_link(&p).unwrap();
                out.insert(rel, target.to_string_lossy().as_bytes().to_vec());
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Unpack an archive's bytes into a new directory.
fn unpack(bytes: &[u8], kind: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join(format!("download.{kind}"));
    std::fs::write(&file, bytes).unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    match kind {
        "tar.gz" => run(Command::new("tar")
            .arg("-xzf")
            .arg(&file)
            .arg("-C")
            .arg(&out)),
        "tar" => run(Command::new("tar")
            .arg("-xf")
            .arg(&file)
            .arg("-C")
            .arg(&out)),
        "zip" => run(Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(&file)
            .arg(&out)),
        _ => unreachable!(),
    };
    std::fs::remove_file(&file).unwrap();
    tmp
}

#[test]
fn archives_unpack_to_the_commit_tree_and_private_repositories_stay_hidden() {
    let f = fixtures();
    let seed = Seed::start(SeedOptions {
        repos: vec!["heartwood-fixture".into(), "secret-fixture".into()],
        ..SeedOptions::default()
    });
    let hw = f.repo("heartwood-fixture");
    let rid = f.rid("heartwood-fixture");
    let name = hw["name"].as_str().unwrap();
    let head = hw["head"].as_str().unwrap().to_owned();
    let storage = f.storage().join(rid.trim_start_matches("rad:"));
    let expected = tree_files(&storage, &head);
    assert!(expected.len() > 1, "{expected:?}");

    // tar.gz, tar and zip of a commit: `<name>-<oid>/` holds exactly the commit's files.
    for (ext, mime) in [
        ("tar.gz", "application/gzip"),
        ("tar", "application/x-tar"),
        ("zip", "application/zip"),
    ] {
        let r = get(&seed, &format!("/raw/{rid}/{head}.{ext}"));
        assert_eq!(r.status, 200, "{ext}: {}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.header("content-type"), Some(mime), "{ext}");
        assert_eq!(
            r.header("content-disposition").unwrap(),
            format!("attachment; filename=\"{name}-{head}.{ext}\""),
        );
        assert_eq!(r.header("access-control-allow-origin"), Some("*"));
        let dir = unpack(&r.body, ext);
        let top: Vec<_> = std::fs::read_dir(dir.path().join("out"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(top, vec![format!("{name}-{head}")], "{ext}");
        assert_eq!(
            dir_files(&dir.path().join("out").join(format!("{name}-{head}"))),
            expected,
            "{ext}"
        );
    }

    // `?prefix=false`: the files at the top.
    let r = get(&seed, &format!("/raw/{rid}/{head}.tar?prefix=false"));
    assert_eq!(r.status, 200);
    let dir = unpack(&r.body, "tar");
    assert_eq!(dir_files(&dir.path().join("out")), expected);

    // By ref name among the canonical refs; tar.gz by default; named after the ref.
    let r = get(&seed, &format!("/raw/{rid}/archive/main"));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/gzip"));
    assert_eq!(
        r.header("content-disposition").unwrap(),
        format!("attachment; filename=\"{name}-main.tar.gz\"")
    );
    let dir = unpack(&r.body, "tar.gz");
    assert_eq!(
        dir_files(&dir.path().join("out").join(format!("{name}-main"))),
        expected
    );
    let r = get(&seed, &format!("/raw/{rid}/archive/refs/heads/main.zip"));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/zip"));
    let dir = unpack(&r.body, "zip");
    assert_eq!(
        dir_files(
            &dir.path()
                .join("out")
                .join(format!("{name}-refs-heads-main"))
        ),
        expected
    );

    // HEAD: the same headers, no body (and no archive built).
    for path in [
        format!("/raw/{rid}/{head}.tar.gz"),
        format!("/raw/{rid}/archive/main"),
    ] {
        let r = request(&seed, "HEAD", &path);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some("application/gzip"));
        assert!(r.header("content-disposition").is_some());
        assert!(r.body.is_empty(), "{path}");
    }

    // Refusals: unknown suffix 404, bad id 400, unknown ref or commit 404.
    assert_eq!(
        get(&seed, &format!("/raw/{rid}/{head}.tar.zst")).status,
        404
    );
    assert_eq!(get(&seed, &format!("/raw/{rid}/abc.tar.gz")).status, 400);
    assert_eq!(
        get(&seed, &format!("/raw/{rid}/{}.zip", "0".repeat(40))).status,
        404
    );
    assert_eq!(get(&seed, &format!("/raw/{rid}/archive/nope")).status, 404);
    let peer = hw["delegates"][0]
        .as_str()
        .unwrap()
        .trim_start_matches("did:key:")
        .to_owned();
    // A peer's branch, by its full name (the explorer's download button on a peer's view,
    // issue 27 §2): its archive; the peer's other refs and unknown peers stay unreachable.
    let by_peer = get(
        &seed,
        &format!("/raw/{rid}/archive/refs/namespaces/{peer}/refs/heads/main"),
    );
    assert_eq!(by_peer.status, 200);
    assert!(by_peer.body.starts_with(&[0x1f, 0x8b]), "a gzip stream");
    let stranger = "z6MkrLMMsiPWUcNPHcRajuMi9mDfYckSoJyPwwnknocNYPm7";
    for path in [
        format!("refs/namespaces/{peer}/refs/rad/sigrefs"),
        format!("refs/namespaces/{peer}/refs/heads/nope"),
        format!("refs/namespaces/{stranger}/refs/heads/main"),
    ] {
        assert_eq!(
            get(&seed, &format!("/raw/{rid}/archive/{path}")).status,
            404,
            "{path}"
        );
    }
    assert_eq!(
        request(&seed, "HEAD", &format!("/raw/{rid}/archive/nope")).status,
        404
    );

    // The private repository: 404 whatever the form.
    let secret = f.rid("secret-fixture");
    let secret_head = f.repo("secret-fixture")["head"]
        .as_str()
        .unwrap()
        .to_owned();
    for path in [
        format!("/raw/{secret}/{secret_head}.tar.gz"),
        format!("/raw/{secret}/archive/main"),
    ] {
        assert_eq!(get(&seed, &path).status, 404, "{path}");
        assert_eq!(request(&seed, "HEAD", &path).status, 404, "{path}");
    }

    // Counted in their own group.
    assert!(
        seed.metric(
            "seedd_web_requests_total",
            &["group=\"archive\"", "status=\"200\""]
        ) >= 8.0
    );
    assert!(
        seed.metric(
            "seedd_web_requests_total",
            &["group=\"archive\"", "status=\"404\""]
        ) >= 6.0
    );
    // No job COBs in the fixture: an empty list.
    let r = get(&seed, &format!("/api/v1/repos/{rid}/jobs/{head}"));
    assert_eq!(r.status, 200);
    assert_eq!(serde_json::from_slice::<Value>(&r.body).unwrap(), json!([]));
    assert_eq!(
        get(&seed, &format!("/api/v1/repos/{rid}/jobs/abc")).status,
        400
    );
    assert_eq!(
        get(&seed, &format!("/api/v1/repos/{secret}/jobs/{secret_head}")).status,
        404
    );
}

/// `rad` as the fixture user whose home is `home` (no node: offline), with `helpers` first on
/// `PATH`.
fn rad(home: &Path, helpers: &Path, args: &[&str]) -> String {
    let path = std::env::join_paths(std::iter::once(helpers.to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let out = run(Command::new(radicle_bin("rad"))
        .args(args)
        .env("PATH", path)
        .env("RAD_HOME", home)
        .env("RAD_PASSPHRASE", "")
        .env("RAD_SOCKET", home.join("no-node.sock"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1"));
    stdout(&out)
}

fn jsonl(dir: &Path, name: &str, lines: &[Value]) -> PathBuf {
    let p = dir.join(name);
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p
}

/// The only tool at hand that writes `xyz.radworks.job` COBs is `rad cob create`, whose generic
/// actions carry an extra `parents` key that `radicle-job` (so httpd) cannot decode: such a job
/// is invalid and left out, as httpd leaves it out, while the request still walks the whole
/// path (job refs found, COB loaded, evaluated, cached). Jobs in radicle-job's own encoding are
/// materialised in `storage::cob::evaluate`'s unit tests.
#[test]
fn job_cobs_radicle_job_cannot_decode_are_left_out() {
    let f = fixtures();
    let rid = f.rid("heartwood-fixture");
    let canonical = rid.trim_start_matches("rad:").to_owned();
    let head = f.repo("heartwood-fixture")["head"]
        .as_str()
        .unwrap()
        .to_owned();
    let work = tempfile::tempdir().unwrap();
    let home = work.path().join("alice");
    copy_tree(&f.dir.join("homes/alice"), &home);
    // `rad cob` evaluates a type it does not know with a `rad-cob-<name>` helper: one state
    // per operation line.
    let helpers = work.path().join("bin");
    std::fs::create_dir(&helpers).unwrap();
    let helper = helpers.join("rad-cob-job");
    std::fs::write(
        &helper,
        "#!/bin/sh\nwhile IFS= read -r line || [ -n \"$line\" ]; do echo '{}'; done\n",
    )
    .unwrap();
    run(Command::new("chmod").arg("+x").arg(&helper));
    let actions = jsonl(
        work.path(),
        "job.jsonl",
        &[
            json!({ "Request": { "oid": head } }),
            json!({ "Run": { "uuid": "67e55044-10b1-426f-9247-bb680e5fe0c8", "log": "https://ci.example/1" } }),
        ],
    );
    let job = rad(
        &home,
        &helpers,
        &[
            "cob",
            "create",
            "--repo",
            &rid,
            "--type",
            "xyz.radworks.job",
            "--message",
            "CI",
            actions.to_str().unwrap(),
        ],
    );
    assert_eq!(job.len(), 40, "{job}");

    let seed = Seed::start(SeedOptions::default());
    copy_tree(
        &home.join("storage").join(&canonical),
        &seed.storage().join(&canonical),
    );
    seed.rescan();
    for _ in 0..2 {
        let r = get(&seed, &format!("/api/v1/repos/{rid}/jobs/{head}"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(
            serde_json::from_slice::<Value>(&r.body).unwrap(),
            json!([]),
            "{}",
            seed.logs()
        );
    }
    assert!(
        seed.logs().contains(&job),
        "the job was evaluated and left out: {}",
        seed.logs()
    );
}

#[test]
fn a_tenant_host_downloads_only_its_archives_and_pays_their_egress() {
    let f = fixtures();
    let seed = Seed::start(SeedOptions {
        repos: vec!["heartwood-fixture".into(), "small-fixture".into()],
        ..SeedOptions::default()
    });
    let hw = f.rid("heartwood-fixture");
    let small = f.rid("small-fixture");
    let small_head = f.repo("small-fixture")["head"].as_str().unwrap().to_owned();
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
    let egress = || {
        seed.metric(
            "seedd_tenant_egress_bytes_total",
            &["tenant=\"acme\"", "transport=\"http\""],
        )
    };
    let before = egress();

    // By the tenant's alias, on its host.
    let r = request_with(&seed, "GET", "/raw/heartwood/archive/main.tar", &acme);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(r.body.len() > 1024);
    let want = before + r.body.len() as f64;
    wait_for("archive egress charged", Duration::from_secs(10), || {
        (egress() >= want).then_some(())
    });
    // HEAD costs no egress.
    let now = egress();
    let r = request_with(&seed, "HEAD", "/raw/heartwood/archive/main.tar", &acme);
    assert_eq!(r.status, 200);
    std::thread::sleep(Duration::from_millis(300));
    assert!(egress() - now < 512.0, "HEAD charged {}", egress() - now);

    // Another tenant's (here: no tenant's) repository is 404 on the tenant's host.
    let r = request_with(
        &seed,
        "GET",
        &format!("/raw/{small}/{small_head}.tar.gz"),
        &acme,
    );
    assert_eq!(r.status, 404);
    // The default host serves it.
    assert_eq!(
        get(&seed, &format!("/raw/{small}/{small_head}.tar.gz")).status,
        200
    );
}

/// A repository of 32 MiB that do not compress (git archive cannot finish into the pipe alone),
/// indexed: its RID and head.
fn noise_repo(seed: &Seed) -> (String, String) {
    let (rid, path) = seedd_tests::synthetic_repo(&seed.storage(), "big", |work, g| {
        let data = seedd_tests::incompressible(0x9e37_79b9_7f4a_7c15, 32 << 20);
        std::fs::write(work.join("noise.bin"), data).unwrap();
        g(&["add", "."]);
        g(&["commit", "-q", "-m", "noise"]);
    });
    seed.rescan();
    let head = stdout(&run(Command::new("git")
        .arg("--git-dir")
        .arg(&path)
        .args(["rev-parse", "HEAD"])));
    (rid, head)
}

#[test]
fn a_client_that_goes_away_stops_git_archive() {
    let seed = Seed::start(SeedOptions::default());
    let (rid, head) = noise_repo(&seed);
    let req = format!(
        "GET /raw/{rid}/{head}.tar.gz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        seed.http
    );
    let mut conn = seedd_tests::raw_request(seed.http, req.as_bytes());
    let mut first = [0u8; 4096];
    let n = std::io::Read::read(&mut conn, &mut first).unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    let running = || {
        seedd_tests::processes_mentioning(&head)
            .into_iter()
            .filter(|p| p.contains("archive"))
            .collect::<Vec<_>>()
    };
    // The body (and git with it) may start just after the head reached the client.
    wait_for(
        "git archive runs while the client reads",
        Duration::from_secs(10),
        || (!running().is_empty()).then_some(()),
    );
    drop(conn);
    wait_for("git archive killed", Duration::from_secs(10), || {
        running().is_empty().then_some(())
    });
    // The slot came back: the next download works.
    assert_eq!(get(&seed, &format!("/raw/{rid}/{head}.zip")).status, 200);
}

/// Issue 25 §4: an archive holds its slot for at most its deadline — `http.request_timeout_secs`
/// where shorter than 10 minutes (here 3 s). A client that stops reading a 32 MiB archive is cut
/// at the deadline, not at the write timeout (60 s): counted as `archive_deadline`, `git
/// archive` killed, the slot free for the next download.
#[test]
fn a_stalled_archive_download_ends_at_its_deadline() {
    let seed = Seed::start(SeedOptions {
        env: vec![("SEEDD_HTTP__REQUEST_TIMEOUT_SECS".into(), "3".into())],
        ..SeedOptions::default()
    });
    let (rid, head) = noise_repo(&seed);
    let deadline = || seed.metric("seedd_web_bounded_total", &["bound=\"archive_deadline\""]);
    assert_eq!(deadline(), 0.0);
    let req = format!(
        "GET /raw/{rid}/{head}.tar HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        seed.http
    );
    let started = std::time::Instant::now();
    let mut conn = seedd_tests::raw_request(seed.http, req.as_bytes());
    let mut first = [0u8; 4096];
    let n = std::io::Read::read(&mut conn, &mut first).unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    // The client stops reading; the deadline passes.
    wait_for("the archive deadline", Duration::from_secs(20), || {
        (deadline() >= 1.0).then_some(())
    });
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(15),
        "cut after {took:?}"
    );
    let running = || {
        seedd_tests::processes_mentioning(&head)
            .into_iter()
            .filter(|p| p.contains("archive"))
            .collect::<Vec<_>>()
    };
    wait_for("git archive killed", Duration::from_secs(10), || {
        running().is_empty().then_some(())
    });
    // What the client reads now ends short of the whole tar.
    let mut rest = Vec::new();
    let _ = std::io::Read::read_to_end(&mut conn, &mut rest);
    assert!(n + rest.len() < 32 << 20, "{} bytes", n + rest.len());
    assert_eq!(get(&seed, &format!("/raw/{rid}/{head}.zip")).status, 200);
}
