//! The reference README's code blocks, compiled and run unchanged.
//!
//! Each block sits verbatim in `tests/seed_readme/*.rs` (never reformat or
//! edit those files: they are what a new user copies) and is pulled in with
//! `include!`. The README's install line asks for the features `macros`
//! and `uring-native`; this test target is built with both (see the
//! `[[test]]` entry in `Cargo.toml`).
//!
//! The quick-start server runs forever on the fixed port 7001 and writes
//! into `./ingest-out`, exactly as the README has it; the test runs it on a
//! thread inside a fresh scratch directory (this binary has one test, so
//! changing the working directory affects nobody else), drives it with real
//! clients and checks the files it wrote.

// Each block's `main` is private to its module; `run` calls it.
#[allow(clippy::all)]
mod quick_start {
    include!("seed_readme/quick_start.rs");
    pub(super) fn run() -> std::io::Result<()> {
        main()
    }
}

#[allow(clippy::all)]
mod tokio_entry {
    include!("seed_readme/tokio_entry.rs");
    pub(super) fn run() -> Result<(), spargio::RuntimeError> {
        main()
    }
}

#[allow(clippy::all)]
mod macro_entry {
    include!("seed_readme/macro_entry.rs");
    pub(super) fn run() {
        main()
    }
}

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// Generous bound for "this must not hang"; never a performance assertion.
const HANG: Duration = Duration::from_secs(60);

fn payload(i: usize) -> Vec<u8> {
    (0..(1000 + 517 * i)).map(|b| (b * 31 + i) as u8).collect()
}

fn connect_when_listening() -> TcpStream {
    let start = Instant::now();
    loop {
        match TcpStream::connect("127.0.0.1:7001") {
            Ok(stream) => return stream,
            Err(e) if start.elapsed() < HANG => {
                assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("the quick-start server never listened on 7001: {e}"),
        }
    }
}

/// Waits until `path` holds `want.len()` bytes, then returns its contents.
fn wait_for_file(path: &Path, want: &[u8]) -> Vec<u8> {
    let start = Instant::now();
    loop {
        if let Ok(bytes) = std::fs::read(path) {
            if bytes.len() >= want.len() {
                return bytes;
            }
        }
        assert!(
            start.elapsed() < HANG,
            "{} was never written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn every_code_block_of_the_seed_readme_runs() {
    // Runtime Entry, helper form: `spargio::run` awaited by tokio.
    tokio_entry::run().expect("spargio::run inside #[tokio::main]");

    // Runtime Entry, attribute form with both arguments. It names
    // `backend = "io_uring"`, which fails to start where io_uring is refused.
    match spargio::probe_io_uring() {
        Ok(()) => macro_entry::run(),
        Err(refusal) => eprintln!("SKIP the io_uring-only block: io_uring is refused ({refusal})"),
    }

    // Quick start: the ingest server, fed by real clients.
    let dir = std::env::temp_dir().join(format!("spargio-seed-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::env::set_current_dir(&dir).unwrap();
    let server = std::thread::spawn(quick_start::run);

    // One client at a time: the listener assigns ids in accept order, so
    // client i's bytes land in `ingest-out/{i}.bin`.
    for i in 0..6 {
        let data = payload(i);
        let mut client = connect_when_listening();
        client.write_all(&data).unwrap();
        let written = wait_for_file(&dir.join(format!("ingest-out/{i}.bin")), &data);
        assert_eq!(written, data, "file {i}");
        drop(client);
    }
    assert!(
        !server.is_finished(),
        "the quick-start server stopped: {:?}",
        server.join()
    );
    std::env::set_current_dir(std::env::temp_dir()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    // The server loops forever, as the README's does; it ends with the
    // test process.
}
