//! Whether an HTTP/3 client is still there, for [`serve_h3`]'s drain
//! (`super::h3`): a client that vanished (its process stopped, its
//! network gone) acknowledges nothing, and waiting until it has
//! acknowledged every response would hold the drain for the whole grace
//! period.
//!
//! A live QUIC peer acknowledges every ack-eliciting packet within its
//! `max_ack_delay` (25 ms by default) plus a round trip; while the server
//! has data the peer has not acknowledged, the sender's loss recovery
//! keeps sending ack-eliciting packets (retransmissions, then probes at
//! each probe timeout, PTO, doubling each time). So a peer from which
//! nothing has arrived since the server sent it something ack-eliciting,
//! for as long as three unanswered probes take (1 + 2 + 4 = 7 PTOs, and
//! at least a second), is gone. The connection's statistics are sampled:
//! datagrams received (anything from the peer means it is there) and
//! ack-eliciting frames sent.
//!
//! A peer that is there but sends nothing is never taken for gone while
//! the server sends it nothing either (an idle connection, a handler
//! still working, all sent data acknowledged).
//!
//! [`serve_h3`]: crate::serve_h3

use std::time::{Duration, Instant};

use spargio_quic::quinn::ConnectionStats;
use spargio_quic::QuicConnection;

/// How often the statistics are sampled.
const SAMPLE: Duration = Duration::from_millis(100);
/// Unanswered probe timeouts that mean the peer is gone: three probes,
/// each after twice the wait of the one before (1 + 2 + 4).
const PTOS: u32 = 7;
/// The least silence taken for a vanished peer: on a loaded host a live
/// peer can miss a few short PTOs.
const MIN_SILENCE: Duration = Duration::from_secs(1);
/// The peer's `max_ack_delay` assumed (QUIC's default; RFC 9000, 18.2).
const MAX_ACK_DELAY: Duration = Duration::from_millis(25);

/// Completes once `conn`'s peer looks gone (module docs); never for a
/// peer that answers.
pub(super) async fn peer_gone(conn: &QuicConnection) {
    let stats = conn.stats();
    let mut heard = stats.udp_rx.datagrams;
    // Ack-eliciting frames sent up to when the peer was last heard from.
    let mut answered = ack_eliciting_sent(&stats);
    // When a frame sent after that was first seen.
    let mut unanswered_since: Option<Instant> = None;
    loop {
        spargio::time::sleep(SAMPLE).await;
        let stats = conn.stats();
        let now = Instant::now();
        if stats.udp_rx.datagrams != heard {
            heard = stats.udp_rx.datagrams;
            answered = ack_eliciting_sent(&stats);
            unanswered_since = None;
            continue;
        }
        if ack_eliciting_sent(&stats) == answered {
            continue;
        }
        let since = *unanswered_since.get_or_insert(now);
        if now.duration_since(since) >= silence(&stats) {
            return;
        }
    }
}

/// How long an answer may take before the peer counts as gone.
fn silence(stats: &ConnectionStats) -> Duration {
    // PTO = smoothed RTT + 4 * RTT variation + max_ack_delay (RFC 9002,
    // 6.2.1); the variation is not exposed: taken as half the RTT, its
    // value before the second sample.
    let rtt = stats.path.rtt;
    let pto = rtt.saturating_mul(3).saturating_add(MAX_ACK_DELAY);
    pto.saturating_mul(PTOS).max(MIN_SILENCE)
}

/// Frames sent that a peer must acknowledge: all but ACK and
/// CONNECTION_CLOSE (and PADDING, not counted).
fn ack_eliciting_sent(stats: &ConnectionStats) -> u64 {
    let f = &stats.frame_tx;
    [
        f.ack_frequency,
        f.crypto,
        f.data_blocked,
        f.datagram,
        u64::from(f.handshake_done),
        f.immediate_ack,
        f.max_data,
        f.max_stream_data,
        f.max_streams_bidi,
        f.max_streams_uni,
        f.new_connection_id,
        f.new_token,
        f.path_challenge,
        f.path_response,
        f.ping,
        f.reset_stream,
        f.retire_connection_id,
        f.stream_data_blocked,
        f.streams_blocked_bidi,
        f.streams_blocked_uni,
        f.stop_sending,
        f.stream,
    ]
    .iter()
    .fold(0u64, |sum, n| sum.wrapping_add(*n))
}
