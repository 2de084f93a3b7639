//! Native operations with no fixed shard: [`UringNativeAny`], the lane
//! selector, and the safe wrappers of `spargio::extension`.

pub(crate) mod statx;

use std::sync::Arc;

use crate::op::Lane;
use crate::task::ShardId;
use crate::RuntimeHandle;

/// Entry point to native io_uring operations that are not tied to a shard:
/// each operation goes to the ring with the fewest operations in flight
/// (ties broken round-robin), or to the preferred shard while it is within
/// the steering margin of the best.
#[derive(Clone, Debug)]
pub struct UringNativeAny {
    pub(crate) handle: RuntimeHandle,
    preferred: Option<ShardId>,
}

impl UringNativeAny {
    pub(crate) fn new(handle: RuntimeHandle) -> UringNativeAny {
        UringNativeAny {
            handle,
            preferred: None,
        }
    }

    /// A copy that prefers `shard` when loads are close.
    pub fn with_preferred_shard(&self, shard: ShardId) -> UringNativeAny {
        UringNativeAny {
            handle: self.handle.clone(),
            preferred: Some(shard),
        }
    }

    pub(crate) fn lane(&self) -> Lane {
        Lane::Any {
            preferred: self.preferred,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<crate::scheduler::Shared> {
        &self.handle.shared
    }
}
