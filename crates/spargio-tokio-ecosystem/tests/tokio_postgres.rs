//! tokio-postgres over spargio's own sockets, with no tokio runtime at all
//! (`tokio_compat(false)`): a `spargio::net::TcpStream` wrapped in
//! `spargio::io::Compat` is the connection's stream (`connect_raw`), and
//! the connection future is a spargio task. On both backends: prepared
//! statements executed from tasks on every shard, `COPY ... FROM STDIN`
//! and `COPY ... TO STDOUT` of 10,000 rows, checked through the client and
//! independently through `psql`; and a runtime that used it drops without
//! leaving a thread.

mod common;

use std::io::Cursor;
use std::str::FromStr;
use std::sync::Arc;

use common::{on_each_backend, on_each_backend_then_no_threads_left, shard, tag};
use futures_util::{pin_mut, SinkExt, StreamExt};
use spargio::io::Compat;
use spargio::net::TcpStream;
use spargio::{JoinHandle, RuntimeHandle};
use spargio_test_peers::{postgres, require_peer, Peer};
use tokio_postgres::{Client, NoTls};

/// Connects over a spargio socket; the connection runs as a stealable
/// spargio task, which ends (`Ok`) once the client is dropped.
async fn connect(
    h: &RuntimeHandle,
    url: &str,
    addr: (String, u16),
) -> (Client, JoinHandle<Result<(), tokio_postgres::Error>>) {
    assert!(
        tokio::runtime::Handle::try_current().is_err(),
        "no tokio runtime here: spargio's sockets alone"
    );
    let stream = TcpStream::connect(h, addr).await.expect("TCP connect");
    let config = tokio_postgres::Config::from_str(url).expect("the URL parses");
    let (client, connection) = config
        .connect_raw(Compat::new(stream), NoTls)
        .await
        .expect("the startup handshake");
    let connection = h.spawn_stealable(connection).expect("spawn the connection");
    (client, connection)
}

/// `psql` on spargio's blocking pool, not on a shard.
async fn psql(h: &RuntimeHandle, sql: String) -> String {
    h.spawn_blocking(move || postgres().psql(&sql))
        .expect("spawn psql")
        .await
        .expect("psql ran")
}

fn addr() -> (String, u16) {
    let pg = postgres();
    (pg.host().to_owned(), pg.port())
}

/// Rows each of the inserting tasks adds through the prepared statement.
const PER_TASK: i32 = 100;
const TASKS: i32 = 6;

#[test]
fn prepared_statements_run_from_tasks_on_every_shard() {
    require_peer!(Peer::Postgres);
    let (url, addr) = (postgres().url(), addr());
    on_each_backend(false, move |h, backend| {
        let (url, addr) = (url.clone(), addr.clone());
        async move {
            let table = format!("eco_prep_{}", tag(backend));
            let (client, connection) = connect(&h, &url, addr).await;
            client
                .batch_execute(&format!(
                    "DROP TABLE IF EXISTS {table}; \
                     CREATE TABLE {table} (id int4 PRIMARY KEY, name text NOT NULL, score int8 NOT NULL)"
                ))
                .await
                .expect("create the table");
            let insert = client
                .prepare(&format!(
                    "INSERT INTO {table} (id, name, score) VALUES ($1, $2, $3)"
                ))
                .await
                .expect("prepare the insert");
            let client = Arc::new(client);
            // One client, its requests pipelined from tasks on both shards.
            let mut jobs = Vec::new();
            for t in 0..TASKS {
                let (client, insert) = (client.clone(), insert.clone());
                let work = async move {
                    for id in t * PER_TASK..(t + 1) * PER_TASK {
                        let name = format!("név {id}");
                        let n = client
                            .execute(&insert, &[&id, &name, &(i64::from(id) * 1_000_000_007)])
                            .await
                            .unwrap_or_else(|e| panic!("insert {id}: {e}"));
                        assert_eq!(n, 1);
                    }
                    shard()
                };
                jobs.push(if t % 2 == 0 {
                    h.spawn_pinned((t as usize / 2) % h.shard_count(), work)
                } else {
                    h.spawn_stealable(work)
                });
            }
            for j in jobs {
                j.unwrap().await.expect("an inserting task");
            }
            let select = client
                .prepare(&format!("SELECT name, score FROM {table} WHERE id = $1"))
                .await
                .expect("prepare the select");
            for id in (0..TASKS * PER_TASK).step_by(7) {
                let rows = client.query(&select, &[&id]).await.expect("select");
                assert_eq!(rows.len(), 1, "id {id}");
                let (name, score): (String, i64) = (rows[0].get(0), rows[0].get(1));
                assert_eq!(name, format!("név {id}"));
                assert_eq!(score, i64::from(id) * 1_000_000_007);
            }
            let missing = client.query(&select, &[&-1i32]).await.unwrap();
            assert!(missing.is_empty());
            let total = TASKS * PER_TASK;
            assert_eq!(
                psql(
                    &h,
                    format!("SELECT count(*), min(id), max(id) FROM {table}")
                )
                .await,
                format!("{total}|0|{}\n", total - 1)
            );
            drop((insert, select));
            drop(Arc::into_inner(client).expect("the tasks dropped their clones"));
            connection
                .await
                .expect("the connection task")
                .expect("the connection ended cleanly");
        }
    });
}

