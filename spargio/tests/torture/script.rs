//! The script: operations drawn one at a time from the seed's generator
//! (what is drawn next never depends on timing; only the outcomes do),
//! run on the spargio side, each outcome checked against the model.

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use futures_util::io::{AsyncReadExt as FRead, AsyncWriteExt as FWrite};
use spargio::io::framed::LengthDelimited;
use spargio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader, Compat};
use spargio::net::RecvPoolConfig;
use spargio::RuntimeHandle;

use super::model::{Inbound, Outbound, Trace};
use super::ops::{spawned, wrap, Out, Sock, Wrap};
use super::peer::Peer;
use super::rng::Rng;

/// Every operation must end within this (a hang is a failure).
pub const HANG: Duration = Duration::from_secs(10);

/// Writes go up to this.
const MAX_WRITE: usize = 300 << 10;

pub type Res = Result<(), String>;

/// How a script ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Both sides shut down their writes; every byte must have arrived.
    Graceful,
    /// The peer reset the connection: only prefixes can be checked.
    Reset,
}

pub struct Ctx<S: Sock> {
    pub h: RuntimeHandle,
    pub s: S,
    pub peer: Peer,
    pub inb: Inbound,
    pub out: Outbound,
    pub rng: Rng,
    pub trace: Trace,
    pub ops: u64,
    pub tcp: bool,
    pub skip: Skip,
}

/// Parts of the generator `TORTURE_SKIP` (comma-separated) turns off, to
/// look for one failure while another is known: `segments` (no
/// `recv_multishot_segments`), `compat-unflushed` (a `Compat` is always
/// flushed before it is dropped or unwrapped).
#[derive(Clone, Copy, Debug, Default)]
pub struct Skip {
    pub segments: bool,
    pub compat_unflushed: bool,
}

impl Skip {
    pub fn from_env() -> Skip {
        let v = std::env::var("TORTURE_SKIP").unwrap_or_default();
        let has = |name: &str| v.split(',').any(|p| p.trim() == name);
        Skip {
            segments: has("segments"),
            compat_unflushed: has("compat-unflushed"),
        }
    }
}

