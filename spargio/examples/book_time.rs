//! The guide's sections on timers, cancellation and the boundary channel
//! (`book/src/io.md`): sleeps, timeouts, intervals, a task group stopped
//! by its token, and a tokio runtime calling into spargio.
//!
//! ```text
//! cargo run -p spargio --example book_time
//! ```

use std::time::{Duration, Instant};

use spargio::boundary::{self, BoundaryError};
use spargio::sync::{CancellationToken, TaskGroup};
use spargio::time::{interval, sleep, timeout, MissedTickBehavior, Sleep};
use spargio::{Runtime, TaskPlacement};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = Runtime::builder().shards(2).build()?;
    let handle = rt.handle();

    // ANCHOR: timers
    let timers = handle.spawn_stealable(async {
        // A timeout wraps any future; the inner future is dropped on expiry.
        let slow = timeout(Duration::from_millis(5), sleep(Duration::from_secs(10))).await;
        assert!(slow.is_err());
        let quick = timeout(Duration::from_secs(1), async { 7 }).await;
        assert_eq!(quick.ok(), Some(7));

        // An interval: the first tick is immediate.
        let mut every = interval(Duration::from_millis(2));
        every.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let start = every.tick().await;
        for _ in 0..3 {
            every.tick().await;
        }
        assert!(start.elapsed() >= Duration::from_millis(6));

        // A resettable deadline (an idle timeout pushed back on activity).
        let mut idle = Sleep::new(Duration::from_millis(50));
        idle.reset(Instant::now() + Duration::from_millis(3));
        idle.await;
    })?;
    spargio::block_on(timers)?;
    // From a thread outside the runtime, arm the timer through the handle.
    spargio::block_on(handle.sleep(Duration::from_millis(1)));
    // ANCHOR_END: timers

    // ANCHOR: cancel
    // Tokens: cancelling a parent cancels its children, not the reverse.
    let shutdown = CancellationToken::new();
    let worker_token = shutdown.child_token();
    let worker = handle.spawn_stealable(async move {
        let mut ticks = 0u32;
        loop {
            // Wait for the cancel, at most one tick long.
            let tick = Duration::from_millis(1);
            if timeout(tick, worker_token.cancelled()).await.is_ok() {
                return ticks;
            }
            ticks += 1;
        }
    })?;
    spargio::block_on(handle.sleep(Duration::from_millis(5)));
    shutdown.cancel();
    println!("worker stopped after {} ticks", spargio::block_on(worker)?);

    // Task groups: cancelling the group drops every member at its next
    // await; `wait` reports how each one ended.
    let group = TaskGroup::new(&handle);
    let done = group.spawn_with_placement(TaskPlacement::Stealable, async { 1 })?;
    for shard in 0..2 {
        group.spawn_with_placement(TaskPlacement::Pinned(shard), async {
            sleep(Duration::from_secs(3600)).await;
        })?;
    }
    assert_eq!(spargio::block_on(done)?, 1);
    group.cancel();
    let report = spargio::block_on(group.wait());
    assert_eq!((report.completed, report.cancelled), (1, 2));
    // ANCHOR_END: cancel

    // ANCHOR: boundary
    // A bounded request/reply channel; either side may run on any executor.
    let (client, server) = boundary::channel::<u64, u64>(64);
    let h = handle.clone();
    let serving = handle.spawn_stealable(async move {
        // Ends with `Closed` once every client is gone.
        while let Ok(req) = server.recv().await {
            let n = *req.request();
            h.spawn_stealable(async move {
                // A caller that gave up is reported as `Canceled`; ignore it.
                let _ = req.respond(n * n);
            })
            .expect("spawn");
        }
    })?;

    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()?;
    let sum = tokio_rt.block_on(async move {
        let calls: Vec<_> = (0..100u64)
            .map(|i| {
                let client = client.clone();
                // Accepted (queued), then answered: two stages, both
                // bounded by the 5 s deadline.
                tokio::spawn(async move {
                    let ticket = client.call_with_timeout(i, Duration::from_secs(5)).await?;
                    ticket.await
                })
            })
            .collect();
        let mut sum = 0;
        for call in calls {
            match call.await.expect("tokio task") {
                Ok(square) => sum += square,
                Err(BoundaryError::Timeout) => eprintln!("a call timed out"),
                Err(err) => panic!("call failed: {err}"),
            }
        }
        sum
    });
    spargio::block_on(serving)?;
    assert_eq!(sum, (0..100u64).map(|i| i * i).sum::<u64>());
    // ANCHOR_END: boundary

    spargio::block_on(rt.shutdown());
    println!("timers, cancellation and boundary checked");
    Ok(())
}
