//! Task dumps (issue 24): every live task with its home shard, kind and
//! spawn location, counts per location, the task a shard is polling, and
//! the shards keep running while a dump walks a thousand tasks, and each
//! task's state (scheduled, running, idle) with the stall detector off.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spargio::{CancellationToken, Runtime, TaskPlacement, TaskSnapshotKind, TaskState};

#[test]
fn a_dump_lists_every_live_task_with_its_shard_kind_and_location() {
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        let stop = CancellationToken::new();
        let mut joins = Vec::new();
        let (mut pinned_line, mut stealable_line) = (0, 0);
        for i in 0..500 {
            let stop = stop.clone();
            pinned_line = line!() + 1;
            let j = h.spawn_pinned(i % 2, async move { stop.cancelled().await });
            joins.push(j.unwrap());
        }
        for _ in 0..499 {
            let stop = stop.clone();
            stealable_line = line!() + 1;
            let j = h.spawn_stealable(async move { stop.cancelled().await });
            joins.push(j.unwrap());
        }
        let release = Arc::new(AtomicBool::new(false));
        let gate = release.clone();
        let blocking_line = line!() + 1;
        let blocking = h.spawn_blocking(move || {
            while !gate.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let blocking = blocking.unwrap();

        let dump = h.dump_tasks();
        assert_eq!(dump.tasks.len(), 1000, "{dump}");
        let at = |line: u32| {
            dump.tasks
                .iter()
                .filter(|t| t.spawned_at.file() == file!() && t.spawned_at.line() == line)
                .collect::<Vec<_>>()
        };
        let pinned = at(pinned_line);
        assert_eq!(pinned.len(), 500);
        assert!(pinned.iter().all(|t| t.kind == TaskSnapshotKind::Pinned));
        assert_eq!(pinned.iter().filter(|t| t.home == 0).count(), 250);
        assert_eq!(pinned.iter().filter(|t| t.home == 1).count(), 250);
        let stealable = at(stealable_line);
        assert_eq!(stealable.len(), 499);
        assert!(stealable
            .iter()
            .all(|t| t.kind == TaskSnapshotKind::Stealable));
        let blocked = at(blocking_line);
        assert_eq!(blocked.len(), 1);
        assert_eq!(blocked[0].kind, TaskSnapshotKind::Blocking);
        // Ids are unique; counts per location, most first.
        let mut ids: Vec<u64> = dump.tasks.iter().map(|t| t.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 1000);
        let counts: Vec<usize> = dump.by_location().iter().map(|(_, n)| *n).collect();
        assert_eq!(counts, [500, 499, 1]);

        stop.cancel();
        release.store(true, Ordering::Release);
        for j in joins {
            spargio::block_on(j).unwrap();
        }
        spargio::block_on(blocking).unwrap();
        assert_eq!(h.dump_tasks().tasks.len(), 0);
    });
}

#[test]
fn a_local_task_and_the_task_being_polled_are_named() {
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        let stop = CancellationToken::new();
        let stop_local = stop.clone();
        let local = h
            .spawn_local_on(0, move |_ctx| async move {
                let not_send = std::rc::Rc::new(());
                stop_local.cancelled().await;
                drop(not_send);
            })
            .unwrap();
        // A task that holds shard 1 inside one poll until released.
        let inside = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let (flag, gate) = (inside.clone(), release.clone());
        let busy = h
            .spawn_with_placement(TaskPlacement::Pinned(1), async move {
                flag.store(true, Ordering::Release);
                while !gate.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
            })
            .unwrap();
        while !inside.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        let dump = h.dump_tasks();
        let kinds: Vec<_> = dump.tasks.iter().map(|t| t.kind).collect();
        assert!(kinds.contains(&TaskSnapshotKind::Local), "{dump}");
        let running: Vec<_> = dump.tasks.iter().filter_map(|t| t.running_on).collect();
        assert_eq!(running, [1], "{dump}");
        release.store(true, Ordering::Release);
        stop.cancel();
        spargio::block_on(busy).unwrap();
        spargio::block_on(local).unwrap();
    });
}

