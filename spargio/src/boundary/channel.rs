//! The bounded request/reply channel.

use std::collections::VecDeque;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::deadline::Deadline;
use super::reply::Reply;
use super::stats::count;
use super::BoundaryError;

/// A bounded request/reply channel between runtimes (or threads).
///
/// Either side may live on any executor: the client in a tokio task and
/// the server in a spargio task, or the other way round, or on plain
/// threads with [`block_on`](crate::block_on). `capacity` bounds the
/// requests queued and not yet received.
///
/// # Panics
///
/// If `capacity` is zero.
///
/// ```
/// use spargio::boundary;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = spargio::Runtime::builder().shards(2).build()?;
/// let (client, server) = boundary::channel::<u64, u64>(16);
/// rt.handle().spawn_stealable(async move {
///     while let Ok(req) = server.recv().await {
///         let n = *req.request();
///         let _ = req.respond(n * n);
///     }
/// })?;
/// // Any executor (here: a plain thread) can call in: the request is
/// // accepted, then the ticket is awaited for the answer.
/// let ticket = spargio::block_on(client.call(12))?;
/// assert_eq!(spargio::block_on(ticket)?, 144);
/// // Both stages in one call:
/// assert_eq!(spargio::block_on(client.request(5))?, 25);
/// # Ok(()) }
/// ```
pub fn channel<Req, Resp>(
    capacity: usize,
) -> (BoundaryClient<Req, Resp>, BoundaryServer<Req, Resp>) {
    assert!(
        capacity > 0,
        "boundary::channel capacity must be at least 1"
    );
    let chan = Arc::new(Chan {
        capacity,
        state: Mutex::new(State {
            queue: VecDeque::with_capacity(capacity),
            server_waiters: Vec::new(),
            client_waiters: Vec::new(),
            clients: 1,
            servers: 1,
        }),
    });
    (
        BoundaryClient { chan: chan.clone() },
        BoundaryServer { chan },
    )
}

struct Chan<Req, Resp> {
    capacity: usize,
    state: Mutex<State<Req, Resp>>,
}

struct State<Req, Resp> {
    queue: VecDeque<Envelope<Req, Resp>>,
    server_waiters: Vec<Waker>,
    client_waiters: Vec<Waker>,
    clients: usize,
    servers: usize,
}

struct Envelope<Req, Resp> {
    req: Req,
    reply: Arc<Reply<Resp>>,
    deadline: Option<Instant>,
}

impl<Req, Resp> Chan<Req, Resp> {
    fn lock(&self) -> MutexGuard<'_, State<Req, Resp>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn wake_all(waiters: Vec<Waker>) {
    for w in waiters {
        w.wake();
    }
}

fn register(waiters: &mut Vec<Waker>, waker: &Waker) {
    if !waiters.iter().any(|w| w.will_wake(waker)) {
        waiters.push(waker.clone());
    }
}

// ===== impl BoundaryClient =====

/// The calling side of a [`channel`]. Cloneable; the channel closes for
/// the server once every client is dropped.
pub struct BoundaryClient<Req, Resp> {
    chan: Arc<Chan<Req, Resp>>,
}

impl<Req, Resp> fmt::Debug for BoundaryClient<Req, Resp> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundaryClient")
            .field("capacity", &self.chan.capacity)
            .finish()
    }
}

impl<Req, Resp> Clone for BoundaryClient<Req, Resp> {
    fn clone(&self) -> Self {
        self.chan.lock().clients += 1;
        BoundaryClient {
            chan: self.chan.clone(),
        }
    }
}

impl<Req, Resp> Drop for BoundaryClient<Req, Resp> {
    fn drop(&mut self) {
        let waiters = {
            let mut state = self.chan.lock();
            state.clients -= 1;
            if state.clients > 0 {
                return;
            }
            std::mem::take(&mut state.server_waiters)
        };
        wake_all(waiters);
    }
}

enum Enqueue<Req, Resp> {
    Queued(BoundaryTicket<Resp>),
    Full(Req),
}

impl<Req, Resp> BoundaryClient<Req, Resp> {
    fn try_enqueue(
        &self,
        req: Req,
        deadline: Option<Instant>,
        waker: Option<&Waker>,
    ) -> Result<Enqueue<Req, Resp>, BoundaryError> {
        let mut state = self.chan.lock();
        if state.servers == 0 {
            return Err(count(BoundaryError::Closed));
        }
        if state.queue.len() >= self.chan.capacity {
            if let Some(w) = waker {
                register(&mut state.client_waiters, w);
            }
            return Ok(Enqueue::Full(req));
        }
        let reply = Arc::new(Reply::new());
        state.queue.push_back(Envelope {
            req,
            reply: reply.clone(),
            deadline,
        });
        let waiters = std::mem::take(&mut state.server_waiters);
        drop(state);
        wake_all(waiters);
        Ok(Enqueue::Queued(BoundaryTicket {
            reply: Some(reply),
            deadline: None,
        }))
    }

