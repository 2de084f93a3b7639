//! Fault injection for the driver's UDP paths: drop inbound, drop egress
//! and reorder egress datagrams with given probabilities, from a seeded
//! deterministic PRNG (xorshift64*; no dependency).

use std::sync::atomic::{AtomicU64, Ordering};

/// Fault probabilities in `[0, 1]` (values outside are clamped), applied
/// per UDP datagram by a driver; see
/// [`NativeProtoDriver::set_fault_spec`](crate::NativeProtoDriver::set_fault_spec).
///
/// While any fault is active the driver sends one datagram per send
/// (no segmentation offload batches), so each datagram is judged alone.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NativeProtoFaultSpec {
    /// Probability that a received datagram is dropped before quinn-proto
    /// sees it.
    pub drop_inbound: f64,
    /// Probability that a datagram to send is dropped instead.
    pub drop_egress: f64,
    /// Probability that a datagram to send is held back and sent after
    /// the next one (or at the end of the current send burst).
    pub reorder_egress: f64,
    /// The PRNG seed (the same seed gives the same decisions for the same
    /// datagram sequence); zero picks a fixed non-zero seed.
    pub seed: u64,
}

impl NativeProtoFaultSpec {
    /// No faults.
    pub fn none() -> NativeProtoFaultSpec {
        NativeProtoFaultSpec::default()
    }

    pub(crate) fn is_active(&self) -> bool {
        self.drop_inbound > 0.0 || self.drop_egress > 0.0 || self.reorder_egress > 0.0
    }
}

/// Counts of the faults a driver injected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NativeProtoFaultStats {
    /// Received datagrams dropped.
    pub inbound_dropped: u64,
    /// Datagrams to send dropped.
    pub egress_dropped: u64,
    /// Datagrams to send reordered (held back behind a later one).
    pub egress_reordered: u64,
}

#[derive(Debug, Default)]
pub(crate) struct FaultCounters {
    inbound_dropped: AtomicU64,
    egress_dropped: AtomicU64,
    egress_reordered: AtomicU64,
}

impl FaultCounters {
    pub(crate) fn snapshot(&self) -> NativeProtoFaultStats {
        // Relaxed: independent statistics counters.
        NativeProtoFaultStats {
            inbound_dropped: self.inbound_dropped.load(Ordering::Relaxed),
            egress_dropped: self.egress_dropped.load(Ordering::Relaxed),
            egress_reordered: self.egress_reordered.load(Ordering::Relaxed),
        }
    }
}

/// What to do with one egress datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Egress {
    Send,
    Drop,
    Hold,
}

/// The driver-side fault state (owned by the driver task).
#[derive(Debug)]
pub(crate) struct Faults {
    spec: NativeProtoFaultSpec,
    state: u64,
}

impl Faults {
    pub(crate) fn new(spec: NativeProtoFaultSpec) -> Faults {
        let seed = if spec.seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            spec.seed
        };
        Faults { spec, state: seed }
    }

    pub(crate) fn is_active(&self) -> bool {
        self.spec.is_active()
    }

    /// A uniform number in `[0, 1)`.
    fn next_unit(&mut self) -> f64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (r >> 11) as f64 / (1u64 << 53) as f64
    }

    fn hit(&mut self, p: f64) -> bool {
        p > 0.0 && self.next_unit() < p.min(1.0)
    }

    /// Whether to drop a received datagram (counted).
    pub(crate) fn drop_inbound(&mut self, counters: &FaultCounters) -> bool {
        let hit = self.hit(self.spec.drop_inbound);
        if hit {
            // Relaxed: statistics.
            counters.inbound_dropped.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    /// The fate of a datagram to send (counted).
    pub(crate) fn egress(&mut self, counters: &FaultCounters) -> Egress {
        if self.hit(self.spec.drop_egress) {
            // Relaxed: statistics.
            counters.egress_dropped.fetch_add(1, Ordering::Relaxed);
            return Egress::Drop;
        }
        if self.hit(self.spec.reorder_egress) {
            counters.egress_reordered.fetch_add(1, Ordering::Relaxed);
            return Egress::Hold;
        }
        Egress::Send
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_close_to_the_spec_and_deterministic() {
        let spec = NativeProtoFaultSpec {
            drop_inbound: 0.05,
            seed: 42,
            ..NativeProtoFaultSpec::default()
        };
        let counters = FaultCounters::default();
        let mut a = Faults::new(spec);
        let mut b = Faults::new(spec);
        let mut hits = 0;
        for _ in 0..100_000 {
            let x = a.drop_inbound(&counters);
            assert_eq!(x, b.drop_inbound(&counters));
            hits += x as u32;
        }
        assert!((4_000..6_000).contains(&hits), "{hits}");
        let all = Faults::new(NativeProtoFaultSpec {
            drop_inbound: 1.0,
            ..spec
        })
        .clone_drop_inbound(&counters);
        assert!(all);
    }

    impl Faults {
        fn clone_drop_inbound(mut self, c: &FaultCounters) -> bool {
            (0..1000).all(|_| self.drop_inbound(c))
        }
    }
}
