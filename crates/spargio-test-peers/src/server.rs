//! What the private servers (PostgreSQL, Redis) share: a temp dir per
//! server, a free port, spawning so that the server dies with the test
//! binary, and stopping every server and removing its dir at exit.
//!
//! Stopping has two paths:
//!
//! * a normal exit (every test passed, or the harness exits 101 after a
//!   failure, or a binary's `main` returns) runs the `atexit` handler
//!   [`stop_all`]: it signals each server, waits for it (escalating to
//!   `SIGKILL` after [`STOP_GRACE`]) and removes its dir;
//! * a test binary killed outright runs no handler: each server is
//!   spawned with `PR_SET_PDEATHSIG` from a thread that lives as long as
//!   the process, so the kernel signals the server when the process dies.
//!   Its dir stays behind; the next start in any test binary removes the
//!   dirs whose owning process is gone ([`sweep_stale_dirs`]).

use std::ffi::CString;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::net::TcpListener;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

/// Prefix of every server's temp dir: `spargio-peer-<pid>-<n>-<kind>`.
const PREFIX: &str = "spargio-peer-";

/// How long a server gets to exit after its stop signal before `SIGKILL`.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The loopback address every server listens on.
pub(crate) const HOST: &str = "127.0.0.1";

struct Running {
    child: Child,
    signal: libc::c_int,
}

/// Servers started by this process, stopped by [`stop_all`].
static SERVERS: Mutex<Vec<Running>> = Mutex::new(Vec::new());
/// Temp dirs made by this process, removed by [`stop_all`] once the
/// servers are stopped.
static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The effective uid is root's.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The uid and gid of the user `name`, if it exists.
pub(crate) fn user_ids(name: &str) -> Option<(u32, u32)> {
    let name = CString::new(name).ok()?;
    let mut len = 4096;
    loop {
        let mut buf = vec![0 as libc::c_char; len];
        // SAFETY: `passwd` is plain C data (integers and pointers), for
        // which all zeroes is a valid value; getpwnam_r overwrites it.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call: `name` is a NUL
        // terminated string, `pwd` and `result` are live locals, and
        // `buf` is `len` writable bytes the strings in `pwd` point into
        // (we read only the integer fields, before `buf` is dropped).
        let rc = unsafe {
            libc::getpwnam_r(name.as_ptr(), &mut pwd, buf.as_mut_ptr(), len, &mut result)
        };
        if rc == libc::ERANGE && len < 1 << 20 {
            len *= 4;
            continue;
        }
        if rc != 0 || result.is_null() {
            return None;
        }
        return Some((pwd.pw_uid, pwd.pw_gid));
    }
}

/// A fresh, empty dir for one server, mode 0700:
/// `<temp>/spargio-peer-<pid>-<n>-<kind>`. `other_user`: the server runs
/// as another user (PostgreSQL under root), so the dir must be reachable
/// by it: when some ancestor of [`std::env::temp_dir`] is closed to
/// others, `/tmp` is used instead. The dir is removed at exit, unless
/// [`keep_dir`] says otherwise.
pub(crate) fn make_dir(kind: &str, other_user: bool) -> io::Result<PathBuf> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let mut base = std::env::temp_dir();
    if other_user && !reachable_by_others(&base) {
        base = PathBuf::from("/tmp");
    }
    sweep_stale_dirs(&base);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = base.join(format!("{PREFIX}{}-{n}-{kind}", std::process::id()));
    DirBuilder::new().mode(0o700).create(&dir)?;
    lock(&DIRS).push(dir.clone());
    Ok(dir)
}

/// Keeps `dir` at exit, for its logs: its server did not start. Returns
/// `error`, saying so. (The next run's sweep removes the dir.)
pub(crate) fn keep_dir(dir: &Path, error: String) -> String {
    lock(&DIRS).retain(|d| d != dir);
    format!(
        "{error}\n(the server's dir, {}, is kept for inspection)",
        dir.display()
    )
}

fn reachable_by_others(dir: &Path) -> bool {
    dir.ancestors()
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.mode() & 0o001 != 0))
}

/// Removes, once per process, the server dirs under `base` whose process
/// is gone (a test binary that was killed left them).
fn sweep_stale_dirs(base: &Path) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Ok(entries) = std::fs::read_dir(base) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(PREFIX))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new("/proc").join(pid.to_string()).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    });
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((HOST, 0))?.local_addr()?.port())
}

