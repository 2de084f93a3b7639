//! Run-to-completion calls, statuses, kill, timeouts and spawn errors.

mod common;

use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{exists, run};
use spargio_process::{CommandBuilder, CommandOptions};

fn sh(script: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]);
    cmd
}

#[test]
fn echo_output_is_captured() {
    let out = run(|h| async move {
        let mut cmd = Command::new("echo");
        cmd.arg("hi");
        spargio_process::output(&h, cmd).await.unwrap()
    });
    assert!(out.status.success());
    assert_eq!(out.stdout, b"hi\n");
    assert!(out.stderr.is_empty());
}

#[test]
fn exit_code_is_reported() {
    let status = run(|h| async move { spargio_process::status(h, sh("exit 3")).await.unwrap() });
    assert_eq!(status.code(), Some(3));
    assert_eq!(status.signal(), None);
}

#[test]
fn stdout_and_stderr_are_captured_separately() {
    let out = run(|h| async move {
        CommandBuilder::new("sh")
            .args(["-c", "echo out; echo err >&2"])
            .output(&h)
            .await
            .unwrap()
    });
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
}

#[test]
fn builder_output_gives_the_child_a_null_stdin() {
    // std's `output` default: stdin is null, so `cat` reads end of file
    // at once (with an inherited stdin this would hang on the terminal or
    // read the test harness's stdin).
    let out = run(|h| async move { CommandBuilder::new("cat").output(&h).await.unwrap() });
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
}

#[test]
fn builder_output_keeps_stdio_that_was_set() {
    let out = run(|h| async move {
        CommandBuilder::new("sh")
            .args(["-c", "echo out; echo err >&2"])
            .stderr(Stdio::null())
            .output(&h)
            .await
            .unwrap()
    });
    assert_eq!(out.stdout, b"out\n");
    assert!(out.stderr.is_empty(), "stderr was set to null, not piped");
}

#[test]
fn builder_passes_env_and_current_dir() {
    let out = run(|h| async move {
        CommandBuilder::new("sh")
            .args(["-c", "echo \"$GREETING\"; pwd"])
            .env_clear()
            .env("GREETING", "hello")
            .env("PATH", "/usr/bin:/bin")
            .current_dir("/")
            .output(&h)
            .await
            .unwrap()
    });
    assert_eq!(out.stdout, b"hello\n/\n");
}

#[test]
fn kill_ends_the_child_with_sigkill() {
    let status = run(|h| async move {
        let mut child = spargio_process::spawn(&h, {
            let mut cmd = Command::new("sleep");
            cmd.arg("30");
            cmd
        })
        .unwrap();
        child.kill().await.unwrap();
        // Killing a reaped child is a no-op, not an error.
        child.kill().await.unwrap();
        child.wait().await.unwrap()
    });
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert_eq!(status.code(), None);
}

