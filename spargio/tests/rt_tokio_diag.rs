//! Operators see tokio tasks (feature `tokio-compat`, issue 51 item 5): a
//! tokio task that blocks its shard is reported by the stall detector as
//! a tokio stall, naming the shard and how long it blocked; a shard that
//! parks with tokio tasks asleep reports nothing; the task dump counts
//! each shard's live tokio tasks.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use spargio::{Runtime, RuntimeBuilder, StallReport};

/// A 2-shard builder on `backend` whose stall reports land in the list.
fn collecting(
    backend: spargio::BackendKind,
    threshold: Duration,
) -> (RuntimeBuilder, Arc<Mutex<Vec<StallReport>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let builder = Runtime::builder()
        .shards(2)
        .backend(backend)
        .tokio_compat(true)
        .stall_threshold(Some(threshold))
        .on_stall(move |r| log.lock().unwrap().push(r.clone()));
    (builder, seen)
}

fn reports(seen: &Arc<Mutex<Vec<StallReport>>>) -> Vec<StallReport> {
    seen.lock().unwrap().clone()
}

#[test]
fn a_tokio_task_that_blocks_its_shard_is_reported_as_a_tokio_stall() {
    for backend in common::backends() {
        common::within_hang_bound(move || {
            let (builder, seen) = collecting(backend, Duration::from_millis(50));
            let rt = builder.build().unwrap();
            let line = line!() + 2;
            let task = rt.handle().spawn_pinned(1, async {
                tokio::spawn(async { std::thread::sleep(Duration::from_millis(200)) })
                    .await
                    .unwrap();
            });
            spargio::block_on(task.unwrap()).unwrap();
            drop(rt);
            let all = reports(&seen);
            let [StallReport::Tokio {
                shard,
                duration,
                spawned_at,
                ongoing,
            }] = &all[..]
            else {
                panic!("{backend:?}: not one tokio stall: {all:?}");
            };
            assert_eq!(*shard, 1, "{backend:?}");
            assert!(*duration >= Duration::from_millis(200), "{duration:?}");
            assert!(!ongoing);
            // The spawn site is known to tokio only with `--cfg tokio_unstable`
            // (`.ci/run` runs this test in such a build too).
            match spawned_at {
                Some(at) => assert_eq!((at.file(), at.line()), (file!(), line)),
                #[cfg(tokio_unstable)]
                None => panic!("tokio's hooks name the spawn site"),
                #[cfg(not(tokio_unstable))]
                None => {}
            }
            let text = all[0].to_string();
            assert!(text.contains("tokio") && text.contains("shard 1"), "{text}");
        });
    }
}

#[test]
fn shards_parked_with_tokio_tasks_asleep_report_no_stall() {
    for backend in common::backends() {
        common::within_hang_bound(move || {
            // Below the sleeps (a park counted as a stall would show), above
            // a preemption on a loaded machine.
            let (builder, seen) = collecting(backend, Duration::from_millis(50));
            let rt = builder.build().unwrap();
            let mut tasks = Vec::new();
            for shard in 0..2 {
                tasks.push(
                    rt.handle()
                        .spawn_pinned(shard, async {
                            let sleeper = tokio::spawn(async {
                                for _ in 0..3 {
                                    tokio::time::sleep(Duration::from_millis(100)).await;
                                }
                            });
                            spargio::time::sleep(Duration::from_millis(150)).await;
                            sleeper.await.unwrap();
                        })
                        .unwrap(),
                );
            }
            for task in tasks {
                spargio::block_on(task).unwrap();
            }
            drop(rt);
            assert_eq!(reports(&seen), vec![], "{backend:?}: parks are not stalls");
        });
    }
}

/// A 2-shard runtime with the shards' tokio runtimes on.
fn tokio_runtime() -> Runtime {
    Runtime::builder()
        .shards(2)
        .tokio_compat(true)
        .build()
        .unwrap()
}

/// The line of the `tokio::spawn` in [`park_tokio_tasks`].
static PARKED_AT: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Spawns, for each `(shard, count)`, `count` tokio tasks on that shard
/// that wait until the returned sender says go.
fn park_tokio_tasks(
    h: &spargio::RuntimeHandle,
    counts: &[(usize, usize)],
) -> tokio::sync::watch::Sender<bool> {
    let (release, wait) = tokio::sync::watch::channel(false);
    for &(shard, count) in counts {
        let wait = wait.clone();
        let spawned = h.spawn_pinned(shard, async move {
            for _ in 0..count {
                let mut wait = wait.clone();
                PARKED_AT.get_or_init(|| line!() + 1);
                tokio::spawn(async move { wait.wait_for(|go| *go).await.map(drop) });
            }
        });
        spargio::block_on(spawned.unwrap()).unwrap();
    }
    release
}

#[test]
fn the_task_dump_counts_each_shards_tokio_tasks() {
    common::within_hang_bound(|| {
        let rt = tokio_runtime();
        let h = rt.handle();
        let release = park_tokio_tasks(&h, &[(0, 3), (1, 1)]);
        let dump = h.dump_tasks();
        assert_eq!(dump.tokio_tasks, vec![3, 1], "{dump}");
        assert!(dump.to_string().contains("tokio"), "{dump}");
        release.send(true).unwrap();
    });
}

/// With tokio's task hooks (`--cfg tokio_unstable`, run by `.ci/run`),
/// the dump lists each tokio task with its spawn site and shard, and
/// drops it once it ended.
#[cfg(tokio_unstable)]
#[test]
fn the_task_dump_lists_tokio_tasks_with_their_spawn_site() {
    use spargio::{TaskSnapshotKind, TaskState};
    common::within_hang_bound(|| {
        let rt = tokio_runtime();
        let h = rt.handle();
        let release = park_tokio_tasks(&h, &[(1, 2)]);
        let tokio_tasks = |dump: &spargio::TaskDump| {
            dump.tasks
                .iter()
                .filter(|t| t.kind == TaskSnapshotKind::Tokio)
                .cloned()
                .collect::<Vec<_>>()
        };
        let listed = tokio_tasks(&h.dump_tasks());
        assert_eq!(listed.len(), 2, "{listed:?}");
        for t in &listed {
            assert_eq!(
                (t.spawned_at.file(), t.spawned_at.line()),
                (file!(), *PARKED_AT.get().unwrap())
            );
            assert_eq!(t.home, 1);
            assert_eq!(t.state, TaskState::Unknown);
        }
        release.send(true).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !tokio_tasks(&h.dump_tasks()).is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "ended tasks stay listed"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    });
}
