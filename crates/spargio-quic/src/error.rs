//! Mapping quinn(-proto) errors to `io::Error` kinds. The original error
//! is kept as the `io::Error`'s source, so callers can downcast to it
//! (for example to read a peer's application close code).

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

/// `err` as an `io::Error` (kind from [`connection_error_kind`]).
pub(crate) fn from_connection_error(err: ConnectionError) -> io::Error {
    io::Error::new(connection_error_kind(&err), err)
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
        WriteError::Stopped(_) => io::ErrorKind::ConnectionReset,
        WriteError::ClosedStream => io::ErrorKind::NotConnected,
    };
    io::Error::new(kind, err)
}

/// A stream read error: reset by the peer is `ConnectionReset`.
pub(crate) fn from_read_error(err: ReadError) -> io::Error {
    let kind = match err {
        ReadError::Blocked => io::ErrorKind::WouldBlock,
        ReadError::Reset(_) => io::ErrorKind::ConnectionReset,
    };
    io::Error::new(kind, err)
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
/// `None` for any other error.
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
    err.get_ref()?.downcast_ref::<ConnectionError>()
}
