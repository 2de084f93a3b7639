//! The two owned-buffer forms of socket I/O: the documented `*_owned`
//! methods (`io::Result<(usize, B)>` / `io::Result<B>`, `?`-friendly; the
//! buffer is dropped on error) and the `*_buf` methods (`BufResult`: the
//! buffer comes back whatever happened).

mod common;

use std::io::ErrorKind;
use std::net::Shutdown;

use spargio::net::{UdpSocket, UnixDatagram, UnixStream};
use spargio::NativeFd;

#[test]
fn stream_owned_methods_have_the_documented_shapes() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            let data: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();

            // write_all_owned -> io::Result<B>: the buffer comes back.
            let sent: Vec<u8> = client.write_all_owned(data.clone()).await.unwrap();
            assert_eq!(sent, data);
            // read_exact_owned -> io::Result<B>, filled to capacity.
            let got: Vec<u8> = server
                .read_exact_owned(Vec::with_capacity(data.len()))
                .await
                .unwrap();
            assert_eq!(got, data);

            // send_owned / recv_owned -> io::Result<(usize, B)>.
            let (n, back): (usize, Vec<u8>) = server.send_owned(b"pong".to_vec()).await.unwrap();
            assert_eq!((n, back.as_slice()), (4, &b"pong"[..]));
            let (n, buf): (usize, Vec<u8>) = client.recv_owned(vec![0u8; 64]).await.unwrap();
            assert_eq!(&buf[..n], b"pong");

            // Errors come through `?` / `unwrap_err` without the buffer.
            server.write_all(b"abc").await.unwrap();
            server.shutdown(Shutdown::Write).await.unwrap();
            let e = client.read_exact_owned(vec![0u8; 10]).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
            client.shutdown(Shutdown::Write).await.unwrap();
            let e = client.write_all_owned(b"late".to_vec()).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe);
            let e = client.send_owned(b"late".to_vec()).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe);
        })
    });
}

#[test]
fn stream_buf_methods_return_the_buffer_on_error() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (a, b) = UnixStream::pair(&h).unwrap();
            let (res, buf) = a.write_all_buf(b"hello".to_vec()).await;
            res.unwrap();
            assert_eq!(buf, b"hello");
            let (res, buf) = b.read_exact_buf(vec![0u8; 5]).await;
            res.unwrap();
            assert_eq!(buf, b"hello");
            let (n, buf) = a.send_buf(b"xy".to_vec()).await;
            assert_eq!((n.unwrap(), buf.as_slice()), (2, &b"xy"[..]));
            let (n, buf) = b.recv_buf(Vec::with_capacity(8)).await;
            assert_eq!((n.unwrap(), buf.as_slice()), (2, &b"xy"[..]));

            // Peer gone: every form fails, and still hands the buffer back.
            a.write_all(b"abc").await.unwrap();
            a.shutdown(Shutdown::Both).await.unwrap();
            let (res, buf) = b.read_exact_buf(vec![9u8; 10]).await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::UnexpectedEof);
            assert_eq!(buf.len(), 10);
            let (res, buf) = a.send_buf(b"late".to_vec()).await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::BrokenPipe);
            assert_eq!(buf, b"late");
            let (res, buf) = a.write_all_buf(b"later".to_vec()).await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::BrokenPipe);
            assert_eq!(buf, b"later");
            drop(a);
            let (res, buf) = b.recv_buf(vec![0u8; 4]).await;
            assert_eq!(res.unwrap(), 0, "end of stream");
            assert_eq!(buf.len(), 4);
        })
    });
}

