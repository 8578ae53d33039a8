//! Test support: temporary git repositories, and the same diff computed by
//! `git diff -M -C --name-status -z` and by `renames::detect`.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use super::{self as renames, Cut, Dest, Kind, Limits, Mode, Source};

fn git_command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-c")
        .arg("safe.directory=*")
        .arg("--git-dir")
        .arg(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .env("HOME", dir);
    cmd
}

/// One tree entry from `git ls-tree -r -l`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) mode: u32,
    pub(super) id: String,
    pub(super) size: u64,
}

struct CatFile {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl CatFile {
    fn new(dir: &Path) -> CatFile {
        let mut child = git_command(dir)
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn git cat-file");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        CatFile {
            child,
            stdin,
            stdout,
        }
    }

    fn get(&mut self, id: &str) -> Vec<u8> {
        writeln!(self.stdin, "{id}").expect("write cat-file");
        self.stdin.flush().expect("flush");
        let mut header = String::new();
        self.stdout.read_line(&mut header).expect("read header");
        let fields: Vec<&str> = header.trim_end().split(' ').collect();
        assert_eq!(fields.len(), 3, "cat-file header {header:?}");
        assert_eq!(fields[1], "blob", "cat-file header {header:?}");
        let size: usize = fields[2].parse().expect("size");
        let mut data = vec![0; size + 1];
        self.stdout.read_exact(&mut data).expect("read blob");
        data.pop();
        data
    }
}

impl Drop for CatFile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) struct Repo {
    _tmp: tempfile::TempDir,
    pub(super) dir: PathBuf,
    cat: RefCell<Option<CatFile>>,
    commits: u64,
}

/// What to put at a path when building a tree with fast-import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Obj {
    File(Vec<u8>),
    Exec(Vec<u8>),
    Link(Vec<u8>),
    /// Submodule commit id (hex).
    Sub(String),
}

pub(super) fn file(s: impl AsRef<[u8]>) -> Obj {
    Obj::File(s.as_ref().to_vec())
}

