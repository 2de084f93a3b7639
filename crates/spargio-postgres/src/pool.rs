//! The pool: per shard, a few shared connections handed out round robin
//! and a bounded set of exclusive ones, each opened on that shard.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use spargio::{RuntimeHandle, ShardCtx, ShardId};
use tokio::sync::Semaphore;
use tokio_postgres::Config;

use crate::conn::{Conn, PgClient, PooledConnection};
use crate::{connect, Error, PoolBuilder};

/// After a failed reopen, a slot is not tried again for this long: callers
/// meanwhile get that failure at once instead of queueing up attempts
/// against a database that is down.
const RETRY_GAP: Duration = Duration::from_millis(100);

/// A pool of PostgreSQL connections for one spargio runtime; see the
/// [crate docs](crate) for its design. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    config: Config,
    handle: RuntimeHandle,
    shards: Box<[ShardPool]>,
    wait_timeout: Option<Duration>,
    cache_bound: usize,
    /// Round robin over the shards for callers outside the runtime.
    outside: AtomicUsize,
}

/// One shard's connections.
struct ShardPool {
    shared: Box<[Slot]>,
    next: AtomicUsize,
    /// Exclusive connections not checked out; at most `exclusive_per_shard`.
    idle: Mutex<Vec<Conn>>,
    /// One permit per exclusive connection the shard may have out.
    permits: Arc<Semaphore>,
}

/// A shared connection's place: the connection, if it is open, and the
/// last failure to reopen it.
#[derive(Default)]
struct Slot {
    state: Mutex<SlotState>,
    /// Held while reopening, so one caller reopens and the others wait.
    reopening: tokio::sync::Mutex<()>,
    /// A background reopen is spawned and not finished.
    in_background: AtomicBool,
}

#[derive(Default)]
struct SlotState {
    conn: Option<Arc<Conn>>,
    failed: Option<(Instant, String)>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a swap or a push: nothing a panic
    // could leave half done.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Slot {
    fn live(&self) -> Option<Arc<Conn>> {
        lock(&self.state)
            .conn
            .as_ref()
            .filter(|c| !c.is_closed())
            .cloned()
    }

    /// The last reopen failure, if it is more recent than `RETRY_GAP`.
    fn recent_failure(&self) -> Option<Error> {
        let state = lock(&self.state);
        let (at, msg) = state.failed.as_ref()?;
        let ago = at.elapsed();
        (ago < RETRY_GAP).then(|| {
            Error::Connect(std::io::Error::other(format!(
                "reconnecting failed {ago:?} ago (not retried for {RETRY_GAP:?}): {msg}"
            )))
        })
    }
}

impl Pool {
    /// A builder for a pool over `config`.
    pub fn builder(config: Config) -> PoolBuilder {
        PoolBuilder::new(config)
    }

    /// A pool over the connection string `url` (`postgres://user@host:port/db`
    /// or `host=... port=...`), with the default sizes, opened on every
    /// shard of `handle`'s runtime.
    pub async fn connect(handle: impl AsRef<RuntimeHandle>, url: &str) -> Result<Pool, Error> {
        let config = url
            .parse::<Config>()
            .map_err(|e| Error::Config(format!("{url:?}: {e}")))?;
        Pool::builder(config).open(handle).await
    }

    pub(crate) async fn open(builder: PoolBuilder, handle: &RuntimeHandle) -> Result<Pool, Error> {
        let shards = (0..handle.shard_count())
            .map(|_| ShardPool {
                shared: (0..builder.per_shard).map(|_| Slot::default()).collect(),
                next: AtomicUsize::new(0),
                idle: Mutex::new(Vec::new()),
                permits: Arc::new(Semaphore::new(builder.exclusive_per_shard)),
            })
            .collect();
        let inner = Arc::new(Inner {
            config: builder.config,
            handle: handle.clone(),
            shards,
            wait_timeout: builder.wait_timeout,
            cache_bound: builder.statement_cache,
            outside: AtomicUsize::new(0),
        });
        // Every shared connection at once, each from a task on its shard.
        let mut opening = Vec::new();
        for shard in 0..inner.shards.len() {
            for slot in 0..builder.per_shard {
                let inner2 = inner.clone();
                let task = handle.spawn_pinned(shard, async move {
                    inner2.reopen(shard, slot).await.map(drop)
                })?;
                opening.push(task);
            }
        }
        for task in opening {
            task.await.map_err(|e| Error::Runtime(e.to_string()))??;
        }
        Ok(Pool { inner })
    }

