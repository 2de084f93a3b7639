//! Metadata through the native lane, with no `unsafe` in user code: the
//! `extension::fs` wrappers run `IORING_OP_STATX` on a shard's ring (or,
//! on kernels without it, `std::fs::metadata` on the blocking pool).
//!
//! ```text
//! cargo run --release -p spargio --example native_extension_statx -- [PATH ...]
//! ```

use spargio::extension::fs::{statx, statx_on_shard, statx_or_metadata, StatxOptions};

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    let paths = if paths.is_empty() {
        vec!["/".to_string(), "/proc/self/exe".to_string()]
    } else {
        paths
    };
    let result = spargio::block_on(spargio::run(|handle| async move {
        let native = handle.uring_native_unbound();
        for path in &paths {
            match statx(&native, path).await {
                Ok(m) => println!(
                    "{path}: {} bytes, {} blocks, inode {}, mode {:o}, {}",
                    m.size,
                    m.blocks,
                    m.ino,
                    m.mode & 0o7777,
                    if m.is_dir() {
                        "directory"
                    } else if m.is_file() {
                        "file"
                    } else {
                        "other"
                    },
                ),
                Err(e) => println!("{path}: {e}"),
            }
            // The link itself, on an explicit shard's ring.
            let own = StatxOptions::new().follow_symlinks(false);
            if let Ok(m) = statx_on_shard(&native, 0, path, own).await {
                if m.is_symlink() {
                    println!("{path}: is a symlink ({} bytes of target path)", m.size);
                }
            }
        }
        // With the blocking fallback, for old kernels.
        let root = statx_or_metadata(&handle, "/").await.expect("stat /");
        println!(
            "/ is on device {}:{}",
            libc_major(root.dev),
            libc_minor(root.dev)
        );
    }));
    if let Err(e) = result {
        eprintln!("runtime failed: {e}");
        std::process::exit(1);
    }
}

fn libc_major(dev: u64) -> u64 {
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff)
}

fn libc_minor(dev: u64) -> u64 {
    ((dev >> 12) & 0xffff_ff00) | (dev & 0xff)
}
