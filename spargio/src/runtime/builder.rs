//! `RuntimeBuilder` and the validated configuration it produces.

use std::sync::Arc;
use std::time::Duration;

use super::backend::IoUringRefusal;
use super::{BackendKind, Runtime};
use crate::diag::{StallConfig, StallReport};
use crate::driver::RingConfig;
use crate::error::RuntimeError;
use crate::messaging::hot::HotConfig;

/// Most shards a runtime may have.
const MAX_SHARDS: usize = 1024;

/// The stall detector's default threshold.
const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_millis(100);

/// Largest ring the kernel accepts (`IORING_MAX_ENTRIES`).
const MAX_RING_ENTRIES: u32 = 32768;
/// Largest per-pair message queue.
const MAX_MSG_QUEUE: usize = 1 << 24;

/// Configures and builds a [`Runtime`].
///
/// Every knob is checked by [`RuntimeBuilder::build`]: a value the runtime
/// cannot work with is a [`RuntimeError::InvalidConfig`] naming the knob.
///
/// ```
/// use std::time::Duration;
///
/// # fn main() -> Result<(), spargio::RuntimeError> {
/// let rt = spargio::RuntimeBuilder::new()
///     .shards(2)
///     .ring_entries(512)
///     .spin_before_park(Duration::from_micros(20))
///     .build()?;
/// assert_eq!(rt.handle().shard_count(), 2);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RuntimeBuilder {
    backend: Option<BackendKind>,
    shards: Option<usize>,
    ring_entries: u32,
    sqpoll_idle_ms: Option<u32>,
    sqpoll_cpu: Option<u32>,
    single_issuer: bool,
    coop_taskrun: bool,
    defer_taskrun: bool,
    thread_affinity: bool,
    thread_name: String,
    stealable_queue_capacity: Option<usize>,
    steal_budget: usize,
    steal_victim_stride: usize,
    steal_victim_probe_count: usize,
    steal_batch_size: usize,
    steal_locality_margin: usize,
    steal_fail_cost: u32,
    steal_backoff_min: u32,
    steal_backoff_max: u32,
    msg_ring_queue_capacity: usize,
    hot: HotConfig,
    spin_before_park: Duration,
    busy_poll: bool,
    max_blocking_threads: usize,
    blocking_keep_alive: Duration,
    stall: StallConfig,
    #[cfg(feature = "tokio-compat")]
    tokio_compat: Option<bool>,
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            backend: None,
            shards: None,
            ring_entries: 256,
            sqpoll_idle_ms: None,
            sqpoll_cpu: None,
            single_issuer: true,
            coop_taskrun: true,
            defer_taskrun: true,
            thread_affinity: false,
            thread_name: "spargio-shard".into(),
            stealable_queue_capacity: None,
            steal_budget: 64,
            steal_victim_stride: 1,
            steal_victim_probe_count: 2,
            steal_batch_size: 32,
            steal_locality_margin: 0,
            steal_fail_cost: 1,
            steal_backoff_min: 0,
            steal_backoff_max: 16,
            msg_ring_queue_capacity: 4096,
            hot: HotConfig::default(),
            spin_before_park: Duration::from_micros(50),
            busy_poll: false,
            max_blocking_threads: 512,
            #[cfg(feature = "tokio-compat")]
            tokio_compat: None,
            blocking_keep_alive: Duration::from_secs(10),
            stall: StallConfig {
                threshold: Some(DEFAULT_STALL_THRESHOLD),
                callback: None,
            },
        }
    }
}

impl RuntimeBuilder {
    /// A builder with the defaults.
    pub fn new() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// The I/O backend. Default: the process's `SPARGIO_BACKEND` if set,
    /// else [`BackendKind::Auto`] (io_uring where allowed, epoll
    /// elsewhere). A backend set here wins over the environment.
    pub fn backend(mut self, backend: BackendKind) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Number of shards (a thread and a ring each). Default: the number of
    /// CPUs this process may run on.
    pub fn shards(mut self, n: usize) -> Self {
        self.shards = Some(n);
        self
    }

