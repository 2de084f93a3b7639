//! Ingest: accept connections round-robin across the shards, receive each
//! connection's bytes, write them to a file per connection, fsync, and
//! report. The clients (in the same program) send a few hundred KiB each.
//!
//! ```text
//! cargo run --release -p spargio --example quickstart_ingest
//! ```

use spargio::fs::File;
use spargio::net::{TcpListener, TcpStream};

const CONNECTIONS: usize = 4;
const CHUNKS: usize = 64;
const CHUNK: usize = 4096;

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let dir = std::env::temp_dir().join(format!("spargio-ingest-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let out = dir.clone();
    let written = spargio::block_on(spargio::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        println!("ingesting on {addr} into {}", out.display());

        let h = handle.clone();
        let ingest = handle.spawn_stealable(async move {
            let mut files = Vec::new();
            for id in 0..CONNECTIONS {
                let (conn, _) = listener.accept_round_robin().await?;
                let path = out.join(format!("conn-{id}.bin"));
                let c = conn.clone();
                let h2 = h.clone();
                files.push(c.spawn_on_session(&h, async move {
                    let file = File::create(h2, &path).await?;
                    let (mut offset, mut buf) = (0u64, Vec::with_capacity(64 * 1024));
                    loop {
                        buf.clear();
                        let (n, back) = conn.recv_owned(buf).await?;
                        if n == 0 {
                            break;
                        }
                        let (res, back) = file.write_all_at_owned(offset, back).await;
                        res?;
                        offset += n as u64;
                        buf = back;
                    }
                    file.fsync().await?;
                    file.close().await?;
                    println!("  {} bytes -> {}", offset, path.display());
                    Ok::<_, std::io::Error>(offset)
                })?);
            }
            let mut total = 0;
            for f in files {
                total += f.await??;
            }
            Ok::<_, std::io::Error>(total)
        })?;

        let mut senders = Vec::new();
        for id in 0..CONNECTIONS {
            let h = handle.clone();
            senders.push(handle.spawn_stealable(async move {
                let stream = TcpStream::connect_socket_addr(&h, addr).await?;
                for i in 0..CHUNKS {
                    let chunk = vec![(id * CHUNKS + i) as u8; CHUNK];
                    stream.write_all_owned(chunk).await?;
                }
                stream.shutdown(std::net::Shutdown::Write).await
            })?);
        }
        for s in senders {
            s.await??;
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(ingest.await??)
    }))??;
    let expected = (CONNECTIONS * CHUNKS * CHUNK) as u64;
    assert_eq!(written, expected, "every byte landed on disk");
    println!("{CONNECTIONS} connections, {written} bytes written and fsynced");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
