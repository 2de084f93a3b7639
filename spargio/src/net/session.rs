//! Which shard's ring a stream's operations go to.

use std::io;

use crate::runtime::context;
use crate::task::ShardId;
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
            StreamSessionPolicy::RoundRobin => Ok(shared.next_rr() % shared.shard_count()),
            StreamSessionPolicy::Fixed(shard) if shard < shared.shard_count() => Ok(shard),
            StreamSessionPolicy::Fixed(shard) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                crate::RuntimeError::InvalidShard(shard),
            )),
        }
    }
}
