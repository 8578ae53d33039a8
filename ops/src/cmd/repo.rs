//! `seedctl repo ls|show|seed|unseed|purge`, `seedctl fetch`.

use seedd_api::{
    FetchRequest, FetchResponse, PurgeResponse, RepoResponse, ReposResponse, SeedRequest,
    SeedResponse, UnseedRequest, UnseedResponse,
};
use serde::Serialize;

use crate::cli::RepoCommand;
use crate::client::{all_pages, enc, with_query, Client};
use crate::report::{join, Report, Text};

pub(crate) fn run(client: &Client, command: &RepoCommand) -> anyhow::Result<Box<dyn Report>> {
    Ok(match command {
        RepoCommand::Ls { tenant, page } => Box::new(repos(client, tenant.as_deref(), page)?),
        RepoCommand::Show { rid } => {
            Box::new(client.get::<RepoResponse>(&format!("/api/v1/repos/{rid}"))?)
        }
        RepoCommand::Seed {
            rid,
            tenant,
            scope,
            alias,
            from,
        } => {
            let body = SeedRequest {
                scope: scope.clone(),
                from: from.clone(),
                tenant: tenant.clone(),
                alias: alias.clone(),
            };
            Box::new(
                client.post_json::<SeedResponse>(
                    &format!("/api/v1/repos/{}/seed", enc(rid)),
                    &body,
                )?,
            )
        }
        RepoCommand::Unseed { rid, tenant } => {
            let body = UnseedRequest {
                tenant: tenant.clone(),
            };
            let answer = client.post_json::<UnseedResponse>(
                &format!("/api/v1/repos/{}/unseed", enc(rid)),
                &body,
            )?;
            Box::new(Unseeded {
                answer,
                tenant: tenant.clone(),
            })
        }
        RepoCommand::Maintain { rid } => super::maintenance::maintain(client, rid)?,
        RepoCommand::Purge { rid } => {
            Box::new(client.post::<PurgeResponse>(&format!("/api/v1/repos/{}/purge", enc(rid)))?)
        }
    })
}

/// `GET /api/v1/repos`: one page, or every page merged into one answer (`next` null).
fn repos(
    client: &Client,
    tenant: Option<&str>,
    page: &crate::cli::PageArgs,
) -> anyhow::Result<ReposResponse> {
    let limit = page.limit.map(|l| l.to_string());
    all_pages(
        page,
        |after| {
            client.get::<ReposResponse>(&with_query(
                "/api/v1/repos",
                &[
                    ("tenant", tenant),
                    ("limit", limit.as_deref()),
                    ("after", after),
                ],
            ))
        },
        |all, more| {
            all.repos.extend(more.repos);
            all.total = more.total;
            all.next = None;
            more.next
        },
        |r| r.next.clone(),
    )
}

pub(crate) fn fetch(
    client: &Client,
    rid: &str,
    from: Option<&str>,
) -> anyhow::Result<Box<dyn Report>> {
    let body = FetchRequest {
        rid: rid.to_owned(),
        from: from.map(str::to_owned),
    };
    Ok(Box::new(
        client.post_json::<FetchResponse>("/api/v1/fetch", &body)?,
    ))
}

impl Text for ReposResponse {
    fn text(&self) -> String {
        let with_tenants = self.repos.iter().any(|r| r.tenants.is_some());
        let mut t = format!(
            "{:<40} {:<24} {:<8} {:>4} {:>5}",
            "RID", "NAME", "VISIBLE", "DELS", "PEERS"
        );
        if with_tenants {
            t.push_str(" TENANTS");
        }
        for r in &self.repos {
            t.push_str(&format!(
                "\n{:<40} {:<24} {:<8} {:>4} {:>5}",
                r.rid,
                r.name,
                r.visibility.label(),
                r.delegates.len(),
                r.namespaces.len(),
            ));
            if with_tenants {
                t.push_str(&format!(" {}", join(r.tenants.as_deref().unwrap_or(&[]))));
            }
        }
        t.push_str(&crate::report::page_footer(
            self.repos.len(),
            self.total,
            self.next.as_deref(),
        ));
        t
    }
}

impl Text for RepoResponse {
    fn text(&self) -> String {
        let r = &self.repo;
        let mut t = format!(
            "RID         {}\nname        {}\ndescription {}\nbranch      {}\nhead        {}\nvisibility  {}\nthreshold   {}\ndelegates   {}",
            r.rid,
            r.name,
            r.description,
            r.default_branch,
            r.head.as_deref().unwrap_or("null"),
            r.visibility.label(),
            r.threshold,
            r.delegates.join(", "),
        );
        if let Some(tenants) = &r.tenants {
            t.push_str(&format!("\n{:<11} {}", "tenants", join(tenants)));
        }
        for sr in &self.sigrefs {
            let state = match &sr.error {
                None => format!("ok ({})", sr.level.map_or("null", |l| l.as_str())),
                Some(e) => format!("INVALID: {e}"),
            };
            t.push_str(&format!("\npeer        {} {}", sr.nid, state));
        }
        t
    }
}

impl Text for SeedResponse {
    fn text(&self) -> String {
        let mut t = format!("seeding {}", self.rid);
        let mut notes = Vec::new();
        if let Some(name) = &self.tenant {
            t.push_str(&format!(" for tenant {name}"));
            notes.push(if self.owner {
                "owner".to_owned()
            } else {
                "shared: another tenant owns it".to_owned()
            });
        }
        notes.push(format!("scope {}", self.scope.as_str()));
        t.push_str(&format!(" ({})", notes.join("; ")));
        if let Some(n) = &self.fetching_from {
            t.push_str(&format!("; fetching from {n}"));
        }
        t
    }
}

/// The answer to `repo unseed`, and for whom it was asked.
#[derive(Serialize)]
#[serde(transparent)]
struct Unseeded {
    answer: UnseedResponse,
    #[serde(skip)]
    tenant: Option<String>,
}

impl Text for Unseeded {
    fn text(&self) -> String {
        let whom = self
            .tenant
            .as_deref()
            .map(|n| format!(" for tenant {n}"))
            .unwrap_or_default();
        let rid = &self.answer.rid;
        let mut t = if self.answer.unseeded {
            format!("no longer seeding {rid}{whom}")
        } else {
            format!("{rid} was not seeded{whom}")
        };
        if self.answer.purged {
            t.push_str(" (nobody seeds it any more: purged from storage)");
        }
        t
    }
}

impl Text for PurgeResponse {
    fn text(&self) -> String {
        let mut t = format!("purged {}", self.rid);
        if !self.tenants.is_empty() {
            t.push_str(&format!(
                " (removed from tenants {})",
                self.tenants.join(", ")
            ));
        }
        t
    }
}

impl Text for FetchResponse {
    fn text(&self) -> String {
        let mut t = format!(
            "fetched {} from {}: {} namespace(s) updated, {} ref update(s){}",
            self.rid,
            self.from,
            self.updated.len(),
            self.refs_written,
            if self.cloned { " (new)" } else { "" }
        );
        for p in &self.pruned {
            t.push_str(&format!("\n  pruned {}: {}", p.nid, p.detail));
        }
        t
    }
}
