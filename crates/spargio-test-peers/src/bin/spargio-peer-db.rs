//! Starts a private PostgreSQL server with the TechEmpower tables (see
//! `spargio_test_peers::postgres`) for benchmarks, prints
//! `DATABASE_URL=postgres://spargio@127.0.0.1:PORT/spargio` on stdout,
//! and keeps it running until stdin closes or SIGINT/SIGTERM arrives;
//! then it stops the server and removes its dir.
//!
//! ```text
//! cargo run -p spargio-test-peers --bin spargio-peer-db
//! ```
//!
//! A script can hold a pipe to its stdin (`coproc`, or
//! `exec 3> >(spargio-peer-db > url.txt)`) and close it to stop the
//! server, or run it in the background and `kill` it. A background job
//! of a non-interactive shell gets `/dev/null` as stdin: then only a
//! signal stops it.

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use spargio_test_peers::{is_present, postgres, Peer};

/// Set by the signal handler or when stdin reaches its end.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn main() {
    if !is_present(Peer::Postgres) {
        eprintln!(
            "spargio-peer-db: PostgreSQL is missing; install it with `{}` \
             (or scripts/install-test-peers.sh)",
            Peer::Postgres.install_hint()
        );
        std::process::exit(1);
    }
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sigaction` is plain C data for which all zeroes is
        // valid (an empty mask, no flags); the handler only stores to an
        // atomic, which is async-signal-safe; the pointers are to locals
        // live for the call.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }

    let pg = postgres();
    pg.techempower_schema();
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "DATABASE_URL={}", pg.url());
    let _ = stdout.flush();
    drop(stdout);
    eprintln!(
        "spargio-peer-db: PostgreSQL (pid {}) on {}:{}, dir {}; stop it by closing stdin or with SIGINT/SIGTERM",
        pg.pid(),
        pg.host(),
        pg.port(),
        pg.dir().display()
    );

    if !stdin_is_dev_null() {
        std::thread::spawn(|| {
            let mut buf = [0u8; 4096];
            let mut stdin = std::io::stdin().lock();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            STOP.store(true, Ordering::SeqCst);
        });
    }
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("spargio-peer-db: stopping PostgreSQL");
    // Returning from main runs the library's atexit handler, which stops
    // the server and removes its dir.
}

/// Stdin is `/dev/null` (or closed), where an end of input means nothing.
fn stdin_is_dev_null() -> bool {
    let Ok(null) = std::fs::metadata("/dev/null") else {
        return false;
    };
    match std::fs::metadata("/proc/self/fd/0") {
        Ok(stdin) => stdin.dev() == null.dev() && stdin.ino() == null.ino(),
        Err(_) => true,
    }
}
