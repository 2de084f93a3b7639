//! The peer: tungstenite on a plain blocking std socket, on a thread of
//! its own. It records every message it receives (pongs apart), sends the
//! deterministic peer messages on demand, stops reading for a while (so
//! our socket buffer fills), sends a close frame, or resets the
//! connection (SO_LINGER 0, close).
//!
//! One thread, one `WebSocket`: the socket's 10 ms timeouts make every
//! call return `WouldBlock` rather than block, and tungstenite keeps what
//! it could not write or read for the next call, so the thread goes round
//! writing and reading in turn and never waits on one while the other
//! could move (our side may be blocked writing while the peer has
//! messages for it).

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spargio_ws::tungstenite::protocol::frame::coding::CloseCode;
use spargio_ws::tungstenite::protocol::CloseFrame;
use spargio_ws::tungstenite::{self, Error as WsError, Message, WebSocket};

use super::messages::{describe, peer_message};

/// How long a blocked peer call waits before it goes round.
const TICK: Duration = Duration::from_millis(10);

/// Reads per turn, at most.
const READS_PER_TURN: usize = 64;

enum Cmd {
    /// Send this many more of the peer's messages.
    Send(u64),
    /// Send a close frame after the messages asked for before.
    Close,
    Reset,
}

#[derive(Default)]
struct Flags {
    paused_until: Mutex<Option<Instant>>,
    abort: AtomicBool,
    give_up: Mutex<Option<Instant>>,
}

/// What the peer saw.
#[derive(Default)]
pub struct PeerReport {
    /// Every message received but pongs (close frames included).
    pub received: Vec<Message>,
    pub pongs: Vec<Vec<u8>>,
    /// How it ended: "closed" (the close handshake, then the end of the
    /// connection), an error, "reset by the peer", "aborted", "gave up".
    pub end: String,
    /// An error a send hit, if any.
    pub write_error: Option<String>,
}

pub struct Peer {
    flags: Arc<Flags>,
    cmds: Option<Sender<Cmd>>,
    thread: Option<JoinHandle<PeerReport>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Peer {
    /// Runs the handshake on `sock` (the server's side if `server`), then
    /// serves.
    pub fn start(sock: TcpStream, server: bool, key: u64) -> Peer {
        let flags = Arc::new(Flags::default());
        let (tx, rx) = channel();
        let tflags = flags.clone();
        let thread = std::thread::Builder::new()
            .name("ws-peer".into())
            .spawn(move || {
                let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
                let ws = if server {
                    tungstenite::accept(sock).map_err(|e| e.to_string())
                } else {
                    tungstenite::client("ws://localhost/torture", sock)
                        .map(|(ws, _)| ws)
                        .map_err(|e| e.to_string())
                };
                match ws {
                    Ok(ws) => serve(ws, key, &rx, &tflags),
                    Err(e) => PeerReport {
                        end: format!("handshake: {e}"),
                        ..PeerReport::default()
                    },
                }
            })
            .expect("spawn the peer");
        Peer {
            flags,
            cmds: Some(tx),
            thread: Some(thread),
        }
    }

    pub fn send(&self, n: u64) {
        self.cmd(Cmd::Send(n));
    }

    pub fn close(&self) {
        self.cmd(Cmd::Close);
    }

    pub fn reset(&self) {
        self.cmd(Cmd::Reset);
    }

    /// The peer stops reading for `d`.
    pub fn pause(&self, d: Duration) {
        *lock(&self.flags.paused_until) = Some(Instant::now() + d);
    }

    fn cmd(&self, c: Cmd) {
        if let Some(tx) = &self.cmds {
            let _ = tx.send(c);
        }
    }

    /// Closes the command channel and waits (at most `bound`) for the
    /// connection to end.
    pub fn finish(mut self, bound: Duration) -> PeerReport {
        *lock(&self.flags.paused_until) = None;
        *lock(&self.flags.give_up) = Some(Instant::now() + bound);
        self.cmds = None;
        self.thread
            .take()
            .map(|t| t.join().expect("the peer"))
            .unwrap_or_default()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.flags.abort.store(true, Ordering::SeqCst);
    }
}

fn would_block(e: &WsError) -> bool {
    matches!(e, WsError::Io(io) if matches!(io.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut))
}

fn serve(mut ws: WebSocket<TcpStream>, key: u64, rx: &Receiver<Cmd>, flags: &Flags) -> PeerReport {
    let _ = ws.get_ref().set_read_timeout(Some(TICK));
    let _ = ws.get_ref().set_write_timeout(Some(TICK));
    let mut report = PeerReport::default();
    let (mut asked, mut sent) = (0u64, 0u64);
    let (mut close, mut close_sent) = (false, false);
    loop {
        if flags.abort.load(Ordering::SeqCst) {
            report.end = "aborted".into();
            return report;
        }
        if lock(&flags.give_up).is_some_and(|t| Instant::now() > t) {
            report.end = "gave up waiting for the end of the connection".into();
            return report;
        }
        loop {
            match rx.try_recv() {
                Ok(Cmd::Send(n)) => asked += n,
                Ok(Cmd::Close) => close = true,
                Ok(Cmd::Reset) => {
                    let _ = socket2::SockRef::from(ws.get_ref()).set_linger(Some(Duration::ZERO));
                    drop(ws);
                    report.end = "reset by the peer".into();
                    return report;
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        if report.write_error.is_none() {
            if let Err(e) = write_turn(&mut ws, key, asked, &mut sent, close, &mut close_sent) {
                if matches!(e, WsError::ConnectionClosed) {
                    report.end = "closed".into();
                    return report;
                }
                report.write_error = Some(e.to_string());
            }
        }
        if lock(&flags.paused_until).is_some_and(|t| Instant::now() < t) {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        for _ in 0..READS_PER_TURN {
            match ws.read() {
                Ok(Message::Pong(p)) => report.pongs.push(p.to_vec()),
                Ok(m) => report.received.push(m),
                Err(e) if would_block(&e) => break,
                Err(WsError::ConnectionClosed) => {
                    report.end = "closed".into();
                    return report;
                }
                Err(e) => {
                    report.end = format!("error: {e}");
                    return report;
                }
            }
        }
    }
}

/// Queues the messages asked for (and the close frame after them), then
/// flushes; a `WouldBlock` leaves the rest for the next turn.
fn write_turn(
    ws: &mut WebSocket<TcpStream>,
    key: u64,
    asked: u64,
    sent: &mut u64,
    close: bool,
    close_sent: &mut bool,
) -> Result<(), WsError> {
    while *sent < asked {
        let m = peer_message(key, *sent);
        match ws.write(m) {
            Ok(()) => *sent += 1,
            // Queued: tungstenite writes it with the next call.
            Err(e) if would_block(&e) => {
                *sent += 1;
                return Ok(());
            }
            Err(e) => {
                let what = describe(&peer_message(key, *sent));
                return Err(match e {
                    WsError::ConnectionClosed => e,
                    e => WsError::Io(std::io::Error::other(format!(
                        "message {sent} ({what}): {e}"
                    ))),
                });
            }
        }
    }
    if close && !*close_sent {
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "peer done".into(),
        };
        match ws.close(Some(frame)) {
            Ok(()) => *close_sent = true,
            Err(e) if would_block(&e) => {
                *close_sent = true;
                return Ok(());
            }
            Err(e) => return Err(e),
        }
    }
    match ws.flush() {
        Err(e) if would_block(&e) => Ok(()),
        res => res,
    }
}
