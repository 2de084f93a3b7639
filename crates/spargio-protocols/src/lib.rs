//! # spargio-protocols
//!
//! Bridges for protocol code that is not (yet) written for [spargio]:
//!
//! * **Blocking helpers.** [`tls_blocking`], [`ws_blocking`] and
//!   [`quic_blocking`] run a caller's closure (a blocking TLS, WebSocket or
//!   QUIC client from the wider ecosystem, say) on the runtime's blocking
//!   pool and give its result to async code. `*_with_options` add a
//!   [`BlockingOptions`] timeout. The three differ only in name: the name
//!   says what the closure does, for readers and for stack traces.
//! * **A `futures_io` TCP stream.** [`io_compat::FuturesTcpStream`] is
//!   spargio's TCP stream seen through `futures_io::{AsyncRead,
//!   AsyncWrite}`: the transport under `spargio-tls` and `spargio-ws`.
//!
//! For TLS and WebSockets prefer the async crates (`spargio-tls`,
//! `spargio-ws`): a blocking helper holds a pool thread for the whole call.
//!
//! ```
//! # spargio::block_on(spargio::run(|handle| async move {
//! let answer = spargio_protocols::tls_blocking(&handle, || {
//!     // a blocking client call would go here
//!     6 * 7
//! })
//! .await
//! .unwrap();
//! assert_eq!(answer, 42);
//! # })).unwrap();
//! ```
//!
//! [spargio]: https://docs.rs/spargio

#![warn(
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

#[cfg(not(target_os = "linux"))]
compile_error!("spargio-protocols runs on Linux only: it is built on spargio's io_uring runtime");

mod blocking;
pub mod io_compat;

pub use blocking::{
    quic_blocking, quic_blocking_with_options, tls_blocking, tls_blocking_with_options,
    ws_blocking, ws_blocking_with_options, BlockingOptions,
};

/// The README's code blocks, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
