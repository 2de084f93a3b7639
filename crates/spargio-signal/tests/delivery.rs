//! Delivery guarantees: a subscribed signal reaches the subscription
//! whichever thread the kernel hands it to, and never the previous
//! disposition while a subscription holds it; no thread's mask changes.
//!
//! Tests whose failure would end the process (a signal at its default
//! action) run their body in a child: this binary again, with
//! `SPARGIO_SIGNAL_CHILD` naming the one test to run, so a killed child is
//! a failed assertion in the parent.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use spargio::RuntimeHandle;
use spargio_signal::signal;

const CHILD_ENV: &str = "SPARGIO_SIGNAL_CHILD";

fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs the test `name` of this binary, alone, in a child process.
fn run_child(name: &str) -> ExitStatus {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, name)
        .output()
        .unwrap();
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stdout));
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    }
    out.status
}

/// True in the child process started for `name`.
fn is_child(name: &str) -> bool {
    std::env::var(CHILD_ENV).as_deref() == Ok(name)
}

fn runtime() -> spargio::Runtime {
    spargio::Runtime::builder().shards(2).build().unwrap()
}

/// Waits (on `h`'s runtime) for the next signal of `s`, giving up after a
/// bound that only a lost signal reaches.
fn recv_on(h: &RuntimeHandle, mut s: spargio_signal::SignalStream) -> Option<i32> {
    let job = h
        .spawn_stealable(async move { s.recv_timeout(Duration::from_secs(3)).await })
        .unwrap();
    spargio::block_on(job).unwrap()
}

/// Whether the calling thread blocks `sig`.
fn blocks(sig: i32) -> bool {
    // SAFETY: a query into a zeroed (valid) sigset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set);
        libc::sigismember(&set, sig) == 1
    }
}

/// Blocks (`how` = `SIG_BLOCK`) or unblocks `sig` in the calling thread.
fn set_blocked(sig: i32, how: libc::c_int) {
    // SAFETY: a sigset built by sigemptyset/sigaddset, passed by pointer.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        assert_eq!(libc::pthread_sigmask(how, &set, std::ptr::null_mut()), 0);
    }
}

/// The handler address (or `SIG_DFL`/`SIG_IGN`) installed for `sig`.
fn action(sig: i32) -> usize {
    // SAFETY: a query into a zeroed (valid) sigaction.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut act);
        act.sa_sigaction
    }
}

/// Installs `handler` (a function address, `SIG_DFL` or `SIG_IGN`).
fn set_action(sig: i32, handler: usize) {
    // SAFETY: an initialized sigaction whose handler is SIG_DFL, SIG_IGN
    // or an `extern "C" fn(c_int)` that only touches an atomic.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = handler;
        libc::sigemptyset(&mut act.sa_mask);
        assert_eq!(libc::sigaction(sig, &act, std::ptr::null_mut()), 0);
    }
}

static COUNTED: AtomicUsize = AtomicUsize::new(0);

/// A user's own handler: counts its calls.
extern "C" fn counting(_sig: libc::c_int) {
    COUNTED.fetch_add(1, Ordering::SeqCst);
}

fn counting_addr() -> usize {
    counting as extern "C" fn(libc::c_int) as usize
}

// ===== defect 1: subscribe, kill, drop at once =====

#[test]
fn a_signal_sent_while_subscribed_never_reaches_the_default_action() {
    let status = run_child("child_kill_then_drop_in_a_loop");
    assert!(
        status.success(),
        "{status:?} (signal {:?})",
        status.signal()
    );
}

#[test]
fn child_kill_then_drop_in_a_loop() {
    if !is_child("child_kill_then_drop_in_a_loop") {
        return;
    }
    let sig = libc::SIGUSR1;
    set_action(sig, libc::SIG_DFL);
    set_blocked(sig, libc::SIG_UNBLOCK);
    let rt = runtime();
    // A thread that keeps the signal unblocked, as any thread of a program
    // that never blocks it does: the kernel may pick it for a delivery.
    let stop = Arc::new(AtomicBool::new(false));
    let bystander = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                set_blocked(sig, libc::SIG_UNBLOCK);
                std::thread::yield_now();
            }
        })
    };
    for _ in 0..4000 {
        let h = rt.handle();
        std::thread::spawn(move || {
            set_blocked(sig, libc::SIG_UNBLOCK);
            let s = signal(&h, &[sig]).unwrap();
            // SAFETY: kill on our own pid, for a subscribed signal.
            assert_eq!(unsafe { libc::kill(libc::getpid(), sig) }, 0);
            drop(s);
        })
        .join()
        .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    bystander.join().unwrap();
    assert_eq!(action(sig), libc::SIG_DFL, "default action restored");
}

// ===== defect 2: the last drop on another thread =====

