//! The idle timeout (`header_read_timeout`) without a timer per request.
//!
//! hyper's own header-read timeout allocates a sleep and arms a timer for
//! every request, and an armed timer makes the shard read the clock on
//! every scheduler pass: measured at about a quarter of the server's
//! user-space time per keep-alive request. Here a connection costs nothing
//! per request beyond a few uncontended atomics:
//!
//! * [`ConnState`] counts the connection's requests and those in flight
//!   (from the request head until hyper drops the response body, i.e.
//!   the response has been written or abandoned).
//! * One sweeper task per server wakes every quarter of the timeout and
//!   looks at every connection (`hub.rs` keeps them): a connection with
//!   nothing in flight whose request count has not moved since the last
//!   sweep gets a strike; four strikes in a row (a whole timeout without
//!   a new request head) and it is told to close. So a client that sends
//!   no complete request head for the timeout, whether idle after a
//!   response or dribbling headers (slowloris), is cut off between 1 and
//!   1.25 timeouts after it went quiet.
//! * Closing: an HTTP/1.1 connection is dropped (what hyper does when its
//!   own header timeout fires); an HTTP/2 connection first gets GOAWAY
//!   (graceful shutdown) and is dropped at the next sweep if still open.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http::Response;

/// What the sweeper asked of a connection.
pub(crate) const EXPIRE_NONE: u8 = 0;
/// Close gracefully (HTTP/2 GOAWAY; HTTP/1.1 closes at once).
pub(crate) const EXPIRE_GRACEFUL: u8 = 1;
/// Close now.
pub(crate) const EXPIRE_NOW: u8 = 2;

/// Strikes (quiet sweeps) that expire a connection; the sweep interval is
/// the timeout divided by this.
pub(crate) const STRIKES: u32 = 4;

/// One connection's request counters and expiry flag.
#[derive(Debug, Default)]
pub(crate) struct ConnState {
    requests: AtomicU64,
    in_flight: AtomicUsize,
    expire: AtomicU8,
}

impl ConnState {
    pub(crate) fn expire_level(&self) -> u8 {
        self.expire.load(Ordering::Relaxed)
    }

    /// The sweeper's view: (requests so far, any in flight).
    pub(crate) fn activity(&self) -> (u64, bool) {
        (
            self.requests.load(Ordering::Relaxed),
            self.in_flight.load(Ordering::Relaxed) > 0,
        )
    }

    /// Raises the expiry level by one; returns the new level.
    pub(crate) fn escalate(&self) -> u8 {
        let next = if self.expire_level() == EXPIRE_NONE {
            EXPIRE_GRACEFUL
        } else {
            EXPIRE_NOW
        };
        self.expire.store(next, Ordering::Relaxed);
        next
    }

    fn begin(self: &Arc<ConnState>) -> InFlight {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }
}

/// One request in flight; ends when dropped.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<ConnState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Starts tracking a request (when the connection is tracked).
pub(crate) fn begin(state: &Option<Arc<ConnState>>) -> Option<InFlight> {
    state.as_ref().map(ConnState::begin)
}

pin_project_lite::pin_project! {
    /// The service's response future; the response body carries the
    /// request's [`InFlight`] until hyper drops it.
    pub(crate) struct TrackedFuture<F> {
        #[pin]
        pub(crate) inner: F,
        pub(crate) in_flight: Option<InFlight>,
    }
}

impl<F, B, E> Future for TrackedFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<TrackedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let res = ready!(this.inner.poll(cx));
        let in_flight = this.in_flight.take();
        Poll::Ready(res.map(|resp| {
            resp.map(|inner| TrackedBody {
                inner,
                _in_flight: in_flight,
            })
        }))
    }
}

pin_project_lite::pin_project! {
    /// A response body that ends its request's [`InFlight`] when dropped.
    pub(crate) struct TrackedBody<B> {
        #[pin]
        inner: B,
        _in_flight: Option<InFlight>,
    }
}

impl<B: http_body::Body> http_body::Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
