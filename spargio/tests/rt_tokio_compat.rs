//! tokio's runtime APIs inside spargio tasks (feature `tokio-compat`):
//! timers, `tokio::spawn`, `spawn_blocking`, `tokio::net`, `tokio::fs`,
//! `Handle::current()`, from pinned, stealable and local tasks on every
//! shard, on both backends; and a runtime dropped with tokio work pending
//! leaves no thread or fd behind.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use spargio::net::{TcpListener, TcpStream};
use spargio::{BackendKind, RuntimeBuilder, RuntimeHandle, ShardCtx};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A hang fails the test instead of stalling the run.
const BOUND: Duration = Duration::from_secs(30);

/// One test at a time: the fd and thread counts of the drop test must not
/// see another test's runtime.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn backends() -> Vec<BackendKind> {
    let mut out = vec![BackendKind::Epoll];
    if spargio::probe_io_uring().is_ok() {
        out.push(BackendKind::IoUring);
    }
    out
}

/// Runs `body` (given the handle) as a stealable task of a 2-shard
/// runtime on each backend, within `BOUND`.
fn on_each_backend<F, Fut>(body: F)
where
    F: Fn(RuntimeHandle) -> Fut + Send + Clone + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let _one = serial();
    for backend in backends() {
        let body = body.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let builder = RuntimeBuilder::new()
                .shards(2)
                .backend(backend)
                .tokio_compat(true);
            let out = spargio::block_on(spargio::run_with(builder, body));
            let _ = tx.send(out.map_err(|e| e.to_string()));
        });
        match rx.recv_timeout(BOUND) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("{backend:?}: {e}"),
            Err(_) => panic!("{backend:?}: no answer within {BOUND:?} (a lost wakeup?)"),
        }
    }
}

#[test]
fn tokio_timers_work_in_pinned_stealable_and_local_tasks_on_every_shard() {
    on_each_backend(|h| async move {
        let mut jobs = Vec::new();
        for shard in 0..h.shard_count() {
            jobs.push(
                h.spawn_pinned(shard, async move {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    let t = tokio::time::timeout(
                        Duration::from_millis(5),
                        std::future::pending::<()>(),
                    );
                    assert!(t.await.is_err(), "the timeout fires");
                    let mut tick = tokio::time::interval(Duration::from_millis(2));
                    for _ in 0..3 {
                        tick.tick().await;
                    }
                    ShardCtx::current().unwrap().shard_id()
                })
                .unwrap(),
            );
            jobs.push(
                h.spawn_local_on(shard, |ctx| async move {
                    let start = tokio::time::Instant::now();
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    assert!(start.elapsed() >= Duration::from_millis(3));
                    ctx.shard_id()
                })
                .unwrap(),
            );
        }
        for (i, job) in jobs.into_iter().enumerate() {
            assert_eq!(
                job.await.unwrap(),
                i / 2,
                "ran on the shard it was placed on"
            );
        }
        let stealable = h
            .spawn_stealable(async {
                tokio::time::sleep(Duration::from_millis(1)).await;
                7
            })
            .unwrap();
        assert_eq!(stealable.await.unwrap(), 7);
    });
}

#[test]
fn tokio_spawn_from_a_spargio_task_runs_on_that_shard_and_joins() {
    on_each_backend(|h| async move {
        for shard in 0..h.shard_count() {
            let job = h.spawn_pinned(shard, async move {
                let inner = tokio::spawn(async {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    ShardCtx::current().map(|c| c.shard_id())
                });
                let blocking = tokio::task::spawn_blocking(|| {
                    std::thread::current().name().map(str::to_owned)
                });
                let handle = tokio::runtime::Handle::current();
                let via_handle = handle.spawn(async { 40 + 2 });
                (
                    inner.await.unwrap(),
                    blocking.await.unwrap(),
                    via_handle.await.unwrap(),
                )
            });
            let (ran_on, blocking_thread, answer) = job.unwrap().await.unwrap();
            assert_eq!(
                ran_on,
                Some(shard),
                "a tokio task runs on the shard that spawned it"
            );
            let name = blocking_thread.unwrap_or_default();
            assert!(
                name.starts_with("spargio-tokio-blocking"),
                "ran on {name:?}"
            );
            assert_eq!(answer, 42);
        }
    });
}

