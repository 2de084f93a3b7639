//! Small helpers shared by the public types: the per-endpoint operation
//! context and timeouts that work from any thread.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use spargio::RuntimeHandle;

use crate::metrics::QuicMetrics;

/// What every connection and stream of one endpoint shares.
#[derive(Debug)]
pub(crate) struct OpCtx {
    pub(crate) metrics: QuicMetrics,
    pub(crate) op_timeout: Option<Duration>,
    /// Arms timeouts on this runtime, so they work when awaited from a
    /// thread outside it (`None`: the caller's shard).
    pub(crate) rt: Option<RuntimeHandle>,
}

/// `fut`, or `Err(())` once `limit` has passed.
pub(crate) async fn deadline<F: Future>(
    rt: Option<&RuntimeHandle>,
    limit: Duration,
    fut: F,
) -> Result<F::Output, ()> {
    let mut fut = pin!(fut);
    let mut sleep = pin!(match rt {
        Some(h) => h.sleep(limit),
        None => spargio::time::sleep(limit),
    });
    poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        sleep.as_mut().poll(cx).map(Err)
    })
    .await
}

/// Runs `fut` under the optional operation timeout (`TimedOut`,
/// counted); counts `WouldBlock` refusals.
pub(crate) async fn with_timeout<T>(
    ctx: &OpCtx,
    fut: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    let res = match ctx.op_timeout {
        None => fut.await,
        Some(d) => match deadline(ctx.rt.as_ref(), d, fut).await {
            Ok(r) => r,
            Err(()) => {
                ctx.metrics.add(|m| &m.operation_timeouts, 1);
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "spargio-quic: operation_timeout elapsed",
                ));
            }
        },
    };
    if let Err(e) = &res {
        if e.kind() == io::ErrorKind::WouldBlock {
            ctx.metrics.add(|m| &m.backpressure_hits, 1);
        }
    }
    res
}
