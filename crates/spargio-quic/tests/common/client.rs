//! [`QuinnClient`]: a quinn 0.11 client on its own tokio runtime, with
//! one async helper per interop scenario. Every helper runs on the
//! client's runtime and gives up after [`HANG`] with `TimedOut`, so a
//! broken peer fails the test instead of hanging it.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use quinn::{Connection, ReadError, RecvStream, VarInt};
use tokio::runtime::Runtime;

use super::peers::{peer_runtime, Closed};
use super::{checksum, pattern, TestCerts, ALPN, HANG, SERVER_NAME};

/// A [`QuinnClient`]'s settings.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub certs: TestCerts,
    /// ALPN protocols offered (default: [`ALPN`]).
    pub alpn: Vec<Vec<u8>>,
    /// The client's idle timeout (default 30 s; `None`: none).
    pub idle_timeout: Option<Duration>,
}

impl ClientOptions {
    /// The defaults above.
    pub fn new(certs: &TestCerts) -> ClientOptions {
        ClientOptions {
            certs: certs.clone(),
            alpn: vec![ALPN.to_vec()],
            idle_timeout: Some(Duration::from_secs(30)),
        }
    }

    /// Offers these ALPN protocols instead.
    pub fn alpn(mut self, alpn: &[&[u8]]) -> ClientOptions {
        self.alpn = alpn.iter().map(|p| p.to_vec()).collect();
        self
    }

    /// Uses this idle timeout instead.
    pub fn idle_timeout(mut self, idle: Option<Duration>) -> ClientOptions {
        self.idle_timeout = idle;
        self
    }
}

/// One quinn connection to `addr` (server name `localhost`, trusting the
/// test CA). Dropping it stops its runtime without waiting.
pub struct QuinnClient {
    endpoint: quinn::Endpoint,
    conn: Connection,
    rt: Option<Runtime>,
}

impl QuinnClient {
    /// Connects with `alpn` and the default options.
    pub async fn connect(
        addr: SocketAddr,
        certs: &TestCerts,
        alpn: &[u8],
    ) -> io::Result<QuinnClient> {
        QuinnClient::connect_with(addr, ClientOptions::new(certs).alpn(&[alpn])).await
    }