#[test]
fn the_shards_keep_running_while_dumps_walk_a_thousand_tasks() {
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        let stop = CancellationToken::new();
        let mut idle = Vec::new();
        for i in 0..1000 {
            let stop = stop.clone();
            idle.push(
                h.spawn_pinned(i % 2, async move { stop.cancelled().await })
                    .unwrap(),
            );
        }
        // One task per shard keeps polling (yielding) the whole time.
        let polls = Arc::new(AtomicU64::new(0));
        let busy: Vec<_> = (0..2)
            .map(|shard| {
                let (stop, polls) = (stop.clone(), polls.clone());
                h.spawn_pinned(shard, async move {
                    while !stop.is_cancelled() {
                        polls.fetch_add(1, Ordering::Relaxed);
                        common::yield_now().await;
                    }
                })
                .unwrap()
            })
            .collect();
        let start = std::time::Instant::now();
        let mut walks = 0;
        let before = polls.load(Ordering::Relaxed);
        while walks < 200 {
            assert_eq!(h.dump_tasks().tasks.len(), 1002);
            walks += 1;
        }
        let took = start.elapsed();
        // The shards polled on between the dumps' walks (none waits for a
        // dump: the walk takes a registry lock that polls never take).
        assert!(polls.load(Ordering::Relaxed) > before);
        eprintln!("200 dumps of 1,002 tasks: {took:?} ({:?} each)", took / 200);
        stop.cancel();
        for j in idle.into_iter().chain(busy) {
            spargio::block_on(j).unwrap();
        }
    });
}

#[test]
fn a_dump_tells_scheduled_running_and_idle_tasks_apart() {
    common::within_hang_bound(|| {
        // The detector off: the states must not depend on it.
        let rt = Runtime::builder()
            .shards(2)
            .stall_threshold(None)
            .build()
            .unwrap();
        let h = rt.handle();
        let stop = CancellationToken::new();
        let polled = Arc::new(AtomicU64::new(0));
        // Idle on shard 0, and one on shard 1 to be woken later: each has
        // been polled once and waits for its token.
        let wait = |shard, token: CancellationToken| {
            let polled = polled.clone();
            h.spawn_pinned(shard, async move {
                polled.fetch_add(1, Ordering::AcqRel);
                token.cancelled().await;
            })
            .unwrap()
        };
        let idle = wait(0, stop.clone());
        let wake_me = CancellationToken::new();
        let woken = wait(1, wake_me.clone());
        while polled.load(Ordering::Acquire) < 2 {
            std::thread::yield_now();
        }
        // Shard 1 held inside one poll until released.
        let inside = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let (flag, gate) = (inside.clone(), release.clone());
        // Releases the shard however the test ends.
        struct Release(Arc<AtomicBool>);
        impl Drop for Release {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Release);
            }
        }
        let _release = Release(release.clone());
        let busy_line = line!() + 1;
        let busy = h.spawn_pinned(1, async move {
            flag.store(true, Ordering::Release);
            while !gate.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
        });
        let busy = busy.unwrap();
        while !inside.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        // Queued behind the busy poll: a new task, and the woken one.
        let queued_line = line!() + 1;
        let queued = h.spawn_pinned(1, async {}).unwrap();
        wake_me.cancel();

        let dump = h.dump_tasks();
        let state_at = |line: u32| {
            dump.tasks
                .iter()
                .find(|t| t.spawned_at.line() == line)
                .map(|t| t.state)
        };
        assert_eq!(state_at(busy_line), Some(TaskState::Running), "{dump}");
        assert_eq!(state_at(queued_line), Some(TaskState::Scheduled), "{dump}");
        // The two waiters share a spawn line: the idle one is on shard 0,
        // the woken one on shard 1.
        let waiter_on = |home: usize| {
            dump.tasks
                .iter()
                .find(|t| t.spawned_at.line() < busy_line && t.home == home)
                .map(|t| t.state)
        };
        assert_eq!(waiter_on(0), Some(TaskState::Idle), "{dump}");
        assert_eq!(waiter_on(1), Some(TaskState::Scheduled), "{dump}");
        assert!(dump.to_string().contains("running"), "{dump}");

        release.store(true, Ordering::Release);
        stop.cancel();
        for j in [idle, woken, busy, queued] {
            spargio::block_on(j).unwrap();
        }
        // Back to rest: nothing is left scheduled or running.
        assert!(h.dump_tasks().tasks.is_empty());
    });
}
