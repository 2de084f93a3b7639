//! `Runtime`: startup and shutdown.

use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::thread;

use super::{BackendKind, IoUringRefusal};
use super::{Config, RuntimeHandle};
use crate::diag::Watcher;
use crate::driver::{Driver, EpollDriver, Eventfd, Poller, Ring, UringDriver};
use crate::error::RuntimeError;
use crate::scheduler::{schedstat_of, SchedstatSlot, ShardShared, Shared, Worker};
use crate::stats::RingFeatures;

/// A running spargio runtime: one thread per shard, each with its own
/// io_uring ring (or, where io_uring is refused, its own epoll instance).
///
/// Dropping it shuts it down (blocking until every shard thread has
/// finished); [`Runtime::shutdown`] does the same without blocking.
///
/// ```
/// # fn main() -> Result<(), spargio::RuntimeError> {
/// let rt = spargio::Runtime::builder().shards(2).build()?;
/// let handle = rt.handle();
/// let sum = handle.spawn_stealable(async { (1..=10u32).sum::<u32>() })?;
/// assert_eq!(spargio::block_on(sum).unwrap(), 55);
/// spargio::block_on(rt.shutdown());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Runtime {
    handle: RuntimeHandle,
    /// Each returns its shard's rings, closed once all are joined.
    threads: Mutex<Vec<thread::JoinHandle<ShardRings>>>,
    /// The stall detector's thread (stopped after the shards).
    watcher: Mutex<Option<Watcher>>,
}

impl Runtime {
    /// A runtime with the default configuration.
    pub fn new() -> Result<Runtime, RuntimeError> {
        super::RuntimeBuilder::new().build()
    }

    /// A builder to configure one.
    pub fn builder() -> super::RuntimeBuilder {
        super::RuntimeBuilder::new()
    }

    /// A handle for spawning and messaging, usable from any thread.
    pub fn handle(&self) -> RuntimeHandle {
        self.handle.clone()
    }

