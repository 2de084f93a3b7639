//! [`QuicConnection`] and its `Rc`/`Send` handle wrappers.

use std::io;
use std::net::SocketAddr;
use std::ops::Deref;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use quinn_proto::{ConnectionError, ConnectionStats, Dir};

use crate::bridge::BridgeConn;
use crate::native::conn::ConnRef;
use crate::native::streams::{NativeRecv, NativeSend};
use crate::stream::{QuicRecvStream, QuicSendStream, RecvKind, SendKind};
use crate::util::{with_timeout, OpCtx};

#[derive(Clone, Debug)]
pub(crate) enum ConnKind {
    Native(ConnRef),
    Bridge(BridgeConn),
}

/// A QUIC connection. `Clone + Send + Sync`: clones share the connection,
/// and every method works from any shard (or any thread).
///
/// When the last clone and the last stream of the connection are dropped,
/// the connection is closed with code 0 (as quinn does).
#[derive(Clone, Debug)]
pub struct QuicConnection {
    pub(crate) kind: ConnKind,
    pub(crate) ctx: Arc<OpCtx>,
}

impl QuicConnection {
    pub(crate) fn new(kind: ConnKind, ctx: Arc<OpCtx>) -> QuicConnection {
        QuicConnection { kind, ctx }
    }

    fn dispatched(&self) {
        self.ctx.metrics.add(
            |m| match self.kind {
                ConnKind::Native(_) => &m.native_ops_dispatched,
                ConnKind::Bridge(_) => &m.bridge_ops_dispatched,
            },
            1,
        );
    }

    fn send_stream(&self, kind: SendKind) -> QuicSendStream {
        QuicSendStream {
            kind,
            ctx: self.ctx.clone(),
        }
    }

    fn recv_stream(&self, kind: RecvKind) -> QuicRecvStream {
        QuicRecvStream {
            kind,
            ctx: self.ctx.clone(),
        }
    }

    /// Opens a bidirectional stream (waits for the peer's stream credit).
    /// The peer sees it once something is written on it.
    pub async fn open_bi(&self) -> io::Result<(QuicSendStream, QuicRecvStream)> {
        self.dispatched();
        let pair = with_timeout(&self.ctx, async {
            match &self.kind {
                ConnKind::Native(c) => {
                    let id = c.open(Dir::Bi).await?;
                    bump(c, |s| &s.bi_opens);
                    Ok((
                        SendKind::Native(NativeSend::new(c.clone(), id)),
                        RecvKind::Native(NativeRecv::new(c.clone(), id)),
                    ))
                }
                ConnKind::Bridge(c) => {
                    let (s, r) = c.open_bi().await?;
                    Ok((SendKind::Bridge(s), RecvKind::Bridge(r)))
                }
            }
        })
        .await?;
        self.ctx.metrics.add(|m| &m.streams_opened, 1);
        Ok((self.send_stream(pair.0), self.recv_stream(pair.1)))
    }

    /// Opens a unidirectional stream.
    pub async fn open_uni(&self) -> io::Result<QuicSendStream> {
        self.dispatched();
        let kind = with_timeout(&self.ctx, async {
            match &self.kind {
                ConnKind::Native(c) => {
                    let id = c.open(Dir::Uni).await?;
                    bump(c, |s| &s.uni_opens);
                    Ok(SendKind::Native(NativeSend::new(c.clone(), id)))
                }
                ConnKind::Bridge(c) => Ok(SendKind::Bridge(c.open_uni().await?)),
            }
        })
        .await?;
        self.ctx.metrics.add(|m| &m.streams_opened, 1);
        Ok(self.send_stream(kind))
    }

    /// Accepts the next bidirectional stream the peer opened.
    /// Cancel-safe: a dropped `accept_bi` leaves the stream for the next
    /// call.
    pub async fn accept_bi(&self) -> io::Result<(QuicSendStream, QuicRecvStream)> {
        self.dispatched();
        let pair = with_timeout(&self.ctx, async {
            match &self.kind {
                ConnKind::Native(c) => {
                    let id = c.accept(Dir::Bi).await?;
                    Ok((
                        SendKind::Native(NativeSend::new(c.clone(), id)),
                        RecvKind::Native(NativeRecv::new(c.clone(), id)),
                    ))
                }
                ConnKind::Bridge(c) => {
                    let (s, r) = c.accept_bi().await?;
                    Ok((SendKind::Bridge(s), RecvKind::Bridge(r)))
                }
            }
        })
        .await?;
        self.ctx.metrics.add(|m| &m.streams_accepted, 1);
        Ok((self.send_stream(pair.0), self.recv_stream(pair.1)))
    }

