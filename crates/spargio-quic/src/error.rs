//! Mapping quinn(-proto) errors to `io::Error` kinds. A stream reset, a
//! stop and a lost connection are carried inside the `io::Error` as a
//! [`QuicError`] (all three have the kind `ConnectionReset` when the peer
//! caused them); other errors carry quinn's own error.

use std::fmt;
use std::io;

use quinn_proto::{ConnectError, ConnectionError, ReadError, SendDatagramError, WriteError};

/// The `io::ErrorKind` for a connection-level error:
/// `TimedOut` for the idle timeout, `ConnectionRefused` when a server
/// refused the connection (its accept backlog was full),
/// `ConnectionReset` when the peer closed, reset or aborted the
/// connection, `ConnectionAborted` when it was closed locally,
/// `InvalidData` for protocol violations.
pub(crate) fn connection_error_kind(err: &ConnectionError) -> io::ErrorKind {
    match err {
        ConnectionError::TimedOut => io::ErrorKind::TimedOut,
        ConnectionError::ConnectionClosed(c)
            if c.error_code == quinn_proto::TransportErrorCode::CONNECTION_REFUSED =>
        {
            io::ErrorKind::ConnectionRefused
        }
        ConnectionError::Reset
        | ConnectionError::ApplicationClosed(_)
        | ConnectionError::ConnectionClosed(_) => io::ErrorKind::ConnectionReset,
        ConnectionError::LocallyClosed => io::ErrorKind::ConnectionAborted,
        ConnectionError::VersionMismatch
        | ConnectionError::TransportError(_)
        | ConnectionError::CidsExhausted => io::ErrorKind::InvalidData,
    }
}

/// What ended a stream operation, inside the `io::Error` a stream or
/// connection operation returns (read it with [`quic_error`], or
/// `err.get_ref()` and `downcast_ref`). As quinn's `ReadError::Reset`,
/// `WriteError::Stopped` and `ConnectionLost`, on both backends, with
/// the full 62-bit application codes.
///
/// ```no_run
/// # async fn demo(mut recv: spargio_quic::QuicRecvStream) {
/// use spargio_quic::{quic_error, QuicError};
///
/// match recv.read_chunk(4096).await {
///     Ok(chunk) => println!("{chunk:?}"),
///     Err(err) => match quic_error(&err) {
///         Some(QuicError::Reset { code }) => println!("the peer reset the stream: {code}"),
///         Some(QuicError::Connection(close)) => println!("the connection ended: {close}"),
///         _ => println!("{err}"),
///     },
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuicError {
    /// The peer reset the stream (`RESET_STREAM`): reads fail with its
    /// application code.
    Reset {
        /// The peer's application error code.
        code: u64,
    },
    /// The peer stopped the stream (`STOP_SENDING`): writes and `finish`
    /// fail with its application code.
    Stopped {
        /// The peer's application error code.
        code: u64,
    },
    /// The connection ended: closed by the peer (its application close
    /// code and reason are in `ApplicationClosed`) or locally, reset,
    /// timed out or failed.
    Connection(ConnectionError),
}

impl fmt::Display for QuicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuicError::Reset { code } => write!(f, "stream reset by the peer (code {code})"),
            QuicError::Stopped { code } => write!(f, "stream stopped by the peer (code {code})"),
            QuicError::Connection(e) => write!(f, "connection lost: {e}"),
        }
    }
}

impl std::error::Error for QuicError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            QuicError::Connection(e) => Some(e),
            _ => None,
        }
    }
}

/// The [`QuicError`] inside `err`: a stream reset, a stop or a lost
/// connection; `None` for any other error.
pub fn quic_error(err: &io::Error) -> Option<&QuicError> {
    err.get_ref()?.downcast_ref::<QuicError>()
}

/// An application error code as QUIC carries it: a varint below 2^62.
/// A larger one is `InvalidInput`.
pub(crate) fn app_code(code: u64) -> io::Result<quinn_proto::VarInt> {
    quinn_proto::VarInt::from_u64(code).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("QUIC application error codes are below 2^62; {code} is not"),
        )
    })
}

/// [`app_code`] for a close, which has no error to return (`# Panics`
/// on the public `close` methods).
#[track_caller]
pub(crate) fn close_code(code: u64) -> quinn_proto::VarInt {
    match app_code(code) {
        Ok(code) => code,
        Err(err) => panic!("close: {err}"),
    }
}

