//! Every answer is compared byte for byte with what `git upload-pack` writes for the same
//! repository, view and request.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use seedd_proto::crypto::Keypair;

use super::*;
use crate::metrics::Metrics;
use crate::serve::StreamLimits;

fn server(home: &Path) -> GitServer {
    GitServer::new(
        "git".into(),
        home.to_owned(),
        StreamLimits {
            idle: Duration::from_secs(30),
            total: Duration::from_secs(60),
        },
        Arc::new(Metrics::new().unwrap()),
    )
}

fn git(repo: &Path, args: &[&str], input: Option<&str>) -> String {
    use std::io::Write;
    let mut child = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "a")
        .env("GIT_AUTHOR_EMAIL", "a@b")
        .env("GIT_COMMITTER_NAME", "a")
        .env("GIT_COMMITTER_EMAIL", "a@b")
        .env("GIT_AUTHOR_DATE", "1700000000 +0000")
        .env("GIT_COMMITTER_DATE", "1700000000 +0000")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        stdin.write_all(input.as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn commit(repo: &Path, msg: &str, parent: Option<&str>) -> String {
    let blob = git(repo, &["hash-object", "-w", "--stdin"], Some(msg));
    let tree = git(repo, &["mktree"], Some(&format!("100644 blob {blob}\tf\n")));
    let mut args = vec!["commit-tree", &tree, "-m", msg];
    if let Some(p) = parent {
        args.extend(["-p", p]);
    }
    git(repo, &args, None)
}

fn tag(repo: &Path, name: &str, target: &str, kind: &str) -> String {
    let body = format!(
        "object {target}\ntype {kind}\ntag {name}\ntagger a <a@b> 1700000000 +0000\n\n{name}\n"
    );
    git(
        repo,
        &["hash-object", "-t", "tag", "-w", "--stdin"],
        Some(&body),
    )
}

/// A repository shaped like seedd's storage: canonical refs, hidden rad refs, two peer
/// namespaces (one with a `HEAD`), tags of every kind, symbolic and dangling refs, some refs
/// packed and some loose.
fn storage_like(dir: &Path) -> (std::path::PathBuf, String) {
    let repo = dir.join("repo.git");
    Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&repo)
        .status()
        .unwrap();
    let nid = Keypair::mock(1).nid().to_string();
    let ns = format!("refs/namespaces/{nid}");
    let c1 = commit(&repo, "one", None);
    let c2 = commit(&repo, "two", Some(&c1));
    let t1 = tag(&repo, "v2", &c2, "commit");
    let t2 = tag(&repo, "v3", &t1, "tag");
    let blob = git(&repo, &["hash-object", "-w", "--stdin"], Some("blob"));
    let tb = tag(&repo, "blobtag", &blob, "blob");
    let updates = [
        ("refs/heads/main", &c2),
        ("refs/heads/feature", &c1),
        ("refs/tags/v1", &c1),
        ("refs/tags/v2", &t1),
        ("refs/tags/v3", &t2),
        ("refs/tags/blobtag", &tb),
        ("refs/rad/id", &c1),
        ("refs/rad/sigrefs", &c2),
        ("refs/seedd-fetch/x", &c1),
        ("refs/cobs/xyz.radicle.issue/abc", &c1),
    ];
    for (name, oid) in updates {
        git(&repo, &["update-ref", name, oid], None);
    }
    git(&repo, &["pack-refs", "--all"], None);
    for (name, oid) in [
        (format!("{ns}/refs/heads/main"), &c2),
        (format!("{ns}/refs/heads/zz"), &c1),
        (format!("{ns}/refs/tags/v2"), &t1),
        (format!("{ns}/refs/rad/sigrefs"), &c1),
        ("refs/namespaces/z6MkOther/refs/heads/main".to_owned(), &c1),
        ("refs/heads/loose".to_owned(), &c2),
    ] {
        git(&repo, &["update-ref", &name, oid], None);
    }
    git(&repo, &["symbolic-ref", "HEAD", "refs/heads/main"], None);
    git(
        &repo,
        &[
            "symbolic-ref",
            &format!("{ns}/HEAD"),
            &format!("{ns}/refs/heads/main"),
        ],
        None,
    );
    git(
        &repo,
        &[
            "symbolic-ref",
            "refs/remotes/origin/HEAD",
            "refs/heads/main",
        ],
        None,
    );
    git(
        &repo,
        &["symbolic-ref", "refs/heads/dangling", "refs/heads/nope"],
        None,
    );
    (repo, nid)
}

fn views(nid: &str) -> Vec<View> {
    vec![
        View::Canonical,
        View::All,
        View::Namespace(nid.parse().unwrap()),
        View::Namespace(Keypair::mock(2).nid()),
    ]
}

