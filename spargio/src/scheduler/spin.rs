//! When an idle shard spins before parking, and for how long.
//!
//! Parking costs a kernel wakeup on the way back (tens of microseconds on a
//! small VM), so a shard that is woken moments after it parks would have
//! done better to keep spinning. But a spinning shard holds a CPU, and on a
//! machine whose CPUs are all wanted (a load generator, the kernel's
//! network stack, other services) that CPU is taken from whoever would
//! have produced the work the shard waits for. Measured on 2 cores under
//! hyper + wrk: a fixed 50 µs spin cost 1.2–2x tokio's CPU per request and
//! lost throughput; parking at once matched tokio. On idle cores the same
//! spin cuts a cross-shard message round trip several times. So the window
//! is decided per idle gap, from what the shard can observe:
//!
//! * **Contention.** The kernel accounts, per thread, the time it spent
//!   runnable but waiting for a CPU (`/proc/thread-self/schedstat`, second
//!   field). A shard whose threads wait for CPU shares its cores with
//!   something that wants them: spinning would only take more. At most once
//!   per `SAMPLE_EVERY` an idle gap reads the counter (one `pread`) and
//!   folds the waited share of the elapsed time into a moving average;
//!   above `CONTENDED` the shard parks without spinning. The first sample
//!   has no earlier one to compare with, but all of its run delay was
//!   spent since the thread was created: a millisecond of it
//!   (`FIRST_SAMPLE_CONTENDED`; tens of microseconds on a quiet machine)
//!   says the machine is contended from the start. Measured with two busy
//!   loops on 2 cores: without it a fresh shard spun, yielding its CPU at
//!   every poll, and each yield lost it for a whole time slice; a runtime
//!   built, given one task and dropped took 2.2–2.4 ms to drop, with it
//!   0.47–0.62 ms (tokio 0.9–3.4 ms there), the quiet figures unchanged
//!   (`bench/README.md`, "Cold start on a busy machine"). Measured on 2
//!   cores: hyper under wrk waits for CPU 35–45% of the time, a cross-shard
//!   ping-pong on otherwise idle cores 0–3%. Without the file
//!   (a kernel built without `CONFIG_SCHED_INFO`) the shard always spins.
//!   **Not with more shards than CPUs**: there the runtime's own shards
//!   wait for each other's CPUs, so the counter reads contended whenever
//!   the runtime is busy, and a shard that parked on it put a kernel
//!   wakeup (about 20 µs here) on its next task's path: 1.7 parks per
//!   request in `fanout_fanin` skewed with 4 shards on 2 CPUs. Such a
//!   runtime does not sample (`build` opens no file): its idle shards
//!   spin for the adaptive window, giving the CPU away at every round
//!   (`Worker::idle`), so a spin only takes CPU time nobody else on that
//!   CPU wants. Measured there: parks 1.7 → 0.07 per request, 4.3–4.7 →
//!   3.65–3.67 ms an iteration.
//!   The file is opened by `build`, on the calling thread, as
//!   `/proc/self/task/TID/schedstat` (`schedstat_of`): `build` does not
//!   wait for the shard threads to start, and every fd the runtime holds
//!   is open when it returns, so that counts of open fds taken then stay
//!   right. The shard picks it up from a shared slot at its first sample.
//! * **Adaptive length**, like the kernel's guest halt-polling: a park that
//!   ended within `max` of starting (a longer spin would have caught the
//!   work) doubles the window, up to `max`, restarting from `GROW_START`
//!   when it was zero; a longer park halves it, and below `SHRINK_FLOOR`
//!   it drops to zero. A shard whose waits are long (a child process, a
//!   disk, a slow peer) stops spinning altogether: with a floor at the
//!   configured base, every such wait burnt the whole base window (50 µs
//!   of CPU per `/bin/true` spawned and waited for, measured), for
//!   nothing. The window starts at the configured `spin_before_park`.
//! * **Backoff.** A spin that has found nothing for `BACKOFF_AFTER` polls
//!   once per `BACKOFF_GAP` (waiting on `PAUSE` in between) and offers its
//!   CPU at each poll. Every poll reads lines that busy shards write (their
//!   queues, their LIFO slots): on 2 CPUs, a shard spinning beside one that
//!   ran two stealable tasks answering each other made each round trip
//!   40% slower (370 against 262 ns). Once the gap is past the length of a
//!   message round trip, which is when polling fast pays, a microsecond
//!   more to notice work costs nothing next to a park. And a thread woken
//!   onto a spinning shard's CPU (the one in `block_on`, say) ran only when
//!   the shard next yielded, every `HOT_POLLS` polls: with the slower polls
//!   that would be 30 µs, so the offer comes with each poll.
//! * **Searcher bound** (in `worker.rs`, from tokio's): at most half the
//!   shards spin at once; the others park straight away.
//! * **Yield, not spin, when contended** (`Worker::yield_for_work`): a
//!   contended shard gives its CPU away twice (`sched_yield`), looking for
//!   work after each, before it parks. Whoever runs meanwhile is often the
//!   peer producing our next request; when it arrives the shard is still
//!   runnable, with no kernel wakeup (and, on a VM, no exit from halt) to
//!   pay. Measured under axum + wrk on two shared cores: parks per request
//!   0.07 → 0, server CPU per request −12% (keep-alive) and −9% (churn),
//!   throughput the same or better.
//!
//! A base of zero disables spinning altogether.

