//! The peer: quinn on a tokio runtime of its own. It opens its streams
//! and accepts ours, registers every stream it opens before its first
//! write (so our side can name it), and records every byte it receives
//! and every byte its writes took, with how each half ended.
//!
//! Its halves read and write in random chunks with random pauses (so our
//! writes meet flow control and our reads meet empty buffers); a stream
//! it echoes is read and written by one task, so the echo takes a chunk
//! only after the last one was taken.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use quinn::{ReadError, RecvStream, SendStream, VarInt, WriteError};

use crate::check::PeerEnd;
use crate::plan::{codes, lock, PeerRecv, PeerSend, Shared};
use crate::rng::{stream_bytes, Rng};
use crate::HANG;

/// Runs the peer's side of every stream on `conn`; marks the peer done.
pub async fn run(conn: quinn::Connection, shared: Arc<Shared>) {
    let mut tasks = Vec::new();
    for (i, sp) in shared.plan.streams.iter().enumerate() {
        if !sp.ours_open {
            tasks.push(tokio::spawn(open_stream(conn.clone(), shared.clone(), i)));
        }
    }
    for bi in [true, false] {
        let n = shared.plan.ours_opened(bi);
        if n > 0 {
            let acceptor = accept_streams(conn.clone(), shared.clone(), bi, n);
            tasks.push(tokio::spawn(acceptor));
        }
    }
    for t in tasks {
        if let Err(e) = t.await {
            fail(&shared, format!("a peer task panicked: {e}"));
        }
    }
    // Release: the records written above, read by our side after it sees
    // the flag (Acquire).
    shared.peer_done.store(true, Ordering::Release);
}

/// A failure of the peer's own (a connection lost in a run that does not
/// abort it, a stream nobody opened).
fn fail(shared: &Shared, msg: String) {
    shared.log(format!("peer: {msg}"));
    lock(&shared.peer_errors).push(msg);
}

fn lost(shared: &Shared, what: &str, e: impl std::fmt::Display) {
    let msg = format!("{what}: {e}");
    match shared.plan.aborts() {
        true => shared.log(format!("peer: {msg}")),
        false => fail(shared, msg),
    }
}

async fn open_stream(conn: quinn::Connection, shared: Arc<Shared>, i: usize) {
    let sp = shared.plan.streams[i].clone();
    tokio::time::sleep(Duration::from_millis(sp.delay_ms)).await;
    let opened = match sp.bi {
        true => conn.open_bi().await.map(|(s, r)| (s, Some(r))),
        false => conn.open_uni().await.map(|s| (s, None)),
    };
    let (send, recv) = match opened {
        Ok(pair) => pair,
        Err(e) => return lost(&shared, &format!("s{i} peer open"), e),
    };
    let id = VarInt::from(send.id()).into_inner();
    shared.register(id, i);
    shared.log(format!("s{i} peer opened id {id}"));
    halves(shared, i, Some(send), recv).await;
}

async fn accept_streams(conn: quinn::Connection, shared: Arc<Shared>, bi: bool, n: usize) {
    let mut tasks = Vec::new();
    for _ in 0..n {
        let accepted = match bi {
            true => conn.accept_bi().await.map(|(s, r)| (Some(s), r)),
            false => conn.accept_uni().await.map(|r| (None, r)),
        };
        let (send, recv) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                lost(&shared, "peer accept", e);
                break;
            }
        };
        let id = VarInt::from(recv.id()).into_inner();
        let Some(i) = lookup(&shared, id).await else {
            fail(
                &shared,
                format!("accepted stream id {id}, which we never opened"),
            );
            break;
        };
        shared.log(format!("s{i} peer accepted id {id}"));
        tasks.push(tokio::spawn(halves(shared.clone(), i, send, Some(recv))));
    }
    for t in tasks {
        if let Err(e) = t.await {
            fail(&shared, format!("a peer stream task panicked: {e}"));
        }
    }
}

