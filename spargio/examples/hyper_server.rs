//! A hyper 1.x HTTP/1.1 server on spargio.
//!
//! hyper drives connections through tokio's I/O traits; `spargio::io::Compat`
//! provides them over a spargio `TcpStream` (feature `tokio-io`), wrapped in
//! hyper-util's `TokioIo`. Each connection runs as a spargio task pinned to
//! its session shard, and hyper's executor spawns onto spargio too.
//!
//! ```text
//! cargo run --release -p spargio --features tokio-io --example hyper_server            # serves 8 requests from its own client, then exits
//! cargo run --release -p spargio --features tokio-io --example hyper_server -- serve 8080   # serves until killed; try `curl localhost:8080/hello`
//! ```

use std::convert::Infallible;
use std::future::Future;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use spargio::io::Compat;
use spargio::net::{TcpListener, TcpStream};
use spargio::RuntimeHandle;

async fn hello(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let shard = spargio::ShardCtx::current().map_or(usize::MAX, |c| c.shard_id());
    let body = format!(
        "hello from spargio shard {shard}: {} {}\n",
        req.method(),
        req.uri()
    );
    Ok(Response::new(Full::new(Bytes::from(body))))
}

/// hyper's executor: spawns onto spargio (stealable).
#[derive(Clone)]
struct SpargioExecutor(RuntimeHandle);

impl<F> hyper::rt::Executor<F> for SpargioExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        let _ = self.0.spawn_stealable(fut);
    }
}

async fn serve(
    handle: RuntimeHandle,
    listener: TcpListener,
    connections: Option<usize>,
) -> std::io::Result<()> {
    let mut served = 0;
    while connections.is_none_or(|n| served < n) {
        let (stream, _peer) = listener.accept_round_robin().await?;
        stream.set_nodelay(true)?;
        let conn = stream.clone();
        let _executor = SpargioExecutor(handle.clone());
        conn.spawn_on_session(&handle, async move {
            let io = TokioIo::new(Compat::new(stream));
            if let Err(e) = http1::Builder::new()
                .serve_connection(io, service_fn(hello))
                .await
            {
                eprintln!("connection error: {e:?}");
            }
        })
        .map_err(std::io::Error::other)?;
        served += 1;
    }
    Ok(())
}

/// A minimal HTTP/1.1 client over a raw spargio stream.
async fn get(
    handle: &RuntimeHandle,
    addr: std::net::SocketAddr,
    path: &str,
) -> std::io::Result<String> {
    let stream = TcpStream::connect_socket_addr(handle, addr).await?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await?;
    let mut response = Vec::new();
    loop {
        let chunk = stream.recv(4096).await?;
        if chunk.is_empty() {
            break;
        }
        response.extend_from_slice(&chunk);
    }
    String::from_utf8(response).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let serve_forever = args.first().map(String::as_str) == Some("serve");
    let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    spargio::block_on(spargio::run(move |handle| async move {
        let listener = TcpListener::bind(&handle, ("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        if serve_forever {
            println!("listening on http://{addr}");
            serve(handle, listener, None).await?;
            return Ok(());
        }
        const REQUESTS: usize = 8;
        let server = handle.spawn_stealable(serve(handle.clone(), listener, Some(REQUESTS)))?;
        for i in 0..REQUESTS {
            let response = get(&handle, addr, &format!("/hello/{i}")).await?;
            let status = response.lines().next().unwrap_or_default();
            assert!(status.starts_with("HTTP/1.1 200"), "{status}");
            assert!(response.contains(&format!("GET /hello/{i}")));
            println!("{status} | {}", response.lines().last().unwrap_or_default());
        }
        server.await??;
        println!("{REQUESTS} requests served by hyper on spargio");
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }))?
}
