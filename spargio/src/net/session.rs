//! Which shard's ring a stream's operations go to.

use std::io;
use std::os::fd::RawFd;

use crate::scheduler::context;
use crate::shard_id::ShardId;
use crate::RuntimeHandle;

/// How a stream picks its *session shard*: the ring all its operations are
/// submitted to. Operations issued from a task on that shard go straight
/// into its ring; from anywhere else, through its inbox.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamSessionPolicy {
    /// The shard the connecting (or accepting) task runs on; from outside
    /// the runtime, the ring with the fewest operations in flight.
    #[default]
    ContextPreferred,
    /// The next shard in a runtime-wide rotation: spreads many streams.
    RoundRobin,
    /// This shard.
    Fixed(ShardId),
    /// For an accepted stream, the shard running on the CPU its packets
    /// arrive on (`SO_INCOMING_CPU`: on loopback the peer's CPU; from a
    /// network card, the CPU that takes the flow's interrupts), so that a
    /// request's packets, its handling and the wakeup of a local peer can
    /// stay on one CPU. It pays where that CPU is stable: network-card
    /// queues spread over CPUs, or clients and shards pinned (see
    /// [`thread_affinity`](crate::RuntimeBuilder::thread_affinity)). A
    /// client thread that moves after connecting takes the benefit with it.
    /// For long-lived connections: with a connection per request, measured
    /// on loopback, it did worse than `RoundRobin` (`bench/README.md`).
    ///
    /// Streams still spread: a stream whose CPU's shard is ahead of the
    /// shard with the fewest streams by more than one stream plus an even
    /// share (streams placed / shards) goes to the one with the fewest, as
    /// do streams with no incoming CPU (outgoing connections, wrapped std
    /// sockets that have not received, Unix sockets) and ones arriving on
    /// a CPU no shard runs on. With every connection arriving through one
    /// CPU, two shards split them about 3:1. Counts are of streams placed,
    /// as with `RoundRobin`.
    IncomingCpu,
}

impl StreamSessionPolicy {
    /// The session shard this policy picks now.
    pub(crate) fn pick(self, handle: &RuntimeHandle) -> io::Result<ShardId> {
        let shared = &handle.shared;
        match self {
            StreamSessionPolicy::ContextPreferred => Ok(context::current_shard(shared)
                .unwrap_or_else(|| crate::scheduler::choose_op_lane(shared, None, None))),
            StreamSessionPolicy::RoundRobin => Ok(shared.next_session_rr(1)),
            StreamSessionPolicy::IncomingCpu => Ok(shared.place_session(None)),
            StreamSessionPolicy::Fixed(shard) if shard < shared.shard_count() => Ok(shard),
            StreamSessionPolicy::Fixed(shard) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                crate::RuntimeError::InvalidShard(shard),
            )),
        }
    }

    /// Fails as `pick` would, without placing anything: for checking a
    /// policy before its stream exists.
    pub(crate) fn pick_checked(self, handle: &RuntimeHandle) -> io::Result<()> {
        match self {
            StreamSessionPolicy::Fixed(_) => self.pick(handle).map(drop),
            _ => Ok(()),
        }
    }

    /// The session shard for the stream on `fd`, which may already have
    /// received (an accepted connection): `IncomingCpu` asks the kernel
    /// where its packets arrive; every other policy is `pick`'s.
    pub(crate) fn pick_for(self, handle: &RuntimeHandle, fd: RawFd) -> io::Result<ShardId> {
        match self {
            StreamSessionPolicy::IncomingCpu => Ok(handle.shared.place_session(incoming_cpu(fd))),
            other => other.pick(handle),
        }
    }

    /// Session shards for a batch of `n` streams. Round-robin reserves `n`
    /// consecutive turns at once, so the batch covers every shard evenly
    /// even while other streams are placed concurrently.
    pub(crate) fn pick_many(self, handle: &RuntimeHandle, n: usize) -> io::Result<Vec<ShardId>> {
        let shared = &handle.shared;
        if self == StreamSessionPolicy::RoundRobin {
            let start = shared.next_session_rr(n);
            let count = shared.shard_count();
            return Ok((0..n).map(|i| (start + i) % count).collect());
        }
        (0..n).map(|_| self.pick(handle)).collect()
    }
}

/// The CPU that last processed packets for the socket `fd`, if the kernel
/// knows one.
fn incoming_cpu(fd: RawFd) -> Option<u32> {
    crate::op::socket::getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_INCOMING_CPU)
        .ok()
        .and_then(|c| u32::try_from(c).ok())
}
