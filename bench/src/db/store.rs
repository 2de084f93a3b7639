//! The database side of `db_server`: sqlx's `PgPool` (on tokio, or on
//! spargio through `tokio-compat`) or a pool of tokio-postgres clients over
//! spargio's own sockets.
//!
//! - sqlx: `PgPoolOptions` with `max_connections = pool` and
//!   `test_before_acquire(false)` (sqlx's default pings every idle
//!   connection it hands out: a round trip per acquire, which no one
//!   tuning for throughput keeps); `db_server` opens every connection
//!   before it reports ready. Statements go through `query_as`, so
//!   sqlx prepares each once per connection and caches it. A request
//!   holds one connection for all its queries, run one after another (a
//!   sqlx connection answers one query at a time).
//! - tokio-postgres through `spargio_postgres::Pool` (the path the book
//!   offers): `pool / shards` shared connections per shard (rounded up),
//!   each opened on its shard over spargio's own sockets. A request takes
//!   the next shared client of its own shard, its statements from the
//!   connection's cache, and sends its queries at once: tokio-postgres
//!   pipelines the queries of one client, so `/queries` costs one round
//!   trip however many rows it reads.

use std::fmt;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::future::try_join_all;
use spargio::RuntimeHandle;
use spargio_postgres::Pool;
use sqlx::postgres::{PgPool, PgPoolOptions};

use super::{Fortune, World};

const WORLD_SQL: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
const FORTUNE_SQL: &str = "SELECT id, message FROM fortune";
/// Every row of one `/updates` in one statement, as the fastest Rust
/// TechEmpower entries write them.
const UPDATE_SQL: &str = "UPDATE world SET randomnumber = temp.rn \
     FROM (SELECT unnest($1::int[]) AS id, unnest($2::int[]) AS rn) AS temp \
     WHERE world.id = temp.id";

/// A database error, answered as 500 with its text.
#[derive(Debug)]
pub struct DbError(String);

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DbError {}

impl From<sqlx::Error> for DbError {
    fn from(e: sqlx::Error) -> DbError {
        DbError(format!("sqlx: {e}"))
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> DbError {
        DbError(format!("tokio-postgres: {e}"))
    }
}

impl From<spargio_postgres::Error> for DbError {
    fn from(e: spargio_postgres::Error) -> DbError {
        DbError(e.to_string())
    }
}

impl From<std::io::Error> for DbError {
    fn from(e: std::io::Error) -> DbError {
        DbError(format!("io: {e}"))
    }
}

impl IntoResponse for DbError {
    fn into_response(self) -> Response {
        (StatusCode::INTERNAL_SERVER_ERROR, self.0).into_response()
    }
}

/// Where the rows come from.
pub enum Db {
    Sqlx(PgPool),
    Pg(Pool),
}

impl Db {
    /// One row.
    pub async fn world(&self, id: i32) -> Result<World, DbError> {
        match self {
            Db::Sqlx(pool) => {
                let (id, random_number) = sqlx::query_as::<_, (i32, i32)>(WORLD_SQL)
                    .bind(id)
                    .fetch_one(pool)
                    .await?;
                Ok(World { id, random_number })
            }
            Db::Pg(pool) => {
                let pg = pool.client().await?;
                let world = pg.prepare_cached(WORLD_SQL).await?;
                let row = pg.query_one(&world, &[&id]).await?;
                Ok(World {
                    id: row.try_get(0)?,
                    random_number: row.try_get(1)?,
                })
            }
        }
    }

