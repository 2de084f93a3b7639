//! A small file server: clients ask for a file by name (one line), the
//! server streams it back from disk, reading with `File::read_at_into` and
//! sending with owned buffers (the same buffer goes from the file to the
//! socket and back, no copy). Clients check every byte.
//!
//! ```text
//! cargo run --release -p spargio --example quickstart_file_server
//! ```

use std::path::PathBuf;

use spargio::fs::File;
use spargio::net::{TcpListener, TcpStream};
use spargio::RuntimeHandle;

const FILES: usize = 6;

fn content(i: usize) -> Vec<u8> {
    (0..(100_000 + i * 37_000))
        .map(|b| (b * (i + 3)) as u8)
        .collect()
}

async fn serve(h: RuntimeHandle, conn: TcpStream, root: PathBuf) -> std::io::Result<u64> {
    // Request: the file name, then '\n'.
    let mut name = Vec::new();
    loop {
        let byte = conn.recv(1).await?;
        match byte.first() {
            None => return Ok(0),
            Some(b'\n') => break,
            Some(&b) => name.push(b),
        }
    }
    let name = String::from_utf8_lossy(&name).into_owned();
    let file = File::open(&h, root.join(&name)).await?;
    let len = file.metadata().await?.len();
    conn.write_all(&len.to_be_bytes()).await?;
    let (mut offset, mut buf) = (0u64, Vec::with_capacity(64 * 1024));
    while offset < len {
        buf.clear();
        let (n, back) = file.read_at_into(offset, buf).await;
        let n = n?;
        if n == 0 {
            break;
        }
        let back = conn.write_all_owned(back).await?;
        offset += n as u64;
        buf = back;
    }
    Ok(offset)
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let root = std::env::temp_dir().join(format!("spargio-files-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    for i in 0..FILES {
        std::fs::write(root.join(format!("file-{i}")), content(i))?;
    }
    let served_root = root.clone();
    let total = spargio::block_on(spargio::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        println!("serving {} on {addr}", served_root.display());
        let h = handle.clone();
        let server = handle.spawn_stealable(async move {
            for _ in 0..FILES {
                let (conn, _) = listener.accept_round_robin().await?;
                let (h2, root) = (h.clone(), served_root.clone());
                let c = conn.clone();
                c.spawn_on_session(&h, async move {
                    if let Err(e) = serve(h2, conn, root).await {
                        eprintln!("  request failed: {e}");
                    }
                })?;
            }
            Ok::<_, std::io::Error>(())
        })?;
        let mut fetches = Vec::new();
        for i in 0..FILES {
            let h = handle.clone();
            fetches.push(handle.spawn_stealable(async move {
                let conn = TcpStream::connect_socket_addr(&h, addr).await?;
                conn.write_all(format!("file-{i}\n").as_bytes()).await?;
                let mut len = [0u8; 8];
                conn.read_exact(&mut len).await?;
                let len = u64::from_be_bytes(len) as usize;
                let body = conn.read_exact_owned(Vec::with_capacity(len)).await?;
                assert_eq!(body, content(i), "file-{i} arrived intact");
                println!("  fetched file-{i}: {len} bytes");
                Ok::<_, std::io::Error>(len)
            })?);
        }
        let mut total = 0;
        for f in fetches {
            total += f.await??;
        }
        server.await??;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(total)
    }))??;
    println!("{FILES} files, {total} bytes served and verified");
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
