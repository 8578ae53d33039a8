//! A minimal HTTP/1.1 bridge that runs `git http-backend` as CGI per request (plain or over
//! TLS), and a keep-alive HTTP/1.1 client for request-rate runs. The benches run the bridge as
//! a separate process (the bench binary re-executed), so its CPU is measured like a server's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

pub mod cgi {
    use super::*;
    use std::net::TcpListener;
    use std::process::ChildStdin;

    /// What the bridge serves and how.
    #[derive(Clone)]
    pub struct Bridge {
        /// `GIT_PROJECT_ROOT`.
        pub root: PathBuf,
        /// `GIT_CONFIG_GLOBAL` for git (protected configuration, e.g. an
        /// `uploadpack.packObjectsHook`); `/dev/null` without it.
        pub git_config: Option<PathBuf>,
        /// Serve HTTPS with this configuration.
        pub tls: Option<Arc<rustls::ServerConfig>>,
    }

    /// A rustls server configuration from PEM files.
    pub fn tls_config(cert: &Path, key: &Path) -> Arc<rustls::ServerConfig> {
        let certs: Vec<_> = rustls_pemfile::certs(&mut BufReader::new(
            std::fs::File::open(cert).expect("certificate file"),
        ))
        .collect::<Result<_, _>>()
        .expect("certificate PEM");
        let key = rustls_pemfile::private_key(&mut BufReader::new(
            std::fs::File::open(key).expect("key file"),
        ))
        .expect("key PEM")
        .expect("a private key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("certificate and key");
        Arc::new(config)
    }

    /// Start the bridge from `cmd` (this bench binary re-executed with `--cgi-server <root> 0
    /// …`, e.g. from [`crate::measure::Scope::command`]), registered with `scope`; returns the
    /// child and the address it listens on (the line it prints first).
    pub fn spawn(
        mut cmd: Command,
        scope: &crate::measure::Scope,
    ) -> (std::process::Child, SocketAddr) {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the CGI bridge");
        scope.started(child.id());
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("the CGI bridge did not start: {line:?}"));
        (child, addr)
    }

    /// If this process was started as the bridge (`--cgi-server <root> <port> [--tls <cert>
    /// <key>] [--git-config <file>]`, the bench binary re-executed), serve until killed and
    /// return `true`; otherwise `false` at once.
    pub fn serve_if_asked() -> bool {
        let args: Vec<String> = std::env::args().collect();
        let Some(i) = args.iter().position(|a| a == "--cgi-server") else {
            return false;
        };
        let usage = "--cgi-server <root> <port> [--tls <cert> <key>] [--git-config <file>]";
        let root = PathBuf::from(args.get(i + 1).expect(usage));
        let port: u16 = args.get(i + 2).and_then(|p| p.parse().ok()).expect(usage);
        let after = |name: &str, k: usize| {
            args.iter()
                .position(|a| a == name)
                .map(|j| PathBuf::from(args.get(j + k).expect(usage)))
        };
        let tls = after("--tls", 1)
            .zip(after("--tls", 2))
            .map(|(cert, key)| tls_config(&cert, &key));
        serve(
            &Bridge {
                root,
                git_config: after("--git-config", 1),
                tls,
            },
            port,
        );
        true
    }

