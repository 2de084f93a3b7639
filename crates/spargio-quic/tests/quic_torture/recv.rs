//! Our receiving half of one stream: reads of every kind the crate
//! offers (and the io traits'), each wrapped at random, then to the end,
//! a stop, or a drop; what the reads returned goes into the stream's
//! record as [`Piece`]s, with the losses the dropped ones may have had.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use spargio::buf::IoBuf;
use spargio::RuntimeHandle;
use spargio_quic::{QuicBackend, QuicRecvStream};

use crate::bounded;
use crate::check::{Piece, RecvEnd};
use crate::ops::{spawned, wrap, Out, Wrap};
use crate::ours::{drop_somewhere, why, Why};
use crate::plan::{codes, Shared};
use crate::rng::Rng;

/// What a dropped `read_to_end` may have consumed: anything.
const UNBOUNDED: u64 = u64::MAX / 4;

#[derive(Clone, Copy, Debug)]
enum ReadOp {
    Chunk(usize),
    Read(usize),
    ReadExactBox(usize),
    ReadExactVec(usize),
    ToEnd(usize),
    FuturesRead(usize),
    FuturesReadExact(usize),
    FuturesToEnd,
    TokioRead(usize),
    TokioReadExact(usize),
    TokioToEnd,
    SpargioReadExact(usize),
    SpargioToEnd,
}

impl ReadOp {
    fn draw(rng: &mut Rng) -> ReadOp {
        let n = rng.size(64 << 10);
        match rng.weighted(&[6, 6, 3, 3, 3, 3, 2, 2, 3, 2, 2, 2, 2]) {
            0 => ReadOp::Chunk(n),
            1 => ReadOp::Read(n),
            2 => ReadOp::ReadExactBox(n),
            3 => ReadOp::ReadExactVec(n),
            // Sometimes below what comes: `InvalidData`.
            4 => ReadOp::ToEnd(rng.size(1 << 20)),
            5 => ReadOp::FuturesRead(n),
            6 => ReadOp::FuturesReadExact(n),
            7 => ReadOp::FuturesToEnd,
            8 => ReadOp::TokioRead(n),
            9 => ReadOp::TokioReadExact(n),
            10 => ReadOp::TokioToEnd,
            11 => ReadOp::SpargioReadExact(n),
            _ => ReadOp::SpargioToEnd,
        }
    }

    /// What a dropped one may have consumed and lost: the buffer of a
    /// read-exact (none of them is cancel safe), everything for our
    /// `read_to_end`s, nothing for the single reads (cancel safe:
    /// `read_chunk`'s rustdoc, `read`'s "cancel-safe like it", the
    /// `AsyncRead` docs). futures' and tokio's `read_to_end` keep what
    /// they read in the caller's `Vec`.
    fn dropped_loss(self) -> u64 {
        match self {
            ReadOp::ReadExactBox(n)
            | ReadOp::ReadExactVec(n)
            | ReadOp::FuturesReadExact(n)
            | ReadOp::TokioReadExact(n)
            | ReadOp::SpargioReadExact(n) => n as u64,
            ReadOp::ToEnd(_) | ReadOp::SpargioToEnd => UNBOUNDED,
            _ => 0,
        }
    }
}

/// What one read returned: `bytes` exactly, then up to `loss` bytes it
/// consumed and lost, then the end of the stream or an error.
#[derive(Debug, Default)]
struct ReadOut {
    bytes: Vec<u8>,
    loss: u64,
    end: bool,
    err: Option<io::Error>,
}

impl ReadOut {
    fn data(bytes: Vec<u8>) -> ReadOut {
        let end = bytes.is_empty();
        ReadOut {
            bytes,
            end,
            ..ReadOut::default()
        }
    }

    /// A read-exact's failure: its buffer lost; `UnexpectedEof` is the end.
    fn exact_failed(n: usize, e: io::Error) -> ReadOut {
        let eof = e.kind() == io::ErrorKind::UnexpectedEof;
        ReadOut {
            loss: n as u64,
            end: eof,
            err: (!eof).then_some(e),
            ..ReadOut::default()
        }
    }

