use super::*;

/// A repository with `n` commits on `HEAD`, each changing `f`.
fn history(n: usize) -> (tempfile::TempDir, gix::Repository, ObjectId) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let git = |args: &[&str]| seedd_core::git::testing::ok(dir, args);
    git(&["init", "-q"]);
    for i in 0..n {
        std::fs::write(dir.join("f"), format!("{i}\n")).unwrap();
        git(&["add", "f"]);
        git(&["commit", "-q", "-m", &format!("c{i}")]);
    }
    let head = ObjectId::from_hex(git(&["rev-parse", "HEAD"]).as_bytes()).unwrap();
    let repo = gix::open(dir).unwrap();
    (tmp, repo, head)
}

/// History walks and `lastCommit` searches stop at the next commit once their cancel flag
/// is set (the client went away or the deadline passed).
#[test]
fn walks_stop_between_commits_when_cancelled() {
    let (_tmp, repo, head) = history(20);
    let cancel = Cancel::new();
    let mut seen = 0;
    let r = walk(&repo, &[head], MAX_WALK, &cancel, |_| {
        seen += 1;
        if seen == 5 {
            cancel.cancel();
        }
        true
    });
    assert_eq!(seen, 5, "the walk went on after the cancel");
    assert_eq!(
        r.unwrap_err().status(),
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    );
    // Not cancelled: the whole history.
    let mut all = 0;
    walk(&repo, &[head], MAX_WALK, &Cancel::new(), |_| {
        all += 1;
        true
    })
    .unwrap();
    assert_eq!(all, 20);
    // `lastCommit` of `f` (changed by every commit) is the head; a cancelled search fails.
    let c = commit(&repo, head).unwrap();
    let f = lookup(&repo, c.tree, "f").unwrap().0;
    let last = last_commit(&repo, c, "f", f, &Cancel::new()).unwrap();
    assert_eq!(last.id, head.to_string());
    let cancelled = Cancel::new();
    cancelled.cancel();
    let c = commit(&repo, head).unwrap();
    assert!(last_commit(&repo, c, "f", f, &cancelled).is_err());
}

#[test]
fn messages_are_cut_on_character_boundaries() {
    assert_eq!(cut("abc", 5), "abc");
    assert_eq!(cut("abcdef", 3), "abc");
    assert_eq!(cut("aé", 2), "a");
    assert_eq!(
        cut(&"x".repeat(MAX_MESSAGE * 2), MAX_MESSAGE).len(),
        MAX_MESSAGE
    );
}

/// A tree object over [`super::objects::MAX_TREE_OBJECT`] is refused from its header.
#[test]
fn big_tree_objects_are_refused_before_inflating() {
    let (tmp, repo, head) = history(1);
    let blob = lookup(&repo, commit(&repo, head).unwrap().tree, "f")
        .unwrap()
        .0;
    // ~4.5 MiB of entries: 120k names of 30 bytes.
    let mut listing = String::new();
    for i in 0..120_000 {
        listing.push_str(&format!(
            "100644 blob {blob}\tfile-with-a-long-name-{i:08}\n"
        ));
    }
    let mut child = seedd_core::git::command("git", tmp.path())
        .arg("-C")
        .arg(tmp.path())
        .arg("mktree")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(listing.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let tree =
        ObjectId::from_hex(String::from_utf8(out.stdout).unwrap().trim().as_bytes()).unwrap();
    let e = check_tree_size(&repo, tree).unwrap_err();
    assert_eq!(e.status(), axum::http::StatusCode::PAYLOAD_TOO_LARGE);
    assert!(check_tree_size(&repo, commit(&repo, head).unwrap().tree).is_ok());
}
