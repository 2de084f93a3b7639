//! sqlx (PostgreSQL, on its tokio runtime feature) inside spargio tasks,
//! against the test binary's private PostgreSQL server, on both backends:
//! a pool shared by tasks on every shard, transactions, LISTEN/NOTIFY to a
//! stealable task, a query cancelled by dropping its future; and a runtime
//! that used all of it drops without leaving a thread.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{on_each_backend, on_each_backend_then_no_threads_left, shard, tag};
use spargio::RuntimeHandle;
use spargio_test_peers::{postgres, require_peer, Peer};
use sqlx::postgres::{PgConnection, PgListener, PgPool, PgPoolOptions};
use sqlx::Connection;

/// Tasks sharing the pool, and the queries they make together.
const TASKS: usize = 64;
const QUERIES: usize = 1_000;

async fn pool(url: &str, max: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(max)
        .connect(url)
        .await
        .expect("connect the pool")
}

/// `psql` on spargio's blocking pool, not on a shard.
async fn psql(h: &RuntimeHandle, sql: String) -> String {
    h.spawn_blocking(move || postgres().psql(&sql))
        .expect("spawn psql")
        .await
        .expect("psql ran")
}

/// Runs `SELECT $1::int4 + 1` for `n` values starting at `first`, checking
/// each answer; returns the shard the task ended on.
async fn add_one(pool: PgPool, first: i32, n: usize) -> usize {
    for x in (first..).take(n) {
        let y: i32 = sqlx::query_scalar("SELECT $1::int4 + 1")
            .bind(x)
            .fetch_one(&pool)
            .await
            .unwrap_or_else(|e| panic!("SELECT {x} + 1: {e}"));
        assert_eq!(y, x + 1);
    }
    shard()
}

#[test]
fn a_pool_of_8_serves_64_tasks_on_every_shard() {
    require_peer!(Peer::Postgres);
    let url = postgres().url();
    on_each_backend(true, move |h, _| {
        let url = url.clone();
        async move {
            let pool = pool(&url, 8).await;
            let mut jobs = Vec::new();
            let mut first = 0;
            for i in 0..TASKS {
                // 1,000 queries over 64 tasks: 16 for the first 40, 15 after.
                let n = QUERIES / TASKS + usize::from(i < QUERIES % TASKS);
                let work = add_one(pool.clone(), first, n);
                first += n as i32;
                let job = if i % 2 == 0 {
                    h.spawn_pinned((i / 2) % h.shard_count(), work)
                } else {
                    h.spawn_stealable(work)
                };
                jobs.push(job.expect("spawn"));
            }
            assert_eq!(first as usize, QUERIES);
            let mut shards = BTreeSet::new();
            for job in jobs {
                shards.insert(job.await.expect("a querying task"));
            }
            assert_eq!(
                shards,
                (0..h.shard_count()).collect(),
                "tasks ran on every shard"
            );
            assert!(pool.size() <= 8, "size {} above max", pool.size());
            pool.close().await;
        }
    });
}

#[test]
fn transactions_roll_back_and_commit() {
    require_peer!(Peer::Postgres);
    let url = postgres().url();
    on_each_backend(true, move |h, backend| {
        let url = url.clone();
        async move {
            let table = format!("eco_tx_{}", tag(backend));
            let pool = pool(&url, 4).await;
            sqlx::raw_sql(&format!(
                "DROP TABLE IF EXISTS {table}; \
                 CREATE TABLE {table} (id int4 PRIMARY KEY, note text NOT NULL)"
            ))
            .execute(&pool)
            .await
            .expect("create the table");
            let insert = format!("INSERT INTO {table} (id, note) VALUES ($1, $2)");
            let count = format!("SELECT count(*) FROM {table}");

            // Rolled back: visible inside, never outside.
            let mut tx = pool.begin().await.expect("begin");
            for id in 1..=3 {
                sqlx::query(&insert)
                    .bind(id)
                    .bind("rolled back")
                    .execute(&mut *tx)
                    .await
                    .expect("insert");
            }
            let inside: i64 = sqlx::query_scalar(&count)
                .fetch_one(&mut *tx)
                .await
                .unwrap();
            assert_eq!(inside, 3, "the transaction sees its rows");
            assert_eq!(
                psql(&h, count.clone()).await,
                "0\n",
                "uncommitted rows leaked"
            );
            tx.rollback().await.expect("rollback");

            // Dropped without commit or rollback: rolled back too.
            let mut tx = pool.begin().await.expect("begin");
            sqlx::query(&insert)
                .bind(99)
                .bind("dropped")
                .execute(&mut *tx)
                .await
                .expect("insert");
            drop(tx);

            // Committed, from a task on the other shard.
            let committed = {
                let pool = pool.clone();
                let insert = insert.clone();
                h.spawn_pinned(1, async move {
                    let mut tx = pool.begin().await.expect("begin");
                    for id in [10, 20] {
                        sqlx::query(&insert)
                            .bind(id)
                            .bind(format!("committed {id}"))
                            .execute(&mut *tx)
                            .await
                            .expect("insert");
                    }
                    tx.commit().await.expect("commit");
                })
                .unwrap()
            };
            committed.await.unwrap();

            let rows: Vec<(i32, String)> =
                sqlx::query_as(&format!("SELECT id, note FROM {table} ORDER BY id"))
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            assert_eq!(
                rows,
                vec![(10, "committed 10".into()), (20, "committed 20".into())]
            );
            assert_eq!(
                psql(&h, format!("SELECT id, note FROM {table} ORDER BY id")).await,
                "10|committed 10\n20|committed 20\n",
                "psql sees the committed rows and only those"
            );
            pool.close().await;
        }
    });
}

/// Notifications sent, in order.
const NOTIFICATIONS: usize = 100;

