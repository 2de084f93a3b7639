//! Owned-buffer async I/O traits and helpers (`spargio::io`).
//!
//! # Why completion-style traits
//!
//! The `futures`/tokio traits are *readiness* traits:
//! `poll_read(cx, &mut [u8])` borrows the caller's buffer for one poll. That
//! fits epoll, where the copy happens inside the poll. io_uring completes an
//! operation later, writing into memory the kernel was handed at
//! submission, and the future that submitted it may be dropped meanwhile.
//! A borrowed slice cannot be lent across that gap, so a poll-based adapter
//! has to read into a buffer of its own, stash the pending operation, and
//! copy out on a later poll: an extra copy and a hidden buffer per stream.
//!
//! So these traits move the buffer into the operation and hand it back with
//! the result, as the stream and file methods already do
//! ([`BufResult`](crate::buf::BufResult)):
//!
//! ```text
//! read(buf: B)  -> (io::Result<usize>, B)   fills B from its first byte
//! write(buf: B) -> (io::Result<usize>, B)   sends B's initialized bytes
//! ```
//!
//! (tokio-uring and monoio made the same choice.) Code written against the
//! poll-based traits (`futures::io`, and `tokio::io` with the `tokio-io`
//! feature) runs over [`Compat`], which adapts a stream to them.
//!
//! # Send futures
//!
//! The traits' futures are `Send`, and so the traits require `Send`
//! implementors. A spargio task is stealable by default, and a stealable
//! task must be `Send`; generic code (`copy`, [`BufReader`], the framed
//! reader) could not promise that of an arbitrary `impl Future` it awaits
//! on stable Rust, which cannot name "the future of `R::read` is `Send`"
//! at the use site. The cost: a `!Send` stream (say, one holding an `Rc`)
//! cannot implement these traits, and keeps its inherent methods instead.
//!
//! # Cancellation
//!
//! Dropping a read future whose operation is in flight loses whatever bytes
//! the kernel delivers to it (they land in the orphaned buffer, which the
//! runtime frees after the completion). The buffered types here keep their
//! buffered bytes across a dropped call, but a stream whose read was
//! abandoned mid-way is out of step with its peer: use timeouts to give up
//! on a connection, not to poll it.
//!
//! # Inherent methods come first
//!
//! [`TcpStream`](crate::net::TcpStream) has inherent `write_all`,
//! `read_exact` and `shutdown` methods with other signatures (borrowed
//! slices, a `Shutdown` direction), and Rust picks an inherent method over
//! a trait method of the same name. On a `TcpStream` itself, call the
//! trait's as `AsyncWriteExt::write_all(&mut stream, buf)`; generic code,
//! [`split`] halves and the wrappers here are unaffected.
//!
//! # Contents
//!
//! * [`AsyncRead`], [`AsyncWrite`] and their extensions [`AsyncReadExt`],
//!   [`AsyncWriteExt`]; implemented for [`TcpStream`](crate::net::TcpStream)
//!   (and `&TcpStream`), [`FileCursor`], `&[u8]` (reading) and `Vec<u8>`
//!   (writing).
//! * [`split`] a stream whose clones share one socket into owned halves.
//! * [`copy`] and [`copy_to_vec`].
//! * [`BufReader`] and [`BufWriter`].
//! * [`framed::LengthDelimited`]: length-prefixed frames.

mod armed_recv;
mod buf_reader;
mod buf_writer;
mod compat;
mod copy;
mod file_cursor;
pub mod framed;
mod impls;
mod linger;
mod split;
mod traits;

pub use buf_reader::BufReader;
pub use buf_writer::BufWriter;
pub use compat::{Compat, CompatStream};
pub use copy::{copy, copy_to_vec};
pub use file_cursor::FileCursor;
pub use split::{split, ReadHalf, ReuniteError, SharedDuplex, WriteHalf};
pub use traits::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
