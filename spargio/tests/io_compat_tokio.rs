//! `io::Compat` with the `tokio-io` feature: tokio's I/O traits.

mod common;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use spargio::io::Compat;
use spargio::net::UnixStream;

#[test]
fn tokio_io_round_trip() {
    common::within_hang_bound(|| {
        let rt = common::runtime(2);
        let h = rt.handle();
        let h2 = h.clone();
        let join = h
            .spawn_stealable(async move {
                let (a, b) = UnixStream::pair(&h2).unwrap();
                let (mut a, mut b) = (Compat::new(a), Compat::new(b));
                let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
                let d = data.clone();
                let writer = h2
                    .spawn_stealable(async move {
                        a.write_all(&d).await.unwrap();
                        a.shutdown().await.unwrap();
                    })
                    .unwrap();
                let mut got = Vec::new();
                b.read_to_end(&mut got).await.unwrap();
                writer.await.unwrap();
                assert_eq!(got, data);
            })
            .unwrap();
        spargio::block_on(join).unwrap();
    });
}
