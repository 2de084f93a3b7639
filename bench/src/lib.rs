//! Shared helpers for the benchmarks.
//!
//! Everything here is used by the spargio side and the tokio side alike, so
//! both measure the same work.

pub mod server;

use std::future::Future;
use std::hint::black_box;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};

/// CPU-bound filler work: `iters` rounds of multiply + xorshift over a
/// `u64`. The input and the result go through [`black_box`], so the loop
/// can be neither folded nor dropped. Every runtime's side calls this same
/// function.
pub fn spin_work(iters: u64) -> u64 {
    let mut x = black_box(iters) ^ 0x9E37_79B9_7F4A_7C15;
    for _ in 0..iters {
        x = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        x ^= x >> 29;
        x ^= x << 11;
        x ^= x >> 31;
    }
    black_box(x)
}

/// Iterations of [`spin_work`] for branch `branch` of request `request` in
/// the fan-out/fan-in benchmark: uniform when `skewed` is false (2,000
/// each), otherwise 500 each except one hot branch of 20,000 at index
/// `request % 16`.
pub fn fanout_branch_iters(skewed: bool, request: usize, branch: usize) -> u64 {
    if !skewed {
        FANOUT_BALANCED_ITERS
    } else if branch == request % FANOUT_BRANCHES {
        FANOUT_HOT_ITERS
    } else {
        FANOUT_COLD_ITERS
    }
}

/// Requests per fan-out/fan-in iteration (run one after another).
pub const FANOUT_REQUESTS: usize = 64;
/// Branches each request fans out to.
pub const FANOUT_BRANCHES: usize = 16;
/// `spin_work` iterations of each branch in the balanced shape.
pub const FANOUT_BALANCED_ITERS: u64 = 2_000;
/// `spin_work` iterations of the 15 cold branches in the skewed shape.
pub const FANOUT_COLD_ITERS: u64 = 500;
/// `spin_work` iterations of the hot branch in the skewed shape.
pub const FANOUT_HOT_ITERS: u64 = 20_000;

/// A future that returns `Pending` once (waking itself first), so the
/// executor gets to run something else before the task continues. Used to
/// back off when a spargio send meets `SendError::Backpressure`.
#[derive(Debug, Default)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

/// Yields to the executor once.
pub fn yield_now() -> YieldNow {
    YieldNow::default()
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            Poll::Ready(())
        } else {
            self.yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// The cargo target directory the benchmarks write to: `$CARGO_TARGET_DIR`
/// when set (criterion uses the same variable), else the workspace's
/// `target/`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map_or_else(|| PathBuf::from("target"), |ws| ws.join("target")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_work_depends_on_iters() {
        assert_ne!(spin_work(1), spin_work(2));
        assert_eq!(spin_work(100), spin_work(100));
    }

    #[test]
    fn skewed_has_one_hot_branch() {
        for request in 0..FANOUT_REQUESTS {
            let hot = (0..FANOUT_BRANCHES)
                .filter(|&b| fanout_branch_iters(true, request, b) == FANOUT_HOT_ITERS)
                .count();
            assert_eq!(hot, 1);
        }
    }

    #[test]
    fn yield_now_yields_once() {
        spargio::block_on(async {
            yield_now().await;
        });
    }
}
