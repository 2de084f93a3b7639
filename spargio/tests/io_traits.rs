//! `spargio::io`: the owned-buffer traits, `split`, `copy`, and the
//! buffered wrappers, over real loopback TCP (and a file).

mod common;

use std::future::{ready, Future};
use std::io::ErrorKind;

use spargio::buf::{BufResult, IoBuf};
use spargio::fs::OpenOptions;
use spargio::io::framed::LengthDelimited;
use spargio::io::{
    copy, copy_to_vec, split, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
    BufWriter, FileCursor,
};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn read_and_write_move_buffers_over_tcp() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (mut client, mut server) = common::tcp_pair(&h).await;
            let (n, sent) = client.write(b"ping".to_vec()).await;
            assert_eq!(n.unwrap(), 4);
            assert_eq!(sent, b"ping", "the buffer comes back");

            let (n, got) = server.read(Vec::with_capacity(64)).await;
            assert_eq!(n.unwrap(), 4);
            assert_eq!(got, b"ping");

            // Through `&TcpStream`, and into a sub-range of a buffer.
            let mut shared = &server;
            AsyncWrite::write(&mut shared, &b"pong"[..])
                .await
                .0
                .unwrap();
            let (n, slice) = client.read(vec![0u8; 8].slice(2..)).await;
            assert_eq!(n.unwrap(), 4);
            assert_eq!(slice.into_inner(), b"\0\0pong\0\0");

            AsyncWrite::shutdown(&mut server).await.unwrap();
            let (n, _) = client.read(Vec::with_capacity(8)).await;
            assert_eq!(n.unwrap(), 0, "end of stream after the peer's shutdown");
        })
    });
}

#[test]
fn read_exact_fills_or_reports_unexpected_eof() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (mut client, mut server) = common::tcp_pair(&h).await;
            let data = pattern(10, 1);
            AsyncWriteExt::write_all(&mut client, data.clone())
                .await
                .0
                .unwrap();
            AsyncWrite::shutdown(&mut client).await.unwrap();

            let (res, head) =
                AsyncReadExt::read_exact(&mut server, vec![0u8; 4].into_boxed_slice()).await;
            res.unwrap();
            assert_eq!(&head[..], &data[..4]);

            let (res, rest) =
                AsyncReadExt::read_exact(&mut server, vec![0u8; 10].into_boxed_slice()).await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::UnexpectedEof);
            assert_eq!(&rest[..6], &data[4..], "the bytes read so far come back");
        })
    });
}

#[test]
fn read_to_end_appends_and_write_all_sends_everything() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, mut server) = common::tcp_pair(&h).await;
            let data = pattern(3 << 20, 7);
            let expected = data.clone();
            let sender = h
                .spawn_stealable(async move {
                    let mut client = client;
                    let (res, back) = AsyncWriteExt::write_all(&mut client, data).await;
                    res.unwrap();
                    AsyncWrite::shutdown(&mut client).await.unwrap();
                    back.len()
                })
                .unwrap();
            let (n, got) = server.read_to_end(b"prefix:".to_vec()).await;
            assert_eq!(n.unwrap(), expected.len());
            assert_eq!(&got[..7], b"prefix:");
            assert!(got[7..] == expected[..]);
            assert_eq!(sender.await.unwrap(), expected.len());
        })
    });
}

#[test]
fn split_halves_work_from_different_tasks_and_reunite() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;

            // Echo server: copy its read half into its write half.
            let echo = h
                .spawn_stealable(async move {
                    let (mut rd, mut wr) = split(server);
                    let n = copy(&mut rd, &mut wr).await.unwrap();
                    wr.shutdown().await.unwrap();
                    (n, rd.reunite(wr).is_ok())
                })
                .unwrap();

            let (mut rd, mut wr) = split(client);
            let data = pattern(1 << 20, 3);
            let expected = data.clone();
            let writer = h
                .spawn_stealable(async move {
                    wr.write_all(data).await.0.unwrap();
                    wr.shutdown().await.unwrap();
                    wr
                })
                .unwrap();
            let echoed = copy_to_vec(&mut rd).await.unwrap();
            assert!(echoed == expected);
            let wr = writer.await.unwrap();
            assert_eq!(echo.await.unwrap(), (expected.len() as u64, true));

            // Halves of different splits do not reunite.
            let (other_client, _other_server) = common::tcp_pair(&h).await;
            let (other_rd, other_wr) = split(other_client);
            assert!(!rd.is_pair_of(&other_wr));
            let err = rd.reunite(other_wr).unwrap_err();
            assert!(err.to_string().contains("different streams"));
            let (rd, other_wr) = (err.0, err.1);
            assert!(rd.is_pair_of(&wr));
            assert!(other_rd.reunite(other_wr).is_ok());
            assert!(wr.reunite(rd).is_ok());
        })
    });
}

