//! Writes N valid Radicle repositories into a storage directory, fast enough for 100k.
//!
//! Each repository is what a seed holds after fetching a freshly `rad init`-ed project
//! (protocol.md §1.4, §2.2, §2.3), written directly (no `git`, no `rad`):
//!
//! * the identity document (canonical JSON, one delegate), whose blob id is the RID;
//! * the identity COB root change: tree `manifest`, `0` (a `revision` action signed over the
//!   document blob id), `embeds/radicle.json`; commit signed in its `gpgsig` header with an
//!   SSHSIG PEM over the tree id, exactly as `radicle-cob` signs;
//! * a README commit on the delegate's `refs/heads/main`;
//! * the delegate's signed refs: a `Update signed refs` commit with the `refs` blob
//!   (`refs/cobs/xyz.radicle.id/<cob>`, `refs/heads/main`, `refs/rad/id`, `refs/rad/root`) and
//!   its Ed25519 `signature`;
//! * canonical refs: `refs/rad/id`, `refs/heads/main` and `HEAD -> refs/heads/main`.
//!
//! On disk: a bare repository per RID (`storage/<z…>/`) with `HEAD`, `config`, one pack with its
//! v2 index (`objects/pack/`) and `packed-refs` — the layout of a seed's storage after
//! `git gc`/`pack-refs` (all refs direct, as on a node that fetched the repository). Writing one
//! pack and one refs file instead of ~13 loose objects and ~8 loose refs keeps 100k
//! repositories at 9 files each. Repositories are written in parallel, one thread per core.
//!
//! The delegates are a few keys shared by all repositories (`keys`, derived with
//! [`Keypair::mock`] from `key_base`), so a test can sign more with them.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use seedd_proto::crypto::{Keypair, NodeId, RepoId};
use sha1::{Digest as _, Sha1};

/// Fixed base of commit times (2025-01-01T00:00:00Z); repository `i` is at base + i seconds,
/// so a dataset is byte-for-byte reproducible.
const TIME_BASE: i64 = 1_735_689_600;

#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("{path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("repository {0} exists already")]
    Exists(PathBuf),
    #[error("SSH signature: {0}")]
    Ssh(ssh_key::Error),
    #[error("at least one key is needed")]
    NoKeys,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> GenError + '_ {
    move |cause| GenError::Io {
        path: path.to_owned(),
        cause,
    }
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Number of repositories.
    pub count: usize,
    /// Project names are `<prefix>-<index>`; different prefixes give different RIDs.
    pub prefix: String,
    /// Number of delegate keys, used round-robin.
    pub keys: usize,
    /// `Keypair::mock(key_base + k)` is delegate `k`.
    pub key_base: u64,
    /// Worker threads (0: one per core).
    pub threads: usize,
}

impl Spec {
    pub fn new(count: usize) -> Self {
        Spec {
            count,
            prefix: "gen".into(),
            keys: 4,
            key_base: 0x5ca1e,
            threads: 0,
        }
    }

    /// The delegate keys.
    pub fn keypairs(&self) -> Vec<Keypair> {
        (0..self.keys as u64)
            .map(|k| Keypair::mock(self.key_base + k))
            .collect()
    }
}

/// One generated repository.
#[derive(Debug, Clone)]
pub struct Generated {
    pub rid: RepoId,
    pub name: String,
    pub delegate: NodeId,
    /// The identity COB id (= its root commit) and the README commit.
    pub identity: String,
    pub head: String,
    pub path: PathBuf,
}

/// What a run produced.
#[derive(Debug)]
pub struct Report {
    pub repos: Vec<Generated>,
    pub elapsed: Duration,
    pub bytes: u64,
}

