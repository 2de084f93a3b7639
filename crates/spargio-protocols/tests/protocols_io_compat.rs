//! `io_compat::FuturesTcpStream` round-trips bytes through the
//! `futures_io` traits, both ways, large and small.

use futures_util::io::{AsyncReadExt, AsyncWriteExt};
use spargio::net::{TcpListener, TcpStream};
use spargio_protocols::io_compat::FuturesTcpStream;

#[test]
fn round_trips_bytes_both_ways() {
    spargio::block_on(spargio::run(|handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let payload: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let expected = payload.clone();

        // An echo server over the adaptor.
        let server = handle
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut s = FuturesTcpStream::new(tcp);
                let mut buf = vec![0u8; 8192];
                loop {
                    let n = s.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    s.write_all(&buf[..n]).await.unwrap();
                }
                s.close().await.unwrap();
            })
            .unwrap();

        let tcp = TcpStream::connect_socket_addr(&handle, addr).await.unwrap();
        let client = FuturesTcpStream::new(tcp);
        assert!(format!("{client:?}").contains("Compat"));
        let (mut rd, mut wr) = client.split();
        let writer = handle
            .spawn_stealable(async move {
                for chunk in payload.chunks(7_001) {
                    wr.write_all(chunk).await.unwrap();
                }
                wr.close().await.unwrap();
            })
            .unwrap();
        let mut got = Vec::new();
        rd.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        server.await.unwrap();
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "echoed bytes differ");
    }))
    .unwrap();
}
