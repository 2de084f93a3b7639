//! The time and cancellation types the reference crate exports at its
//! root are reachable there (`spargio::Sleep`, `spargio::TaskGroup`, ...),
//! and are the same types as in `spargio::time` / `spargio::sync`.

mod common;

use std::time::{Duration, Instant};

use spargio::{
    interval, interval_at, CancellationToken, Interval, MissedTickBehavior, Sleep, TaskGroup,
    TaskGroupJoinHandle, TaskPlacement, TimeoutError,
};

#[test]
fn time_types_at_the_root() {
    common::on_runtime(|_h| {
        Box::pin(async move {
            let mut sleep: Sleep = Sleep::new(Duration::from_millis(1));
            sleep.reset(Instant::now() + Duration::from_millis(2));
            (&mut sleep).await;
            assert!(sleep.is_elapsed());

            let mut ticker: Interval = interval(Duration::from_millis(1));
            ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
            assert_eq!(ticker.missed_tick_behavior(), MissedTickBehavior::Skip);
            let first = ticker.tick().await;
            let second = ticker.tick().await;
            assert!(second > first, "ticks move forward");

            let start = Instant::now() + Duration::from_millis(3);
            let mut at: Interval = interval_at(start, Duration::from_millis(5));
            assert!(at.tick().await >= start, "the first tick is at `start`");
            assert_eq!(at.period(), Duration::from_millis(5));

            let never = std::future::pending::<()>();
            let err: TimeoutError = spargio::timeout(Duration::from_millis(1), never)
                .await
                .unwrap_err();
            let _: spargio::time::TimeoutError = err;
        })
    });
}

#[test]
fn cancellation_types_at_the_root() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let token = CancellationToken::new();
            let group = TaskGroup::new(&h);
            let group_token: spargio::sync::CancellationToken = group.token();
            let t = token.clone();
            let done: TaskGroupJoinHandle<u32> = group
                .spawn_with_placement(TaskPlacement::Stealable, async move {
                    t.cancelled().await;
                    7
                })
                .unwrap();
            let stuck: TaskGroupJoinHandle<u32> = group
                .spawn_with_placement(TaskPlacement::Stealable, std::future::pending())
                .unwrap();
            token.cancel();
            assert!(token.is_canceled());
            assert_eq!(done.await.unwrap(), 7);
            group.cancel();
            assert!(group_token.is_cancelled());
            assert!(stuck.await.is_err(), "cancelled with its group");
        })
    });
}