impl Report {
    pub fn per_second(&self) -> f64 {
        self.repos.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Generate `spec.count` repositories under `storage` (created if missing). Fails if one of
/// them exists already. `progress(done)` is called every 1,000 repositories.
pub fn generate(
    storage: &Path,
    spec: &Spec,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Report, GenError> {
    let started = Instant::now();
    std::fs::create_dir_all(storage).map_err(io(storage))?;
    let keys = spec.keypairs();
    if keys.is_empty() {
        return Err(GenError::NoKeys);
    }
    let threads = if spec.threads == 0 {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    } else {
        spec.threads
    };
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let bytes = AtomicUsize::new(0);
    let out: Mutex<Vec<Generated>> = Mutex::new(Vec::with_capacity(spec.count));
    let first_error: Mutex<Option<GenError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= spec.count {
                        break;
                    }
                    let key = &keys[i % keys.len()];
                    match write_repo(storage, &spec.prefix, i, key) {
                        Ok((g, n)) => {
                            bytes.fetch_add(n, Ordering::Relaxed);
                            mine.push(g);
                        }
                        Err(e) => {
                            let mut slot = first_error.lock().unwrap_or_else(|p| p.into_inner());
                            slot.get_or_insert(e);
                            // Stop every worker.
                            next.store(spec.count, Ordering::Relaxed);
                            break;
                        }
                    }
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if d.is_multiple_of(1000) {
                        progress(d);
                    }
                }
                out.lock().unwrap_or_else(|p| p.into_inner()).extend(mine);
            });
        }
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let mut repos = out.into_inner().unwrap_or_else(|p| p.into_inner());
    repos.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Report {
        repos,
        elapsed: started.elapsed(),
        bytes: bytes.load(Ordering::Relaxed) as u64,
    })
}

// ------------------------------------------------------------------------------------------
// Objects
// ------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Commit = 1,
    Tree = 2,
    Blob = 3,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Commit => "commit",
            Kind::Tree => "tree",
            Kind::Blob => "blob",
        }
    }
}

/// The objects of one repository, in write order.
#[derive(Default)]
struct Objects {
    list: Vec<(Kind, [u8; 20], Vec<u8>)>,
}

impl Objects {
    fn add(&mut self, kind: Kind, data: Vec<u8>) -> [u8; 20] {
        let mut h = Sha1::new();
        h.update(kind.name().as_bytes());
        h.update(b" ");
        h.update(data.len().to_string().as_bytes());
        h.update([0]);
        h.update(&data);
        let id: [u8; 20] = h.finalize().into();
        if !self.list.iter().any(|(_, o, _)| *o == id) {
            self.list.push((kind, id, data));
        }
        id
    }

    fn blob(&mut self, data: &[u8]) -> [u8; 20] {
        self.add(Kind::Blob, data.to_vec())
    }

    /// A tree of (name, is_tree, oid), sorted the way git sorts (a tree as `name/`).
    fn tree(&mut self, entries: &[(&str, bool, [u8; 20])]) -> [u8; 20] {
        let mut sorted: Vec<_> = entries.to_vec();
        sorted.sort_by(|a, b| {
            let key = |e: &(&str, bool, [u8; 20])| {
                let mut k = e.0.as_bytes().to_vec();
                if e.1 {
                    k.push(b'/');
                }
                k
            };
            key(a).cmp(&key(b))
        });
        let mut data = Vec::new();
        for (name, is_tree, oid) in sorted {
            data.extend_from_slice(if is_tree { b"40000 " } else { b"100644 " });
            data.extend_from_slice(name.as_bytes());
            data.push(0);
            data.extend_from_slice(&oid);
        }
        self.add(Kind::Tree, data)
    }

    /// A commit; `headers` are extra headers after `committer` (multi-line values continued
    /// with a leading space, as git writes `gpgsig`).
    fn commit(
        &mut self,
        tree: [u8; 20],
        parents: &[[u8; 20]],
        who: &str,
        time: i64,
        headers: &[(&str, &str)],
        message: &str,
    ) -> [u8; 20] {
        let mut text = format!("tree {}\n", hex::encode(tree));
        for p in parents {
            text.push_str(&format!("parent {}\n", hex::encode(p)));
        }
        text.push_str(&format!("author {who} {time} +0000\n"));
        text.push_str(&format!("committer {who} {time} +0000\n"));
        for (name, value) in headers {
            text.push_str(name);
            text.push(' ');
            text.push_str(&value.trim_end().replace('\n', "\n "));
            text.push('\n');
        }
        text.push('\n');
        text.push_str(message);
        self.add(Kind::Commit, text.into_bytes())
    }
}

