//! Private files and directories under `data_dir`: the one place that sets mode bits.
//!
//! The data directory holds node keys, the admin token, tenants' private repositories, the
//! index and fetch sockets: nothing in it is for other local users. The protection is that
//! `data_dir` and its top-level directories (`keys/`, `storage/`, `index/`, `cache/`) are 0700
//! — made so at every start, also when they already exist ([`ensure_private_dir`]). With a 0700
//! parent, everything below is unreachable to other users whatever its own mode, which matters
//! because git (`git init`, objects, packs) and RocksDB create their files with the process
//! umask, and changing the umask needs unsafe code. On top of that, secrets are written 0600
//! ([`write_private`]), directories seedd creates itself are 0700 ([`create_private_dir`]) and
//! fetch sockets are 0600 ([`restrict_file`]).

use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

/// Mode of directories seedd creates under `data_dir`.
pub(crate) const PRIVATE_DIR: u32 = 0o700;
/// Mode of secret files (keys, admin token) and sockets.
pub(crate) const PRIVATE_FILE: u32 = 0o600;
/// Group and other permission bits.
const GROUP_OTHER: u32 = 0o077;

/// Creates `dir` and any missing parents with mode 0700 (existing ones are left alone).
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR)
        .create(dir)
}

/// What [`ensure_private_dir`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tightened {
    /// Created, or already without group/other permissions.
    No,
    /// It was accessible to group or others (`from`, permission bits) and is now 0700.
    Yes { from: u32 },
}

/// Creates `dir` (0700) or, when it exists with group/other permission bits, chmods it to
/// 0700. Fails when it cannot be created or tightened (e.g. it belongs to another user).
pub fn ensure_private_dir(dir: &Path) -> io::Result<Tightened> {
    create_private_dir(dir)?;
    let mode = std::fs::metadata(dir)?.permissions().mode() & 0o7777;
    if mode & GROUP_OTHER == 0 {
        return Ok(Tightened::No);
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(PRIVATE_DIR))?;
    Ok(Tightened::Yes { from: mode })
}

/// Removes group/other permission bits from an existing file or socket (mode 0600).
pub fn restrict_file(path: &Path) -> io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(PRIVATE_FILE))
}

/// Writes `data` to `path` with mode 0600: a temporary file next to it, synced, renamed over
/// `path` (an existing file's looser mode is not kept).
pub fn write_private(path: &Path, data: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(PRIVATE_FILE)
            .open(&tmp)?;
        // `mode` only applies to a new file; a leftover temporary file keeps its own.
        f.set_permissions(std::fs::Permissions::from_mode(PRIVATE_FILE))?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The permission bits of `path`.
#[cfg(test)]
pub(crate) fn mode(path: &Path) -> io::Result<u32> {
    Ok(std::fs::symlink_metadata(path)?.permissions().mode() & 0o7777)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_dirs_are_created_and_tightened() {
        let tmp = tempfile::tempdir().unwrap();
        let nested = tmp.path().join("a/b/c");
        create_private_dir(&nested).unwrap();
        assert_eq!(mode(&nested).unwrap(), 0o700);
        assert_eq!(mode(&tmp.path().join("a")).unwrap(), 0o700, "parents too");

        let fresh = tmp.path().join("fresh");
        assert_eq!(ensure_private_dir(&fresh).unwrap(), Tightened::No);
        assert_eq!(mode(&fresh).unwrap(), 0o700);
        assert_eq!(ensure_private_dir(&fresh).unwrap(), Tightened::No);

        let loose = tmp.path().join("loose");
        std::fs::create_dir(&loose).unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            ensure_private_dir(&loose).unwrap(),
            Tightened::Yes { from: 0o755 }
        );
        assert_eq!(mode(&loose).unwrap(), 0o700);
    }

    #[test]
    fn secrets_and_sockets_are_0600() {
        let tmp = tempfile::tempdir().unwrap();
        let token = tmp.path().join("admin-token");
        std::fs::write(&token, "old").unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
        // A leftover temporary file with a loose mode is not reused as is.
        let tmp_file = token.with_extension("tmp");
        std::fs::write(&tmp_file, "stale").unwrap();
        std::fs::set_permissions(&tmp_file, std::fs::Permissions::from_mode(0o666)).unwrap();
        write_private(&token, b"secret").unwrap();
        assert_eq!(std::fs::read(&token).unwrap(), b"secret");
        assert_eq!(mode(&token).unwrap(), 0o600);
        assert!(!tmp_file.exists());

        let sock = tmp.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        restrict_file(&sock).unwrap();
        assert_eq!(mode(&sock).unwrap(), 0o600);
    }
}