    /// Submission queue size of each ring (1..=32768; the kernel rounds up
    /// to a power of two). Default 256.
    pub fn ring_entries(mut self, entries: u32) -> Self {
        self.ring_entries = entries;
        self
    }

    /// Kernel SQ polling with the given idle time in milliseconds; `None`
    /// (the default) turns it off. Excludes `DEFER_TASKRUN`.
    pub fn io_uring_sqpoll(mut self, idle_ms: Option<u32>) -> Self {
        self.sqpoll_idle_ms = idle_ms;
        self
    }

    /// Routes received messages with `tag` to the shard's hot lane, read
    /// with [`ShardCtx::next_hot_event`](crate::ShardCtx::next_hot_event)
    /// instead of `next_event` (see [`RuntimeBuilder::hot_msg_tags`]).
    pub fn hot_msg_tag(mut self, tag: u16) -> Self {
        self.hot.hot.insert(tag);
        self
    }

    /// Routes received messages with any of `tags` to the hot lane: control
    /// traffic read by its own consumer, never queued behind (or mixed
    /// with) the general events. The lane holds at most
    /// `msg_ring_queue_capacity` events; while it is full, messages stay in
    /// their senders' queues (which then answer `Backpressure`).
    ///
    /// ```
    /// use spargio::{Event, Runtime, ShardCtx};
    ///
    /// const STOP: u16 = 9;
    /// let rt = Runtime::builder().shards(2).hot_msg_tags([STOP]).build().unwrap();
    /// let h = rt.handle();
    /// let rx = h
    ///     .spawn_pinned(1, async {
    ///         let ctx = ShardCtx::current().unwrap();
    ///         let stop = ctx.next_hot_event().await;
    ///         (stop, ctx.try_next_event())
    ///     })
    ///     .unwrap();
    /// h.spawn_pinned(0, async {
    ///     let ctx = ShardCtx::current().unwrap();
    ///     ctx.send_raw_nowait(1, 1, 10).unwrap();
    ///     ctx.send_raw_nowait(1, STOP, 0).unwrap();
    /// })
    /// .unwrap();
    /// let (stop, general) = spargio::block_on(rx).unwrap();
    /// assert_eq!(stop, Event::RingMsg { from: 0, tag: STOP, val: 0 });
    /// assert_eq!(general, Some(Event::RingMsg { from: 0, tag: 1, val: 10 }));
    /// ```
    pub fn hot_msg_tags(mut self, tags: impl IntoIterator<Item = u16>) -> Self {
        for tag in tags {
            self.hot.hot.insert(tag);
        }
        self
    }

    /// Makes `tag` a coalesced hot tag (see
    /// [`RuntimeBuilder::coalesced_hot_msg_tags`]).
    pub fn coalesced_hot_msg_tag(self, tag: u16) -> Self {
        self.coalesced_hot_msg_tags([tag])
    }

    /// Makes each of `tags` a coalesced hot tag: received messages with it
    /// are not events; their values are summed into one counter per tag
    /// on the receiving shard, taken whole with
    /// [`ShardCtx::next_hot_count`](crate::ShardCtx::next_hot_count) or
    /// [`ShardCtx::try_take_hot_count`](crate::ShardCtx::try_take_hot_count).
    /// For "N more units of work" notifications: a burst costs the consumer
    /// one wake. Counters saturate at `u64::MAX`. A shard sending one of
    /// these tags into a full mailbox is not refused with `Backpressure`:
    /// the value joins a sum the sender keeps per (target, tag), sent as
    /// one message once the mailbox has room (outside the runtime, a full
    /// inbox still refuses).
    ///
    /// ```
    /// use spargio::{Runtime, ShardCtx};
    ///
    /// const MORE: u16 = 3;
    /// let rt = Runtime::builder().shards(2).coalesced_hot_msg_tag(MORE).build().unwrap();
    /// let h = rt.handle();
    /// let rx = h
    ///     .spawn_pinned(1, async {
    ///         let ctx = ShardCtx::current().unwrap();
    ///         let mut total = 0;
    ///         while total < 6 {
    ///             total += ctx.next_hot_count(MORE).await;
    ///         }
    ///         total
    ///     })
    ///     .unwrap();
    /// h.spawn_pinned(0, async {
    ///     let ctx = ShardCtx::current().unwrap();
    ///     ctx.send_many_raw_nowait(1, [(MORE, 1), (MORE, 2), (MORE, 3)]).unwrap();
    /// })
    /// .unwrap();
    /// assert_eq!(spargio::block_on(rx).unwrap(), 6);
    /// ```
    pub fn coalesced_hot_msg_tags(mut self, tags: impl IntoIterator<Item = u16>) -> Self {
        for tag in tags {
            self.hot.hot.insert(tag);
            self.hot.coalesced.insert(tag);
        }
        self
    }

