//! QUIC for spargio.
//!
//! The default [`QuicBackend::Native`] runs quinn-proto's state machine on
//! spargio shards: each [`NativeProtoDriver`] owns one UDP socket whose
//! receives and sends are io_uring operations on its shard, one
//! `quinn_proto::Endpoint`, and its connections; connection timers share
//! one timer-wheel entry per driver. Connections and streams work from
//! any shard without a helper thread. A server spreads over the runtime's
//! shards with one `SO_REUSEPORT` socket and driver per shard, datagrams
//! routed to drivers by connection id.
//!
//! [`QuicBackend::Bridge`] runs quinn on a shared Tokio runtime instead,
//! behind the same types, for compatibility.
//!
//! Configuration types are quinn's ([`quinn::ServerConfig`],
//! [`quinn::ClientConfig`], re-exported from quinn-proto), so both
//! backends take the same configs.
//!
//! Linux only (spargio is built on io_uring).
//!
//! The rest of this page is the crate's README.
#![doc = include_str!("../README.md")]
#![warn(
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

#[cfg(not(target_os = "linux"))]
compile_error!("spargio-quic runs on Linux only: spargio is built on io_uring");

mod bridge;
mod config;
mod connection;
mod endpoint;
mod error;
#[cfg(feature = "h3")]
mod h3;
mod io_traits;
mod legacy;
mod metrics;
mod native;
mod options;
mod prometheus;
mod stream;
mod util;

pub use bridge::bridge_runtime_handle;
pub use config::{
    client_config_with_root_ca_pem, client_config_with_root_ca_pem_file,
    client_config_with_root_store, client_config_with_webpki_roots, server_config_from_der,
    server_config_from_pem, server_config_from_pem_files,
};
pub use connection::{LocalQuicConnection, QuicConnection, QuicSendConnection};
pub use endpoint::QuicEndpoint;
pub use error::{connection_error, quic_error, stream_error_code, QuicError};
#[cfg(feature = "h3")]
pub use h3::{H3BidiStream, H3Connection, H3OpenStreams, H3RecvStream, H3SendStream, H3_ALPN};
pub use legacy::{run, run_with_options, QuicBridge, QuicOptions};
pub use metrics::{
    bridge_runtime_context_enter_count, bridge_runtime_spawn_count,
    reset_bridge_runtime_context_enter_count, QuicMetrics, QuicMetricsSnapshot,
};
pub use native::{
    NativeProtoConnectionState, NativeProtoDriver, NativeProtoDriverLocal,
    NativeProtoDriverOptions, NativeProtoDriverProbe, NativeProtoDriverSend, NativeProtoEvent,
    NativeProtoFaultSpec, NativeProtoFaultStats, NativeProtoStats, NativeProtoTimerState,
    NativeProtoTransportTuning, NATIVE_EVENT_CAPACITY,
};
pub use options::{QuicBackend, QuicEndpointOptions};
pub use prometheus::prometheus_text;
pub use quinn;
pub use quinn_proto::{ApplicationClose, ConnectionError};
pub use stream::{QuicRecvStream, QuicSendStream};
