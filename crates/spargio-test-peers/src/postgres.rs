//! A private PostgreSQL server per test binary: [`postgres`].

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Once, OnceLock};
use std::time::Duration;

use crate::server::{self, HOST};
use crate::{assert_present, Peer};

/// Where Debian/Ubuntu install the server binaries, one dir per version.
const VERSIONS_DIR: &str = "/usr/lib/postgresql";
/// The superuser initdb makes, and the database [`postgres`] creates.
const USER: &str = "spargio";
const DBNAME: &str = "spargio";
/// Start attempts, each on a fresh port (another process may take the
/// free port between the probe and the server's bind).
const ATTEMPTS: usize = 3;
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// `/usr/lib/postgresql/<version>/bin` of the highest version that has
/// both `initdb` and `postgres`.
pub(crate) fn bin_dir() -> Option<PathBuf> {
    std::fs::read_dir(VERSIONS_DIR)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version: Vec<u32> = name
                .split('.')
                .map(|part| part.parse().ok())
                .collect::<Option<_>>()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("postgres").is_file())
                .then_some((version, bin))
        })
        .max()
        .map(|(_, bin)| bin)
}

/// A PostgreSQL server private to this test binary (see [`postgres`]).
///
/// It listens on 127.0.0.1 at a free port (and on a Unix socket in its
/// dir), trusts every connection, and runs with `fsync=off`: for tests
/// and benchmarks only, nothing in it survives the process.
#[derive(Debug)]
pub struct PostgresInstance {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    /// The postmaster's pid (a new one after [`restart`](Self::restart)).
    pid: AtomicU32,
    /// Unix (uid, gid) the server runs as, when run as root.
    ids: Option<(u32, u32)>,
    schema: Once,
}

/// The test binary's private PostgreSQL server, started on first use
/// (initdb and start take a second or two) and stopped at exit, when its
/// dir is removed too. The server's superuser is `spargio`, with trust
/// authentication, and the database `spargio` exists.
///
/// The test must start with
/// `spargio_test_peers::require_peer!(spargio_test_peers::Peer::Postgres);`.
/// Panics, naming the log file, when the server does not start; every
/// later call panics with the same message.
///
/// Run as root, the server runs as the `postgres` user (PostgreSQL
/// refuses root), which the `postgresql` package creates.
#[track_caller]
pub fn postgres() -> &'static PostgresInstance {
    assert_present(Peer::Postgres);
    static INSTANCE: OnceLock<Result<PostgresInstance, String>> = OnceLock::new();
    match INSTANCE.get_or_init(PostgresInstance::start) {
        Ok(pg) => pg,
        Err(e) => panic!("the private PostgreSQL server did not start: {e}"),
    }
}

impl PostgresInstance {
    fn start() -> Result<PostgresInstance, String> {
        let bin = bin_dir().ok_or("no PostgreSQL server binaries in /usr/lib/postgresql")?;
        let ids = if server::is_root() {
            Some(server::user_ids("postgres").ok_or(
                "running as root, which PostgreSQL refuses, and there is no `postgres` \
                 user to run it as (the postgresql package creates one)",
            )?)
        } else {
            None
        };
        let dir = server::make_dir("postgres", ids.is_some())
            .map_err(|e| format!("make a temp dir: {e}"))?;
        Self::start_in(bin, ids, dir.clone()).map_err(|e| server::keep_dir(&dir, e))
    }