    /// Accepts the next unidirectional stream the peer opened.
    pub async fn accept_uni(&self) -> io::Result<QuicRecvStream> {
        self.dispatched();
        let kind = with_timeout(&self.ctx, async {
            match &self.kind {
                ConnKind::Native(c) => {
                    let id = c.accept(Dir::Uni).await?;
                    Ok(RecvKind::Native(NativeRecv::new(c.clone(), id)))
                }
                ConnKind::Bridge(c) => Ok(RecvKind::Bridge(c.accept_uni().await?)),
            }
        })
        .await?;
        self.ctx.metrics.add(|m| &m.streams_accepted, 1);
        Ok(self.recv_stream(kind))
    }

    /// Sends an unreliable datagram (RFC 9221). If the send buffer is
    /// full the oldest queued datagram is dropped (as quinn does).
    /// `InvalidInput` when the peer does not accept datagrams or `data` is
    /// larger than [`max_datagram_size`](Self::max_datagram_size).
    pub fn send_datagram(&self, data: Bytes) -> io::Result<()> {
        self.dispatched();
        match &self.kind {
            ConnKind::Native(c) => c.send_datagram(data)?,
            ConnKind::Bridge(c) => c.send_datagram(data)?,
        }
        self.ctx.metrics.add(|m| &m.datagrams_sent, 1);
        Ok(())
    }

    /// Receives the next datagram.
    pub async fn read_datagram(&self) -> io::Result<Bytes> {
        self.dispatched();
        let d = with_timeout(&self.ctx, async {
            match &self.kind {
                ConnKind::Native(c) => c.read_datagram().await,
                ConnKind::Bridge(c) => c.read_datagram().await,
            }
        })
        .await?;
        self.ctx.metrics.add(|m| &m.datagrams_received, 1);
        Ok(d)
    }

    /// The largest datagram the peer accepts now (`None`: unsupported).
    pub fn max_datagram_size(&self) -> Option<usize> {
        match &self.kind {
            ConnKind::Native(c) => c.lock().conn.datagrams().max_size(),
            ConnKind::Bridge(c) => c.quinn().max_datagram_size(),
        }
    }

    /// Bytes free in the datagram send buffer.
    pub fn datagram_send_buffer_space(&self) -> usize {
        match &self.kind {
            ConnKind::Native(c) => c.lock().conn.datagrams().send_buffer_space(),
            ConnKind::Bridge(c) => c.quinn().datagram_send_buffer_space(),
        }
    }

    /// Closes the connection with an application `code` and `reason`;
    /// the peer's [`closed`](Self::closed) reports them, and every
    /// operation on this side fails with `ConnectionAborted`.
    ///
    /// # Panics
    ///
    /// If `code` is 2^62 or more (QUIC codes are 62-bit varints).
    #[track_caller]
    pub fn close(&self, code: u64, reason: &[u8]) {
        let code = crate::error::close_code(code);
        self.ctx.metrics.add(|m| &m.close_events, 1);
        match &self.kind {
            ConnKind::Native(c) => c.close(code, Bytes::copy_from_slice(reason)),
            ConnKind::Bridge(c) => c.quinn().close(code, reason),
        }
    }

    /// Waits until the connection ends and says why: e.g.
    /// `ConnectionError::ApplicationClosed` with the peer's code and
    /// reason, `TimedOut` for the idle timeout, `LocallyClosed` after
    /// [`close`](Self::close).
    ///
    /// Unlike other waiting operations it is not counted against
    /// `max_inflight_ops` (a peer cannot grow these waiters; each is freed
    /// when its future completes or is dropped), so it never fails.
    pub async fn closed(&self) -> ConnectionError {
        match &self.kind {
            ConnKind::Native(c) => c.closed().await,
            ConnKind::Bridge(c) => c.closed().await,
        }
    }

    /// Waits until the peer has acknowledged everything sent on the send
    /// streams this side finished so far (or the connection has ended).
    /// For a graceful close: [`close`](Self::close) discards what the
    /// peer has not acknowledged yet, so a server that closes right after
    /// its last response is handed over can cut that response short.
    ///
    /// Native backend: exact (quinn-proto reports each finished stream
    /// once it is acknowledged in full). The bridge backend cannot observe
    /// acknowledgements (quinn does not expose them per connection): it
    /// waits three round trips plus 50 ms, at most a second, which covers
    /// an acknowledgement and a repaired loss. Stay within a deadline of
    /// your own (`spargio::time::timeout`): a peer that stops reading
    /// keeps data unacknowledged.
    pub async fn acknowledged(&self) -> io::Result<()> {
        match &self.kind {
            ConnKind::Native(c) => c.acknowledged().await,
            ConnKind::Bridge(c) => {
                let rtt = c.quinn().rtt();
                let linger = (rtt * 3 + std::time::Duration::from_millis(50))
                    .min(std::time::Duration::from_secs(1));
                spargio::time::sleep(linger).await;
                Ok(())
            }
        }
    }

