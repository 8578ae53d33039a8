//! A repository's maintenance debt, measured cheaply from directory listings (no git process,
//! no object reads): packs, loose objects, loose refs, whether a reachability bitmap and a
//! commit-graph exist, and how long ago maintenance last ran. The score orders repositories
//! in `seedctl maintenance ls` and the gauge; [`Thresholds::due`] decides what gets
//! maintained.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What one look at a repository's directories found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Debt {
    /// `objects/pack/*.pack` files.
    pub packs: u64,
    /// Bytes of those packs.
    pub pack_bytes: u64,
    /// Files under `objects/<2 hex>/`.
    pub loose_objects: u64,
    /// Files under `refs/` (refs not in `packed-refs`).
    pub loose_refs: u64,
    /// A reachability bitmap exists (of the multi-pack index or of a pack).
    pub bitmap: bool,
    /// A multi-pack index exists.
    pub midx: bool,
    /// A commit-graph (single file or split chain) exists.
    pub commit_graph: bool,
}

impl Debt {
    /// Reads the layout of the bare repository at `repo`. Missing directories count as empty
    /// (a repository without objects has no debt); other I/O errors are returned.
    pub(crate) fn measure(repo: &Path) -> std::io::Result<Self> {
        let mut d = Debt::default();
        let pack_dir = repo.join("objects").join("pack");
        for entry in read_dir_or_empty(&pack_dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with("pack-") && name.ends_with(".pack") {
                d.packs += 1;
                d.pack_bytes += entry.metadata().map_or(0, |m| m.len());
            } else if name.ends_with(".bitmap") {
                d.bitmap = true;
            } else if name == "multi-pack-index" {
                d.midx = true;
            }
        }
        for entry in read_dir_or_empty(&repo.join("objects"))? {
            let entry = entry?;
            let name = entry.file_name();
            let is_fanout = name
                .to_str()
                .is_some_and(|n| n.len() == 2 && n.bytes().all(|b| b.is_ascii_hexdigit()));
            if is_fanout && entry.file_type()?.is_dir() {
                for obj in read_dir_or_empty(&entry.path())? {
                    if obj?.file_type()?.is_file() {
                        d.loose_objects += 1;
                    }
                }
            }
        }
        d.loose_refs = count_loose_refs(&repo.join("refs"))?;
        let info = repo.join("objects").join("info");
        d.commit_graph = info.join("commit-graph").is_file()
            || info
                .join("commit-graphs")
                .join("commit-graph-chain")
                .is_file();
        Ok(d)
    }

    /// One number, 0 for a repository in serving shape: 10 per pack beyond the first, 1 per
    /// 100 loose objects, 1 per 50 loose refs, 20 without a bitmap and 10 without a
    /// commit-graph (only when there is something packed to index), and, once anything is
    /// owed, 1 per day since maintenance last ran (at most 30).
    pub(crate) fn score(&self, since_last_run: Option<Duration>) -> u64 {
        let mut s =
            self.packs.saturating_sub(1) * 10 + self.loose_objects / 100 + self.loose_refs / 50;
        if self.packs > 0 && !self.bitmap {
            s += 20;
        }
        if self.packs > 0 && !self.commit_graph {
            s += 10;
        }
        if s > 0 {
            let days = since_last_run.map_or(30, |d| d.as_secs() / 86_400).min(30);
            s += days;
        }
        s
    }
}

/// When a repository is due for maintenance (`[maintenance]` keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thresholds {
    /// At least this many packs.
    pub packs: u64,
    /// At least this many loose objects.
    pub loose_objects: u64,
    /// At least this many loose refs.
    pub loose_refs: u64,
    /// Packs of at least this many bytes in all without a bitmap (a clone of a small
    /// repository costs little either way).
    pub bitmap_bytes: u64,
}

/// Why a repository is due (the first threshold it passes), or `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    Packs,
    LooseObjects,
    LooseRefs,
    NoBitmap,
}

impl Due {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Due::Packs => "packs",
            Due::LooseObjects => "loose_objects",
            Due::LooseRefs => "loose_refs",
            Due::NoBitmap => "no_bitmap",
        }
    }
}

impl Thresholds {
    pub(crate) fn due(&self, d: &Debt) -> Option<Due> {
        if d.packs >= self.packs {
            Some(Due::Packs)
        } else if d.loose_objects >= self.loose_objects {
            Some(Due::LooseObjects)
        } else if d.loose_refs >= self.loose_refs {
            Some(Due::LooseRefs)
        } else if !d.bitmap && d.packs > 0 && d.pack_bytes >= self.bitmap_bytes {
            Some(Due::NoBitmap)
        } else {
            None
        }
    }
}

