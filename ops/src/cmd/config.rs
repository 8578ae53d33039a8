//! `seedctl config reload`.

use seedd_api::ReloadResponse;

use crate::client::Client;
use crate::report::{Report, Text};

pub(crate) fn reload(client: &Client) -> anyhow::Result<Box<dyn Report>> {
    Ok(Box::new(
        client.post::<ReloadResponse>("/api/v1/config/reload")?,
    ))
}

impl Text for ReloadResponse {
    fn text(&self) -> String {
        if self.changes.is_empty() {
            return "configuration reloaded: no changes".to_owned();
        }
        let lines: Vec<String> = self.changes.iter().map(|c| format!("  {c}")).collect();
        format!("configuration reloaded:\n{}", lines.join("\n"))
    }
}
