//! Sleeps, timeouts and intervals. Timing checks are one-sided: never
//! early, and late by at most a generous bound.

mod common;

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use common::{runtime, shard, within_hang_bound, DropLog, Signal};
use spargio::time::{interval, interval_at, sleep, timeout, MissedTickBehavior, Sleep};
use spargio::{block_on, RuntimeBuilder};

/// Lateness we tolerate on a loaded 2-core CI machine. Only a hang or a
/// lost timer can exceed it.
const LATE: Duration = Duration::from_secs(5);

#[test]
fn sleep_is_never_early() {
    let rt = runtime(2);
    let h = rt.handle();
    let jobs: Vec<_> = (0..50u64)
        .map(|i| {
            h.spawn_stealable(async move {
                let d = Duration::from_micros(300 * i + 1);
                let start = Instant::now();
                sleep(d).await;
                (d, start.elapsed())
            })
            .unwrap()
        })
        .collect();
    for j in jobs {
        let (wanted, took) = block_on(j).unwrap();
        assert!(took >= wanted, "woke after {took:?}, asked for {wanted:?}");
        assert!(
            took < wanted + LATE,
            "woke after {took:?}, asked for {wanted:?}"
        );
    }
}

#[test]
fn idle_parked_shards_wake_for_their_timers() {
    let rt = RuntimeBuilder::new()
        .shards(2)
        .spin_before_park(Duration::ZERO)
        .build()
        .unwrap();
    let h = rt.handle();
    let took = within_hang_bound(move || {
        block_on(
            h.spawn_pinned(1, async {
                let start = Instant::now();
                sleep(Duration::from_millis(20)).await;
                start.elapsed()
            })
            .unwrap(),
        )
        .unwrap()
    });
    assert!(took >= Duration::from_millis(20));
}

#[test]
fn an_earlier_timer_armed_from_outside_rewakes_a_parked_shard() {
    let rt = RuntimeBuilder::new()
        .shards(1)
        .spin_before_park(Duration::ZERO)
        .build()
        .unwrap();
    let h = rt.handle();
    // The shard parks with a far deadline ...
    let far = h.spawn_pinned(0, sleep(Duration::from_secs(3600))).unwrap();
    while h.stats_snapshot().shards[0].timers_armed == 0 {
        std::thread::yield_now();
    }
    // ... and a much earlier timer arrives from another thread.
    let h2 = h.clone();
    let took = within_hang_bound(move || {
        let start = Instant::now();
        block_on(h2.sleep(Duration::from_millis(10)));
        start.elapsed()
    });
    assert!(took >= Duration::from_millis(10) && took < LATE, "{took:?}");
    far.abort();
}

