//! An echo server and its clients on one runtime.
//!
//! The server accepts connections round-robin across the shards and runs
//! each connection's loop pinned to its session shard (every receive and
//! send then goes straight into that shard's ring). Eight clients connect,
//! send 64 messages each, check every echo, and hang up.
//!
//! ```text
//! cargo run --release -p spargio --example quickstart_network
//! ```

use std::net::SocketAddr;

use spargio::net::{TcpListener, TcpStream};

const CLIENTS: usize = 8;
const MESSAGES: usize = 64;

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let report = spargio::block_on(spargio::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await?;
        let addr: SocketAddr = listener.local_addr()?;
        println!("echo server on {addr}");

        let h = handle.clone();
        let server = handle.spawn_stealable(async move {
            for _ in 0..CLIENTS {
                let (conn, peer) = listener.accept_round_robin().await?;
                let session = conn.session_shard();
                let c = conn.clone();
                c.spawn_on_session(&h, async move {
                    let mut buf = Vec::with_capacity(4096);
                    loop {
                        // Echo with one buffer: `*_owned` hands it back
                        // on success, and on error the loop ends anyway.
                        let back = match conn.recv_owned(buf).await {
                            Ok((0, _)) | Err(_) => break,
                            Ok((_, back)) => back,
                        };
                        match conn.write_all_owned(back).await {
                            Ok(back) => buf = back,
                            Err(_) => break,
                        }
                        buf.clear();
                    }
                })?;
                println!("  accepted {peer} on shard {session}");
            }
            Ok::<_, std::io::Error>(())
        })?;

        let mut clients = Vec::new();
        for id in 0..CLIENTS {
            let h = handle.clone();
            clients.push(handle.spawn_stealable(async move {
                let stream = TcpStream::connect_socket_addr(&h, addr).await?;
                stream.set_nodelay(true)?;
                for i in 0..MESSAGES {
                    let msg = format!("client {id} message {i}");
                    stream.write_all(msg.as_bytes()).await?;
                    let echo = stream.read_exact_owned(vec![0u8; msg.len()]).await?;
                    assert_eq!(echo, msg.as_bytes());
                }
                stream.shutdown(std::net::Shutdown::Write).await?;
                Ok::<_, std::io::Error>(MESSAGES)
            })?);
        }
        let mut echoed = 0;
        for c in clients {
            echoed += c.await??;
        }
        server.await??;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(echoed)
    }))??;
    println!("{CLIENTS} clients, {report} messages echoed and checked");
    Ok(())
}