    /// Accept on 127.0.0.1:`port` (0: any), print `listening <addr>` on stdout, and serve
    /// every connection on its own thread.
    pub fn serve(bridge: &Bridge, port: u16) {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind 127.0.0.1");
        println!("listening {}", listener.local_addr().unwrap());
        io::stdout().flush().unwrap();
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let bridge = bridge.clone();
            std::thread::spawn(move || {
                let _ = match &bridge.tls {
                    None => connection(stream, &bridge),
                    Some(tls) => connection_tls(stream, tls, &bridge),
                };
            });
        }
    }

    pub struct Head {
        pub method: String,
        pub target: String,
        pub version: String,
        pub headers: Vec<(String, String)>,
    }

    impl Head {
        pub fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    /// Read a request head; `None` on a clean end of the connection.
    pub fn read_head(r: &mut impl BufRead) -> io::Result<Option<Head>> {
        let mut line = String::new();
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 {
                return Ok(None);
            }
            if !line.trim().is_empty() {
                break;
            }
        }
        let mut parts = line.split_whitespace();
        // A response's status line parses the same way: "HTTP/1.1" "200" "OK".
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "bad start line"));
        };
        let version = parts.next().unwrap_or("");
        let mut head = Head {
            method: method.to_owned(),
            target: target.to_owned(),
            version: version.to_owned(),
            headers: Vec::new(),
        };
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let l = line.trim_end_matches(['\r', '\n']);
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                head.headers
                    .push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
        Ok(Some(head))
    }

    fn connection(stream: TcpStream, bridge: &Bridge) -> io::Result<()> {
        stream.set_nodelay(true)?;
        let mut reader = BufReader::with_capacity(64 * 1024, stream.try_clone()?);
        let mut writer = stream;
        while let Some(head) = read_head(&mut reader)? {
            if !request(&head, &mut reader, &mut writer, bridge)? {
                break;
            }
        }
        Ok(())
    }

    /// A sink that swallows writes once the CGI stops reading, so the request body is still
    /// drained from the socket and the connection stays in sync.
    struct Lenient(Option<ChildStdin>);

    impl Write for Lenient {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if let Some(w) = &mut self.0 {
                if w.write_all(buf).is_err() {
                    self.0 = None;
                }
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Copy a chunked body, decoded, from `r` to `w`.
    pub fn copy_chunked(r: &mut impl BufRead, w: &mut impl Write) -> io::Result<u64> {
        let mut total = 0;
        let mut line = String::new();
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let size = line.trim().split(';').next().unwrap_or("");
            let size = u64::from_str_radix(size.trim(), 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            if size == 0 {
                // Trailers until the blank line.
                loop {
                    line.clear();
                    if r.read_line(&mut line)? == 0 || line.trim().is_empty() {
                        return Ok(total);
                    }
                }
            }
            let n = io::copy(&mut r.by_ref().take(size), w)?;
            if n != size {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            total += n;
            line.clear();
            r.read_line(&mut line)?;
        }
    }

    /// Answer one request. Returns whether the connection may be kept open.
    fn request(
        head: &Head,
        reader: &mut BufReader<TcpStream>,
        writer: &mut TcpStream,
        bridge: &Bridge,
    ) -> io::Result<bool> {
        let (path, query) = head.target.split_once('?').unwrap_or((&head.target, ""));
        let chunked = head
            .header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let length = head
            .header("content-length")
            .and_then(|v| v.parse::<u64>().ok());
        let has_body = chunked || length.is_some_and(|n| n > 0);
        let keep_alive = head.version == "HTTP/1.1"
            && !head
                .header("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("close"));

        let mut cmd = backend(head, path, query, length.filter(|_| !chunked), bridge);
        cmd.stdin(if has_body {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        if has_body
            && head
                .header("expect")
                .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
        {
            writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(_) => {
                writer.write_all(
                    b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )?;
                return Ok(false);
            }
        };
        let stdin = Lenient(child.stdin.take());
        let stdout = child.stdout.take().unwrap();
        let (sent, fed) = std::thread::scope(|s| {
            let feeder = s.spawn(move || -> io::Result<()> {
                let mut stdin = stdin;
                if chunked {
                    copy_chunked(reader, &mut stdin)?;
                } else if let Some(n) = length {
                    let got = io::copy(&mut reader.by_ref().take(n), &mut stdin)?;
                    if got != n {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                }
                Ok(())
            });
            let sent = respond(stdout, writer);
            if sent.is_err() {
                let _ = child.kill();
            }
            (sent, feeder.join().unwrap())
        });
        let _ = child.wait();
        sent?;
        fed?;
        Ok(keep_alive)
    }

    /// `git http-backend` for one request, as a CGI server would start it.
    fn backend(
        head: &Head,
        path: &str,
        query: &str,
        length: Option<u64>,
        bridge: &Bridge,
    ) -> Command {
        let root = &bridge.root;
        let mut cmd = Command::new("git");
        cmd.arg("http-backend")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", root)
            .env("LANG", "C")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env(
                "GIT_CONFIG_GLOBAL",
                bridge
                    .git_config
                    .as_deref()
                    .unwrap_or(Path::new("/dev/null")),
            )
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PROJECT_ROOT", root)
            .env("GIT_HTTP_EXPORT_ALL", "1")
            .env("GATEWAY_INTERFACE", "CGI/1.1")
            .env("SERVER_PROTOCOL", "HTTP/1.1")
            .env("REMOTE_ADDR", "127.0.0.1")
            .env("PATH_INFO", path)
            .env("QUERY_STRING", query)
            .env("REQUEST_METHOD", &head.method);
        if let Some(v) = head.header("content-type") {
            cmd.env("CONTENT_TYPE", v);
        }
        if let Some(n) = length {
            cmd.env("CONTENT_LENGTH", n.to_string());
        }
        if let Some(v) = head.header("git-protocol") {
            cmd.env("HTTP_GIT_PROTOCOL", v);
        }
        if let Some(v) = head.header("content-encoding") {
            cmd.env("HTTP_CONTENT_ENCODING", v);
        }
        cmd
    }

    /// One HTTPS connection: requests in turn, each body read whole before git starts (a
    /// TLS stream is not split between a reader and a writer thread; upload-pack requests
    /// are small).
    fn connection_tls(
        stream: TcpStream,
        tls: &Arc<rustls::ServerConfig>,
        bridge: &Bridge,
    ) -> io::Result<()> {
        stream.set_nodelay(true)?;
        let conn = rustls::ServerConnection::new(Arc::clone(tls)).map_err(io::Error::other)?;
        let tls = rustls::StreamOwned::new(conn, stream);
        let mut reader = BufReader::with_capacity(64 * 1024, tls);
        while let Some(head) = read_head(&mut reader)? {
            let (path, query) = head.target.split_once('?').unwrap_or((&head.target, ""));
            let chunked = head
                .header("transfer-encoding")
                .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
            let length = head
                .header("content-length")
                .and_then(|v| v.parse::<u64>().ok());
            let keep_alive = head.version == "HTTP/1.1"
                && !head
                    .header("connection")
                    .is_some_and(|v| v.eq_ignore_ascii_case("close"));
            if head
                .header("expect")
                .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
            {
                reader
                    .get_mut()
                    .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
                reader.get_mut().flush()?;
            }
            let mut body = Vec::new();
            if chunked {
                copy_chunked(&mut reader, &mut body)?;
            } else if let Some(n) = length {
                reader.by_ref().take(n).read_to_end(&mut body)?;
            }
            let mut cmd = backend(&head, path, query, Some(body.len() as u64), bridge);
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            let mut child = cmd.spawn()?;
            let mut stdin = child.stdin.take();
            let stdout = child.stdout.take().expect("piped stdout");
            let feeder = std::thread::spawn(move || {
                if let Some(w) = stdin.as_mut() {
                    let _ = w.write_all(&body);
                }
            });
            let sent = respond(stdout, reader.get_mut());
            if sent.is_err() {
                let _ = child.kill();
            }
            let _ = feeder.join();
            let _ = child.wait();
            sent?;
            if !keep_alive {
                break;
            }
        }
        let tls = reader.get_mut();
        tls.conn.send_close_notify();
        let _ = tls.flush();
        Ok(())
    }

    /// Parse the CGI header block, then stream the body with chunked encoding.
    fn respond(stdout: std::process::ChildStdout, w: &mut impl Write) -> io::Result<()> {
        let mut out = BufReader::with_capacity(64 * 1024, stdout);
        let mut status = String::from("200 OK");
        let mut headers = String::new();
        let mut saw_header = false;
        let mut line = Vec::new();
        loop {
            line.clear();
            if out.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            saw_header = true;
            let l = String::from_utf8_lossy(&line);
            let l = l.trim_end_matches(['\r', '\n']);
            if l.is_empty() {
                break;
            }
            let Some((k, v)) = l.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("status") {
                status = v.to_owned();
            } else if !["content-length", "transfer-encoding", "connection"]
                .iter()
                .any(|h| k.eq_ignore_ascii_case(h))
            {
                let _ = write!(headers, "{k}: {v}\r\n");
            }
        }
        if !saw_header {
            status = String::from("502 Bad Gateway");
        }
        w.write_all(
            format!("HTTP/1.1 {status}\r\n{headers}Transfer-Encoding: chunked\r\n\r\n").as_bytes(),
        )?;
        let mut frame = Vec::with_capacity(64 * 1024 + 16);
        loop {
            let buf = out.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            let n = buf.len();
            frame.clear();
            let _ = write!(frame, "{n:x}\r\n");
            frame.extend_from_slice(buf);
            frame.extend_from_slice(b"\r\n");
            w.write_all(&frame)?;
            out.consume(n);
        }
        w.write_all(b"0\r\n\r\n")?;
        w.flush()
    }
}

// ------------------------------------------------------------------------------------------
// A minimal keep-alive HTTP/1.1 client for the request-rate runs.
// ------------------------------------------------------------------------------------------

pub mod client {
    use super::*;

    pub struct Client {
        addr: SocketAddr,
        conn: Option<(BufReader<TcpStream>, TcpStream)>,
    }

    impl Client {
        pub fn new(addr: SocketAddr) -> Self {
            Client { addr, conn: None }
        }

        /// Send a raw request and read the whole response: (status, body bytes).
        pub fn exchange(&mut self, request: &[u8]) -> io::Result<(u16, u64)> {
            let result = self.try_exchange(request);
            if result.is_err() {
                self.conn = None;
            }
            result
        }

        fn try_exchange(&mut self, request: &[u8]) -> io::Result<(u16, u64)> {
            if self.conn.is_none() {
                let s = TcpStream::connect(self.addr)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(Duration::from_secs(30)))?;
                self.conn = Some((BufReader::with_capacity(256 * 1024, s.try_clone()?), s));
            }
            let (r, w) = self.conn.as_mut().unwrap();
            w.write_all(request)?;
            let (status, bytes, keep) = read_response(r)?;
            if !keep {
                self.conn = None;
            }
            Ok((status, bytes))
        }
    }

    /// (status, body bytes, connection reusable).
    pub fn read_response(r: &mut impl BufRead) -> io::Result<(u16, u64, bool)> {
        read_response_to(r, &mut io::sink())
    }

    /// [`read_response`], the body (de-chunked) written to `body`.
    pub fn read_response_to(
        r: &mut impl BufRead,
        body: &mut impl Write,
    ) -> io::Result<(u16, u64, bool)> {
        let head = cgi_head(r)?;
        let status: u16 = head
            .target // the status code, in the position of a request target
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad status line"))?;
        let chunked = head
            .header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let close = head
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        if chunked {
            let n = cgi::copy_chunked(r, body)?;
            Ok((status, n, !close))
        } else if let Some(len) = head.header("content-length").and_then(|v| v.parse().ok()) {
            let n = io::copy(&mut r.by_ref().take(len), body)?;
            if n != len {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            Ok((status, n, !close))
        } else {
            let n = io::copy(r, body)?;
            Ok((status, n, false))
        }
    }

    /// A rustls client configuration trusting only the CA in `ca_pem`.
    pub fn tls_client_config(ca_pem: &Path) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut BufReader::new(
            std::fs::File::open(ca_pem).expect("CA file"),
        )) {
            roots.add(cert.expect("CA PEM")).expect("CA certificate");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("TLS versions")
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    }

    type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

    /// One keep-alive HTTPS connection (`localhost` certificate), opened on first use.
    pub struct TlsClient {
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
        conn: Option<BufReader<TlsStream>>,
    }

    impl TlsClient {
        pub fn new(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> Self {
            TlsClient {
                addr,
                config,
                conn: None,
            }
        }

        /// Send `request`, read the response; its body goes to `body`: (status, body bytes).
        pub fn exchange_to(
            &mut self,
            request: &[u8],
            body: &mut impl Write,
        ) -> io::Result<(u16, u64)> {
            let result = self.try_exchange(request, body);
            if result.is_err() {
                self.conn = None;
            }
            result
        }

        fn try_exchange(
            &mut self,
            request: &[u8],
            body: &mut impl Write,
        ) -> io::Result<(u16, u64)> {
            if self.conn.is_none() {
                let s = TcpStream::connect(self.addr)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(Duration::from_secs(120)))?;
                let name = rustls::pki_types::ServerName::try_from("localhost")
                    .map_err(io::Error::other)?;
                let conn = rustls::ClientConnection::new(Arc::clone(&self.config), name)
                    .map_err(io::Error::other)?;
                self.conn = Some(BufReader::with_capacity(
                    256 * 1024,
                    rustls::StreamOwned::new(conn, s),
                ));
            }
            let r = self.conn.as_mut().unwrap();
            r.get_mut().write_all(request)?;
            r.get_mut().flush()?;
            let (status, bytes, keep) = read_response_to(r, body)?;
            if !keep {
                self.conn = None;
            }
            Ok((status, bytes))
        }
    }

    /// A response head parsed like a request head ("HTTP/1.1 200 OK" → method, target, ...).
    fn cgi_head(r: &mut impl BufRead) -> io::Result<cgi::Head> {
        cgi::read_head(r)?.ok_or_else(|| io::ErrorKind::UnexpectedEof.into())
    }
}
