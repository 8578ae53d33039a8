//! git plumbing of a fetch, run in the quarantine or the live repository (through
//! [`seedd_core::git::command`]): ref listings, ancestry, all-or-nothing `update-ref`
//! transactions guarded by the old values, and the migration of accepted objects.

use std::collections::{BTreeMap, HashSet};
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
    // What the accepted tips bring: for a new repository (no refs yet, so nothing to stop a
    // walk at) walked in process; otherwise listed by `rev-list`, for big packs only. The
    // received packs move if they hold exactly that.
    let walked = held_empty(&input)
        .then(|| reachable(q, tips, CLONE_WALK_MAX))
        .flatten();
    let wanted = match walked {
        Some(w) => Some(w),
        None if quarantine_pack_bytes(q) >= MOVE_MIN_BYTES => Some(rev_list(cfg, q, &input)?),
        None => None,
    };
    if let Some(wanted) = wanted {
        if move_packs(q, live, wanted)? {
            return Ok(());
        }
    }
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

/// Below this many bytes of received packs, copying what was accepted (`pack-objects`) costs
/// less than proving the packs can be moved as they are (a `rev-list` and an index read).
pub(super) const MOVE_MIN_BYTES: u64 = 1 << 20;

/// Bytes of the quarantine's packs.
fn quarantine_pack_bytes(q: &Path) -> u64 {
    std::fs::read_dir(q.join("objects").join("pack"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// What `rev-list --objects` lists for `revs` (its stdin: tips, `--not`, held tips) in `q`.
fn rev_list(cfg: &FetchConfig, q: &Path, revs: &str) -> Result<HashSet<gix::ObjectId>, FetchError> {
    let mut cmd = git(cfg, q);
    cmd.args(["rev-list", "--objects", "--stdin"]);
    let listed = run_with_input(cmd, "rev-list", revs.as_bytes())?;
    let mut wanted = HashSet::new();
    for line in listed.split(|b| *b == b'\n') {
        let hex = line.get(..40).unwrap_or(line);
        if hex.is_empty() {
            continue;
        }
        wanted.insert(gix::ObjectId::from_hex(hex).map_err(FetchError::repository)?);
    }
    Ok(wanted)
}

/// Whether the `--not` part of `revs` names nothing (the live repository has no refs).
fn held_empty(revs: &str) -> bool {
    revs.split_once("--not\n")
        .is_some_and(|(_, held)| held.trim().is_empty())
}

/// Objects walked in process in a new repository's fetch at most; past it `pack-objects`.
const CLONE_WALK_MAX: usize = 100_000;

/// Every object `tips` reach in `q` (commits, their trees and parents, tree entries, tag
/// targets; submodule entries are not objects of this repository), or `None` when one cannot
/// be read or there are more than `max`.
fn reachable(q: &Path, tips: &[String], max: usize) -> Option<HashSet<gix::ObjectId>> {
    use gix::object::Kind;
    let repo = gix::open_opts(q, gix::open::Options::isolated()).ok()?;
    let mut seen = HashSet::new();
    let mut stack: Vec<gix::ObjectId> = tips
        .iter()
        .map(|t| gix::ObjectId::from_hex(t.as_bytes()).ok())
        .collect::<Option<_>>()?;
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        if seen.len() > max {
            return None;
        }
        let obj = repo.find_object(id).ok()?;
        match obj.kind {
            Kind::Commit => {
                let commit = obj.try_into_commit().ok()?;
                stack.push(commit.tree_id().ok()?.detach());
                stack.extend(commit.parent_ids().map(|p| p.detach()));
            }
            Kind::Tree => {
                let tree = obj.try_into_tree().ok()?;
                for entry in tree.decode().ok()?.entries {
                    if !entry.mode.is_commit() {
                        stack.push(entry.oid.to_owned());
                    }
                }
            }
            Kind::Tag => {
                let tag = obj.try_into_tag().ok()?;
                stack.push(tag.target_id().ok()?.detach());
            }
            Kind::Blob => {}
        }
    }
    Some(seen)
}

/// Moves the quarantine's packs into `live` as they are (renamed, `.idx` last so that a pack
/// is visible only once complete) when that adds exactly what `pack-objects` would have
/// copied: every object in them is `wanted` (what the accepted tips reach and `live`'s refs
/// do not), none is in `live` already (the bases `index-pack --fix-thin` appended are) or in
/// two of the packs, and every wanted object is in them or in `live`. Otherwise nothing is
/// touched and `Ok(false)` leaves it to `pack-objects`. A big first fetch is then written
/// once, not twice.
fn move_packs(q: &Path, live: &Path, wanted: HashSet<gix::ObjectId>) -> Result<bool, FetchError> {
    let qpack = q.join("objects").join("pack");
    let mut stems = Vec::new();
    for entry in std::fs::read_dir(&qpack)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".idx") {
            if stem.starts_with("pack-") {
                stems.push(stem.to_owned());
            }
        }
    }
    if stems.is_empty() || has_loose_objects(&q.join("objects")) {
        return Ok(false);
    }
    let live_repo =
        gix::open_opts(live, gix::open::Options::isolated()).map_err(FetchError::repository)?;
    let mut moved = HashSet::with_capacity(wanted.len());
    for stem in &stems {
        let idx = qpack.join(format!("{stem}.idx"));
        let Ok(file) = gix::odb::pack::index::File::at(&idx, gix::hash::Kind::Sha1) else {
            return Ok(false);
        };
        for entry in file.iter() {
            if !wanted.contains(&entry.oid)
                || live_repo.has_object(entry.oid)
                || !moved.insert(entry.oid)
            {
                return Ok(false);
            }
        }
    }
    if wanted
        .iter()
        .any(|id| !moved.contains(id) && !live_repo.has_object(*id))
    {
        return Ok(false);
    }
    let dst = live.join("objects").join("pack");
    for stem in &stems {
        for ext in ["pack", "rev", "idx"] {
            let from = qpack.join(format!("{stem}.{ext}"));
            if ext == "rev" && !from.exists() {
                continue;
            }
            std::fs::rename(&from, dst.join(format!("{stem}.{ext}")))?;
        }
    }
    Ok(true)
}

