//! Our connector against our acceptor: ping/pong, closes both ways with
//! codes and reasons, errors with their kinds, and a raw peer breaking
//! the protocol.

mod common;

use std::io::{self, Read, Write};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use spargio::net::TcpListener;
use spargio_ws::{CloseCode, Message, WsOptions, WsReceiverExt, WsSenderExt, WsStreamExt};

#[test]
fn ping_gets_pong_both_ways() {
    common::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/", listener.local_addr().unwrap());
        let server = handle
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut ws = spargio_ws::accept(tcp).await.unwrap();
                // The client's ping arrives as a message; the pong goes out
                // by itself.
                assert_eq!(
                    ws.recv().await.unwrap(),
                    Some(Message::Ping(b"c"[..].into()))
                );
                ws.ping(b"s").await.unwrap();
                assert_eq!(
                    ws.recv().await.unwrap(),
                    Some(Message::Pong(b"s"[..].into()))
                );
                while ws.recv().await.unwrap().is_some() {}
            })
            .unwrap();
        let (mut ws, _) = spargio_ws::connect(&handle, url.as_str()).await.unwrap();
        ws.ping(b"c").await.unwrap();
        // Our pong and the server's ping (answered while we read), in
        // either order.
        let mut got = vec![ws.recv().await.unwrap(), ws.recv().await.unwrap()];
        got.sort_by_key(|m| format!("{m:?}"));
        assert_eq!(
            got,
            [
                Some(Message::Ping(b"s"[..].into())),
                Some(Message::Pong(b"c"[..].into()))
            ]
        );
        ws.close_with(CloseCode::Normal, "").await.unwrap();
        server.await.unwrap();
    });
}

#[test]
fn server_closes_with_code_and_reason() {
    common::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = handle
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut ws = spargio_ws::accept(tcp).await.unwrap();
                ws.close_with(CloseCode::Policy, "go away").await.unwrap()
            })
            .unwrap();
        let (mut ws, _) = spargio_ws::connect_socket_addr(
            &handle,
            addr,
            format!("ws://localhost:{}/", addr.port()),
        )
        .await
        .unwrap();
        match ws.recv().await.unwrap() {
            Some(Message::Close(Some(frame))) => {
                assert_eq!(frame.code, CloseCode::Policy);
                assert_eq!(frame.reason.as_str(), "go away");
            }
            other => panic!("expected a close, got {other:?}"),
        }
        assert_eq!(ws.recv().await.unwrap(), None);
        // The server got our reply: its own code echoed.
        let reply = server.await.unwrap().unwrap();
        assert_eq!(reply.code, CloseCode::Policy);
        // The stream is done: reads end, writes fail with BrokenPipe.
        assert_eq!(ws.recv().await.unwrap(), None);
        let err = ws.send_message(Message::text("x")).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    });
}

#[test]
fn client_closes_with_code_and_reason() {
    common::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/", listener.local_addr().unwrap());
        let server = handle
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut ws = spargio_ws::accept(tcp).await.unwrap();
                let first = ws.recv().await.unwrap();
                let end = ws.recv().await.unwrap();
                (first, end)
            })
            .unwrap();
        let (mut ws, _) = spargio_ws::connect(&handle, url.as_str()).await.unwrap();
        let reply = ws
            .close_with(CloseCode::from(4321), "custom")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (reply.code, reply.reason.as_str()),
            (CloseCode::from(4321), "custom")
        );
        let (first, end) = server.await.unwrap();
        match first {
            Some(Message::Close(Some(frame))) => {
                assert_eq!(frame.code, CloseCode::from(4321));
                assert_eq!(frame.reason.as_str(), "custom");
            }
            other => panic!("expected a close, got {other:?}"),
        }
        assert_eq!(end, None);
    });
}

