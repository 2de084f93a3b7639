//! `Runtime`: startup and shutdown.

use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::thread;

use super::{BackendKind, IoUringRefusal};
use super::{Config, RuntimeHandle};
use crate::diag::Watcher;
use crate::driver::{Driver, EpollDriver, Eventfd, Ring, UringDriver};
use crate::error::RuntimeError;
use crate::scheduler::{ShardShared, Shared, Worker};
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
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
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

    fn join_threads(&self) {
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            // A shard thread only panics on an unrecoverable ring error,
            // which it already reported; nothing to add here.
            let _ = t.join();
        }
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

/// Builds the shared state and the rings (on this thread, disabled, so
/// every setup error is reported here), then starts one thread per shard.
/// Each thread enables its own ring, becoming its single issuer, and
/// reports back; `build` returns once every shard has, so a ring that
/// cannot be enabled is an error from `build`, not a dead shard later.
pub(crate) fn start(mut config: Config) -> Result<Runtime, RuntimeError> {
    let n = config.shards;
    let no_rings = || (0..n).map(|_| None).collect::<Vec<Option<Ring>>>();
    let (backend, refusal, rings) = match super::backend::resolve(config.backend)? {
        (BackendKind::IoUring, _) => {
            match (0..n).map(|_| Ring::new(&config.ring).map(Some)).collect() {
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
    for ring in &rings {
        let deque = crossbeam_deque::Worker::new_fifo();
        let eventfd = Eventfd::new().map_err(|source| RuntimeError::IoUringUnavailable {
            reason: "could not create the shard's eventfd".into(),
            source,
        })?;
        let shard = ShardShared::new(deque.stealer(), eventfd);
        match ring {
            Some(ring) => shard.set_ring(ring.fd(), ring.features()),
            None => shard.set_ring(-1, RingFeatures::default()),
        }
        shards.push(shard);
        deques.push(deque);
    }
    let cpus = if config.thread_affinity {
        allowed_cpus()
    } else {
        Vec::new()
    };
    let shared = Arc::new(Shared::new(shards, config));
    let started = Arc::new(StartReport::default());
    let mut threads = Vec::with_capacity(n);
    for (id, (deque, ring)) in deques.into_iter().zip(rings).enumerate() {
        let shared_t = shared.clone();
        let started_t = started.clone();
        let cpu = (!cpus.is_empty()).then(|| cpus[id % cpus.len()]);
        let name = format!("{}-{id}", shared.config.thread_name);
        let spawned = thread::Builder::new().name(name).spawn(move || {
            if let Some(cpu) = cpu {
                pin_to_cpu(cpu);
            }
            let eventfd = shared_t.shards[id].eventfd.raw();
            let driver = match ring {
                Some(ring) => crate::driver::faults::ring_enable()
                    .and_then(|()| ring.enable())
                    .and_then(|()| UringDriver::new(ring, eventfd))
                    .map(Driver::Uring),
                None => EpollDriver::new(eventfd, shared_t.clone(), id).map(Driver::Epoll),
            };
            match driver {
                Ok(driver) => {
                    // Built before `build` returns: whatever the worker
                    // opens is part of the runtime from the start.
                    let worker = Worker::new(shared_t, id, deque, driver);
                    started_t.report(id, None);
                    worker.run();
                }
                Err(err) => {
                    // No task can be homed here yet: `build` has not
                    // returned. It sees the error and stops the others.
                    started_t.report(id, Some(err));
                    shared_t.exit.arrive();
                }
            }
        });
        match spawned {
            Ok(t) => threads.push(t),
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
    if let Some((id, source)) = started.wait(n) {
        shared.begin_shutdown();
        for t in threads {
            let _ = t.join();
        }
        let what = match shared.config.backend {
            BackendKind::Epoll => "start its epoll driver",
            _ => "enable its ring",
        };
        return Err(RuntimeError::IoUringUnavailable {
            reason: format!("shard {id} could not {what}"),
            source,
        });
    }
    // Its thread starts later, from an idle shard (`diag/watcher.rs`).
    let watcher = Watcher::new(&shared);
    Ok(Runtime {
        handle: RuntimeHandle { shared },
        threads: Mutex::new(threads),
        watcher: Mutex::new(watcher),
    })
}

/// Shard threads report whether their ring started.
#[derive(Default)]
struct StartReport {
    state: Mutex<(usize, Option<(usize, std::io::Error)>)>,
    cond: std::sync::Condvar,
}

impl StartReport {
    fn report(&self, shard: usize, err: Option<std::io::Error>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.0 += 1;
        if let Some(err) = err {
            state.1.get_or_insert((shard, err));
        }
        self.cond.notify_all();
    }

    /// Waits for `n` reports; the first failure, if any.
    fn wait(&self, n: usize) -> Option<(usize, std::io::Error)> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while state.0 < n {
            state = self.cond.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.1.take()
    }
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
