//! tower layers on spargio's own timers, for what tower-http does with
//! tokio's.
//!
//! [`TimeoutLayer`] is tower-http's `TimeoutLayer` without the tokio
//! runtime: the handler's future races a [`spargio::time::Sleep`] armed on
//! the shard that serves the request, and when the sleep wins the handler
//! is dropped (whatever it awaited is cancelled) and the client gets the
//! layer's status (408 by default) with an empty body. tower-http's own
//! layer works too under the feature `tokio-compat`, which gives every
//! shard a tokio runtime; this one needs nothing and arms no tokio timer.

//!
//! [`AltSvcLayer`] advertises an HTTP/3 endpoint (`Alt-Svc`) on the
//! responses of the TCP server.

mod alt_svc;
mod timeout;

pub use alt_svc::{AltSvc, AltSvcFuture, AltSvcLayer};
pub use timeout::{Timeout, TimeoutFuture, TimeoutLayer};
