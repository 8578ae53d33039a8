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

/// `seedctl routing ls [--rid R] [--nid N]`.
pub(crate) fn routing(
    client: &Client,
    rid: Option<&str>,
    nid: Option<&str>,
) -> anyhow::Result<Box<dyn Report>> {
    let mut q = Vec::new();
    if let Some(r) = rid {
        q.push(format!("rid={r}"));
    }
    if let Some(n) = nid {
        q.push(format!("nid={n}"));
    }
    let path = if q.is_empty() {
        "/api/v1/routing".to_owned()
    } else {
        format!("/api/v1/routing?{}", q.join("&"))
    };
    Ok(Box::new(client.get::<RoutingResponse>(&path)?))
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
        t
    }
}
