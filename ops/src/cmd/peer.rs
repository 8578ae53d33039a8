//! `seedctl peers ls|connect|disconnect`, `seedctl routing ls`.

use seedd_api::{
    ConnectRequest, ConnectResponse, DisconnectRequest, DisconnectResponse, PeersResponse,
    RoutingResponse,
};

use crate::cli::PeersCommand;
use crate::client::Client;
use crate::report::{or_dash, Report, Text};

pub(crate) fn run(client: &Client, command: &PeersCommand) -> anyhow::Result<Box<dyn Report>> {
    Ok(match command {
        PeersCommand::Ls => Box::new(client.get::<PeersResponse>("/api/v1/peers")?),
        PeersCommand::Connect { addr } => Box::new(client.post_json::<ConnectResponse>(
            "/api/v1/peers/connect",
            &ConnectRequest { addr: addr.clone() },
        )?),
        PeersCommand::Disconnect { nid } => Box::new(client.post_json::<DisconnectResponse>(
            "/api/v1/peers/disconnect",
            &DisconnectRequest { nid: nid.clone() },
        )?),
    })
}

/// `seedctl routing ls [--rid R] [--nid N] [--limit L] [--after C]`.
pub(crate) fn routing(
    client: &Client,
    rid: Option<&str>,
    nid: Option<&str>,
    page: &crate::cli::PageArgs,
) -> anyhow::Result<Box<dyn Report>> {
    let limit = page.limit.map(|l| l.to_string());
    let answer = crate::client::all_pages(
        page,
        |after| {
            client.get::<RoutingResponse>(&crate::client::with_query(
                "/api/v1/routing",
                &[
                    ("rid", rid),
                    ("nid", nid),
                    ("limit", limit.as_deref()),
                    ("after", after),
                ],
            ))
        },
        |all, more| {
            all.routes.extend(more.routes);
            all.total = more.total;
            all.next = None;
            more.next
        },
        |r| r.next.clone(),
    )?;
    Ok(Box::new(answer))
}

impl Text for PeersResponse {
    fn text(&self) -> String {
        let mut t = format!(
            "{:<50} {:<9} {:<11} {:<22} {:<16} {:>8}",
            "NID", "LINK", "STATE", "ADDRESS", "ALIAS", "RTT"
        );
        for p in &self.peers {
            t.push_str(&format!(
                "\n{:<50} {:<9} {:<11} {:<22} {:<16} {:>8}",
                p.nid,
                p.link,
                p.state,
                p.addr,
                or_dash(p.alias.as_deref()),
                p.latency_ms
                    .map_or_else(|| "-".to_owned(), |ms| format!("{ms}ms")),
            ));
        }
        t
    }
}

impl Text for ConnectResponse {
    fn text(&self) -> String {
        format!(
            "dialing {} at {}{}",
            self.nid,
            self.addr,
            if self.new { "" } else { " (already dialing)" }
        )
    }
}

impl Text for DisconnectResponse {
    fn text(&self) -> String {
        format!(
            "disconnected {} ({} session(s) closed)",
            self.nid, self.sessions_closed
        )
    }
}

impl Text for RoutingResponse {
    fn text(&self) -> String {
        let mut t = format!("{:<40} {:<50} {:>14}", "RID", "NID", "TIMESTAMP");
        for r in &self.routes {
            t.push_str(&format!(
                "\n{:<40} {:<50} {:>14}",
                r.rid, r.nid, r.timestamp
            ));
        }
        t.push_str(&crate::report::page_footer(
            self.routes.len(),
            self.total,
            self.next.as_deref(),
        ));
        t
    }
}
