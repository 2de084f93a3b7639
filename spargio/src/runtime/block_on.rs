//! Driving a future to completion from a plain thread.

use std::cell::Cell;
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

/// Longest `block_on` polls for a wakeup before sleeping. A futex wake
/// costs several microseconds (tens on some VMs) and a quick hand-over from
/// a shard arrives sooner; but a spinning caller also takes a CPU the
/// shards may need, so the window stays short (measured on 2 CPUs: 20 µs
/// made a 2-shard exchange 60% slower than 5 µs).
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(5);

/// A window halved below this drops to zero.
const SPIN_FLOOR: Duration = Duration::from_micros(1);

thread_local! {
    /// This thread's spin window, adapted per wait: a wait that ended
    /// within `SPIN_BEFORE_PARK` (a spin would catch it) restores the full
    /// window, a longer one halves it. A thread that waits long each time
    /// (a batch of work per call) stops spinning and stops taking a CPU
    /// from the shards doing that work: on 2 CPUs, 256 cross-shard round
    /// trips per `block_on` ran 25% slower with a fixed 5 µs spin.
    static SPIN: Cell<Duration> = const { Cell::new(SPIN_BEFORE_PARK) };
}

fn wait(parker: &ThreadWaker) {
    let window = SPIN.with(Cell::get);
    let start = Instant::now();
    let mut spins = 0u32;
    let mut caught = false;
    while !window.is_zero() {
        if parker.notified.swap(false, Ordering::Acquire) {
            caught = true;
            break;
        }
        spins += 1;
        if spins % 16 == 0 && start.elapsed() >= window {
            break;
        }
        std::hint::spin_loop();
    }
    if !caught {
        while !parker.notified.swap(false, Ordering::Acquire) {
            thread::park();
        }
    }
    SPIN.with(|s| {
        s.set(next_window(
            window,
            caught || start.elapsed() < SPIN_BEFORE_PARK,
        ))
    });
}

/// The window after a wait that used `window`: the full one when a spin
/// caught the wake or would have (`short`), else half, and none below
/// `SPIN_FLOOR`.
fn next_window(window: Duration, short: bool) -> Duration {
    if short {
        SPIN_BEFORE_PARK
    } else if window / 2 < SPIN_FLOOR {
        Duration::ZERO
    } else {
        window / 2
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_waits_stop_the_spin_and_a_short_one_restores_it() {
        let mut w = SPIN_BEFORE_PARK;
        let mut steps = 0;
        while !w.is_zero() {
            w = next_window(w, false);
            steps += 1;
            assert!(steps < 10, "the window never reached zero");
        }
        // 5 µs -> 2.5 -> 1.25 -> 0 (below the 1 µs floor).
        assert_eq!(steps, 3);
        assert_eq!(next_window(Duration::ZERO, false), Duration::ZERO);
        assert_eq!(next_window(Duration::ZERO, true), SPIN_BEFORE_PARK);
        assert_eq!(next_window(SPIN_BEFORE_PARK / 2, true), SPIN_BEFORE_PARK);
    }
}