use std::cell::Cell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::thread::JoinHandleExt;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where `build` leaves a shard thread's schedstat file for the shard.
pub(crate) type SchedstatSlot = Arc<OnceLock<File>>;

/// Opens `/proc/self/task/TID/schedstat` for `thread`, from any thread.
///
/// The thread's kernel id comes from its CPU-time clock id:
/// `pthread_getcpuclockid` (glibc and musl) encodes the TID the kernel
/// wrote back at `clone` as `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`,
/// the kernel's ABI for per-thread CPU clocks (`~tid << 3 | 6`). `None`
/// when the id does not have that shape or the file cannot be opened (no
/// `CONFIG_SCHED_INFO`, no `/proc`): the shard then always spins.
pub(crate) fn schedstat_of<T>(thread: &JoinHandle<T>) -> Option<File> {
    File::open(format!("/proc/self/task/{}/schedstat", tid_of(thread)?)).ok()
}

/// `thread`'s kernel id (see `schedstat_of`).
fn tid_of<T>(thread: &JoinHandle<T>) -> Option<libc::pid_t> {
    const PER_THREAD_SCHED: libc::clockid_t = 6;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the pthread_t is a live thread's (its JoinHandle is held, so
    // it has not been joined or detached); `clock` is a valid out pointer.
    let r = unsafe { libc::pthread_getcpuclockid(thread.as_pthread_t(), &mut clock) };
    if r != 0 || clock & 7 != PER_THREAD_SCHED {
        return None;
    }
    let tid = !(clock >> 3);
    (tid > 0).then_some(tid)
}

/// Longest the window grows to, unless the base is longer.
const MAX_WINDOW: Duration = Duration::from_micros(200);

/// Where a window that had dropped to zero starts growing again.
const GROW_START: Duration = Duration::from_micros(10);

/// A window halved below this drops to zero.
const SHRINK_FLOOR: Duration = Duration::from_micros(5);

/// A spin that has found nothing for this long slows its polls down.
pub(super) const BACKOFF_AFTER: Duration = Duration::from_micros(10);

/// The interval between two polls of a spin past `BACKOFF_AFTER`.
pub(super) const BACKOFF_GAP: Duration = Duration::from_micros(1);

/// Waits `gap` on `PAUSE`, touching no shared memory (the clock, a vDSO
/// read, is checked every few pauses).
pub(super) fn pause_for(gap: Duration) {
    let until = Instant::now() + gap;
    while Instant::now() < until {
        for _ in 0..4 {
            std::hint::spin_loop();
        }
    }
}

/// A first sample whose run delay (all of it spent since the thread was
/// created) is this long: contended from the start.
const FIRST_SAMPLE_CONTENDED: Duration = Duration::from_millis(1);

/// Shortest interval between two reads of the run-delay counter.
const SAMPLE_EVERY: Duration = Duration::from_millis(1);

/// Scale of `pressure`: the moving average of the share of time spent
/// waiting for a CPU, in 1/`PRESSURE_ONE` units.
const PRESSURE_ONE: u64 = 1 << 16;

/// Pressure above which the shard does not spin: 10% of the time spent
/// waiting for a CPU.
const CONTENDED: u64 = PRESSURE_ONE / 10;

