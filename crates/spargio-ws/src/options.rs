//! `WsOptions`: what a connection may cost before it is refused.
//!
//! Two kinds of limit, both enforced while the peer sends, not after:
//!
//! * the **handshake timeout** bounds the whole opening (TCP connect, TLS,
//!   the HTTP upgrade): a peer that connects and says nothing holds a
//!   socket for that long at most, then the call returns `TimedOut` and
//!   the socket is closed;
//! * the **frame and message size limits** go to tungstenite's
//!   `WebSocketConfig`. tungstenite checks a frame header's announced
//!   length against the *frame* limit only, and reserves that much before
//!   reading the payload; the message limit it checks once a frame has
//!   been read. So the frame limit applied is capped by the message limit
//!   (`min(frame, message)`): a frame announcing more than the message
//!   limit is refused at its header, before any of its payload is read,
//!   and [`WsStreamExt::recv`](crate::WsStreamExt::recv) then closes with
//!   code 1009. What a peer can make a connection hold is then about the
//!   message limit plus one frame (a message in progress and the frame
//!   that would overflow it), at most twice the message limit.

use std::time::Duration;

use async_tungstenite::tungstenite::protocol::WebSocketConfig;
use spargio::net::StreamSessionPolicy;

/// Limits and settings for a WebSocket connection or acceptance.
///
/// ```
/// use std::time::Duration;
/// use spargio_ws::WsOptions;
///
/// let options = WsOptions::default()
///     .with_handshake_timeout(Some(Duration::from_secs(2)))
///     .with_max_message_size(Some(1 << 20))
///     .with_max_frame_size(Some(256 << 10));
/// assert_eq!(options.handshake_timeout(), Some(Duration::from_secs(2)));
/// assert_eq!(options.config().max_message_size, Some(1 << 20));
/// assert_eq!(options.config().max_frame_size, Some(256 << 10));
///
/// // A message limit alone also caps frames (tungstenite's default frame
/// // limit is 16 MiB): an oversize frame is refused at its header.
/// let options = WsOptions::default().with_max_message_size(Some(1 << 20));
/// assert_eq!(options.config().max_frame_size, Some(1 << 20));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct WsOptions {
    handshake_timeout: Option<Duration>,
    nodelay: bool,
    session: StreamSessionPolicy,
    /// tungstenite's configuration as the caller set it.
    requested: WebSocketConfig,
    /// `requested` as applied: the frame limit capped by the message
    /// limit (module docs).
    config: WebSocketConfig,
}

/// The handshake timeout of [`WsOptions::default`].
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for WsOptions {
    /// A 10 s handshake timeout, `TCP_NODELAY` on, the connecting task's
    /// shard as session shard, and tungstenite's
    /// default limits (16 MiB frames, 64 MiB messages).
    fn default() -> WsOptions {
        WsOptions {
            handshake_timeout: Some(DEFAULT_HANDSHAKE_TIMEOUT),
            nodelay: true,
            session: StreamSessionPolicy::ContextPreferred,
            requested: WebSocketConfig::default(),
            config: WebSocketConfig::default(),
        }
    }
}

impl WsOptions {
    /// These options with the handshake bounded by `timeout` (`None`: no
    /// bound). When it passes, the call returns `io::ErrorKind::TimedOut`.
    pub fn with_handshake_timeout(mut self, timeout: Option<Duration>) -> WsOptions {
        self.handshake_timeout = timeout;
        self
    }

    /// The largest frame payload accepted from the peer (`None`: no limit
    /// of its own). The limit applied is at most the message limit.
    pub fn with_max_frame_size(self, max: Option<usize>) -> WsOptions {
        self.configure(|c| c.max_frame_size = max)
    }

    /// The largest message (all its frames together) accepted from the
    /// peer, and sent (`None`: no limit). It caps the frame limit too, so
    /// a frame announcing more is refused at its header, before its
    /// payload is read.
    pub fn with_max_message_size(self, max: Option<usize>) -> WsOptions {
        self.configure(|c| c.max_message_size = max)
    }

    /// Whether to set `TCP_NODELAY` on the socket (default: on).
    /// tungstenite writes whole frames and flushes per message, so Nagle's
    /// algorithm would only delay small messages.
    pub fn with_nodelay(mut self, nodelay: bool) -> WsOptions {
        self.nodelay = nodelay;
        self
    }

    /// Which shard's ring serves a connection the connector opens
    /// (default: the connecting task's). `RoundRobin` spreads many
    /// connections over the shards; run each one's loop on its session
    /// shard with `ws.get_ref().tcp()` and its `spawn_on_session(..)`. Accepted
    /// streams keep the session their listener gave them.
    pub fn with_session_policy(mut self, policy: StreamSessionPolicy) -> WsOptions {
        self.session = policy;
        self
    }

    /// These options with tungstenite's whole configuration replaced (for
    /// its buffer sizes; the size limits above are two of its fields, and
    /// the frame limit is capped by the message limit here too).
    pub fn with_config(self, config: WebSocketConfig) -> WsOptions {
        self.configure(|c| *c = config)
    }

    /// Changes the requested configuration and recomputes the applied one.
    fn configure(mut self, f: impl FnOnce(&mut WebSocketConfig)) -> WsOptions {
        f(&mut self.requested);
        self.config = self.requested;
        if let Some(message) = self.config.max_message_size {
            let frame = self.config.max_frame_size.unwrap_or(message);
            self.config.max_frame_size = Some(frame.min(message));
        }
        self
    }

    /// The handshake timeout.
    pub fn handshake_timeout(&self) -> Option<Duration> {
        self.handshake_timeout
    }

    /// Whether `TCP_NODELAY` is set.
    pub fn nodelay(&self) -> bool {
        self.nodelay
    }

    /// The session policy of connections the connector opens.
    pub fn session_policy(&self) -> StreamSessionPolicy {
        self.session
    }

    /// tungstenite's configuration as applied, with the size limits: the
    /// frame limit is at most the message limit.
    pub fn config(&self) -> &WebSocketConfig {
        &self.config
    }
}
