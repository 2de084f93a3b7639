//! Piped stdio: ring-backed reads and writes through the owned-buffer
//! traits (`spargio::io`).

mod common;

use std::process::Stdio;

use common::{pattern, run};
use spargio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
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
fn a_mebibyte_round_trips_through_cat() {
    let (out, code) = run(|h| async move {
        let mut child = cat(&h);
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        // The writer runs in its own task while this one reads: neither
        // side can fill a pipe and stall the other.
        let writer = h
            .spawn_stealable(async move {
                let data = pattern(MIB);
                // Uneven chunks, each a separate write at "offset 0": a pipe
                // is a stream, the offset must be ignored.
                let mut sent = 0;
                while sent < data.len() {
                    let end = (sent + 40_000).min(data.len());
                    stdin.write_all(data[sent..end].to_vec()).await.0.unwrap();
                    sent = end;
                }
                stdin.shutdown().await.unwrap();
                // After shutdown the pipe is closed: writes are refused.
                let err = stdin.write(b"late".to_vec()).await.0.unwrap_err();
                assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
            })
            .unwrap();
        let mut out = Vec::with_capacity(MIB);
        loop {
            // Many small owned reads, each at "offset 0" too.
            let (n, buf) = stdout.read(Vec::with_capacity(7_777)).await;
            if n.unwrap() == 0 {
                break;
            }
            out.extend_from_slice(&buf);
        }
        writer.await.unwrap();
        let status = child.wait().await.unwrap();
        (out, status.code())
    });
    assert_eq!(out.len(), MIB);
    assert!(out == pattern(MIB), "bytes differ");
    assert_eq!(code, Some(0));
}

#[test]
fn output_reads_both_pipes_while_waiting() {
    // 1 MiB to stderr before anything to stdout: with stderr read only
    // after stdout ended, the child would block on the full stderr pipe.
    let out = run(|h| async move {
        CommandBuilder::new("sh")
            .args(["-c", "head -c 1048576 /dev/zero >&2; echo done"])
            .output(&h)
            .await
            .unwrap()
    });
    assert!(out.status.success());
    assert_eq!(out.stderr.len(), MIB);
    assert_eq!(out.stdout, b"done\n");
}

#[test]
fn dropping_stdin_gives_the_child_end_of_file() {
    let out = run(|h| async move {
        let mut child = CommandBuilder::new("wc")
            .arg("-c")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn(&h)
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(vec![b'x'; 12345]).await.0.unwrap();
        drop(stdin);
        child.output().await.unwrap()
    });
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), "12345");
}

#[test]
fn writing_to_a_child_that_closed_stdin_is_broken_pipe() {
    let kind = run(|h| async move {
        let mut child = CommandBuilder::new("true")
            .stdin(Stdio::piped())
            .spawn(&h)
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        child.wait().await.unwrap();
        // `true` exited: no reader is left on the pipe. (A child another
        // test forks right now may hold a copy of the read end until its
        // exec closes it, close-on-exec: retry until that passes.)
        loop {
            match stdin.write(b"x".to_vec()).await.0 {
                Ok(_) => spargio::sleep(std::time::Duration::from_millis(1)).await,
                Err(e) => break e.kind(),
            }
        }
    });
    assert_eq!(kind, std::io::ErrorKind::BrokenPipe);
}

#[test]
fn std_pipes_can_be_wrapped() {
    let out = run(|h| async move {
        let mut std_child = std::process::Command::new("echo")
            .arg("wrapped")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = std_child.stdout.take().unwrap();
        let mut stdout = spargio_process::ChildStdout::from_std(&h, stdout);
        let (res, out) = AsyncReadExt::read_to_end(&mut stdout, Vec::new()).await;
        res.unwrap();
        std_child.wait().unwrap();
        out
    });
    assert_eq!(out, b"wrapped\n");
}

#[test]
fn a_pipe_can_be_handed_to_another_child() {
    let out = run(|h| async move {
        let mut echo = CommandBuilder::new("echo")
            .arg("pipeline")
            .stdout(Stdio::piped())
            .spawn(&h)
            .unwrap();
        let piped: Stdio = echo.stdout.take().unwrap().try_into().unwrap();
        let tr = CommandBuilder::new("tr")
            .args(["a-z", "A-Z"])
            .stdin(piped)
            .stdout(Stdio::piped())
            .spawn(&h)
            .unwrap();
        let out = tr.output().await.unwrap();
        assert!(echo.wait().await.unwrap().success());
        out
    });
    assert_eq!(out.stdout, b"PIPELINE\n");
}
