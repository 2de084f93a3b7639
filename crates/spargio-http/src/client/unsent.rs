//! A request hyper-util gave up on before sending it, sent again.
//!
//! HTTP/2 requests to a host share one connection, and while it is being
//! made they wait for it in hyper-util's pool. When the request whose
//! connect that is gets dropped (a timeout, a `select!` that lost), the
//! pool ends every waiter with a connect error (`CheckoutNoLongerWanted`,
//! hyperium/hyper#3199) although none of them reached the network. Our
//! client sends such a request again:
//!
//! 1. An HTTP/2-only client keeps a copy of each request's head, and
//!    wraps its body in [`Unsent`], which hands the body back when hyper
//!    drops it without ever polling it.
//! 2. A request that ends with that error and whose body came back (so
//!    not one byte of it was sent) is sent again, at most [`RETRIES`]
//!    times; any other outcome is the request's.
//!
//! HTTP/1 clients never wait on another request's connect, and pay
//! nothing: no copy, no return slot.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::Request;
use http_body::{Body, Frame, SizeHint};
use hyper_util::client::legacy;

/// Times a request is sent again after waiting for a connect another
/// request gave up.
pub(super) const RETRIES: usize = 8;

/// Where an unsent body comes back.
pub(super) type Slot<B> = Arc<Mutex<Option<B>>>;

/// A request body that comes back to `back` when dropped unpolled.
pub(super) struct Unsent<B> {
    body: Option<B>,
    polled: bool,
    back: Option<Slot<B>>,
}

impl<B> Unsent<B> {
    /// `body`, handed back to `back` (when given) if never polled.
    pub(super) fn new(body: B, back: Option<Slot<B>>) -> Unsent<B> {
        Unsent {
            body: Some(body),
            polled: false,
            back,
        }
    }
}

impl<B> std::fmt::Debug for Unsent<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unsent")
            .field("polled", &self.polled)
            .finish_non_exhaustive()
    }
}

impl<B: Body + Unpin> Body for Unsent<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        self.polled = true;
        match self.body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl<B> Drop for Unsent<B> {
    fn drop(&mut self) {
        if self.polled {
            return;
        }
        if let (Some(back), Some(body)) = (self.back.take(), self.body.take()) {
            // Nothing foreign runs under the lock: a poisoned one is whole.
            *back.lock().unwrap_or_else(|e| e.into_inner()) = Some(body);
        }
    }
}

/// A copy of a request's head, to send it again.
pub(super) struct Head {
    method: http::Method,
    uri: http::Uri,
    version: http::Version,
    headers: http::HeaderMap,
    extensions: http::Extensions,
}

impl Head {
    pub(super) fn of(parts: &http::request::Parts) -> Head {
        Head {
            method: parts.method.clone(),
            uri: parts.uri.clone(),
            version: parts.version,
            headers: parts.headers.clone(),
            extensions: parts.extensions.clone(),
        }
    }

    /// The request again, with `body`.
    pub(super) fn with<B>(&self, body: B) -> Request<B> {
        let mut req = Request::new(body);
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.version_mut() = self.version;
        *req.headers_mut() = self.headers.clone();
        *req.extensions_mut() = self.extensions.clone();
        req
    }
}

/// The pool ended the request while it waited for another request's
/// connect (module docs).
pub(super) fn is_abandoned_wait(e: &legacy::Error) -> bool {
    e.is_connect() && format!("{e:?}").contains("CheckoutNoLongerWanted")
}
