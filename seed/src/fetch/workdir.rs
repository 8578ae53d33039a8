//! A fetch's work directory (`cache/fetch/fetch-*`): the bare repositories a fetch builds
//! there (a clone, the quarantine borrowing the live repository's objects), its removal when
//! the fetch ends, and the removal of leftovers after a crash.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{plumbing, FetchConfig, FetchError, QUARANTINE};
use crate::storage::Storage;

pub(super) async fn git_init(cfg: &FetchConfig, path: &Path) -> Result<(), FetchError> {
    let out = crate::git::async_command(&cfg.git, &cfg.git_home)
        .args(["init", "--quiet", "--bare"])
        .arg(path)
        .output()
        .await?;
    if !out.status.success() {
        return Err(FetchError::git_stderr(&out.stderr));
    }
    // git creates it with the umask; a repository in storage is the seed user's alone.
    crate::fsutil::ensure_private_dir(path)?;
    Ok(())
}

/// An empty bare repository at `path`, written in process: the parts of git's repository
/// layout (gitrepository-layout(5)) that git needs to fetch into it (`HEAD`, `config`,
/// `objects/`, `refs/`), and none of `git init`'s templates (hook samples, `description`,
/// `info/exclude`). Every fetch makes one for its quarantine; `git init` cost several
/// milliseconds of CPU, most of it creating the template files.
fn bare_layout(path: &Path) -> std::io::Result<()> {
    crate::fsutil::create_private_dir(path)?;
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

/// After a crash: removes the work directories of interrupted fetches (half-built clones and
/// quarantine repositories, with every object they received) and quarantine refs an older
/// version left in storage, so storage only holds validated refs and the objects they reach.
pub(crate) fn recover(cfg: &FetchConfig, storage: &Storage) {
    if let Ok(entries) = std::fs::read_dir(&cfg.work_dir) {
        for e in entries.flatten() {
            tracing::info!(path = %e.path().display(), "removing leftovers of an interrupted fetch");
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
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