    /// Connects with `opts`.
    pub async fn connect_with(addr: SocketAddr, opts: ClientOptions) -> io::Result<QuinnClient> {
        let rt = peer_runtime("quinn-client");
        let alpn: Vec<&[u8]> = opts.alpn.iter().map(|p| p.as_slice()).collect();
        let config = opts.certs.quinn_client_config(&alpn, opts.idle_timeout);
        let task = spawn_bounded(rt.handle(), async move {
            let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap())?;
            endpoint.set_default_client_config(config);
            let connecting = endpoint
                .connect(addr, SERVER_NAME)
                .map_err(io::Error::other)?;
            let conn = connecting.await.map_err(conn_err)?;
            Ok::<_, io::Error>((endpoint, conn))
        });
        let (endpoint, conn) = match task.await {
            Ok(pair) => pair,
            Err(e) => {
                rt.shutdown_background();
                return Err(e);
            }
        };
        Ok(QuinnClient {
            endpoint,
            conn,
            rt: Some(rt),
        })
    }

    /// The connection, for anything the helpers don't cover.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Moves the client to a new UDP socket (a new source port), as a NAT
    /// rebinding or a migration does; the connection carries on.
    pub fn rebind(&self) -> io::Result<SocketAddr> {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
        let addr = socket.local_addr()?;
        let _rt = self.handle().enter();
        self.endpoint.rebind(socket)?;
        Ok(addr)
    }

    /// The client's current local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// The runtime the client runs on.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.rt.as_ref().expect("runtime").handle()
    }

    /// The negotiated ALPN protocol.
    pub fn alpn(&self) -> Option<Vec<u8>> {
        self.conn
            .handshake_data()
            .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
            .and_then(|d| d.protocol)
    }

    /// Runs `f(connection)` on the client's runtime (bounded by [`HANG`]).
    pub async fn run<F, Fut, T>(&self, f: F) -> io::Result<T>
    where
        F: FnOnce(Connection) -> Fut,
        Fut: Future<Output = io::Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        spawn_bounded(self.handle(), f(self.conn.clone())).await
    }

    /// Opens a bi stream, writes `data` and FIN while reading the answer to
    /// its end (both at once, so an echo of any size cannot stall on flow
    /// control); returns the answer.
    pub async fn bi_roundtrip(&self, data: Vec<u8>) -> io::Result<Vec<u8>> {
        self.run(move |conn| async move {
            let (mut send, mut recv) = conn.open_bi().await.map_err(conn_err)?;
            let writer = tokio::spawn(async move {
                send.write_all(&data).await?;
                send.finish().map_err(io::Error::other)?;
                Ok::<_, io::Error>(send)
            });
            let answer = read_all(&mut recv).await?;
            let _send = writer.await.map_err(io::Error::other)??;
            Ok(answer)
        })
        .await
    }

    /// Sends `pattern(n, seed)` on a bi stream to a `Sink` and returns the
    /// checksum it answered (compare with `checksum(&pattern(n, seed))`).
    pub async fn upload(&self, n: usize, seed: u64) -> io::Result<u64> {
        let answer = self.bi_roundtrip(pattern(n, seed)).await?;
        let bytes: [u8; 8] = answer
            .as_slice()
            .try_into()
            .map_err(|_| invalid(format!("checksum answer of {} bytes", answer.len())))?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Sends `pattern(n, seed)` on a uni stream and waits until the peer
    /// acknowledged all of it (or stopped the stream: `Err`).
    pub async fn send_uni(&self, n: usize, seed: u64) -> io::Result<()> {
        self.run(move |conn| async move {
            let mut send = conn.open_uni().await.map_err(conn_err)?;
            send.write_all(&pattern(n, seed)).await?;
            send.finish().map_err(io::Error::other)?;
            match send.stopped().await {
                Ok(None) => Ok(()),
                Ok(Some(code)) => Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    format!("peer stopped the stream with code {code}"),
                )),
                Err(e) => Err(io::Error::other(e)),
            }
        })
        .await
    }

    /// Asks a `Source(n)` server for `pattern(n, seed)`; `InvalidData` if
    /// the answer is not exactly that.
    pub async fn fetch(&self, n: usize, seed: u64) -> io::Result<Vec<u8>> {
        let answer = self.bi_roundtrip(seed.to_le_bytes().to_vec()).await?;
        if answer.len() != n || checksum(&answer) != checksum(&pattern(n, seed)) {
            return Err(invalid(format!(
                "fetched {} bytes, checksum {:#x}; wanted {n} bytes of pattern seed {seed}",
                answer.len(),
                checksum(&answer)
            )));
        }
        Ok(answer)
    }

    /// Sends `payload` as a datagram and returns the first datagram that
    /// comes back; resends every second (datagrams may be lost), up to 10
    /// times.
    pub async fn datagram_roundtrip(&self, payload: Bytes) -> io::Result<Bytes> {
        self.run(move |conn| async move {
            for _ in 0..10 {
                conn.send_datagram(payload.clone())
                    .map_err(io::Error::other)?;
                let wait = tokio::time::timeout(Duration::from_secs(1), conn.read_datagram());
                if let Ok(got) = wait.await {
                    return got.map_err(conn_err);
                }
            }
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no datagram came back",
            ))
        })
        .await
    }

    /// Opens a bi stream, writes `pattern(n, seed)` and resets it with
    /// `code` instead of finishing.
    pub async fn send_then_reset(&self, n: usize, seed: u64, code: u32) -> io::Result<()> {
        self.run(move |conn| async move {
            let (mut send, _recv) = conn.open_bi().await.map_err(conn_err)?;
            send.write_all(&pattern(n, seed)).await?;
            send.reset(VarInt::from_u32(code))
                .map_err(io::Error::other)?;
            Ok(())
        })
        .await
    }

    /// Writes `data` and FIN on a new bi stream and reads until the peer
    /// resets its half: `Ok(code)`; `InvalidData` if it finished instead.
    pub async fn expect_reset(&self, data: Vec<u8>) -> io::Result<u64> {
        self.run(move |conn| async move {
            let (mut send, mut recv) = conn.open_bi().await.map_err(conn_err)?;
            // The peer may stop our half first; that is not the outcome
            // under test.
            let _ = send.write_all(&data).await;
            let _ = send.finish();
            loop {
                match recv.read_chunk(64 * 1024, true).await {
                    Ok(Some(_)) => continue,
                    Ok(None) => return Err(invalid("stream finished, not reset".into())),
                    Err(ReadError::Reset(code)) => return Ok(code.into_inner()),
                    Err(e) => return Err(e.into()),
                }
            }
        })
        .await
    }

    /// Accepts the next uni stream the server opens and reads it to its end.
    pub async fn accept_uni(&self) -> io::Result<Vec<u8>> {
        self.run(|conn| async move {
            let mut recv = conn.accept_uni().await.map_err(conn_err)?;
            read_all(&mut recv).await
        })
        .await
    }

    /// Accepts the next bi stream the server opens, echoes it to its end
    /// and finishes; returns how many bytes it echoed.
    pub async fn accept_bi_echo(&self) -> io::Result<usize> {
        self.run(|conn| async move {
            let (mut send, mut recv) = conn.accept_bi().await.map_err(conn_err)?;
            let mut total = 0;
            while let Some(chunk) = recv.read_chunk(64 * 1024, true).await? {
                total += chunk.bytes.len();
                send.write_chunk(chunk.bytes).await?;
            }
            send.finish().map_err(io::Error::other)?;
            let _ = send.stopped().await;
            Ok(total)
        })
        .await
    }

    /// Closes the connection with `code` and `reason` and waits (bounded)
    /// until the CONNECTION_CLOSE left.
    pub async fn close(&self, code: u32, reason: &str) {
        self.conn.close(VarInt::from_u32(code), reason.as_bytes());
        let endpoint = self.endpoint.clone();
        let _ = self
            .run(|_| async move {
                endpoint.wait_idle().await;
                Ok(())
            })
            .await;
    }

    /// Waits until the connection ends and says how.
    pub async fn closed_reason(&self) -> Closed {
        match self
            .run(|conn| async move { Ok(Closed::from(conn.closed().await)) })
            .await
        {
            Ok(closed) => closed,
            Err(e) => Closed::Other(format!("still open: {e}")),
        }
    }
}

