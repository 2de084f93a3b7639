//! A TCP service that shuts down gracefully on SIGTERM or SIGINT: it stops
//! accepting, lets every request in flight finish, and exits 0.
//!
//! ```text
//! cargo run -p spargio-signal --example graceful_shutdown [port]
//! ```
//!
//! Each request is one line; the answer, `done <line>`, comes after 300 ms
//! of "work". Prints `listening <addr>` once it accepts, and `drained <n>`
//! when it stops; logs each connection on stderr.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use spargio::net::{TcpListener, TcpStream};
use spargio::{RuntimeHandle, TaskGroup};

// ANCHOR: serve
/// What the accept loop waits for next.
enum Next {
    Connection(io::Result<(TcpStream, std::net::SocketAddr)>),
    Stop(io::Result<i32>),
}

async fn serve(handle: RuntimeHandle, port: u16) -> io::Result<usize> {
    // Subscribe before accepting: a SIGTERM from now on is ours.
    let mut stop = spargio_signal::signal(&handle, &[libc::SIGTERM, libc::SIGINT])?;
    let listener = TcpListener::bind(&handle, ("127.0.0.1", port)).await?;
    println!("listening {}", listener.local_addr()?);
    let requests = TaskGroup::new(&handle);
    let mut served = 0;
    loop {
        let next = {
            let mut accept = pin!(listener.accept());
            let mut signal = pin!(stop.recv());
            poll_fn(|cx| {
                if let Poll::Ready(sig) = signal.as_mut().poll(cx) {
                    return Poll::Ready(Next::Stop(sig));
                }
                accept.as_mut().poll(cx).map(Next::Connection)
            })
            .await
        };
        match next {
            Next::Connection(Ok((stream, peer))) => {
                eprintln!("accepted {peer}");
                served += 1;
                let conn = stream.clone();
                // In the group, so the shutdown below can wait for it.
                requests
                    .spawn_with_placement(
                        spargio::TaskPlacement::Pinned(conn.session_shard()),
                        answer(stream),
                    )
                    .map_err(io::Error::other)?;
            }
            Next::Connection(Err(e)) => eprintln!("accept: {e}"),
            Next::Stop(sig) => {
                eprintln!(
                    "signal {}: draining {} request(s)",
                    sig?,
                    requests.running()
                );
                break;
            }
        }
    }
    // No new connections (the listener closes here); the ones in flight
    // finish.
    drop(listener);
    requests.wait().await;
    Ok(served)
}

/// Reads one line and answers it after the "work".
async fn answer(stream: TcpStream) {
    let mut line = Vec::new();
    while !line.ends_with(b"\n") {
        match stream.recv(256).await {
            Ok(chunk) if !chunk.is_empty() => line.extend_from_slice(&chunk),
            _ => return,
        }
    }
    spargio::time::sleep(Duration::from_millis(300)).await;
    let mut reply = b"done ".to_vec();
    reply.extend_from_slice(&line);
    let _ = stream.write_all_owned(reply).await;
}
// ANCHOR_END: serve

/// Serves on `port` (0: any) until SIGTERM or SIGINT; returns how many
/// connections it served.
pub fn run(port: u16) -> io::Result<usize> {
    let served = spargio::block_on(spargio::run(move |handle| serve(handle, port)))
        .map_err(io::Error::other)??;
    println!("drained {served}");
    Ok(served)
}

fn main() -> io::Result<()> {
    let port = std::env::args()
        .nth(1)
        .map(|p| p.parse().expect("usage: graceful_shutdown [port]"))
        .unwrap_or(0);
    run(port).map(drop)
}
