//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use spargio::net::{TcpListener, TcpStream};
use spargio::{Runtime, RuntimeBuilder, RuntimeHandle, ShardCtx};

/// Generous bound for "this must not hang". Never a performance assertion.
pub const HANG: Duration = Duration::from_secs(60);

/// The backends this machine can run: epoll always, io_uring where the
/// kernel allows it.
pub fn backends() -> Vec<spargio::BackendKind> {
    let mut out = vec![spargio::BackendKind::Epoll];
    if spargio::probe_io_uring().is_ok() {
        out.push(spargio::BackendKind::IoUring);
    }
    out
}

pub fn runtime(shards: usize) -> Runtime {
    RuntimeBuilder::new()
        .shards(shards)
        .build()
        .expect("runtime")
}

/// A builder pinned to io_uring, for tests of io_uring's own machinery
/// (rings, `MSG_RING`, SQPOLL, ring fault injection); `None`, with the
/// reason printed, where this process may not use io_uring.
pub fn io_uring_builder() -> Option<RuntimeBuilder> {
    match spargio::probe_io_uring() {
        Ok(()) => Some(RuntimeBuilder::new().backend(spargio::BackendKind::IoUring)),
        Err(refusal) => {
            eprintln!("SKIP: this test needs io_uring, refused here: {refusal}");
            None
        }
    }
}

/// [`runtime`] on io_uring; `None` where io_uring is refused (printed).
pub fn io_uring_runtime(shards: usize) -> Option<Runtime> {
    Some(io_uring_builder()?.shards(shards).build().expect("runtime"))
}

pub fn shard() -> usize {
    ShardCtx::current().expect("on a shard").shard_id()
}

/// Runs `f` on a helper thread and fails the test if it does not finish in
/// `HANG` (so a lost wakeup is a failure, not a stuck CI job).
pub fn within_hang_bound<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(HANG)
        .expect("operation hung (lost wakeup?)")
}

/// Yields once to the scheduler.
pub fn yield_now() -> impl Future<Output = ()> {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
}

/// A one-shot signal a task can await and any thread can set.
#[derive(Clone, Default)]
pub struct Signal {
    inner: Arc<SignalInner>,
}

#[derive(Default)]
struct SignalInner {
    set: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Signal {
    pub fn set(&self) {
        self.inner.set.store(true, Ordering::SeqCst);
        if let Some(w) = self.inner.waker.lock().unwrap().take() {
            w.wake();
        }
    }

    pub fn is_set(&self) -> bool {
        self.inner.set.load(Ordering::SeqCst)
    }

    pub fn wait(&self) -> SignalWait {
        SignalWait {
            signal: self.clone(),
        }
    }
}

pub struct SignalWait {
    signal: Signal,
}

impl Future for SignalWait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = &self.signal.inner;
        if inner.set.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        *inner.waker.lock().unwrap() = Some(cx.waker().clone());
        if inner.set.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Counts drops, recording the thread name each happened on.
#[derive(Clone, Default)]
pub struct DropLog {
    pub count: Arc<AtomicUsize>,
    pub threads: Arc<Mutex<Vec<String>>>,
}

pub struct DropGuard(DropLog);

impl DropLog {
    pub fn guard(&self) -> DropGuard {
        DropGuard(self.clone())
    }
    pub fn dropped(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        let name = std::thread::current().name().unwrap_or("?").to_string();
        self.0.threads.lock().unwrap().push(name);
        self.0.count.fetch_add(1, Ordering::SeqCst);
    }
}

/// A test body: a boxed future run as a task.
pub type Body<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Runs `f`'s future as a stealable task on a fresh 2-shard runtime and
/// returns its output, failing the test if it hangs.
pub fn on_runtime<T: Send + 'static>(
    f: impl FnOnce(RuntimeHandle) -> Body<T> + Send + 'static,
) -> T {
    on_runtime_with(2, f)
}

/// [`on_runtime`] with `shards` shards.
pub fn on_runtime_with<T: Send + 'static>(
    shards: usize,
    f: impl FnOnce(RuntimeHandle) -> Body<T> + Send + 'static,
) -> T {
    within_hang_bound(move || {
        let rt = runtime(shards);
        let h = rt.handle();
        let join = h.spawn_stealable(f(h.clone())).unwrap();
        spargio::block_on(join).unwrap()
    })
}

/// A connected loopback TCP pair: (client, server).
pub async fn tcp_pair(h: &RuntimeHandle) -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind_socket_addr(h, "127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = h
        .spawn_stealable(async move { listener.accept().await.unwrap().0 })
        .unwrap();
    let client = TcpStream::connect_socket_addr(h, addr).await.unwrap();
    (client, accept.await.unwrap())
}

/// A fresh directory for one test, removed (with its contents) when the
/// guard drops. Derefs to its path.
pub struct ScratchDir(std::path::PathBuf);

/// Creates `spargio-<pid>-<name>` under the temp dir, empty.
pub fn scratch_dir(name: &str) -> ScratchDir {
    let dir = std::env::temp_dir().join(format!("spargio-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    ScratchDir(dir)
}

impl std::ops::Deref for ScratchDir {
    type Target = std::path::PathBuf;
    fn deref(&self) -> &std::path::PathBuf {
        &self.0
    }
}

impl AsRef<std::path::Path> for ScratchDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
pub mod seccomp;

/// Pins the calling thread to `cpu`.
pub fn pin(cpu: usize) {
    // SAFETY: `set` is plain data, fully initialised before the call reads
    // it; the call only changes this thread's affinity.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "pin to CPU {cpu}"
        );
    }
}

/// Runs `body` as a stealable task of a runtime with `shards` shards on
/// each backend this machine has, failing the test (with the backend's
/// name) if it panics, errs or hangs.
pub fn on_each_backend<F, Fut>(shards: usize, body: F)
where
    F: Fn(RuntimeHandle) -> Fut + Send + Clone + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    for backend in backends() {
        let body = body.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let builder = RuntimeBuilder::new().shards(shards).backend(backend);
            let out = spargio::block_on(spargio::run_with(builder, body));
            let _ = tx.send(out.map_err(|e| e.to_string()));
        });
        match rx.recv_timeout(HANG) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("{backend:?}: {e}"),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("{backend:?}: no answer within {HANG:?}")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic!("{backend:?}: the runtime's thread panicked (its message is above)")
            }
        }
    }
}

/// Sets a flag when woken: tells a test that an operation's completion is
/// in without polling its future again.
#[derive(Default)]
pub struct WokenFlag(AtomicBool);

impl WokenFlag {
    pub fn new() -> Arc<WokenFlag> {
        Arc::new(WokenFlag::default())
    }

    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Sleeps a millisecond at a time until woken.
    pub async fn wait(&self) {
        while !self.is_set() {
            spargio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

impl std::task::Wake for WokenFlag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}
