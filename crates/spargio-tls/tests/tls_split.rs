//! `split`: a TLS stream read and written at once from two tasks.
//!
//! Socket buffers are shrunk to 16 KiB on both ends, so 4 MiB cannot sit in
//! the kernel: every byte moves only while the peer reads, and a half that
//! held up the other (a lock kept across a wait, a lost wakeup) shows as a
//! hang, which the bounded runner turns into a failed test.

use std::ffi::c_void;
use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::Duration;

use futures_util::{AsyncReadExt as _, AsyncWriteExt as _};
use spargio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use spargio::net::{TcpListener, TcpStream};
use spargio::{Runtime, RuntimeHandle};
use spargio_tls::{
    ClientTlsStream, ServerTlsStream, TlsAcceptor, TlsConnector, TlsReadHalf, TlsWriteHalf,
};

/// Generous bound for "this must not hang"; never a performance assertion.
const HANG: Duration = Duration::from_secs(60);

/// Bytes each way.
const LEN: usize = 4 << 20;

/// Runs `f(handle)` as a stealable task on a fresh 2-shard runtime (so the
/// halves' tasks can run on different threads); fails the test if it does
/// not finish within `HANG`.
fn run<F, Fut>(f: F) -> Fut::Output
where
    F: FnOnce(RuntimeHandle) -> Fut + Send + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = Runtime::builder().shards(2).build().expect("runtime");
        let handle = rt.handle();
        let task = handle.spawn_stealable(f(handle.clone())).expect("spawn");
        let out = spargio::block_on(task);
        drop(rt);
        let _ = tx.send(out);
    });
    match rx.recv_timeout(HANG) {
        Ok(Ok(out)) => out,
        Ok(Err(err)) => panic!("test task failed: {err:?}"),
        Err(_) => panic!("test hung: a half held up the other"),
    }
}

/// `len` bytes that a dropped, repeated or reordered chunk would change;
/// `seed` tells the two directions apart.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 13) as u8 ^ seed)
        .collect()
}

/// Byte count and FNV-1a over the bytes, in order.
#[derive(Debug, Default, PartialEq, Eq)]
struct Sum {
    len: usize,
    fnv: u64,
}

impl Sum {
    fn new() -> Sum {
        Sum {
            len: 0,
            fnv: 0xcbf2_9ce4_8422_2325,
        }
    }

