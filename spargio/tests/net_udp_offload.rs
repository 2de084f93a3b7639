//! `UdpSocket::{send_msg_owned, recv_msg_owned, enable_offload, offload}`:
//! GSO sends, GRO receives, ECN and pktinfo metadata, input checks, and a
//! receive dropped mid-flight, over real loopback sockets.
//!
//! Kernel features are probed: a test whose feature this kernel lacks says
//! so on stderr and returns (probe-and-skip), never passes silently.

mod common;

use std::future::Future;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::task::Poll;
use std::time::Duration;

use spargio::net::{UdpOffload, UdpRecvMeta, UdpSocket};
use spargio::RuntimeHandle;

const SEG: usize = 1200;

/// Datagram `i` of a run: `len` bytes that depend on `i` and the offset,
/// so a datagram out of place or cut short is seen.
fn datagram(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| ((i * 31 + j * 7) % 251) as u8).collect()
}

/// `n` full segments and a short one of `tail` bytes, back to back.
fn batch(n: usize, tail: usize) -> Vec<u8> {
    let mut out: Vec<u8> = (0..n).flat_map(|i| datagram(i, SEG)).collect();
    out.extend(datagram(n, tail));
    out
}

async fn bind(h: &RuntimeHandle, addr: &str) -> UdpSocket {
    UdpSocket::bind_socket_addr(h, addr.parse().unwrap()).unwrap()
}

/// False (and a note on stderr) when the socket has no GSO.
fn has_gso(socket: &UdpSocket, test: &str) -> bool {
    let gso = socket.offload().max_gso_segments > 1;
    if !gso {
        eprintln!("{test}: skipped, this kernel has no UDP GSO");
    }
    gso
}

/// Receives with `recv_msg_owned` until `total` bytes came, checking the
/// GRO contract on each receive; returns the bytes and the metas.
async fn recv_total(socket: &UdpSocket, total: usize) -> (Vec<u8>, Vec<UdpRecvMeta>) {
    let mut got = Vec::new();
    let mut metas = Vec::new();
    while got.len() < total {
        let (meta, buf) = socket.recv_msg_owned(Vec::with_capacity(64 * 1024)).await;
        let meta = meta.unwrap();
        assert_eq!(buf.len(), meta.len);
        match meta.segment_size {
            Some(s) => assert_eq!(s, SEG, "GRO segment size"),
            // Not coalesced: exactly one datagram.
            None => assert!(meta.len <= SEG, "{} bytes without a segment size", meta.len),
        }
        got.extend_from_slice(&buf);
        metas.push(meta);
    }
    assert_eq!(got.len(), total, "more bytes than were sent");
    (got, metas)
}

#[test]
fn gso_send_reaches_a_plain_receiver_as_separate_datagrams() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let sender = bind(&h, "127.0.0.1:0").await;
            let receiver = bind(&h, "127.0.0.1:0").await;
            sender.enable_offload().unwrap();
            if !has_gso(&sender, "gso_send") {
                return;
            }
            assert!(!receiver.offload().gro, "GRO is off until enabled");
            let data = batch(10, 345);
            let (sent, back) = sender
                .send_msg_owned(
                    data.clone(),
                    receiver.local_addr().unwrap(),
                    Some(SEG),
                    None,
                )
                .await;
            assert_eq!(sent.unwrap(), data.len());
            assert_eq!(back, data, "the buffer comes back");
            for i in 0..11 {
                let (n, from, buf) = receiver
                    .recv_from_owned(Vec::with_capacity(64 * 1024))
                    .await
                    .unwrap();
                let want = if i < 10 { SEG } else { 345 };
                assert_eq!(n, want, "datagram {i}'s length");
                assert_eq!(buf, datagram(i, want), "datagram {i}'s bytes");
                assert_eq!(from, sender.local_addr().unwrap());
            }
        })
    });
}

#[test]
fn gro_coalesces_a_gso_burst_and_keeps_every_byte() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let sender = bind(&h, "127.0.0.1:0").await;
            let receiver = bind(&h, "127.0.0.1:0").await;
            let on: UdpOffload = receiver.enable_offload().unwrap();
            assert_eq!(on, receiver.offload());
            if !has_gso(&sender, "gro") {
                return;
            }
            if !on.gro {
                eprintln!("gro: skipped, this kernel has no UDP GRO");
                return;
            }
            let data = batch(20, SEG);
            let dst = receiver.local_addr().unwrap();
            let (sent, _) = sender
                .send_msg_owned(data.clone(), dst, Some(SEG), None)
                .await;
            assert_eq!(sent.unwrap(), data.len());
            let (got, metas) = recv_total(&receiver, data.len()).await;
            assert_eq!(got, data);
            for meta in &metas {
                assert_eq!(meta.addr, sender.local_addr().unwrap());
            }
            eprintln!(
                "gro: {} bytes in {} receives, segment sizes {:?}",
                got.len(),
                metas.len(),
                metas.iter().map(|m| m.segment_size).collect::<Vec<_>>()
            );
        })
    });
}

