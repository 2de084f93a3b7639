//! Opening one connection: on the shard that will own it, over spargio's
//! own sockets, with its `Connection` future a task pinned to that shard.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use spargio::io::Compat;
use spargio::net::{TcpStream, UnixStream};
use spargio::{RuntimeHandle, ShardId};
use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config, NoTls};

use crate::Error;

/// Where one attempt connects.
enum Target {
    Tcp(String, u16),
    Unix(PathBuf),
}

/// The targets of `config`, in its order: each host (or `hostaddr`) with
/// its port (one port for all, or one per host; 5432 by default). A Unix
/// host is a directory holding `.s.PGSQL.<port>`, as libpq reads it.
fn targets(config: &Config) -> Result<Vec<Target>, Error> {
    let ports = config.get_ports();
    let addrs = config.get_hostaddrs();
    let hosts = config.get_hosts();
    let count = if addrs.is_empty() {
        hosts.len()
    } else {
        addrs.len()
    };
    if count == 0 {
        return Err(Error::Config("the configuration names no host".into()));
    }
    if ports.len() > 1 && ports.len() != count {
        return Err(Error::Config(format!(
            "{} ports for {count} hosts: give one port, or one per host",
            ports.len()
        )));
    }
    let port = |i: usize| match ports.len() {
        0 => 5432,
        1 => ports[0],
        _ => ports[i],
    };
    Ok((0..count)
        .map(|i| match addrs.get(i) {
            Some(ip) => Target::Tcp(ip.to_string(), port(i)),
            None => match &hosts[i] {
                Host::Tcp(name) => Target::Tcp(name.clone(), port(i)),
                Host::Unix(dir) => Target::Unix(dir.join(format!(".s.PGSQL.{}", port(i)))),
            },
        })
        .collect())
}

/// Connects to `target` and runs the startup handshake; the connection's
/// future becomes a task pinned to `shard` (the calling one).
async fn attempt(
    handle: &RuntimeHandle,
    shard: ShardId,
    config: &Config,
    target: &Target,
) -> Result<Client, Error> {
    let client = match target {
        Target::Tcp(host, port) => {
            let tcp = TcpStream::connect(handle, (host.clone(), *port))
                .await
                .map_err(|e| Error::Connect(named(e, format_args!("{host}:{port}"))))?;
            // As tokio-postgres' own connect: small queries go out at once.
            tcp.set_nodelay(true).map_err(Error::Connect)?;
            let (client, connection) = config.connect_raw(Compat::new(tcp), NoTls).await?;
            spawn(handle, shard, connection)?;
            client
        }
        Target::Unix(path) => {
            let unix = UnixStream::connect(handle, path)
                .await
                .map_err(|e| Error::Connect(named(e, format_args!("{}", path.display()))))?;
            let (client, connection) = config.connect_raw(Compat::new(unix), NoTls).await?;
            spawn(handle, shard, connection)?;
            client
        }
    };
    Ok(client)
}

/// Runs `connection` (which ends once its client is dropped and its
/// queries answered, or when the server goes away) as a task pinned to
/// `shard`, detached: its errors reach the client's queries, and
/// `Client::is_closed` tells the pool to replace it.
fn spawn<F>(handle: &RuntimeHandle, shard: ShardId, connection: F) -> Result<(), Error>
where
    F: std::future::Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
{
    handle.spawn_pinned(shard, async move {
        let _ = connection.await;
    })?;
    Ok(())
}

fn named(e: io::Error, target: std::fmt::Arguments<'_>) -> io::Error {
    io::Error::new(e.kind(), format!("{target}: {e}"))
}

/// Opens one connection owned by `shard`: its socket's session and its
/// `Connection` task live there. Tries each target in order (each within
/// the configuration's `connect_timeout`, if any) and reports the last
/// failure.
pub(crate) async fn open(
    handle: &RuntimeHandle,
    shard: ShardId,
    config: &Config,
) -> Result<Client, Error> {
    let targets = targets(config)?;
    let here = spargio::ShardCtx::current()
        .is_some_and(|ctx| ctx.shard_id() == shard && ctx.handle().same_runtime(handle));
    if here {
        return first_of(handle, shard, config, &targets).await;
    }
    let (handle2, config) = (handle.clone(), config.clone());
    handle
        .spawn_pinned(shard, async move {
            first_of(&handle2, shard, &config, &targets).await
        })?
        .await
        .map_err(|e| Error::Runtime(e.to_string()))?
}

async fn first_of(
    handle: &RuntimeHandle,
    shard: ShardId,
    config: &Config,
    targets: &[Target],
) -> Result<Client, Error> {
    let mut last = None;
    for target in targets {
        let tried = match config.get_connect_timeout() {
            Some(&limit) => within(limit, attempt(handle, shard, config, target)).await,
            None => attempt(handle, shard, config, target).await,
        };
        match tried {
            Ok(client) => return Ok(client),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("targets() gives at least one"))
}

async fn within(
    limit: Duration,
    fut: impl std::future::Future<Output = Result<Client, Error>>,
) -> Result<Client, Error> {
    spargio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| {
            Err(Error::Connect(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer within connect_timeout ({limit:?})"),
            )))
        })
}
