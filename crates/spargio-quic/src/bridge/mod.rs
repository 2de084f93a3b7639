//! The bridge backend: quinn on one shared Tokio runtime.
//!
//! The runtime is created lazily on first use (two worker threads,
//! `spargio-quic-bridge`) and lives for the rest of the process. quinn's
//! endpoint and connection drivers (its I/O and timers) run there.
//!
//! Stream and connection operations (open, accept, read, write, stopped,
//! datagrams, closed) poll quinn's own futures on the caller's spargio
//! task: quinn's handles are thread-safe and its futures need no Tokio
//! context, only its drivers do. So they cost no hop, and a dropped one
//! loses nothing, as on the native backend: the stream stays with its
//! handle. Only the endpoint's `connect`, `accept` and `wait_idle` run
//! as tasks on the Tokio runtime (quinn spawns the new connection's
//! driver from there), awaited through their `JoinHandle`; a dropped one
//! aborts its task, which drops a connection whose handshake it awaited.

mod conn;
mod endpoint;

use std::future::Future;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

pub(crate) use conn::{BridgeConn, BridgeRecv, BridgeSend};
pub(crate) use endpoint::BridgeEndpoint;

use crate::metrics::{BRIDGE_CONTEXT_ENTERS, BRIDGE_SPAWNS};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("spargio-quic-bridge")
            .enable_all()
            .build()
            .expect("spargio-quic: cannot start the bridge's Tokio runtime")
    })
}

/// A handle to the bridge's Tokio runtime (created on first use), e.g.
/// to build a `quinn::Endpoint` for [`QuicEndpoint::from_endpoint`](crate::QuicEndpoint::from_endpoint)
/// or [`QuicBridge::with_endpoint`](crate::QuicBridge::with_endpoint).
pub fn bridge_runtime_handle() -> tokio::runtime::Handle {
    runtime().handle().clone()
}

/// Enters the runtime's context (quinn needs it to bind sockets).
pub(crate) fn enter() -> tokio::runtime::EnterGuard<'static> {
    // Relaxed: a diagnostic counter.
    BRIDGE_CONTEXT_ENTERS.fetch_add(1, Ordering::Relaxed);
    runtime().enter()
}

/// Aborts the spawned task when the awaiting future is dropped.
struct AbortOnDrop<T>(Option<tokio::task::JoinHandle<T>>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.abort();
        }
    }
}

/// Spawns `fut` on the bridge runtime and awaits it from spargio.
pub(crate) async fn spawn<F>(fut: F) -> io::Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    BRIDGE_SPAWNS.fetch_add(1, Ordering::Relaxed);
    let mut guard = AbortOnDrop(Some(runtime().spawn(fut)));
    let res = guard.0.as_mut().expect("present until completion").await;
    guard.0 = None;
    res.map_err(|e| io::Error::other(format!("spargio-quic: bridge task failed: {e}")))
}
