//! The script: operations drawn one at a time from the seed's generator
//! (what is drawn next never depends on timing; only the outcomes do),
//! run on our TLS stream, each outcome checked against the model.

use std::fmt::Display;
use std::io;
use std::time::Duration;

use futures_util::io::{AsyncReadExt as FRead, AsyncWriteExt as FWrite};
use spargio::io::{AsyncReadExt, AsyncWriteExt};
use spargio::RuntimeHandle;

use super::driver::bounded;
use super::model::{Inbound, Outbound, Trace};
use super::ops::{spawned, wrap, Out, Wrap};
use super::paths::{
    close, perform, pick, read_half, CloseHow, Got, Op, Side, CLOSES, FLUSHES, READS, SPLIT_READS,
    WRITES,
};
use super::peer::Peer;
use super::rng::Rng;

/// Writes go up to this.
const MAX_WRITE: usize = 300 << 10;

pub type Res = Result<(), String>;

/// How a script ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Both sides sent `close_notify` and shut down; every byte must have
    /// arrived.
    Graceful,
    /// Our side dropped the stream without closing it; everything up to
    /// written position `certain_to` must have arrived (the rest was
    /// accepted after the last completed flush: the crate docs' caveat).
    Dropped { certain_to: usize },
    /// The peer reset the connection: only prefixes can be checked.
    Reset,
}

pub struct Ctx<S> {
    pub h: RuntimeHandle,
    /// Ours; `None` while an op runs it in a task of its own.
    pub s: Option<S>,
    pub peer: Peer,
    pub inb: Inbound,
    pub out: Outbound,
    /// The written position from which bytes were accepted since the last
    /// completed flush (the crate's caveat: they may still sit in rustls).
    pub unflushed: Option<usize>,
    pub rng: Rng,
    pub trace: Trace,
    pub ops: u64,
}

impl<S: Side> Ctx<S> {
    fn log(&mut self, what: impl Display) {
        self.ops += 1;
        self.trace.push(format!("#{} {what}", self.ops));
    }

    fn s(&mut self) -> &mut S {
        self.s.as_mut().expect("our stream")
    }

    /// Bytes of peer stream known to be there for a read wanting `want`:
    /// asks the peer for more when not.
    fn ensure(&mut self, want: u64) {
        let avail = self.inb.available();
        if avail < want {
            let add = want - avail + self.rng.size(64 << 10) as u64;
            self.peer.send(add);
            self.inb.committed += add;
        }
    }

    fn write_size(&mut self) -> usize {
        if self.rng.pct(15) {
            (64 << 10) + self.rng.below((MAX_WRITE - (64 << 10)) as u64) as usize
        } else {
            self.rng.size(MAX_WRITE)
        }
    }

    fn pause(&mut self) {
        let ms = 5 + self.rng.below(250);
        self.peer.pause(Duration::from_millis(ms));
        self.log(format!("peer stops reading for {ms} ms"));
    }

