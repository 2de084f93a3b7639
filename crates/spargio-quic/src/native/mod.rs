//! The native backend: quinn-proto driven on spargio shards.
//!
//! # What it owns
//!
//! A *driver* ([`NativeProtoDriver`]) is one endpoint task pinned on its
//! owner shard (`driver_task/`). It owns one UDP socket (its receives go
//! to that shard's ring), one `quinn_proto::Endpoint`, and the table of
//! the connections the endpoint created. Each connection is an
//! [`conn::ConnInner`]: the `quinn_proto::Connection` plus the wakers of
//! the operations waiting on it, behind one `Mutex` shared by its
//! connection task and the user handles, and a small mailbox the
//! endpoint task fills. Each connection has its own *connection task*
//! (`conn_task.rs`, as quinn's `ConnectionDriver`), a local task pinned
//! at spawn on its endpoint's shard, where each datagram it gets arrives
//! (a lone driver's go to the shard with the fewest live connection tasks
//! instead). A multi-driver endpoint (one driver per shard, the default)
//! routes datagrams to its drivers by connection id (`route.rs`), which
//! spreads the connections, and their tasks, over the shards. A server
//! group's new connections are dealt to its drivers in turn (`deal.rs`):
//! a client's first Initial lands on a random driver, and a burst split
//! 5:3 leaves one shard with most of the handshake crypto. Once it has
//! moved enough bytes a connection task decides, once, where to run, and
//! may hand the connection over to a new task on another shard (the old
//! one only finishes its sends): to the shard with the fewest connection
//! tasks, when that evens the counts out. So the two ends of a loopback
//! connection whose endpoints share a shard still do their crypto on
//! different shards.
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
//!    marker (the connection's `notified` flag) wakes its connection
//!    task, once until the task starts its next pass. Requests that need
//!    the endpoint (connect, configuration, shutdown) go through the
//!    driver's bounded command queue and wake the endpoint task.
//! 3. The endpoint task, per poll: drains commands and what connection
//!    tasks handed it (endpoint events go to `Endpoint::handle_event`,
//!    whose answers go back to the connection's mailbox; `Drained`
//!    removes the connection and stops its task; transmits queue for a
//!    send slot); polls the receives in flight (one while datagrams
//!    come one at a time, up to `receives_in_flight` while they queue
//!    up: every waiting receive is woken by each datagram; see
//!    `driver_task/io.rs`), each into a slice of a recycled arena, and
//!    handles the completed
//!    ones in completion order (`udp::OrderedRecv`: handling them in
//!    submission order reorders datagrams, which quinn-proto takes for
//!    loss), feeding each datagram to `Endpoint::handle`: a connection
//!    event goes to that connection's mailbox (bounded by
//!    `conn::EVENT_QUEUE_CAP`; past it the endpoint task feeds it, and
//!    the queued ones first, to quinn-proto itself under the connection
//!    lock, so nothing is dropped or reordered); a new connection is
//!    accepted (refused with `Incoming::refuse` when the accept backlog
//!    is full) and its task spawned; in a server group, first dealt to
//!    the driver whose turn it is (`deal.rs`). When those receives
//!    carried a handshake packet, or a datagram for a connection still in
//!    its first events (`conn::Queued::Young`: what follows a handshake
//!    comes in flights too), the rest of the flight is taken off the
//!    socket at once without the ring (`drain_queued` in
//!    `driver_task/io.rs`).
//!    Then each connection given datagrams is woken, once: a task woken
//!    at the first datagram of a flight would answer each with its own
//!    acknowledgement. Last, it polls its sends in flight (at most
//!    `max_pending_transmits`) and starts queued ones.
//! 4. A connection task, per pass: takes its mailbox (under the
//!    connection lock, so datagrams keep their order), feeds the events
//!    to `handle_event` (decryption), fires its own timer
//!    (`handle_timeout`; one `spargio::time::Sleep` per connection),
//!    then produces while its outbox share (`max_pending_transmits` items
//!    handed to the endpoint or in flight) lasts: endpoint events go to
//!    the endpoint task's outbox; `poll_transmit` (encryption) fills a
//!    pooled buffer that the task sends itself, from its shard's ring,
//!    through its shard's `dup` of the driver's socket (one per driver
//!    and shard, closed with the last connection task using it). Under
//!    fault injection, transmits go to the endpoint task instead (it
//!    applies the faults). Then `poll()` application events select the
//!    waiters to wake, and the task re-arms its timer. At the share it
//!    stops producing until a send completes or the endpoint task
//!    finishes an item (which wakes it).
//! 5. Wakers are collected under the connection lock and called after it
//!    is released, each inside `catch_unwind` (a panicking waker is
//!    counted, not propagated).
//! 6. One exception to "the connection task sends": an established
//!    server connection's local close is sent by the closing task (one
//!    non-blocking `sendto` on a `dup` of the driver's socket), so a
//!    busy shard cannot hold it back while the peer keeps sending (see
//!    `ConnInner::close`).
//!
//! # Invariants
//!
//! - Only the endpoint task touches the `Endpoint`. Lock order:
//!   connection lock, then its mailbox lock, then the driver's signal
//!   lock; no task takes a connection lock while holding a mailbox or
//!   signal lock.
//! - Bounds: the command queue by `max_inflight_ops`; the accept queue by
//!   `accept_backlog`; a connection's mailbox by `EVENT_QUEUE_CAP`
//!   (overflow handled inline, above); the endpoint's outbox and send
//!   queue by the connection count times `max_pending_transmits`; the
//!   event FIFO by [`NATIVE_EVENT_CAPACITY`] (oldest dropped, counted).
//! - Shutdown (last endpoint handle dropped, or
//!   [`NativeProtoDriver::shutdown`]): every connection is closed with
//!   code 0 and its task stopped; the endpoint task produces their close
//!   packets itself, drops the receives (spargio cancels them and keeps
//!   their buffers until the kernel is done), sends the close packets,
//!   then ends and closes the socket (a stopped connection task drops
//!   its shard socket when it ends). Afterwards every operation fails
//!   with `BrokenPipe`.

pub(crate) mod conn;
mod conn_task;
pub(crate) mod deal;
mod driver;
mod driver_task;
mod faults;
mod route;
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
