//! The script: operations drawn one at a time from the seed's generator
//! (what is drawn next never depends on timing; only the outcomes do),
//! run on our WebSocket, each outcome checked against the model.

use std::fmt::Display;
use std::io;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use spargio::RuntimeHandle;
use spargio_ws::{
    io_error, CloseCode, Message, WsReceiverExt, WsSender, WsSenderExt, WsStream, WsStreamExt,
};

use super::driver::bounded;
use super::messages::{describe, draw_size, message, Inbound, Kind, Outbound, MAX_MESSAGE};
use super::model::Trace;
use super::ops::{spawned, wrap, Out, Wrap};
use super::peer::Peer;
use super::rng::Rng;

pub type Res = Result<(), String>;

/// How a script ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The close handshake (ours or the peer's) and the end of the
    /// connection: every message must have arrived.
    Closed,
    /// Our side dropped the stream without closing it; every message
    /// before index `certain_to` must have arrived (later ones were queued
    /// after the last completed flush).
    Dropped { certain_to: usize },
    /// The peer reset the connection: only prefixes can be checked.
    Reset,
}

/// A send path.
#[derive(Clone, Copy, Debug)]
enum SendHow {
    /// `WsStreamExt::send_message` (or `ping` for a ping): send and flush.
    SendMessage,
    /// `SinkExt::send`: `poll_ready`, `start_send`, `poll_flush`.
    SinkSend,
    /// `SinkExt::feed`: queued, not flushed.
    Feed,
}

/// A receive path.
#[derive(Clone, Copy, Debug)]
enum RecvHow {
    /// `WsStreamExt::recv`.
    Recv,
    /// `StreamExt::next`.
    Next,
}

enum Op {
    Send(SendHow, Message),
    Flush,
    Recv(RecvHow),
}

enum Got {
    Sent,
    Flushed,
    Received(Option<Message>),
}

async fn perform(ws: &mut WsStream, op: Op) -> io::Result<Got> {
    match op {
        Op::Send(SendHow::SendMessage, Message::Ping(p)) => ws.ping(&p).await.map(|()| Got::Sent),
        Op::Send(SendHow::SendMessage, m) => ws.send_message(m).await.map(|()| Got::Sent),
        Op::Send(SendHow::SinkSend, m) => SinkExt::send(ws, m)
            .await
            .map(|()| Got::Sent)
            .map_err(io_error),
        Op::Send(SendHow::Feed, m) => SinkExt::feed(ws, m)
            .await
            .map(|()| Got::Sent)
            .map_err(io_error),
        Op::Flush => SinkExt::flush(ws)
            .await
            .map(|()| Got::Flushed)
            .map_err(io_error),
        Op::Recv(RecvHow::Recv) => ws.recv().await.map(Got::Received),
        Op::Recv(RecvHow::Next) => match ws.next().await {
            None => Ok(Got::Received(None)),
            Some(res) => res.map(|m| Got::Received(Some(m))).map_err(io_error),
        },
    }
}

pub struct Ctx {
    pub h: RuntimeHandle,
    /// Ours; `None` while an op runs it in a task of its own.
    pub ws: Option<WsStream>,
    pub peer: Peer,
    pub inb: Inbound,
    pub out: Outbound,
    /// Our messages' key.
    pub key: u64,
    /// The first message queued since the last completed flush.
    pub unflushed: Option<usize>,
    pub rng: Rng,
    pub trace: Trace,
    pub ops: u64,
}

impl Ctx {
    fn log(&mut self, what: impl Display) {
        self.ops += 1;
        self.trace.push(format!("#{} {what}", self.ops));
    }

    fn ws(&mut self) -> &mut WsStream {
        self.ws.as_mut().expect("our stream")
    }

    /// At least `want` of the peer's messages not received yet: asks the
    /// peer for more when not.
    fn ensure(&mut self, want: u64) {
        let avail = self.inb.committed - self.inb.r;
        if avail < want {
            let add = want - avail + self.rng.below(4);
            self.peer.send(add);
            self.inb.committed += add;
        }
    }

