//! Checks that look at more than one value (single values check themselves while they are
//! deserialised, `fields.rs`), and that the files the configuration names exist.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;

use super::values::{valid_name, DEFAULT_IDENTITY};
use super::{Config, ConfigError, Sources};

impl Config {
    /// Cross-field checks; each error names the key and its origin.
    pub fn validate(&self, sources: &Sources) -> Result<(), ConfigError> {
        let bad = |key: &str, reason: String| ConfigError::Invalid {
            key: key.to_owned(),
            origin: sources.origin(key),
            reason,
        };
        let identities = self.identity_names().map_err(|r| bad("identities", r))?;
        self.tenant_identities(&identities)
            .map_err(|r| bad("tenants", r))?;
        self.web_tenants().map_err(|r| bad("web.tenants", r))?;
        self.fleet_keys().map_err(|(key, r)| bad(key, r))?;
        self.files_exist().map_err(|(key, r)| bad(key, r))
    }

    /// `fleet.shard` and `fleet.placement` come together (the daemon checks, when it loads the
    /// file, that the shard is named in it).
    fn fleet_keys(&self) -> Result<(), (&'static str, String)> {
        let f = &self.fleet;
        match (&f.placement, f.enabled()) {
            (None, false) => Ok(()),
            (Some(_), false) => Err((
                "fleet.shard",
                "set it to this seed's shard in fleet.placement (or remove fleet.placement)".into(),
            )),
            (None, true) => Err((
                "fleet.placement",
                "the placement file is needed to know which repositories this shard seeds".into(),
            )),
            (Some(path), true) if !path.is_file() => Err((
                "fleet.placement",
                format!("{} is not a readable file", path.display()),
            )),
            (Some(_), true) => Ok(()),
        }
    }

    /// `[[web.tenants]]` names are tenant names, each at most once.
    fn web_tenants(&self) -> Result<(), String> {
        let mut names = BTreeSet::new();
        for (i, t) in self.web.tenants.iter().enumerate() {
            if !valid_name(&t.name) || !names.insert(&*t.name) {
                return Err(format!(
                    "entry {i}: name {:?} must be a tenant's name (1-63 of a-z, 0-9, -), once",
                    t.name
                ));
            }
        }
        Ok(())
    }

    /// Identity names are unique, not `default`, and each identity listens somewhere.
    fn identity_names(&self) -> Result<BTreeSet<&str>, String> {
        let mut names = BTreeSet::new();
        for (i, id) in self.identities.iter().enumerate() {
            if !valid_name(&id.name) || id.name == DEFAULT_IDENTITY || !names.insert(&*id.name) {
                return Err(format!(
                    "entry {i}: name {:?} must be unique, not \"default\", 1-63 of a-z, 0-9, -",
                    id.name
                ));
            }
            if id.listen.is_empty() || id.listen.iter().any(|l| l.parse::<SocketAddr>().is_err()) {
                return Err(format!(
                    "entry {i} ({}): listen must be one or more ip:port",
                    id.name
                ));
            }
        }
        Ok(names)
    }

    /// Tenant names are unique and each tenant's identity is declared.
    fn tenant_identities(&self, identities: &BTreeSet<&str>) -> Result<(), String> {
        let mut tenants = BTreeSet::new();
        for (i, t) in self.tenants.iter().enumerate() {
            if !valid_name(&t.name) || !tenants.insert(&t.name) {
                return Err(format!(
                    "entry {i}: name {:?} must be unique, 1-63 of a-z, 0-9, -",
                    t.name
                ));
            }
            if let Some(id) = &t.identity {
                if id != DEFAULT_IDENTITY && !identities.contains(id.as_str()) {
                    return Err(format!(
                        "tenant {}: identity {id:?} is not declared in [[identities]]",
                        t.name
                    ));
                }
            }
        }
        Ok(())
    }

    /// Certificate, key and CA files named by `http.tls` / `admin.tls` are files.
    fn files_exist(&self) -> Result<(), (&'static str, String)> {
        let http = self.http.tls.iter().flat_map(|tls| {
            [
                ("http.tls.cert", Some(&tls.cert)),
                ("http.tls.key", Some(&tls.key)),
            ]
        });
        let admin = self.admin.tls.iter().flat_map(|tls| {
            [
                ("admin.tls.cert", Some(&tls.cert)),
                ("admin.tls.key", Some(&tls.key)),
                ("admin.tls.client_ca", tls.client_ca.as_ref()),
            ]
        });
        for (key, path) in http.chain(admin) {
            if let Some(path) = path.filter(|p| !Path::is_file(p)) {
                return Err((key, format!("{} is not a readable file", path.display())));
            }
        }
        Ok(())
    }
}
