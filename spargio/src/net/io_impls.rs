//! The owned-buffer io traits ([`AsyncRead`], [`AsyncWrite`],
//! [`SharedDuplex`]) for the socket streams.

use std::future::{ready, Future};
use std::io;

use super::{TcpStream, UnixStream};
use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::io::{AsyncRead, AsyncWrite, SharedDuplex};

/// [`AsyncRead`] and [`AsyncWrite`] for a stream type and a shared
/// reference to it (its methods take `&self`; clones share the socket),
/// plus [`SharedDuplex`]. `shutdown` closes the write direction only.
macro_rules! stream_impls {
    ($($ty:ty),* $(,)?) => {$(
        impl AsyncRead for $ty {
            fn read<B: IoBufMut>(
                &mut self,
                buf: B,
            ) -> impl Future<Output = BufResult<usize, B>> + Send {
                <$ty>::recv_buf(self, buf)
            }
        }

        impl AsyncRead for &$ty {
            fn read<B: IoBufMut>(
                &mut self,
                buf: B,
            ) -> impl Future<Output = BufResult<usize, B>> + Send {
                <$ty>::recv_buf(*self, buf)
            }
        }

        impl AsyncWrite for $ty {
            fn write<B: IoBuf>(
                &mut self,
                buf: B,
            ) -> impl Future<Output = BufResult<usize, B>> + Send {
                <$ty>::send_buf(self, buf)
            }
            fn flush(&mut self) -> impl Future<Output = io::Result<()>> + Send {
                ready(Ok(()))
            }
            fn shutdown(&mut self) -> impl Future<Output = io::Result<()>> + Send {
                <$ty>::shutdown(self, std::net::Shutdown::Write)
            }
        }

        impl AsyncWrite for &$ty {
            fn write<B: IoBuf>(
                &mut self,
                buf: B,
            ) -> impl Future<Output = BufResult<usize, B>> + Send {
                <$ty>::send_buf(*self, buf)
            }
            fn flush(&mut self) -> impl Future<Output = io::Result<()>> + Send {
                ready(Ok(()))
            }
            fn shutdown(&mut self) -> impl Future<Output = io::Result<()>> + Send {
                <$ty>::shutdown(*self, std::net::Shutdown::Write)
            }
        }

        impl SharedDuplex for $ty {}
    )*};
}

stream_impls!(TcpStream);
stream_impls!(UnixStream);
