//! `seedctl tenant …`, `seedctl quota set`, `seedctl host add|rm`, `seedctl usage`.

use anyhow::{anyhow, bail};
use seedd_api::{
    HostRequest, Quotas, QuotasPatch, Rate, RatePatch, Tenant, TenantCreate, TenantList,
    TenantRemoved, UsageResponse,
};
use serde::Serialize;

use crate::cli::{HostCommand, QuotaCommand, TenantCommand};
use crate::client::{enc, with_tenant, Client};
use crate::report::{join, limit_count, limit_size, or_dash, rate_text, used_of, Report, Text};
use crate::size::Limit;

pub(crate) fn run(client: &Client, command: &TenantCommand) -> anyhow::Result<Box<dyn Report>> {
    Ok(match command {
        TenantCommand::Create {
            name,
            hosts,
            identity,
            repos,
            bytes,
            egress_per_day,
            rps,
            burst,
        } => {
            let quotas =
                (repos.is_some() || bytes.is_some() || egress_per_day.is_some()).then(|| Quotas {
                    repos: repos.and_then(Limit::value),
                    bytes: bytes.and_then(Limit::value),
                    egress_bytes_per_day: egress_per_day.and_then(Limit::value),
                });
            let rate = if rps.is_some() || burst.is_some() {
                Some(Rate {
                    requests_per_second: count32(*rps, "--rps")?,
                    burst: count32(*burst, "--burst")?,
                })
            } else {
                None
            };
            let body = TenantCreate {
                name: name.clone(),
                hosts: hosts.clone(),
                identity: identity.clone(),
                quotas,
                rate,
            };
            let tenant = client.post_json::<Tenant>("/api/v1/tenants", &body)?;
            Box::new(Shown {
                tenant,
                view: View::Created,
            })
        }
        TenantCommand::Ls => Box::new(client.get::<TenantList>("/api/v1/tenants")?),
        TenantCommand::Show { name } => Box::new(Shown {
            tenant: client.get::<Tenant>(&format!("/api/v1/tenants/{}", enc(name)))?,
            view: View::Detail,
        }),
        TenantCommand::Suspend { name } | TenantCommand::Resume { name } => {
            let action = if matches!(command, TenantCommand::Suspend { .. }) {
                "suspend"
            } else {
                "resume"
            };
            Box::new(Shown {
                tenant: client
                    .post::<Tenant>(&format!("/api/v1/tenants/{}/{action}", enc(name)))?,
                view: View::State,
            })
        }
        TenantCommand::Rm { name } => {
            Box::new(client.delete::<TenantRemoved>(&format!("/api/v1/tenants/{}", enc(name)))?)
        }
        TenantCommand::Rate { name, rps, burst } => {
            if rps.is_none() && burst.is_none() {
                bail!("tenant rate: give --rps and/or --burst");
            }
            let body = RatePatch {
                requests_per_second: Limit::patch(*rps),
                burst: Limit::patch(*burst),
            };
            Box::new(Shown {
                tenant: client
                    .put_json::<Tenant>(&format!("/api/v1/tenants/{}/rate", enc(name)), &body)?,
                view: View::Rate,
            })
        }
    })
}

/// A count flag as the API's 32-bit rate value.
fn count32(limit: Option<Limit>, flag: &str) -> anyhow::Result<Option<u32>> {
    limit
        .and_then(Limit::value)
        .map(|n| u32::try_from(n).map_err(|_| anyhow!("{flag} {n}: at most {}", u32::MAX)))
        .transpose()
}

pub(crate) fn quota(client: &Client, command: &QuotaCommand) -> anyhow::Result<Box<dyn Report>> {
    let QuotaCommand::Set {
        tenant,
        repos,
        bytes,
        egress_per_day,
    } = command;
    let body = QuotasPatch {
        repos: Limit::patch(*repos),
        bytes: Limit::patch(*bytes),
        egress_bytes_per_day: Limit::patch(*egress_per_day),
    };
    if body.is_empty() {
        bail!("quota set: give at least one of --repos, --bytes, --egress-per-day");
    }
    Ok(Box::new(Shown {
        tenant: client
            .put_json::<Tenant>(&format!("/api/v1/tenants/{}/quota", enc(tenant)), &body)?,
        view: View::Quotas,
    }))
}

pub(crate) fn host(client: &Client, command: &HostCommand) -> anyhow::Result<Box<dyn Report>> {
    let (tenant, verb) = match command {
        HostCommand::Add { tenant, host } => (
            client.post_json::<Tenant>(
                &format!("/api/v1/tenants/{}/hosts", enc(tenant)),
                &HostRequest { host: host.clone() },
            )?,
            format!("added host {host}"),
        ),
        HostCommand::Rm { tenant, host } => (
            client.delete::<Tenant>(&format!(
                "/api/v1/tenants/{}/hosts/{}",
                enc(tenant),
                enc(host)
            ))?,
            format!("removed host {host}"),
        ),
    };
    Ok(Box::new(Shown {
        tenant,
        view: View::Hosts(verb),
    }))
}