fn read_dir_or_empty(
    dir: &Path,
) -> std::io::Result<Box<dyn Iterator<Item = std::io::Result<std::fs::DirEntry>>>> {
    match std::fs::read_dir(dir) {
        Ok(it) => Ok(Box::new(it)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Box::new(std::iter::empty())),
        Err(e) => Err(e),
    }
}

/// Ref files under `refs/`, recursively (lock files of a running update are not refs).
fn count_loose_refs(refs: &Path) -> std::io::Result<u64> {
    let mut n = 0;
    let mut dirs = vec![refs.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in read_dir_or_empty(&dir)? {
            let entry = entry?;
            let ty = entry.file_type()?;
            if ty.is_dir() {
                dirs.push(entry.path());
            } else if ty.is_file() && !entry.file_name().to_string_lossy().ends_with(".lock") {
                n += 1;
            }
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path, bytes: usize) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, vec![0u8; bytes]).unwrap();
    }

    const T: Thresholds = Thresholds {
        packs: 4,
        loose_objects: 100,
        loose_refs: 50,
        bitmap_bytes: 1000,
    };

    #[test]
    fn measures_a_repository_layout() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        let pack = r.join("objects/pack");
        for i in 0..3 {
            touch(&pack.join(format!("pack-{i}.pack")), 100);
            touch(&pack.join(format!("pack-{i}.idx")), 10);
        }
        touch(&pack.join("tmp_pack_x"), 5);
        for i in 0..7 {
            touch(&r.join(format!("objects/ab/{i:038}")), 1);
        }
        touch(&r.join("objects/info/alternates"), 1);
        touch(&r.join("refs/namespaces/z6Mk/refs/heads/main"), 41);
        touch(&r.join("refs/namespaces/z6Mk/refs/rad/sigrefs"), 41);
        touch(&r.join("refs/rad/id"), 41);
        touch(&r.join("refs/heads/main.lock"), 41);
        let d = Debt::measure(r).unwrap();
        assert_eq!(
            d,
            Debt {
                packs: 3,
                pack_bytes: 300,
                loose_objects: 7,
                loose_refs: 3,
                bitmap: false,
                midx: false,
                commit_graph: false,
            }
        );
        assert_eq!(d.score(Some(Duration::ZERO)), 20 + 20 + 10);
        assert_eq!(
            T.due(&d),
            None,
            "3 packs of 300 bytes are below every threshold"
        );

        touch(&pack.join("multi-pack-index"), 1);
        touch(&pack.join("multi-pack-index-abc.bitmap"), 1);
        touch(&r.join("objects/info/commit-graphs/commit-graph-chain"), 1);
        let d = Debt::measure(r).unwrap();
        assert!(d.bitmap && d.midx && d.commit_graph);
        assert_eq!(d.score(Some(Duration::ZERO)), 20);
    }

    #[test]
    fn an_empty_or_missing_repository_owes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = Debt::measure(&dir.path().join("missing")).unwrap();
        assert_eq!(d, Debt::default());
        assert_eq!(d.score(None), 0);
        assert_eq!(T.due(&d), None);
    }

    #[test]
    fn thresholds_pick_the_first_debt_passed() {
        let base = Debt {
            packs: 1,
            pack_bytes: 10,
            bitmap: true,
            commit_graph: true,
            midx: true,
            ..Debt::default()
        };
        assert_eq!(T.due(&base), None);
        assert_eq!(base.score(None), 0, "nothing owed: age does not count");
        let d = Debt {
            packs: 4,
            ..base.clone()
        };
        assert_eq!(T.due(&d), Some(Due::Packs));
        let d = Debt {
            loose_objects: 100,
            ..base.clone()
        };
        assert_eq!(T.due(&d), Some(Due::LooseObjects));
        let d = Debt {
            loose_refs: 50,
            ..base.clone()
        };
        assert_eq!(T.due(&d), Some(Due::LooseRefs));
        let d = Debt {
            bitmap: false,
            pack_bytes: 999,
            ..base.clone()
        };
        assert_eq!(T.due(&d), None, "small packs need no bitmap");
        let d = Debt {
            bitmap: false,
            pack_bytes: 1000,
            ..base.clone()
        };
        assert_eq!(T.due(&d), Some(Due::NoBitmap));
        // Age adds to a debt, capped.
        let d = Debt {
            packs: 2,
            ..base.clone()
        };
        assert_eq!(d.score(Some(Duration::from_secs(3 * 86_400))), 13);
        assert_eq!(d.score(Some(Duration::from_secs(300 * 86_400))), 40);
        assert_eq!(d.score(None), 40, "never maintained counts as the cap");
    }
}
