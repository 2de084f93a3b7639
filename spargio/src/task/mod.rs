//! Tasks: spawning, join handles, placement, and the live-task registry.
//!
//! A task is one `async-task` allocation holding a header with
//! [`TaskMeta`](meta::TaskMeta) (the runtime it belongs to, whether it is
//! pinned or stealable, its registry slot and abort flag), the future wrapped
//! in a panic-catching [`Harness`](harness::Harness), and later its output.
//!
//! Where a woken task goes is decided by the scheduler's `schedule` function
//! (see `scheduler/mod.rs`); this module only builds tasks and hands out
//! [`JoinHandle`]s.
//!
//! Every live task is recorded in its home shard's registry (a slab of
//! wakers). The registry is what lets shutdown find and drop tasks that are
//! parked on a waker nobody will ever fire, so no task outlives its runtime.

pub(crate) mod blocking;
mod harness;
mod join;
pub(crate) mod meta;
mod placement;
pub(crate) mod registry;
mod roam;
pub(crate) mod run_state;
pub(crate) mod spawn;
mod yield_now;

pub use join::{JoinError, JoinHandle};
pub(crate) use placement::sticky_shard;
pub use placement::TaskPlacement;
pub use roam::{roam, Roam};
pub use yield_now::{yield_now, YieldNow};
