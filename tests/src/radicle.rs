//! The official `radicle-node` and `rad` on loopback, with fixture or fresh homes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::*;

/// Directory of the official Radicle binaries: from PATH (scripts/test.sh puts them there) or
/// the cache scripts/install-radicle.sh fills.
pub fn radicle_bin(name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let p = home.join(".cache/seedd/radicle/bin").join(name);
    assert!(
        p.is_file(),
        "{name} not found: run scripts/install-radicle.sh (or scripts/test.sh)"
    );
    p
}

/// PATH with the Radicle binaries first (git-remote-rad must be found by git).
fn rad_path() -> std::ffi::OsString {
    let mut dirs = vec![radicle_bin("rad").parent().unwrap().to_owned()];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).unwrap()
}

/// A real `radicle-node` 0.21.1 on loopback, with a copy of a fixture home (alice or bob).
/// Config: network test, no preferred seeds, static peers, listening on a loopback port.
pub struct RadNode {
    pub name: String,
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub child: Child,
    pub port: u16,
    pub nid: String,
    pub log: PathBuf,
}

/// A project a node made and a seed replicated ([`RadNode::publish_to`]).
pub struct Published {
    /// Holds the working copy: keep it as long as `proj` is used.
    pub dir: tempfile::TempDir,
    /// The working copy.
    pub proj: PathBuf,
    pub rid: String,
    /// The seed's copy.
    pub held: PathBuf,
    /// The node's copy.
    pub theirs: PathBuf,
}

/// How [`RadNode::start_with`] sets up and runs `radicle-node`; the default is what
/// [`RadNode::start`] does.
pub struct RadNodeOptions {
    /// Directory holding the home (`dir/<name>`, used as it is when it exists) and the log;
    /// `None`: a fresh `/tmp/rn…`.
    pub dir: Option<tempfile::TempDir>,
    /// `--log-level` (default `debug`).
    pub log_level: String,
    /// `node.relay` ("always", "never", "auto"); `None` keeps the home's setting.
    pub relay: Option<String>,
    /// `node.seedingPolicy` (default: allow, scope all).
    pub seeding_policy: Value,
    /// Also wait until the node accepts TCP connections on its port (default false).
    pub wait_listening: bool,
}

impl Default for RadNodeOptions {
    fn default() -> Self {
        RadNodeOptions {
            dir: None,
            log_level: "debug".into(),
            relay: None,
            seeding_policy: serde_json::json!({ "default": "allow", "scope": "all" }),
            wait_listening: false,
        }
    }
}

/// A fresh Radicle home at `home` for `name` (`rad auth`, the key derived from the name), so
/// that a test can prepare it (storage, policies) before [`RadNode::start_with`] uses it.
pub fn rad_auth(home: &Path, name: &str) {
    let seed_hex: String = name
        .bytes()
        .cycle()
        .take(32)
        .map(|b| format!("{b:02x}"))
        .collect();
    run(Command::new(radicle_bin("rad"))
        .args(["auth", "--alias", name])
        .env("RAD_HOME", home)
        .env("RAD_PASSPHRASE", "")
        .env("RAD_KEYGEN_SEED", seed_hex)
        .env_remove("RAD_SOCKET"));
}

impl RadNode {
    /// Starts `name`'s node, dialing `connect` peers (`nid@host:port`), seeding everything.
    /// `alice` and `bob` are the fixture homes; any other name gets a fresh identity (key
    /// derived from the name with `rad auth`), with no repositories.
    pub fn start(name: &str, connect: &[String]) -> RadNode {
        Self::start_with(name, connect, RadNodeOptions::default())
    }

    /// Like [`start`](Self::start), with a home prepared in `dir/<name>` beforehand (e.g. a
    /// fixture home whose storage a test tampered with).
    pub fn start_home(dir: tempfile::TempDir, name: &str, connect: &[String]) -> RadNode {
        Self::start_with(
            name,
            connect,
            RadNodeOptions {
                dir: Some(dir),
                ..RadNodeOptions::default()
            },
        )
    }

