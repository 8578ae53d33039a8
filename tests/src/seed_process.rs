//! `seedd` as a real process on loopback: its options, data dir, logs, metrics, admin API and `seedctl`; TLS certificates for it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::*;

/// Options for a seed under test.
#[derive(Default, Clone)]
pub struct SeedOptions {
    /// Extra TOML appended to the generated config.
    pub extra_config: String,
    /// Extra top-level TOML keys (placed before any section).
    pub top_config: String,
    /// Environment variables for the seedd process.
    pub env: Vec<(String, String)>,
    /// Fixture repos (by name) copied into storage before start; empty → none.
    pub repos: Vec<String>,
    /// Serve HTTPS with these PEM files.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Use this data directory (kept by the caller) instead of a fresh one.
    pub data_dir: Option<PathBuf>,
    /// Extra lines for the `[p2p]` section (its `listen` is set by the harness).
    pub p2p_config: String,
    /// Fixed p2p port (e.g. to restart a seed where peers expect it); default: a free one.
    pub p2p_port: Option<u16>,
    /// Fixed HTTP and admin ports (a restarted fleet replica keeps its address); default: free ones.
    pub http_port: Option<u16>,
    pub admin_port: Option<u16>,
    /// The admin listener speaks HTTPS (the test puts `[admin.tls]` in `extra_config`):
    /// (CA that signed its certificate, client certificate, client key). The harness then
    /// probes `/readyz` with curl and runs `seedctl` with `--cacert`, `--cert` and `--key`.
    pub admin_tls: Option<(PathBuf, PathBuf, PathBuf)>,
}

impl SeedOptions {
    /// A seed whose policy seeds every repository it hears of (`policy.default = "allow"`).
    pub fn allowing() -> Self {
        SeedOptions {
            extra_config: "[policy]\ndefault = \"allow\"\n".into(),
            ..SeedOptions::default()
        }
    }
}

/// A running seedd.
pub struct Seed {
    pub child: Child,
    pub dir: tempfile::TempDir,
    data: PathBuf,
    pub http: SocketAddr,
    pub admin: SocketAddr,
    pub p2p: SocketAddr,
    pub log: PathBuf,
    admin_tls: Option<(PathBuf, PathBuf, PathBuf)>,
    /// Logs of earlier starts that lost a port (with a caller's data directory, the first
    /// start's messages about it are only there).
    earlier_logs: String,
}

impl Seed {
    pub fn data_dir(&self) -> PathBuf {
        self.data.clone()
    }

    pub fn storage(&self) -> PathBuf {
        self.data_dir().join("storage")
    }

    /// Where the seed keeps repository `rid` (`rad:z…` or `z…`).
    pub fn repo_path(&self, rid: &str) -> PathBuf {
        self.storage().join(rid.trim_start_matches("rad:"))
    }