/// A ping read just before a close leaves its pong queued in tungstenite,
/// which writes the close frame ahead of what it has queued: the pong would
/// follow the close, and a peer that fails a connection on any frame after
/// a close (tungstenite does: "Remote sent after having closed") would see
/// a protocol error instead of the close handshake. The torture found it
/// (`ws_torture.rs`).
#[test]
fn close_with_sends_an_owed_pong_before_the_close_frame() {
    owed_pong_then_close(false);
}

/// [`close_with_sends_an_owed_pong_before_the_close_frame`] through the
/// halves: the receiver reads the ping, the sender closes.
#[test]
fn sender_close_with_sends_an_owed_pong_before_the_close_frame() {
    owed_pong_then_close(true);
}

fn owed_pong_then_close(split: bool) {
    common::run(move |handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/", listener.local_addr().unwrap());
        let server = handle
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut ws = spargio_ws::accept(tcp).await.unwrap();
                let ping = Some(Message::Ping(b"owed"[..].into()));
                if split {
                    let (mut tx, mut rx) = ws.split();
                    assert_eq!(WsReceiverExt::recv(&mut rx).await.unwrap(), ping);
                    tx.close_with(CloseCode::Normal, "bye").await.unwrap();
                    while WsReceiverExt::recv(&mut rx).await.unwrap().is_some() {}
                } else {
                    assert_eq!(ws.recv().await.unwrap(), ping);
                    ws.close_with(CloseCode::Normal, "bye").await.unwrap();
                }
            })
            .unwrap();
        let (mut ws, _) = spargio_ws::connect(&handle, url.as_str()).await.unwrap();
        ws.ping(b"owed").await.unwrap();
        let mut got = Vec::new();
        loop {
            match ws.recv().await {
                Ok(Some(m)) => got.push(format!("{m:?}")),
                Ok(None) => break,
                Err(e) => {
                    got.push(format!("error: {e}"));
                    break;
                }
            }
        }
        assert_eq!(
            got,
            [
                format!("{:?}", Message::Pong(b"owed"[..].into())),
                format!(
                    "{:?}",
                    Message::Close(Some(spargio_ws::CloseFrame {
                        code: CloseCode::Normal,
                        reason: "bye".into()
                    }))
                ),
            ]
        );
        server.await.unwrap();
    });
}

#[test]
fn sink_and_stream_of_async_tungstenite_work_too() {
    common::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/", listener.local_addr().unwrap());
        let server = handle
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let ws = spargio_ws::accept(tcp).await.unwrap();
                let (mut tx, mut rx) = ws.split();
                while let Some(msg) = rx.next().await {
                    let msg = msg.unwrap();
                    if msg.is_binary() {
                        tx.send(msg).await.unwrap();
                    }
                }
            })
            .unwrap();
        let (mut ws, _) = spargio_ws::connect(&handle, url.as_str()).await.unwrap();
        for i in 0..100u32 {
            ws.send(Message::binary(i.to_le_bytes().to_vec()))
                .await
                .unwrap();
        }
        for i in 0..100u32 {
            let msg = ws.next().await.unwrap().unwrap();
            assert_eq!(msg.into_data()[..], i.to_le_bytes());
        }
        SinkExt::close(&mut ws).await.unwrap();
        while ws.next().await.is_some() {}
        server.await.unwrap();
    });
}

#[test]
fn oversized_message_from_our_client_is_refused_with_1009() {
    common::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/", listener.local_addr().unwrap());
        let server = handle
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let options = WsOptions::default().with_max_message_size(Some(1000));
                let mut ws = spargio_ws::accept_with_options(tcp, options).await.unwrap();
                assert_eq!(
                    ws.recv().await.unwrap(),
                    Some(Message::binary(vec![1; 1000]))
                );
                ws.recv().await.unwrap_err()
            })
            .unwrap();
        let (mut ws, _) = spargio_ws::connect(&handle, url.as_str()).await.unwrap();
        ws.send_message(Message::binary(vec![1; 1000]))
            .await
            .unwrap();
        ws.send_message(Message::binary(vec![1; 1001]))
            .await
            .unwrap();
        match ws.recv().await.unwrap() {
            Some(Message::Close(Some(frame))) => {
                assert_eq!(frame.code, CloseCode::Size);
                assert_eq!(frame.reason.as_str(), "message too big");
            }
            other => panic!("expected close 1009, got {other:?}"),
        }
        let err = server.await.unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let inner = err
            .get_ref()
            .unwrap()
            .downcast_ref::<spargio_ws::tungstenite::Error>();
        assert!(
            matches!(inner, Some(spargio_ws::tungstenite::Error::Capacity(_))),
            "{err:?}"
        );
    });
}

