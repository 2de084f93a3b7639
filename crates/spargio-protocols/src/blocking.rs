//! The blocking helpers: a closure on the blocking pool, its result (or
//! a timeout) back to async code.
//!
//! Every helper goes through [`run_blocking`]:
//!
//! 1. the closure is handed to `RuntimeHandle::spawn_blocking` (a runtime
//!    shutting down refuses it: `Other`);
//! 2. the caller awaits the join handle, under the timeout if one is set;
//! 3. past the timeout the caller gets `TimedOut` at once. The closure
//!    **keeps running** on its pool thread until it returns (a thread
//!    cannot be cancelled from outside); its result is then dropped. Give
//!    blocking clients their own timeouts too (socket read timeouts ...)
//!    so a timed-out call does not hold a pool thread for long;
//! 4. a closure that panics gives `Other` with the panic's message.

use std::future::Future;
use std::io;
use std::time::Duration;

use spargio::RuntimeHandle;

/// Options of a blocking call.
///
/// ```
/// use std::time::Duration;
/// use spargio_protocols::BlockingOptions;
///
/// let options = BlockingOptions::default().with_timeout(Duration::from_secs(5));
/// assert_eq!(options.timeout, Some(Duration::from_secs(5)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockingOptions {
    /// How long the caller waits. When it passes, the call returns
    /// `io::ErrorKind::TimedOut`; the closure keeps running on its thread
    /// until it returns (module docs). `None`: no limit.
    pub timeout: Option<Duration>,
}

impl BlockingOptions {
    /// These options with `timeout` set.
    pub fn with_timeout(mut self, timeout: Duration) -> BlockingOptions {
        self.timeout = Some(timeout);
        self
    }
}

/// Runs `f` on the blocking pool (module docs, steps 1-4).
fn run_blocking<F, R>(
    what: &'static str,
    handle: &RuntimeHandle,
    f: F,
    options: BlockingOptions,
) -> impl Future<Output = io::Result<R>> + Send + 'static
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let spawned = handle.spawn_blocking(f);
    async move {
        let join = spawned.map_err(|e| io::Error::other(format!("{what}: {e}")))?;
        let joined = match options.timeout {
            None => join.await,
            Some(limit) => spargio::timeout(limit, join).await.map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{what} did not finish within {limit:?} (it keeps running on its thread)"
                    ),
                )
            })?,
        };
        joined.map_err(|e| io::Error::other(format!("{what}: {e}")))
    }
}

macro_rules! helpers {
    ($plain:ident, $with:ident, $what:literal) => {
        #[doc = concat!("Runs `f` (", $what, " code that blocks) on the runtime's blocking pool and")]
        /// returns its result. The closure starts when this is called; the
        /// future waits for it.
        pub fn $plain<F, R>(
            handle: impl AsRef<RuntimeHandle>,
            f: F,
        ) -> impl Future<Output = io::Result<R>> + Send + 'static
        where
            F: FnOnce() -> R + Send + 'static,
            R: Send + 'static,
        {
            run_blocking(stringify!($plain), handle.as_ref(), f, BlockingOptions::default())
        }

        #[doc = concat!("[`", stringify!($plain), "`] with options: past the timeout the call returns")]
        /// `TimedOut`, while the closure keeps running on its thread until
        /// it returns (a thread cannot be cancelled).
        pub fn $with<F, R>(
            handle: impl AsRef<RuntimeHandle>,
            f: F,
            options: BlockingOptions,
        ) -> impl Future<Output = io::Result<R>> + Send + 'static
        where
            F: FnOnce() -> R + Send + 'static,
            R: Send + 'static,
        {
            run_blocking(stringify!($plain), handle.as_ref(), f, options)
        }
    };
}

helpers!(tls_blocking, tls_blocking_with_options, "TLS");
helpers!(ws_blocking, ws_blocking_with_options, "WebSocket");
helpers!(quic_blocking, quic_blocking_with_options, "QUIC");
