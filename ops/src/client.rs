//! The admin API client: bearer token, TLS settings, one request → one typed answer.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::cli::Cli;

/// Talks to one seedd's admin API.
pub(crate) struct Client<'a> {
    cli: &'a Cli,
    /// The admin API's base URL (`--admin`, or one replica's in `fleet` commands).
    base: String,
}

/// An HTTP method of the admin API.
#[derive(Clone, Copy)]
enum Method {
    Get,
    Post,
    Put,
    Delete,
}

impl<'a> Client<'a> {
    pub(crate) fn new(cli: &'a Cli) -> Self {
        Self {
            cli,
            base: cli.admin.clone(),
        }
    }

    /// The same token and TLS settings, another seed's admin API (a fleet's replicas share
    /// the chart's admin token).
    pub(crate) fn at(cli: &'a Cli, base: &str) -> Self {
        Self {
            cli,
            base: base.to_owned(),
        }
    }

    pub(crate) fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.call(Method::Get, path, None)
    }

    /// `POST` without a body.
    pub(crate) fn post<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.call(Method::Post, path, None)
    }

    /// `POST` with a JSON body.
    pub(crate) fn post_json<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> anyhow::Result<T> {
        self.call(Method::Post, path, Some(serde_json::to_string(body)?))
    }

    pub(crate) fn put_json<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> anyhow::Result<T> {
        self.call(Method::Put, path, Some(serde_json::to_string(body)?))
    }

    pub(crate) fn delete<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.call(Method::Delete, path, None)
    }

    /// `POST` without a body that waits as long as the operation runs (up to an hour:
    /// `repo maintain` of a large repository).
    pub(crate) fn post_waiting<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.call_within(Method::Post, path, None, Duration::from_secs(3_600))
    }

    fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> anyhow::Result<T> {
        self.call_within(method, path, body, Duration::from_secs(120))
    }

    fn call_within<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<String>,
        timeout: Duration,
    ) -> anyhow::Result<T> {
        let cli = self.cli;
        let url = format!("{}{}", self.base.trim_end_matches('/'), path);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .tls_config(tls_config(cli)?)
            .build()
            .into();
        let auth = format!("Bearer {}", token(cli)?);
        let json = "application/json";
        let resp = match (method, body) {
            (Method::Post, Some(b)) => agent
                .post(&url)
                .header("Authorization", &auth)
                .header("Content-Type", json)
                .send(b),
            (Method::Post, None) => agent.post(&url).header("Authorization", &auth).send_empty(),
            (Method::Put, b) => agent
                .put(&url)
                .header("Authorization", &auth)
                .header("Content-Type", json)
                .send(b.unwrap_or_else(|| "{}".to_owned())),
            (Method::Delete, _) => agent.delete(&url).header("Authorization", &auth).call(),
            (Method::Get, _) => agent.get(&url).header("Authorization", &auth).call(),
        }
        .map_err(|e| {
            let hint = if url.starts_with("https://") {
                "is seedd running, --admin right, and --cacert / --cert / --key what its admin.tls needs?"
            } else {
                "is seedd running and --admin right?"
            };
            anyhow!("cannot reach the admin API at {url}: {e}; {hint}")
        })?;
        let status = resp.status();
        let text = resp
            .into_body()
            .read_to_string()
            .map_err(|e| anyhow!("{url}: reading the answer: {e}"))?;
        if !status.is_success() {
            let msg = match serde_json::from_str::<seedd_api::ErrorBody>(&text) {
                Ok(b) => b.error,
                Err(_) if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok() => {
                    "request failed".to_owned()
                }
                // A plain-text answer (e.g. "not found" from a seedd without this route).
                Err(_) => text.trim().chars().take(200).collect(),
            };
            return Err(anyhow!("{url}: {status}: {msg}"));
        }
        serde_json::from_str(&text).map_err(|e| anyhow!("{url}: unexpected answer ({e})"))
    }
}

fn token(cli: &Cli) -> anyhow::Result<String> {
    if let Some(t) = &cli.token {
        return Ok(t.trim().to_owned());
    }
    let path = cli
        .token_file
        .clone()
        .unwrap_or_else(|| PathBuf::from("./seedd-data/admin-token"));
    let t = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading the admin token {}: pass --token-file (seedd writes <data_dir>/admin-token)",
            path.display()
        )
    })?;
    Ok(t.trim().to_owned())
}

/// Every certificate in a PEM file (`what` names the flag in errors).
fn pem_certs(path: &Path, what: &str) -> anyhow::Result<Vec<ureq::tls::Certificate<'static>>> {
    let pem = std::fs::read(path).with_context(|| format!("reading {what} {}", path.display()))?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        let item = item.with_context(|| format!("{what} {}: not PEM", path.display()))?;
        if let ureq::tls::PemItem::Certificate(c) = item {
            certs.push(c);
        }
    }
    if certs.is_empty() {
        bail!("{what} {}: no certificate in the PEM file", path.display());
    }
    Ok(certs)
}

