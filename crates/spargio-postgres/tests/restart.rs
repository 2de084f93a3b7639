//! The database restarting under load, with the pool on both backends:
//! PostgreSQL is killed (`SIGQUIT`, every connection dropped as in a
//! crash) while 16 tasks on both shards query through shared clients and
//! exclusive connections, kept down for 2 s, and started again on the same
//! port. A query in flight when it dies fails with an error (none hangs:
//! the run is bounded), queries during the outage fail with errors that
//! say what happened, both kinds of connection come back once the server
//! does, and each runtime leaves no thread and no fd behind.
//!
//! Its own test binary: the restart must not pull the server away from
//! another test's queries.

#[path = "../../spargio-tokio-ecosystem/tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    assert_fds_back_to, on_each_backend_then_no_threads_left, open_fds, restart_postgres, tag,
    until_above,
};
use spargio_postgres::{Config, Pool};
use spargio_test_peers::{postgres, require_peer, Peer};

const TASKS: usize = 16;
const DOWN: Duration = Duration::from_secs(2);

/// Queries that succeeded, by kind, and the errors seen.
#[derive(Default)]
struct Tally {
    shared: AtomicUsize,
    exclusive: AtomicUsize,
    errors: Mutex<Vec<String>>,
}

/// An error with its sources, as a log line would show it (`anyhow`'s
/// `{:#}`): tokio-postgres says "error communicating with the server" and
/// keeps the I/O error as the source.
fn chain(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut next = e.source();
    while let Some(source) = next {
        line = format!("{line}: {source}");
        next = source.source();
    }
    line
}

/// A pool error as a log line shows it. Its `Display` must say everything
/// (a log's `{}` is what most users print), and a chain printer must not
/// say it twice: marked `REPEATED` when the sources add to it.
fn ours(e: spargio_postgres::Error) -> String {
    let said = e.to_string();
    let chained = chain(&e);
    if chained == said {
        said
    } else {
        format!("REPEATED in the chain: {chained}")
    }
}

/// One query on a shared client of the caller's shard.
async fn shared_query(pool: &Pool, i: i32) -> Result<(), String> {
    let db = pool.client().await.map_err(ours)?;
    let st = db
        .prepare_cached("SELECT $1::int4 + 1")
        .await
        .map_err(|e| chain(&e))?;
    let v: i32 = db
        .query_one(&st, &[&i])
        .await
        .map_err(|e| chain(&e))?
        .get(0);
    assert_eq!(v, i + 1);
    Ok(())
}

/// One transaction on an exclusive connection.
async fn exclusive_query(pool: &Pool, i: i32) -> Result<(), String> {
    let mut conn = pool.get().await.map_err(ours)?;
    let tx = conn.transaction().await.map_err(|e| chain(&e))?;
    let v: i32 = tx
        .query_one("SELECT $1::int4 * 2", &[&i])
        .await
        .map_err(|e| chain(&e))?
        .get(0);
    tx.commit().await.map_err(|e| chain(&e))?;
    assert_eq!(v, i * 2);
    Ok(())
}

#[test]
fn a_database_restart_under_load_fails_queries_with_errors_and_the_pool_recovers() {
    require_peer!(Peer::Postgres);
    let config: Config = postgres().url().parse().expect("the URL parses");
    let fds_before = open_fds();
    on_each_backend_then_no_threads_left(false, move |h, backend| {
        let config = config.clone();
        async move {
            let pool = Pool::builder(config)
                .per_shard(2)
                .exclusive_per_shard(2)
                .wait_timeout(Some(Duration::from_secs(5)))
                .open(&h)
                .await
                .expect("open the pool");
            let stop = Arc::new(AtomicBool::new(false));
            let tally = Arc::new(Tally::default());
            let mut jobs = Vec::new();
            for i in 0..TASKS {
                let (pool, stop, tally) = (pool.clone(), stop.clone(), tally.clone());
                let job = async move {
                    let exclusive = i % 4 == 0;
                    while !stop.load(Ordering::SeqCst) {
                        let done = if exclusive {
                            exclusive_query(&pool, i as i32).await
                        } else {
                            shared_query(&pool, i as i32).await
                        };
                        match done {
                            Ok(()) if exclusive => {
                                tally.exclusive.fetch_add(1, Ordering::SeqCst);
                            }
                            Ok(()) => {
                                tally.shared.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(e) => {
                                tally.errors.lock().unwrap().push(e);
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
            let who = tag(backend);
            assert!(
                until_above(&tally.shared, 100).await && until_above(&tally.exclusive, 20).await,
                "{who}: too few queries before the restart"
            );
            // A query certainly in flight when the server dies: it must
            // fail with an error, not hang.
            let slow = {
                let pool = pool.clone();
                h.spawn_stealable(async move {
                    let conn = pool.get().await.map_err(ours)?;
                    conn.execute("SELECT pg_sleep(30)", &[])
                        .await
                        .map_err(|e| chain(&e))
                })
                .unwrap()
            };
            spargio::time::sleep(Duration::from_millis(300)).await;
            let (shared, exclusive) = (
                tally.shared.load(Ordering::SeqCst),
                tally.exclusive.load(Ordering::SeqCst),
            );
            restart_postgres(&h, DOWN).await;
            assert!(
                until_above(&tally.shared, shared + 200).await,
                "{who}: the shared clients did not recover after the restart"
            );
            assert!(
                until_above(&tally.exclusive, exclusive + 40).await,
                "{who}: the exclusive connections did not recover after the restart"
            );
            let slow = slow.await.expect("the slow query's task");
            let Err(slow_err) = slow else {
                panic!("{who}: a query in flight across the restart succeeded");
            };
            stop.store(true, Ordering::SeqCst);
            for job in jobs {
                job.await.expect("a querying task ended cleanly");
            }
            drop(pool);
            let mut errors = tally.errors.lock().unwrap();
            errors.push(slow_err);
            assert!(
                errors.len() > 1,
                "{who}: no query failed during a 2 s outage"
            );
            // Each error says what happened to the connection or the
            // server (not an empty or generic message).
            for e in errors.iter() {
                assert!(
                    !e.starts_with("REPEATED") && e.matches("postgres connect").count() <= 1,
                    "{who}: an error that repeats itself: {e:?}"
                );
                let e = e.to_lowercase();
                assert!(
                    [
                        "connect", "closed", "terminat", "shut", "starting", "refused", "reset",
                        "eof", "broken"
                    ]
                    .iter()
                    .any(|w| e.contains(w)),
                    "{who}: an error that does not say what happened: {e:?}"
                );
            }
            // One of each kind (without the figures: the retry gap's
            // message says how long ago, the port changes).
            let kinds: std::collections::BTreeSet<String> = errors
                .iter()
                .map(|e| {
                    e.chars()
                        .filter(|c| !c.is_ascii_digit() && *c != '.')
                        .collect()
                })
                .collect();
            eprintln!(
                "{who}: {} queries failed during the outage; kinds: {kinds:?}",
                errors.len()
            );
        }
    });
    // The pool's sockets and the runtimes' fds are gone.
    assert_fds_back_to(fds_before);
}
