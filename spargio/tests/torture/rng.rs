//! A tiny deterministic generator (splitmix64) and the two byte streams.

/// splitmix64: one `u64` of state, good enough to draw scripts from.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `pct` percent.
    pub fn pct(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    /// A size in `1..=max`, skewed small: a random power-of-two scale,
    /// then uniform below it.
    pub fn size(&mut self, max: usize) -> usize {
        let bits = 64 - (max as u64).leading_zeros() as u64;
        let scale = 1u64 << self.below(bits + 1);
        (1 + self.below(scale) as usize).min(max)
    }

    /// Picks an index by weight.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut x = self.below(total.max(1));
        for (i, &w) in weights.iter().enumerate() {
            if x < u64::from(w) {
                return i;
            }
            x -= u64::from(w);
        }
        weights.len() - 1
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Byte `i` of a stream keyed by `key`: any loss, duplication or reorder
/// shows at its position (and a skipped run can be located by search).
pub fn stream_byte(key: u64, i: u64) -> u8 {
    (mix(key ^ mix(i >> 3)) >> ((i & 7) * 8)) as u8
}

/// `len` bytes of the stream from position `at`.
pub fn stream_bytes(key: u64, at: u64, len: usize) -> Vec<u8> {
    (at..at + len as u64).map(|i| stream_byte(key, i)).collect()
}

/// The peer's stream key for a seed (spargio's side writes its own,
/// explicit, bytes).
pub fn peer_key(seed: u64) -> u64 {
    mix(seed ^ 0x5045_4552)
}
