//! `WsStream::split`: receiving in one task while another sends, over
//! `ws://` and `wss://`.
//!
//! Socket buffers are shrunk to 256 KiB on both ends, so 4 MiB cannot sit
//! in the kernel: messages move only while the peer receives, and a half
//! that held up the other shows as a hang, which the bounded runner turns
//! into a failed test.

use std::ffi::c_void;
use std::io;
use std::os::fd::AsRawFd;

use spargio::net::{TcpListener, TcpStream};
use spargio::RuntimeHandle;
use spargio_tls::{TlsAcceptor, TlsConnector};
use spargio_ws::{
    CloseCode, Message, WsConnector, WsReceiver, WsReceiverExt, WsSender, WsSenderExt, WsStream,
    WsStreamExt, WsTransport,
};

mod common;
use common::run;

/// Bytes each way, in messages of `MSG` bytes.
const LEN: usize = 4 << 20;
const MSG: usize = 64 << 10;

/// A self-signed certificate for `localhost` (valid until 2126) and its
/// key, made once with the `openssl` CLI so that no test needs it.
const CERT_PEM: &str = "\
-----BEGIN CERTIFICATE-----\n\
MIIBtzCCAVygAwIBAgIUW2pa5KTBUsOfJvHHp+fCEeAokNgwCgYIKoZIzj0EAwIw\n\
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyNTE2NDkxM1oYDzIxMjYxMTAx\n\
MTY0OTEzWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO\n\
PQMBBwNCAATS6lVSzc7XwzQIHyUVZ9HzNNSsPFvE5LhfZcX89WvZWfWwoleR5ZjY\n\
dRtMgvEVcdeVThDllgARHvN/AHUC2VV4o4GJMIGGMB0GA1UdDgQWBBSTILl1nTZn\n\
CEBr2kXR3oPeNdmFhzAfBgNVHSMEGDAWgBSTILl1nTZnCEBr2kXR3oPeNdmFhzAU\n\
BgNVHREEDTALgglsb2NhbGhvc3QwDAYDVR0TAQH/BAIwADALBgNVHQ8EBAMCB4Aw\n\
EwYDVR0lBAwwCgYIKwYBBQUHAwEwCgYIKoZIzj0EAwIDSQAwRgIhAJC5BiZ9kxzQ\n\
ui+Zsc+tPLtSHNIJn7BbFsAWANmve+CWAiEA6d2aj8erRCV9/gohtONNDCcqtia3\n\
ZIzmob3uf8QPp2g=\n\
-----END CERTIFICATE-----\n\
";
const KEY_PEM: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg6AWE22kFSjfvi6bi\n\
Vlk8oA43JuA8C+rhRiUV8rO7L1ihRANCAATS6lVSzc7XwzQIHyUVZ9HzNNSsPFvE\n\
5LhfZcX89WvZWfWwoleR5ZjYdRtMgvEVcdeVThDllgARHvN/AHUC2VV4\n\
-----END PRIVATE KEY-----\n\
";

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
/// receive for 4 MiB to move.
fn shrink_buffers(tcp: &TcpStream) {
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

/// A connected client and server WebSocket, over TLS if `tls`.
async fn ws_pair(handle: &RuntimeHandle, tls: bool) -> (WsStream, WsStream) {
    let listener = TcpListener::bind(handle, "127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = handle
        .spawn_stealable(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            shrink_buffers(&tcp);
            let transport = if tls {
                let acceptor =
                    TlsAcceptor::from_pem(CERT_PEM.as_bytes(), KEY_PEM.as_bytes()).unwrap();
                WsTransport::from(acceptor.accept(tcp).await.unwrap())
            } else {
                WsTransport::from(tcp)
            };
            spargio_ws::accept(transport).await.unwrap()
        })
        .unwrap();
    let tcp = TcpStream::connect_socket_addr(handle, addr).await.unwrap();
    shrink_buffers(&tcp);
    let (transport, url) = if tls {
        let connector = TlsConnector::with_root_ca_pem(CERT_PEM.as_bytes()).unwrap();
        let stream = connector.connect_stream("localhost", tcp).await.unwrap();
        (WsTransport::from(stream), "wss://localhost/")
    } else {
        (WsTransport::from(tcp), "ws://localhost/")
    };
    assert_eq!(transport.is_tls(), tls);
    let (client, _) = WsConnector::new().handshake(transport, url).await.unwrap();
    (client, server.await.unwrap())
}

/// `len` bytes that a dropped, repeated or reordered message would change;
/// `seed` tells the two directions apart.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 13) as u8 ^ seed)
        .collect()
}

/// Byte count and FNV-1a over the bytes, in order.
#[derive(Debug, PartialEq, Eq)]
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

/// Sends `data` as binary messages, then a text "done".
async fn send_all(sender: &mut WsSender, data: &[u8]) {
    for chunk in data.chunks(MSG) {
        sender
            .send_message(Message::binary(chunk.to_vec()))
            .await
            .unwrap();
    }
    sender.send_message(Message::text("done")).await.unwrap();
}