    /// Queues a request without waiting: `Overloaded` when the channel is
    /// full, `Closed` when the server is gone. The ticket yields the reply.
    pub fn try_call(&self, req: Req) -> Result<BoundaryTicket<Resp>, BoundaryError> {
        match self.try_enqueue(req, None, None)? {
            Enqueue::Queued(ticket) => Ok(ticket),
            Enqueue::Full(_) => Err(count(BoundaryError::Overloaded)),
        }
    }

    /// Sends a request, waiting for room. Two stages, as in the reference
    /// crate: this resolves once the request is accepted (queued), or
    /// fails with `Closed`; the [`BoundaryTicket`] it yields is then
    /// awaited for the reply. [`BoundaryClient::request`] does both.
    ///
    /// ```
    /// use spargio::boundary;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let (client, server) = boundary::channel::<u32, u32>(4);
    /// let ticket = spargio::block_on(client.call(20))?; // accepted
    /// let req = spargio::block_on(server.recv())?;
    /// let n = *req.request();
    /// req.respond(n + 1)?;
    /// assert_eq!(spargio::block_on(ticket)?, 21); // answered
    /// # Ok(()) }
    /// ```
    pub async fn call(&self, req: Req) -> Result<BoundaryTicket<Resp>, BoundaryError> {
        self.enqueue_waiting(req, None).await
    }

    /// [`BoundaryClient::call`] bounded by `timeout`: waiting for room, and
    /// then the ticket's wait for the reply, end with `Timeout` at the
    /// deadline. The server sees the deadline on the request; a request
    /// whose caller timed out is skipped by `recv`.
    pub async fn call_with_timeout(
        &self,
        req: Req,
        timeout: Duration,
    ) -> Result<BoundaryTicket<Resp>, BoundaryError> {
        let deadline = Instant::now().checked_add(timeout);
        let mut ticket = self.enqueue_waiting(req, deadline).await?;
        ticket.deadline = deadline.map(Deadline::new);
        Ok(ticket)
    }

    /// Sends a request and waits for the reply: both stages of
    /// [`BoundaryClient::call`] in one future.
    pub async fn request(&self, req: Req) -> Result<Resp, BoundaryError> {
        self.call(req).await?.await
    }

    /// Both stages of [`BoundaryClient::call_with_timeout`] in one future,
    /// bounded by `timeout` as a whole.
    pub async fn request_with_timeout(
        &self,
        req: Req,
        timeout: Duration,
    ) -> Result<Resp, BoundaryError> {
        self.call_with_timeout(req, timeout).await?.await
    }

    async fn enqueue_waiting(
        &self,
        req: Req,
        deadline: Option<Instant>,
    ) -> Result<BoundaryTicket<Resp>, BoundaryError> {
        let mut req = Some(req);
        let mut timer = deadline.map(Deadline::new);
        poll_fn(|cx| {
            let r = req.take().expect("request present until queued");
            match self.try_enqueue(r, deadline, Some(cx.waker()))? {
                Enqueue::Queued(ticket) => Poll::Ready(Ok(ticket)),
                Enqueue::Full(r) => {
                    req = Some(r);
                    match timer.as_mut().map(|t| Pin::new(t).poll(cx)) {
                        Some(Poll::Ready(())) => Poll::Ready(Err(count(BoundaryError::Timeout))),
                        _ => Poll::Pending,
                    }
                }
            }
        })
        .await
    }
}

// ===== impl BoundaryServer =====

/// The serving side of a [`channel`]. Cloneable (several servers share the
/// queue); when every server is dropped, queued and future calls fail with
/// `Closed`.
pub struct BoundaryServer<Req, Resp> {
    chan: Arc<Chan<Req, Resp>>,
}

impl<Req, Resp> fmt::Debug for BoundaryServer<Req, Resp> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundaryServer")
            .field("capacity", &self.chan.capacity)
            .finish()
    }
}

impl<Req, Resp> Clone for BoundaryServer<Req, Resp> {
    fn clone(&self) -> Self {
        self.chan.lock().servers += 1;
        BoundaryServer {
            chan: self.chan.clone(),
        }
    }
}

impl<Req, Resp> Drop for BoundaryServer<Req, Resp> {
    fn drop(&mut self) {
        let (queued, waiters) = {
            let mut state = self.chan.lock();
            state.servers -= 1;
            if state.servers > 0 {
                return;
            }
            (
                std::mem::take(&mut state.queue),
                std::mem::take(&mut state.client_waiters),
            )
        };
        for env in queued {
            let _ = env.reply.complete(Err(count(BoundaryError::Closed)));
        }
        wake_all(waiters);
    }
}

impl<Req, Resp> BoundaryServer<Req, Resp> {
    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<BoundaryRequest<Req, Resp>, BoundaryError>> {
        let mut state = self.chan.lock();
        while let Some(env) = state.queue.pop_front() {
            if env.reply.is_abandoned() {
                // The caller timed out or went away while queued.
                count(BoundaryError::Canceled);
                continue;
            }
            let waiters = std::mem::take(&mut state.client_waiters);
            drop(state);
            wake_all(waiters);
            return Poll::Ready(Ok(BoundaryRequest {
                req: Some(env.req),
                reply: env.reply,
                deadline: env.deadline,
            }));
        }
        if state.clients == 0 {
            return Poll::Ready(Err(count(BoundaryError::Closed)));
        }
        register(&mut state.server_waiters, cx.waker());
        Poll::Pending
    }