pub(crate) fn usage(client: &Client, tenant: Option<&str>) -> anyhow::Result<Box<dyn Report>> {
    Ok(Box::new(client.get::<UsageResponse>(&with_tenant(
        "/api/v1/usage",
        tenant,
    ))?))
}

/// Which part of a tenant a command shows.
enum View {
    Created,
    Detail,
    State,
    Rate,
    Quotas,
    /// After a host change (what was done).
    Hosts(String),
}

/// A tenant (the answer of every tenant change) and what to show of it.
#[derive(Serialize)]
#[serde(transparent)]
struct Shown {
    tenant: Tenant,
    #[serde(skip)]
    view: View,
}

impl Text for Shown {
    fn text(&self) -> String {
        let t = &self.tenant;
        match &self.view {
            View::Created => format!("created tenant {}\n{}", t.name, detail(t)),
            View::Detail => detail(t),
            View::State => format!("tenant {} is {}", t.name, t.state.as_str()),
            View::Rate => format!("{} rate: {}", t.name, rate_text(&t.rate)),
            View::Quotas => format!(
                "{} quotas: repos {}, bytes {}, egress per day {}",
                t.name,
                limit_count(t.quotas.repos),
                limit_size(t.quotas.bytes),
                limit_size(t.quotas.egress_bytes_per_day),
            ),
            View::Hosts(verb) => format!("{verb}; {} hosts: {}", t.name, join(&t.hosts)),
        }
    }
}

/// Every field of a tenant, then its repositories.
fn detail(t: &Tenant) -> String {
    let (q, u) = (&t.quotas, &t.usage);
    let mut out = format!(
        "name      {}\nstate     {}\nidentity  {}\nhosts     {}\ncreated   {}\nrepos     {}\nstored    {}\negress    {} today\nrate      {}\nfollows   {}\ndeny      repos: {}; nodes: {}",
        t.name,
        t.state.as_str(),
        t.identity,
        join(&t.hosts),
        t.created_at,
        used_of(Some(u.repos), q.repos, false),
        used_of(Some(u.stored_bytes), q.bytes, true),
        used_of(Some(u.egress_today_bytes), q.egress_bytes_per_day, true),
        rate_text(&t.rate),
        join(&t.follows),
        join(&t.deny.repos),
        join(&t.deny.nodes),
    );
    if !t.repos.is_empty() {
        out.push_str(&format!(
            "\n\n{:<40} {:<9} {:<24} OWNER",
            "RID", "SCOPE", "ALIAS"
        ));
        for r in &t.repos {
            out.push_str(&format!(
                "\n{:<40} {:<9} {:<24} {}",
                r.rid,
                r.scope.as_str(),
                or_dash(r.alias.as_deref()),
                if r.owner { "yes" } else { "no" }
            ));
        }
    }
    out
}

impl Text for TenantList {
    fn text(&self) -> String {
        let mut t = format!(
            "{:<24} {:<10} {:<12} {:<16} {:<24} {:<24} HOSTS",
            "NAME", "STATE", "IDENTITY", "REPOS", "STORED", "EGRESS TODAY"
        );
        for x in &self.tenants {
            let (q, u) = (&x.quotas, &x.usage);
            t.push_str(&format!(
                "\n{:<24} {:<10} {:<12} {:<16} {:<24} {:<24} {}",
                x.name,
                x.state.as_str(),
                x.identity,
                used_of(Some(u.repos), q.repos, false),
                used_of(Some(u.stored_bytes), q.bytes, true),
                used_of(Some(u.egress_today_bytes), q.egress_bytes_per_day, true),
                join(&x.hosts),
            ));
        }
        t
    }
}

impl Text for TenantRemoved {
    fn text(&self) -> String {
        let mut t = format!("removed tenant {}", self.name);
        if !self.purged.is_empty() {
            t.push_str(&format!(
                "; purged {} repository(ies) no other tenant held:",
                self.purged.len()
            ));
            for rid in &self.purged {
                t.push_str(&format!("\n  {rid}"));
            }
        }
        t
    }
}

impl Text for UsageResponse {
    fn text(&self) -> String {
        let mut t = format!(
            "{:<24} {:<10} {:<16} {:<24} {}",
            "TENANT", "STATE", "REPOS", "STORED", "EGRESS TODAY"
        );
        for u in &self.usage {
            t.push_str(&format!(
                "\n{:<24} {:<10} {:<16} {:<24} {}",
                u.tenant,
                u.state.as_str(),
                used_of(Some(u.repos), u.quota_repos, false),
                used_of(Some(u.stored_bytes), u.quota_bytes, true),
                used_of(
                    Some(u.egress_today_bytes),
                    u.quota_egress_bytes_per_day,
                    true
                ),
            ));
        }
        t
    }
}
