//! The private PostgreSQL and Redis servers: they answer, hold the
//! TechEmpower tables, and are gone when the test binary is. The
//! lifecycle tests run this binary again as a child (its ignored
//! `child_starts_a_server` test) and look at the child's servers after
//! the child exits, fails, or is killed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spargio_test_peers::{postgres, redis, require_peer, Peer};

#[test]
fn postgres_answers_psql() {
    require_peer!(Peer::Postgres);
    let pg = postgres();
    assert_eq!(pg.psql("select 1"), "1\n");
    assert_eq!(
        pg.url(),
        format!("postgres://spargio@127.0.0.1:{}/spargio", pg.port())
    );
    assert_eq!(
        (pg.host(), pg.user(), pg.dbname()),
        ("127.0.0.1", "spargio", "spargio")
    );
    assert_eq!(
        pg.psql("select current_user, current_database()"),
        "spargio|spargio\n"
    );
    // The same instance for every caller.
    assert!(std::ptr::eq(pg, postgres()));
}

#[test]
fn postgres_psql_panics_with_the_error() {
    require_peer!(Peer::Postgres);
    let pg = postgres();
    let err = std::panic::catch_unwind(|| pg.psql("select * from no_such_table"))
        .expect_err("psql accepted a missing table");
    let msg = err.downcast_ref::<String>().expect("a formatted panic");
    assert!(
        msg.contains("no_such_table") && msg.contains("does not exist"),
        "{msg}"
    );
}

#[test]
fn postgres_has_the_techempower_tables() {
    require_peer!(Peer::Postgres);
    let pg = postgres();
    pg.techempower_schema();
    pg.techempower_schema();
    assert_eq!(pg.psql("select count(*) from fortune"), "12\n");
    // Byte for byte, through the server's UTF-8 encoding and back.
    assert_eq!(
        pg.psql("select message from fortune where id = 12")
            .as_bytes(),
        "フレームワークのベンチマーク\n".as_bytes()
    );
    assert_eq!(
        pg.psql("select message from fortune where id = 11"),
        "<script>alert(\"This should not be displayed in a browser alert box.\");</script>\n"
    );
    assert_eq!(
        pg.psql("select message from fortune where id = 2"),
        "A computer scientist is someone who fixes things that aren't broken.\n"
    );
    assert_eq!(
        pg.psql("select count(*), min(id), max(id) from world"),
        "10000|1|10000\n"
    );
    assert_eq!(
        pg.psql("select count(*) from world where randomnumber between 1 and 10000"),
        "10000\n"
    );
}

/// Sends one RESP command and reads one reply line (and a bulk string's
/// payload).
fn resp(conn: &mut BufReader<TcpStream>, args: &[&str]) -> String {
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req += &format!("${}\r\n{a}\r\n", a.len());
    }
    conn.get_mut().write_all(req.as_bytes()).unwrap();
    let mut line = String::new();
    conn.read_line(&mut line).unwrap();
    if let Some(len) = line.strip_prefix('$') {
        // `$-1`: nil, no payload.
        if let Ok(len) = len.trim_end().parse::<usize>() {
            let mut payload = vec![0; len + 2];
            conn.read_exact(&mut payload).unwrap();
            line += std::str::from_utf8(&payload).unwrap();
        }
    }
    line
}

#[test]
fn redis_answers_ping_set_get() {
    require_peer!(Peer::Redis);
    let r = redis();
    assert_eq!(r.url(), format!("redis://127.0.0.1:{}/", r.port()));
    let conn = TcpStream::connect(("127.0.0.1", r.port())).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut conn = BufReader::new(conn);
    assert_eq!(resp(&mut conn, &["PING"]), "+PONG\r\n");
    assert_eq!(resp(&mut conn, &["SET", "spargio", "ベンチ"]), "+OK\r\n");
    assert_eq!(resp(&mut conn, &["GET", "spargio"]), "$9\r\nベンチ\r\n");
    assert_eq!(resp(&mut conn, &["GET", "missing"]), "$-1\r\n");
}

// ===== the servers' lifecycle =====

/// In the child: which server to start, and how to end.
const CHILD_PEER: &str = "SPARGIO_DB_CHILD_PEER";
const CHILD_END: &str = "SPARGIO_DB_CHILD_END";

