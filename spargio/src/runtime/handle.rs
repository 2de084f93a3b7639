//! `RuntimeHandle`: spawning, messaging and stats from anywhere.

use std::future::Future;
use std::sync::Arc;

use super::{BackendKind, IoUringRefusal};
use crate::error::RuntimeError;
use crate::messaging::{RemoteShard, ShardCtx};
use crate::scheduler::{self, Shared};
use crate::shard_id::ShardId;
use crate::stats::{Counters, RuntimeStats};
use crate::task::meta::TaskKind;
use crate::task::spawn;
use crate::task::{JoinHandle, TaskPlacement};
use crate::time::Sleep;

/// A cheap, cloneable handle to a runtime. `Send + Sync`: use it from any
/// thread, including threads of other runtimes (a tokio task can spawn
/// onto spargio through it).
///
/// Constructors and helpers that need a runtime (`File::open`,
/// `TcpListener::bind`, `fs::read_dir`, ...) take `impl AsRef<RuntimeHandle>`,
/// so they accept the handle by value or by reference alike:
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::net::TcpListener;
///
/// let by_ref = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
/// let by_value = TcpListener::bind(handle.clone(), "127.0.0.1:0").await.unwrap();
/// assert_ne!(by_ref.local_addr().unwrap(), by_value.local_addr().unwrap());
/// # })).unwrap();
/// ```
#[derive(Clone)]
pub struct RuntimeHandle {
    pub(crate) shared: Arc<Shared>,
}

/// Lets handle-taking calls accept `RuntimeHandle` and `&RuntimeHandle`
/// (std's blanket `impl AsRef<U> for &T` covers the reference).
impl AsRef<RuntimeHandle> for RuntimeHandle {
    fn as_ref(&self) -> &RuntimeHandle {
        self
    }
}

impl std::fmt::Debug for RuntimeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeHandle")
            .field("shards", &self.shard_count())
            .finish()
    }
}

impl RuntimeHandle {
    /// The runtime of the calling task (any spargio task, or a tokio task
    /// on a shard), as tokio's `Handle::current()`.
    ///
    /// # Panics
    ///
    /// Outside a spargio task (a plain thread, the blocking pool, another
    /// runtime's thread); [`try_current`](RuntimeHandle::try_current)
    /// returns `None` there instead.
    ///
    /// ```
    /// # spargio::block_on(spargio::run(|handle| async move {
    /// let here = spargio::RuntimeHandle::current();
    /// assert!(here.same_runtime(&handle));
    /// # })).unwrap();
    /// ```
    #[track_caller]
    pub fn current() -> RuntimeHandle {
        RuntimeHandle::try_current().expect(
            "RuntimeHandle::current() called outside a spargio task: \
             pass the runtime's handle (from `spargio::run`, `Runtime::handle`) instead",
        )
    }

    /// The runtime of the calling task, or `None` outside a spargio task.
    pub fn try_current() -> Option<RuntimeHandle> {
        ShardCtx::current().map(|ctx| ctx.handle())
    }

    /// The backend this runtime runs on: [`BackendKind::IoUring`] or
    /// [`BackendKind::Epoll`] (never `Auto`, which is resolved by
    /// `build()`).
    pub fn backend(&self) -> BackendKind {
        self.shared.config.backend
    }

