//! hyper's runtime traits on spargio.
//!
//! hyper is runtime-agnostic: it asks its caller for an executor (to run
//! HTTP/2 stream and connection futures), a timer (header read timeout,
//! HTTP/2 keep-alive pings, the client pool's idle reaper) and a transport
//! implementing `hyper::rt::{Read, Write}`. This module provides the three:
//!
//! * [`Executor`]: spawns hyper's futures pinned to the shard that spawns
//!   them (for a server: the connection's session shard, next to the
//!   connection that feeds them and writes their responses; off the
//!   runtime, stealable). Stealable stream tasks were measured slower:
//!   each finishing stream then woke the connection on its own and its
//!   response left in a write of its own (h2load, 16 connections x 32
//!   streams: 0.72x tokio's requests/s on one core, against 1.6x pinned).
//! * [`Timer`]: hyper's sleeps on the shard's timer wheel; arming,
//!   resetting and dropping one costs no syscall, and a reset moves the
//!   deadline in place instead of allocating a new sleep.
//! * [`Io`]: `hyper::rt::{Read, Write}` directly over spargio's streams,
//!   without tokio's traits in between. Over plain TCP a read lands in
//!   hyper's own buffer without zeroing it first
//!   ([`Compat::poll_read_uninit`](spargio::io::Compat::poll_read_uninit));
//!   over TLS the plaintext comes out of rustls.

mod executor;
mod io;
mod timer;

pub use executor::Executor;
pub(crate) use io::Serves;
pub use io::{Io, Transport};
pub use timer::Timer;
