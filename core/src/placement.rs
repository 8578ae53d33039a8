//! Fleet placement (issue 28): which shard holds a repository, and which replica of a shard
//! answers for it. One TOML file, the same for the front and every seed of the fleet; on
//! Kubernetes it is a key of a ConfigMap the chart renders (`fleet.placement`), so placement
//! lives where Kubernetes keeps configuration, not in a new store.
//!
//! ```toml
//! [[shards]]
//! name = "s0"
//! replicas = ["http://seedd-s0-0.seedd-s0:8080", "http://seedd-s0-1.seedd-s0:8080"]
//! admin = ["http://seedd-s0-0.seedd-s0:9776", "http://seedd-s0-1.seedd-s0:9776"]
//!
//! [repos]             # explicit placements (moves, big repositories); the rest by hash
//! "rad:z3gqcJUoA1n9HaHKufZs5FCSGazv5" = "s1"
//!
//! [hosts]             # a tenant with its own shard: every request on its host goes there
//! "git.acme.example" = "s1"
//!
//! [moving]            # a move in progress: the destination seeds it, the source still serves
//! "rad:z4V1sjrXqjvFdnCUbxPFqd5p4DtH5" = "s1"
//! ```
//!
//! A repository without an explicit placement goes to the shard with the highest rendezvous
//! score (SHA-256 of shard name and RID), so adding a shard moves only the repositories that
//! now score highest on it, and every reader computes the same answer without a lookup.
//! Replicas of a shard are ordered per repository by the same score: every request for one
//! repository goes to the same replica while it is up (one replica's refs for a whole clone,
//! and one replica's pack cache per repository), the next one when it is not.
//!
//! Pure: parsing and scoring here; [`Watched`] re-reads the file when its contents change.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use seedd_proto::crypto::RepoId;

/// Why a placement file cannot be used; the message names the file and the key.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    #[error("placement file {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("placement file {}: {error}", path.display())]
    Parse {
        path: PathBuf,
        error: toml::de::Error,
    },
    #[error("placement file {}: `{key}`: {reason}", path.display())]
    Invalid {
        path: PathBuf,
        key: String,
        reason: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    shards: Vec<ShardFile>,
    #[serde(default)]
    repos: BTreeMap<String, String>,
    #[serde(default)]
    hosts: BTreeMap<String, String>,
    #[serde(default)]
    moving: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardFile {
    name: String,
    #[serde(default)]
    replicas: Vec<String>,
    #[serde(default)]
    admin: Vec<String>,
}

/// One shard: a name and its replicas' public HTTP and admin base URLs (same order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    pub name: String,
    pub replicas: Vec<Replica>,
}

/// One replica of a shard, as the front reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// `http://host:port` of its public listener (no trailing slash).
    pub http: String,
    /// `http://host:port` of its admin listener (`/readyz`), when given.
    pub admin: Option<String>,
}

/// A parsed placement file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    shards: Vec<Shard>,
    repos: BTreeMap<RepoId, usize>,
    hosts: BTreeMap<String, usize>,
    moving: BTreeMap<RepoId, usize>,
    version: String,
}

