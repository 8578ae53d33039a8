//! `seedctl backup`, `seedctl restore` (online through the API, or offline into a data
//! directory with `restore.rs`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use seedd_api::{Backup, RestoreResponse};
use serde::Serialize;

use crate::client::Client;
use crate::report::{Report, Text};
use crate::restore;

/// `seedctl backup [-f FILE]`: without a file the backup itself is the output, whatever `-o`
/// says.
pub(crate) fn backup(client: &Client, file: Option<&Path>) -> anyhow::Result<Box<dyn Report>> {
    let backup = client.get::<Backup>("/api/v1/backup")?;
    let Some(path) = file else {
        return Ok(Box::new(Document(backup)));
    };
    let text = format!("{}\n", pretty(&backup)?);
    restore::write_private(path, text.as_bytes())?;
    Ok(Box::new(Written {
        file: path.display().to_string(),
        bytes: text.len(),
        tenants: backup.tenants.len(),
        keys: backup.keys.len(),
    }))
}

/// Pretty JSON with sorted keys (through `Value`), as backups have always been written.
fn pretty(backup: &Backup) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(&serde_json::to_value(
        backup,
    )?)?)
}

/// The backup itself, printed as JSON either way.
#[derive(Serialize)]
#[serde(transparent)]
struct Document(Backup);

impl Text for Document {
    fn text(&self) -> String {
        pretty(&self.0).unwrap_or_default()
    }
}

/// A backup written to a file.
#[derive(Serialize)]
struct Written {
    file: String,
    bytes: usize,
    tenants: usize,
    keys: usize,
}

impl Text for Written {
    fn text(&self) -> String {
        format!(
            "backup written to {} ({} tenant(s), {} key(s)); it holds private keys: keep it secret",
            self.file, self.tenants, self.keys
        )
    }
}

/// `seedctl restore -f FILE [--data-dir DIR]`.
pub(crate) fn restore(
    client: &Client,
    file: &Path,
    data_dir: Option<&Path>,
) -> anyhow::Result<Box<dyn Report>> {
    let backup = restore::read(file)?;
    if let Some(dir) = data_dir {
        let r = restore::offline(&backup, dir)?;
        return Ok(Box::new(Offline {
            data_dir: dir.to_path_buf(),
            restore_json: r.restore_json.display().to_string(),
            keys: r
                .keys
                .iter()
                .map(|k| OfflineKey {
                    identity: k.identity.clone(),
                    nid: k.nid.clone(),
                })
                .collect(),
        }));
    }
    if !backup.is_object() {
        bail!(
            "{}: not a seedd backup (expected a JSON object)",
            file.display()
        );
    }
    let backup: Backup = serde_json::from_value(backup)
        .with_context(|| format!("{}: not a seedd backup", file.display()))?;
    Ok(Box::new(client.post_json::<RestoreResponse>(
        "/api/v1/restore",
        &backup,
    )?))
}

impl Text for RestoreResponse {
    fn text(&self) -> String {
        let mut t = format!(
            "restored {} tenant(s), {} policy(ies)",
            self.restored.tenants, self.restored.policies
        );
        for w in &self.warnings {
            t.push_str(&format!("\nwarning: {w}"));
        }
        t
    }
}

/// An offline restore's files.
#[derive(Serialize)]
struct Offline {
    #[serde(serialize_with = "display_path")]
    data_dir: PathBuf,
    restore_json: String,
    keys: Vec<OfflineKey>,
}

#[derive(Serialize)]
struct OfflineKey {
    identity: String,
    nid: String,
}

fn display_path<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.display().to_string())
}

impl Text for Offline {
    fn text(&self) -> String {
        let dir = self.data_dir.display();
        let mut t = String::new();
        for k in &self.keys {
            t.push_str(&format!(
                "wrote {dir}/keys/{}/radicle{{,.pub}} ({})\n",
                k.identity, k.nid
            ));
        }
        t.push_str(&format!(
            "wrote {}: start seedd with this data directory to import it",
            self.restore_json
        ));
        t
    }
}