#[test]
fn ecn_bits_are_sent_and_reported() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let sender = bind(&h, "127.0.0.1:0").await;
            let receiver = bind(&h, "127.0.0.1:0").await;
            receiver.enable_offload().unwrap();
            let dst = receiver.local_addr().unwrap();
            for ecn in [2u8, 1, 3, 0] {
                let (sent, _) = sender
                    .send_msg_owned(datagram(ecn.into(), 100), dst, None, Some(ecn))
                    .await;
                assert_eq!(sent.unwrap(), 100);
                let (meta, buf) = receiver.recv_msg_owned(Vec::with_capacity(2048)).await;
                let meta = meta.unwrap();
                assert_eq!(meta.ecn, Some(ecn));
                assert_eq!(meta.segment_size, None);
                assert_eq!(buf, datagram(ecn.into(), 100));
            }
            // Without ECN on the send, the bits are Not-ECT.
            sender
                .send_msg_owned(vec![1u8; 10], dst, None, None)
                .await
                .0
                .unwrap();
            let meta = receiver.recv_msg_owned(vec![0u8; 64]).await.0.unwrap();
            assert_eq!(meta.ecn, Some(0));
            // A value wider than two bits is refused.
            let (res, back) = sender
                .send_msg_owned(vec![9u8; 10], dst, None, Some(4))
                .await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::InvalidInput);
            assert_eq!(back, vec![9u8; 10]);
        })
    });
}

#[test]
fn pktinfo_reports_the_local_destination() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let sender = bind(&h, "127.0.0.1:0").await;
            // Bound to every address, so only pktinfo says which one the
            // datagram was sent to.
            let receiver = bind(&h, "0.0.0.0:0").await;
            let port = receiver.local_addr().unwrap().port();
            let dst = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            // Off until enabled.
            sender
                .send_msg_owned(vec![1u8; 8], dst, None, None)
                .await
                .0
                .unwrap();
            let meta = receiver.recv_msg_owned(vec![0u8; 64]).await.0.unwrap();
            assert_eq!((meta.dst_ip, meta.ecn), (None, None));
            receiver.enable_offload().unwrap();
            sender
                .send_msg_owned(vec![2u8; 8], dst, None, None)
                .await
                .0
                .unwrap();
            let meta = receiver.recv_msg_owned(vec![0u8; 64]).await.0.unwrap();
            assert_eq!(meta.dst_ip, Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
            assert_eq!(meta.len, 8);
        })
    });
}

#[test]
fn bad_inputs_are_refused_before_submission_with_the_buffer_back() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let sender = bind(&h, "127.0.0.1:0").await;
            let receiver = bind(&h, "127.0.0.1:0").await;
            let dst = receiver.local_addr().unwrap();
            let data = batch(3, 10);
            let (res, back) = sender
                .send_msg_owned(data.clone(), dst, Some(0), None)
                .await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::InvalidInput);
            assert_eq!(back, data);

            let max = sender.offload().max_gso_segments;
            let too_many = vec![5u8; (max + 1) * 100];
            let (res, back) = sender
                .send_msg_owned(too_many.clone(), dst, Some(100), None)
                .await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::InvalidInput);
            assert_eq!(back, too_many);
            // The kernel's segment size is 16 bits.
            let wide = vec![6u8; 140_000];
            let (res, back) = sender
                .send_msg_owned(wide.clone(), dst, Some(70_000), None)
                .await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::InvalidInput);
            assert_eq!(back, wide);

            if max == 1 {
                // A GSO-less socket refuses any segmented send. (On a
                // kernel with GSO the unit test
                // `eio_from_a_gso_send_falls_back_to_one_datagram_per_send`
                // covers this on a socket whose GSO was turned off.)
                let (res, back) = sender
                    .send_msg_owned(data.clone(), dst, Some(SEG), None)
                    .await;
                assert_eq!(res.unwrap_err().kind(), ErrorKind::InvalidInput);
                assert_eq!(back, data);
            }
            // A segment at least as long as the buffer is a plain datagram.
            let (res, _) = sender
                .send_msg_owned(vec![7u8; 300], dst, Some(300), None)
                .await;
            assert_eq!(res.unwrap(), 300);
            // Nothing refused reached the socket: the one datagram is next.
            let meta = receiver.recv_msg_owned(vec![0u8; 2048]).await.0.unwrap();
            assert_eq!(meta.len, 300);
            assert_eq!(meta.segment_size, None);
        })
    });
}

