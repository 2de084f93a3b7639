//! A UDP socket wrapper that can fall silent: once muted it sends nothing
//! and discards everything it receives, like a peer that vanished without
//! a CONNECTION_CLOSE. It wraps the socket quinn's tokio runtime would have
//! made, so unmuted it behaves exactly like a plain quinn endpoint.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

/// The switch shared by a [`MutableSocket`] and whoever mutes it.
#[derive(Clone, Debug, Default)]
pub struct Mute(Arc<AtomicBool>);

impl Mute {
    /// From now on the socket sends and receives nothing.
    pub fn mute(&self) {
        // Relaxed: a packet racing the switch may still go out, which a
        // vanishing peer's last packet does too.
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`Mute::mute`] was called.
    pub fn is_muted(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// `inner` unless muted.
pub struct MutableSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    mute: Mute,
}

impl MutableSocket {
    /// Wraps `inner`, muted by `mute`.
    pub fn new(inner: Arc<dyn AsyncUdpSocket>, mute: Mute) -> MutableSocket {
        MutableSocket { inner, mute }
    }
}

impl fmt::Debug for MutableSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MutableSocket")
            .field("muted", &self.mute.is_muted())
            .finish()
    }
}

impl AsyncUdpSocket for MutableSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        if self.mute.is_muted() {
            return Ok(());
        }
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        loop {
            match self.inner.poll_recv(cx, bufs, meta) {
                // Muted: drop what arrived and poll again, so the inner
                // socket registers the waker before we return Pending.
                Poll::Ready(Ok(_)) if self.mute.is_muted() => continue,
                other => return other,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}
