//! CancellationToken and TaskGroup.

mod common;

use std::time::Duration;

use common::{runtime, yield_now, DropLog, Signal};
use spargio::sync::{CancellationToken, TaskGroup};
use spargio::time::sleep;
use spargio::{block_on, RuntimeError, TaskPlacement};

#[test]
fn cancel_wakes_waiters_on_every_shard() {
    let rt = runtime(2);
    let h = rt.handle();
    let token = CancellationToken::new();
    let waiters: Vec<_> = (0..2)
        .flat_map(|s| {
            let h = h.clone();
            let token = token.clone();
            (0..8).map(move |_| {
                let t = token.clone();
                h.spawn_pinned(s, async move { t.cancelled().await })
                    .unwrap()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(5));
    assert!(waiters.iter().all(|w| !w.is_finished()));
    token.cancel();
    token.cancel(); // idempotent
    for w in waiters {
        block_on(w).unwrap();
    }
    assert!(token.is_cancelled() && token.is_canceled());
}

#[test]
fn children_follow_parents_not_the_other_way() {
    let parent = CancellationToken::new();
    let child = parent.child_token();
    let grandchild = child.child_token();
    let sibling = parent.child_token();
    child.cancel();
    assert!(child.is_cancelled() && grandchild.is_cancelled());
    assert!(!parent.is_cancelled() && !sibling.is_cancelled());
    parent.cancel();
    assert!(sibling.is_cancelled());
    // A child of a cancelled token starts cancelled.
    assert!(parent.child_token().is_cancelled());
    // An already-cancelled token's wait completes at once, even off-runtime.
    block_on(sibling.cancelled());
}

#[test]
fn many_short_lived_children_do_not_accumulate() {
    let parent = CancellationToken::new();
    for _ in 0..100_000 {
        let child = parent.child_token();
        drop(child);
    }
    let live = parent.child_token();
    parent.cancel();
    assert!(live.is_cancelled());
}

#[test]
fn cancelling_at_every_await_point_drops_the_task() {
    let rt = runtime(2);
    let h = rt.handle();
    // Points: 0 = in a sleep, 1 = waiting on a signal, 2 = waiting on an
    // unrelated token, 3 = between yields, 4 = awaiting a child task.
    for point in 0..5 {
        let group = TaskGroup::new(h.clone());
        let log = DropLog::default();
        let g = log.guard();
        let unrelated = CancellationToken::new();
        let h2 = h.clone();
        let reached = Signal::default();
        let r2 = reached.clone();
        let task = group
            .spawn_with_placement(TaskPlacement::Stealable, async move {
                let _g = g;
                r2.set();
                match point {
                    0 => sleep(Duration::from_secs(3600)).await,
                    1 => Signal::default().wait().await,
                    2 => unrelated.child_token().cancelled().await,
                    3 => loop {
                        yield_now().await
                    },
                    _ => h2
                        .spawn_stealable(std::future::pending::<()>())
                        .unwrap()
                        .await
                        .map(drop)
                        .unwrap_or(()),
                }
            })
            .unwrap();
        while !reached.is_set() {
            std::thread::yield_now();
        }
        group.cancel();
        let err = block_on(task).unwrap_err();
        assert!(err.is_cancelled(), "point {point}: {err}");
        let report = block_on(group.wait());
        assert_eq!(report.cancelled, 1, "point {point}");
        assert_eq!(log.dropped(), 1, "point {point}: future not dropped");
    }
    assert!(h
        .stats_snapshot()
        .shards
        .iter()
        .all(|s| s.timers_armed == 0));
}

#[test]
fn group_accounts_for_every_task() {
    let rt = runtime(2);
    let h = rt.handle();
    let group = TaskGroup::new(h.clone());
    let mut done = Vec::new();
    for i in 0..10 {
        done.push(
            group
                .spawn_with_placement(TaskPlacement::RoundRobin, async move { i })
                .unwrap(),
        );
    }
    for i in 0..3 {
        group
            .spawn_with_placement(TaskPlacement::Stealable, async move {
                if i < 3 {
                    panic!("task {i} fails");
                }
            })
            .unwrap();
    }
    for _ in 0..5 {
        group
            .spawn_with_placement(TaskPlacement::Pinned(1), std::future::pending::<()>())
            .unwrap();
    }
    let sum: i32 = done.into_iter().map(|j| block_on(j).unwrap()).sum();
    assert_eq!(sum, 45);
    while group.running() > 5 {
        std::thread::yield_now();
    }
    group.cancel();
    let report = block_on(group.wait());
    assert_eq!(
        (report.completed, report.panicked, report.cancelled),
        (10, 3, 5)
    );
    assert_eq!(group.running(), 0);
    assert!(matches!(
        group.spawn_with_placement(TaskPlacement::Stealable, async {}),
        Err(RuntimeError::Shutdown)
    ));
}

#[test]
fn dropping_a_group_cancels_its_tasks() {
    let rt = runtime(2);
    let h = rt.handle();
    let log = DropLog::default();
    let handles: Vec<_> = {
        let group = TaskGroup::new(h.clone());
        (0..20)
            .map(|_| {
                let g = log.guard();
                group
                    .spawn_with_placement(TaskPlacement::Stealable, async move {
                        let _g = g;
                        sleep(Duration::from_secs(3600)).await
                    })
                    .unwrap()
            })
            .collect()
    };
    for j in handles {
        assert!(block_on(j).unwrap_err().is_cancelled());
    }
    assert_eq!(log.dropped(), 20);
}
