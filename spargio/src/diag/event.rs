//! Where the runtime's own events go: `tracing` with the `tracing`
//! feature, else the `log` facade. One function per event, so both roads
//! say the same thing under the same target:
//!
//! | target | level | event |
//! |---|---|---|
//! | `spargio::stall` | warn | a stall report (without an `on_stall` callback) |
//! | `spargio::ring` | warn | a shard's rings proved too small (once per shard) |
//! | `spargio::ring` | debug | a doorbell `MSG_RING` refused, rung by eventfd instead |
//! | `spargio::backpressure` | debug | a message or spawn refused at a queue's bound |
//! | `spargio::shard` | error | a shard loop failed; the runtime shuts down |
//! | `spargio::shard` | error | a shard's ring would not enable; that shard runs on epoll |
//! | `spargio::ring` | warn | a shard's shared receive pool could not be registered |
//!
//! With the `tracing` feature, events raised inside a task carry its span
//! (`task.rs`).

use crate::shard_id::ShardId;

/// Emits one event at `$level` under `$target`, through whichever facade
/// is compiled in.
macro_rules! emit {
    ($level:ident, $target:literal, $($arg:tt)+) => {{
        #[cfg(feature = "tracing")]
        tracing::$level!(target: $target, $($arg)+);
        #[cfg(not(feature = "tracing"))]
        log::$level!(target: $target, $($arg)+);
    }};
}

/// A stall report nobody asked to receive by callback.
pub(crate) fn stall(report: &super::StallReport) {
    emit!(warn, "spargio::stall", "{report}");
}

/// The stall watcher could not start its thread.
pub(crate) fn no_watcher(err: &std::io::Error) {
    emit!(warn, "spargio::stall", "no stall watcher thread: {err}");
}

/// A shard's submission or completion queue ran out of room (said once
/// per shard; the counters keep the count).
pub(crate) fn ring_pressure(shard: ShardId, what: &str) {
    emit!(
        warn,
        "spargio::ring",
        "shard {shard}: {what}: raise ring_entries"
    );
}

/// A doorbell to `target` could not be posted on the ring.
pub(crate) fn doorbell_refused(shard: ShardId, target: ShardId) {
    emit!(
        debug,
        "spargio::ring",
        "shard {shard}: the doorbell MSG_RING to shard {target} was refused; rung by eventfd"
    );
}

/// A send or spawn was refused at a queue's bound.
pub(crate) fn backpressure(what: &str, target: ShardId) {
    emit!(
        debug,
        "spargio::backpressure",
        "{what} to shard {target} refused: its queue is at its bound"
    );
}

/// A shard's ring would not enable on its thread; it runs on epoll.
pub(crate) fn ring_refused(shard: ShardId, err: &std::io::Error) {
    emit!(
        error,
        "spargio::shard",
        "shard {shard}: its io_uring ring could not be enabled ({err}); this shard runs on epoll"
    );
}

/// A shard loop failed (a panic in the runtime itself, or a ring the
/// kernel stopped serving); the runtime shuts down.
pub(crate) fn shard_failed(shard: ShardId) {
    emit!(
        error,
        "spargio::shard",
        "shard {shard}: the shard loop failed; shutting the runtime down"
    );
}

/// A shard's shared receive pool could not be registered (once per shard:
/// it is not retried); its streams receive into a buffer each.
pub(crate) fn no_recv_pool(shard: ShardId, err: &std::io::Error) {
    emit!(
        warn,
        "spargio::ring",
        "shard {shard}: no shared receive pool ({err}); receives use a buffer each"
    );
}
