//! spargio's owned-buffer [`AsyncRead`]/[`AsyncWrite`] on the TLS
//! streams, over the poll impls.
//!
//! TLS never hands a caller's buffer to the kernel (the kernel sees only
//! ciphertext, in rustls's or Compat's buffers), so an owned-buffer call
//! just lends its buffer to the poll functions for the duration of the
//! call and gives it back. A read zeroes the buffer's uninitialized tail
//! first (`futures_io` wants `&mut [u8]`): a memset, cheap next to the
//! decryption that fills it.

use std::future::poll_fn;
use std::pin::Pin;

use futures_io::{AsyncRead as _, AsyncWrite as _};
use spargio::buf::{BufResult, IoBuf, IoBufMut};
use spargio::io::{AsyncRead, AsyncWrite};

use crate::stream::{ClientTlsStream, ServerTlsStream};

/// `buf`'s whole capacity as an initialized slice: zeroes what is not
/// initialized yet (without recording it as initialized).
pub(crate) fn whole<B: IoBufMut>(buf: &mut B) -> &mut [u8] {
    let (init, total) = (buf.bytes_init(), buf.bytes_total());
    let ptr = buf.stable_mut_ptr();
    if init < total {
        // SAFETY: `ptr` is valid for writes of `bytes_total` bytes (the
        // `IoBufMut` contract); `init..total` lies inside.
        unsafe { std::ptr::write_bytes(ptr.add(init), 0, total - init) };
    }
    // SAFETY: all `total` bytes are initialized now, `ptr` is valid for
    // them, and the slice borrows `buf` mutably, so nothing else uses them.
    unsafe { std::slice::from_raw_parts_mut(ptr, total) }
}

macro_rules! owned_io_impls {
    ($name:ident) => {
        impl AsyncRead for $name {
            async fn read<B: IoBufMut>(&mut self, mut buf: B) -> BufResult<usize, B> {
                let res = {
                    let out = &mut buf;
                    poll_fn(|cx| Pin::new(&mut *self).poll_read(cx, whole(out))).await
                };
                if let Ok(n) = res {
                    // SAFETY: the read wrote (and zeroing initialized) the
                    // first `n <= bytes_total` bytes.
                    unsafe { buf.set_init(n) };
                }
                (res, buf)
            }
        }

        impl AsyncWrite for $name {
            async fn write<B: IoBuf>(&mut self, mut buf: B) -> BufResult<usize, B> {
                let res = {
                    // Moved in as `&mut` (not borrowed as `&`): the future
                    // stays `Send` for a `B` that is `Send` but not `Sync`.
                    let (this, data) = (&mut *self, &mut buf);
                    poll_fn(move |cx| Pin::new(&mut *this).poll_write(cx, data.as_init_slice()))
                        .await
                };
                (res, buf)
            }

            async fn flush(&mut self) -> std::io::Result<()> {
                poll_fn(|cx| Pin::new(&mut *self).poll_flush(cx)).await
            }

            async fn shutdown(&mut self) -> std::io::Result<()> {
                poll_fn(|cx| Pin::new(&mut *self).poll_close(cx)).await
            }
        }
    };
}

owned_io_impls!(ClientTlsStream);
owned_io_impls!(ServerTlsStream);
