//! The database restarting under load, with sqlx inside spargio tasks on
//! both backends: PostgreSQL is killed (`SIGQUIT`, every connection
//! dropped as in a crash) while 16 tasks on both shards query through one
//! pool, kept down for 2 s and started again on the same port. A query in
//! flight when it dies fails with an error (none hangs: the run is bounded),
//! the pool reconnects once the server is back, and each runtime leaves no
//! thread and no fd behind.
//!
//! Its own test binary: the restart must not pull the server away from
//! another test's queries.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    assert_fds_back_to, on_each_backend_then_no_threads_left, open_fds, restart_postgres, tag,
    until_above,
};
use spargio_test_peers::{postgres, require_peer, Peer};
use sqlx::postgres::PgPoolOptions;

const TASKS: usize = 16;
const DOWN: Duration = Duration::from_secs(2);

#[test]
fn a_database_restart_under_load_fails_queries_with_errors_and_the_pool_recovers() {
    require_peer!(Peer::Postgres);
    let url = postgres().url();
    // Process-wide fds made by the first runtime (tokio's signal pipe in a
    // workspace build) exist before the count.
    drop(
        spargio::RuntimeBuilder::new()
            .shards(1)
            .tokio_compat(true)
            .build()
            .expect("a warm-up runtime"),
    );
    let fds_before = open_fds();
    on_each_backend_then_no_threads_left(true, move |h, backend| {
        let url = url.clone();
        async move {
            let pool = PgPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(Duration::from_secs(5))
                .connect(&url)
                .await
                .expect("connect the pool");
            let stop = Arc::new(AtomicBool::new(false));
            let oks = Arc::new(AtomicUsize::new(0));
            let errors = Arc::new(Mutex::new(Vec::<String>::new()));
            let mut jobs = Vec::new();
            for i in 0..TASKS {
                let (pool, stop, oks, errors) =
                    (pool.clone(), stop.clone(), oks.clone(), errors.clone());
                let job = async move {
                    while !stop.load(Ordering::SeqCst) {
                        match sqlx::query_scalar::<_, i32>("SELECT $1::int4 + 1")
                            .bind(i as i32)
                            .fetch_one(&pool)
                            .await
                        {
                            Ok(v) => {
                                assert_eq!(v, i as i32 + 1);
                                oks.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(e) => {
                                errors.lock().unwrap().push(e.to_string());
                                spargio::time::sleep(Duration::from_millis(20)).await;
                            }
                        }
                    }
                };
                jobs.push(if i % 2 == 0 {
                    h.spawn_stealable(job).unwrap()
                } else {
                    h.spawn_pinned(i % h.shard_count(), job).unwrap()
                });
            }
            assert!(
                until_above(&oks, 100).await,
                "{}: no queries before the restart",
                tag(backend)
            );
            // A query certainly in flight when the server dies: it must
            // fail with an error, not hang (queries between two others may
            // not see the outage: sqlx tests idle connections and
            // reconnects inside `acquire`).
            let slow = {
                let pool = pool.clone();
                h.spawn_stealable(
                    async move { sqlx::query("SELECT pg_sleep(30)").execute(&pool).await },
                )
                .unwrap()
            };
            spargio::time::sleep(Duration::from_millis(300)).await;
            let before = oks.load(Ordering::SeqCst);
            restart_postgres(&h, DOWN).await;
            assert!(
                until_above(&oks, before + 200).await,
                "{}: the pool did not recover after the restart",
                tag(backend)
            );
            let slow = slow.await.expect("the slow query's task");
            let Err(slow_err) = slow else {
                panic!(
                    "{}: a query in flight across the restart succeeded",
                    tag(backend)
                );
            };
            stop.store(true, Ordering::SeqCst);
            for job in jobs {
                job.await.expect("a querying task ended cleanly");
            }
            pool.close().await;
            let mut errors = errors.lock().unwrap();
            errors.push(slow_err.to_string());
            let kinds: BTreeSet<&str> = errors.iter().map(|e| e.as_str()).collect();
            assert!(
                kinds.iter().all(|e| !e.is_empty()),
                "{}: an error with no message",
                tag(backend)
            );
            eprintln!(
                "{}: {} queries failed during the outage; kinds: {kinds:?}",
                tag(backend),
                errors.len()
            );
        }
    });
    // The pool's sockets and the runtimes' fds are gone.
    assert_fds_back_to(fds_before);
}