    /// Runs `op` in `w`: in this task on our stream, or (`Steal`,
    /// `OtherShard`) with the stream moved into a task of its own and back.
    async fn exec(&mut self, what: &str, w: Wrap, op: Op) -> Result<Out<io::Result<Got>>, String> {
        if !matches!(w, Wrap::Steal | Wrap::OtherShard) {
            let s = self.s.as_mut().expect("our stream");
            return bounded(what, wrap(w, perform(s, op))).await;
        }
        let mut s = self.s.take().expect("our stream");
        let session = s.tcp().session_shard();
        let task = async move {
            let res = perform(&mut s, op).await;
            (res, s)
        };
        match bounded(what, spawned(&self.h, session, w, task)).await? {
            Out::Done((res, s)) => {
                self.s = Some(s);
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
        match self.rng.weighted(&[30, 6, 24, 6, 2, 5]) {
            0 => self.op_write().await,
            1 => self.op_flush().await,
            2 => self.op_read().await,
            3 => self.split_phase().await,
            4 => {
                self.peer.key_update();
                self.log("peer updates its keys (TLS 1.3)");
                Ok(())
            }
            _ => {
                self.pause();
                Ok(())
            }
        }
    }

    async fn op_write(&mut self) -> Res {
        let how = pick(&mut self.rng, WRITES);
        let n = self.write_size();
        let data = self.out.next_bytes(n);
        let at = self.out.len();
        let w = Wrap::draw(&mut self.rng, 3, true);
        let what = format!("{how:?}({n}) at out {at} [{w:?}]");
        if how.all() {
            self.out.accept(&data);
        }
        let copy = if how.all() { Vec::new() } else { data.clone() };
        match self.exec(&what, w, Op::Write(how, data)).await? {
            Out::Done(Ok(Got::Wrote(k))) => {
                if !how.all() {
                    self.out.accept(&copy[..k]);
                }
                if k > 0 {
                    self.unflushed.get_or_insert(at);
                }
                self.log(format!("{what} -> Ok({k})"));
                if k == 0 && n > 0 {
                    return Err(format!("{what}: took no byte of a non-empty write"));
                }
                Ok(())
            }
            Out::Done(Ok(_)) => unreachable!("a write writes"),
            Out::Done(Err(e)) => Err(format!("{what} failed: {e}")),
            Out::Dropped if how.all() => {
                // A prefix of it was accepted (and, unflushed, is in rustls).
                self.out.window(at, at + n);
                self.unflushed.get_or_insert(at);
                self.log(format!("{what} -> dropped (a prefix may arrive)"));
                Ok(())
            }
            Out::Dropped => {
                // A single `poll_write` that returned `Pending` took nothing.
                self.log(format!("{what} -> dropped (took nothing)"));
                Ok(())
            }
        }
    }

    async fn op_flush(&mut self) -> Res {
        let how = pick(&mut self.rng, FLUSHES);
        let w = Wrap::draw(&mut self.rng, 5, true);
        let what = format!("{how:?} (unflushed from {:?}) [{w:?}]", self.unflushed);
        match self.exec(&what, w, Op::Flush(how)).await? {
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

    async fn op_read(&mut self) -> Res {
        let how = pick(&mut self.rng, READS);
        let n = if how.exact() {
            self.rng.size(128 << 10)
        } else {
            self.rng.size(64 << 10)
        };
        self.ensure(if how.exact() { n as u64 } else { 1 });
        let w = Wrap::draw(&mut self.rng, 8, true);
        let what = format!("{how:?}({n}) at in {} [{w:?}]", self.inb.r());
        let got = match self.exec(&what, w, Op::Read(how, n)).await? {
            Out::Done(Ok(Got::Read(b))) => Out::Done(Ok(b)),
            Out::Done(Ok(_)) => unreachable!("a read reads"),
            Out::Done(Err(e)) => Out::Done(Err(e)),
            Out::Dropped => Out::Dropped,
        };
        self.read_outcome(&what, got, if how.exact() { n as u64 } else { 0 })
    }

    /// Checks a read's outcome; a dropped one may lose `lose` bytes (0 for
    /// the cancel-safe reads: a `poll_read` that returned `Pending` took
    /// nothing).
    fn read_outcome(&mut self, what: &str, got: Out<io::Result<Vec<u8>>>, lose: u64) -> Res {
        match got {
            Out::Done(Ok(b)) if b.is_empty() => {
                Err(format!("{what}: end of stream, the peer has not closed"))
            }
            Out::Done(Ok(b)) => {
                self.log(format!("{what} -> {} bytes", b.len()));
                self.inb.check(&b)
            }
            Out::Done(Err(e)) => Err(format!("{what} failed: {e}")),
            Out::Dropped => {
                self.inb.may_lose(lose);
                self.log(format!("{what} -> dropped (may lose {lose})"));
                Ok(())
            }
        }
    }

    /// The stream split: a task writes through the write half (each write
    /// in a wrapper of its own) while this one reads through the read
    /// half; then the halves are put back together.
    async fn split_phase(&mut self) -> Res {
        let (mut rh, mut wh) = self.s.take().expect("our stream").split_halves();
        let mut plan = Vec::new();
        // At most one large write's worth in all, as a plain op: the
        // writer task must end within HANG on a loaded machine too.
        let mut budget = MAX_WRITE;
        for _ in 0..1 + self.rng.below(3) {
            let n = self.write_size().min(budget);
            budget -= n;
            let data = self.out.next_bytes(n);
            let at = self.out.len();
            self.out.accept(&data);
            self.unflushed.get_or_insert(at);
            let owned = self.rng.pct(50);
            let w = Wrap::draw(&mut self.rng, 3, false);
            plan.push((at, n, owned, w, data));
        }
        let flush = self.rng.pct(50);
        let writes: Vec<(usize, usize, bool, Wrap)> = plan
            .iter()
            .map(|&(at, n, owned, w, _)| (at, n, owned, w))
            .collect();
        self.log(format!(
            "split: the write half writes {writes:?} (at, len, owned, wrap){}",
            if flush { ", then flushes" } else { "" }
        ));
        let writer = self
            .h
            .spawn_stealable(async move {
                let mut outs = Vec::new();
                for (_, _, owned, w, data) in plan {
                    let out = if owned {
                        match wrap(w, AsyncWriteExt::write_all(&mut wh, data)).await {
                            Out::Done((res, _)) => Out::Done(res),
                            Out::Dropped => Out::Dropped,
                        }
                    } else {
                        wrap(w, FWrite::write_all(&mut wh, &data)).await
                    };
                    outs.push(out);
                }
                let flushed = if flush {
                    Some(FWrite::flush(&mut wh).await)
                } else {
                    None
                };
                (outs, flushed, wh)
            })
            .map_err(|e| format!("spawn: {e}"))?;
        for _ in 0..1 + self.rng.below(4) {
            let how = pick(&mut self.rng, SPLIT_READS);
            let n = self.rng.size(64 << 10);
            self.ensure(if how.exact() { n as u64 } else { 1 });
            let w = Wrap::draw(&mut self.rng, 8, false);
            let what = format!("  read half {how:?}({n}) at in {} [{w:?}]", self.inb.r());
            let got = bounded(&what, wrap(w, read_half(&mut rh, how, n))).await?;
            self.read_outcome(&what, got, if how.exact() { n as u64 } else { 0 })?;
        }
        let (outs, flushed, wh) = bounded("split: the writer task", writer)
            .await?
            .map_err(|e| format!("split: the writer task: {e}"))?;
        for ((at, n, _, _), out) in writes.into_iter().zip(outs) {
            let what = format!("  write half write_all({n}) at out {at}");
            match out {
                Out::Done(Ok(())) => self.log(format!("{what} -> Ok")),
                Out::Done(Err(e)) => return Err(format!("{what} failed: {e}")),
                Out::Dropped => {
                    self.out.window(at, at + n);
                    self.log(format!("{what} -> dropped (a prefix may arrive)"));
                }
            }
        }
        match flushed {
            Some(Ok(())) => self.unflushed = None,
            Some(Err(e)) => return Err(format!("split: flush failed: {e}")),
            None => {}
        }
        self.log("split: the writer task ended; reunite");
        let s = rh.reunite(wh).map_err(|e| format!("reunite: {e}"))?;
        self.s = Some(s);
        Ok(())
    }

    async fn end(&mut self) -> Result<End, String> {
        match self.rng.weighted(&[12, 25, 63]) {
            0 => self.end_reset().await,
            1 => self.end_drop().await,
            _ => self.end_graceful().await,
        }
    }

    async fn end_reset(&mut self) -> Result<End, String> {
        self.peer.reset();
        self.log("end: the peer resets the connection");
        for _ in 0..3 {
            let what = format!("  read after the reset at in {}", self.inb.r());
            let mut buf = vec![0u8; 64 << 10];
            match bounded(&what, FRead::read(self.s(), &mut buf)).await? {
                Ok(0) | Err(_) => break,
                Ok(k) => {
                    self.log(format!("{what} -> {k} bytes"));
                    self.inb.check(&buf[..k])?;
                }
            }
        }
        self.s = None;
        Ok(End::Reset)
    }

    async fn end_drop(&mut self) -> Result<End, String> {
        if self.rng.pct(50) {
            let how = pick(&mut self.rng, FLUSHES);
            let what = format!("end: {how:?} before the drop");
            match bounded(&what, perform(self.s(), Op::Flush(how))).await? {
                Ok(_) => self.unflushed = None,
                Err(e) => return Err(format!("{what} failed: {e}")),
            }
            self.log(what);
        }
        let certain_to = self.unflushed.unwrap_or(self.out.len());
        self.s = None;
        self.log(format!(
            "end: our stream dropped without close (unflushed from {:?})",
            self.unflushed
        ));
        Ok(End::Dropped { certain_to })
    }

    async fn end_graceful(&mut self) -> Result<End, String> {
        self.peer.close();
        self.log(format!(
            "end: the peer sends close_notify and shuts down after {} bytes",
            self.inb.committed
        ));
        let close_first = self.rng.pct(50);
        let how = pick(&mut self.rng, CLOSES);
        if close_first {
            self.close(how).await?;
        }
        if self.rng.pct(50) {
            let what = format!("end: read_to_end at in {}", self.inb.r());
            let (res, rest) =
                bounded(&what, AsyncReadExt::read_to_end(self.s(), Vec::new())).await?;
            res.map_err(|e| format!("{what} failed: {e}"))?;
            self.log(format!("{what} -> {} bytes", rest.len()));
            self.inb.check(&rest)?;
        } else {
            loop {
                let what = format!("end: drain read at in {}", self.inb.r());
                let mut buf = vec![0u8; 64 << 10];
                let k = bounded(&what, FRead::read(self.s(), &mut buf))
                    .await?
                    .map_err(|e| format!("{what} failed: {e}"))?;
                if k == 0 {
                    break;
                }
                self.inb.check(&buf[..k])?;
            }
        }
        if !self.inb.at_end() {
            return Err(format!(
                "inbound: close_notify after {} bytes, but the peer sent {}",
                self.inb.r(),
                self.inb.committed
            ));
        }
        self.log(format!("end: read to close_notify at in {}", self.inb.r()));
        if !close_first {
            self.close(how).await?;
        }
        self.s = None;
        Ok(End::Graceful)
    }

    async fn close(&mut self, how: CloseHow) -> Res {
        let what = format!("end: {how:?} (unflushed from {:?})", self.unflushed);
        bounded(&what, close(self.s(), how))
            .await?
            .map_err(|e| format!("{what} failed: {e}"))?;
        self.unflushed = None;
        self.log(what);
        Ok(())
    }
}