impl<S: Sock> Ctx<S> {
    fn log(&mut self, what: impl Display) {
        self.ops += 1;
        self.trace.push(format!("#{} {what}", self.ops));
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

    pub async fn run(&mut self) -> Result<End, String> {
        let n = 10 + self.rng.below(50);
        for _ in 0..n {
            self.step().await?;
        }
        self.end().await
    }

    async fn step(&mut self) -> Res {
        let segments = if self.skip.segments { 0 } else { 12 };
        match self
            .rng
            .weighted(&[12, 8, 8, 5, 14, 4, 3, 4, segments, 12, 5, 4, 5, 6])
        {
            k @ 0..=3 => self.op_write(k).await,
            4 => self.op_recv(0).await,
            5 => self.op_recv(1).await,
            6 => self.op_read_exact(0).await,
            7 => self.op_read_exact(1).await,
            8 => self.op_segments().await,
            9 => self.compat_phase().await,
            10 => self.bufreader_phase().await,
            11 => self.op_framed().await,
            12 => self.op_split().await,
            _ => {
                self.pause();
                Ok(())
            }
        }
    }

    fn pause(&mut self) {
        let ms = 5 + self.rng.below(250);
        self.peer.pause(Duration::from_millis(ms));
        self.log(format!("peer stops reading for {ms} ms"));
    }

    fn write_size(&mut self) -> usize {
        if self.rng.pct(15) {
            (64 << 10) + self.rng.below((MAX_WRITE - (64 << 10)) as u64) as usize
        } else {
            self.rng.size(MAX_WRITE)
        }
    }

    async fn op_write(&mut self, kind: usize) -> Res {
        const NAMES: [&str; 4] = [
            "send_owned",
            "write_all",
            "write_all_owned",
            "AsyncWriteExt::write_all",
        ];
        let n = self.write_size();
        let data = self.out.next_bytes(n);
        let at = self.out.len();
        self.out.accept(&data);
        let w = Wrap::draw(&mut self.rng, 3, true);
        let s = self.s.clone();
        let fut = async move {
            match kind {
                0 => s.send_o(data).await.map(|(k, _)| k),
                1 => s.write_all_s(&data).await.map(|()| n),
                2 => s.write_all_o(data).await.map(|_| n),
                _ => {
                    let mut s = s;
                    AsyncWriteExt::write_all(&mut s, data).await.0.map(|()| n)
                }
            }
        };
        let what = format!("{}({n}) at out {at} [{w:?}]", NAMES[kind]);
        match bounded(&what, spawned(&self.h, self.s.session(), w, fut)).await? {
            Out::Done(Ok(k)) => {
                self.out.expected.truncate(at + k);
                self.log(format!("{what} -> Ok({k})"));
                Ok(())
            }
            Out::Done(Err(e)) => Err(format!("{what} failed: {e}")),
            Out::Dropped => {
                self.out.window(at, at + n);
                self.log(format!("{what} -> dropped (a prefix may arrive)"));
                Ok(())
            }
        }
    }

    async fn op_recv(&mut self, kind: usize) -> Res {
        self.ensure(1);
        let cap = self.rng.size(64 << 10);
        let w = Wrap::draw(&mut self.rng, 10, true);
        let s = self.s.clone();
        let fut = async move {
            let buf = Vec::with_capacity(cap);
            match kind {
                0 => s.recv_o(buf).await.map(|(_, b)| b),
                _ => {
                    let mut s = s;
                    let (res, b) = AsyncRead::read(&mut s, buf).await;
                    res.map(|_| b)
                }
            }
        };
        let name = ["recv_owned", "AsyncRead::read"][kind];
        let what = format!("{name}(cap {cap}) at in {} [{w:?}]", self.inb.r());
        let got = bounded(&what, spawned(&self.h, self.s.session(), w, fut)).await?;
        self.read_outcome(&what, got, 0)
    }

    /// Checks a read's outcome; a dropped one may lose `lose` bytes
    /// (0 for the cancel-safe reads).
    fn read_outcome<B: AsRef<[u8]>>(
        &mut self,
        what: &str,
        got: Out<std::io::Result<B>>,
        lose: u64,
    ) -> Res {
        match got {
            Out::Done(Ok(b)) if b.as_ref().is_empty() => {
                Err(format!("{what}: end of stream, the peer has not closed"))
            }
            Out::Done(Ok(b)) => {
                self.log(format!("{what} -> {} bytes", b.as_ref().len()));
                self.inb.check(b.as_ref())
            }
            Out::Done(Err(e)) => Err(format!("{what} failed: {e}")),
            Out::Dropped => {
                self.inb.may_lose(lose);
                self.log(format!("{what} -> dropped (may lose {lose})"));
                Ok(())
            }
        }
    }

    async fn op_read_exact(&mut self, kind: usize) -> Res {
        let n = self.rng.size(128 << 10);
        self.ensure(n as u64);
        let w = Wrap::draw(&mut self.rng, 4, true);
        let s = self.s.clone();
        let fut = async move {
            match kind {
                0 => {
                    let mut out = vec![0u8; n];
                    s.read_exact_s(&mut out).await.map(|()| out)
                }
                _ => s
                    .read_exact_o(vec![0u8; n].into_boxed_slice())
                    .await
                    .map(Vec::from),
            }
        };
        let name = ["read_exact", "read_exact_owned"][kind];
        let what = format!("{name}({n}) at in {} [{w:?}]", self.inb.r());
        let got = bounded(&what, spawned(&self.h, self.s.session(), w, fut)).await?;
        // net/mod.rs: "`read_exact` is not [cancel safe]: bytes it already
        // placed in its buffer go with the dropped future".
        self.read_outcome(&what, got, n as u64)
    }

    async fn op_segments(&mut self) -> Res {
        let cfg = RecvPoolConfig::default()
            .buffers(1 << self.rng.below(5))
            .buffer_len(self.rng.size(16 << 10) as u32);
        let what = format!(
            "recv_multishot_segments_with({cfg:?}) at in {}",
            self.inb.r()
        );
        let mut segs = bounded(&what, self.s.segments(cfg))
            .await?
            .map_err(|e| format!("{what} failed: {e}"))?;
        self.log(&what);
        for _ in 0..1 + self.rng.below(6) {
            self.ensure(1);
            let w = Wrap::draw(&mut self.rng, 6, false);
            let what = format!("  next_segment at in {} [{w:?}]", self.inb.r());
            let got = match bounded(&what, wrap(w, segs.next_segment())).await? {
                Out::Done(None) => Out::Done(Ok(Vec::new())),
                Out::Done(Some(r)) => Out::Done(r.map(|seg| seg.to_vec())),
                Out::Dropped => Out::Dropped,
            };
            self.read_outcome(&what, got, 0)?;
        }
        if self.rng.pct(75) {
            let rest = bounded("  stop", segs.stop())
                .await?
                .map_err(|e| format!("stop failed: {e}"))?;
            self.log(format!("  stop -> {} segments", rest.len()));
            for seg in rest {
                self.inb.check(&seg)?;
            }
        } else {
            drop(segs);
            // RecvSegments: dropping "loses nothing": what it received and
            // did not yield goes to the socket's next receive.
            self.log("  dropped");
        }
        Ok(())
    }

    async fn compat_phase(&mut self) -> Res {
        let mut c = Compat::new(self.s.clone());
        // Accepted since the last completed flush, from this position.
        let mut unflushed: Option<usize> = None;
        self.log("Compat::new");
        if self.rng.pct(40) {
            self.pause();
        }
        for _ in 0..1 + self.rng.below(10) {
            match self.rng.weighted(&[20, 12, 8, 12, 6, 8, 8]) {
                k @ 0..=1 => {
                    let n = self.write_size();
                    let data = self.out.next_bytes(n);
                    let at = self.out.len();
                    let w = Wrap::draw(&mut self.rng, 5, false);
                    if k == 0 {
                        let what = format!("  Compat write({n}) at out {at} [{w:?}]");
                        match bounded(&what, wrap(w, FWrite::write(&mut c, &data))).await? {
                            Out::Done(Ok(k)) => {
                                self.out.accept(&data[..k]);
                                unflushed.get_or_insert(at);
                                self.log(format!("{what} -> Ok({k})"));
                            }
                            Out::Done(Err(e)) => return Err(format!("{what} failed: {e}")),
                            // Pending: nothing was accepted.
                            Out::Dropped => self.log(format!("{what} -> dropped")),
                        }
                    } else {
                        self.out.accept(&data);
                        unflushed.get_or_insert(at);
                        let what = format!("  Compat write_all({n}) at out {at} [{w:?}]");
                        match bounded(&what, wrap(w, FWrite::write_all(&mut c, &data))).await? {
                            Out::Done(Ok(())) => self.log(format!("{what} -> Ok")),
                            Out::Done(Err(e)) => return Err(format!("{what} failed: {e}")),
                            Out::Dropped => {
                                self.out.window(at, at + n);
                                self.log(format!("{what} -> dropped (a prefix may arrive)"));
                            }
                        }
                    }
                }
                2 => {
                    let w = Wrap::draw(&mut self.rng, 5, false);
                    let what = format!("  Compat flush [{w:?}]");
                    match bounded(&what, wrap(w, FWrite::flush(&mut c))).await? {
                        Out::Done(Ok(())) => {
                            unflushed = None;
                            self.log(format!("{what} -> Ok"));
                        }
                        Out::Done(Err(e)) => return Err(format!("{what} failed: {e}")),
                        Out::Dropped => self.log(format!("{what} -> dropped")),
                    }
                }
                k @ 3..=4 => {
                    let exact = k == 4;
                    let n = self.rng.size(64 << 10);
                    self.ensure(if exact { n as u64 } else { 1 });
                    let w = Wrap::draw(&mut self.rng, 8, false);
                    let mut buf = vec![0u8; n];
                    let name = if exact { "read_exact" } else { "read" };
                    let what = format!("  Compat {name}({n}) at in {} [{w:?}]", self.inb.r());
                    let got = if exact {
                        let r =
                            bounded(&what, wrap(w, FRead::read_exact(&mut c, &mut buf))).await?;
                        map_out(r, |()| n)
                    } else {
                        bounded(&what, wrap(w, FRead::read(&mut c, &mut buf))).await?
                    };
                    let got = map_out(got, |k| buf[..k].to_vec());
                    // A dropped `read` is cancel safe (net/mod.rs); a
                    // dropped `read_exact` loses what it had placed.
                    self.read_outcome(&what, got, if exact { n as u64 } else { 0 })?;
                }
                5 => self.pause(),
                _ => self.compat_read_then_smaller(&mut c).await?,
            }
        }
        if self.rng.pct(50) || self.skip.compat_unflushed {
            let what = "  Compat flush (before leaving)";
            bounded(what, FWrite::flush(&mut c))
                .await?
                .map_err(|e| format!("{what} failed: {e}"))?;
            unflushed = None;
            self.log(what);
        }
        if self.rng.pct(50) {
            drop(c);
            // Nothing documents losing accepted bytes on drop: the module
            // docs promise "bytes a write accepted leave without any later
            // poll".
            self.log(format!("  Compat dropped (unflushed from {unflushed:?})"));
        } else {
            drop(c.into_inner());
            // `into_inner`: nothing the adaptor holds is lost; its send in
            // flight goes on and later writes wait for it.
            self.log(format!(
                "  Compat::into_inner (unflushed from {unflushed:?})"
            ));
        }
        // Bytes received into the adaptor and not handed out go to the
        // stream's next receive (`into_inner`; the module docs on Drop:
        // this script holds a clone of the stream).
        Ok(())
    }

    /// A `Compat` read polled once and dropped while its receive waits,
    /// then a smaller read: the receive lands in the adaptor with more
    /// than the second read asks, and the rest is handed out by later
    /// reads (a dropped `read` loses nothing). So a read polled again with
    /// a smaller buffer, as a codec's does, takes part of what the
    /// adaptor holds.
    async fn compat_read_then_smaller(&mut self, c: &mut Compat<S>) -> Res {
        let big = 2 + self.rng.size(64 << 10);
        let mut buf = vec![0u8; big];
        let what = format!("  Compat read({big}) polled once at in {}", self.inb.r());
        let first = {
            let mut read = FRead::read(&mut *c, &mut buf);
            std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut read).poll(cx))).await
        };
        match first {
            Poll::Ready(done) => {
                let got = Out::Done(done.map(|k| buf[..k].to_vec()));
                self.read_outcome(&what, got, 0)?;
            }
            Poll::Pending => self.log(format!("{what} -> pending, dropped")),
        }
        self.ensure(big as u64);
        let n = self.rng.size(big - 1);
        let mut buf = vec![0u8; n];
        let what = format!("  Compat read({n}) after it at in {}", self.inb.r());
        let got = bounded(&what, FRead::read(&mut *c, &mut buf)).await?;
        let got = map_out(Out::Done(got), |k| buf[..k].to_vec());
        self.read_outcome(&what, got, 0)
    }

    async fn bufreader_phase(&mut self) -> Res {
        let cap = self.rng.size(32 << 10);
        let mut br = BufReader::with_capacity(cap, self.s.clone());
        self.log(format!("BufReader::with_capacity({cap})"));
        for _ in 0..1 + self.rng.below(8) {
            match self.rng.weighted(&[15, 8, 5]) {
                0 => {
                    if br.buffer().is_empty() {
                        self.ensure(1);
                    }
                    let w = Wrap::draw(&mut self.rng, 5, false);
                    let what = format!("  fill_buf+consume at in {} [{w:?}]", self.inb.r());
                    let got = bounded(&what, wrap(w, br.fill_buf())).await?;
                    let got = map_out(got, <[u8]>::to_vec);
                    let got = map_out(got, |mut b| {
                        let k = 1 + self.rng.below(b.len().max(1) as u64) as usize;
                        b.truncate(k);
                        b
                    });
                    if let Out::Done(Ok(b)) = &got {
                        br.consume(b.len());
                    }
                    // BufReader: a dropped refill loses what its read was
                    // receiving.
                    self.read_outcome(&what, got, cap as u64)?;
                }
                1 => {
                    let n = self.rng.size(64 << 10);
                    self.ensure(n as u64);
                    let w = Wrap::draw(&mut self.rng, 5, false);
                    let what =
                        format!("  BufReader read_exact({n}) at in {} [{w:?}]", self.inb.r());
                    let buf = vec![0u8; n].into_boxed_slice();
                    let got =
                        bounded(&what, wrap(w, AsyncReadExt::read_exact(&mut br, buf))).await?;
                    let got = match got {
                        Out::Done((res, b)) => Out::Done(res.map(|()| b)),
                        Out::Dropped => Out::Dropped,
                    };
                    self.read_outcome(&what, got, (n + cap) as u64)?;
                }
                _ => {
                    let n = self.write_size();
                    let data = self.out.next_bytes(n);
                    let at = self.out.len();
                    self.out.accept(&data);
                    let w = Wrap::draw(&mut self.rng, 3, false);
                    let what = format!("  BufReader write_all({n}) at out {at} [{w:?}]");
                    match bounded(&what, wrap(w, AsyncWriteExt::write_all(&mut br, data))).await? {
                        Out::Done((Ok(()), _)) => self.log(format!("{what} -> Ok")),
                        Out::Done((Err(e), _)) => return Err(format!("{what} failed: {e}")),
                        Out::Dropped => {
                            self.out.window(at, at + n);
                            self.log(format!("{what} -> dropped"));
                        }
                    }
                }
            }
        }
        let rest = br.buffer().to_vec();
        self.log(format!(
            "  BufReader dropped, {} bytes buffered",
            rest.len()
        ));
        self.inb.check(&rest)
    }

    async fn op_framed(&mut self) -> Res {
        let mut f = LengthDelimited::new(self.s.clone());
        for _ in 0..1 + self.rng.below(4) {
            let len = self.rng.size(100 << 10);
            let at = self.out.len();
            self.out.accept(&(len as u32).to_be_bytes());
            let payload = self.out.next_bytes(len);
            self.out.accept(&payload);
            let w = Wrap::draw(&mut self.rng, 3, false);
            let what = format!("framed write_frame({len}) at out {at} [{w:?}]");
            match bounded(&what, wrap(w, f.write_frame(&payload))).await? {
                Out::Done(Ok(())) => self.log(format!("{what} -> Ok")),
                Out::Done(Err(e)) => return Err(format!("{what} failed: {e}")),
                Out::Dropped => {
                    self.out.window(at, self.out.len());
                    self.log(format!("{what} -> dropped"));
                }
            }
        }
        bounded("framed flush", f.flush())
            .await?
            .map_err(|e| format!("framed flush failed: {e}"))
    }

    async fn op_split(&mut self) -> Res {
        let (mut rh, mut wh) = spargio::io::split(self.s.clone());
        let wn = self.write_size();
        let data = self.out.next_bytes(wn);
        let at = self.out.len();
        self.out.accept(&data);
        let writer = self
            .h
            .spawn_stealable(async move {
                let (res, _) = AsyncWriteExt::write_all(&mut wh, data).await;
                (res, wh)
            })
            .map_err(|e| format!("spawn: {e}"))?;
        let rn = self.rng.size(128 << 10);
        self.ensure(rn as u64);
        let what = format!(
            "split: write_all({wn}) at out {at} while read_exact({rn}) at in {}",
            self.inb.r()
        );
        let buf = vec![0u8; rn].into_boxed_slice();
        let (res, buf) = bounded(&what, AsyncReadExt::read_exact(&mut rh, buf)).await?;
        res.map_err(|e| format!("{what}: read failed: {e}"))?;
        self.log(&what);
        self.inb.check(&buf)?;
        let (res, wh) = bounded(&what, writer)
            .await?
            .map_err(|e| format!("{what}: writer task: {e}"))?;
        res.map_err(|e| format!("{what}: write failed: {e}"))?;
        rh.reunite(wh).map_err(|e| format!("reunite: {e}"))?;
        Ok(())
    }

    async fn close_write(&mut self) -> Res {
        if self.rng.pct(30) {
            let mut c = Compat::new(self.s.clone());
            let n = self.write_size();
            let data = self.out.next_bytes(n);
            let at = self.out.len();
            self.out.accept(&data);
            let what = format!("end: Compat write_all({n}) at out {at}, then close");
            bounded(&what, FWrite::write_all(&mut c, &data))
                .await?
                .map_err(|e| format!("{what} failed: {e}"))?;
            bounded(&what, FWrite::close(&mut c))
                .await?
                .map_err(|e| format!("{what}: close failed: {e}"))?;
            self.log(what);
        } else {
            bounded("end: shutdown(Write)", self.s.shut_write())
                .await?
                .map_err(|e| format!("shutdown(Write) failed: {e}"))?;
            self.log("end: shutdown(Write)");
        }
        Ok(())
    }

    async fn end(&mut self) -> Result<End, String> {
        if self.tcp && self.rng.pct(15) {
            self.peer.reset();
            self.log("end: the peer resets the connection");
            for _ in 0..3 {
                let what = format!("  recv_owned after the reset at in {}", self.inb.r());
                match bounded(&what, self.s.recv_o(Vec::with_capacity(64 << 10))).await? {
                    Ok((0, _)) | Err(_) => break,
                    Ok((_, b)) => {
                        self.log(format!("{what} -> {} bytes", b.len()));
                        self.inb.check(&b)?;
                    }
                }
            }
            return Ok(End::Reset);
        }
        self.peer.shutdown_write();
        self.log(format!(
            "end: the peer shuts its writes down after {} bytes",
            self.inb.committed
        ));
        let close_first = self.rng.pct(50);
        if close_first {
            self.close_write().await?;
        }
        loop {
            let what = format!("end: drain recv_owned at in {}", self.inb.r());
            let b = bounded(&what, self.s.recv_o(Vec::with_capacity(64 << 10)))
                .await?
                .map_err(|e| format!("{what} failed: {e}"))?
                .1;
            if b.is_empty() {
                break;
            }
            self.inb.check(&b)?;
        }
        if !self.inb.at_end() {
            return Err(format!(
                "inbound: end of stream after {} bytes, but the peer sent {}: bytes {}..{} never arrived",
                self.inb.r(),
                self.inb.committed,
                self.inb.r(),
                self.inb.committed
            ));
        }
        self.log(format!("end: read to end of stream at in {}", self.inb.r()));
        if !close_first {
            self.close_write().await?;
        }
        Ok(End::Graceful)
    }
}

/// Awaits `f`, failing the run if it does not end within [`HANG`].
async fn bounded<F: Future>(what: &str, f: F) -> Result<F::Output, String> {
    spargio::time::timeout(HANG, f).await.map_err(|_| {
        // Where the runtime stands, for the report.
        let state = spargio::ShardCtx::current().map_or_else(String::new, |ctx| {
            let stats = ctx.handle().stats_snapshot();
            stats
                .shards
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    format!(
                        "\n  shard {i}: {} tasks, queue {}+{}, inbox {}, ops {:?}",
                        s.live_tasks,
                        s.local_queue_depth,
                        s.queue_depth,
                        s.command_depth,
                        s.ops_in_flight
                    )
                })
                .collect()
        });
        format!("hang: {what} did not end within {HANG:?}{state}")
    })
}

fn map_out<T, U, E>(o: Out<Result<T, E>>, f: impl FnOnce(T) -> U) -> Out<Result<U, E>> {
    match o {
        Out::Done(r) => Out::Done(r.map(f)),
        Out::Dropped => Out::Dropped,
    }
}
