//! `seedctl queue ls`.

use seedd_api::QueueResponse;

use crate::client::Client;
use crate::report::{Report, Text};

pub(crate) fn ls(client: &Client) -> anyhow::Result<Box<dyn Report>> {
    Ok(Box::new(client.get::<QueueResponse>("/api/v1/queue")?))
}

impl Text for QueueResponse {
    fn text(&self) -> String {
        if self.active.is_empty() && self.queued.is_empty() {
            return "no fetches running or waiting".to_owned();
        }
        let mut t = format!(
            "{:<7} {:<40} {:<50} {:>8}",
            "STATE", "RID", "FROM", "SECONDS"
        );
        let rows = self
            .active
            .iter()
            .map(|e| ("active", &e.rid, &e.from, e.seconds.to_string()))
            .chain(
                self.queued
                    .iter()
                    .map(|e| ("queued", &e.rid, &e.from, "-".to_owned())),
            );
        for (state, rid, from, seconds) in rows {
            t.push_str(&format!(
                "\n{:<7} {:<40} {:<50} {:>8}",
                state, rid, from, seconds
            ));
        }
        t
    }
}
