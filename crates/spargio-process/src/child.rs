//! `ChildHandle`: a spawned child, its pipes, waiting and killing.
//!
//! # Lifecycle
//!
//! 1. `std::process::Command::spawn` forks and execs (and reports
//!    `NotFound`, `PermissionDenied` ... as std does).
//! 2. `pidfd_open` on the new pid (see `wait.rs`); the pipe ends are taken
//!    out of the std `Child` and wrapped as ring-backed streams; the std
//!    `Child` is dropped (that neither waits nor kills).
//! 3. Waits go through the ring; the status is recorded in a slot the
//!    handle shares with every wait in flight, so a dropped `wait()`
//!    loses nothing.
//! 4. Drop, if the child was not reaped: with `kill_on_drop`, `SIGKILL`
//!    first. Then a detached reaper task waits for it on the ring, so it
//!    does not stay a zombie (best effort while the runtime lives: the
//!    task is dropped with the runtime). The drop itself never blocks. If
//!    the runtime refuses the task, or drops it unfinished, a child the
//!    kill reached is reaped there and then: a wait on its pidfd, outside
//!    the status lock and bounded by `KILLED_REAP_GRACE` (`SIGKILL` makes
//!    it prompt). A child not killed, or whose kill was refused (`EPERM`),
//!    is left to run and reaped only if it already exited, as tokio
//!    leaves a child that `kill_on_drop` did not cover.

use std::io;
use std::process::{Command, ExitStatus, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spargio::io::AsyncReadExt;
use spargio::{RuntimeHandle, UringNativeAny};

use crate::race::{join3, until};
use crate::stdio::{ChildStderr, ChildStdin, ChildStdout};
use crate::wait::{self, Proc};
use crate::CommandOptions;

/// A running (or exited) child process.
///
/// Made by [`spawn`](crate::spawn) or [`CommandBuilder::spawn`](crate::CommandBuilder::spawn).
/// The pipe ends the command asked for (`Stdio::piped()`) are in the
/// public `stdin`, `stdout` and `stderr` fields, as in `tokio::process`.
///
/// Dropping the handle does not wait. With
/// [`kill_on_drop`](crate::CommandBuilder::kill_on_drop) the child is
/// killed; either way it is reaped in the background once it exits, as
/// long as the runtime lives.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio_process::CommandBuilder;
///
/// let mut child = CommandBuilder::new("sh").args(["-c", "exit 3"]).spawn(&handle).unwrap();
/// let status = child.wait().await.unwrap();
/// assert_eq!(status.code(), Some(3));
/// assert_eq!(child.try_wait().unwrap(), Some(status));
/// # })).unwrap();
/// ```
#[derive(Debug)]
pub struct ChildHandle {
    /// The write end of the child's stdin, if it was piped.
    pub stdin: Option<ChildStdin>,
    /// The read end of the child's stdout, if it was piped.
    pub stdout: Option<ChildStdout>,
    /// The read end of the child's stderr, if it was piped.
    pub stderr: Option<ChildStderr>,
    handle: RuntimeHandle,
    native: UringNativeAny,
    proc: Arc<Proc>,
    kill_on_drop: bool,
    /// From `spawn_with_options`: when waits give up and kill.
    deadline: Option<Instant>,
}

impl ChildHandle {
    /// Spawns `command` (steps 1 and 2 of the module docs).
    pub(crate) fn spawn(
        handle: &RuntimeHandle,
        command: &mut Command,
        kill_on_drop: bool,
        options: &CommandOptions,
    ) -> io::Result<ChildHandle> {
        // A timeout too long to add (`Duration::MAX`) is no deadline.
        let deadline = options.timeout.and_then(|t| Instant::now().checked_add(t));
        let mut child = command.spawn()?;
        let proc = match Proc::open(child.id()) {
            Ok(proc) => proc,
            Err(err) => {
                // No pidfd (a kernel before 5.3, or out of fds): do not
                // leave the child behind.
                let _ = child.kill();
                let _ = child.wait();
                return Err(err);
            }
        };
        Ok(ChildHandle {
            stdin: child.stdin.take().map(|s| ChildStdin::new(handle, s)),
            stdout: child.stdout.take().map(|s| ChildStdout::new(handle, s)),
            stderr: child.stderr.take().map(|s| ChildStderr::new(handle, s)),
            handle: handle.clone(),
            native: handle.uring_native_unbound(),
            proc: Arc::new(proc),
            kill_on_drop,
            deadline,
        })
    }

    /// The child's pid, or `None` once it has been reaped (the pid may
    /// then belong to another process).
    pub fn id(&self) -> Option<u32> {
        match self.proc.status() {
            Some(_) => None,
            None => Some(self.proc.pid()),
        }
    }

    /// Waits for the child to exit, on the ring, and returns its status.
    ///
    /// `stdin` is closed first, so a child reading it to the end can
    /// finish (flush anything written through the poll-based traits
    /// before). Cancel-safe: dropping the future loses nothing, the next
    /// `wait` or [`try_wait`](Self::try_wait) reports the status. Once
    /// the child was reaped, returns the same status again.
    ///
    /// A child spawned with a [`CommandOptions`] timeout is killed and
    /// reaped when it passes, and this returns `TimedOut`.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.wait_until(self.deadline).await
    }

    /// [`wait`](Self::wait) with a timeout counted from this call (the
    /// spawn options' deadline, if any, still applies: the earlier wins).
    ///
    /// On expiry the child is killed and reaped, then this returns
    /// `TimedOut`, as the one-shot [`status_with_options`](crate::status_with_options)
    /// does. To give up waiting but leave the child running, wrap
    /// [`wait`](Self::wait) in [`spargio::timeout`] instead: dropping it
    /// loses nothing.
    pub async fn wait_with_options(&mut self, options: CommandOptions) -> io::Result<ExitStatus> {
        let deadline = self.deadline_with(&options);
        self.wait_until(deadline).await
    }

    /// The status if the child has exited (reaping it), `None` if it is
    /// still running. Never blocks.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.proc.try_reap()
    }

    /// Sends `SIGKILL` and waits for the child to exit. Ok if it had
    /// exited already.
    pub async fn kill(&mut self) -> io::Result<()> {
        self.start_kill()?;
        self.wait_until(None).await.map(drop)
    }

    /// Sends `SIGKILL` without waiting. Ok if the child has exited
    /// already (reaped or not).
    pub fn start_kill(&mut self) -> io::Result<()> {
        self.signal(libc::SIGKILL)
    }

    /// Sends signal `signal` (`libc::SIGTERM`, ...) through the pidfd, so
    /// it cannot reach another process that reused the pid. Ok, and
    /// nothing is sent, if the child has exited already. An invalid
    /// signal number is `InvalidInput`.
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        self.proc.signal(signal)
    }

    /// Closes stdin, then reads stdout and stderr to their end while
    /// waiting for the child (so a child filling one pipe while we read
    /// the other cannot deadlock). A pipe that was not piped reads as
    /// empty.
    ///
    /// A child spawned with a [`CommandOptions`] timeout is killed and
    /// reaped when it passes, and this returns `TimedOut`.
    pub async fn output(mut self) -> io::Result<Output> {
        let deadline = self.deadline;
        self.collect(deadline).await
    }

    /// The name `tokio::process::Child` uses for [`output`](Self::output).
    pub async fn wait_with_output(self) -> io::Result<Output> {
        self.output().await
    }

    /// [`output`](Self::output) with a timeout counted from this call; on
    /// expiry the child is killed and reaped, then this returns
    /// `TimedOut`.
    pub async fn output_with_options(mut self, options: CommandOptions) -> io::Result<Output> {
        let deadline = self.deadline_with(&options);
        self.collect(deadline).await
    }

    fn deadline_with(&self, options: &CommandOptions) -> Option<Instant> {
        let call = options.timeout.and_then(|t| Instant::now().checked_add(t));
        match (self.deadline, call) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    async fn wait_until(&mut self, deadline: Option<Instant>) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        match until(&self.handle, deadline, wait::wait(&self.native, &self.proc)).await {
            Some(status) => status,
            None => Err(self.kill_after_timeout().await),
        }
    }

    async fn collect(&mut self, deadline: Option<Instant>) -> io::Result<Output> {
        drop(self.stdin.take());
        let (stdout, stderr) = (self.stdout.take(), self.stderr.take());
        let all = join3(
            read_to_end(stdout),
            read_to_end(stderr),
            wait::wait(&self.native, &self.proc),
        );
        match until(&self.handle, deadline, all).await {
            Some((stdout, stderr, status)) => Ok(Output {
                status: status?,
                stdout: stdout?,
                stderr: stderr?,
            }),
            None => Err(self.kill_after_timeout().await),
        }
    }

    /// Kills and reaps the child after a timeout; the error to return.
    async fn kill_after_timeout(&mut self) -> io::Error {
        if let Err(err) = self.start_kill() {
            return err;
        }
        if let Err(err) = wait::wait(&self.native, &self.proc).await {
            return err;
        }
        io::Error::new(
            io::ErrorKind::TimedOut,
            "the child process timed out and was killed",
        )
    }
}