    /// The rows of `ids`, in order, each read by a query of its own.
    pub async fn worlds(&self, ids: &[i32]) -> Result<Vec<World>, DbError> {
        match self {
            Db::Sqlx(pool) => {
                let mut conn = pool.acquire().await?;
                let mut worlds = Vec::with_capacity(ids.len());
                for &id in ids {
                    let (id, random_number) = sqlx::query_as::<_, (i32, i32)>(WORLD_SQL)
                        .bind(id)
                        .fetch_one(&mut *conn)
                        .await?;
                    worlds.push(World { id, random_number });
                }
                Ok(worlds)
            }
            Db::Pg(pool) => {
                let pg = pool.client().await?;
                let world = pg.prepare_cached(WORLD_SQL).await?;
                let (pg, world) = (&pg, &world);
                let rows = try_join_all(
                    ids.iter()
                        .map(|id| async move { pg.query_one(world, &[id]).await }),
                )
                .await?;
                rows.iter()
                    .map(|row| {
                        Ok(World {
                            id: row.try_get(0)?,
                            random_number: row.try_get(1)?,
                        })
                    })
                    .collect()
            }
        }
    }

    /// Every row of `fortune`.
    pub async fn fortunes(&self) -> Result<Vec<Fortune>, DbError> {
        match self {
            Db::Sqlx(pool) => {
                let rows = sqlx::query_as::<_, (i32, String)>(FORTUNE_SQL)
                    .fetch_all(pool)
                    .await?;
                Ok(rows
                    .into_iter()
                    .map(|(id, message)| Fortune { id, message })
                    .collect())
            }
            Db::Pg(pool) => {
                let pg = pool.client().await?;
                let fortune = pg.prepare_cached(FORTUNE_SQL).await?;
                let rows = pg.query(&fortune, &[]).await?;
                rows.iter()
                    .map(|row| {
                        Ok(Fortune {
                            id: row.try_get(0)?,
                            message: row.try_get(1)?,
                        })
                    })
                    .collect()
            }
        }
    }

    /// Sets `randomnumber` of row `ids[i]` to `numbers[i]`, in one
    /// statement (`ids` sorted and distinct).
    pub async fn update(&self, ids: &[i32], numbers: &[i32]) -> Result<(), DbError> {
        match self {
            Db::Sqlx(pool) => {
                sqlx::query(UPDATE_SQL)
                    .bind(ids)
                    .bind(numbers)
                    .execute(pool)
                    .await?;
            }
            Db::Pg(pool) => {
                let pg = pool.client().await?;
                let update = pg.prepare_cached(UPDATE_SQL).await?;
                pg.execute(&update, &[&ids, &numbers]).await?;
            }
        }
        Ok(())
    }
}

/// sqlx's pool of at most `pool` connections, none open yet: the caller
/// opens them by `pool` concurrent acquires (`db_server` makes them from
/// tasks on every shard or worker, where the connections then live).
pub fn sqlx_pool(url: &str, pool: usize) -> Result<PgPool, DbError> {
    Ok(PgPoolOptions::new()
        .max_connections(pool as u32)
        .test_before_acquire(false)
        .connect_lazy(url)?)
}

/// The tokio-postgres pool: `pool` connections over the shards of
/// `handle`'s runtime (rounded up to a whole number per shard), every
/// statement prepared on each before the server reports ready.
pub async fn pg_pool(handle: &RuntimeHandle, url: &str, pool: usize) -> Result<Pool, DbError> {
    let shards = handle.shard_count();
    let config: spargio_postgres::Config = url.parse()?;
    let pg = Pool::builder(config)
        .per_shard(pool.div_ceil(shards))
        .open(handle)
        .await?;
    let mut warming = Vec::new();
    for shard in 0..shards {
        let pg = pg.clone();
        let task = handle.spawn_pinned(shard, async move {
            for _ in 0..pool.div_ceil(shards) {
                let client = pg.client().await?;
                for sql in [WORLD_SQL, FORTUNE_SQL, UPDATE_SQL] {
                    client.prepare_cached(sql).await?;
                }
            }
            Ok::<_, DbError>(())
        });
        warming.push(task.map_err(|e| DbError(format!("spawn: {e}")))?);
    }
    for task in warming {
        task.await.map_err(|e| DbError(format!("join: {e}")))??;
    }
    Ok(pg)
}
