//! `Runtime`: startup and shutdown.

use std::future::poll_fn;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use super::{Config, RuntimeHandle};
use crate::driver::{Driver, Eventfd, Ring};
use crate::error::RuntimeError;
use crate::scheduler::{ShardShared, Shared, Worker};
use crate::task::ShardId;

/// A running spargio runtime: one thread and one io_uring ring per shard.
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
        if crate::runtime::context::current_shard(shared).is_some() {
            // Dropped on one of its own shards: that shard exits when this
            // task returns; waiting here would deadlock. Threads detach.
            return;
        }
        shared.exit.wait_blocking();
        self.join_threads();
    }
}

/// Builds the shared state, starts one thread per shard, and waits until
/// every ring exists before letting any shard run (a doorbell needs the
/// target's ring fd, published by `make_driver`).
pub(crate) fn start(config: Config) -> Result<Runtime, RuntimeError> {
    let n = config.shards;
    let mut deques = Vec::with_capacity(n);
    let mut shards = Vec::with_capacity(n);
    for _ in 0..n {
        let deque = crossbeam_deque::Worker::new_fifo();
        let eventfd = Eventfd::new().map_err(|source| RuntimeError::IoUringUnavailable {
            reason: "could not create the shard's eventfd".into(),
            source,
        })?;
        shards.push(ShardShared::new(deque.stealer(), eventfd));
        deques.push(deque);
    }
    let cpus = if config.thread_affinity {
        allowed_cpus()
    } else {
        Vec::new()
    };
    let shared = Arc::new(Shared::new(shards, config));
    let gate = Arc::new(StartGate::default());
    let (tx, rx) = mpsc::channel::<Result<(), RuntimeError>>();
    let mut threads = Vec::with_capacity(n);
    let mut first_error = None;
    for (id, deque) in deques.into_iter().enumerate() {
        let (shared_t, gate_t, tx_t) = (shared.clone(), gate.clone(), tx.clone());
        let cpu = (!cpus.is_empty()).then(|| cpus[id % cpus.len()]);
        let name = format!("{}-{id}", shared.config.thread_name);
        let spawned = thread::Builder::new().name(name).spawn(move || {
            if let Some(cpu) = cpu {
                pin_to_cpu(cpu);
            }
            let driver = make_driver(&shared_t, id);
            let report = driver.as_ref().map(drop).map_err(clone_error);
            let _ = tx_t.send(report);
            drop(tx_t);
            if let (Ok(driver), true) = (driver, gate_t.wait()) {
                Worker::new(shared_t, id, deque, driver).run();
            }
        });
        match spawned {
            Ok(t) => threads.push(t),
            Err(err) => {
                first_error = Some(RuntimeError::ThreadSpawn(err));
                break;
            }
        }
    }
    drop(tx);
    for report in rx.iter().take(threads.len()) {
        if let (Err(err), None) = (report, &first_error) {
            first_error = Some(err);
        }
    }
    if let Some(err) = first_error {
        gate.decide(false);
        for t in threads {
            let _ = t.join();
        }
        return Err(err);
    }
    gate.decide(true);
    Ok(Runtime {
        handle: RuntimeHandle { shared },
        threads: Mutex::new(threads),
    })
}

/// Holds shard threads until startup has succeeded (or failed) everywhere.
#[derive(Debug, Default)]
struct StartGate {
    decision: Mutex<Option<bool>>,
    cond: Condvar,
}

impl StartGate {
    fn decide(&self, go: bool) {
        *self.decision.lock().unwrap_or_else(|p| p.into_inner()) = Some(go);
        self.cond.notify_all();
    }

    fn wait(&self) -> bool {
        let mut decision = self.decision.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(go) = *decision {
                return go;
            }
            decision = self.cond.wait(decision).unwrap_or_else(|p| p.into_inner());
        }
    }
}

fn make_driver(shared: &Shared, id: ShardId) -> Result<Driver, RuntimeError> {
    let shard = &shared.shards[id];
    let ring = Ring::new(&shared.config.ring)?;
    let fd = ring.fd();
    let features = ring.features();
    let driver = Driver::new(ring, shard.eventfd.raw()).map_err(|source| {
        RuntimeError::IoUringUnavailable {
            reason: "could not arm the shard's eventfd read".into(),
            source,
        }
    })?;
    shard.set_ring(fd, features);
    Ok(driver)
}

/// `RuntimeError` is not `Clone` (it holds an `io::Error`); rebuild it for
/// the report channel.
fn clone_error(err: &RuntimeError) -> RuntimeError {
    match err {
        RuntimeError::IoUringUnavailable { reason, source } => RuntimeError::IoUringUnavailable {
            reason: reason.clone(),
            source: match source.raw_os_error() {
                Some(code) => std::io::Error::from_raw_os_error(code),
                None => std::io::Error::new(source.kind(), source.to_string()),
            },
        },
        other => RuntimeError::IoUringUnavailable {
            reason: other.to_string(),
            source: std::io::Error::other(other.to_string()),
        },
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
