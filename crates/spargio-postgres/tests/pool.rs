//! The pool against a real PostgreSQL, on both backends, with no tokio
//! runtime (`tokio_compat(false)`): shared clients belong to the caller's
//! shard and pipeline; exclusive connections hold transactions, are
//! bounded and handed to the next waiter; a terminated connection is
//! reopened; bad configurations fail with clear errors; a dropped pool
//! leaves no connection, fd or thread behind.

#[path = "../../spargio-tokio-ecosystem/tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{on_each_backend, on_each_backend_then_no_threads_left, shard, tag};
use futures_util::future::try_join_all;
use spargio::RuntimeHandle;
use spargio_postgres::{Config, Error, Pool};
use spargio_test_peers::{postgres, require_peer, Peer};

fn config() -> Config {
    postgres()
        .url()
        .parse()
        .expect("the test server's URL parses")
}

/// `psql` on spargio's blocking pool, not on a shard.
async fn psql(h: &RuntimeHandle, sql: String) -> String {
    h.spawn_blocking(move || postgres().psql(&sql))
        .expect("spawn psql")
        .await
        .expect("psql ran")
}

/// Polls `done` every 10 ms until it holds or 10 s pass.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "still not so after 10 s: {what}");
        spargio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn shared_clients_belong_to_the_callers_shard_and_pipeline() {
    require_peer!(Peer::Postgres);
    on_each_backend(false, |h, _| async move {
        let pool = Pool::builder(config())
            .per_shard(2)
            .open(&h)
            .await
            .expect("open the pool");
        let mut tasks = Vec::new();
        for on in 0..h.shard_count() {
            let pool = pool.clone();
            tasks.push(
                h.spawn_pinned(on, async move {
                    let db = pool.client().await.expect("a shared client");
                    assert_eq!(db.shard(), shard(), "a connection of the caller's shard");
                    // 20 queries issued together on one connection.
                    let doubled = try_join_all((0..20i32).map(|i| {
                        let db = db.clone();
                        async move {
                            let st = db.prepare_cached("SELECT $1::int4 * 2").await?;
                            let row = db.query_one(&st, &[&i]).await?;
                            Ok::<i32, spargio_postgres::tokio_postgres::Error>(row.get(0))
                        }
                    }))
                    .await
                    .expect("the pipelined queries");
                    assert_eq!(doubled, (0..20).map(|i| i * 2).collect::<Vec<_>>());
                    assert_eq!(db.cached_statements(), 1, "one text, prepared once");
                })
                .expect("spawn"),
            );
        }
        for task in tasks {
            task.await.expect("the shard's queries");
        }
        // From outside the runtime (a blocking-pool thread, not a shard):
        // the shards take turns.
        let pool2 = pool.clone();
        let shards = h
            .spawn_blocking(move || {
                (0..4)
                    .map(|_| {
                        spargio::block_on(async {
                            let db = pool2.client().await.expect("a client from outside");
                            let one: i32 = db.query_one("SELECT 1", &[]).await.unwrap().get(0);
                            assert_eq!(one, 1);
                            db.shard()
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .expect("spawn the outside caller")
            .await
            .expect("the outside caller");
        assert!(shards.contains(&0) && shards.contains(&1), "{shards:?}");
    });
}

/// Whether `conn` is inside a transaction block: `SAVEPOINT` is refused
/// outside one.
async fn in_transaction(conn: &spargio_postgres::tokio_postgres::Client) -> bool {
    let inside = conn.batch_execute("SAVEPOINT probe").await.is_ok();
    if inside {
        conn.batch_execute("RELEASE SAVEPOINT probe").await.unwrap();
    }
    inside
}

#[test]
fn transactions_commit_roll_back_and_leave_the_connection_clean() {
    require_peer!(Peer::Postgres);
    on_each_backend(false, |h, backend| async move {
        let table = format!("pool_tx_{}", tag(backend));
        psql(
            &h,
            format!("DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int4 PRIMARY KEY)"),
        )
        .await;
        let pool = Pool::connect(&h, &postgres().url()).await.expect("open");
        let count = |pool: Pool, table: String| async move {
            let db = pool.client().await.unwrap();
            let n: i64 = db
                .query_one(&format!("SELECT count(*) FROM {table}"), &[])
                .await
                .unwrap()
                .get(0);
            n
        };
        let insert = format!("INSERT INTO {table} (id) VALUES ($1)");
        let pid = {
            let mut conn = pool.get().await.expect("an exclusive connection");
            let tx = conn.transaction().await.unwrap();
            tx.execute(&insert, &[&1i32]).await.unwrap();
            tx.commit().await.unwrap();

            let tx = conn.transaction().await.unwrap();
            tx.execute(&insert, &[&2i32]).await.unwrap();
            tx.rollback().await.unwrap();

            let tx = conn.transaction().await.unwrap();
            tx.execute(&insert, &[&3i32]).await.unwrap();
            drop(tx); // rolled back on drop
            assert!(
                !in_transaction(&conn).await,
                "the dropped transaction ended"
            );
            let pid: i32 = conn
                .query_one("SELECT pg_backend_pid()", &[])
                .await
                .unwrap()
                .get(0);
            // Dropped inside a transaction: its `ROLLBACK` must reach the
            // server before the next holder's queries do.
            let tx = conn.transaction().await.unwrap();
            tx.execute(&insert, &[&4i32]).await.unwrap();
            drop(tx);
            pid
        };
        assert_eq!(
            count(pool.clone(), table.clone()).await,
            1,
            "only the commit"
        );
        assert_eq!(pool.idle_exclusive(shard()), 1, "returned on drop");
        let conn = pool.get().await.unwrap();
        let again: i32 = conn
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(again, pid, "the idle connection is reused");
        assert!(!in_transaction(&conn).await, "the next holder starts clean");
    });
}

async fn backend_pid(conn: &spargio_postgres::tokio_postgres::Client) -> i32 {
    conn.query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pg_backend_pid()")
        .get(0)
}

#[test]
fn exclusive_connections_are_bounded_and_go_to_the_waiter() {
    require_peer!(Peer::Postgres);
    on_each_backend(false, |h, _| async move {
        let pool = Pool::builder(config())
            .exclusive_per_shard(1)
            .wait_timeout(Some(Duration::from_millis(200)))
            .open(&h)
            .await
            .expect("open");
        let held = h
            .spawn_pinned(0, {
                let pool = pool.clone();
                async move {
                    let held = pool.get().await.expect("the one connection");
                    let second = pool.get().await;
                    assert!(
                        matches!(second, Err(Error::WaitTimeout(_))),
                        "the bound holds: {second:?}"
                    );
                    held
                }
            })
            .unwrap()
            .await
            .unwrap();
        let first_pid = backend_pid(&held).await;

        // A waiter with no time limit gets the connection once it is dropped.
        let patient = Pool::builder(config())
            .exclusive_per_shard(1)
            .wait_timeout(None)
            .open(&h)
            .await
            .unwrap();
        let first = h
            .spawn_pinned(0, {
                let patient = patient.clone();
                async move { patient.get().await.unwrap() }
            })
            .unwrap()
            .await
            .unwrap();
        let patient_pid = backend_pid(&first).await;
        let waiter = h
            .spawn_pinned(0, {
                let patient = patient.clone();
                async move {
                    let conn = patient.get().await.expect("the returned connection");
                    backend_pid(&conn).await
                }
            })
            .unwrap();
        spargio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiter.is_finished(),
            "the waiter waits while the one is out"
        );
        drop(first);
        assert_eq!(waiter.await.unwrap(), patient_pid, "the waiter got it");
        drop(held);
        assert_ne!(first_pid, patient_pid);
    });
}

#[test]
fn a_terminated_shared_connection_is_reopened() {
    require_peer!(Peer::Postgres);
    on_each_backend(false, |h, _| async move {
        let pool = Pool::builder(config())
            .per_shard(1)
            .open(&h)
            .await
            .expect("open");
        let on0 = pool.clone();
        h.spawn_pinned(0, async move {
            let pool = on0;
            let db = pool.client().await.unwrap();
            let pid: i32 = db
                .query_one("SELECT pg_backend_pid()", &[])
                .await
                .unwrap()
                .get(0);
            let admin = pool.get().await.unwrap();
            let killed: bool = admin
                .query_one("SELECT pg_terminate_backend($1)", &[&pid])
                .await
                .unwrap()
                .get(0);
            assert!(killed);
            eventually("the client sees its connection closed", || db.is_closed()).await;
            assert!(
                db.query_one("SELECT 1", &[]).await.is_err(),
                "a clear error"
            );
            let fresh = pool.client().await.expect("reopened");
            assert_eq!(fresh.shard(), 0);
            let pid2: i32 = fresh
                .query_one("SELECT pg_backend_pid()", &[])
                .await
                .unwrap()
                .get(0);
            assert_ne!(pid, pid2, "a new backend");
        })
        .unwrap()
        .await
        .unwrap();
    });
}

#[test]
fn bad_configurations_fail_with_clear_errors() {
    require_peer!(Peer::Postgres);
    on_each_backend(false, |h, _| async move {
        // A port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let err = Pool::connect(&h, &format!("postgres://x@127.0.0.1:{port}/x"))
            .await
            .expect_err("nothing listens");
        match &err {
            Error::Connect(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}"),
            other => panic!("expected a connect error, got {other:?}"),
        }
        assert!(
            err.to_string().contains(&port.to_string()),
            "names the target: {err}"
        );

        let mut no_db = config();
        no_db.dbname("no_such_database");
        let err = Pool::builder(no_db)
            .open(&h)
            .await
            .expect_err("no such database");
        assert!(matches!(err, Error::Postgres(_)), "{err:?}");
        assert!(err.to_string().contains("no_such_database"), "{err}");

        let err = Pool::connect(&h, "not a url = =")
            .await
            .expect_err("unparsable");
        assert!(matches!(err, Error::Config(_)), "{err:?}");
        let err = Pool::builder(Config::new())
            .open(&h)
            .await
            .expect_err("no host");
        assert!(matches!(err, Error::Config(_)), "{err:?}");

        // The server's Unix socket directory as host.
        let mut unix = config();
        unix.host_path(postgres().dir());
        let pool = Pool::builder(unix)
            .open(&h)
            .await
            .expect("over the Unix socket");
        let db = pool.client().await.unwrap();
        let one: i32 = db.query_one("SELECT 1", &[]).await.unwrap().get(0);
        assert_eq!(one, 1);
    });
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

#[test]
fn a_dropped_pool_leaves_no_connection_fd_or_thread() {
    require_peer!(Peer::Postgres);
    on_each_backend_then_no_threads_left(false, |h, backend| async move {
        let app = format!("pool_leak_{}", tag(backend));
        let sessions = |h: RuntimeHandle, app: String| async move {
            psql(
                &h,
                format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{app}'"),
            )
            .await
            .trim()
            .parse::<usize>()
            .unwrap()
        };
        let before = open_fds();
        let mut cfg = config();
        cfg.application_name(&app);
        let pool = Pool::builder(cfg)
            .per_shard(2)
            .open(&h)
            .await
            .expect("open");
        let held = pool.get().await.unwrap();
        let db = pool.client().await.unwrap();
        db.query_one("SELECT 1", &[]).await.unwrap();
        assert_eq!(
            sessions(h.clone(), app.clone()).await,
            2 * h.shard_count() + 1
        );
        drop((held, db, pool));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (fds, open) = (open_fds(), sessions(h.clone(), app.clone()).await);
            if fds <= before && open == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "10 s after the drop: {fds} fds (from {before}), {open} sessions"
            );
            spargio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}
