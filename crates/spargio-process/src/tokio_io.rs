//! `tokio::io::{AsyncRead, AsyncWrite}` on the stdio streams (feature
//! `tokio-io`), over the same state as the `futures_io` impls
//! (`compat.rs`).

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use crate::stdio::{ChildStderr, ChildStdin, ChildStdout, Pipe};

fn poll_read_buf(
    poll: &mut crate::compat::PollReader,
    pipe: &Pipe,
    cx: &mut Context<'_>,
    buf: &mut tokio::io::ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    // SAFETY: `poll_read_uninit` only stores bytes into the unfilled part,
    // never de-initializes it.
    let unfilled = unsafe { buf.unfilled_mut() };
    let n = ready!(poll.poll_read_uninit(cx, pipe, unfilled))?;
    // SAFETY: on `Ok(n)` the first `n` unfilled bytes were written.
    unsafe { buf.assume_init(n) };
    buf.advance(n);
    Poll::Ready(Ok(()))
}

impl tokio::io::AsyncRead for ChildStdout {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        poll_read_buf(&mut this.poll, &this.pipe, cx, buf)
    }
}

impl tokio::io::AsyncRead for ChildStderr {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        poll_read_buf(&mut this.poll, &this.pipe, cx, buf)
    }
}

impl tokio::io::AsyncWrite for ChildStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_inner(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flush_inner(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_close_inner(cx)
    }
}
