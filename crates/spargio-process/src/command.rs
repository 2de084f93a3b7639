//! `CommandBuilder` (tokio's `Command` surface over a std `Command`) and
//! `CommandOptions`.
//!
//! std's `Command` does the fork and exec, and its error reporting
//! (`NotFound`, `PermissionDenied`, ...). The builder adds what std cannot
//! tell us: whether each stdio stream was configured, so that `output`
//! follows std's defaults exactly (stdout and stderr piped, stdin null,
//! each unless set), and `kill_on_drop`.
//!
//! The run-to-completion calls spawn when they are called, like tokio's;
//! the future they return only waits (so it borrows nothing).

use std::ffi::OsStr;
use std::future::Future;
use std::io;
use std::path::Path;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::Duration;

use spargio::RuntimeHandle;

use crate::ChildHandle;

/// Options for the run-to-completion and spawn calls.
///
/// ```
/// use std::time::Duration;
/// use spargio_process::CommandOptions;
///
/// let options = CommandOptions::default().with_timeout(Duration::from_secs(5));
/// assert_eq!(options.timeout, Some(Duration::from_secs(5)));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandOptions {
    /// How long the child may run. When it passes, the child is killed
    /// and reaped and the call returns `io::ErrorKind::TimedOut`. For
    /// `spawn_with_options` it is counted from the spawn and applies to
    /// every later `wait`/`output` on the handle.
    pub timeout: Option<Duration>,
}

impl CommandOptions {
    /// These options with `timeout` set.
    pub fn with_timeout(mut self, timeout: Duration) -> CommandOptions {
        self.timeout = Some(timeout);
        self
    }
}

/// A command to spawn: the builder surface of `tokio::process::Command`
/// over a [`std::process::Command`].
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio_process::CommandBuilder;
///
/// let out = CommandBuilder::new("echo").arg("hi").output(&handle).await.unwrap();
/// assert!(out.status.success());
/// assert_eq!(out.stdout, b"hi\n");
/// # })).unwrap();
/// ```
#[derive(Debug)]
pub struct CommandBuilder {
    std: Command,
    stdin_set: bool,
    stdout_set: bool,
    stderr_set: bool,
    kill_on_drop: bool,
}

impl From<Command> for CommandBuilder {
    /// Wraps a std command. Its stdio configuration cannot be read back,
    /// so it counts as unset: [`output`](CommandBuilder::output) pipes
    /// stdout and stderr and nulls stdin.
    fn from(std: Command) -> CommandBuilder {
        CommandBuilder {
            std,
            stdin_set: false,
            stdout_set: false,
            stderr_set: false,
            kill_on_drop: false,
        }
    }
}

impl CommandBuilder {
    /// A command that runs `program` (looked up in `PATH` if it has no
    /// `/`), with the parent's environment and working directory.
    pub fn new(program: impl AsRef<OsStr>) -> CommandBuilder {
        CommandBuilder::from(Command::new(program))
    }

    /// Wraps a std command with its stdio counted as configured: `output`
    /// keeps stdin as it is and pipes stdout and stderr (what the free
    /// function [`output`](crate::output) does).
    pub(crate) fn from_std_configured_stdin(std: Command) -> CommandBuilder {
        CommandBuilder {
            stdin_set: true,
            ..CommandBuilder::from(std)
        }
    }