    /// Why the connection ended, if it has.
    pub fn close_reason(&self) -> Option<ConnectionError> {
        match &self.kind {
            ConnKind::Native(c) => c.lock().error.clone(),
            ConnKind::Bridge(c) => c.quinn().close_reason(),
        }
    }

    /// An id unique among this process's connections (preserved by
    /// [`to_local`](Self::to_local) and [`to_send_handle`](Self::to_send_handle)).
    pub fn stable_id(&self) -> u64 {
        match &self.kind {
            ConnKind::Native(c) => c.id,
            ConnKind::Bridge(c) => c.quinn().stable_id() as u64,
        }
    }

    /// The peer's address.
    pub fn remote_address(&self) -> SocketAddr {
        match &self.kind {
            ConnKind::Native(c) => c.lock().conn.remote_address(),
            ConnKind::Bridge(c) => c.quinn().remote_address(),
        }
    }

    /// quinn-proto's statistics for the connection.
    pub fn stats(&self) -> ConnectionStats {
        match &self.kind {
            ConnKind::Native(c) => c.lock().conn.stats(),
            ConnKind::Bridge(c) => c.quinn().stats(),
        }
    }

    /// The application protocol (ALPN) the handshake settled on.
    pub fn alpn(&self) -> Option<Vec<u8>> {
        let data = match &self.kind {
            ConnKind::Native(c) => c.lock().conn.crypto_session().handshake_data(),
            ConnKind::Bridge(c) => c.quinn().handshake_data(),
        }?;
        data.downcast::<quinn_proto::crypto::rustls::HandshakeData>()
            .ok()?
            .protocol
    }

    /// The peer's certificate chain (DER, leaf first). `NotConnected` when
    /// the peer presented none (a client without client auth).
    pub fn peer_cert_chain_der(&self) -> io::Result<Vec<Vec<u8>>> {
        match &self.kind {
            ConnKind::Native(c) => crate::native::peer_chain(c),
            ConnKind::Bridge(c) => c.peer_cert_chain_der(),
        }
    }

    /// The shard whose ring carries this connection's packets (native
    /// backend: its driver's shard; `None` on the bridge). Work on the
    /// connection's streams is cheapest there: spawn per-connection tasks
    /// pinned to it.
    pub fn shard(&self) -> Option<usize> {
        match &self.kind {
            ConnKind::Native(c) => Some(c.task_shard().unwrap_or(c.driver.owner_shard)),
            ConnKind::Bridge(_) => None,
        }
    }

    /// An `Rc`-based (`!Send`) handle for code that stays on one shard.
    pub fn to_local(&self) -> LocalQuicConnection {
        LocalQuicConnection {
            inner: Rc::new(self.clone()),
        }
    }

    /// An explicitly `Send` handle to the same connection.
    pub fn to_send_handle(&self) -> QuicSendConnection {
        QuicSendConnection {
            inner: self.clone(),
        }
    }
}

/// A stream pair, as the open and accept calls return it.
pub(crate) type StreamPair = (QuicSendStream, QuicRecvStream);

type Boxed<T> = std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<T>> + Send>>;

/// One poll-based open or accept, across its polls (`h3.rs`): the native
/// backend's waiter key, or the bridge's future. The owner calls
/// [`QuicConnection::release_slot`] when it gives up.
pub(crate) struct PollSlot<T> {
    key: u64,
    fut: Option<Boxed<T>>,
}

impl<T> Default for PollSlot<T> {
    fn default() -> Self {
        PollSlot { key: 0, fut: None }
    }
}

impl<T> std::fmt::Debug for PollSlot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollSlot")
            .field("key", &self.key)
            .field("bridge_future", &self.fut.is_some())
            .finish()
    }
}

impl<T> PollSlot<T> {
    fn poll_bridge(
        &mut self,
        cx: &mut std::task::Context<'_>,
        make: impl FnOnce() -> Boxed<T>,
    ) -> std::task::Poll<io::Result<T>> {
        let fut = self.fut.get_or_insert_with(make);
        let out = fut.as_mut().poll(cx);
        if out.is_ready() {
            self.fut = None;
        }
        out
    }
}

/// The poll-based opens and accepts behind the `h3` traits (`h3.rs`).
/// Not subject to `operation_timeout`: whoever polls owns the timing.
impl QuicConnection {
    fn native_send(&self, c: &ConnRef, id: quinn_proto::StreamId) -> QuicSendStream {
        self.send_stream(SendKind::Native(NativeSend::new(c.clone(), id)))
    }

    fn native_pair(&self, c: &ConnRef, id: quinn_proto::StreamId) -> StreamPair {
        (
            self.native_send(c, id),
            self.recv_stream(RecvKind::Native(NativeRecv::new(c.clone(), id))),
        )
    }

