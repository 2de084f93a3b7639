//! Deterministic payloads and their checksum, identical in the Rust
//! helpers, the Python peers (`tests/py/quic_data.py`) and whatever side of
//! a test produces or checks bytes.
//!
//! - [`pattern`]: splitmix64 seeded with `seed`, each 64-bit output written
//!   little-endian, truncated to `len` bytes. A dropped, duplicated or
//!   shifted chunk changes the checksum.
//! - [`checksum`]: FNV-1a 64 (offset basis `0xcbf29ce484222325`, prime
//!   `0x100000001b3`). On the wire it travels as 8 little-endian bytes.

/// FNV-1a 64 offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64 prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// `len` pseudo-random bytes from a splitmix64 generator seeded with `seed`.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut state = seed;
    while out.len() < len {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        out.extend_from_slice(&z.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// FNV-1a 64 of `data`.
pub fn checksum(data: &[u8]) -> u64 {
    let mut c = Checksum::new();
    c.update(data);
    c.value()
}

/// Incremental FNV-1a 64, for data that arrives in chunks.
#[derive(Clone, Copy, Debug)]
pub struct Checksum {
    hash: u64,
    len: u64,
}

impl Checksum {
    /// The checksum of no bytes.
    pub fn new() -> Checksum {
        Checksum {
            hash: FNV_OFFSET,
            len: 0,
        }
    }

    /// Feeds `data` in.
    pub fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.hash = (self.hash ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
        self.len += data.len() as u64;
    }

    /// The checksum of everything fed in so far.
    pub fn value(&self) -> u64 {
        self.hash
    }

    /// How many bytes were fed in.
    pub fn len(&self) -> u64 {
        self.len
    }
}

impl Default for Checksum {
    fn default() -> Checksum {
        Checksum::new()
    }
}