#[test]
fn buf_reader_reads_lines_and_records_across_refills() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            let writer = h
                .spawn_stealable(async move {
                    for chunk in ["al", "pha\nbe", "ta\r\ngam", "ma;delta;", "tail bytes"] {
                        client.write_all(chunk.as_bytes()).await.unwrap();
                        common::yield_now().await;
                    }
                    client.shutdown(std::net::Shutdown::Write).await.unwrap();
                })
                .unwrap();

            // A tiny buffer: every record spans refills.
            let mut reader = BufReader::with_capacity(4, server);
            assert_eq!(reader.capacity(), 4);
            let mut line = String::new();
            assert_eq!(reader.read_line(&mut line).await.unwrap(), 6);
            assert_eq!(reader.read_line(&mut line).await.unwrap(), 6);
            assert_eq!(line, "alpha\nbeta\r\n");

            let mut record = Vec::new();
            assert_eq!(reader.read_until(b';', &mut record).await.unwrap(), 6);
            assert_eq!(reader.read_until(b';', &mut record).await.unwrap(), 6);
            assert_eq!(record, b"gamma;delta;");

            let (n, tail) = reader.read(Vec::with_capacity(4)).await;
            assert!((1..=tail.capacity()).contains(&n.unwrap()));
            let (res, tail) = reader.read_to_end(tail).await;
            res.unwrap();
            assert_eq!(tail, b"tail bytes");

            assert_eq!(
                reader.read_line(&mut line).await.unwrap(),
                0,
                "end of stream"
            );
            assert!(reader.buffer().is_empty());
            writer.await.unwrap();
        })
    });
}

#[test]
fn buf_reader_rejects_invalid_utf8_lines_and_bypasses_for_large_reads() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            client.write_all(b"ok\n\xff\xfe\n").await.unwrap();
            let mut reader = BufReader::with_capacity(64, server);
            let mut line = String::new();
            reader.read_line(&mut line).await.unwrap();
            let err = reader.read_line(&mut line).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidData);
            assert_eq!(line, "ok\n", "left as it was");
            assert!(reader.buffer().is_empty());

            // Nothing buffered and a read larger than the buffer: straight
            // to the stream.
            let data = pattern(1000, 9);
            client.write_all(&data).await.unwrap();
            let (res, got) = reader.read_exact(vec![0u8; 1000].into_boxed_slice()).await;
            res.unwrap();
            assert_eq!(&got[..], &data[..]);
            assert!(reader.buffer().is_empty());
        })
    });
}

#[test]
fn buf_writer_holds_small_writes_until_flush() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, mut server) = common::tcp_pair(&h).await;
            let mut writer = BufWriter::with_capacity(1024, client);
            let mut expected = Vec::new();
            for i in 0..10u8 {
                let piece = vec![i; 50];
                expected.extend_from_slice(&piece);
                let (n, _) = writer.write(piece).await;
                assert_eq!(n.unwrap(), 50, "buffered writes are never short");
            }
            assert_eq!(writer.buffer(), &expected[..], "nothing sent yet");
            writer.flush().await.unwrap();
            assert!(writer.buffer().is_empty());
            let (res, got) =
                AsyncReadExt::read_exact(&mut server, vec![0u8; 500].into_boxed_slice()).await;
            res.unwrap();
            assert_eq!(&got[..], &expected[..]);

            // Overflowing the buffer writes it out first, and a write of at
            // least a buffer's worth goes straight through.
            writer.write_all(vec![1u8; 1000]).await.0.unwrap();
            writer.write_all(vec![2u8; 100]).await.0.unwrap();
            assert_eq!(writer.buffer(), &[2u8; 100][..]);
            writer.write_all(vec![3u8; 4096]).await.0.unwrap();
            assert!(writer.buffer().is_empty());
            writer.write_all(&b"end"[..]).await.0.unwrap();
            // Shutdown flushes before closing the write side.
            writer.shutdown().await.unwrap();

            let got = copy_to_vec(&mut server).await.unwrap();
            let mut expected = vec![1u8; 1000];
            expected.extend_from_slice(&[2; 100]);
            expected.extend_from_slice(&[3; 4096]);
            expected.extend_from_slice(b"end");
            assert!(got == expected);
        })
    });
}

