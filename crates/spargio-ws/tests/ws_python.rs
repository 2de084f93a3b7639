//! Interop with Python's `websockets`: a Python client against our
//! acceptor, our connector against a Python asyncio server, and the
//! refusal of oversized messages with close code 1009.

mod common;

use std::io;

use common::{pattern, python, stdout_ok, text_pattern, PyServer};
use spargio::net::TcpListener;
use spargio_test_peers::{require_peer, Peer};
use spargio_ws::{CloseCode, Message, WsOptions, WsStreamExt};

/// Accepts one connection and echoes text and binary messages; returns
/// how many it echoed and the client's close frame.
async fn echo_one(
    listener: TcpListener,
    options: WsOptions,
) -> io::Result<(usize, Option<spargio_ws::CloseFrame>)> {
    let (tcp, _) = listener.accept().await?;
    let mut ws = spargio_ws::accept_with_options(tcp, options).await?;
    let (mut echoed, mut close) = (0, None);
    while let Some(msg) = ws.recv().await? {
        match msg {
            Message::Text(_) | Message::Binary(_) => {
                ws.send_message(msg).await?;
                echoed += 1;
            }
            Message::Close(frame) => close = frame,
            _ => {}
        }
    }
    Ok((echoed, close))
}

#[test]
fn python_client_echoes_through_our_acceptor_every_size_every_byte() {
    require_peer!(Peer::PythonWebsockets);
    let (stdout, echoed, close) = common::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/echo", listener.local_addr().unwrap());
        let server = handle
            .spawn_stealable(echo_one(listener, WsOptions::default()))
            .unwrap();
        let client = std::thread::spawn(move || python("client.py", &[&url, "echo"], &[]));
        let (echoed, close) = server.await.unwrap().unwrap();
        let out = common::join(client).await;
        (stdout_ok(&out), echoed, close)
    });
    let expected = 2 * common::SIZES.len();
    assert_eq!(stdout.trim(), format!("OK {expected}"));
    assert_eq!(echoed, expected);
    let close = close.expect("the client's close frame");
    assert_eq!(close.code, CloseCode::Normal);
    assert_eq!(close.reason.as_str(), "py done");
}

#[test]
fn our_connector_talks_to_a_python_server() {
    require_peer!(Peer::PythonWebsockets);
    let server = PyServer::start("echo_server.py", &[]);
    let url = format!("ws://localhost:{}/", server.port);
    common::run(move |handle| async move {
        let (mut ws, response) = spargio_ws::connect(&handle, url.as_str()).await.unwrap();
        assert_eq!(response.status(), 101);
        for &size in common::SIZES {
            let text = text_pattern(size);
            ws.send_message(Message::text(text.clone())).await.unwrap();
            match ws.recv().await.unwrap() {
                Some(Message::Text(back)) => assert!(back.as_str() == text, "text of {size}"),
                other => panic!("expected text of {size}, got {other:?}"),
            }
            let bytes = pattern(size);
            ws.send_message(Message::binary(bytes.clone()))
                .await
                .unwrap();
            match ws.recv().await.unwrap() {
                Some(Message::Binary(back)) => assert!(back[..] == bytes[..], "binary of {size}"),
                other => panic!("expected binary of {size}, got {other:?}"),
            }
        }
        // Python answers pings by itself.
        ws.ping(b"spargio").await.unwrap();
        assert_eq!(
            ws.recv().await.unwrap(),
            Some(Message::Pong(b"spargio"[..].into()))
        );
        // We close: the server echoes our code and reason.
        let reply = ws
            .close_with(CloseCode::Away, "client leaving")
            .await
            .unwrap();
        let reply = reply.expect("close frame");
        assert_eq!(reply.code, CloseCode::Away);
        assert_eq!(reply.reason.as_str(), "client leaving");

        // The server closes: we see its code and reason, then the end.
        let (mut ws, _) = spargio_ws::connect(&handle, url.as_str()).await.unwrap();
        ws.send_message(Message::text("close-me")).await.unwrap();
        match ws.recv().await.unwrap() {
            Some(Message::Close(Some(frame))) => {
                assert_eq!(frame.code, CloseCode::from(4000));
                assert_eq!(frame.reason.as_str(), "server bye");
            }
            other => panic!("expected the server's close, got {other:?}"),
        }
        assert_eq!(ws.recv().await.unwrap(), None);
        // Writing now fails with a matchable kind.
        let err = ws.send_message(Message::text("late")).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe, "{err}");
    });
}

/// A server with 64 KiB limits refuses `args` from the Python client; the
/// client must see close code 1009, and the server `InvalidData`.
fn oversize_is_refused_with_1009(args: &'static [&'static str]) {
    require_peer!(Peer::PythonWebsockets);
    let (stdout, err) = common::run(move |handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/", listener.local_addr().unwrap());
        let options = WsOptions::default()
            .with_max_frame_size(Some(64 << 10))
            .with_max_message_size(Some(64 << 10));
        let server = handle.spawn_stealable(echo_one(listener, options)).unwrap();
        let client = std::thread::spawn(move || {
            let mut argv = vec![url.as_str(), "oversize"];
            argv.extend_from_slice(args);
            python("client.py", &argv, &[])
        });
        let err = server.await.unwrap().unwrap_err();
        let out = common::join(client).await;
        (stdout_ok(&out), err)
    });
    assert_eq!(stdout.trim(), "CLOSED 1009 message too big");
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
}

#[test]
fn an_oversized_frame_is_refused_with_close_1009() {
    // One 1 MiB frame over a 64 KiB frame limit.
    oversize_is_refused_with_1009(&["1048576"]);
}

#[test]
fn an_oversized_fragmented_message_is_refused_with_close_1009() {
    // Four 40 KB frames: each under the frame limit, the message over its
    // limit.
    oversize_is_refused_with_1009(&["160000", "4"]);
}
