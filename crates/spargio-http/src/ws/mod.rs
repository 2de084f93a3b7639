//! WebSocket in axum handlers (feature `ws`, on by default).
//!
//! axum's own `WebSocketUpgrade` spawns the upgraded connection with
//! `tokio::spawn`, which panics outside a Tokio runtime. This one is the
//! same extractor for spargio: the handler takes a [`WebSocketUpgrade`],
//! answers with [`on_upgrade`](WebSocketUpgrade::on_upgrade)'s
//! `101 Switching Protocols`, and the callback runs as a task pinned to
//! the connection's shard with a [`spargio_ws::WsStream`]: the same type
//! (and the same [`WsStreamExt`](spargio_ws::WsStreamExt) calls, limits
//! and close codes) as every other spargio WebSocket.
//!
//! Two handshakes are accepted:
//!
//! * RFC 6455's over HTTP/1.1: `GET`, `Connection: upgrade`,
//!   `Upgrade: websocket`, `Sec-WebSocket-Version: 13` and a
//!   `Sec-WebSocket-Key`, answered `101 Switching Protocols`;
//! * RFC 8441's over HTTP/2, which [`serve`](crate::serve) offers
//!   (`SETTINGS_ENABLE_CONNECT_PROTOCOL`): an extended `CONNECT` with
//!   `:protocol websocket` and `Sec-WebSocket-Version: 13`, answered
//!   `200`; the WebSocket then runs on that one HTTP/2 stream, beside the
//!   connection's other requests.
//!
//! Route the handler with `axum::routing::any` (as axum's own extractor
//! asks) to take both: HTTP/2's is a `CONNECT`, which `get` does not
//! route. A request that is neither is refused by the extractor (`405`
//! for another method, `400` for a missing or wrong header, `426` for a
//! `GET` upgrade over HTTP/2 or a connection that cannot be upgraded),
//! before the handler runs.
//!
//! After the upgrade the connection leaves the server's bookkeeping: it
//! no longer counts against `max_connections` nor the idle timeout, and
//! graceful shutdown does not wait for it (close your WebSockets from the
//! shutdown signal, as with axum). The frame and message limits of
//! [`WsOptions`] apply (default: tungstenite's,
//! 64 MiB messages and 16 MiB frames; a larger message gets close code
//! 1009).
//!
//! ```
//! # spargio::block_on(spargio::run(|handle| async move {
//! use axum::{response::Response, routing::get, Router};
//! use spargio_http::ws::WebSocketUpgrade;
//! use spargio_ws::WsStreamExt;
//!
//! async fn echo(ws: WebSocketUpgrade) -> Response {
//!     ws.on_upgrade(|mut socket| async move {
//!         while let Ok(Some(msg)) = socket.recv().await {
//!             if (msg.is_text() || msg.is_binary()) && socket.send_message(msg).await.is_err() {
//!                 break;
//!             }
//!         }
//!     })
//! }
//!
//! let app: Router = Router::new().route("/ws", get(echo));
//! let listener = spargio::net::TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
//! let url = format!("ws://{}/ws", listener.local_addr().unwrap());
//! let stop = spargio::CancellationToken::new();
//! let signal = stop.clone();
//! let server = handle
//!     .spawn_stealable(async move {
//!         spargio_http::serve(listener, app)
//!             .with_graceful_shutdown(async move { signal.cancelled().await })
//!             .await
//!     })
//!     .unwrap();
//!
//! let (mut ws, _) = spargio_ws::connect(&handle, url.as_str()).await.unwrap();
//! ws.send_message(spargio_ws::Message::text("hi")).await.unwrap();
//! assert_eq!(ws.recv().await.unwrap(), Some(spargio_ws::Message::text("hi")));
//! ws.close_with(spargio_ws::CloseCode::Normal, "bye").await.unwrap();
//! stop.cancel();
//! server.await.unwrap().unwrap();
//! # })).unwrap();
//! ```

mod io;

use std::future::Future;