    /// Our next message, at most `max` bytes, recorded as sent (pings
    /// also as pings).
    fn next_message(&mut self, max: usize) -> (usize, Message) {
        let kind = Kind::draw(&mut self.rng);
        let size = draw_size(&mut self.rng, kind).min(max);
        let index = self.out.len();
        let m = message(self.key, index as u64, kind, size);
        if let Message::Ping(p) = &m {
            self.inb.pings.push(p.to_vec());
        }
        self.out.push(m.clone());
        (index, m)
    }

    /// Runs `op` in `w`: in this task on our stream, or (`Steal`,
    /// `OtherShard`) with the stream moved into a task of its own and back.
    async fn exec(&mut self, what: &str, w: Wrap, op: Op) -> Result<Out<io::Result<Got>>, String> {
        if !matches!(w, Wrap::Steal | Wrap::OtherShard) {
            let ws = self.ws.as_mut().expect("our stream");
            return bounded(what, wrap(w, perform(ws, op))).await;
        }
        let mut ws = self.ws.take().expect("our stream");
        let session = ws.get_ref().tcp().expect("a TCP stream").session_shard();
        let task = async move {
            let res = perform(&mut ws, op).await;
            (res, ws)
        };
        match bounded(what, spawned(&self.h, session, w, task)).await? {
            Out::Done((res, ws)) => {
                self.ws = Some(ws);
                Ok(Out::Done(res))
            }
            Out::Dropped => unreachable!("a spawned op runs to its end"),
        }
    }

    pub async fn run(&mut self) -> Result<End, String> {
        let n = 10 + self.rng.below(50);
        for _ in 0..n {
            self.step().await?;
        }
        self.end().await
    }

    async fn step(&mut self) -> Res {
        match self.rng.weighted(&[30, 5, 25, 6, 5]) {
            0 => self.op_send().await,
            1 => self.op_flush().await,
            2 => self.op_recv().await,
            3 => self.split_phase().await,
            _ => {
                let ms = 5 + self.rng.below(250);
                self.peer.pause(Duration::from_millis(ms));
                self.log(format!("peer stops reading for {ms} ms"));
                Ok(())
            }
        }
    }

    async fn op_send(&mut self) -> Res {
        let how = match self.rng.weighted(&[50, 25, 25]) {
            0 => SendHow::SendMessage,
            1 => SendHow::SinkSend,
            _ => SendHow::Feed,
        };
        let (i, m) = self.next_message(usize::MAX);
        let w = Wrap::draw(&mut self.rng, 4, true);
        let what = format!("{how:?} our message {i}: {} [{w:?}]", describe(&m));
        match self.exec(&what, w, Op::Send(how, m)).await? {
            Out::Done(Ok(_)) => {
                match how {
                    SendHow::Feed => {
                        self.unflushed.get_or_insert(i);
                    }
                    _ => self.unflushed = None,
                }
                self.log(format!("{what} -> Ok"));
                Ok(())
            }
            Out::Done(Err(e)) => Err(format!("{what} failed: {e}")),
            Out::Dropped => {
                // Queued or not: it arrives whole or not at all.
                self.out.maybe(i);
                self.unflushed.get_or_insert(i);
                self.log(format!("{what} -> dropped (may arrive, whole)"));
                Ok(())
            }
        }
    }

    async fn op_flush(&mut self) -> Res {
        let w = Wrap::draw(&mut self.rng, 5, true);
        let what = format!("flush (unflushed from {:?}) [{w:?}]", self.unflushed);
        match self.exec(&what, w, Op::Flush).await? {
            Out::Done(Ok(_)) => {
                self.unflushed = None;
                self.log(format!("{what} -> Ok"));
                Ok(())
            }
            Out::Done(Err(e)) => Err(format!("{what} failed: {e}")),
            Out::Dropped => {
                self.log(format!("{what} -> dropped"));
                Ok(())
            }
        }
    }

