//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use spargio::{Runtime, RuntimeHandle};

/// Generous bound for "this must not hang". Never a performance assertion.
pub const HANG: Duration = Duration::from_secs(60);

/// Runs `f(handle)` as a stealable task on a fresh 2-shard runtime and
/// returns its output; fails the test if it does not finish in `HANG`.
pub fn run<F, Fut>(f: F) -> Fut::Output
where
    F: FnOnce(RuntimeHandle) -> Fut + Send + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = Runtime::builder().shards(2).build().expect("runtime");
        let handle = rt.handle();
        let task = handle.spawn_stealable(f(handle.clone())).expect("spawn");
        let out = spargio::block_on(task);
        drop(rt);
        let _ = tx.send(out);
    });
    match rx.recv_timeout(HANG) {
        Ok(Ok(out)) => out,
        Ok(Err(err)) => panic!("test task failed: {err:?}"),
        Err(_) => panic!("test hung"),
    }
}

/// Whether `/proc/<pid>` exists: it does while the process runs and while
/// it is an unreaped zombie; reaping removes it.
pub fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Waits (bounded by `HANG`) until `/proc/<pid>` is gone, i.e. the process
/// exited and was reaped. Returns whether it went.
pub async fn gone(pid: u32) -> bool {
    let start = Instant::now();
    while exists(pid) {
        if start.elapsed() > HANG {
            return false;
        }
        spargio::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// `(ppid, state)` from `/proc/<pid>/stat`.
pub fn parent_and_state(pid: u32) -> Option<(u32, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields
    // after the last ')' are "state ppid ...".
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state))
}

/// Zombie children of this process.
pub fn zombie_children() -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|&pid| parent_and_state(pid) == Some((me, 'Z')))
        .collect()
}

/// `len` bytes of a pattern that a shifted or dropped chunk would break.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 12) as u8)
        .collect()
}