/// `path` opened for appending, as a server's stdout and stderr.
pub(crate) fn log_file(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Runs `cmd` as the user `ids` (uid, gid), when given.
pub(crate) fn run_as(cmd: &mut Command, ids: Option<(u32, u32)>) {
    if let Some((uid, gid)) = ids {
        cmd.uid(uid).gid(gid);
    }
}

type Spawn = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` as a server: in its own process group (a terminal's ^C
/// goes to the test binary, which stops the server in order), with
/// `signal` as its parent-death signal, and registered for [`stop_all`]
/// to stop with `signal`. Returns its pid.
///
/// The parent-death signal fires when the spawning *thread* exits, so
/// the spawn happens on a thread that never does; test threads come and go.
pub(crate) fn spawn(mut cmd: Command, signal: libc::c_int) -> io::Result<u32> {
    static KEEPER: OnceLock<Mutex<mpsc::Sender<Spawn>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Spawn>();
        std::thread::Builder::new()
            .name("spargio-peer-servers".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawn the server keeper thread");
        Mutex::new(tx)
    });
    cmd.process_group(0).stdin(Stdio::null());
    // SAFETY: the closure runs in the forked child before exec. prctl is
    // async-signal-safe, and the closure allocates nothing and touches no
    // state shared with the parent. std runs it after the uid change,
    // which would otherwise clear the death signal.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    lock(keeper)
        .send((cmd, tx))
        .map_err(|_| io::Error::other("the server keeper thread is gone"))?;
    let child = rx
        .recv()
        .map_err(|_| io::Error::other("the server keeper thread is gone"))??;
    let pid = child.id();
    let first = {
        let mut servers = lock(&SERVERS);
        servers.push(Running { child, signal });
        servers.len() == 1
    };
    if first {
        register_stop_all();
    }
    Ok(pid)
}

fn register_stop_all() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `stop_all` is the `extern "C" fn()` atexit takes; it
        // uses only statics, which outlive `main`, and being `extern "C"`
        // it aborts rather than unwinds into libc if it panics.
        unsafe { libc::atexit(stop_all) };
    });
}

/// The exit status of the server `pid`, once it has exited.
pub(crate) fn exited(pid: u32) -> Option<ExitStatus> {
    let mut servers = lock(&SERVERS);
    let server = servers.iter_mut().find(|s| s.child.id() == pid)?;
    server.child.try_wait().ok().flatten()
}

/// Stops the server `pid` now (a start that failed) and forgets it.
pub(crate) fn stop(pid: u32) {
    let server = {
        let mut servers = lock(&SERVERS);
        let Some(i) = servers.iter().position(|s| s.child.id() == pid) else {
            return;
        };
        servers.swap_remove(i)
    };
    halt(server);
}

fn halt(mut server: Running) {
    if let Ok(None) = server.child.try_wait() {
        // SAFETY: kill has no memory preconditions; the pid is our own
        // unreaped child, so it cannot name another process.
        unsafe { libc::kill(server.child.id() as libc::pid_t, server.signal) };
        let deadline = Instant::now() + STOP_GRACE;
        while let Ok(None) = server.child.try_wait() {
            if Instant::now() > deadline {
                let _ = server.child.kill();
                let _ = server.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The atexit handler: stops every server, then removes every dir.
extern "C" fn stop_all() {
    if let Some(mut servers) = lock_at_exit(&SERVERS) {
        for server in std::mem::take(&mut *servers) {
            halt(server);
        }
    }
    if let Some(mut dirs) = lock_at_exit(&DIRS) {
        for dir in std::mem::take(&mut *dirs) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Locks at exit. Another thread may still be inside a start, which holds
/// the lock only briefly; a stuck holder must not hang the exit, so after
/// a second this gives up (the parent-death signal still stops the
/// servers, and the next run's sweep removes the dirs).
fn lock_at_exit<T>(m: &'static Mutex<T>) -> Option<std::sync::MutexGuard<'static, T>> {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

/// Polls `ready` until it says yes, the server `pid` exits or `timeout`
/// passes. The error says which, with the tail of `log`.
pub(crate) fn wait_until(
    what: &str,
    pid: u32,
    log: &Path,
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return Ok(());
        }
        if let Some(status) = exited(pid) {
            return Err(format!(
                "{what} exited ({status}) before it was ready; its log, {}:\n{}",
                log.display(),
                log_tail(log)
            ));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{what} was not ready after {timeout:?}; its log, {}:\n{}",
                log.display(),
                log_tail(log)
            ));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The last lines of `log`, for a panic message.
pub(crate) fn log_tail(log: &Path) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