/// Rows through COPY, and how many go in one chunk sent to the sink.
const COPY_ROWS: usize = 10_000;
const CHUNK_ROWS: usize = 1_000;

/// Row `i` in COPY's text format (tab-separated, `\N` for NULL).
fn copy_row(i: usize) -> String {
    let note = if i.is_multiple_of(10) {
        "\\N".to_owned()
    } else {
        format!("ノート {i}")
    };
    format!("{i}\trow-{i:05}\t{note}\n")
}

#[test]
fn copy_in_and_out_of_10_000_rows() {
    require_peer!(Peer::Postgres);
    let (url, addr) = (postgres().url(), addr());
    on_each_backend(false, move |h, backend| {
        let (url, addr) = (url.clone(), addr.clone());
        async move {
            let table = format!("eco_copy_{}", tag(backend));
            let (client, connection) = connect(&h, &url, addr).await;
            client
                .batch_execute(&format!(
                    "DROP TABLE IF EXISTS {table}; \
                     CREATE TABLE {table} (id int4 PRIMARY KEY, name text NOT NULL, note text)"
                ))
                .await
                .expect("create the table");

            let sink = client
                .copy_in::<_, Cursor<Vec<u8>>>(&format!("COPY {table} (id, name, note) FROM STDIN"))
                .await
                .expect("COPY FROM STDIN");
            pin_mut!(sink);
            let mut sent = String::new();
            for start in (0..COPY_ROWS).step_by(CHUNK_ROWS) {
                let chunk: String = (start..start + CHUNK_ROWS).map(copy_row).collect();
                sent.push_str(&chunk);
                sink.send(Cursor::new(chunk.into_bytes()))
                    .await
                    .expect("send a chunk");
            }
            let copied = sink.as_mut().finish().await.expect("finish the COPY");
            assert_eq!(copied, COPY_ROWS as u64, "rows the server counted");

            let out = client
                .copy_out(&format!(
                    "COPY (SELECT id, name, note FROM {table} ORDER BY id) TO STDOUT"
                ))
                .await
                .expect("COPY TO STDOUT");
            pin_mut!(out);
            let mut received = Vec::new();
            while let Some(chunk) = out.next().await {
                received.extend_from_slice(&chunk.expect("a COPY chunk"));
            }
            assert!(
                String::from_utf8(received).expect("UTF-8") == sent,
                "COPY TO STDOUT gave back other rows than COPY FROM STDIN took"
            );

            let nulls = COPY_ROWS / 10;
            let row = client
                .query_one(
                    &format!("SELECT count(*), count(note), sum(id) FROM {table}"),
                    &[],
                )
                .await
                .unwrap();
            let (count, notes, sum): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
            let want_sum = (COPY_ROWS * (COPY_ROWS - 1) / 2) as i64;
            assert_eq!(
                (count, notes, sum),
                (COPY_ROWS as i64, (COPY_ROWS - nulls) as i64, want_sum)
            );
            assert_eq!(
                psql(
                    &h,
                    format!(
                        "SELECT count(*), count(note), sum(id), sum(length(name)) FROM {table}"
                    )
                )
                .await,
                format!(
                    "{COPY_ROWS}|{}|{want_sum}|{}\n",
                    COPY_ROWS - nulls,
                    COPY_ROWS * "row-00000".len()
                )
            );
            assert_eq!(
                psql(
                    &h,
                    format!("SELECT name, note FROM {table} WHERE id = 4321")
                )
                .await,
                "row-04321|ノート 4321\n"
            );
            drop(client);
            connection
                .await
                .expect("the connection task")
                .expect("the connection ended cleanly");
        }
    });
}

#[test]
fn the_runtime_drops_cleanly_after_tokio_postgres() {
    require_peer!(Peer::Postgres);
    let (url, addr) = (postgres().url(), addr());
    on_each_backend_then_no_threads_left(false, move |h, _| {
        let (url, addr) = (url.clone(), addr.clone());
        async move {
            // A connection task and a query in flight, left to the
            // runtime's shutdown.
            let (client, _connection) = connect(&h, &url, addr).await;
            let one: i32 = client.query_one("SELECT 1", &[]).await.unwrap().get(0);
            assert_eq!(one, 1);
            h.spawn_pinned(1, async move {
                let _ = client.batch_execute("SELECT pg_sleep(10)").await;
            })
            .unwrap();
        }
    });
}
