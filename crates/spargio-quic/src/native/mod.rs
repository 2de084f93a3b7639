//! The native backend: quinn-proto driven on spargio shards.
//!
//! # What it owns
//!
//! A *driver* ([`NativeProtoDriver`]) is one task pinned on its owner
//! shard. It owns one UDP socket (all its ring operations go to that
//! shard's ring), one `quinn_proto::Endpoint`, and the connections the
//! endpoint created. Each connection is an [`conn::ConnInner`]: the
//! `quinn_proto::Connection` plus the wakers of the operations waiting on
//! it, behind one `Mutex` shared by the driver and the user handles.
//!
//! # How data moves
//!
//! 1. Handles (any shard, any thread) lock the connection and call
//!    quinn-proto directly: a write goes into quinn-proto's send buffer
//!    (`write_chunks` takes `Bytes` without copying), a read takes
//!    `Bytes` chunks out of its receive buffer. A handle that must wait
//!    registers its waker under a per-future key; more than
//!    `max_inflight_ops` registered waiters on a connection gives
//!    `WouldBlock` (`closed()` waiters are exempt: only the local user
//!    makes them and each is freed when its future ends).
//! 2. A handle that changed the connection marks it dirty: the first
//!    marker (an `AtomicBool`) pushes it on the driver's dirty list and
//!    wakes the driver task, once until the driver drains the list
//!    (`notified` flag). Requests that need the endpoint (connect,
//!    configuration, shutdown) go through a bounded command queue.
//! 3. The driver loop, per poll: drain commands and dirty connections;
//!    poll the receives in flight (`receives_in_flight`, each into a slice
//!    of a recycled arena) and feed each datagram to `Endpoint::handle`,
//!    routing connection events and accepting new connections (refused
//!    with `Incoming::refuse` when the accept backlog is full); poll the
//!    sends in flight (at most `max_pending_transmits`; buffers recycled);
//!    fire due timers; drive queued connections: endpoint events, then
//!    `poll_transmit` into pooled buffers while send slots last, then
//!    `poll()` application events, which select the waiters to wake; then
//!    arm the single timer for the earliest connection deadline.
//! 4. Wakers are collected under the connection lock and called after it
//!    is released, each inside `catch_unwind` (a panicking waker is
//!    counted, not propagated).
//!
//! # Invariants
//!
//! - Only the driver task touches the `Endpoint`; lock order is
//!   connection lock, then the driver's signal lock (the driver never
//!   takes a connection lock while holding the signal lock).
//! - A connection is in the dirty list at most once (its flag), so the
//!   list is bounded by the connection count; the command queue by
//!   `max_inflight_ops`; the accept queue by `accept_backlog`; the event
//!   FIFO by [`NATIVE_EVENT_CAPACITY`] (oldest dropped, counted).
//! - One timer wheel entry per driver: a min-heap of connection deadlines
//!   (stale entries skipped) feeds one `spargio::time::Sleep`.
//! - Shutdown (last endpoint handle dropped, or
//!   [`NativeProtoDriver::shutdown`]): every connection is closed with
//!   code 0, the receives are dropped (spargio cancels them and keeps
//!   their buffers until the kernel is done), the close packets are sent,
//!   then the task ends and the socket is closed. Afterwards every
//!   operation fails with `BrokenPipe`.

pub(crate) mod conn;
mod driver;
mod driver_task;
mod faults;
pub(crate) mod shared;
pub(crate) mod streams;
mod types;
mod udp;
mod waiters;

pub(crate) use driver::peer_chain;
pub use driver::{NativeProtoDriver, NativeProtoDriverLocal, NativeProtoDriverSend};
pub use faults::{NativeProtoFaultSpec, NativeProtoFaultStats};
pub(crate) use types::DriverCounters as DriverCountersRef;
pub use types::{
    NativeProtoConnectionState, NativeProtoDriverOptions, NativeProtoDriverProbe, NativeProtoEvent,
    NativeProtoStats, NativeProtoTimerState, NativeProtoTransportTuning, NATIVE_EVENT_CAPACITY,
};
