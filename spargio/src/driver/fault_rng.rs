//! The generator behind the environment-driven fault injection of both
//! backends (`uring/faults.rs`, `epoll/faults.rs`): a seed from an
//! environment variable, read and printed once per process, and one
//! xorshift64* stream per ring or shard drawn from it.

use std::sync::OnceLock;

/// The seed in `var` (a number, or `random`), read once per variable and
/// printed to stderr so a failing run can be replayed; `None` (faults
/// off) when unset, empty, `0`, `off` or not a number.
fn seed(var: &'static str, slot: &'static OnceLock<Option<u64>>) -> Option<u64> {
    *slot.get_or_init(|| {
        let value = std::env::var(var).ok()?;
        let seed = match value.trim() {
            "" | "0" | "off" => return None,
            "random" => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64 | 1),
            n => match n.parse::<u64>() {
                Ok(n) => n,
                Err(_) => {
                    eprintln!("spargio: {var}={n:?} is not a number; faults off");
                    return None;
                }
            },
        };
        eprintln!("spargio: fault injection on, {var}={seed}");
        Some(seed)
    })
}

/// One fault stream; off (draws nothing) when its variable is unset.
#[derive(Debug)]
pub(crate) struct FaultRng {
    state: u64,
}

impl FaultRng {
    /// Stream `stream` of the seed in `var` (`slot` caches the variable's
    /// reading: one static per variable).
    pub(crate) fn from_env(
        var: &'static str,
        slot: &'static OnceLock<Option<u64>>,
        stream: u64,
    ) -> FaultRng {
        let state = seed(var, slot).map_or(0, |s| {
            // Never zero: xorshift stays at zero for ever.
            splitmix(s ^ (stream + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1
        });
        FaultRng { state }
    }

    pub(crate) fn on(&self) -> bool {
        self.state != 0
    }

    /// xorshift64*: cheap and plenty for picking faults.
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
