//! Backups on disk: `seedctl backup -f FILE` and the offline `seedctl restore -f FILE --data-dir DIR`.
//!
//! An offline restore prepares a data directory for a new seedd: the identities' keys as seedd
//! keeps them (`DIR/keys/<identity>/radicle`, the OpenSSH private key, and `radicle.pub`,
//! `ssh-ed25519 AAAA… z6Mk…`), and `DIR/restore.json`, which seedd imports into its index on its
//! next start (tenants, policies, deny lists, identities).

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};
use serde_json::Value;
use ssh_key::public::KeyData;
use ssh_key::{PrivateKey, PublicKey};

use seedd_proto::crypto::{NodeId, PRIVATE_KEY_FILE, PUBLIC_KEY_FILE};

/// The backup format version this seedctl understands.
pub(crate) const BACKUP_VERSION: u64 = 1;
/// Name of the file seedd imports on its next start.
pub(crate) const RESTORE_FILE: &str = "restore.json";

/// One identity's key files, derived from the backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyFiles {
    pub(crate) identity: String,
    pub(crate) nid: String,
    /// The private key text, as in the backup (with a final newline).
    pub(crate) private: String,
    /// `ssh-ed25519 AAAA… z6Mk…\n`
    pub(crate) public: String,
}

/// What an offline restore wrote.
#[derive(Debug)]
pub(crate) struct Restored {
    pub(crate) keys: Vec<KeyFiles>,
    pub(crate) restore_json: PathBuf,
}

/// The public key line seedd writes next to a private key (`radicle.pub`): the OpenSSH public
/// key with the node id as its comment. The public half of an OpenSSH private key file is
/// stored in the clear, so this works for passphrase-protected keys too.
pub(crate) fn key_files(identity: &str, private: &str) -> anyhow::Result<KeyFiles> {
    let key = PrivateKey::from_openssh(private.trim())
        .map_err(|e| anyhow!("keys.{identity}: not an OpenSSH private key ({e})"))?;
    let KeyData::Ed25519(public) = key.public_key().key_data() else {
        bail!(
            "keys.{identity}: a {} key; Radicle identities are Ed25519 keys",
            key.algorithm()
        );
    };
    let nid = NodeId::from_bytes(public.0).to_string();
    let line = PublicKey::new(KeyData::Ed25519(*public), nid.clone())
        .to_openssh()
        .map_err(|e| anyhow!("keys.{identity}: encoding the public key: {e}"))?;
    Ok(KeyFiles {
        identity: identity.to_owned(),
        nid,
        private: format!("{}\n", private.trim()),
        public: format!("{line}\n"),
    })
}