/// Receives binary messages until a text "done".
async fn receive_all(receiver: &mut WsReceiver) -> Sum {
    let mut sum = Sum::new();
    loop {
        match receiver.recv().await.unwrap() {
            Some(Message::Binary(bytes)) => sum.add(&bytes),
            Some(Message::Text(text)) if text.as_str() == "done" => return sum,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// The closing handshake over the reunited streams.
async fn close(handle: &RuntimeHandle, mut client: WsStream, mut server: WsStream) {
    let server = handle
        .spawn_stealable(async move { while server.recv().await.unwrap().is_some() {} })
        .unwrap();
    let reply = client.close_with(CloseCode::Normal, "bye").await.unwrap();
    assert_eq!(reply.map(|f| f.code), Some(CloseCode::Normal));
    server.await.unwrap();
}

/// Both sides split; four tasks: each side sends 4 MiB while it receives
/// the other's 4 MiB.
fn full_duplex(tls: bool) {
    run(move |handle| async move {
        let (client, server) = ws_pair(&handle, tls).await;
        let (up, down) = (pattern(LEN, 0x5a), pattern(LEN, 0xa5));
        let (want_up, want_down) = (Sum::of(&up), Sum::of(&down));
        let (mut c_send, mut c_recv) = client.split();
        let (mut s_send, mut s_recv) = server.split();

        let c_sender = handle
            .spawn_stealable(async move {
                send_all(&mut c_send, &up).await;
                c_send
            })
            .unwrap();
        let s_sender = handle
            .spawn_stealable(async move {
                send_all(&mut s_send, &down).await;
                s_send
            })
            .unwrap();
        let c_receiver = handle
            .spawn_stealable(async move { (receive_all(&mut c_recv).await, c_recv) })
            .unwrap();
        let s_receiver = handle
            .spawn_stealable(async move { (receive_all(&mut s_recv).await, s_recv) })
            .unwrap();

        let (got_down, c_recv) = c_receiver.await.unwrap();
        let (got_up, s_recv) = s_receiver.await.unwrap();
        assert_eq!(got_up, want_up, "client -> server");
        assert_eq!(got_down, want_down, "server -> client");

        let client = WsStream::reunite(c_sender.await.unwrap(), c_recv).unwrap();
        let server = WsStream::reunite(s_sender.await.unwrap(), s_recv).unwrap();
        close(&handle, client, server).await;
    });
}

#[test]
fn halves_are_send() {
    fn send<T: Send + 'static>() {}
    send::<WsSender>();
    send::<WsReceiver>();
}

#[test]
fn full_duplex_4_mib_each_way_plain() {
    full_duplex(false);
}

#[test]
fn full_duplex_4_mib_each_way_wss() {
    full_duplex(true);
}

/// The server sends its 4 MiB before it receives anything, so the
/// client's sender waits for room until the client's receiver has taken
/// everything the server sends.
#[test]
fn a_send_waiting_for_the_peer_does_not_hold_up_a_receive_wss() {
    run(|handle| async move {
        let (client, server) = ws_pair(&handle, true).await;
        let (up, down) = (pattern(LEN, 3), pattern(LEN, 4));
        let (want_up, want_down) = (Sum::of(&up), Sum::of(&down));
        let server = handle
            .spawn_stealable(async move {
                let (mut send, mut recv) = server.split();
                send_all(&mut send, &down).await;
                let got = receive_all(&mut recv).await;
                (got, WsStream::reunite(send, recv).unwrap())
            })
            .unwrap();
        let (mut c_send, mut c_recv) = client.split();
        let sending = handle
            .spawn_stealable(async move {
                send_all(&mut c_send, &up).await;
                c_send
            })
            .unwrap();
        assert_eq!(receive_all(&mut c_recv).await, want_down);
        let c_send = sending.await.unwrap();
        let (got_up, server) = server.await.unwrap();
        assert_eq!(got_up, want_up);
        close(&handle, WsStream::reunite(c_send, c_recv).unwrap(), server).await;
    });
}

/// The server sends nothing until it has all 4 MiB, so the client's
/// receiver waits on the socket the whole time its sender runs.
#[test]
fn a_receive_waiting_for_the_peer_does_not_hold_up_a_send_wss() {
    run(|handle| async move {
        let (client, mut server) = ws_pair(&handle, true).await;
        let (up, down) = (pattern(LEN, 1), pattern(LEN, 2));
        let (want_up, want_down) = (Sum::of(&up), Sum::of(&down));
        let (mut c_send, mut c_recv) = client.split();
        let receiving = handle
            .spawn_stealable(async move { (receive_all(&mut c_recv).await, c_recv) })
            .unwrap();
        let server = handle
            .spawn_stealable(async move {
                let mut got = Sum::new();
                loop {
                    match server.recv().await.unwrap() {
                        Some(Message::Binary(bytes)) => got.add(&bytes),
                        Some(Message::Text(t)) if t.as_str() == "done" => break,
                        other => panic!("unexpected {other:?}"),
                    }
                }
                for chunk in down.chunks(MSG) {
                    server
                        .send_message(Message::binary(chunk.to_vec()))
                        .await
                        .unwrap();
                }
                server.send_message(Message::text("done")).await.unwrap();
                (got, server)
            })
            .unwrap();
        send_all(&mut c_send, &up).await;
        let (got_down, c_recv) = receiving.await.unwrap();
        let (got_up, server) = server.await.unwrap();
        assert_eq!(got_up, want_up);
        assert_eq!(got_down, want_down);
        close(&handle, WsStream::reunite(c_send, c_recv).unwrap(), server).await;
    });
}