    /// Bytes a call returned with `res`, all of them valid.
    fn kept(bytes: Vec<u8>, res: io::Result<()>, eof_is_end: bool) -> ReadOut {
        match res {
            Ok(()) => ReadOut::data(bytes).not_end(),
            Err(e) if eof_is_end && e.kind() == io::ErrorKind::UnexpectedEof => ReadOut {
                bytes,
                end: true,
                ..ReadOut::default()
            },
            Err(e) => ReadOut {
                bytes,
                err: Some(e),
                ..ReadOut::default()
            },
        }
    }

    fn not_end(mut self) -> ReadOut {
        self.end = false;
        self
    }

    fn with_end(mut self) -> ReadOut {
        self.end = true;
        self
    }

    /// A read-to-end that returned `Ok` saw the end.
    fn with_end_if_ok(self) -> ReadOut {
        match self.err {
            None => self.with_end(),
            Some(_) => self,
        }
    }
}

fn failed(e: io::Error) -> ReadOut {
    ReadOut {
        err: Some(e),
        ..ReadOut::default()
    }
}

async fn exec_read(r: &mut QuicRecvStream, op: ReadOp, spill: &mut Vec<u8>) -> ReadOut {
    use futures_util::io::AsyncReadExt as F;
    use spargio::io::AsyncReadExt as S;
    use tokio::io::AsyncReadExt as T;
    match op {
        ReadOp::Chunk(max) => match r.read_chunk(max).await {
            Ok(Some(c)) if c.len() > max || c.is_empty() => failed(io::Error::other(format!(
                "read_chunk({max}) returned {} bytes",
                c.len()
            ))),
            Ok(Some(c)) => ReadOut::data(c.to_vec()),
            Ok(None) => ReadOut::data(Vec::new()),
            Err(e) => failed(e),
        },
        ReadOp::Read(cap) => match r.read(Vec::with_capacity(cap)).await {
            (Ok(n), buf) if n != buf.len() => failed(io::Error::other(format!(
                "read(cap {cap}) returned {n} with a buffer of {}",
                buf.len()
            ))),
            (Ok(_), buf) => ReadOut::data(buf),
            (Err(e), _) => failed(e),
        },
        ReadOp::ReadExactBox(n) => match r.read_exact(vec![0u8; n].into_boxed_slice()).await {
            (Ok(()), buf) => ReadOut::data(buf.into_vec()).not_end(),
            (Err(e), _) => ReadOut::exact_failed(n, e),
        },
        ReadOp::ReadExactVec(n) => {
            // rustdoc: "the bytes read so far are in the returned buffer".
            let (res, buf) = r.read_exact(Vec::with_capacity(n).slice(..n)).await;
            ReadOut::kept(buf.into_inner(), res, true)
        }
        ReadOp::ToEnd(limit) => match r.read_to_end(limit).await {
            Ok(v) => ReadOut::data(v).with_end(),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => ReadOut {
                loss: UNBOUNDED,
                ..ReadOut::default()
            },
            Err(e) => ReadOut {
                loss: UNBOUNDED,
                err: Some(e),
                ..ReadOut::default()
            },
        },
        ReadOp::FuturesRead(n) => {
            let mut buf = vec![0u8; n];
            match F::read(r, &mut buf).await {
                Ok(k) => {
                    buf.truncate(k);
                    ReadOut::data(buf)
                }
                Err(e) => failed(e),
            }
        }
        ReadOp::FuturesReadExact(n) => {
            let mut buf = vec![0u8; n];
            match F::read_exact(r, &mut buf).await {
                Ok(()) => ReadOut::data(buf).not_end(),
                Err(e) => ReadOut::exact_failed(n, e),
            }
        }
        ReadOp::FuturesToEnd => {
            let res = F::read_to_end(r, spill).await.map(|_| ());
            ReadOut::kept(std::mem::take(spill), res, false).with_end_if_ok()
        }
        ReadOp::TokioRead(n) => {
            let mut buf = vec![0u8; n];
            match T::read(r, &mut buf).await {
                Ok(k) => {
                    buf.truncate(k);
                    ReadOut::data(buf)
                }
                Err(e) => failed(e),
            }
        }
        ReadOp::TokioReadExact(n) => {
            let mut buf = vec![0u8; n];
            match T::read_exact(r, &mut buf).await {
                Ok(_) => ReadOut::data(buf).not_end(),
                Err(e) => ReadOut::exact_failed(n, e),
            }
        }
        ReadOp::TokioToEnd => {
            let res = T::read_to_end(r, spill).await.map(|_| ());
            ReadOut::kept(std::mem::take(spill), res, false).with_end_if_ok()
        }
        ReadOp::SpargioReadExact(n) => {
            // The trait's rustdoc: "the bytes read so far are in the
            // returned buffer".
            let (res, buf) = S::read_exact(r, Vec::with_capacity(n).slice(..n)).await;
            ReadOut::kept(buf.into_inner(), res, true)
        }
        ReadOp::SpargioToEnd => {
            let (res, buf) = S::read_to_end(r, Vec::new()).await;
            ReadOut::kept(buf, res.map(|_| ()), false).with_end_if_ok()
        }
    }
}