/// Takes at most `per_write` bytes per write, then fails once `budget`
/// bytes have been taken.
struct Flaky {
    taken: Vec<u8>,
    per_write: usize,
    budget: usize,
}

impl AsyncWrite for Flaky {
    fn write<B: IoBuf>(&mut self, buf: B) -> impl Future<Output = BufResult<usize, B>> + Send {
        let n = buf
            .bytes_init()
            .min(self.per_write)
            .min(self.budget - self.taken.len());
        if n == 0 {
            return ready((Err(std::io::Error::other("out of budget")), buf));
        }
        self.taken.extend_from_slice(&buf.as_init_slice()[..n]);
        ready((Ok(n), buf))
    }
    fn flush(&mut self) -> impl Future<Output = std::io::Result<()>> + Send {
        ready(Ok(()))
    }
    fn shutdown(&mut self) -> impl Future<Output = std::io::Result<()>> + Send {
        ready(Ok(()))
    }
}

#[test]
fn buf_writer_keeps_what_a_failed_flush_did_not_write() {
    spargio::block_on(async {
        let flaky = Flaky {
            taken: Vec::new(),
            per_write: 3,
            budget: 7,
        };
        let mut writer = BufWriter::with_capacity(64, flaky);
        writer.write_all(&b"0123456789"[..]).await.0.unwrap();
        assert!(writer.flush().await.is_err());
        assert_eq!(writer.get_ref().taken, b"0123456");
        assert_eq!(
            writer.buffer(),
            b"789",
            "the rest stays buffered for a retry"
        );
        writer.get_mut().budget = 10;
        writer.flush().await.unwrap();
        assert_eq!(writer.into_inner().taken, b"0123456789");
    });
}

#[test]
fn file_cursor_reads_and_writes_sequentially() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let path =
                std::env::temp_dir().join(format!("spargio-io-cursor-{}", std::process::id()));
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&h, &path)
                .await
                .unwrap();
            let mut cursor = FileCursor::new(file);
            let data = pattern(200_000, 5);
            cursor.write_all(data.clone()).await.0.unwrap();
            assert_eq!(cursor.position(), 200_000);
            AsyncWrite::flush(&mut cursor).await.unwrap();

            cursor.set_position(100);
            let (res, got) = cursor.read_exact(vec![0u8; 50].into_boxed_slice()).await;
            res.unwrap();
            assert_eq!(&got[..], &data[100..150]);
            assert_eq!(cursor.position(), 150);

            // Copy the rest through a buffered reader into memory.
            let mut out = Vec::new();
            let mut reader = BufReader::new(cursor);
            assert_eq!(copy(&mut reader, &mut out).await.unwrap(), 200_000 - 150);
            assert!(out[..] == data[150..]);

            let cursor = reader.into_inner();
            assert_eq!(cursor.get_ref().metadata().await.unwrap().len(), 200_000);
            cursor.into_inner().close().await.unwrap();
            std::fs::remove_file(&path).unwrap();
        })
    });
}

/// Generic code gets `Send` futures from the traits, so it can hand them
/// to stealable tasks (a compile-time property; the futures are dropped
/// unpolled).
#[test]
fn generic_futures_are_send() {
    fn is_send<T: Send>(_: T) {}
    fn generic<R: AsyncRead, W: AsyncWrite>(r: &mut R, w: &mut W) {
        is_send(r.read(Vec::new()));
        is_send(r.read_exact(Vec::new()));
        is_send(w.write_all(Vec::new()));
        is_send(copy(&mut *r, &mut *w));
        is_send(copy_to_vec(&mut *r));
        let mut reader = BufReader::new(&mut *r);
        is_send(reader.read_until(b'\n', &mut Vec::new()));
        let mut frames = LengthDelimited::new(&mut *r);
        is_send(frames.read_frame());
        let mut frames = LengthDelimited::new(&mut *w);
        is_send(frames.write_frame(b"x"));
    }
    let mut src: &[u8] = b"";
    generic(&mut src, &mut Vec::new());
}
