//! `seedctl status`, `seedctl rescan`.

use seedd_api::{ScanReport, Status};

use crate::client::Client;
use crate::report::{Report, Text};

pub(crate) fn status(client: &Client) -> anyhow::Result<Box<dyn Report>> {
    Ok(Box::new(client.get::<Status>("/api/v1/status")?))
}

pub(crate) fn rescan(client: &Client, repos: Vec<String>) -> anyhow::Result<Box<dyn Report>> {
    if repos.is_empty() {
        return Ok(Box::new(client.post::<ScanReport>("/api/v1/rescan")?));
    }
    let body = seedd_api::RescanRequest { repos };
    Ok(Box::new(
        client.post_json::<ScanReport>("/api/v1/rescan", &body)?,
    ))
}

impl Text for Status {
    fn text(&self) -> String {
        let mut t = format!(
            "NID      {}\nalias    {}\nversion  {}\nuptime   {}s\nready    {}\nrepos    {} ({} public, {} private)\nhttp     {}{}\nadmin    {}",
            self.nid,
            self.alias,
            self.version,
            self.uptime_seconds,
            self.ready,
            self.repos.total,
            self.repos.public,
            self.repos.private,
            self.http.listen,
            if self.http.tls { " (TLS)" } else { "" },
            self.admin.listen,
        );
        if let Some(p) = &self.p2p {
            t.push_str(&format!(
                "\np2p      {} (relay {}; {} sessions; {} routes; {} known nodes)",
                p.listen.join(", "),
                if p.relay { "on" } else { "off" },
                p.sessions,
                p.routing_entries,
                p.known_nodes,
            ));
        }
        t
    }
}

impl Text for ScanReport {
    fn text(&self) -> String {
        let mut t = format!(
            "scanned {}  added {}  updated {}  unchanged {}  removed {}  failed {}  ({} ms)",
            self.scanned,
            self.added,
            self.updated,
            self.unchanged,
            self.removed,
            self.failed,
            self.duration_ms
        );
        for e in &self.errors {
            t.push_str(&format!("\n  {e}"));
        }
        t
    }
}
