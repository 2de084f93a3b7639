//! The guide's chapter on the I/O surface (`book/src/io.md`): owned
//! buffers on files, a line echo server on session shards with multishot
//! receive, and the `spargio::io` traits.
//!
//! ```text
//! cargo run -p spargio --example book_io
//! ```

use std::io;

use spargio::buf::IoBuf;
use spargio::fs::OpenOptions;
use spargio::io::framed::LengthDelimited;
use spargio::io::{split, AsyncWrite, AsyncWriteExt, BufReader};
use spargio::net::{TcpListener, TcpStream, UnixStream};
use spargio::RuntimeHandle;

// ANCHOR: file
async fn files(handle: &RuntimeHandle) -> io::Result<()> {
    let path = std::env::temp_dir().join(format!("spargio-book-io-{}", std::process::id()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(handle, &path)
        .await?;

    // The buffer moves into the operation and comes back with the result,
    // on success and on error alike: `(io::Result<T>, B)`.
    let (res, block) = file.write_at(0, vec![7u8; 4096]).await;
    assert_eq!(res?, 4096);
    let (res, _block) = file.write_at(4096, block).await;
    res?;
    file.fsync().await?;

    // One buffer reused for every read. A read fills from the buffer's
    // first byte up to its capacity, so clear it before each one.
    let mut buf = Vec::with_capacity(1024);
    let mut offset = 0u64;
    loop {
        buf.clear();
        let (res, back) = file.read_at_into(offset, buf).await;
        buf = back;
        match res? {
            0 => break,
            n => offset += n as u64,
        }
    }
    assert_eq!(offset, 8192);

    // A slice limits an operation to part of a buffer without copying it;
    // `into_inner` gives the whole buffer back.
    let whole = vec![0u8; 64];
    let (res, slice) = file.read_at_into(100, whole.slice(16..32)).await;
    assert_eq!(res?, 16);
    assert_eq!(slice.into_inner().len(), 64);

    file.close().await?;
    spargio::fs::remove_file(handle, &path).await
}
// ANCHOR_END: file

// ANCHOR: server
/// Echoes every byte back, on the connection's session shard.
async fn echo_server(handle: RuntimeHandle, listener: TcpListener, conns: usize) -> io::Result<()> {
    for _ in 0..conns {
        // Sessions are spread over the shards in rotation.
        let (conn, _peer) = listener.accept_round_robin().await?;
        let task_conn = conn.clone();
        // Pinned to the session shard: every receive and send below goes
        // straight into that shard's ring.
        conn.spawn_on_session(&handle, async move {
            // One multishot receive; each segment is a kernel-filled pool
            // buffer, returned to the pool when the segment is dropped.
            let mut segments = task_conn.recv_multishot_segments().await?;
            while let Some(segment) = segments.next_segment().await {
                // A segment is an `IoBuf`: send it back without a copy.
                task_conn.write_all_owned(segment?).await?;
            }
            task_conn.shutdown(std::net::Shutdown::Write).await
        })?;
    }
    Ok(())
}
// ANCHOR_END: server

// ANCHOR: client
/// Sends lines from one task and reads the echoes from another.
async fn line_client(
    handle: RuntimeHandle,
    addr: std::net::SocketAddr,
    id: usize,
) -> io::Result<()> {
    let stream = TcpStream::connect_socket_addr(&handle, addr).await?;
    let (reader, mut writer) = split(stream);
    let sender = handle.spawn_stealable(async move {
        for i in 0..100 {
            let line = format!("client {id} line {i}\n");
            // The trait method: it takes any owned buffer and returns it.
            let (res, _line) = writer.write_all(line.into_bytes()).await;
            res?;
        }
        writer.shutdown().await
    })?;
    let mut reader = BufReader::new(reader);
    let mut line = String::new();
    let mut lines = 0;
    while reader.read_line(&mut line).await? != 0 {
        assert_eq!(line, format!("client {id} line {lines}\n"));
        line.clear();
        lines += 1;
    }
    sender.await??;
    assert_eq!(lines, 100);
    Ok(())
}
// ANCHOR_END: client

// ANCHOR: framed
async fn frames(handle: &RuntimeHandle) -> io::Result<()> {
    let (a, b) = UnixStream::pair(handle)?;
    let mut tx = LengthDelimited::new(a);
    let mut rx = LengthDelimited::new(b);
    tx.write_frame(b"header").await?;
    tx.write_frame(vec![1u8; 100_000]).await?;
    tx.shutdown().await?;
    assert_eq!(rx.read_frame().await?.as_deref(), Some(&b"header"[..]));
    assert_eq!(rx.read_frame().await?.map(|f| f.len()), Some(100_000));
    assert_eq!(rx.read_frame().await?, None);
    Ok(())
}
// ANCHOR_END: framed

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // ANCHOR: main
    spargio::block_on(spargio::run(|handle| async move {
        files(&handle).await?;

        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = handle.spawn_stealable(echo_server(handle.clone(), listener, 4))?;
        let clients: Vec<_> = (0..4)
            .map(|id| handle.spawn_stealable(line_client(handle.clone(), addr, id)))
            .collect::<Result<_, _>>()?;
        for client in clients {
            client.await??;
        }
        server.await??;

        frames(&handle).await
    }))??;
    // ANCHOR_END: main
    println!("files, echo and frames checked");
    Ok(())
}
