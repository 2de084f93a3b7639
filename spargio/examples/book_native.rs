//! The guide's chapter on native extensions (`book/src/native.md`): two
//! safe wrappers over `UringNativeAny::submit_unsafe`, one naming an fd
//! and one pointing at memory, with the blocking fallback for kernels
//! that lack the opcode.
//!
//! ```text
//! cargo run -p spargio --example book_native
//! ```

use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use spargio::extension::io_uring::{opcode, types};
use spargio::{NativeFd, RuntimeHandle, UringCqe, UringNativeAny};

// ANCHOR: check
/// A raw completion as an `io::Result`: `result < 0` is a negated errno.
fn check(cqe: io::Result<UringCqe>) -> io::Result<i32> {
    let cqe = cqe?;
    if cqe.result < 0 {
        Err(io::Error::from_raw_os_error(-cqe.result))
    } else {
        Ok(cqe.result)
    }
}
// ANCHOR_END: check

// ANCHOR: fallocate
/// Reserves `len` bytes of disk space at `offset` (`fallocate(2)`, mode 0).
pub async fn fallocate(
    native: &UringNativeAny,
    fd: &NativeFd,
    offset: u64,
    len: u64,
) -> io::Result<()> {
    // The state holds a clone of the fd: it stays open until the kernel's
    // completion, even if this future is dropped first.
    let state = fd.clone();
    // SAFETY: the SQE names one fd, kept open by `state`; it points at no
    // memory; FALLOCATE posts exactly one completion.
    let op = unsafe {
        native.submit_unsafe(
            state,
            move |fd: &mut NativeFd| {
                opcode::Fallocate::new(types::Fd(fd.as_raw_fd()), len)
                    .offset(offset)
                    .build()
            },
            |cqe, _fd| check(cqe).map(drop),
        )
    };
    op.await
}
// ANCHOR_END: fallocate

// ANCHOR: unlink
/// Removes a file through `IORING_OP_UNLINKAT`, or through
/// `std::fs::remove_file` on the blocking pool where the kernel lacks the
/// opcode.
pub async fn unlink(handle: &RuntimeHandle, path: &Path) -> io::Result<()> {
    // Borrowed input is copied into the state: the caller needs no
    // `unsafe` and no lifetime longer than the call.
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: the SQE's only pointer is into the CString's heap buffer,
    // which `state` owns and which does not move when `state` does; nothing
    // reads it while the kernel may; UNLINKAT posts exactly one completion.
    let op = unsafe {
        handle.uring_native_unbound().submit_unsafe(
            c_path,
            |path: &mut CString| {
                opcode::UnlinkAt::new(types::Fd(libc::AT_FDCWD), path.as_ptr()).build()
            },
            |cqe, _path| check(cqe).map(drop),
        )
    };
    match op.await {
        // A kernel without the opcode: fall back. Any other error (say,
        // `NotFound`) is the kernel's answer and is returned as it is.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)
            ) =>
        {
            let owned = path.to_owned();
            handle
                .spawn_blocking(move || std::fs::remove_file(owned))?
                .await?
        }
        res => res,
    }
}
// ANCHOR_END: unlink

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let path = std::env::temp_dir().join(format!("spargio-book-native-{}", std::process::id()));
    let file_path = path.clone();
    // ANCHOR: use
    spargio::block_on(spargio::run(|handle| async move {
        let file = spargio::fs::File::create(&handle, &file_path).await?;
        // Prefer shard 0's ring when the loads are close.
        let native = handle.uring_native_unbound().with_preferred_shard(0);
        fallocate(&native, &file.native_fd(), 0, 1 << 20).await?;
        assert_eq!(file.metadata().await?.len(), 1 << 20);
        file.close().await?;

        unlink(&handle, &file_path).await?;
        let again = unlink(&handle, &file_path).await.unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::NotFound);
        Ok::<_, io::Error>(())
    }))??;
    // ANCHOR_END: use
    assert!(!path.exists());
    println!("fallocate and unlink checked");
    Ok(())
}
