//! The process's open fds, for the tortures' "every fd comes back"
//! check (shared by path by the core, TLS and WebSocket tortures).

use std::time::{Duration, Instant};

/// How long the fd count may take to come back after a run.
const HANG: Duration = Duration::from_secs(10);

/// The process's open fds before a run, to compare with after it.
pub struct Fds {
    count: usize,
    kinds: Vec<String>,
}

impl Fds {
    pub fn now() -> Fds {
        process_globals_made();
        Fds {
            count: open_fds(),
            kinds: fd_kinds(),
        }
    }

    /// Waits (at most [`HANG`]) for the fd count to come back to this
    /// one; names the fds that did not.
    pub fn back(&self) -> Result<(), String> {
        let deadline = Instant::now() + HANG;
        while open_fds() > self.count {
            if Instant::now() > deadline {
                let new: Vec<String> = fd_kinds()
                    .into_iter()
                    .filter(|k| !self.kinds.contains(k))
                    .collect();
                return Err(format!(
                    "fds: {} open after the run, {} before; new: {new:?}",
                    open_fds(),
                    self.count
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

/// Makes what a process makes once, before the first fd count: in a
/// workspace build spargio's feature `tokio-compat` is on, every runtime
/// then makes tokio runtimes, and the first of those opens tokio's signal
/// globals (a socket pair kept for the process's life).
pub fn process_globals_made() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let rt = spargio::RuntimeBuilder::new().shards(2).build();
        drop(rt.expect("a warm-up runtime"));
    });
}

pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// What each open fd is (`socket:[..]`, `anon_inode:[io_uring]`, ..).
pub fn fd_kinds() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let mut kinds: Vec<String> = dir
        .flatten()
        .map(|e| {
            let target = std::fs::read_link(e.path())
                .map_or_else(|_| "?".into(), |t| t.display().to_string());
            format!("{}={target}", e.file_name().to_string_lossy())
        })
        .collect();
    kinds.sort();
    kinds
}
