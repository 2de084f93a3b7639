//! fd hygiene: pidfds and pipe ends are all closed once the handles are
//! gone. In its own test binary, since other tests open fds concurrently.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::HANG;
use spargio::io::{AsyncRead, AsyncWriteExt};
use spargio_process::CommandBuilder;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn piped_cat(h: &spargio::RuntimeHandle) -> spargio_process::ChildHandle {
    CommandBuilder::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn(h)
        .unwrap()
}

#[test]
fn fifty_piped_children_leave_no_fd_behind() {
    // The runtime's own fds (rings, eventfds) are opened before the
    // baseline is taken and closed after the last count.
    let rt = spargio::Runtime::builder().shards(2).build().unwrap();
    let h = rt.handle();
    let before = open_fds();
    let h2 = h.clone();
    let task = h
        .spawn_stealable(async move {
            for i in 0..50 {
                let mut child = piped_cat(&h2);
                match i % 3 {
                    // Full use: write, read back, wait.
                    0 => {
                        let mut stdin = child.stdin.take().unwrap();
                        stdin.write_all(b"x".to_vec()).await.0.unwrap();
                        drop(stdin);
                        let out = child.output().await.unwrap();
                        assert_eq!(out.stdout, b"x");
                    }
                    // A read left in flight, then everything dropped.
                    1 => {
                        let mut stdout = child.stdout.take().unwrap();
                        let _ = spargio::timeout(
                            Duration::from_millis(1),
                            stdout.read(Vec::with_capacity(16)),
                        )
                        .await;
                        child.kill().await.unwrap();
                    }
                    // Dropped at once: the background reaper's business.
                    _ => drop(child),
                }
            }
        })
        .unwrap();
    spargio::block_on(task).unwrap();
    // Closes go through the rings, and the reapers of dropped children
    // need their children to exit: poll, bounded.
    let start = Instant::now();
    let mut now = open_fds();
    while now > before && start.elapsed() < HANG {
        std::thread::sleep(Duration::from_millis(10));
        now = open_fds();
    }
    assert_eq!(now, before, "fds leaked");
    drop(rt);
}