async fn ls_refs_with_git(server: &GitServer, repo: &Path, view: View, body: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut p = server
        .spawn(repo, Service::UploadPack, view, Some("version=2"))
        .unwrap();
    let mut stdin = p.stdin.take().unwrap();
    stdin.write_all(body).await.unwrap();
    drop(stdin);
    let mut out = Vec::new();
    p.stdout.read_to_end(&mut out).await.unwrap();
    assert!(p.child.wait().await.unwrap().success());
    out
}

fn request(caps: &[&str], args: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    pkt(&mut out, b"command=ls-refs\n");
    for c in caps {
        pkt(&mut out, format!("{c}\n").as_bytes());
    }
    out.extend_from_slice(b"0001");
    for a in args {
        pkt(&mut out, format!("{a}\n").as_bytes());
    }
    out.extend_from_slice(FLUSH);
    out
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace('\0', "\\0")
}

const REQUESTS: &[&[&str]] = &[
    &[],
    &["peel", "symrefs"],
    &["peel", "symrefs", "unborn"],
    &[
        "ref-prefix HEAD",
        "ref-prefix refs/heads/",
        "ref-prefix refs/tags/",
    ],
    &[
        "symrefs",
        "ref-prefix refs/namespaces/",
        "ref-prefix refs/remotes/",
    ],
    &["peel", "ref-prefix refs/tags/v", "ref-prefix refs/tags/v2"],
    &["ref-prefix refs/rad/"],
];

#[tokio::test]
async fn advertisements_equal_git_upload_pack_for_every_view() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let caps = Caps::probe(&server, &dir.path().join("probe"))
        .await
        .unwrap();
    assert!(!dir.path().join("probe").exists());
    let (repo, nid) = storage_like(dir.path());
    let snap = Snapshot::read(&gix::open(&repo).unwrap()).unwrap();
    for view in views(&nid) {
        let theirs = advertise_with_git(&server, &repo, view, None)
            .await
            .unwrap();
        let ours = advertise_v0(&snap, view, &caps);
        assert_eq!(show(&ours), show(&theirs), "v0 advertisement, {view:?}");
        let v2 = advertise_with_git(&server, &repo, view, Some("version=2"))
            .await
            .unwrap();
        assert_eq!(show(&caps.v2()), show(&v2), "v2 capabilities, {view:?}");
        for args in REQUESTS {
            for request_caps in [&[][..], &["agent=git/2.47.3", "object-format=sha1"][..]] {
                let body = request(request_caps, args);
                let parsed = LsRefs::parse(&body).expect("parsed");
                let theirs = ls_refs_with_git(&server, &repo, view, &body).await;
                let ours = ls_refs(&snap, view, &parsed);
                assert_eq!(show(&ours), show(&theirs), "ls-refs {args:?}, {view:?}");
            }
        }
    }
}

#[tokio::test]
async fn unborn_and_empty_repositories_equal_git() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let caps = Caps::probe(&server, &dir.path().join("probe"))
        .await
        .unwrap();
    // Empty: `capabilities^{}` in v0, nothing (or an unborn HEAD) in v2.
    let empty = dir.path().join("empty.git");
    Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&empty)
        .status()
        .unwrap();
    git(&empty, &["symbolic-ref", "HEAD", "refs/heads/trunk"], None);
    // Unborn HEAD next to other refs.
    let unborn = dir.path().join("unborn.git");
    Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&unborn)
        .status()
        .unwrap();
    let c = commit(&unborn, "x", None);
    git(&unborn, &["update-ref", "refs/heads/other", &c], None);
    git(&unborn, &["symbolic-ref", "HEAD", "refs/heads/trunk"], None);
    for repo in [&empty, &unborn] {
        let snap = Snapshot::read(&gix::open(repo).unwrap()).unwrap();
        for view in views(&Keypair::mock(1).nid().to_string()) {
            let theirs = advertise_with_git(&server, repo, view, None).await.unwrap();
            assert_eq!(
                show(&advertise_v0(&snap, view, &caps)),
                show(&theirs),
                "{repo:?} {view:?}"
            );
            for args in REQUESTS {
                let body = request(&[], args);
                let theirs = ls_refs_with_git(&server, repo, view, &body).await;
                let ours = ls_refs(&snap, view, &LsRefs::parse(&body).unwrap());
                assert_eq!(show(&ours), show(&theirs), "{repo:?} {args:?} {view:?}");
            }
        }
    }
}

