//! A seccomp filter that refuses io_uring the way Docker's default profile
//! does (moby PR 46762): `io_uring_setup`, `io_uring_enter` and
//! `io_uring_register` fail with `EPERM`, everything else is allowed.
//! Shared by `tests/rt_backend.rs` and `examples/no_uring.rs`.

use std::io;

// The generic syscall table gives io_uring the same numbers on every
// architecture (they were added after the tables were unified).
const IO_URING_SETUP: u32 = 425;
const IO_URING_ENTER: u32 = 426;
const IO_URING_REGISTER: u32 = 427;

// BPF_LD | BPF_W | BPF_ABS, BPF_JMP | BPF_JEQ | BPF_K, BPF_RET | BPF_K.
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Installs the filter on the calling thread; threads it starts later and
/// programs it `exec`s inherit it. Irreversible.
pub fn refuse_io_uring() -> io::Result<()> {
    // offsetof(struct seccomp_data, nr) == 0
    let mut filter = [
        insn(BPF_LD_W_ABS, 0, 0, 0),
        insn(BPF_JEQ_K, 3, 0, IO_URING_SETUP),
        insn(BPF_JEQ_K, 2, 0, IO_URING_ENTER),
        insn(BPF_JEQ_K, 1, 0, IO_URING_REGISTER),
        insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | libc::EPERM as u32),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: plain prctl calls; `prog` points to `filter`, alive across the
    // call (the kernel copies it).
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