    fn start_in(
        bin: PathBuf,
        ids: Option<(u32, u32)>,
        dir: PathBuf,
    ) -> Result<PostgresInstance, String> {
        if let Some((uid, gid)) = ids {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .map_err(|e| format!("chown {} to postgres: {e}", dir.display()))?;
        }
        let data = dir.join("data");

        let initdb_log = dir.join("initdb.log");
        let log = |path: &Path| server::log_file(path).map_err(|e| format!("{path:?}: {e}"));
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", USER, "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"])
            .stdin(Stdio::null())
            .stdout(log(&initdb_log)?)
            .stderr(log(&initdb_log)?);
        server_env(&mut initdb, &dir, ids);
        let status = initdb.status().map_err(|e| format!("run initdb: {e}"))?;
        if !status.success() {
            return Err(format!(
                "initdb failed ({status}); its output, {}:\n{}",
                initdb_log.display(),
                server::log_tail(&initdb_log)
            ));
        }

        let mut last_error = String::new();
        for _ in 0..ATTEMPTS {
            let port = server::free_port().map_err(|e| format!("find a free port: {e}"))?;
            let pg = PostgresInstance {
                bin: bin.clone(),
                dir: dir.clone(),
                port,
                pid: AtomicU32::new(0),
                ids,
                schema: Once::new(),
            };
            match pg.launch() {
                Ok(()) => {
                    let out = pg.client("createdb").arg(DBNAME).output();
                    check("createdb", out)?;
                    return Ok(pg);
                }
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    /// Starts the postmaster on `self.port` over the data dir and waits
    /// until it accepts connections.
    fn launch(&self) -> Result<(), String> {
        let server_log = self.dir.join("postgres.log");
        let log = |path: &Path| server::log_file(path).map_err(|e| format!("{path:?}: {e}"));
        let mut cmd = Command::new(self.bin.join("postgres"));
        cmd.arg("-D")
            .arg(self.dir.join("data"))
            .arg("-k")
            .arg(&self.dir)
            .args(["-p", &self.port.to_string()])
            .args(["-c", &format!("listen_addresses={HOST}")])
            .args(["-c", "fsync=off"])
            .args(["-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off"])
            .args(["-c", "max_connections=200"])
            .stdout(log(&server_log)?)
            .stderr(log(&server_log)?);
        server_env(&mut cmd, &self.dir, self.ids);
        // SIGQUIT: immediate shutdown; the data is thrown away anyway.
        let pid = server::spawn(cmd, libc::SIGQUIT)
            .map_err(|e| format!("spawn {}: {e}", self.bin.join("postgres").display()))?;
        self.pid.store(pid, Ordering::SeqCst);
        server::wait_until("postgres", pid, &server_log, READY_TIMEOUT, || {
            self.is_ready()
        })
        .inspect_err(|_| server::stop(pid))
    }

    /// Kills the server at once (`SIGQUIT`: every backend drops its
    /// connection, as in a crash), keeps it down for `down`, then starts
    /// it again on the same port and data, and waits until it accepts
    /// connections. For tests of clients that must survive a database
    /// restart.
    pub fn restart(&self, down: Duration) -> Result<(), String> {
        server::stop(self.pid.load(Ordering::SeqCst));
        std::thread::sleep(down);
        self.launch()
    }

    /// `pg_isready`: the server accepts connections (not just TCP ones:
    /// while it starts up it refuses them).
    fn is_ready(&self) -> bool {
        self.client("pg_isready")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// One of the client programs, pointed at this server as `spargio`.
    fn client(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        cmd.args(["-h", HOST, "-p", &self.port.to_string(), "-U", USER])
            .stdin(Stdio::null())
            // Settings from the caller's environment that would change
            // what the client does.
            .env_remove("PGOPTIONS")
            .env_remove("PGSERVICE")
            .env_remove("PGSSLMODE")
            .env("PGCONNECT_TIMEOUT", "10");
        cmd
    }

    /// `postgres://spargio@127.0.0.1:PORT/spargio`.
    pub fn url(&self) -> String {
        format!("postgres://{USER}@{HOST}:{}/{DBNAME}", self.port)
    }

    /// The TCP port, on [`host`](Self::host).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1`.
    pub fn host(&self) -> &str {
        HOST
    }

    /// The superuser, `spargio` (trust authentication: no password).
    pub fn user(&self) -> &str {
        USER
    }

    /// The database, `spargio`.
    pub fn dbname(&self) -> &str {
        DBNAME
    }

    /// The server's temp dir: `data/` (the cluster), `postgres.log`,
    /// `initdb.log` and the Unix socket. Removed at exit.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The postmaster's pid.
    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::SeqCst)
    }

    /// Runs `sql` with `psql` (`-X -q -At -v ON_ERROR_STOP=1 -c SQL`) in
    /// the `spargio` database and returns its stdout: one line per row,
    /// columns separated by `|`, each line ending in `\n` (so `"1\n"` for
    /// `select 1`). Several `;`-separated statements run in one
    /// transaction. Panics with psql's stderr when a statement fails.
    ///
    /// For setting up schemas and checking rows independently of the
    /// client under test. `sql` travels as one argument: at most 128 KiB.
    #[track_caller]
    pub fn psql(&self, sql: &str) -> String {
        let out = self
            .client("psql")
            .args([
                "-d",
                DBNAME,
                "-X",
                "-q",
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ])
            .output();
        match check("psql", out) {
            Ok(stdout) => stdout,
            Err(e) => panic!("{e}\nthe SQL: {sql}"),
        }
    }

    /// Creates the TechEmpower benchmark tables, once per instance (later
    /// calls return at once; the SQL is idempotent too):
    ///
    /// * `world(id integer primary key, randomnumber integer not null)`,
    ///   ids 1..=10000, each `randomnumber` random in 1..=10000;
    /// * `fortune(id integer primary key, message varchar(2048) not null)`,
    ///   the 12 standard fortunes (ids 1..=12, among them the `<script>`
    ///   row and `フレームワークのベンチマーク`).
    pub fn techempower_schema(&self) {
        self.schema.call_once(|| {
            self.psql(TECHEMPOWER_SQL);
        });
    }
}

/// The server programs' environment: as root they run as `postgres`,
/// whose home is not root's.
fn server_env(cmd: &mut Command, dir: &Path, ids: Option<(u32, u32)>) {
    cmd.current_dir(dir);
    server::run_as(cmd, ids);
    if ids.is_some() {
        cmd.env("HOME", dir)
            .env("USER", "postgres")
            .env("LOGNAME", "postgres");
    }
}

/// A client program's stdout when it succeeded, else an error with its
/// stderr.
fn check(what: &str, out: std::io::Result<Output>) -> Result<String, String> {
    let out = out.map_err(|e| format!("run {what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("{what} printed non-UTF-8: {e}"))
}

/// The tables and rows of TechEmpower's `create-postgres.sql` (lowercase
/// names; `randomnumber` as there: `least(floor(random() * 10000 + 1), 10000)`).
const TECHEMPOWER_SQL: &str = "\
CREATE TABLE IF NOT EXISTS world (
  id integer PRIMARY KEY,
  randomnumber integer NOT NULL
);
INSERT INTO world (id, randomnumber)
  SELECT i, least(floor(random() * 10000 + 1), 10000)::integer
  FROM generate_series(1, 10000) AS i
  ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS fortune (
  id integer PRIMARY KEY,
  message varchar(2048) NOT NULL
);
INSERT INTO fortune (id, message) VALUES
  (1, 'fortune: No such file or directory'),
  (2, 'A computer scientist is someone who fixes things that aren''t broken.'),
  (3, 'After enough decimal places, nobody gives a damn.'),
  (4, 'A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1'),
  (5, 'A computer program does what you tell it to do, not what you want it to do.'),
  (6, 'Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen'),
  (7, 'Any program that runs right is obsolete.'),
  (8, 'A list is only as strong as its weakest link. — Donald Knuth'),
  (9, 'Feature: A bug with seniority.'),
  (10, 'Computers make very fast, very accurate mistakes.'),
  (11, '<script>alert(\"This should not be displayed in a browser alert box.\");</script>'),
  (12, 'フレームワークのベンチマーク')
  ON CONFLICT (id) DO NOTHING;
ANALYZE world;
ANALYZE fortune;
";
