//! The `seedd-bridge` binary relays its stdin to the socket and the socket to its stdout, and
//! exits once both directions ended; without a socket argument it prints its usage.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};

#[test]
fn relays_both_ways_until_both_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_seedd-bridge"))
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut sock, _) = listener.accept().unwrap();
    // 200 KiB up (more than one 64 KiB read), then the daemon's answer down.
    let up: Vec<u8> = (0..200 * 1024).map(|i| (i % 251) as u8).collect();
    let mut stdin = child.stdin.take().unwrap();
    let sent = up.clone();
    let writer = std::thread::spawn(move || {
        stdin.write_all(&sent).unwrap();
        // Dropping stdin ends the upward direction: the bridge half-closes the socket.
    });
    let mut got = Vec::new();
    sock.read_to_end(&mut got).unwrap();
    writer.join().unwrap();
    assert_eq!(got, up, "stdin reached the socket whole, then EOF");
    sock.write_all(b"0008NAK\n0000").unwrap();
    drop(sock);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, b"0008NAK\n0000");
}

#[test]
fn without_a_socket_it_says_how_to_run_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_seedd-bridge"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("usage: seedd-bridge"));
}

#[test]
fn an_absent_socket_is_an_error_naming_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_seedd-bridge"))
        .arg("/nonexistent/seedd-bridge.sock")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/seedd-bridge.sock"));
}
