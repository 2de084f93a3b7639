//! Time: sleeps, timeouts and intervals on a per-shard timer wheel.
//!
//! Each shard owns a hierarchical timing wheel (`wheel.rs`, 1 ms ticks)
//! behind a lock (`timers.rs`). A [`Sleep`] arms itself in the wheel of the
//! shard that first polls it; arming, resetting and cancelling are list
//! operations on a slab, with no syscall and no SQE. The shard advances its
//! wheel every loop pass and, when idle, sleeps in `io_uring_enter` no
//! longer than until the wheel's next deadline, so thousands of timers cost
//! one bounded kernel wait, not one SQE each.
//!
//! A timer never fires early: deadlines round up to the next tick and the
//! wheel only advances to ticks that have fully passed. A timer stays in
//! the wheel where it was armed even if its (stealable) task moves; the
//! waker it holds reaches the task wherever it runs. Threads outside the
//! runtime arm timers through a handle ([`RuntimeHandle::sleep`]) and ring
//! the owning shard when their deadline is its earliest.
//!
//! [`RuntimeHandle::sleep`]: crate::RuntimeHandle::sleep

pub(crate) mod clock;
mod interval;
mod sleep;
mod timeout;
pub(crate) mod timers;
mod wheel;

pub(crate) use clock::{deadline_after, earliest, Clock};
pub use interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use sleep::{sleep, sleep_until, Sleep};
pub use timeout::{timeout, timeout_at, Timeout, TimeoutError};
