//! A fetch's work directory (`cache/fetch/fetch-*`): the bare repositories a fetch builds
//! there (a clone, the quarantine borrowing the live repository's objects), its removal when
//! the fetch ends, and the removal of leftovers after a crash.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{plumbing, FetchConfig, FetchError, QUARANTINE};
use seedd_core::index::Index;
use seedd_core::storage::Storage;

pub(super) async fn git_init(cfg: &FetchConfig, path: &Path) -> Result<(), FetchError> {
    let out = seedd_core::git::async_command(&cfg.git, &cfg.git_home)
        .args(["init", "--quiet", "--bare"])
        .arg(path)
        .output()
        .await?;
    if !out.status.success() {
        return Err(FetchError::git_stderr(&out.stderr));
    }
    // git creates it with the umask; a repository in storage is the seed user's alone.
    seedd_core::fsutil::ensure_private_dir(path)?;
    Ok(())
}

/// An empty bare repository at `path`, written in process: the parts of git's repository
/// layout (gitrepository-layout(5)) that git needs to fetch into it (`HEAD`, `config`,
/// `objects/`, `refs/`), and none of `git init`'s templates (hook samples, `description`,
/// `info/exclude`). Every fetch makes one for its quarantine; `git init` cost several
/// milliseconds of CPU, most of it creating the template files.
fn bare_layout(path: &Path) -> std::io::Result<()> {
    seedd_core::fsutil::create_private_dir(path)?;
    for dir in ["objects/info", "objects/pack", "refs/heads", "refs/tags"] {
        std::fs::create_dir_all(path.join(dir))?;
    }
    std::fs::write(path.join("HEAD"), "ref: refs/heads/main\n")?;
    std::fs::write(
        path.join("config"),
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n",
    )?;
    Ok(())
}

/// A bare repository at `path` whose object store falls back on `live`'s (alternates), so
/// negotiation, thin packs and validation see what we hold while new objects stay apart.
pub(super) async fn quarantine_init(path: &Path, live: &Path) -> Result<(), FetchError> {
    let (path, live) = (path.to_owned(), live.to_owned());
    // A few directory and file creations: on the blocking pool, not an async worker.
    tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        bare_layout(&path)?;
        let objects = std::path::absolute(live.join("objects"))?;
        let mut line = objects.into_os_string();
        line.push("\n");
        std::fs::write(
            path.join("objects").join("info").join("alternates"),
            line.as_encoded_bytes(),
        )
    })
    .await??;
    Ok(())
}

/// Removes the work directory when the fetch ends, however it ends.
pub(super) struct RemoveOnDrop(pub(super) PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        // A process that was killed a moment ago may still be unlinking its temporary files;
        // what remains after a few tries goes at the next start (`recover`).
        for _ in 0..3 {
            match std::fs::remove_dir_all(&self.0) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => return,
            }
        }
        tracing::warn!(path = %self.0.display(), "cannot remove a fetch's work directory; it is removed at the next start");
    }
}

/// The one-off sweep of quarantine refs left in storage by versions that fetched into the
/// live repository ([`Index::done`]).
const LEGACY_QUARANTINE_SWEPT: &str = "legacy-quarantine-refs-swept";

/// After a crash: removes the work directories of interrupted fetches (half-built clones and
/// quarantine repositories, with every object they received) and, once, quarantine refs an
/// older version left in storage, so storage only holds validated refs and the objects they
/// reach. This version never writes quarantine refs into storage, so the sweep over every
/// repository (a stat and a `packed-refs` read each: seconds at 100,000 repositories on a cold
/// page cache) runs only until the index records it done.
pub fn recover(cfg: &FetchConfig, storage: &Storage, index: &Index) {
    if let Ok(entries) = std::fs::read_dir(&cfg.work_dir) {
        for e in entries.flatten() {
            tracing::info!(path = %e.path().display(), "removing leftovers of an interrupted fetch");
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    match index.done(LEGACY_QUARANTINE_SWEPT) {
        Ok(true) => return,
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(error = %seedd_core::logging::chain(&e), "reading the index; sweeping storage for old quarantine refs")
        }
    }
    sweep_legacy_quarantine(cfg, storage);
    if let Err(e) = index.set_done(LEGACY_QUARANTINE_SWEPT) {
        tracing::warn!(error = %seedd_core::logging::chain(&e), "cannot record the quarantine sweep; it runs again at the next start");
    }
}

fn sweep_legacy_quarantine(cfg: &FetchConfig, storage: &Storage) {
    for rid in storage.list().unwrap_or_default() {
        let repo = storage.path_of(&rid);
        let loose = repo.join("refs").join("seedd-fetch").exists();
        let packed = std::fs::read_to_string(repo.join("packed-refs"))
            .map(|s| s.contains(QUARANTINE))
            .unwrap_or(false);
        if loose || packed {
            tracing::info!(%rid, "removing quarantine refs of an interrupted fetch");
            plumbing::drop_quarantine(cfg, &repo);
        }
    }
}

#[cfg(test)]
mod tests {

    use seedd_core::git::testing::{ok, run};
    use seedd_core::index::Index;
    use seedd_core::storage::Storage;
    use seedd_proto::crypto::RepoId;

    /// Work directories go at every start; old quarantine refs in storage are swept once, then
    /// the index remembers it and later starts read no repository.
    #[test]
    fn old_quarantine_refs_are_swept_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("storage");
        std::fs::create_dir_all(&root).unwrap();
        let storage = Storage::open(&root).unwrap();
        let rid = RepoId::from([7; 20]);
        let repo = storage.path_of(&rid);
        std::fs::create_dir_all(&repo).unwrap();
        let git = |args: &[&str]| ok(&repo, args);
        git(&["init", "-q", "--bare", "."]);
        let out = run(&repo, &["hash-object", "-w", "--stdin"], b"x");
        assert!(out.status.success(), "{out:?}");
        let blob = String::from_utf8(out.stdout).unwrap();
        let blob = blob.trim();
        git(&["update-ref", "refs/seedd-fetch/old", blob]);
        let cfg =
            super::FetchConfig::for_tests(dir.path().join("git-home"), dir.path().join("fetch"));
        std::fs::create_dir_all(cfg.work_dir.join("fetch-1-1")).unwrap();
        std::fs::create_dir_all(&cfg.git_home).unwrap();
        let index = Index::open(&dir.path().join("index")).unwrap();
        assert!(!index.done(super::LEGACY_QUARANTINE_SWEPT).unwrap());

        super::recover(&cfg, &storage, &index);
        assert!(
            git(&["for-each-ref", "refs/seedd-fetch"]).is_empty(),
            "swept"
        );
        assert!(!cfg.work_dir.join("fetch-1-1").exists(), "work dir removed");
        assert!(index.done(super::LEGACY_QUARANTINE_SWEPT).unwrap());

        // Planted after the sweep: left alone (no version writes them; the sweep is not redone).
        git(&["update-ref", "refs/seedd-fetch/later", blob]);
        std::fs::create_dir_all(cfg.work_dir.join("fetch-1-2")).unwrap();
        super::recover(&cfg, &storage, &index);
        assert!(
            !git(&["for-each-ref", "refs/seedd-fetch"]).is_empty(),
            "not swept again"
        );
        assert!(
            !cfg.work_dir.join("fetch-1-2").exists(),
            "work dirs still removed"
        );
    }
}