#[test]
#[ignore = "the lifecycle tests run it in a child process"]
fn child_starts_a_server() {
    let (Ok(peer), Ok(end)) = (std::env::var(CHILD_PEER), std::env::var(CHILD_END)) else {
        return;
    };
    let (dir, pid, port) = match peer.as_str() {
        "postgres" => {
            require_peer!(Peer::Postgres);
            let pg = postgres();
            (pg.dir().to_owned(), pg.pid(), pg.port())
        }
        _ => {
            require_peer!(Peer::Redis);
            let r = redis();
            (r.dir().to_owned(), r.pid(), r.port())
        }
    };
    // Straight to the stream: the harness captures `println!`.
    let mut out = std::io::stdout().lock();
    writeln!(out, "SERVER {} {pid} {port}", dir.display()).unwrap();
    out.flush().unwrap();
    drop(out);
    match end.as_str() {
        "fail" => panic!("the child test fails"),
        "hang" => loop {
            std::thread::sleep(Duration::from_secs(1));
        },
        _ => {}
    }
}

struct Started {
    child: Child,
    dir: String,
    pid: u32,
    port: u16,
    stderr: JoinHandle<String>,
}

impl Started {
    /// Waits for the child; returns its exit status and stderr.
    fn wait(&mut self) -> (ExitStatus, String) {
        let status = self.child.wait().unwrap();
        let stderr = std::mem::replace(&mut self.stderr, std::thread::spawn(String::new));
        (status, stderr.join().unwrap())
    }
}

/// Runs `child_starts_a_server` in a child and reads its server. Threads
/// drain the child's stdout and stderr to the end, so that it never
/// writes to a closed or full pipe.
fn start_child(peer: &str, end: &str) -> Started {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "child_starts_a_server",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_PEER, peer)
        .env(CHILD_END, end)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("SERVER ") {
                let _ = tx.send(rest.to_owned());
            }
        }
    });
    let Ok(server) = rx.recv() else {
        let _ = child.wait();
        panic!("the child started no server: {}", stderr.join().unwrap());
    };
    let mut parts = server.rsplitn(3, ' ');
    let port = parts.next().unwrap().parse().unwrap();
    let pid = parts.next().unwrap().parse().unwrap();
    let dir = parts.next().unwrap().to_owned();
    Started {
        child,
        dir,
        pid,
        port,
        stderr,
    }
}

/// The process exists and is not a zombie.
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

fn gone_within(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The child's server is stopped, its port closed and its dir removed.
fn check_cleaned_up(s: &Started) {
    assert!(!alive(s.pid), "server {} outlived the binary", s.pid);
    assert!(
        TcpStream::connect(("127.0.0.1", s.port)).is_err(),
        "port {} still open",
        s.port
    );
    assert!(!Path::new(&s.dir).exists(), "{} is still there", s.dir);
}

fn exits_cleanly(peer: &str) {
    let mut s = start_child(peer, "exit");
    assert!(Path::new(&s.dir).is_dir());
    assert!(alive(s.pid));
    let (status, stderr) = s.wait();
    assert!(status.success(), "{status}: {stderr}");
    check_cleaned_up(&s);
}

#[test]
fn postgres_is_stopped_and_removed_at_exit() {
    require_peer!(Peer::Postgres);
    exits_cleanly("postgres");
}

#[test]
fn redis_is_stopped_and_removed_at_exit() {
    require_peer!(Peer::Redis);
    exits_cleanly("redis");
}

#[test]
fn a_failing_binary_stops_its_server() {
    require_peer!(Peer::Redis);
    let mut s = start_child("redis", "fail");
    let (status, stderr) = s.wait();
    assert_eq!(status.code(), Some(101), "{status}: {stderr}");
    check_cleaned_up(&s);
}

#[test]
fn a_killed_binary_takes_its_server_with_it() {
    require_peer!(Peer::Postgres);
    let mut s = start_child("postgres", "hang");
    assert!(alive(s.pid));
    s.child.kill().unwrap();
    s.wait();
    // No atexit handler ran: the parent-death signal stops the server.
    assert!(
        gone_within(s.pid, Duration::from_secs(30)),
        "server {} outlived its killed parent",
        s.pid
    );
    // Its dir stays for the next run's sweep; this test removes it.
    assert!(Path::new(&s.dir).is_dir());
    std::fs::remove_dir_all(&s.dir).unwrap();
}
