//! Our sending half of one stream: writes of every kind the crate
//! offers, each wrapped at random, then a finish, a close, a shutdown, a
//! reset, or a drop without any; what the writes took goes into the
//! stream's [`UpModel`].

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use spargio::RuntimeHandle;
use spargio_quic::QuicSendStream;

use crate::check::{SendEnd, UpModel};
use crate::ops::{spawned, wrap, Out, Wrap};
use crate::ours::{drop_somewhere, why, Why};
use crate::plan::{codes, PeerRecv, Shared};
use crate::rng::Rng;
use crate::{bounded, bounded_for, LONG};

#[derive(Clone, Copy, Debug)]
enum WriteKind {
    Write,
    WriteAll,
    WriteBytes,
    FuturesWrite,
    FuturesWriteAll,
    TokioWrite,
    TokioWriteAll,
}

impl WriteKind {
    /// A single write: it moves data only in the poll that reports it
    /// (`native/streams.rs`, `bridge/mod.rs`, and the `AsyncWrite` docs'
    /// "cancel-safe"), so dropped or failed it moved nothing.
    fn single(self) -> bool {
        matches!(
            self,
            WriteKind::Write | WriteKind::FuturesWrite | WriteKind::TokioWrite
        )
    }
}

async fn exec_write(s: &mut QuicSendStream, kind: WriteKind, data: Vec<u8>) -> io::Result<usize> {
    use futures_util::io::AsyncWriteExt as F;
    use tokio::io::AsyncWriteExt as T;
    let n = data.len();
    match kind {
        WriteKind::Write => s.write(&data).await,
        WriteKind::WriteAll => s.write_all(&data).await.map(|()| n),
        WriteKind::WriteBytes => s.write_bytes(Bytes::from(data)).await.map(|()| n),
        WriteKind::FuturesWrite => F::write(s, &data).await,
        WriteKind::FuturesWriteAll => F::write_all(s, &data).await.map(|()| n),
        WriteKind::TokioWrite => T::write(s, &data).await,
        WriteKind::TokioWriteAll => T::write_all(s, &data).await.map(|()| n),
    }
}

/// Our sending half of one stream.
pub struct SendHalf {
    h: RuntimeHandle,
    session: usize,
    shared: Arc<Shared>,
    i: usize,
    s: Option<QuicSendStream>,
    rng: Rng,
    model: UpModel,
    ops: u32,
    end: Option<SendEnd>,
}

impl SendHalf {
    pub fn new(
        h: RuntimeHandle,
        session: usize,
        shared: Arc<Shared>,
        i: usize,
        s: QuicSendStream,
    ) -> SendHalf {
        let sp = &shared.plan.streams[i];
        let (rng, model) = (Rng::new(sp.half_seed(2)), UpModel::new(sp.up_key()));
        SendHalf {
            h,
            session,
            shared,
            i,
            s: Some(s),
            rng,
            model,
            ops: 0,
            end: None,
        }
    }

    fn log(&mut self, what: &str, outcome: impl std::fmt::Display) {
        self.shared.log(format!("{what} -> {outcome}"));
    }

    fn what(&mut self, op: impl std::fmt::Display) -> String {
        self.ops += 1;
        format!("s{} up #{} {op}", self.i, self.ops)
    }

    pub async fn run(mut self) -> Result<(), String> {
        let res = self.script().await;
        let (model, end) = (self.model, self.end);
        self.shared.record(self.i, |r| {
            r.up_model = Some(model);
            r.up_end = end;
        });
        res
    }

    async fn script(&mut self) -> Result<(), String> {
        for _ in 0..self.rng.below(10) {
            if self.end.is_some() {
                break;
            }
            if self.rng.pct(12) {
                let ms = self.rng.below(15);
                spargio::time::sleep(Duration::from_millis(ms)).await;
                continue;
            }
            self.write().await?;
        }
        if self.end.is_none() {
            self.finish().await?;
        }
        let elsewhere = self.rng.pct(25);
        let s = self.s.take().expect("the half");
        drop_somewhere(&self.h, self.session, elsewhere, s).await;
        Ok(())
    }

