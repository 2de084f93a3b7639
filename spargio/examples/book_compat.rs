//! The guide's section on `io::Compat` (`book/src/io.md`): tokio's and
//! futures' poll-based I/O traits over spargio streams, for libraries
//! written against them. Needs the `tokio-io` feature.
//!
//! ```text
//! cargo run -p spargio --features tokio-io --example book_compat
//! ```

use std::io;

use spargio::io::Compat;
use spargio::net::{TcpListener, TcpStream, UnixStream};

// ANCHOR: tokio
/// An echo server written against tokio's traits, run on spargio.
async fn tokio_style_echo(stream: TcpStream) -> io::Result<u64> {
    use tokio::io::AsyncWriteExt;

    let (mut reader, mut writer) = tokio::io::split(Compat::new(stream));
    let copied = tokio::io::copy(&mut reader, &mut writer).await?;
    // Writes are accepted at once and sent behind; shutdown flushes them.
    writer.shutdown().await?;
    Ok(copied)
}

async fn tokio_style_client(stream: TcpStream) -> io::Result<Vec<String>> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    let mut stream = tokio::io::BufReader::new(Compat::new(stream));
    for i in 0..3 {
        stream.write_all(format!("line {i}\n").as_bytes()).await?;
    }
    stream.shutdown().await?;
    let mut lines = stream.lines();
    let mut echoed = Vec::new();
    while let Some(line) = lines.next_line().await? {
        echoed.push(line);
    }
    Ok(echoed)
}
// ANCHOR_END: tokio

// ANCHOR: futures
async fn futures_style(handle: &spargio::RuntimeHandle) -> io::Result<Vec<u8>> {
    use futures_util::io::{AsyncReadExt, AsyncWriteExt};

    let (a, b) = UnixStream::pair(handle)?;
    let (mut a, mut b) = (Compat::new(a), Compat::new(b));
    a.write_all(b"through futures-io").await?;
    a.close().await?;
    let mut got = Vec::new();
    b.read_to_end(&mut got).await?;
    Ok(got)
}
// ANCHOR_END: futures

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    spargio::block_on(spargio::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let h = handle.clone();
        let server = handle.spawn_stealable(async move {
            let (conn, _) = listener.accept().await?;
            let task_conn = conn.clone();
            conn.spawn_on_session(&h, tokio_style_echo(task_conn))?
                .await?
        })?;
        let client = TcpStream::connect_socket_addr(&handle, addr).await?;
        let lines = tokio_style_client(client).await?;
        assert_eq!(lines, ["line 0", "line 1", "line 2"]);
        assert_eq!(server.await??, 21);

        assert_eq!(futures_style(&handle).await?, b"through futures-io");
        Ok::<_, io::Error>(())
    }))??;
    println!("tokio-io and futures-io checked");
    Ok(())
}
