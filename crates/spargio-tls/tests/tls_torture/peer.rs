//! The peer: rustls on a plain blocking std socket, on threads of its own.
//!
//! One rustls connection, behind a mutex held for one step at a time,
//! never across a socket call. The reader thread reads ciphertext off the
//! socket, hands it to rustls and records every plaintext byte (and
//! whether a `close_notify` came before the end of stream); it can be
//! paused, so our side's socket buffer fills. The writer thread encrypts
//! the deterministic peer stream on demand and writes the records, and
//! every tick also writes what rustls queued by itself (alerts, the
//! answer to a key update); it sends `close_notify` then shuts its side
//! down, updates its keys, or resets the connection.
//!
//! Not `rustls::StreamOwned`: its `read` first writes out what the
//! connection has queued, so a peer with records to send could not read
//! while our side, blocked in a large write, does not read either: a
//! deadlock of the harness, not of the code under test.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spargio_tls::rustls::Connection;

use super::rng::stream_byte;

/// How long a blocked peer call waits before it looks at its flags.
const TICK: Duration = Duration::from_millis(10);

enum Cmd {
    /// Send this many more bytes of the peer stream.
    Send(u64),
    /// A TLS 1.3 key update (asking ours to update too).
    KeyUpdate,
    /// `close_notify`, then shut the TCP write side down.
    Close,
    Reset,
}

#[derive(Default)]
struct Flags {
    /// The reader does not read before this instant.
    paused_until: Mutex<Option<Instant>>,
    /// Stop everything (a reset, or the run gave up).
    abort: AtomicBool,
    /// The reader stops at this instant even without end of stream.
    give_up: Mutex<Option<Instant>>,
}

/// What the peer saw.
pub struct PeerReport {
    pub received: Vec<u8>,
    /// How the reader ended: "eof after close_notify", "eof without
    /// close_notify", an error, "aborted", "gave up".
    pub end: String,
    /// An error the writer hit, if any.
    pub write_error: Option<String>,
}

type Reader = Arc<Mutex<Option<JoinHandle<(Vec<u8>, String)>>>>;

