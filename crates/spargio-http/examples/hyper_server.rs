//! A hyper service (`service_fn`) on spargio: HTTP/1.1 and HTTP/2 on one
//! port through `spargio_http::serve`.
//!
//! ```text
//! cargo run --release -p spargio-http --example hyper_server                # serves 8 requests from its own client, then exits
//! cargo run --release -p spargio-http --example hyper_server -- serve 8080  # serves until killed; try `curl localhost:8080/hello`
//! ```
//!
//! To drive hyper's connection builders yourself instead, the pieces are
//! in `spargio_http::rt`: `Executor`, `Timer` and `Io` (hyper's I/O traits
//! over a spargio stream).

use std::convert::Infallible;
use std::future::IntoFuture;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use spargio_http::client::body_bytes;

async fn hello(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let shard = spargio::ShardCtx::current().map_or(usize::MAX, |c| c.shard_id());
    let body = format!(
        "hello from spargio shard {shard}: {} {} over {:?}\n",
        req.method(),
        req.uri().path(),
        req.version()
    );
    Ok(Response::new(Full::new(Bytes::from(body))))
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let serve_forever = args.first().map(String::as_str) == Some("serve");
    let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    spargio::block_on(spargio::run(move |handle| async move {
        let listener = spargio::net::TcpListener::bind(&handle, ("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let service = spargio_http::hyper_service(service_fn(hello));
        if serve_forever {
            println!(
                "listening on http://{addr} (backend: {:?})",
                handle.backend()
            );
            spargio_http::serve(listener, service).await?;
            return Ok(());
        }
        let stop = spargio::CancellationToken::new();
        let stopped = stop.clone();
        let server = handle.spawn_stealable(
            spargio_http::serve(listener, service)
                .with_graceful_shutdown(async move { stopped.cancelled().await })
                .into_future(),
        )?;
        const REQUESTS: usize = 8;
        let h1 = spargio_http::Client::new(&handle);
        let h2 = spargio_http::Client::builder(&handle)
            .http2_prior_knowledge()
            .build();
        for i in 0..REQUESTS {
            let client = if i % 2 == 0 { &h1 } else { &h2 };
            let response = client.get(format!("http://{addr}/hello/{i}")).await?;
            assert_eq!(response.status(), 200);
            let body = body_bytes(response).await?;
            let body = String::from_utf8_lossy(&body);
            assert!(body.contains(&format!("GET /hello/{i}")), "{body}");
            print!("{body}");
        }
        stop.cancel();
        server.await??;
        println!(
            "{REQUESTS} requests served by hyper on spargio (backend: {:?})",
            handle.backend()
        );
        Ok::<_, BoxError>(())
    }))?
}
