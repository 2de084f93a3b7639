//! Our side: one task per stream opener and per accept kind, one task per
//! stream half (`send.rs`, `recv.rs`). A half runs a script of operations
//! drawn from its own generator (so what is drawn never depends on
//! timing), each wrapped at random (`ops.rs`: plain, timeout, a lost
//! race, a drop after a few polls, a steal, the other shard), and records
//! what it saw for the checks after the run (`check.rs`).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use spargio::JoinHandle;
use spargio::RuntimeHandle;
use spargio_quic::{quic_error, QuicConnection, QuicError, QuicRecvStream, QuicSendStream};

use crate::ops::{wrap, Out, Wrap};
use crate::plan::Shared;
use crate::recv::RecvHalf;
use crate::rng::Rng;
use crate::send::SendHalf;
use crate::{bounded_for, LONG};

/// Runs our side of every stream; the first failure, if any.
pub async fn run(
    h: RuntimeHandle,
    conn: QuicConnection,
    shared: Arc<Shared>,
) -> Result<(), String> {
    let mut tasks = Vec::new();
    for (i, sp) in shared.plan.streams.iter().enumerate() {
        if sp.ours_open {
            let opener = open_stream(h.clone(), conn.clone(), shared.clone(), i);
            tasks.push(h.spawn_stealable(opener).expect("spawn an opener"));
        }
    }
    for bi in [true, false] {
        let n = shared.plan.peer_opened(bi);
        if n > 0 {
            let acceptor = accept_streams(h.clone(), conn.clone(), shared.clone(), bi, n);
            tasks.push(h.spawn_stealable(acceptor).expect("spawn an acceptor"));
        }
    }
    join_all(tasks).await
}

async fn join_all(tasks: Vec<JoinHandle<Result<(), String>>>) -> Result<(), String> {
    let mut errors = Vec::new();
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(format!("a task of ours panicked: {e}")),
        }
    }
    match errors.is_empty() {
        true => Ok(()),
        false => Err(errors.join("\n")),
    }
}

/// How an error of ours is allowed to end what it ended.
pub enum Why {
    /// The peer stopped the stream.
    Stopped(u64),
    /// The peer reset the stream.
    Reset(u64),
    /// The connection is gone: only in a run that aborts it.
    Lost,
    /// `operation_timeout`, when the run sets one: as a dropped operation.
    TimedOut,
}

pub fn why(shared: &Shared, e: &io::Error) -> Option<Why> {
    match quic_error(e) {
        Some(QuicError::Stopped { code }) => Some(Why::Stopped(*code)),
        Some(QuicError::Reset { code }) => Some(Why::Reset(*code)),
        Some(QuicError::Connection(_)) if shared.plan.aborts() => Some(Why::Lost),
        _ if e.kind() == io::ErrorKind::TimedOut && shared.plan.op_timeout.is_some() => {
            Some(Why::TimedOut)
        }
        _ => None,
    }
}

async fn open_stream(
    h: RuntimeHandle,
    conn: QuicConnection,
    shared: Arc<Shared>,
    i: usize,
) -> Result<(), String> {
    let sp = shared.plan.streams[i].clone();
    spargio::time::sleep(Duration::from_millis(sp.delay_ms)).await;
    let mut rng = Rng::new(sp.half_seed(1));
    let (send, recv) = loop {
        let w = Wrap::draw(&mut rng, 4, false);
        let what = format!("s{i} open_{} [{w:?}]", if sp.bi { "bi" } else { "uni" });
        let open = async {
            match sp.bi {
                true => conn.open_bi().await.map(|(s, r)| (s, Some(r))),
                false => conn.open_uni().await.map(|s| (s, None)),
            }
        };
        // Opens wait for stream credit: for as long as earlier streams
        // live when the run limits them.
        match bounded_for(LONG, &what, wrap(w, open)).await? {
            Out::Done(Ok(pair)) => {
                shared.register(pair.0.id(), i);
                shared.log(format!("{what} -> id {}", pair.0.id()));
                break pair;
            }
            Out::Done(Err(e)) => match why(&shared, &e) {
                Some(Why::Lost) => {
                    shared.log(format!("{what} -> connection gone: {e}"));
                    return Ok(());
                }
                Some(Why::TimedOut) => shared.log(format!("{what} -> {e}")),
                _ => return Err(format!("{what} failed: {e}")),
            },
            Out::Dropped => shared.log(format!("{what} -> dropped")),
        }
    };
    run_halves(&h, &conn, shared, i, Some(send), recv).await
}