pub struct Peer {
    flags: Arc<Flags>,
    cmds: Option<Sender<Cmd>>,
    reader: Reader,
    writer: Option<JoinHandle<Option<String>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Peer {
    /// Runs the handshake on `sock` with `conn` (on the writer thread,
    /// while ours runs its own), then starts reading and serving.
    pub fn start(sock: TcpStream, conn: Connection, key: u64) -> Peer {
        let flags = Arc::new(Flags::default());
        let reader: Reader = Arc::new(Mutex::new(None));
        let (tx, rx) = channel::<Cmd>();
        let (wflags, wreader) = (flags.clone(), reader.clone());
        let writer = std::thread::Builder::new()
            .name("tls-peer-write".into())
            .spawn(move || {
                let mut sock = sock;
                let _ = sock.set_read_timeout(Some(TICK));
                let _ = sock.set_write_timeout(Some(TICK));
                let conn = Arc::new(Mutex::new(conn));
                if let Err(e) = handshake(&mut sock, &conn, &wflags) {
                    return Some(format!("handshake: {e}"));
                }
                let (rsock, rconn, rflags) = match sock.try_clone() {
                    Ok(s) => (s, conn.clone(), wflags.clone()),
                    Err(e) => return Some(format!("clone the socket: {e}")),
                };
                *lock(&wreader) = Some(
                    std::thread::Builder::new()
                        .name("tls-peer-read".into())
                        .spawn(move || read_loop(rsock, &rconn, &rflags))
                        .expect("spawn the peer reader"),
                );
                serve(sock, &conn, key, &rx, &wflags, &wreader)
            })
            .expect("spawn the peer writer");
        Peer {
            flags,
            cmds: Some(tx),
            reader,
            writer: Some(writer),
        }
    }

    pub fn send(&self, n: u64) {
        self.cmd(Cmd::Send(n));
    }

    pub fn key_update(&self) {
        self.cmd(Cmd::KeyUpdate);
    }

    /// `close_notify` and a TCP shutdown of the write side, after the
    /// sends asked for before.
    pub fn close(&self) {
        self.cmd(Cmd::Close);
    }

    /// Stops reading, then resets the connection (queued behind earlier
    /// sends; a send blocked on a full socket gives up at once).
    pub fn reset(&self) {
        self.flags.abort.store(true, Ordering::SeqCst);
        self.cmd(Cmd::Reset);
    }

    /// The reader stops reading for `d`.
    pub fn pause(&self, d: Duration) {
        *lock(&self.flags.paused_until) = Some(Instant::now() + d);
    }

    fn cmd(&self, c: Cmd) {
        if let Some(tx) = &self.cmds {
            let _ = tx.send(c);
        }
    }

    /// Closes the command channel and waits (at most `bound`) for the
    /// reader to see the end of the stream.
    pub fn finish(mut self, bound: Duration) -> PeerReport {
        *lock(&self.flags.paused_until) = None;
        *lock(&self.flags.give_up) = Some(Instant::now() + bound);
        self.cmds = None;
        let write_error = self
            .writer
            .take()
            .and_then(|w| w.join().expect("peer writer"));
        let reader = lock(&self.reader).take();
        let (received, end) = reader.map_or((Vec::new(), "no reader".into()), |r| {
            r.join().expect("peer reader")
        });
        PeerReport {
            received,
            end,
            write_error,
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // A run that failed midway: let the threads end.
        self.flags.abort.store(true, Ordering::SeqCst);
    }
}

fn handshake(sock: &mut TcpStream, conn: &Mutex<Connection>, flags: &Flags) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut conn = lock(conn);
    while conn.is_handshaking() {
        if flags.abort.load(Ordering::SeqCst) || Instant::now() > deadline {
            return Err("gave up".into());
        }
        match conn.complete_io(sock) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// The writer thread after the handshake: commands, and every tick what
/// rustls queued by itself. Its error, if any.
fn serve(
    mut sock: TcpStream,
    conn: &Mutex<Connection>,
    key: u64,
    rx: &std::sync::mpsc::Receiver<Cmd>,
    flags: &Flags,
    reader: &Reader,
) -> Option<String> {
    let mut sent = 0u64;
    let mut error = None;
    loop {
        let cmd = match rx.recv_timeout(TICK) {
            Ok(cmd) => Some(cmd),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let res = match cmd {
            Some(Cmd::Reset) => {
                flags.abort.store(true, Ordering::SeqCst);
                let r = lock(reader).take();
                let out = r.map(|r| r.join().expect("peer reader"));
                let _ = socket2::SockRef::from(&sock).set_linger(Some(Duration::ZERO));
                drop(sock);
                *lock(reader) = out.map(|o| std::thread::spawn(move || o));
                return error;
            }
            // After an error only a reset does anything.
            _ if error.is_some() => Ok(()),
            Some(Cmd::Send(n)) => send(&mut sock, conn, key, &mut sent, n, flags),
            Some(Cmd::KeyUpdate) => {
                // TLS 1.2 has no key update: nothing happens then.
                let _ = lock(conn).refresh_traffic_keys();
                push(&mut sock, conn, flags)
            }
            Some(Cmd::Close) => {
                lock(conn).send_close_notify();
                let res = push(&mut sock, conn, flags);
                let _ = sock.shutdown(Shutdown::Write);
                res
            }
            None => push(&mut sock, conn, flags),
        };
        if let Err(e) = res {
            error = Some(e);
        }
    }
    error
}

/// Encrypts and writes `n` more bytes of the peer stream.
fn send(
    sock: &mut TcpStream,
    conn: &Mutex<Connection>,
    key: u64,
    sent: &mut u64,
    n: u64,
    flags: &Flags,
) -> Result<(), String> {
    let end = *sent + n;
    let mut chunk = Vec::with_capacity(16 << 10);
    while *sent < end {
        let len = (end - *sent).min(16 << 10);
        chunk.clear();
        chunk.extend((*sent..*sent + len).map(|i| stream_byte(key, i)));
        let mut off = 0;
        while off < chunk.len() {
            // rustls takes what its buffer has room for (none while the
            // records before are not written yet).
            let took = lock(conn)
                .writer()
                .write(&chunk[off..])
                .map_err(|e| e.to_string())?;
            off += took;
            push(sock, conn, flags)?;
        }
        *sent += len;
    }
    Ok(())
}

/// Writes out every record rustls has queued.
fn push(sock: &mut TcpStream, conn: &Mutex<Connection>, flags: &Flags) -> Result<(), String> {
    let mut records = Vec::new();
    {
        let mut conn = lock(conn);
        while conn.wants_write() {
            conn.write_tls(&mut records).map_err(|e| e.to_string())?;
        }
    }
    let mut off = 0;
    while off < records.len() {
        if flags.abort.load(Ordering::SeqCst) {
            return Err("aborted".into());
        }
        match sock.write(&records[off..]) {
            Ok(0) => return Err("wrote 0".into()),
            Ok(k) => off += k,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

fn read_loop(mut sock: TcpStream, conn: &Mutex<Connection>, flags: &Flags) -> (Vec<u8>, String) {
    let mut got = Vec::new();
    let mut closed = false;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        if flags.abort.load(Ordering::SeqCst) {
            return (got, "aborted".into());
        }
        if lock(&flags.give_up).is_some_and(|t| Instant::now() > t) {
            return (got, "gave up waiting for end of stream".into());
        }
        if lock(&flags.paused_until).is_some_and(|t| Instant::now() < t) {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        let n = match sock.read(&mut buf) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return (got, format!("error: {e}")),
        };
        if let Err(e) = decrypt(conn, &buf[..n], &mut got, &mut closed) {
            return (got, e);
        }
        if n == 0 {
            let end = if closed {
                "eof after close_notify"
            } else {
                "eof without close_notify"
            };
            return (got, end.into());
        }
    }
}

/// Hands `records` to rustls (an empty slice: the end of the stream) and
/// takes out the plaintext.
fn decrypt(
    conn: &Mutex<Connection>,
    mut records: &[u8],
    got: &mut Vec<u8>,
    closed: &mut bool,
) -> Result<(), String> {
    let mut conn = lock(conn);
    let mut plain = [0u8; 16 << 10];
    loop {
        let fed = conn
            .read_tls(&mut records)
            .map_err(|e| format!("error: read_tls: {e}"))?;
        let state = conn
            .process_new_packets()
            .map_err(|e| format!("error: TLS: {e}"))?;
        *closed |= state.peer_has_closed();
        loop {
            match conn.reader().read(&mut plain) {
                Ok(0) => break,
                Ok(k) => got.extend_from_slice(&plain[..k]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                // The end of the stream without close_notify: the caller
                // reports it.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(format!("error: plaintext: {e}")),
            }
        }
        if records.is_empty() {
            return Ok(());
        }
        if fed == 0 {
            return Err(format!("error: {} bytes after close_notify", records.len()));
        }
    }
}
