//! The connection: the endpoints and their configs, the handshake, both
//! sides run, and the planned end, checked from both sides; our endpoint
//! closed and drained.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{TransportConfig, VarInt};
use spargio::RuntimeHandle;
use spargio_quic::{
    ConnectionError, NativeProtoDriver, NativeProtoFaultSpec, QuicConnection, QuicEndpoint,
    QuicEndpointOptions,
};

use crate::check::{PeerEnd, RecvEnd};
use crate::common::{TestCerts, ALPN, SERVER_NAME};
use crate::plan::{codes, lock, Plan, RunEnd, Shared};
use crate::{bounded, bounded_for, HANG, IDLE, LONG};
use crate::{ours, peer};

fn certs() -> &'static TestCerts {
    static CERTS: OnceLock<TestCerts> = OnceLock::new();
    CERTS.get_or_init(TestCerts::generate)
}

fn transport(plan: &Plan) -> Arc<TransportConfig> {
    let mut t = TransportConfig::default();
    // Within `HANG`: a close that never arrives (see `close_may_stall`)
    // ends by it.
    t.max_idle_timeout(Some(IDLE.try_into().expect("idle")));
    if let Some(w) = plan.window {
        t.stream_receive_window(VarInt::from_u32(w));
        t.receive_window(VarInt::from_u32(w * 4));
    }
    if let Some(n) = plan.stream_limit {
        t.max_concurrent_bidi_streams(VarInt::from_u32(n));
        t.max_concurrent_uni_streams(VarInt::from_u32(n));
    }
    Arc::new(t)
}

fn server_config(plan: &Plan) -> quinn::ServerConfig {
    let crypto = QuicServerConfig::try_from(certs().rustls_server_config(&[ALPN]))
        .expect("QUIC server crypto");
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(transport(plan));
    config
}

fn client_config(plan: &Plan) -> quinn::ClientConfig {
    let crypto = QuicClientConfig::try_from(certs().rustls_client_config(&[ALPN]))
        .expect("QUIC client crypto");
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(transport(plan));
    config
}

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().expect("an address")
}

/// The peer's side of the handshake.
type PeerConnecting =
    std::pin::Pin<Box<dyn Future<Output = Result<quinn::Connection, String>> + Send>>;

/// Makes the connection, runs both sides, closes everything.
pub fn connect_and_run(
    h: &RuntimeHandle,
    prt: &tokio::runtime::Runtime,
    shared: &Arc<Shared>,
) -> Result<(), String> {
    let plan = &shared.plan;
    let options = QuicEndpointOptions::default()
        .with_backend(plan.backend)
        .with_operation_timeout(plan.op_timeout);
    let (ours, peer_ep, connecting): (_, _, PeerConnecting) = match plan.ours_client {
        true => {
            let peer_ep = {
                let _rt = prt.enter();
                quinn::Endpoint::server(server_config(plan), localhost())
                    .map_err(|e| format!("peer endpoint: {e}"))?
            };
            let ep = peer_ep.clone();
            let incoming = Box::pin(async move {
                let incoming = ep.accept().await.ok_or("the peer endpoint closed")?;
                incoming.await.map_err(|e| format!("peer handshake: {e}"))
            });
            let ours = QuicEndpoint::client_with_options(h, localhost(), options)
                .map_err(|e| format!("our endpoint: {e}"))?;
            ours.set_default_client_config(client_config(plan));
            (ours, peer_ep, incoming)
        }
        false => {
            let ours =
                QuicEndpoint::server_with_options(h, localhost(), server_config(plan), options)
                    .map_err(|e| format!("our endpoint: {e}"))?;
            let addr = ours.local_addr().map_err(|e| e.to_string())?;
            let peer_ep = {
                let _rt = prt.enter();
                quinn::Endpoint::client(localhost()).map_err(|e| format!("peer endpoint: {e}"))?
            };
            let (ep, config) = (peer_ep.clone(), client_config(plan));
            // Inside the peer's runtime: quinn spawns the connection's
            // driver there.
            let outgoing = Box::pin(async move {
                let connecting = ep
                    .connect_with(config, addr, SERVER_NAME)
                    .map_err(|e| format!("peer connect: {e}"))?;
                connecting.await.map_err(|e| format!("peer handshake: {e}"))
            });
            (ours, peer_ep, outgoing)
        }
    };
    if let Some(spec) = plan.faults {
        for d in ours.drivers() {
            d.set_fault_spec(spec).map_err(|e| format!("faults: {e}"))?;
        }
    }
    let peer_addr = peer_ep.local_addr().map_err(|e| e.to_string())?;
    let s = shared.clone();
    let peer = prt.spawn(async move {
        let conn = match connecting.await {
            Ok(c) => c,
            Err(e) => {
                s.log(format!("peer: {e}"));
                lock(&s.peer_errors).push(e);
                s.peer_done.store(true, Ordering::Release);
                return;
            }
        };
        *lock(&s.peer_conn) = Some(conn.clone());
        if let RunEnd::Abort {
            by_peer: true,
            after_ms,
        } = s.plan.end
        {
            let (c, s2) = (conn.clone(), s.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(after_ms)).await;
                s2.log("abort: the peer closes the connection".into());
                c.close(VarInt::from_u32(codes::ABORT), b"abort");
            });
        }
        peer::run(conn, s).await;
    });
    let s = shared.clone();
    let h2 = h.clone();
    let peer_server = plan.ours_client.then_some(peer_addr);
    let ours_task = h
        .spawn_stealable(async move { ours_main(h2, ours, s, peer_server).await })
        .map_err(|e| format!("spawn: {e}"))?;
    let res = spargio::block_on(ours_task).map_err(|e| format!("our side panicked: {e}"))?;
    let peer_res = prt.block_on(async { tokio::time::timeout(HANG, peer).await });
    peer_ep.close(VarInt::from_u32(0), b"");
    let idle = prt.block_on(async { tokio::time::timeout(HANG, peer_ep.wait_idle()).await });
    drop(peer_ep);
    res?;
    match peer_res {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(format!("the peer panicked: {e}")),
        Err(_) => return Err(format!("hang: the peer did not end within {HANG:?}")),
    }
    idle.map_err(|_| format!("hang: the peer endpoint did not drain within {HANG:?}"))
}

