//! Waits that are dropped, handles that are dropped, and reaping.

mod common;

use std::future::{poll_fn, Future};
use std::os::unix::process::ExitStatusExt;
use std::pin::pin;
use std::process::Stdio;
use std::task::Poll;
use std::time::Duration;

use common::{exists, gone, run};
use spargio::io::AsyncRead;
use spargio_process::{ChildHandle, CommandBuilder, CommandOptions};

#[test]
fn a_wait_dropped_mid_flight_loses_nothing() {
    let (timed_out, status) = run(|h| async move {
        let mut child = CommandBuilder::new("sleep").arg("30").spawn(&h).unwrap();
        // The first wait is in flight on a ring when the timeout drops it.
        let first = spargio::timeout(Duration::from_millis(1), child.wait()).await;
        child.start_kill().unwrap();
        (first.is_err(), child.wait().await.unwrap())
    });
    assert!(timed_out);
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}

#[test]
fn a_wait_dropped_after_a_short_child_exited_still_reports_it() {
    let status = run(|h| async move {
        let mut child = CommandBuilder::new("sleep").arg("0.2").spawn(&h).unwrap();
        let _ = spargio::timeout(Duration::from_millis(1), child.wait()).await;
        child.wait().await.unwrap()
    });
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_wait_dropped_after_the_child_exited_leaves_the_status_for_try_wait() {
    let (zombie, status) = run(|h| async move {
        let mut child = CommandBuilder::new("sh")
            .args(["-c", "read line; exit 6"])
            .stdin(Stdio::piped())
            .spawn(&h)
            .unwrap();
        let pid = child.id().unwrap();
        // Keep stdin out of the handle, so `wait` cannot close it: the
        // child runs until we drop it.
        let stdin = child.stdin.take().unwrap();
        let zombie = {
            let mut wait = pin!(child.wait());
            // One poll: the child is blocked in `read`, so the wait goes
            // in flight on a ring.
            let first = poll_fn(|cx| Poll::Ready(wait.as_mut().poll(cx))).await;
            assert!(first.is_pending());
            drop(stdin);
            // The child exits; the ring op (WNOWAIT) leaves it a zombie
            // for the decoder to reap when the op is polled or dropped.
            let zombie = until_zombie(pid).await;
            // Let the completion arrive, then drop the wait unpolled.
            spargio::sleep(Duration::from_millis(20)).await;
            zombie
        };
        (zombie, child.try_wait().unwrap())
    });
    assert!(zombie);
    assert_eq!(status.and_then(|s| s.code()), Some(6));
}

/// Waits (bounded) until `pid` is a zombie: exited, not reaped.
async fn until_zombie(pid: u32) -> bool {
    for _ in 0..12_000 {
        if common::parent_and_state(pid).map(|(_, state)| state) == Some('Z') {
            return true;
        }
        spargio::sleep(Duration::from_millis(5)).await;
    }
    false
}

#[test]
fn kill_on_drop_kills_and_reaps() {
    let gone = run(|h| async move {
        let child = CommandBuilder::new("sleep")
            .arg("30")
            .kill_on_drop(true)
            .spawn(&h)
            .unwrap();
        let pid = child.id().unwrap();
        drop(child);
        gone(pid).await
    });
    assert!(gone, "killed and reaped (a zombie keeps /proc/<pid>)");
}

#[test]
fn a_dropped_handle_is_reaped_when_the_child_exits() {
    let (running_after_drop, gone) = run(|h| async move {
        let child = CommandBuilder::new("sh")
            .args(["-c", "read line"])
            .stdin(Stdio::piped())
            .spawn(&h)
            .unwrap();
        let pid = child.id().unwrap();
        let mut child = child;
        let stdin = child.stdin.take().unwrap();
        drop(child);
        // Not killed: still running until its stdin closes.
        let running = exists(pid);
        drop(stdin);
        (running, gone(pid).await)
    });
    assert!(running_after_drop, "without kill_on_drop the child runs on");
    assert!(gone, "the background reaper reaped it");
}

#[test]
fn a_dropped_short_child_is_reaped() {
    let gone = run(|h| async move {
        let child = CommandBuilder::new("sleep").arg("0.1").spawn(&h).unwrap();
        let pid = child.id().unwrap();
        drop(child);
        gone(pid).await
    });
    assert!(gone);
}

#[test]
fn kill_on_drop_reaps_even_after_the_runtime_is_gone() {
    let rt = spargio::Runtime::builder().shards(1).build().unwrap();
    let child = CommandBuilder::new("sleep")
        .arg("30")
        .kill_on_drop(true)
        .spawn(rt.handle())
        .unwrap();
    let pid = child.id().unwrap();
    drop(rt);
    // No runtime to run a reaper task: the drop reaps in place.
    drop(child);
    assert!(!exists(pid));
}

#[test]
fn try_wait_reports_running_then_exited() {
    let (running, exited) = run(|h| async move {
        let mut child = CommandBuilder::new("sh")
            .args(["-c", "read line; exit 2"])
            .stdin(Stdio::piped())
            .spawn(&h)
            .unwrap();
        let running = child.try_wait().unwrap();
        let stdin = child.stdin.take().unwrap();
        drop(stdin);
        let pid = child.id().unwrap();
        // Poll until it exits (bounded), then try_wait reaps.
        let mut exited = None;
        for _ in 0..12_000 {
            if let Some(status) = child.try_wait().unwrap() {
                exited = Some(status);
                break;
            }
            spargio::sleep(Duration::from_millis(5)).await;
        }
        assert!(!exists(pid));
        (running, exited)
    });
    assert_eq!(running, None);
    assert_eq!(exited.and_then(|s| s.code()), Some(2));
}

/// Rounds for the two races below, through the public API: each round is
/// one chance for a dropped wait's op, whose cancel has not landed yet,
/// to complete and reap while the next wait's op is armed on the other
/// ring (which then gets `ECHILD`). The cancel usually wins here, so
/// these pin the outcome; `wait.rs`'s unit test with two waits in flight
/// on two rings is the one that hits the race every run.
const ROUNDS: usize = 200;

#[test]
fn a_wait_after_a_dropped_wait_reports_the_status_never_echild() {
    let statuses = run(|h| async move {
        let mut statuses = Vec::new();
        for _ in 0..ROUNDS {
            let mut child = CommandBuilder::new("sleep").arg("30").spawn(&h).unwrap();
            {
                // One poll: the child runs, so the wait goes in flight on
                // a ring; then the future is dropped (its op cancelled).
                let mut wait = pin!(child.wait());
                let first = poll_fn(|cx| Poll::Ready(wait.as_mut().poll(cx))).await;
                assert!(first.is_pending());
            }
            // The child dies while the dropped op may still be armed.
            child.start_kill().unwrap();
            statuses.push(child.wait().await.map_err(|e| e.raw_os_error()));
        }
        statuses
    });
    let bad: Vec<_> = statuses
        .iter()
        .filter(|s| s.as_ref().ok().and_then(|s| s.signal()) != Some(libc::SIGKILL))
        .collect();
    assert!(bad.is_empty(), "{} of {ROUNDS}: {bad:?}", bad.len());
}

#[test]
fn a_timed_out_wait_with_options_is_timed_out_never_echild() {
    let kinds = run(|h| async move {
        let mut kinds = Vec::new();
        for _ in 0..ROUNDS {
            let mut child = CommandBuilder::new("sleep").arg("30").spawn(&h).unwrap();
            let pid = child.id().unwrap();
            let options = CommandOptions::default().with_timeout(Duration::from_millis(1));
            let err = child.wait_with_options(options).await.unwrap_err();
            kinds.push((err.kind(), err.raw_os_error(), exists(pid)));
        }
        kinds
    });
    let bad: Vec<_> = kinds
        .iter()
        .filter(|&&(kind, _, left)| kind != std::io::ErrorKind::TimedOut || left)
        .collect();
    assert!(bad.is_empty(), "{} of {ROUNDS}: {bad:?}", bad.len());
}

/// Drops `child` on a thread whose own credentials may not signal it, so
/// `kill_on_drop`'s `SIGKILL` fails with `EPERM` (as it does for a
/// non-root parent whose child became root, e.g. `sudo`). Linux keeps
/// credentials per thread and the raw `setresuid` syscall changes only
/// the calling thread's; the saved uid stays 0 so nothing else changes.
/// Returns whether the kill was refused (`None`: not root, cannot test).
fn drop_where_kill_is_refused(child: ChildHandle) -> Option<bool> {
    std::thread::spawn(move || {
        // SAFETY: `geteuid` has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let nobody: libc::uid_t = 65534;
        // SAFETY: plain integer arguments; affects this thread only (the
        // raw syscall, not glibc's all-threads wrapper), which exits next.
        let rc = unsafe { libc::syscall(libc::SYS_setresuid, nobody, nobody, 0) };
        assert_eq!(rc, 0, "setresuid: {}", std::io::Error::last_os_error());
        let refused = child.signal(libc::SIGKILL).unwrap_err().raw_os_error();
        drop(child);
        Some(refused == Some(libc::EPERM))
    })
    .join()
    .unwrap()
}

#[test]
fn a_kill_on_drop_that_fails_never_blocks_the_runtime_shutdown() {
    let rt = spargio::Runtime::builder().shards(2).build().unwrap();
    let child = CommandBuilder::new("sleep")
        .arg("3600")
        .kill_on_drop(true)
        .spawn(rt.handle())
        .unwrap();
    let pid = child.id().unwrap();
    let Some(refused) = drop_where_kill_is_refused(child) else {
        // The handle was dropped normally: killed and reaped on drop.
        eprintln!("SKIP: needs root to make a kill fail with EPERM");
        return;
    };
    // The reaper task is on the runtime; shutting down drops it. With a
    // kill that failed, its drop must not wait for the child to exit.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        let _ = tx.send(());
    });
    let shut_down = rx.recv_timeout(common::HANG).is_ok();
    let state = common::parent_and_state(pid).map(|(_, state)| state);
    // Clean up as root: kill and reap (the handle is gone, so nothing
    // else will; a hung shutdown above returns once the child dies).
    // SAFETY: `pid` is still our unreaped child (nothing reaped it).
    let reaped = unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
        libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0)
    };
    assert!(refused, "the kill on drop was refused");
    assert!(shut_down, "the runtime shutdown hung on the dropped child");
    assert!(
        matches!(state, Some(s) if s != 'Z'),
        "the child runs on after a refused kill: {state:?}"
    );
    assert_eq!(reaped, pid as libc::pid_t);
    assert!(!exists(pid));
}