/// Whether `objects/<2 hex>/` holds any file.
fn has_loose_objects(objects: &Path) -> bool {
    std::fs::read_dir(objects).is_ok_and(|d| {
        d.flatten().any(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.len() == 2
                && n.bytes().all(|b| b.is_ascii_hexdigit())
                && std::fs::read_dir(e.path()).is_ok_and(|mut f| f.next().is_some())
        })
    })
}

/// Objects in a version-2 pack index of `len` bytes (header 8, fan-out 1024, trailer 40, and
/// per object 20 + 4 + 4 bytes; large offsets only exist past 2 GiB packs).
pub(super) fn idx_object_count(len: u64) -> u64 {
    len.saturating_sub(8 + 1024 + 40) / 28
}

#[cfg(test)]
mod tests {
    use seedd_core::git::testing::{ok as out, run};
    use std::path::Path;

    /// `count` + `in-pack` of `git count-objects -v`.
    fn objects(repo: &Path) -> u64 {
        out(repo, &["count-objects", "-v"])
            .lines()
            .filter_map(|l| {
                l.strip_prefix("count: ")
                    .or_else(|| l.strip_prefix("in-pack: "))
            })
            .map(|n| n.trim().parse::<u64>().unwrap())
            .sum()
    }

    /// `len` bytes that do not compress (xorshift from `seed`).
    fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// A commit on `parent` whose tree is one file of `bytes` (written into `repo`).
    fn commit(repo: &Path, parent: Option<&str>, bytes: &[u8]) -> String {
        let blob = String::from_utf8(run(repo, &["hash-object", "-w", "--stdin"], bytes).stdout)
            .unwrap()
            .trim()
            .to_owned();
        let tree = String::from_utf8(
            run(
                repo,
                &["mktree"],
                format!("100644 blob {blob}\tf\n").as_bytes(),
            )
            .stdout,
        )
        .unwrap()
        .trim()
        .to_owned();
        let mut args = vec!["commit-tree", &tree, "-m", "c"];
        if let Some(p) = parent {
            args.extend(["-p", p]);
        }
        out(repo, &args)
    }

    /// A quarantine of `live` holding, as one received pack, what `src` has of `revs`
    /// (`--thin`: bases left out and appended by `index-pack --fix-thin`, as a fetch does).
    fn receive(src: &Path, live: &Path, revs: &str, thin: bool) -> tempfile::TempDir {
        let q = tempfile::tempdir().unwrap();
        out(q.path(), &["init", "-q", "--bare", "."]);
        std::fs::write(
            q.path().join("objects/info/alternates"),
            format!("{}\n", live.join("objects").display()),
        )
        .unwrap();
        let mut args = vec!["pack-objects", "--revs", "--stdout"];
        if thin {
            args.push("--thin");
        }
        let pack = run(src, &args, revs.as_bytes());
        assert!(pack.status.success());
        let idx = run(
            q.path(),
            &["index-pack", "--stdin", "--fix-thin"],
            &pack.stdout,
        );
        assert!(idx.status.success(), "{idx:?}");
        q
    }

