//! `timer_storm`: 100,000 sleeps armed at once, half of them cancelled and
//! re-armed, all awaited (BENCHMARKS.md). Each sleep lives in its own task.
//! Deadlines: 1-10 ms, re-armed ones 1-5 ms from the re-arm.
//!
//! Variants, all with the machine's core count of threads:
//! * `spargio`: stealable tasks, `spargio::time::sleep`;
//! * `tokio_mt`: multi-thread runtime, `tokio::time::sleep`;
//! * `compio`: one persistent compio runtime per thread (thread-per-core),
//!   the timers split evenly, `compio::time::sleep`.

#[path = "common/cpu.rs"]
mod cpu;

use std::future::{poll_fn, Future};
use std::hint::black_box;
use std::sync::mpsc;
use std::task::Poll;
use std::thread;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};

const TIMERS: usize = 100_000;

fn first(i: usize) -> Duration {
    Duration::from_millis(1 + (i % 10) as u64)
}

fn second(i: usize) -> Duration {
    Duration::from_millis(1 + (i % 5) as u64)
}

/// Arms `a`, and for even `i` cancels it and arms `b` instead; awaits the
/// survivor. Identical on every runtime.
async fn storm_one<F: Future<Output = ()>>(i: usize, a: F, b: impl FnOnce() -> F) {
    let mut a = Box::pin(a);
    // First poll arms the timer.
    poll_fn(|cx| {
        let _ = a.as_mut().poll(cx);
        Poll::Ready(())
    })
    .await;
    if i.is_multiple_of(2) {
        drop(a);
        b().await;
    } else {
        a.await;
    }
}

fn spargio_storm(handle: &spargio::RuntimeHandle) {
    let tasks: Vec<_> = (0..TIMERS)
        .map(|i| {
            handle
                .spawn_stealable(storm_one(i, spargio::time::sleep(first(i)), move || {
                    spargio::time::sleep(second(i))
                }))
                .expect("spawn")
        })
        .collect();
    spargio::block_on(async {
        for t in tasks {
            t.await.expect("timer task");
        }
    });
}

fn tokio_storm(rt: &tokio::runtime::Runtime) {
    rt.block_on(async {
        let tasks: Vec<_> = (0..TIMERS)
            .map(|i| {
                tokio::spawn(storm_one(i, tokio::time::sleep(first(i)), move || {
                    tokio::time::sleep(second(i))
                }))
            })
            .collect();
        for t in tasks {
            t.await.expect("timer task");
        }
    });
}

/// Persistent compio runtimes, one per thread; each iteration hands every
/// thread its share of the timers and waits for all shares.
struct CompioPool {
    jobs: Vec<mpsc::Sender<(usize, usize)>>,
    done: mpsc::Receiver<()>,
}

impl CompioPool {
    fn new(threads: usize) -> CompioPool {
        let (done_tx, done) = mpsc::channel();
        let jobs = (0..threads)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<(usize, usize)>();
                let done_tx = done_tx.clone();
                thread::spawn(move || {
                    let rt = compio::runtime::Runtime::new().expect("compio runtime");
                    while let Ok((start, end)) = rx.recv() {
                        rt.block_on(async {
                            let tasks: Vec<_> = (start..end)
                                .map(|i| {
                                    compio::runtime::spawn(storm_one(
                                        i,
                                        compio::time::sleep(first(i)),
                                        move || compio::time::sleep(second(i)),
                                    ))
                                })
                                .collect();
                            for t in tasks {
                                t.await.expect("timer task");
                            }
                        });
                        done_tx.send(()).expect("bench alive");
                    }
                });
                tx
            })
            .collect();
        CompioPool { jobs, done }
    }

    fn storm(&self) {
        let n = self.jobs.len();
        for (k, job) in self.jobs.iter().enumerate() {
            job.send((k * TIMERS / n, (k + 1) * TIMERS / n))
                .expect("worker alive");
        }
        for _ in 0..n {
            self.done.recv().expect("worker alive");
        }
    }
}

fn timer_storm(c: &mut Criterion) {
    let ncpu = thread::available_parallelism().map_or(1, |n| n.get());
    let mut group = cpu::Group::new(c, "timer_storm");
    group.inner().sample_size(10);
    {
        let rt = spargio::Runtime::builder()
            .shards(ncpu)
            .build()
            .expect("spargio");
        let handle = rt.handle();
        group.bench("spargio", || spargio_storm(black_box(&handle)));
    }
    {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(ncpu)
            .enable_time()
            .build()
            .expect("tokio");
        group.bench("tokio_mt", || tokio_storm(black_box(&rt)));
    }
    {
        let pool = CompioPool::new(ncpu);
        group.bench("compio", || pool.storm());
    }
    group.finish();
}

criterion_group!(benches, timer_storm);
criterion_main!(benches);
