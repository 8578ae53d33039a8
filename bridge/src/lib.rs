//! `seedd-bridge <socket>` (also `seedd bridge <socket>`): the process `git fetch` runs as its
//! `ext::` transport during a fetch, relaying git's bytes to and from the daemon over a
//! private Unix socket.
//!
//! It is its own small binary because it starts twice per fetch: the `seedd` binary links
//! RocksDB, whose dynamic relocations and static initialisers made each start cost about
//! 5 ms of CPU; this one has no dependencies beyond std. The daemon runs `seedd-bridge` from
//! its own directory when it is there, else `seedd bridge`.
#![forbid(unsafe_code)]

use std::path::Path;

/// `seedd bridge <socket>`: the `ext::` command `git fetch` runs. Copies stdin to the socket
/// and the socket to stdout until both directions end.
pub fn bridge(socket: &Path) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let sock = std::os::unix::net::UnixStream::connect(socket)?;
    let mut to_sock = sock.try_clone()?;
    let up = std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let Some(data) = buf.get(..n) else { break };
                    if to_sock.write_all(data).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to_sock.shutdown(std::net::Shutdown::Write);
    });
    let mut from_sock = sock;
    let mut stdout = std::io::stdout().lock();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from_sock.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let Some(data) = buf.get(..n) else { break };
                if stdout
                    .write_all(data)
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    drop(stdout);
    let _ = up.join();
    Ok(())
}