/// The SSHSIG PEM `radicle-cob` puts in `gpgsig`: raw Ed25519 over the tree id bytes.
fn sshsig(key: &Keypair, tree: [u8; 20]) -> Result<String, GenError> {
    let sig = key.sign(&tree);
    let public =
        ssh_key::public::KeyData::Ed25519(ssh_key::public::Ed25519PublicKey(*key.nid().as_bytes()));
    let signature = ssh_key::Signature::new(ssh_key::Algorithm::Ed25519, sig.to_vec())?;
    Ok(
        ssh_key::SshSig::new(public, "radicle", ssh_key::HashAlg::Sha256, signature)?
            .to_pem(ssh_key::LineEnding::LF)?,
    )
}

/// Multibase base58btc (`z…`), as radicle serialises signatures in COB actions.
fn multibase(bytes: &[u8]) -> String {
    format!("z{}", bs58::encode(bytes).into_string())
}

/// Write repository number `i` under `storage`; returns it and the bytes written.
fn write_repo(
    storage: &Path,
    prefix: &str,
    i: usize,
    key: &Keypair,
) -> Result<(Generated, usize), GenError> {
    let nid = key.nid();
    let name = format!("{prefix}-{i:06}");
    let time = TIME_BASE + i as i64;
    let mut objects = Objects::default();

    // Identity document, canonical JSON (keys sorted, compact): its blob id is the RID.
    let doc = format!(
        "{{\"delegates\":[\"{}\"],\"payload\":{{\"xyz.radicle.project\":{{\"defaultBranch\":\"main\",\"description\":\"Generated repository {i}\",\"name\":\"{name}\"}}}},\"threshold\":1}}",
        nid.to_did()
    );
    let doc_blob = objects.blob(doc.as_bytes());
    let rid = RepoId::from(doc_blob);

    // Identity COB root change.
    let action = format!(
        "{{\"blob\":\"{}\",\"parent\":null,\"signature\":\"{}\",\"title\":\"Initial revision\",\"type\":\"revision\"}}",
        hex::encode(doc_blob),
        multibase(&key.sign(&doc_blob)),
    );
    let manifest = objects.blob(br#"{"typeName":"xyz.radicle.id","version":1}"#);
    let action = objects.blob(action.as_bytes());
    let embeds = objects.tree(&[("radicle.json", false, doc_blob)]);
    let cob_tree = objects.tree(&[
        ("manifest", false, manifest),
        ("0", false, action),
        ("embeds", true, embeds),
    ]);
    let pem = sshsig(key, cob_tree)?;
    let alias = format!("gen <gen@{nid}>");
    let identity = objects.commit(
        cob_tree,
        &[],
        &alias,
        time,
        &[("gpgsig", &pem)],
        "Initialize identity\n",
    );

    // Content: one README commit.
    let readme = objects.blob(format!("# {name}\n\nGenerated repository {i}.\n").as_bytes());
    let content_tree = objects.tree(&[("README.md", false, readme)]);
    let head = objects.commit(content_tree, &[], &alias, time, &[], "Initial commit\n");

    // Signed refs of the delegate (no parent: level `parent` through rad/root).
    let cob_id = hex::encode(identity);
    let mut signed: BTreeMap<String, [u8; 20]> = BTreeMap::new();
    signed.insert(format!("refs/cobs/xyz.radicle.id/{cob_id}"), identity);
    signed.insert("refs/heads/main".into(), head);
    signed.insert("refs/rad/id".into(), identity);
    signed.insert("refs/rad/root".into(), identity);
    let refs_blob: String = signed
        .iter()
        .map(|(name, oid)| format!("{} {name}\n", hex::encode(oid)))
        .collect();
    let signature = key.sign(refs_blob.as_bytes());
    let refs_oid = objects.blob(refs_blob.as_bytes());
    let sig_oid = objects.blob(&signature);
    let sigrefs_tree = objects.tree(&[("refs", false, refs_oid), ("signature", false, sig_oid)]);
    let sigrefs = objects.commit(
        sigrefs_tree,
        &[],
        &format!("radicle <{nid}>"),
        time,
        &[],
        "Update signed refs\n",
    );

    // Refs: the namespace's signed refs plus rad/sigrefs, and the canonical ones.
    let mut refs: BTreeMap<String, [u8; 20]> = BTreeMap::new();
    for (name, oid) in &signed {
        refs.insert(format!("refs/namespaces/{nid}/{name}"), *oid);
    }
    refs.insert(format!("refs/namespaces/{nid}/refs/rad/sigrefs"), sigrefs);
    refs.insert("refs/heads/main".into(), head);
    refs.insert("refs/rad/id".into(), identity);

    let path = storage.join(rid.canonical());
    let written = write_layout(&path, &objects, &refs, &nid)?;
    Ok((
        Generated {
            rid,
            name,
            delegate: nid,
            identity: cob_id,
            head: hex::encode(head),
            path,
        },
        written,
    ))
}

// ------------------------------------------------------------------------------------------
// On disk
// ------------------------------------------------------------------------------------------

/// The bare repository: HEAD, config, refs/, one pack + index, packed-refs. Written in a
/// temporary directory next to it and renamed, so a repository is there whole or not at all.
fn write_layout(
    path: &Path,
    objects: &Objects,
    refs: &BTreeMap<String, [u8; 20]>,
    nid: &NodeId,
) -> Result<usize, GenError> {
    if path.exists() {
        return Err(GenError::Exists(path.to_owned()));
    }
    let parent = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(format!(".tmp-{name}"));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
    }
    let pack_dir = tmp.join("objects/pack");
    for dir in [
        pack_dir.clone(),
        tmp.join("objects/info"),
        tmp.join("refs/heads"),
        tmp.join("refs/tags"),
    ] {
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    }
    let mut written = 0;
    let mut file = |rel: &Path, data: &[u8]| -> Result<(), GenError> {
        let p = tmp.join(rel);
        let mut f = std::fs::File::create(&p).map_err(io(&p))?;
        f.write_all(data).map_err(io(&p))?;
        written += data.len();
        Ok(())
    };
    file(Path::new("HEAD"), b"ref: refs/heads/main\n")?;
    // What libgit2's bare init plus radicle's `user.*` write.
    file(
        Path::new("config"),
        format!(
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n[user]\n\tname = gen\n\temail = gen@{nid}\n"
        )
        .as_bytes(),
    )?;
    let mut packed = String::from("# pack-refs with: peeled fully-peeled sorted \n");
    for (name, oid) in refs {
        packed.push_str(&format!("{} {name}\n", hex::encode(oid)));
    }
    file(Path::new("packed-refs"), packed.as_bytes())?;
    let packed = pack(objects)?;
    let base = format!("objects/pack/pack-{}", hex::encode(packed.checksum));
    file(Path::new(&format!("{base}.pack")), &packed.pack)?;
    file(Path::new(&format!("{base}.idx")), &packed.idx)?;
    std::fs::rename(&tmp, path).map_err(io(path))?;
    Ok(written)
}

