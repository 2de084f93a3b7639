//! `tokio::io::{AsyncRead, AsyncWrite}` on the TLS streams (feature
//! `tokio-io`), over the `futures_io` impls: hyper runs over them through
//! `hyper_util::rt::TokioIo`.
//!
//! A read initializes the unfilled part of tokio's `ReadBuf` first
//! (`initialize_unfilled`, as `tokio-rustls` does): rustls's plaintext
//! reader wants `&mut [u8]`.

use std::io;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use crate::stream::{ClientTlsStream, ServerTlsStream};

macro_rules! tokio_io_impls {
    ($name:ident) => {
        impl tokio::io::AsyncRead for $name {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                let n = ready!(futures_io::AsyncRead::poll_read(
                    self,
                    cx,
                    buf.initialize_unfilled()
                ))?;
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
        }

        impl tokio::io::AsyncWrite for $name {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                futures_io::AsyncWrite::poll_write(self, cx, buf)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                futures_io::AsyncWrite::poll_write_vectored(self, cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                futures_io::AsyncWrite::poll_flush(self, cx)
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                futures_io::AsyncWrite::poll_close(self, cx)
            }
        }
    };
}

tokio_io_impls!(ClientTlsStream);
tokio_io_impls!(ServerTlsStream);
