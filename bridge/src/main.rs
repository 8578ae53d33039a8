//! `seedd-bridge <socket>`: see the library.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(socket), None) = (args.next(), args.next()) else {
        eprintln!("usage: seedd-bridge <socket> (run by seedd's fetches as git's ext:: transport)");
        return ExitCode::from(2);
    };
    let socket = PathBuf::from(socket);
    match seedd_bridge::bridge(&socket) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seedd-bridge {}: {e}", socket.display());
            ExitCode::FAILURE
        }
    }
}
