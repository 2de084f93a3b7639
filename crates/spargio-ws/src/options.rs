//! `WsOptions`: what a connection may cost before it is refused.
//!
//! Two kinds of limit, both enforced while the peer sends, not after:
//!
//! * the **handshake timeout** bounds the whole opening (TCP connect, TLS,
//!   the HTTP upgrade): a peer that connects and says nothing holds a
//!   socket for that long at most, then the call returns `TimedOut` and
//!   the socket is closed;
//! * the **frame and message size limits** go to tungstenite's
//!   `WebSocketConfig`. A frame header announcing more than the limit is
//!   refused before its payload is read, so an oversized message costs
//!   no memory; [`WsStreamExt::recv`](crate::WsStreamExt::recv) then
//!   closes with code 1009.

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
/// ```
#[derive(Clone, Copy, Debug)]
pub struct WsOptions {
    handshake_timeout: Option<Duration>,
    nodelay: bool,
    session: StreamSessionPolicy,
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

    /// The largest frame payload accepted from the peer (`None`: no limit).
    pub fn with_max_frame_size(mut self, max: Option<usize>) -> WsOptions {
        self.config.max_frame_size = max;
        self
    }

    /// The largest message (all its frames together) accepted from the
    /// peer, and sent (`None`: no limit).
    pub fn with_max_message_size(mut self, max: Option<usize>) -> WsOptions {
        self.config.max_message_size = max;
        self
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
    /// shard with `ws.get_ref().tcp().spawn_on_session(..)`. Accepted
    /// streams keep the session their listener gave them.
    pub fn with_session_policy(mut self, policy: StreamSessionPolicy) -> WsOptions {
        self.session = policy;
        self
    }

    /// These options with tungstenite's whole configuration replaced (for
    /// its buffer sizes; the size limits above are two of its fields).
    pub fn with_config(mut self, config: WebSocketConfig) -> WsOptions {
        self.config = config;
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

    /// tungstenite's configuration, with the size limits.
    pub fn config(&self) -> &WebSocketConfig {
        &self.config
    }
}
