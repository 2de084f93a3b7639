//! `hyper::rt::{Read, Write}` over spargio's streams.

use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use spargio::io::Compat;
use spargio::net::{TcpStream, UnixStream};
use spargio_tls::{ClientTlsStream, ServerTlsStream};

/// A byte stream hyper can run over: what [`Io`] needs from it.
///
/// Implemented for spargio's plain streams (through
/// [`Compat`](spargio::io::Compat)) and the TLS streams of
/// `spargio-tls`. The read fills memory that may be uninitialized; an
/// implementation over a `futures_io` reader zeroes it first.
pub trait Transport: Unpin + Send + 'static {
    /// Reads into `out`; on `Ok(n)` its first `n` bytes are initialized.
    /// `Ok(0)` with a non-empty `out` is end of stream.
    fn poll_read_uninit(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>>;
    /// Writes some of `buf`.
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>>;
    /// Writes some of `bufs`; the default writes the first non-empty one.
    fn poll_write_vectored(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let buf = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| b);
        self.poll_write(cx, buf)
    }
    /// Whether `poll_write_vectored` takes several slices at once.
    fn is_write_vectored(&self) -> bool {
        false
    }
    /// Flushes bytes accepted but not yet sent.
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// Flushes, then ends the write direction.
    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// The peer's address, where the transport has one.
    fn peer_addr(&self) -> Option<SocketAddr> {
        None
    }
}

macro_rules! compat_transport {
    ($stream:ty, $peer:expr) => {
        impl Transport for Compat<$stream> {
            fn poll_read_uninit(
                &mut self,
                cx: &mut Context<'_>,
                out: &mut [MaybeUninit<u8>],
            ) -> Poll<io::Result<usize>> {
                Compat::poll_read_uninit(self, cx, out)
            }

            fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                futures_io::AsyncWrite::poll_write(Pin::new(self), cx, buf)
            }

            fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                futures_io::AsyncWrite::poll_flush(Pin::new(self), cx)
            }

            fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                futures_io::AsyncWrite::poll_close(Pin::new(self), cx)
            }

            fn peer_addr(&self) -> Option<SocketAddr> {
                let peer: fn(&$stream) -> Option<SocketAddr> = $peer;
                peer(self.get_ref())
            }
        }
    };
}

compat_transport!(TcpStream, |s| s.peer_addr().ok());
compat_transport!(UnixStream, |_| None);

/// A TLS record carries at most 16 KiB of plaintext: zeroing more of
/// hyper's buffer per read buys nothing.
const TLS_READ: usize = 16 * 1024 + 256;

macro_rules! tls_transport {
    ($stream:ty) => {
        impl Transport for $stream {
            fn poll_read_uninit(
                &mut self,
                cx: &mut Context<'_>,
                out: &mut [MaybeUninit<u8>],
            ) -> Poll<io::Result<usize>> {
                let len = out.len().min(TLS_READ);
                let out = &mut out[..len];
                out.fill(MaybeUninit::new(0));
                // SAFETY: every byte of `out` was just initialized (zeroed),
                // and `MaybeUninit<u8>` has `u8`'s layout.
                let out = unsafe { &mut *(out as *mut [MaybeUninit<u8>] as *mut [u8]) };
                futures_io::AsyncRead::poll_read(Pin::new(self), cx, out)
            }

            fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                futures_io::AsyncWrite::poll_write(Pin::new(self), cx, buf)
            }

            fn poll_write_vectored(
                &mut self,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                futures_io::AsyncWrite::poll_write_vectored(Pin::new(self), cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                // rustls takes the slices into one record.
                true
            }

            fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                futures_io::AsyncWrite::poll_flush(Pin::new(self), cx)
            }

            fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                futures_io::AsyncWrite::poll_close(Pin::new(self), cx)
            }

            fn peer_addr(&self) -> Option<SocketAddr> {
                self.get_ref().peer_addr().ok()
            }
        }
    };
}

tls_transport!(ClientTlsStream);
tls_transport!(ServerTlsStream);

/// A [`Transport`] seen through hyper's I/O traits (module docs).
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::io::Compat;
/// use spargio::net::UnixStream;
/// use spargio_http::rt::Io;
///
/// let (a, b) = UnixStream::pair(&handle).unwrap();
/// let io = Io::new(Compat::new(a)); // implements hyper::rt::{Read, Write}
/// # drop((io, b));
/// # })).unwrap();
/// ```
#[derive(Debug)]
pub struct Io<T> {
    inner: T,
    /// Server side: which protocol the first bytes read are (`sniff`).
    sniff: Option<Sniff>,
}