/// A pack file, its index and the pack checksum (which names both).
struct Packed {
    pack: Vec<u8>,
    idx: Vec<u8>,
    checksum: [u8; 20],
}

/// A version 2 pack of `objects` (no deltas) and its version 2 index.
fn pack(objects: &Objects) -> Result<Packed, GenError> {
    let count = u32::try_from(objects.list.len()).unwrap_or(u32::MAX);
    let mut pack = Vec::with_capacity(4096);
    pack.extend_from_slice(b"PACK");
    pack.extend_from_slice(&2u32.to_be_bytes());
    pack.extend_from_slice(&count.to_be_bytes());
    // (oid, crc32, offset)
    let mut entries: Vec<([u8; 20], u32, u32)> = Vec::with_capacity(objects.list.len());
    for (kind, oid, data) in &objects.list {
        let offset = u32::try_from(pack.len()).unwrap_or(u32::MAX);
        let start = pack.len();
        // Type and size: 3 type bits and the low 4 size bits, then 7 bits per byte.
        let mut size = data.len();
        let mut byte = ((*kind as u8) << 4) | (size & 0x0f) as u8;
        size >>= 4;
        while size > 0 {
            pack.push(byte | 0x80);
            byte = (size & 0x7f) as u8;
            size >>= 7;
        }
        pack.push(byte);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(data).map_err(io(Path::new("<zlib>")))?;
        pack.extend_from_slice(&z.finish().map_err(io(Path::new("<zlib>")))?);
        let crc = crc32fast::hash(&pack[start..]);
        entries.push((*oid, crc, offset));
    }
    let checksum: [u8; 20] = Sha1::digest(&pack).into();
    pack.extend_from_slice(&checksum);

    entries.sort_by_key(|e| e.0);
    let mut idx = Vec::with_capacity(1072 + entries.len() * 28 + 40);
    idx.extend_from_slice(b"\xfftOc");
    idx.extend_from_slice(&2u32.to_be_bytes());
    for b in 0..=255u8 {
        let n = entries.iter().filter(|e| e.0[0] <= b).count() as u32;
        idx.extend_from_slice(&n.to_be_bytes());
    }
    for e in &entries {
        idx.extend_from_slice(&e.0);
    }
    for e in &entries {
        idx.extend_from_slice(&e.1.to_be_bytes());
    }
    for e in &entries {
        idx.extend_from_slice(&e.2.to_be_bytes());
    }
    idx.extend_from_slice(&checksum);
    let idx_sum: [u8; 20] = Sha1::digest(&idx).into();
    idx.extend_from_slice(&idx_sum);
    Ok(Packed {
        pack,
        idx,
        checksum,
    })
}

