//! Binding and connecting without a handle: inside a spargio task the
//! runtime is the one the task runs on ([`RuntimeHandle::try_current`]),
//! as tokio's `TcpListener::bind(addr)` finds its runtime. Each `*_here`
//! form is its handle-taking form with that handle; outside a task it
//! fails (`ErrorKind::Other`) naming the form to use instead.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

use super::{TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};
use crate::RuntimeHandle;

/// The calling task's runtime, or the error that names `form`.
fn here(call: &str, form: &str) -> io::Result<RuntimeHandle> {
    RuntimeHandle::try_current().ok_or_else(|| {
        io::Error::other(format!(
            "{call} called outside a spargio task, where there is no current runtime: \
             use {form} with the runtime's handle"
        ))
    })
}

impl TcpListener {
    /// [`bind`](TcpListener::bind) in the runtime of the calling task.
    ///
    /// ```
    /// # spargio::block_on(spargio::run(|_| async {
    /// use spargio::net::TcpListener;
    ///
    /// async fn listen(port: u16) -> std::io::Result<TcpListener> {
    ///     TcpListener::bind_here(("127.0.0.1", port)).await
    /// }
    /// let listener = listen(0).await.unwrap();
    /// assert!(listener.local_addr().unwrap().port() > 0);
    /// # })).unwrap();
    /// ```
    pub async fn bind_here<A>(addr: A) -> io::Result<TcpListener>
    where
        A: ToSocketAddrs + Send + 'static,
        A::Iter: Send,
    {
        let handle = here("TcpListener::bind_here", "TcpListener::bind(handle, addr)")?;
        TcpListener::bind(handle, addr).await
    }
}

impl TcpStream {
    /// [`connect`](TcpStream::connect) in the runtime of the calling task.
    pub async fn connect_here<A>(addr: A) -> io::Result<TcpStream>
    where
        A: ToSocketAddrs + Send + 'static,
        A::Iter: Send,
    {
        let handle = here(
            "TcpStream::connect_here",
            "TcpStream::connect(handle, addr)",
        )?;
        TcpStream::connect(handle, addr).await
    }
}

impl UdpSocket {
    /// [`bind`](UdpSocket::bind) in the runtime of the calling task.
    pub async fn bind_here<A>(addr: A) -> io::Result<UdpSocket>
    where
        A: ToSocketAddrs + Send + 'static,
        A::Iter: Send,
    {
        let handle = here("UdpSocket::bind_here", "UdpSocket::bind(handle, addr)")?;
        UdpSocket::bind(handle, addr).await
    }

    /// [`bind_socket_addr`](UdpSocket::bind_socket_addr) in the runtime
    /// of the calling task.
    pub fn bind_socket_addr_here(addr: SocketAddr) -> io::Result<UdpSocket> {
        let handle = here(
            "UdpSocket::bind_socket_addr_here",
            "UdpSocket::bind_socket_addr(handle, addr)",
        )?;
        UdpSocket::bind_socket_addr(handle, addr)
    }
}

impl UnixListener {
    /// [`bind`](UnixListener::bind) in the runtime of the calling task.
    pub fn bind_here(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        let handle = here(
            "UnixListener::bind_here",
            "UnixListener::bind(handle, path)",
        )?;
        UnixListener::bind(handle, path)
    }
}

impl UnixStream {
    /// [`connect`](UnixStream::connect) in the runtime of the calling task.
    pub async fn connect_here(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        let handle = here(
            "UnixStream::connect_here",
            "UnixStream::connect(handle, path)",
        )?;
        UnixStream::connect(handle, path).await
    }
}