#[test]
fn listen_notify_reaches_a_stealable_task_in_order() {
    require_peer!(Peer::Postgres);
    let url = postgres().url();
    on_each_backend(true, move |h, backend| {
        let url = url.clone();
        async move {
            let channel = format!("eco_notify_{}", tag(backend));
            let pool = pool(&url, 4).await;
            let (listening, ready) = tokio::sync::oneshot::channel();
            let listener = {
                let (pool, channel) = (pool.clone(), channel.clone());
                h.spawn_stealable(async move {
                    let mut listener = PgListener::connect_with(&pool).await.expect("listener");
                    listener.listen(&channel).await.expect("LISTEN");
                    listening.send(()).unwrap();
                    let mut got = Vec::new();
                    while got.len() < NOTIFICATIONS {
                        let n = listener.recv().await.expect("a notification");
                        assert_eq!(n.channel(), channel);
                        got.push(n.payload().to_owned());
                    }
                    got
                })
                .unwrap()
            };
            ready.await.expect("the listener is listening");
            // From another connection, on a task pinned to shard 0.
            let notifier = {
                let (pool, channel) = (pool.clone(), channel.clone());
                h.spawn_pinned(0, async move {
                    for i in 0..NOTIFICATIONS {
                        sqlx::query("SELECT pg_notify($1, $2)")
                            .bind(&channel)
                            .bind(format!("message {i}"))
                            .execute(&pool)
                            .await
                            .expect("NOTIFY");
                    }
                })
                .unwrap()
            };
            notifier.await.unwrap();
            let got = listener.await.expect("the listening task");
            let want: Vec<String> = (0..NOTIFICATIONS).map(|i| format!("message {i}")).collect();
            assert_eq!(got, want, "every payload, in order");
            pool.close().await;
        }
    });
}

/// Queries cancelled (half the pool), then queries after them.
const CANCELLED: usize = 4;
const AFTER: usize = 200;

#[test]
fn a_query_cancelled_by_a_timeout_leaves_the_pool_usable() {
    require_peer!(Peer::Postgres);
    let url = postgres().url();
    on_each_backend(true, move |h, backend| {
        let url = url.clone();
        async move {
            let pool = pool(&url, 8).await;
            // The cancelled queries wait for an advisory lock another
            // connection holds: none can finish before its timeout.
            let key: i64 = if tag(backend) == "epoll" { 1 } else { 2 };
            let mut holder = PgConnection::connect(&url).await.expect("connect");
            sqlx::query("SELECT pg_advisory_lock($1)")
                .bind(key)
                .execute(&mut holder)
                .await
                .expect("take the lock");
            let mut waiters = Vec::new();
            for i in 0..CANCELLED {
                let pool = pool.clone();
                let job = async move {
                    let wait = sqlx::query("SELECT pg_advisory_xact_lock($1)")
                        .bind(key)
                        .execute(&pool);
                    // Half on tokio's timer, half on spargio's.
                    let timed_out = if i % 2 == 0 {
                        tokio::time::timeout(Duration::from_millis(50), wait)
                            .await
                            .is_err()
                    } else {
                        spargio::time::timeout(Duration::from_millis(50), wait)
                            .await
                            .is_err()
                    };
                    assert!(timed_out, "the query got a lock another session holds");
                };
                waiters.push(if i < CANCELLED / 2 {
                    h.spawn_pinned(i % h.shard_count(), job).unwrap()
                } else {
                    h.spawn_stealable(job).unwrap()
                });
            }
            for w in waiters {
                w.await.expect("a cancelled query's task");
            }
            // The abandoned queries, still queued on their connections,
            // now get the lock and end; sqlx drains them before reuse.
            let released: bool = sqlx::query_scalar("SELECT pg_advisory_unlock($1)")
                .bind(key)
                .fetch_one(&mut holder)
                .await
                .unwrap();
            assert!(released, "the holder held the lock");
            holder.close().await.expect("close the holder");
            // The pool still answers, from tasks on every shard.
            let mut jobs = Vec::new();
            for i in 0..8 {
                let work = add_one(pool.clone(), 1000 * i as i32, AFTER / 8);
                jobs.push(if i % 2 == 0 {
                    h.spawn_pinned((i / 2) % h.shard_count(), work).unwrap()
                } else {
                    h.spawn_stealable(work).unwrap()
                });
            }
            for j in jobs {
                j.await.expect("a query after the cancellations");
            }
            let (size, idle) = (pool.size(), pool.num_idle());
            assert!(
                (1..=8).contains(&size) && idle <= size as usize,
                "size {size}, idle {idle}"
            );
            let one: i32 = sqlx::query_scalar("SELECT 1")
                .fetch_one(&pool)
                .await
                .unwrap();
            assert_eq!(one, 1);
            pool.close().await;
        }
    });
}

#[test]
fn the_runtime_drops_cleanly_after_sqlx() {
    require_peer!(Peer::Postgres);
    let url = postgres().url();
    on_each_backend_then_no_threads_left(true, move |h, backend| {
        let url = url.clone();
        async move {
            // A pool, a listener waiting and queries in flight, all left
            // to the runtime's shutdown.
            let pool = pool(&url, 4).await;
            let mut listener = PgListener::connect_with(&pool).await.expect("listener");
            listener
                .listen(&format!("eco_drop_{}", tag(backend)))
                .await
                .expect("LISTEN");
            h.spawn_stealable(async move {
                let _ = listener.recv().await;
            })
            .unwrap();
            for i in 0..2 {
                let pool = pool.clone();
                h.spawn_pinned(i, async move {
                    let _ = sqlx::query("SELECT pg_sleep(10)").execute(&pool).await;
                })
                .unwrap();
            }
            add_one(pool.clone(), 0, 10).await;
        }
    });
}