    /// A shared connection of the calling shard (the next one, round
    /// robin), to run queries on; they are pipelined with everyone
    /// else's on that connection.
    ///
    /// A connection found closed (the server restarted, the backend was
    /// terminated) is reopened: in the background while another of the
    /// shard's connections is open, else before this returns. Outside the
    /// runtime, the shards take turns.
    pub async fn client(&self) -> Result<PgClient, Error> {
        let inner = &self.inner;
        let shard = inner.home();
        let pool = &inner.shards[shard];
        let n = pool.shared.len();
        let first = pool.next.fetch_add(1, Ordering::Relaxed) % n;
        let mut dead = None;
        for k in 0..n {
            let slot = (first + k) % n;
            match pool.shared[slot].live() {
                Some(conn) => {
                    if let Some(dead) = dead {
                        inner.reopen_in_background(shard, dead);
                    }
                    return Ok(PgClient { conn });
                }
                None => {
                    dead.get_or_insert(slot);
                }
            }
        }
        let conn = inner.reopen(shard, first).await?;
        Ok(PgClient { conn })
    }

    /// An exclusive connection of the calling shard, for a transaction
    /// or anything that must not interleave with other callers' queries.
    ///
    /// At most `exclusive_per_shard` are out per shard; past that, callers
    /// wait in line (first come, first served) for one to be dropped, up
    /// to `wait_timeout` ([`Error::WaitTimeout`]). Idle ones are reused;
    /// one is opened when none is idle.
    pub async fn get(&self) -> Result<PooledConnection, Error> {
        let inner = &self.inner;
        let shard = inner.home();
        let pool = &inner.shards[shard];
        let acquire = pool.permits.clone().acquire_owned();
        let permit = match inner.wait_timeout {
            Some(limit) => spargio::time::timeout(limit, acquire)
                .await
                .map_err(|_| Error::WaitTimeout(limit))?,
            None => acquire.await,
        }
        .expect("the pool never closes its semaphores");
        let idle = loop {
            let next = lock(&pool.idle).pop();
            match next {
                Some(conn) if conn.is_closed() => continue,
                other => break other,
            }
        };
        let conn = match idle {
            Some(conn) => conn,
            None => Conn::new(
                connect::open(&inner.handle, shard, &inner.config).await?,
                shard,
                inner.cache_bound,
            ),
        };
        Ok(PooledConnection {
            conn: Some(conn),
            pool: inner.clone(),
            _permit: permit,
        })
    }

    /// The number of shards, each with its own connections.
    pub fn shard_count(&self) -> usize {
        self.inner.shards.len()
    }

    /// Exclusive connections idle on `shard` (for tests and metrics).
    pub fn idle_exclusive(&self, shard: ShardId) -> usize {
        self.inner
            .shards
            .get(shard)
            .map_or(0, |p| lock(&p.idle).len())
    }
}

impl Inner {
    /// The calling shard, if it belongs to this pool's runtime; else the
    /// next shard in turn.
    fn home(&self) -> ShardId {
        match ShardCtx::current() {
            Some(ctx) if ctx.handle().same_runtime(&self.handle) => ctx.shard_id(),
            _ => self.outside.fetch_add(1, Ordering::Relaxed) % self.shards.len(),
        }
    }

    /// The open connection of `shard`'s slot `slot`, opening it first if
    /// it is closed (one caller at a time; the others then find it open).
    async fn reopen(&self, shard: ShardId, slot: usize) -> Result<Arc<Conn>, Error> {
        let place = &self.shards[shard].shared[slot];
        let _alone = place.reopening.lock().await;
        if let Some(conn) = place.live() {
            return Ok(conn);
        }
        if let Some(failure) = place.recent_failure() {
            return Err(failure);
        }
        match connect::open(&self.handle, shard, &self.config).await {
            Ok(client) => {
                let conn = Arc::new(Conn::new(client, shard, self.cache_bound));
                let mut state = lock(&place.state);
                state.conn = Some(conn.clone());
                state.failed = None;
                Ok(conn)
            }
            Err(e) => {
                lock(&place.state).failed = Some((Instant::now(), e.cause()));
                Err(e)
            }
        }
    }

    /// Starts reopening `shard`'s slot `slot` unless that is under way or
    /// failed a moment ago.
    fn reopen_in_background(self: &Arc<Self>, shard: ShardId, slot: usize) {
        let place = &self.shards[shard].shared[slot];
        if place.recent_failure().is_some()
            || place
                .in_background
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let inner = self.clone();
        let spawned = self.handle.spawn_pinned(shard, async move {
            let _ = inner.reopen(shard, slot).await;
            inner.shards[shard].shared[slot]
                .in_background
                .store(false, Ordering::Release);
        });
        if spawned.is_err() {
            // The runtime is shutting down: nothing to reopen then.
            place.in_background.store(false, Ordering::Release);
        }
    }

    /// An exclusive connection dropped by its holder: idle again on its
    /// shard, unless it has closed.
    pub(crate) fn give_back(&self, conn: Conn) {
        if !conn.is_closed() {
            lock(&self.shards[conn.shard()].idle).push(conn);
        }
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("shards", &self.inner.shards.len())
            .finish_non_exhaustive()
    }
}