#[test]
fn tokio_net_echo_between_tasks_on_different_shards() {
    on_each_backend(|h| async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = h
            .spawn_pinned(1, async move {
                for _ in 0..4 {
                    let (mut s, _) = listener.accept().await.unwrap();
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 64 * 1024];
                        loop {
                            let n = s.read(&mut buf).await.unwrap();
                            if n == 0 {
                                break;
                            }
                            s.write_all(&buf[..n]).await.unwrap();
                        }
                    });
                }
            })
            .unwrap();
        let mut clients = Vec::new();
        for i in 0..4u8 {
            clients.push(
                h.spawn_pinned(usize::from(i) % 2, async move {
                    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                    let data: Vec<u8> = (0..200_000u32).map(|x| (x as u8) ^ i).collect();
                    let (mut r, mut w) = s.split();
                    let send = async {
                        w.write_all(&data).await.unwrap();
                        w.shutdown().await.unwrap();
                    };
                    let mut got = Vec::new();
                    let recv = r.read_to_end(&mut got);
                    let (_, n) = tokio::join!(send, recv);
                    n.unwrap();
                    assert_eq!(got, data, "client {i}: bytes round-tripped");
                })
                .unwrap(),
            );
        }
        for c in clients {
            c.await.unwrap();
        }
        server.await.unwrap();
    });
}

#[test]
fn tokio_fs_round_trips_a_file() {
    on_each_backend(|_| async move {
        let dir = std::env::temp_dir().join(format!("spargio-tokio-fs-{}", std::process::id()));
        tokio::fs::create_dir_all(&dir).await.unwrap();
        let path = dir.join("f");
        tokio::fs::write(&path, b"over tokio::fs").await.unwrap();
        assert_eq!(tokio::fs::read(&path).await.unwrap(), b"over tokio::fs");
        tokio::fs::remove_dir_all(&dir).await.unwrap();
    });
}

#[test]
fn tokio_timeout_around_a_spargio_read_cancels_it_and_the_stream_still_works() {
    on_each_backend(|h| async move {
        let listener = TcpListener::bind(&h, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = h
            .spawn_stealable(async move {
                let (s, _) = listener.accept().await.unwrap();
                // Quiet until told, then one message.
                let mut go = [0u8; 1];
                s.read_exact(&mut go).await.unwrap();
                s.write_all(b"late").await.unwrap();
                s
            })
            .unwrap();
        let s = TcpStream::connect(&h, addr).await.unwrap();
        let quiet = tokio::time::timeout(Duration::from_millis(20), s.recv(16)).await;
        assert!(quiet.is_err(), "nothing was sent: the timeout fires");
        s.write_all(b"g").await.unwrap();
        let mut buf = [0u8; 4];
        tokio::time::timeout(BOUND, s.read_exact(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&buf, b"late");
        drop(peer.await.unwrap());
    });
}

#[test]
fn a_tokio_task_that_wakes_a_spargio_task_ends_the_park() {
    // Every shard idle, a tokio task (on shard 0's tokio runtime) is the
    // only thing that can wake the spargio task waiting on shard 0.
    on_each_backend(|h| async move {
        let woke = Arc::new(AtomicUsize::new(0));
        let w = woke.clone();
        let job = h
            .spawn_pinned(0, async move {
                for round in 0..50 {
                    let (tx, rx) = futures_channel_oneshot();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        tx.send(round);
                    });
                    assert_eq!(rx.await, round);
                    w.fetch_add(1, Ordering::Relaxed);
                }
            })
            .unwrap();
        job.await.unwrap();
        assert_eq!(woke.load(Ordering::Relaxed), 50);
    });
}