use axum::extract::FromRequestParts;
use axum::response::{IntoResponse, Response};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, StatusCode, Version};
use hyper::upgrade::OnUpgrade;
use spargio::ShardCtx;
use spargio_ws::tungstenite::handshake::derive_accept_key;
use spargio_ws::{WsAcceptor, WsOptions, WsStream};

use io::UpgradedStream;

/// An axum extractor for a WebSocket upgrade request (module docs).
#[derive(Debug)]
pub struct WebSocketUpgrade {
    on_upgrade: OnUpgrade,
    /// `Sec-WebSocket-Accept` over HTTP/1.1; `None` over HTTP/2 (RFC 8441
    /// has no key and answers `200`).
    accept: Option<HeaderValue>,
    /// The subprotocols the client offered, in its order.
    offered: Vec<HeaderValue>,
    protocol: Option<HeaderValue>,
    options: WsOptions,
}

/// Why a request is not a WebSocket upgrade; answers with its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebSocketRejection {
    status: StatusCode,
    reason: &'static str,
}

impl WebSocketRejection {
    fn new(status: StatusCode, reason: &'static str) -> WebSocketRejection {
        WebSocketRejection { status, reason }
    }

    /// The status of the refusal (`405`, `400` or `426`).
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// What was wrong with the request.
    pub fn reason(&self) -> &'static str {
        self.reason
    }
}

impl std::fmt::Display for WebSocketRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason)
    }
}

impl std::error::Error for WebSocketRejection {}

impl IntoResponse for WebSocketRejection {
    fn into_response(self) -> Response {
        let mut res = (self.status, self.reason).into_response();
        if self.status == StatusCode::BAD_REQUEST || self.status == StatusCode::UPGRADE_REQUIRED {
            res.headers_mut().insert(
                header::SEC_WEBSOCKET_VERSION,
                HeaderValue::from_static("13"),
            );
        }
        res
    }
}

/// Whether the comma-separated header `name` lists `token` (any case).
fn lists(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

impl<S: Send + Sync> FromRequestParts<S> for WebSocketUpgrade {
    type Rejection = WebSocketRejection;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let reject = WebSocketRejection::new;
        if parts.method == Method::CONNECT && parts.version == Version::HTTP_2 {
            return extended_connect(parts);
        }
        if parts.method != Method::GET {
            return Err(reject(
                StatusCode::METHOD_NOT_ALLOWED,
                "a WebSocket upgrade is a GET request",
            ));
        }
        if parts.version != Version::HTTP_11 {
            return Err(reject(
                StatusCode::UPGRADE_REQUIRED,
                "over HTTP/2 a WebSocket opens with an extended CONNECT (RFC 8441)",
            ));
        }
        let headers = &parts.headers;
        if !lists(headers, header::CONNECTION, "upgrade") {
            return Err(reject(
                StatusCode::BAD_REQUEST,
                "`Connection` does not list `upgrade`",
            ));
        }
        if !lists(headers, header::UPGRADE, "websocket") {
            return Err(reject(
                StatusCode::BAD_REQUEST,
                "`Upgrade` is not `websocket`",
            ));
        }
        version_13(headers)?;
        let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY) else {
            return Err(reject(
                StatusCode::BAD_REQUEST,
                "`Sec-WebSocket-Key` is missing",
            ));
        };
        let accept = HeaderValue::from_str(&derive_accept_key(key.as_bytes()))
            .expect("base64 is a valid header value");
        let Some(on_upgrade) = parts.extensions.remove::<OnUpgrade>() else {
            return Err(reject(
                StatusCode::UPGRADE_REQUIRED,
                "this connection cannot be upgraded",
            ));
        };
        Ok(WebSocketUpgrade {
            on_upgrade,
            accept: Some(accept),
            offered: offered_protocols(headers),
            protocol: None,
            options: WsOptions::default(),
        })
    }
}

/// Both handshakes ask for `Sec-WebSocket-Version: 13`.
fn version_13(headers: &HeaderMap) -> Result<(), WebSocketRejection> {
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .map(|v| v.as_bytes())
        == Some(b"13")
    {
        return Ok(());
    }
    Err(WebSocketRejection::new(
        StatusCode::BAD_REQUEST,
        "`Sec-WebSocket-Version` is not 13",
    ))
}

