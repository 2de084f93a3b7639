//! The messages, as `prost-build` would generate them from
//!
//! ```proto
//! message HelloRequest { string name = 1; uint32 count = 2; }
//! message HelloReply { string message = 1; }
//! ```

/// A greeting request.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct HelloRequest {
    /// Who to greet; empty is refused with `INVALID_ARGUMENT`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `SayHelloStream`: how many replies to send.
    #[prost(uint32, tag = "2")]
    pub count: u32,
}

/// A greeting.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct HelloReply {
    /// The greeting.
    #[prost(string, tag = "1")]
    pub message: String,
}