    pub fn token_file(&self) -> PathBuf {
        self.data_dir().join("admin-token")
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(self.token_file())
            .unwrap()
            .trim()
            .to_owned()
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("seedd.toml")
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.http, path.trim_start_matches('/'))
    }

    /// `http://` or, with [`SeedOptions::admin_tls`], `https://` admin address + `path`.
    pub fn admin_url(&self, path: &str) -> String {
        let scheme = if self.admin_tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}/{}", self.admin, path.trim_start_matches('/'))
    }

    pub fn logs(&self) -> String {
        let now = std::fs::read_to_string(&self.log).unwrap_or_default();
        format!("{}{now}", self.earlier_logs)
    }

    pub fn start(opts: SeedOptions) -> Seed {
        // `free_port` picks ports that another process may take before seedd binds them:
        // then seedd exits at once naming the address, and the seed starts again on others.
        let mut earlier = String::new();
        for _ in 0..3 {
            let mut seed = Self::start_once(opts.clone());
            seed.earlier_logs.clone_from(&earlier);
            if opts.p2p_port.is_none() && seed.lost_a_port() {
                eprintln!("seedd lost a port to another process; starting it again");
                earlier = seed.logs();
                continue;
            }
            seed.wait_ready();
            return seed;
        }
        let mut seed = Self::start_once(opts);
        seed.earlier_logs = earlier;
        seed.wait_ready();
        seed
    }

    /// Whether seedd exited within its first second because an address was in use.
    fn lost_a_port(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(1);
        // This start's log only (not the earlier ones').
        let log = || std::fs::read_to_string(&self.log).unwrap_or_default();
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return log().contains("Address already in use");
            }
            if log().contains("http listening") {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    fn start_once(opts: SeedOptions) -> Seed {
        let dir = tempfile::tempdir().unwrap();
        let data = opts
            .data_dir
            .clone()
            .unwrap_or_else(|| dir.path().join("data"));
        std::fs::create_dir_all(data.join("storage")).unwrap();
        if !opts.repos.is_empty() {
            let f = fixtures();
            for name in &opts.repos {
                let rid = f.rid(name);
                let canonical = rid.trim_start_matches("rad:");
                copy_tree(
                    &f.storage().join(canonical),
                    &data.join("storage").join(canonical),
                );
            }
        }
        let http = opts.http_port.unwrap_or_else(free_port);
        let admin = opts.admin_port.unwrap_or_else(free_port);
        let p2p = opts.p2p_port.unwrap_or_else(free_port);
        let mut config = format!(
            "data_dir = \"{}\"\nalias = \"test-seed\"\n{}\n[p2p]\nlisten = [\"127.0.0.1:{p2p}\"]\n{}\n[http]\nlisten = \"127.0.0.1:{http}\"\n",
            data.display(),
            opts.top_config,
            opts.p2p_config,
        );
        if let Some((cert, key)) = &opts.tls {
            config.push_str(&format!(
                "[http.tls]\ncert = \"{}\"\nkey = \"{}\"\n",
                cert.display(),
                key.display()
            ));
        }
        config.push_str(&format!("[admin]\nlisten = \"127.0.0.1:{admin}\"\n"));
        config.push_str(&opts.extra_config);
        let config_path = dir.path().join("seedd.toml");
        std::fs::write(&config_path, config).unwrap();
        let log = dir.path().join("seedd.log");
        let log_file = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(bin("seedd"));
        cmd.arg("run")
            .arg("--config")
            .arg(&config_path)
            .env_remove("RUST_LOG")
            .env("RUST_LOG", "seedd=debug,info")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file);
        for (k, v) in &opts.env {
            // An empty value removes the variable (e.g. RUST_LOG, to use log.level).
            if v.is_empty() {
                cmd.env_remove(k);
            } else {
                cmd.env(k, v);
            }
        }
        let child = cmd.spawn().unwrap();
        let seed = Seed {
            child,
            dir,
            data,
            http: format!("127.0.0.1:{http}").parse().unwrap(),
            admin: format!("127.0.0.1:{admin}").parse().unwrap(),
            p2p: format!("127.0.0.1:{p2p}").parse().unwrap(),
            log,
            admin_tls: opts.admin_tls.clone(),
            earlier_logs: String::new(),
        };
        seed
    }

    /// Wait until `/readyz` answers 200 (index built).
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = match &self.admin_tls {
                None => matches!(http_get(&self.admin_url("/readyz"), &[]), Ok((200, _))),
                Some((ca, cert, key)) => Command::new("curl")
                    .args(["-sf", "-o", "/dev/null", "--max-time", "5", "--cacert"])
                    .arg(ca)
                    .arg("--cert")
                    .arg(cert)
                    .arg("--key")
                    .arg(key)
                    .arg(self.admin_url("/readyz"))
                    .status()
                    .is_ok_and(|s| s.success()),
            };
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "seedd did not become ready; log:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// POST /api/v1/rescan with the token.
    pub fn rescan(&self) -> Value {
        let (status, body) = http_post(
            &self.admin_url("/api/v1/rescan"),
            &[("Authorization", &format!("Bearer {}", self.token()))],
            b"",
        )
        .unwrap();
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// GET an admin API path with the token; panics unless 200.
    pub fn api(&self, path: &str) -> Value {
        let (status, body) = http_get(
            &self.admin_url(path),
            &[("Authorization", &format!("Bearer {}", self.token()))],
        )
        .unwrap();
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// The seed's node id.
    pub fn nid(&self) -> String {
        self.api("/api/v1/status")["nid"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// `z6Mk…@127.0.0.1:port` for radicle-node's `connect`.
    pub fn p2p_peer(&self) -> String {
        format!("{}@{}", self.nid(), self.p2p)
    }

    /// Runs `seedctl` against this seed (admin URL and token file set).
    pub fn seedctl(&self, args: &[&str]) -> Output {
        run(self.seedctl_command().args(args))
    }

    /// A `seedctl` command with `--admin`, `--token-file` and, for an HTTPS admin listener,
    /// `--cacert`, `--cert` and `--key` set.
    pub fn seedctl_command(&self) -> Command {
        let mut cmd = Command::new(bin("seedctl"));
        cmd.arg("--admin")
            .arg(self.admin_url("").trim_end_matches('/'))
            .arg("--token-file")
            .arg(self.token_file());
        if let Some((ca, cert, key)) = &self.admin_tls {
            cmd.arg("--cacert")
                .arg(ca)
                .arg("--cert")
                .arg(cert)
                .arg("--key")
                .arg(key);
        }
        cmd
    }

    /// A metric's value (sum over series whose label text contains every `labels` entry).
    pub fn metric(&self, name: &str, labels: &[&str]) -> f64 {
        let (_, text) = http_get(&self.admin_url("/metrics"), &[]).unwrap();
        metric_in(&text, name, labels)
    }

    pub fn signal(&self, sig: i32) {
        run(Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string()));
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.signal(15);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "seedd did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Seed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Seed {
    /// An admin API call with the token and a JSON body → (status, JSON).
    pub fn admin(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let token = format!("Bearer {}", self.token());
        let bytes = body.map(|b| b.to_string().into_bytes());
        let mut headers = vec![("Authorization", token.as_str())];
        if bytes.is_some() {
            headers.push(("Content-Type", "application/json"));
        }
        let (status, text) =
            http_call(method, &self.admin_url(path), &headers, bytes.as_deref()).unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Like [`Seed::admin`], panicking unless the status is 2xx.
    pub fn admin_ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.admin(method, path, body);
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {v}"
        );
        v
    }
}

/// Runs `seedctl` against `seed` without asserting success.
pub fn run_unchecked(seed: &Seed, args: &[&str]) -> Output {
    seed.seedctl_command().args(args).output().unwrap()
}

/// A CA and a server certificate for localhost signed by it: (ca.pem, tls.crt, tls.key) in `dir`
/// (the certificate files are overwritten by each call; the CA file is named after `name`).
pub fn write_certs(
    dir: &std::path::Path,
    name: &str,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("seedd test CA {name}"));
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .unwrap();
    // 2030-01-01T00:00:00Z = 1893456000: exported as the expiry metric.
    params.not_after = rcgen::date_time_ymd(2030, 1, 1);
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let ca_path = dir.join(format!("{name}-ca.pem"));
    let cert_path = dir.join("tls.crt");
    let key_path = dir.join("tls.key");
    std::fs::write(&ca_path, ca.pem()).unwrap();
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (ca_path, cert_path, key_path)
}

/// Wait until an HTTPS `git ls-remote` trusting only `ca` succeeds.
pub fn wait_for_ca(
    seed: &Seed,
    url: &str,
    ca: &std::path::Path,
    home: &std::path::Path,
    within: Duration,
) {
    let deadline = Instant::now() + within;
    loop {
        let out = git(home)
            .env("GIT_SSL_CAINFO", ca)
            .args(["ls-remote", url])
            .output()
            .unwrap();
        if out.status.success() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "new certificate not served; log:\n{}",
            seed.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
