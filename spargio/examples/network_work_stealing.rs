//! Work stealing behind network I/O: one connection is hot (it sends many
//! requests that each need CPU work), the others are light. Each request is
//! handled by a stealable task, so the shard that owns the hot connection
//! does not become the bottleneck: each piece of CPU work is steered, when
//! spawned, to the least-loaded shard (and stolen by an idle shard if it
//! waits), while the connection's I/O stays on its session shard. The stats
//! at the end show where the work ran.
//!
//! ```text
//! cargo run --release -p spargio --example network_work_stealing
//! ```

use spargio::net::{TcpListener, TcpStream};

const CONNECTIONS: usize = 4;
const HOT_REQUESTS: u32 = 400;
const LIGHT_REQUESTS: u32 = 40;

/// CPU work standing in for parsing, hashing, compressing...
fn work(seed: u32) -> u32 {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
    }
    x
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let rt = spargio::Runtime::builder().build()?;
    let handle = rt.handle();
    let h = handle.clone();
    let answered = spargio::block_on(handle.spawn_stealable(async move {
        let listener = TcpListener::bind(&h, "127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let h2 = h.clone();
        let server = h.spawn_stealable(async move {
            for _ in 0..CONNECTIONS {
                let (conn, _) = listener.accept().await?;
                let h3 = h2.clone();
                let c = conn.clone();
                c.spawn_on_session(&h2, async move {
                    let mut req = [0u8; 4];
                    while conn.read_exact(&mut req).await.is_ok() {
                        let seed = u32::from_be_bytes(req);
                        // The CPU part runs wherever a shard is free.
                        let answer = h3
                            .spawn_stealable(async move { work(seed) })
                            .unwrap()
                            .await
                            .unwrap();
                        if conn.write_all(&answer.to_be_bytes()).await.is_err() {
                            break;
                        }
                    }
                })?;
            }
            Ok::<_, std::io::Error>(())
        })?;
        let mut clients = Vec::new();
        for id in 0..CONNECTIONS {
            let h = h.clone();
            clients.push(h.clone().spawn_stealable(async move {
                let conn = TcpStream::connect_socket_addr(&h, addr).await?;
                let n = if id == 0 {
                    HOT_REQUESTS
                } else {
                    LIGHT_REQUESTS
                };
                // Pipeline: all requests first, then the answers, in order.
                let writer = conn.clone();
                let send = h
                    .spawn_stealable(async move {
                        for i in 0..n {
                            writer
                                .write_all(&(id as u32 * 10_000 + i).to_be_bytes())
                                .await?;
                        }
                        Ok::<_, std::io::Error>(())
                    })
                    .unwrap();
                for i in 0..n {
                    let mut ans = [0u8; 4];
                    conn.read_exact(&mut ans).await?;
                    assert_eq!(u32::from_be_bytes(ans), work(id as u32 * 10_000 + i));
                }
                send.await.unwrap()?;
                Ok::<_, std::io::Error>(n)
            })?);
        }
        let mut total = 0;
        for c in clients {
            total += c.await??;
        }
        server.await??;
        Ok::<_, std::io::Error>(total)
    })?)??;
    let stats = handle.stats_snapshot();
    println!(
        "{answered} requests answered over {CONNECTIONS} connections (one hot) on {} shards",
        handle.shard_count()
    );
    for (i, s) in stats.shards.iter().enumerate() {
        println!(
            "  shard {i}: {} stealable tasks run, {} stolen from other shards",
            s.counters.stealable_executed, s.counters.stealable_stolen
        );
    }
    Ok(())
}
