//! One connection as the pool holds it ([`Conn`]: the client, its shard,
//! its statement cache), and the two ways a caller holds one: shared
//! ([`PgClient`]) or exclusive ([`PooledConnection`]).

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

use spargio::ShardId;
use tokio::sync::OwnedSemaphorePermit;
use tokio_postgres::{Client, Statement};

use crate::pool::Inner;

/// A connection: its client, the shard that owns its socket and its
/// `Connection` task, and the statements prepared on it.
pub(crate) struct Conn {
    client: Client,
    shard: ShardId,
    statements: Mutex<HashMap<Box<str>, Statement>>,
    cache_bound: usize,
}

impl Conn {
    pub(crate) fn new(client: Client, shard: ShardId, cache_bound: usize) -> Conn {
        Conn {
            client,
            shard,
            statements: Mutex::new(HashMap::new()),
            cache_bound,
        }
    }

    pub(crate) fn shard(&self) -> ShardId {
        self.shard
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    fn statements(&self) -> MutexGuard<'_, HashMap<Box<str>, Statement>> {
        // The map holds no invariant a panicking holder could break.
        self.statements.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `sql` prepared on this connection, once: later calls with the same
    /// text reuse the statement. Past `cache_bound` distinct texts a
    /// statement is prepared for the caller alone and closed on the
    /// server when its last copy drops (a program that builds SQL text
    /// from values must not grow the server's memory without bound).
    async fn prepare_cached(&self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        if let Some(statement) = self.statements().get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql).await?;
        let mut cache = self.statements();
        if cache.len() < self.cache_bound {
            // Two tasks may have prepared the same text at once; the first
            // stored wins and the other's copy closes when it drops.
            let kept = cache.entry(sql.into()).or_insert(statement);
            return Ok(kept.clone());
        }
        Ok(statement)
    }

    /// How many statements the cache holds.
    fn cached(&self) -> usize {
        self.statements().len()
    }
}

/// A shared connection of the calling shard, from [`Pool::client`].
///
/// It derefs to [`tokio_postgres::Client`], whose every method takes
/// `&self`: queries from several tasks, or several queries of one task
/// started together (`join`/`try_join_all`), are *pipelined* on the
/// connection (sent without waiting for each other's answers), which is
/// what makes a shared client fast. A transaction needs a connection of
/// its own: take it with [`Pool::get`].
///
/// Clones are cheap and use the same connection.
///
/// [`Pool::client`]: crate::Pool::client
/// [`Pool::get`]: crate::Pool::get
#[derive(Clone)]
pub struct PgClient {
    pub(crate) conn: Arc<Conn>,
}

impl PgClient {
    /// `sql` prepared once per connection (see the
    /// [crate docs](crate#prepared-statements)).
    pub async fn prepare_cached(&self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        self.conn.prepare_cached(sql).await
    }

    /// The shard that owns this connection's socket.
    pub fn shard(&self) -> ShardId {
        self.conn.shard()
    }

    /// How many statements this connection's cache holds.
    pub fn cached_statements(&self) -> usize {
        self.conn.cached()
    }
}

impl Deref for PgClient {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.conn.client
    }
}

impl std::fmt::Debug for PgClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgClient")
            .field("shard", &self.conn.shard)
            .field("closed", &self.conn.is_closed())
            .finish()
    }
}

/// An exclusive connection, from [`Pool::get`]: nobody else's queries run
/// on it while it is held, so it can hold a transaction
/// ([`transaction`](Client::transaction) needs `&mut`, which this gives).
///
/// Dropping it returns the connection to its shard's idle list (a closed
/// connection is dropped instead) and lets the next waiter of that shard
/// have it. A [`Transaction`](tokio_postgres::Transaction) dropped
/// without `commit` queues its `ROLLBACK` first, so the next holder finds
/// no open transaction. One started by hand (`batch_execute("BEGIN")`)
/// and not finished is the caller's to end before dropping.
///
/// [`Pool::get`]: crate::Pool::get
pub struct PooledConnection {
    pub(crate) conn: Option<Conn>,
    pub(crate) pool: Arc<Inner>,
    pub(crate) _permit: OwnedSemaphorePermit,
}

impl PooledConnection {
    fn conn(&self) -> &Conn {
        self.conn.as_ref().expect("taken only in drop")
    }

    /// `sql` prepared once per connection (see the
    /// [crate docs](crate#prepared-statements)).
    pub async fn prepare_cached(&self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        self.conn().prepare_cached(sql).await
    }

    /// The shard that owns this connection's socket.
    pub fn shard(&self) -> ShardId {
        self.conn().shard()
    }

    /// How many statements this connection's cache holds.
    pub fn cached_statements(&self) -> usize {
        self.conn().cached()
    }
}

impl Deref for PooledConnection {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.conn().client
    }
}

impl DerefMut for PooledConnection {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.conn.as_mut().expect("taken only in drop").client
    }
}

impl Drop for PooledConnection {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            // Before the permit (a field, dropped after this body) lets a
            // waiter in: it finds this connection idle.
            self.pool.give_back(conn);
        }
    }
}

impl std::fmt::Debug for PooledConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledConnection")
            .field("shard", &self.shard())
            .field("closed", &self.conn().is_closed())
            .finish()
    }
}
