//! git plumbing of a fetch, run in the quarantine or the live repository (through
//! [`seedd_core::git::command`]): ref listings, ancestry, all-or-nothing `update-ref`
//! transactions guarded by the old values, and the migration of accepted objects.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use super::{FetchConfig, FetchError, QUARANTINE};

pub(super) fn git(cfg: &FetchConfig, repo: &Path) -> Command {
    let mut cmd = seedd_core::git::command(&cfg.git, &cfg.git_home);
    cmd.arg("-C").arg(repo);
    cmd
}

/// A child spawned with a piped stdin has none.
pub(super) fn no_stdin() -> FetchError {
    FetchError::Io(std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "git's stdin is not piped",
    ))
}

/// `(name, oid)` of every ref under `prefix` (`git for-each-ref`'s rule), read in process.
pub(super) fn refs_under(repo: &Path, prefix: &str) -> Result<Vec<(String, String)>, FetchError> {
    seedd_core::storage::refs_matching(repo, prefix).map_err(FetchError::Repository)
}

/// Whether commit `a` is an ancestor of commit `b` (or the same), as
/// `git merge-base --is-ancestor` answers: in process when a short walk decides it, else git.
pub(super) fn is_ancestor(
    cfg: &FetchConfig,
    repo: &Path,
    a: &str,
    b: &str,
) -> Result<bool, FetchError> {
    if let Some(known) = ancestry_in_process(repo, a, b) {
        return Ok(known);
    }
    let status = git(cfg, repo)
        .args(["merge-base", "--is-ancestor", a, b])
        .stderr(Stdio::null())
        .status()?;
    Ok(status.success())
}

/// Commits walked back from `b` looking for `a` before git is asked instead.
const ANCESTRY_WALK: usize = 1_000;

/// `Some(answer)` when walking back from `b` finds `a` within [`ANCESTRY_WALK`] commits, or
/// exhausts `b`'s history without it; `None` (git decides, with its commit-graph and
/// generation numbers) when the walk is longer, or either is not a commit we can read. A fetch
/// asks this for every signed-refs update and the default branch's quorum; almost always `a` is
/// `b` or its parent, and each `git merge-base` process cost more than a millisecond of CPU.
fn ancestry_in_process(repo: &Path, a: &str, b: &str) -> Option<bool> {
    let a = gix::ObjectId::from_hex(a.as_bytes()).ok()?;
    let b = gix::ObjectId::from_hex(b.as_bytes()).ok()?;
    let repo = gix::open_opts(repo, gix::open::Options::isolated()).ok()?;
    // git peels tags to commits; here both must be commits, else git answers.
    for id in [a, b] {
        if repo.find_header(id).ok()?.kind() != gix::object::Kind::Commit {
            return None;
        }
    }
    if a == b {
        return Some(true);
    }
    let walk = repo.rev_walk([b]).all().ok()?;
    for (seen, info) in walk.enumerate() {
        if seen >= ANCESTRY_WALK {
            return None;
        }
        if info.ok()?.id == a {
            return Some(true);
        }
    }
    Some(false)
}

/// Runs an `update-ref --stdin` transaction (all or nothing).
pub(super) fn transaction(
    cfg: &FetchConfig,
    repo: &Path,
    lines: &[String],
) -> Result<(), FetchError> {
    let mut script = String::from("start\n");
    for l in lines {
        script.push_str(l);
        script.push('\n');
    }
    script.push_str("prepare\ncommit\n");
    let mut cmd = git(cfg, repo);
    cmd.args(["update-ref", "--stdin"]);
    run_with_input(cmd, "update-ref", script.as_bytes())?;
    Ok(())
}