#[test]
fn datagram_owned_and_buf_methods() {
    let dir = std::env::temp_dir().join(format!("spargio-net-owned-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    common::on_runtime(move |h| {
        Box::pin(async move {
            let a = UdpSocket::bind(&h, "127.0.0.1:0").await.unwrap();
            let b = UdpSocket::bind(&h, "127.0.0.1:0").await.unwrap();
            let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            let (n, back) = a.send_to_owned(b"one".to_vec(), ba).await.unwrap();
            assert_eq!((n, back.as_slice()), (3, &b"one"[..]));
            let (n, from, buf) = b.recv_from_owned(vec![0u8; 16]).await.unwrap();
            assert_eq!((&buf[..n], from), (&b"one"[..], aa));
            let (res, back) = a.send_to_buf(b"two".to_vec(), ba).await;
            assert_eq!((res.unwrap(), back.as_slice()), (3, &b"two"[..]));
            let (res, buf) = b.recv_from_buf(Vec::with_capacity(16)).await;
            assert_eq!((res.unwrap(), buf.as_slice()), ((3, aa), &b"two"[..]));
            a.connect(ba).await.unwrap();
            b.connect(aa).await.unwrap();
            assert_eq!(a.send_owned(b"three".to_vec()).await.unwrap().0, 5);
            let (n, buf) = b.recv_owned(vec![0u8; 16]).await.unwrap();
            assert_eq!(&buf[..n], b"three");
            let (res, _) = b.send_buf(b"four".to_vec()).await;
            res.unwrap();
            let (res, buf) = a.recv_buf(Vec::with_capacity(16)).await;
            assert_eq!((res.unwrap(), buf.as_slice()), (4, &b"four"[..]));

            let (c, d) = (
                UnixDatagram::bind(&h, dir.join("c.sock")).unwrap(),
                UnixDatagram::bind(&h, dir.join("d.sock")).unwrap(),
            );
            let (n, _) = c
                .send_to_owned(b"unix".to_vec(), dir.join("d.sock"))
                .await
                .unwrap();
            assert_eq!(n, 4);
            let (n, from, buf) = d.recv_from_owned(vec![0u8; 16]).await.unwrap();
            assert_eq!(&buf[..n], b"unix");
            assert_eq!(from.as_pathname(), Some(dir.join("c.sock").as_path()));
            let (res, _) = d.send_to_buf(b"back".to_vec(), dir.join("c.sock")).await;
            res.unwrap();
            let (res, buf) = c.recv_from_buf(Vec::with_capacity(16)).await;
            assert_eq!((res.unwrap().0, buf.as_slice()), (4, &b"back"[..]));
            c.connect(dir.join("d.sock")).await.unwrap();
            d.connect(dir.join("c.sock")).await.unwrap();
            c.send_owned(b"conn".to_vec()).await.unwrap();
            let (n, buf) = d.recv_owned(vec![0u8; 8]).await.unwrap();
            assert_eq!(&buf[..n], b"conn");
            let (res, _) = d.send_buf(b"ok".to_vec()).await;
            res.unwrap();
            let (res, buf) = c.recv_buf(Vec::with_capacity(8)).await;
            assert_eq!((res.unwrap(), buf.as_slice()), (2, &b"ok"[..]));
        })
    });
}

#[test]
fn native_owned_and_buf_methods() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let native = h.uring_native_unbound();
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            let (a, b) = (NativeFd::from(a), NativeFd::from(b));
            let (n, back) = native.send_owned(&a, b"native".to_vec()).await.unwrap();
            assert_eq!((n, back.as_slice()), (6, &b"native"[..]));
            let (n, buf) = native.recv_owned(&b, vec![0u8; 16]).await.unwrap();
            assert_eq!(&buf[..n], b"native");
            let (res, back) = native.send_buf(&b, b"buf".to_vec()).await;
            assert_eq!((res.unwrap(), back.as_slice()), (3, &b"buf"[..]));
            let (res, buf) = native.recv_buf(&a, Vec::with_capacity(16)).await;
            assert_eq!((res.unwrap(), buf.as_slice()), (3, &b"buf"[..]));
            // A peer closed (by std, synchronously): both forms fail.
            let (c, d) = std::os::unix::net::UnixStream::pair().unwrap();
            let c = NativeFd::from(c);
            drop(d);
            let e = native.send_owned(&c, vec![1u8; 8]).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe);
            let (res, back) = native.send_buf(&c, vec![2u8; 8]).await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::BrokenPipe);
            assert_eq!(back, vec![2u8; 8]);
        })
    });
}
