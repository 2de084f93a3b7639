//! Where a task runs.

use crate::shard_id::ShardId;

/// Placement policy for [`RuntimeHandle::spawn_with_placement`](crate::RuntimeHandle::spawn_with_placement).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskPlacement {
    /// Runs on exactly this shard and never migrates.
    Pinned(ShardId),
    /// Pinned to the next shard in a runtime-wide rotation.
    RoundRobin,
    /// Pinned to a shard chosen by a stable hash of the key: the same key
    /// always lands on the same shard of a runtime with the same shard count.
    Sticky(u64),
    /// Steered at submission time to the least-loaded shard; idle shards may
    /// steal it afterwards.
    Stealable,
    /// Like [`TaskPlacement::Stealable`], with a home shard as a hint: the task
    /// goes there unless that shard is clearly busier than the least-loaded one.
    StealablePreferred(ShardId),
}

/// The shard a sticky key maps to (SplitMix64 finaliser; stable across
/// releases and platforms).
pub(crate) fn sticky_shard(key: u64, shards: usize) -> ShardId {
    let mut z = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % shards as u64) as ShardId
}

#[cfg(test)]
mod tests {
    use super::sticky_shard;

    #[test]
    fn sticky_is_stable_and_spreads() {
        assert_eq!(sticky_shard(42, 4), sticky_shard(42, 4));
        let mut seen = [0usize; 4];
        for key in 0..4000 {
            seen[sticky_shard(key, 4)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
    }
}
