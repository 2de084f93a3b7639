//! Waits that are dropped, handles that are dropped, and reaping.

mod common;

use std::future::{poll_fn, Future};
use std::os::unix::process::ExitStatusExt;
use std::pin::pin;
use std::process::Stdio;
use std::task::Poll;
use std::time::Duration;

use common::{exists, gone, run};
use spargio_process::CommandBuilder;

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
