//! The epoll driver's timers: `IORING_OP_TIMEOUT`s, and the backoff of
//! operations that no readiness event would wake (`Step::Retry`). Both
//! sit in one ordered set, whose first deadline bounds `epoll_wait`.

use std::time::{Duration, Instant};

use super::exec::Progress;
use super::sqe::Sqe;
use super::{EpollDriver, Pending, Wait};

impl EpollDriver {
    pub(super) fn start_timer(&mut self, sqe: Sqe) {
        const ABS: u32 = 1 << 0;
        const CLOCKS: u32 = (1 << 2) | (1 << 3);
        if sqe.off != 0 || sqe.op_flags & CLOCKS != 0 || sqe.addr == 0 {
            // Counted timeouts and other clocks have no emulation.
            self.posted.push((sqe.user_data, -libc::EOPNOTSUPP, 0));
            return;
        }
        // SAFETY: the timespec is the operation's, valid until its
        // completion (module docs); read once, as the kernel does.
        let dur = duration_of(unsafe { std::ptr::read(sqe.addr as *const libc::timespec) });
        let now = Instant::now();
        let deadline = if sqe.op_flags & ABS != 0 {
            let mono = monotonic_now();
            now + dur.saturating_sub(mono)
        } else {
            now.checked_add(dur)
                .unwrap_or(now + Duration::from_secs(86_400 * 365))
        };
        let idx = self.pending.insert(Pending {
            sqe,
            progress: Progress::default(),
            state: Wait::Timer(deadline),
        });
        self.by_user_data.insert(sqe.user_data, idx);
        self.timers.insert((deadline, idx));
    }

    /// Lists `idx` (not under any fd) to be tried again after its backoff.
    pub(super) fn retry_later(&mut self, idx: usize) {
        let p = &mut self.pending[idx];
        let backoff = Duration::from_millis(1 << p.progress.retries.min(6));
        p.progress.retries = p.progress.retries.saturating_add(1);
        let at = Instant::now() + backoff;
        p.state = Wait::Retry(at);
        self.timers.insert((at, idx));
    }

    /// Fires due timers (`ETIME`, as the kernel's timeouts complete).
    pub(super) fn fire_timers(&mut self) {
        let Some(&(first, _)) = self.timers.first() else {
            return;
        };
        let now = Instant::now();
        if first > now {
            return;
        }
        while let Some(&(deadline, idx)) = self.timers.first() {
            if deadline > now {
                break;
            }
            if let Wait::Retry(_) = self.pending[idx].state {
                self.timers.pop_first();
                self.retry_now(idx);
            } else {
                self.finish(idx, -libc::ETIME);
            }
        }
    }

    /// Tries pending operation `idx` (not listed under an fd) again.
    fn retry_now(&mut self, idx: usize) {
        if let Some(interest) = self.attempt_again(idx) {
            self.wait_on_fd(idx, interest);
        }
    }
}

/// `CLOCK_MONOTONIC` now, as a duration (absolute timeouts use it).
fn monotonic_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a live timespec for the kernel to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    duration_of(ts)
}

/// A kernel timespec as a duration (negative parts count as zero).
fn duration_of(ts: libc::timespec) -> Duration {
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}
