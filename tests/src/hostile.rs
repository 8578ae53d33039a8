//! Repositories a stranger could publish to make one anonymous request expensive (issue 25):
//! each is a synthetic Radicle-layout repository (`synthetic_repo`) built with plain git
//! plumbing in seconds, shared by the integration tests and the `hostile` bench.

use std::path::Path;

use crate::{git_with_input, synthetic_repo};

/// A repository and the commit that carries the attack.
#[derive(Debug, Clone)]
pub struct Attack {
    pub rid: String,
    /// The commit to ask for (40 hex).
    pub commit: String,
}

/// A commit that adds one file of `bytes` newlines (`empty.txt`): `bytes` lines of diff, a
/// few bytes each in git's pack.
pub fn empty_lines(storage: &Path, name: &str, bytes: usize) -> Attack {
    let (rid, path) = synthetic_repo(storage, name, |work, g| {
        std::fs::write(work.join("README"), "hostile\n").unwrap();
        g(&["add", "."]);
        g(&["commit", "-q", "-m", "base"]);
        std::fs::write(work.join("empty.txt"), vec![b'\n'; bytes]).unwrap();
        g(&["add", "."]);
        g(&["commit", "-q", "-m", "empty lines"]);
    });
    let commit = rev(&path, "refs/heads/main");
    Attack { rid, commit }
}

/// A commit whose root tree has `entries` entries (all the same empty blob): one object of
/// about `entries × 40` bytes.
pub fn wide_tree(storage: &Path, name: &str, entries: usize) -> Attack {
    let (rid, path) = synthetic_repo(storage, name, |work, g| {
        std::fs::write(work.join("README"), "hostile\n").unwrap();
        g(&["add", "."]);
        g(&["commit", "-q", "-m", "base"]);
    });
    let home = path.parent().unwrap_or(&path);
    let blob = git_with_input(home, &path, &["hash-object", "-w", "--stdin"], b"");
    let mut listing = String::with_capacity(entries * 64);
    for i in 0..entries {
        listing.push_str(&format!("100644 blob {}\tf{i:07}\n", blob.trim()));
    }
    let tree = git_with_input(home, &path, &["mktree"], listing.as_bytes());
    let parent = rev(&path, "refs/heads/main");
    let commit = git_with_input(
        home,
        &path,
        &["commit-tree", tree.trim(), "-p", &parent],
        b"wide tree\n",
    );
    git_with_input(
        home,
        &path,
        &["update-ref", "refs/heads/main", commit.trim()],
        b"",
    );
    Attack {
        rid,
        commit: commit.trim().to_owned(),
    }
}

/// A commit whose `.gitattributes` says `export-subst` for `subst.txt`, which holds
/// `placeholders` copies of `$Format:%B$`, and whose message is `message_bytes` long: `git
/// archive` expands it to about `placeholders × message_bytes` bytes from a tree of a few KiB.
pub fn export_subst(
    storage: &Path,
    name: &str,
    placeholders: usize,
    message_bytes: usize,
) -> Attack {
    let (rid, path) = synthetic_repo(storage, name, |work, g| {
        std::fs::write(work.join(".gitattributes"), "subst.txt export-subst\n").unwrap();
        std::fs::write(work.join("subst.txt"), "$Format:%B$\n".repeat(placeholders)).unwrap();
        std::fs::write(work.join("msg"), "x".repeat(message_bytes)).unwrap();
        g(&["add", ".gitattributes", "subst.txt"]);
        g(&["commit", "-q", "-F", "msg"]);
    });
    let commit = rev(&path, "refs/heads/main");
    Attack { rid, commit }
}

/// A commit with one file `big.bin` of `bytes` pseudo-random (incompressible) bytes.
pub fn big_file(storage: &Path, name: &str, bytes: usize) -> Attack {
    let (rid, path) = synthetic_repo(storage, name, |work, g| {
        let data = crate::incompressible(0x9e37_79b9_7f4a_7c15, bytes);
        std::fs::write(work.join("big.bin"), data).unwrap();
        g(&["add", "."]);
        g(&["commit", "-q", "-m", "big file"]);
    });
    let commit = rev(&path, "refs/heads/main");
    Attack { rid, commit }
}

fn rev(repo: &Path, name: &str) -> String {
    let home = repo.parent().unwrap_or(repo);
    git_with_input(home, repo, &["rev-parse", name], b"")
        .trim()
        .to_owned()
}
