//! `seedctl apply -f tenants.yaml`: the declarative tenants file, turned into the JSON body of
//! `POST /api/v1/apply`.

use anyhow::{anyhow, bail, Context as _};
use serde_json::{Map, Value};

use crate::size::{parse_count_limit, parse_size_limit};

/// Parses a tenants file (top level `tenants:`, a list of TenantSpec) into the JSON body of
/// `POST /api/v1/apply`: `{"tenants": [...], "prune": bool, "dry_run": bool}`.
///
/// The specs are passed on as written (the daemon validates them), except that quota values
/// may also be written as on the command line: `bytes: 1GiB`, `egress_bytes_per_day: unlimited`,
/// `repos: unlimited` (and `unlimited` for rate values); they are sent as integers or `null`.
pub(crate) fn request(yaml: &str, prune: bool, dry_run: bool) -> anyhow::Result<Value> {
    let tenants = tenants(yaml)?;
    Ok(serde_json::json!({ "tenants": tenants, "prune": prune, "dry_run": dry_run }))
}

/// The `tenants` list of a tenants file, as JSON.
pub(crate) fn tenants(yaml: &str) -> anyhow::Result<Value> {
    let mut doc: serde_norway::Value = serde_norway::from_str(yaml)?;
    doc.apply_merge()?;
    let doc = to_json(&doc, "")?;
    let Value::Object(mut top) = doc else {
        bail!("expected a mapping with a `tenants:` list at the top level");
    };
    if let Some(k) = top.keys().find(|k| k.as_str() != "tenants") {
        bail!("unknown top-level key {k:?}: the file holds `tenants:` only");
    }
    let tenants = match top.remove("tenants") {
        Some(Value::Array(list)) => list,
        // `tenants:` with nothing under it: an empty list.
        Some(Value::Null) => Vec::new(),
        Some(_) => bail!("`tenants` must be a list"),
        None => bail!("expected a mapping with a `tenants:` list at the top level"),
    };
    let mut out = Vec::with_capacity(tenants.len());
    for (i, mut t) in tenants.into_iter().enumerate() {
        let Some(spec) = t.as_object_mut() else {
            bail!("tenants[{i}]: expected a mapping (name, hosts, quotas, …)");
        };
        let name = match spec.get("name") {
            Some(Value::String(n)) => n.clone(),
            _ => bail!("tenants[{i}]: `name` is required and must be a string"),
        };
        normalise_limits(spec, &name)?;
        out.push(t);
    }
    Ok(Value::Array(out))
}

/// Quota and rate values written as sizes or `unlimited` → integers or `null`.
fn normalise_limits(spec: &mut Map<String, Value>, name: &str) -> anyhow::Result<()> {
    if let Some(Value::Object(q)) = spec.get_mut("quotas") {
        for (field, size) in [
            ("repos", false),
            ("bytes", true),
            ("egress_bytes_per_day", true),
        ] {
            if let Some(v) = q.get_mut(field) {
                if let Value::String(s) = v {
                    let limit = if size {
                        parse_size_limit(s)
                    } else {
                        parse_count_limit(s)
                    }
                    .map_err(|e| anyhow!("tenant {name}: quotas.{field}: {e}"))?;
                    *v = limit.to_json();
                }
            }
        }
    }
    if let Some(Value::Object(r)) = spec.get_mut("rate") {
        for field in ["requests_per_second", "burst"] {
            if let Some(v) = r.get_mut(field) {
                if let Value::String(s) = v {
                    let limit = parse_count_limit(s)
                        .map_err(|e| anyhow!("tenant {name}: rate.{field}: {e}"))?;
                    *v = limit.to_json();
                }
            }
        }
    }
    Ok(())
}

/// YAML → JSON. Mapping keys must be strings (numbers and booleans are turned into their text);
/// tags (`!foo`) are refused.
fn to_json(v: &serde_norway::Value, at: &str) -> anyhow::Result<Value> {
    use serde_norway::Value as Y;
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => {
            if let Some(u) = n.as_u64() {
                Value::from(u)
            } else if let Some(i) = n.as_i64() {
                Value::from(i)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                Value::Number(
                    serde_json::Number::from_f64(f)
                        .ok_or_else(|| anyhow!("{}: {f} is not a JSON number", here(at)))?,
                )
            }
        }
        Y::String(s) => Value::String(s.clone()),
        Y::Sequence(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| to_json(item, &format!("{at}[{i}]")))
                .collect::<anyhow::Result<_>>()?,
        ),
        Y::Mapping(m) => {
            let mut out = Map::new();
            for (k, item) in m {
                let key = match k {
                    Y::String(s) => s.clone(),
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    _ => bail!("{}: mapping keys must be strings", here(at)),
                };
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                let value = to_json(item, &path)?;
                out.insert(key, value);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => bail!("{}: YAML tags ({}) are not supported", here(at), t.tag),
    })
}

