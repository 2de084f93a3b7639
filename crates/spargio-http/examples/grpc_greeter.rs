//! A tonic gRPC greeter served by spargio-http, and called by tonic's
//! client over spargio-http's client (HTTP/2 by prior knowledge). The
//! service is written by hand, without `protoc` (`examples/greeter/`).
//!
//! ```text
//! cargo run -p spargio-http --example grpc_greeter                # serves on a free port, calls SayHello 8 times and SayHelloStream once, exits 0
//! cargo run -p spargio-http --example grpc_greeter -- 100         # the same with 100 calls
//! cargo run -p spargio-http --example grpc_greeter -- serve 50051 # serves until killed
//! ```
//!
//! With `serve`, any gRPC client can call it, e.g. `grpcurl -plaintext
//! -d '{"name":"you"}' localhost:50051 helloworld.Greeter/SayHello` given
//! the proto in `examples/greeter/proto.rs`.

#[path = "greeter/mod.rs"]
mod greeter;

use std::error::Error;
use std::future::IntoFuture;

use greeter::client::GreeterClient;
use greeter::server::GreeterServer;
use spargio::net::TcpListener;
use spargio::{CancellationToken, RuntimeHandle};

#[spargio::main]
async fn main(handle: RuntimeHandle) -> Result<(), Box<dyn Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [serve, port] = args.as_slice() {
        if serve == "serve" {
            let listener = TcpListener::bind(&handle, ("0.0.0.0", port.parse::<u16>()?)).await?;
            println!("serving helloworld.Greeter on {}", listener.local_addr()?);
            spargio_http::serve(listener, GreeterServer).await?;
            return Ok(());
        }
    }
    let calls: usize = match args.first() {
        Some(n) => n.parse()?,
        None => 8,
    };

    let listener = TcpListener::bind(&handle, "127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let stop = CancellationToken::new();
    let signal = stop.clone();
    let server = handle.spawn_stealable(
        spargio_http::serve(listener, GreeterServer)
            .with_graceful_shutdown(async move { signal.cancelled().await })
            .into_future(),
    )?;

    let mut client = GreeterClient::new(&handle, format!("http://{addr}").parse()?);
    for i in 0..calls {
        let reply = client.say_hello(&format!("spargio {i}")).await?;
        assert_eq!(reply.message, format!("Hello, spargio {i}!"));
    }
    let replies = client.say_hello_stream("stream", 3).await?;
    let status = client
        .say_hello("")
        .await
        .expect_err("an empty name is refused");
    println!(
        "{calls} SayHello calls answered; SayHelloStream sent {} replies, the last {:?}; an empty name: {:?} {:?}",
        replies.len(),
        replies.last().map(|r| r.message.as_str()),
        status.code(),
        status.message(),
    );

    drop(client);
    stop.cancel();
    server.await??;
    Ok(())
}
