//! Runs a command with io_uring refused the way Docker's default seccomp
//! profile refuses it (`io_uring_setup`, `io_uring_enter` and
//! `io_uring_register` fail with `EPERM`), to see spargio choose epoll.
//!
//! ```sh
//! cargo build --release -p spargio --example no_uring --example demo
//! target/release/examples/no_uring target/release/examples/demo
//! ```
//!
//! CI runs the whole test suite under it (`.ci/run`).

use std::os::unix::process::CommandExt;

#[path = "../tests/common/seccomp.rs"]
mod seccomp;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: no_uring <program> [args...]");
        std::process::exit(2);
    };
    if let Err(err) = seccomp::refuse_io_uring() {
        eprintln!("no_uring: could not install the seccomp filter: {err}");
        std::process::exit(1);
    }
    let err = std::process::Command::new(&program).args(args).exec();
    eprintln!(
        "no_uring: could not run {}: {err}",
        program.to_string_lossy()
    );
    std::process::exit(127);
}