#[test]
fn handle_sleeps_work_from_many_outside_threads() {
    let rt = runtime(2);
    let h = rt.handle();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let h = h.clone();
            std::thread::spawn(move || {
                let d = Duration::from_millis(1 + i);
                let start = Instant::now();
                block_on(h.sleep(d));
                assert!(start.elapsed() >= d);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn sleep_polled_off_the_runtime_panics_clearly() {
    let err = std::panic::catch_unwind(|| block_on(sleep(Duration::from_millis(1)))).unwrap_err();
    let msg = err
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| err.downcast_ref::<String>().cloned());
    assert!(msg.unwrap().contains("RuntimeHandle::sleep"));
}

#[test]
fn reset_moves_the_deadline_both_ways() {
    let rt = runtime(1);
    let h = rt.handle();
    let (early, late) = block_on(
        h.spawn_pinned(0, async {
            let start = Instant::now();
            let mut s = Sleep::new(Duration::from_secs(3600));
            // Arm it, then pull the deadline in.
            poll_fn(|cx| {
                assert!(Pin::new(&mut s).poll(cx).is_pending());
                Poll::Ready(())
            })
            .await;
            s.reset(start + Duration::from_millis(5));
            (&mut s).await;
            let early = start.elapsed();
            // Completed sleeps can be reset later and awaited again.
            s.reset(Instant::now() + Duration::from_millis(10));
            let again = Instant::now();
            (&mut s).await;
            (early, again.elapsed())
        })
        .unwrap(),
    )
    .unwrap();
    assert!(
        early >= Duration::from_millis(5) && early < LATE,
        "{early:?}"
    );
    assert!(late >= Duration::from_millis(10), "{late:?}");
}

#[test]
fn timeout_returns_output_or_error_and_drops_the_loser() {
    let rt = runtime(2);
    let h = rt.handle();
    let log = DropLog::default();
    let g = log.guard();
    let (quick, slow) = block_on(
        h.spawn_stealable(async move {
            let quick = timeout(Duration::from_secs(10), async { 5 }).await;
            let slow = timeout(Duration::from_millis(5), async move {
                let _g = g;
                sleep(Duration::from_secs(3600)).await;
            })
            .await;
            (quick, slow)
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!(quick, Ok(5));
    let err = slow.unwrap_err();
    assert_eq!(err.to_string(), "deadline has elapsed");
    assert_eq!(
        std::io::Error::from(err).kind(),
        std::io::ErrorKind::TimedOut
    );
    assert_eq!(log.dropped(), 1);
    // No timer left behind by either side.
    assert!(h
        .stats_snapshot()
        .shards
        .iter()
        .all(|s| s.timers_armed == 0));
}

#[test]
fn a_timer_keeps_working_after_its_task_moves_shards() {
    let rt = runtime(2);
    let h = rt.handle();
    let signal = Signal::default();
    let s2 = signal.clone();
    let task = h
        .spawn_stealable_on(0, async move {
            let start = Instant::now();
            let mut nap = sleep(Duration::from_millis(30));
            let mut shards = vec![];
            poll_fn(|cx| {
                shards.push(shard());
                let mut wait = s2.wait();
                let _ = Pin::new(&mut wait).poll(cx);
                Pin::new(&mut nap).poll(cx)
            })
            .await;
            (start.elapsed(), shards)
        })
        .unwrap();
    // Wake the task from shard 1: a stealable task woken there runs there.
    std::thread::sleep(Duration::from_millis(5));
    block_on(h.spawn_pinned(1, async move { signal.set() }).unwrap()).unwrap();
    let (took, shards) = block_on(task).unwrap();
    assert!(took >= Duration::from_millis(30) && took < LATE, "{took:?}");
    assert!(
        shards.contains(&1),
        "task never polled on shard 1: {shards:?}"
    );
}

#[test]
fn interval_ticks_on_schedule_and_handles_missed_ticks() {
    let rt = runtime(1);
    let h = rt.handle();
    block_on(
        h.spawn_pinned(0, async {
            let period = Duration::from_millis(10);
            let mut every = interval(period);
            let t0 = every.tick().await;
            let t1 = every.tick().await;
            assert_eq!(t1 - t0, period);
            assert!(Instant::now() >= t1);

            for behavior in [
                MissedTickBehavior::Burst,
                MissedTickBehavior::Delay,
                MissedTickBehavior::Skip,
            ] {
                let start = Instant::now();
                let mut it = interval_at(start, period);
                it.set_missed_tick_behavior(behavior);
                assert_eq!(it.missed_tick_behavior(), behavior);
                it.tick().await;
                // Fall 3.5 periods behind (blocking on purpose).
                std::thread::sleep(period * 7 / 2);
                let late = it.tick().await;
                assert_eq!(late, start + period, "the missed tick reports its schedule");
                let after = Instant::now();
                let next = it.tick().await;
                match behavior {
                    MissedTickBehavior::Burst => assert_eq!(next, start + period * 2),
                    MissedTickBehavior::Delay => {
                        assert!(next >= after + period - Duration::from_millis(1))
                    }
                    MissedTickBehavior::Skip => {
                        assert_eq!((next - start).as_nanos() % period.as_nanos(), 0);
                        assert!(next >= after, "{:?}", next - start);
                    }
                }
            }
        })
        .unwrap(),
    )
    .unwrap();
}

#[test]
#[should_panic(expected = "period must be non-zero")]
fn zero_period_interval_is_refused() {
    let _ = interval(Duration::ZERO);
}

/// 100,000 sleeps armed at once; half are cancelled and re-armed; every one
/// fires exactly once, none early; the wheels empty and give memory back.
#[test]
fn timer_storm() {
    const N: usize = 100_000;
    let rt = runtime(2);
    let h = rt.handle();
    let fired = Arc::new(AtomicUsize::new(0));
    let early = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..N)
        .map(|i| {
            let (fired, early) = (fired.clone(), early.clone());
            h.spawn_stealable(async move {
                let first = Duration::from_millis(20 + (i % 50) as u64);
                let mut s = sleep(first);
                poll_fn(|cx| {
                    let _ = Pin::new(&mut s).poll(cx);
                    Poll::Ready(())
                })
                .await;
                let deadline = if i % 2 == 0 {
                    // Cancel and re-arm.
                    drop(s);
                    let d = Instant::now() + Duration::from_millis(5 + (i % 30) as u64);
                    s = Sleep::until(d);
                    d
                } else {
                    s.deadline()
                };
                s.await;
                if Instant::now() < deadline {
                    early.fetch_add(1, Ordering::Relaxed);
                }
                fired.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap()
        })
        .collect();
    within_hang_bound(move || {
        for t in tasks {
            block_on(t).unwrap();
        }
    });
    assert_eq!(fired.load(Ordering::Relaxed), N);
    assert_eq!(early.load(Ordering::Relaxed), 0);
    let stats = h.stats_snapshot();
    for shard in &stats.shards {
        assert_eq!(shard.timers_armed, 0);
        assert!(
            shard.timer_capacity <= 1024,
            "timer storage kept {}",
            shard.timer_capacity
        );
    }
}
