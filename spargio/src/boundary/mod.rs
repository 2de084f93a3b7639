//! A request/reply channel between spargio and other runtimes.
//!
//! [`channel`] gives a bounded queue of request envelopes. Each envelope
//! carries the request, the caller's deadline, and a one-shot reply slot
//! shared with the caller's [`BoundaryTicket`]. Everything is built on
//! wakers and a mutex, so either side may run on any executor (tokio,
//! spargio, a plain thread). Timeouts use one process-wide deadline thread
//! (`deadline.rs`), since a tokio task has no spargio shard to arm a timer
//! on.
//!
//! Every way a call can end is an explicit [`BoundaryError`], counted in
//! process-wide [`stats_snapshot`]: `Overloaded` (full, `try_call`),
//! `Timeout`, `Canceled` (the server dropped the request, or the caller
//! gave up before the answer), `Closed` (the other side is gone).

mod channel;
mod deadline;
mod reply;
mod stats;

pub use channel::{channel, BoundaryClient, BoundaryRequest, BoundaryServer, BoundaryTicket};
pub use stats::{reset_stats_for_tests, stats_snapshot, BoundaryStats};

use std::fmt;

/// Why a boundary call or receive ended without a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BoundaryError {
    /// The other side of the channel is gone.
    Closed,
    /// The channel was full (`try_call`).
    Overloaded,
    /// The deadline passed first.
    Timeout,
    /// The server dropped the request unanswered, or the caller stopped
    /// waiting before the answer.
    Canceled,
}

impl fmt::Display for BoundaryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BoundaryError::Closed => "boundary channel closed",
            BoundaryError::Overloaded => "boundary channel full",
            BoundaryError::Timeout => "boundary call timed out",
            BoundaryError::Canceled => "boundary request canceled",
        })
    }
}

impl std::error::Error for BoundaryError {}

impl From<BoundaryError> for std::io::Error {
    fn from(err: BoundaryError) -> std::io::Error {
        let kind = match err {
            BoundaryError::Closed => std::io::ErrorKind::BrokenPipe,
            BoundaryError::Overloaded => std::io::ErrorKind::WouldBlock,
            BoundaryError::Timeout => std::io::ErrorKind::TimedOut,
            BoundaryError::Canceled => std::io::ErrorKind::Interrupted,
        };
        std::io::Error::new(kind, err)
    }
}
