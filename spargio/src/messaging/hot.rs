//! Hot-tag lanes: messages routed by tag at the receiver.
//!
//! With `RuntimeBuilder::hot_msg_tag(s)` set, a shard sorts what it
//! receives (mailboxes, direct messages, outside messages) into three
//! lanes as it takes it:
//!
//! * **hot tags** go to the hot lane, read with `ShardCtx::next_hot_event`
//!   (control traffic that must not wait behind bulk general events, and
//!   a consumer that does not want to see the general ones);
//! * **coalesced hot tags** (`coalesced_hot_msg_tag(s)`) are not events
//!   at all: their values are summed (saturating) into one counter per tag,
//!   taken whole with `ShardCtx::next_hot_count` / `try_take_hot_count`.
//!   A burst of a thousand "one more item" messages costs the consumer one
//!   wake and one read;
//! * everything else goes to the general lane, read with `next_event`.
//!
//! Bounds: the general and hot lanes hold at most `msg_ring_queue_capacity`
//! events each. Sorting stops while either is full, so the remaining
//! messages stay in their mailboxes and senders see `Backpressure` as they
//! would without lanes, except for coalesced tags sent from a shard: those
//! are summed at the sender until the mailbox has room
//! (`scheduler/coalesce.rs`), one sum per (target, tag). Counters cannot
//! overflow (they saturate at `u64::MAX`).
//!
//! Waking: the shard sorts new messages when some consumer waits, then
//! wakes general waiters when the general lane has an event, hot waiters
//! when the hot lane has one, and a counter's waiter when its count went
//! from zero to nonzero or crossed `hot_counter_wake_threshold` from below.
//! Without hot tags configured none of this runs: `next_event` reads the
//! mailboxes directly.

/// A set of `u16` message tags (a 64 Ki-bit map: one lookup per message).
#[derive(Clone)]
pub(crate) struct TagSet {
    bits: Box<[u64; 1024]>,
    len: usize,
}

impl std::fmt::Debug for TagSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TagSet").field("len", &self.len).finish()
    }
}

impl Default for TagSet {
    fn default() -> TagSet {
        TagSet {
            bits: Box::new([0; 1024]),
            len: 0,
        }
    }
}

impl TagSet {
    pub(crate) fn insert(&mut self, tag: u16) {
        let (word, bit) = (tag as usize / 64, tag % 64);
        if self.bits[word] & (1 << bit) == 0 {
            self.bits[word] |= 1 << bit;
            self.len += 1;
        }
    }

    pub(crate) fn contains(&self, tag: u16) -> bool {
        self.bits[tag as usize / 64] & (1 << (tag % 64)) != 0
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The hot-lane configuration of a runtime.
#[derive(Clone, Debug)]
pub(crate) struct HotConfig {
    /// Tags routed to the hot lane (coalesced ones included).
    pub(crate) hot: TagSet,
    /// Tags summed into counters.
    pub(crate) coalesced: TagSet,
    pub(crate) wake_threshold: u64,
}

impl Default for HotConfig {
    fn default() -> HotConfig {
        HotConfig {
            hot: TagSet::default(),
            coalesced: TagSet::default(),
            wake_threshold: DEFAULT_WAKE_THRESHOLD,
        }
    }
}

/// Default `hot_counter_wake_threshold`.
pub(crate) const DEFAULT_WAKE_THRESHOLD: u64 = 64;

impl HotConfig {
    /// True when any lane routing is configured.
    pub(crate) fn enabled(&self) -> bool {
        !self.hot.is_empty()
    }
}

/// Per-tag counters of coalesced hot tags (few tags: a small vector).
#[derive(Debug, Default)]
pub(crate) struct Counts {
    counts: Vec<(u16, u64)>,
}

impl Counts {
    /// Adds `val` to `tag`'s counter; returns the counter before and after.
    pub(crate) fn add(&mut self, tag: u16, val: u32) -> (u64, u64) {
        let slot = match self.counts.iter().position(|&(t, _)| t == tag) {
            Some(i) => &mut self.counts[i].1,
            None => {
                self.counts.push((tag, 0));
                &mut self.counts.last_mut().expect("just pushed").1
            }
        };
        let before = *slot;
        *slot = before.saturating_add(u64::from(val));
        (before, *slot)
    }

    /// Takes `tag`'s counter if it is nonzero.
    pub(crate) fn take(&mut self, tag: u16) -> Option<u64> {
        let slot = self.counts.iter_mut().find(|(t, _)| *t == tag)?;
        (slot.1 > 0).then(|| std::mem::take(&mut slot.1))
    }

    #[cfg(test)]
    pub(crate) fn get(&self, tag: u16) -> u64 {
        self.counts
            .iter()
            .find(|(t, _)| *t == tag)
            .map_or(0, |&(_, n)| n)
    }

    pub(crate) fn clear(&mut self) {
        self.counts.clear();
    }
}

/// Whether a counter change wakes its waiter.
pub(crate) fn wakes(before: u64, after: u64, threshold: u64) -> bool {
    (before == 0 && after > 0) || (before < threshold && after >= threshold)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_sets_hold_every_tag() {
        let mut s = TagSet::default();
        for t in [0, 63, 64, 1000, u16::MAX] {
            assert!(!s.contains(t));
            s.insert(t);
            s.insert(t);
            assert!(s.contains(t));
        }
        assert_eq!(s.len, 5);
        assert!(!s.contains(1));
    }

    #[test]
    fn counters_sum_saturate_and_are_taken_whole() {
        let mut c = Counts::default();
        assert_eq!(c.add(7, 3), (0, 3));
        assert_eq!(c.add(7, 4), (3, 7));
        assert_eq!(c.take(7), Some(7));
        assert_eq!(c.take(7), None);
        for _ in 0..3 {
            c.add(9, u32::MAX);
        }
        assert_eq!(c.get(9), 3 * u64::from(u32::MAX));
        let mut big = Counts {
            counts: vec![(1, u64::MAX - 1)],
        };
        assert_eq!(big.add(1, 5), (u64::MAX - 1, u64::MAX));
    }

    #[test]
    fn waking_follows_zero_and_the_threshold() {
        assert!(wakes(0, 1, 64));
        assert!(!wakes(1, 2, 64));
        assert!(wakes(10, 64, 64));
        assert!(!wakes(64, 100, 64));
    }
}