    async fn op_recv(&mut self) -> Res {
        self.ensure(1);
        let how = if self.rng.pct(60) {
            RecvHow::Recv
        } else {
            RecvHow::Next
        };
        let w = Wrap::draw(&mut self.rng, 8, true);
        let what = format!("{how:?} at peer message {} [{w:?}]", self.inb.r);
        let got = match self.exec(&what, w, Op::Recv(how)).await? {
            Out::Done(Ok(Got::Received(m))) => Out::Done(Ok(m)),
            Out::Done(Ok(_)) => unreachable!("a receive receives"),
            Out::Done(Err(e)) => Out::Done(Err(e)),
            Out::Dropped => Out::Dropped,
        };
        self.recv_outcome(&what, got)
    }

    fn recv_outcome(&mut self, what: &str, got: Out<io::Result<Option<Message>>>) -> Res {
        match got {
            Out::Done(Ok(Some(m))) => {
                self.log(format!("{what} -> {}", describe(&m)));
                self.inb.check(&m)
            }
            Out::Done(Ok(None)) => Err(format!("{what}: the connection ended")),
            Out::Done(Err(e)) => Err(format!("{what} failed: {e}")),
            Out::Dropped => {
                // `poll_next` is cancel safe: nothing lost.
                self.log(format!("{what} -> dropped"));
                Ok(())
            }
        }
    }

    /// The stream split: a task sends through the sender (each send in a
    /// wrapper of its own) while this one receives through the receiver;
    /// then the halves are put back together.
    async fn split_phase(&mut self) -> Res {
        let (mut tx, mut rx) = self.ws.take().expect("our stream").split();
        let mut plan = Vec::new();
        // At most one large message's worth in all, as a plain op: the
        // sender task must end within HANG on a loaded machine too.
        let mut budget = MAX_MESSAGE;
        for _ in 0..1 + self.rng.below(4) {
            let (i, m) = self.next_message(budget);
            budget = budget.saturating_sub(m.len());
            let w = Wrap::draw(&mut self.rng, 4, false);
            plan.push((i, w, m));
        }
        let sends: Vec<(usize, Wrap)> = plan.iter().map(|&(i, w, _)| (i, w)).collect();
        self.log(format!(
            "split: the sender sends our messages {sends:?} (index, wrap)"
        ));
        let sender = self
            .h
            .spawn_stealable(async move {
                let mut outs = Vec::new();
                for (_, w, m) in plan {
                    outs.push(wrap(w, send_half(&mut tx, m)).await);
                }
                (outs, tx)
            })
            .map_err(|e| format!("spawn: {e}"))?;
        for _ in 0..1 + self.rng.below(4) {
            self.ensure(1);
            let w = Wrap::draw(&mut self.rng, 8, false);
            let what = format!("  receiver recv at peer message {} [{w:?}]", self.inb.r);
            let got = bounded(&what, wrap(w, rx.recv())).await?;
            self.recv_outcome(&what, got)?;
        }
        let (outs, tx) = bounded("split: the sender task", sender)
            .await?
            .map_err(|e| format!("split: the sender task: {e}"))?;
        for ((i, _), out) in sends.into_iter().zip(outs) {
            let what = format!("  sender send_message our message {i}");
            match out {
                Out::Done(Ok(())) => {
                    self.unflushed = None;
                    self.log(format!("{what} -> Ok"));
                }
                Out::Done(Err(e)) => return Err(format!("{what} failed: {e}")),
                Out::Dropped => {
                    self.out.maybe(i);
                    self.unflushed.get_or_insert(i);
                    self.log(format!("{what} -> dropped (may arrive, whole)"));
                }
            }
        }
        self.log("split: the sender task ended; reunite");
        let ws = WsStream::reunite(tx, rx).map_err(|_| "reunite: not a pair".to_string())?;
        self.ws = Some(ws);
        Ok(())
    }

    async fn end(&mut self) -> Result<End, String> {
        match self.rng.weighted(&[10, 15, 40, 35]) {
            0 => self.end_reset().await,
            1 => self.end_drop().await,
            2 => self.end_our_close().await,
            _ => self.end_peer_close().await,
        }
    }

