//! `seedctl deny repo|node add|rm|ls`: the operator's global deny list and tenants' lists.

use seedd_api::{
    DenyEntries, DenyNodeChange, DenyNodeEntry, DenyRepoChange, DenyRepoEntry, DenyRequest,
};
use serde::Serialize;

use crate::cli::{DenyAction, DenyCommand};
use crate::client::{enc, with_tenant, Client};
use crate::report::{Report, Text};

pub(crate) fn run(client: &Client, command: &DenyCommand) -> anyhow::Result<Box<dyn Report>> {
    match command {
        DenyCommand::Repo { command } => repo(client, command),
        DenyCommand::Node { command } => node(client, command),
    }
}

fn repo(client: &Client, action: &DenyAction) -> anyhow::Result<Box<dyn Report>> {
    Ok(match action {
        DenyAction::Add { id, tenant } => {
            let body = DenyRequest {
                rid: Some(id.clone()),
                tenant: tenant.clone(),
                ..DenyRequest::default()
            };
            let answer = client.post_json::<DenyRepoChange>("/api/v1/deny/repos", &body)?;
            Box::new(Changed::new(answer, "repo", id, tenant, true))
        }
        DenyAction::Rm { id, tenant } => {
            let path = with_tenant(
                &format!("/api/v1/deny/repos/{}", enc(id)),
                tenant.as_deref(),
            );
            let answer = client.delete::<DenyRepoChange>(&path)?;
            Box::new(Changed::new(answer, "repo", id, tenant, false))
        }
        DenyAction::Ls { tenant } => {
            let all = client.get::<DenyEntries>("/api/v1/deny")?;
            let repos = all
                .repos
                .into_iter()
                .filter(|e| tenant.is_none() || e.tenant == *tenant)
                .collect();
            Box::new(DeniedRepos { repos })
        }
    })
}

fn node(client: &Client, action: &DenyAction) -> anyhow::Result<Box<dyn Report>> {
    Ok(match action {
        DenyAction::Add { id, tenant } => {
            let body = DenyRequest {
                nid: Some(id.clone()),
                tenant: tenant.clone(),
                ..DenyRequest::default()
            };
            let answer = client.post_json::<DenyNodeChange>("/api/v1/deny/nodes", &body)?;
            Box::new(Changed::new(answer, "node", id, tenant, true))
        }
        DenyAction::Rm { id, tenant } => {
            let path = with_tenant(
                &format!("/api/v1/deny/nodes/{}", enc(id)),
                tenant.as_deref(),
            );
            let answer = client.delete::<DenyNodeChange>(&path)?;
            Box::new(Changed::new(answer, "node", id, tenant, false))
        }
        DenyAction::Ls { tenant } => {
            let all = client.get::<DenyEntries>("/api/v1/deny")?;
            let nodes = all
                .nodes
                .into_iter()
                .filter(|e| tenant.is_none() || e.tenant == *tenant)
                .collect();
            Box::new(DeniedNodes { nodes })
        }
    })
}

/// A deny-list change (the API's answer) and what was asked.
#[derive(Serialize)]
#[serde(transparent)]
struct Changed<T> {
    answer: T,
    #[serde(skip)]
    kind: &'static str,
    #[serde(skip)]
    id: String,
    #[serde(skip)]
    tenant: Option<String>,
    #[serde(skip)]
    added: bool,
}

impl<T> Changed<T> {
    fn new(answer: T, kind: &'static str, id: &str, tenant: &Option<String>, added: bool) -> Self {
        Self {
            answer,
            kind,
            id: id.to_owned(),
            tenant: tenant.clone(),
            added,
        }
    }
}

impl<T> Text for Changed<T> {
    fn text(&self) -> String {
        let list = match &self.tenant {
            Some(t) => format!("tenant {t}'s deny list"),
            None => "the global deny list".to_owned(),
        };
        if self.added {
            format!("denied {} {} (added to {list})", self.kind, self.id)
        } else {
            format!("{} {} removed from {list}", self.kind, self.id)
        }
    }
}

/// Denied repositories (`{"repos": [...]}`).
#[derive(Serialize)]
struct DeniedRepos {
    repos: Vec<DenyRepoEntry>,
}

/// Denied nodes (`{"nodes": [...]}`).
#[derive(Serialize)]
struct DeniedNodes {
    nodes: Vec<DenyNodeEntry>,
}

fn table<'a>(id_key: &str, rows: impl Iterator<Item = (&'a str, Option<&'a str>)>) -> String {
    let mut t = format!("{:<56} TENANT", id_key);
    for (id, tenant) in rows {
        t.push_str(&format!("\n{:<56} {}", id, tenant.unwrap_or("(global)")));
    }
    t
}

impl Text for DeniedRepos {
    fn text(&self) -> String {
        table(
            "RID",
            self.repos
                .iter()
                .map(|e| (e.rid.as_str(), e.tenant.as_deref())),
        )
    }
}

impl Text for DeniedNodes {
    fn text(&self) -> String {
        table(
            "NID",
            self.nodes
                .iter()
                .map(|e| (e.nid.as_str(), e.tenant.as_deref())),
        )
    }
}
