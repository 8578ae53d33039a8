//! `seedctl apply -f tenants.yaml [--prune] [--dry-run]`.

use std::path::Path;

use anyhow::Context as _;
use seedd_api::{ApplyRequest, ApplyResponse};
use serde::Serialize;

use crate::client::Client;
use crate::report::{Report, Text};

pub(crate) fn run(
    client: &Client,
    file: &Path,
    prune: bool,
    dry_run: bool,
) -> anyhow::Result<Box<dyn Report>> {
    let yaml = crate::apply::read(file)?;
    let body =
        crate::apply::request(&yaml, prune, dry_run).with_context(|| file.display().to_string())?;
    let body: ApplyRequest =
        serde_json::from_value(body).with_context(|| file.display().to_string())?;
    let answer = client.post_json::<ApplyResponse>("/api/v1/apply", &body)?;
    Ok(Box::new(Applied { answer, dry_run }))
}

/// The changes, and whether a dry run was asked.
#[derive(Serialize)]
#[serde(transparent)]
struct Applied {
    answer: ApplyResponse,
    #[serde(skip)]
    dry_run: bool,
}

impl Text for Applied {
    fn text(&self) -> String {
        let changes = &self.answer.changes;
        if changes.is_empty() {
            return "no changes".to_owned();
        }
        let mut t = changes.join("\n");
        if !self.answer.applied {
            t.push_str(if self.dry_run {
                "\n(dry run: nothing changed)"
            } else {
                "\n(not applied)"
            });
        }
        t
    }
}
