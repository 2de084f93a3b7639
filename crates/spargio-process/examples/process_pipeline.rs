//! Child processes on spargio (the guide's chapter `book/src/process.md`):
//! one-shot calls with a timeout, a child's output read line by line, then
//! a pipeline, `sort | uniq -c`, fed from a task and read through the ring.
//!
//! ```text
//! cargo run -p spargio-process --example process_pipeline
//! ```

use std::io;
use std::process::Stdio;
use std::time::Duration;

use spargio::io::{AsyncWriteExt, BufReader};
use spargio::RuntimeHandle;
use spargio_process::{CommandBuilder, CommandOptions};

// ANCHOR: oneshot
async fn one_shots(handle: &RuntimeHandle) -> io::Result<()> {
    // Like std's `output`: stdout and stderr captured, stdin null.
    let out = CommandBuilder::new("uname")
        .arg("-sr")
        .output(handle)
        .await?;
    println!("kernel: {}", String::from_utf8_lossy(&out.stdout).trim());

    // A timeout kills the child and reaps it, then reports `TimedOut`.
    let quick = CommandOptions::default().with_timeout(Duration::from_millis(50));
    let slow = CommandBuilder::new("sleep")
        .arg("10")
        .status_with_options(handle, quick)
        .await;
    assert_eq!(slow.unwrap_err().kind(), io::ErrorKind::TimedOut);
    Ok(())
}
// ANCHOR_END: oneshot

// ANCHOR: lines
/// Reads a child's stdout line by line while it runs.
async fn lines(handle: &RuntimeHandle) -> io::Result<()> {
    let mut child = CommandBuilder::new("seq")
        .args(["1", "3"])
        .stdout(Stdio::piped())
        .spawn(handle)?;
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    while stdout.read_line(&mut line).await? > 0 {
        print!("seq says {line}");
        line.clear();
    }
    let status = child.wait().await?;
    assert!(status.success());
    Ok(())
}
// ANCHOR_END: lines

// ANCHOR: pipeline
/// `text | sort | uniq -c`: `sort`'s stdout is handed to `uniq` as its
/// stdin (the two children talk directly); we write `sort`'s input and
/// read `uniq`'s output on the ring.
async fn word_counts(handle: &RuntimeHandle, text: Vec<u8>) -> io::Result<String> {
    let mut sort = CommandBuilder::new("sort")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn(handle)?;
    let sorted: Stdio = sort.stdout.take().expect("piped").try_into()?;
    let uniq = CommandBuilder::new("uniq")
        .arg("-c")
        .stdin(sorted)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn(handle)?;

    // Feed `sort` from another task while `uniq`'s output is collected.
    // Dropping `stdin` at the end closes the pipe: `sort` reads end of
    // file, sorts, writes, exits; then `uniq` does.
    let mut stdin = sort.stdin.take().expect("piped");
    let feeder = handle
        .spawn_stealable(async move { stdin.write_all(text).await.0 })
        .map_err(io::Error::other)?;

    let limit = CommandOptions::default().with_timeout(Duration::from_secs(30));
    let counted = uniq.output_with_options(limit).await?;
    feeder.await.map_err(io::Error::other)??;
    let sorted = sort.wait().await?;
    if !sorted.success() || !counted.status.success() {
        return Err(io::Error::other(format!(
            "sort: {sorted}, uniq: {}",
            counted.status
        )));
    }
    Ok(String::from_utf8_lossy(&counted.stdout).into_owned())
}
// ANCHOR_END: pipeline

/// 10,000 words from a small vocabulary, one per line (a fixed
/// pseudo-random sequence, so the counts are the same on every run).
fn text() -> Vec<u8> {
    const WORDS: [&str; 6] = ["ring", "shard", "steal", "park", "wake", "reap"];
    let mut state = 0x2545_f491_u32;
    let mut out = Vec::new();
    for _ in 0..10_000 {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        out.extend_from_slice(WORDS[state as usize % WORDS.len()].as_bytes());
        out.push(b'\n');
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let counts = spargio::block_on(spargio::run(|handle| async move {
        one_shots(&handle).await?;
        lines(&handle).await?;
        word_counts(&handle, text()).await
    }))??;
    print!("{counts}");
    let total: u32 = counts
        .lines()
        .filter_map(|line| line.split_whitespace().next()?.parse::<u32>().ok())
        .sum();
    assert_eq!(total, 10_000);
    Ok(())
}