async fn lookup(shared: &Shared, id: u64) -> Option<usize> {
    let start = std::time::Instant::now();
    while start.elapsed() < HANG {
        if let Some(i) = shared.lookup(id) {
            return Some(i);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    None
}

async fn halves(shared: Arc<Shared>, i: usize, send: Option<SendStream>, recv: Option<RecvStream>) {
    let sp = shared.plan.streams[i].clone();
    let mut rng = Rng::new(sp.half_seed(4));
    match (send, recv, sp.down) {
        (Some(send), Some(recv), Some(PeerSend::Echo)) => {
            echo(&shared, i, &mut rng, send, recv).await
        }
        (send, recv, down) => {
            let mut out_rng = Rng::new(sp.half_seed(5));
            let (s2, s3) = (shared.clone(), shared.clone());
            let reader =
                recv.map(|r| tokio::spawn(async move { receive(&s2, i, &mut rng, r).await }));
            let writer = send.zip(down).map(|(s, d)| {
                tokio::spawn(async move { transmit(&s3, i, &mut out_rng, s, d).await })
            });
            for t in reader.into_iter().chain(writer) {
                if let Err(e) = t.await {
                    fail(&shared, format!("s{i}: a peer half panicked: {e}"));
                }
            }
        }
    }
}

async fn pause(rng: &mut Rng) {
    if rng.pct(6) {
        tokio::time::sleep(Duration::from_millis(rng.below(12))).await;
    }
}

/// Reads to the end (or stops, as planned), recording every byte.
async fn receive(shared: &Shared, i: usize, rng: &mut Rng, mut recv: RecvStream) {
    let plan = shared.plan.streams[i].up.expect("a planned receive");
    let mut got = Vec::new();
    let end = loop {
        if let PeerRecv::StopAfter(n) = plan {
            if got.len() as u64 >= n {
                let code = codes::peer_stop(i);
                if let Err(e) = recv.stop(VarInt::from_u64(code).expect("a code")) {
                    fail(shared, format!("s{i} peer stop: {e}"));
                }
                break PeerEnd::Stop(code);
            }
        }
        match recv.read_chunk(rng.size(64 << 10), true).await {
            Ok(Some(c)) => got.extend_from_slice(&c.bytes),
            Ok(None) => break PeerEnd::Fin,
            Err(e) => break read_end(shared, i, e),
        }
        pause(rng).await;
    };
    shared.log(format!("s{i} peer received {} bytes, {end:?}", got.len()));
    shared.record(i, |r| {
        r.peer_in = got;
        r.peer_in_end = Some(end);
    });
}

fn read_end(shared: &Shared, i: usize, e: ReadError) -> PeerEnd {
    match e {
        ReadError::Reset(code) => PeerEnd::Reset(code.into_inner()),
        ReadError::ConnectionLost(e) => {
            lost(shared, &format!("s{i} peer read"), e);
            PeerEnd::Lost
        }
        e => {
            fail(shared, format!("s{i} peer read: {e}"));
            PeerEnd::Lost
        }
    }
}

/// Writes all of `data`, recording what each write took; how the stream
/// ended if it did.
async fn write(
    shared: &Shared,
    i: usize,
    send: &mut SendStream,
    data: &[u8],
    sent: &mut Vec<u8>,
) -> Result<(), PeerEnd> {
    let mut at = 0;
    while at < data.len() {
        // quinn-proto 0.11.19 answers a write on a stopped stream with
        // `Blocked` while the connection's credit is used up, and the
        // credit's return brings no wake to a stream without credit of
        // its own (the case `interop_quinn_stop.rs` fixed on our side):
        // the stop, awaited beside the write, ends it instead.
        let stopped = send.stopped();
        let written = tokio::select! {
            w = send.write(&data[at..]) => w,
            Ok(Some(code)) = stopped => Err(WriteError::Stopped(code)),
        };
        match written {
            Ok(k) => {
                sent.extend_from_slice(&data[at..at + k]);
                at += k;
            }
            Err(WriteError::Stopped(code)) => return Err(PeerEnd::Stop(code.into_inner())),
            Err(WriteError::ConnectionLost(e)) => {
                lost(shared, &format!("s{i} peer write"), e);
                return Err(PeerEnd::Lost);
            }
            Err(e) => {
                fail(shared, format!("s{i} peer write: {e}"));
                return Err(PeerEnd::Lost);
            }
        }
    }
    Ok(())
}

/// Sends the planned bytes, then finishes or resets.
async fn transmit(shared: &Shared, i: usize, rng: &mut Rng, mut send: SendStream, plan: PeerSend) {
    let mut sent = Vec::new();
    let (key, len) = match plan {
        PeerSend::Keyed { key, len } | PeerSend::ResetAfter { key, len } => (key, len),
        _ => (0, 0),
    };
    let mut end = None;
    while sent.len() < len && end.is_none() {
        let n = rng.size(64 << 10).min(len - sent.len());
        let chunk = stream_bytes(key, sent.len() as u64, n);
        end = write(shared, i, &mut send, &chunk, &mut sent).await.err();
        pause(rng).await;
    }
    let end = end.unwrap_or_else(|| match plan {
        PeerSend::ResetAfter { .. } => {
            let code = codes::peer_reset(i);
            match send.reset(VarInt::from_u64(code).expect("a code")) {
                Ok(()) => PeerEnd::Reset(code),
                Err(e) => {
                    fail(shared, format!("s{i} peer reset: {e}"));
                    PeerEnd::Lost
                }
            }
        }
        _ => finish(shared, i, &mut send),
    });
    shared.log(format!("s{i} peer sent {} bytes, {end:?}", sent.len()));
    shared.record(i, |r| {
        r.peer_out = sent;
        r.peer_out_end = Some(end);
    });
}

fn finish(shared: &Shared, i: usize, send: &mut SendStream) -> PeerEnd {
    match send.finish() {
        Ok(()) => PeerEnd::Fin,
        Err(e) => {
            lost(shared, &format!("s{i} peer finish"), e);
            PeerEnd::Lost
        }
    }
}

/// Echoes what arrives as it arrives; mirrors a FIN with a finish and a
/// reset with a reset of its own.
async fn echo(
    shared: &Shared,
    i: usize,
    rng: &mut Rng,
    mut send: SendStream,
    mut recv: RecvStream,
) {
    let (mut got, mut sent) = (Vec::new(), Vec::new());
    let mut out_end = None;
    let in_end = loop {
        match recv.read_chunk(rng.size(64 << 10), true).await {
            Ok(Some(c)) => {
                got.extend_from_slice(&c.bytes);
                if out_end.is_none() {
                    out_end = write(shared, i, &mut send, &c.bytes, &mut sent).await.err();
                }
            }
            Ok(None) => break PeerEnd::Fin,
            Err(e) => break read_end(shared, i, e),
        }
        pause(rng).await;
    };
    let out_end = out_end.unwrap_or_else(|| match in_end {
        PeerEnd::Fin => finish(shared, i, &mut send),
        PeerEnd::Reset(_) => {
            let code = codes::echo_reset(i);
            match send.reset(VarInt::from_u64(code).expect("a code")) {
                Ok(()) => PeerEnd::Reset(code),
                Err(e) => {
                    fail(shared, format!("s{i} peer reset: {e}"));
                    PeerEnd::Lost
                }
            }
        }
        _ => PeerEnd::Lost,
    });
    shared.log(format!(
        "s{i} peer echo: received {} bytes, {in_end:?}; sent {}, {out_end:?}",
        got.len(),
        sent.len()
    ));
    shared.record(i, |r| {
        r.peer_in = got;
        r.peer_in_end = Some(in_end);
        r.peer_out = sent;
        r.peer_out_end = Some(out_end);
    });
}
