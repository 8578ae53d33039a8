//! Reading the configuration: built-in defaults < TOML file < `SEEDD_*` environment <
//! command-line overrides, deserialised into [`Config`] (which checks each value), then the
//! cross-field checks. Errors name the key and where its value came from ([`Sources`]).

use std::path::{Path, PathBuf};

use super::values::LogFormat;
use super::{Config, ConfigError};

/// Environment prefix: `SEEDD_<SECTION>__<KEY>`.
const ENV_PREFIX: &str = "SEEDD";
/// Separator between levels in environment keys.
const ENV_SEPARATOR: &str = "__";
/// Keys whose environment value is a comma-separated list.
const ENV_LIST_KEYS: &[&str] = &[
    "p2p.listen",
    "p2p.external_addresses",
    "p2p.connect",
    "http.rate.trusted_proxies",
    "p2p.rate.exempt_cidrs",
    "web.pinned",
];

/// Where the configuration came from, to name the origin of a bad value.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub file: Option<PathBuf>,
    file_keys: Vec<String>,
}

impl Sources {
    /// Name the source that set `key`: environment, file, or built-in default.
    pub fn origin(&self, key: &str) -> String {
        let env = env_name(key);
        if std::env::var_os(&env).is_some() {
            return format!("environment variable {env}");
        }
        if let Some(file) = &self.file {
            if self.file_keys.iter().any(|k| k == key) {
                return format!("file {}", file.display());
            }
        }
        "built-in default".to_owned()
    }

    /// A value that did not deserialise: a bad value (the check's message) names its key and
    /// origin; anything else (a wrong type, which names its key already) is passed on.
    fn value_error(&self, e: config::ConfigError) -> ConfigError {
        match e {
            config::ConfigError::At {
                error,
                key: Some(key),
                ..
            } if matches!(*error, config::ConfigError::Message(_)) => {
                let base = key.split('[').next().unwrap_or(&key);
                ConfigError::Invalid {
                    origin: self.origin(base),
                    key,
                    reason: error.to_string(),
                }
            }
            e => ConfigError::Load(e),
        }
    }
}

/// `http.listen` → `SEEDD_HTTP__LISTEN`.
pub fn env_name(key: &str) -> String {
    format!(
        "{ENV_PREFIX}_{}",
        key.replace('.', ENV_SEPARATOR).to_ascii_uppercase()
    )
}

/// Overrides given on the command line (highest precedence).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub data_dir: Option<PathBuf>,
    pub log_format: Option<LogFormat>,
    pub log_level: Option<String>,
}

impl Config {
    /// Load defaults < `file` (if given; must exist) < `SEEDD_*` env < command-line overrides,
    /// then validate.
    pub fn load(
        file: Option<&Path>,
        overrides: &Overrides,
    ) -> Result<(Self, Sources), ConfigError> {
        let defaults = config::Config::try_from(&Config::default())?;
        let mut builder = config::Config::builder().add_source(defaults);
        let mut sources = Sources::default();
        if let Some(path) = file {
            if !path.is_file() {
                return Err(ConfigError::FileNotFound(path.to_owned()));
            }
            let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
                path: path.to_owned(),
                error,
            })?;
            let table: toml::Table = text.parse().map_err(|error| ConfigError::Parse {
                path: path.to_owned(),
                error,
            })?;
            sources.file_keys = flatten_keys(&table, "");
            check_known_keys(path, &sources.file_keys)?;
            sources.file = Some(path.to_owned());
            builder = builder.add_source(
                config::File::from(path)
                    .format(config::FileFormat::Toml)
                    .required(true),
            );
        }
        let mut env = config::Environment::with_prefix(ENV_PREFIX)
            .prefix_separator("_")
            .separator(ENV_SEPARATOR)
            .list_separator(",")
            .try_parsing(true);
        for key in ENV_LIST_KEYS {
            env = env.with_list_parse_key(key);
        }
        builder = builder.add_source(env);
        if let Some(dir) = &overrides.data_dir {
            builder = builder.set_override("data_dir", dir.to_string_lossy().to_string())?;
        }
        if let Some(f) = &overrides.log_format {
            builder = builder.set_override("log.format", f.as_str())?;
        }
        if let Some(l) = &overrides.log_level {
            builder = builder.set_override("log.level", l.as_str())?;
        }
        let cfg: Config = builder
            .build()?
            .try_deserialize()
            .map_err(|e| sources.value_error(e))?;
        cfg.validate(&sources)?;
        Ok((cfg, sources))
    }
}

/// Dotted keys of every leaf in a TOML table (`http.tls.cert`, …).
fn flatten_keys(table: &toml::Table, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => {
                out.push(key.clone());
                out.extend(flatten_keys(t, &key));
            }
            _ => out.push(key),
        }
    }
    out
}

/// Reject keys the daemon does not know, so a typo is an error and not a silent default.
fn check_known_keys(file: &Path, keys: &[String]) -> Result<(), ConfigError> {
    let mut known = flatten_keys(&toml::Table::try_from(Config::default())?, "");
    // Optional keys absent from the serialized defaults.
    known.extend(
        [
            "http.tls",
            "http.tls.cert",
            "http.tls.key",
            "admin.token_file",
            "admin.tls",
            "admin.tls.cert",
            "admin.tls.key",
            "admin.tls.client_ca",
            "keys.secret",
            "keys.passphrase_file",
            "fleet.placement",
        ]
        .map(str::to_owned),
    );
    match keys.iter().find(|k| !known.contains(k)) {
        Some(k) => Err(ConfigError::UnknownKey {
            file: file.to_owned(),
            key: k.clone(),
        }),
        None => Ok(()),
    }
}
