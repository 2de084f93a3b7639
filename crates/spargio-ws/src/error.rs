//! tungstenite's errors as `io::Error`s with a kind to match on.
//!
//! The kind says what to do about a failure; the tungstenite error stays
//! inside for the details. The table is on [`io_error`].

use std::io;

use async_tungstenite::tungstenite::error::ProtocolError;
use async_tungstenite::tungstenite::Error as WsError;

/// Converts a tungstenite error into an `io::Error`. The tungstenite
/// error stays inside (`get_ref`, `into_inner`, then a downcast to
/// [`tungstenite::Error`](crate::tungstenite::Error)):
///
/// | tungstenite | kind |
/// | --- | --- |
/// | `Io(e)` | `e` itself, kind and all |
/// | `Capacity` (frame or message over the limit, too many headers) | `InvalidData` |
/// | `Protocol`, `Utf8`, `AttackAttempt`, `HttpFormat` | `InvalidData` |
/// | `Protocol(HandshakeIncomplete)` (peer left mid-handshake) | `UnexpectedEof` |
/// | `Protocol(ResetWithoutClosingHandshake)` | `ConnectionAborted` |
/// | `ConnectionClosed`, `AlreadyClosed`, `Protocol(SendAfterClosing)` | `BrokenPipe` |
/// | `Http(response)` (the server refused the upgrade) | `ConnectionRefused` |
/// | `Url` | `InvalidInput` |
/// | `WriteBufferFull` | `WouldBlock` |
/// | `Tls` | `Other` |
///
/// ```
/// use std::io::ErrorKind;
/// use spargio_ws::tungstenite::error::{CapacityError, Error};
///
/// let big = Error::Capacity(CapacityError::MessageTooLong { size: 9, max_size: 8 });
/// assert_eq!(spargio_ws::io_error(big).kind(), ErrorKind::InvalidData);
/// assert_eq!(spargio_ws::io_error(Error::AlreadyClosed).kind(), ErrorKind::BrokenPipe);
/// let io = Error::Io(ErrorKind::ConnectionReset.into());
/// assert_eq!(spargio_ws::io_error(io).kind(), ErrorKind::ConnectionReset);
/// ```
pub fn io_error(err: WsError) -> io::Error {
    let kind = match &err {
        WsError::Io(_) => {
            let WsError::Io(e) = err else { unreachable!() };
            return e;
        }
        WsError::Capacity(_)
        | WsError::Utf8(_)
        | WsError::AttackAttempt
        | WsError::HttpFormat(_) => io::ErrorKind::InvalidData,
        WsError::Protocol(p) => match p {
            ProtocolError::HandshakeIncomplete => io::ErrorKind::UnexpectedEof,
            ProtocolError::ResetWithoutClosingHandshake => io::ErrorKind::ConnectionAborted,
            ProtocolError::SendAfterClosing => io::ErrorKind::BrokenPipe,
            _ => io::ErrorKind::InvalidData,
        },
        WsError::ConnectionClosed | WsError::AlreadyClosed => io::ErrorKind::BrokenPipe,
        WsError::Http(_) => io::ErrorKind::ConnectionRefused,
        WsError::Url(_) => io::ErrorKind::InvalidInput,
        WsError::WriteBufferFull(_) => io::ErrorKind::WouldBlock,
        WsError::Tls(_) => io::ErrorKind::Other,
    };
    io::Error::new(kind, err)
}