async fn accept_streams(
    h: RuntimeHandle,
    conn: QuicConnection,
    shared: Arc<Shared>,
    bi: bool,
    n: usize,
) -> Result<(), String> {
    let mut rng = Rng::new(shared.plan.seed ^ if bi { 0xacc1 } else { 0xacc2 });
    let mut halves = Vec::new();
    let mut got = 0;
    while got < n {
        let w = Wrap::draw(&mut rng, 4, false);
        let what = format!("accept_{} #{got} [{w:?}]", if bi { "bi" } else { "uni" });
        let accept = async {
            match bi {
                true => conn.accept_bi().await.map(|(s, r)| (Some(s), r)),
                false => conn.accept_uni().await.map(|r| (None, r)),
            }
        };
        match bounded_for(LONG, &what, wrap(w, accept)).await? {
            Out::Done(Ok((send, recv))) => {
                got += 1;
                let id = recv.id();
                let i = lookup(&shared, id).await?;
                shared.log(format!("{what} -> id {id}: s{i}"));
                let (h2, c2, s2) = (h.clone(), conn.clone(), shared.clone());
                let task = async move { run_halves(&h2, &c2, s2, i, send, Some(recv)).await };
                halves.push(h.spawn_stealable(task).expect("spawn the halves"));
            }
            Out::Done(Err(e)) => match why(&shared, &e) {
                Some(Why::Lost) => {
                    shared.log(format!("{what} -> connection gone: {e}"));
                    break;
                }
                Some(Why::TimedOut) => shared.log(format!("{what} -> {e}")),
                _ => return Err(format!("{what} failed: {e}")),
            },
            Out::Dropped => shared.log(format!("{what} -> dropped")),
        }
    }
    join_all(halves).await
}

/// The plan index the peer registered for `id` (it does before its first
/// write; an accept may see the stream a moment before).
async fn lookup(shared: &Shared, id: u64) -> Result<usize, String> {
    let start = std::time::Instant::now();
    loop {
        if let Some(i) = shared.lookup(id) {
            return Ok(i);
        }
        if start.elapsed() > crate::HANG {
            return Err(format!(
                "accepted stream id {id}, which the peer never opened"
            ));
        }
        spargio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Runs a stream's halves, each a task of its own.
async fn run_halves(
    h: &RuntimeHandle,
    conn: &QuicConnection,
    shared: Arc<Shared>,
    i: usize,
    send: Option<QuicSendStream>,
    recv: Option<QuicRecvStream>,
) -> Result<(), String> {
    let session = conn.shard().unwrap_or(0);
    let mut tasks = Vec::new();
    if let Some(s) = send {
        let half = SendHalf::new(h.clone(), session, shared.clone(), i, s);
        tasks.push(h.spawn_stealable(half.run()).expect("spawn a send half"));
    }
    if let Some(r) = recv {
        let half = RecvHalf::new(h.clone(), session, shared.clone(), i, r);
        tasks.push(h.spawn_stealable(half.run()).expect("spawn a recv half"));
    }
    join_all(tasks).await
}

/// Drops a half here, or on the other shard.
pub async fn drop_somewhere<H: Send + 'static>(
    h: &RuntimeHandle,
    session: usize,
    elsewhere: bool,
    half: H,
) {
    if !elsewhere {
        drop(half);
        return;
    }
    let other = (session + 1) % h.shard_count();
    let task = h.spawn_pinned(other, async move { drop(half) });
    let _ = task.expect("spawn a drop").await;
}