impl Drop for QuinnClient {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            // Never blocks, so dropping the client inside any executor is fine.
            rt.shutdown_background();
        }
    }
}

/// Runs `fut` on `handle`, bounded by [`HANG`] (`TimedOut` past it).
pub async fn spawn_bounded<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    fut: impl Future<Output = io::Result<T>> + Send + 'static,
) -> io::Result<T> {
    let task = handle.spawn(async move {
        match tokio::time::timeout(HANG, fut).await {
            Ok(res) => res,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "quinn peer helper took longer than HANG",
            )),
        }
    });
    task.await.map_err(io::Error::other)?
}

/// Reads `recv` to its end.
async fn read_all(recv: &mut RecvStream) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(chunk) = recv.read_chunk(64 * 1024, true).await? {
        out.extend_from_slice(&chunk.bytes);
    }
    Ok(out)
}

/// A connection error as an `io::Error` whose kind says what happened.
pub fn conn_err(e: quinn::ConnectionError) -> io::Error {
    use quinn::ConnectionError as E;
    let kind = match e {
        E::TimedOut => io::ErrorKind::TimedOut,
        E::ApplicationClosed(_) | E::ConnectionClosed(_) => io::ErrorKind::ConnectionAborted,
        E::Reset => io::ErrorKind::ConnectionReset,
        E::LocallyClosed => io::ErrorKind::NotConnected,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}