/// Receives dropped while waiting (a timeout drops them), each followed at
/// once by datagrams: an abandoned operation may receive one into its
/// buffer and parse its control messages after its future is gone. Nothing
/// may crash, and what the socket still delivers is whole datagrams that
/// were sent, each once. (A valgrind case in
/// `scripts/valgrind_soundness.sh`.)
#[test]
fn a_receive_dropped_mid_flight_then_a_datagram_arrives() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let receiver = bind(&h, "127.0.0.1:0").await;
            receiver.enable_offload().unwrap();
            let dst = receiver.local_addr().unwrap();
            let rounds = 20usize;
            let mut seen = vec![false; 2 * rounds];
            let mut dropped = 0;
            let take = |buf: &[u8], seen: &mut Vec<bool>| {
                let i = (0..2 * rounds)
                    .find(|&i| buf == datagram(i, 500))
                    .expect("a datagram that was never sent");
                assert!(!seen[i], "datagram {i} received twice");
                seen[i] = true;
            };
            for round in 0..rounds {
                let pending = receiver.recv_msg_owned(Vec::with_capacity(64 * 1024));
                if round % 2 == 0 {
                    // Submitted (polled once), then a datagram is there
                    // before the ring has even seen the cancel: the
                    // abandoned receive most likely takes it.
                    let mut pending = Box::pin(pending);
                    let first = std::future::poll_fn(|cx| Poll::Ready(pending.as_mut().poll(cx)));
                    if let Poll::Ready((meta, buf)) = first.await {
                        assert_eq!(meta.unwrap().len, 500);
                        take(&buf, &mut seen);
                    }
                    sender.send_to(&datagram(2 * round, 500), dst).unwrap();
                    drop(pending);
                    dropped += 1;
                } else {
                    match spargio::timeout(Duration::from_millis(5), pending).await {
                        Ok((meta, buf)) => {
                            assert_eq!(meta.unwrap().len, 500);
                            take(&buf, &mut seen);
                        }
                        Err(_) => dropped += 1,
                    }
                    sender.send_to(&datagram(2 * round, 500), dst).unwrap();
                }
                sender.send_to(&datagram(2 * round + 1, 500), dst).unwrap();
                loop {
                    let next = receiver.recv_msg_owned(Vec::with_capacity(64 * 1024));
                    match spargio::timeout(Duration::from_millis(20), next).await {
                        Ok((meta, buf)) => {
                            assert_eq!(meta.unwrap().len, 500);
                            take(&buf, &mut seen);
                        }
                        Err(_) => {
                            dropped += 1;
                            break;
                        }
                    }
                }
            }
            let received = seen.iter().filter(|&&s| s).count();
            assert!(dropped >= rounds, "every round drops a receive mid-flight");
            assert!(received > 0, "the socket still delivers");
            eprintln!(
                "{received} of {} datagrams received, {dropped} receives dropped",
                2 * rounds
            );
        })
    });
}

#[test]
fn ipv6_loopback_round_trip() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let Ok(receiver) = UdpSocket::bind_socket_addr(&h, "[::1]:0".parse().unwrap()) else {
                eprintln!("ipv6: skipped, no IPv6 loopback");
                return;
            };
            let sender = bind(&h, "[::1]:0").await;
            let on = receiver.enable_offload().unwrap();
            let dst = receiver.local_addr().unwrap();
            let (sent, _) = sender
                .send_msg_owned(datagram(1, 700), dst, None, Some(1))
                .await;
            assert_eq!(sent.unwrap(), 700);
            let (meta, buf) = receiver.recv_msg_owned(Vec::with_capacity(64 * 1024)).await;
            let meta = meta.unwrap();
            assert_eq!(buf, datagram(1, 700));
            assert_eq!(meta.addr, sender.local_addr().unwrap());
            assert_eq!(meta.ecn, Some(1));
            assert_eq!(meta.dst_ip, Some(IpAddr::V6(Ipv6Addr::LOCALHOST)));
            if sender.offload().max_gso_segments > 1 {
                let data = batch(5, 77);
                let (sent, _) = sender
                    .send_msg_owned(data.clone(), dst, Some(SEG), Some(2))
                    .await;
                assert_eq!(sent.unwrap(), data.len());
                let (got, metas) = recv_total(&receiver, data.len()).await;
                assert_eq!(got, data);
                assert!(metas.iter().all(|m| m.ecn == Some(2)));
                if !on.gro {
                    assert_eq!(metas.len(), 6, "one receive per datagram without GRO");
                }
            } else {
                eprintln!("ipv6: GSO part skipped, this kernel has no UDP GSO");
            }
        })
    });
}