    async fn write(&mut self) -> Result<(), String> {
        const KINDS: [WriteKind; 7] = [
            WriteKind::Write,
            WriteKind::WriteAll,
            WriteKind::WriteBytes,
            WriteKind::FuturesWrite,
            WriteKind::FuturesWriteAll,
            WriteKind::TokioWrite,
            WriteKind::TokioWriteAll,
        ];
        let kind = KINDS[self.rng.weighted(&[4, 4, 4, 2, 2, 2, 2])];
        let n = match self.rng.pct(3) {
            true => 0,
            false => self.rng.size(256 << 10),
        };
        let at = self.model.len();
        let data = self.model.take(n);
        let w = Wrap::draw(&mut self.rng, 5, true);
        let what = self.what(format_args!("{kind:?}({n}) at {at} [{w:?}]"));
        let out = bounded(&what, self.exec(w, kind, data)).await?;
        let taken = match &out {
            Out::Done(Ok(k)) if *k > n || (*k < n && !kind.single()) => {
                return Err(format!("{what} reported {k} bytes written"));
            }
            Out::Done(Ok(k)) => Some(*k),
            _ if kind.single() => Some(0),
            _ => None,
        };
        match taken {
            Some(k) => self.model.took(at, k),
            None => self.model.window(at, at + n),
        }
        match out {
            Out::Done(Ok(k)) => self.log(&what, format_args!("Ok({k})")),
            Out::Dropped => self.log(&what, "dropped"),
            Out::Done(Err(e)) => {
                self.log(&what, format_args!("Err({e})"));
                self.failed(&what, &e)?;
            }
        }
        Ok(())
    }

    /// A write or finish failed with `e`: the stream's end, or a failure.
    fn failed(&mut self, what: &str, e: &io::Error) -> Result<(), String> {
        match why(&self.shared, e) {
            Some(Why::Stopped(code)) => self.end = Some(SendEnd::Stopped(code)),
            Some(Why::Lost) => self.end = Some(SendEnd::Lost),
            Some(Why::TimedOut) => {}
            _ => return Err(format!("{what} failed: {e} ({e:?})")),
        }
        Ok(())
    }

    /// `kind` in `w`: `Steal` and `OtherShard` move the half into a task
    /// of their own and back.
    async fn exec(&mut self, w: Wrap, kind: WriteKind, data: Vec<u8>) -> Out<io::Result<usize>> {
        if !matches!(w, Wrap::Steal | Wrap::OtherShard) {
            let s = self.s.as_mut().expect("the half");
            return wrap(w, exec_write(s, kind, data)).await;
        }
        let mut s = self.s.take().expect("the half");
        let task = async move {
            let res = exec_write(&mut s, kind, data).await;
            (s, res)
        };
        match spawned(&self.h, self.session, w, task).await {
            Out::Done((s, res)) => {
                self.s = Some(s);
                Out::Done(res)
            }
            Out::Dropped => unreachable!("a spawned operation runs to its end"),
        }
    }

    async fn finish(&mut self) -> Result<(), String> {
        use futures_util::io::AsyncWriteExt as F;
        use tokio::io::AsyncWriteExt as T;
        let i = self.i;
        let how = self.rng.weighted(&[30, 10, 10, 15, 25]);
        let again = self.rng.pct(20);
        let wait_acked = self.rng.pct(30);
        let s = self.s.as_mut().expect("the half");
        let (what, res) = match how {
            0 => ("finish", s.finish()),
            1 => ("futures close", F::close(s).await),
            2 => ("tokio shutdown", T::shutdown(s).await),
            3 => {
                let code = codes::our_reset(i);
                let what = self.what(format_args!("reset({code})"));
                let res = self.s.as_mut().expect("the half").reset(code);
                self.log(&what, format_args!("{res:?}"));
                return match res {
                    Ok(()) => {
                        self.end = Some(SendEnd::Reset(code));
                        Ok(())
                    }
                    Err(e) => self.failed(&what, &e),
                };
            }
            _ => {
                // rustdoc: "Dropping it without finish or reset finishes
                // it: the data written so far is delivered."
                let what = self.what("dropped without finish");
                self.log(&what, "");
                self.end = Some(SendEnd::Dropped);
                return Ok(());
            }
        };
        let what = self.what(what);
        self.log(&what, format_args!("{res:?}"));
        if let Err(e) = res {
            return self.failed(&what, &e);
        }
        self.end = Some(SendEnd::Finished);
        if again {
            // io_traits.rs: "A second close is `Ok`".
            let s = self.s.as_mut().expect("the half");
            if let Err(e) = F::close(s).await {
                return Err(format!("{what}, then a second close failed: {e}"));
            }
        }
        if wait_acked {
            let what = self.what("stopped()");
            let s = self.s.as_mut().expect("the half");
            let res = bounded_for(LONG, &what, s.stopped()).await?;
            self.log(&what, format_args!("{res:?}"));
            let may_stop = matches!(self.shared.plan.streams[i].up, Some(PeerRecv::StopAfter(_)));
            match res {
                Ok(None) => {}
                Ok(Some(code)) if may_stop && code == codes::peer_stop(i) => {}
                Ok(Some(code)) => return Err(format!("{what}: Some({code}), no such stop")),
                Err(e) => match why(&self.shared, &e) {
                    Some(Why::Lost) => {}
                    _ => return Err(format!("{what} failed: {e} ({e:?})")),
                },
            }
        }
        Ok(())
    }
}