/// Identity names become directory names: no separators, no dot files.
fn valid_identity(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Checks a backup and derives its key files, without touching the disk.
pub(crate) fn plan(backup: &Value) -> anyhow::Result<Vec<KeyFiles>> {
    let Some(obj) = backup.as_object() else {
        bail!("not a seedd backup: expected a JSON object");
    };
    match obj.get("version").map(Value::as_u64) {
        Some(Some(BACKUP_VERSION)) => {}
        Some(_) => bail!(
            "backup version {} is not supported (this seedctl reads version {BACKUP_VERSION})",
            obj["version"]
        ),
        None => bail!("not a seedd backup: no \"version\""),
    }
    let Some(keys) = obj.get("keys").and_then(Value::as_object) else {
        bail!("the backup holds no keys (\"keys\": {{\"default\": …}}); an offline restore needs them");
    };
    if !keys.contains_key("default") {
        bail!("the backup has no key for the default identity (keys.default)");
    }
    let mut out = Vec::with_capacity(keys.len());
    for (identity, text) in keys {
        if !valid_identity(identity) {
            bail!("keys: invalid identity name {identity:?}");
        }
        let Some(text) = text.as_str() else {
            bail!("keys.{identity}: expected the OpenSSH private key text");
        };
        out.push(key_files(identity, text)?);
    }
    if let Some(nid) = obj.get("nid").and_then(Value::as_str) {
        let default = out.iter().find(|k| k.identity == "default");
        if let Some(k) = default.filter(|k| k.nid != nid) {
            bail!(
                "the backup's nid {nid} is not the node id of keys.default ({}): refusing a mismatched backup",
                k.nid
            );
        }
    }
    Ok(out)
}

/// Offline restore into `data_dir`: keys (mode 0600, directories 0700) and `restore.json`
/// (mode 0600; the backup without its keys). Refuses when `data_dir` already has `keys/` or
/// `index/` (an existing node's data directory). Nothing is written when the backup is invalid.
pub(crate) fn offline(backup: &Value, data_dir: &Path) -> anyhow::Result<Restored> {
    let keys = plan(backup)?;
    for existing in ["keys", "index"] {
        let p = data_dir.join(existing);
        if p.symlink_metadata().is_ok() {
            bail!(
                "{} already exists: refusing to restore over an existing node; restore into an empty data directory",
                p.display()
            );
        }
    }
    let restore_json = data_dir.join(RESTORE_FILE);
    if restore_json.symlink_metadata().is_ok() {
        bail!(
            "{} already exists: a restore is pending; remove it to restore again",
            restore_json.display()
        );
    }
    private_dir(data_dir)?;
    let keys_dir = data_dir.join("keys");
    private_dir(&keys_dir)?;
    for k in &keys {
        let dir = keys_dir.join(&k.identity);
        private_dir(&dir)?;
        write_private(&dir.join(PRIVATE_KEY_FILE), k.private.as_bytes())?;
        write_private(&dir.join(PUBLIC_KEY_FILE), k.public.as_bytes())?;
    }
    // The keys are in their files now; restore.json does not need another copy of them.
    let mut rest = backup.clone();
    if let Some(obj) = rest.as_object_mut() {
        obj.insert("keys".into(), Value::Object(serde_json::Map::new()));
    }
    let text = serde_json::to_string_pretty(&rest)?;
    write_private(&restore_json, format!("{text}\n").as_bytes())?;
    Ok(Restored { keys, restore_json })
}

/// Creates `dir` and missing parents with mode 0700 (seedd keeps `data_dir` 0700 too).
fn private_dir(dir: &Path) -> anyhow::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

/// Writes `bytes` to `path` with mode 0600: a new temporary file next to it, synced, then
/// renamed over `path` (so a reader never sees half a file, and an existing file's looser mode
/// is not kept).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        let mut file = options
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .with_context(|| format!("writing {}", tmp.display()))?;
        drop(file);
        fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Reads a backup file (`-` = standard input).
pub(crate) fn read(path: &Path) -> anyhow::Result<Value> {
    let text = if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .context("reading the backup from standard input")?;
        s
    } else {
        fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?
    };
    serde_json::from_str(&text).with_context(|| format!("{}: not a JSON backup", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use seedd_proto::crypto::{load_or_generate, ssh_public_key_string, Keypair};

    /// The OpenSSH private key text seedd writes for `kp`.
    fn key_text(kp: &Keypair) -> String {
        let dir = tempfile::tempdir().unwrap();
        kp.write(dir.path()).unwrap();
        fs::read_to_string(dir.path().join(PRIVATE_KEY_FILE)).unwrap()
    }

    fn backup(default: &Keypair, other: &Keypair) -> Value {
        serde_json::json!({
            "version": 1,
            "created_at": 1_733_230_000,
            "nid": default.nid().to_string(),
            "keys": {"default": key_text(default), "eu": key_text(other)},
            "identities": [{"name": "eu", "listen": ["0.0.0.0:8777"], "external_addresses": []}],
            "tenants": [{"name": "acme", "state": "active", "identity": "eu", "hosts": ["acme.example"]}],
            "policies": {"repos": [], "nodes": []},
            "deny": {"repos": [], "nodes": []},
            "meta": {"own_ts": {}},
        })
    }

    #[cfg(unix)]
    fn mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt as _;
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn public_key_line_is_what_seedd_writes() {
        let kp = Keypair::mock(7);
        let k = key_files("default", &key_text(&kp)).unwrap();
        assert_eq!(k.nid, kp.nid().to_string());
        let dir = tempfile::tempdir().unwrap();
        kp.write(dir.path()).unwrap();
        let written = fs::read_to_string(dir.path().join(PUBLIC_KEY_FILE)).unwrap();
        assert_eq!(k.public, written);
        assert_eq!(
            k.public,
            format!("{} {}\n", ssh_public_key_string(&kp.nid()), kp.nid())
        );
    }

    #[test]
    fn passphrase_protected_keys_keep_their_public_half() {
        let kp = Keypair::mock(8);
        let dir = tempfile::tempdir().unwrap();
        kp.write_with_passphrase(dir.path(), Some("hunter2"))
            .unwrap();
        let text = fs::read_to_string(dir.path().join(PRIVATE_KEY_FILE)).unwrap();
        let k = key_files("default", &text).unwrap();
        assert_eq!(k.nid, kp.nid().to_string());
    }

    #[test]
    fn offline_restore_writes_keys_and_restore_json() {
        let (a, b) = (Keypair::mock(1), Keypair::mock(2));
        let backup = backup(&a, &b);
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let restored = offline(&backup, &data).unwrap();
        assert_eq!(restored.keys.len(), 2);

        for (identity, kp) in [("default", &a), ("eu", &b)] {
            let dir = data.join("keys").join(identity);
            // seedd loads the key and accepts the public file next to it (no regeneration).
            let (loaded, created) = load_or_generate(&dir, None).unwrap();
            assert!(!created);
            assert_eq!(loaded.nid(), kp.nid());
            assert_eq!(
                fs::read_to_string(dir.join(PRIVATE_KEY_FILE)).unwrap(),
                key_text(kp)
            );
            #[cfg(unix)]
            {
                assert_eq!(mode(&dir), 0o700);
                assert_eq!(mode(&dir.join(PRIVATE_KEY_FILE)), 0o600);
                assert_eq!(mode(&dir.join(PUBLIC_KEY_FILE)), 0o600);
            }
        }
        let json: Value =
            serde_json::from_str(&fs::read_to_string(data.join(RESTORE_FILE)).unwrap()).unwrap();
        assert_eq!(json["tenants"], backup["tenants"]);
        assert_eq!(json["identities"], backup["identities"]);
        assert_eq!(json["nid"], backup["nid"]);
        assert_eq!(json["keys"], serde_json::json!({}));
        #[cfg(unix)]
        {
            assert_eq!(mode(&data.join(RESTORE_FILE)), 0o600);
            assert_eq!(mode(&data.join("keys")), 0o700);
            assert_eq!(mode(&data), 0o700);
        }
        // No temporary files left behind.
        let names: Vec<_> = fs::read_dir(&data)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");

        // Again into the same directory: refused, nothing changed.
        let before = fs::read(data.join(RESTORE_FILE)).unwrap();
        let e = offline(&backup, &data).unwrap_err();
        assert!(e.to_string().contains("keys"), "{e}");
        assert!(e.to_string().contains("refusing"), "{e}");
        assert_eq!(fs::read(data.join(RESTORE_FILE)).unwrap(), before);
    }

    #[test]
    fn offline_restore_refuses_an_existing_node() {
        let backup = backup(&Keypair::mock(1), &Keypair::mock(2));
        for existing in ["keys", "index"] {
            let tmp = tempfile::tempdir().unwrap();
            fs::create_dir(tmp.path().join(existing)).unwrap();
            let e = offline(&backup, tmp.path()).unwrap_err();
            assert!(e.to_string().contains(existing), "{e}");
            assert!(e.to_string().contains("refusing"), "{e}");
            assert!(!tmp.path().join(RESTORE_FILE).exists());
            let other = if existing == "keys" { "index" } else { "keys" };
            assert!(!tmp.path().join(other).exists());
        }
        // An existing but empty data directory (e.g. a fresh volume) is fine.
        let tmp = tempfile::tempdir().unwrap();
        offline(&backup, tmp.path()).unwrap();
        assert!(tmp.path().join("keys/default/radicle").is_file());
    }

    #[test]
    fn invalid_backups_write_nothing() {
        let (a, b) = (Keypair::mock(1), Keypair::mock(2));
        let good = backup(&a, &b);
        let cases: Vec<(Value, &str)> = vec![
            (serde_json::json!([]), "JSON object"),
            (
                {
                    let mut v = good.clone();
                    v["version"] = 2.into();
                    v
                },
                "version 2",
            ),
            (
                {
                    let mut v = good.clone();
                    v.as_object_mut().unwrap().remove("version");
                    v
                },
                "version",
            ),
            (
                {
                    let mut v = good.clone();
                    v.as_object_mut().unwrap().remove("keys");
                    v
                },
                "no keys",
            ),
            (
                {
                    let mut v = good.clone();
                    v["keys"] = serde_json::json!({"eu": key_text(&b)});
                    v
                },
                "keys.default",
            ),
            (
                {
                    let mut v = good.clone();
                    v["keys"]["default"] = "garbage".into();
                    v
                },
                "not an OpenSSH private key",
            ),
            (
                {
                    let mut v = good.clone();
                    v["keys"]["../x"] = key_text(&b).into();
                    v
                },
                "invalid identity",
            ),
            (
                {
                    let mut v = good.clone();
                    v["nid"] = b.nid().to_string().into();
                    v
                },
                "nid",
            ),
        ];
        for (backup, expected) in cases {
            let tmp = tempfile::tempdir().unwrap();
            let e = offline(&backup, tmp.path()).unwrap_err();
            assert!(
                e.to_string().contains(expected),
                "{e} (expected {expected:?})"
            );
            assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
        }
    }

    #[test]
    fn write_private_replaces_with_mode_0600() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("backup.json");
        fs::write(&p, "old").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        }
        write_private(&p, b"{}\n").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "{}\n");
        #[cfg(unix)]
        assert_eq!(mode(&p), 0o600);
    }
}
