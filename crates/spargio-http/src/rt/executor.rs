//! `hyper::rt::Executor` on spargio.

use std::future::Future;

use spargio::{RuntimeHandle, ShardCtx};

/// hyper's executor: spawns each future pinned to the shard that spawns
/// it, or stealable when spawned off the runtime (module docs).
///
/// A future spawned after the runtime shut down is dropped (hyper then
/// sees its channel close and ends the connection).
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use hyper::rt::Executor as _;
///
/// let ran = spargio::CancellationToken::new();
/// let flag = ran.clone();
/// spargio_http::rt::Executor::new(&handle).execute(async move { flag.cancel() });
/// ran.cancelled().await; // the spawned future ran
/// # })).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct Executor {
    handle: RuntimeHandle,
}

impl Executor {
    /// An executor spawning onto `handle`'s runtime.
    pub fn new(handle: impl AsRef<RuntimeHandle>) -> Executor {
        Executor {
            handle: handle.as_ref().clone(),
        }
    }
}

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        let here = ShardCtx::current()
            .filter(|ctx| ctx.handle().same_runtime(&self.handle))
            .map(|ctx| ctx.shard_id());
        let _ = match here {
            Some(shard) => self.handle.spawn_pinned(shard, fut),
            None => self.handle.spawn_stealable(fut),
        };
    }
}