/// Our receiving half of one stream.
pub struct RecvHalf {
    h: RuntimeHandle,
    session: usize,
    shared: Arc<Shared>,
    i: usize,
    r: Option<QuicRecvStream>,
    rng: Rng,
    ops: u32,
    pieces: Vec<Piece>,
    /// Bytes lost since the last piece.
    loss: u64,
    end: Option<RecvEnd>,
}

impl RecvHalf {
    pub fn new(
        h: RuntimeHandle,
        session: usize,
        shared: Arc<Shared>,
        i: usize,
        r: QuicRecvStream,
    ) -> RecvHalf {
        let rng = Rng::new(shared.plan.streams[i].half_seed(3));
        RecvHalf {
            h,
            session,
            shared,
            i,
            r: Some(r),
            rng,
            ops: 0,
            pieces: Vec::new(),
            loss: 0,
            end: None,
        }
    }

    fn what(&mut self, op: impl std::fmt::Display) -> String {
        self.ops += 1;
        format!("s{} down #{} {op}", self.i, self.ops)
    }

    pub async fn run(mut self) -> Result<(), String> {
        let res = self.script().await;
        let (pieces, loss, end) = (std::mem::take(&mut self.pieces), self.loss, self.end);
        self.shared.record(self.i, |r| {
            r.our_in = pieces;
            r.our_in_loss = loss;
            r.our_in_end = end;
        });
        res
    }

    async fn script(&mut self) -> Result<(), String> {
        for _ in 0..self.rng.below(12) {
            if self.end.is_some() {
                break;
            }
            if self.rng.pct(10) {
                let ms = self.rng.below(15);
                spargio::time::sleep(Duration::from_millis(ms)).await;
                continue;
            }
            let op = ReadOp::draw(&mut self.rng);
            let w = Wrap::draw(&mut self.rng, 6, true);
            self.read(op, w).await?;
        }
        if self.end.is_none() {
            match self.rng.weighted(&[60, 20, 20]) {
                0 => {
                    while self.end.is_none() {
                        let op = ReadOp::Chunk(self.rng.size(64 << 10));
                        self.read(op, Wrap::Plain).await?;
                    }
                }
                1 => {
                    let code = codes::our_stop(self.i);
                    let what = self.what(format_args!("stop({code})"));
                    let res = self.r.as_mut().expect("the half").stop(code);
                    self.shared.log(format!("{what} -> {res:?}"));
                    match res {
                        Ok(()) => self.end = Some(RecvEnd::Stopped(code)),
                        // quinn's `stop` refuses a stream whose FIN it
                        // has taken with the last bytes (the native
                        // backend remembers the FIN and says `Ok`); the
                        // rustdoc says nothing either way.
                        Err(e)
                            if e.kind() == io::ErrorKind::NotConnected
                                && self.shared.plan.backend == QuicBackend::Bridge =>
                        {
                            self.end = Some(RecvEnd::Stopped(code))
                        }
                        Err(e) => self.failed(&what, e)?,
                    }
                }
                _ => {
                    // rustdoc: "Dropping it before the end stops the
                    // stream with code 0".
                    let what = self.what("dropped before the end");
                    self.shared.log(what);
                    self.end = Some(RecvEnd::Dropped);
                }
            }
        } else if self.rng.pct(30) {
            self.read_again().await?;
        }
        let elsewhere = self.rng.pct(25);
        let r = self.r.take().expect("the half");
        drop_somewhere(&self.h, self.session, elsewhere, r).await;
        Ok(())
    }