#[derive(Debug)]
pub(super) struct AdaptiveSpin {
    base: Duration,
    max: Duration,
    current: Cell<Duration>,
    /// The shard thread's schedstat file, once `build` has opened it
    /// (empty if it could not be read).
    schedstat: SchedstatSlot,
    /// The last sample: when, and the run delay (ns) then.
    last: Cell<Option<(Instant, u64)>>,
    /// The coarse clock at the last sample (0: none yet).
    last_coarse: Cell<u64>,
    /// Moving average (weight 1/4 per sample) of the share of time spent
    /// waiting for a CPU, scaled to `PRESSURE_ONE`.
    pressure: Cell<u64>,
}

impl AdaptiveSpin {
    pub(super) fn new(base: Duration, schedstat: SchedstatSlot) -> AdaptiveSpin {
        let max = if base.is_zero() {
            Duration::ZERO
        } else {
            base.max(MAX_WINDOW)
        };
        AdaptiveSpin {
            base,
            max,
            current: Cell::new(base),
            schedstat,
            last: Cell::new(None),
            last_coarse: Cell::new(0),
            pressure: Cell::new(0),
        }
    }

    /// How long to spin before the next park: zero while the shard's CPU
    /// is contended.
    pub(super) fn window(&self) -> Duration {
        if self.base.is_zero() {
            return Duration::ZERO;
        }
        // Whether a sample is due, by the coarse clock (a memory read, not
        // a time-stamp counter read: this runs at every idle entry); the
        // sample itself is timed precisely.
        let coarse = crate::time::clock::coarse_ns();
        if coarse.saturating_sub(self.last_coarse.get()) >= SAMPLE_EVERY.as_nanos() as u64 {
            self.last_coarse.set(coarse);
            let now = Instant::now();
            if let Some(delay) = self.run_delay() {
                self.observe(now, delay);
            }
        }
        if self.pressure.get() > CONTENDED {
            return Duration::ZERO;
        }
        self.current.get()
    }

    /// True while the shard's CPU is contended (the last `window` said so).
    pub(super) fn contended(&self) -> bool {
        !self.base.is_zero() && self.pressure.get() > CONTENDED
    }

    /// Folds a sample of the run-delay counter into the pressure.
    fn observe(&self, now: Instant, delay_ns: u64) {
        if self.last.get().is_none() && delay_ns >= FIRST_SAMPLE_CONTENDED.as_nanos() as u64 {
            self.pressure.set(PRESSURE_ONE);
        }
        if let Some((at, before)) = self.last.get() {
            let elapsed = now.duration_since(at).as_nanos().max(1) as u64;
            let waited = delay_ns.saturating_sub(before).min(elapsed);
            let share = waited * PRESSURE_ONE / elapsed;
            let p = self.pressure.get();
            self.pressure.set(p - p / 4 + share / 4);
        }
        self.last.set(Some((now, delay_ns)));
    }

    /// Nanoseconds this thread has spent runnable but not running.
    fn run_delay(&self) -> Option<u64> {
        let file = self.schedstat.get()?;
        let mut buf = [0u8; 96];
        let n = file.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        text.split_ascii_whitespace().nth(1)?.parse().ok()
    }

