//! Every constructor and helper that takes a runtime handle accepts it by
//! value (`handle.clone()`, as the reference README writes it) as well as
//! by reference (`&handle`, as the rest of the tests do).

mod common;

use spargio::fs::{self, DuOptions, File, OpenOptions};
use spargio::net::{
    StreamSessionPolicy, TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixStream,
};

#[test]
fn fs_calls_take_an_owned_handle() {
    let dir = common::scratch_dir("fs");
    common::on_runtime(move |h| {
        Box::pin(async move {
            let sub = dir.join("a/b");
            fs::create_dir_all(h.clone(), &sub).await.unwrap();
            fs::create_dir(h.clone(), dir.join("c")).await.unwrap();

            let file = File::create(h.clone(), sub.join("f")).await.unwrap();
            file.write_all_at(0, b"owned handle").await.unwrap();
            file.close().await.unwrap();
            let file = File::open(h.clone(), sub.join("f")).await.unwrap();
            assert_eq!(file.read_to_end_at(0).await.unwrap(), b"owned handle");
            let std_file = std::fs::File::open(sub.join("f")).unwrap();
            let file = File::from_std(h.clone(), std_file);
            assert_eq!(file.read_at(6, 6).await.unwrap(), b"handle");
            let file = OpenOptions::new()
                .append(true)
                .open(h.clone(), sub.join("f"))
                .await
                .unwrap();
            file.write_all_at(0, b"!").await.unwrap();

            fs::write(h.clone(), dir.join("w"), b"written")
                .await
                .unwrap();
            assert_eq!(
                fs::read(h.clone(), dir.join("w")).await.unwrap(),
                b"written"
            );
            assert_eq!(
                fs::read_to_string(h.clone(), dir.join("w")).await.unwrap(),
                "written"
            );
            fs::rename(h.clone(), dir.join("w"), dir.join("r"))
                .await
                .unwrap();
            fs::hard_link(h.clone(), dir.join("r"), dir.join("hl"))
                .await
                .unwrap();
            fs::symlink(h.clone(), dir.join("r"), dir.join("sl"))
                .await
                .unwrap();
            assert_eq!(
                fs::metadata(h.clone(), dir.join("sl")).await.unwrap().len(),
                7
            );
            assert!(fs::symlink_metadata(h.clone(), dir.join("sl"))
                .await
                .unwrap()
                .is_symlink());
            assert_eq!(
                fs::metadata_lite(h.clone(), dir.join("hl"))
                    .await
                    .unwrap()
                    .size,
                7
            );
            assert_eq!(
                fs::canonicalize(h.clone(), dir.join("sl")).await.unwrap(),
                std::fs::canonicalize(dir.join("r")).unwrap()
            );
            let perm = std::fs::metadata(dir.join("r")).unwrap().permissions();
            fs::set_permissions(h.clone(), dir.join("r"), perm)
                .await
                .unwrap();

            let mut names = Vec::new();
            let mut entries = fs::read_dir(h.clone(), &dir).await.unwrap();
            while let Some(entry) = entries.next_entry().await.unwrap() {
                names.push(entry.name().to_owned());
            }
            names.sort();
            assert_eq!(names, ["a", "c", "hl", "r", "sl"]);
            let raw = spargio::extension::fs::read_dir_entries(h.clone(), &dir)
                .await
                .unwrap();
            assert_eq!(raw.len(), 5);
            assert!(spargio::extension::fs::statx_or_metadata(h.clone(), &dir)
                .await
                .unwrap()
                .is_dir());

            let usage = fs::du(h.clone(), &dir, DuOptions::new()).await.unwrap();
            // f, r (hl is r again), the symlink sl; a, a/b, c and the root.
            assert_eq!(
                (usage.files, usage.duplicates, usage.symlinks, usage.dirs),
                (2, 1, 1, 4)
            );

            fs::remove_file(h.clone(), dir.join("sl")).await.unwrap();
            fs::remove_dir(h.clone(), dir.join("c")).await.unwrap();
            assert!(!dir.join("c").exists() && !dir.join("sl").exists());
        })
    });
}

