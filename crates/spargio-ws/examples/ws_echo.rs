//! A WebSocket echo server, and a client for it.
//!
//! ```text
//! cargo run -p spargio-ws --example ws_echo                      # server on 127.0.0.1:9001
//! cargo run -p spargio-ws --example ws_echo -- 127.0.0.1:9002    # another address
//! cargo run -p spargio-ws --example ws_echo -- --connect ws://127.0.0.1:9001/
//! ```
//!
//! The server accepts with a 5 s handshake timeout and a 1 MiB message
//! limit, and echoes text and binary messages; each connection is a
//! stealable task. The client sends a few messages, a ping, and closes.

use std::io;
use std::time::Duration;

use spargio::net::TcpListener;
use spargio::RuntimeHandle;
use spargio_ws::{CloseCode, Message, WsOptions, WsStreamExt};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = match args.as_slice() {
        [flag, url] if flag == "--connect" => {
            let url = url.clone();
            spargio::block_on(spargio::run(|handle| client(handle, url)))?
        }
        [addr] => {
            let addr = addr.clone();
            spargio::block_on(spargio::run(|handle| server(handle, addr)))?
        }
        [] => spargio::block_on(spargio::run(|handle| {
            server(handle, "127.0.0.1:9001".to_owned())
        }))?,
        _ => return Err("usage: ws_echo [ADDR] | ws_echo --connect URL".into()),
    };
    Ok(out?)
}

// ANCHOR: server
async fn server(handle: RuntimeHandle, addr: String) -> io::Result<()> {
    let listener = TcpListener::bind(&handle, addr).await?;
    println!("listening on ws://{}/", listener.local_addr()?);
    let options = WsOptions::default()
        .with_handshake_timeout(Some(Duration::from_secs(5)))
        .with_max_message_size(Some(1 << 20));
    loop {
        let (tcp, peer) = listener.accept().await?;
        handle
            .spawn_stealable(async move {
                match echo(tcp, options).await {
                    Ok(n) => println!("{peer}: closed after {n} messages"),
                    Err(err) => println!("{peer}: {err} ({:?})", err.kind()),
                }
            })
            .map_err(io::Error::other)?;
    }
}

async fn echo(tcp: spargio::net::TcpStream, options: WsOptions) -> io::Result<usize> {
    let mut ws = spargio_ws::accept_with_options(tcp, options).await?;
    let mut echoed = 0;
    // `recv` answers pings by itself and returns `None` once the close
    // handshake is over. A message over the limit is refused with close
    // code 1009 and comes back as `InvalidData`.
    while let Some(msg) = ws.recv().await? {
        if msg.is_text() || msg.is_binary() {
            ws.send_message(msg).await?;
            echoed += 1;
        }
    }
    Ok(echoed)
}
// ANCHOR_END: server

// ANCHOR: client
async fn client(handle: RuntimeHandle, url: String) -> io::Result<()> {
    let (mut ws, response) = spargio_ws::connect(&handle, url.as_str()).await?;
    println!("connected: HTTP {}", response.status());
    for text in ["hello", "from", "spargio"] {
        ws.send_message(Message::text(text)).await?;
        println!("echo: {:?}", ws.recv().await?);
    }
    ws.send_message(Message::binary(vec![0u8; 64 << 10]))
        .await?;
    if let Some(Message::Binary(data)) = ws.recv().await? {
        println!("echo: {} bytes", data.len());
    }
    ws.ping(b"still there?").await?;
    println!("ping answered: {:?}", ws.recv().await?);
    let reply = ws.close_with(CloseCode::Normal, "bye").await?;
    println!("closed: {reply:?}");
    Ok(())
}
// ANCHOR_END: client
