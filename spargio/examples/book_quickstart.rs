//! The guide's quick start (`book/src/quick_start.md`): files, tasks and a
//! socket on one runtime, in one short program.
//!
//! ```text
//! cargo run -p spargio --features macros --example book_quickstart
//! ```

use std::io;

use spargio::net::{TcpListener, TcpStream};
use spargio::RuntimeHandle;

// ANCHOR: main
// `#[spargio::main]` (feature `macros`) builds a runtime with one shard per
// CPU, runs this body on shard 0, and shuts the runtime down when it
// returns. The handle parameter is optional.
#[spargio::main]
async fn main(handle: RuntimeHandle) -> io::Result<()> {
    let words = app(handle).await?;
    println!("{words} words counted, echo checked");
    Ok(())
}
// ANCHOR_END: main

// ANCHOR: app
async fn app(handle: RuntimeHandle) -> io::Result<usize> {
    // Files: open, write and close are io_uring operations on the ring of
    // the shard this task runs on. No helper thread is involved.
    let path = std::env::temp_dir().join(format!("spargio-book-{}.txt", std::process::id()));
    spargio::fs::write(&handle, &path, "one two three\nfour five\nsix\n").await?;
    let text = spargio::fs::read_to_string(&handle, &path).await?;
    spargio::fs::remove_file(&handle, &path).await?;

    // Tasks: one stealable task per line. Each goes to the least-loaded
    // shard, and an idle shard may steal it before it runs.
    let mut counts = Vec::new();
    for line in text.lines().map(str::to_owned) {
        counts.push(handle.spawn_stealable(async move { line.split_whitespace().count() })?);
    }
    let mut words = 0;
    for count in counts {
        words += count.await?;
    }

    // Sockets: a one-shot echo over loopback. Buffers are owned: the
    // operation takes the buffer and hands it back with the result.
    let listener = TcpListener::bind(&handle, "127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = handle.spawn_stealable(async move {
        let (conn, _peer) = listener.accept().await?;
        let (n, buf) = conn.recv_owned(Vec::with_capacity(64)).await?;
        conn.write_all_owned(buf).await?;
        Ok::<_, io::Error>(n)
    })?;
    let client = TcpStream::connect_socket_addr(&handle, addr).await?;
    client.write_all(b"hello").await?;
    let echo = client
        .read_exact_owned(vec![0u8; 5].into_boxed_slice())
        .await?;
    assert_eq!(&echo[..], b"hello");
    assert_eq!(server.await??, 5);
    Ok(words)
}
// ANCHOR_END: app