/// Runs `cmd` with `input` on its stdin: its stdout, or what it said on stderr as the error
/// (`what` names the command).
fn run_with_input(mut cmd: Command, what: &str, input: &[u8]) -> Result<Vec<u8>, FetchError> {
    use std::io::Write as _;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    {
        let mut stdin = child.stdin.take().ok_or_else(no_stdin)?;
        stdin.write_all(input)?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(FetchError::Git(format!(
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out.stdout)
}

/// Deletes every quarantine ref of `repo`.
pub(crate) fn drop_quarantine(cfg: &FetchConfig, repo: &Path) {
    if let Ok(refs) = refs_under(repo, QUARANTINE) {
        let lines: Vec<String> = refs.iter().map(|(n, _)| format!("delete {n}")).collect();
        if !lines.is_empty() {
            if let Err(e) = transaction(cfg, repo, &lines) {
                tracing::error!(error = %seedd_core::logging::chain(&e), repo = %repo.display(), "cannot remove quarantine refs");
            }
        }
    }
}

/// Every ref of `repo` and its oid.
pub(super) fn snapshot(repo: &Path) -> Result<BTreeMap<String, String>, FetchError> {
    Ok(refs_under(repo, "refs/")?.into_iter().collect())
}

/// `update`/`delete` lines with the old value each ref had in `before` (the null oid: it must
/// not exist), so `update-ref` refuses the whole transaction if any of them moved since.
pub(super) fn guarded(lines: &[String], before: &BTreeMap<String, String>) -> Vec<String> {
    const NULL: &str = "0000000000000000000000000000000000000000";
    lines
        .iter()
        .map(|l| {
            let mut parts = l.split(' ');
            match (parts.next(), parts.next(), parts.next(), parts.next()) {
                (Some("update"), Some(name), Some(new), None) => {
                    let old = before.get(name).map_or(NULL, String::as_str);
                    format!("update {name} {new} {old}")
                }
                (Some("delete"), Some(name), None, None) => match before.get(name) {
                    Some(old) => format!("delete {name} {old}"),
                    None => l.clone(),
                },
                _ => l.clone(),
            }
        })
        .collect()
}

/// The oid of exactly the ref `name` in `repo`, if it exists.
pub(super) fn held_ref(repo: &Path, name: &str) -> Result<Option<String>, FetchError> {
    Ok(refs_under(repo, name)?
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, o)| o))
}

/// Copies into `live` the objects that the accepted refs (`tips`) reach and that it lacks, as
/// one new pack — git's own incoming-quarantine migration, narrowed to what was accepted:
/// `pack-objects --local` skips everything `live` already has (the quarantine borrows it
/// through its alternates file) and `--not` stops the walk at what `live`'s refs reach. What a
/// fetch brought that no accepted ref reaches never enters the repository. `git pack-objects`
/// is the tool for this: it reuses the received deltas and writes the pack and its index
/// atomically (an index appears only once its pack is complete).
pub(super) fn migrate(
    cfg: &FetchConfig,
    q: &Path,
    live: &Path,
    tips: &[String],
) -> Result<(), FetchError> {
    if tips.is_empty() {
        return Ok(());
    }
    let mut input = String::new();
    for t in tips {
        input.push_str(t);
        input.push('\n');
    }
    input.push_str("--not\n");
    let mut held: Vec<String> = refs_under(live, "refs/")?
        .into_iter()
        .map(|(_, o)| o)
        .collect();
    held.sort();
    held.dedup();
    for h in held {
        input.push_str(&h);
        input.push('\n');
    }
    let pack_dir = live.join("objects").join("pack");
    std::fs::create_dir_all(&pack_dir)?;
    let mut cmd = git(cfg, q);
    cmd.args([
        "pack-objects",
        "--revs",
        "--local",
        "--quiet",
        "--delta-base-offset",
    ])
    .arg(pack_dir.join("pack"));
    let stdout = run_with_input(cmd, "pack-objects", input.as_bytes())?;
    // An empty pack (nothing new was accepted) is not kept.
    let name = String::from_utf8_lossy(&stdout).trim().to_owned();
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_hexdigit()) {
        let idx = pack_dir.join(format!("pack-{name}.idx"));
        if std::fs::metadata(&idx).is_ok_and(|m| idx_object_count(m.len()) == 0) {
            for ext in ["idx", "pack", "rev"] {
                let _ = std::fs::remove_file(pack_dir.join(format!("pack-{name}.{ext}")));
            }
        }
    }
    Ok(())
}

/// Objects in a version-2 pack index of `len` bytes (header 8, fan-out 1024, trailer 40, and
/// per object 20 + 4 + 4 bytes; large offsets only exist past 2 GiB packs).
pub(super) fn idx_object_count(len: u64) -> u64 {
    len.saturating_sub(8 + 1024 + 40) / 28
}

#[cfg(test)]
mod tests {
    use seedd_core::git::testing::{ok as out, run};

    /// The in-process answer equals `git merge-base --is-ancestor` for every pair of a linear
    /// history with a fork; a tag, an absent object or a walk past the bound leave it to git.
    #[test]
    fn ancestry_in_process_agrees_with_git() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        out(repo, &["init", "-q", "--bare", "."]);
        let tree = out(repo, &["mktree"]);
        let c1 = out(repo, &["commit-tree", &tree, "-m", "1"]);
        let c2 = out(repo, &["commit-tree", &tree, "-p", &c1, "-m", "2"]);
        let c3 = out(repo, &["commit-tree", &tree, "-p", &c2, "-m", "3"]);
        let d3 = out(repo, &["commit-tree", &tree, "-p", &c2, "-m", "fork"]);
        let m4 = out(
            repo,
            &["commit-tree", &tree, "-p", &c3, "-p", &d3, "-m", "merge"],
        );
        let all = [&c1, &c2, &c3, &d3, &m4];
        for a in all {
            for b in all {
                let git_says = run(repo, &["merge-base", "--is-ancestor", a, b], b"")
                    .status
                    .success();
                assert_eq!(
                    super::ancestry_in_process(repo, a, b),
                    Some(git_says),
                    "{a} ancestor of {b}"
                );
            }
        }
        out(repo, &["tag", "-a", "-m", "t", "t", &c1]);
        let tag = out(repo, &["rev-parse", "refs/tags/t"]);
        assert_eq!(
            super::ancestry_in_process(repo, &tag, &c3),
            None,
            "a tag: git peels it"
        );
        let absent = "1".repeat(40);
        assert_eq!(super::ancestry_in_process(repo, &absent, &c3), None);
        assert_eq!(super::ancestry_in_process(repo, "not hex", &c3), None);

        // Longer than the bound and not found within it: git decides.
        let mut tip = c1.clone();
        for i in 0..super::ANCESTRY_WALK + 1 {
            tip = out(
                repo,
                &["commit-tree", &tree, "-p", &tip, "-m", &i.to_string()],
            );
        }
        assert_eq!(super::ancestry_in_process(repo, &c1, &tip), None);
        assert_eq!(super::ancestry_in_process(repo, &d3, &tip), None);
    }
}
