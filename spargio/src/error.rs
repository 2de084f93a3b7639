//! Error types of the runtime core.

use std::fmt;
use std::io;

use crate::shard_id::ShardId;

/// Why the runtime could not be built, or could not take a task.
#[derive(Debug)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A builder knob has a value the runtime cannot work with.
    InvalidConfig {
        /// The knob's builder method name.
        knob: &'static str,
        /// What is wrong with the value.
        reason: String,
    },
    /// The kernel would not give us an io_uring instance.
    IoUringUnavailable {
        /// The likely cause, in one line.
        reason: String,
        /// The error the kernel returned.
        source: io::Error,
    },
    /// A shard thread could not be started.
    ThreadSpawn(io::Error),
    /// The target shard's stealable queue is at `stealable_queue_capacity`.
    Overloaded,
    /// The shard index is not below `shard_count()`.
    InvalidShard(ShardId),
    /// The runtime is shutting down or has shut down.
    Shutdown,
    /// The requested backend is not available in this build.
    UnsupportedBackend,
    /// The handle belongs to another runtime than the object it was given
    /// with (a stream's session shard is a shard of the stream's own
    /// runtime).
    ForeignHandle,
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::InvalidConfig { knob, reason } => {
                write!(f, "invalid runtime configuration: {knob}: {reason}")
            }
            RuntimeError::IoUringUnavailable { reason, source } => {
                write!(f, "io_uring unavailable: {reason} ({source})")
            }
            RuntimeError::ThreadSpawn(err) => write!(f, "could not start a shard thread: {err}"),
            RuntimeError::Overloaded => write!(f, "stealable queue is full (runtime overloaded)"),
            RuntimeError::InvalidShard(shard) => write!(f, "no shard with index {shard}"),
            RuntimeError::Shutdown => write!(f, "the runtime is shut down"),
            RuntimeError::UnsupportedBackend => write!(f, "unsupported backend"),
            RuntimeError::ForeignHandle => {
                write!(f, "the handle belongs to a different runtime")
            }
        }
    }
}

impl std::error::Error for RuntimeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RuntimeError::IoUringUnavailable { source, .. } => Some(source),
            RuntimeError::ThreadSpawn(err) => Some(err),
            _ => None,
        }
    }
}

impl From<RuntimeError> for io::Error {
    fn from(err: RuntimeError) -> io::Error {
        let kind = match &err {
            RuntimeError::InvalidConfig { .. }
            | RuntimeError::InvalidShard(_)
            | RuntimeError::ForeignHandle => io::ErrorKind::InvalidInput,
            RuntimeError::IoUringUnavailable { source, .. } => source.kind(),
            RuntimeError::ThreadSpawn(source) => source.kind(),
            RuntimeError::Overloaded => io::ErrorKind::WouldBlock,
            RuntimeError::Shutdown => io::ErrorKind::BrokenPipe,
            RuntimeError::UnsupportedBackend => io::ErrorKind::Unsupported,
        };
        io::Error::new(kind, err)
    }
}

/// Why a message between shards was not sent. A failed send has no effect:
/// the message is not queued and may be sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The queue from this sender to the target holds
    /// `msg_ring_queue_capacity` unconsumed messages.
    Backpressure,
    /// The target shard index is not below `shard_count()`.
    InvalidShard(ShardId),
    /// The runtime is shutting down or has shut down.
    Closed,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Backpressure => write!(f, "message queue to the target shard is full"),
            SendError::InvalidShard(shard) => write!(f, "no shard with index {shard}"),
            SendError::Closed => write!(f, "the runtime is shut down"),
        }
    }
}

impl std::error::Error for SendError {}