    /// Stops the runtime: unfinished tasks are dropped (their `JoinHandle`s
    /// report cancellation), shard threads exit and are joined. Idempotent.
    pub async fn shutdown(&self) {
        let shared = &self.handle.shared;
        shared.begin_shutdown();
        poll_fn(|cx| shared.exit.poll_done(cx)).await;
        self.join_threads();
        drop(
            self.watcher
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
    }

    /// Joins the shard threads, then closes their rings: with no other
    /// thread left running, unmapping a ring interrupts no CPU
    /// (`driver::uring`'s module doc has the measurement).
    fn join_threads(&self) {
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        let mut rings = Vec::with_capacity(threads.len());
        for t in threads {
            // A shard thread only panics on an unrecoverable ring error,
            // which it already reported; nothing to add here.
            if let Ok(r) = t.join() {
                rings.push(r);
            }
        }
        drop(rings);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let shared = &self.handle.shared;
        shared.begin_shutdown();
        let watcher = self
            .watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if crate::scheduler::context::current_shard(shared).is_some() {
            // Dropped on one of its own shards: that shard exits when this
            // task returns; waiting here would deadlock. Threads detach.
            drop(watcher);
            return;
        }
        // Joining is the wait: a shard thread ends once it has drained.
        self.join_threads();
        // Then the watcher: stopped, the shards' last reports delivered.
        drop(watcher);
    }
}

/// Builds the shared state and each shard's poller (its ring, created
/// disabled, or its epoll instance) on this thread, so that every setup
/// error is reported here and every fd the runtime holds is open when
/// `build` returns; then starts one thread per shard and returns without
/// waiting for them (a shard's tasks and messages queue until it runs).
///
/// Each thread enables its own ring, becoming its single issuer. Enabling
/// a ring that was created does not fail in practice; if it does, that
/// shard says so loudly (an `error` event, `ShardStats::ring_refusal`) and
/// runs on epoll, so no task or message is lost.
pub(crate) fn start(mut config: Config) -> Result<Runtime, RuntimeError> {
    let n = config.shards;
    let no_rings = || (0..n).map(|_| None).collect::<Vec<Option<Ring>>>();
    let (backend, refusal, rings) = match super::backend::resolve(config.backend)? {
        (BackendKind::IoUring, _) => {
            match (0..n)
                .map(|i| Ring::new(&config.ring, i).map(Some))
                .collect()
            {
                Ok(rings) => (BackendKind::IoUring, None, rings),
                // `Auto`: a ring the kernel will not make is a refusal too.
                Err(err) if config.backend == BackendKind::Auto => (
                    BackendKind::Epoll,
                    Some(IoUringRefusal::from_error(&err)),
                    no_rings(),
                ),
                Err(err) => return Err(err),
            }
        }
        (_, refusal) => (BackendKind::Epoll, refusal, no_rings()),
    };
    config.backend = backend;
    config.io_uring_refusal = refusal;
    let mut deques = Vec::with_capacity(n);
    let mut shards = Vec::with_capacity(n);
    let mut pollers = Vec::with_capacity(n);
    #[cfg(feature = "tokio-compat")]
    let mut tokio_parts = Vec::with_capacity(n);
    for (id, ring) in rings.into_iter().enumerate() {
        // Each shard's tokio runtime, made here so its fds, like the
        // ring's, are open when `build` returns (`scheduler/tokio_shard.rs`).
        #[cfg(feature = "tokio-compat")]
        tokio_parts.push(if config.tokio_compat {
            let parts =
                crate::scheduler::TokioParts::new(id, ring.is_some()).map_err(|source| {
                    RuntimeError::IoUringUnavailable {
                        reason: format!("shard {id} could not start its tokio runtime"),
                        source,
                    }
                })?;
            Some(parts)
        } else {
            None
        });
        let deque = crossbeam_deque::Worker::new_fifo();
        let eventfd = Eventfd::new().map_err(|source| RuntimeError::IoUringUnavailable {
            reason: "could not create the shard's eventfd".into(),
            source,
        })?;
        let shard = ShardShared::new(deque.stealer(), eventfd);
        #[cfg(all(feature = "tokio-compat", tokio_unstable))]
        if let Some(Some(parts)) = tokio_parts.last() {
            let _ = shard.tokio_tasks.set(parts.tasks.clone());
        }
        let poller = match ring {
            Some(ring) => {
                shard.set_ring(ring.fd(), ring.features());
                ShardPoller::Ring(Box::new(ring))
            }
            None => {
                shard.set_ring(-1, RingFeatures::default());
                let poller = Poller::new(shard.eventfd.raw()).map_err(|source| {
                    RuntimeError::IoUringUnavailable {
                        reason: format!("shard {id} could not start its epoll driver"),
                        source,
                    }
                })?;
                ShardPoller::Epoll(poller)
            }
        };
        shards.push(shard);
        deques.push(deque);
        pollers.push(poller);
    }
    let cpus = if config.thread_affinity {
        allowed_cpus()
    } else {
        Vec::new()
    };
    let spin = !config.spin_before_park.is_zero();
    let shared = Arc::new(Shared::new(shards, config));
    // Contention is sampled only where it tells something: with more
    // shards than CPUs, the runtime's own shards make every CPU read
    // contended (`scheduler/spin.rs`).
    let sample_contention = spin && !shared.oversubscribed;
    let mut threads = Vec::with_capacity(n);
    #[cfg(feature = "tokio-compat")]
    let mut tokio_parts = tokio_parts.into_iter();
    for (id, (deque, poller)) in deques.into_iter().zip(pollers).enumerate() {
        #[cfg(feature = "tokio-compat")]
        let tokio = tokio_parts.next().flatten();
        let shared_t = shared.clone();
        let schedstat = SchedstatSlot::default();
        let schedstat_t = schedstat.clone();
        let cpu = (!cpus.is_empty()).then(|| cpus[id % cpus.len()]);
        let name = format!("{}-{id}", shared.config.thread_name);
        let spawned = thread::Builder::new().name(name).spawn(move || {
            if let Some(cpu) = cpu {
                pin_to_cpu(cpu);
            }
            // A ring that would not enable stays open, like the shard's
            // own, until the runtime closes both after the join
            // (`ShardShared::refuse_ring`).
            let (driver, refused) = shard_driver(&shared_t, id, poller);
            let worker = Worker::new(shared_t, id, deque, driver, schedstat_t);
            worker.run(
                #[cfg(feature = "tokio-compat")]
                tokio,
            );
            ShardRings {
                _ring: worker.into_ring(),
                _refused: refused,
            }
        });
        match spawned {
            Ok(t) => {
                // Opened here, not by the shard: `build` has not returned.
                if sample_contention {
                    if let Some(file) = schedstat_of(&t) {
                        let _ = schedstat.set(file);
                    }
                }
                threads.push(t);
            }
            Err(err) => {
                // Stop the shards that did start; the ones that did not
                // never will, so count them out of the exit latch.
                shared.begin_shutdown();
                for _ in threads.len()..n {
                    shared.exit.arrive();
                }
                for t in threads {
                    let _ = t.join();
                }
                return Err(RuntimeError::ThreadSpawn(err));
            }
        }
    }
    // Its thread starts later, from an idle shard (`diag/watcher.rs`).
    let watcher = Watcher::new(&shared);
    Ok(Runtime {
        handle: RuntimeHandle { shared },
        threads: Mutex::new(threads),
        watcher: Mutex::new(watcher),
    })
}

/// What a shard thread hands back when it ends: its ring, quiesced, and
/// the ring it could not enable, if any; dropping this closes them.
struct ShardRings {
    _ring: Option<Ring>,
    _refused: Option<Ring>,
}

/// What `build` made for a shard to wait on.
enum ShardPoller {
    /// Created disabled; the shard enables it. Boxed: a ring is ten
    /// times the size of a poller.
    Ring(Box<Ring>),
    Epoll(Poller),
}

/// On the shard's thread: its driver, and the ring it could not enable,
/// if that is why the driver is an epoll one.
fn shard_driver(shared: &Arc<Shared>, id: usize, poller: ShardPoller) -> (Driver, Option<Ring>) {
    let eventfd = shared.shards[id].eventfd.raw();
    let epoll = |poller| Driver::Epoll(EpollDriver::new(poller, eventfd, shared.clone(), id));
    let ring = match poller {
        ShardPoller::Epoll(poller) => return (epoll(poller), None),
        ShardPoller::Ring(ring) => *ring,
    };
    let err = match crate::driver::faults::ring_enable().and_then(|()| ring.enable()) {
        Ok(()) => return (Driver::Uring(UringDriver::new(ring, eventfd)), None),
        Err(err) => err,
    };
    // Also on stderr: without a logger the downgrade would go unseen.
    eprintln!(
        "spargio shard {id}: its io_uring ring could not be enabled ({err}); it runs on epoll"
    );
    crate::diag::event::ring_refused(id, &err);
    shared.shards[id].refuse_ring(IoUringRefusal {
        errno: err.raw_os_error(),
        reason: format!("shard {id} could not enable its ring"),
    });
    // Without an epoll instance either (out of fds), the shard's first park
    // fails, and with it the runtime, through the shard loop's failure path.
    let poller = Poller::new(eventfd).unwrap_or_else(|_| Poller::dead());
    (epoll(poller), Some(ring))
}

/// CPUs this process may run on, in order.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `set` is a plain-data struct; zeroed is the empty set, and
    // sched_getaffinity writes at most `size_of::<cpu_set_t>()` bytes.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

fn pin_to_cpu(cpu: usize) {
    // SAFETY: as in `allowed_cpus`; the set is fully initialised before
    // sched_setaffinity reads it. Failure is ignored (best effort).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