#[test]
fn outside_threads_wake_parked_shards_every_time() {
    // A doorbell from a thread outside the runtime, to a shard parked in
    // its tokio runtime, again and again. On io_uring a ring read of the
    // doorbell eventfd, completed from inside the writer's wakeup, loses
    // every deferred eventfd signal after the first (a kernel bug,
    // `driver/uring/outside.rs`): this hung at the second round.
    let _one = serial();
    for backend in backends() {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let rt = RuntimeBuilder::new()
                .shards(2)
                .backend(backend)
                .tokio_compat(true)
                .build()
                .unwrap();
            let h = rt.handle();
            for round in 0..200u32 {
                // Long enough for both shards to park.
                std::thread::sleep(Duration::from_millis(2));
                let job = if round % 2 == 0 {
                    h.spawn_stealable(async move { round }).unwrap()
                } else {
                    h.spawn_pinned((round as usize / 2) % 2, async move { round })
                        .unwrap()
                };
                assert_eq!(spargio::block_on(job).unwrap(), round);
            }
            let _ = tx.send(());
        });
        rx.recv_timeout(BOUND)
            .unwrap_or_else(|_| panic!("{backend:?}: a parked shard missed an outside wake"));
    }
}

#[test]
fn dropping_the_runtime_with_tokio_work_pending_leaves_no_thread_or_fd() {
    let _one = serial();
    for backend in backends() {
        // Warm-up: whatever the process makes once (tokio's globals).
        run_and_drop_with_pending_tokio_work(backend);
        let (threads, fds) = (count("/proc/self/task"), count("/proc/self/fd"));
        for _ in 0..3 {
            run_and_drop_with_pending_tokio_work(backend);
        }
        assert_eq!(
            count("/proc/self/task"),
            threads,
            "{backend:?}: threads left behind"
        );
        assert_eq!(count("/proc/self/fd"), fds, "{backend:?}: fds left behind");
    }
}

fn run_and_drop_with_pending_tokio_work(backend: BackendKind) {
    let rt = RuntimeBuilder::new()
        .shards(2)
        .backend(backend)
        .tokio_compat(true)
        .build()
        .unwrap();
    let h = rt.handle();
    let (tx, rx) = mpsc::channel();
    for shard in 0..2 {
        let tx = tx.clone();
        h.spawn_pinned(shard, async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
            tokio::spawn(async move {
                let _kept = listener.accept().await;
                tokio::time::sleep(Duration::from_secs(3600)).await;
            });
            let _blocking =
                tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(20)));
            tx.send(()).unwrap();
            tokio::time::sleep(Duration::from_secs(3600)).await;
        })
        .unwrap();
    }
    for _ in 0..2 {
        rx.recv_timeout(BOUND).expect("tasks started");
    }
    drop(rt);
}

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

/// A minimal one-shot channel (spargio's tests do not pull in
/// futures-channel): the receiver is a spargio-side future woken by
/// whoever sends, here a tokio task.
fn futures_channel_oneshot() -> (OneTx, OneRx) {
    let slot = Arc::new(std::sync::Mutex::new((None, None::<std::task::Waker>)));
    (OneTx(slot.clone()), OneRx(slot))
}

struct OneTx(Arc<std::sync::Mutex<(Option<u32>, Option<std::task::Waker>)>>);
struct OneRx(Arc<std::sync::Mutex<(Option<u32>, Option<std::task::Waker>)>>);