impl From<ssh_key::Error> for GenError {
    fn from(e: ssh_key::Error) -> Self {
        GenError::Ssh(e)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> std::process::Output {
        std::process::Command::new("git")
            .arg("--git-dir")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap()
    }

    /// git itself finds every object and ref well-formed (fsck, index-pack's check of the pack).
    #[test]
    fn git_accepts_the_generated_repositories() {
        let tmp = tempfile::tempdir().unwrap();
        let mut spec = Spec::new(3);
        spec.keys = 2;
        let report = generate(tmp.path(), &spec, &|_| {}).unwrap();
        assert_eq!(report.repos.len(), 3);
        for g in &report.repos {
            let out = git(&g.path, &["fsck", "--strict", "--no-dangling"]);
            assert!(
                out.status.success(),
                "fsck {}: {}",
                g.rid,
                String::from_utf8_lossy(&out.stderr)
            );
            let packs: Vec<_> = std::fs::read_dir(g.path.join("objects/pack"))
                .unwrap()
                .flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                .collect();
            assert_eq!(packs.len(), 1);
            let idx = packs[0].path().with_extension("idx");
            let out = git(&g.path, &["verify-pack", idx.to_str().unwrap()]);
            assert!(
                out.status.success(),
                "verify-pack {}: {}",
                g.rid,
                String::from_utf8_lossy(&out.stderr)
            );
            // The document at the identity root hashes to the RID.
            let out = git(
                &g.path,
                &["rev-parse", &format!("{}:embeds/radicle.json", g.identity)],
            );
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                g.rid.to_hex(),
                "{}",
                g.rid
            );
            let out = git(&g.path, &["rev-parse", "HEAD"]);
            assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), g.head);
        }
        // A second run into the same storage refuses to overwrite.
        assert!(matches!(
            generate(tmp.path(), &spec, &|_| {}),
            Err(GenError::Exists(_))
        ));
    }

    /// The signed refs verify with the delegate's key and list what the namespace holds.
    #[test]
    fn signed_refs_are_signed_by_the_delegate() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = Spec::new(1);
        let g = &generate(tmp.path(), &spec, &|_| {}).unwrap().repos[0];
        let ns = format!("refs/namespaces/{}/refs/rad/sigrefs", g.delegate);
        let refs = git(&g.path, &["show", &format!("{ns}:refs")]).stdout;
        let sig = git(&g.path, &["show", &format!("{ns}:signature")]).stdout;
        g.delegate.verify(&refs, &sig).unwrap();
        let text = String::from_utf8(refs).unwrap();
        assert!(text.contains(&format!("{} refs/rad/root\n", g.identity)));
        assert!(text.contains(&format!("{} refs/heads/main\n", g.head)));
        // Another key's signature does not verify.
        let other = Keypair::mock(1);
        assert!(other.nid().verify(text.as_bytes(), &sig).is_err());
    }
}
