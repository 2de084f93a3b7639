//! Small helpers shared by the public types.

use std::future::Future;
use std::io;
use std::time::Duration;

use crate::metrics::QuicMetrics;

/// Runs `fut` under an optional operation timeout (`TimedOut`, counted).
pub(crate) async fn with_timeout<T>(
    limit: Option<Duration>,
    metrics: &QuicMetrics,
    fut: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    let res = match limit {
        None => fut.await,
        Some(d) => match spargio::time::timeout(d, fut).await {
            Ok(r) => r,
            Err(_) => {
                metrics.add(|m| &m.operation_timeouts, 1);
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "spargio-quic: operation_timeout elapsed",
                ));
            }
        },
    };
    if let Err(e) = &res {
        if e.kind() == io::ErrorKind::WouldBlock {
            metrics.add(|m| &m.backpressure_hits, 1);
        }
    }
    res
}