    /// When a task waiting in `next_hot_count` is woken: when the counter
    /// goes from zero to nonzero, or crosses this value from below.
    /// Default 64.
    pub fn hot_counter_wake_threshold(mut self, threshold: u64) -> Self {
        self.hot.wake_threshold = threshold;
        self
    }

    /// Preset for throughput over latency: with `Some(ms)`, a kernel SQ
    /// polling thread per ring that keeps picking up submissions without a
    /// syscall and sleeps after `ms` of idleness (it costs that thread's
    /// CPU while it polls; the kernel takes none of the task-run flags,
    /// `COOP_TASKRUN` and `DEFER_TASKRUN`, with SQPOLL). With `None`, SQ
    /// polling stays off and cooperative task running is on. Where the kernel
    /// refuses a flag (`EINVAL`), `build` falls back flag by flag rather
    /// than failing; `stats_snapshot().shards[i].ring` says what each ring
    /// got.
    ///
    /// ```
    /// let rt = spargio::Runtime::builder()
    ///     .shards(2)
    ///     .io_uring_throughput_mode(Some(10))
    ///     .build()
    ///     .unwrap();
    /// let got = &rt.handle().stats_snapshot().shards[0].ring;
    /// println!("sqpoll: {}, coop_taskrun: {}", got.sqpoll, got.coop_taskrun);
    /// ```
    pub fn io_uring_throughput_mode(self, sqpoll_idle_ms: Option<u32>) -> Self {
        self.io_uring_coop_taskrun(true)
            .io_uring_sqpoll(sqpoll_idle_ms)
    }

    /// Pins the SQ polling kernel thread to a CPU.
    pub fn io_uring_sqpoll_cpu(mut self, cpu: Option<u32>) -> Self {
        self.sqpoll_cpu = cpu;
        self
    }

    /// `IORING_SETUP_SINGLE_ISSUER` (default on; each ring is only ever
    /// used by its shard thread).
    pub fn io_uring_single_issuer(mut self, on: bool) -> Self {
        self.single_issuer = on;
        self
    }

    /// `IORING_SETUP_COOP_TASKRUN` (default on).
    pub fn io_uring_coop_taskrun(mut self, on: bool) -> Self {
        self.coop_taskrun = on;
        self
    }

    /// `IORING_SETUP_DEFER_TASKRUN` (default on; needs single issuer).
    pub fn io_uring_defer_taskrun(mut self, on: bool) -> Self {
        self.defer_taskrun = on;
        self
    }

    /// Pins shard `i` to the `i`-th CPU this process may run on (modulo
    /// their number). Best effort. Default off.
    pub fn thread_affinity(mut self, on: bool) -> Self {
        self.thread_affinity = on;
        self
    }

