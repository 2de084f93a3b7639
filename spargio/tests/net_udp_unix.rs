//! `UdpSocket`, `UnixStream`, `UnixListener`, `UnixDatagram`.

mod common;

use std::io::ErrorKind;
use std::path::PathBuf;

use spargio::net::{UdpSocket, UnixDatagram, UnixListener, UnixStream};

fn sock_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("spargio-unix-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn udp_send_to_recv_from_and_connected() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let a = UdpSocket::bind(&h, "127.0.0.1:0").await.unwrap();
            let b = UdpSocket::bind_socket_addr(&h, "127.0.0.1:0".parse().unwrap()).unwrap();
            let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            for i in 0..50u8 {
                a.send_to(&[i; 100], ba).await.unwrap();
                let (data, from) = b.recv_from(1500).await.unwrap();
                assert_eq!(data, vec![i; 100]);
                assert_eq!(from, aa);
            }
            assert_eq!(a.peer_addr().unwrap_err().kind(), ErrorKind::NotConnected);
            a.connect(ba).await.unwrap();
            b.connect(aa).await.unwrap();
            assert_eq!(a.peer_addr().unwrap(), ba);
            a.send(b"connected").await.unwrap();
            assert_eq!(b.recv(64).await.unwrap(), b"connected");
            // A datagram longer than the buffer is truncated, not split.
            b.send(&[7u8; 1000]).await.unwrap();
            assert_eq!(a.recv(10).await.unwrap(), vec![7u8; 10]);
            // Sending to a closed port on a connected socket: refused.
            let gone = {
                let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                s.local_addr().unwrap()
            };
            let c = UdpSocket::bind(&h, "127.0.0.1:0").await.unwrap();
            c.connect(gone).await.unwrap();
            c.send(b"x").await.unwrap();
            let e = c.recv(8).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        })
    });
}

#[test]
fn unix_stream_listener_round_trip_and_errors() {
    let dir = sock_dir("stream");
    common::on_runtime(move |h| {
        Box::pin(async move {
            let path = dir.join("s.sock");
            let listener = UnixListener::bind(&h, &path).unwrap();
            assert_eq!(
                listener.local_addr().unwrap().as_pathname(),
                Some(path.as_path())
            );
            let e = UnixListener::bind(&h, &path).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AddrInUse);
            let server = h
                .spawn_stealable(async move {
                    let (s, _peer) = listener.accept().await.unwrap();
                    let mut buf = [0u8; 4];
                    s.read_exact(&mut buf).await.unwrap();
                    s.write_all(&buf).await.unwrap();
                })
                .unwrap();
            let c = UnixStream::connect(&h, &path).await.unwrap();
            c.write_all(b"ping").await.unwrap();
            let mut buf = [0u8; 4];
            c.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"ping");
            server.await.unwrap();
            assert_eq!(c.peer_addr().unwrap().as_pathname(), Some(path.as_path()));
            let e = c.read_exact(&mut buf).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::UnexpectedEof);

            let e = UnixStream::connect(&h, dir.join("missing.sock"))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound);

            let (x, y) = UnixStream::pair(&h).unwrap();
            x.send(b"pair").await.unwrap();
            assert_eq!(y.recv(8).await.unwrap(), b"pair");
            std::fs::remove_dir_all(&dir).unwrap();
        })
    });
}

#[test]
fn unix_datagrams() {
    let dir = sock_dir("dgram");
    common::on_runtime(move |h| {
        Box::pin(async move {
            let (pa, pb) = (dir.join("a"), dir.join("b"));
            let a = UnixDatagram::bind(&h, &pa).unwrap();
            let b = UnixDatagram::bind(&h, &pb).unwrap();
            a.send_to(b"to b", &pb).await.unwrap();
            let (data, from) = b.recv_from(64).await.unwrap();
            assert_eq!(data, b"to b");
            assert_eq!(from.as_pathname(), Some(pa.as_path()));
            let u = UnixDatagram::unbound(&h).unwrap();
            u.connect(&pa).await.unwrap();
            u.send(b"anon").await.unwrap();
            let (data, from) = a.recv_from(64).await.unwrap();
            assert_eq!(data, b"anon");
            assert!(from.is_unnamed());
            assert_eq!(b.local_addr().unwrap().as_pathname(), Some(pb.as_path()));
            std::fs::remove_dir_all(&dir).unwrap();
        })
    });
}
