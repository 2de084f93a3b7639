//! Endpoint-level counters ([`QuicMetrics`]) and the bridge runtime's
//! test hooks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

macro_rules! metrics {
    ($($(#[doc = $doc:literal])* $name:ident),* $(,)?) => {
        /// A snapshot of an endpoint's counters (see [`QuicMetrics`]).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct QuicMetricsSnapshot {
            $($(#[doc = $doc])* pub $name: u64,)*
        }

        impl QuicMetricsSnapshot {
            /// Every counter as (name, help, value), for exporters.
            pub(crate) fn each(&self, mut f: impl FnMut(&'static str, &'static str, u64)) {
                $(f(stringify!($name), concat!($($doc),*), self.$name);)*
            }
        }

        #[derive(Debug, Default)]
        pub(crate) struct MetricsInner {
            $(pub(crate) $name: AtomicU64,)*
        }

        impl QuicMetrics {
            /// The current values.
            pub fn snapshot(&self) -> QuicMetricsSnapshot {
                // Relaxed: independent statistics counters.
                QuicMetricsSnapshot { $($name: self.inner.$name.load(Ordering::Relaxed),)* }
            }
        }
    };
}

metrics! {
    /// `connect` calls.
    connects_started,
    /// Connects whose handshake completed.
    connects_succeeded,
    /// Connects that failed (not counting timeouts).
    connects_failed,
    /// Connects that hit `connect_timeout`.
    connect_timeouts,
    /// `accept` calls.
    accepts_started,
    /// Accepts that returned a connection.
    accepts_succeeded,
    /// Accepts that failed (endpoint closed, `WouldBlock`; not timeouts).
    accepts_failed,
    /// Accepts that hit `accept_timeout`.
    accept_timeouts,
    /// Streams opened locally.
    streams_opened,
    /// Streams accepted from the peer.
    streams_accepted,
    /// Stream bytes written.
    bytes_written,
    /// Stream bytes read.
    bytes_read,
    /// Datagrams sent.
    datagrams_sent,
    /// Datagrams received.
    datagrams_received,
    /// Connections closed by this side (`close`).
    close_events,
    /// Operations that hit `operation_timeout`.
    operation_timeouts,
    /// Operations refused with `WouldBlock` (`max_inflight_ops`).
    backpressure_hits,
    /// Operations run by the native backend.
    native_ops_dispatched,
    /// Operations run by the bridge backend (spawned on its runtime).
    bridge_ops_dispatched,
}

/// An endpoint's counters, shared by its connections and streams.
/// `Clone` shares the same counters.
#[derive(Clone, Debug, Default)]
pub struct QuicMetrics {
    pub(crate) inner: Arc<MetricsInner>,
}

impl QuicMetrics {
    pub(crate) fn add(&self, f: impl FnOnce(&MetricsInner) -> &AtomicU64, n: u64) {
        // Relaxed: statistics.
        f(&self.inner).fetch_add(n, Ordering::Relaxed);
    }
}

pub(crate) static BRIDGE_SPAWNS: AtomicU64 = AtomicU64::new(0);
pub(crate) static BRIDGE_CONTEXT_ENTERS: AtomicU64 = AtomicU64::new(0);

/// *Test hook:* tasks spawned on the bridge's Tokio runtime so far in
/// this process. The native backend never spawns there.
pub fn bridge_runtime_spawn_count() -> u64 {
    // Relaxed: a diagnostic counter.
    BRIDGE_SPAWNS.load(Ordering::Relaxed)
}

/// *Test hook:* times code entered the bridge runtime's context (to
/// create or use a quinn endpoint) since the last reset.
pub fn bridge_runtime_context_enter_count() -> u64 {
    BRIDGE_CONTEXT_ENTERS.load(Ordering::Relaxed)
}

/// *Test hook:* resets [`bridge_runtime_context_enter_count`].
pub fn reset_bridge_runtime_context_enter_count() {
    BRIDGE_CONTEXT_ENTERS.store(0, Ordering::Relaxed);
}