    /// Prefix of shard thread names (`<prefix>-<index>`).
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.thread_name = prefix.into();
        self
    }

    /// Admission limit: a stealable spawn whose target shard already holds
    /// this many queued stealable tasks fails with
    /// [`RuntimeError::Overloaded`]. Default: no limit (queues grow).
    pub fn stealable_queue_capacity(mut self, capacity: usize) -> Self {
        self.stealable_queue_capacity = Some(capacity);
        self
    }

    /// Tasks a shard runs per loop pass before it looks at its inbox and
    /// ring again. Default 64.
    pub fn steal_budget(mut self, budget: usize) -> Self {
        self.steal_budget = budget;
        self
    }

    /// Step of the victim cursor between steal scans (clamped to
    /// `1..shards`). Default 1.
    pub fn steal_victim_stride(mut self, stride: usize) -> Self {
        self.steal_victim_stride = stride;
        self
    }

    /// Victims sampled per scan; the one with the largest backlog is
    /// robbed (clamped to `1..shards`). Default 2.
    pub fn steal_victim_probe_count(mut self, probes: usize) -> Self {
        self.steal_victim_probe_count = probes;
        self
    }

    /// Most tasks taken in one steal. Default 32.
    pub fn steal_batch_size(mut self, batch: usize) -> Self {
        self.steal_batch_size = batch;
        self
    }

    /// Backlog a victim must exceed before it is robbed, and slack a
    /// preferred shard gets over the least-loaded one at submission.
    /// Default 0.
    pub fn steal_locality_margin(mut self, margin: usize) -> Self {
        self.steal_locality_margin = margin;
        self
    }

    /// Penalty (in skipped scans) each fruitless scan adds. Default 1.
    pub fn steal_fail_cost(mut self, cost: u32) -> Self {
        self.steal_fail_cost = cost;
        self
    }

    /// Lower bound of the steal cooldown, in skipped scans. Default 0.
    pub fn steal_backoff_min(mut self, scans: u32) -> Self {
        self.steal_backoff_min = scans;
        self
    }

    /// Upper bound of the steal cooldown, in skipped scans. Default 16.
    pub fn steal_backoff_max(mut self, scans: u32) -> Self {
        self.steal_backoff_max = scans;
        self
    }

    /// Unconsumed messages allowed per (sender, target) pair before sends
    /// fail with [`SendError::Backpressure`](crate::SendError::Backpressure)
    /// (rounded up to a power of two). Default 4096.
    pub fn msg_ring_queue_capacity(mut self, capacity: usize) -> Self {
        self.msg_ring_queue_capacity = capacity;
        self
    }

    /// How long an idle shard keeps polling before it blocks in the kernel,
    /// at least. Zero parks at once (and disables spinning). Default 50 µs:
    /// a blocking wake costs several microseconds each way, so a short spin
    /// keeps back-to-back exchanges in user space. The window adapts: a
    /// shard whose parks keep ending within 200 µs spins longer (up to
    /// 200 µs, or this value if longer); one whose parks are long (waits on
    /// a disk, a child process, a slow peer) halves it each time, down to
    /// no spin at all, and grows it again from 10 µs once parks get short.
    /// A value of zero never spins.
    ///
    /// A shard spins only while its CPU is not contended: when its thread
    /// has recently spent more than a tenth of its time waiting for a CPU
    /// (other processes, a load generator, more threads than cores), it
    /// parks at once, leaving the CPU to whoever would produce its work.
    /// At most half the shards spin at the same time. A runtime with more
    /// shards than CPUs skips that check (its own shards would always
    /// trip it) and instead gives its CPU away at every round of a spin.
    pub fn spin_before_park(mut self, spin: Duration) -> Self {
        self.spin_before_park = spin;
        self
    }

    /// Latency mode: an idle shard keeps polling its sources (its queues,
    /// its ring's completions, timers, steals) and never blocks in the
    /// kernel, so a wakeup never waits for a thread to be scheduled and
    /// other shards never ring its doorbell. Each shard takes a whole CPU
    /// for as long as the runtime lives, idle or not: use it with at most
    /// as many shards as CPUs you can give away (with
    /// [`thread_affinity`](Self::thread_affinity), one each), for
    /// request/response paths where microseconds count. The adaptive spin,
    /// its contention check and its backoff ([`spin_before_park`](Self::spin_before_park))
    /// do not apply. Default off: an idle runtime takes no CPU.
    ///
    /// It pays only on CPUs nothing else wants. Measured on 2 vCPUs
    /// (`latency_echo`, 512 sequential 256 B echoes across two shards):
    /// on quiet CPUs it matches the default (4.4 ms), whose adaptive spin
    /// already keeps busy shards polling, and the first message after an
    /// idle stretch skips a kernel wakeup; beside one busy process it took
    /// 11.8 ms against the default's 4.4, because a shard that never
    /// parks loses whole scheduler slices to that process (yielding the
    /// CPU every 32 polls made it 24 ms).
    ///
    /// ```
    /// let rt = spargio::Runtime::builder().shards(1).busy_poll(true).build()?;
    /// assert_eq!(spargio::block_on(rt.handle().spawn_pinned(0, async { 7 })?)?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn busy_poll(mut self, on: bool) -> Self {
        self.busy_poll = on;
        self
    }

    /// The stall detector: a task poll that holds its shard's thread
    /// longer than `threshold` (a blocking call or a long computation in
    /// async code: every task on that shard waits meanwhile) is reported
    /// once, with the task's spawn location and how long it ran; so is a
    /// blocking-pool job that waited that long for a thread. Default
    /// 100 ms (at least 10 ms); `None` turns it off.
    ///
    /// It costs each poll a coarse clock read and three stores (a few
    /// ns): a poll that ran too long reports itself when it returns. The
    /// coarse clock moves in kernel ticks and, after a CPU idled, can
    /// trail by two of them (8 ms at `HZ=250`), so a poll that ends within
    /// that much past the threshold may go unreported. A
    /// watcher thread of the runtime's own, started a second after build,
    /// delivers the reports and catches polls that do not return (reported
    /// as `ongoing` after ten thresholds, at least a second); it looks
    /// every threshold while a shard is in a poll and once a second while
    /// none is. Reports go to
    /// [`on_stall`](Self::on_stall) or, without it, to a `warn` event
    /// (target `spargio::stall`) through the `log` crate, or `tracing`
    /// with the `tracing` feature; they are counted in the
    /// stats (`stalls`, `blocking_stalls`).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let rt = spargio::Runtime::builder()
    ///     .shards(1)
    ///     .stall_threshold(Some(Duration::from_millis(20)))
    ///     .on_stall(move |report| log.lock().unwrap().push(report.clone()))
    ///     .build()
    ///     .unwrap();
    /// let task = rt
    ///     .handle()
    ///     .spawn_pinned(0, async { std::thread::sleep(Duration::from_millis(100)) })
    ///     .unwrap();
    /// spargio::block_on(task).unwrap();
    /// drop(rt); // the watcher has reported the stall by now
    /// let seen = seen.lock().unwrap().clone();
    /// match &seen[..] {
    ///     [spargio::StallReport::Shard { duration, spawned_at, .. }] => {
    ///         assert!(*duration >= Duration::from_millis(100));
    ///         assert_eq!(spawned_at.file(), file!());
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// ```
    pub fn stall_threshold(mut self, threshold: Option<Duration>) -> Self {
        self.stall.threshold = threshold;
        self
    }

    /// Where the stall detector's reports go (see
    /// [`stall_threshold`](Self::stall_threshold)): `callback` runs on the
    /// watcher thread; a panic in it costs that report only. The runtime's
    /// drop delivers the last reports and waits for one being delivered,
    /// so a callback that never returns holds the drop. Default: a `warn`
    /// event through `log` (or `tracing`, with that feature).
    pub fn on_stall(mut self, callback: impl Fn(&StallReport) + Send + Sync + 'static) -> Self {
        self.stall.callback = Some(Arc::new(callback));
        self
    }

    /// Most threads the blocking pool may run at once (jobs beyond that
    /// queue). Default 512.
    pub fn max_blocking_threads(mut self, n: usize) -> Self {
        self.max_blocking_threads = n;
        self
    }

    /// How long an idle blocking-pool thread waits for work before it
    /// exits. Default 10 s.
    pub fn blocking_keep_alive(mut self, keep_alive: Duration) -> Self {
        self.blocking_keep_alive = keep_alive;
        self
    }

    /// Whether each shard drives a tokio runtime of its own, so tokio's
    /// runtime APIs (`tokio::spawn`, `tokio::time`, `tokio::net`,
    /// `spawn_blocking`, `Handle::current()`) work inside spargio tasks and
    /// the crates built on them (sqlx, redis, reqwest, tower-http's
    /// timeouts) run unchanged. Default: `SPARGIO_TOKIO_COMPAT` (`1` or
    /// `0`) if set, else on (the feature `tokio-compat` exists for it).
    /// Off, shards never enter tokio and park in the ring alone. The book's "Migrating from tokio" chapter says what runs
    /// where.
    ///
    /// ```
    /// # fn main() -> Result<(), spargio::RuntimeError> {
    /// let slept = spargio::block_on(spargio::run_with(
    ///     spargio::RuntimeBuilder::new().shards(2).tokio_compat(true),
    ///     |_| async {
    ///         tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    ///         tokio::spawn(async { 7 }).await.unwrap()
    ///     },
    /// ))?;
    /// assert_eq!(slept, 7);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tokio-compat")]
    pub fn tokio_compat(mut self, on: bool) -> Self {
        self.tokio_compat = Some(on);
        self
    }

    /// Validates the configuration, creates one ring (or, on epoll, one
    /// epoll instance) per shard on the calling thread, and starts the
    /// shard threads. It returns without waiting for them to run: tasks
    /// spawned and messages sent meanwhile wait in the shards' queues, and
    /// each thread takes its name and (with
    /// [`thread_affinity`](Self::thread_affinity)) its CPU when it starts.
    /// Every fd the runtime holds is open by the time it returns.
    pub fn build(self) -> Result<Runtime, RuntimeError> {
        super::runtime::start(self.validate()?)
    }

    fn validate(self) -> Result<Config, RuntimeError> {
        let invalid =
            |knob: &'static str, reason: String| RuntimeError::InvalidConfig { knob, reason };
        let backend = super::backend::requested(self.backend)?;
        // Asked for in code: a contradiction. Chosen by `SPARGIO_BACKEND`
        // or `Auto`, SQ polling is a tuning knob that does not apply.
        if self.backend == Some(BackendKind::Epoll) && self.sqpoll_idle_ms.is_some() {
            return Err(invalid(
                "io_uring_sqpoll",
                "kernel SQ polling needs the io_uring backend; this runtime is built on epoll"
                    .into(),
            ));
        }
        let shards = match self.shards {
            Some(n) => n,
            None => available_cpus(),
        };
        if shards == 0 || shards > MAX_SHARDS {
            return Err(invalid(
                "shards",
                format!("{shards} is not in 1..={MAX_SHARDS}"),
            ));
        }
        if self.ring_entries == 0 || self.ring_entries > MAX_RING_ENTRIES {
            let e = self.ring_entries;
            return Err(invalid(
                "ring_entries",
                format!("{e} is not in 1..={MAX_RING_ENTRIES}"),
            ));
        }
        if self.stealable_queue_capacity == Some(0) {
            return Err(invalid(
                "stealable_queue_capacity",
                "must be at least 1".into(),
            ));
        }
        if self.msg_ring_queue_capacity == 0 || self.msg_ring_queue_capacity > MAX_MSG_QUEUE {
            let c = self.msg_ring_queue_capacity;
            return Err(invalid(
                "msg_ring_queue_capacity",
                format!("{c} is not in 1..={MAX_MSG_QUEUE}"),
            ));
        }
        if self.steal_budget == 0 {
            return Err(invalid("steal_budget", "must be at least 1".into()));
        }
        if self.steal_batch_size == 0 {
            return Err(invalid("steal_batch_size", "must be at least 1".into()));
        }
        if self.steal_backoff_min > self.steal_backoff_max {
            let (lo, hi) = (self.steal_backoff_min, self.steal_backoff_max);
            return Err(invalid(
                "steal_backoff_min",
                format!("{lo} exceeds steal_backoff_max {hi}"),
            ));
        }
        if self.max_blocking_threads == 0 {
            return Err(invalid("max_blocking_threads", "must be at least 1".into()));
        }
        if self.thread_name.contains('\0') {
            return Err(invalid("thread_name", "contains a NUL byte".into()));
        }
        let others = (shards - 1).max(1);
        Ok(Config {
            backend,
            io_uring_refusal: None,
            shards,
            ring: RingConfig {
                entries: self.ring_entries,
                sqpoll_idle_ms: self.sqpoll_idle_ms,
                sqpoll_cpu: self.sqpoll_cpu,
                single_issuer: self.single_issuer,
                coop_taskrun: self.coop_taskrun,
                defer_taskrun: self.defer_taskrun,
            },
            thread_affinity: self.thread_affinity,
            thread_name: self.thread_name,
            stealable_queue_capacity: self.stealable_queue_capacity,
            msg_queue_capacity: self.msg_ring_queue_capacity,
            hot: self.hot,
            spin_before_park: self.spin_before_park,
            busy_poll: self.busy_poll,
            stall: self.stall.clone(),
            max_blocking_threads: self.max_blocking_threads,
            blocking_keep_alive: self.blocking_keep_alive,
            #[cfg(feature = "tokio-compat")]
            tokio_compat: self.tokio_compat.unwrap_or_else(|| {
                std::env::var("SPARGIO_TOKIO_COMPAT").map_or(true, |v| v.trim() != "0")
            }),
            steal: StealConfig {
                budget: self.steal_budget,
                victim_stride: self.steal_victim_stride.clamp(1, others),
                probe_count: self.steal_victim_probe_count.clamp(1, others),
                batch_size: self.steal_batch_size,
                locality_margin: self.steal_locality_margin,
                fail_cost: self.steal_fail_cost,
                backoff_min: self.steal_backoff_min,
                backoff_max: self.steal_backoff_max,
            },
        })
    }
}