impl Placement {
    /// Parse the text of a placement file (`path` only names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, PlacementError> {
        let invalid = |key: String, reason: String| PlacementError::Invalid {
            path: path.to_owned(),
            key,
            reason,
        };
        let file: File = toml::from_str(text).map_err(|error| PlacementError::Parse {
            path: path.to_owned(),
            error,
        })?;
        if file.shards.is_empty() {
            return Err(invalid(
                "shards".into(),
                "at least one [[shards]] entry is needed".into(),
            ));
        }
        let mut names = BTreeMap::new();
        let mut shards = Vec::with_capacity(file.shards.len());
        for (i, s) in file.shards.into_iter().enumerate() {
            if !crate::config::valid_name(&s.name) {
                return Err(invalid(
                    format!("shards[{i}].name"),
                    format!(
                        "{:?}: 1–63 of a-z, 0-9 and '-', not starting with '-'",
                        s.name
                    ),
                ));
            }
            if names.insert(s.name.clone(), i).is_some() {
                return Err(invalid(
                    format!("shards[{i}].name"),
                    format!("shard {:?} is named twice", s.name),
                ));
            }
            if !s.admin.is_empty() && s.admin.len() != s.replicas.len() {
                return Err(invalid(
                    format!("shards[{i}].admin"),
                    "one admin URL per replica, in the same order (or none)".into(),
                ));
            }
            let mut replicas = Vec::with_capacity(s.replicas.len());
            for (j, url) in s.replicas.iter().enumerate() {
                let http = base_url(url)
                    .ok_or_else(|| invalid(format!("shards[{i}].replicas[{j}]"), bad_url(url)))?;
                let admin =
                    match s.admin.get(j) {
                        Some(a) => Some(base_url(a).ok_or_else(|| {
                            invalid(format!("shards[{i}].admin[{j}]"), bad_url(a))
                        })?),
                        None => None,
                    };
                replicas.push(Replica { http, admin });
            }
            shards.push(Shard {
                name: s.name,
                replicas,
            });
        }
        let shard = |table: &str, key: &str, name: &str| {
            names.get(name).copied().ok_or_else(|| {
                invalid(
                    format!("{table}.{key:?}"),
                    format!("no shard named {name:?}"),
                )
            })
        };
        let rid = |table: &str, key: &str| {
            key.parse::<RepoId>()
                .map_err(|e| invalid(format!("{table}.{key:?}"), e.to_string()))
        };
        let mut repos = BTreeMap::new();
        for (k, v) in &file.repos {
            repos.insert(rid("repos", k)?, shard("repos", k, v)?);
        }
        let mut moving = BTreeMap::new();
        for (k, v) in &file.moving {
            moving.insert(rid("moving", k)?, shard("moving", k, v)?);
        }
        let mut hosts = BTreeMap::new();
        for (k, v) in &file.hosts {
            hosts.insert(k.to_ascii_lowercase(), shard("hosts", k, v)?);
        }
        let version = hex::encode(&Sha256::digest(text.as_bytes())[..6]);
        Ok(Self {
            shards,
            repos,
            hosts,
            moving,
            version,
        })
    }

    /// Read and parse `path`.
    pub fn load(path: &Path) -> Result<Self, PlacementError> {
        let text = std::fs::read_to_string(path).map_err(|error| PlacementError::Read {
            path: path.to_owned(),
            error,
        })?;
        Self::parse(&text, path)
    }

    /// The first 12 hex digits of the file's SHA-256: which placement a reader acts on.
    pub fn version(&self) -> &str {
        &self.version
    }

    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    pub fn shard(&self, name: &str) -> Option<&Shard> {
        self.shards.iter().find(|s| s.name == name)
    }

    /// The shard that serves `rid`: its explicit placement, else the highest rendezvous score.
    pub fn shard_of(&self, rid: &RepoId) -> &Shard {
        let i = self
            .repos
            .get(rid)
            .copied()
            .unwrap_or_else(|| self.hashed(rid));
        &self.shards[i]
    }

    /// The shard a move of `rid` is copying it to, if one is in progress.
    pub fn moving_to(&self, rid: &RepoId) -> Option<&Shard> {
        self.moving.get(rid).map(|&i| &self.shards[i])
    }

    /// Whether shard `name` seeds `rid`: it serves it, or a move is copying it there.
    pub fn seeds(&self, name: &str, rid: &RepoId) -> bool {
        self.shard_of(rid).name == name || self.moving_to(rid).is_some_and(|s| s.name == name)
    }

    /// The shard every request on `host` (no port, any case) goes to, if it has its own.
    pub fn shard_for_host(&self, host: &str) -> Option<&Shard> {
        self.hosts
            .get(&host.to_ascii_lowercase())
            .map(|&i| &self.shards[i])
    }

    /// Explicit placements, for `seedctl fleet` (RID, shard).
    pub fn explicit(&self) -> impl Iterator<Item = (&RepoId, &str)> {
        self.repos
            .iter()
            .map(|(r, &i)| (r, self.shards[i].name.as_str()))
    }

    /// Moves in progress (RID, destination shard).
    pub fn moves(&self) -> impl Iterator<Item = (&RepoId, &str)> {
        self.moving
            .iter()
            .map(|(r, &i)| (r, self.shards[i].name.as_str()))
    }

    /// Host placements (host, shard).
    pub fn hosts(&self) -> impl Iterator<Item = (&str, &str)> {
        self.hosts
            .iter()
            .map(|(h, &i)| (h.as_str(), self.shards[i].name.as_str()))
    }

    fn hashed(&self, rid: &RepoId) -> usize {
        let mut best = (0u64, 0usize);
        for (i, s) in self.shards.iter().enumerate() {
            let score = score(s.name.as_bytes(), rid.as_bytes());
            if i == 0 || score > best.0 {
                best = (score, i);
            }
        }
        best.1
    }
}

/// The replicas of `shard` in the order requests for `key` (a RID's bytes, or any stable key)
/// try them: highest rendezvous score first.
pub fn replica_order<'a>(shard: &'a Shard, key: &[u8]) -> Vec<&'a Replica> {
    let mut scored: Vec<(u64, &Replica)> = shard
        .replicas
        .iter()
        .map(|r| (score(r.http.as_bytes(), key), r))
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.http.cmp(&b.1.http)));
    scored.into_iter().map(|(_, r)| r).collect()
}