/// `err` as an `io::Error` (kind from [`connection_error_kind`]).
pub(crate) fn from_connection_error(err: ConnectionError) -> io::Error {
    io::Error::new(connection_error_kind(&err), QuicError::Connection(err))
}

/// A stream reset by the peer with `code`.
pub(crate) fn stream_reset(code: quinn_proto::VarInt) -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        QuicError::Reset {
            code: code.into_inner(),
        },
    )
}

/// A stream stopped by the peer with `code`.
pub(crate) fn stream_stopped(code: quinn_proto::VarInt) -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        QuicError::Stopped {
            code: code.into_inner(),
        },
    )
}

/// A refused connect: a bad configuration or address is `InvalidInput`.
pub(crate) fn from_connect_error(err: ConnectError) -> io::Error {
    let kind = match err {
        ConnectError::EndpointStopping => io::ErrorKind::BrokenPipe,
        ConnectError::CidsExhausted => io::ErrorKind::AddrNotAvailable,
        _ => io::ErrorKind::InvalidInput,
    };
    io::Error::new(kind, err)
}

/// A stream write error: stopped by the peer is `ConnectionReset`.
pub(crate) fn from_write_error(err: WriteError) -> io::Error {
    let kind = match err {
        WriteError::Blocked => io::ErrorKind::WouldBlock,
        WriteError::Stopped(code) => return stream_stopped(code),
        WriteError::ClosedStream => io::ErrorKind::NotConnected,
    };
    io::Error::new(kind, err)
}

/// A stream read error: reset by the peer is `ConnectionReset`.
pub(crate) fn from_read_error(err: ReadError) -> io::Error {
    match err {
        ReadError::Blocked => io::Error::new(io::ErrorKind::WouldBlock, err),
        ReadError::Reset(code) => stream_reset(code),
    }
}

/// A datagram send error: too large or unsupported is `InvalidInput`.
pub(crate) fn from_datagram_error(err: SendDatagramError) -> io::Error {
    let kind = match err {
        SendDatagramError::Blocked(_) => io::ErrorKind::WouldBlock,
        _ => io::ErrorKind::InvalidInput,
    };
    io::Error::new(kind, err)
}

/// The error every operation on a shut-down driver or endpoint gets.
pub(crate) fn driver_closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "spargio-quic: the endpoint's driver has shut down",
    )
}

/// The code of a stream reset (a `ConnectionReset` error from
/// `read_chunk`/`read_to_end`) or stop (from a write), on either backend;
/// `None` for any other error. [`quic_error`] says which of the two (or
/// a lost connection) it was.
///
/// ```
/// let err = std::io::Error::new(
///     std::io::ErrorKind::ConnectionReset,
///     quinn_proto::ReadError::Reset(quinn_proto::VarInt::from_u32(7)),
/// );
/// assert_eq!(spargio_quic::stream_error_code(&err), Some(7));
/// ```
pub fn stream_error_code(err: &io::Error) -> Option<u64> {
    let inner = err.get_ref()?;
    match inner.downcast_ref::<QuicError>() {
        Some(QuicError::Reset { code } | QuicError::Stopped { code }) => return Some(*code),
        Some(QuicError::Connection(_)) => return None,
        None => {}
    }
    if let Some(ReadError::Reset(code)) = inner.downcast_ref::<ReadError>() {
        return Some(code.into_inner());
    }
    if let Some(WriteError::Stopped(code)) = inner.downcast_ref::<WriteError>() {
        return Some(code.into_inner());
    }
    if let Some(quinn::ReadError::Reset(code)) = inner.downcast_ref::<quinn::ReadError>() {
        return Some(code.into_inner());
    }
    if let Some(quinn::WriteError::Stopped(code)) = inner.downcast_ref::<quinn::WriteError>() {
        return Some(code.into_inner());
    }
    if let Some(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) =
        inner.downcast_ref::<quinn::ReadToEndError>()
    {
        return Some(code.into_inner());
    }
    None
}

/// The connection error behind `err` (a closed, reset or timed-out
/// connection), on either backend.
pub fn connection_error(err: &io::Error) -> Option<&ConnectionError> {
    let inner = err.get_ref()?;
    match inner.downcast_ref::<QuicError>() {
        Some(QuicError::Connection(e)) => Some(e),
        Some(_) => None,
        None => inner.downcast_ref::<ConnectionError>(),
    }
}
