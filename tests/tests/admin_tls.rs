//! The admin API over HTTPS with client certificates (`[admin.tls]` with `client_ca`): seedctl
//! with `--cacert`, `--cert`, `--key` (or `SEEDCTL_*`), refusals without a client certificate,
//! with one from another CA or with a wrong token, and the certificate reloaded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use rcgen::ExtendedKeyUsagePurpose as Usage;
use seedd_tests::*;
use serde_json::Value;

/// A test CA: its key and self-signed certificate.
struct Ca {
    key: rcgen::KeyPair,
    cert: rcgen::Certificate,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("seedd admin CA {name}"));
        let cert = params.self_signed(&key).unwrap();
        Ca { key, cert }
    }

    /// Writes the CA certificate to `dir/<name>-ca.pem`.
    fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&path, self.cert.pem()).unwrap();
        path
    }

    /// Issues a certificate for `sans` (none for a client) with `usage`: `dir/<name>.crt` and
    /// `dir/<name>.key` (overwritten).
    fn issue(&self, dir: &Path, name: &str, sans: &[&str], usage: Usage) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let mut params = rcgen::CertificateParams::new(sans).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        let (cert_path, key_path) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        std::fs::write(&cert_path, cert.pem()).unwrap();
        (cert_path, key_path)
    }
}

