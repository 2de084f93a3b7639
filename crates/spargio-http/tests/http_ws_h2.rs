//! WebSocket over HTTP/2 (RFC 8441, issue 50 item 6): hyper's HTTP/2
//! client, on tokio, opens an extended CONNECT stream with `:protocol
//! websocket` to `spargio_http::ws::WebSocketUpgrade`, gets `200`, and
//! exchanges masked WebSocket frames with the echo handler over that
//! stream, beside ordinary requests on the same connection.

mod common;

use axum::response::Response;
use axum::routing::{any, get};
use axum::Router;
use common::*;
use http::{Method, Request, StatusCode, Version};
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use spargio_http::ws::WebSocketUpgrade;
use spargio_ws::WsStreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn echo(ws: WebSocketUpgrade) -> Response {
    ws.protocols(["chat"]).on_upgrade(|mut socket| async move {
        while let Ok(Some(msg)) = socket.recv().await {
            if (msg.is_text() || msg.is_binary()) && socket.send_message(msg).await.is_err() {
                break;
            }
        }
    })
}

fn ws_app(_: AppState) -> Router {
    Router::new()
        .route("/ws", any(echo))
        .route("/plain", get(|| async { "plain" }))
}

/// A client's text frame: FIN, opcode 1, masked (RFC 6455 5.2).
fn client_text(payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut frame = vec![0x81, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

#[test]
fn an_http2_extended_connect_websocket_echoes() {
    let _serial = serial();
    let server = TestServer::start_with(ws_app, |s| s, HANG);
    let addr = server.addr;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut send, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                .await
                .expect("HTTP/2 handshake");
        tokio::spawn(conn);

        let plain = send
            .send_request(
                Request::get(format!("http://{addr}/plain"))
                    .body(Empty::<Bytes>::new())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(plain.status(), StatusCode::OK);

        // Refused before the handler: no `Sec-WebSocket-Version`, and a
        // `:protocol` that is not `websocket`.
        for (protocol, version) in [("websocket", None), ("chat", Some("13"))] {
            let mut bad = Request::builder()
                .method(Method::CONNECT)
                .version(Version::HTTP_2)
                .uri(format!("http://{addr}/ws"));
            if let Some(v) = version {
                bad = bad.header("sec-websocket-version", v);
            }
            let mut bad = bad.body(Empty::<Bytes>::new()).unwrap();
            bad.extensions_mut()
                .insert(hyper::ext::Protocol::from(protocol));
            let res = send.send_request(bad).await.expect("an answer");
            assert_eq!(
                res.status(),
                StatusCode::BAD_REQUEST,
                "{protocol} {version:?}"
            );
        }

        let mut req = Request::builder()
            .method(Method::CONNECT)
            .version(Version::HTTP_2)
            .uri(format!("http://{addr}/ws"))
            .header("sec-websocket-version", "13")
            .header("sec-websocket-protocol", "chat")
            .body(Empty::<Bytes>::new())
            .unwrap();
        req.extensions_mut()
            .insert(hyper::ext::Protocol::from_static("websocket"));
        let res = send.send_request(req).await.expect("the CONNECT stream");
        assert_eq!(res.status(), StatusCode::OK, "RFC 8441 answers 200");
        assert_eq!(res.headers()["sec-websocket-protocol"], "chat");
        assert!(res.headers().get("sec-websocket-accept").is_none());
        let mut stream = TokioIo::new(hyper::upgrade::on(res).await.expect("the upgraded stream"));

        for text in ["hello over h2", "and again"] {
            stream
                .write_all(&client_text(text.as_bytes()))
                .await
                .unwrap();
            let mut head = [0u8; 2];
            stream.read_exact(&mut head).await.unwrap();
            assert_eq!(head[0], 0x81, "an unfragmented text frame");
            assert_eq!(head[1] as usize, text.len(), "unmasked, its length");
            let mut body = vec![0u8; text.len()];
            stream.read_exact(&mut body).await.unwrap();
            assert_eq!(body, text.as_bytes());
        }
    });
    server.stop().unwrap();
}