    fn add(&mut self, bytes: &[u8]) {
        self.len += bytes.len();
        for &b in bytes {
            self.fnv = (self.fnv ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn of(bytes: &[u8]) -> Sum {
        let mut sum = Sum::new();
        sum.add(bytes);
        sum
    }
}

// setsockopt from the C library std already links (no `libc` crate for one
// call); the option numbers are Linux's (asm-generic, x86 and arm).
extern "C" {
    fn setsockopt(fd: i32, level: i32, name: i32, value: *const c_void, len: u32) -> i32;
}
const SOL_SOCKET: i32 = 1;
const SO_SNDBUF: i32 = 7;
const SO_RCVBUF: i32 = 8;

/// Small kernel buffers (256 KiB, which Linux doubles; still above the
/// loopback MSS, below which TCP stalls on window probes): the peer must
/// read for 4 MiB to move. `TCP_NODELAY` too: small records go out at once.
fn shrink_buffers(tcp: &TcpStream) {
    tcp.set_nodelay(true).unwrap();
    let size: i32 = 256 << 10;
    for opt in [SO_SNDBUF, SO_RCVBUF] {
        // SAFETY: a valid socket fd; `size` outlives the call and its
        // length is passed with it.
        let rc = unsafe {
            setsockopt(
                tcp.as_raw_fd(),
                SOL_SOCKET,
                opt,
                (&size as *const i32).cast(),
                std::mem::size_of::<i32>() as u32,
            )
        };
        assert_eq!(rc, 0, "setsockopt: {}", io::Error::last_os_error());
    }
}

/// A connected TLS pair over loopback with shrunk socket buffers.
async fn tls_pair(handle: &RuntimeHandle) -> (ClientTlsStream, ServerTlsStream) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_pem, key_pem) = (cert.cert.pem(), cert.signing_key.serialize_pem());
    let acceptor = TlsAcceptor::from_pem(cert_pem.as_bytes(), key_pem.as_bytes()).unwrap();
    let connector = TlsConnector::with_root_ca_pem(cert_pem.as_bytes()).unwrap();
    let listener = TcpListener::bind(handle, "127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = handle
        .spawn_stealable(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            shrink_buffers(&tcp);
            acceptor.accept(tcp).await.unwrap()
        })
        .unwrap();
    let tcp = TcpStream::connect_socket_addr(handle, addr).await.unwrap();
    shrink_buffers(&tcp);
    let client = connector.connect_stream("localhost", tcp).await.unwrap();
    (client, server.await.unwrap())
}

/// Writes `data` through spargio's owned-buffer API in uneven chunks,
/// then shuts down (close_notify).
async fn write_owned<W: AsyncWrite>(w: &mut W, data: &[u8]) -> io::Result<()> {
    let mut off = 0;
    let mut step = 1000;
    while off < data.len() {
        let n = step.min(data.len() - off);
        w.write_all(data[off..off + n].to_vec()).await.0?;
        off += n;
        step = step * 3 % 70_001 + 1;
    }
    w.shutdown().await
}

/// Reads to end of stream through spargio's owned-buffer API.
async fn read_owned<R: AsyncRead>(r: &mut R) -> io::Result<Sum> {
    let mut sum = Sum::new();
    let mut buf = Vec::with_capacity(50_000);
    loop {
        buf.clear();
        let (res, b) = r.read(buf).await;
        buf = b;
        if res? == 0 {
            return Ok(sum);
        }
        sum.add(&buf);
    }
}

/// Writes `data` through `futures_io` in uneven chunks, then closes.
async fn write_futures<W: futures_io::AsyncWrite + Unpin>(
    w: &mut W,
    data: &[u8],
) -> io::Result<()> {
    for chunk in data.chunks(33_333) {
        w.write_all(chunk).await?;
    }
    w.close().await
}

/// Reads to end of stream through `futures_io`.
async fn read_futures<R: futures_io::AsyncRead + Unpin>(r: &mut R) -> io::Result<Sum> {
    let mut sum = Sum::new();
    let mut buf = vec![0u8; 20_000];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok(sum);
        }
        sum.add(&buf[..n]);
    }
}

#[test]
fn halves_are_send_and_owned() {
    fn send<T: Send + 'static>() {}
    send::<TlsReadHalf<ClientTlsStream>>();
    send::<TlsWriteHalf<ClientTlsStream>>();
    send::<TlsReadHalf<ServerTlsStream>>();
    send::<TlsWriteHalf<ServerTlsStream>>();
}

#[test]
fn full_duplex_4_mib_each_way_both_sides_split() {
    run(|handle| async move {
        let (client, server) = tls_pair(&handle).await;
        let (up, down) = (pattern(LEN, 0x5a), pattern(LEN, 0xa5));
        let (want_up, want_down) = (Sum::of(&up), Sum::of(&down));

        // Four tasks at once: each side writes 4 MiB while reading the
        // other's 4 MiB. The client uses the owned-buffer API, the server
        // `futures_io`.
        let (mut c_read, mut c_write) = client.split();
        let (mut s_read, mut s_write) = server.split();
        let c_writer = handle
            .spawn_stealable(async move {
                write_owned(&mut c_write, &up).await.unwrap();
                c_write
            })
            .unwrap();
        let c_reader = handle
            .spawn_stealable(async move {
                let sum = read_owned(&mut c_read).await.unwrap();
                (sum, c_read)
            })
            .unwrap();
        let s_writer = handle
            .spawn_stealable(async move {
                write_futures(&mut s_write, &down).await.unwrap();
                s_write
            })
            .unwrap();
        let s_reader = handle
            .spawn_stealable(async move {
                let sum = read_futures(&mut s_read).await.unwrap();
                (sum, s_read)
            })
            .unwrap();

        let (got_down, c_read) = c_reader.await.unwrap();
        let (got_up, s_read) = s_reader.await.unwrap();
        assert_eq!(got_up, want_up, "client -> server");
        assert_eq!(got_down, want_down, "server -> client");

        // The halves go back together.
        let client = c_read.reunite(c_writer.await.unwrap()).unwrap();
        let server = s_writer.await.unwrap().reunite(s_read).unwrap();
        assert_eq!(client.alpn_protocol(), None);
        assert_eq!(server.server_name(), Some("localhost"));
    });
}

