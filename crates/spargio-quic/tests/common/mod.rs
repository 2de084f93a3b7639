//! Independent QUIC peers for the interop tests, written apart from the
//! crate they test.
//!
//! - [`certs`]: a CA and a `localhost` leaf (rcgen) and the rustls/quinn
//!   configs made from them; the spargio side builds its own from the
//!   same DER.
//! - [`data`]: [`pattern`] and [`checksum`] (FNV-1a 64), the same in Rust
//!   and in the Python peers.
//! - [`peers`]: [`QuinnServer`] (quinn 0.11 on its own tokio runtime) with
//!   one [`Behaviour`] per test, recording what it saw ([`Observed`]);
//!   [`client`]: [`QuinnClient`], one async helper per scenario.
//! - [`aioquic`]: Python aioquic as server and client (child processes).
//! - [`mute`]: the socket wrapper behind `Behaviour::Silent` and
//!   [`QuinnServer::mute`].
//!
//! Every wait in here is bounded by [`HANG`], a "must not hang" bound,
//! never a performance assertion.
#![allow(dead_code, unused_imports)]

use std::time::Duration;

pub mod aioquic;
pub mod certs;
pub mod client;
pub mod data;
pub mod mute;
pub mod peers;

pub use aioquic::{run_aioquic_client, AioquicMode, AioquicServer};
pub use certs::{PemFiles, TestCerts, ALPN, SERVER_NAME};
pub use client::{conn_err, spawn_bounded, ClientOptions, QuinnClient};
pub use data::{checksum, pattern, Checksum};
pub use peers::{
    peer_runtime, Behaviour, Closed, Observed, QuinnServer, ServerOptions, StreamEnd, StreamKind,
    StreamRecord,
};

/// Generous bound for "this must not hang". Never a performance assertion.
pub const HANG: Duration = Duration::from_secs(60);
