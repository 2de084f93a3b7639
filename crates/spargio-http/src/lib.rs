//! # spargio-http
//!
//! HTTP for [spargio]: serve axum, hyper and tonic over HTTP/1.1 and
//! HTTP/2 (plain or TLS), and call other services with a pooled hyper
//! client, on the runtime's io_uring (or epoll) streams.
//!
//! * [`serve`]: a server for any tower service (an `axum::Router`,
//!   tonic's `Routes`, a hyper service through [`hyper_service`]), with
//!   limits, timeouts and graceful shutdown on by default
//!   ([module docs](server)). gRPC runs over h2c or over TLS
//!   ([`Serve::tls`]: ALPN `h2`), and its calls' deadlines
//!   (`grpc-timeout`) are enforced: a late handler is dropped and the
//!   client told `DEADLINE_EXCEEDED`.
//! * [`Client`]: hyper-util's pooled client over spargio TCP and TLS
//!   connections, HTTP/1.1 and HTTP/2 ([module docs](client)).
//! * `grpc::Channel` (feature `grpc`): the client as a tonic channel, for
//!   generated gRPC clients, with connect failures reported as
//!   `UNAVAILABLE` and deadlines enforced as tonic's own channel enforces
//!   them (`CANCELLED` "Timeout expired", the stream reset).
//! * HTTP/3 (feature `http3`): `serve_h3` serves the same service on a
//!   `spargio_quic::QuicEndpoint`, every connection on its own shard;
//!   `ClientBuilder::http3_prior_knowledge` builds a pooled HTTP/3 client;
//!   [`layer::AltSvcLayer`] advertises HTTP/3 on the TCP server.
//! * [`ws`]: WebSocket upgrades in axum handlers (axum's own extractor
//!   needs Tokio).
//! * [`rt`]: hyper's runtime traits (executor, timer, I/O) on spargio,
//!   for code that drives hyper's connection builders itself.
//!
//! [spargio]: https://docs.rs/spargio

#![warn(
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

pub mod client;
#[cfg(feature = "grpc")]
pub mod grpc;
mod grpc_timeout;
#[cfg(feature = "http3")]
mod h3_body;
pub mod layer;
pub mod rt;
pub mod server;
mod timeout;
#[cfg(feature = "ws")]
pub mod ws;

pub use client::{Client, ClientBuilder};

#[cfg(feature = "axum")]
pub use server::IncomingStream;
pub use server::{
    hyper_service, serve, BoxError, Connection, Connections, HyperService, IntoConnMaker, Listener,
    PeerAddr, Serve, UnixPeerCred, WithGracefulShutdown,
};
#[cfg(feature = "http3")]
pub use server::{serve_h3, H3Body, ServeH3};

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