impl OneTx {
    fn send(self, v: u32) {
        let waker = {
            let mut g = self.0.lock().unwrap();
            g.0 = Some(v);
            g.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Future for OneRx {
    type Output = u32;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<u32> {
        let mut g = self.0.lock().unwrap();
        match g.0.take() {
            Some(v) => std::task::Poll::Ready(v),
            None => {
                g.1 = Some(cx.waker().clone());
                std::task::Poll::Pending
            }
        }
    }
}

#[spargio::test(shards = 2, tokio_compat = true)]
async fn the_test_macro_honours_tokio_compat() {
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(tokio::spawn(async { 5 }).await.unwrap(), 5);
}

#[test]
fn handle_block_on_inside_a_task_panics_as_tokio_does_instead_of_hanging() {
    // Plain tokio refuses it ("Cannot start a runtime from within a
    // runtime"); a current-thread runtime's `Handle::block_on` would drive
    // nothing while the only thread that could sits in it.
    on_each_backend(|h| async move {
        let out = h
            .spawn_stealable(async {
                std::panic::catch_unwind(|| {
                    tokio::runtime::Handle::current()
                        .block_on(tokio::time::sleep(Duration::from_millis(5)))
                })
                .map_err(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                })
            })
            .unwrap()
            .await
            .unwrap();
        let msg = out.expect_err("block_on inside a task must refuse");
        assert!(msg.contains("runtime"), "{msg}");
    });
}

/// An idle shard whose tokio runtime holds a live task (sqlx's pool keeps
/// a maintenance task asleep on its timer) parks. It used to spin for
/// good: each spin poll counted down to a turn of tokio, the turn ended
/// the spin, and the next idle step started a fresh spin window (1M
/// `epoll_wait`s a second, seen under a database benchmark).
#[test]
fn an_idle_shard_with_a_sleeping_tokio_task_parks() {
    let _one = serial();
    for backend in backends() {
        let rt = RuntimeBuilder::new()
            .shards(1)
            .backend(backend)
            .tokio_compat(true)
            .build()
            .unwrap();
        let h = rt.handle();
        spargio::block_on(
            h.spawn_pinned(0, async {
                // A tokio task that stays alive, asleep.
                tokio::spawn(tokio::time::sleep(Duration::from_secs(3600)));
                // Turns of tokio that wake nothing, then nothing to do.
                for _ in 0..8 {
                    spargio::time::sleep(Duration::from_millis(1)).await;
                }
            })
            .unwrap(),
        )
        .unwrap();
        // Parked: the time counted parked (a park in progress counts up
        // to now) grows with the wall clock. (Not the park count: the
        // shard may have entered its one long park before a first read.)
        let parked_ns = || h.stats_snapshot().totals.parked_ns;
        let deadline = std::time::Instant::now() + BOUND;
        loop {
            let before = parked_ns();
            std::thread::sleep(Duration::from_millis(100));
            if parked_ns() - before >= 50_000_000 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{backend:?}: the idle shard never parked"
            );
        }
        // And it stays parked: a spinning shard would park again only at
        // its next wake; give a spinner time to show, then read the CPU.
        let cpu = |tid: &str| -> u64 {
            let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
            let f: Vec<&str> = stat
                .rsplit(')')
                .next()
                .unwrap()
                .split_whitespace()
                .collect();
            f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
        };
        let shard_tid = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| {
                let e = e.ok()?;
                let name = std::fs::read_to_string(e.path().join("comm")).ok()?;
                name.starts_with("spargio-shard")
                    .then(|| e.file_name().into_string().unwrap())
            })
            .next()
            .expect("the shard thread");
        let t0 = cpu(&shard_tid);
        std::thread::sleep(Duration::from_millis(300));
        let used = cpu(&shard_tid) - t0;
        // Clock ticks (10 ms): a spinning shard burns ~30 in 300 ms.
        assert!(
            used <= 10,
            "{backend:?}: the idle shard used {used} ticks in 300 ms"
        );
        drop(rt);
    }
}

/// Operators see each shard's tokio runtime: its live tasks and queue in
/// `stats_snapshot` and the Prometheus text, and the shard's turns of it.
#[test]
fn stats_show_each_shards_tokio_tasks_and_turns() {
    let _one = serial();
    let rt = RuntimeBuilder::new()
        .shards(2)
        .tokio_compat(true)
        .build()
        .unwrap();
    let h = rt.handle();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    spargio::block_on(
        h.spawn_pinned(1, async move {
            tokio::spawn(async move {
                let _ = rx.await;
            });
            tokio::time::sleep(Duration::from_millis(2)).await;
        })
        .unwrap(),
    )
    .unwrap();
    let s = h.stats_snapshot();
    assert_eq!(s.shards[1].tokio_alive_tasks, 1);
    assert_eq!(s.shards[0].tokio_alive_tasks, 0);
    assert!(s.shards[1].counters.tokio_turns > 0, "{:?}", s.shards[1]);
    let text = s.to_prometheus_text();
    assert!(
        text.contains("spargio_tokio_alive_tasks{shard=\"1\"} 1"),
        "{text}"
    );
    assert!(text.contains("# TYPE spargio_tokio_turns_total counter"));
    tx.send(()).unwrap();
    let deadline = std::time::Instant::now() + BOUND;
    while h.stats_snapshot().shards[1].tokio_alive_tasks != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the tokio task never ended"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
