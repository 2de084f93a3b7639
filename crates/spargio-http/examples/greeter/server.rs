//! The server side: a tower service that routes each gRPC method's path
//! to tonic's codec and framing ([`tonic::server::Grpc`]), as
//! `tonic-build` generates it. Serve it with [`spargio_http::serve`].

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::task::{Context, Poll};

use tonic::codegen::tokio_stream::{self, Iter};
use tonic::codegen::{http, BoxFuture, Service, StdError};
use tonic::server::{Grpc, ServerStreamingService, UnaryService};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

use super::proto::{HelloReply, HelloRequest};
use super::{SAY_HELLO, SAY_HELLO_STREAM};

/// The most replies one `SayHelloStream` call may ask for.
pub const MAX_STREAM_REPLIES: u32 = 10_000;

/// The greeting for `name`, refusing an empty one.
fn greet(name: &str) -> Result<HelloReply, Status> {
    if name.is_empty() {
        return Err(Status::invalid_argument("name is empty"));
    }
    Ok(HelloReply {
        message: format!("Hello, {name}!"),
    })
}

/// The greeter, as a tower service: `SayHello` answers
/// `Hello, {name}!`; `SayHelloStream` answers `count` times,
/// `Hello, {name}! ({i}/{count})`; an empty name is `INVALID_ARGUMENT`,
/// an unknown method `UNIMPLEMENTED`.
#[derive(Clone, Copy, Debug, Default)]
pub struct GreeterServer;

impl<B> Service<http::Request<B>> for GreeterServer
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        match req.uri().path() {
            SAY_HELLO => Box::pin(async move {
                let mut grpc = Grpc::new(ProstCodec::default());
                Ok(grpc.unary(SayHello, req).await)
            }),
            SAY_HELLO_STREAM => Box::pin(async move {
                let mut grpc = Grpc::new(ProstCodec::default());
                Ok(grpc.server_streaming(SayHelloStream, req).await)
            }),
            _ => Box::pin(ready(Ok(Status::unimplemented("").into_http()))),
        }
    }
}

struct SayHello;

impl UnaryService<HelloRequest> for SayHello {
    type Response = HelloReply;
    type Future = Ready<Result<Response<HelloReply>, Status>>;

    fn call(&mut self, request: Request<HelloRequest>) -> Self::Future {
        ready(greet(&request.get_ref().name).map(Response::new))
    }
}

struct SayHelloStream;

type Replies = Iter<std::vec::IntoIter<Result<HelloReply, Status>>>;

impl ServerStreamingService<HelloRequest> for SayHelloStream {
    type Response = HelloReply;
    type ResponseStream = Replies;
    type Future = Ready<Result<Response<Replies>, Status>>;

    fn call(&mut self, request: Request<HelloRequest>) -> Self::Future {
        let HelloRequest { name, count } = request.into_inner();
        ready(replies(&name, count).map(|r| Response::new(tokio_stream::iter(r))))
    }
}

fn replies(name: &str, count: u32) -> Result<Vec<Result<HelloReply, Status>>, Status> {
    let hello = greet(name)?;
    if count > MAX_STREAM_REPLIES {
        return Err(Status::invalid_argument(format!(
            "count {count} is over {MAX_STREAM_REPLIES}"
        )));
    }
    Ok((1..=count)
        .map(|i| {
            Ok(HelloReply {
                message: format!("{} ({i}/{count})", hello.message),
            })
        })
        .collect())
}
