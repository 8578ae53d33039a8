//! Real `git` as a client, and raw git protocol requests (pkt-lines, v2 fetches over HTTP/1.1).

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::*;

/// `git` with an isolated environment (no user/system config, no prompts).
pub fn git(home: &Path) -> Command {
    let mut c = Command::new("git");
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com");
    c
}

/// Raw HTTP/1.1 request over a fresh TCP connection; returns the stream after sending.
pub fn raw_request(addr: SocketAddr, request: &[u8]) -> TcpStream {
    use std::io::Write;
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request).unwrap();
    s
}

/// `git -C repo <args>`'s trimmed stdout (HOME = `repo`).
pub fn git_at(repo: &Path, args: &[&str]) -> String {
    stdout(&run(git(repo).arg("-C").arg(repo).args(args)))
        .trim()
        .to_owned()
}

/// Encode one pkt-line.
pub fn pkt(line: &str) -> String {
    format!("{:04x}{line}", line.len() + 4)
}

/// The body of a protocol v2 `fetch` of `want` without `have`s (a pack-cache key), with
/// `extra` argument lines (e.g. `"deepen 3"`) before `done`.
pub fn v2_fetch_body(want: &str, extra: &[&str]) -> String {
    let mut body = String::new();
    body.push_str(&pkt("command=fetch\n"));
    body.push_str(&pkt("object-format=sha1\n"));
    body.push_str("0001");
    body.push_str(&pkt("no-progress\n"));
    body.push_str(&pkt(&format!("want {want}\n")));
    for line in extra {
        body.push_str(&pkt(&format!("{line}\n")));
    }
    body.push_str(&pkt("done\n"));
    body.push_str("0000");
    body
}

/// One HTTP/1.1 `git-upload-pack` POST of a v2 `body` for `rid` (`Connection: close` if `close`).
pub fn v2_upload_pack_request(rid: &str, body: &str, close: bool) -> String {
    let connection = if close { "Connection: close\r\n" } else { "" };
    format!(
        "POST /{rid}.git/git-upload-pack HTTP/1.1\r\nHost: x\r\n{connection}Git-Protocol: version=2\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Run `git --git-dir <git_dir> <args>` with `input` on stdin; its trimmed stdout.
pub fn git_with_input(home: &Path, git_dir: &Path, args: &[&str], input: &[u8]) -> String {
    use std::io::Write;
    let mut child = git(home)
        .arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?} failed");
    stdout(&out)
}
