//! [`ShardId`], in a leaf module: the driver, ops and queues name shards
//! without depending on the task layer above them.

/// Index of a shard, `0..shard_count()`.
pub type ShardId = usize;