/// `seedctl` against the seed's HTTPS admin URL with the token file and the given TLS files.
fn seedctl_with(
    seed: &Seed,
    ca: Option<&Path>,
    client: Option<(&Path, &Path)>,
    args: &[&str],
) -> Output {
    let mut cmd = Command::new(bin("seedctl"));
    cmd.env_remove("SEEDCTL_CACERT")
        .env_remove("SEEDCTL_CERT")
        .env_remove("SEEDCTL_KEY")
        .arg("--admin")
        .arg(format!("https://{}", seed.admin))
        .arg("--token-file")
        .arg(seed.token_file());
    if let Some(ca) = ca {
        cmd.arg("--cacert").arg(ca);
    }
    if let Some((cert, key)) = client {
        cmd.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    cmd.args(args).output().unwrap()
}

/// Asserts a seedctl failure: non-zero exit, nothing on stdout, one `seedctl: …` line on stderr
/// (returned).
fn refused(out: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{what}: seedctl succeeded");
    assert!(out.stdout.is_empty(), "{what}: stdout {:?}", out.stdout);
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
    assert!(err.starts_with("seedctl: "), "{what}: {err}");
    eprintln!("{what}: {}", err.trim_end());
    err
}

fn status_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "seedctl status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// curl's exit status for `url` with these extra arguments.
fn curl(url: &str, args: &[&std::ffi::OsStr]) -> std::process::ExitStatus {
    Command::new("curl")
        .args(["-sf", "-o", "/dev/null", "--max-time", "10"])
        .args(args)
        .arg(url)
        .status()
        .unwrap()
}

#[test]
fn admin_api_requires_a_client_certificate_and_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new("admin");
    let ca_pem = ca.write(d, "admin");
    let (server_crt, server_key) =
        ca.issue(d, "server", &["localhost", "127.0.0.1"], Usage::ServerAuth);
    let (client_crt, client_key) = ca.issue(d, "client", &[], Usage::ClientAuth);
    let rogue = Ca::new("rogue");
    let (rogue_crt, rogue_key) = rogue.issue(d, "rogue", &[], Usage::ClientAuth);

    let seed = Seed::start(SeedOptions {
        extra_config: format!(
            "[admin.tls]\ncert = \"{}\"\nkey = \"{}\"\nclient_ca = \"{}\"\n",
            server_crt.display(),
            server_key.display(),
            ca_pem.display()
        ),
        admin_tls: Some((ca_pem.clone(), client_crt.clone(), client_key.clone())),
        ..Default::default()
    });
    assert!(seed.admin_url("/").starts_with("https://"));

    // The right CA, client certificate and token: the API answers.
    let status = status_json(&seed.seedctl(&["status", "-o", "json"]));
    assert!(
        status["nid"].as_str().unwrap().starts_with("z6Mk"),
        "{status}"
    );
    // The same from the environment.
    let out = Command::new(bin("seedctl"))
        .env("SEEDCTL_ADMIN", format!("https://{}", seed.admin))
        .env("SEEDCTL_TOKEN_FILE", seed.token_file())
        .env("SEEDCTL_CACERT", &ca_pem)
        .env("SEEDCTL_CERT", &client_crt)
        .env("SEEDCTL_KEY", &client_key)
        .args(["status", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(status_json(&out)["nid"], status["nid"]);
    // Unauthenticated endpoints are behind the client certificate too.
    let (ca_arg, cert_arg, key_arg) = (
        ca_pem.as_os_str(),
        client_crt.as_os_str(),
        client_key.as_os_str(),
    );
    let with_cert = [
        "--cacert".as_ref(),
        ca_arg,
        "--cert".as_ref(),
        cert_arg,
        "--key".as_ref(),
        key_arg,
    ];
    assert!(curl(&seed.admin_url("/metrics"), &with_cert).success());

    // No client certificate: the TLS handshake is refused (seedctl and curl).
    let err = refused(
        &seedctl_with(&seed, Some(&ca_pem), None, &["status"]),
        "no client certificate",
    );
    assert!(err.contains("cannot reach the admin API"), "{err}");
    assert!(err.contains("CertificateRequired"), "{err}");
    assert!(!curl(&seed.admin_url("/readyz"), &["--cacert".as_ref(), ca_arg]).success());
    // A client certificate from another CA: refused.
    let err = refused(
        &seedctl_with(
            &seed,
            Some(&ca_pem),
            Some((&rogue_crt, &rogue_key)),
            &["status"],
        ),
        "client certificate from another CA",
    );
    assert!(err.contains("UnknownCA"), "{err}");
    // The server's CA not trusted (public roots only): refused by seedctl.
    let err = refused(
        &seedctl_with(&seed, None, Some((&client_crt, &client_key)), &["status"]),
        "untrusted server certificate",
    );
    assert!(err.contains("UnknownIssuer"), "{err}");
    // Plain HTTP to the admin port gets no answer.
    assert!(!curl(&format!("http://{}/readyz", seed.admin), &[]).success());
    // --cert without --key: a one-line usage error.
    let out = Command::new(bin("seedctl"))
        .env_remove("SEEDCTL_KEY")
        .arg("--admin")
        .arg(format!("https://{}", seed.admin))
        .arg("--cert")
        .arg(&client_crt)
        .arg("status")
        .output()
        .unwrap();
    let err = refused(&out, "--cert without --key");
    assert!(err.contains("--key"), "{err}");

    // The right client certificate but a wrong token: 401 (mTLS is in addition to the token).
    let err = refused(
        &run_unchecked(&seed, &["--token", "not-the-token", "status"]),
        "wrong token",
    );
    assert!(err.contains("401"), "{err}");

    // A new server certificate (from another CA) is served after `seedctl config reload`.
    let next = Ca::new("next");
    let next_pem = next.write(d, "next");
    next.issue(d, "server", &["localhost", "127.0.0.1"], Usage::ServerAuth);
    let out = seed.seedctl(&["config", "reload", "-o", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "admin.tls: certificate reloaded"),
        "{v}"
    );
    let client = Some((client_crt.as_path(), client_key.as_path()));
    status_json(&seedctl_with(
        &seed,
        Some(&next_pem),
        client,
        &["status", "-o", "json"],
    ));
    refused(
        &seedctl_with(&seed, Some(&ca_pem), client, &["status"]),
        "old server CA after the reload",
    );

    // And when the files change on disk (polled every 10 s), without a reload.
    let third = Ca::new("third");
    let third_pem = third.write(d, "third");
    third.issue(d, "server", &["localhost", "127.0.0.1"], Usage::ServerAuth);
    wait_for(
        "the polled admin certificate",
        Duration::from_secs(40),
        || {
            seedctl_with(&seed, Some(&third_pem), client, &["status", "-o", "json"])
                .status
                .success()
                .then_some(())
        },
    );
    assert!(seed.stop().success());
}
