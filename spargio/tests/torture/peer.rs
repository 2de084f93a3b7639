//! The peer: a plain blocking std socket on threads of its own. Its reader
//! records every byte it receives (and can be paused, so spargio's socket
//! buffer fills); its writer sends the deterministic peer stream on demand,
//! shuts its side down, or resets the connection (SO_LINGER 0, close).

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream as StdUnix;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::rng::stream_byte;

/// How long a blocked peer call waits before it looks at its flags.
const TICK: Duration = Duration::from_millis(10);

pub enum PeerSock {
    Tcp(std::net::TcpStream),
    Unix(StdUnix),
}

impl PeerSock {
    fn try_clone(&self) -> std::io::Result<PeerSock> {
        Ok(match self {
            PeerSock::Tcp(s) => PeerSock::Tcp(s.try_clone()?),
            PeerSock::Unix(s) => PeerSock::Unix(s.try_clone()?),
        })
    }

    fn sock_ref(&self) -> socket2::SockRef<'_> {
        match self {
            PeerSock::Tcp(s) => socket2::SockRef::from(s),
            PeerSock::Unix(s) => socket2::SockRef::from(s),
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            PeerSock::Tcp(s) => s.read(buf),
            PeerSock::Unix(s) => s.read(buf),
        }
    }

    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            PeerSock::Tcp(s) => s.write(buf),
            PeerSock::Unix(s) => s.write(buf),
        }
    }

    fn shutdown(&self, how: Shutdown) -> std::io::Result<()> {
        match self {
            PeerSock::Tcp(s) => s.shutdown(how),
            PeerSock::Unix(s) => s.shutdown(how),
        }
    }
}

enum Cmd {
    /// Send this many more bytes of the peer stream.
    Send(u64),
    ShutdownWrite,
    Reset,
}

#[derive(Default)]
struct Shared {
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
    /// How the reader ended: "eof", an error, "aborted", "gave up".
    pub end: String,
    /// An error the writer hit, if any.
    pub write_error: Option<String>,
}

/// The reader thread: what it received, and how it ended.
type Reader = Arc<Mutex<Option<JoinHandle<(Vec<u8>, String)>>>>;

pub struct Peer {
    shared: Arc<Shared>,
    cmds: Option<Sender<Cmd>>,
    reader: Reader,
    writer: Option<JoinHandle<Option<String>>>,
}

impl Peer {
    pub fn start(sock: PeerSock, key: u64) -> Peer {
        let shared = Arc::new(Shared::default());
        let mut rsock = sock.try_clone().expect("clone the peer socket");
        let _ = rsock.sock_ref().set_read_timeout(Some(TICK));
        let rshared = shared.clone();
        let reader = std::thread::Builder::new()
            .name("torture-peer-read".into())
            .spawn(move || read_loop(&mut rsock, &rshared))
            .expect("spawn the peer reader");
        let reader = Arc::new(Mutex::new(Some(reader)));
        let (tx, rx) = channel::<Cmd>();
        let wshared = shared.clone();
        let wreader = reader.clone();
        let writer = std::thread::Builder::new()
            .name("torture-peer-write".into())
            .spawn(move || {
                let mut sock = sock;
                let _ = sock.sock_ref().set_write_timeout(Some(TICK));
                let mut sent = 0u64;
                let mut error = None;
                for cmd in rx {
                    match cmd {
                        Cmd::Send(n) if error.is_none() => {
                            if let Err(e) = send(&mut sock, key, &mut sent, n, &wshared) {
                                error = Some(e);
                            }
                        }
                        Cmd::Send(_) => {}
                        Cmd::ShutdownWrite => {
                            let _ = sock.shutdown(Shutdown::Write);
                        }
                        Cmd::Reset => {
                            wshared.abort.store(true, Ordering::SeqCst);
                            let r = wreader.lock().unwrap().take();
                            let out = r.map(|r| r.join().expect("peer reader"));
                            let _ = sock.sock_ref().set_linger(Some(Duration::ZERO));
                            drop(sock);
                            *wreader.lock().unwrap() = out.map(|o| std::thread::spawn(move || o));
                            return error;
                        }
                    }
                }
                error
            })
            .expect("spawn the peer writer");
        Peer {
            shared,
            cmds: Some(tx),
            reader,
            writer: Some(writer),
        }
    }

    pub fn send(&self, n: u64) {
        self.cmd(Cmd::Send(n));
    }

    pub fn shutdown_write(&self) {
        self.cmd(Cmd::ShutdownWrite);
    }

    /// Stops reading, then resets the connection (queued behind earlier
    /// sends; a send blocked on a full socket gives up at once).
    pub fn reset(&self) {
        self.shared.abort.store(true, Ordering::SeqCst);
        self.cmd(Cmd::Reset);
    }

    /// The reader stops reading for `d`.
    pub fn pause(&self, d: Duration) {
        *self.shared.paused_until.lock().unwrap() = Some(Instant::now() + d);
    }

    fn cmd(&self, c: Cmd) {
        if let Some(tx) = &self.cmds {
            let _ = tx.send(c);
        }
    }

    /// Closes the command channel and waits (at most `bound`) for the
    /// reader to see end of stream.
    pub fn finish(mut self, bound: Duration) -> PeerReport {
        *self.shared.paused_until.lock().unwrap() = None;
        *self.shared.give_up.lock().unwrap() = Some(Instant::now() + bound);
        self.cmds = None;
        let write_error = self
            .writer
            .take()
            .and_then(|w| w.join().expect("peer writer"));
        let reader = self.reader.lock().unwrap().take();
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
        self.shared.abort.store(true, Ordering::SeqCst);
    }
}

fn send(sock: &mut PeerSock, key: u64, sent: &mut u64, n: u64, sh: &Shared) -> Result<(), String> {
    let end = *sent + n;
    let mut chunk = Vec::with_capacity(64 << 10);
    while *sent < end {
        let len = (end - *sent).min(64 << 10);
        chunk.clear();
        chunk.extend((*sent..*sent + len).map(|i| stream_byte(key, i)));
        let mut off = 0;
        while off < chunk.len() {
            if sh.abort.load(Ordering::SeqCst) {
                return Err("aborted".into());
            }
            match sock.write(&chunk[off..]) {
                Ok(0) => return Err("wrote 0".into()),
                Ok(k) => off += k,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        *sent += len;
    }
    Ok(())
}

fn read_loop(sock: &mut PeerSock, sh: &Shared) -> (Vec<u8>, String) {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        if sh.abort.load(Ordering::SeqCst) {
            return (got, "aborted".into());
        }
        if sh
            .give_up
            .lock()
            .unwrap()
            .is_some_and(|t| Instant::now() > t)
        {
            return (got, "gave up waiting for end of stream".into());
        }
        let paused = *sh.paused_until.lock().unwrap();
        if paused.is_some_and(|t| Instant::now() < t) {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        match sock.read(&mut buf) {
            Ok(0) => return (got, "eof".into()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return (got, format!("error: {e}")),
        }
    }
}
