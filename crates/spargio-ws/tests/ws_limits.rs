//! A message limit bounds memory: with only `with_max_message_size` set, a
//! frame whose header announces more than the limit is refused at its
//! header (close code 1009 to the peer), before any of its payload is
//! buffered. Raw `std::net` clients complete the upgrade by hand so that
//! they can send a header without its payload.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream as StdTcpStream};
use std::time::Duration;

use spargio::net::TcpListener;
use spargio_ws::tungstenite::Error as WsError;
use spargio_ws::{WsOptions, WsStreamExt};

mod common;
use common::{run, HANG};

/// How long the server side may take to refuse every client before the
/// memory is looked at anyway (the old behaviour never refuses).
const REFUSE_BOUND: Duration = Duration::from_secs(20);

/// The server's message limit; no frame limit is set.
const MESSAGE_LIMIT: usize = 1 << 20;

/// What each client's frame header announces.
const ANNOUNCED: u64 = 8 << 20;

fn options() -> WsOptions {
    WsOptions::default().with_max_message_size(Some(MESSAGE_LIMIT))
}

/// Connects and completes the WebSocket upgrade by hand.
fn upgraded_client(addr: SocketAddr) -> StdTcpStream {
    let mut tcp = StdTcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(HANG)).unwrap();
    tcp.set_write_timeout(Some(HANG)).unwrap();
    tcp.write_all(
        b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        tcp.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    tcp
}

/// The header of a masked binary frame announcing `len` payload bytes
/// (64-bit length form).
fn frame_header(len: u64) -> [u8; 14] {
    let mut h = [0u8; 14];
    h[0] = 0x82; // FIN, binary
    h[1] = 0x80 | 127; // masked, 64-bit length follows
    h[2..10].copy_from_slice(&len.to_be_bytes());
    h[10..14].copy_from_slice(&[0x12, 0x34, 0x56, 0x78]);
    h
}

/// Reads one server frame and returns the close code if it is a close
/// frame with one.
fn read_close_code(tcp: &mut StdTcpStream) -> io::Result<Option<u16>> {
    let mut h = [0u8; 2];
    tcp.read_exact(&mut h)?;
    assert_eq!(h[1] & 0x80, 0, "a server frame is never masked");
    let len = usize::from(h[1] & 0x7f);
    assert!(len < 126, "a close frame's payload is at most 125 bytes");
    let mut payload = vec![0u8; len];
    tcp.read_exact(&mut payload)?;
    if h[0] != 0x88 || len < 2 {
        return Ok(None);
    }
    Ok(Some(u16::from_be_bytes([payload[0], payload[1]])))
}

fn assert_message_too_big(err: &io::Error) {
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err:?}");
    let inner = err.get_ref().and_then(|e| e.downcast_ref::<WsError>());
    assert!(matches!(inner, Some(WsError::Capacity(_))), "{err:?}");
}

/// This process's resident set, in bytes.
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS in /proc/self/status");
    let kib: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn oversize_frame_header_alone_is_refused_with_1009() {
    let client = run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let mut tcp = upgraded_client(addr);
            // The header only: a server that waits for the payload before
            // refusing never answers.
            tcp.write_all(&frame_header(ANNOUNCED)).unwrap();
            read_close_code(&mut tcp)
        });
        let (tcp, _) = listener.accept().await.unwrap();
        let mut ws = spargio_ws::accept_with_options(tcp, options())
            .await
            .unwrap();
        let err = ws.recv().await.unwrap_err();
        assert_message_too_big(&err);
        // Joined off the runtime: a blocked shard could not run the
        // stream's close.
        client
    });
    let code = client.join().unwrap().expect("the close frame");
    assert_eq!(code, Some(1009));
}

#[test]
fn oversize_frames_from_many_clients_cost_no_memory() {
    const CLIENTS: usize = 32;
    /// Sent after each header: most of the announced payload, never all
    /// of it, so a server that buffers payloads holds it all at once.
    const SENT: usize = 7 << 20;
    static CHUNK: [u8; 64 << 10] = [0; 64 << 10];

    let clients = run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let before = rss();

        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut tcp = upgraded_client(addr);
                    tcp.write_all(&frame_header(ANNOUNCED)).unwrap();
                    // Fails once the server, having refused, goes away.
                    let mut sent = 0;
                    while sent < SENT && tcp.write_all(&CHUNK).is_ok() {
                        sent += CHUNK.len();
                    }
                })
            })
            .collect();

        let mut servers = Vec::new();
        for _ in 0..CLIENTS {
            let (tcp, _) = listener.accept().await.unwrap();
            servers.push(
                handle
                    .spawn_stealable(async move {
                        let mut ws = spargio_ws::accept_with_options(tcp, options()).await?;
                        let err = ws.recv().await.unwrap_err();
                        // Kept open until the memory has been looked at.
                        Ok::<_, io::Error>((err, ws))
                    })
                    .unwrap(),
            );
        }
        let refused = spargio::timeout(REFUSE_BOUND, async {
            let mut out = Vec::new();
            for server in servers {
                out.push(server.await.unwrap().unwrap());
            }
            out
        })
        .await;

        // Looked at whether or not every refusal came in: a server that
        // buffers the payloads holds 32 x 7 MiB by now.
        let grown = rss().saturating_sub(before);
        assert!(
            grown < (CLIENTS << 20) * 2,
            "RSS grew by {} MiB across {CLIENTS} clients announcing {} MiB frames",
            grown >> 20,
            ANNOUNCED >> 20
        );
        let refused = refused.expect("the server refused every oversize frame");
        for (err, _) in &refused {
            assert_message_too_big(err);
        }
        // The clients' writes fail once these are closed; they are joined
        // off the runtime, which must keep running to close them.
        drop(refused);
        clients
    });
    for client in clients {
        client.join().unwrap();
    }
}
