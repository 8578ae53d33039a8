//! `seedctl repo maintain <rid>` and `seedctl maintenance ls`.

use seedd_api::{MaintainResponse, MaintenanceResponse, MaintenanceRun, RepoDebt};

use crate::client::Client;
use crate::report::{Report, Text};
use crate::size::format_size;

/// Runs maintenance of `rid` now and waits for it.
pub(crate) fn maintain(client: &Client, rid: &str) -> anyhow::Result<Box<dyn Report>> {
    let path = format!("/api/v1/repos/{}/maintain", crate::client::enc(rid));
    Ok(Box::new(client.post_waiting::<MaintainResponse>(&path)?))
}

/// Held repositories' debt and last run, most indebted first.
pub(crate) fn ls(client: &Client, page: &crate::cli::PageArgs) -> anyhow::Result<Box<dyn Report>> {
    let limit = page.limit.map(|l| l.to_string());
    let answer = crate::client::all_pages(
        page,
        |after| {
            client.get::<MaintenanceResponse>(&crate::client::with_query(
                "/api/v1/maintenance",
                &[("limit", limit.as_deref()), ("after", after)],
            ))
        },
        |all, more| {
            all.repos.extend(more.repos);
            all.total = more.total;
            all.next = None;
            more.next
        },
        |r| r.next.clone(),
    )?;
    Ok(Box::new(answer))
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn layout(d: &RepoDebt) -> String {
    format!(
        "{} packs ({}), {} loose objects, {} loose refs, bitmap {}, midx {}, commit-graph {}, debt {}",
        d.packs,
        format_size(d.pack_bytes),
        d.loose_objects,
        d.loose_refs,
        yes(d.bitmap),
        yes(d.midx),
        yes(d.commit_graph),
        d.score
    )
}

fn outcome(r: &MaintenanceRun) -> String {
    match &r.error {
        Some(e) => format!("{}: {e}", r.result),
        None => r.result.clone(),
    }
}

impl Text for MaintainResponse {
    fn text(&self) -> String {
        format!(
            "{}: {} ({} repack, {} ms)\nbefore: {}\nafter:  {}",
            self.rid,
            outcome(&self.run),
            self.run.repack,
            self.run.duration_ms,
            layout(&self.before),
            layout(&self.after)
        )
    }
}

impl Text for MaintenanceResponse {
    fn text(&self) -> String {
        let mut t = format!(
            "background maintenance {}; {} queued or running, {} waiting after fetches",
            if self.enabled { "on" } else { "off" },
            self.queued,
            self.waiting
        );
        if self.repos.is_empty() {
            t.push_str("\nno repositories held");
            return t;
        }
        t.push_str(&format!(
            "\n{:<40} {:>6} {:>5} {:>9} {:>8} {:>10} {:>6} {:>5} {:<13} {:<12} {}",
            "RID",
            "DEBT",
            "PACKS",
            "SIZE",
            "LOOSE",
            "LOOSE-REFS",
            "BITMAP",
            "GRAPH",
            "DUE",
            "LAST-RUN",
            "OUTCOME"
        ));
        for e in &self.repos {
            let d = &e.debt;
            let (last, out) = match &e.last_run {
                Some(r) => (r.at.to_string(), outcome(r)),
                None => ("never".to_owned(), "-".to_owned()),
            };
            t.push_str(&format!(
                "\n{:<40} {:>6} {:>5} {:>9} {:>8} {:>10} {:>6} {:>5} {:<13} {:<12} {}",
                e.rid,
                d.score,
                d.packs,
                format_size(d.pack_bytes),
                d.loose_objects,
                d.loose_refs,
                yes(d.bitmap),
                yes(d.commit_graph),
                e.due.as_deref().unwrap_or("-"),
                last,
                out
            ));
        }
        t
    }
}
