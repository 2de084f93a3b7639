//! The pool's sizes and limits.

use std::time::Duration;

use spargio::RuntimeHandle;
use tokio_postgres::Config;

use crate::{Error, Pool};

/// Sizes and limits of a [`Pool`], from [`Pool::builder`].
///
/// ```no_run
/// # async fn demo(handle: spargio::RuntimeHandle) -> Result<(), spargio_postgres::Error> {
/// use std::time::Duration;
/// use spargio_postgres::{Config, Pool};
///
/// let config: Config = "postgres://app@127.0.0.1:5432/app".parse().unwrap();
/// let pool = Pool::builder(config)
///     .per_shard(2)
///     .exclusive_per_shard(8)
///     .wait_timeout(Some(Duration::from_secs(5)))
///     .open(&handle)
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PoolBuilder {
    pub(crate) config: Config,
    pub(crate) per_shard: usize,
    pub(crate) exclusive_per_shard: usize,
    pub(crate) wait_timeout: Option<Duration>,
    pub(crate) statement_cache: usize,
}

impl PoolBuilder {
    pub(crate) fn new(config: Config) -> PoolBuilder {
        PoolBuilder {
            config,
            per_shard: 2,
            exclusive_per_shard: 4,
            wait_timeout: Some(Duration::from_secs(30)),
            statement_cache: 100,
        }
    }

    /// Shared connections per shard, opened by [`open`](PoolBuilder::open)
    /// and handed out round robin by [`Pool::client`] (default 2; at
    /// least 1). Each is one PostgreSQL backend process: more of them let
    /// the server work on more queries at once; fewer pipeline more.
    pub fn per_shard(mut self, n: usize) -> PoolBuilder {
        self.per_shard = n.max(1);
        self
    }

    /// Exclusive connections per shard that [`Pool::get`] may have out at
    /// once (default 4; at least 1). They are opened on demand and kept
    /// idle once returned.
    pub fn exclusive_per_shard(mut self, n: usize) -> PoolBuilder {
        self.exclusive_per_shard = n.max(1);
        self
    }

    /// How long [`Pool::get`] waits for an exclusive connection before it
    /// fails with [`Error::WaitTimeout`] (default 30 s, as sqlx's
    /// `acquire_timeout`; `None` waits for as long as it takes).
    pub fn wait_timeout(mut self, limit: Option<Duration>) -> PoolBuilder {
        self.wait_timeout = limit;
        self
    }

    /// Distinct statement texts each connection keeps prepared (default
    /// 100, as sqlx's statement cache). Past it, `prepare_cached`
    /// prepares for the caller alone.
    pub fn statement_cache(mut self, n: usize) -> PoolBuilder {
        self.statement_cache = n;
        self
    }

    /// Opens the shared connections on every shard of `handle`'s runtime
    /// (each from a task on its shard) and gives the pool once all are
    /// open, or the first failure.
    pub async fn open(self, handle: impl AsRef<RuntimeHandle>) -> Result<Pool, Error> {
        Pool::open(self, handle.as_ref()).await
    }
}