#[tokio::test]
async fn ten_thousand_refs_equal_git() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let caps = Caps::probe(&server, &dir.path().join("probe"))
        .await
        .unwrap();
    let (repo, nid) = storage_like(dir.path());
    let c = git(&repo, &["rev-parse", "refs/heads/main"], None);
    let t = git(&repo, &["rev-parse", "refs/tags/v2"], None);
    let mut input = String::new();
    for i in 0..10_000 {
        let ns = if i % 2 == 0 {
            nid.as_str()
        } else {
            "z6MkOther"
        };
        let (kind, oid) = if i % 7 == 0 {
            ("tags", &t)
        } else {
            ("heads", &c)
        };
        input.push_str(&format!(
            "update refs/namespaces/{ns}/refs/{kind}/r{i:05}\t{oid}\n"
        ));
        if i % 3 == 0 {
            input.push_str(&format!("update refs/{kind}/top{i:05}\t{oid}\n"));
        }
    }
    let input = input.replace('\t', " ");
    git(&repo, &["update-ref", "--stdin"], Some(&input));
    git(&repo, &["pack-refs", "--all"], None);
    let snap = Snapshot::read(&gix::open(&repo).unwrap()).unwrap();
    assert!(snap.len() > 13_000);
    for view in views(&nid) {
        let theirs = advertise_with_git(&server, &repo, view, None)
            .await
            .unwrap();
        assert_eq!(advertise_v0(&snap, view, &caps), theirs, "{view:?}");
        let body = request(&[], &["peel", "symrefs", "unborn", "ref-prefix refs/"]);
        let theirs = ls_refs_with_git(&server, &repo, view, &body).await;
        assert_eq!(
            ls_refs(&snap, view, &LsRefs::parse(&body).unwrap()),
            theirs,
            "{view:?}"
        );
    }
}

#[test]
fn only_plain_ls_refs_requests_are_answered_here() {
    assert_eq!(
        LsRefs::parse(&request(
            &["agent=git/2.47.3"],
            &["peel", "ref-prefix refs/heads/"]
        )),
        Some(LsRefs {
            peel: true,
            prefixes: vec!["refs/heads/".into()],
            ..LsRefs::default()
        })
    );
    // A fetch, an unknown capability or argument, trailing bytes, a truncated body: git's.
    let mut fetch = Vec::new();
    pkt(&mut fetch, b"command=fetch\n");
    fetch.extend_from_slice(b"00010000");
    assert_eq!(LsRefs::parse(&fetch), None);
    assert_eq!(LsRefs::parse(&request(&["server-option=x"], &[])), None);
    assert_eq!(LsRefs::parse(&request(&[], &["ref-prefix"])), None);
    assert_eq!(LsRefs::parse(&request(&[], &["bogus"])), None);
    let mut trailing = request(&[], &[]);
    trailing.extend_from_slice(b"0000");
    assert_eq!(LsRefs::parse(&trailing), None);
    let body = request(&[], &["peel"]);
    assert_eq!(LsRefs::parse(&body[..body.len() - 2]), None);
    assert_eq!(LsRefs::parse(b""), None);
    assert_eq!(LsRefs::parse(b"zzzz"), None);
}

#[test]
fn hidden_refs_follow_gits_rules() {
    let scope = Scope::of(View::Canonical);
    for (name, hidden) in [
        ("refs/heads/main", false),
        ("refs/heads", false),
        ("refs/tags/v1", false),
        ("refs/rad/id", false),
        ("refs/rad/idx", true),
        ("refs/rad/sigrefs", true),
        ("refs/namespaces/x/refs/heads/main", true),
        ("refs/headsx/y", true),
        ("HEAD", false),
    ] {
        assert_eq!(scope.is_hidden(name.into(), name.into()), hidden, "{name}");
    }
}

/// A Radicle stream's answers: the capability advertisement equals what a stateful stream
/// `git upload-pack` sends first, and `ls-refs` (unborn ignored, a fetch in progress hidden)
/// equals one stream request answered by git.
#[tokio::test]
async fn stream_answers_equal_git() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let caps = Caps::probe(&server, &dir.path().join("probe"))
        .await
        .unwrap();
    let (repo, _) = storage_like(dir.path());
    let first = stream_advertisement_with_git(&server, &repo).await.unwrap();
    assert_eq!(show(&caps.v2_stream()), show(&first));
    assert_ne!(
        caps.v2_stream(),
        caps.v2(),
        "the stream's settings change it"
    );
    let unborn = dir.path().join("unborn.git");
    Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&unborn)
        .status()
        .unwrap();
    git(&unborn, &["symbolic-ref", "HEAD", "refs/heads/trunk"], None);
    let mut requests: Vec<&[&str]> = REQUESTS.to_vec();
    requests.push(&["symrefs", "unborn", "ref-prefix HEAD"]);
    requests.push(&["ref-prefix refs/seedd-fetch"]);
    for repo in [&repo, &unborn] {
        let snap = Snapshot::read(&gix::open(repo).unwrap()).unwrap();
        for args in &requests {
            let body = request(&["agent=git/2.47.3"], args);
            let mut p = server
                .spawn(repo, Service::StreamRequest, View::All, Some("version=2"))
                .unwrap();
            let mut stdin = p.stdin.take().unwrap();
            stdin.write_all(&body).await.unwrap();
            drop(stdin);
            let mut theirs = Vec::new();
            p.stdout.read_to_end(&mut theirs).await.unwrap();
            assert!(p.child.wait().await.unwrap().success());
            let parsed = LsRefs::parse(&body).unwrap().for_stream();
            let ours = ls_refs(&snap, View::All, &parsed);
            assert_eq!(show(&ours), show(&theirs), "{repo:?} {args:?}");
        }
    }
}
