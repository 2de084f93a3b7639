//! The stdio streams under `tokio::io`'s traits (feature `tokio-io`).

mod common;

use std::process::Stdio;

use common::{pattern, run};
use spargio_process::CommandBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MIB: usize = 1 << 20;

#[test]
fn a_mebibyte_round_trips_through_cat_with_tokio_io() {
    let (out, code) = run(|h| async move {
        let mut child = CommandBuilder::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn(&h)
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let writer = h
            .spawn_stealable(async move {
                for chunk in pattern(MIB).chunks(30_000) {
                    stdin.write_all(chunk).await.unwrap();
                }
                stdin.shutdown().await.unwrap();
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
fn stderr_reads_with_tokio_io() {
    let err = run(|h| async move {
        let mut child = CommandBuilder::new("sh")
            .args(["-c", "echo oops >&2"])
            .stderr(Stdio::piped())
            .spawn(&h)
            .unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let mut err = String::new();
        stderr.read_to_string(&mut err).await.unwrap();
        child.wait().await.unwrap();
        err
    });
    assert_eq!(err, "oops\n");
}
