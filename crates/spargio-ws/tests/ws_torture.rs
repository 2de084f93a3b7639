//! Randomized, seed-reproducible torture of spargio-ws's WebSocket on real
//! sockets: spargio's byte-stream torture (`spargio/tests/torture.rs`)
//! one layer up, in messages.
//!
//! # Design
//!
//! Each run draws a `u64` seed. From it (`spargio/tests/torture/rng.rs`) a
//! script of operations is drawn one at a time (`ws_torture/script.rs`) and
//! run on one WebSocket over TCP loopback (small socket buffers in half the
//! runs): our side is a spargio-ws `WsStream`, client or server at random,
//! in a stealable task of a 2-shard runtime; the peer is tungstenite on a
//! blocking std socket, on a thread of its own (`ws_torture/peer.rs`). The
//! peer records every message it receives, sends known messages on demand
//! (message `i`, pings among them, is a function of the seed and `i`),
//! stops reading for a while (so our socket buffer fills), and at the end
//! closes, answers our close, or resets.
//!
//! Operations: sends of binary and text messages of 0 bytes to 300 KiB
//! and of pings (`WsStreamExt::send_message` and `ping`, `SinkExt::send`,
//! `SinkExt::feed` then later `flush`), receives (`WsStreamExt::recv`,
//! `StreamExt::next`), and the split halves (a task sending through the
//! `WsSender` while this one receives through the `WsReceiver`, then
//! `reunite`). Each runs plainly, in a `timeout` of a random short
//! duration, in a race it loses, polled a few times then dropped, or with
//! the stream moved into a stealable task or one on the other shard
//! (`spargio/tests/torture/ops.rs`). The run ends with our close handshake
//! (`close_with`, or `SinkExt::close` then receives to the end), the
//! peer's, our stream dropped (flushed first or not), or the peer's reset.
//!
//! # Invariants (`ws_torture/messages.rs`)
//!
//! * Every message whose send reported Ok arrives exactly once, in order,
//!   whole; a send dropped before it reported delivers its message whole
//!   or not at all. A stream dropped unclosed loses only messages queued
//!   after the last completed flush (`feed` does not flush).
//! * Every receive returns the peer's next message, whole (receives are
//!   cancel safe); pongs answer our pings in order, and the peer's pongs
//!   answer its pings.
//! * Every operation ends within 10 s; a close handshake ends the
//!   connection on both sides with every message received; the runtime
//!   drops, and the process's fds come back to their count before the run.
//!
//! # Running
//!
//! * `cargo test -p spargio-ws --test ws_torture`: 16 seeds or about 12 s.
//! * `TORTURE_SEED=n`, `TORTURE_BASE=n`, `TORTURE_SECONDS=n` as in
//!   `spargio/tests/torture.rs`; `scripts/torture.sh SECONDS` runs it on
//!   io_uring and epoll, each with and without injected faults.

#[path = "../../spargio-tls/tests/tls_torture/driver.rs"]
mod driver;
#[allow(dead_code)] // the helpers the core torture uses too
#[path = "../../../spargio/tests/torture/fds.rs"]
mod fds;
#[path = "ws_torture/messages.rs"]
mod messages;
// Only the op trace; its byte models are for byte streams.
#[allow(dead_code)]
#[path = "../../../spargio/tests/torture/model.rs"]
mod model;
// Only the wrappers (`Wrap`, `wrap`, `spawned`); its `Sock` is for TCP
// and Unix streams.
#[allow(dead_code)]
#[path = "../../../spargio/tests/torture/ops.rs"]
mod ops;
#[path = "ws_torture/peer.rs"]
mod peer;
#[path = "../../../spargio/tests/torture/rng.rs"]
mod rng;
#[path = "ws_torture/script.rs"]
mod script;

use driver::{bounded, HANG};
use fds::Fds;
use messages::{check_pongs, Inbound, Outbound};
use model::Trace;
use peer::Peer;
use rng::Rng;
use script::{Ctx, End};
use spargio_ws::Message;