/// The subprotocols offered in `Sec-WebSocket-Protocol`, in order.
fn offered_protocols(headers: &HeaderMap) -> Vec<HeaderValue> {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|p| HeaderValue::from_str(p.trim()).ok())
        .collect()
}

/// RFC 8441: an HTTP/2 `CONNECT` whose `:protocol` is `websocket`.
fn extended_connect(parts: &mut Parts) -> Result<WebSocketUpgrade, WebSocketRejection> {
    let reject = WebSocketRejection::new;
    let protocol = parts.extensions.get::<hyper::ext::Protocol>();
    if !protocol.is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket")) {
        return Err(reject(
            StatusCode::BAD_REQUEST,
            "an HTTP/2 CONNECT without `:protocol websocket`",
        ));
    }
    version_13(&parts.headers)?;
    let Some(on_upgrade) = parts.extensions.remove::<OnUpgrade>() else {
        return Err(reject(
            StatusCode::UPGRADE_REQUIRED,
            "this stream cannot be upgraded",
        ));
    };
    Ok(WebSocketUpgrade {
        on_upgrade,
        accept: None,
        offered: offered_protocols(&parts.headers),
        protocol: None,
        options: WsOptions::default(),
    })
}

impl WebSocketUpgrade {
    /// The subprotocols the client offered (`Sec-WebSocket-Protocol`),
    /// in its order of preference.
    pub fn offered_protocols(&self) -> impl Iterator<Item = &str> {
        self.offered.iter().filter_map(|p| p.to_str().ok())
    }

    /// Picks the first of `supported` the client offered (in the
    /// server's order) and names it in the response; none offered, none
    /// named.
    pub fn protocols<I>(mut self, supported: I) -> WebSocketUpgrade
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.protocol = supported.into_iter().find_map(|want| {
            self.offered
                .iter()
                .find(|p| p.as_bytes() == want.as_ref().as_bytes())
                .cloned()
        });
        self
    }

    /// The subprotocol [`protocols`](Self::protocols) selected.
    pub fn selected_protocol(&self) -> Option<&str> {
        self.protocol.as_ref().and_then(|p| p.to_str().ok())
    }

    /// The frame and message limits (and tungstenite's configuration)
    /// for the connection; the handshake timeout and session options do
    /// not apply (the server did the handshake).
    pub fn options(mut self, options: WsOptions) -> WebSocketUpgrade {
        self.options = options;
        self
    }

    /// Answers `101 Switching Protocols` (HTTP/1.1; `200` to an HTTP/2
    /// extended CONNECT) and runs `callback` with the
    /// WebSocket once hyper hands the connection over, as a task pinned
    /// to the current shard. A connection that fails before the handover
    /// (the client went away) never reaches `callback`.
    ///
    /// Called outside a spargio runtime (no current shard), it answers
    /// `500` instead.
    pub fn on_upgrade<F, Fut>(self, callback: F) -> Response
    where
        F: FnOnce(WsStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Some(ctx) = ShardCtx::current() else {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "WebSocket upgrade outside a spargio runtime",
            )
                .into_response();
        };
        let acceptor = WsAcceptor::new().with_options(self.options);
        let on_upgrade = self.on_upgrade;
        let task = async move {
            let Ok(upgraded) = on_upgrade.await else {
                return;
            };
            let ws = acceptor.upgraded(UpgradedStream(upgraded)).await;
            callback(ws).await;
        };
        if ctx.handle().spawn_pinned(ctx.shard_id(), task).is_err() {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "the runtime is shutting down",
            )
                .into_response();
        }
        let mut res = Response::new(axum::body::Body::empty());
        match self.accept {
            Some(accept) => {
                *res.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
                let headers = res.headers_mut();
                headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
                headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
                headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
            }
            // RFC 8441: the stream is the WebSocket once answered 200.
            None => *res.status_mut() = StatusCode::OK,
        }
        let headers = res.headers_mut();
        if let Some(protocol) = self.protocol {
            headers.insert(header::SEC_WEBSOCKET_PROTOCOL, protocol);
        }
        res
    }
}
