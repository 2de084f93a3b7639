//! Piped stdio through the poll-based `futures_io` traits: the adaptor
//! state kept in the streams, and mixing it with owned-buffer calls.

mod common;

use std::future::poll_fn;
use std::pin::Pin;
use std::process::Stdio;
use std::task::Poll;

use common::{pattern, run};
use futures_util::io::{AsyncReadExt, AsyncWriteExt};
use spargio_process::{ChildHandle, CommandBuilder};

const MIB: usize = 1 << 20;

fn cat(h: &spargio::RuntimeHandle) -> ChildHandle {
    CommandBuilder::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn(h)
        .unwrap()
}

#[test]
fn a_mebibyte_round_trips_through_the_poll_traits() {
    let (out, code) = run(|h| async move {
        let mut child = cat(&h);
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let writer = h
            .spawn_stealable(async move {
                let data = pattern(MIB);
                for chunk in data.chunks(50_000) {
                    stdin.write_all(chunk).await.unwrap();
                }
                stdin.close().await.unwrap();
            })
            .unwrap();
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).await.unwrap();
        writer.await.unwrap();
        (out, child.wait().await.unwrap().code())
    });
    assert_eq!(out.len(), MIB);
    assert!(out == pattern(MIB), "bytes differ");
    assert_eq!(code, Some(0));
}

#[test]
fn an_abandoned_poll_read_loses_no_byte() {
    let out = run(|h| async move {
        let mut child = cat(&h);
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        // Poll a read once with nothing to read (it goes in flight), then
        // abandon it, as a `select!` losing the race would.
        let mut small = [0u8; 3];
        let first = poll_fn(|cx| {
            Poll::Ready(futures_io::AsyncRead::poll_read(
                Pin::new(&mut stdout),
                cx,
                &mut small,
            ))
        })
        .await;
        assert!(first.is_pending(), "nothing was written yet");
        stdin.write_all(b"abcdef").await.unwrap();
        stdin.close().await.unwrap();
        drop(stdin);
        // The read in flight kept its bytes: a 3-byte poll read, then an
        // owned read (which drains what the poll side holds first), then
        // the rest.
        let mut out = Vec::new();
        stdout.read_exact(&mut small).await.unwrap();
        out.extend_from_slice(&small);
        let (res, rest) = spargio::io::AsyncReadExt::read_to_end(&mut stdout, Vec::new()).await;
        res.unwrap();
        out.extend_from_slice(&rest);
        child.wait().await.unwrap();
        out
    });
    assert_eq!(out, b"abcdef");
}

#[test]
fn poll_writes_are_flushed_before_an_owned_write() {
    let out = run(|h| async move {
        let mut child = cat(&h);
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"poll,").await.unwrap();
        spargio::io::AsyncWriteExt::write_all(&mut stdin, b"owned".to_vec())
            .await
            .0
            .unwrap();
        spargio::io::AsyncWrite::shutdown(&mut stdin).await.unwrap();
        child.output().await.unwrap()
    });
    assert_eq!(out.stdout, b"poll,owned");
}