    async fn end_reset(&mut self) -> Result<End, String> {
        self.peer.reset();
        self.log("end: the peer resets the connection");
        for _ in 0..3 {
            let what = format!("  recv after the reset at peer message {}", self.inb.r);
            match bounded(&what, self.ws().recv()).await? {
                Ok(Some(m)) => {
                    self.log(format!("{what} -> {}", describe(&m)));
                    self.inb.check(&m)?;
                }
                Ok(None) | Err(_) => break,
            }
        }
        self.ws = None;
        Ok(End::Reset)
    }

    async fn end_drop(&mut self) -> Result<End, String> {
        if self.rng.pct(50) {
            let what = "end: flush before the drop";
            bounded(what, SinkExt::flush(self.ws()))
                .await?
                .map_err(|e| format!("{what} failed: {e}"))?;
            self.unflushed = None;
            self.log(what);
        }
        let certain_to = self.unflushed.unwrap_or(self.out.len());
        self.ws = None;
        self.log(format!(
            "end: our stream dropped without a close (unflushed from {:?})",
            self.unflushed
        ));
        Ok(End::Dropped { certain_to })
    }

    /// Receives the peer's messages still to come.
    async fn drain(&mut self) -> Res {
        while self.inb.r < self.inb.committed {
            let what = format!("end: recv at peer message {}", self.inb.r);
            let got = bounded(&what, self.ws().recv()).await?;
            self.recv_outcome(&what, Out::Done(got))?;
        }
        Ok(())
    }

    async fn end_our_close(&mut self) -> Result<End, String> {
        self.drain().await?;
        if self.rng.pct(70) {
            let what = "end: close_with(Normal)";
            let reply = bounded(what, self.ws().close_with(CloseCode::Normal, "ours done"))
                .await?
                .map_err(|e| format!("{what} failed: {e}"))?;
            self.log(format!("{what} -> the peer's close frame {reply:?}"));
        } else {
            let what = "end: SinkExt::flush and close, then recv to the end";
            // Flushed first: tungstenite writes a close frame ahead of a
            // pong it owes, which a tungstenite peer takes for a protocol
            // error (`close_with` flushes by itself; async-tungstenite's
            // `poll_close` does not).
            bounded(what, SinkExt::flush(self.ws()))
                .await?
                .map_err(|e| format!("{what} failed: {e}"))?;
            bounded(what, SinkExt::close(self.ws()))
                .await?
                .map_err(|e| format!("{what} failed: {e}"))?;
            loop {
                match bounded(what, self.ws().recv()).await? {
                    Ok(Some(Message::Close(_))) => {}
                    Ok(Some(m)) => {
                        self.log(format!("{what}: {}", describe(&m)));
                        self.inb.check(&m)?;
                    }
                    Ok(None) => break,
                    Err(e) => return Err(format!("{what} failed: {e}")),
                }
            }
            self.log(what);
        }
        self.ws = None;
        Ok(End::Closed)
    }

    async fn end_peer_close(&mut self) -> Result<End, String> {
        self.peer.close();
        self.log(format!(
            "end: the peer sends a close frame after its {} messages",
            self.inb.committed
        ));
        let mut closed = false;
        loop {
            let what = format!("end: recv at peer message {}", self.inb.r);
            match bounded(&what, self.ws().recv()).await? {
                Ok(Some(Message::Close(frame))) => {
                    self.log(format!("{what} -> the peer's close frame {frame:?}"));
                    closed = true;
                }
                Ok(Some(m)) if !closed => {
                    self.log(format!("{what} -> {}", describe(&m)));
                    self.inb.check(&m)?;
                }
                Ok(Some(m)) => {
                    return Err(format!("{what}: {} after the close frame", describe(&m)))
                }
                Ok(None) => break,
                Err(e) => return Err(format!("{what} failed: {e}")),
            }
        }
        if !closed || self.inb.r != self.inb.committed {
            return Err(format!(
                "inbound: the connection ended after {} of the peer's {} messages (close frame \
                 seen: {closed})",
                self.inb.r, self.inb.committed
            ));
        }
        self.log("end: received to the end of the connection");
        self.ws = None;
        Ok(End::Closed)
    }
}

async fn send_half(tx: &mut WsSender, m: Message) -> io::Result<()> {
    match m {
        Message::Ping(p) => tx.ping(&p).await,
        m => tx.send_message(m).await,
    }
}
