//! Spinning shards that find themselves on one CPU.
//!
//! The kernel decides where a woken thread runs, and it can put two shards
//! of one runtime on the same CPU while another CPU idles. Measured in a
//! cold start on 2 CPUs: the main thread, running on CPU 1, spawned a task
//! on each shard, and both wakeups landed on CPU 0. Two spinning shards on
//! one CPU each hold it for their whole spin window (up to 200 µs) while
//! the other, which holds the message the first waits for, waits for the
//! CPU: a round trip took two windows. Yielding alone cut that to a few
//! microseconds a hop, but never separated them: neither ever slept, so
//! the kernel never placed either anew.
//!
//! So a spinning shard offers its CPU at each spin check (every
//! `HOT_POLLS` polls, `Worker::idle`, and every poll once the spin has
//! backed off, `spin.rs`): one `sched_yield`, which returns at
//! once when nothing else is runnable there. A yield that took longer than
//! `GAVE_AWAY` gave the CPU to someone. If another shard of this runtime,
//! awake, last saw itself on this same CPU, that was most likely it: the
//! spin ends, the shard parks, and its next idle gap parks at once too
//! (`take_cede`), so it sleeps while the other runs. The wakeup that
//! follows is where the kernel places it again, on the idle CPU when there
//! is one. A yield that let any other thread run (the one that spawned the
//! work, a load generator) ends nothing: the spin goes on.
//!
//! Each shard publishes its CPU (`ShardShared::cpu`) at these checks only;
//! `sched_getcpu` is a vDSO read. With more shards than CPUs the spin
//! yields every round instead and none of this applies.
//!
//! Measured on 2 CPUs (`bench/README.md`): `cold_start_ping_pong` with
//! pinned tasks 557–656 → 405–429 µs, the 90th percentile of its 64 round
//! trips 240–690 → 90–105 µs; the steady groups unchanged.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::worker::Worker;
use crate::stats::Counters;

/// A yield that took longer than this let another thread run.
const GAVE_AWAY: Duration = Duration::from_micros(1);

/// `ShardShared::cpu` before the shard first spins (or when the kernel
/// would not say).
pub(super) const NO_CPU: u32 = u32::MAX;

impl Worker {
    /// At a spin check: offers the CPU to whoever else is runnable on it.
    /// True when another shard of the runtime was waiting for it: the spin
    /// should end in a park.
    pub(super) fn offer_cpu(&self) -> bool {
        self.publish_cpu();
        let before = Instant::now();
        std::thread::yield_now();
        if before.elapsed() < GAVE_AWAY {
            return false;
        }
        // The yield may have moved us: where are we now?
        let cpu = self.publish_cpu();
        if cpu == NO_CPU {
            return false;
        }
        let shared = self.shared.shards.iter().enumerate().any(|(id, shard)| {
            id != self.id && shard.cpu.load(Ordering::Relaxed) == cpu && !shard.wake.is_asleep()
        });
        if shared {
            self.cede.set(true);
            Counters::bump_local(&self.counters().spins_ceded);
        }
        shared
    }

    /// True once after `offer_cpu` found the CPU shared: this idle gap
    /// parks without spinning.
    pub(super) fn take_cede(&self) -> bool {
        self.cede.replace(false)
    }

    /// Records the CPU this thread runs on (written only when it changed,
    /// so the line stays shared between readers); returns it.
    pub(super) fn publish_cpu(&self) -> u32 {
        // SAFETY: `sched_getcpu` takes no arguments and touches no memory of
        // ours; it returns -1 on failure, which maps to `NO_CPU`.
        let cpu = unsafe { libc::sched_getcpu() };
        let cpu = u32::try_from(cpu).unwrap_or(NO_CPU);
        let slot = &self.me().cpu;
        if slot.load(Ordering::Relaxed) != cpu {
            slot.store(cpu, Ordering::Relaxed);
        }
        cpu
    }
}