/// HTTP/2's connection preface: the first bytes of every HTTP/2
/// connection, and what hyper-util's auto builder looks for.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocols a server connection may speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Serves {
    pub(crate) http1: bool,
    pub(crate) http2: bool,
}

/// Tells HTTP/2 from HTTP/1.1 by the first bytes read, as hyper-util's
/// auto builder does (all of HTTP/2's preface, or not), however the reads
/// split them.
#[derive(Debug)]
struct Sniff {
    /// Set once the bytes read are HTTP/2's preface.
    h2: Arc<AtomicBool>,
    /// How many of the preface's bytes the bytes read so far match.
    matched: usize,
    serves: Serves,
}

impl Sniff {
    /// Looks at the next bytes read: `Some(is_h2)` once they decide.
    fn feed(&mut self, bytes: &[u8]) -> Option<bool> {
        let rest = &H2_PREFACE[self.matched..];
        let n = rest.len().min(bytes.len());
        if bytes[..n] != rest[..n] {
            return Some(false);
        }
        self.matched += n;
        (self.matched == H2_PREFACE.len()).then_some(true)
    }
}

impl<T: Transport> Io<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Io<T> {
        Io { inner, sniff: None }
    }

    /// Server side: looks at the peer's first bytes. The flag returned is
    /// set once they are HTTP/2's preface; a protocol `serves` leaves out
    /// fails the read that tells it (hyper never sees its bytes: hyper-util's
    /// auto builder would serve it whatever it was configured to serve).
    pub(crate) fn sniff(&mut self, serves: Serves) -> Arc<AtomicBool> {
        let h2 = Arc::new(AtomicBool::new(false));
        self.sniff = Some(Sniff {
            h2: h2.clone(),
            matched: 0,
            serves,
        });
        h2
    }

    /// The transport.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The transport, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// The transport.
    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<T: Transport> hyper::rt::Read for Io<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: `poll_read_uninit` only writes initialized bytes into
        // the unfilled part and never de-initializes any of it.
        let unfilled = unsafe { buf.as_mut() };
        let this = self.get_mut();
        let n = ready!(this.inner.poll_read_uninit(cx, unfilled))?;
        if let Some(sniff) = &mut this.sniff {
            // SAFETY: on `Ok(n)` the first `n` bytes of the unfilled part
            // were written (the `Transport` contract).
            let read = unsafe { std::slice::from_raw_parts(unfilled.as_ptr().cast::<u8>(), n) };
            if let Some(is_h2) = sniff.feed(read) {
                sniff.h2.store(is_h2, Ordering::Relaxed);
                let served = if is_h2 {
                    sniff.serves.http2
                } else {
                    sniff.serves.http1
                };
                this.sniff = None;
                if !served {
                    return Poll::Ready(Err(not_served(is_h2)));
                }
            }
        }
        // SAFETY: as above.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

/// The error a connection in a protocol the server does not serve ends
/// with.
fn not_served(is_h2: bool) -> io::Error {
    let what = if is_h2 { "HTTP/2" } else { "HTTP/1.1" };
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{what} is not served on this connection"),
    )
}

impl<T: Transport> hyper::rt::Write for Io<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().inner.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().inner.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().inner.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().inner.poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::{Serves, Sniff, H2_PREFACE};

    fn sniff() -> Sniff {
        Sniff {
            h2: Default::default(),
            matched: 0,
            serves: Serves {
                http1: true,
                http2: true,
            },
        }
    }

    /// The preface is HTTP/2 however the reads split it, and only once
    /// all of it has arrived.
    #[test]
    fn the_preface_split_over_reads_is_h2() {
        for split in 1..H2_PREFACE.len() {
            let mut s = sniff();
            let (a, b) = H2_PREFACE.split_at(split);
            assert_eq!(s.feed(a), None, "split at {split}");
            assert_eq!(s.feed(b), Some(true), "split at {split}");
        }
        let mut s = sniff();
        for (i, byte) in H2_PREFACE.iter().enumerate() {
            let want = (i + 1 == H2_PREFACE.len()).then_some(true);
            assert_eq!(s.feed(std::slice::from_ref(byte)), want, "byte {i}");
        }
    }

    /// HTTP/1.1 is told at its first byte off the preface, even one that
    /// shares the preface's start.
    #[test]
    fn anything_else_is_http1() {
        assert_eq!(sniff().feed(b"GET / HTTP/1.1\r\n"), Some(false));
        let mut s = sniff();
        assert_eq!(s.feed(b"PRI * HTTP/"), None);
        assert_eq!(s.feed(b"1.1\r\n"), Some(false));
        assert_eq!(sniff().feed(b""), None);
    }
}