/// Our side: connects or accepts, runs the streams, waits for the peer,
/// closes as planned, checks `closed()`, closes and drops the endpoint.
async fn ours_main(
    h: RuntimeHandle,
    ep: QuicEndpoint,
    shared: Arc<Shared>,
    peer_server: Option<SocketAddr>,
) -> Result<(), String> {
    let conn = match peer_server {
        Some(addr) => bounded("connect", ep.connect(addr, SERVER_NAME)).await?,
        None => bounded("accept", ep.accept()).await?,
    }
    .map_err(|e| format!("connection: {e}"))?;
    shared.log(format!(
        "connected: ours on shard {:?} ({:?})",
        conn.shard(),
        ep.backend()
    ));
    if let RunEnd::Abort {
        by_peer: false,
        after_ms,
    } = shared.plan.end
    {
        let (c, s) = (conn.clone(), shared.clone());
        let closer = async move {
            spargio::time::sleep(Duration::from_millis(after_ms)).await;
            s.log("abort: we close the connection".into());
            c.close(codes::ABORT.into(), b"abort");
        };
        h.spawn_stealable(closer).expect("spawn the closer");
    }
    if let RunEnd::Abort { after_ms, .. } = shared.plan.end {
        let (drivers, s) = (ep.drivers().to_vec(), shared.clone());
        let off = async move {
            spargio::time::sleep(Duration::from_millis(after_ms)).await;
            faults_off(&s, &drivers);
        };
        h.spawn_stealable(off).expect("spawn the faults' end");
    }
    let res = ours::run(h.clone(), conn.clone(), shared.clone()).await;
    // What the drivers saw, while the connection still exists: a failure
    // of ours reports it.
    let res = res.map_err(|e| format!("{e}\n{}", drivers_report(&ep)));
    // The peer's tasks end once every stream has ended on its side.
    let waited = bounded_for(LONG, "the peer's streams", async {
        // Acquire: pairs with the peer's Release; its records are then
        // complete.
        while !shared.peer_done.load(Ordering::Acquire) {
            spargio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    let ended = end_connection(conn, ep, &shared).await;
    res?;
    waited?;
    ended
}

/// Ends the connection as planned, checks how it ended, closes and drops
/// our endpoint.
async fn end_connection(
    conn: QuicConnection,
    ep: QuicEndpoint,
    shared: &Shared,
) -> Result<(), String> {
    let end = shared.plan.end;
    faults_off(shared, ep.drivers());
    if let RunEnd::DropOurs { endpoint_first } = end {
        // rustdoc: "When the last clone and the last stream of the
        // connection are dropped, the connection is closed with code 0";
        // and of the endpoint: "When the last clone is dropped, every
        // connection is closed (code 0), the drivers stop and the UDP
        // sockets are closed."
        let why = if endpoint_first {
            drop(ep);
            shared.log("dropped our endpoint".into());
            let why = bounded("the peer's view of the close", peer_closed(shared))
                .await
                .and_then(|r| r);
            drop(conn);
            why
        } else {
            drop(conn);
            shared.log("dropped our connection".into());
            let why = bounded("the peer's view of the close", peer_closed(shared))
                .await
                .and_then(|r| r);
            drain(&ep).await?;
            why
        };
        shared.log(format!("the peer's close reason -> {why:?}"));
        let why = why?;
        let stalled = matches!(
            why,
            quinn::ConnectionError::TimedOut | quinn::ConnectionError::Reset
        ) && close_may_stall(shared, true);
        let zero = matches!(&why, quinn::ConnectionError::ApplicationClosed(c) if c.error_code == VarInt::from_u32(0));
        if !zero && !stalled {
            return Err(format!(
                "{end:?}: the peer saw {why:?}, not a close with code 0"
            ));
        }
        return Ok(());
    }
    match end {
        RunEnd::CloseOurs => conn.close(codes::CLOSE_OURS.into(), b"done"),
        RunEnd::ClosePeer => {
            if let Some(c) = lock(&shared.peer_conn).as_ref() {
                c.close(VarInt::from_u32(codes::CLOSE_PEER), b"done");
            }
        }
        _ => {}
    }
    let why = bounded("closed()", conn.closed()).await;
    shared.log(format!("closed() -> {why:?}"));
    drop(conn);
    let idle = drain(&ep).await;
    drop(ep);
    let why = why?;
    let expected = match (&why, end) {
        (ConnectionError::LocallyClosed, RunEnd::CloseOurs)
        | (ConnectionError::LocallyClosed, RunEnd::Abort { by_peer: false, .. }) => true,
        (ConnectionError::ApplicationClosed(c), RunEnd::ClosePeer) => {
            c.error_code == VarInt::from_u32(codes::CLOSE_PEER)
        }
        (ConnectionError::ApplicationClosed(c), RunEnd::Abort { by_peer: true, .. }) => {
            c.error_code == VarInt::from_u32(codes::ABORT)
        }
        (
            ConnectionError::Reset | ConnectionError::TimedOut,
            RunEnd::ClosePeer | RunEnd::Abort { by_peer: true, .. },
        ) => close_may_stall(shared, false),
        _ => false,
    };
    if !expected {
        return Err(format!("closed() said {why:?} for {end:?}"));
    }
    idle
}

/// Closes our endpoint and waits for its connections to drain; a hang
/// reports where each driver stands.
async fn drain(ep: &QuicEndpoint) -> Result<(), String> {
    ep.close(0, b"");
    match spargio::time::timeout(HANG, ep.wait_idle()).await {
        Ok(res) => res.map_err(|e| format!("our endpoint's wait_idle: {e}")),
        Err(_) => Err(format!(
            "hang: our endpoint's wait_idle did not end within {HANG:?}\n{}",
            drivers_report(ep)
        )),
    }
}

/// Where each of our drivers stands: its counters, the faults it
/// injected, its connections.
fn drivers_report(ep: &QuicEndpoint) -> String {
    let mut report = String::from("---- our drivers ----");
    for d in ep.drivers() {
        let p = d.probe();
        let s = d.stats();
        report += &format!(
            "\n  driver on shard {}: {} connections, closed {}, registered {}, closed {}, \
             dealt {}, moves {}, datagrams in {} out {}, send errors {}, receive errors {}, \
             faults {:?}, timers {:?}",
            p.owner_shard,
            p.connections,
            p.closed,
            s.registrations,
            s.connections_closed,
            s.connections_dealt,
            s.connection_moves,
            s.datagrams_received,
            s.datagrams_sent,
            s.send_errors,
            s.recv_errors,
            d.fault_stats(),
            d.timer_state()
        );
        for id in d.connection_ids() {
            report += &format!("\n    connection {id}: {:?}", d.connection_state(id));
        }
    }
    report
}

/// quinn-proto 0.11.19 never sends a CONNECTION_CLOSE that its
/// congestion window holds back (quinn-rs/quinn#2785; fixed upstream by
/// #2787, not released yet): a side that closes, or drops its endpoint,
/// with stream data still unsent never tells the other, which ends by its
/// idle timeout or by a stateless reset. Whether our side (`ours`), else
/// the peer, may have had such data: a stream the other side stopped
/// after the last write, or any stream mid-flight when the run aborts.
fn close_may_stall(shared: &Shared, ours: bool) -> bool {
    let stopped = lock(&shared.records).iter().any(|r| match ours {
        true => matches!(r.peer_in_end, Some(PeerEnd::Stop(_))),
        false => matches!(r.our_in_end, Some(RecvEnd::Stopped(_) | RecvEnd::Dropped)),
    });
    if stopped || shared.plan.aborts() {
        shared.log("the close may stall (quinn-rs/quinn#2785)".into());
        return true;
    }
    false
}

/// Our drivers' datagram faults off, so that a close is not lost to them
/// (the side waiting for it would wait for the idle timeout).
fn faults_off(shared: &Shared, drivers: &[NativeProtoDriver]) {
    if shared.plan.faults.is_some() {
        shared.log("our datagram faults off".into());
        for d in drivers {
            let _ = d.set_fault_spec(NativeProtoFaultSpec::none());
        }
    }
}

/// How the peer saw its connection end, once it has; an error if the
/// peer never had it (its handshake failed).
async fn peer_closed(shared: &Shared) -> Result<quinn::ConnectionError, String> {
    let Some(conn) = lock(&shared.peer_conn).clone() else {
        let errors = lock(&shared.peer_errors).clone();
        return Err(format!("the peer never had the connection: {errors:?}"));
    };
    loop {
        if let Some(why) = conn.close_reason() {
            return Ok(why);
        }
        spargio::time::sleep(Duration::from_millis(2)).await;
    }
}