fn here(at: &str) -> &str {
    if at.is_empty() {
        "top level"
    } else {
        at
    }
}

/// Reads the tenants file (`-` = standard input).
pub(crate) fn read(path: &std::path::Path) -> anyhow::Result<String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .context("reading the tenants file from standard input")?;
        return Ok(s);
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the contract (docs/admin-api.yaml, TenantSpec).
    const EXAMPLE: &str = r#"
tenants:
  - name: acme
    state: active            # optional
    identity: default        # optional
    hosts: [acme.seed.example]
    quotas: {repos: 10, bytes: 1073741824, egress_bytes_per_day: null}
    rate: {requests_per_second: 20, burst: 40}
    repos:
      - {rid: "rad:z3gqcJUoA1n9HaHKufZs5FCSGazv5", scope: followed, alias: heartwood}
    follows: [z6MkrLMMsiPWUcNPHcRajuMi9mDfYckSoJyPwwnknocNYPm7]
    deny: {repos: [], nodes: []}
"#;

    #[test]
    fn contract_example_becomes_the_apply_body() {
        let body = request(EXAMPLE, false, true).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "tenants": [{
                    "name": "acme",
                    "state": "active",
                    "identity": "default",
                    "hosts": ["acme.seed.example"],
                    "quotas": {"repos": 10, "bytes": 1_073_741_824_u64, "egress_bytes_per_day": null},
                    "rate": {"requests_per_second": 20, "burst": 40},
                    "repos": [{"rid": "rad:z3gqcJUoA1n9HaHKufZs5FCSGazv5", "scope": "followed", "alias": "heartwood"}],
                    "follows": ["z6MkrLMMsiPWUcNPHcRajuMi9mDfYckSoJyPwwnknocNYPm7"],
                    "deny": {"repos": [], "nodes": []},
                }],
                "prune": false,
                "dry_run": true,
            })
        );
    }

    #[test]
    fn sizes_and_unlimited_in_the_file() {
        let t = tenants(
            "tenants:\n- name: a\n  quotas: {repos: unlimited, bytes: 1GiB, egress_bytes_per_day: 10 MiB}\n  rate: {requests_per_second: unlimited, burst: 5}\n- name: b\n",
        )
        .unwrap();
        assert_eq!(
            t,
            serde_json::json!([
                {"name": "a",
                 "quotas": {"repos": null, "bytes": 1_073_741_824_u64, "egress_bytes_per_day": 10_485_760},
                 "rate": {"requests_per_second": null, "burst": 5}},
                {"name": "b"},
            ])
        );
        let e = tenants("tenants:\n- name: a\n  quotas: {bytes: lots}\n").unwrap_err();
        assert!(e.to_string().contains("quotas.bytes"), "{e}");
    }

    #[test]
    fn anchors_and_merge_keys() {
        let t = tenants("defaults: &d\n  quotas: {repos: 5}\ntenants: []\n");
        assert!(t.unwrap_err().to_string().contains("unknown top-level key"));
        let t =
            tenants("tenants:\n- &a {name: a, quotas: {repos: 5}}\n- <<: *a\n  name: b\n").unwrap();
        assert_eq!(t[1]["name"], "b");
        assert_eq!(t[1]["quotas"]["repos"], 5);
    }

    #[test]
    fn bad_files() {
        assert!(tenants("").is_err());
        assert!(tenants("- name: a\n").is_err());
        assert!(tenants("tenants: acme\n").is_err());
        assert!(tenants("tenants:\n- hosts: [x]\n").is_err());
        assert!(tenants("tenants:\n- [a]\n").is_err());
        assert!(tenants("tenants:\n- name: a\n  x: !tag 1\n").is_err());
        assert!(tenants("tenants: [\n").is_err());
        assert_eq!(tenants("tenants:\n").unwrap(), serde_json::json!([]));
        assert_eq!(tenants("tenants: []\n").unwrap(), serde_json::json!([]));
    }
}