/// Rendezvous score of `key` on `node`: the first 8 bytes of SHA-256(node ‖ 0 ‖ key).
fn score(node: &[u8], key: &[u8]) -> u64 {
    let mut h = Sha256::new();
    h.update(node);
    h.update([0u8]);
    h.update(key);
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b)
}

fn base_url(url: &str) -> Option<String> {
    let rest = url.strip_prefix("http://")?;
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() || rest.contains('/') || rest.contains(char::is_whitespace) {
        return None;
    }
    Some(format!("http://{rest}"))
}

fn bad_url(url: &str) -> String {
    format!("{url:?}: expected http://host:port (replicas are reached inside the cluster)")
}

/// A placement file kept current: re-read every `interval` and swapped in when its contents
/// changed and parse; a file that does not parse keeps the last good placement (logged with
/// the key at fault). Cheap to clone.
#[derive(Clone)]
pub struct Watched {
    path: PathBuf,
    current: Arc<RwLock<Arc<Placement>>>,
}

impl Watched {
    /// Load `path` now (an error here stops the caller: a fleet member without a placement
    /// would seed or route the wrong repositories).
    pub fn load(path: &Path) -> Result<Self, PlacementError> {
        let p = Placement::load(path)?;
        Ok(Self {
            path: path.to_owned(),
            current: Arc::new(RwLock::new(Arc::new(p))),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The placement in force.
    pub fn get(&self) -> Arc<Placement> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Re-read the file; `Ok(true)` when a new placement took effect.
    pub fn reload(&self) -> Result<bool, PlacementError> {
        let p = Placement::load(&self.path)?;
        let mut cur = self.current.write().unwrap_or_else(|e| e.into_inner());
        if cur.version == p.version {
            return Ok(false);
        }
        tracing::info!(
            file = %self.path.display(),
            from = %cur.version,
            to = %p.version,
            "placement changed"
        );
        *cur = Arc::new(p);
        Ok(true)
    }

    /// Re-read the file every `interval` (a ConfigMap volume is updated in place by the
    /// kubelet); `on_change` runs after each new placement took effect.
    pub fn spawn_watch(
        &self,
        interval: Duration,
        on_change: impl Fn(&Placement) + Send + Sync + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut failing = false;
            loop {
                tick.tick().await;
                let w = me.clone();
                let r = tokio::task::spawn_blocking(move || w.reload()).await;
                match r {
                    Ok(Ok(true)) => {
                        failing = false;
                        on_change(&me.get());
                    }
                    Ok(Ok(false)) => failing = false,
                    Ok(Err(e)) => {
                        if !failing {
                            tracing::error!(error = %e, "placement file unusable; keeping the last good placement until it is fixed");
                        }
                        failing = true;
                    }
                    Err(_) => {}
                }
            }
        })
    }
}

/// The shards named in a set of placements (for `seedctl`).
pub fn shard_names(p: &Placement) -> BTreeSet<&str> {
    p.shards.iter().map(|s| s.name.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rid(i: u32) -> RepoId {
        let mut b = [0u8; 20];
        b[..4].copy_from_slice(&i.to_be_bytes());
        b[19] = 7;
        RepoId::from_oid_bytes(b)
    }

    fn two() -> String {
        "[[shards]]\nname = \"s0\"\nreplicas = [\"http://127.0.0.1:1\", \"http://127.0.0.1:2/\"]\n\
         admin = [\"http://127.0.0.1:11\", \"http://127.0.0.1:12\"]\n\
         [[shards]]\nname = \"s1\"\nreplicas = [\"http://127.0.0.1:3\"]\n"
            .into()
    }

    #[test]
    fn hash_placement_is_stable_and_spreads() {
        let p = Placement::parse(&two(), Path::new("p.toml")).unwrap();
        let mut on = [0usize; 2];
        for i in 0..2000 {
            let s = p.shard_of(&rid(i));
            on[usize::from(s.name == "s1")] += 1;
            // The same answer from a second parse (every reader agrees).
            let q = Placement::parse(&two(), Path::new("q.toml")).unwrap();
            assert_eq!(q.shard_of(&rid(i)).name, s.name);
        }
        assert!(on[0] > 850 && on[1] > 850, "{on:?}");
    }

    #[test]
    fn adding_a_shard_moves_only_what_lands_on_it() {
        let p = Placement::parse(&two(), Path::new("p.toml")).unwrap();
        let three = format!("{}[[shards]]\nname = \"s2\"\n", two());
        let q = Placement::parse(&three, Path::new("p.toml")).unwrap();
        let mut moved = 0;
        for i in 0..3000 {
            let (a, b) = (&p.shard_of(&rid(i)).name, &q.shard_of(&rid(i)).name);
            if a != b {
                assert_eq!(b, "s2", "a repository moved between old shards");
                moved += 1;
            }
        }
        assert!((700..1300).contains(&moved), "{moved}");
        assert_ne!(p.version(), q.version());
    }

    #[test]
    fn explicit_placements_hosts_and_moves_win() {
        let r = rid(1);
        let hashed = Placement::parse(&two(), Path::new("p.toml"))
            .unwrap()
            .shard_of(&r)
            .name
            .clone();
        let other = if hashed == "s0" { "s1" } else { "s0" };
        let text = format!(
            "{}[repos]\n\"{r}\" = \"{other}\"\n[hosts]\n\"Git.Acme.example\" = \"s1\"\n[moving]\n\"{}\" = \"{hashed}\"\n",
            two(),
            rid(2)
        );
        let p = Placement::parse(&text, Path::new("p.toml")).unwrap();
        assert_eq!(p.shard_of(&r).name, other);
        assert!(p.seeds(other, &r) && !p.seeds(&hashed, &r));
        assert_eq!(p.shard_for_host("git.acme.EXAMPLE").unwrap().name, "s1");
        assert!(p.shard_for_host("seed.example").is_none());
        // A move: the destination seeds it too, the source keeps serving it.
        let src = p.shard_of(&rid(2)).name.clone();
        assert!(p.seeds(&src, &rid(2)) && p.seeds(&hashed, &rid(2)));
        assert_eq!(p.moving_to(&rid(2)).unwrap().name, hashed);
    }

    #[test]
    fn replicas_are_ordered_per_repository() {
        let p = Placement::parse(&two(), Path::new("p.toml")).unwrap();
        let s0 = p.shard("s0").unwrap();
        assert_eq!(s0.replicas[1].http, "http://127.0.0.1:2");
        assert_eq!(s0.replicas[1].admin.as_deref(), Some("http://127.0.0.1:12"));
        let mut first = [0usize; 2];
        for i in 0..1000 {
            let key = rid(i);
            let order = replica_order(s0, key.as_bytes());
            assert_eq!(order.len(), 2);
            assert_eq!(order, replica_order(s0, key.as_bytes()));
            first[usize::from(order[0].http.ends_with(":2"))] += 1;
        }
        assert!(first[0] > 400 && first[1] > 400, "{first:?}");
    }

    #[test]
    fn errors_name_the_key_and_file() {
        let cases = [
            ("", "`shards`"),
            ("[[shards]]\nname = \"A B\"\n", "shards[0].name"),
            (
                "[[shards]]\nname = \"s0\"\n[[shards]]\nname = \"s0\"\n",
                "named twice",
            ),
            (
                "[[shards]]\nname = \"s0\"\nreplicas = [\"https://x:1\"]\n",
                "shards[0].replicas[0]",
            ),
            (
                "[[shards]]\nname = \"s0\"\nreplicas = [\"http://x:1\"]\nadmin = []\n[repos]\n\"rad:zzz\" = \"s0\"\n",
                "repos.\"rad:zzz\"",
            ),
            (
                "[[shards]]\nname = \"s0\"\n[hosts]\n\"a.example\" = \"s9\"\n",
                "no shard named \"s9\"",
            ),
            (
                "[[shards]]\nname = \"s0\"\nreplicas = [\"http://x:1\"]\nadmin = [\"http://x:2\", \"http://x:3\"]\n",
                "shards[0].admin",
            ),
            ("[[shards]]\nname = \"s0\"\nweight = 2\n", "unknown field"),
        ];
        for (text, want) in cases {
            let e = Placement::parse(text, Path::new("/etc/seedd/placement.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("/etc/seedd/placement.toml"), "{e}");
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn a_bad_file_keeps_the_last_good_placement() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("placement.toml");
        std::fs::write(&path, two()).unwrap();
        let w = Watched::load(&path).unwrap();
        let v = w.get().version().to_owned();
        assert!(!w.reload().unwrap());
        std::fs::write(&path, "[[shards]]\nname = \n").unwrap();
        assert!(w.reload().is_err());
        assert_eq!(w.get().version(), v);
        std::fs::write(&path, format!("{}[[shards]]\nname = \"s2\"\n", two())).unwrap();
        assert!(w.reload().unwrap());
        assert_eq!(w.get().shards().len(), 3);
    }
}
