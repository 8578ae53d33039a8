//! `seedctl fleet`: the fleet's placement and health (from the front's `/fleet`), and moving a
//! repository between shards (issue 28; docs/scaling.md).
//!
//! A move edits the placement file (the ConfigMap key; `--apply` runs the command that
//! publishes it, e.g. `kubectl create configmap … --dry-run=client -o yaml | kubectl apply -f -`)
//! in four steps, each waiting until the fleet acts on it, so no clone fails:
//! 1. copy: `[moving] rid = to`; every replica of the destination seeds it, fetching from a
//!    source replica over Radicle; the front still routes it to the source;
//! 2. verify: every destination replica advertises exactly the refs a source replica does;
//! 3. switch: `[repos] rid = to`; the front routes it to the destination; in-flight clones on
//!    the source finish during `--drain-secs`;
//! 4. purge: every source replica deletes it (its placement no longer seeds it).

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use serde::Serialize;
use serde_json::Value;

use seedd_api::{PurgeResponse, SeedRequest, SeedResponse, Status};

use crate::cli::{Cli, FleetCommand};
use crate::client::{enc, Client};
use crate::report::{Report, Text};

pub(crate) fn run(cli: &Cli, command: &FleetCommand) -> anyhow::Result<Box<dyn Report>> {
    match command {
        FleetCommand::Status { front } => {
            let mut v = get_json(&format!("{}/fleet", front.trim_end_matches('/')))?;
            add_lag(&mut v);
            Ok(Box::new(FleetStatus(v)))
        }
        FleetCommand::Where { rid, front } => {
            let v = get_json(&format!(
                "{}/fleet/where/{}",
                front.trim_end_matches('/'),
                enc(rid)
            ))?;
            Ok(Box::new(Where(v)))
        }
        FleetCommand::Move {
            rid,
            to,
            placement,
            front,
            apply,
            drain_secs,
            timeout_secs,
        } => {
            let mv = Move {
                cli,
                rid: rid.clone(),
                to: to.clone(),
                placement: placement.clone(),
                front: front.trim_end_matches('/').to_owned(),
                apply: apply.clone(),
                timeout: Duration::from_secs(*timeout_secs),
            };
            Ok(Box::new(mv.run(Duration::from_secs(*drain_secs))?))
        }
    }
}

/// Each replica's lag behind its siblings, from its own `/metrics` (no token needed):
/// `lag_seconds` and `repos_behind` (`null` when its admin port does not answer).
fn add_lag(v: &mut Value) {
    let Some(shards) = v.get_mut("shards").and_then(Value::as_array_mut) else {
        return;
    };
    for r in shards
        .iter_mut()
        .filter_map(|s| s.get_mut("replicas").and_then(Value::as_array_mut))
        .flatten()
    {
        let Some(admin) = r.get("admin").and_then(Value::as_str).map(str::to_owned) else {
            continue;
        };
        let text = agent()
            .get(&format!("{admin}/metrics"))
            .call()
            .ok()
            .and_then(|mut resp| resp.body_mut().read_to_string().ok())
            .unwrap_or_default();
        let gauge = |name: &str| {
            text.lines().find_map(|l| {
                l.strip_prefix(name)?
                    .strip_prefix(' ')?
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
        };
        if let Some(obj) = r.as_object_mut() {
            obj.insert(
                "lag_seconds".into(),
                gauge("seedd_fleet_lag_seconds").into(),
            );
            obj.insert(
                "repos_behind".into(),
                gauge("seedd_fleet_repos_behind").into(),
            );
        }
    }
}

#[derive(Serialize)]
#[serde(transparent)]
struct FleetStatus(Value);

impl Text for FleetStatus {
    fn text(&self) -> String {
        let v = &self.0;
        let mut t = format!(
            "placement {} ({})\n{:<12} {:<40} {:<11} {:>8} {:>7}\n",
            v["placement"].as_str().unwrap_or("?"),
            v["file"].as_str().unwrap_or("?"),
            "SHARD",
            "REPLICA",
            "TAKES READS",
            "LAG",
            "BEHIND"
        );
        let num = |x: &Value, unit: &str| {
            x.as_f64()
                .map_or_else(|| "-".to_owned(), |n| format!("{n}{unit}"))
        };
        for s in v["shards"].as_array().into_iter().flatten() {
            for r in s["replicas"].as_array().into_iter().flatten() {
                t.push_str(&format!(
                    "{:<12} {:<40} {:<11} {:>8} {:>7}\n",
                    s["name"].as_str().unwrap_or("?"),
                    r["http"].as_str().unwrap_or("?"),
                    if r["up"] == true { "yes" } else { "NO" },
                    num(&r["lag_seconds"], " s"),
                    num(&r["repos_behind"], "")
                ));
            }
        }
        for (what, key) in [("placed", "repos"), ("moving", "moving"), ("host", "hosts")] {
            for (k, s) in v[key].as_object().into_iter().flatten() {
                t.push_str(&format!("{what} {k} -> {}\n", s.as_str().unwrap_or("?")));
            }
        }
        t.trim_end().to_owned()
    }
}

#[derive(Serialize)]
#[serde(transparent)]
struct Where(Value);

impl Text for Where {
    fn text(&self) -> String {
        let v = &self.0;
        let order: Vec<String> = v["replicas"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                format!(
                    "{}{}",
                    r["http"].as_str().unwrap_or("?"),
                    if r["up"] == true { "" } else { " (down)" }
                )
            })
            .collect();
        format!(
            "{} on shard {}{}; replicas in order: {}",
            v["rid"].as_str().unwrap_or("?"),
            v["shard"].as_str().unwrap_or("?"),
            v["moving_to"]
                .as_str()
                .map(|s| format!(" (moving to {s})"))
                .unwrap_or_default(),
            order.join(", ")
        )
    }
}

/// What a move did.
#[derive(Serialize)]
struct MoveReport {
    rid: String,
    from: String,
    to: String,
    copied_to: Vec<String>,
    verified_refs: usize,
    purged_from: Vec<String>,
    seconds: u64,
}

impl Text for MoveReport {
    fn text(&self) -> String {
        format!(
            "moved {} from {} to {} in {} s: copied to {} replica(s), {} refs verified, purged from {} replica(s)",
            self.rid,
            self.from,
            self.to,
            self.seconds,
            self.copied_to.len(),
            self.verified_refs,
            self.purged_from.len()
        )
    }
}

struct Move<'a> {
    cli: &'a Cli,
    rid: String,
    to: String,
    placement: std::path::PathBuf,
    front: String,
    apply: Option<String>,
    timeout: Duration,
}

