//! `seedctl identity ls|create`.

use seedd_api::{IdentitiesResponse, IdentityCreate, IdentityInfo};

use crate::cli::IdentityCommand;
use crate::client::Client;
use crate::report::{join, Report, Text};

pub(crate) fn run(client: &Client, command: &IdentityCommand) -> anyhow::Result<Box<dyn Report>> {
    Ok(match command {
        IdentityCommand::Ls => Box::new(client.get::<IdentitiesResponse>("/api/v1/identities")?),
        IdentityCommand::Create {
            name,
            listen,
            external_addresses,
        } => {
            let body = IdentityCreate {
                name: name.clone(),
                listen: listen.clone(),
                external_addresses: external_addresses.clone(),
                inventory_cap: None,
            };
            Box::new(client.post_json::<IdentityInfo>("/api/v1/identities", &body)?)
        }
    })
}

impl Text for IdentitiesResponse {
    fn text(&self) -> String {
        let mut t = format!(
            "{:<16} {:<50} {:<24} {:<24} {:>11} TENANTS",
            "NAME", "NID", "LISTEN", "EXTERNAL", "INVENTORY"
        );
        for i in &self.identities {
            t.push_str(&format!(
                "\n{:<16} {:<50} {:<24} {:<24} {:>11} {}",
                i.name,
                i.nid,
                join(&i.listen),
                join(&i.external_addresses),
                format!("{}/{}", i.inventory, i.cap),
                join(&i.tenants),
            ));
        }
        t
    }
}

impl Text for IdentityInfo {
    fn text(&self) -> String {
        format!(
            "created identity {} (node id {}), listening on {}",
            self.name,
            self.nid,
            join(&self.listen)
        )
    }
}
