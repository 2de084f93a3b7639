//! A private Redis server per test binary: [`redis`].

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::server::{self, HOST};
use crate::{assert_present, Peer};

/// Start attempts, each on a fresh port.
const ATTEMPTS: usize = 3;
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// `redis-server` on the PATH, else `/usr/bin/redis-server`.
pub(crate) fn server_binary() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("redis-server"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let p = PathBuf::from("/usr/bin/redis-server");
        p.is_file().then_some(p)
    })
}

/// A Redis server private to this test binary (see [`redis`]).
///
/// It listens on 127.0.0.1 at a free port, without persistence (no RDB
/// snapshots, no AOF).
#[derive(Debug)]
pub struct RedisInstance {
    dir: PathBuf,
    port: u16,
    pid: u32,
}

/// The test binary's private Redis server, started on first use and
/// stopped at exit, when its dir is removed too.
///
/// The test must start with
/// `spargio_test_peers::require_peer!(spargio_test_peers::Peer::Redis);`.
/// Panics, naming the log file, when the server does not start; every
/// later call panics with the same message.
#[track_caller]
pub fn redis() -> &'static RedisInstance {
    assert_present(Peer::Redis);
    static INSTANCE: OnceLock<Result<RedisInstance, String>> = OnceLock::new();
    match INSTANCE.get_or_init(RedisInstance::start) {
        Ok(r) => r,
        Err(e) => panic!("the private Redis server did not start: {e}"),
    }
}

impl RedisInstance {
    fn start() -> Result<RedisInstance, String> {
        let program = server_binary().ok_or("no redis-server")?;
        let dir = server::make_dir("redis", false).map_err(|e| format!("make a temp dir: {e}"))?;
        Self::start_in(program, dir.clone()).map_err(|e| server::keep_dir(&dir, e))
    }

    fn start_in(program: PathBuf, dir: PathBuf) -> Result<RedisInstance, String> {
        let log = dir.join("redis.log");
        let mut last_error = String::new();
        for _ in 0..ATTEMPTS {
            let port = server::free_port().map_err(|e| format!("find a free port: {e}"))?;
            let out = server::log_file(&log).map_err(|e| format!("{log:?}: {e}"))?;
            let err = out.try_clone().map_err(|e| format!("{log:?}: {e}"))?;
            let mut cmd = Command::new(&program);
            cmd.args(["--port", &port.to_string()])
                .args(["--bind", HOST])
                .args(["--save", ""])
                .args(["--appendonly", "no"])
                .args(["--daemonize", "no"])
                .arg("--dir")
                .arg(&dir)
                .current_dir(&dir)
                .stdout(out)
                .stderr(err);
            // SIGTERM: with no persistence configured Redis exits at once.
            let pid = server::spawn(cmd, libc::SIGTERM)
                .map_err(|e| format!("spawn {}: {e}", program.display()))?;
            match server::wait_until("redis-server", pid, &log, READY_TIMEOUT, || ping(port)) {
                Ok(()) => return Ok(RedisInstance { dir, port, pid }),
                Err(e) => {
                    server::stop(pid);
                    last_error = e;
                }
            }
        }
        Err(last_error)
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://{HOST}:{}/", self.port)
    }

    /// The TCP port, on [`host`](Self::host).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1`.
    pub fn host(&self) -> &str {
        HOST
    }

    /// The server's temp dir (`redis.log`). Removed at exit.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

/// `PING` answers `+PONG`.
fn ping(port: u16) -> bool {
    let timeout = Duration::from_secs(1);
    let Ok(mut conn) = TcpStream::connect_timeout(&(([127, 0, 0, 1], port).into()), timeout) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(timeout));
    if conn.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    conn.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}