impl Repo {
    pub(super) fn new() -> Repo {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("repo.git");
        let st = Command::new("git")
            .args(["init", "-q", "--bare", "-b", "main"])
            .arg(&dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .status()
            .expect("git init");
        assert!(st.success());
        Repo {
            _tmp: tmp,
            dir,
            cat: RefCell::new(None),
            commits: 0,
        }
    }

    /// A bare repository extracted from a tarball (gzip or bzip2).
    pub(super) fn from_tarball(tarball: &Path) -> Repo {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("repo.git");
        std::fs::create_dir(&dir).expect("mkdir");
        let st = Command::new("tar")
            .arg("-xaf")
            .arg(tarball)
            .arg("--no-same-owner")
            .arg("-C")
            .arg(&dir)
            .stderr(Stdio::null())
            .status()
            .expect("tar");
        assert!(st.success(), "tar failed");
        Repo {
            _tmp: tmp,
            dir,
            cat: RefCell::new(None),
            commits: 0,
        }
    }

    pub(super) fn git(&self, args: &[&str]) -> Vec<u8> {
        let out = git_command(&self.dir).args(args).output().expect("run git");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    pub(super) fn import(&self, stream: &[u8]) {
        let mut child = git_command(&self.dir)
            .args(["fast-import", "--quiet", "--force"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("fast-import");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stream)
            .expect("write stream");
        assert!(child.wait().expect("wait").success(), "fast-import failed");
    }

    /// Appends a parentless commit with exactly `files` to a fast-import stream.
    pub(super) fn commit_to(stream: &mut Vec<u8>, refname: &str, files: &[(String, Obj)]) {
        write!(
            stream,
            "commit {refname}\ncommitter T <t@t> 0 +0000\ndata 0\n"
        )
        .expect("w");
        for (path, obj) in files {
            let (mode, data) = match obj {
                Obj::File(d) => ("100644", d),
                Obj::Exec(d) => ("100755", d),
                Obj::Link(d) => ("120000", d),
                Obj::Sub(id) => {
                    writeln!(stream, "M 160000 {id} {path}").expect("w");
                    continue;
                }
            };
            write!(stream, "M {mode} inline {path}\ndata {}\n", data.len()).expect("w");
            stream.extend_from_slice(data);
            stream.push(b'\n');
        }
        stream.push(b'\n');
    }

    /// Creates two commits and returns their ref names.
    pub(super) fn two_trees(
        &mut self,
        a: &[(String, Obj)],
        b: &[(String, Obj)],
    ) -> (String, String) {
        self.commits += 1;
        let (ra, rb) = (
            format!("refs/heads/t{}a", self.commits),
            format!("refs/heads/t{}b", self.commits),
        );
        let mut stream = Vec::new();
        Repo::commit_to(&mut stream, &ra, a);
        Repo::commit_to(&mut stream, &rb, b);
        self.import(&stream);
        (ra, rb)
    }

    pub(super) fn ls_tree(&self, rev: &str) -> BTreeMap<String, Entry> {
        let out = self.git(&["ls-tree", "-r", "-l", "-z", "--full-tree", rev]);
        let mut map = BTreeMap::new();
        for rec in out.split(|&b| b == 0).filter(|r| !r.is_empty()) {
            let tab = rec.iter().position(|&b| b == b'\t').expect("tab");
            let meta = std::str::from_utf8(&rec[..tab]).expect("utf8");
            let path = String::from_utf8(rec[tab + 1..].to_vec()).expect("utf8 path");
            let f: Vec<&str> = meta.split_whitespace().collect();
            let mode = u32::from_str_radix(f[0], 8).expect("mode");
            let size = f[3].parse().unwrap_or(0);
            map.insert(
                path,
                Entry {
                    mode,
                    id: f[2].to_string(),
                    size,
                },
            );
        }
        map
    }

    /// `git diff -M -C --name-status -z a b` as lines `STATUS\tpath[\tpath]`.
    pub(super) fn git_diff(&self, a: &str, b: &str, extra: &[&str]) -> Vec<String> {
        let mut args = vec!["diff", "-M", "-C", "--name-status", "-z"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[a, b, "--"]);
        let out = self.git(&args);
        let mut toks = out
            .split(|&b| b == 0)
            .map(|t| String::from_utf8(t.to_vec()).expect("utf8"));
        let mut lines = Vec::new();
        while let Some(status) = toks.next() {
            if status.is_empty() {
                continue;
            }
            let first = toks.next().expect("path");
            if status.starts_with('R') || status.starts_with('C') {
                let second = toks.next().expect("second path");
                lines.push(format!("{status}\t{first}\t{second}"));
            } else {
                lines.push(format!("{status}\t{first}"));
            }
        }
        lines
    }

    /// The same listing from `renames::detect` fed by `git ls-tree`.
    pub(super) fn our_diff(&self, a: &str, b: &str, limits: Limits) -> (Vec<String>, Cut) {
        let old = self.ls_tree(a);
        let new = self.ls_tree(b);
        our_listing(&old, &new, limits, &mut |id: &String| self.blob(id))
    }

    pub(super) fn blob(&self, id: &str) -> Vec<u8> {
        let mut cat = self.cat.borrow_mut();
        cat.get_or_insert_with(|| CatFile::new(&self.dir)).get(id)
    }

    /// Asserts that git and we agree; returns git's listing.
    pub(super) fn check(&self, a: &str, b: &str) -> Vec<String> {
        let want = self.git_diff(a, b, &[]);
        let (got, cut) = self.our_diff(a, b, Limits::default());
        assert_eq!(cut, Cut::None);
        assert_eq!(got, want, "diff {a} {b}: ours (left) vs git (right)");
        want
    }

    /// Builds both trees, checks, and returns git's listing.
    pub(super) fn case(&mut self, a: &[(String, Obj)], b: &[(String, Obj)]) -> Vec<String> {
        let (ra, rb) = self.two_trees(a, b);
        self.check(&ra, &rb)
    }
}

pub(super) fn mode_of(mode: u32) -> Mode {
    match mode & 0o170000 {
        0o120000 => Mode::Symlink,
        0o160000 => Mode::Submodule,
        _ => Mode::File,
    }
}

/// Turns two `ls-tree` listings into git's name-status lines using `detect`.
pub(super) fn our_listing(
    old: &BTreeMap<String, Entry>,
    new: &BTreeMap<String, Entry>,
    limits: Limits,
    load: &mut dyn FnMut(&String) -> Vec<u8>,
) -> (Vec<String>, Cut) {
    let mut sources = Vec::new();
    let mut dests = Vec::new();
    for (path, e) in old {
        let deleted = match new.get(path) {
            None => true,
            Some(n) if n != e => false,
            Some(_) => continue,
        };
        sources.push(Source {
            path: path.clone(),
            id: e.id.clone(),
            mode: mode_of(e.mode),
            size: e.size,
            deleted,
        });
    }
    for (path, e) in new {
        if !old.contains_key(path) {
            dests.push(Dest {
                path: path.clone(),
                id: e.id.clone(),
                mode: mode_of(e.mode),
                size: e.size,
            });
        }
    }
    let mut loader = |id: &String| Ok::<_, Infallible>(load(id));
    let (found, cut) = match renames::detect(&sources, &dests, &mut loader, limits, &|| false) {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let mut used = vec![false; sources.len()];
    let mut by_dest = BTreeMap::new();
    for f in &found {
        used[f.source] = true;
        by_dest.insert(dests[f.dest].path.clone(), *f);
    }
    let mut lines = Vec::new();
    let mut paths: Vec<&String> = old.keys().chain(new.keys()).collect();
    paths.sort();
    paths.dedup();
    for path in paths {
        match (old.get(path), new.get(path)) {
            (Some(_), None) => {
                let s = sources
                    .iter()
                    .position(|s| &s.path == path)
                    .expect("source");
                if !used[s] {
                    lines.push(format!("D\t{path}"));
                }
            }
            (None, Some(_)) => match by_dest.get(path) {
                Some(f) => {
                    let k = if f.kind == Kind::Rename { 'R' } else { 'C' };
                    lines.push(format!(
                        "{k}{:03}\t{}\t{path}",
                        f.similarity(),
                        sources[f.source].path
                    ));
                }
                None => lines.push(format!("A\t{path}")),
            },
            (Some(o), Some(n)) if o != n => {
                let t = if o.mode & 0o170000 != n.mode & 0o170000 {
                    'T'
                } else {
                    'M'
                };
                lines.push(format!("{t}\t{path}"));
            }
            _ => {}
        }
    }
    (lines, cut)
}

/// A small deterministic PRNG (splitmix64).
pub(super) struct Rng(pub u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub(super) fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    /// True with probability `num / den`.
    pub(super) fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}
