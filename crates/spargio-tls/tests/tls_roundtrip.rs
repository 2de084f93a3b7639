//! Our connector against our acceptor: bytes both ways through each I/O
//! trait family, the peer's chain and ALPN visible, every constructor.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{pki, run_bounded};
use spargio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use spargio::net::TcpListener;
use spargio_tls::rustls::ProtocolVersion;
use spargio_tls::{HandshakeOptions, TlsAcceptor, TlsConnector};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn owned_buffer_echo_both_ways_with_peer_chain_and_alpn() {
    let pki = pki("echo", false);
    let acceptor = TlsAcceptor::from_pem_files(&pki.leaf_file, &pki.key_file)
        .unwrap()
        .with_alpn_protocols(&[b"h2", b"echo/1"]);
    let connector = TlsConnector::with_root_ca_pem_file(&pki.ca_file)
        .unwrap()
        .with_alpn_protocols(&[b"echo/1"]);
    let leaf_der = pki.leaf_der.clone();
    run_bounded(LIMIT, move |handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = handle
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut tls = spargio_tls::accept(&acceptor, tcp).await.unwrap();
                assert_eq!(tls.alpn_protocol(), Some(&b"echo/1"[..]));
                assert_eq!(tls.server_name(), Some("localhost"));
                assert!(tls.peer_certificates().is_none());
                let mut total = 0;
                loop {
                    let (res, buf) = tls.read(Vec::with_capacity(16 * 1024)).await;
                    let n = res.unwrap();
                    if n == 0 {
                        break;
                    }
                    total += n;
                    tls.write_all(buf).await.0.unwrap();
                }
                tls.shutdown().await.unwrap();
                total
            })
            .unwrap();

        let tls = spargio_tls::connect_socket_addr(&connector, &handle, addr, "localhost")
            .await
            .unwrap();
        assert_eq!(tls.alpn_protocol(), Some(&b"echo/1"[..]));
        assert_eq!(tls.protocol_version(), Some(ProtocolVersion::TLSv1_3));
        let chain = tls.peer_certificates().unwrap();
        assert_eq!(chain[0].as_ref(), &leaf_der[..]);
        assert!(format!("{tls:?}").contains("ClientTlsStream"));

        let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 253) as u8).collect();
        let expected = payload.clone();
        let (mut rd, mut wr) = futures_util::io::AsyncReadExt::split(tls);
        let writer = handle
            .spawn_stealable(async move {
                for chunk in payload.chunks(40_000) {
                    futures_util::io::AsyncWriteExt::write_all(&mut wr, chunk)
                        .await
                        .unwrap();
                }
                futures_util::io::AsyncWriteExt::close(&mut wr)
                    .await
                    .unwrap();
            })
            .unwrap();
        let mut echoed = Vec::new();
        futures_util::io::AsyncReadExt::read_to_end(&mut rd, &mut echoed)
            .await
            .unwrap();
        writer.await.unwrap();
        assert_eq!(server.await.unwrap(), expected.len());
        assert!(echoed == expected, "echo differs");
    });
}

#[test]
fn host_name_connect_tls12_and_configs_built_by_hand() {
    let pki = pki("tls12", false);
    let acceptor = TlsAcceptor::from_pem(pki.leaf_pem.as_bytes(), pki.key_pem.as_bytes()).unwrap();
    // A client restricted to TLS 1.2, from a rustls config built by hand.
    let mut roots = spargio_tls::rustls::RootCertStore::empty();
    roots.add(pki.ca_der.clone().into()).unwrap();
    let provider = Arc::new(spargio_tls::rustls::crypto::ring::default_provider());
    let config = spargio_tls::rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&spargio_tls::rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = TlsConnector::from(Arc::new(config));
    run_bounded(LIMIT, move |handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = handle
            .spawn_stealable(async move {
                for _ in 0..2 {
                    let (tcp, _) = listener.accept().await.unwrap();
                    let mut tls = acceptor.accept(tcp).await.unwrap();
                    assert_eq!(tls.protocol_version(), Some(ProtocolVersion::TLSv1_2));
                    let mut line = [0u8; 4];
                    futures_util::io::AsyncReadExt::read_exact(&mut tls, &mut line)
                        .await
                        .unwrap();
                    futures_util::io::AsyncWriteExt::write_all(&mut tls, &line)
                        .await
                        .unwrap();
                    futures_util::io::AsyncWriteExt::close(&mut tls)
                        .await
                        .unwrap();
                }
            })
            .unwrap();

        // By host name (resolved on the blocking pool), with a timeout.
        let options = HandshakeOptions::default().with_timeout(Duration::from_secs(10));
        let mut tls = spargio_tls::connect_with_options(
            &connector,
            &handle,
            ("localhost", port),
            "localhost",
            options,
        )
        .await
        .unwrap();
        assert_eq!(tls.protocol_version(), Some(ProtocolVersion::TLSv1_2));
        tls.write_all(&b"ping"[..]).await.0.unwrap();
        let (res, got) = tls.read_to_end(Vec::new()).await;
        res.unwrap();
        assert_eq!(got, b"ping");

        // Over a TCP stream connected by the caller, by IP address name.
        let tcp =
            spargio::net::TcpStream::connect_socket_addr(&handle, ([127, 0, 0, 1], port).into())
                .await
                .unwrap();
        let mut tls = connector.connect_stream("127.0.0.1", tcp).await.unwrap();
        assert_eq!(tls.get_ref().peer_addr().unwrap().port(), port);
        tls.write_all(&b"pong"[..]).await.0.unwrap();
        let (res, got) = tls.read_to_end(Vec::new()).await;
        res.unwrap();
        assert_eq!(got, b"pong");
        server.await.unwrap();
    });
}

#[test]
fn webpki_roots_connector_builds() {
    let connector = TlsConnector::with_webpki_roots();
    assert!(connector.config().alpn_protocols.is_empty());
    let connector = connector.with_alpn_protocols(&[b"h2", b"http/1.1"]);
    assert_eq!(
        connector.config().alpn_protocols,
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    );
}
