//! The client side: tonic's [`tonic::client::Grpc`] over a
//! [`spargio_http::grpc::Channel`], as a `tonic-build` client wraps a
//! channel: HTTP/2 by prior knowledge for plain `http://`
//! ([`GreeterClient::new`]), or over any client you built, e.g. one with
//! TLS for `https://` ([`GreeterClient::with_client`]).

use spargio::RuntimeHandle;
use spargio_http::grpc::Channel;
use tonic::client::Grpc;
use tonic::codegen::http::uri::{PathAndQuery, Uri};
use tonic::Status;
use tonic_prost::ProstCodec;

use super::proto::{HelloReply, HelloRequest};
use super::{SAY_HELLO, SAY_HELLO_STREAM};

/// A greeter client for one server (clones share its connection).
#[derive(Clone, Debug)]
pub struct GreeterClient {
    grpc: Grpc<Channel>,
}

impl GreeterClient {
    /// A client for the server at `origin` (`http://host:port`), over
    /// plain TCP (h2c).
    pub fn new(handle: &RuntimeHandle, origin: Uri) -> GreeterClient {
        GreeterClient {
            grpc: Grpc::with_origin(Channel::h2c(handle), origin),
        }
    }

    /// A client for the server at `origin` over `http`: for TLS, a client
    /// built with `.tls(connector)` and an `https://host:port` origin
    /// (ALPN picks HTTP/2).
    pub fn with_client(
        http: spargio_http::Client<tonic::body::Body>,
        origin: Uri,
    ) -> GreeterClient {
        GreeterClient {
            grpc: Grpc::with_origin(Channel::new(http), origin),
        }
    }

    /// `SayHello`.
    pub async fn say_hello(&mut self, name: &str) -> Result<HelloReply, Status> {
        self.ready().await?;
        let request = HelloRequest {
            name: name.to_owned(),
            count: 0,
        };
        let path = PathAndQuery::from_static(SAY_HELLO);
        let response = self
            .grpc
            .unary(tonic::Request::new(request), path, ProstCodec::default())
            .await?;
        Ok(response.into_inner())
    }

    /// `SayHelloStream`: every reply, in order.
    pub async fn say_hello_stream(
        &mut self,
        name: &str,
        count: u32,
    ) -> Result<Vec<HelloReply>, Status> {
        self.ready().await?;
        let request = HelloRequest {
            name: name.to_owned(),
            count,
        };
        let path = PathAndQuery::from_static(SAY_HELLO_STREAM);
        let mut stream = self
            .grpc
            .server_streaming(tonic::Request::new(request), path, ProstCodec::default())
            .await?
            .into_inner();
        let mut replies = Vec::new();
        while let Some(reply) = stream.message().await? {
            replies.push(reply);
        }
        Ok(replies)
    }

    async fn ready(&mut self) -> Result<(), Status> {
        self.grpc
            .ready()
            .await
            .map_err(|e| Status::unknown(format!("service was not ready: {e}")))
    }
}