    /// One poll of an open or accept: on the native backend `native`
    /// polls the connection's waiters and `make` builds the stream(s) for
    /// the id; the bridge polls `bridge`'s future, kept in `slot`.
    fn poll_slot<T>(
        &self,
        slot: &mut PollSlot<T>,
        cx: &mut std::task::Context<'_>,
        native: impl FnOnce(
            &ConnRef,
            &mut u64,
            &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<quinn_proto::StreamId>>,
        make: impl FnOnce(&ConnRef, quinn_proto::StreamId) -> T,
        bridge: impl FnOnce(QuicConnection) -> Boxed<T>,
    ) -> std::task::Poll<io::Result<T>> {
        let c = match &self.kind {
            ConnKind::Native(c) => c,
            ConnKind::Bridge(_) => {
                let me = self.clone();
                return slot.poll_bridge(cx, || bridge(me));
            }
        };
        let id = std::task::ready!(native(c, &mut slot.key, cx))?;
        std::task::Poll::Ready(Ok(make(c, id)))
    }

    pub(crate) fn poll_open_bi(
        &self,
        slot: &mut PollSlot<StreamPair>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<StreamPair>> {
        self.poll_slot(
            slot,
            cx,
            |c, key, cx| c.poll_open(Dir::Bi, key, cx),
            |c, id| {
                bump(c, |s| &s.bi_opens);
                self.ctx.metrics.add(|m| &m.streams_opened, 1);
                self.native_pair(c, id)
            },
            |me| Box::pin(async move { me.open_bi().await }),
        )
    }

    pub(crate) fn poll_open_uni(
        &self,
        slot: &mut PollSlot<QuicSendStream>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<QuicSendStream>> {
        self.poll_slot(
            slot,
            cx,
            |c, key, cx| c.poll_open(Dir::Uni, key, cx),
            |c, id| {
                bump(c, |s| &s.uni_opens);
                self.ctx.metrics.add(|m| &m.streams_opened, 1);
                self.native_send(c, id)
            },
            |me| Box::pin(async move { me.open_uni().await }),
        )
    }

    pub(crate) fn poll_accept_bi(
        &self,
        slot: &mut PollSlot<StreamPair>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<StreamPair>> {
        self.poll_slot(
            slot,
            cx,
            |c, key, cx| c.poll_accept(Dir::Bi, key, cx),
            |c, id| {
                self.ctx.metrics.add(|m| &m.streams_accepted, 1);
                self.native_pair(c, id)
            },
            |me| Box::pin(async move { me.accept_bi().await }),
        )
    }

    pub(crate) fn poll_accept_uni(
        &self,
        slot: &mut PollSlot<QuicRecvStream>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<QuicRecvStream>> {
        self.poll_slot(
            slot,
            cx,
            |c, key, cx| c.poll_accept(Dir::Uni, key, cx),
            |c, id| {
                self.ctx.metrics.add(|m| &m.streams_accepted, 1);
                self.recv_stream(RecvKind::Native(NativeRecv::new(c.clone(), id)))
            },
            |me| Box::pin(async move { me.accept_uni().await }),
        )
    }

    /// Gives up a poll-based open or accept: its waiter goes (the bridge's
    /// future is dropped with the slot).
    pub(crate) fn release_slot<T>(&self, slot: &mut PollSlot<T>) {
        if let ConnKind::Native(c) = &self.kind {
            c.release_waiter(&mut slot.key);
        }
        slot.fut = None;
    }
}

fn bump(
    c: &ConnRef,
    f: impl FnOnce(&crate::native::DriverCountersRef) -> &std::sync::atomic::AtomicU64,
) {
    f(&c.driver.counters).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// An `Rc`-based (`!Send`) connection handle; derefs to
/// [`QuicConnection`]. See [`QuicConnection::to_local`].
#[derive(Clone, Debug)]
pub struct LocalQuicConnection {
    inner: Rc<QuicConnection>,
}

impl LocalQuicConnection {
    /// A `Send` handle to the same connection.
    pub fn to_send_handle(&self) -> QuicSendConnection {
        self.inner.to_send_handle()
    }
}

impl Deref for LocalQuicConnection {
    type Target = QuicConnection;
    fn deref(&self) -> &QuicConnection {
        &self.inner
    }
}

/// A `Send` connection handle; derefs to [`QuicConnection`]. See
/// [`QuicConnection::to_send_handle`].
#[derive(Clone, Debug)]
pub struct QuicSendConnection {
    inner: QuicConnection,
}

impl QuicSendConnection {
    /// An `Rc`-based handle to the same connection.
    pub fn to_local(&self) -> LocalQuicConnection {
        self.inner.to_local()
    }
}

impl Deref for QuicSendConnection {
    type Target = QuicConnection;
    fn deref(&self) -> &QuicConnection {
        &self.inner
    }
}
