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
//! - tokio-postgres (`PgPool::connect`): `pool` connections made with
//!   `connect_raw` over `spargio::io::Compat<TcpStream>` (NoTls), spread
//!   over the shards; each one's `Connection` future is a task pinned to
//!   its shard, its statements prepared once. A request takes the next
//!   client of its own shard (round robin) and sends its queries at once:
//!   tokio-postgres pipelines the queries of one client, so `/queries`
//!   costs one round trip however many rows it reads.

use std::cell::Cell;
use std::fmt;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::future::try_join_all;
use spargio::io::Compat;
use spargio::{RuntimeHandle, ShardCtx};
use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio_postgres::{Client, NoTls, Statement};

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
    Pg(PgClients),
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
            Db::Pg(clients) => {
                let pg = clients.pick();
                let row = pg.client.query_one(&pg.world, &[&id]).await?;
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
            Db::Pg(clients) => {
                let pg = clients.pick();
                let rows = try_join_all(
                    ids.iter()
                        .map(|id| async move { pg.client.query_one(&pg.world, &[id]).await }),
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
            Db::Pg(clients) => {
                let pg = clients.pick();
                let rows = pg.client.query(&pg.fortune, &[]).await?;
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
            Db::Pg(clients) => {
                let pg = clients.pick();
                pg.client.execute(&pg.update, &[&ids, &numbers]).await?;
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

/// One tokio-postgres connection with its statements.
pub struct PgConn {
    client: Client,
    world: Statement,
    fortune: Statement,
    update: Statement,
}

/// The tokio-postgres pool: `per_shard[s]` are the connections whose
/// socket and `Connection` task live on shard `s`.
pub struct PgClients {
    per_shard: Vec<Vec<PgConn>>,
}

thread_local! {
    /// This thread's shard (`usize::MAX` until first asked) and its
    /// round-robin position.
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
    static NEXT: Cell<usize> = const { Cell::new(0) };
}

impl PgClients {
    /// Opens `pool` connections to `url`, connection `i` on shard
    /// `i % shards`.
    pub async fn connect(handle: &RuntimeHandle, url: &str, pool: usize) -> Result<Self, DbError> {
        let config: tokio_postgres::Config = url.parse()?;
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
            _ => return Err(DbError("DATABASE_URL must name a TCP host".into())),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let shards = handle.shard_count();
        let mut opening = Vec::with_capacity(pool);
        for i in 0..pool {
            let (handle2, config, host) = (handle.clone(), config.clone(), host.clone());
            let shard = i % shards;
            let task = handle.spawn_pinned(shard, async move {
                let tcp = spargio::net::TcpStream::connect(&handle2, (host, port)).await?;
                tcp.set_nodelay(true)?;
                let (client, connection) = config.connect_raw(Compat::new(tcp), NoTls).await?;
                handle2
                    .spawn_pinned(shard, async move {
                        if let Err(e) = connection.await {
                            eprintln!("db_server: tokio-postgres connection: {e}");
                        }
                    })
                    .map_err(|e| DbError(format!("spawn: {e}")))?;
                let world = client.prepare(WORLD_SQL).await?;
                let fortune = client.prepare(FORTUNE_SQL).await?;
                let update = client.prepare(UPDATE_SQL).await?;
                Ok::<_, DbError>(PgConn {
                    client,
                    world,
                    fortune,
                    update,
                })
            });
            opening.push((shard, task.map_err(|e| DbError(format!("spawn: {e}")))?));
        }
        let mut per_shard: Vec<Vec<PgConn>> = (0..shards).map(|_| Vec::new()).collect();
        for (shard, task) in opening {
            let conn = task.await.map_err(|e| DbError(format!("join: {e}")))??;
            per_shard[shard].push(conn);
        }
        Ok(PgClients { per_shard })
    }

    /// The next connection of the calling shard (shard 0's outside one).
    fn pick(&self) -> &PgConn {
        let mut shard = SHARD.get();
        if shard == usize::MAX {
            shard = ShardCtx::current().map_or(0, |ctx| ctx.shard_id());
            SHARD.set(shard);
        }
        let conns = self
            .per_shard
            .get(shard)
            .filter(|c| !c.is_empty())
            .unwrap_or(&self.per_shard[0]);
        let next = NEXT.get();
        NEXT.set(next.wrapping_add(1));
        &conns[next % conns.len()]
    }
}