#[test]
fn dropping_a_child_that_ignores_sigterm_blocks_nothing() {
    let (alive_after_drop, ran_after_drop, pid) = run(|h| async move {
        let mut child = CommandBuilder::new("sh")
            .args(["-c", "trap '' TERM; echo ready; exec sleep 3600"])
            .stdout(Stdio::piped())
            .spawn(&h)
            .unwrap();
        let pid = child.id().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        // Read once the trap is set, so the SIGTERM is ignored.
        let (res, line) = stdout.read(Vec::with_capacity(6)).await;
        assert_eq!((res.unwrap(), &line[..]), (6, &b"ready\n"[..]));
        child.signal(libc::SIGTERM).unwrap();
        drop(child);
        // The shard goes on running tasks.
        let ran = h.spawn_stealable(async { 7 }).unwrap().await.unwrap();
        (exists(pid), ran, pid)
    });
    // `run` also shut the runtime down (bounded): the reaper did not block.
    let state = common::parent_and_state(pid).map(|(_, state)| state);
    // SAFETY: `pid` is our unreaped child (not killed on drop); kill and
    // reap it so no zombie is left.
    let reaped = unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
        libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0)
    };
    assert!(alive_after_drop);
    assert_eq!(ran_after_drop, 7);
    assert!(matches!(state, Some(s) if s != 'Z'), "{state:?}");
    assert_eq!(reaped, pid as libc::pid_t);
}