#[test]
fn dropping_on_another_thread_leaves_every_mask_as_it_was() {
    let _s = serial();
    let sig = libc::SIGRTMIN() + 2;
    set_action(sig, counting_addr());
    let rt = runtime();
    let h = rt.handle();
    let (to_dropper, dropper_rx) = mpsc::channel::<spargio_signal::SignalStream>();
    // The dropper blocks the signal on purpose, then drops the stream.
    let dropper = std::thread::spawn(move || {
        set_blocked(sig, libc::SIG_BLOCK);
        drop(dropper_rx.recv().unwrap());
        blocks(sig)
    });
    let subscriber = std::thread::spawn(move || {
        set_blocked(sig, libc::SIG_UNBLOCK);
        let s = signal(&h, &[sig]).unwrap();
        to_dropper.send(s).unwrap();
        let dropper_blocks = dropper.join().unwrap();
        let before = COUNTED.load(Ordering::SeqCst);
        // Thread-directed, to a thread whose mask should be as before the
        // subscription (unblocked): the restored handler runs before
        // raise returns.
        // SAFETY: raise of a signal with a plain counting handler.
        assert_eq!(unsafe { libc::raise(sig) }, 0);
        let after = COUNTED.load(Ordering::SeqCst);
        (dropper_blocks, blocks(sig), after - before)
    });
    let (dropper_blocks, subscriber_blocks, handled) = subscriber.join().unwrap();
    let restored = action(sig);
    set_action(sig, libc::SIG_DFL);
    assert!(dropper_blocks, "the dropper still blocks what it blocked");
    assert!(!subscriber_blocks, "the subscriber's mask is as before");
    assert_eq!(handled, 1, "the restored handler ran for the later signal");
    assert_eq!(restored, counting_addr());
}

#[test]
fn a_sigterm_after_the_last_drop_on_another_thread_meets_the_default_action() {
    let status = run_child("child_sigterm_after_drop_elsewhere");
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
}

#[test]
fn child_sigterm_after_drop_elsewhere() {
    if !is_child("child_sigterm_after_drop_elsewhere") {
        return;
    }
    let sig = libc::SIGTERM;
    set_action(sig, libc::SIG_DFL);
    set_blocked(sig, libc::SIG_UNBLOCK);
    let rt = runtime();
    let s = signal(rt.handle(), &[sig]).unwrap();
    std::thread::spawn(move || {
        set_blocked(sig, libc::SIG_BLOCK);
        drop(s);
    })
    .join()
    .unwrap();
    // SIGTERM is at its default action again and this thread does not
    // block it: the process ends before raise returns.
    // SAFETY: raise of SIGTERM, which should end this child process.
    unsafe { libc::raise(sig) };
}

// ===== defect 3: thread-directed signals =====

#[test]
fn raise_on_the_subscribing_thread_arrives() {
    let _s = serial();
    let sig = libc::SIGRTMIN() + 3;
    std::thread::spawn(move || {
        let rt = runtime();
        let h = rt.handle();
        let s = signal(&h, &[sig]).unwrap();
        // SAFETY: raise of a subscribed signal.
        assert_eq!(unsafe { libc::raise(sig) }, 0);
        assert_eq!(recv_on(&h, s), Some(sig));
    })
    .join()
    .unwrap();
}

#[test]
fn pthread_kill_to_a_thread_started_after_the_subscription_arrives() {
    let _s = serial();
    let sig = libc::SIGRTMIN() + 4;
    std::thread::spawn(move || {
        let rt = runtime();
        let h = rt.handle();
        let s = signal(&h, &[sig]).unwrap();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let target = std::thread::spawn(move || {
            let _ = done_rx.recv();
        });
        use std::os::unix::thread::JoinHandleExt;
        // SAFETY: the target thread is alive until `done_tx` is used.
        assert_eq!(unsafe { libc::pthread_kill(target.as_pthread_t(), sig) }, 0);
        assert_eq!(recv_on(&h, s), Some(sig));
        done_tx.send(()).unwrap();
        target.join().unwrap();
    })
    .join()
    .unwrap();
}

#[test]
fn sigpipe_from_a_write_to_a_closed_pipe_arrives() {
    let _s = serial();
    let sig = libc::SIGPIPE;
    let before = action(sig);
    std::thread::spawn(move || {
        let rt = runtime();
        let h = rt.handle();
        let s = signal(&h, &[sig]).unwrap();
        let mut fds = [0; 2];
        // SAFETY: pipe writes two new fds into `fds`; this thread closes
        // the read end, writes one byte to the write end (which fails with
        // EPIPE and raises SIGPIPE at this thread), and closes it.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            libc::close(fds[0]);
            let n = libc::write(fds[1], b"x".as_ptr().cast(), 1);
            assert_eq!(n, -1);
            libc::close(fds[1]);
        }
        assert_eq!(recv_on(&h, s), Some(sig));
    })
    .join()
    .unwrap();
    assert_eq!(action(sig), before, "SIGPIPE's disposition is back");
}

// ===== suspicions =====

#[test]
fn a_handler_installed_while_subscribed_survives_the_last_drop() {
    let _s = serial();
    let sig = libc::SIGRTMIN() + 5;
    set_action(sig, libc::SIG_DFL);
    let rt = runtime();
    let s = signal(rt.handle(), &[sig]).unwrap();
    set_action(sig, counting_addr());
    drop(s);
    let now = action(sig);
    set_action(sig, libc::SIG_DFL);
    assert_eq!(now, counting_addr(), "the user's handler stays");
}

#[test]
fn abort_while_sigabrt_is_subscribed_ends_the_process_with_sigabrt() {
    let status = run_child("child_abort_while_subscribed");
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}");
}

#[test]
fn child_abort_while_subscribed() {
    if !is_child("child_abort_while_subscribed") {
        return;
    }
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit with an initialized struct (no core file).
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &no_core) };
    let rt = runtime();
    let _s = signal(rt.handle(), &[libc::SIGABRT]).unwrap();
    std::process::abort();
}
