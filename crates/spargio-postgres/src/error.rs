//! The pool's own errors: what can go wrong while getting a connection.
//! Queries on a connection fail with `tokio_postgres::Error`, as they do
//! on tokio.

use std::fmt;
use std::io;
use std::time::Duration;

/// Why [`Pool::client`](crate::Pool::client), [`Pool::get`](crate::Pool::get)
/// or [`PoolBuilder::open`](crate::PoolBuilder::open) gave no connection.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot be used: no host, an unparsable URL, a
    /// host this pool cannot reach (see the message).
    Config(String),
    /// No host of the configuration accepted a connection (the last
    /// host's error), or none answered within `connect_timeout`.
    Connect(io::Error),
    /// The server refused the session (authentication, an unknown
    /// database) or the startup handshake broke off.
    Postgres(tokio_postgres::Error),
    /// Every exclusive connection of the shard stayed checked out for
    /// the pool's `wait_timeout`.
    WaitTimeout(Duration),
    /// The runtime refused the connection's task (it is shutting down).
    Runtime(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(msg) => write!(f, "postgres pool configuration: {msg}"),
            Error::Connect(e) => write!(f, "postgres connect: {e}"),
            // tokio-postgres says only "db error" for the server's answer.
            Error::Postgres(e) => match e.as_db_error() {
                Some(db) => write!(f, "postgres session: {db}"),
                None => write!(f, "postgres session: {e}"),
            },
            Error::WaitTimeout(after) => write!(
                f,
                "postgres pool: no exclusive connection was returned within {after:?} \
                 (raise `exclusive_per_shard`, or hold connections for less time)"
            ),
            Error::Runtime(msg) => write!(f, "postgres pool: the runtime refused a task: {msg}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Connect(e) => Some(e),
            Error::Postgres(e) => Some(e),
            _ => None,
        }
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Error {
        Error::Postgres(e)
    }
}

impl From<spargio::RuntimeError> for Error {
    fn from(e: spargio::RuntimeError) -> Error {
        Error::Runtime(e.to_string())
    }
}