#[test]
fn signal_sends_the_given_signal() {
    let status = run(|h| async move {
        let mut child = CommandBuilder::new("sleep").arg("30").spawn(&h).unwrap();
        child.signal(libc::SIGTERM).unwrap();
        child.wait().await.unwrap()
    });
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

#[test]
fn an_invalid_signal_is_invalid_input() {
    let kind = run(|h| async move {
        let mut child = CommandBuilder::new("sleep").arg("30").spawn(&h).unwrap();
        let err = child.signal(12345).unwrap_err();
        child.kill().await.unwrap();
        err.kind()
    });
    assert_eq!(kind, ErrorKind::InvalidInput);
}

/// A shell that writes its pid to a fresh file, then becomes `sleep 30`;
/// returns the command and the file.
fn sleeper_with_pid_file(tag: &str) -> (Command, std::path::PathBuf) {
    let file =
        std::env::temp_dir().join(format!("spargio-process-{tag}-{}.pid", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let script = format!("echo $$ > '{}'; exec sleep 30", file.display());
    (sh(&script), file)
}

fn read_pid(file: &std::path::Path) -> u32 {
    let pid = std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::remove_file(file).unwrap();
    pid
}

#[test]
fn status_timeout_kills_and_reaps_the_child() {
    let (kind, pid) = run(|h| async move {
        let (cmd, file) = sleeper_with_pid_file("status-timeout");
        let options = CommandOptions::default().with_timeout(Duration::from_millis(200));
        let err = spargio_process::status_with_options(&h, cmd, options)
            .await
            .unwrap_err();
        (err.kind(), read_pid(&file))
    });
    assert_eq!(kind, ErrorKind::TimedOut);
    // Reaped before the error was returned: no process, no zombie.
    assert!(!exists(pid));
}

#[test]
fn output_timeout_kills_and_reaps_the_child() {
    let (kind, pid) = run(|h| async move {
        let (cmd, file) = sleeper_with_pid_file("output-timeout");
        let options = CommandOptions::default().with_timeout(Duration::from_millis(200));
        let err = CommandBuilder::from(cmd)
            .output_with_options(&h, options)
            .await
            .unwrap_err();
        (err.kind(), read_pid(&file))
    });
    assert_eq!(kind, ErrorKind::TimedOut);
    assert!(!exists(pid));
}

#[test]
fn wait_with_options_timeout_kills_and_reaps_the_child() {
    let (kind, pid_left, try_wait) = run(|h| async move {
        let mut child = CommandBuilder::new("sleep").arg("30").spawn(&h).unwrap();
        let pid = child.id().unwrap();
        let options = CommandOptions::default().with_timeout(Duration::from_millis(50));
        let err = child.wait_with_options(options).await.unwrap_err();
        (err.kind(), exists(pid), child.try_wait().unwrap())
    });
    assert_eq!(kind, ErrorKind::TimedOut);
    assert!(!pid_left, "the child is reaped before TimedOut is returned");
    assert_eq!(try_wait.and_then(|s| s.signal()), Some(libc::SIGKILL));
}

#[test]
fn a_spawn_timeout_applies_to_later_waits() {
    let kind = run(|h| async move {
        let options = CommandOptions::default().with_timeout(Duration::from_millis(50));
        let mut child = CommandBuilder::new("sleep")
            .arg("30")
            .spawn_with_options(&h, options)
            .unwrap();
        child.wait().await.unwrap_err().kind()
    });
    assert_eq!(kind, ErrorKind::TimedOut);
}

#[test]
fn a_timeout_longer_than_the_child_changes_nothing() {
    let status = run(|h| async move {
        let options = CommandOptions::default().with_timeout(Duration::from_secs(60));
        spargio_process::status_with_options(&h, sh("exit 9"), options)
            .await
            .unwrap()
    });
    assert_eq!(status.code(), Some(9));
}

#[test]
fn a_missing_program_is_not_found() {
    let kinds = run(|h| async move {
        let spawn = CommandBuilder::new("/nonexistent/spargio-no-such-program")
            .spawn(&h)
            .unwrap_err()
            .kind();
        let status = spargio_process::status(&h, Command::new("spargio-no-such-program-in-path"))
            .await
            .unwrap_err()
            .kind();
        (spawn, status)
    });
    assert_eq!(kinds, (ErrorKind::NotFound, ErrorKind::NotFound));
}

#[test]
fn a_non_executable_file_is_permission_denied() {
    let path = std::env::temp_dir().join(format!("spargio-process-noexec-{}", std::process::id()));
    std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
    let p = path.clone();
    let kind = run(|h| async move { CommandBuilder::new(&p).spawn(&h).unwrap_err().kind() });
    std::fs::remove_file(&path).unwrap();
    assert_eq!(kind, ErrorKind::PermissionDenied);
}

#[test]
fn id_is_none_once_reaped() {
    let (before, after) = run(|h| async move {
        let mut child = CommandBuilder::new("true").spawn(&h).unwrap();
        let before = child.id();
        child.wait().await.unwrap();
        (before, child.id())
    });
    assert!(before.is_some());
    assert_eq!(after, None);
}

#[test]
fn calls_work_from_outside_the_runtime() {
    // A plain thread blocks on the futures: the ring ops and the timeout's
    // timer are armed through the handle.
    let rt = spargio::Runtime::builder().shards(1).build().unwrap();
    let h = rt.handle();
    let out = spargio::block_on(CommandBuilder::new("echo").arg("outside").output(&h)).unwrap();
    assert_eq!(out.stdout, b"outside\n");
    let options = CommandOptions::default().with_timeout(Duration::from_millis(20));
    let err = spargio::block_on(
        CommandBuilder::new("sleep")
            .arg("30")
            .status_with_options(&h, options),
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
}

#[test]
fn handles_are_send_and_sync_and_futures_are_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}
    send_sync::<spargio_process::ChildHandle>();
    send_sync::<spargio_process::ChildStdin>();
    send_sync::<spargio_process::ChildStdout>();
    send_sync::<spargio_process::ChildStderr>();
    send_sync::<CommandBuilder>();
    let rt = spargio::Runtime::builder().shards(1).build().unwrap();
    let mut child = CommandBuilder::new("true").spawn(rt.handle()).unwrap();
    send(&child.wait());
    send(&child.wait_with_options(CommandOptions::default()));
    send(&child.kill());
    send(&CommandBuilder::new("true").status(rt.handle()));
    send(&child.output());
}

/// Every public `Duration` saturates: a timeout of `Duration::MAX` is no
/// deadline (at spawn, and at a later wait or output), not an overflow.
#[test]
fn a_timeout_of_duration_max_is_no_deadline() {
    let (spawned, waited, output) = run(|h| async move {
        let forever = CommandOptions::default().with_timeout(Duration::MAX);
        let mut child = CommandBuilder::new("true")
            .spawn_with_options(&h, forever.clone())
            .unwrap();
        let spawned = child.wait().await.unwrap();
        let mut child = CommandBuilder::new("true").spawn(&h).unwrap();
        let waited = child.wait_with_options(forever.clone()).await.unwrap();
        let output = CommandBuilder::new("echo")
            .arg("hi")
            .stdout(Stdio::piped())
            .spawn(&h)
            .unwrap()
            .output_with_options(forever)
            .await
            .unwrap();
        (spawned, waited, output)
    });
    assert!(
        spawned.success() && waited.success(),
        "{spawned:?} {waited:?}"
    );
    assert!(output.status.success());
    assert_eq!(output.stdout, b"hi\n");
}