#[test]
fn tcp_constructors_take_an_owned_handle() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let listener = TcpListener::bind(h.clone(), "127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let second =
                TcpListener::bind_socket_addr(h.clone(), "127.0.0.1:0".parse().unwrap()).unwrap();
            let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let third = TcpListener::from_std(h.clone(), std_listener);
            assert_ne!(second.local_addr().unwrap(), third.local_addr().unwrap());

            let echo = h
                .spawn_stealable(async move {
                    let mut served = 0;
                    loop {
                        let (conn, _) = listener.accept().await.unwrap();
                        let data = conn.recv(64).await.unwrap();
                        if data == b"stop" {
                            return served;
                        }
                        conn.write_all(&data).await.unwrap();
                        served += 1;
                    }
                })
                .unwrap();

            let rr = StreamSessionPolicy::RoundRobin;
            let mut streams = vec![
                TcpStream::connect(h.clone(), addr).await.unwrap(),
                TcpStream::connect_round_robin(h.clone(), addr)
                    .await
                    .unwrap(),
                TcpStream::connect_with_session_policy(h.clone(), addr, rr)
                    .await
                    .unwrap(),
                TcpStream::connect_socket_addr(h.clone(), addr)
                    .await
                    .unwrap(),
                TcpStream::connect_socket_addr_round_robin(h.clone(), addr)
                    .await
                    .unwrap(),
                TcpStream::connect_socket_addr_with_session_policy(h.clone(), addr, rr)
                    .await
                    .unwrap(),
                TcpStream::from_std(h.clone(), std::net::TcpStream::connect(addr).unwrap())
                    .unwrap(),
                TcpStream::from_std_with_session_policy(
                    h.clone(),
                    std::net::TcpStream::connect(addr).unwrap(),
                    rr,
                )
                .unwrap(),
            ];
            streams.extend(
                TcpStream::connect_many_round_robin(h.clone(), addr, 2)
                    .await
                    .unwrap(),
            );
            streams.extend(
                TcpStream::connect_many_with_session_policy(h.clone(), addr, 1, rr)
                    .await
                    .unwrap(),
            );
            streams.extend(
                TcpStream::connect_many_socket_addr_round_robin(h.clone(), addr, 1)
                    .await
                    .unwrap(),
            );
            streams.extend(
                TcpStream::connect_many_socket_addr_with_session_policy(h.clone(), addr, 1, rr)
                    .await
                    .unwrap(),
            );
            // The listener accepts in connection order: one at a time.
            for (i, stream) in streams.iter().enumerate() {
                let msg = format!("stream {i}");
                stream.write_all(msg.as_bytes()).await.unwrap();
                let mut back = vec![0u8; msg.len()];
                stream.read_exact(&mut back).await.unwrap();
                assert_eq!(back, msg.as_bytes());
            }
            let stop = TcpStream::connect(&h, addr).await.unwrap();
            stop.write_all(b"stop").await.unwrap();
            assert_eq!(echo.await.unwrap(), streams.len());
        })
    });
}

#[test]
fn udp_and_unix_constructors_take_an_owned_handle() {
    let dir = common::scratch_dir("unix");
    common::on_runtime(move |h| {
        Box::pin(async move {
            let a = UdpSocket::bind(h.clone(), "127.0.0.1:0").await.unwrap();
            let b = UdpSocket::bind_socket_addr(h.clone(), "127.0.0.1:0".parse().unwrap()).unwrap();
            let c =
                UdpSocket::from_std(h.clone(), std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
                    .unwrap();
            a.send_to(b"to b", b.local_addr().unwrap()).await.unwrap();
            assert_eq!(b.recv_from(16).await.unwrap().0, b"to b");
            b.send_to(b"to c", c.local_addr().unwrap()).await.unwrap();
            assert_eq!(c.recv_from(16).await.unwrap().0, b"to c");

            let path = dir.join("s.sock");
            let listener = UnixListener::bind(h.clone(), &path).unwrap();
            let client = UnixStream::connect(h.clone(), &path).await.unwrap();
            let (server, _) = listener.accept().await.unwrap();
            client.write_all(b"unix").await.unwrap();
            let mut got = [0u8; 4];
            server.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"unix");
            let client2 = UnixStream::connect_with_session_policy(
                h.clone(),
                &path,
                StreamSessionPolicy::RoundRobin,
            )
            .await
            .unwrap();
            let (server2, _) = listener.accept().await.unwrap();
            client2.write_all(b"rr").await.unwrap();
            assert_eq!(server2.recv(8).await.unwrap(), b"rr");
            let (p, q) = UnixStream::pair(h.clone()).unwrap();
            p.write_all(b"pair").await.unwrap();
            assert_eq!(q.recv(8).await.unwrap(), b"pair");
            let (sp, sq) = std::os::unix::net::UnixStream::pair().unwrap();
            let (p, q) = (
                UnixStream::from_std(h.clone(), sp).unwrap(),
                UnixStream::from_std(h.clone(), sq).unwrap(),
            );
            p.write_all(b"std").await.unwrap();
            assert_eq!(q.recv(8).await.unwrap(), b"std");
            let std_listener = std::os::unix::net::UnixListener::bind(dir.join("l.sock")).unwrap();
            let l2 = UnixListener::from_std(h.clone(), std_listener);
            assert_eq!(
                l2.local_addr().unwrap().as_pathname(),
                Some(dir.join("l.sock").as_path())
            );

            let d1 = UnixDatagram::bind(h.clone(), dir.join("d1.sock")).unwrap();
            let d2 = UnixDatagram::unbound(h.clone()).unwrap();
            d2.send_to(b"dgram", dir.join("d1.sock")).await.unwrap();
            assert_eq!(d1.recv(16).await.unwrap(), b"dgram");
            let (sa, sb) = std::os::unix::net::UnixDatagram::pair().unwrap();
            let (da, db) = (
                UnixDatagram::from_std(h.clone(), sa).unwrap(),
                UnixDatagram::from_std(h.clone(), sb).unwrap(),
            );
            da.send(b"pair").await.unwrap();
            assert_eq!(db.recv(16).await.unwrap(), b"pair");
        })
    });
}
