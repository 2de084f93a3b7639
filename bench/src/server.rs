//! What the `http_server` and `https_server` binaries share: the response,
//! the readiness line the scripts wait for, and the command line.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};

/// The body every request gets, on every side.
pub const BODY: &[u8] = b"Hello, world!";

/// The hyper service of both servers and both runtimes.
pub async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(BODY))))
}

/// Prints `ready <pid>`, which `scripts/http_bench.sh` waits for.
pub fn ready() {
    // `println!` flushes at the newline.
    println!("ready {}", std::process::id());
}

/// `<spargio|tokio> <port> [workers=2]`.
#[derive(Debug)]
pub struct ServerArgs {
    /// `spargio` or `tokio`.
    pub runtime: String,
    /// 127.0.0.1 and the port.
    pub addr: SocketAddr,
    /// Shards or worker threads.
    pub workers: usize,
}

impl ServerArgs {
    /// Parses the process arguments; `None` (after printing the usage of
    /// `bin`) when they do not fit.
    pub fn parse(bin: &str) -> Option<ServerArgs> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let parsed = (|| {
            let runtime = args.first()?.clone();
            if runtime != "spargio" && runtime != "tokio" {
                return None;
            }
            let port: u16 = args.get(1)?.parse().ok()?;
            let workers = match args.get(2) {
                None => 2,
                Some(w) => w.parse::<usize>().ok().filter(|&w| w > 0)?,
            };
            Some(ServerArgs {
                runtime,
                addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                workers,
            })
        })();
        if parsed.is_none() {
            eprintln!("usage: {bin} <spargio|tokio> <port> [workers=2]");
        }
        parsed
    }
}