/// TLS settings for an https:// admin URL: trusted CA (`--cacert`) and client certificate
/// (`--cert`, `--key`). Without them: the public (Mozilla) roots, no client certificate.
pub(crate) fn tls_config(cli: &Cli) -> anyhow::Result<ureq::tls::TlsConfig> {
    let mut tls = ureq::tls::TlsConfig::builder();
    if let Some(ca) = &cli.cacert {
        let roots = pem_certs(ca, "--cacert")?;
        tls = tls.root_certs(ureq::tls::RootCerts::Specific(Arc::new(roots)));
    }
    match (&cli.cert, &cli.key) {
        (Some(cert), Some(key)) => {
            let chain = pem_certs(cert, "--cert")?;
            let pem =
                std::fs::read(key).with_context(|| format!("reading --key {}", key.display()))?;
            let key = ureq::tls::PrivateKey::from_pem(&pem)
                .with_context(|| format!("--key {}: no usable private key", key.display()))?;
            tls = tls.client_cert(Some(ureq::tls::ClientCert::new_with_certs(&chain, key)));
        }
        (None, None) => {}
        (Some(_), None) => bail!("--cert needs --key (the client certificate's private key)"),
        (None, Some(_)) => bail!("--key needs --cert (the client certificate)"),
    }
    Ok(tls.build())
}

/// Percent-encodes one path segment or query value (RFC 3986 unreserved characters, `:`, `*`
/// and `@` stay as they are, so `rad:z…` and `*.example.org` read naturally in logs).
pub(crate) fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':' | b'*' | b'@')
        {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `path?tenant=T` when a tenant is given.
pub(crate) fn with_tenant(path: &str, tenant: Option<&str>) -> String {
    match tenant {
        Some(t) => format!("{path}?tenant={}", enc(t)),
        None => path.to_owned(),
    }
}

/// `path` with the query pairs that are present, each value percent-encoded.
pub(crate) fn with_query(path: &str, pairs: &[(&str, Option<&str>)]) -> String {
    let q: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={}", enc(v))))
        .collect();
    if q.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", q.join("&"))
    }
}

/// Fetches a paged listing: one page when `page` asks for one, else every page from the
/// start, following `next` (`fetch(after)` gets the page after a cursor; `merge` appends a
/// page to the first and returns its `next`).
pub(crate) fn all_pages<T>(
    page: &crate::cli::PageArgs,
    mut fetch: impl FnMut(Option<&str>) -> anyhow::Result<T>,
    mut merge: impl FnMut(&mut T, T) -> Option<String>,
    next_of: impl Fn(&T) -> Option<String>,
) -> anyhow::Result<T> {
    let mut first = fetch(page.after.as_deref())?;
    if page.one_page() {
        return Ok(first);
    }
    let mut next = next_of(&first);
    let mut seen = std::collections::HashSet::new();
    while let Some(cursor) = next {
        if !seen.insert(cursor.clone()) {
            anyhow::bail!("the server returned cursor {cursor} twice");
        }
        let more = fetch(Some(&cursor))?;
        next = merge(&mut first, more);
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::PageArgs;

    /// Pages of `rows` of `size`, as a server answers: (rows, next).
    fn server(rows: &[u32], size: usize, after: Option<&str>) -> (Vec<u32>, Option<String>) {
        let start = after.map_or(0, |a| {
            let a: u32 = a.parse().unwrap();
            rows.iter().position(|r| *r > a).unwrap_or(rows.len())
        });
        let page: Vec<u32> = rows[start..].iter().take(size).copied().collect();
        let next = (start + size < rows.len()).then(|| page[page.len() - 1].to_string());
        (page, next)
    }

    #[test]
    fn all_pages_follows_next_or_stops_at_one_page() {
        let rows: Vec<u32> = (1..=25).collect();
        let run = |page: PageArgs| {
            all_pages(
                &page,
                |after| Ok(server(&rows, 10, after)),
                |all, more| {
                    all.0.extend(more.0);
                    all.1 = None;
                    more.1
                },
                |p| p.1.clone(),
            )
            .unwrap()
        };
        assert_eq!(run(PageArgs::default()), (rows.clone(), None));
        let one = run(PageArgs {
            limit: Some(10),
            after: None,
        });
        assert_eq!(one, ((1..=10).collect(), Some("10".to_owned())));
        let from = run(PageArgs {
            limit: None,
            after: Some("20".into()),
        });
        assert_eq!(from, ((21..=25).collect(), None));
        // A server that repeats a cursor is an error, not an endless loop.
        let looping = all_pages(
            &PageArgs::default(),
            |_| Ok((vec![1], Some("1".to_owned()))),
            |_, more: (Vec<u32>, Option<String>)| more.1,
            |p| p.1.clone(),
        );
        assert!(looping.is_err());
    }

    #[test]
    fn queries_encode_values_and_skip_absent_ones() {
        assert_eq!(with_query("/p", &[("a", None)]), "/p");
        assert_eq!(
            with_query(
                "/p",
                &[("a", Some("rad:z1/z6Mk")), ("b", None), ("c", Some("x y"))]
            ),
            "/p?a=rad:z1%2Fz6Mk&c=x%20y"
        );
    }
}