#[test]
fn ws_torture() {
    driver::main(
        "ws_torture",
        "cargo test -p spargio-ws --test ws_torture",
        run,
    );
}

/// One run: the op count, or what failed.
fn run(seed: u64, trace: Trace) -> Result<u64, String> {
    let fds = Fds::now();
    let mut rng = Rng::new(seed);
    let ours_client = rng.pct(50);
    trace.push(format!(
        "run seed {seed}: ours the WebSocket {}",
        if ours_client { "client" } else { "server" }
    ));
    let (ours, theirs) = driver::tcp_pair(&mut rng, &trace)?;
    let rt = spargio::RuntimeBuilder::new()
        .shards(2)
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let h = rt.handle();
    let tcp = spargio::net::TcpStream::from_std(&h, ours).map_err(|e| e.to_string())?;
    let peer_key = rng::peer_key(seed);
    let mut ctx = Ctx {
        h: h.clone(),
        ws: None,
        peer: Peer::start(theirs, ours_client, peer_key),
        inb: Inbound::new(peer_key),
        out: Outbound::default(),
        key: Rng::new(seed ^ 0x4f55_5442).next_u64(),
        unflushed: None,
        rng,
        trace: trace.clone(),
        ops: 0,
    };
    let join = h
        .spawn_stealable(async move {
            let what = "the WebSocket handshake";
            let ws = if ours_client {
                let connect =
                    spargio_ws::WsConnector::new().handshake(tcp, "ws://localhost/torture");
                bounded(what, connect).await.map(|r| r.map(|(ws, _)| ws))
            } else {
                bounded(what, spargio_ws::accept(tcp)).await
            };
            let res = match ws {
                Ok(Ok(ws)) => {
                    ctx.ws = Some(ws);
                    ctx.run().await
                }
                Ok(Err(e)) => Err(format!("{what} failed: {e}")),
                Err(e) => Err(e),
            };
            ctx.ws = None;
            (res, ctx.peer, ctx.inb, ctx.out, ctx.ops)
        })
        .expect("spawn the script");
    let (res, peer, inb, out, ops) = spargio::block_on(join).expect("the script panicked");
    let end = res?;
    let report = peer.finish(HANG);
    let mut received = report.received;
    // The close frame is the end, not a message.
    let close = match received.last() {
        Some(Message::Close(_)) => received.pop(),
        _ => None,
    };
    trace.push(format!(
        "peer: received {} messages, {} pongs, close {:?}, ended with {}, send error {:?}",
        received.len(),
        report.pongs.len(),
        close,
        report.end,
        report.write_error
    ));
    let peer_pings: Vec<Vec<u8>> = (0..inb.committed)
        .filter_map(|i| match messages::peer_message(peer_key, i) {
            Message::Ping(p) => Some(p.to_vec()),
            _ => None,
        })
        .collect();
    check_pongs(&peer_pings, &report.pongs, "the peer's pongs")?;
    match end {
        End::Closed => {
            if report.end != "closed" {
                return Err(format!(
                    "peer: expected the close handshake and the end, it ended with {}",
                    report.end
                ));
            }
            if close.is_none() {
                return Err("peer: the connection ended without our close frame".into());
            }
            if let Some(e) = report.write_error {
                return Err(format!("peer: a send failed: {e}"));
            }
            out.check(&received, out.len())?;
        }
        End::Dropped { certain_to } => {
            // The end of the stream without a close frame; a reset if our
            // socket closed with bytes unread (the kernel drops what it had
            // not sent), which a send may meet before the read sees the end.
            let clean =
                report.end.contains("without closing handshake") && report.write_error.is_none();
            out.check(&received, if clean { certain_to } else { 0 })?;
        }
        End::Reset => out.check(&received, 0)?,
    }
    drop(h);
    drop(rt);
    fds.back()?;
    Ok(ops)
}
