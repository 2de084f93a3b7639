//! Driving a future to completion from a plain thread.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use crate::scheduler::context;

struct ThreadWaker {
    thread: Thread,
    notified: AtomicBool,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Release pairs with the Acquire swap in `block_on`.
        if !self.notified.swap(true, Ordering::Release) {
            self.thread.unpark();
        }
    }
}

/// How long `block_on` polls for a wakeup before sleeping. A futex wake
/// costs several microseconds (tens on some VMs) and a quick hand-over from
/// a shard arrives sooner; but a spinning caller also takes a CPU the
/// shards may need, so the window stays short (measured on 2 CPUs: 20 µs
/// made a 2-shard exchange 60% slower than 5 µs).
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(5);

fn wait(parker: &ThreadWaker) {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        if parker.notified.swap(false, Ordering::Acquire) {
            return;
        }
        spins += 1;
        if spins % 16 == 0 && start.elapsed() >= SPIN_BEFORE_PARK {
            break;
        }
        std::hint::spin_loop();
    }
    while !parker.notified.swap(false, Ordering::Acquire) {
        thread::park();
    }
}

/// Blocks the calling thread until `fut` completes, and returns its output.
///
/// Use it from a synchronous `main` or a test to wait on a [`JoinHandle`]
/// or any other future; the future itself is polled on the calling thread.
///
/// # Panics
///
/// When called on a shard thread: blocking a shard would stall every task
/// on it. Await the future instead.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = spargio::Runtime::builder().shards(1).build()?;
/// let task = rt.handle().spawn_pinned(0, async { "done" })?;
/// assert_eq!(spargio::block_on(task)?, "done");
/// # Ok(()) }
/// ```
///
/// [`JoinHandle`]: crate::JoinHandle
pub fn block_on<F: Future>(fut: F) -> F::Output {
    assert!(
        !context::on_shard(),
        "spargio::block_on called on a shard thread; await the future instead"
    );
    let mut fut = pin!(fut);
    let parker = Arc::new(ThreadWaker {
        thread: thread::current(),
        notified: AtomicBool::new(false),
    });
    let waker = Waker::from(parker.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        wait(&parker);
    }
}