#[test]
fn protocol_violation_is_answered_with_1002() {
    common::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = handle
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut ws = spargio_ws::accept(tcp).await.unwrap();
                ws.recv().await.unwrap_err()
            })
            .unwrap();
        // A raw client: a valid upgrade, then an unmasked frame (clients
        // must mask).
        let client = std::thread::spawn(move || {
            let mut tcp = std::net::TcpStream::connect(addr).unwrap();
            tcp.set_read_timeout(Some(common::HANG)).unwrap();
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
            assert!(head.starts_with(b"HTTP/1.1 101"));
            tcp.write_all(&[0x82, 0x02, 0xaa, 0xbb]).unwrap();
            let mut close = Vec::new();
            let _ = tcp.read_to_end(&mut close);
            close
        });
        let err = server.await.unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let close = common::join(client).await;
        // A close frame (0x88) whose payload starts with code 1002.
        assert_eq!(close[0], 0x88, "{close:?}");
        assert_eq!(u16::from_be_bytes([close[2], close[3]]), 1002);
    });
}

#[test]
fn peer_vanishing_without_close_is_connection_aborted() {
    common::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/", listener.local_addr().unwrap());
        let server = handle
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut ws = spargio_ws::accept(tcp).await.unwrap();
                ws.recv().await
            })
            .unwrap();
        let (ws, _) = spargio_ws::connect(&handle, url.as_str()).await.unwrap();
        spargio::sleep(Duration::from_millis(10)).await;
        drop(ws);
        let err = server.await.unwrap().unwrap_err();
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
            ),
            "{err:?}"
        );
    });
}

#[test]
fn a_server_refusing_the_upgrade_is_connection_refused() {
    common::run(|handle| async move {
        // Not a WebSocket server: an HTTP 404.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("ws://{}/", listener.local_addr().unwrap());
        let http = std::thread::spawn(move || {
            let (mut tcp, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = tcp.read(&mut buf).unwrap();
            tcp.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
        });
        let err = spargio_ws::connect(&handle, url.as_str())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
        common::join(http).await;
    });
}

#[test]
fn a_client_speaking_something_else_is_invalid_data() {
    common::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let mut tcp = std::net::TcpStream::connect(addr).unwrap();
            tcp.write_all(b"HELLO\r\n\r\n").unwrap();
            let mut rest = Vec::new();
            let _ = tcp.read_to_end(&mut rest);
        });
        let (tcp, _) = listener.accept().await.unwrap();
        let err = spargio_ws::accept(tcp).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        common::join(client).await;
    });
}

#[test]
fn a_client_leaving_mid_handshake_is_unexpected_eof() {
    common::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let mut tcp = std::net::TcpStream::connect(addr).unwrap();
            tcp.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        });
        let (tcp, _) = listener.accept().await.unwrap();
        common::join(client).await;
        let err = spargio_ws::accept(tcp).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
    });
}

#[test]
fn bad_urls_are_invalid_input() {
    common::run(|handle| async move {
        for url in ["http://localhost/", "ws:///nohost", "not a url"] {
            let err = spargio_ws::connect(&handle, url).await.unwrap_err();
            assert!(
                matches!(
                    err.kind(),
                    io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData
                ),
                "{url}: {err:?}"
            );
        }
    });
}
