//! # spargio-process
//!
//! Child processes on [spargio]: spawn, wait and talk to them through the
//! runtime's io_uring rings.
//!
//! * **Waiting costs no thread.** Each child gets a pidfd; its exit is
//!   awaited with `IORING_OP_WAITID` (Linux 6.7+, or a poll on the pidfd
//!   on older kernels). No thread per child, no `SIGCHLD` handler.
//! * **Piped stdio are ring streams.** [`ChildStdin`], [`ChildStdout`]
//!   and [`ChildStderr`] read and write with `IORING_OP_READ`/`WRITE`, and
//!   implement [`spargio::io::AsyncRead`]/[`AsyncWrite`](spargio::io::AsyncWrite)
//!   (owned buffers), `futures_io`'s traits and, with the `tokio-io`
//!   feature, tokio's.
//! * **Nothing leaks.** A dropped [`ChildHandle`] is reaped in the
//!   background once the child exits (killed first with
//!   [`kill_on_drop`](CommandBuilder::kill_on_drop)); a timeout kills and
//!   reaps before it reports `TimedOut`.
//!
//! ```
//! # spargio::block_on(spargio::run(|handle| async move {
//! use std::process::Command;
//!
//! let out = spargio_process::output(&handle, {
//!     let mut cmd = Command::new("sh");
//!     cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
//!     cmd
//! })
//! .await
//! .unwrap();
//! assert_eq!(out.status.code(), Some(3));
//! assert_eq!(out.stdout, b"out\n");
//! assert_eq!(out.stderr, b"err\n");
//! # })).unwrap();
//! ```
//!
//! # Calls
//!
//! Run to completion: [`status`], [`output`] (and `*_with_options`, for a
//! [`CommandOptions`] timeout). Spawn: [`spawn`], [`spawn_with_options`],
//! giving a [`ChildHandle`]. The free functions take a
//! [`std::process::Command`]; [`CommandBuilder`] has the same calls as
//! methods plus tokio's builder surface (`arg`, `env`, `stdin`, ...,
//! `kill_on_drop`).
//!
//! The run-to-completion calls spawn *when called*, as tokio's do; the
//! future they return waits. Every handle-taking call accepts a
//! `RuntimeHandle` or a `&RuntimeHandle`, and works from any thread.
//!
//! # Errors
//!
//! Every failure is an `io::Error` with a kind to match on: `NotFound`
//! (no such program), `PermissionDenied` (not executable), `TimedOut` (a
//! [`CommandOptions`] timeout passed; the child was killed and reaped),
//! `InvalidInput` (e.g. an invalid signal number), `BrokenPipe` (the
//! child closed its stdin, or stdin was shut down).
//!
//! # Caveats
//!
//! * Linux only (5.3+ for pidfds; 6.7+ for `IORING_OP_WAITID`).
//! * Reaping needs the children to stay ours: a process that sets
//!   `SIGCHLD` to `SIG_IGN`, or calls `waitpid(-1, ..)`, takes the exit
//!   statuses away, and waits then fail with `ECHILD`.
//! * Background reaping of dropped handles lasts as long as the runtime:
//!   a child still running when the runtime shuts down (not killed on
//!   drop, or its kill refused, e.g. `EPERM` for a child that became
//!   another user) stays a zombie after it exits, until this process
//!   exits. Neither a drop nor a shutdown waits for such a child.
//!
//! [spargio]: https://docs.rs/spargio

#![warn(
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

#[cfg(not(target_os = "linux"))]
compile_error!("spargio-process runs on Linux only: it is built on io_uring and pidfds");

mod child;
mod command;
mod compat;
mod race;
mod stdio;
#[cfg(feature = "tokio-io")]
mod tokio_io;
mod wait;

use std::future::Future;
use std::io;
use std::process::Command;

use spargio::RuntimeHandle;

pub use child::ChildHandle;
pub use command::{CommandBuilder, CommandOptions};
pub use std::process::{ExitStatus, Output, Stdio};

/// The README's code blocks, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
pub use stdio::{ChildStderr, ChildStdin, ChildStdout};

/// Spawns `command` now and returns a future of its exit status. Stdio is
/// as configured (inherited by default); pipes asked for are closed.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// let status = spargio_process::status(&handle, std::process::Command::new("true")).await;
/// assert!(status.unwrap().success());
/// # })).unwrap();
/// ```
pub fn status(
    handle: impl AsRef<RuntimeHandle>,
    command: Command,
) -> impl Future<Output = io::Result<ExitStatus>> + Send + 'static {
    status_with_options(handle, command, CommandOptions::default())
}

/// [`status`] with options: on timeout the child is killed and reaped, and
/// the future returns `TimedOut`.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use std::time::Duration;
/// use spargio_process::CommandOptions;
///
/// let mut cmd = std::process::Command::new("sleep");
/// cmd.arg("30");
/// let options = CommandOptions::default().with_timeout(Duration::from_millis(10));
/// let err = spargio_process::status_with_options(&handle, cmd, options).await.unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
/// # })).unwrap();
/// ```
pub fn status_with_options(
    handle: impl AsRef<RuntimeHandle>,
    command: Command,
    options: CommandOptions,
) -> impl Future<Output = io::Result<ExitStatus>> + Send + 'static {
    CommandBuilder::from(command).status_with_options(handle, options)
}

/// Spawns `command` now with stdout and stderr piped and returns a future
/// of its output (both read while waiting).
///
/// Unlike `std::process::Command::output`, stdin is left as `command`
/// configures it (inherited by default), not set to null: std has no
/// getter to tell whether it was configured. Use
/// [`CommandBuilder::output`] for std's defaults exactly.
pub fn output(
    handle: impl AsRef<RuntimeHandle>,
    command: Command,
) -> impl Future<Output = io::Result<Output>> + Send + 'static {
    output_with_options(handle, command, CommandOptions::default())
}

/// [`output`] with options: on timeout the child is killed and reaped, and
/// the future returns `TimedOut`.
pub fn output_with_options(
    handle: impl AsRef<RuntimeHandle>,
    command: Command,
    options: CommandOptions,
) -> impl Future<Output = io::Result<Output>> + Send + 'static {
    CommandBuilder::from_std_configured_stdin(command).output_with_options(handle, options)
}

/// Spawns `command` (stdio as configured, inherited by default).
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// let mut child = spargio_process::spawn(&handle, std::process::Command::new("true")).unwrap();
/// assert!(child.id().is_some());
/// assert!(child.wait().await.unwrap().success());
/// # })).unwrap();
/// ```
pub fn spawn(handle: impl AsRef<RuntimeHandle>, command: Command) -> io::Result<ChildHandle> {
    spawn_with_options(handle, command, CommandOptions::default())
}

/// [`spawn`] with options: a timeout is counted from now and enforced by
/// the handle's `wait` and `output` (kill, reap, `TimedOut`).
pub fn spawn_with_options(
    handle: impl AsRef<RuntimeHandle>,
    command: Command,
    options: CommandOptions,
) -> io::Result<ChildHandle> {
    CommandBuilder::from(command).spawn_with_options(handle, options)
}
