//! Handshake options and the timeout applied to a handshake.
//!
//! A timeout covers everything before the caller gets a stream: for a
//! connect the name resolution, the TCP connect and the TLS handshake; for
//! an accept the TLS handshake. When it passes, the future in progress is
//! dropped (which closes the socket: nothing is left running) and the call
//! returns `io::ErrorKind::TimedOut`.

use std::future::Future;
use std::io;
use std::time::Duration;

/// Options of a TLS handshake.
///
/// ```
/// use std::time::Duration;
/// use spargio_tls::HandshakeOptions;
///
/// let options = HandshakeOptions::default().with_timeout(Duration::from_secs(5));
/// assert_eq!(options.timeout, Some(Duration::from_secs(5)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandshakeOptions {
    /// How long the handshake (and, for a connect, the TCP connect before
    /// it) may take. When it passes, the socket is closed and the call
    /// returns `io::ErrorKind::TimedOut`. `None`: no limit.
    pub timeout: Option<Duration>,
}

impl HandshakeOptions {
    /// These options with `timeout` set.
    pub fn with_timeout(mut self, timeout: Duration) -> HandshakeOptions {
        self.timeout = Some(timeout);
        self
    }
}

/// Runs `fut` under `options`' timeout.
pub(crate) async fn with_timeout<T>(
    options: HandshakeOptions,
    fut: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match options.timeout {
        None => fut.await,
        Some(limit) => match spargio::timeout(limit, fut).await {
            Ok(res) => res,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("TLS handshake did not finish within {limit:?}"),
            )),
        },
    }
}
