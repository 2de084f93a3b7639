//! Which shard's ring a stream's operations go to.

use std::io;

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
}

impl StreamSessionPolicy {
    /// The session shard this policy picks now.
    pub(crate) fn pick(self, handle: &RuntimeHandle) -> io::Result<ShardId> {
        let shared = &handle.shared;
        match self {
            StreamSessionPolicy::ContextPreferred => Ok(context::current_shard(shared)
                .unwrap_or_else(|| crate::scheduler::choose_op_lane(shared, None, None))),
            StreamSessionPolicy::RoundRobin => Ok(shared.next_session_rr(1)),
            StreamSessionPolicy::Fixed(shard) if shard < shared.shard_count() => Ok(shard),
            StreamSessionPolicy::Fixed(shard) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                crate::RuntimeError::InvalidShard(shard),
            )),
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