#[test]
fn a_read_waiting_for_the_peer_does_not_hold_up_a_write() {
    run(|handle| async move {
        let (client, mut server) = tls_pair(&handle).await;
        let (up, down) = (pattern(LEN, 1), pattern(LEN, 2));
        let (want_up, want_down) = (Sum::of(&up), Sum::of(&down));

        // The server sends nothing until it has all 4 MiB, so the client's
        // read waits on the socket the whole time its write runs.
        let server = handle
            .spawn_stealable(async move {
                let got = read_owned(&mut server).await.unwrap();
                write_owned(&mut server, &down).await.unwrap();
                got
            })
            .unwrap();
        let (mut reader, mut writer) = client.split();
        let reading = handle
            .spawn_stealable(async move { read_owned(&mut reader).await.unwrap() })
            .unwrap();
        write_owned(&mut writer, &up).await.unwrap();

        assert_eq!(server.await.unwrap(), want_up);
        assert_eq!(reading.await.unwrap(), want_down);
    });
}

#[test]
fn a_write_waiting_for_the_peer_does_not_hold_up_a_read() {
    run(|handle| async move {
        let (client, mut server) = tls_pair(&handle).await;
        let (up, down) = (pattern(LEN, 3), pattern(LEN, 4));
        let (want_up, want_down) = (Sum::of(&up), Sum::of(&down));

        // The server writes all 4 MiB before it reads a byte, so the
        // client's write waits for socket room until the client's read
        // has taken everything the server sends.
        let server = handle
            .spawn_stealable(async move {
                write_futures(&mut server, &down).await.unwrap();
                read_futures(&mut server).await.unwrap()
            })
            .unwrap();
        let (mut reader, mut writer) = client.split();
        let writing = handle
            .spawn_stealable(async move { write_futures(&mut writer, &up).await.unwrap() })
            .unwrap();
        assert_eq!(read_futures(&mut reader).await.unwrap(), want_down);

        writing.await.unwrap();
        assert_eq!(server.await.unwrap(), want_up);
    });
}

#[test]
fn reunite_refuses_halves_of_different_streams() {
    run(|handle| async move {
        let (a, _a_peer) = tls_pair(&handle).await;
        let (b, _b_peer) = tls_pair(&handle).await;
        let (a_read, a_write) = a.split();
        let (b_read, b_write) = b.split();
        assert!(a_read.is_pair_of(&a_write));
        assert!(!a_read.is_pair_of(&b_write));
        let err = a_read.reunite(b_write).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tried to reunite halves of different TLS streams"
        );
        let (a_read, b_write) = (err.0, err.1);
        a_read.reunite(a_write).unwrap();
        b_write.reunite(b_read).unwrap();
    });
}

/// rustls's read path can poll the send in flight under the write half
/// (a failed record is answered with an alert, sent through it). The
/// writer waiting on that send must still be woken when it ends.
#[test]
fn a_failed_read_does_not_strand_a_waiting_write() {
    run(|handle| async move {
        let (client, server) = tls_pair(&handle).await;
        let (mut reader, mut writer) = client.split();
        // The server never reads: the writer ends up waiting for room.
        let writing = handle
            .spawn_stealable(async move {
                let chunk = vec![7u8; 64 << 10];
                loop {
                    if let Err(err) =
                        futures_util::AsyncWriteExt::write_all(&mut writer, &chunk).await
                    {
                        return err;
                    }
                }
            })
            .unwrap();
        // Coverage only, never asserted: time for the writer to fill the
        // socket and wait, so that the alert below meets its send in flight.
        spargio::sleep(Duration::from_millis(300)).await;

        // Not a TLS record the client can decrypt, sent under the TLS layer.
        let garbage = [23u8, 3, 3, 0, 32]
            .into_iter()
            .chain([0xee; 32])
            .collect::<Vec<u8>>();
        server.get_ref().write_all(&garbage).await.unwrap();
        let err = read_futures(&mut reader).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err:?}");

        // Closing with unread bytes resets the connection: the writer's
        // send fails, and the writer must hear of it (woken, it reports
        // the reset, or the session's failure if it polls rustls first).
        drop(server);
        let err = writing.await.unwrap();
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::InvalidData
            ),
            "{err:?}"
        );
    });
}
