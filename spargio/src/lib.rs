//! # spargio
//!
//! A work-stealing async runtime on Linux io_uring: **thread-per-core rings,
//! but tasks that can move.**
//!
//! Every worker thread (a *shard*) owns one io_uring ring. Shards wake each
//! other with `IORING_OP_MSG_RING` doorbells posted straight into the
//! target's completion queue, and only when the target is actually asleep.
//! Tasks are either *pinned* (they stay on one shard and may be `!Send`) or
//! *stealable* (steered at submission time to the least-loaded shard, and
//! stolen by idle shards). An idle shard spins briefly (50 µs by default,
//! and not at all while its CPU is contended), then blocks in the kernel:
//! an idle runtime costs no CPU.
//!
//! ```
//! use spargio::{Event, Runtime, ShardCtx};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rt = Runtime::builder().shards(2).build()?;
//! let handle = rt.handle();
//!
//! // Stealable fan-out: the branches spread over the shards.
//! let branches: Vec<_> = (0..8u64)
//!     .map(|i| handle.spawn_stealable(async move { i * i }))
//!     .collect::<Result<_, _>>()?;
//! let mut total = 0;
//! for branch in branches {
//!     total += spargio::block_on(branch)?;
//! }
//! assert_eq!(total, 140);
//!
//! // Messages between shards: shard 1 echoes one message back to shard 0.
//! handle.spawn_pinned(1, async {
//!     let ctx = ShardCtx::current().unwrap();
//!     let Event::RingMsg { from, tag, val } = ctx.next_event().await;
//!     ctx.send_raw(from, tag, val + 1).unwrap().await.unwrap();
//! })?;
//! let reply = handle.spawn_pinned(0, async {
//!     let ctx = ShardCtx::current().unwrap();
//!     ctx.send_raw(1, 1, 41).unwrap().await.unwrap();
//!     ctx.next_event().await
//! })?;
//! assert_eq!(spargio::block_on(reply)?, Event::RingMsg { from: 1, tag: 1, val: 42 });
//! # Ok(()) }
//! ```
//!
//! See `DESIGN.md`-level notes in each module's header for how the parts
//! work: `scheduler` (shard loop, stealing), `driver` (rings, parking),
//! `messaging` (mailboxes and doorbells), `task` (spawning, join handles).
//!
//! ## Cargo features
//!
//! * `macros`: `#[spargio::main]` and `#[spargio::test]`.
//! * `tokio-io`: tokio's `AsyncRead`/`AsyncWrite` on `io::Compat`, for
//!   crates written against tokio's I/O traits.
//! * `tracing`: a `TRACE` span per task (target `spargio::task`, entered
//!   on each poll), and the runtime's events (stalls, ring pressure,
//!   backpressure, shard failures) through `tracing` instead of `log`.
//! * `uring-native`: accepted for the reference crate's install line; the
//!   native io_uring API is always on.

#![warn(
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

#[cfg(not(target_os = "linux"))]
compile_error!("spargio runs on Linux only: it is built on io_uring");

pub mod boundary;
pub mod buf;
mod diag;
mod driver;
mod error;
pub mod extension;
pub mod fs;
pub mod io;
mod messaging;
mod native;
pub mod net;
mod op;
mod runtime;
mod scheduler;
mod shard_id;
mod stats;
pub mod sync;
mod task;
pub mod time;

pub use diag::{StallReport, TaskDump, TaskSnapshot, TaskSnapshotKind, TaskState};
pub use error::{RuntimeError, SendError};
#[cfg(feature = "macros")]
pub use spargio_macros::{main, test};

/// Used by the macros' expansion; not public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::driver::audit;
    pub use crate::driver::faults;
    pub use crate::runtime::block_on;
    pub use crate::runtime::macro_output::{PackBoxedError, PackSend, Unpack, Wrap};
}
pub use messaging::{
    Event, NextEvent, NextHotCount, NextHotEvent, RemoteShard, RingMsg, SendTicket, ShardCtx,
};
pub use native::{
    NativeFd, UringCqe, UringNativeAny, UringRecvMultishotSegments, UringRecvSegment,
};
pub use net::{UdpOffload, UdpRecvMeta};
pub use runtime::{
    block_on, probe_io_uring, run, run_local_on, run_with, BackendKind, IoUringRefusal, Runtime,
    RuntimeBuilder, RuntimeHandle,
};
pub use shard_id::ShardId;
pub use stats::{CounterTotals, RingFeatures, RuntimeStats, ShardStats, POLL_TIME_BUCKETS};
pub use sync::{CancellationToken, TaskGroup, TaskGroupJoinHandle};
pub use task::{roam, yield_now, JoinError, JoinHandle, Roam, TaskPlacement, YieldNow};
pub use time::{
    interval, interval_at, sleep, sleep_until, timeout, timeout_at, Interval, MissedTickBehavior,
    Sleep, TimeoutError,
};
