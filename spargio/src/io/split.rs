//! Owned read and write halves of a shared duplex stream.
//!
//! A stream whose clones share one socket can already be read in one task
//! and written in another. `split` makes the roles types: a half that only
//! reads and one that only writes, neither `Clone`, so each direction has
//! one owner and its bytes one order. No lock is involved: each half holds
//! its own clone of the stream, and `reunite` checks a split id.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use super::traits::{AsyncRead, AsyncWrite};
use crate::buf::{BufResult, IoBuf, IoBufMut};

/// A duplex stream whose clones are handles to one underlying stream, so
/// that reading through one clone while writing through another is sound
/// and each direction stays one ordered byte sequence.
///
/// Implemented for [`TcpStream`](crate::net::TcpStream). Not for types
/// whose clone is an independent copy (a `Vec<u8>`): splitting one would
/// write into a different value than the one read.
pub trait SharedDuplex: AsyncRead + AsyncWrite + Clone {}

/// Source of split ids; only uniqueness matters, so `Relaxed` suffices
/// (the id travels to the halves with them, not through memory shared
/// with another thread).
static NEXT_SPLIT_ID: AtomicU64 = AtomicU64::new(0);

/// Splits `stream` into a reading and a writing half, each usable from its
/// own task. [`ReadHalf::reunite`] gets the stream back.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::io::{split, AsyncRead, AsyncWriteExt};
/// use spargio::net::{TcpListener, TcpStream};
///
/// let listener = TcpListener::bind_socket_addr(&handle, "127.0.0.1:0".parse().unwrap()).unwrap();
/// let addr = listener.local_addr().unwrap();
/// let client = TcpStream::connect_socket_addr(&handle, addr).await.unwrap();
/// let (_server, _) = listener.accept().await.unwrap();
///
/// let (reader, mut writer) = split(client);
/// let sender = handle.spawn_stealable(async move {
///     writer.write_all(b"hello".to_vec()).await.0.unwrap();
///     writer
/// }).unwrap();
/// let writer = sender.await.unwrap();
/// let _stream = reader.reunite(writer).unwrap();
/// # })).unwrap();
/// ```
pub fn split<T: SharedDuplex>(stream: T) -> (ReadHalf<T>, WriteHalf<T>) {
    let id = NEXT_SPLIT_ID.fetch_add(1, Ordering::Relaxed);
    let read = ReadHalf {
        inner: stream.clone(),
        id,
    };
    (read, WriteHalf { inner: stream, id })
}

/// The reading half of a [`split`] stream.
#[derive(Debug)]
pub struct ReadHalf<T> {
    inner: T,
    id: u64,
}

/// The writing half of a [`split`] stream. Dropping it does not shut the
/// write direction down (there is no async drop): call
/// [`AsyncWrite::shutdown`] for the peer to read end of stream.
#[derive(Debug)]
pub struct WriteHalf<T> {
    inner: T,
    id: u64,
}

// ===== impl ReadHalf =====

impl<T> ReadHalf<T> {
    /// The stream handle this half reads through.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// True when `other` came from the same [`split`] call.
    pub fn is_pair_of(&self, other: &WriteHalf<T>) -> bool {
        self.id == other.id
    }

    /// Puts the halves back together; an error (holding both halves) if
    /// they came from different splits.
    pub fn reunite(self, other: WriteHalf<T>) -> Result<T, ReuniteError<T>> {
        if self.is_pair_of(&other) {
            Ok(self.inner)
        } else {
            Err(ReuniteError(self, other))
        }
    }
}

impl<T: SharedDuplex> AsyncRead for ReadHalf<T> {
    fn read<B: IoBufMut>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send {
        self.inner.read(buf)
    }
}

// ===== impl WriteHalf =====

impl<T> WriteHalf<T> {
    /// The stream handle this half writes through.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// True when `other` came from the same [`split`] call.
    pub fn is_pair_of(&self, other: &ReadHalf<T>) -> bool {
        self.id == other.id
    }

    /// [`ReadHalf::reunite`] from this side.
    pub fn reunite(self, other: ReadHalf<T>) -> Result<T, ReuniteError<T>> {
        other.reunite(self)
    }
}

impl<T: SharedDuplex> AsyncWrite for WriteHalf<T> {
    fn write<B: IoBuf>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        self.inner.flush()
    }
    fn shutdown(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        self.inner.shutdown()
    }
}

// ===== impl ReuniteError =====

/// Halves from different [`split`] calls, handed back unchanged.
#[derive(Debug)]
pub struct ReuniteError<T>(pub ReadHalf<T>, pub WriteHalf<T>);

impl<T> fmt::Display for ReuniteError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tried to reunite halves of different streams")
    }
}

impl<T: fmt::Debug> Error for ReuniteError<T> {}