async fn read_to_end<R: spargio::io::AsyncRead>(reader: Option<R>) -> io::Result<Vec<u8>> {
    let Some(mut reader) = reader else {
        return Ok(Vec::new());
    };
    let (res, buf) = reader.read_to_end(Vec::new()).await;
    res.map(|_| buf)
}

impl Drop for ChildHandle {
    /// Step 4 of the module docs.
    fn drop(&mut self) {
        if self.proc.status().is_some() {
            return;
        }
        // A refused kill (`EPERM`: the child changed its uid) counts as
        // no kill: the child runs on, and nothing may wait for its exit.
        let killed = self.kill_on_drop && self.proc.signal(libc::SIGKILL).is_ok();
        if let Ok(Some(_)) = self.proc.try_reap() {
            return;
        }
        let reaper = Reaper {
            proc: self.proc.clone(),
            killed,
        };
        let native = self.native.clone();
        // On error the future, and so the `Reaper`, is dropped: its drop
        // does what can be done without a runtime.
        let _detached = self.handle.spawn_stealable(async move {
            let _ = wait::wait(&native, &reaper.proc).await;
            drop(reaper);
        });
    }
}

/// How long a dropped handle's reap may block for a child it killed, when
/// the runtime is gone. `SIGKILL` usually ends a child within
/// milliseconds; one stuck in an uninterruptible sleep is left behind
/// rather than holding a shutdown for good.
const KILLED_REAP_GRACE: Duration = Duration::from_secs(2);

/// Owned by a detached reaper task; covers the task never finishing.
struct Reaper {
    proc: Arc<Proc>,
    /// `SIGKILL` was accepted for the child, so its exit is imminent and
    /// a short blocking reap is worth it. False if the kill was refused.
    killed: bool,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if self.proc.status().is_some() {
            return;
        }
        if self.killed {
            let _ = self.proc.reap_killed(KILLED_REAP_GRACE);
        } else {
            let _ = self.proc.try_reap();
        }
    }
}