/// A shard's replicas as the placement file lists them.
struct Replicas {
    http: Vec<String>,
    admin: Vec<String>,
}

impl Move<'_> {
    fn run(&self, drain: Duration) -> anyhow::Result<MoveReport> {
        let started = Instant::now();
        let rid = &self.rid;
        let table = self.read()?;
        let dest = replicas(&table, &self.to)?;
        let here = get_json(&format!("{}/fleet/where/{}", self.front, enc(rid)))?;
        let from = here["shard"]
            .as_str()
            .ok_or_else(|| anyhow!("the front did not say where {rid} is: {here}"))?
            .to_owned();
        if from == self.to {
            bail!("{rid} is already on shard {from}");
        }
        let src = replicas(&table, &from)?;
        if dest.admin.is_empty() || src.admin.is_empty() {
            bail!(
                "shards {from} and {} need admin URLs in the placement file to move repositories",
                self.to
            );
        }

        // 1. Copy.
        eprintln!(
            "seedctl: 1/4 copy: {rid} is moving from {from} to {}",
            self.to
        );
        self.edit(|t| {
            set(t, "moving", rid, &self.to);
        })?;
        self.wait("the front to see the move", || {
            let v = get_json(&format!("{}/fleet/where/{}", self.front, enc(rid)))?;
            Ok(v["moving_to"] == self.to.as_str())
        })?;
        // The seeds read the same file on the same period: give them one more.
        std::thread::sleep(Duration::from_secs(2));
        let source = Client::at(self.cli, &src.admin[0]);
        let status: Status = source
            .get("/api/v1/status")
            .context("source replica status")?;
        let port = status
            .p2p
            .as_ref()
            .and_then(|p| p.listen.first())
            .and_then(|l| l.rsplit_once(':').map(|(_, p)| p.to_owned()))
            .ok_or_else(|| anyhow!("source replica {} has no p2p listener", src.admin[0]))?;
        let host = host_of(&src.admin[0])?;
        let from_peer = format!("{}@{host}:{port}", status.nid);
        let mut copied_to = Vec::new();
        for admin in &dest.admin {
            let body = SeedRequest {
                scope: None,
                from: Some(from_peer.clone()),
                tenant: None,
                alias: None,
            };
            let _: SeedResponse = Client::at(self.cli, admin)
                .post_json(&format!("/api/v1/repos/{}/seed", enc(rid)), &body)
                .with_context(|| format!("seeding {rid} on {admin}"))?;
            copied_to.push(admin.clone());
        }

        // 2. Verify.
        eprintln!(
            "seedctl: 2/4 verify: every replica of {} advertises the source's refs",
            self.to
        );
        let mut verified = 0;
        self.wait("the destination to hold the source's refs", || {
            let want = refs(&src.http[0], rid)?;
            for http in &dest.http {
                if refs(http, rid)? != want {
                    return Ok(false);
                }
            }
            verified = want.len();
            Ok(!want.is_empty())
        })?;

        // 3. Switch.
        eprintln!("seedctl: 3/4 switch: {rid} is served by {}", self.to);
        self.edit(|t| {
            unset(t, "moving", rid);
            set(t, "repos", rid, &self.to);
        })?;
        self.wait("the front to route it to the destination", || {
            let v = get_json(&format!("{}/fleet/where/{}", self.front, enc(rid)))?;
            Ok(v["shard"] == self.to.as_str() && v["moving_to"].is_null())
        })?;
        std::thread::sleep(drain);

        // 4. Purge.
        eprintln!("seedctl: 4/4 purge: {rid} leaves {from}");
        let mut purged_from = Vec::new();
        for admin in &src.admin {
            let _: PurgeResponse = Client::at(self.cli, admin)
                .post(&format!("/api/v1/repos/{}/purge", enc(rid)))
                .with_context(|| format!("purging {rid} on {admin}"))?;
            purged_from.push(admin.clone());
        }
        Ok(MoveReport {
            rid: rid.clone(),
            from,
            to: self.to.clone(),
            copied_to,
            verified_refs: verified,
            purged_from,
            seconds: started.elapsed().as_secs(),
        })
    }

    fn read(&self) -> anyhow::Result<toml::Table> {
        let text = std::fs::read_to_string(&self.placement)
            .with_context(|| format!("reading {}", self.placement.display()))?;
        text.parse::<toml::Table>()
            .with_context(|| format!("parsing {}", self.placement.display()))
    }

    /// Rewrite the placement file (whole, then renamed) and publish it with `--apply`.
    fn edit(&self, change: impl FnOnce(&mut toml::Table)) -> anyhow::Result<()> {
        let mut t = self.read()?;
        change(&mut t);
        let text = toml::to_string(&t)?;
        let tmp = self.placement.with_extension("seedctl-tmp");
        std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &self.placement)
            .with_context(|| format!("replacing {}", self.placement.display()))?;
        if let Some(cmd) = &self.apply {
            let st = std::process::Command::new("sh")
                .args(["-c", cmd])
                .env("PLACEMENT", &self.placement)
                .status()
                .with_context(|| format!("running --apply {cmd:?}"))?;
            if !st.success() {
                bail!(
                    "--apply {cmd:?} failed ({st}); the placement file is edited but not published"
                );
            }
        }
        Ok(())
    }

    fn wait(
        &self,
        what: &str,
        mut done: impl FnMut() -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + self.timeout;
        loop {
            match done() {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => {}
            }
            if Instant::now() >= deadline {
                bail!("timed out after {:?} waiting for {what}; the move stopped here, run it again to go on", self.timeout);
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

fn set(t: &mut toml::Table, table: &str, key: &str, value: &str) {
    let entry = t
        .entry(table.to_owned())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(tab) = entry {
        tab.insert(key.to_owned(), toml::Value::String(value.to_owned()));
    }
}

fn unset(t: &mut toml::Table, table: &str, key: &str) {
    if let Some(toml::Value::Table(tab)) = t.get_mut(table) {
        tab.remove(key);
    }
}

fn replicas(t: &toml::Table, shard: &str) -> anyhow::Result<Replicas> {
    let list = |v: &toml::Value, key: &str| -> Vec<String> {
        v.get(key)
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|u| u.as_str().map(|s| s.trim_end_matches('/').to_owned()))
            .collect()
    };
    t.get("shards")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .find(|s| s.get("name").and_then(toml::Value::as_str) == Some(shard))
        .map(|s| Replicas {
            http: list(s, "replicas"),
            admin: list(s, "admin"),
        })
        .ok_or_else(|| anyhow!("no shard {shard:?} in the placement file"))
}

fn host_of(url: &str) -> anyhow::Result<String> {
    let rest = url
        .split_once("://")
        .map_or(url, |(_, r)| r)
        .trim_end_matches('/');
    rest.rsplit_once(':')
        .map(|(h, _)| h.to_owned())
        .ok_or_else(|| anyhow!("{url}: expected scheme://host:port"))
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

fn get_json(url: &str) -> anyhow::Result<Value> {
    let mut resp = agent()
        .get(url)
        .call()
        .with_context(|| format!("GET {url}"))?;
    let status = resp.status();
    let body = resp.body_mut().read_to_string()?;
    if !status.is_success() {
        bail!("GET {url}: {status}: {}", body.trim());
    }
    serde_json::from_str(&body).with_context(|| format!("GET {url}: not JSON"))
}

/// The refs a replica advertises for `rid` (`info/refs`, protocol v0), sorted.
fn refs(http: &str, rid: &str) -> anyhow::Result<Vec<String>> {
    let canonical = rid.trim_start_matches("rad:");
    let url = format!("{http}/{canonical}.git/info/refs?service=git-upload-pack");
    let mut resp = agent()
        .get(&url)
        .call()
        .with_context(|| format!("GET {url}"))?;
    if resp.status() == 404 {
        return Ok(Vec::new());
    }
    if !resp.status().is_success() {
        bail!("GET {url}: {}", resp.status());
    }
    let body = resp.body_mut().read_to_string()?;
    let mut out: Vec<String> = body
        .split('\n')
        .filter_map(|l| {
            let l = l.get(4..)?;
            let l = l.split('\0').next()?;
            (l.len() > 41 && l.as_bytes()[40] == b' ').then(|| l.to_owned())
        })
        .collect();
    out.sort();
    Ok(out)
}