    /// Adds an argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut CommandBuilder {
        self.std.arg(arg);
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut CommandBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.std.args(args);
        self
    }

    /// Sets an environment variable.
    pub fn env(&mut self, key: impl AsRef<OsStr>, val: impl AsRef<OsStr>) -> &mut CommandBuilder {
        self.std.env(key, val);
        self
    }

    /// Sets environment variables.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut CommandBuilder
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.envs(vars);
        self
    }

    /// Removes an environment variable.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut CommandBuilder {
        self.std.env_remove(key);
        self
    }

    /// Clears the environment the child inherits.
    pub fn env_clear(&mut self) -> &mut CommandBuilder {
        self.std.env_clear();
        self
    }

    /// Sets the child's working directory.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut CommandBuilder {
        self.std.current_dir(dir);
        self
    }

    /// Configures the child's stdin (`Stdio::piped()` to write to it).
    pub fn stdin(&mut self, cfg: impl Into<Stdio>) -> &mut CommandBuilder {
        self.std.stdin(cfg);
        self.stdin_set = true;
        self
    }

    /// Configures the child's stdout (`Stdio::piped()` to read it).
    pub fn stdout(&mut self, cfg: impl Into<Stdio>) -> &mut CommandBuilder {
        self.std.stdout(cfg);
        self.stdout_set = true;
        self
    }

    /// Configures the child's stderr (`Stdio::piped()` to read it).
    pub fn stderr(&mut self, cfg: impl Into<Stdio>) -> &mut CommandBuilder {
        self.std.stderr(cfg);
        self.stderr_set = true;
        self
    }

    /// Whether dropping the [`ChildHandle`] before the child was reaped
    /// kills it with `SIGKILL` (default `false`). Either way the child is
    /// reaped in the background once it exits.
    pub fn kill_on_drop(&mut self, kill_on_drop: bool) -> &mut CommandBuilder {
        self.kill_on_drop = kill_on_drop;
        self
    }

    /// The std command.
    pub fn as_std(&self) -> &Command {
        &self.std
    }

    /// The std command, to set what the builder does not mirror (`uid`,
    /// `process_group`, `pre_exec` ...). Stdio set through it is not seen
    /// by [`output`](Self::output)'s defaults: set stdio on the builder.
    pub fn as_std_mut(&mut self) -> &mut Command {
        &mut self.std
    }

    /// Spawns the child; stdio is inherited unless configured.
    pub fn spawn(&mut self, handle: impl AsRef<RuntimeHandle>) -> io::Result<ChildHandle> {
        self.spawn_with_options(handle, CommandOptions::default())
    }

    /// [`spawn`](Self::spawn); a timeout in `options` is counted from now
    /// and enforced by the handle's `wait` and `output` (kill, reap,
    /// `TimedOut`).
    pub fn spawn_with_options(
        &mut self,
        handle: impl AsRef<RuntimeHandle>,
        options: CommandOptions,
    ) -> io::Result<ChildHandle> {
        ChildHandle::spawn(handle.as_ref(), &mut self.std, self.kill_on_drop, &options)
    }

    /// Spawns the child now and returns a future of its exit status.
    /// Stdio is inherited unless configured; pipes asked for are closed
    /// (so a child reading stdin sees end of file).
    pub fn status(
        &mut self,
        handle: impl AsRef<RuntimeHandle>,
    ) -> impl Future<Output = io::Result<ExitStatus>> + Send + 'static {
        self.status_with_options(handle, CommandOptions::default())
    }

    /// [`status`](Self::status) with a timeout: when it passes, the child
    /// is killed and reaped, and the future returns `TimedOut`.
    pub fn status_with_options(
        &mut self,
        handle: impl AsRef<RuntimeHandle>,
        options: CommandOptions,
    ) -> impl Future<Output = io::Result<ExitStatus>> + Send + 'static {
        let child = self.spawn_with_options(handle, options);
        async move {
            let mut child = child?;
            child.stdout = None;
            child.stderr = None;
            child.wait().await
        }
    }

    /// Spawns the child now and returns a future of its output. As std's
    /// `Command::output`: stdout and stderr are piped and stdin is null,
    /// each unless configured on the builder.
    pub fn output(
        &mut self,
        handle: impl AsRef<RuntimeHandle>,
    ) -> impl Future<Output = io::Result<Output>> + Send + 'static {
        self.output_with_options(handle, CommandOptions::default())
    }

    /// [`output`](Self::output) with a timeout: when it passes, the child
    /// is killed and reaped, and the future returns `TimedOut`.
    pub fn output_with_options(
        &mut self,
        handle: impl AsRef<RuntimeHandle>,
        options: CommandOptions,
    ) -> impl Future<Output = io::Result<Output>> + Send + 'static {
        let child = self.with_output_defaults(|this| this.spawn_with_options(handle, options));
        async move { child?.output().await }
    }

    /// Runs `f` with `output`'s stdio defaults applied to what is unset,
    /// then puts those back to `spawn`'s default (inherit), which is what
    /// an unset stream means to std.
    fn with_output_defaults<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let (stdin, stdout, stderr) = (!self.stdin_set, !self.stdout_set, !self.stderr_set);
        if stdin {
            self.std.stdin(Stdio::null());
        }
        if stdout {
            self.std.stdout(Stdio::piped());
        }
        if stderr {
            self.std.stderr(Stdio::piped());
        }
        let out = f(self);
        if stdin {
            self.std.stdin(Stdio::inherit());
        }
        if stdout {
            self.std.stdout(Stdio::inherit());
        }
        if stderr {
            self.std.stderr(Stdio::inherit());
        }
        out
    }
}
