//! # spargio-postgres
//!
//! PostgreSQL on [spargio]: a pool of [tokio-postgres](tokio_postgres)
//! clients that speak over spargio's own sockets, with no tokio runtime
//! involved (`tokio-compat` is not needed).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! spargio::block_on(spargio::run(|handle| async move {
//!     let pool = spargio_postgres::Pool::connect(&handle, "postgres://app@127.0.0.1/app").await?;
//!
//!     // Shared: queries from every task of this shard, pipelined.
//!     let db = pool.client().await?;
//!     let world = db.prepare_cached("SELECT randomnumber FROM world WHERE id = $1").await?;
//!     let n: i32 = db.query_one(&world, &[&7]).await?.get(0);
//!
//!     // Exclusive: a transaction.
//!     let mut conn = pool.get().await?;
//!     let tx = conn.transaction().await?;
//!     tx.execute("UPDATE world SET randomnumber = $1 WHERE id = 7", &[&(n + 1)]).await?;
//!     tx.commit().await?;
//!     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
//! }))??;
//! # Ok(()) }
//! ```
//!
//! # Design
//!
//! * **Each shard has its own connections.** Every connection is opened by
//!   a task on the shard that will use it: its socket's session and its
//!   tokio-postgres `Connection` future (a pinned task) live there. A
//!   caller gets a connection of the shard it runs on, so a query's
//!   send, its answer and the wake of the waiting task stay on one
//!   thread: no cross-thread wake, no tokio reactor, no eventfd. Callers
//!   outside the runtime take the shards in turn.
//! * **Shared clients, pipelined.** [`Pool::client`] hands out the
//!   shard's `per_shard` connections round robin as [`PgClient`]s.
//!   tokio-postgres sends each query as soon as it is issued, so the
//!   queries of many requests, and several queries of one request
//!   started together, are in flight on one connection at once: 20 reads
//!   cost one round trip.
//! * **Exclusive connections for transactions.** [`Pool::get`] checks out
//!   a [`PooledConnection`] that no one else queries on while it is
//!   held, which is what a transaction needs (`transaction()` takes
//!   `&mut`, which a shared client cannot give). At most
//!   `exclusive_per_shard` per shard; further callers wait, first come
//!   first served, up to `wait_timeout`. Dropped ones return to their
//!   shard's idle list.
//! * **Connections heal.** A shared connection found closed (the server
//!   restarted, its backend was terminated) is reopened: in the
//!   background while another of the shard's is open, else by the
//!   caller, one at a time. A failed reopen is not retried for 100 ms;
//!   callers in that window get its error at once. Closed exclusive
//!   connections are dropped, not handed out.
//!
//! # Prepared statements
//!
//! `prepare_cached(sql)` (on [`PgClient`] and [`PooledConnection`])
//! prepares `sql` once per connection and returns the same
//! [`Statement`] to every later call with that text. Statements belong to
//! a connection: use one only on the connection that prepared it. Each
//! connection caches up to `statement_cache` texts (default 100); past
//! that, statements are prepared per call and closed when dropped.
//!
//! # Errors
//!
//! Getting a connection fails with [`Error`] (unreachable host, refused
//! session, wait timeout, runtime shutting down). Queries fail as on
//! tokio, with `tokio_postgres::Error`; a query in flight when the server
//! goes away fails with "connection closed", and the next
//! [`Pool::client`] reopens.
//!
//! # Limits
//!
//! * No TLS: connections use `NoTls` (TCP or a Unix socket directory as
//!   host). Put the database on a private network or a Unix socket.
//! * Idle exclusive connections stay open; there is no idle timeout.
//!
//! [spargio]: https://docs.rs/spargio

mod builder;
mod conn;
mod connect;
mod error;
mod pool;

pub use builder::PoolBuilder;
pub use conn::{PgClient, PooledConnection};
pub use error::Error;
pub use pool::Pool;

/// The tokio-postgres this crate is built on, so callers name its types
/// (`Row`, `types::ToSql`, `Transaction`) without matching versions.
pub use tokio_postgres;
pub use tokio_postgres::{Config, Row, Statement, Transaction};