    /// The next request; `Closed` once every client is gone and the queue
    /// is empty.
    pub async fn recv(&self) -> Result<BoundaryRequest<Req, Resp>, BoundaryError> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// [`BoundaryServer::recv`], giving up with `Timeout` after `timeout`.
    pub async fn recv_timeout(
        &self,
        timeout: Duration,
    ) -> Result<BoundaryRequest<Req, Resp>, BoundaryError> {
        let mut timer = pin!(Deadline::new(crate::time::deadline_after(timeout)));
        poll_fn(|cx| match self.poll_recv(cx) {
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => timer
                .as_mut()
                .poll(cx)
                .map(|()| Err(count(BoundaryError::Timeout))),
        })
        .await
    }
}

// ===== impl BoundaryRequest =====

/// A request taken from a channel. Answer it with
/// [`BoundaryRequest::respond`]; dropping it unanswered tells the caller
/// `Canceled`.
pub struct BoundaryRequest<Req, Resp> {
    req: Option<Req>,
    reply: Arc<Reply<Resp>>,
    deadline: Option<Instant>,
}

impl<Req: fmt::Debug, Resp> fmt::Debug for BoundaryRequest<Req, Resp> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundaryRequest")
            .field("request", &self.req)
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl<Req, Resp> BoundaryRequest<Req, Resp> {
    /// The payload.
    pub fn request(&self) -> &Req {
        self.req.as_ref().expect("request present until respond")
    }

    /// Takes the payload out (the request can still be answered).
    pub fn take_request(&mut self) -> Option<Req> {
        self.req.take()
    }

    /// The caller's deadline, if it called with a timeout.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// True when the caller has stopped waiting (timed out or dropped its
    /// ticket); answering would be wasted work.
    pub fn is_canceled(&self) -> bool {
        self.reply.is_abandoned()
    }

    /// Answers the caller. `Err(Canceled)` if it is gone (the response is
    /// dropped); never panics.
    pub fn respond(mut self, resp: Resp) -> Result<(), BoundaryError> {
        let reply = std::mem::replace(&mut self.reply, Arc::new(Reply::new()));
        std::mem::forget(self);
        reply.complete(Ok(resp)).map_err(count)
    }
}

impl<Req, Resp> Drop for BoundaryRequest<Req, Resp> {
    fn drop(&mut self) {
        if self.reply.complete(Err(BoundaryError::Canceled)).is_ok() {
            count(BoundaryError::Canceled);
        }
    }
}

// ===== impl BoundaryTicket =====

/// The pending reply of an accepted call (the second stage of
/// [`BoundaryClient::call`]); a future. Dropping it tells the server the
/// caller is gone.
pub struct BoundaryTicket<Resp> {
    reply: Option<Arc<Reply<Resp>>>,
    /// When the reply must have come: set by `call_with_timeout` and
    /// `wait_timeout`.
    deadline: Option<Deadline>,
}

impl<Resp> fmt::Debug for BoundaryTicket<Resp> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundaryTicket").finish()
    }
}

impl<Resp> BoundaryTicket<Resp> {
    /// Waits for the reply at most `timeout` (or until the deadline of
    /// `call_with_timeout`, if that is earlier), then gives up with
    /// `Timeout`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use spargio::boundary::{self, BoundaryError};
    ///
    /// let (client, _server) = boundary::channel::<u32, u32>(1);
    /// let ticket = spargio::block_on(client.call(1)).unwrap();
    /// let waited = spargio::block_on(ticket.wait_timeout(Duration::from_millis(5)));
    /// assert_eq!(waited, Err(BoundaryError::Timeout));
    /// ```
    pub async fn wait_timeout(mut self, timeout: Duration) -> Result<Resp, BoundaryError> {
        if let Some(at) = Instant::now().checked_add(timeout) {
            if self.deadline.as_ref().is_none_or(|d| at < d.at()) {
                self.deadline = Some(Deadline::new(at));
            }
        }
        self.await
    }
}

impl<Resp> Future for BoundaryTicket<Resp> {
    type Output = Result<Resp, BoundaryError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let reply = this
            .reply
            .as_ref()
            .expect("BoundaryTicket polled after it completed");
        if let Poll::Ready(out) = reply.poll(cx) {
            this.reply = None;
            return Poll::Ready(out);
        }
        match this.deadline.as_mut().map(|d| Pin::new(d).poll(cx)) {
            Some(Poll::Ready(())) => {
                if let Some(reply) = this.reply.take() {
                    reply.abandon();
                }
                Poll::Ready(Err(count(BoundaryError::Timeout)))
            }
            _ => Poll::Pending,
        }
    }
}

impl<Resp> Drop for BoundaryTicket<Resp> {
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            reply.abandon();
        }
    }
}
