//! The pool's own errors: what can go wrong while getting a connection.
//! Queries on a connection fail with `tokio_postgres::Error`, as they do
//! on tokio. A pool error's `Display` carries its whole cause (see the
//! `std::error::Error` impl).

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
        let what = match self {
            Error::Config(_) => "postgres pool configuration",
            Error::Connect(_) => "postgres connect",
            Error::Postgres(_) => "postgres session",
            Error::WaitTimeout(_) => "postgres pool",
            Error::Runtime(_) => "postgres pool: the runtime refused a task",
        };
        write!(f, "{what}: {}", self.cause())
    }
}

/// The whole message is in `Display` (a log line's `{}` says what
/// happened, down to the I/O error under tokio-postgres's "error
/// communicating with the server"), so no source is given: a chain
/// printer would say it all twice. The error the pool got is in the
/// variant.
impl std::error::Error for Error {}

impl Error {
    /// What went wrong, without the pool's prefix: the inner error and
    /// each of its sources.
    pub(crate) fn cause(&self) -> String {
        match self {
            Error::Config(msg) | Error::Runtime(msg) => msg.clone(),
            Error::Connect(e) => chain(e),
            // tokio-postgres says only "db error" for the server's answer.
            Error::Postgres(e) => match e.as_db_error() {
                Some(db) => db.to_string(),
                None => chain(e),
            },
            Error::WaitTimeout(after) => format!(
                "no exclusive connection was returned within {after:?} \
                 (raise `exclusive_per_shard`, or hold connections for less time)"
            ),
        }
    }
}

/// `e`'s message and its sources' (`a: b: c`).
fn chain(e: &dyn std::error::Error) -> String {
    let mut said = e.to_string();
    let mut next = e.source();
    while let Some(source) = next {
        said = format!("{said}: {source}");
        next = source.source();
    }
    said
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