/// The validated configuration.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// Requested by `validate`; what runs (never `Auto`) once `start` has
    /// decided.
    pub(crate) backend: BackendKind,
    /// Why an `Auto` runtime runs on epoll.
    pub(crate) io_uring_refusal: Option<IoUringRefusal>,
    pub(crate) shards: usize,
    pub(crate) ring: RingConfig,
    pub(crate) thread_affinity: bool,
    pub(crate) thread_name: String,
    pub(crate) stealable_queue_capacity: Option<usize>,
    pub(crate) msg_queue_capacity: usize,
    /// Hot-tag lanes (`messaging/hot.rs`).
    pub(crate) hot: HotConfig,
    pub(crate) spin_before_park: Duration,
    /// Idle shards poll and never park (`RuntimeBuilder::busy_poll`).
    pub(crate) busy_poll: bool,
    pub(crate) max_blocking_threads: usize,
    pub(crate) blocking_keep_alive: Duration,
    pub(crate) steal: StealConfig,
    pub(crate) stall: StallConfig,
    /// Each shard drives a tokio runtime (`scheduler/tokio_shard.rs`).
    #[cfg(feature = "tokio-compat")]
    pub(crate) tokio_compat: bool,
}

/// Steal policy knobs, clamped.
#[derive(Clone, Debug)]
pub(crate) struct StealConfig {
    pub(crate) budget: usize,
    pub(crate) victim_stride: usize,
    pub(crate) probe_count: usize,
    pub(crate) batch_size: usize,
    pub(crate) locality_margin: usize,
    pub(crate) fail_cost: u32,
    pub(crate) backoff_min: u32,
    pub(crate) backoff_max: u32,
}

/// CPUs this process may use (affinity and cgroup quota), read once per
/// process: `available_parallelism` costs a dozen syscalls (cgroup files)
/// each time, which a cold start would otherwise pay once per shard.
pub(crate) fn available_cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
