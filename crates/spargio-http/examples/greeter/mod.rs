//! A `helloworld.Greeter` gRPC service for tonic, written by hand (no
//! `protoc`, no build script): the messages derive `prost::Message`
//! ([`proto`]), the server routes each method's path to tonic's
//! [`tonic::server::Grpc`] as generated code does ([`server`]), and the
//! client calls them through [`tonic::client::Grpc`] over
//! [`spargio_http::Client`] ([`client`]).
//!
//! Shared by `examples/grpc_greeter.rs` and `tests/http_grpc.rs` through
//! `#[path]`; each uses only part of it.
#![allow(dead_code)]

pub mod client;
pub mod proto;
pub mod server;

/// `SayHello`: one request, one reply.
pub const SAY_HELLO: &str = "/helloworld.Greeter/SayHello";
/// `SayHelloStream`: one request, `count` replies.
pub const SAY_HELLO_STREAM: &str = "/helloworld.Greeter/SayHelloStream";
