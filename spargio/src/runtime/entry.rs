//! Async entry points: build a runtime, run one future on it, shut down.
//!
//! They are `async` so any executor can drive them (a tokio `main`, a test
//! harness, [`block_on`](crate::block_on) in a sync `main`). A panic in the
//! entry future resumes on the caller, as it would in a plain `main`.

use std::future::Future;
use std::panic::resume_unwind;

use super::{RuntimeBuilder, RuntimeHandle};
use crate::error::RuntimeError;
use crate::messaging::ShardCtx;
use crate::shard_id::ShardId;
use crate::task::JoinError;

/// Runs `entry` on a default runtime and shuts the runtime down when it
/// returns. The future is stealable (it may move between shards).
///
/// ```
/// # fn main() -> Result<(), spargio::RuntimeError> {
/// let shards = spargio::block_on(spargio::run(|handle| async move {
///     handle.shard_count()
/// }))?;
/// assert!(shards >= 1);
/// # Ok(()) }
/// ```
pub async fn run<F, Fut>(entry: F) -> Result<Fut::Output, RuntimeError>
where
    F: FnOnce(RuntimeHandle) -> Fut,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    run_with(RuntimeBuilder::new(), entry).await
}

/// [`run`] with a configured builder.
pub async fn run_with<F, Fut>(
    builder: RuntimeBuilder,
    entry: F,
) -> Result<Fut::Output, RuntimeError>
where
    F: FnOnce(RuntimeHandle) -> Fut,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    let rt = builder.build()?;
    let handle = rt.handle();
    let task = handle.spawn_stealable(entry(handle.clone()))?;
    let out = task.await;
    rt.shutdown().await;
    finish(out)
}

/// Runs a `!Send` entry on shard `shard` of a runtime built from
/// `builder`: `entry` receives that shard's [`ShardCtx`] and the future it
/// returns may hold `Rc`/`RefCell` state.
///
/// ```
/// use std::rc::Rc;
///
/// # fn main() -> Result<(), spargio::RuntimeError> {
/// let builder = spargio::RuntimeBuilder::new().shards(2);
/// let on = spargio::block_on(spargio::run_local_on(builder, 1, |ctx| async move {
///     let shared = Rc::new(ctx.shard_id());
///     *shared
/// }))?;
/// assert_eq!(on, 1);
/// # Ok(()) }
/// ```
pub async fn run_local_on<F, Fut>(
    builder: RuntimeBuilder,
    shard: ShardId,
    entry: F,
) -> Result<Fut::Output, RuntimeError>
where
    F: FnOnce(ShardCtx) -> Fut + Send + 'static,
    Fut: Future + 'static,
    Fut::Output: Send + 'static,
{
    let rt = builder.build()?;
    let task = rt.handle().spawn_local_on(shard, entry)?;
    let out = task.await;
    rt.shutdown().await;
    finish(out)
}

fn finish<T>(out: Result<T, JoinError>) -> Result<T, RuntimeError> {
    match out {
        Ok(value) => Ok(value),
        Err(err) if err.is_panic() => resume_unwind(err.into_panic()),
        Err(_) => Err(RuntimeError::Shutdown),
    }
}
