//! `send_all_batch`: a window of buffers per gathering `sendmsg`, in order,
//! resumed after short sends, errors reported with the buffers back.

mod common;

use std::io::Read;
use std::net::TcpListener as StdListener;

use spargio::net::TcpStream;

/// A spargio client connected to a std (blocking) peer, so the peer's
/// reads submit nothing to the runtime. Both socket buffers are small, so
/// a batch of any size waits on the ring for the reader.
async fn pair(h: &spargio::RuntimeHandle) -> (TcpStream, std::net::TcpStream) {
    let listener = StdListener::bind("127.0.0.1:0").unwrap();
    // Accepted sockets inherit it.
    socket2::SockRef::from(&listener)
        .set_recv_buffer_size(4096)
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let client = TcpStream::connect_socket_addr(h, addr).await.unwrap();
    socket2::SockRef::from(&client)
        .set_send_buffer_size(4096)
        .unwrap();
    let (peer, _) = listener.accept().unwrap();
    (client, peer)
}

/// Reads `n` bytes on a thread, starting after `delay_ms`.
fn read_on_thread(
    mut peer: std::net::TcpStream,
    n: usize,
    delay_ms: u64,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let mut got = vec![0u8; n];
        peer.read_exact(&mut got).unwrap();
        got
    })
}

#[test]
fn a_window_goes_out_in_one_operation() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, peer) = pair(&h).await;
            // 4 MiB: far more than the socket buffers take at once, so
            // the send must wait on the ring for the reader.
            let bufs: Vec<Vec<u8>> = (0..64u8).map(|i| vec![i; 64 * 1024]).collect();
            let reader = read_on_thread(peer, 64 * 64 * 1024, 20);
            let before = h.stats_snapshot().native_ops_submitted;
            let (res, back) = client.send_all_batch(bufs, 64).await;
            let ops = h.stats_snapshot().native_ops_submitted - before;
            assert_eq!(res.unwrap(), 64 * 64 * 1024);
            assert_eq!(back.len(), 64);
            // One buffer per operation would be dozens.
            assert!(ops <= 2, "{ops} ring operations for one window");
            let got = reader.join().unwrap();
            for (i, chunk) in got.chunks(64 * 1024).enumerate() {
                assert!(
                    chunk.iter().all(|&b| b == i as u8),
                    "chunk {i} out of order"
                );
            }
        })
    });
}

#[test]
fn small_windows_keep_order_across_short_sends() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, peer) = pair(&h).await;
            // Odd sizes (and empty buffers) so short sends stop mid-buffer.
            let bufs: Vec<Vec<u8>> = (0..200usize)
                .map(|i| (0..(i * 7919) % 40_000).map(|j| (i + j) as u8).collect())
                .collect();
            let want: Vec<u8> = bufs.concat();
            let reader = read_on_thread(peer, want.len(), 5);
            for window in [3] {
                let (res, back) = client.send_all_batch(bufs.clone(), window).await;
                assert_eq!(res.unwrap(), want.len());
                assert_eq!(back, bufs, "buffers come back unchanged, in order");
            }
            assert!(reader.join().unwrap() == want, "bytes arrived in order");
            // A window of 0 is a window of 1.
            let (client2, peer2) = pair(&h).await;
            let reader2 = read_on_thread(peer2, 6, 0);
            let (res, _) = client2
                .send_all_batch(vec![b"ab".to_vec(), Vec::new(), b"cdef".to_vec()], 0)
                .await;
            assert_eq!(res.unwrap(), 6);
            assert_eq!(reader2.join().unwrap(), b"abcdef");
        })
    });
}

#[test]
fn a_closed_peer_fails_the_batch_and_returns_the_buffers() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, peer) = pair(&h).await;
            drop(peer);
            let bufs: Vec<Vec<u8>> = (0..32).map(|_| vec![7u8; 256 * 1024]).collect();
            let (res, back) = client.send_all_batch(bufs, 8).await;
            let err = res.unwrap_err();
            assert!(
                matches!(
                    err.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ),
                "{err:?}"
            );
            assert_eq!(back.len(), 32);
        })
    });
}

#[test]
fn a_batch_dropped_mid_flight_keeps_its_buffers_until_the_completion() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, peer) = pair(&h).await;
            let bufs: Vec<Vec<u8>> = (0..16u8).map(|i| vec![i; 64 * 1024]).collect();
            // Nobody reads: the gathering send waits on the ring until the
            // timeout drops it (and cancels it).
            let batch = client.send_all_batch(bufs, 16);
            let timed_out = spargio::timeout(std::time::Duration::from_millis(20), batch).await;
            assert!(
                timed_out.is_err(),
                "the batch cannot finish without a reader"
            );
            // The stream still works for the bytes after whatever went out.
            drop(peer);
            let (res, _) = client.send_all_batch(vec![vec![1u8; 1 << 20]], 4).await;
            assert!(res.is_err(), "peer gone");
        })
    });
}