    /// Like [`start`](Self::start), configured by `opts` (log level, relay, seeding policy,
    /// a prepared home).
    pub fn start_with(name: &str, connect: &[String], opts: RadNodeOptions) -> RadNode {
        let dir = opts.dir.unwrap_or_else(|| {
            tempfile::Builder::new()
                .prefix("rn")
                .tempdir_in("/tmp")
                .unwrap()
        });
        let home = dir.path().join(name);
        let fixture_home = fixtures().dir.join("homes").join(name);
        if home.is_dir() {
            // Prepared by the caller.
        } else if fixture_home.is_dir() {
            copy_tree(&fixture_home, &home);
        } else {
            rad_auth(&home, name);
        }
        let port = free_port();
        let cfg_path = home.join("config.json");
        let mut cfg: Value =
            serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
        let node = &mut cfg["node"];
        node["listen"] = serde_json::json!([format!("127.0.0.1:{port}")]);
        node["connect"] = serde_json::json!(connect);
        node["network"] = Value::from("test");
        node["peers"] = serde_json::json!({ "type": "static" });
        node["externalAddresses"] = serde_json::json!([]);
        node["seedingPolicy"] = opts.seeding_policy;
        if let Some(relay) = opts.relay {
            node["relay"] = Value::from(relay);
        }
        node["alias"] = Value::from(name);
        cfg["preferredSeeds"] = serde_json::json!([]);
        std::fs::write(&cfg_path, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
        let log = dir.path().join(format!("{name}.log"));
        let log_file = std::fs::File::create(&log).unwrap();
        let child = Command::new(radicle_bin("radicle-node"))
            .arg("--log-level")
            .arg(&opts.log_level)
            .env("RAD_HOME", &home)
            .env("RAD_PASSPHRASE", "")
            .env_remove("RAD_SOCKET")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .unwrap();
        let mut node = RadNode {
            name: name.to_owned(),
            home,
            dir,
            child,
            port,
            nid: String::new(),
            log,
        };
        node.nid = wait_for(
            &format!("{name}'s radicle-node to start"),
            Duration::from_secs(60),
            || {
                let out = node.rad_raw(&["node", "status", "--only", "nid"]);
                let nid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                (out.status.success() && nid.starts_with("z6Mk")).then_some(nid)
            },
        );
        if opts.wait_listening {
            wait_for("radicle-node to listen", Duration::from_secs(30), || {
                std::net::TcpStream::connect(("127.0.0.1", port)).ok()
            });
        }
        node
    }

    fn rad_raw(&self, args: &[&str]) -> Output {
        Command::new(radicle_bin("rad"))
            .args(args)
            .env("RAD_HOME", &self.home)
            .env("RAD_PASSPHRASE", "")
            .env_remove("RAD_SOCKET")
            .output()
            .unwrap()
    }

    /// Runs `rad` as this node's user in `dir`; returns the output whatever the status.
    pub fn rad_in(&self, dir: &Path, args: &[&str]) -> Output {
        Command::new(radicle_bin("rad"))
            .args(args)
            .current_dir(dir)
            .env("RAD_HOME", &self.home)
            .env("RAD_PASSPHRASE", "")
            .env("PATH", rad_path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("RAD_SOCKET")
            .output()
            .unwrap()
    }

    /// Where this node keeps repository `rid` (`rad:z…` or `z…`).
    pub fn repo_path(&self, rid: &str) -> PathBuf {
        self.home
            .join("storage")
            .join(rid.trim_start_matches("rad:"))
    }

    /// [`project`](Self::project) in a fresh directory, then waits (30 s) until `seed`
    /// holds it.
    pub fn publish_to(&self, seed: &Seed, name: &str) -> Published {
        let dir = tempfile::tempdir().unwrap();
        let (proj, rid) = self.project(dir.path(), name);
        let held = seed.repo_path(&rid);
        wait_for("replicated", Duration::from_secs(30), || {
            held.join("HEAD").exists().then_some(())
        });
        let theirs = self.repo_path(&rid);
        Published {
            dir,
            proj,
            rid,
            held,
            theirs,
        }
    }

    /// A public project of one empty commit on `main`, made with `git init` and `rad init`
    /// under `dir/proj`: its working copy and RID.
    pub fn project(&self, dir: &Path, name: &str) -> (PathBuf, String) {
        let proj = dir.join("proj");
        std::fs::create_dir_all(&proj).unwrap();
        succeeded(
            self.git_in(&proj, &["init", "-q", "-b", "main"]),
            "git init",
        );
        succeeded(
            self.git_in(&proj, &["commit", "-q", "--allow-empty", "-m", "one"]),
            "git commit",
        );
        let init = [
            "init",
            "--name",
            name,
            "--description",
            name,
            "--default-branch",
            "main",
            "--public",
            "--no-confirm",
        ];
        succeeded(self.rad_in(&proj, &init), "rad init");
        let rid = stdout(&self.rad_in(&proj, &["."])).trim().to_owned();
        (proj, rid)
    }

    /// Runs `git` as this node's user in `dir` (git-remote-rad on PATH); returns the output.
    pub fn git_in(&self, dir: &Path, args: &[&str]) -> Output {
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("RAD_HOME", &self.home)
            .env("RAD_PASSPHRASE", "")
            .env("PATH", rad_path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", &self.name)
            .env("GIT_AUTHOR_EMAIL", format!("{}@example.org", self.name))
            .env("GIT_COMMITTER_NAME", &self.name)
            .env("GIT_COMMITTER_EMAIL", format!("{}@example.org", self.name))
            .env_remove("RAD_SOCKET")
            .output()
            .unwrap()
    }

    /// Runs `rad` as this node's user; panics on failure.
    pub fn rad(&self, args: &[&str]) -> Output {
        let out = self.rad_raw(args);
        assert!(
            out.status.success(),
            "rad {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// `rad node routing --json` as (rid, nid) pairs.
    pub fn routing(&self) -> Vec<(String, String)> {
        let out = self.rad_raw(&["node", "routing", "--json"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| {
                (
                    v["rid"].as_str().unwrap_or_default().to_owned(),
                    v["nid"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// `rad node debug` (per-peer connection metrics).
    pub fn debug(&self) -> Value {
        let out = self.rad(&["node", "debug"]);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `nid@127.0.0.1:port`
    pub fn peer(&self) -> String {
        format!("{}@127.0.0.1:{}", self.nid, self.port)
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for RadNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