    /// Records a park that slept `slept` before work arrived.
    pub(super) fn parked(&self, slept: Duration) {
        if self.base.is_zero() {
            return;
        }
        let cur = self.current.get();
        let next = if slept <= self.max {
            if cur.is_zero() {
                GROW_START.min(self.max)
            } else {
                cur.saturating_mul(2).min(self.max)
            }
        } else if cur / 2 < SHRINK_FLOOR {
            Duration::ZERO
        } else {
            cur / 2
        };
        self.current.set(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_of_duration_max_saturates() {
        // `spin_before_park(Duration::MAX)`: the window doubles on short
        // parks, and must not overflow doing so.
        let s = AdaptiveSpin::new(Duration::MAX, SchedstatSlot::default());
        s.parked(Duration::from_micros(30));
        assert_eq!(s.current.get(), Duration::MAX);
    }

    #[test]
    fn grows_on_short_parks_and_shrinks_on_long_ones() {
        let s = AdaptiveSpin::new(Duration::from_micros(50), SchedstatSlot::default());
        assert_eq!(
            s.current.get(),
            Duration::from_micros(50),
            "starts at the base"
        );
        s.parked(Duration::from_micros(30));
        assert_eq!(s.current.get(), Duration::from_micros(100));
        s.parked(Duration::from_micros(30));
        s.parked(Duration::from_micros(30));
        assert_eq!(s.current.get(), MAX_WINDOW, "capped");
        s.parked(Duration::from_millis(5));
        assert_eq!(s.current.get(), Duration::from_micros(100));
        for _ in 0..10 {
            s.parked(Duration::from_secs(1));
        }
        assert_eq!(s.current.get(), Duration::ZERO, "long waits stop the spin");
        s.parked(Duration::from_micros(30));
        assert_eq!(s.current.get(), GROW_START, "a short park restarts it");
        s.parked(Duration::from_micros(30));
        assert_eq!(s.current.get(), GROW_START * 2);
    }

    #[test]
    fn zero_base_never_spins() {
        let s = AdaptiveSpin::new(Duration::ZERO, SchedstatSlot::default());
        s.parked(Duration::from_micros(1));
        assert_eq!(s.window(), Duration::ZERO);
    }

    #[test]
    fn waiting_for_cpu_stops_the_spin_and_its_absence_restarts_it() {
        let s = AdaptiveSpin::new(Duration::from_micros(50), SchedstatSlot::default());
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut delay = 0;
        s.observe(ms(0), delay);
        // Half of every millisecond spent waiting: contended.
        for i in 1..=10 {
            delay += 500_000;
            s.observe(ms(i), delay);
        }
        assert!(s.pressure.get() > CONTENDED);
        // 1% of the time: the pressure decays below the bar.
        for i in 11..=40 {
            delay += 10_000;
            s.observe(ms(i), delay);
        }
        assert!(s.pressure.get() <= CONTENDED);
        assert!(!s.contended());
    }

    #[test]
    fn a_first_sample_after_a_long_wait_to_run_is_contended_from_the_start() {
        let t0 = Instant::now();
        let quiet = AdaptiveSpin::new(Duration::from_micros(50), SchedstatSlot::default());
        quiet.observe(t0, 40_000);
        assert!(!quiet.contended(), "40 µs before the first run: quiet");
        let busy = AdaptiveSpin::new(Duration::from_micros(50), SchedstatSlot::default());
        busy.observe(t0, 3_000_000);
        assert!(busy.contended(), "3 ms before the first run: contended");
        // Later samples that wait for nothing decay it as any pressure.
        for i in 1..=20 {
            busy.observe(t0 + Duration::from_millis(i), 3_000_000);
        }
        assert!(!busy.contended());
    }

    #[test]
    fn contended_follows_the_pressure_and_never_holds_without_a_spin() {
        let s = AdaptiveSpin::new(Duration::from_micros(50), SchedstatSlot::default());
        assert!(!s.contended());
        s.pressure.set(CONTENDED + 1);
        assert!(s.contended());
        let off = AdaptiveSpin::new(Duration::ZERO, SchedstatSlot::default());
        off.pressure.set(PRESSURE_ONE);
        assert!(!off.contended(), "spin_before_park(0) means park at once");
    }

    #[test]
    fn the_run_delay_is_read_from_the_kernel_for_another_thread() {
        // Any Linux with schedstat: a number, and it never goes backwards.
        if !std::path::Path::new("/proc/thread-self/schedstat").exists() {
            eprintln!("SKIP: this kernel has no /proc/thread-self/schedstat");
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            // SAFETY: plain syscall, no arguments.
            tx.send(unsafe { libc::gettid() }).unwrap();
            let _ = stop_rx.recv();
        });
        // Taken from the handle alone, before the thread ran: the same id
        // the thread finds for itself.
        let tid = tid_of(&thread).expect("a tid from the clock id");
        let file = schedstat_of(&thread).expect("the thread's schedstat opens");
        assert_eq!(rx.recv().unwrap(), tid);
        let slot = SchedstatSlot::default();
        slot.set(file).unwrap();
        let s = AdaptiveSpin::new(Duration::from_micros(50), slot);
        let a = s.run_delay().expect("schedstat parses");
        let b = s.run_delay().expect("schedstat parses");
        assert!(b >= a);
        stop_tx.send(()).unwrap();
        thread.join().unwrap();
    }
}
