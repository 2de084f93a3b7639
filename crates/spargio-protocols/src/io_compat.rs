//! A `futures_io` view of spargio's TCP stream.
//!
//! [`FuturesTcpStream`] is a name for
//! [`spargio::io::Compat`]`<`[`spargio::net::TcpStream`]`>`: it implements
//! `futures_io::{AsyncRead, AsyncWrite}` (and, with spargio's `tokio-io`
//! feature, tokio's) and `Debug`. It is a type alias, not a wrapper, so a
//! stream made here and one made by `spargio::io::Compat::new` are the
//! same type; see `Compat`'s docs for how a poll maps onto ring
//! operations.
//!
//! ```
//! # spargio::block_on(spargio::run(|handle| async move {
//! use futures_util::io::{AsyncReadExt, AsyncWriteExt};
//! use spargio::net::{TcpListener, TcpStream};
//! use spargio_protocols::io_compat::FuturesTcpStream;
//!
//! let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
//! let addr = listener.local_addr().unwrap();
//! let client = TcpStream::connect_socket_addr(&handle, addr).await.unwrap();
//! let (server, _) = listener.accept().await.unwrap();
//!
//! let mut client = FuturesTcpStream::new(client);
//! let mut server = FuturesTcpStream::new(server);
//! client.write_all(b"ping").await.unwrap();
//! client.flush().await.unwrap();
//! let mut buf = [0u8; 4];
//! server.read_exact(&mut buf).await.unwrap();
//! assert_eq!(&buf, b"ping");
//! # })).unwrap();
//! ```

/// spargio's TCP stream with `futures_io::{AsyncRead, AsyncWrite}` (module docs).
pub type FuturesTcpStream = spargio::io::Compat<spargio::net::TcpStream>;