    /// After the end or a reset, a read says so again.
    async fn read_again(&mut self) -> Result<(), String> {
        let what = self.what("read_chunk(64) again");
        let r = self.r.as_mut().expect("the half");
        let res = bounded(&what, r.read_chunk(64)).await?;
        self.shared.log(format!("{what} -> {res:?}"));
        let code = res.as_ref().err().and_then(spargio_quic::stream_error_code);
        match (self.end, &res) {
            (Some(RecvEnd::Fin), Ok(None)) => Ok(()),
            (Some(RecvEnd::Reset(c)), Err(_)) if code == Some(c) => Ok(()),
            (Some(RecvEnd::Lost), Err(_)) => Ok(()),
            (end, res) => Err(format!("{what}: {res:?} after {end:?}")),
        }
    }

    async fn read(&mut self, op: ReadOp, w: Wrap) -> Result<(), String> {
        let what = self.what(format_args!("{op:?} [{w:?}]"));
        let mut spill = Vec::new();
        let out = bounded(&what, self.exec(w, op, &mut spill)).await?;
        let out = match out {
            Out::Done(out) => out,
            Out::Dropped => ReadOut {
                bytes: spill,
                loss: op.dropped_loss(),
                ..ReadOut::default()
            },
        };
        self.shared.log(format!(
            "{what} -> {} bytes{}{}{}",
            out.bytes.len(),
            match out.loss {
                0 => String::new(),
                UNBOUNDED => ", then lost any".into(),
                n => format!(", then lost up to {n}"),
            },
            if out.end { ", end" } else { "" },
            out.err
                .as_ref()
                .map_or(String::new(), |e| format!(", Err({e})"))
        ));
        if !out.bytes.is_empty() {
            let loss_before = std::mem::take(&mut self.loss);
            self.pieces.push(Piece {
                what: what.clone(),
                loss_before,
                bytes: out.bytes,
            });
        }
        self.loss = self.loss.saturating_add(out.loss);
        if out.end {
            self.end = Some(RecvEnd::Fin);
        }
        match out.err {
            Some(e) => self.failed(&what, e),
            None => Ok(()),
        }
    }

    fn failed(&mut self, what: &str, e: io::Error) -> Result<(), String> {
        match why(&self.shared, &e) {
            Some(Why::Reset(code)) => self.end = Some(RecvEnd::Reset(code)),
            Some(Why::Lost) => self.end = Some(RecvEnd::Lost),
            Some(Why::TimedOut) => {}
            _ => return Err(format!("{what} failed: {e} ({e:?})")),
        }
        Ok(())
    }

    async fn exec(&mut self, w: Wrap, op: ReadOp, spill: &mut Vec<u8>) -> Out<ReadOut> {
        if !matches!(w, Wrap::Steal | Wrap::OtherShard) {
            let r = self.r.as_mut().expect("the half");
            return wrap(w, exec_read(r, op, spill)).await;
        }
        let mut r = self.r.take().expect("the half");
        let task = async move {
            let mut spill = Vec::new();
            let out = exec_read(&mut r, op, &mut spill).await;
            (r, out)
        };
        match spawned(&self.h, self.session, w, task).await {
            Out::Done((r, out)) => {
                self.r = Some(r);
                Out::Done(out)
            }
            Out::Dropped => unreachable!("a spawned operation runs to its end"),
        }
    }
}
