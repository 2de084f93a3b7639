//! Binding and connecting without a handle (issue 50, item 3): inside a
//! spargio task, `bind_here`/`connect_here` use the runtime the task runs
//! on, as tokio's `bind(addr)` does; outside one they fail naming the
//! handle-taking form. `RuntimeHandle::current()` gives that runtime.

mod common;

use spargio::net::{TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};
use spargio::RuntimeHandle;

/// Binds, connects and echoes with no handle in sight (a helper as a
/// service would write it).
async fn echo_over_tcp() -> Vec<u8> {
    let listener = TcpListener::bind_here("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = RuntimeHandle::current()
        .spawn_stealable(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 5];
            stream.read_exact(&mut buf).await.unwrap();
            stream.write_all(&buf).await.unwrap();
        })
        .unwrap();
    let client = TcpStream::connect_here(addr).await.unwrap();
    client.write_all(b"hello").await.unwrap();
    let mut echo = vec![0u8; 5];
    client.read_exact(&mut echo).await.unwrap();
    server.await.unwrap();
    echo
}

#[test]
fn tasks_bind_and_connect_without_a_handle_on_every_backend() {
    for backend in common::backends() {
        let builder = spargio::RuntimeBuilder::new().shards(2).backend(backend);
        let out = spargio::block_on(spargio::run_with(builder, |h| async move {
            // In a pinned task, a stealable one and the entry task alike.
            let pinned = h.spawn_pinned(1, echo_over_tcp()).unwrap().await.unwrap();
            let stealable = h.spawn_stealable(echo_over_tcp()).unwrap().await.unwrap();
            let here = RuntimeHandle::current();
            assert!(here.same_runtime(&h));

            let dir = std::env::temp_dir().join(format!(
                "spargio-ambient-{}-{:?}",
                std::process::id(),
                backend
            ));
            let _ = std::fs::remove_file(&dir);
            let unix = UnixListener::bind_here(&dir).unwrap();
            let client = UnixStream::connect_here(&dir).await.unwrap();
            let (served, _) = unix.accept().await.unwrap();
            client.write_all(b"unix").await.unwrap();
            let mut got = [0u8; 4];
            served.read_exact(&mut got).await.unwrap();
            std::fs::remove_file(&dir).unwrap();

            let a = UdpSocket::bind_here("127.0.0.1:0").await.unwrap();
            let b = UdpSocket::bind_here("127.0.0.1:0").await.unwrap();
            a.send_to(b"udp", b.local_addr().unwrap()).await.unwrap();
            let (buf, from) = b.recv_from(16).await.unwrap();
            assert_eq!(from, a.local_addr().unwrap());
            (pinned, stealable, got, buf)
        }))
        .unwrap();
        assert_eq!(out.0, b"hello", "{backend:?}");
        assert_eq!(out.1, b"hello", "{backend:?}");
        assert_eq!(&out.2, b"unix", "{backend:?}");
        assert_eq!(out.3, b"udp", "{backend:?}");
    }
}

#[test]
fn outside_a_task_they_fail_naming_the_handle_form() {
    assert!(RuntimeHandle::try_current().is_none());
    let err = spargio::block_on(TcpListener::bind_here("127.0.0.1:0")).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("TcpListener::bind(handle"), "{text}");
    let err = spargio::block_on(TcpStream::connect_here("127.0.0.1:1")).unwrap_err();
    assert!(
        err.to_string().contains("TcpStream::connect(handle"),
        "{err}"
    );
    let err = UnixListener::bind_here("/nonexistent/x").unwrap_err();
    assert!(
        err.to_string().contains("UnixListener::bind(handle"),
        "{err}"
    );
    let panic = std::panic::catch_unwind(RuntimeHandle::current).unwrap_err();
    let msg = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .unwrap_or("");
    assert!(msg.contains("outside a spargio task"), "{msg}");
}
