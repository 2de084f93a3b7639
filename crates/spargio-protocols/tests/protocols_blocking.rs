//! The blocking helpers run their closures on the blocking pool, give
//! back results and panics, and time out with `TimedOut` while the
//! closure runs on.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spargio_protocols::{
    quic_blocking, quic_blocking_with_options, tls_blocking, tls_blocking_with_options,
    ws_blocking, ws_blocking_with_options, BlockingOptions,
};

fn run<F: std::future::Future<Output = ()> + Send + 'static>(
    f: impl FnOnce(spargio::RuntimeHandle) -> F + Send + 'static,
) {
    spargio::block_on(spargio::run(f)).unwrap();
}

#[test]
fn each_helper_runs_its_closure_on_another_thread() {
    run(|handle| async move {
        let caller = std::thread::current().id();
        let tls = tls_blocking(&handle, move || std::thread::current().id() != caller);
        let ws = ws_blocking(&handle, move || std::thread::current().id() != caller);
        let quic = quic_blocking(handle.clone(), move || {
            std::thread::current().id() != caller
        });
        assert!(tls.await.unwrap());
        assert!(ws.await.unwrap());
        assert!(quic.await.unwrap());
    });
}

#[test]
fn the_closure_starts_when_the_helper_is_called() {
    run(|handle| async move {
        let started = Arc::new(AtomicBool::new(false));
        let flag = started.clone();
        let fut = ws_blocking(&handle, move || flag.store(true, Ordering::SeqCst));
        let deadline = Instant::now() + Duration::from_secs(5);
        while !started.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "closure never ran");
            spargio::sleep(Duration::from_millis(1)).await;
        }
        fut.await.unwrap();
    });
}

#[test]
fn with_options_returns_the_value_within_the_timeout() {
    run(|handle| async move {
        let options = BlockingOptions::default().with_timeout(Duration::from_secs(5));
        let v = tls_blocking_with_options(&handle, || "done", options).await;
        assert_eq!(v.unwrap(), "done");
        let v = ws_blocking_with_options(&handle, || 1, BlockingOptions::default()).await;
        assert_eq!(v.unwrap(), 1);
    });
}

#[test]
fn timeouts_give_timed_out_and_the_closure_runs_on() {
    run(|handle| async move {
        let finished = Arc::new(AtomicBool::new(false));
        let flag = finished.clone();
        let options = BlockingOptions::default().with_timeout(Duration::from_millis(20));
        let start = Instant::now();
        let err = quic_blocking_with_options(
            &handle,
            move || {
                std::thread::sleep(Duration::from_millis(300));
                flag.store(true, Ordering::SeqCst);
            },
            options,
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(
            start.elapsed() < Duration::from_millis(250),
            "timed out late"
        );
        assert!(!finished.load(Ordering::SeqCst));
        // The documented behaviour: the thread is not cancelled.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !finished.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "closure did not run to its end");
            spargio::sleep(Duration::from_millis(5)).await;
        }

        let nap = || std::thread::sleep(Duration::from_millis(200));
        let err = tls_blocking_with_options(&handle, nap, options)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        let err = ws_blocking_with_options(&handle, nap, options)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    });
}

#[test]
fn a_panicking_closure_is_an_error_not_a_crash() {
    run(|handle| async move {
        let err = tls_blocking(&handle, || -> u8 { panic!("boom") })
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Other);
        // The runtime goes on.
        assert_eq!(tls_blocking(&handle, || 7).await.unwrap(), 7);
    });
}
