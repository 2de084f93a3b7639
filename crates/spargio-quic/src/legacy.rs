//! The legacy bridge API: run quinn code on the bridge's Tokio runtime
//! and await it from spargio.

use std::future::Future;
use std::io;
use std::time::Duration;

use crate::bridge::spawn;

/// Options of the legacy bridge calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuicOptions {
    /// Fail with `TimedOut` if the work takes longer (default: no limit).
    pub timeout: Option<Duration>,
}

/// Runs `fut` (quinn code) on the bridge's Tokio runtime and awaits its
/// output from spargio.
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// let ep = spargio_quic::run(async {
///     spargio_quic::quinn::Endpoint::client("127.0.0.1:0".parse().unwrap())
/// })
/// .await??;
/// # Ok(()) }
/// ```
pub async fn run<F>(fut: F) -> io::Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    spawn(fut).await
}

/// [`run`] with options (a timeout aborts the Tokio task).
pub async fn run_with_options<F>(options: QuicOptions, fut: F) -> io::Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match options.timeout {
        None => spawn(fut).await,
        Some(t) => spawn(async move { tokio::time::timeout(t, fut).await })
            .await?
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    "spargio-quic: bridge call timed out",
                )
            }),
    }
}

/// A quinn endpoint plus the bridge runtime: closures get the endpoint
/// and run on the runtime.
#[derive(Clone, Debug)]
pub struct QuicBridge {
    endpoint: quinn::Endpoint,
    options: QuicOptions,
}

impl QuicBridge {
    /// Wraps `endpoint` (build it inside [`run`] or with
    /// [`bridge_runtime_handle`](crate::bridge_runtime_handle) so its I/O
    /// lives on the bridge runtime).
    pub fn with_endpoint(endpoint: quinn::Endpoint, options: QuicOptions) -> QuicBridge {
        QuicBridge { endpoint, options }
    }

    /// The wrapped endpoint.
    pub fn endpoint(&self) -> &quinn::Endpoint {
        &self.endpoint
    }

    /// Runs `f(endpoint)` on the bridge runtime.
    pub async fn run<F, Fut>(&self, f: F) -> io::Result<Fut::Output>
    where
        F: FnOnce(quinn::Endpoint) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: Send + 'static,
    {
        let ep = self.endpoint.clone();
        run_with_options(self.options, async move { f(ep).await }).await
    }
}