    /// Why a runtime built with [`BackendKind::Auto`] runs on epoll: the
    /// errno and the cause io_uring was refused with. `None` on io_uring,
    /// and when epoll was asked for.
    ///
    /// ```
    /// # fn main() -> Result<(), spargio::RuntimeError> {
    /// let rt = spargio::Runtime::builder().shards(1).build()?;
    /// if let Some(refusal) = rt.handle().io_uring_refusal() {
    ///     eprintln!("running on epoll: {refusal}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn io_uring_refusal(&self) -> Option<IoUringRefusal> {
        self.shared.config.io_uring_refusal.clone()
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shared.shard_count()
    }

    /// A sending handle to `shard`. An out-of-range index is reported by
    /// each send as `SendError::InvalidShard`.
    pub fn remote(&self, shard: ShardId) -> RemoteShard {
        RemoteShard::new(self.shared.clone(), shard)
    }

    /// Runs `fut` on `shard`; it never migrates.
    ///
    /// The future must be `Send` because it is built on the calling thread;
    /// for `!Send` state use [`RuntimeHandle::spawn_local_on`]:
    ///
    /// ```compile_fail
    /// # let rt = spargio::Runtime::builder().shards(1).build().unwrap();
    /// let rc = std::rc::Rc::new(1);
    /// rt.handle().spawn_pinned(0, async move { *rc });
    /// ```
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = spargio::Runtime::builder().shards(2).build()?;
    /// let on = rt.handle().spawn_pinned(1, async {
    ///     spargio::ShardCtx::current().unwrap().shard_id()
    /// })?;
    /// assert_eq!(spargio::block_on(on)?, 1);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn spawn_pinned<F>(
        &self,
        shard: ShardId,
        fut: F,
    ) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if spawn::boxes::<F>() {
            return self.spawn_pinned_inner(shard, Box::pin(fut));
        }
        self.spawn_pinned_inner(shard, fut)
    }

    #[track_caller]
    fn spawn_pinned_inner<F>(
        &self,
        shard: ShardId,
        fut: F,
    ) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.check_shard(shard)?;
        let (runnable, handle) = spawn::build(&self.shared, TaskKind::Pinned(shard), shard, fut)?;
        Counters::bump_shared(&self.shared.shards[shard].counters.spawn_pinned);
        scheduler::submit_pinned(&self.shared, shard, runnable);
        Ok(handle)
    }

    /// Runs `fut` on the least-loaded shard (chosen now; among equals, the
    /// calling shard, or from outside the runtime the shard on the caller's
    /// CPU); idle shards may steal it before it runs, and it may move
    /// whenever it is woken on another shard. Hence `Send`:
    ///
    /// ```compile_fail
    /// # let rt = spargio::Runtime::builder().shards(1).build().unwrap();
    /// rt.handle().spawn_stealable(async {
    ///     let rc = std::rc::Rc::new(1);
    ///     std::future::ready(()).await;
    ///     *rc
    /// });
    /// ```
    #[track_caller]
    pub fn spawn_stealable<F>(&self, fut: F) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if spawn::boxes::<F>() {
            return self.spawn_stealable_inner(None, Box::pin(fut));
        }
        self.spawn_stealable_inner(None, fut)
    }

    /// Like [`RuntimeHandle::spawn_stealable`], preferring `shard` unless
    /// it is clearly busier than the least-loaded one.
    #[track_caller]
    pub fn spawn_stealable_on<F>(
        &self,
        shard: ShardId,
        fut: F,
    ) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.check_shard(shard)?;
        if spawn::boxes::<F>() {
            return self.spawn_stealable_inner(Some(shard), Box::pin(fut));
        }
        self.spawn_stealable_inner(Some(shard), fut)
    }

    #[track_caller]
    fn spawn_stealable_inner<F>(
        &self,
        preferred: Option<ShardId>,
        fut: F,
    ) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let target = scheduler::admit_stealable(&self.shared, preferred)?;
        let (runnable, handle) = spawn::build(&self.shared, TaskKind::Stealable, target, fut)?;
        scheduler::submit_stealable(&self.shared, target, runnable);
        Ok(handle)
    }

    /// Spawns with an explicit [`TaskPlacement`].
    #[track_caller]
    pub fn spawn_with_placement<F>(
        &self,
        placement: TaskPlacement,
        fut: F,
    ) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if spawn::boxes::<F>() {
            return self.spawn_with_placement_inner(placement, Box::pin(fut));
        }
        self.spawn_with_placement_inner(placement, fut)
    }

    #[track_caller]
    fn spawn_with_placement_inner<F>(
        &self,
        placement: TaskPlacement,
        fut: F,
    ) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match placement {
            TaskPlacement::Pinned(shard) => self.spawn_pinned_inner(shard, fut),
            TaskPlacement::RoundRobin => self.spawn_pinned_inner(self.shared.next_rr(), fut),
            TaskPlacement::Sticky(key) => {
                let shard = crate::task::sticky_shard(key, self.shard_count());
                self.spawn_pinned_inner(shard, fut)
            }
            TaskPlacement::Stealable => self.spawn_stealable_inner(None, fut),
            TaskPlacement::StealablePreferred(shard) => {
                self.check_shard(shard)?;
                self.spawn_stealable_inner(Some(shard), fut)
            }
        }
    }

    /// Builds a `!Send` future on `shard` and runs it there. `init` runs on
    /// the shard with its [`ShardCtx`]; the future it returns may hold
    /// `Rc`, `RefCell` and other thread-bound state. The output crosses
    /// threads, so it must be `Send`:
    ///
    /// ```compile_fail
    /// # let rt = spargio::Runtime::builder().shards(1).build().unwrap();
    /// rt.handle().spawn_local_on(0, |_ctx| async { std::rc::Rc::new(1) });
    /// ```
    ///
    /// ```
    /// use std::rc::Rc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = spargio::Runtime::builder().shards(2).build()?;
    /// let task = rt.handle().spawn_local_on(1, |ctx| async move {
    ///     let local = Rc::new(ctx.shard_id());
    ///     *local
    /// })?;
    /// assert_eq!(spargio::block_on(task)?, 1);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn spawn_local_on<I, Fut>(
        &self,
        shard: ShardId,
        init: I,
    ) -> Result<JoinHandle<Fut::Output>, RuntimeError>
    where
        I: FnOnce(ShardCtx) -> Fut + Send + 'static,
        Fut: Future + 'static,
        Fut::Output: Send + 'static,
    {
        self.check_shard(shard)?;
        if spawn::boxes::<Fut>() {
            // The future `init` makes would make the wrapper as large:
            // it goes to the heap as it is made, on its shard.
            return self.spawn_local_on_inner(shard, move |ctx| Box::pin(init(ctx)));
        }
        self.spawn_local_on_inner(shard, init)
    }

    #[track_caller]
    fn spawn_local_on_inner<I, Fut>(
        &self,
        shard: ShardId,
        init: I,
    ) -> Result<JoinHandle<Fut::Output>, RuntimeError>
    where
        I: FnOnce(ShardCtx) -> Fut + Send + 'static,
        Fut: Future + 'static,
        Fut::Output: Send + 'static,
    {
        let fut = async move {
            let ctx = ShardCtx::current().expect("local task polled off its shard");
            init(ctx).await
        };
        // Before its first poll the future holds only `init` (`Send`), so
        // building it here and moving it to `shard` is sound.
        let kind = TaskKind::Pinned(shard);
        // SAFETY: pinned, so only polled and dropped on `shard`'s thread;
        // the output is `Send`, so the handle may go anywhere.
        let (runnable, handle) =
            unsafe { spawn::build_unchecked(&self.shared, kind, shard, true, fut)? };
        Counters::bump_shared(&self.shared.shards[shard].counters.spawn_local);
        scheduler::submit_pinned(&self.shared, shard, runnable);
        Ok(handle)
    }

    /// Runs a blocking closure on the blocking pool, never on a shard.
    /// A panic in `f` is reported by the handle as a `JoinError`.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = spargio::Runtime::builder().shards(1).build()?;
    /// let len = rt.handle().spawn_blocking(|| std::fs::read_dir(".").map(|d| d.count()))?;
    /// assert!(spargio::block_on(len)?.is_ok());
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn spawn_blocking<F, R>(&self, f: F) -> Result<JoinHandle<R>, RuntimeError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        if self.shared.is_closing() {
            return Err(RuntimeError::Shutdown);
        }
        if spawn::boxes::<F>() {
            // The task would hold the closure inline: to the heap first,
            // moved straight in (`Box::new` takes it by value, one more
            // copy of it on the stack in a debug build).
            let mut boxed = Box::<F>::new_uninit();
            // SAFETY: `boxed` is a fresh allocation for one `F`; the write
            // initializes it, and `f` is moved, not dropped, here.
            let f = unsafe {
                boxed.as_mut_ptr().write(f);
                boxed.assume_init()
            };
            return self.spawn_blocking_inner(f);
        }
        self.spawn_blocking_inner(f)
    }

    #[track_caller]
    fn spawn_blocking_inner<F, R>(&self, f: F) -> Result<JoinHandle<R>, RuntimeError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let home = crate::scheduler::context::current_shard(&self.shared).unwrap_or(0);
        let (runnable, handle) =
            spawn::build(&self.shared, TaskKind::Blocking, home, async move { f() })?;
        Counters::bump_shared(&self.shared.shards[home].counters.spawn_blocking);
        self.shared.blocking.schedule(runnable);
        Ok(handle)
    }

    /// A [`Sleep`] usable from any thread, including threads outside the
    /// runtime: it is armed in the timer wheel of one of this runtime's
    /// shards (no helper thread).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # fn main() -> Result<(), spargio::RuntimeError> {
    /// let rt = spargio::Runtime::builder().shards(1).build()?;
    /// spargio::block_on(rt.handle().sleep(Duration::from_millis(2)));
    /// # Ok(()) }
    /// ```
    pub fn sleep(&self, duration: std::time::Duration) -> Sleep {
        self.sleep_until(crate::time::deadline_after(duration))
    }

    /// Like [`RuntimeHandle::sleep`], until `deadline`.
    pub fn sleep_until(&self, deadline: std::time::Instant) -> Sleep {
        Sleep::until_on(deadline, self.shared.clone())
    }

    /// True when `self` and `other` are handles to the same runtime.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let (a, b) = (spargio::Runtime::builder().shards(1).build()?, spargio::Runtime::builder().shards(1).build()?);
    /// assert!(a.handle().same_runtime(&a.handle()));
    /// assert!(!a.handle().same_runtime(&b.handle()));
    /// # Ok(()) }
    /// ```
    pub fn same_runtime(&self, other: &RuntimeHandle) -> bool {
        std::sync::Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Native io_uring operations with no fixed shard: each goes to the
    /// ring with the fewest operations in flight (see
    /// [`UringNativeAny`](crate::UringNativeAny)).
    pub fn uring_native_unbound(&self) -> crate::UringNativeAny {
        crate::UringNativeAny::new(self.clone())
    }

    /// A snapshot of the runtime's counters.
    pub fn stats_snapshot(&self) -> RuntimeStats {
        self.shared.stats()
    }

    /// Every live task: id, spawn location, kind, home shard, whether a
    /// shard is polling it right now, and age; plus counts per spawn
    /// location ([`TaskDump::by_location`](crate::TaskDump::by_location)). Cheap enough for a
    /// `/debug/tasks` endpoint: the shards keep polling while it runs
    /// (spawns and task ends on one shard wait for that shard's walk).
    ///
    /// ```
    /// let rt = spargio::Runtime::builder().shards(2).build().unwrap();
    /// let h = rt.handle();
    /// let stop = spargio::CancellationToken::new();
    /// for shard in [0, 1] {
    ///     let stop = stop.clone();
    ///     h.spawn_pinned(shard, async move { stop.cancelled().await }).unwrap();
    /// }
    /// let dump = h.dump_tasks();
    /// assert_eq!(dump.tasks.len(), 2);
    /// assert_eq!(dump.by_location()[0].1, 2); // both spawned on the same line
    /// println!("{dump}");
    /// stop.cancel();
    /// ```
    pub fn dump_tasks(&self) -> crate::TaskDump {
        self.shared.dump_tasks()
    }

    fn check_shard(&self, shard: ShardId) -> Result<(), RuntimeError> {
        if shard < self.shard_count() {
            Ok(())
        } else {
            Err(RuntimeError::InvalidShard(shard))
        }
    }
}