    fn packs(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir.join("objects/pack"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".pack"))
            .collect();
        v.sort();
        v
    }

    /// A big received pack of exactly the accepted objects is moved into the repository as
    /// it is (no second write); a thin one (its bases, appended from the repository, would
    /// be there twice) or one with objects no accepted ref reaches is copied by
    /// `pack-objects` instead. Either way the repository gains exactly the accepted objects
    /// and stays complete.
    #[test]
    fn big_packs_of_only_accepted_objects_are_moved_others_copied() {
        let home = tempfile::tempdir().unwrap();
        let cfg = super::FetchConfig::for_tests(home.path().to_owned(), home.path().join("w"));
        let src = tempfile::tempdir().unwrap();
        let src = src.path();
        out(src, &["init", "-q", "--bare", "."]);
        let big = noise(7, 2 << 20);
        let c1 = commit(src, None, b"one\n");
        let c2 = commit(src, Some(&c1), &big);
        let mut edited = big.clone();
        edited[1000] ^= 1;
        let c3 = commit(src, Some(&c2), &edited);
        let stray = commit(src, Some(&c1), &noise(8, 2 << 20));
        let live = tempfile::tempdir().unwrap();
        let live = live.path();
        out(live, &["init", "-q", "--bare", "."]);
        out(
            live,
            &[
                "fetch",
                "-q",
                &src.display().to_string(),
                &format!("{c1}:refs/heads/main"),
            ],
        );
        let before = objects(live);

        // c2's commit, tree and 2 MiB blob, nothing else: moved.
        let q = receive(src, live, &format!("{c2}\n--not\n{c1}\n"), false);
        let received = packs(q.path());
        super::migrate(&cfg, q.path(), live, std::slice::from_ref(&c2)).unwrap();
        assert!(packs(q.path()).is_empty(), "the pack was not moved");
        assert!(packs(live).contains(&received[0]));
        assert_eq!(objects(live), before + 3);
        out(live, &["update-ref", "refs/heads/main", &c2]);
        out(live, &["fsck", "--connectivity-only", "--no-dangling"]);

        // Thin: the edited blob is a delta against the one `live` holds, which --fix-thin
        // appended: copied, and only the 3 new objects arrive.
        let q = receive(src, live, &format!("{c3}\n--not\n{c2}\n"), true);
        let received = packs(q.path());
        super::migrate(&cfg, q.path(), live, std::slice::from_ref(&c3)).unwrap();
        assert_eq!(packs(q.path()), received, "a thin pack was moved");
        assert_eq!(objects(live), before + 6);

        // A pack with a commit no accepted ref reaches: copied without it.
        let q = receive(src, live, &format!("{stray}\n--not\n{c1}\n"), false);
        super::migrate(&cfg, q.path(), live, std::slice::from_ref(&c3)).unwrap();
        assert!(
            !packs(q.path()).is_empty(),
            "a pack with a rejected object was moved"
        );
        let present = run(live, &["cat-file", "-e", &stray], b"").status.success();
        assert!(!present, "a rejected object entered the repository");
    }

    /// A new repository (no refs): what the accepted tips reach is walked in process, so even
    /// a small pack holding exactly that is moved (no `pack-objects`); one with an object they
    /// do not reach is copied without it.
    #[test]
    fn a_new_repositorys_pack_of_exactly_the_accepted_objects_is_moved() {
        let home = tempfile::tempdir().unwrap();
        let cfg = super::FetchConfig::for_tests(home.path().to_owned(), home.path().join("w"));
        let src = tempfile::tempdir().unwrap();
        let src = src.path();
        out(src, &["init", "-q", "--bare", "."]);
        let c1 = commit(src, None, b"one\n");
        let c2 = commit(src, Some(&c1), b"two\n");
        out(src, &["tag", "-a", "-m", "t", "v1", &c2]);
        let tag = out(src, &["rev-parse", "refs/tags/v1"]);
        let stray = commit(src, None, b"stray\n");
        let new_repo = || {
            let live = tempfile::tempdir().unwrap();
            out(live.path(), &["init", "-q", "--bare", "."]);
            live
        };

        let live = new_repo();
        let q = receive(src, live.path(), &format!("{tag}\n"), false);
        let received = packs(q.path());
        super::migrate(&cfg, q.path(), live.path(), std::slice::from_ref(&tag)).unwrap();
        assert!(packs(q.path()).is_empty(), "the pack was not moved");
        assert_eq!(packs(live.path()), received);
        // Two commits, their trees and blobs, the tag.
        assert_eq!(objects(live.path()), 7);
        out(live.path(), &["update-ref", "refs/tags/v1", &tag]);
        out(
            live.path(),
            &["fsck", "--connectivity-only", "--no-dangling"],
        );

        let live = new_repo();
        let q = receive(src, live.path(), &format!("{c2}\n{stray}\n"), false);
        super::migrate(&cfg, q.path(), live.path(), std::slice::from_ref(&c2)).unwrap();
        assert!(
            !packs(q.path()).is_empty(),
            "a pack with a rejected object was moved"
        );
        assert_eq!(objects(live.path()), 6);
        let present = run(live.path(), &["cat-file", "-e", &stray], b"")
            .status
            .success();
        assert!(!present, "a rejected object entered the repository");
    }

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
